//! Breadth-first search with parent pointers, and shortest counterexamples (stateright 0.31
//! does not promise shortest paths).
//!
//! The search goes level by level and records, per state, its parent and the action taken
//! there: the first level holding a state where a target predicate holds gives a path of
//! minimal length to it. One search serves every target. With symmetry reduction it runs over
//! canonical states ([`canonicalize`]): every target here is one no broker renaming changes,
//! and a class is first reached at its smallest depth, so lengths stay minimal; a path found is
//! then replayed from the real initial state.

use crate::symmetry::{canonicalize, fingerprint};
use crate::IsrModel;
use isr::sim::{Action, Cluster};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

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

/// Fingerprints are already well mixed: a map keyed by them need not hash again.
#[derive(Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn write(&mut self, _: &[u8]) {
        unreachable!("only u64 fingerprints are hashed");
    }
    fn write_u64(&mut self, fp: u64) {
        self.0 = fp;
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// Per state reached: its parent's fingerprint and the index of the action taken there.
type Parents = HashMap<u64, Option<(u64, usize)>, BuildHasherDefault<Prehashed>>;

/// Counts while a search runs: states generated (within bounds), distinct states, depth.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counts {
    pub states: usize,
    pub unique: usize,
    pub depth: usize,
}

/// The result of [`breadth_first`].
pub struct Bfs {
    pub counts: Counts,
    symmetric: bool,
    parent: Parents,
    /// Per target, a shallowest state where it holds.
    found: Vec<Option<u64>>,
}

impl Bfs {
    /// Whether target `i` holds in some state reached.
    pub fn found(&self, i: usize) -> bool {
        self.found[i].is_some()
    }

    /// A shortest path to a state where target `i` holds, if one was reached.
    pub fn trace(&self, model: &IsrModel, i: usize) -> Option<Trace> {
        let last = self.found[i]?;
        let mut indices = Vec::new();
        let mut at = last;
        while let Some(Some((p, i))) = self.parent.get(&at) {
            indices.push(*i);
            at = *p;
        }
        indices.reverse();
        Some(replay_indices(model, self.symmetric, indices))
    }
}

/// The state as searched: canonical under symmetry reduction.
fn searched(symmetric: bool, mut c: Cluster) -> Cluster {
    if symmetric {
        canonicalize(&mut c);
    }
    c
}

/// Replays action indices over the states searched, and takes at each step a real action whose
/// successor is in the same class as the searched one (the same state without symmetry).
fn replay_indices(model: &IsrModel, symmetric: bool, indices: Vec<usize>) -> Trace {
    let mut state = searched(symmetric, model.initial());
    let mut real = model.initial();
    let mut actions = Vec::new();
    for i in indices {
        let action = model.enabled(&state).swap_remove(i);
        state = searched(symmetric, model.step(&state, &action));
        let action = if symmetric {
            let target = fingerprint(&state);
            model
                .enabled(&real)
                .into_iter()
                .find(|a| fingerprint(&searched(true, model.step(&real, a))) == target)
                .expect("a renamed state has the renamed successors")
        } else {
            action
        };
        real = model.step(&real, &action);
        actions.push(action);
    }
    Trace::replay(model, actions)
}

/// A predicate on states that a search looks for.
pub type Target<'a> = &'a (dyn Fn(&Cluster) -> bool + Sync);

/// A new state found while expanding part of a level.
struct Candidate {
    state: Cluster,
    fp: u64,
    parent: u64,
    action: usize,
    /// The targets (of those not found before the level) that hold in it, as bits.
    hits: u64,
}

/// Frontier states expanded per thread before the results are merged and `stop` is asked.
const BATCH: usize = 2048;

/// Explores the model breadth-first from its initial state, level by level, checking every
/// target predicate on every new state; stops when `stop` says so (given which targets have
/// been found) or when every reachable state is explored. `threads` expand each batch of a level
/// in parallel; the batch's new states are then taken in frontier order, so parents, and so
/// counterexamples, do not depend on thread timing. `progress` is called after every batch.
pub fn breadth_first(
    model: &IsrModel,
    symmetric: bool,
    targets: &[Target],
    threads: usize,
    stop: impl Fn(&[bool]) -> bool,
    mut progress: impl FnMut(Counts),
) -> Bfs {
    assert!(targets.len() <= 64, "at most 64 targets");
    let threads = threads.max(1);
    let initial = searched(symmetric, model.initial());
    let root = fingerprint(&initial);
    let mut bfs = Bfs {
        counts: Counts {
            states: 1,
            unique: 1,
            depth: 0,
        },
        symmetric,
        parent: Parents::default(),
        found: vec![None; targets.len()],
    };
    bfs.parent.insert(root, None);
    for (i, target) in targets.iter().enumerate() {
        if target(&initial) {
            bfs.found[i] = Some(root);
        }
    }
    let flags = |bfs: &Bfs| bfs.found.iter().map(Option::is_some).collect::<Vec<bool>>();
    let mut done = stop(&flags(&bfs));
    let mut frontier = vec![(initial, root)];
    while !done && !frontier.is_empty() {
        let pending: u64 = (0..targets.len())
            .filter(|&i| bfs.found[i].is_none())
            .fold(0, |m, i| m | 1 << i);
        let mut next = Vec::new();
        for batch in frontier.chunks(BATCH * threads) {
            let parent = &bfs.parent;
            let expand =
                |part: &[(Cluster, u64)]| expand(model, symmetric, targets, pending, parent, part);
            let parts: Vec<(Vec<Candidate>, usize)> = if threads == 1 || batch.len() < 2 * threads {
                vec![expand(batch)]
            } else {
                let size = batch.len().div_ceil(threads);
                std::thread::scope(|s| {
                    let handles: Vec<_> = batch
                        .chunks(size)
                        .map(|part| s.spawn(move || expand(part)))
                        .collect();
                    handles
                        .into_iter()
                        .map(|h| h.join().expect("a search thread panicked"))
                        .collect()
                })
            };
            for (candidates, states) in parts {
                bfs.counts.states += states;
                for c in candidates {
                    if done || bfs.parent.contains_key(&c.fp) {
                        continue;
                    }
                    bfs.parent.insert(c.fp, Some((c.parent, c.action)));
                    bfs.counts.unique += 1;
                    if c.hits != 0 {
                        for (i, found) in bfs.found.iter_mut().enumerate() {
                            if found.is_none() && c.hits & 1 << i != 0 {
                                *found = Some(c.fp);
                            }
                        }
                        done = stop(&flags(&bfs));
                    }
                    next.push((c.state, c.fp));
                }
            }
            progress(bfs.counts);
            if done {
                break;
            }
        }
        if !next.is_empty() {
            bfs.counts.depth += 1;
        }
        frontier = next;
    }
    bfs
}

/// The successors of part of a level that no earlier level reached, each once, with the
/// targets they satisfy; and how many successors within bounds there were.
fn expand(
    model: &IsrModel,
    symmetric: bool,
    targets: &[Target],
    pending: u64,
    parent: &Parents,
    part: &[(Cluster, u64)],
) -> (Vec<Candidate>, usize) {
    let mut seen: HashMap<u64, (), BuildHasherDefault<Prehashed>> = HashMap::default();
    let mut candidates = Vec::new();
    let mut states = 0;
    for (state, from) in part {
        for (i, action) in model.enabled(state).iter().enumerate() {
            let succ = model.step(state, action);
            if !model.within(&succ) {
                continue;
            }
            states += 1;
            let succ = searched(symmetric, succ);
            let fp = fingerprint(&succ);
            if parent.contains_key(&fp) || seen.insert(fp, ()).is_some() {
                continue;
            }
            let hits = (0..targets.len())
                .filter(|&t| pending & 1 << t != 0 && targets[t](&succ))
                .fold(0, |m, t| m | 1 << t);
            candidates.push(Candidate {
                state: succ,
                fp,
                parent: *from,
                action: i,
                hits,
            });
        }
    }
    (candidates, states)
}

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
    bad: &[Target],
    threads: usize,
) -> Vec<Option<Trace>> {
    let bfs = breadth_first(
        model,
        symmetric,
        bad,
        threads,
        |f| f.iter().all(|&f| f),
        |_| {},
    );
    (0..bad.len()).map(|i| bfs.trace(model, i)).collect()
}
