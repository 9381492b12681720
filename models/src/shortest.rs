//! Shortest counterexamples, which stateright 0.31 does not promise.
//!
//! A breadth-first search level by level, with a parent pointer per state: the first level that
//! holds a state violating the property gives a path of minimal length. States are merged by
//! the fingerprint of their symmetry representative (a violation is invariant under broker
//! renaming, and a class is first reached at its smallest depth, so lengths stay minimal), while
//! the search continues from the states themselves so the recorded action indices replay.

use crate::symmetry::{fingerprint, representative};
use crate::IsrModel;
use isr::sim::{Action, Cluster};
use std::collections::{HashMap, HashSet};

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

/// The shortest path from the initial state to a state where `bad` holds, if one is reachable.
/// `symmetric` merges states by broker renaming.
pub fn shortest_path(
    model: &IsrModel,
    symmetric: bool,
    bad: impl Fn(&Cluster) -> bool,
) -> Option<Trace> {
    let key = |c: &Cluster| {
        if symmetric {
            fingerprint(&representative(c))
        } else {
            fingerprint(c)
        }
    };
    let initial = model.initial();
    if bad(&initial) {
        return Some(Trace {
            initial,
            steps: Vec::new(),
        });
    }
    // Per state searched from: its parent's fingerprint and the index of the action taken there.
    let mut parent: HashMap<u64, Option<(u64, usize)>> = HashMap::new();
    let mut seen: HashSet<u64> = HashSet::new();
    parent.insert(fingerprint(&initial), None);
    seen.insert(key(&initial));
    let mut frontier = vec![initial];
    while !frontier.is_empty() {
        let mut next = Vec::new();
        for state in &frontier {
            let from = fingerprint(state);
            for (i, action) in model.enabled(state).iter().enumerate() {
                let succ = model.step(state, action);
                if !model.within(&succ) {
                    continue;
                }
                if !seen.insert(key(&succ)) {
                    continue;
                }
                let fp = fingerprint(&succ);
                parent.insert(fp, Some((from, i)));
                if bad(&succ) {
                    return Some(rebuild(model, &parent, fp));
                }
                next.push(succ);
            }
        }
        frontier = next;
    }
    None
}

/// Follows parent pointers back to the root, then replays the action indices forwards.
fn rebuild(model: &IsrModel, parent: &HashMap<u64, Option<(u64, usize)>>, last: u64) -> Trace {
    let mut indices = Vec::new();
    let mut at = last;
    while let Some(Some((p, i))) = parent.get(&at) {
        indices.push(*i);
        at = *p;
    }
    indices.reverse();
    let mut state = model.initial();
    let mut actions = Vec::new();
    for i in indices {
        let action = model.enabled(&state).swap_remove(i);
        state = model.step(&state, &action);
        actions.push(action);
    }
    Trace::replay(model, actions)
}
