//! The check the Explorer runs at start: the same search as `isr-check check` on the same target
//! (so the same verdicts and counterexample lengths), then each counterexample, and an example
//! of each guard reached, as a path of the Explorer's action indices.

use crate::check::violation;
use crate::run::{search_name, SearchArgs};
use crate::target::Target;
use isr::sim::Cluster;
use isr_models::check::{Progress, Run};
use isr_models::engine::spill::SpillError;
use isr_models::presets::Outcome;
use isr_models::shortest::{shortest_paths, Target as Predicate, Trace};
use isr_models::{Check, Guard, IsrModel};
use stateright::Path;

/// A path found, in the Explorer's terms.
#[derive(Clone, Debug)]
pub struct Found {
    /// Action indices from the initial state, as the Explorer's `#/steps/` URLs spell them.
    pub indices: String,
    pub steps: usize,
    /// The property's explanation in the last state, for a violation.
    pub violation: Option<String>,
}

/// What the page shows of the check: progress while it runs, then the verdicts.
#[derive(Clone, Debug, Default)]
pub struct Checking {
    pub progress: Option<Progress>,
    pub done: Option<Done>,
}

/// A finished check.
#[derive(Clone, Debug)]
pub struct Done {
    /// The search, as `check` names it, with its threads and extent.
    pub search: String,
    pub run: Run,
    /// Per verdict of `run`: a shortest path to a violation (`always`) or to the guard's
    /// situation (`sometimes`).
    pub paths: Vec<Option<Found>>,
}

/// The Explorer's path to the last state of `trace`: the index of each action among the
/// actions enabled where it is taken, as stateright encodes paths (the trace is replayed from
/// the real initial state, which is the Explorer's).
pub fn indices(model: &IsrModel, trace: &Trace) -> String {
    Path::from_actions(
        model,
        trace.initial.clone(),
        trace.steps.iter().map(|(a, _)| a),
    )
    .expect("a trace replays in the model it came from")
    .encode(model)
}

/// Checks `target` as `search` says, reporting progress, then finds an example of every guard
/// reached (the search records paths to violations only); an error when the disk failed the
/// visited set.
pub fn check(
    target: &Target,
    search: &SearchArgs,
    progress: impl FnMut(Progress),
) -> Result<Done, SpillError> {
    let model = target.model();
    let run = search.run(target, progress)?.run;
    let reached: Vec<Guard> = run
        .verdicts
        .iter()
        .filter_map(|v| match v.check {
            Check::Sometimes(g) if v.found == Some(Outcome::Holds) => Some(g),
            _ => None,
        })
        .collect();
    let predicates: Vec<_> = reached
        .iter()
        .map(|&g| move |s: &Cluster| g.reached(s))
        .collect();
    let targets: Vec<Predicate> = predicates.iter().map(|p| p as Predicate).collect();
    let mut examples =
        shortest_paths(&model, run.symmetry, &targets, search.threads as usize).into_iter();
    let paths = run
        .verdicts
        .iter()
        .map(|v| {
            let trace = match v.check {
                Check::Always(_) => v.counterexample.clone(),
                Check::Sometimes(g) if reached.contains(&g) => examples.next().flatten(),
                Check::Sometimes(_) => None,
            };
            trace.map(|t| Found {
                indices: indices(&model, &t),
                steps: t.len(),
                violation: violation(&t, v.check),
            })
        })
        .collect();
    Ok(Done {
        search: format!(
            "{}, {} threads{}",
            search_name(&run),
            search.threads,
            match target.stop_at() {
                Some(_) => "; stops at the expected failures, so other properties stay undecided",
                None => "; exhaustive",
            }
        ),
        run,
        paths,
    })
}
