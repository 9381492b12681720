//! The refinement check (`isr-check refines`, [`isr_models::refines`]): where the full model
//! refines the atomic-step one it says so, a projection or an atomic model that is wrong makes
//! it fail, and at the presets' CI bounds it finds the shortest behaviours the atomic model
//! leaves out, pinned here (spec/checker.md, "Refinement"). Run in release.

use isr::sim::{waits_for_its_own_step, Action, Bounds, Cluster};
use isr::Property;
use isr_models::presets::Preset;
use isr_models::refines::{atomic_of, check, full_of, refines, steps_of, Options, Refinement, Why};
use isr_models::IsrModel;

fn preset(name: &str) -> &'static Preset {
    Preset::find(name).expect("a preset")
}

fn with(p: &Preset, bounds: impl FnOnce(&mut Bounds)) -> IsrModel {
    let mut model = p.model();
    bounds(&mut model.bounds);
    model
}

/// Under page-cache acknowledgement and without crashes, every full-model step of `kip966` with
/// two records is an atomic step, a stutter, or leads where the atomic model leads in another
/// order; all three occur.
#[test]
fn without_crashes_the_full_model_refines_the_atomic_one() {
    let model = with(preset("kip966"), |b| {
        b.unclean_crashes = 0;
        b.records = 2;
    });
    let r = refines(&model, Options::default());
    assert!(
        r.failure().is_none(),
        "{:?}",
        r.failure().map(|f| &f.trace.steps)
    );
    assert!(r.states > 10_000, "{} states", r.states);
    assert!(
        r.stutters > 0 && r.atomic_steps > 0 && r.reordered > 0,
        "{r:?}"
    );
}

/// A projection that delivers nothing leaves an answer or an AlterPartition in flight, which no
/// atomic state has: the first step that sends one fails.
#[test]
fn a_projection_that_delivers_nothing_fails_at_the_first_answer() {
    let model = with(preset("kip966"), |b| b.unclean_crashes = 0);
    let (full, atomic) = (full_of(&model), atomic_of(&model));
    let r = check(
        &full,
        Cluster::clone,
        &atomic.initial(),
        steps_of(&atomic, |_| true),
        |_, _| None,
        Options::default(),
    );
    let f = r.failure().expect("a failure");
    assert_eq!(f.why, Why::Unreachable);
    assert_eq!(f.trace.len(), 1);
    assert!(f
        .trace
        .last()
        .network
        .iter()
        .any(|e| !waits_for_its_own_step(&e.message)));
}

/// An atomic model without the producer's writes cannot match the full model's first write.
#[test]
fn an_atomic_model_missing_a_step_fails_at_that_step() {
    let model = with(preset("kip966"), |b| b.unclean_crashes = 0);
    let (full, atomic) = (full_of(&model), atomic_of(&model));
    let r = check(
        &full,
        |c| c.settled(&atomic.cfg, &atomic.bounds),
        &atomic.initial(),
        steps_of(&atomic, |a| !matches!(a, Action::LeaderWrite(_))),
        |_, _| None,
        Options::default(),
    );
    let f = r.failure().expect("a failure");
    assert_eq!(f.why, Why::Unreachable);
    assert!(
        matches!(f.trace.steps.last(), Some((Action::LeaderWrite(_), _))),
        "{:?}",
        f.trace.steps
    );
}

/// A projection onto a state that violates nothing hides `disk-full`'s first violation: the
/// check fails there even though every step is a stutter.
#[test]
fn a_projection_that_hides_a_violation_fails() {
    let model = preset("disk-full").model();
    let (full, atomic) = (full_of(&model), atomic_of(&model));
    let initial = atomic.initial();
    let r = check(
        &full,
        |_| initial.clone(),
        &initial,
        steps_of(&atomic, |_| true),
        |_, _| None,
        Options::default(),
    );
    let f = r.failure().expect("a failure");
    assert_eq!(f.why, Why::Hidden(Property::AcknowledgedOnMinIsr));
    assert_eq!(f.trace.len(), 1);
    assert!(f
        .trace
        .last()
        .check(Property::AcknowledgedOnMinIsr)
        .is_err());
}

/// At the CI bounds of `safe`, `kip966` and `safe-records` the full model has behaviours the
/// atomic one leaves out, with these shortest paths (spec/checker.md says why each is one):
/// a leader that handles a Fetch while its own AlterPartition is in flight does not propose the
/// expansion an atomic leader proposes at once, and under `flush=always` an unclean crash loses
/// a write the atomic model flushed in the step that made it.
#[test]
fn the_presets_ci_bounds_show_what_the_atomic_model_leaves_out() {
    for (name, steps, last) in [
        ("safe", 6, "Deliver(b0→b1: Fetch offset=0 e2)"),
        ("kip966", 6, "Deliver(b0→b1: Fetch offset=0 e2)"),
        ("safe-records", 2, "UncleanCrash(b0)"),
    ] {
        let r = refines(&preset(name).model(), Options::default());
        let f = r
            .failure()
            .unwrap_or_else(|| panic!("{name}: refinement holds"));
        assert_eq!(f.why, Why::Unreachable, "{name}");
        assert_eq!(f.trace.len(), steps, "{name}: {:?}", f.trace.steps);
        let (action, _) = f.trace.steps.last().expect("a step");
        assert_eq!(action.to_string(), last, "{name}");
    }
}

/// Asked for all, the check goes on past the first failure over the whole full model and
/// groups the failures by kind, the first of each kind at the end of a shortest path; the
/// first group is the failure the check stops at otherwise.
#[test]
fn asked_for_all_the_check_groups_every_failure_by_kind() {
    let model = with(preset("safe"), |b| b.replicas = 2);
    let first = refines(&model, Options::default());
    let all = refines(
        &model,
        Options {
            all: true,
            ..Options::default()
        },
    );
    assert!(!all.limited);
    let stopped = first.failure().expect("a failure");
    assert!(all.failures.len() > 1, "{:?}", kinds(&all));
    assert_eq!(
        all.failure().map(|f| &f.trace.steps),
        Some(&stopped.trace.steps)
    );
    assert!(all.states > first.states);
    for f in &all.failures {
        assert!(f.count >= 1);
        let (action, _) = f.first.trace.steps.last().expect("a step");
        assert!(
            f.kind
                .starts_with(action.to_string().split('(').next().unwrap_or_default()),
            "{} after {action}",
            f.kind
        );
    }
    let mut lengths: Vec<_> = all.failures.iter().map(|f| f.first.trace.len()).collect();
    let found = lengths.clone();
    lengths.sort_unstable();
    assert_eq!(
        found, lengths,
        "breadth first: kinds are met shortest first"
    );
}

fn kinds(r: &Refinement) -> Vec<(&str, u64)> {
    r.failures
        .iter()
        .map(|f| (f.kind.as_str(), f.count))
        .collect()
}

/// The check keeps whole states, so it stops at a limit of them and says so: refinement is then
/// undecided, neither holding nor failing.
#[test]
fn the_check_stops_at_its_state_limit_undecided() {
    let model = with(preset("kip966"), |b| b.unclean_crashes = 0);
    let whole = refines(&model, Options::default());
    assert!(!whole.limited && whole.failure().is_none());
    let r = refines(
        &model,
        Options {
            max_states: 1_000,
            ..Options::default()
        },
    );
    assert!(r.limited);
    assert!(r.failure().is_none());
    assert!(r.atomic_states + r.states <= 1_000 + 1, "{r:?}");
    assert!(r.states < whole.states);
}
