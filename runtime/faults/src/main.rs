//! `isr-faults`: Kafka's replication-test failures, network partitions, pauses and disk faults
//! on real `isr` processes, each link through a fault proxy, under a workload whose every
//! operation is recorded and then judged by a history checker.
//!
//! ```text
//! isr-faults list
//! isr-faults run SCENARIO...|all [--duration SECS] [--seed N] [--json]
//! ```

mod client;
mod cluster;
mod history;
mod proxy;
mod report;
mod rng;
mod run;
mod scenario;
mod workload;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(name = "isr-faults", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the scenarios: name, expected outcome (safe or loss), fault.
    List,
    /// Run scenarios and print one row each; exits non-zero unless every safe scenario passed
    /// and every expected loss was reproduced.
    Run(RunArgs),
}

#[derive(clap::Args)]
struct RunArgs {
    /// Scenario names, or `all`.
    #[arg(required = true, value_name = "SCENARIO")]
    scenarios: Vec<String>,
    /// How long each scenario's faults last, in seconds (some need a few seconds at least:
    /// a session to expire, a follower to fall out of the ISR, and take that long whatever
    /// this says).
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    duration: u64,
    /// Seed of the schedules' random choices (the flapping links).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print a JSON array of {scenario, expected, attempted, acknowledged, lost, duplicated,
    /// unavailable_ms, verdict} instead of the table.
    #[arg(long)]
    json: bool,
    /// The `isr` binary to run (default: the one next to this executable).
    #[arg(long, value_name = "PATH")]
    isr: Option<PathBuf>,
    /// Print every scenario's fault schedule as it happens, and its details after.
    #[arg(long, short)]
    verbose: bool,
    /// Keep each scenario's directory (processes' data and logs) and print where it is.
    #[arg(long)]
    keep: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::List => {
            for s in scenario::all() {
                println!("{:<28} {:<5} {}", s.name, s.expected, s.fault);
            }
            ExitCode::SUCCESS
        }
        Command::Run(args) => run(args),
    }
}

/// The `isr` binary: `--isr`, else next to this executable (cargo builds both into the same
/// target directory).
fn isr_binary(given: Option<PathBuf>) -> Result<PathBuf, String> {
    let path = match given {
        Some(p) => p,
        None => std::env::current_exe()
            .map_err(|e| format!("finding this executable: {e}"))?
            .with_file_name("isr"),
    };
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "no isr binary at {}: build it (cargo build --release -p isr-runtime) or give --isr",
            path.display()
        ))
    }
}

fn run(args: RunArgs) -> ExitCode {
    let all = scenario::all();
    let chosen: Vec<&scenario::Scenario> = if args.scenarios.iter().any(|s| s == "all") {
        all.iter().collect()
    } else {
        let mut chosen = Vec::new();
        for name in &args.scenarios {
            match all.iter().find(|s| &s.name == name) {
                Some(s) => chosen.push(s),
                None => {
                    eprintln!("isr-faults: unknown scenario {name}; `isr-faults list` names them");
                    return ExitCode::from(2);
                }
            }
        }
        chosen
    };
    let isr = match isr_binary(args.isr) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("isr-faults: {e}");
            return ExitCode::from(2);
        }
    };
    let opts = run::Options {
        isr,
        duration: Duration::from_secs(args.duration),
        seed: args.seed,
        keep: args.keep,
        verbose: args.verbose,
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("isr-faults: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!(
        "isr-faults: {} scenario(s), --duration {} --seed {}",
        chosen.len(),
        args.duration,
        args.seed
    );
    let mut reports = Vec::new();
    for s in chosen {
        eprintln!("== {} ({}, expected {})", s.name, s.fault, s.expected);
        let started = std::time::Instant::now();
        let report = runtime.block_on(run::run(s, &opts));
        eprintln!(
            "   {} in {:.1} s: {} attempted, {} acknowledged, {} lost, {} duplicated",
            report.verdict.as_str(),
            started.elapsed().as_secs_f64(),
            report.findings.attempted,
            report.findings.acknowledged,
            report.findings.lost.len(),
            report.findings.duplicated.len()
        );
        let surprising = !report.verdict.ok() || report.dir.is_some();
        if surprising || args.verbose {
            eprint!("{}", report::details(&report, true));
        }
        if s.kind == scenario::Kind::SlowFollower {
            eprintln!("acks=all latency to partition 0 (its leader's link to a follower is slow):");
            let end = report
                .history
                .writes
                .iter()
                .filter_map(|w| w.completed)
                .max();
            eprint!(
                "{}",
                report::latency_chart(
                    &report.history,
                    0,
                    &report.marks,
                    Duration::from_millis(500)
                )
            );
            eprint!(
                "{}",
                report::phases(&report.history, 0, &report.marks, end.unwrap_or_default())
            );
        }
        reports.push(report);
    }
    if args.json {
        println!("{}", report::json(&reports));
    } else {
        print!("{}", report::table(&reports));
    }
    if reports.iter().all(|r| r.verdict.ok()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
