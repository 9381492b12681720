//! Running a model to its verdicts, with or without symmetry reduction. Depth-first, stateright
//! explores the state space, then one breadth-first search ([`crate::shortest`]) finds a
//! shortest counterexample for every violated `always` property. Breadth-first, that search
//! does both at once: it checks every property on every state and records parent pointers, so
//! the first violation of each property it meets is a shortest counterexample.

use crate::presets::Outcome;
use crate::shortest::{breadth_first, shortest_paths, Counts, Target, Trace};
use crate::symmetry::MAX_SYMMETRIC_BROKERS;
use crate::{Check, IsrModel};
use isr::sim::{Bounds, Cluster};
use stateright::{Checker, HasDiscoveries, Model};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// The search strategy of stateright.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Search {
    /// Depth-first.
    Dfs,
    /// Breadth-first.
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

/// Whether symmetry reduction is worth its cost at these bounds: from three brokers on. With
/// two, the first leader pins both names (the other is never a renaming of it until both have
/// restarted), so canonicalising every state costs more than the few merges save.
pub fn symmetry_pays(bounds: &Bounds) -> bool {
    (3..=MAX_SYMMETRIC_BROKERS).contains(&(bounds.replicas as usize))
}

/// Explores `model` and compares each verdict with `expected`: exhaustively, or — when
/// `stop_at` names properties — until each of them has failed. With `symmetry` (up to
/// [`MAX_SYMMETRIC_BROKERS`] brokers), the search and the shortest counterexamples visit one
/// state per class of broker renamings ([`IsrModel::symmetry`]). `progress` is called a few
/// times a second while stateright runs.
pub fn run(
    model: &IsrModel,
    expected: impl Fn(Check) -> Option<Outcome>,
    stop_at: Option<BTreeSet<&'static str>>,
    search: Search,
    symmetry: bool,
    threads: usize,
    mut progress: impl FnMut(Progress),
) -> Run {
    let start = Instant::now();
    let symmetry = symmetry && model.bounds.replicas as usize <= MAX_SYMMETRIC_BROKERS;
    let checks = Check::all();
    let (counts, discovered, mut traces) = match search {
        Search::Bfs => {
            let targets: Vec<BoxedTarget> = checks.iter().map(|&c| target(c)).collect();
            let targets: Vec<Target> = targets.iter().map(|t| &**t).collect();
            let stop = |found: &[bool]| {
                stop_at.as_ref().is_some_and(|names| {
                    checks
                        .iter()
                        .zip(found)
                        .all(|(c, &f)| f || !names.contains(c.name()))
                })
            };
            let bfs = breadth_first(model, symmetry, &targets, threads, stop, |c| {
                progress(Progress {
                    states: c.states,
                    unique: c.unique,
                    depth: c.depth,
                    elapsed: start.elapsed(),
                })
            });
            let traces: Vec<Option<Trace>> = checks
                .iter()
                .enumerate()
                .map(|(i, c)| match c {
                    Check::Always(_) => bfs.trace(model, i),
                    Check::Sometimes(_) => None,
                })
                .collect();
            let found = (0..checks.len()).map(|i| bfs.found(i)).collect();
            (bfs.counts, found, Some(traces))
        }
        Search::Dfs => {
            let reduced = IsrModel {
                symmetry,
                ..model.clone()
            };
            let mut builder = reduced.checker().threads(threads.max(1));
            if let Some(names) = &stop_at {
                builder = builder.finish_when(HasDiscoveries::AllOf(names.clone()));
            }
            let (counts, names) = finish(builder.spawn_dfs(), start, &mut progress);
            let found = checks.iter().map(|c| names.contains(&c.name())).collect();
            (counts, found, None)
        }
    };
    let elapsed = start.elapsed();
    let discovered: Vec<bool> = discovered;
    if traces.is_none() {
        // One breadth-first search for the shortest counterexamples of every violated property.
        let violated: Vec<usize> = (0..checks.len())
            .filter(|&i| discovered[i] && matches!(checks[i], Check::Always(_)))
            .collect();
        let targets: Vec<BoxedTarget> = violated.iter().map(|&i| target(checks[i])).collect();
        let targets: Vec<Target> = targets.iter().map(|t| &**t).collect();
        let mut found = shortest_paths(model, symmetry, &targets, threads).into_iter();
        let mut all = vec![None; checks.len()];
        for i in violated {
            all[i] = found.next().flatten();
        }
        traces = Some(all);
    }
    let traces = traces.unwrap_or_default();
    let stopped = stop_at.is_some_and(|names| {
        checks
            .iter()
            .zip(&discovered)
            .all(|(c, &f)| f || !names.contains(c.name()))
    });
    let verdicts = checks
        .iter()
        .zip(discovered)
        .zip(traces)
        .map(|((&check, discovered), counterexample)| {
            let found = match check {
                Check::Always(_) if discovered => Some(Outcome::Fails),
                Check::Sometimes(_) if discovered => Some(Outcome::Holds),
                _ if stopped => None,
                Check::Always(_) => Some(Outcome::Holds),
                Check::Sometimes(_) => Some(Outcome::Fails),
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
        states: counts.states,
        unique: counts.unique,
        depth: counts.depth,
        elapsed,
        total: start.elapsed(),
        verdicts,
    }
}

type BoxedTarget = Box<dyn Fn(&Cluster) -> bool + Sync>;

/// The states a check is about: where an `always` property is violated, or a `sometimes`
/// guard is reached.
fn target(check: Check) -> BoxedTarget {
    match check {
        Check::Always(p) => Box::new(move |c: &Cluster| c.check(p).is_err()),
        Check::Sometimes(g) => Box::new(move |c: &Cluster| g.reached(c)),
    }
}

/// Waits for a checker, reporting progress; returns its counts and the names of the
/// properties with discoveries.
fn finish<C: Checker<IsrModel>>(
    checker: C,
    start: Instant,
    progress: &mut impl FnMut(Progress),
) -> (Counts, Vec<&'static str>) {
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
    let counts = Counts {
        states: checker.state_count(),
        unique: checker.unique_state_count(),
        depth: checker.max_depth(),
    };
    (counts, names)
}
