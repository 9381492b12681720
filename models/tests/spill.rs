//! A visited set that spills to disk changes nothing but where the fingerprints are: presets
//! checked with a memory limit small enough to flush the set to disk many times give the same
//! unique-state counts, verdicts and counterexample lengths as in memory, depth-first and
//! breadth-first. Run in release.

use isr_models::check::{run_with, symmetry_pays, Options, Run, Search};
use isr_models::engine::budget::Budget;
use isr_models::engine::Limits;
use isr_models::presets::{Outcome, Preset};
use isr_models::Check;
use std::sync::Arc;

/// Checks preset `name` with `search`, within `limit` bytes for the visited set if given; the
/// budget, to read what was spilled.
fn check(name: &str, search: Search, limit: Option<usize>) -> (Run, Arc<Budget>) {
    let p = Preset::find(name).expect("preset exists");
    let budget = Budget::new(limit.unwrap_or(usize::MAX), std::env::temp_dir());
    let options = Options {
        search,
        symmetry: symmetry_pays(&p.bounds),
        threads: 2,
        limits: Limits::default().with_memory(Arc::clone(&budget)),
    };
    let run = run_with(&p.model(), |c| p.expected(c), p.stop_at(), options, |_| {});
    (run, budget)
}

fn verdicts(r: &Run) -> Vec<(Check, Option<Outcome>, Option<usize>)> {
    r.verdicts
        .iter()
        .map(|v| (v.check, v.found, v.counterexample.as_ref().map(|t| t.len())))
        .collect()
}

/// 256 KiB: a table of 32,768 slots, flushed every twenty thousand fingerprints or so.
const SMALL: usize = 256 << 10;

#[test]
fn an_exhaustive_search_that_spills_finds_what_one_in_memory_does() {
    for search in [Search::Dfs, Search::Bfs] {
        let (memory, budget) = check("safe", search, None);
        assert_eq!(budget.spilled().merges, 0, "{search:?}: no limit, no spill");
        let (spilling, budget) = check("safe", search, Some(SMALL));
        assert!(budget.take_error().is_none(), "{search:?}");
        let spilled = budget.spilled();
        eprintln!("{search:?}: {} unique, {spilled:?}", spilling.unique);
        assert!(spilled.merges >= 5, "{search:?}: {spilled:?}");
        assert!(spilled.fingerprints * 2 > spilling.unique, "{search:?}");
        assert_eq!(spilling.unique, memory.unique, "{search:?}");
        assert_eq!(spilling.states, memory.states, "{search:?}");
        assert_eq!(verdicts(&spilling), verdicts(&memory), "{search:?}");
        assert!(spilling.as_expected(), "{search:?}");
    }
}

#[test]
fn a_bug_preset_that_spills_finds_the_same_shortest_counterexample() {
    let (memory, _) = check("kip279", Search::Bfs, None);
    let (spilling, budget) = check("kip279", Search::Bfs, Some(SMALL));
    assert!(budget.take_error().is_none());
    assert!(budget.spilled().merges >= 5, "{:?}", budget.spilled());
    assert!(spilling.as_expected());
    assert_eq!(verdicts(&spilling), verdicts(&memory));
    assert_eq!(spilling.unique, memory.unique);
}
