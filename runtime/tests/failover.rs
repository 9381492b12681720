//! The headline scenario: 3 brokers, a topic with 3 partitions (RF 3, min ISR 2), acks=all
//! writes throughout; SIGKILL a leader, keep producing, restart it. Every acknowledged record is
//! read back at its acknowledged offset and the restarted broker rejoins every ISR. Then, with
//! two of three brokers down, an acks=all write is refused with NOT_ENOUGH_REPLICAS.

mod common;

use common::load::{Addresses, Load};
use common::{kafka, TestCluster};
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TOPIC: &str = "events";
const PARTITIONS: u64 = 3;

fn isr_len(status: &Value, partition: u64) -> usize {
    TestCluster::partition(status, TOPIC, partition)["isr"]
        .as_array()
        .map_or(0, Vec::len)
}

#[test]
fn acknowledged_records_survive_a_leader_kill_and_the_leader_rejoins() {
    let mut cluster = TestCluster::start(3);
    let addresses: Addresses = Arc::new(Mutex::new(
        (1..=3)
            .filter_map(|b| Some((b, cluster.address(b)?)))
            .collect(),
    ));
    cluster.create_topic(TOPIC, PARTITIONS, 2);

    let load = Load::start(&cluster, &addresses, TOPIC, PARTITIONS);
    std::thread::sleep(Duration::from_secs(1));

    let victim = cluster.leader(TOPIC, 0).expect("leader of partition 0").0;
    let killed_at = Instant::now();
    cluster.kill(victim);
    let status = cluster.wait_for(Duration::from_secs(10), "a new leader", |s| {
        let leader = TestCluster::partition(s, TOPIC, 0)["leader"].as_u64();
        leader.is_some_and(|l| l != u64::from(victim))
    });
    eprintln!(
        "new leader after {:?}: {}",
        killed_at.elapsed(),
        TestCluster::partition(&status, TOPIC, 0)["leader"]
    );
    std::thread::sleep(Duration::from_secs(2));

    cluster.restart(victim);
    if let (Ok(mut a), Some(address)) = (addresses.lock(), cluster.address(victim)) {
        a.insert(victim, address);
    }
    cluster.wait_for(
        Duration::from_secs(30),
        "the restarted broker in every ISR",
        |s| (0..PARTITIONS).all(|p| isr_len(s, p) == 3),
    );
    std::thread::sleep(Duration::from_millis(500));
    load.stop().assert_kept(&cluster, 50);

    // Two of three brokers down: the survivor may lead, but cannot commit acks=all writes.
    let survivor = (1..=3).find(|&b| b != victim).expect("survivor");
    for b in (1..=3).filter(|&b| b != survivor) {
        cluster.kill(b);
    }
    let status = cluster.wait_for(Duration::from_secs(10), "ISR of one", |s| {
        (0..PARTITIONS).all(|p| {
            isr_len(s, p) == 1
                && TestCluster::partition(s, TOPIC, p)["leader"] == u64::from(survivor)
        })
    });
    let address = cluster.address(survivor).expect("survivor's address");
    assert_eq!(
        kafka::produce(&address, TOPIC, 0, &["refused".to_string()]),
        Err(kafka::NOT_ENOUGH_REPLICAS),
        "status: {status:#}"
    );
    // The whole run, replayed on the core: a behaviour of the protocol.
    cluster.stop_and_replay();
}
