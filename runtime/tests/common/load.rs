//! An acks=all load for failover tests: one producer thread writes one record at a time,
//! round-robin over a topic's partitions, following leader changes, and records every
//! acknowledged (partition, offset, value); afterwards every acknowledged record is checked to
//! be in the log at the offset it was acknowledged at.

use super::{kafka, status_of, TestCluster};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Where each broker listens, shared with the producer thread (a restarted broker moves).
pub type Addresses = Arc<Mutex<BTreeMap<u32, String>>>;

pub struct Load {
    topic: String,
    partitions: u64,
    stop: Arc<AtomicBool>,
    producer: JoinHandle<Vec<(u64, i64, String)>>,
}

/// The current leader of `partition`, as the controllers say (none while no controller does).
fn leader_of(controllers: &str, topic: &str, partition: u64) -> Option<u32> {
    let status = status_of(controllers);
    let leader = TestCluster::partition(&status, topic, partition)["leader"].as_u64()?;
    Some(leader as u32)
}

impl Load {
    /// Starts producing to `topic` of `cluster`.
    pub fn start(
        cluster: &TestCluster,
        addresses: &Addresses,
        topic: &str,
        partitions: u64,
    ) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let producer = {
            let (controllers, addresses, stop) =
                (cluster.controller_list(), addresses.clone(), stop.clone());
            let topic = topic.to_string();
            std::thread::spawn(move || {
                produce_until(&controllers, &addresses, &topic, partitions, &stop)
            })
        };
        Load {
            topic: topic.to_string(),
            partitions,
            stop,
            producer,
        }
    }

    /// Stops the producer; the acknowledged writes.
    pub fn stop(self) -> Acknowledged {
        self.stop.store(true, Ordering::Relaxed);
        Acknowledged {
            topic: self.topic,
            partitions: self.partitions,
            records: self.producer.join().expect("producer"),
        }
    }
}

/// The writes a [`Load`] had acknowledged.
pub struct Acknowledged {
    topic: String,
    partitions: u64,
    pub records: Vec<(u64, i64, String)>,
}

impl Acknowledged {
    /// Asserts that more than `at_least` writes were acknowledged (the load was not vacuous),
    /// then reads every partition back from its leader and asserts each acknowledged record is
    /// there, at the offset it was acknowledged at.
    pub fn assert_kept(&self, cluster: &TestCluster, at_least: usize) {
        assert!(
            self.records.len() > at_least,
            "only {} writes were acknowledged",
            self.records.len()
        );
        for p in 0..self.partitions {
            let (_, address) = cluster.leader(&self.topic, p).expect("leader");
            let (records, _) = kafka::fetch_all(&address, &self.topic, p as i32, 0).expect("fetch");
            let log: BTreeMap<i64, String> = records.into_iter().collect();
            for (_, offset, value) in self.records.iter().filter(|(q, _, _)| *q == p) {
                assert_eq!(
                    log.get(offset),
                    Some(value),
                    "acknowledged record {value} of partition {p} lost or moved from {offset}"
                );
            }
        }
    }
}

fn produce_until(
    controllers: &str,
    addresses: &Addresses,
    topic: &str,
    partitions: u64,
    stop: &AtomicBool,
) -> Vec<(u64, i64, String)> {
    let mut acked = Vec::new();
    let mut leaders: BTreeMap<u64, Option<String>> = BTreeMap::new();
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let p = i % partitions;
        let value = format!("p{p}-{i}");
        i += 1;
        let address = leaders.get(&p).cloned().flatten().or_else(|| {
            let leader = leader_of(controllers, topic, p)?;
            addresses.lock().ok()?.get(&leader).cloned()
        });
        let Some(address) = address else {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        match kafka::produce(&address, topic, p as i32, std::slice::from_ref(&value)) {
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
