//! Parallel depth-first search for verdicts: every reachable state within bounds, each checked
//! once, with no path kept (a counterexample is then found breadth-first, shortest).
//!
//! Each thread runs its own depth-first search from a stack of states and hands the bottom half
//! of its stack to a shared pool when another thread is idle; the search ends when every thread
//! is idle and the pool is empty. Visited states are shared through [`Visited`].

use super::state::{State, Worker};
use super::visited::Visited;
use super::{Counts, Ending, Limits};
use crate::{Check, IsrModel};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// The result of [`depth_first`].
#[derive(Clone, Debug)]
pub struct Dfs {
    pub counts: Counts,
    /// Per check: discovered (an `always` property violated, a `sometimes` guard reached).
    pub found: Vec<bool>,
    pub ending: Ending,
}

/// States a thread expands between looks at the shared counters, limits and pool.
const ROUND: usize = 512;

/// Slots of a thread's table of recent fingerprints (a power of two).
const RECENT: usize = 1 << 17;

struct Pool {
    jobs: Vec<(State, u32)>,
    idle: usize,
    done: bool,
}

struct Shared<'a> {
    checks: &'a [Check],
    symmetry: bool,
    threads: usize,
    visited: Visited,
    found: AtomicU64,
    states: AtomicUsize,
    depth: AtomicUsize,
    stop: AtomicBool,
    ending: Mutex<Ending>,
    idle: AtomicUsize,
    pool: Mutex<Pool>,
    wake: Condvar,
}

/// Explores every state reachable within the model's bounds, depth-first on `threads` threads,
/// checking `checks` on each (bit `i` of a state's verdicts is check `i`); stops early once
/// `stop` says so of the checks discovered, or at the time limit (`limits.max_depth` is not
/// honoured: a depth-first search with a visited set is not complete to any depth). `progress`
/// is called a few times a second.
pub fn depth_first(
    model: &IsrModel,
    symmetry: bool,
    checks: &[Check],
    threads: usize,
    stop: &(dyn Fn(u64) -> bool + Sync),
    limits: Limits,
    mut progress: impl FnMut(Counts),
) -> Dfs {
    let threads = threads.max(1);
    let shared = Shared {
        checks,
        symmetry,
        threads,
        visited: Visited::new(limits.memory.clone()),
        found: AtomicU64::new(0),
        states: AtomicUsize::new(1),
        depth: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
        ending: Mutex::new(Ending::Exhausted),
        idle: AtomicUsize::new(0),
        pool: Mutex::new(Pool {
            jobs: Vec::new(),
            idle: 0,
            done: false,
        }),
        wake: Condvar::new(),
    };
    let mut first = Worker::new(model);
    let initial = first.initial();
    if initial.nodes.within {
        shared.visited.insert(first.fingerprint(&initial, symmetry));
        let bits = initial.nodes.verdicts(checks);
        shared.found.store(bits, Ordering::Relaxed);
        if stop(bits) {
            shared.finish(Ending::Found);
        }
        lock(&shared.pool).jobs.push((initial, 0));
    }
    let running = AtomicUsize::new(threads);
    std::thread::scope(|s| {
        let mut first = Some(first);
        for _ in 0..threads {
            let worker = first.take().unwrap_or_else(|| Worker::new(model));
            let (shared, running, limits) = (&shared, &running, &limits);
            s.spawn(move || {
                // Counted out however the thread ends: a panic in the core or in an audit
                // (`--audit-reduction`) must end the search, which the scope then re-raises,
                // not leave this loop waiting for a thread that is gone.
                let _done = Finished(running);
                shared.work(worker, stop, limits);
            });
        }
        while running.load(Ordering::Acquire) > 0 {
            std::thread::sleep(Duration::from_millis(50));
            progress(shared.counts());
        }
    });
    let found = shared.found.load(Ordering::Relaxed);
    // A failure in a thread's last round ends no search: it is reported here.
    let ending = if shared.visited.failed() {
        Ending::SpillFailed
    } else {
        *lock(&shared.ending)
    };
    Dfs {
        counts: shared.counts(),
        found: (0..checks.len()).map(|i| found & 1 << i != 0).collect(),
        ending,
    }
}

/// Counts a search thread out when dropped: when it returns, and when it unwinds.
struct Finished<'a>(&'a AtomicUsize);

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Release);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared<'_> {
    fn counts(&self) -> Counts {
        Counts {
            states: self.states.load(Ordering::Relaxed),
            unique: self.visited.len(),
            depth: self.depth.load(Ordering::Relaxed),
        }
    }

    /// Stops every thread, for `why` (the first reason given wins).
    fn finish(&self, why: Ending) {
        if !self.stop.swap(true, Ordering::AcqRel) {
            *lock(&self.ending) = why;
        }
        let mut pool = lock(&self.pool);
        pool.done = true;
        self.wake.notify_all();
    }

    /// One thread's search.
    fn work(&self, mut w: Worker, stop: &(dyn Fn(u64) -> bool + Sync), limits: &Limits) {
        let mut stack: Vec<(State, u32)> = Vec::new();
        let mut deepest = 0;
        // Fingerprints this thread met lately, all in the visited set: most successors that
        // were visited were visited lately (the other side of a diamond), and this small table
        // stays in the cache where the visited set does not.
        let mut recent = vec![0u64; RECENT];
        loop {
            for _ in 0..ROUND {
                let Some((state, depth)) = stack.pop() else {
                    break;
                };
                // All successors first, then the visited set: its lookups miss the cache, and
                // issued together they overlap.
                let mut next: Vec<(State, u64)> = Vec::new();
                for choice in state.choices(w.model) {
                    let succ = w.step(&state, choice);
                    if succ.nodes.within {
                        let fp = w.fingerprint(&succ, self.symmetry);
                        next.push((succ, fp));
                    }
                }
                let generated = next.len();
                for (next, fp) in next {
                    let slot = &mut recent[fp as usize % RECENT];
                    if *slot == fp {
                        continue;
                    }
                    *slot = fp;
                    if !self.visited.insert(fp) {
                        continue;
                    }
                    let bits = next.nodes.verdicts(self.checks);
                    if bits & !self.found.load(Ordering::Relaxed) != 0 {
                        let all = self.found.fetch_or(bits, Ordering::AcqRel) | bits;
                        if stop(all) {
                            self.finish(Ending::Found);
                        }
                    }
                    deepest = deepest.max(depth as usize + 1);
                    stack.push((next, depth + 1));
                }
                self.states.fetch_add(generated, Ordering::Relaxed);
            }
            self.depth.fetch_max(deepest, Ordering::Relaxed);
            if self.stop.load(Ordering::Acquire) {
                return;
            }
            if limits.expired() {
                self.finish(Ending::TimeLimit);
                return;
            }
            if self.visited.failed() {
                self.finish(Ending::SpillFailed);
                return;
            }
            if stack.is_empty() {
                match self.take() {
                    Some(jobs) => stack = jobs,
                    None => return,
                }
            } else if self.idle.load(Ordering::Relaxed) > 0 && stack.len() > 1 {
                let half: Vec<(State, u32)> = stack.drain(..stack.len() / 2).collect();
                let mut pool = lock(&self.pool);
                pool.jobs.extend(half);
                self.wake.notify_one();
            }
        }
    }

    /// Jobs from the pool, waiting for some while other threads are busy; `None` once the
    /// search is over.
    fn take(&self) -> Option<Vec<(State, u32)>> {
        let mut pool = lock(&self.pool);
        loop {
            if pool.done {
                return None;
            }
            if !pool.jobs.is_empty() {
                let n = pool.jobs.len().div_ceil(self.threads);
                let at = pool.jobs.len() - n;
                return Some(pool.jobs.split_off(at));
            }
            pool.idle += 1;
            self.idle.fetch_add(1, Ordering::Relaxed);
            if pool.idle == self.threads {
                pool.done = true;
                self.wake.notify_all();
                return None;
            }
            pool = self.wake.wait(pool).unwrap_or_else(|e| e.into_inner());
            pool.idle -= 1;
            self.idle.fetch_sub(1, Ordering::Relaxed);
        }
    }
}
