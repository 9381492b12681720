//! The `isr-check` binary: the suite passes, bad arguments are refused on one line with exit
//! status 2, counterexamples print as tables and as Mermaid alone, and the Explorer serves
//! readable states, checks at start with `check`'s search and links the same counterexamples.

mod common;

use common::{get, isr_check, Explorer};
use std::collections::BTreeMap;
use std::net::TcpListener;

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
    refused(&["check", "nope"], "safe, controller-failover, kip966");
    refused(&["check", "safe", "--replicas", "0"], "--replicas");
    refused(&["check", "safe", "--records", "0"], "--records");
    refused(&["check", "safe", "--consumers", "5"], "--consumers");
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
    refused(&["explore", "safe", "--addr", "nonsense"], "invalid --addr");
    refused(&["frobnicate"], "frobnicate");
    refused(&["check", "safe", "--memory-limit", "0"], "--memory-limit");
    refused(
        &["check", "safe", "--memory-limit=-1"],
        "positive number of GiB",
    );
    refused(
        &["check", "safe", "--memory-limit", "lots"],
        "positive number of GiB",
    );
    refused(
        &["suite", "--memory-limit", "inf"],
        "positive number of GiB",
    );
    refused(
        &["check", "safe", "--spill-dir", "/no/such/dir"],
        "not a directory",
    );
}

#[test]
fn a_check_past_its_memory_limit_spills_and_says_so() {
    let quick = ["check", "controller-failover", "--json"];
    let out = isr_check(&quick);
    let memory: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(memory["spill_merges"], 0);
    assert_eq!(memory["spilled_fingerprints"], 0);
    // About 100 KiB: a flush every few thousand states.
    let out = isr_check(&[&quick[..], &["--memory-limit", "0.0001"]].concat());
    assert!(out.status.success());
    let spilled: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(
        spilled["spill_merges"].as_u64().unwrap() >= 5,
        "{spilled:#}"
    );
    assert!(spilled["spilled_fingerprints"].as_u64().unwrap() > 0);
    assert_eq!(spilled["memory_limit_bytes"], 107_374);
    assert_eq!(spilled["unique_states"], memory["unique_states"]);
    assert_eq!(spilled["verdicts"], memory["verdicts"]);
    let out = isr_check(&["check", "controller-failover", "--memory-limit", "0.0001"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("fingerprints spilled to disk in"), "{text}");
}

#[test]
fn a_disk_that_refuses_the_spill_ends_the_check_with_an_error() {
    let out = isr_check(&[
        "check",
        "controller-failover",
        "--memory-limit",
        "0.0001",
        "--spill-dir",
        "/proc",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("error: the visited set could not spill to disk: creating /proc/"),
        "{stderr}"
    );
}

#[test]
fn a_counterexample_prints_as_numbered_steps_and_as_mermaid() {
    let out = isr_check(&["check", "unclean-election"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("counterexample for CommittedRecordsSurviveLeaderFailure (9 steps)"));
    assert!(text.contains("9. "), "{text}");
    assert!(text.contains("controller: c1: leader"), "{text}");
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

#[test]
fn mermaid_output_is_one_diagram_with_the_report_as_comments() {
    let out = isr_check(&["check", "unclean-election", "--format", "mermaid"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("sequenceDiagram"), "{text}");
    for line in lines {
        assert!(
            line.starts_with("%%") || line.starts_with("    "),
            "not Mermaid: `{line}`\n{text}"
        );
    }
    assert_eq!(text.matches("sequenceDiagram").count(), 1, "{text}");
    assert!(text.contains("%% verdict: as expected"), "{text}");
    assert!(
        text.contains("%% counterexample for CommittedRecordsSurviveLeaderFailure (9 steps)"),
        "{text}"
    );
    assert!(
        text.contains("Note over b0,controller: violated: "),
        "{text}"
    );
}

/// Each counterexample's length, by property, as `check --json` reports them.
fn check_lengths(args: &[&str]) -> BTreeMap<String, u64> {
    let out = isr_check(&[&["check"], args, &["--json"]].concat());
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    report["verdicts"]
        .as_array()
        .expect("verdicts")
        .iter()
        .filter_map(|v| {
            let len = v["counterexample_length"].as_u64()?;
            Some((v["property"].as_str()?.to_string(), len))
        })
        .collect()
}

#[test]
fn explore_links_the_shortest_counterexamples_that_check_finds() {
    for args in [
        &["kip101"][..],
        &[
            "safe",
            "--replicas",
            "2",
            "--rule",
            "truncation=high-watermark",
        ],
    ] {
        let expected = check_lengths(args);
        assert!(!expected.is_empty(), "{args:?} has counterexamples");
        let explorer = Explorer::start(args);
        let found: BTreeMap<String, u64> = explorer
            .counterexamples
            .iter()
            .map(|c| (c.property.clone(), c.steps as u64))
            .collect();
        assert_eq!(found, expected, "{args:?}: {:#?}", explorer.stdout);
        for cex in &explorer.counterexamples {
            // The URL leads, in the Explorer, to a state that violates the property.
            let indices = cex.indices();
            assert_eq!(indices.len(), cex.steps + 1, "{cex:?}");
            let (last, before) = indices.split_last().expect("a path");
            let path: String = before.iter().map(|i| format!("/{i}")).collect();
            let states = get(explorer.addr(), &format!("/.states{path}")).expect("states");
            let states: serde_json::Value = serde_json::from_str(&states).expect("JSON");
            let state = states
                .as_array()
                .expect("successors")
                .iter()
                .find(|s| s["actionIndex"] == *last)
                .expect("the last action");
            assert_eq!(state["verdicts"][&cex.property], "violated", "{cex:?}");
            let violations = state["violations"].as_array().expect("violations");
            assert!(
                violations.contains(&cex.violation.as_str().into()),
                "{cex:?}"
            );
            // The page lists it with its path.
            let status = get(explorer.addr(), "/.status").expect("status");
            let status: serde_json::Value = serde_json::from_str(&status).expect("JSON");
            assert_eq!(status["done"], true);
            let listed = status["properties"]
                .as_array()
                .expect("properties")
                .iter()
                .find(|p| p[1] == cex.property.as_str())
                .expect("the property");
            assert_eq!(
                listed[2],
                &indices
                    .iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join("/")[..]
            );
            assert_eq!(listed[3]["violation"], cex.violation.as_str());
        }
    }
}

#[test]
fn explore_serves_readable_states() {
    let explorer = Explorer::start(&["unclean-election"]);
    let addr = explorer.addr();
    let status = get(addr, "/.status").expect("status");
    assert!(
        status.contains("CommittedRecordsSurviveLeaderFailure"),
        "{status}"
    );
    let initial = get(addr, "/.states").expect("initial states");
    assert!(
        initial.contains("controller: c1: leader b0, e1"),
        "{initial}"
    );
    assert!(initial.contains("cached ISR"), "{initial}");
    // The successors of initial state 0, with readable actions and change-marked tables.
    let next = get(addr, "/.states/0").expect("successors");
    assert!(next.contains("LeaderWrite(b0)"), "{next}");
    assert!(next.contains("0:1:1*"), "{next}");
    for page in [&status, &initial, &next] {
        for raw in ["BrokerId(", "Envelope {", "Cluster {"] {
            assert!(!page.contains(raw), "a raw Debug dump: {page}");
        }
    }
    assert!(get(addr, "/.states/1").is_none(), "one initial state");
    assert!(get(addr, "/.states/0/x").is_none(), "bad indices");
}

#[test]
fn a_port_in_use_is_one_clear_line() {
    let taken = TcpListener::bind("127.0.0.1:0").expect("a port");
    let addr = taken.local_addr().expect("its address").to_string();
    let out = isr_check(&["explore", "unclean-election", "--addr", &addr]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains(&format!("cannot serve the Explorer on {addr}")),
        "{stderr}"
    );
    assert!(stderr.contains("in use"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// `check` with `--json`: the report and the exit status.
fn check_json(args: &[&str]) -> (serde_json::Value, Option<i32>) {
    let out = isr_check(&[&["check"], args, &["--json"]].concat());
    let report = serde_json::from_slice(&out.stdout).expect("JSON");
    (report, out.status.code())
}

#[test]
fn a_preset_keeps_its_expected_verdicts_under_other_bounds_unless_told_otherwise() {
    // kip966 with two brokers: WeakIsr still fails as documented.
    let bounds = ["kip966", "--replicas", "2", "--isr-changes", "3"];
    let (report, code) = check_json(&bounds);
    assert_eq!(report["adhoc"], true);
    assert_eq!(report["expectations"], "preset");
    assert_eq!(report["as_expected"], true, "{report:#}");
    assert_eq!(code, Some(0));
    // Expecting everything to hold, or WeakIsr to hold, makes its failure unexpected.
    for expect in [
        &["--expect", "all-hold"][..],
        &["--expect", "WeakIsr=holds"],
    ] {
        let (report, code) = check_json(&[&bounds[..], expect].concat());
        assert_eq!(report["as_expected"], false, "{expect:?}");
        assert_eq!(code, Some(1), "{expect:?}");
    }
    // Asserting nothing, or that WeakIsr may go either way, accepts it.
    for expect in [&["--expect", "none"][..], &["--expect", "WeakIsr=any"]] {
        let (report, code) = check_json(&[&bounds[..], expect].concat());
        assert_eq!(report["as_expected"], true, "{expect:?}");
        assert_eq!(code, Some(0), "{expect:?}");
    }
    // Other rules are another protocol: every property is then expected to hold.
    let (report, _) = check_json(&["kip966", "--replicas", "2", "--rule", "elr=off"]);
    assert_eq!(report["expectations"], "all-hold");
    refused(&["check", "safe", "--expect", "Nope=holds"], "--expect");
    refused(&["check", "safe", "--expect", "WeakIsr=maybe"], "--expect");
}

/// `--clock` runs any preset's replicas on the model's clock, with the clocked timings: a
/// follower fetching every round stays in the ISR under the safe rules, and leaves it with
/// rule 19 off.
#[test]
fn a_clock_makes_timers_fire_when_due_and_checks_followers_stay() {
    let stays = |report: &serde_json::Value| {
        let verdicts = report["verdicts"].as_array().expect("verdicts");
        let v = verdicts
            .iter()
            .find(|v| v["property"] == "FollowersFetchingEveryRoundStayInIsr")
            .expect("the property is checked");
        v["found"].clone()
    };
    let clocked = [
        "safe",
        "--replicas",
        "2",
        "--records",
        "3",
        "--crashes",
        "0",
    ];
    let (report, code) =
        check_json(&[&clocked[..], &["--clock", "8", "--expect", "none"]].concat());
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["bounds"]["clock"], 8);
    assert_eq!(stays(&report), "holds", "{report:#}");
    let off = [&clocked[..], &["--clock", "8", "--rule", "caught-up=off"]].concat();
    let (report, code) = check_json(&off);
    assert_eq!(stays(&report), "fails", "{report:#}");
    assert_eq!(
        code,
        Some(1),
        "another protocol is expected to keep every property"
    );
    refused(&["check", "safe", "--clock", "x"], "--clock");
}

/// `--model atomic`: the same preset in far fewer states with the same verdicts; a bug only
/// the full model shows is expected to hold there, and says why; `list` prints both models'
/// shortest counterexamples.
#[test]
fn the_atomic_model_keeps_the_verdicts_in_fewer_states() {
    let (full, code) = check_json(&["safe"]);
    assert_eq!(code, Some(0), "{full:#}");
    assert_eq!(full["bounds"]["model"], "full");
    let (atomic, code) = check_json(&["safe", "--model", "atomic"]);
    assert_eq!(code, Some(0), "{atomic:#}");
    assert_eq!(atomic["bounds"]["model"], "atomic");
    assert!(atomic["as_expected"].as_bool().unwrap());
    let unique = |r: &serde_json::Value| r["unique_states"].as_u64().expect("a count");
    assert!(unique(&atomic) * 10 < unique(&full), "{atomic:#}");
    // kip966's WeakIsr needs a LeaderAndIsr still in flight, which the atomic model keeps.
    assert_eq!(
        check_lengths(&["kip966", "--model", "atomic"])["WeakIsr"],
        6
    );
    // kip279's needs a FetchResponse late by two elections, which it does not.
    let out = isr_check(&["check", "kip279", "--model", "atomic"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(
            "atomic model: LogMatching is expected to hold; its bug needs the full model"
        ),
        "{text}"
    );
    let out = isr_check(&["list"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("shortest: WeakIsr in 9 steps; atomic model (--model atomic): 6"),
        "{text}"
    );
    assert!(
        text.contains("shortest: LogMatching in 18 steps; atomic model: not shown ("),
        "{text}"
    );
    refused(&["check", "safe", "--model", "tla"], "--model");
}

/// `refines` prints `refinement holds over N states` and exits 0 where the full model refines
/// the atomic one, and prints the shortest path whose last step has no atomic counterpart,
/// with the projections around it, and exits 1 where it does not.
#[test]
fn refines_says_whether_the_full_model_refines_the_atomic_one() {
    let out = isr_check(&["refines", "kip966", "--unclean-crashes", "0"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let holds = stdout
        .lines()
        .find_map(|l| l.strip_prefix("refinement holds over "))
        .unwrap_or_else(|| panic!("{stdout}"));
    let states: u64 = holds
        .trim_end_matches(" states")
        .parse()
        .unwrap_or_else(|_| panic!("{holds}"));
    assert!(states > 1_000, "{stdout}");

    let out = isr_check(&["refines", "safe", "--replicas", "2", "--crashes", "0"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("refinement fails: the last step of this 5-step path"),
        "{stdout}"
    );
    assert!(
        stdout.contains("5. Deliver(b1→b0: Fetch offset=1 e1)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("projected before the last step:"),
        "{stdout}"
    );
    assert!(
        stdout.contains("the atomic step by the same action leads there instead"),
        "{stdout}"
    );
    refused(&["refines", "nope"], "unknown preset");

    let out = isr_check(&[
        "refines",
        "kip966",
        "--unclean-crashes",
        "0",
        "--max-states",
        "1000",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("refinement undecided: stopped at --max-states 1000"),
        "{stdout}"
    );

    let out = isr_check(&["refines", "safe", "--replicas", "2", "--all"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("steps without an atomic counterpart, of "),
        "{stdout}"
    );
    assert!(stdout.contains("  Deliver Fetch: "), "{stdout}");
    assert!(stdout.contains("the first, in full:"), "{stdout}");
}

#[test]
fn a_depth_limit_gives_verdicts_complete_to_that_depth() {
    let out = isr_check(&["check", "safe", "--max-depth", "6"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("no violation through depth 6 (complete to depth 6, "),
        "{text}"
    );
    assert!(text.contains("verdict: as expected so far"), "{text}");
    let (report, _) = check_json(&["safe", "--max-depth", "6"]);
    assert_eq!(report["ending"], "max-depth");
    assert_eq!(report["complete_to_depth"], 6);
    assert_eq!(report["max_depth"], 6);
    // A counterexample deeper than the limit is not found, and not denied either.
    let (report, code) = check_json(&["kip101", "--max-depth", "5"]);
    assert_eq!(code, Some(0), "{report:#}");
    let strong = report["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["property"] == "StrongIsr")
        .unwrap();
    assert_eq!(strong["expected"], "fails");
    assert_eq!(strong["found"], serde_json::Value::Null);
    refused(
        &["check", "safe", "--max-depth", "3", "--dfs"],
        "--max-depth",
    );
}

#[test]
fn a_time_limit_reports_how_deep_the_search_is_complete() {
    let anchor = [
        "safe",
        "--records",
        "2",
        "--max-epoch",
        "3",
        "--crashes",
        "1",
        "--unclean-crashes",
        "1",
    ];
    let (report, code) = check_json(&[&anchor[..], &["--time-limit", "1"]].concat());
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["ending"], "time-limit");
    let depth = report["complete_to_depth"].as_u64().expect("a depth");
    let line = report["limit"].as_str().expect("the limit line");
    assert!(
        line.starts_with(&format!(
            "no violation through depth {depth} (complete to depth {depth}, "
        )),
        "{line}"
    );
    refused(&["check", "safe", "--time-limit", "0"], "--time-limit");
}
