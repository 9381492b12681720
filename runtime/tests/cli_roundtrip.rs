//! The client subcommands (from isr-kafka) against real brokers: create a topic, produce lines
//! from stdin with acks=all, consume them back from another broker's bootstrap.

mod common;

use common::{TestCluster, ISR};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

fn isr(args: &[&str], stdin: &str) -> (bool, String) {
    let mut child = Command::new(ISR)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn isr");
    if let Some(mut input) = child.stdin.take() {
        input.write_all(stdin.as_bytes()).expect("stdin");
    }
    let out = child.wait_with_output().expect("isr output");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
fn topic_produce_and_consume_through_the_isr_binary() {
    let cluster = TestCluster::start(3);
    let first = cluster.address(1).expect("broker 1");
    let second = cluster.address(2).expect("broker 2");
    let (ok, out) = isr(
        &[
            "topic",
            "create",
            "cli",
            "--bootstrap",
            &first,
            "--partitions",
            "2",
            "--replication-factor",
            "3",
            "--min-insync-replicas",
            "2",
        ],
        "",
    );
    assert!(ok, "{out}");
    cluster.wait_for(Duration::from_secs(10), "leaders", |s| {
        (0..2).all(|p| TestCluster::partition(s, "cli", p)["leader"].is_u64())
    });
    let lines: Vec<String> = (0..20).map(|i| format!("line-{i}")).collect();
    let (ok, out) = isr(
        &["produce", "--bootstrap", &first, "--partition", "1", "cli"],
        &(lines.join("\n") + "\n"),
    );
    assert!(ok, "{out}");
    let (ok, out) = isr(
        &[
            "consume",
            "--bootstrap",
            &second,
            "--partition",
            "1",
            "--from-beginning",
            "--max",
            "20",
            "cli",
        ],
        "",
    );
    assert!(ok, "{out}");
    for (offset, line) in lines.iter().enumerate() {
        assert!(
            out.contains(&format!("{offset} {line}")),
            "missing {offset} {line} in {out}"
        );
    }
    let (ok, out) = isr(&["topic", "list", "--bootstrap", &second], "");
    assert!(ok && out.contains("cli"), "{out}");
}
