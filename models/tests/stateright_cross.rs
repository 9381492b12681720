//! The engine explores stateright's state space. isr-models' own search engine claims to
//! explore exactly the states stateright would from the same `Model` (initial states,
//! `actions`, `next_state`, `within_boundary`); here stateright's own breadth-first checker runs
//! on two small models and must find as many unique states as the engine (symmetry off) and the
//! same verdict for every property and guard. Run in release.

use isr::sim::Bounds;
use isr_models::check::{run, Search};
use isr_models::presets::{Outcome, Preset};
use isr_models::{Check, IsrModel};
use stateright::{Checker, Model};

/// Preset `name` at small bounds (two brokers, one record, max epoch 2, one clean crash), with
/// `more` applied to them.
fn small(name: &str, more: impl FnOnce(&mut Bounds)) -> IsrModel {
    let p = Preset::find(name).expect("preset exists");
    let mut bounds = Bounds {
        replicas: 2,
        records: 1,
        max_leader_epoch: 2,
        clean_crashes: 1,
        unclean_crashes: 0,
        ..p.bounds.clone()
    };
    more(&mut bounds);
    IsrModel::new(p.config(), bounds, 2)
}

fn same_state_space_and_verdicts(model: IsrModel) {
    let engine = run(&model, |_| None, None, Search::Bfs, false, 2, |_| {});
    let stateright = model.clone().checker().threads(2).spawn_bfs().join();
    assert!(stateright.is_done());
    assert_eq!(
        stateright.unique_state_count(),
        engine.unique,
        "unique states: stateright's checker against the engine's"
    );
    for verdict in &engine.verdicts {
        // stateright discovers a counterexample of an `always` property and an example of a
        // `sometimes` guard; the engine says whether each holds.
        let discovered = stateright.discovery(verdict.check.name()).is_some();
        let holds = if verdict.check.is_always() {
            !discovered
        } else {
            discovered
        };
        let found = if holds {
            Outcome::Holds
        } else {
            Outcome::Fails
        };
        assert_eq!(verdict.found, Some(found), "{}", verdict.check);
    }
    assert_eq!(engine.verdicts.len(), Check::all().len());
    eprintln!(
        "{} unique states, {} verdicts, alike",
        engine.unique,
        engine.verdicts.len()
    );
}

#[test]
fn stateright_finds_the_engines_states_in_the_safe_protocol() {
    same_state_space_and_verdicts(small("safe", |_| {}));
}

#[test]
fn stateright_finds_the_engines_states_with_an_idempotent_producer_that_retries() {
    same_state_space_and_verdicts(small("idempotent", |_| {}));
}
