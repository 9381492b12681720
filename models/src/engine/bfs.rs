//! Parallel breadth-first search with parent pointers: the first level that holds a state where
//! a target holds gives a shortest path to it, and a search cut short by a depth or time limit
//! is complete to the last level it finished.
//!
//! The search goes level by level. Threads expand a batch of the frontier each, with their own
//! caches; the batch's new states are then taken in frontier order, so parents, and so
//! counterexamples, do not depend on thread timing.

use super::state::{Nodes, State, Worker};
use super::visited::Visited;
use super::{Counts, Ending, Limits};
use crate::shortest::Trace;
use crate::IsrModel;
use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

/// Fingerprints are already well mixed: a set of them need not hash again.
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

type Fingerprints = HashSet<u64, BuildHasherDefault<Prehashed>>;

/// A state first reached at some level: its fingerprint, its parent's, and the index of the
/// action taken there, among those of [`State::choices`]. A level's are sorted by fingerprint
/// once it is complete, so a path is found by one binary search per level; they take 24 bytes
/// a state, where a map from state to parent took twice that and rehashed as it grew.
#[derive(Clone, Copy)]
struct Reached {
    fp: u64,
    parent: u64,
    action: u32,
}

/// Which targets hold in a state's nodes, as bits. Targets read no message in flight.
pub type Hits<'a> = &'a (dyn Fn(&Nodes) -> u64 + Sync);

/// What a breadth-first search looks for: `count` targets (at most 64), and which of them hold
/// in a state's nodes.
#[derive(Clone, Copy)]
pub struct Targets<'a> {
    pub count: usize,
    pub hits: Hits<'a>,
}

/// The result of [`breadth_first`].
pub struct Bfs {
    pub counts: Counts,
    pub ending: Ending,
    /// Every state up to this depth was explored.
    pub complete_to: usize,
    /// Per depth from 1, the states first reached there, sorted by fingerprint.
    levels: Vec<Vec<Reached>>,
    /// Per target, a shallowest state where it holds, and its depth.
    found: Vec<Option<(u64, usize)>>,
}

impl Bfs {
    /// Whether target `i` holds in some state reached.
    pub fn found(&self, i: usize) -> bool {
        self.found[i].is_some()
    }

    /// A shortest path to a state where target `i` holds, if one was reached.
    pub fn trace(&self, model: &IsrModel, i: usize) -> Option<Trace> {
        let (mut at, depth) = self.found[i]?;
        let mut indices = Vec::with_capacity(depth);
        for level in self.levels[..depth].iter().rev() {
            let r = level[level
                .binary_search_by_key(&at, |r| r.fp)
                .expect("a state's parent was reached a level before it")];
            indices.push(r.action as usize);
            at = r.parent;
        }
        indices.reverse();
        let mut w = Worker::small(model);
        let mut state = w.initial();
        let mut actions = Vec::new();
        for i in indices {
            let choice = state.choices(model)[i];
            actions.push(state.action(model, choice));
            state = w.step(&state, choice);
        }
        Some(Trace::replay(model, actions))
    }
}

/// A new state found while expanding part of a level.
struct Candidate {
    state: State,
    fp: u64,
    parent: u64,
    action: u32,
    /// The targets (of those not found before the level) that hold in it.
    hits: u64,
}

/// Frontier states expanded per thread before the results are merged and `stop` is asked.
const BATCH: usize = 4096;

/// Explores the model breadth-first from its initial state, level by level, checking `targets`
/// (up to 64) on every new state; stops when `stop` says so (given which have been found), at
/// the limits, or when every reachable state is explored. `progress` is called after every
/// batch.
pub fn breadth_first(
    model: &IsrModel,
    symmetry: bool,
    targets: Targets,
    threads: usize,
    stop: impl Fn(&[bool]) -> bool,
    limits: Limits,
    mut progress: impl FnMut(Counts),
) -> Bfs {
    let Targets {
        count: targets,
        hits,
    } = targets;
    assert!(targets <= 64, "at most 64 targets");
    let threads = threads.max(1);
    let mut workers: Vec<(Worker, Fingerprints)> = (0..threads)
        .map(|_| (Worker::new(model), Fingerprints::default()))
        .collect();
    let initial = workers[0].0.initial();
    let root = workers[0].0.fingerprint(&initial, symmetry);
    let mut bfs = Bfs {
        counts: Counts {
            states: 1,
            unique: 1,
            depth: 0,
        },
        ending: Ending::Exhausted,
        complete_to: 0,
        levels: Vec::new(),
        found: vec![None; targets],
    };
    let visited = Visited::new(limits.memory.clone());
    visited.insert(root);
    let bits = hits(&initial.nodes);
    for (i, found) in bfs.found.iter_mut().enumerate() {
        if bits & 1 << i != 0 {
            *found = Some((root, 0));
        }
    }
    let flags = |bfs: &Bfs| bfs.found.iter().map(Option::is_some).collect::<Vec<bool>>();
    let mut frontier = vec![(initial, root)];
    if stop(&flags(&bfs)) {
        bfs.ending = Ending::Found;
        frontier.clear();
    }
    let mut depth = 0;
    while !frontier.is_empty() {
        if limits.max_depth.is_some_and(|d| depth >= d) {
            bfs.ending = Ending::MaxDepth;
            break;
        }
        let pending: u64 = (0..targets)
            .filter(|&i| bfs.found[i].is_none())
            .fold(0, |m, i| m | 1 << i);
        let mut next = Vec::with_capacity(frontier.len());
        let mut level = Vec::with_capacity(frontier.len());
        let mut done = false;
        for batch in frontier.chunks(BATCH * threads) {
            if limits.expired() {
                bfs.ending = Ending::TimeLimit;
                done = true;
                break;
            }
            if visited.failed() {
                bfs.ending = Ending::SpillFailed;
                done = true;
                break;
            }
            let visited = &visited;
            let parts: Vec<(Vec<Candidate>, usize)> = if threads == 1 || batch.len() < 2 * threads {
                let (w, seen) = &mut workers[0];
                vec![expand(w, seen, symmetry, hits, pending, visited, batch)]
            } else {
                let size = batch.len().div_ceil(threads);
                std::thread::scope(|s| {
                    let handles: Vec<_> = batch
                        .chunks(size)
                        .zip(workers.iter_mut())
                        .map(|(part, (w, seen))| {
                            s.spawn(move || expand(w, seen, symmetry, hits, pending, visited, part))
                        })
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
                    if done || !visited.insert(c.fp) {
                        continue;
                    }
                    level.push(Reached {
                        fp: c.fp,
                        parent: c.parent,
                        action: c.action,
                    });
                    bfs.counts.unique += 1;
                    bfs.counts.depth = depth + 1;
                    if c.hits != 0 {
                        for (i, found) in bfs.found.iter_mut().enumerate() {
                            if found.is_none() && c.hits & 1 << i != 0 {
                                *found = Some((c.fp, depth + 1));
                            }
                        }
                        if stop(&flags(&bfs)) {
                            bfs.ending = Ending::Found;
                            done = true;
                        }
                    }
                    next.push((c.state, c.fp));
                }
            }
            progress(bfs.counts);
            if done {
                break;
            }
        }
        level.sort_unstable_by_key(|r| r.fp);
        bfs.levels.push(level);
        if done {
            break;
        }
        depth += 1;
        bfs.complete_to = depth;
        // States with the same nodes next to each other: their steps share the caches'.
        next.sort_by_key(|(s, fp)| (s.nodes.fp, *fp));
        frontier = next;
    }
    if visited.failed() {
        // A failure in the last batch ends no level: it is reported here.
        bfs.ending = Ending::SpillFailed;
    } else if frontier.is_empty() && bfs.ending == Ending::Exhausted {
        bfs.complete_to = bfs.counts.depth;
    }
    bfs
}

/// The successors of part of a level that no earlier level reached, each once, with the
/// targets they satisfy; and how many successors within bounds there were. `seen` is the
/// thread's own set, kept from call to call for its room.
fn expand(
    w: &mut Worker,
    seen: &mut Fingerprints,
    symmetry: bool,
    hits: Hits,
    pending: u64,
    visited: &Visited,
    part: &[(State, u64)],
) -> (Vec<Candidate>, usize) {
    seen.clear();
    let mut candidates = Vec::new();
    let mut states = 0;
    for (state, from) in part {
        for (i, choice) in state.choices(w.model).into_iter().enumerate() {
            let succ = w.step(state, choice);
            if !succ.nodes.within {
                continue;
            }
            states += 1;
            let fp = w.fingerprint(&succ, symmetry);
            if visited.contains(fp) || !seen.insert(fp) {
                continue;
            }
            let hits = if pending == 0 {
                0
            } else {
                hits(&succ.nodes) & pending
            };
            candidates.push(Candidate {
                state: succ,
                fp,
                parent: *from,
                action: i as u32,
                hits,
            });
        }
    }
    (candidates, states)
}
