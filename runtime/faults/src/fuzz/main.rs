//! `isr-fuzz`: millions of generated inputs through the decoders of everything an isr process
//! reads from outside: Kafka request frames (the brokers' Kafka server), internal frames,
//! segment files, checkpoint files, controller metadata, and whole partition directories at
//! recovery. On stable Rust, with no fuzzing engine: valid seeds made by the code under test,
//! mutated by a seeded generator, so a run repeats exactly.
//!
//! Each input must end in an answer, an error or a closed connection: a panic is a failure
//! (the input is saved), an abort ends the run, and an allocation above the decoder's
//! configured limit is a failure too.
//!
//! ```text
//! isr-fuzz [--inputs N] [--seed S] [--target NAME]... [--out DIR]
//! ```

mod alloc;
mod kafka;
mod mutate;
#[path = "../rng.rs"]
mod rng;
mod targets;

use clap::Parser;
use rng::Rng;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Instant;
use targets::Fate;

#[global_allocator]
static ALLOCATOR: alloc::Counting = alloc::Counting;

#[derive(Parser)]
#[command(name = "isr-fuzz", version, about)]
struct Cli {
    /// Inputs in all, shared among the targets.
    #[arg(long, default_value_t = 10_000_000)]
    inputs: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Only these targets: kafka-request, internal-frame, segment, checkpoint, metadata,
    /// partition-dir.
    #[arg(long = "target", value_name = "NAME")]
    targets: Vec<String>,
    /// Where inputs that failed are saved.
    #[arg(long, default_value = "fuzz-failures")]
    out: PathBuf,
}

/// The message of the last panic, caught by the hook instead of printed.
static PANIC: Mutex<Option<String>> = Mutex::new(None);

fn main() -> ExitCode {
    let cli = Cli::parse();
    std::panic::set_hook(Box::new(|info| {
        let at = info
            .location()
            .map_or(String::new(), |l| format!(" at {}:{}", l.file(), l.line()));
        *PANIC.lock().unwrap_or_else(|p| p.into_inner()) = Some(format!("{info}{at}"));
    }));
    let mut all = match targets::all() {
        Ok(all) => all,
        Err(e) => {
            eprintln!("isr-fuzz: {e}");
            return ExitCode::FAILURE;
        }
    };
    for name in &cli.targets {
        if !all.iter().any(|t| t.name == name) {
            eprintln!("isr-fuzz: unknown target {name}");
            return ExitCode::from(2);
        }
    }
    all.retain(|t| cli.targets.is_empty() || cli.targets.iter().any(|n| n == t.name));
    let shares: u64 = all.iter().map(|t| t.share).sum();
    println!(
        "{:<15} {:>10} {:>10} {:>10} {:>8} {:>7} {:>13} {:>13} {:>8}",
        "target",
        "inputs",
        "accepted",
        "refused",
        "waiting",
        "panics",
        "largest alloc",
        "limit",
        "seconds"
    );
    let (mut total, mut failures) = (0u64, 0u64);
    let mut input = Vec::new();
    for (t, target) in all.iter_mut().enumerate() {
        let n = cli.inputs * target.share / shares.max(1);
        let mut rng = Rng::new(cli.seed ^ (t as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let (mut accepted, mut refused, mut waiting, mut panics) = (0u64, 0u64, 0u64, 0u64);
        let mut largest = 0usize;
        let started = Instant::now();
        for i in 0..n {
            target.input(&mut rng, &mut input);
            alloc::take_largest();
            let fate =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| target.run(&input, i)));
            let allocated = alloc::take_largest();
            largest = largest.max(allocated);
            let failed = match fate {
                Ok(Fate::Accepted) => {
                    accepted += 1;
                    None
                }
                Ok(Fate::Refused) => {
                    refused += 1;
                    None
                }
                Ok(Fate::Waiting) => {
                    waiting += 1;
                    None
                }
                Err(_) => {
                    panics += 1;
                    let _ = target.reset();
                    let why = PANIC.lock().unwrap_or_else(|p| p.into_inner()).take();
                    Some(why.unwrap_or_else(|| "a panic".into()))
                }
            };
            let over = (allocated > target.limit)
                .then(|| format!("an allocation of {allocated} bytes, over {}", target.limit));
            if let Some(why) = failed.or(over) {
                failures += 1;
                save(&cli.out, target.name, i, &input, &why);
            }
        }
        total += n;
        println!(
            "{:<15} {:>10} {:>10} {:>10} {:>8} {:>7} {:>13} {:>13} {:>8.1}",
            target.name,
            n,
            accepted,
            refused,
            waiting,
            panics,
            largest,
            target.limit,
            started.elapsed().as_secs_f64()
        );
    }
    println!("{total} inputs, {failures} failures (panics or allocations over a limit), 0 aborts");
    if failures == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Saves a failing input as `OUT/TARGET-N.bin` and says why on stderr.
fn save(out: &std::path::Path, target: &str, n: u64, input: &[u8], why: &str) {
    let path = out.join(format!("{target}-{n}.bin"));
    let saved = std::fs::create_dir_all(out).and_then(|_| std::fs::write(&path, input));
    let hex: String = input.iter().take(64).map(|b| format!("{b:02x}")).collect();
    eprintln!(
        "FAILED {target} input {n} ({} bytes: {hex}...): {why}; {}",
        input.len(),
        match saved {
            Ok(()) => format!("saved to {}", path.display()),
            Err(e) => format!("not saved: {e}"),
        }
    );
}
