//! Running a model to its verdicts: stateright explores the state space (DFS with symmetry
//! reduction by default), then every violated `always` property gets a shortest counterexample
//! from [`crate::shortest`].

use crate::presets::Outcome;
use crate::shortest::{shortest_path, Trace};
use crate::symmetry::{representative, MAX_SYMMETRIC_BROKERS};
use crate::{Check, IsrModel};
use stateright::{Checker, HasDiscoveries, Model};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// The search strategy of stateright.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Search {
    /// Depth-first.
    Dfs,
    /// Depth-first with symmetry reduction over broker renamings.
    DfsSymmetric,
    /// Breadth-first (stateright ignores symmetry here).
    Bfs,
}

/// Counts while a search runs.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    pub states: usize,
    pub unique: usize,
    pub depth: usize,
    pub elapsed: Duration,
}

/// One check's verdict.
#[derive(Clone, Debug)]
pub struct Verdict {
    pub check: Check,
    /// `None`: not asserted.
    pub expected: Option<Outcome>,
    /// `None`: not decided, because the search stopped once the expected failures were found.
    pub found: Option<Outcome>,
    /// For a violated `always` property: a shortest path to a violating state.
    pub counterexample: Option<Trace>,
}

impl Verdict {
    pub fn as_expected(&self) -> bool {
        self.expected.is_none() || self.expected == self.found
    }
}

/// The result of a run.
#[derive(Clone, Debug)]
pub struct Run {
    pub search: Search,
    /// Whether symmetry reduction was applied.
    pub symmetry: bool,
    pub states: usize,
    pub unique: usize,
    pub depth: usize,
    /// Time stateright took to explore the state space.
    pub elapsed: Duration,
    /// Wall time including the searches for shortest counterexamples.
    pub total: Duration,
    pub verdicts: Vec<Verdict>,
}

impl Run {
    /// Whether every asserted verdict is the expected one.
    pub fn as_expected(&self) -> bool {
        self.verdicts.iter().all(Verdict::as_expected)
    }
}

/// Explores `model` and compares each verdict with `expected`: exhaustively, or — when
/// `stop_at` names properties — until each of them has failed. `progress` is called a few times
/// a second while stateright runs.
pub fn run(
    model: &IsrModel,
    expected: impl Fn(Check) -> Option<Outcome>,
    stop_at: Option<BTreeSet<&'static str>>,
    search: Search,
    threads: usize,
    mut progress: impl FnMut(Progress),
) -> Run {
    let start = Instant::now();
    let symmetry =
        search == Search::DfsSymmetric && model.bounds.replicas as usize <= MAX_SYMMETRIC_BROKERS;
    let mut builder = model.clone().checker().threads(threads.max(1));
    if symmetry {
        builder = builder.symmetry_fn(representative);
    }
    if let Some(names) = &stop_at {
        builder = builder.finish_when(HasDiscoveries::AllOf(names.clone()));
    }
    let (states, unique, depth, discoveries) = match search {
        Search::Bfs => finish(builder.spawn_bfs(), start, &mut progress),
        Search::Dfs | Search::DfsSymmetric => finish(builder.spawn_dfs(), start, &mut progress),
    };
    let elapsed = start.elapsed();
    let stopped = stop_at.is_some_and(|names| names.iter().all(|n| discoveries.contains(n)));
    let verdicts = Check::all()
        .into_iter()
        .map(|check| {
            let discovered = discoveries.contains(&check.name());
            let (found, counterexample) = match check {
                Check::Always(p) if discovered => (
                    Some(Outcome::Fails),
                    shortest_path(model, symmetry, |c| c.check(p).is_err()),
                ),
                Check::Sometimes(_) if discovered => (Some(Outcome::Holds), None),
                _ if stopped => (None, None),
                Check::Always(_) => (Some(Outcome::Holds), None),
                Check::Sometimes(_) => (Some(Outcome::Fails), None),
            };
            Verdict {
                check,
                expected: expected(check),
                found,
                counterexample,
            }
        })
        .collect();
    Run {
        search,
        symmetry,
        states,
        unique,
        depth,
        elapsed,
        total: start.elapsed(),
        verdicts,
    }
}

/// Waits for a checker, reporting progress; returns its counts and the names of the
/// properties with discoveries.
fn finish<C: Checker<IsrModel>>(
    checker: C,
    start: Instant,
    progress: &mut impl FnMut(Progress),
) -> (usize, usize, usize, Vec<&'static str>) {
    while !checker.is_done() {
        std::thread::sleep(Duration::from_millis(100));
        progress(Progress {
            states: checker.state_count(),
            unique: checker.unique_state_count(),
            depth: checker.max_depth(),
            elapsed: start.elapsed(),
        });
    }
    let checker = checker.join();
    let names = checker.discoveries().into_keys().collect();
    (
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth(),
        names,
    )
}
