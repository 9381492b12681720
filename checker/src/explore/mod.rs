//! `isr-check explore`: stateright's Explorer on a target, served by isr.
//!
//! stateright's own `serve` shows states through `Debug`, checks nothing until "Run to
//! completion" is pressed, finds counterexamples that need not be the shortest, and panics when
//! its port is taken. This serves the same UI (`checker/ui`, with a few changes) and the same
//! JSON API ([`api`]), but:
//! - states and actions read as `check` prints them, with each property's explanation;
//! - the target is checked at start with `check`'s own search ([`checking`]), so verdicts and
//!   shortest counterexamples are `check`'s, and each counterexample is a link, printed at
//!   start and shown on the page;
//! - an address that cannot be listened on is a one-line error.

mod api;
mod checking;
mod server;

use crate::run::SearchArgs;
use crate::target::{describe_bounds, describe_rules, Target, Usage};
use api::Explorer;
use checking::{Checking, Done};
use isr_models::presets::Outcome;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

/// The address to open: a wildcard address is reached through loopback.
fn base_url(server: &tiny_http::Server, asked: &str) -> String {
    match server.server_addr().to_ip() {
        Some(mut addr) => {
            if addr.ip().is_unspecified() {
                addr.set_ip(match addr.ip() {
                    IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
                    IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
                });
            }
            format!("http://{addr}/")
        }
        None => format!("http://{asked}/"),
    }
}

/// What the check found, for the terminal: each counterexample's link and explanation.
fn print_done(base: &str, target: &Target, done: &Done) {
    let run = &done.run;
    println!(
        "checked: {}; {} states, {} unique, max depth {}; {:.2} s; {}",
        done.search,
        run.states,
        run.unique,
        run.depth,
        run.total.as_secs_f64(),
        if run.as_expected() {
            "as expected"
        } else {
            "NOT as expected"
        }
    );
    let mut any = false;
    for (v, path) in run.verdicts.iter().zip(&done.paths) {
        match (path, v.found) {
            (Some(found), Some(Outcome::Fails)) => {
                any = true;
                println!(
                    "shortest counterexample for {} ({} steps): {base}#/steps/{}",
                    v.check, found.steps, found.indices
                );
                if let Some(violation) = &found.violation {
                    println!("  {violation}");
                }
            }
            (None, Some(Outcome::Fails)) => {
                println!("{} is never reached: the model is vacuous there", v.check);
            }
            _ => {}
        }
    }
    if !any {
        println!(
            "no counterexample: {} (isr-check check {} prints the details)",
            if run.as_expected() {
                "every property is as expected"
            } else {
                "see the verdicts"
            },
            target.preset.name
        );
    }
}

/// Serves the Explorer on `addr` until stopped. An address that does not resolve is a usage
/// error; one that cannot be listened on (in use, not local) a one-line error, exit status 1.
pub fn cmd_explore(target: &Target, search: &SearchArgs, addr: &str) -> Result<ExitCode, Usage> {
    let addrs: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|e| Usage(format!("invalid --addr `{addr}`: {e}")))?
        .collect();
    let server = match tiny_http::Server::http(&addrs[..]) {
        Ok(server) => server,
        Err(e) => {
            eprintln!("error: cannot serve the Explorer on {addr}: {e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let base = base_url(&server, addr);
    let title = format!(
        "isr preset {}{} ({})",
        target.preset.name,
        if target.adhoc { ", changed" } else { "" },
        describe_rules(&target.cfg)
    );
    println!(
        "Explorer for preset {} ({}; {}) on {base}",
        target.preset.name,
        describe_rules(&target.cfg),
        describe_bounds(&target.bounds)
    );
    println!(
        "checking at start with isr-check check's search; the page shows the verdicts when it \
         is done, each counterexample a link (no need for \"Run to completion\")"
    );
    let explorer = Arc::new(Explorer {
        model: target.model(),
        title,
        checking: Mutex::new(Checking::default()),
    });
    let checker = Arc::clone(&explorer);
    std::thread::scope(|s| {
        s.spawn(|| {
            let lock = || {
                checker
                    .checking
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
            };
            let done = match checking::check(target, search, |p| lock().progress = Some(p)) {
                Ok(done) => done,
                Err(e) => {
                    // The page would wait for verdicts that will not come: the Explorer ends.
                    eprintln!("error: {e}");
                    std::process::exit(1);
                }
            };
            print_done(&base, target, &done);
            // The page has the verdicts before the line that says so: a script that waits for
            // it may ask at once.
            lock().done = Some(done);
            println!("serving {base} until stopped (Ctrl-C)");
        });
        let e = server::serve(&server, &explorer);
        eprintln!("error: the Explorer stopped serving: {e}");
        Ok(ExitCode::FAILURE)
    })
}
