//! The log start offset on real brokers: DeleteRecords through `isr topic delete-records`, and
//! time-based retention deleting whole segments; `isr status` shows each replica's log start.

mod common;

use common::{isr, isr_topic_create, TestCluster};
use serde_json::Value;
use std::time::Duration;

/// Every replica's `field` of `topic`/0, by broker, as `isr status --json` shows them.
fn replicas(cluster: &TestCluster, topic: &str, field: &str) -> Vec<u64> {
    let status = cluster.status();
    TestCluster::partition(&status, topic, 0)["replicas"]
        .as_array()
        .map(|rs| {
            rs.iter()
                .filter_map(|r: &Value| r[field].as_u64())
                .collect()
        })
        .unwrap_or_default()
}

/// Every replica's log start offset of `topic`/0, by broker.
fn log_starts(cluster: &TestCluster, topic: &str) -> Vec<u64> {
    replicas(cluster, topic, "log_start_offset")
}

/// `isr topic delete-records TOPIC --partition 0 --before BEFORE`.
fn delete_records(bootstrap: &str, topic: &str, before: &str) -> (bool, String) {
    isr(
        &[
            "topic",
            "delete-records",
            topic,
            "--bootstrap",
            bootstrap,
            "--partition",
            "0",
            "--before",
            before,
        ],
        "",
    )
}

/// Three brokers and `topic` (one partition, RF 3, min ISR 2) holding six records in three
/// batches; and broker 1's address.
fn six_records(topic: &str) -> (TestCluster, String) {
    let cluster = TestCluster::start(3);
    let bootstrap = cluster.address(1).expect("broker 1");
    let (ok, text) = isr_topic_create(&bootstrap, topic, 1, &["--min-insync-replicas", "2"]);
    assert!(ok, "{text}");
    for batch in ["a\nb\n", "c\nd\n", "e\nf\n"] {
        let (ok, text) = isr(&["produce", topic, "--bootstrap", &bootstrap], batch);
        assert!(ok, "{text}");
    }
    (cluster, bootstrap)
}

#[test]
fn delete_records_moves_the_log_start_on_every_replica_and_never_past_the_high_watermark() {
    let (mut cluster, bootstrap) = six_records("deleted");
    // Beyond the high watermark: refused, nothing deleted.
    let delete = |before: &str| delete_records(&bootstrap, "deleted", before);
    let (ok, text) = delete("1000");
    assert!(!ok, "{text}");
    assert!(text.contains("OFFSET_OUT_OF_RANGE"), "{text}");
    assert_eq!(log_starts(&cluster, "deleted"), vec![0, 0, 0]);

    // Offset 3: the log starts there on every replica (each record went as its own batch
    // here; inside a batch, it starts at the offset too: tests/batch_log_start.rs, and the
    // disk log's own test).
    let (ok, text) = delete("3");
    assert!(ok, "{text}");
    let start: u64 = text
        .trim()
        .rsplit(' ')
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no log start in {text:?}"));
    assert_eq!(start, 3, "{text}");
    cluster.wait_for(Duration::from_secs(10), "every replica's log start", |_| {
        log_starts(&cluster, "deleted") == vec![start; 3]
    });

    // A consumer from the beginning starts at the log start.
    let (ok, text) = isr(
        &[
            "consume",
            "deleted",
            "--bootstrap",
            &bootstrap,
            "--from-beginning",
            "--until-end",
        ],
        "",
    );
    assert!(ok, "{text}");
    let offsets: Vec<&str> = text.lines().filter_map(|l| l.split(' ').next()).collect();
    let expected: Vec<String> = (start..6).map(|o| o.to_string()).collect();
    assert_eq!(offsets, expected, "{text}");

    // -1: everything committed.
    let (ok, text) = delete("-1");
    assert!(ok, "{text}");
    assert!(text.contains("log start 6"), "{text}");
    cluster.wait_for(
        Duration::from_secs(10),
        "every log start at the end",
        |_| log_starts(&cluster, "deleted") == vec![6; 3],
    ); // The run is a behaviour of the protocol: the model's own core accepts every step.
    assert!(cluster.stop_and_replay() > 0);
}

/// On a partition no record comes to, followers hear the leader's high watermark and log start
/// within a second (the core's `high_watermark_wait`), not when their held Fetch's long wait
/// (`fetch_max_wait`, minutes) runs out: the high watermark the last record's replication
/// moved, and the log start a DeleteRecords moved while a follower was down, which it learns
/// when it comes back with its old checkpoint.
#[test]
fn followers_of_an_idle_partition_hear_its_high_watermark_and_log_start_soon() {
    let (mut cluster, _) = six_records("idle");
    let high_watermarks = |cluster: &TestCluster| replicas(cluster, "idle", "high_watermark");
    cluster.wait_for(
        Duration::from_secs(5),
        "every replica's high watermark",
        |_| high_watermarks(&cluster) == vec![6; 3],
    );
    let (leader, address) = cluster.leader("idle", 0).expect("a leader");
    let follower = (1..=3).find(|&b| b != leader).expect("a follower");
    cluster.kill(follower);
    let (ok, text) = delete_records(&address, "idle", "-1");
    assert!(ok, "{text}");
    cluster.wait_for(Duration::from_secs(5), "the log start moved", |_| {
        log_starts(&cluster, "idle") == vec![6; 2]
    });
    cluster.restart(follower);
    cluster.wait_for(
        Duration::from_secs(10),
        "the restarted follower's log start and high watermark",
        |_| log_starts(&cluster, "idle") == vec![6; 3] && high_watermarks(&cluster) == vec![6; 3],
    );
    assert!(cluster.stop_and_replay() > 0);
}

#[test]
fn retention_by_time_deletes_old_segments_on_every_replica() {
    let mut cluster = TestCluster::start_with_quick_retention(3);
    let bootstrap = cluster.address(1).expect("broker 1");
    let (ok, text) = isr_topic_create(
        &bootstrap,
        "expiring",
        1,
        &[
            "--min-insync-replicas",
            "2",
            "--config",
            "retention.ms=1000",
            "--config",
            "segment.ms=200",
        ],
    );
    assert!(ok, "{text}");
    // A steady producer for 3 s: segments roll every 200 ms of record time.
    for i in 0..15 {
        let (ok, text) = isr(
            &["produce", "expiring", "--bootstrap", &bootstrap],
            &format!("{i}\n"),
        );
        assert!(ok, "{text}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let status = cluster.wait_for(
        Duration::from_secs(15),
        "retention on every replica",
        |_| {
            let starts = log_starts(&cluster, "expiring");
            starts.len() == 3 && starts.iter().all(|&s| s > 0)
        },
    );
    // Deleted segments are gone from disk: far fewer files than the 15 segments written.
    let files = std::fs::read_dir(cluster.broker_dir(1).join("partitions"))
        .expect("partitions")
        .flatten()
        .flat_map(|p| std::fs::read_dir(p.path()).into_iter().flatten().flatten())
        .filter(|f| {
            f.file_name()
                .to_string_lossy()
                .ends_with(isr_runtime::storage::SEGMENT_SUFFIX)
        })
        .count();
    assert!(files < 12, "{files} segment files left; {status}");
    assert!(cluster.stop_and_replay() > 0);
}

/// How many segment files each of broker 1's partitions has, by its directory's name.
fn segment_counts(cluster: &TestCluster) -> std::collections::BTreeMap<String, usize> {
    std::fs::read_dir(cluster.broker_dir(1).join("partitions"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|p| {
            let segments = std::fs::read_dir(p.path())
                .into_iter()
                .flatten()
                .flatten()
                .filter(|f| {
                    f.file_name()
                        .to_string_lossy()
                        .ends_with(isr_runtime::storage::SEGMENT_SUFFIX)
                })
                .count();
            (p.file_name().to_string_lossy().into_owned(), segments)
        })
        .collect()
}

/// A topic's segments roll by its own `segment.bytes` from its first record, and by a changed
/// one from the change on, not from the next retention pass (a minute away here): records
/// written at once after a topic's creation would otherwise all land in one active segment,
/// which is never cleaned or deleted (librdkafka's test 0077 writes so).
#[test]
fn a_topics_segment_configs_apply_from_its_first_record_and_from_a_change() {
    let cluster =
        TestCluster::start_with_broker_flags(3, 1, None, &["--log-cleaner-backoff-ms", "60000"]);
    let bootstrap = cluster.address(1).expect("broker 1");
    let value = "x".repeat(300);
    // Six batches of over 300 bytes: a 500-byte segment is full at its second.
    let produce = |topic: &str| {
        for _ in 0..6 {
            let (ok, text) = isr(
                &["produce", topic, "--bootstrap", &bootstrap],
                &format!("{value}\n"),
            );
            assert!(ok, "{text}");
        }
    };
    let (ok, text) = isr_topic_create(&bootstrap, "small", 1, &["--config", "segment.bytes=500"]);
    assert!(ok, "{text}");
    produce("small");
    let first = segment_counts(&cluster);
    assert_eq!(
        first.values().copied().collect::<Vec<_>>(),
        [3],
        "{first:?}"
    );

    // A second topic, at the broker's default (1 GiB) when created, then altered.
    let (ok, text) = isr_topic_create(&bootstrap, "altered", 1, &[]);
    assert!(ok, "{text}");
    let (ok, text) = isr(
        &[
            "topic",
            "alter",
            "altered",
            "--bootstrap",
            &bootstrap,
            "--set",
            "segment.bytes=500",
        ],
        "",
    );
    assert!(ok, "{text}");
    // The change reaches the broker as a metadata delta: a moment, far below the pass.
    std::thread::sleep(Duration::from_millis(500));
    produce("altered");
    let both = segment_counts(&cluster);
    assert_eq!(
        both.values().copied().collect::<Vec<_>>(),
        [3, 3],
        "{both:?}"
    );
}

/// Every replica's flushed offset of `topic`/0 (how far its log is fsynced), by broker.
fn flushed(cluster: &TestCluster, topic: &str) -> Vec<u64> {
    replicas(cluster, topic, "flushed_offset")
}

/// Under `--flush page-cache` (Kafka's default) a log is fsynced only at a clean shutdown,
/// unless its topic's `flush.ms` asks for more: then each replica fsyncs what it holds once its
/// last flush is that old (checked at each pass, every `--log-cleaner-backoff-ms` here).
#[test]
fn a_topics_flush_ms_fsyncs_its_replicas_under_page_cache() {
    let cluster = TestCluster::start_with_broker_flags(
        3,
        1,
        None,
        &["--flush", "page-cache", "--log-cleaner-backoff-ms", "200"],
    );
    let bootstrap = cluster.address(1).expect("broker 1");
    let (ok, text) = isr_topic_create(&bootstrap, "flushed", 1, &["--config", "flush.ms=100"]);
    assert!(ok, "{text}");
    let (ok, text) = isr_topic_create(&bootstrap, "cached", 1, &[]);
    assert!(ok, "{text}");
    for topic in ["flushed", "cached"] {
        let (ok, text) = isr(&["produce", topic, "--bootstrap", &bootstrap], "a\nb\nc\n");
        assert!(ok, "{text}");
    }
    cluster.wait_for(Duration::from_secs(15), "flush.ms on every replica", |_| {
        flushed(&cluster, "flushed") == [3, 3, 3]
    });
    // Two more passes: the topic without flush.ms is still in the page cache only.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(flushed(&cluster, "cached"), [0, 0, 0]);
}
