//! `isr-check refines`: whether the full model refines the atomic-step model under the
//! projection that delivers what is in flight ([`isr_models::refines`], spec/checker.md).

use crate::target::{describe_bounds, describe_rules, Target};
use isr_models::refines::{atomic_of, refines, Options, Why};
use isr_models::render;
use std::process::ExitCode;
use std::time::Instant;

pub fn cmd_refines(target: &Target, options: Options) -> ExitCode {
    let model = target.model();
    println!("preset: {}", target.preset.name);
    println!("rules: {}", describe_rules(&target.cfg));
    println!("bounds: {}", describe_bounds(&target.bounds));
    let start = Instant::now();
    let r = refines(&model, options);
    let seconds = start.elapsed().as_secs_f64();
    println!(
        "atomic model: {} states; full model: {} states, {} steps in {:.1} s",
        r.atomic_states,
        r.states,
        r.steps(),
        seconds
    );
    println!(
        "projected steps: {} stutters, {} atomic steps, {} reached in another order",
        r.stutters, r.atomic_steps, r.reordered
    );
    let Some(f) = r.failure() else {
        if r.limited {
            println!(
                "refinement undecided: stopped at --max-states {} (atomic and full states together)",
                options.max_states
            );
            return ExitCode::FAILURE;
        }
        println!("refinement holds over {} states", r.states);
        return ExitCode::SUCCESS;
    };
    if options.all {
        let count: u64 = r.failures.iter().map(|f| f.count).sum();
        println!(
            "{count} steps without an atomic counterpart, of {} kinds (shortest path of each):",
            r.failures.len()
        );
        if r.limited {
            println!(
                "(stopped at --max-states {}: only the states explored so far)",
                options.max_states
            );
        }
        for f in &r.failures {
            println!(
                "  {}: {} steps, shortest {}",
                f.kind,
                f.count,
                f.first.trace.len()
            );
        }
        for f in r.failures.iter().skip(1) {
            println!();
            println!("{} ({} steps):", f.kind, f.first.trace.len());
            for (i, (action, _)) in f.first.trace.steps.iter().enumerate() {
                println!("  {}. {action}", i + 1);
            }
        }
        println!();
        println!("the first, in full:");
    }
    let bounds = atomic_of(&model).bounds;
    println!();
    if f.trace.is_empty() {
        println!("refinement fails: the projection of the initial state is not the atomic model's");
        print!("{}", render::table(&bounds, Some(&f.before), &f.after));
        return ExitCode::FAILURE;
    }
    match f.why {
        Why::Unreachable => println!(
            "refinement fails: the last step of this {}-step path leads to a state whose \
             projection no atomic behaviour reaches",
            f.trace.len()
        ),
        Why::Hidden(p) => println!(
            "refinement fails: the last step of this {}-step path violates {p}, which its \
             projection does not",
            f.trace.len()
        ),
    }
    print!("{}", render::trace_text(&target.bounds, &f.trace));
    println!();
    println!("projected before the last step:");
    println!("{}", render::table(&bounds, None, &f.before));
    println!();
    println!("and after it:");
    println!("{}", render::table(&bounds, Some(&f.before), &f.after));
    if let Some(instead) = &f.instead {
        println!();
        println!("the atomic step by the same action leads there instead (* where it differs):");
        println!("{}", render::table(&bounds, Some(&f.after), instead));
    }
    ExitCode::FAILURE
}
