//! Log compaction on real brokers: a topic with `cleanup.policy=compact` keeps each key's
//! latest record on every replica, refuses keyless records, and consumers — isr's own,
//! librdkafka's and kafka-python's — read it from the start across the gaps the cleaner left.

mod common;

use common::clients::{bootstrap, confluent_kafka_present, kafka_python_present, run_script};
use common::{isr, isr_topic_create, TestCluster};
use isr_runtime::storage::CLEANER_CHECKPOINT;
use std::time::Duration;

/// What `isr consume --from-beginning --until-end` prints: (offset, value) per record.
fn read_all(bootstrap: &str, topic: &str) -> Vec<(u64, String)> {
    let (ok, text) = isr(
        &[
            "consume",
            topic,
            "--bootstrap",
            bootstrap,
            "--from-beginning",
            "--until-end",
        ],
        "",
    );
    assert!(ok, "{text}");
    text.lines()
        .filter_map(|l| {
            let (offset, value) = l.split_once(' ')?;
            Some((offset.parse().ok()?, value.to_owned()))
        })
        .collect()
}

/// How many times each broker's log says it cleaned a log.
fn cleanings(cluster: &TestCluster, broker: u32) -> usize {
    let log = cluster.dir.path().join(format!("broker-{broker}.log"));
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .matches("log cleaned")
        .count()
}

/// Where the cleanings of each of the broker's logs ended, as its cleaner checkpoints say.
fn cleaner_checkpoints(cluster: &TestCluster, broker: u32) -> Vec<u64> {
    let partitions = cluster.broker_dir(broker).join("partitions");
    std::fs::read_dir(partitions)
        .into_iter()
        .flatten()
        .filter_map(|e| std::fs::read(e.ok()?.path().join(CLEANER_CHECKPOINT)).ok())
        .filter_map(|bytes| serde_json::from_slice(&bytes).ok())
        .collect()
}

#[test]
fn a_compacted_topic_keeps_each_keys_latest_record_on_every_replica() {
    // The cleaner looks for work on its own schedule (log.cleaner.backoff.ms), whatever the
    // retention check's (left at its 5 min default here); its map is the smallest allowed (42
    // keys: these three fit).
    let mut cluster = TestCluster::start_with_broker_flags(
        3,
        1,
        None,
        &[
            "--log-cleaner-backoff-ms",
            "200",
            "--log-cleaner-dedupe-buffer-size",
            "1024",
        ],
    );
    let bootstrap = cluster.address(1).expect("broker 1");
    let (ok, text) = isr_topic_create(
        &bootstrap,
        "latest",
        1,
        &[
            "--min-insync-replicas",
            "2",
            "--config",
            "cleanup.policy=compact",
            "--config",
            "segment.ms=100",
            "--config",
            "min.cleanable.dirty.ratio=0.01",
        ],
    );
    assert!(ok, "{text}");

    let (ok, text) = isr(
        &["produce", "latest", "--bootstrap", &bootstrap],
        "keyless\n",
    );
    assert!(!ok, "a keyless record is refused: {text}");
    assert!(text.contains("INVALID_RECORD"), "{text}");

    // Eight rounds over three keys, each record its own batch; segments roll every 100 ms of
    // record time, so every round but the last few lands in closed segments.
    let keys = ["a", "b", "c"];
    let rounds = 8;
    for round in 0..rounds {
        for key in keys {
            let (ok, text) = isr(
                &["produce", "latest", "--bootstrap", &bootstrap, "--key", key],
                &format!("{key}{round}\n"),
            );
            assert!(ok, "{text}");
        }
        std::thread::sleep(Duration::from_millis(120));
    }
    let written = keys.len() * rounds;
    cluster.wait_for(Duration::from_secs(20), "every replica cleaning", |_| {
        (1..=3).all(|b| cleanings(&cluster, b) > 0)
    });
    // Each broker recorded where its cleaning ended, so that a restart does not clean again.
    cluster.wait_for(Duration::from_secs(10), "cleaner checkpoints", |_| {
        (1..=3).all(|b| cleaner_checkpoints(&cluster, b).iter().any(|&o| o > 0))
    });
    let read = read_all(&bootstrap, "latest");
    assert!(read.len() < written, "cleaned: {read:?}");
    assert!(
        read.windows(2).all(|w| w[0].0 < w[1].0),
        "offsets rise: {read:?}"
    );
    for key in keys {
        let values: Vec<&str> = read
            .iter()
            .map(|(_, v)| v.as_str())
            .filter(|v| v.starts_with(key))
            .collect();
        assert_eq!(
            values.last(),
            Some(&format!("{key}{}", rounds - 1).as_str())
        );
        assert!(values.windows(2).all(|w| w[0] < w[1]), "{key}: {values:?}");
    }
    // Where a record was cleaned away, its offset holds nothing: the last offset read is
    // still the last one written.
    assert_eq!(read.last().map(|(o, _)| *o), Some(written as u64 - 1));

    // The followers cleaned their own logs: with the leader gone, the new leader serves the
    // same latest values.
    let (leader, _) = cluster.leader("latest", 0).expect("a leader");
    cluster.kill(leader);
    let survivor = (1..=3).find(|&b| b != leader).expect("another broker");
    let bootstrap = cluster.address(survivor).expect("a survivor");
    cluster.wait_for(Duration::from_secs(20), "a new leader", |_| {
        cluster
            .leader("latest", 0)
            .is_some_and(|(b, _)| b != leader)
    });
    let again = read_all(&bootstrap, "latest");
    for key in keys {
        let last = again
            .iter()
            .rfind(|(_, v)| v.starts_with(key))
            .map(|(_, v)| v.clone());
        assert_eq!(last, Some(format!("{key}{}", rounds - 1)));
    }
    assert!(again.len() < written, "{again:?}");
    // The run is a behaviour of the protocol, cleanings and all: each broker's trace says what
    // its cleaner installed, and the replay serves the cleaned batches from then on.
    let traces = cluster.traces();
    let cleaned = std::fs::read_dir(&traces)
        .expect("traces")
        .flatten()
        .filter_map(|f| std::fs::read_to_string(f.path()).ok())
        .map(|text| text.lines().filter(|l| l.contains("\"Cleaned\"")).count())
        .sum::<usize>();
    assert!(
        cleaned > 0,
        "no cleaning in the traces of {}",
        traces.display()
    );
    assert!(cluster.stop_and_replay() > 0);
}

#[test]
fn librdkafka_and_kafka_python_read_a_compacted_topic_to_its_end() {
    if !confluent_kafka_present() || !kafka_python_present() {
        return;
    }
    let cluster = TestCluster::start_with_quick_retention(3);
    let out = run_script(
        "compacted_topic.py",
        &[&bootstrap(&cluster)],
        Duration::from_secs(180),
    );
    println!("{out}");
}
