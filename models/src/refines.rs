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
    /// The steps found without an atomic counterpart, by kind ([`Failures::kind`]), in the
    /// order their kinds were first met: the first is the shortest of all. Only that one unless
    /// the check was asked for all ([`Options::all`]).
    pub failures: Vec<Failures>,
    /// The search stopped at [`Options::max_states`] before it was complete: where it found no
    /// failure, refinement is undecided.
    pub limited: bool,
}

/// How far a refinement check goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Go on past the first step without an atomic counterpart, over the whole full model.
    pub all: bool,
    /// The most states, atomic and full, the check keeps. It keeps whole states (about 3 KiB
    /// each at the presets' CI bounds), so this bounds its memory.
    pub max_states: u64,
}

/// [`Options::max_states`] by default: about 6 GiB of states.
pub const DEFAULT_MAX_STATES: u64 = 2_000_000;

impl Default for Options {
    fn default() -> Self {
        Options {
            all: false,
            max_states: DEFAULT_MAX_STATES,
        }
    }
}

impl Refinement {
    /// Full-model steps checked (with every failure, when all were asked for).
    pub fn steps(&self) -> u64 {
        self.stutters
            + self.atomic_steps
            + self.reordered
            + self.failures.iter().map(|f| f.count).sum::<u64>()
    }

    /// The first step found without an atomic counterpart, at the end of a shortest path.
    pub fn failure(&self) -> Option<&Failure> {
        self.failures.first().map(|f| &f.first)
    }
}

/// The steps without an atomic counterpart of one kind: the same last action, by its name and
/// the kind of message it delivers, and the same reason.
#[derive(Debug)]
pub struct Failures {
    /// For example `Deliver Fetch` or `UncleanCrash, hiding WeakIsr`.
    pub kind: String,
    /// How many full-model steps of this kind.
    pub count: u64,
    /// The first found: the end of a shortest path.
    pub first: Failure,
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
/// [`Cluster::settled`], as far as `options` say.
pub fn refines(model: &IsrModel, options: Options) -> Refinement {
    let full = full_of(model);
    let atomic = atomic_of(model);
    check(
        &full,
        |c| c.settled(&atomic.cfg, &atomic.bounds),
        &atomic.initial(),
        steps_of(&atomic, |_| true),
        |c, a| atomic.enabled(c).contains(a).then(|| atomic.step(c, a)),
        options,
    )
}

/// The atomic step relation of `atomic` for [`check`]: the states its enabled actions that
/// `keep` keeps lead to, within its bounds. Tests drop actions to make an atomic model that
/// misses a step.
pub fn steps_of<'a>(
    atomic: &'a IsrModel,
    keep: impl Fn(&Action) -> bool + 'a,
) -> impl Fn(&Cluster) -> Vec<Cluster> + 'a {
    move |c| {
        atomic
            .enabled(c)
            .iter()
            .filter(|a| keep(a))
            .map(|a| atomic.step(c, a))
            .filter(|next| atomic.within(next))
            .collect()
    }
}

/// The search itself, over any projection and any atomic step relation (`atomic_steps`: the
/// states one atomic step leads to; `atomic_step`: where one action leads, if enabled, for the
/// report), so that tests can break either. First every atomic state
/// reachable from `atomic_initial`; then the full model, breadth first, where each step must
/// lead to a state whose projection is one of them and violates every property it violates.
/// It stops at the first step that does not, unless [`Options::all`], and at
/// [`Options::max_states`].
pub fn check(
    full: &IsrModel,
    project: impl Fn(&Cluster) -> Cluster,
    atomic_initial: &Cluster,
    atomic_steps: impl Fn(&Cluster) -> Vec<Cluster>,
    atomic_step: impl Fn(&Cluster, &Action) -> Option<Cluster>,
    options: Options,
) -> Refinement {
    let reachable = reach(atomic_initial, &atomic_steps, options.max_states);
    let initial = full.initial();
    let mut result = Refinement {
        atomic_states: reachable.len() as u64,
        states: 1,
        stutters: 0,
        atomic_steps: 0,
        reordered: 0,
        failures: Vec::new(),
        limited: false,
    };
    if result.atomic_states >= options.max_states {
        result.limited = true;
        return result;
    }
    let projected = project(&initial);
    if projected != *atomic_initial {
        result.failures.push(Failures {
            kind: "the initial state".to_string(),
            count: 1,
            first: Failure {
                before: atomic_initial.clone(),
                after: projected,
                trace: Trace {
                    initial,
                    steps: Vec::new(),
                },
                why: Why::Unreachable,
                instead: None,
            },
        });
        return result;
    }
    // Each state's index in `parents`, and its parent and the action that reached it.
    let mut seen: HashSet<Cluster> = HashSet::from([initial.clone()]);
    let mut parents: Vec<Option<(usize, Action)>> = vec![None];
    let mut queue = VecDeque::from([(initial, 0)]);
    while let Some((state, at)) = queue.pop_front() {
        if result.atomic_states + result.states >= options.max_states {
            result.limited = true;
            break;
        }
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
                let kind = kind_of(&action, why);
                if let Some(f) = result.failures.iter_mut().find(|f| f.kind == kind) {
                    f.count += 1;
                } else {
                    let instead = atomic_step(&before, &action);
                    let mut actions = vec![action.clone()];
                    let mut i = at;
                    while let Some((parent, a)) = &parents[i] {
                        actions.push(a.clone());
                        i = *parent;
                    }
                    actions.reverse();
                    let first = Failure {
                        trace: Trace::replay(full, actions),
                        before: before.clone(),
                        after,
                        why,
                        instead,
                    };
                    result.failures.push(Failures {
                        kind,
                        count: 1,
                        first,
                    });
                }
                if !options.all {
                    return result;
                }
            }
            if seen.insert(next.clone()) {
                parents.push(Some((at, action)));
                queue.push_back((next, parents.len() - 1));
                result.states += 1;
            }
        }
    }
    result
}

/// The kind of a step without an atomic counterpart ([`Failures::kind`]).
fn kind_of(action: &Action, why: Why) -> String {
    let shown = action.to_string();
    let name = shown.split('(').next().unwrap_or_default();
    let name = match action.message() {
        Some(e) => format!("{name} {}", e.message.kind()),
        None => name.to_string(),
    };
    match why {
        Why::Unreachable => name,
        Why::Hidden(p) => format!("{name}, hiding {p}"),
    }
}

/// Every state `atomic_steps` reaches from `initial`, or the first `max` found.
fn reach(
    initial: &Cluster,
    atomic_steps: impl Fn(&Cluster) -> Vec<Cluster>,
    max: u64,
) -> HashSet<Cluster> {
    let mut seen = HashSet::from([initial.clone()]);
    let mut queue = VecDeque::from([initial.clone()]);
    while let Some(state) = queue.pop_front() {
        if seen.len() as u64 >= max {
            break;
        }
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
