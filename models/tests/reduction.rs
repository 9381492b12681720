//! The dead-message reduction changes no verdict: every preset is checked with it and without
//! it (`isr-check check PRESET --no-reduction`: messages their receiver will ignore forever
//! stay in flight), and the verdicts must be the same. The reduction claims that delivering such
//! a message changes nothing but the network; a discard rule that dropped a message which could
//! still act would lose behaviours, and a verdict with them. Run in release.
//!
//! Exhaustive presets are compared on every check. `kip966`, `safe-records` and `partitions`
//! are left out here for time (94.7 M, 123 M and 49.3 M unique states without the reduction,
//! 229 s, 187 s and 97 s on the CI machine; all as expected, see docs/checker.md); bug presets
//! stop at their expected failure, which both runs must find.

use isr_models::check::{run, symmetry_pays, Run, Search};
use isr_models::presets::{Outcome, Preset, PRESETS};
use isr_models::Check;

/// Checks `p` with the reduction or without; exhaustive presets assert nothing, so that every
/// check is decided.
fn check(p: &Preset, reduced: bool) -> Run {
    let mut model = p.model();
    model.bounds.keep_dead = !reduced;
    let (search, stop_at) = if p.exhaustive {
        (Search::Dfs, None)
    } else {
        (Search::Bfs, p.stop_at())
    };
    let expected = |c: Check| if p.exhaustive { None } else { p.expected(c) };
    run(
        &model,
        expected,
        stop_at,
        search,
        symmetry_pays(&p.bounds),
        2,
        |_| {},
    )
}

fn verdicts(r: &Run) -> Vec<(Check, Option<Outcome>)> {
    r.verdicts.iter().map(|v| (v.check, v.found)).collect()
}

#[test]
fn no_verdict_depends_on_the_dead_message_reduction() {
    for p in PRESETS
        .iter()
        .filter(|p| !["kip966", "safe-records", "partitions"].contains(&p.name))
    {
        let reduced = check(p, true);
        let unreduced = check(p, false);
        eprintln!(
            "{}: {} states reduced, {} without the reduction",
            p.name, reduced.unique, unreduced.unique
        );
        assert!(
            unreduced.unique >= reduced.unique,
            "{}: the reduction only removes states",
            p.name
        );
        if p.exhaustive {
            assert_eq!(verdicts(&reduced), verdicts(&unreduced), "{}", p.name);
            for (c, found) in verdicts(&reduced) {
                if let Some(expected) = p.expected(c) {
                    assert_eq!(found, Some(expected), "{}: {c}", p.name);
                }
            }
        } else {
            assert!(reduced.as_expected(), "{} with the reduction", p.name);
            assert!(unreduced.as_expected(), "{} without the reduction", p.name);
        }
    }
}
