//! `isr-check`: model-check the isr replication protocol, its safe forms and its historical bugs.
//!
//! This binary is the I/O shell around `isr-models`: it parses arguments, runs the checker,
//! measures time and peak memory, and prints verdicts and shortest counterexamples. One module
//! per job: [`target`] (what is checked), [`run`] (running it), and one per command.

mod check;
mod explore;
mod list;
mod refines;
mod replay;
mod run;
mod suite;
mod target;

use check::Format;
use clap::{Parser, Subcommand};
use run::{RunArgs, SearchArgs};
use std::process::ExitCode;
use target::{Overrides, Target, Usage};

/// The search allocates and frees a state's successors by the million; glibc's allocator spent
/// a quarter of a breadth-first search in malloc, free and consolidation (perf, `check kip279`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc asks for transparent huge pages on its arenas, and a search frees and refills
/// pages so often that the kernel zeroed a fresh 2 MiB page at nearly every refill: 15–25 % of
/// a search's time went to `clear_page` (perf, `check safe` and `check kip279`). With THP off
/// for this process a refill zeroes 4 KiB pages, only those touched.
fn without_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_THP_DISABLE takes integers only and changes no memory of this process; a
    // kernel that refuses it leaves THP as it was, which is only slower.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

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
        #[command(flatten)]
        search: SearchArgs,
        /// Where to listen (port 0: any free port; the URL printed says which).
        #[arg(long, default_value = "127.0.0.1:3000")]
        addr: String,
    },
    /// Check that every step of the full model, projected by delivering what is in flight, is
    /// a step of the atomic-step model or a stutter: prints `refinement holds over N states`,
    /// or the shortest path whose last step has no atomic counterpart and exits 1.
    Refines {
        preset: String,
        #[command(flatten)]
        overrides: Overrides,
        /// Go on past the first step without an atomic counterpart, over the whole full model,
        /// and list every kind of such step (the last action and the message it delivers) with
        /// its count and shortest path.
        #[arg(long)]
        all: bool,
        /// The most states, atomic and full, to keep: the check keeps whole states (about
        /// 3 KiB each), and stops there with the refinement undecided.
        #[arg(long, value_name = "N", default_value_t = isr_models::refines::DEFAULT_MAX_STATES)]
        max_states: u64,
    },
    /// Check that the traces of one run of real processes (`--trace FILE` or ISR_TRACE=DIR;
    /// a directory stands for its .jsonl files) are a behaviour of the protocol: prints
    /// `accepted N steps`, or the first step that diverges and exits 1.
    Replay {
        #[arg(required = true, value_name = "TRACE")]
        traces: Vec<std::path::PathBuf>,
    },
}

fn main() -> ExitCode {
    without_transparent_huge_pages();
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
        Command::List { json } => Ok(list::cmd_list(*json)),
        Command::Check {
            preset,
            overrides,
            run,
            format,
        } => Target::new(preset, overrides).map(|t| check::cmd_check(&t, run, *format)),
        Command::Suite { run } => Ok(suite::cmd_suite(run)),
        Command::Explore {
            preset,
            overrides,
            search,
            addr,
        } => Target::new(preset, overrides).and_then(|t| explore::cmd_explore(&t, search, addr)),
        Command::Refines {
            preset,
            overrides,
            all,
            max_states,
        } => {
            let options = isr_models::refines::Options {
                all: *all,
                max_states: *max_states,
            };
            Target::new(preset, overrides).map(|t| refines::cmd_refines(&t, options))
        }
        Command::Replay { traces } => Ok(replay::cmd_replay(traces)),
    };
    match result {
        Ok(code) => code,
        Err(Usage(msg)) => {
            eprintln!("error: {msg}");
            ExitCode::from(2)
        }
    }
}
