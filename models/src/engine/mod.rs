//! isr-models' own search engine: a parallel depth-first search for verdicts, and a parallel
//! breadth-first search with parent pointers for shortest counterexamples and for searches
//! bounded by depth or time.
//!
//! Both explore the very states stateright would (the core's [`isr::sim::Cluster`] steps, the
//! model's bounds, one state per class of broker renamings with symmetry reduction), so they
//! agree with it on every verdict and every unique-state count; what they do differently is
//! how a state is held and stepped ([`state`]) and how visited states are stored
//! ([`visited`]): fingerprints only, in a table every thread inserts into without a lock, which
//! spills to a sorted file on disk ([`spill`]) past the memory its [`budget`] allows.
//! stateright remains the Explorer's model ([`crate::IsrModel`] implements its `Model`).

pub mod bfs;
pub mod budget;
pub mod dfs;
pub mod spill;
pub mod state;
pub mod visited;

use budget::Budget;

use std::sync::Arc;
use std::time::{Duration, Instant};

/// Counts while a search runs: states generated within bounds, distinct states, and the depth
/// (steps from the initial state) of the deepest state found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub states: usize,
    pub unique: usize,
    pub depth: usize,
}

/// Where a search may stop before it has seen every state, and the memory its visited set may
/// take.
#[derive(Clone, Debug, Default)]
pub struct Limits {
    /// Explore no state deeper than this many steps (breadth-first only).
    pub max_depth: Option<usize>,
    /// Stop at this instant.
    pub deadline: Option<Instant>,
    /// Past this, the visited set spills to disk; `None`: it stays in memory, whatever its size.
    pub memory: Option<Arc<Budget>>,
}

impl Limits {
    pub fn with_time(seconds: Option<f64>, max_depth: Option<usize>) -> Limits {
        Limits {
            max_depth,
            deadline: seconds.map(|s| Instant::now() + Duration::from_secs_f64(s)),
            memory: None,
        }
    }

    /// These limits, the visited set kept within `budget`.
    pub fn with_memory(self, budget: Arc<Budget>) -> Limits {
        Limits {
            memory: Some(budget),
            ..self
        }
    }

    fn expired(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }
}

/// Why a search ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// Every reachable state within bounds was explored.
    Exhausted,
    /// What the caller waited for was found.
    Found,
    /// The depth limit: every state up to that depth was explored, none beyond.
    MaxDepth,
    /// The time limit.
    TimeLimit,
    /// The disk failed the visited set (the error is in [`Limits::memory`]'s budget): what was
    /// not found is undecided.
    SpillFailed,
}
