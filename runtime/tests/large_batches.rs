//! Batches near the size limit replicate even when a follower has many of them to catch up on
//! (the leader's answer is cut to a byte budget so it fits one internal frame), and a batch
//! above the limit is refused with MESSAGE_TOO_LARGE instead of being stored: Kafka's default
//! `message.max.bytes` of 1,048,588 bytes, or the topic's `max.message.bytes`.

mod common;

use common::{kafka, TestCluster};
use std::time::Duration;

fn full_isr_at(cluster: &TestCluster, leo: u64) {
    cluster.wait_for(Duration::from_secs(60), "every replica at the end", |s| {
        let row = TestCluster::partition(s, "big", 0);
        row["isr"].as_array().is_some_and(|isr| isr.len() == 3)
            && row["replicas"]
                .as_array()
                .is_some_and(|r| r.iter().all(|r| r["log_end_offset"] == leo))
    });
}

#[test]
fn a_follower_catches_up_on_more_big_batches_than_fit_one_frame() {
    let mut cluster = TestCluster::start(3);
    let bootstrap = cluster.address(1).expect("broker 1");
    // The largest limit a topic may have: 16 MiB.
    let configs = [
        ("min.insync.replicas", "2"),
        ("max.message.bytes", "16777216"),
    ];
    assert_eq!(
        kafka::create_topic_with(&bootstrap, "big", 1, 3, &configs),
        0
    );
    full_isr_at(&cluster, 0);
    let (leader, address) = cluster.leader("big", 0).expect("leader");
    let follower = (1..=3).find(|&b| b != leader).expect("a follower");
    cluster.kill(follower);
    cluster.wait_for(Duration::from_secs(10), "follower fenced", |s| {
        TestCluster::partition(s, "big", 0)["isr"]
            .as_array()
            .is_some_and(|isr| isr.len() == 2)
    });

    // Six batches of 12 MiB: 72 MiB, more than one 64 MiB internal frame.
    let value = "x".repeat(12 << 20);
    for _ in 0..6 {
        kafka::produce(&address, "big", 0, std::slice::from_ref(&value)).expect("acks=all write");
    }
    cluster.restart(follower);
    full_isr_at(&cluster, 6);

    let too_big = "y".repeat(17 << 20);
    assert_eq!(
        kafka::produce(&address, "big", 0, &[too_big]),
        Err(kafka::MESSAGE_TOO_LARGE)
    );
}

#[test]
fn a_batch_over_the_default_limit_is_refused_with_message_too_large() {
    let cluster = TestCluster::start(1);
    let address = cluster.address(1).expect("broker 1");
    assert_eq!(kafka::create_topic(&address, "limited", 1, 1, 1), 0);
    cluster.wait_for(Duration::from_secs(10), "a leader", |s| {
        TestCluster::partition(s, "limited", 0)["leader"].is_u64()
    });
    // Kafka's message.max.bytes is 1,048,588 bytes, the whole batch included.
    let fits = "f".repeat(1_048_000);
    assert_eq!(kafka::produce(&address, "limited", 0, &[fits]), Ok(0));
    let over = "o".repeat(2_000_000);
    assert_eq!(
        kafka::produce(&address, "limited", 0, &[over]),
        Err(kafka::MESSAGE_TOO_LARGE)
    );
    let (records, hw) = kafka::fetch(&address, "limited", 0, 0).expect("fetch");
    assert_eq!(
        (records.len(), hw),
        (1, 1),
        "nothing of the refused batch was stored"
    );
}
