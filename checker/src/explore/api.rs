//! The Explorer's JSON API, as stateright 0.31's UI reads it — `/.status` and `/.states/<path>`
//! with the same fields — plus what isr adds: each property's verdict and explanation, each
//! state's verdicts, and states and actions as the command line prints them.

use super::checking::{Checking, Done};
use isr::sim::{Action, Cluster};
use isr_models::presets::Outcome;
use isr_models::symmetry::fingerprint;
use isr_models::{render, Check, IsrModel};
use serde_json::{json, Map, Value};
use std::sync::Mutex;

/// What the Explorer serves: the model (unreduced: the page walks real states), a title, and
/// the check running or done.
pub struct Explorer {
    pub model: IsrModel,
    pub title: String,
    pub checking: Mutex<Checking>,
}

/// stateright's name for a check's kind.
fn expectation(check: Check) -> &'static str {
    match check {
        Check::Always(_) => "Always",
        Check::Sometimes(_) => "Sometimes",
    }
}

fn outcome(o: Option<Outcome>) -> Value {
    o.map_or(Value::Null, |o| Value::String(o.to_string()))
}

/// Each property as `[expectation, name, path or null, details]`: stateright's triple, then
/// isr's verdict, the counterexample's length and the violation's explanation.
fn properties(done: Option<&Done>) -> Value {
    let rows: Vec<Value> = match done {
        Some(done) => done
            .run
            .verdicts
            .iter()
            .zip(&done.paths)
            .map(|(v, path)| {
                let path = path.as_ref();
                json!([
                    expectation(v.check),
                    v.check.name(),
                    path.map(|p| p.indices.clone()),
                    {
                        "expected": outcome(v.expected),
                        "found": outcome(v.found),
                        "steps": path.map(|p| p.steps),
                        "violation": path.and_then(|p| p.violation.clone()),
                    }
                ])
            })
            .collect(),
        None => Check::all()
            .into_iter()
            .map(|c| json!([expectation(c), c.name(), null, {"found": null}]))
            .collect(),
    };
    Value::Array(rows)
}

/// Each check's verdict in one state: `violated` or `holds`, `reached` or `not reached`.
fn verdicts(c: &Cluster) -> Value {
    let mut out = Map::new();
    for check in Check::all() {
        let verdict = match check {
            Check::Always(p) if c.check(p).is_err() => "violated",
            Check::Always(_) => "holds",
            Check::Sometimes(g) if g.reached(c) => "reached",
            Check::Sometimes(_) => "not reached",
        };
        out.insert(check.name().to_string(), verdict.into());
    }
    Value::Object(out)
}

impl Explorer {
    /// `/.status`: the check's progress, then its figures and verdicts.
    pub fn status(&self) -> Value {
        let checking = self
            .checking
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let done = checking.done.as_ref();
        let (states, unique, depth) = match (done, &checking.progress) {
            (Some(d), _) => (d.run.states, d.run.unique, d.run.depth),
            (None, Some(p)) => (p.states, p.unique, p.depth),
            (None, None) => (1, 1, 0),
        };
        let progress = match (done, &checking.progress) {
            (Some(_), _) => None,
            (None, Some(p)) => Some(format!(
                "checking at start: depth {}, {} unique states, {:.1} s",
                p.depth,
                p.unique,
                p.elapsed.as_secs_f64()
            )),
            (None, None) => Some("checking at start".to_string()),
        };
        json!({
            "done": done.is_some(),
            "model": self.title,
            "state_count": states,
            "unique_state_count": unique,
            "max_depth": depth,
            "properties": properties(done),
            "recent_path": progress,
            "search": done.map(|d| d.search.clone()),
            "seconds": done.map(|d| d.run.total.as_secs_f64()),
            "as_expected": done.map(|d| d.run.as_expected()),
        })
    }

    /// The view of one state: stateright's fields, the state's verdicts and violations.
    fn view(&self, actions: &[Action], state: &Cluster, properties: &Value) -> Map<String, Value> {
        let violations: Vec<String> = render::violations(state)
            .iter()
            .map(ToString::to_string)
            .collect();
        let mut view = Map::new();
        view.insert(
            "state".into(),
            render::state(&self.model.bounds, state).into(),
        );
        view.insert("fingerprint".into(), fingerprint(state).to_string().into());
        view.insert("properties".into(), properties.clone());
        view.insert("svg".into(), self.model.diagram(actions, state).into());
        view.insert("verdicts".into(), verdicts(state));
        view.insert("violations".into(), violations.into());
        view
    }

    /// `/.states<path>`: for an empty path the initial state; else the successors of the state
    /// that the action indices in `path` lead to (the first index picks the initial state).
    pub fn states(&self, path: &str) -> Result<Value, String> {
        use stateright::Model;
        let trimmed = path.strip_suffix('/').unwrap_or(path);
        let parts: Vec<&str> = trimmed.split('/').skip(1).collect();
        let indices: Vec<usize> = parts
            .iter()
            .map(|p| p.parse().ok())
            .collect::<Option<_>>()
            .filter(|_| trimmed.is_empty() || trimmed.starts_with('/'))
            .ok_or_else(|| format!("Unable to parse action indices {trimmed}"))?;
        let properties = properties(
            self.checking
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .done
                .as_ref(),
        );
        let initial = self.model.initial();
        let Some((&first, rest)) = indices.split_first() else {
            let mut view = self.view(&[], &initial, &properties);
            view.insert("actionIndex".into(), 0.into());
            return Ok(Value::Array(vec![Value::Object(view)]));
        };
        let missing = || format!("Unable to find state following action indices {trimmed}");
        if first != 0 {
            return Err(missing());
        }
        let mut state = initial;
        let mut actions = Vec::new();
        for &i in rest {
            let action = self
                .model
                .enabled(&state)
                .into_iter()
                .nth(i)
                .ok_or_else(missing)?;
            state = self.model.step(&state, &action);
            actions.push(action);
        }
        let successors = self
            .model
            .enabled(&state)
            .into_iter()
            .enumerate()
            .map(|(i, action)| {
                let next = self.model.step(&state, &action);
                let mut path = actions.clone();
                path.push(action.clone());
                let mut view = self.view(&path, &next, &properties);
                view.insert("action".into(), self.model.format_action(&action).into());
                if let Some(outcome) = self.model.format_step(&state, action) {
                    view.insert("outcome".into(), outcome.into());
                }
                view.insert("actionIndex".into(), i.into());
                view.insert("within".into(), self.model.within(&next).into());
                Value::Object(view)
            })
            .collect();
        Ok(Value::Array(successors))
    }
}
