//! `isr-check check`: one target's verdicts, figures and shortest counterexamples, as text,
//! Mermaid or JSON.

use crate::run::{
    execute, limit_line, mib, peak_memory_kib, rate, search_name, show, spill_note, RunArgs,
};
use crate::target::{bounds_json, describe_bounds, describe_rules, Target};
use clap::ValueEnum;
use isr_models::check::{Run, Verdict};
use isr_models::engine::budget::Spilled;
use isr_models::engine::Ending;
use isr_models::render::{self, Section};
use isr_models::shortest::Trace;
use isr_models::Check;
use serde_json::{json, Value};
use std::fmt::Write;
use std::process::ExitCode;

#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
    Text,
    Mermaid,
}

/// How a search ended, for JSON.
fn ending_name(r: &Run) -> &'static str {
    match r.ending {
        Ending::Exhausted => "exhausted",
        Ending::Found => "found",
        Ending::MaxDepth => "max-depth",
        Ending::TimeLimit => "time-limit",
        Ending::SpillFailed => "spill-failed",
    }
}

pub fn violation(trace: &Trace, check: Check) -> Option<String> {
    match check {
        Check::Always(p) => trace.last().check(p).err().map(|v| v.to_string()),
        Check::Sometimes(_) => None,
    }
}

pub fn cmd_check(target: &Target, args: &RunArgs, format: Format) -> ExitCode {
    let (r, spilled) = match execute(target, args, false) {
        Ok(checked) => (checked.run, checked.spilled),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let peak = peak_memory_kib();
    let ok = r.as_expected();
    if args.json {
        let verdicts: Vec<Value> = r
            .verdicts
            .iter()
            .map(|v| {
                json!({
                    "property": v.check.name(),
                    "kind": match v.check { Check::Always(_) => "always", Check::Sometimes(_) => "sometimes" },
                    "expected": v.expected,
                    "found": v.found,
                    "counterexample_length": v.counterexample.as_ref().map(Trace::len),
                    "violation": v.counterexample.as_ref().and_then(|t| violation(t, v.check)),
                    "counterexample": v.counterexample.as_ref().map(|t| {
                        t.steps.iter().map(|(a, _)| a.to_string()).collect::<Vec<_>>()
                    }),
                })
            })
            .collect();
        let out = json!({
            "preset": target.preset.name,
            "adhoc": target.adhoc,
            "rules": target.cfg.rules.unsafe_switches(),
            "min_insync_replicas": target.cfg.min_insync_replicas,
            "bounds": bounds_json(&target.bounds),
            "search": search_name(&r),
            "threads": args.search.threads,
            "states": r.states,
            "unique_states": r.unique,
            "max_depth": r.depth,
            "explore_seconds": r.elapsed.as_secs_f64(),
            "total_seconds": r.total.as_secs_f64(),
            "states_per_second": rate(&r),
            "peak_memory_kib": peak,
            "memory_limit_bytes": args.search.memory_limit_bytes(),
            "spilled_fingerprints": spilled.fingerprints,
            "spill_merges": spilled.merges,
            "as_expected": ok,
            "expectations": target.expectations.name(),
            "ending": ending_name(&r),
            "complete_to_depth": r.complete_to.filter(|_| r.limited()),
            "limit": limit_line(&r),
            "verdicts": verdicts,
        });
        println!("{out:#}");
    } else {
        let report = report(target, args, &r, &spilled, peak);
        let undecided = r
            .verdicts
            .iter()
            .filter(|v| v.expected.is_some() && v.found.is_none())
            .count();
        let verdict = match (ok, r.limited() && undecided > 0) {
            (true, false) => "verdict: as expected".to_string(),
            (true, true) => format!(
                "verdict: as expected so far ({undecided} expected verdicts undecided at the limit)"
            ),
            (false, _) => "verdict: NOT as expected".to_string(),
        };
        let headline = |v: &Verdict, trace: &Trace| {
            format!(
                "counterexample for {} ({} steps): {}",
                v.check,
                trace.len(),
                violation(trace, v.check).unwrap_or_default()
            )
        };
        let counterexamples = r
            .verdicts
            .iter()
            .filter_map(|v| v.counterexample.as_ref().map(|t| (v, t)));
        match format {
            Format::Text => {
                print!("{report}");
                for (v, trace) in counterexamples {
                    println!();
                    println!("{}", headline(v, trace));
                    print!("{}", render::trace_text(&target.bounds, trace));
                }
                println!();
                println!("{verdict}");
            }
            Format::Mermaid => {
                // Only Mermaid on stdout: the report as comments, then one diagram.
                let mut comment = report;
                let sections: Vec<Section> = counterexamples
                    .map(|(v, trace)| {
                        comment.push('\n');
                        comment.push_str(&headline(v, trace));
                        comment.push('\n');
                        Section {
                            heading: format!(
                                "counterexample for {} ({} steps)",
                                v.check,
                                trace.len()
                            ),
                            trace,
                            violated: violation(trace, v.check),
                        }
                    })
                    .collect();
                comment.push('\n');
                comment.push_str(&verdict);
                print!(
                    "{}",
                    render::mermaid(target.bounds.replicas, &comment, &sections)
                );
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The report's head: what was checked, how, the figures, and one line per property.
fn report(
    target: &Target,
    args: &RunArgs,
    r: &Run,
    spilled: &Spilled,
    peak: Option<u64>,
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "preset {}{}: {}",
        target.preset.name,
        target.describe_expectations(),
        describe_rules(&target.cfg)
    );
    let _ = writeln!(out, "bounds: {}", describe_bounds(&target.bounds));
    for &p in target.preset.fails {
        if let Some(why) = target.atomic_gap(p) {
            let _ = writeln!(
                out,
                "atomic model: {p} is expected to hold; its bug needs the full model: {why}"
            );
        }
    }
    let _ = writeln!(
        out,
        "search: {}, {} threads",
        search_name(r),
        args.search.threads
    );
    let _ = writeln!(
        out,
        "states: {} total, {} unique; max depth {}; {:.2} s ({:.2} s with counterexamples); \
         {:.0} states/s; peak memory {}{}",
        r.states,
        r.unique,
        r.depth,
        r.elapsed.as_secs_f64(),
        r.total.as_secs_f64(),
        rate(r),
        mib(peak),
        spill_note(spilled)
    );
    if let Some(line) = limit_line(r) {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<38} {:<9} {:<9} {:<7} shortest counterexample",
        "property", "kind", "expected", "found"
    );
    for v in &r.verdicts {
        let kind = match v.check {
            Check::Always(_) => "always",
            Check::Sometimes(_) => "sometimes",
        };
        let len = v
            .counterexample
            .as_ref()
            .map_or(String::new(), |t| format!("{} steps", t.len()));
        let mark = if v.as_expected() {
            ""
        } else {
            "  << unexpected"
        };
        let _ = writeln!(
            out,
            "{:<38} {:<9} {:<9} {:<7} {len}{mark}",
            v.check.name(),
            kind,
            show(v.expected),
            show(v.found)
        );
    }
    out
}
