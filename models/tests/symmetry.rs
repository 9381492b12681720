//! Symmetry reduction is sound: the model never depends on broker names, on the order of
//! assignments or on how broker epochs are numbered, so canonical states stand for their whole
//! class; and searches with and without the reduction agree on every verdict and every shortest
//! counterexample's length. Run in release.

mod common;

use common::Walk;
use isr::permute::Renaming;
use isr::sim::{Action, Bounds, Cluster};
use isr::{Acks, BrokerId, Property};
use isr_models::check::{run, Run, Search};
use isr_models::presets::Preset;
use isr_models::symmetry::{fingerprint, permutations, representative};
use isr_models::IsrModel;
use std::collections::BTreeSet;

/// The classes of the successors of `c`.
fn successor_classes(model: &IsrModel, c: &Cluster) -> BTreeSet<u64> {
    model
        .enabled(c)
        .iter()
        .map(|a| fingerprint(&representative(&model.step(c, a))))
        .collect()
}

/// States along random walks of a model with every kind of fault, three brokers, one partition
/// or two, and both flush policies' rules: crashes, restarts and re-registrations renumber
/// broker epochs, and elections offer several candidates.
fn sampled_states() -> Vec<(IsrModel, Cluster)> {
    let bounds = Bounds {
        partitions: 1,
        replicas: 3,
        records: 2,
        max_leader_epoch: 4,
        clean_crashes: 1,
        unclean_crashes: 1,
        drops: 1,
        duplicates: 1,
        session_expiries: 1,
        controller_failovers: 2,
        disk_failures: 0,
        deletes: 0,
        compactions: 0,
        acks: Acks::All,
        consumer: true,
        background_flush: false,
        keep_dead: false,
        idempotent: false,
        producer_retries: 0,
        consumers: 0,
        commits: 0,
        consumer_failures: 0,
        max_generation: 3,
        audit_dead: false,
        clock: 0,
        atomic: false,
    };
    let mut out = Vec::new();
    let mut walk = Walk(0x9e37_79b9_7f4a_7c15);
    // (preset, partitions, consumers, clock, atomic): a group's coordinators are renamed with
    // their brokers, and with a clock the messages sent this tick with the network.
    for (name, partitions, consumers, clock, atomic) in [
        ("safe", 1, 0, 0, false),
        ("safe", 2, 0, 0, false),
        ("kip966", 1, 0, 0, false),
        ("kip966", 2, 0, 0, false),
        ("kip966", 1, 0, 0, true),
        ("unclean-election", 1, 0, 0, false),
        ("last-replica-standing", 1, 0, 0, false),
        ("kafka-6082", 1, 0, 0, false),
        ("coordinator-failover", 1, 2, 0, false),
        ("safe-clock", 1, 0, 10, false),
    ] {
        let p = Preset::find(name).expect("preset exists");
        let bounds = Bounds {
            partitions,
            consumers,
            clock,
            atomic,
            commits: 2,
            consumer_failures: 1,
            ..bounds.clone()
        };
        let mut cfg = p.config();
        if atomic {
            isr::sim::atomic(&mut cfg);
        }
        let model = IsrModel::new(cfg, bounds, 6);
        walk.walks(&model, 60, 40, |c| out.push((model.clone(), c.clone())));
    }
    out
}

/// Renaming a state's brokers, reordering its assignments, renumbering its broker epochs:
/// none changes its canonical form, its properties or the classes of its successors. (A
/// renaming alone keeps the renamed assignment order, so it is the reordering that shows the
/// model never consults that order.)
#[test]
fn renamed_states_have_one_canonical_form_and_the_same_successors() {
    let states = sampled_states();
    assert!(states.len() > 5000);
    let mut epochs_renumbered = 0;
    for (model, c) in &states {
        let canonical = representative(c);
        let successors = successor_classes(model, c);
        let epochs = c.broker_epochs();
        let identity: Vec<u32> = (0..3).collect();
        let ranked = c.renamed(&Renaming::new(&identity).ranking_epochs(&epochs));
        if &ranked != c {
            epochs_renumbered += 1;
        }
        // The same state with every assignment listed the other way round.
        let reversed =
            c.renamed(&Renaming::new(&identity).ordering_assignments_by(|b| u32::MAX - b.0));
        assert_ne!(&reversed, c);
        let mut variants = vec![ranked, reversed];
        for perm in permutations(3).iter().skip(1) {
            variants.push(c.renamed(&Renaming::new(perm)));
        }
        for (i, v) in variants.iter().enumerate() {
            let context = || format!("variant {i} of {c:#?}");
            assert_eq!(representative(v), canonical, "{}", context());
            for p in Property::ALL {
                assert_eq!(v.check(p).is_ok(), c.check(p).is_ok(), "{p}: {}", context());
            }
            assert_eq!(successor_classes(model, v), successors, "{}", context());
        }
    }
    assert!(epochs_renumbered > 1000, "{epochs_renumbered}");
}

/// An election offers every candidate, in assignment order.
#[test]
fn an_election_offers_every_candidate() {
    let p = Preset::find("safe").expect("preset exists");
    let model = p.model();
    let c = model.initial();
    let c = model.step(&c, &Action::CleanShutdown(BrokerId(0)));
    let c = model.step(&c, &Action::ControllerShrinkIsr(BrokerId(0)));
    let elections: Vec<Action> = model
        .enabled(&c)
        .into_iter()
        .filter(|a| matches!(a, Action::ControllerElectLeader(_)))
        .collect();
    assert_eq!(
        elections,
        [1, 2].map(|b| Action::ControllerElectLeader(BrokerId(b).into()))
    );
    // Electing either leads to states that are renamings of each other.
    let [one, two] =
        [1, 2].map(|b| model.step(&c, &Action::ControllerElectLeader(BrokerId(b).into())));
    assert_ne!(one, two);
    assert_eq!(representative(&one), representative(&two));
}

/// The checks' outcomes and the counterexample lengths.
fn verdicts(r: &Run) -> Vec<(String, Option<String>, Option<usize>)> {
    r.verdicts
        .iter()
        .map(|v| {
            (
                v.check.to_string(),
                v.found.map(|o| o.to_string()),
                v.counterexample.as_ref().map(|t| t.len()),
            )
        })
        .collect()
}

/// A preset, a change to its bounds, and the ISR changes allowed.
type Case = (&'static str, fn(&mut Bounds), u32);

/// Exhaustive searches, depth- and breadth-first, with and without symmetry reduction, agree
/// on every verdict and every shortest counterexample's length, over the rule sets of several
/// presets at small bounds.
#[test]
fn symmetric_and_plain_searches_agree_on_every_verdict() {
    let cases: [Case; 5] = [
        ("safe", |b| b.clean_crashes = 1, 1),
        ("kip966", |b| b.unclean_crashes = 1, 1),
        ("confirmed-isr-hw", |b| b.clean_crashes = 0, 2),
        ("jepsen-2013", |b| b.clean_crashes = 0, 2),
        ("unclean-election", |b| b.clean_crashes = 2, 2),
    ];
    for (name, adjust, isr_changes) in cases {
        let p = Preset::find(name).expect("preset exists");
        let mut model = p.model();
        model.bounds.consumer = false;
        adjust(&mut model.bounds);
        model.max_isr_changes = isr_changes;
        let mut dfs_unique = None;
        for search in [Search::Dfs, Search::Bfs] {
            let plain = run(&model, |_| None, None, search, false, 2, |_| {});
            let reduced = run(&model, |_| None, None, search, true, 2, |_| {});
            eprintln!(
                "{name} {search:?}: {} unique in {:.2} s plain, {} in {:.2} s reduced",
                plain.unique,
                plain.total.as_secs_f64(),
                reduced.unique,
                reduced.total.as_secs_f64()
            );
            assert!(reduced.symmetry);
            assert_eq!(verdicts(&plain), verdicts(&reduced), "{name} {search:?}");
            // With two brokers the first leader pins both names: little merges.
            assert!(
                model.bounds.replicas < 3 || reduced.unique * 3 < plain.unique * 2,
                "{name} {search:?}: {} of {} states",
                reduced.unique,
                plain.unique
            );
            // Both searches visit every reachable state (class).
            match dfs_unique {
                None => dfs_unique = Some((plain.unique, reduced.unique)),
                Some(d) => assert_eq!(d, (plain.unique, reduced.unique), "{name}"),
            }
        }
    }
}
