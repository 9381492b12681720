//! The client subcommands (from isr-kafka) against real brokers: create a topic, produce lines
//! from stdin with acks=all, consume them back from another broker's bootstrap.

mod common;

use common::{isr, isr_topic_create, TestCluster};
use std::time::Duration;

/// `isr topic create NAME` with replication factor 3 and `partitions`, plus `extra` flags.
fn create_topic(bootstrap: &str, name: &str, partitions: u32, extra: &[&str]) {
    let (ok, out) = isr_topic_create(bootstrap, name, partitions, extra);
    assert!(ok, "{out}");
}

#[test]
fn topic_produce_and_consume_through_the_isr_binary() {
    let cluster = TestCluster::start(3);
    let first = cluster.address(1).expect("broker 1");
    let second = cluster.address(2).expect("broker 2");
    create_topic(&first, "cli", 2, &["--min-insync-replicas", "2"]);
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

    // `status` through a broker: the first address is dead, the second answers for the
    // controller, and every live broker reports its replicas.
    let dead = "127.0.0.1:1";
    let (ok, out) = isr(
        &["status", "cli", "--bootstrap", &format!("{dead},{second}")],
        "",
    );
    assert!(ok, "{out}");
    assert_eq!(out.matches("ISR [").count(), 2, "{out}");
    let broker_lines = out.lines().filter(|l| l.starts_with("broker ")).count();
    assert_eq!(broker_lines, 3, "{out}");
    assert!(!out.contains("unreachable"), "{out}");
    let (ok, out) = isr(&["status", "--bootstrap", dead], "");
    assert!(!ok && out.contains(dead), "{out}");
}

/// Prints `OFFSET VALUE` lines of `isr consume` as (offset, value).
fn consumed(out: &str) -> Vec<(u64, String)> {
    out.lines()
        .filter_map(|l| {
            let (offset, value) = l.split_once(' ')?;
            Some((offset.parse().ok()?, value.to_string()))
        })
        .collect()
}

#[test]
fn a_consumer_group_resumes_from_its_committed_offset_through_another_broker() {
    let cluster = TestCluster::start(3);
    let first = cluster.address(1).expect("broker 1");
    create_topic(&first, "resume", 1, &[]);
    cluster.wait_for(Duration::from_secs(10), "a leader", |s| {
        TestCluster::partition(s, "resume", 0)["leader"].is_u64()
    });
    let lines: Vec<String> = (0..20).map(|i| format!("r-{i}")).collect();
    let (ok, out) = isr(
        &["produce", "--bootstrap", &first, "resume"],
        &(lines.join("\n") + "\n"),
    );
    assert!(ok, "{out}");
    let expected = |range: std::ops::Range<u64>| -> Vec<(u64, String)> {
        range.map(|o| (o, format!("r-{o}"))).collect()
    };

    // The first run starts at the beginning, prints 8 records and commits; each later run is
    // a restarted consumer on another broker that must start where the group left off, not at
    // the beginning (no --from-beginning) nor at the end (the default without a group).
    let runs = [
        (2, 8, 0..8, true),
        (3, 7, 8..15, false),
        (1, 5, 15..20, false),
    ];
    for (broker, max, range, from_beginning) in runs {
        let address = cluster.address(broker).expect("broker");
        let max = max.to_string();
        let mut args = vec![
            "consume",
            "--bootstrap",
            &address,
            "--group",
            "g",
            "--max",
            &max,
            "resume",
        ];
        if from_beginning {
            args.push("--from-beginning");
        }
        let (ok, out) = isr(&args, "");
        assert!(ok, "{out}");
        assert_eq!(consumed(&out), expected(range), "{out}");
    }
}

/// A missing or unknown subcommand is answered with the valid ones.
#[test]
fn an_unknown_subcommand_is_answered_with_the_valid_ones() {
    let (ok, text) = isr(&["group", "purge", "g"], "");
    assert!(!ok);
    assert!(
        text.contains("valid subcommands: list, describe, delete"),
        "{text}"
    );
    let (ok, text) = isr(&["topics"], "");
    assert!(!ok);
    assert!(
        text.contains("valid subcommands: controller, broker, cluster"),
        "{text}"
    );
}

/// `isr consume --until-end` prints what a partition holds and exits, and `isr topic` and
/// `isr group` describe what happened, on a real cluster.
#[test]
fn consume_until_end_and_describe_on_a_cluster() {
    let cluster = TestCluster::start(3);
    let b = cluster.address(1).expect("broker 1");
    create_topic(&b, "finite", 1, &["--config", "retention.ms=86400000"]);
    let (ok, text) = isr(&["produce", "finite", "--bootstrap", &b], "a\nb\nc\n");
    assert!(ok, "{text}");
    let (ok, text) = isr(
        &[
            "consume",
            "finite",
            "--bootstrap",
            &b,
            "--from-beginning",
            "--until-end",
            "--group",
            "g",
        ],
        "",
    );
    assert!(ok, "{text}");
    assert_eq!(text, "0 a\n1 b\n2 c\n");
    let (ok, text) = isr(&["topic", "describe", "finite", "--bootstrap", &b], "");
    assert!(
        ok && text.contains("  retention.ms=86400000 (topic)\n"),
        "{text}"
    );
    let (ok, text) = isr(&["group", "describe", "g", "--bootstrap", &b], "");
    assert!(
        ok && text.contains("  finite 0 offset=3 end=3 lag=0\n"),
        "{text}"
    );
}

#[test]
fn a_topic_created_with_a_replica_assignment_lives_on_the_brokers_named() {
    let cluster = TestCluster::start(3);
    let b = cluster.address(1).expect("broker 1");
    let create = |name: &str, assignment: &str| {
        isr(
            &[
                "topic",
                "create",
                name,
                "--bootstrap",
                &b,
                "--min-insync-replicas",
                "1",
                "--replica-assignment",
                assignment,
            ],
            "",
        )
    };
    let (ok, text) = create("placed", "3:1,2:3");
    assert!(ok, "{text}");
    let status = cluster.wait_for(Duration::from_secs(10), "leaders", |s| {
        (0..2).all(|p| TestCluster::partition(s, "placed", p)["leader"].is_u64())
    });
    let assigned = |p: u64| {
        TestCluster::partition(&status, "placed", p)["assigned"]
            .as_array()
            .map(|a| a.iter().filter_map(|b| b.as_u64()).collect::<Vec<_>>())
    };
    assert_eq!(assigned(0), Some(vec![3, 1]), "{status}");
    assert_eq!(assigned(1), Some(vec![2, 3]), "{status}");
    // A broker that does not exist, or partitions of different sizes: refused.
    for bad in ["1:9", "1:2,3"] {
        let (ok, text) = create("misplaced", bad);
        assert!(
            !ok && text.contains("INVALID_REPLICA_ASSIGNMENT"),
            "{bad}: {text}"
        );
    }
    // Grown with an assignment (CreatePartitions' assignments), as kafka-topics --alter takes
    // it: every partition listed, only the new ones placed.
    let grow = |assignment: &str| {
        isr(
            &[
                "topic",
                "add-partitions",
                "placed",
                "--bootstrap",
                &b,
                "--partitions",
                "3",
                "--replica-assignment",
                assignment,
            ],
            "",
        )
    };
    for bad in ["3:1,2:3,1:9", "3:1,2:3,1"] {
        let (ok, text) = grow(bad);
        assert!(
            !ok && text.contains("INVALID_REPLICA_ASSIGNMENT"),
            "{bad}: {text}"
        );
    }
    let (ok, text) = grow("3:1,2:3,1:2");
    assert!(ok, "{text}");
    let status = cluster.wait_for(Duration::from_secs(10), "the new leader", |s| {
        TestCluster::partition(s, "placed", 2)["leader"].is_u64()
    });
    let assigned = TestCluster::partition(&status, "placed", 2)["assigned"].clone();
    assert_eq!(assigned, serde_json::json!([1, 2]), "{status}");
}
