//! Running the checker on a target: the search options, live progress, and the figures and
//! verdict summaries that reports share.

use crate::target::Target;
use clap::Args;
use isr_models::check::{run_with, symmetry_pays, Options, Progress, Run, Search};
use isr_models::engine::budget::{Budget, Spilled};
use isr_models::engine::spill::SpillError;
use isr_models::engine::{Ending, Limits};
use isr_models::presets::{Outcome, Preset};
use isr_models::Check;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How to search: the options `check`, `suite` and `explore` share.
#[derive(Args)]
pub struct SearchArgs {
    /// Depth-first search (the default for exhaustive runs: little memory).
    #[arg(long, conflicts_with = "bfs")]
    pub dfs: bool,
    /// Breadth-first search (the default for bug presets, whose search stops at the expected
    /// failure: it finds shallow counterexamples first).
    #[arg(long)]
    pub bfs: bool,
    /// Symmetry reduction over broker renamings, with either search (the default from three
    /// brokers on; with two, the first leader pins both names and little merges).
    #[arg(long, conflicts_with = "no_symmetry")]
    pub symmetry: bool,
    /// No symmetry reduction.
    #[arg(long)]
    pub no_symmetry: bool,
    /// Worker threads.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..))]
    pub threads: u16,
    /// Explore no state more than N steps from the initial state (breadth-first): verdicts
    /// are then complete to depth N, and what could only be decided deeper stays undecided.
    #[arg(long, value_name = "N", conflicts_with = "dfs")]
    pub max_depth: Option<usize>,
    /// Stop after SECS seconds (breadth-first unless --dfs: complete to the last depth
    /// finished).
    #[arg(long, value_name = "SECS", value_parser = positive_seconds)]
    pub time_limit: Option<f64>,
    /// Memory for the visited set's fingerprints, in GiB (fractions allowed); past it the set
    /// spills to a sorted file on disk and the search goes on [default: 3/4 of physical
    /// memory].
    #[arg(long, value_name = "GiB", value_parser = positive_gib)]
    pub memory_limit: Option<f64>,
    /// Where the visited set spills: a directory of its own is made there for each search and
    /// removed after it [default: $TMPDIR, or /tmp].
    #[arg(long, value_name = "DIR", value_parser = directory)]
    pub spill_dir: Option<PathBuf>,
}

/// A finished run, and what its visited set put on disk.
pub struct Checked {
    pub run: Run,
    pub spilled: Spilled,
}

/// A memory limit: a positive number of GiB.
fn positive_gib(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x > 0.0 && (x * GIB).is_finite() => Ok(x),
        _ => Err(format!("`{s}` is not a positive number of GiB")),
    }
}

/// A directory that exists (the search makes its own in it when it first spills, so a typo is
/// refused now rather than after hours).
fn directory(s: &str) -> Result<PathBuf, String> {
    let dir = PathBuf::from(s);
    if dir.is_dir() {
        Ok(dir)
    } else {
        Err(format!("`{s}` is not a directory"))
    }
}

const GIB: f64 = (1u64 << 30) as f64;

/// Three quarters of physical memory (MemTotal), or no bound where /proc does not tell it.
fn default_memory_limit() -> usize {
    let total_kib = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        let line = m.lines().find(|l| l.starts_with("MemTotal:"))?;
        line.split_whitespace().nth(1)?.parse::<usize>().ok()
    });
    total_kib.map_or(usize::MAX, |k| k / 4 * 3 * 1024)
}

/// A time limit: a positive number of seconds.
fn positive_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x > 0.0 && x.is_finite() => Ok(x),
        _ => Err(format!("`{s}` is not a positive number of seconds")),
    }
}

impl SearchArgs {
    /// Checks `target` as these options say, calling `progress` while the search runs; an
    /// error when the disk failed the visited set.
    pub fn run(
        &self,
        target: &Target,
        progress: impl FnMut(Progress),
    ) -> Result<Checked, SpillError> {
        let dir = self.spill_dir.clone().unwrap_or_else(std::env::temp_dir);
        let budget = Budget::new(self.memory_limit_bytes(), dir);
        let options = Options {
            search: self.search(target.stop_at().is_some()),
            symmetry: self.symmetry || (!self.no_symmetry && symmetry_pays(&target.bounds)),
            threads: self.threads as usize,
            limits: Limits::with_time(self.time_limit, self.max_depth)
                .with_memory(Arc::clone(&budget)),
        };
        let run = run_with(
            &target.model(),
            |c| target.expected(c),
            target.stop_at(),
            options,
            progress,
        );
        match budget.take_error() {
            Some(e) => Err(e),
            None => Ok(Checked {
                run,
                spilled: budget.spilled(),
            }),
        }
    }

    /// The visited set's memory limit, in bytes.
    pub fn memory_limit_bytes(&self) -> usize {
        self.memory_limit
            .map_or_else(default_memory_limit, |gib| (gib * GIB) as usize)
    }

    /// Breadth-first when asked, or by default when the search stops at expected failures or
    /// is limited (then it is complete to the last depth it finished).
    fn search(&self, stops: bool) -> Search {
        let limited = self.max_depth.is_some() || self.time_limit.is_some();
        if self.bfs || ((stops || limited) && !self.dfs) {
            Search::Bfs
        } else {
            Search::Dfs
        }
    }
}

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub search: SearchArgs,
    /// Machine-readable output; no progress.
    #[arg(long)]
    pub json: bool,
}

/// `fails: A, B` or `all hold`, from a list of failing checks.
pub fn summary(failing: &[Check]) -> String {
    if failing.is_empty() {
        "all hold".to_string()
    } else {
        let names: Vec<&str> = failing.iter().map(|c| c.name()).collect();
        format!("fails {}", names.join(", "))
    }
}

pub fn expected_failures(p: &Preset) -> Vec<Check> {
    Check::all()
        .into_iter()
        .filter(|&c| p.expected(c) == Some(Outcome::Fails))
        .collect()
}

pub fn found_failures(r: &Run) -> Vec<Check> {
    r.verdicts
        .iter()
        .filter(|v| v.found == Some(Outcome::Fails))
        .map(|v| v.check)
        .collect()
}

/// Peak resident memory of this process, in KiB (VmHWM), where /proc tells it.
pub fn peak_memory_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

pub fn mib(kib: Option<u64>) -> String {
    kib.map_or("unknown".to_string(), |k| {
        format!("{:.1} MiB", k as f64 / 1024.0)
    })
}

/// Runs the checker, with live progress on a terminal unless quiet.
pub fn execute(target: &Target, args: &RunArgs, quiet: bool) -> Result<Checked, SpillError> {
    let live = !quiet && !args.json && std::io::stdout().is_terminal();
    let mut last = Duration::ZERO;
    let result = args.search.run(target, |p: Progress| {
        if live && p.elapsed >= last + Duration::from_millis(250) {
            last = p.elapsed;
            let rate = p.unique as f64 / p.elapsed.as_secs_f64().max(1e-9);
            eprint!(
                "\r{} states, {} unique, {:.0} states/s, depth {}   ",
                p.states, p.unique, rate, p.depth
            );
        }
    });
    if live && last > Duration::ZERO {
        eprint!("\r\x1b[2K");
    }
    result
}

/// What a search cut short by a limit can say, or `None` when it was not: `no violation
/// through depth D (complete to depth D, N states)` breadth-first.
pub fn limit_line(r: &Run) -> Option<String> {
    let why = match r.ending {
        Ending::MaxDepth => "the depth limit",
        Ending::TimeLimit => "the time limit",
        Ending::Exhausted | Ending::Found | Ending::SpillFailed => return None,
    };
    let violated = r
        .verdicts
        .iter()
        .any(|v| v.found == Some(isr_models::presets::Outcome::Fails) && v.check.is_always());
    let line = match (r.complete_to, violated) {
        (Some(d), false) => format!(
            "no violation through depth {d} (complete to depth {d}, {} states); stopped at {why}",
            r.unique
        ),
        (Some(d), true) => format!(
            "stopped at {why}: complete to depth {d}, {} states",
            r.unique
        ),
        (None, false) => format!(
            "no violation in {} states; stopped at {why} (a depth-first search is complete \
             to no depth: breadth-first is, to the last depth it finished)",
            r.unique
        ),
        (None, true) => format!("stopped at {why} after {} states", r.unique),
    };
    Some(line)
}

/// `; visited set: N fingerprints spilled to disk in M merges`, or nothing when none was.
pub fn spill_note(s: &Spilled) -> String {
    if s.merges == 0 {
        String::new()
    } else {
        format!(
            "; visited set: {} fingerprints spilled to disk in {} merges",
            s.fingerprints, s.merges
        )
    }
}

pub fn rate(r: &Run) -> f64 {
    r.unique as f64 / r.elapsed.as_secs_f64().max(1e-9)
}

pub fn search_name(r: &Run) -> &'static str {
    match (r.search, r.symmetry) {
        (Search::Bfs, false) => "BFS",
        (Search::Bfs, true) => "BFS with symmetry reduction",
        (Search::Dfs, false) => "DFS",
        (Search::Dfs, true) => "DFS with symmetry reduction",
    }
}

/// An outcome for a table: `-` when not asserted or not decided.
pub fn show(o: Option<Outcome>) -> String {
    o.map_or("-".to_string(), |o| o.to_string())
}
