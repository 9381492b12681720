//! `isr-check explore`: stateright's Explorer on a target.

use crate::target::{describe_bounds, describe_rules, Target};
use std::process::ExitCode;

pub fn cmd_explore(target: &Target, addr: &str) -> ExitCode {
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
