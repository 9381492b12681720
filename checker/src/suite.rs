//! `isr-check suite`: every preset at its CI bounds, as a table or JSON.

use crate::run::{
    execute, expected_failures, found_failures, mib, peak_memory_kib, summary, RunArgs,
};
use crate::target::{Overrides, Target};
use isr_models::presets::PRESETS;
use serde_json::json;
use std::process::ExitCode;

pub fn cmd_suite(args: &RunArgs) -> ExitCode {
    if !args.json {
        println!(
            "{:<22} {:<44} {:<44} {:>9} {:>9} {:>8}  cex",
            "preset", "expected", "found", "states", "unique", "time"
        );
    }
    let mut rows = Vec::new();
    let mut all_ok = true;
    let mut total = 0.0;
    for preset in PRESETS {
        // Every preset at its CI bounds, the reduction audited against the core as it runs.
        let audited = Overrides {
            audit_reduction: true,
            ..Overrides::default()
        };
        let target = Target::new(preset.name, &audited)
            .unwrap_or_else(|_| unreachable!("presets name themselves"));
        let (r, spilled) = match execute(&target, args, false) {
            Ok(checked) => (checked.run, checked.spilled),
            Err(e) => {
                eprintln!("error: {}: {e}", preset.name);
                return ExitCode::FAILURE;
            }
        };
        let ok = r.as_expected();
        all_ok &= ok;
        total += r.total.as_secs_f64();
        let lengths: Vec<String> = r
            .verdicts
            .iter()
            .filter_map(|v| v.counterexample.as_ref().map(|t| t.len().to_string()))
            .collect();
        let (expected, found) = (
            summary(&expected_failures(preset)),
            summary(&found_failures(&r)),
        );
        if args.json {
            rows.push(json!({
                "preset": preset.name,
                "expected": expected,
                "found": found,
                "as_expected": ok,
                "states": r.states,
                "unique_states": r.unique,
                "seconds": r.total.as_secs_f64(),
                "counterexample_lengths": lengths,
                "spilled_fingerprints": spilled.fingerprints,
                "spill_merges": spilled.merges,
            }));
        } else {
            println!(
                "{:<22} {:<44} {:<44} {:>9} {:>9} {:>7.2}s  {}{}",
                preset.name,
                expected,
                found,
                r.states,
                r.unique,
                r.total.as_secs_f64(),
                if lengths.is_empty() {
                    "-".to_string()
                } else {
                    lengths.join(",")
                },
                if ok { "" } else { "  << MISMATCH" }
            );
        }
    }
    if args.json {
        let out = json!({
            "presets": rows,
            "as_expected": all_ok,
            "seconds": total,
            "peak_memory_kib": peak_memory_kib(),
        });
        println!("{out:#}");
    } else {
        println!();
        println!(
            "{} presets, {}; {:.1} s; peak memory {}",
            PRESETS.len(),
            if all_ok {
                "all as expected"
            } else {
                "MISMATCH"
            },
            total,
            mib(peak_memory_kib())
        );
    }
    if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
