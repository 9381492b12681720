//! Controlled shutdown: a broker stopped with SIGTERM asks the controller to fence it before it
//! exits, so the partitions it led already have new leaders when the process is gone, instead of
//! a session timeout later. Then it restarts clean and rejoins the ISR with its log intact.

mod common;

use common::{kafka, TestCluster};
use std::process::Command;
use std::time::{Duration, Instant};

const TOPIC: &str = "orderly";

#[test]
fn a_sigterm_moves_leadership_before_the_broker_exits() {
    let mut cluster = TestCluster::start(3);
    cluster.create_topic(TOPIC, 2, 2);
    let (victim, address) = cluster.leader(TOPIC, 0).expect("leader of partition 0");
    let before: Vec<String> = (0..10).map(|i| format!("before-{i}")).collect();
    assert_eq!(kafka::produce(&address, TOPIC, 0, &before), Ok(0));

    let proc = cluster.brokers[victim as usize - 1]
        .as_mut()
        .expect("victim running");
    let status = Command::new("kill")
        .args(["-TERM", &proc.pid().to_string()])
        .status()
        .expect("kill -TERM");
    assert!(status.success());
    let start = Instant::now();
    let exit = loop {
        if let Some(exit) = proc.child.try_wait().expect("try_wait") {
            break exit;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "broker {victim} did not stop within 20 s of SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(exit.success(), "broker {victim} exited with {exit}");

    // The first look after the exit already shows the fence and the new leader: the session
    // (1 s) has not expired yet, so only the controlled shutdown can explain it.
    let status = cluster.status();
    let row = TestCluster::partition(&status, TOPIC, 0);
    let leader = row["leader"].as_u64();
    assert!(
        leader.is_some_and(|l| l != u64::from(victim)),
        "partition 0 still led by {leader:?} after broker {victim} exited: {status:#}"
    );
    let in_isr = row["isr"]
        .as_array()
        .is_some_and(|isr| isr.iter().any(|b| b == u64::from(victim)));
    assert!(!in_isr, "{status:#}");
    assert_eq!(
        status["brokers"][victim.to_string()]["alive"],
        false,
        "{status:#}"
    );
    assert!(
        cluster.broker_dir(victim).join("clean-shutdown").exists(),
        "no clean-shutdown marker"
    );

    let (_, address) = cluster.leader(TOPIC, 0).expect("new leader");
    let after = vec!["after".to_string()];
    assert_eq!(kafka::produce(&address, TOPIC, 0, &after), Ok(10));

    cluster.restart(victim);
    cluster.wait_for(Duration::from_secs(20), "the broker back in the ISR", |s| {
        TestCluster::partition(s, TOPIC, 0)["isr"]
            .as_array()
            .is_some_and(|isr| isr.len() == 3)
    });
    let (records, _) = kafka::fetch_all(&address, TOPIC, 0, 0).expect("fetch");
    let values: Vec<String> = records.into_iter().map(|(_, v)| v).collect();
    let expected: Vec<String> = before.into_iter().chain(after).collect();
    assert_eq!(values, expected);
    cluster.stop_and_replay();
}
