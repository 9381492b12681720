//! `isr-check list`: the presets, their bounds, rule switches and expected verdicts.

use crate::run::{expected_failures, summary};
use crate::target::{bounds_json, describe_bounds, describe_rules};
use isr::Property;
use isr_models::presets::PRESETS;
use serde_json::{json, Value};
use std::process::ExitCode;

pub fn cmd_list(json_out: bool) -> ExitCode {
    if json_out {
        let out: Vec<Value> = PRESETS
            .iter()
            .map(|p| {
                json!({
                    "preset": p.name,
                    "about": p.about,
                    "rules": p.rules().unsafe_switches(),
                    "min_insync_replicas": p.min_insync_replicas,
                    "bounds": bounds_json(&p.bounds),
                    "expected": summary(&expected_failures(p)),
                    "counterexample_steps": p.fails.iter().zip(p.steps).map(|(f, s)| json!({
                        "property": f.name(),
                        "full": s.full,
                        "atomic": s.atomic.ok(),
                        "atomic_gap": s.atomic.err(),
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        let rules: Vec<Value> = isr::Rules::default()
            .describe()
            .into_iter()
            .map(|r| json!({"name": r.name, "safe": r.safe, "choices": r.choices, "rule": r.rule}))
            .collect();
        println!("{:#}", json!({ "presets": out, "rules": rules }));
        return ExitCode::SUCCESS;
    }
    for p in PRESETS {
        println!("{}", p.name);
        println!("  {}", p.about);
        println!("  rules:    {}", describe_rules(&p.config()));
        println!("  bounds:   {}", describe_bounds(&p.bounds));
        println!("  expected: {}", summary(&expected_failures(p)));
        for (f, s) in p.fails.iter().zip(p.steps) {
            match s.atomic {
                Ok(atomic) => println!(
                    "  shortest: {f} in {} steps; atomic model (--model atomic): {atomic}",
                    s.full
                ),
                Err(why) => println!(
                    "  shortest: {f} in {} steps; atomic model: not shown ({why})",
                    s.full
                ),
            }
        }
        println!();
    }
    println!("rule switches (--rule NAME=VALUE):");
    for r in isr::Rules::default().describe() {
        println!(
            "  {:<22} safe {:<8} choices {:<32} rule {}",
            r.name, r.safe, r.choices, r.rule
        );
    }
    println!();
    let props: Vec<&str> = Property::ALL.iter().map(|p| p.name()).collect();
    println!("always:    {}", props.join(", "));
    let guards: Vec<&str> = isr_models::Guard::ALL.iter().map(|g| g.name()).collect();
    println!("sometimes: {}", guards.join(", "));
    ExitCode::SUCCESS
}
