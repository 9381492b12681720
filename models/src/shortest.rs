//! Shortest paths to states where a predicate holds: counterexamples (stateright 0.31 does not
//! promise shortest paths) and examples of guards reached.
//!
//! One breadth-first search of the engine ([`crate::engine::bfs`]) serves every predicate: the
//! first level holding a state where a predicate holds gives a path of minimal length to it.
//! With symmetry reduction the search visits one state per class of broker renamings; every
//! predicate here is one no broker renaming changes, and a class is first reached at its
//! smallest depth, so lengths stay minimal. The path found is one of real states, replayed
//! from the real initial state.

use crate::engine::bfs::{breadth_first, Targets};
use crate::engine::Limits;
use crate::IsrModel;
use isr::sim::{Action, Cluster};

/// A counterexample: the actions from the initial state, and the state after each.
#[derive(Clone, Debug)]
pub struct Trace {
    pub initial: Cluster,
    pub steps: Vec<(Action, Cluster)>,
}

impl Trace {
    /// The number of actions.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// The final state.
    pub fn last(&self) -> &Cluster {
        self.steps.last().map_or(&self.initial, |(_, c)| c)
    }

    /// Rebuilds a trace by replaying actions from the model's initial state.
    pub fn replay(model: &IsrModel, actions: impl IntoIterator<Item = Action>) -> Trace {
        let initial = model.initial();
        let mut state = initial.clone();
        let mut steps = Vec::new();
        for action in actions {
            state = model.step(&state, &action);
            steps.push((action, state.clone()));
        }
        Trace { initial, steps }
    }
}

/// A predicate on states that a search looks for. It must not read the messages in flight (no
/// property or guard does): the search evaluates it once per group of states that differ only
/// in their messages, on a cluster whose network is empty.
pub type Target<'a> = &'a (dyn Fn(&Cluster) -> bool + Sync);

/// The shortest path from the initial state to a state where `bad` holds, if one is reachable.
/// `symmetric` merges states by broker renaming.
pub fn shortest_path(
    model: &IsrModel,
    symmetric: bool,
    bad: impl Fn(&Cluster) -> bool + Sync,
) -> Option<Trace> {
    shortest_paths(model, symmetric, &[&bad], 1).pop().flatten()
}

/// For each predicate, the shortest path from the initial state to a state where it holds, if
/// one is reachable: one search for all, which stops once each has been found.
pub fn shortest_paths(
    model: &IsrModel,
    symmetric: bool,
    targets: &[Target],
    threads: usize,
) -> Vec<Option<Trace>> {
    let hits = |n: &crate::engine::state::Nodes| {
        targets
            .iter()
            .enumerate()
            .filter(|(_, t)| t(&n.cluster))
            .fold(0, |bits, (i, _)| bits | 1 << i)
    };
    let bfs = breadth_first(
        model,
        symmetric,
        Targets {
            count: targets.len(),
            hits: &hits,
        },
        threads,
        |f| f.iter().all(|&f| f),
        Limits::default(),
        |_| {},
    );
    (0..targets.len()).map(|i| bfs.trace(model, i)).collect()
}
