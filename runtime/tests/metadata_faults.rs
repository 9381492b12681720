//! The controller's store under bad input and faults, on real processes: a file store's
//! metadata log that ends in a torn or corrupt batch (a crash in the middle of an append, a
//! bad sector) is cut at its last whole change, with a warning naming the byte, and the
//! controller comes back with every topic; an etcd whose history is compacted under a running
//! cluster loses nothing when a standby controller takes over from it.

mod common;

use common::etcd::{self, Etcd};
use common::TestCluster;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// Every topic in a status and its number of partitions that have a leader.
fn led(status: &Value) -> BTreeMap<String, usize> {
    let mut topics = BTreeMap::new();
    for row in status["partitions"].as_array().into_iter().flatten() {
        if let Some(topic) = row["topic"].as_str() {
            let count = topics.entry(topic.to_string()).or_insert(0);
            if row["leader"].is_u64() {
                *count += 1;
            }
        }
    }
    topics
}

/// The expected `led` of topics created with these partition counts.
fn expected(topics: &[(&str, usize)]) -> BTreeMap<String, usize> {
    topics.iter().map(|(t, n)| (t.to_string(), *n)).collect()
}

/// Appends `bytes` to the file at `path`.
fn append(path: &Path, bytes: &[u8]) {
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .expect("open the metadata log");
    file.write_all(bytes).expect("append");
}

/// A controller restarted over a metadata log whose tail is a batch that never finished (its
/// frame promises more bytes than follow) or a whole frame whose checksum does not match: in
/// both cases the tail is cut at the last whole change, the log says at which byte, and every
/// topic created before is there, led, and the cluster takes new topics.
#[test]
fn a_metadata_log_with_a_torn_or_corrupt_tail_is_cut_and_keeps_every_change() {
    let mut cluster = TestCluster::start(3);
    cluster.create_topic("before", 4, 2);
    let root = cluster.dir.path().to_path_buf();
    let log = root.join("controller").join("metadata.log");
    let controller_log = |n: u32| {
        let name = match n {
            0 => "controller-1.log".to_string(),
            n => format!("controller-1.log.{n}"),
        };
        std::fs::read_to_string(root.join(name)).unwrap_or_default()
    };

    // Cases: a frame header (length 256, some checksum) and two bytes of its batch; then a
    // whole 8-byte batch under a checksum that is not its own.
    let torn: &[u8] = &[0, 0, 1, 0, 0xde, 0xad, 0xbe, 0xef, 1, 2];
    let corrupt: &[u8] = &[0, 0, 0, 8, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
    let mut topics = vec![("before", 4)];
    for (restart, (tail, topic)) in [(torn, "after-torn"), (corrupt, "after-corrupt")]
        .into_iter()
        .enumerate()
    {
        cluster.kill_controller(1);
        let kept = std::fs::read(&log).expect("the metadata log");
        let whole = kept.len();
        append(&log, tail);
        cluster.restart_controller(1);
        let status = cluster.wait_for(Duration::from_secs(20), "every topic led again", |s| {
            led(s) == expected(&topics)
        });
        let epoch = status["controller"]["epoch"].as_u64().expect("epoch");
        cluster.wait_for_sessions(epoch, Duration::from_secs(20));
        // The controller has appended changes since (the brokers' sessions): the changes
        // before the cut are as they were, and what follows them is not the bad tail.
        let now = std::fs::read(&log).expect("the metadata log");
        assert!(now.starts_with(&kept), "a whole change was lost");
        assert!(
            !now[whole..].starts_with(&tail[..4]),
            "the tail was not cut at the last whole change"
        );
        let said = controller_log(restart as u32 + 1);
        let warning = said
            .lines()
            .find(|l| l.contains("torn batch"))
            .unwrap_or_else(|| panic!("no warning about the cut tail:\n{said}"));
        assert!(warning.contains(&format!("at={whole}")), "{warning}");
        assert!(
            warning.contains(&format!("torn={}", tail.len())),
            "{warning}"
        );

        cluster.create_topic(topic, 2, 2);
        topics.push((topic, 2));
    }
    // The changes appended after the cuts are read back whole by a last restart.
    cluster.kill_controller(1);
    cluster.restart_controller(1);
    cluster.wait_for(Duration::from_secs(20), "every topic led again", |s| {
        led(s) == expected(&topics)
    });
    assert!(
        !controller_log(3).contains("torn batch"),
        "a clean log was cut"
    );
}

/// etcd compacts its history (every revision before the current one is gone, as an operator's
/// `etcdctl compact` or etcd's auto-compaction does) under a running cluster on it; then the
/// active controller is killed. The standby that takes over reads the whole metadata from the
/// store: every topic is there and led, and the cluster takes a new topic.
#[test]
fn an_etcd_compacted_under_the_cluster_loses_nothing_when_a_standby_takes_over() {
    if !etcd::present() {
        return;
    }
    let etcd = Etcd::start(1);
    let mut cluster = TestCluster::start_with(3, 2, Some(etcd.store()));
    let endpoints = etcd.store().trim_start_matches("etcd://").to_string();
    let mut topics = vec![("a", 3), ("b", 2)];
    for (topic, partitions) in &topics {
        cluster.create_topic(topic, *partitions as u64, 2);
    }

    let put: Value = serde_json::from_str(&etcd::etcdctl(
        &endpoints,
        &["put", "isr-test-probe", "x", "-w", "json"],
    ))
    .expect("etcdctl's JSON");
    let revision = put["header"]["revision"].as_u64().expect("a revision");
    etcd::etcdctl(
        &endpoints,
        &["compact", &revision.to_string(), "--physical"],
    );

    let status = cluster.wait_for(Duration::from_secs(5), "an active controller", |s| {
        s["controller"]["id"].is_u64()
    });
    let active = status["controller"]["id"].as_u64().expect("id") as u32;
    let epoch = status["controller"]["epoch"].as_u64().expect("epoch");
    cluster.kill_controller(active);
    cluster.wait_for(
        Duration::from_secs(15),
        "the standby, with every topic",
        |s| s["controller"]["epoch"].as_u64() > Some(epoch) && led(s) == expected(&topics),
    );
    cluster.create_topic("c", 2, 2);
    topics.push(("c", 2));
    cluster.wait_for(Duration::from_secs(5), "every topic led", |s| {
        led(s) == expected(&topics)
    });
}
