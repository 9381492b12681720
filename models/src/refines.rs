//! Refinement of the atomic-step model by the full one (`isr-check refines`, issue 27): does
//! every step of the full model, seen through a projection onto atomic states, match a step of
//! the atomic model or leave the projection unchanged (a stutter)?
//!
//! The projection is the core's [`Cluster::settled`]: the answers and AlterPartitions in flight
//! are delivered as the rest of an atomic step would deliver them. The check is a
//! breadth-first search of the full model (fetch waits off, as in the atomic model), so the
//! first step found without a counterpart ends the shortest such path. It is deliberately plain
//! — one hash set of whole states, one thread, no symmetry — because it compares states, not
//! fingerprints: it is meant for small bounds, where it is exact.

use crate::shortest::Trace;
use crate::IsrModel;
use isr::sim::{Action, Cluster};
use isr::Property;
use std::collections::{HashSet, VecDeque};
use std::time::{Duration, Instant};

/// What a refinement check found.
#[derive(Debug)]
pub struct Refinement {
    /// Distinct atomic-model states reachable.
    pub atomic_states: u64,
    /// Distinct full-model states explored.
    pub states: u64,
    /// Full-model steps whose projection is unchanged.
    pub stutters: u64,
    /// Full-model steps whose projection is one atomic step.
    pub atomic_steps: u64,
    /// Full-model steps whose projection is reachable in the atomic model, but not by one step
    /// from the projection before: the atomic model reaches it in another order.
    pub reordered: u64,
    /// The first step found without an atomic counterpart, if any.
    pub failure: Option<Failure>,
    pub elapsed: Duration,
}

impl Refinement {
    /// Full-model steps checked.
    pub fn steps(&self) -> u64 {
        self.stutters + self.atomic_steps + self.reordered
    }
}

/// A full-model step without an atomic counterpart, at the end of a shortest path to it.
#[derive(Debug)]
pub struct Failure {
    /// The full-model path; its last step is the one without a counterpart. Empty when the
    /// initial states do not correspond.
    pub trace: Trace,
    /// The projection of the state before the last step.
    pub before: Cluster,
    /// The projection of the state after it.
    pub after: Cluster,
    pub why: Why,
    /// Where the atomic step by the same action leads from `before`, when that action is an
    /// atomic step there: the nearest atomic counterpart, to compare with `after`.
    pub instead: Option<Cluster>,
}

/// Why a step has no atomic counterpart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// No atomic behaviour reaches the projection of the state the step leads to.
    Unreachable,
    /// The state the step leads to violates a property its projection satisfies: the atomic
    /// model, checking projections, would miss it.
    Hidden(Property),
}

/// The full model a refinement check explores for `model`: the same protocol and bounds, the
/// full model's steps, fetch waits off (an atomic step answers a Fetch at once).
pub fn full_of(model: &IsrModel) -> IsrModel {
    let mut cfg = model.cfg;
    isr::sim::atomic(&mut cfg);
    let mut bounds = model.bounds.clone();
    bounds.atomic = false;
    IsrModel::new(cfg, bounds, model.max_isr_changes)
}

/// The atomic-step model of `model`'s protocol and bounds, with one more change of each
/// partition's ISR than the full model's bound: a full-model state within that bound may have
/// an AlterPartition in flight, which its projection delivers.
pub fn atomic_of(model: &IsrModel) -> IsrModel {
    let mut atomic = full_of(model);
    atomic.bounds.atomic = true;
    atomic.max_isr_changes += 1;
    atomic
}

/// Checks that `model`'s full model refines its atomic-step model under
/// [`Cluster::settled`].
pub fn refines(model: &IsrModel) -> Refinement {
    let full = full_of(model);
    let atomic = atomic_of(model);
    check(
        &full,
        |c| c.settled(&atomic.cfg, &atomic.bounds),
        &atomic.initial(),
        |c| {
            atomic
                .enabled(c)
                .iter()
                .map(|a| atomic.step(c, a))
                .filter(|next| atomic.within(next))
                .collect()
        },
        |c, a| atomic.enabled(c).contains(a).then(|| atomic.step(c, a)),
    )
}

/// The search itself, over any projection and any atomic step relation (`atomic_steps`: the
/// states one atomic step leads to; `atomic_step`: where one action leads, if enabled, for the
/// report), so that tests can break either. First every atomic state
/// reachable from `atomic_initial`; then the full model, breadth first, where each step must
/// lead to a state whose projection is one of them and violates every property it violates.
pub fn check(
    full: &IsrModel,
    project: impl Fn(&Cluster) -> Cluster,
    atomic_initial: &Cluster,
    atomic_steps: impl Fn(&Cluster) -> Vec<Cluster>,
    atomic_step: impl Fn(&Cluster, &Action) -> Option<Cluster>,
) -> Refinement {
    let start = Instant::now();
    let reachable = reach(atomic_initial, &atomic_steps);
    let initial = full.initial();
    let mut result = Refinement {
        atomic_states: reachable.len() as u64,
        states: 1,
        stutters: 0,
        atomic_steps: 0,
        reordered: 0,
        failure: None,
        elapsed: Duration::ZERO,
    };
    let projected = project(&initial);
    if projected != *atomic_initial {
        result.failure = Some(Failure {
            before: atomic_initial.clone(),
            after: projected,
            trace: Trace {
                initial,
                steps: Vec::new(),
            },
            why: Why::Unreachable,
            instead: None,
        });
        result.elapsed = start.elapsed();
        return result;
    }
    // Each state's index in `parents`, and its parent and the action that reached it.
    let mut seen: HashSet<Cluster> = HashSet::from([initial.clone()]);
    let mut parents: Vec<Option<(usize, Action)>> = vec![None];
    let mut queue = VecDeque::from([(initial, 0)]);
    while let Some((state, at)) = queue.pop_front() {
        let before = project(&state);
        let mut one_step: Option<HashSet<Cluster>> = None;
        for action in full.enabled(&state) {
            let next = full.step(&state, &action);
            if !full.within(&next) {
                continue;
            }
            let after = project(&next);
            let why = if after == before {
                result.stutters += 1;
                None
            } else if one_step
                .get_or_insert_with(|| atomic_steps(&before).into_iter().collect())
                .contains(&after)
            {
                result.atomic_steps += 1;
                None
            } else if reachable.contains(&after) {
                result.reordered += 1;
                None
            } else {
                Some(Why::Unreachable)
            };
            let why = why.or_else(|| hidden(&next, &after).map(Why::Hidden));
            if let Some(why) = why {
                let instead = atomic_step(&before, &action);
                let mut actions = vec![action];
                let mut i = at;
                while let Some((parent, a)) = &parents[i] {
                    actions.push(a.clone());
                    i = *parent;
                }
                actions.reverse();
                result.failure = Some(Failure {
                    trace: Trace::replay(full, actions),
                    before,
                    after,
                    why,
                    instead,
                });
                result.elapsed = start.elapsed();
                return result;
            }
            if seen.insert(next.clone()) {
                parents.push(Some((at, action)));
                queue.push_back((next, parents.len() - 1));
                result.states += 1;
            }
        }
    }
    result.elapsed = start.elapsed();
    result
}

/// Every state `atomic_steps` reaches from `initial`.
fn reach(initial: &Cluster, atomic_steps: impl Fn(&Cluster) -> Vec<Cluster>) -> HashSet<Cluster> {
    let mut seen = HashSet::from([initial.clone()]);
    let mut queue = VecDeque::from([initial.clone()]);
    while let Some(state) = queue.pop_front() {
        for next in atomic_steps(&state) {
            if seen.insert(next.clone()) {
                queue.push_back(next);
            }
        }
    }
    seen
}

/// A property `state` violates and its projection does not.
fn hidden(state: &Cluster, projected: &Cluster) -> Option<Property> {
    Property::ALL
        .into_iter()
        .find(|&p| state.check(p).is_err() && projected.check(p).is_ok())
}
