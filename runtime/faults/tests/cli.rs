//! `isr-faults` as the issue spells its command line: `list`, and `run SCENARIO... --json` with
//! exactly the fields it names; run against the real `isr` binary.

use std::path::PathBuf;
use std::process::Command;

const FAULTS: &str = env!("CARGO_BIN_EXE_isr-faults");

/// The `isr` binary cargo built next to this one (`cargo test --workspace` builds it; alone,
/// `cargo build -p isr-runtime` does). Under `CI=true` it must be there.
fn isr() -> Option<PathBuf> {
    let isr = PathBuf::from(FAULTS).with_file_name("isr");
    let ci = std::env::var_os("CI").is_some_and(|v| v == "true");
    assert!(isr.is_file() || !ci, "no isr binary at {}", isr.display());
    if !isr.is_file() {
        eprintln!(
            "SKIPPED: no isr binary at {} (cargo build -p isr-runtime)",
            isr.display()
        );
    }
    isr.is_file().then_some(isr)
}

#[test]
fn list_names_every_scenario_with_what_it_expects() {
    let out = Command::new(FAULTS)
        .arg("list")
        .output()
        .expect("isr-faults list");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    for action in [
        "clean-shutdown",
        "hard-shutdown",
        "clean-bounce",
        "hard-bounce",
    ] {
        for target in ["leader", "follower", "controller", "active-controller"] {
            let name = format!("{action}-{target}");
            assert!(
                rows.iter().any(|r| r[..2] == [name.as_str(), "safe"]),
                "{name} is listed as safe: {text}"
            );
        }
    }
    for loss in ["jepsen-2013", "last-replica-standing"] {
        assert!(rows.iter().any(|r| r[..2] == [loss, "loss"]), "{text}");
    }
    assert!(rows.len() >= 30, "{} scenarios", rows.len());
}

#[test]
fn an_unknown_scenario_is_a_usage_error() {
    let out = Command::new(FAULTS)
        .args(["run", "no-such-scenario"])
        .output()
        .expect("isr-faults run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("isr-faults list"));
}

#[test]
fn a_run_prints_one_json_object_per_scenario_with_exactly_the_named_fields() {
    let Some(isr) = isr() else { return };
    let out = Command::new(FAULTS)
        .args([
            "run",
            "hard-bounce-follower",
            "--duration",
            "1",
            "--json",
            "--isr",
        ])
        .arg(&isr)
        .output()
        .expect("isr-faults run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: serde_json::Value = serde_json::from_str(&stdout).expect("a JSON array");
    let rows = rows.as_array().expect("an array");
    assert_eq!(rows.len(), 1);
    let row = rows[0].as_object().expect("an object");
    let mut fields: Vec<&str> = row.keys().map(String::as_str).collect();
    fields.sort();
    assert_eq!(
        fields,
        [
            "acknowledged",
            "attempted",
            "duplicated",
            "expected",
            "lost",
            "scenario",
            "unavailable_ms",
            "verdict"
        ]
    );
    assert_eq!(row["scenario"], "hard-bounce-follower");
    assert_eq!(row["expected"], "safe");
    assert_eq!(row["verdict"], "pass");
    assert_eq!(row["lost"], 0);
    assert_eq!(row["duplicated"], 0);
    let attempted = row["attempted"].as_u64().expect("attempted");
    let acknowledged = row["acknowledged"].as_u64().expect("acknowledged");
    assert!(acknowledged > 0 && acknowledged <= attempted, "{row:?}");
}
