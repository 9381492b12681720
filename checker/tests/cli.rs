//! The `isr-check` binary: the suite passes, bad arguments are refused on one line with exit
//! status 2, counterexamples print as tables and Mermaid, and the Explorer serves states.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Output, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

fn isr_check(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_isr-check"))
        .args(args)
        .output()
        .expect("isr-check runs")
}

#[test]
fn the_suite_passes() {
    let out = isr_check(&["suite", "--json"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(report["as_expected"], true);
}

fn refused(args: &[&str], mentions: &str) {
    let out = isr_check(args);
    assert_eq!(out.status.code(), Some(2), "{args:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains(mentions), "{stderr}");
}

#[test]
fn bad_arguments_are_refused_on_one_line() {
    refused(&["check", "nope"], "safe, kip966");
    refused(&["check", "safe", "--replicas", "0"], "--replicas");
    refused(&["check", "safe", "--records", "0"], "--records");
    refused(
        &["check", "safe", "--rule", "nope=on"],
        "truncation, epoch-fencing",
    );
    refused(
        &["check", "safe", "--rule", "flush=sometimes"],
        "always, page-cache",
    );
    refused(&["check", "safe", "--acks", "2"], "0, 1, all");
    refused(&["check", "safe", "--min-isr", "4"], "--min-isr");
    refused(&["explore", "nope"], "unknown preset");
    refused(&["frobnicate"], "frobnicate");
}

#[test]
fn a_counterexample_prints_as_numbered_steps_and_as_mermaid() {
    let out = isr_check(&["check", "unclean-election"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("counterexample for CommittedRecordsSurviveLeaderFailure (8 steps)"));
    assert!(text.contains("8. "), "{text}");
    assert!(text.contains("controller: leader"), "{text}");
    assert!(text.contains("0:1:1"), "{text}");
    let out = isr_check(&["check", "unclean-election", "--format", "mermaid"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("sequenceDiagram"), "{text}");
    assert!(text.contains("->>"), "{text}");
}

#[test]
fn an_adhoc_configuration_expects_every_property_to_hold() {
    let out = isr_check(&[
        "check",
        "safe",
        "--replicas",
        "2",
        "--max-epoch",
        "2",
        "--crashes",
        "0",
        "--unclean-crashes",
        "0",
        "--json",
    ]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["adhoc"], true);
    // Without crashes there is no failover to commit after, and no restart to rejoin from.
    assert_eq!(report["as_expected"], false);
    assert_eq!(out.status.code(), Some(1));
    let failed: Vec<&str> = report["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["found"] == "fails")
        .map(|v| v["property"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["FailoverCommits", "RestartedReplicaRejoins"]);
}

fn get(addr: &str, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    body.contains(" 200 ").then_some(body)
}

#[test]
fn explore_serves_status_and_states() {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let addr = format!("127.0.0.1:{port}");
    /// Stops the explorer however the test ends.
    struct Stop(std::process::Child);
    impl Drop for Stop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _child = Stop(
        Command::new(env!("CARGO_BIN_EXE_isr-check"))
            .args(["explore", "unclean-election", "--addr", &addr])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("explore starts"),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(body) = get(&addr, "/.status") {
            break body;
        }
        assert!(Instant::now() < deadline, "explorer did not answer");
        sleep(Duration::from_millis(100));
    };
    assert!(
        status.contains("CommittedRecordsSurviveLeaderFailure"),
        "{status}"
    );
    let initial = get(&addr, "/.states").expect("initial states");
    assert!(initial.contains("Cluster"), "{initial}");
    // The successors of initial state 0, with readable actions and change-marked tables.
    let next = get(&addr, "/.states/0").expect("successors");
    assert!(next.contains("LeaderWrite(b0)"), "{next}");
    assert!(next.contains("0:1:1*"), "{next}");
}
