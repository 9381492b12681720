//! A broker killed and restarted over a segment whose tail was torn recovers (the torn batch is
//! cut off) and catches up from the leader, rejoining the ISR.

mod common;

use common::{kafka, TestCluster};
use std::fs::OpenOptions;
use std::time::Duration;

fn values(from: usize, n: usize) -> Vec<String> {
    (from..from + n).map(|i| format!("record-{i}")).collect()
}

#[test]
fn a_torn_tail_is_cut_on_restart_and_the_replica_catches_up() {
    let mut cluster = TestCluster::start(3);
    cluster.create_topic("torn", 1, 2);
    let (leader, address) = cluster.leader("torn", 0).expect("leader");
    for i in 0..20 {
        kafka::produce(&address, "torn", 0, &values(i * 3, 3)).expect("acks=all write");
    }
    let follower = (1..=3).find(|&b| b != leader).expect("a follower");
    cluster.wait_for(Duration::from_secs(10), "follower caught up", |s| {
        let row = TestCluster::partition(s, "torn", 0);
        row["replicas"]
            .as_array()
            .is_some_and(|r| r.iter().all(|r| r["log_end_offset"] == 60))
    });
    cluster.kill(follower);

    // Tear the follower's last batch in half, as a crash in the middle of a write would.
    let segment = cluster
        .broker_dir(follower)
        .join("partitions/0/00000000000000000000.log");
    let len = std::fs::metadata(&segment).expect("segment").len();
    let file = OpenOptions::new().write(true).open(&segment).expect("open");
    file.set_len(len - 20).expect("tear");
    drop(file);

    // The partition keeps taking writes meanwhile (ISR 2 ≥ min 2 once the follower is fenced).
    cluster.wait_for(Duration::from_secs(10), "follower out of the ISR", |s| {
        let isr = &TestCluster::partition(s, "torn", 0)["isr"];
        isr.as_array().is_some_and(|isr| isr.len() == 2)
    });
    for i in 20..30 {
        kafka::produce(&address, "torn", 0, &values(i * 3, 3)).expect("acks=all write");
    }

    cluster.restart(follower);
    cluster.wait_for(
        Duration::from_secs(20),
        "follower back in the ISR at 90",
        |s| {
            let row = TestCluster::partition(s, "torn", 0);
            row["isr"].as_array().is_some_and(|isr| isr.len() == 3)
                && row["replicas"]
                    .as_array()
                    .is_some_and(|r| r.iter().all(|r| r["log_end_offset"] == 90))
        },
    );
    let log = std::fs::read_to_string(cluster.dir.path().join(format!("broker-{follower}.log.1")))
        .expect("restarted broker's log");
    assert!(log.contains("truncating torn or corrupt log tail"), "{log}");

    let (records, hw) = kafka::fetch_all(&address, "torn", 0, 0).expect("fetch");
    assert_eq!(hw, 90);
    let expected: Vec<(i64, String)> = values(0, 90)
        .into_iter()
        .enumerate()
        .map(|(i, v)| (i as i64, v))
        .collect();
    assert_eq!(records, expected);
}
