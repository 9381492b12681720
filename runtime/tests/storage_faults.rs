//! The storage fault layer (`ISR_STORAGE_FAULTS` names a control file): a broker whose disk
//! refuses a write (ENOSPC) or an fsync (EIO) stops serving, nothing it could not make durable
//! is acknowledged, and it recovers its log and rejoins the ISR when restarted on a repaired
//! disk. isr-faults runs the same faults under load.

mod common;

use common::{kafka, TestCluster};
use std::time::{Duration, Instant};

fn full_isr(s: &serde_json::Value) -> bool {
    let row = TestCluster::partition(s, "disk", 0);
    row["leader"].is_u64() && row["isr"].as_array().is_some_and(|isr| isr.len() == 3)
}

#[test]
fn a_broker_on_a_failing_disk_stops_unacknowledged_and_recovers_on_restart() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let control = scratch.path().join("storage-faults");
    let mut cluster = TestCluster::start(3);
    // Broker 2 alone gets the fault layer: restarted with the variable set, which it inherits
    // (this file holds no other test).
    std::env::set_var("ISR_STORAGE_FAULTS", &control);
    cluster.kill(2);
    cluster.restart(2);
    // min ISR 3: no write is acknowledged without broker 2, whatever its role.
    let address = cluster.address(1).expect("broker 1");
    assert_eq!(kafka::create_topic(&address, "disk", 1, 3, 3), 0);
    cluster.wait_for(Duration::from_secs(20), "a full ISR", full_isr);
    let mut acknowledged = Vec::new();
    for (round, fault) in ["write-enospc", "fsync-eio"].into_iter().enumerate() {
        let (_, address) = cluster.leader("disk", 0).expect("a leader");
        let kept = format!("kept-{round}");
        // The leader may hear of the ISR's growth a moment after the controller reports it.
        let start = Instant::now();
        let offset = loop {
            match kafka::produce(&address, "disk", 0, std::slice::from_ref(&kept)) {
                Ok(offset) => break offset,
                Err(kafka::NOT_ENOUGH_REPLICAS) if start.elapsed() < Duration::from_secs(10) => {
                    std::thread::sleep(Duration::from_millis(100))
                }
                Err(e) => panic!("{fault}: a write on healthy disks failed with {e}"),
            }
        };
        acknowledged.push((offset, kept));

        std::fs::write(&control, fault).expect("switch the fault on");
        let refused = kafka::produce(&address, "disk", 0, &["refused".to_string()]);
        assert!(refused.is_err(), "{fault}: acknowledged at {refused:?}");
        let start = Instant::now();
        while cluster.brokers[1].as_mut().is_some_and(|b| b.is_running()) {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{fault}: broker 2 kept running on a failed disk"
            );
            std::thread::sleep(Duration::from_millis(50));
        }

        std::fs::write(&control, "").expect("repair the disk");
        cluster.restart(2);
        cluster.wait_for(
            Duration::from_secs(20),
            "broker 2 back in the ISR",
            full_isr,
        );
    }
    let (_, address) = cluster.leader("disk", 0).expect("a leader");
    let (log, _) = kafka::fetch_all(&address, "disk", 0, 0).expect("read back");
    for (offset, value) in &acknowledged {
        assert!(
            log.contains(&(*offset, value.clone())),
            "acknowledged {value}@{offset} is not in {log:?}"
        );
    }
}
