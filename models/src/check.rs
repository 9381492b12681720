//! Running a model to its verdicts, with or without symmetry reduction, on isr-models' own
//! search engine ([`crate::engine`]). Depth-first, the engine explores the state space, then
//! one breadth-first search finds a shortest counterexample for every violated `always`
//! property. Breadth-first, that search does both at once: it checks every property on every
//! state and records parent pointers, so the first violation of each property it meets is a
//! shortest counterexample. A search may be cut short by a depth or a time limit; breadth-first,
//! it is then complete to the last depth it finished.

use crate::engine::bfs::{breadth_first, Targets};
use crate::engine::dfs::depth_first;
use crate::engine::state::Nodes;
use crate::engine::{Counts, Ending, Limits};
use crate::presets::Outcome;
use crate::shortest::Trace;
use crate::symmetry::MAX_SYMMETRIC_BROKERS;
use crate::{Check, IsrModel};
use isr::sim::Bounds;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// The search strategy.
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
    /// `None`: not decided, because the search stopped before it could be (at the expected
    /// failures, or at a depth or time limit).
    pub found: Option<Outcome>,
    /// For a violated `always` property: a shortest path to a violating state.
    pub counterexample: Option<Trace>,
}

impl Verdict {
    /// Whether nothing found contradicts the expectation (an undecided check does not).
    pub fn as_expected(&self) -> bool {
        self.expected.is_none() || self.found.is_none() || self.expected == self.found
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
    /// Steps from the initial state to the deepest state found.
    pub depth: usize,
    /// Why the search ended.
    pub ending: Ending,
    /// For a breadth-first search: every state up to this depth was explored.
    pub complete_to: Option<usize>,
    /// Time the search for verdicts took.
    pub elapsed: Duration,
    /// Wall time including the searches for shortest counterexamples.
    pub total: Duration,
    pub verdicts: Vec<Verdict>,
}

impl Run {
    /// Whether every asserted verdict is the expected one (undecided ones aside).
    pub fn as_expected(&self) -> bool {
        self.verdicts.iter().all(Verdict::as_expected)
    }

    /// Whether a depth or time limit cut the search short.
    pub fn limited(&self) -> bool {
        matches!(self.ending, Ending::MaxDepth | Ending::TimeLimit)
    }
}

/// How to search.
#[derive(Clone, Debug)]
pub struct Options {
    pub search: Search,
    /// Symmetry reduction (up to [`MAX_SYMMETRIC_BROKERS`] brokers).
    pub symmetry: bool,
    pub threads: usize,
    pub limits: Limits,
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
/// state per class of broker renamings. `progress` is called a few times a second.
pub fn run(
    model: &IsrModel,
    expected: impl Fn(Check) -> Option<Outcome>,
    stop_at: Option<BTreeSet<&'static str>>,
    search: Search,
    symmetry: bool,
    threads: usize,
    progress: impl FnMut(Progress),
) -> Run {
    let options = Options {
        search,
        symmetry,
        threads,
        limits: Limits::default(),
    };
    run_with(model, expected, stop_at, options, progress)
}

/// [`run`] with every option, limits included.
pub fn run_with(
    model: &IsrModel,
    expected: impl Fn(Check) -> Option<Outcome>,
    stop_at: Option<BTreeSet<&'static str>>,
    options: Options,
    mut progress: impl FnMut(Progress),
) -> Run {
    let start = Instant::now();
    let symmetry = options.symmetry && model.bounds.replicas as usize <= MAX_SYMMETRIC_BROKERS;
    let checks = Check::all();
    let wanted: u64 = checks
        .iter()
        .enumerate()
        .filter(|(_, c)| stop_at.as_ref().is_some_and(|n| n.contains(c.name())))
        .fold(0, |m, (i, _)| m | 1 << i);
    let stops = stop_at.is_some();
    let verdicts = |n: &Nodes| n.verdicts(&checks);
    let mut report = |c: Counts| {
        progress(Progress {
            states: c.states,
            unique: c.unique,
            depth: c.depth,
            elapsed: start.elapsed(),
        })
    };
    let (counts, ending, complete_to, found, mut traces) = match options.search {
        Search::Bfs => {
            let bits = |f: &[bool]| {
                f.iter()
                    .enumerate()
                    .fold(0u64, |m, (i, &x)| m | (x as u64) << i)
            };
            let bfs = breadth_first(
                model,
                symmetry,
                Targets {
                    count: checks.len(),
                    hits: &verdicts,
                },
                options.threads,
                |f| stops && bits(f) & wanted == wanted,
                options.limits,
                &mut report,
            );
            let traces: Vec<Option<Trace>> = checks
                .iter()
                .enumerate()
                .map(|(i, c)| match c {
                    Check::Always(_) => bfs.trace(model, i),
                    Check::Sometimes(_) => None,
                })
                .collect();
            let found = (0..checks.len()).map(|i| bfs.found(i)).collect();
            (
                bfs.counts,
                bfs.ending,
                Some(bfs.complete_to),
                found,
                Some(traces),
            )
        }
        Search::Dfs => {
            let stop = |found: u64| stops && found & wanted == wanted;
            let dfs = depth_first(
                model,
                symmetry,
                &checks,
                options.threads,
                &stop,
                options.limits,
                &mut report,
            );
            (dfs.counts, dfs.ending, None, dfs.found, None)
        }
    };
    let elapsed = start.elapsed();
    let traces = traces.take().unwrap_or_else(|| {
        // One breadth-first search for the shortest counterexamples of every violated property.
        let violated: u64 = checks
            .iter()
            .enumerate()
            .filter(|&(i, c)| found[i] && matches!(c, Check::Always(_)))
            .fold(0, |m, (i, _)| m | 1 << i);
        if violated == 0 {
            return vec![None; checks.len()];
        }
        let hits = |n: &Nodes| n.verdicts(&checks) & violated;
        let bfs = breadth_first(
            model,
            symmetry,
            Targets {
                count: checks.len(),
                hits: &hits,
            },
            options.threads,
            |f| (0..checks.len()).all(|i| f[i] || violated & 1 << i == 0),
            Limits::default(),
            |_| {},
        );
        (0..checks.len())
            .map(|i| {
                (violated & 1 << i != 0)
                    .then(|| bfs.trace(model, i))
                    .flatten()
            })
            .collect()
    });
    let decided = ending == Ending::Exhausted;
    let verdicts = checks
        .iter()
        .zip(found)
        .zip(traces)
        .map(|((&check, discovered), counterexample)| {
            let found = match check {
                Check::Always(_) if discovered => Some(Outcome::Fails),
                Check::Sometimes(_) if discovered => Some(Outcome::Holds),
                _ if !decided => None,
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
        search: options.search,
        symmetry,
        states: counts.states,
        unique: counts.unique,
        depth: counts.depth,
        ending,
        complete_to,
        elapsed,
        total: start.elapsed(),
        verdicts,
    }
}
