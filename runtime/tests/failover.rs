//! The headline scenario: 3 brokers, a topic with 3 partitions (RF 3, min ISR 2), acks=all
//! writes throughout; SIGKILL a leader, keep producing, restart it. Every acknowledged record is
//! read back at its acknowledged offset and the restarted broker rejoins every ISR. Then, with
//! two of three brokers down, an acks=all write is refused with NOT_ENOUGH_REPLICAS.

mod common;

use common::{kafka, TestCluster, ISR};
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TOPIC: &str = "events";
const PARTITIONS: u64 = 3;

type Addresses = Arc<Mutex<BTreeMap<u32, String>>>;

fn leader_of(controller: &str, partition: u64) -> Option<u32> {
    let out = Command::new(ISR)
        .args(["status", TOPIC, "--json", "--controller", controller])
        .output()
        .ok()?;
    let rows: Value = serde_json::from_slice(&out.stdout).ok()?;
    rows.as_array()?
        .iter()
        .find(|r| r["partition"] == partition)?["leader"]
        .as_u64()
        .map(|l| l as u32)
}

/// Produces one record at a time round-robin over the partitions until `stop`, following
/// leader changes; returns every acknowledged (partition, offset, value).
fn produce_until(
    controller: String,
    addresses: Addresses,
    stop: Arc<AtomicBool>,
) -> Vec<(u64, i64, String)> {
    let mut acked = Vec::new();
    let mut leaders: BTreeMap<u64, Option<String>> = BTreeMap::new();
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let p = i % PARTITIONS;
        let value = format!("p{p}-{i}");
        i += 1;
        let address = leaders.get(&p).cloned().flatten().or_else(|| {
            let leader = leader_of(&controller, p)?;
            addresses.lock().ok()?.get(&leader).cloned()
        });
        let Some(address) = address else {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        match kafka::produce(&address, TOPIC, p as i32, std::slice::from_ref(&value)) {
            Ok(offset) => {
                leaders.insert(p, Some(address));
                acked.push((p, offset, value));
            }
            Err(_) => {
                leaders.insert(p, None);
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    acked
}

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

    let stop = Arc::new(AtomicBool::new(false));
    let producer = {
        let (controller, addresses, stop) = (
            cluster.controller.address.clone(),
            addresses.clone(),
            stop.clone(),
        );
        std::thread::spawn(move || produce_until(controller, addresses, stop))
    };
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
    stop.store(true, Ordering::Relaxed);
    let acked = producer.join().expect("producer");
    assert!(
        acked.len() > 50,
        "only {} writes were acknowledged",
        acked.len()
    );

    for p in 0..PARTITIONS {
        let (_, address) = cluster.leader(TOPIC, p).expect("leader");
        let (records, _) = kafka::fetch_all(&address, TOPIC, p as i32, 0).expect("fetch");
        let log: BTreeMap<i64, String> = records.into_iter().collect();
        for (_, offset, value) in acked.iter().filter(|(q, _, _)| *q == p) {
            assert_eq!(
                log.get(offset),
                Some(value),
                "acknowledged record lost or moved"
            );
        }
    }

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
}
