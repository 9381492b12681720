//! Brokers follow the controller's metadata by deltas: after a session's whole view, one delta
//! per committed change, each bringing the broker's metadata offset one further. `isr status`
//! shows each broker's offset, its lag behind the controller and the deltas it ignored.

mod common;

use common::TestCluster;
use std::time::Duration;

/// The metadata offsets of brokers 1 to 3, if every one answered and none lags.
fn caught_up(status: &serde_json::Value) -> Option<Vec<u64>> {
    (1..=3)
        .map(|b| {
            let broker = &status["brokers"][b.to_string()];
            (broker["metadata_lag"] == 0)
                .then(|| broker["metadata_offset"].as_u64())
                .flatten()
        })
        .collect()
}

#[test]
fn brokers_apply_every_change_as_a_delta_and_status_shows_their_offsets() {
    let mut cluster = TestCluster::start(3);
    let before = cluster.wait_for(Duration::from_secs(10), "brokers caught up", |s| {
        caught_up(s).is_some()
    });
    let before = caught_up(&before).expect("caught up");

    // A topic's creation is one change, whatever its partitions: every broker gets it as a
    // delta, applies it, and answers clients' Metadata with the new topic.
    cluster.create_topic("deltas", 6, 2);
    let after = cluster.wait_for(Duration::from_secs(10), "brokers caught up", |s| {
        caught_up(s).is_some_and(|now| now.iter().zip(&before).all(|(n, b)| n > b))
    });
    let after = caught_up(&after).expect("caught up");
    assert!(after.windows(2).all(|w| w[0] == w[1]), "{after:?}");

    // A broker's death is a change the others apply: the survivors see it fenced, and
    // partitions it led move, without any whole view being sent again.
    let (victim, _) = cluster.leader("deltas", 0).expect("a leader");
    cluster.kill(victim);
    let status = cluster.wait_for(Duration::from_secs(10), "the survivors follow", |s| {
        s["brokers"][victim.to_string()]["alive"] == false
            && (1..=3u32).filter(|&b| b != victim).all(|b| {
                let broker = &s["brokers"][b.to_string()];
                broker["metadata_lag"] == 0 && broker["metadata_offset"].as_u64() > Some(after[0])
            })
    });
    // Each broker counts the deltas it ignored (older than its view, or after a gap).
    for b in (1..=3u32).filter(|&b| b != victim) {
        let stale = status["brokers"][b.to_string()]["stale_deltas"].as_u64();
        eprintln!("broker {b}: {stale:?} stale deltas");
        assert!(stale.is_some(), "{status:#}");
    }
    let row = TestCluster::partition(&status, "deltas", 0);
    assert_ne!(
        row["leader"].as_u64(),
        Some(u64::from(victim)),
        "{status:#}"
    );
}
