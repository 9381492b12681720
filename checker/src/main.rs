//! `isr-check`: model-check the isr replication protocol, its safe forms and its historical bugs.
//!
//! This binary is the I/O shell around `isr-models`: it parses arguments, runs stateright,
//! measures time and peak memory, and prints verdicts and shortest counterexamples.

use clap::{Args, Parser, Subcommand, ValueEnum};
use isr::sim::Bounds;
use isr::{Acks, Config, Property};
use isr_models::check::{run, symmetry_pays, Progress, Run, Search};
use isr_models::presets::{Outcome, Preset, PRESETS};
use isr_models::shortest::Trace;
use isr_models::{render, Check, IsrModel};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "isr-check",
    version,
    about = "Model-check Kafka-style ISR replication"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the presets: bounds, rule switches and expected verdicts.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Check one preset, possibly with other bounds or rules.
    Check {
        preset: String,
        #[command(flatten)]
        overrides: Overrides,
        #[command(flatten)]
        run: RunArgs,
        /// How counterexamples are printed.
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
    },
    /// Check every preset at its CI bounds and print a table.
    Suite {
        #[command(flatten)]
        run: RunArgs,
    },
    /// Serve stateright's Explorer on a preset.
    Explore {
        preset: String,
        #[command(flatten)]
        overrides: Overrides,
        #[arg(long, default_value = "127.0.0.1:3000")]
        addr: String,
    },
}

#[derive(Args)]
struct RunArgs {
    /// Depth-first search (the default for exhaustive runs: little memory).
    #[arg(long, conflicts_with = "bfs")]
    dfs: bool,
    /// Breadth-first search (the default for bug presets, whose search stops at the expected
    /// failure: it finds shallow counterexamples first).
    #[arg(long)]
    bfs: bool,
    /// Symmetry reduction over broker renamings, with either search (the default from three
    /// brokers on; with two, the first leader pins both names and little merges).
    #[arg(long, conflicts_with = "no_symmetry")]
    symmetry: bool,
    /// No symmetry reduction.
    #[arg(long)]
    no_symmetry: bool,
    /// Worker threads.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..))]
    threads: u16,
    /// Machine-readable output; no progress.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Default)]
struct Overrides {
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=5))]
    replicas: Option<u32>,
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..))]
    records: Option<u8>,
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_epoch: Option<u32>,
    /// Clean shutdowns in all.
    #[arg(long, value_name = "N")]
    crashes: Option<u8>,
    #[arg(long, value_name = "N")]
    unclean_crashes: Option<u8>,
    /// Changes of the controller's partition state other than elections.
    #[arg(long, value_name = "N")]
    isr_changes: Option<u32>,
    /// Messages the network may lose.
    #[arg(long, value_name = "N")]
    drops: Option<u8>,
    /// Messages the network may deliver twice.
    #[arg(long, value_name = "N")]
    duplicates: Option<u8>,
    /// Times the controller may fence a running broker (a zombie until it registers again).
    #[arg(long, value_name = "N")]
    session_expiries: Option<u8>,
    /// Times the controller role may move to a new controller while the old one runs on as a
    /// zombie.
    #[arg(long, value_name = "N")]
    controller_failovers: Option<u8>,
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    min_isr: Option<u32>,
    /// Producer acks: 0, 1 or all.
    #[arg(long, value_name = "X")]
    acks: Option<String>,
    /// Whether a consumer reads: on or off.
    #[arg(long, value_name = "on|off")]
    consumer: Option<String>,
    /// A rule switch, as NAME=VALUE (repeatable).
    #[arg(long = "rule", value_name = "NAME=VALUE")]
    rules: Vec<String>,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Text,
    Mermaid,
}

/// A bad argument: printed on one line, exit status 2.
struct Usage(String);

/// What is checked: a preset, possibly changed on the command line.
struct Target {
    preset: &'static Preset,
    cfg: Config,
    bounds: Bounds,
    isr_changes: u32,
    /// Changed from the preset: then every property is expected to hold.
    adhoc: bool,
}

impl Target {
    fn new(name: &str, o: &Overrides) -> Result<Target, Usage> {
        let preset = Preset::find(name).ok_or_else(|| {
            Usage(format!(
                "unknown preset `{name}`: expected one of {}",
                Preset::names()
            ))
        })?;
        let mut cfg = preset.config();
        let mut b = preset.bounds.clone();
        if let Some(n) = o.replicas {
            b.replicas = n;
        }
        if let Some(n) = o.records {
            b.records = n;
        }
        if let Some(n) = o.max_epoch {
            b.max_leader_epoch = n;
        }
        if let Some(n) = o.crashes {
            b.clean_crashes = n;
        }
        if let Some(n) = o.unclean_crashes {
            b.unclean_crashes = n;
        }
        if let Some(n) = o.drops {
            b.drops = n;
        }
        if let Some(n) = o.duplicates {
            b.duplicates = n;
        }
        if let Some(n) = o.session_expiries {
            b.session_expiries = n;
        }
        if let Some(n) = o.controller_failovers {
            b.controller_failovers = n;
        }
        if let Some(a) = &o.acks {
            b.acks = a.parse::<Acks>().map_err(|e| Usage(e.to_string()))?;
        }
        if let Some(c) = &o.consumer {
            b.consumer = match c.as_str() {
                "on" => true,
                "off" => false,
                other => {
                    return Err(Usage(format!(
                        "invalid consumer `{other}`: expected one of on, off"
                    )))
                }
            };
        }
        let isr_changes = o.isr_changes.unwrap_or(preset.isr_changes);
        if let Some(m) = o.min_isr {
            cfg.min_insync_replicas = m as usize;
        }
        if cfg.min_insync_replicas > b.replicas as usize {
            return Err(Usage(format!(
                "invalid --min-isr {}: expected 1 to the replica count {}",
                cfg.min_insync_replicas, b.replicas
            )));
        }
        for rule in &o.rules {
            let (name, value) = rule.split_once('=').ok_or_else(|| {
                Usage(format!(
                    "invalid --rule `{rule}`: expected NAME=VALUE with NAME one of {}",
                    isr::Rules::NAMES
                ))
            })?;
            cfg.rules
                .set(name, value)
                .map_err(|e| Usage(e.to_string()))?;
        }
        let adhoc =
            cfg != preset.config() || b != preset.bounds || isr_changes != preset.isr_changes;
        Ok(Target {
            preset,
            cfg,
            bounds: b,
            isr_changes,
            adhoc,
        })
    }

    fn model(&self) -> IsrModel {
        IsrModel::new(self.cfg, self.bounds.clone(), self.isr_changes)
    }

    /// Ad hoc configurations are explored exhaustively and expected to satisfy everything.
    fn expected(&self, check: Check) -> Option<Outcome> {
        if self.adhoc {
            Some(Outcome::Holds)
        } else {
            self.preset.expected(check)
        }
    }

    fn stop_at(&self) -> Option<BTreeSet<&'static str>> {
        if self.adhoc {
            None
        } else {
            self.preset.stop_at()
        }
    }
}

fn describe_bounds(b: &Bounds) -> String {
    format!(
        "{} replicas, {} records, max leader epoch {}, {} clean + {} unclean crashes, \
         {} session expiries, {} controller failovers, {} drops, {} duplicates, acks={}, \
         consumer {}",
        b.replicas,
        b.records,
        b.max_leader_epoch,
        b.clean_crashes,
        b.unclean_crashes,
        b.session_expiries,
        b.controller_failovers,
        b.drops,
        b.duplicates,
        b.acks,
        if b.consumer { "on" } else { "off" }
    )
}

fn describe_rules(cfg: &Config) -> String {
    let switches = cfg.rules.unsafe_switches();
    let rules = if switches.is_empty() {
        "safe protocol".to_string()
    } else {
        switches.join(" ")
    };
    format!("{rules}; min.insync.replicas={}", cfg.min_insync_replicas)
}

fn bounds_json(b: &Bounds) -> Value {
    json!({
        "replicas": b.replicas, "records": b.records, "max_leader_epoch": b.max_leader_epoch,
        "clean_crashes": b.clean_crashes, "unclean_crashes": b.unclean_crashes,
        "drops": b.drops, "duplicates": b.duplicates, "session_expiries": b.session_expiries,
        "controller_failovers": b.controller_failovers,
        "acks": b.acks.to_string(), "consumer": b.consumer,
    })
}

/// `fails: A, B` or `all hold`, from a list of failing checks.
fn summary(failing: &[Check]) -> String {
    if failing.is_empty() {
        "all hold".to_string()
    } else {
        let names: Vec<&str> = failing.iter().map(|c| c.name()).collect();
        format!("fails {}", names.join(", "))
    }
}

fn expected_failures(p: &Preset) -> Vec<Check> {
    Check::all()
        .into_iter()
        .filter(|&c| p.expected(c) == Some(Outcome::Fails))
        .collect()
}

fn found_failures(r: &Run) -> Vec<Check> {
    r.verdicts
        .iter()
        .filter(|v| v.found == Some(Outcome::Fails))
        .map(|v| v.check)
        .collect()
}

/// Peak resident memory of this process, in KiB (VmHWM), where /proc tells it.
fn peak_memory_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn mib(kib: Option<u64>) -> String {
    kib.map_or("unknown".to_string(), |k| {
        format!("{:.1} MiB", k as f64 / 1024.0)
    })
}

fn search_of(args: &RunArgs, stops: bool) -> Search {
    if args.bfs || (stops && !args.dfs) {
        Search::Bfs
    } else {
        Search::Dfs
    }
}

/// Runs the checker, with live progress on a terminal unless quiet.
fn execute(target: &Target, args: &RunArgs, quiet: bool) -> Run {
    let live = !quiet && !args.json && std::io::stdout().is_terminal();
    let mut last = Duration::ZERO;
    let result = run(
        &target.model(),
        |c| target.expected(c),
        target.stop_at(),
        search_of(args, target.stop_at().is_some()),
        args.symmetry || (!args.no_symmetry && symmetry_pays(&target.bounds)),
        args.threads as usize,
        |p: Progress| {
            if live && p.elapsed >= last + Duration::from_millis(250) {
                last = p.elapsed;
                let rate = p.unique as f64 / p.elapsed.as_secs_f64().max(1e-9);
                eprint!(
                    "\r{} states, {} unique, {:.0} states/s, depth {}   ",
                    p.states, p.unique, rate, p.depth
                );
            }
        },
    );
    if live && last > Duration::ZERO {
        eprint!("\r\x1b[2K");
    }
    result
}

fn rate(r: &Run) -> f64 {
    r.unique as f64 / r.elapsed.as_secs_f64().max(1e-9)
}

fn search_name(r: &Run) -> &'static str {
    match (r.search, r.symmetry) {
        (Search::Bfs, false) => "BFS",
        (Search::Bfs, true) => "BFS with symmetry reduction",
        (Search::Dfs, false) => "DFS",
        (Search::Dfs, true) => "DFS with symmetry reduction",
    }
}

/// An outcome for a table: `-` when not asserted or not decided.
fn show(o: Option<Outcome>) -> String {
    o.map_or("-".to_string(), |o| o.to_string())
}

fn violation(trace: &Trace, check: Check) -> Option<String> {
    match check {
        Check::Always(p) => trace.last().check(p).err().map(|v| v.to_string()),
        Check::Sometimes(_) => None,
    }
}

fn cmd_check(target: &Target, args: &RunArgs, format: Format) -> ExitCode {
    let r = execute(target, args, false);
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
            "threads": args.threads,
            "states": r.states,
            "unique_states": r.unique,
            "max_depth": r.depth,
            "explore_seconds": r.elapsed.as_secs_f64(),
            "total_seconds": r.total.as_secs_f64(),
            "states_per_second": rate(&r),
            "peak_memory_kib": peak,
            "as_expected": ok,
            "verdicts": verdicts,
        });
        println!("{out:#}");
    } else {
        println!(
            "preset {}{}: {}",
            target.preset.name,
            if target.adhoc {
                " (ad hoc: every property expected to hold)"
            } else {
                ""
            },
            describe_rules(&target.cfg)
        );
        println!("bounds: {}", describe_bounds(&target.bounds));
        println!("search: {}, {} threads", search_name(&r), args.threads);
        println!(
            "states: {} total, {} unique; max depth {}; {:.2} s ({:.2} s with counterexamples); \
             {:.0} states/s; peak memory {}",
            r.states,
            r.unique,
            r.depth,
            r.elapsed.as_secs_f64(),
            r.total.as_secs_f64(),
            rate(&r),
            mib(peak)
        );
        println!();
        println!(
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
            println!(
                "{:<38} {:<9} {:<9} {:<7} {len}{mark}",
                v.check.name(),
                kind,
                show(v.expected),
                show(v.found)
            );
        }
        for v in &r.verdicts {
            let Some(trace) = &v.counterexample else {
                continue;
            };
            println!();
            println!(
                "counterexample for {} ({} steps): {}",
                v.check,
                trace.len(),
                violation(trace, v.check).unwrap_or_default()
            );
            match format {
                Format::Text => print!("{}", render::trace_text(&target.bounds, trace)),
                Format::Mermaid => print!("{}", render::mermaid(target.bounds.replicas, trace)),
            }
        }
        println!();
        println!(
            "verdict: {}",
            if ok { "as expected" } else { "NOT as expected" }
        );
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn cmd_suite(args: &RunArgs) -> ExitCode {
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
        let target = Target::new(preset.name, &Overrides::default())
            .unwrap_or_else(|_| unreachable!("presets name themselves"));
        let r = execute(&target, args, false);
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

fn cmd_list(json_out: bool) -> ExitCode {
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

fn cmd_explore(target: &Target, addr: &str) -> ExitCode {
    use stateright::Model;
    println!(
        "Explorer for preset {} ({}; {}) on http://{addr}/",
        target.preset.name,
        describe_rules(&target.cfg),
        describe_bounds(&target.bounds)
    );
    let _checker = target.model().checker().serve(addr);
    loop {
        std::thread::park();
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if e.use_stderr() => {
            let msg = e.to_string();
            eprintln!("{}", msg.lines().next().unwrap_or("invalid arguments"));
            return ExitCode::from(2);
        }
        Err(e) => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
    };
    let result = match &cli.command {
        Command::List { json } => Ok(cmd_list(*json)),
        Command::Check {
            preset,
            overrides,
            run,
            format,
        } => Target::new(preset, overrides).map(|t| cmd_check(&t, run, *format)),
        Command::Suite { run } => Ok(cmd_suite(run)),
        Command::Explore {
            preset,
            overrides,
            addr,
        } => Target::new(preset, overrides).map(|t| cmd_explore(&t, addr)),
    };
    match result {
        Ok(code) => code,
        Err(Usage(msg)) => {
            eprintln!("error: {msg}");
            ExitCode::from(2)
        }
    }
}
