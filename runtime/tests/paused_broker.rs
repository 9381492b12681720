//! A broker that stops answering (SIGSTOP) is fenced when its session expires and leaves the
//! ISR; when it resumes, the controller asks it to register again and it rejoins the ISR.

mod common;

use common::{kafka, TestCluster};
use std::time::Duration;

fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) on a child this test started.
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

#[test]
fn a_paused_broker_is_fenced_and_rejoins_when_it_resumes() {
    let cluster = TestCluster::start(3);
    let bootstrap = cluster.address(1).expect("broker 1");
    assert_eq!(kafka::create_topic(&bootstrap, "pause", 1, 3, 2), 0);
    cluster.wait_for(Duration::from_secs(10), "full ISR", |s| {
        TestCluster::partition(s, "pause", 0)["isr"]
            .as_array()
            .is_some_and(|isr| isr.len() == 3)
    });
    let (leader, address) = cluster.leader("pause", 0).expect("leader");
    let paused = (1..=3).find(|&b| b != leader).expect("a follower");
    let pid = cluster.brokers[paused as usize - 1]
        .as_ref()
        .expect("running")
        .pid();

    signal(pid, libc::SIGSTOP);
    cluster.wait_for(Duration::from_secs(10), "paused broker fenced", |s| {
        s["brokers"][paused.to_string()]["alive"] == false
            && TestCluster::partition(s, "pause", 0)["isr"]
                .as_array()
                .is_some_and(|isr| isr.len() == 2)
    });
    kafka::produce(&address, "pause", 0, &["while paused".to_string()]).expect("ISR of 2 commits");

    signal(pid, libc::SIGCONT);
    cluster.wait_for(
        Duration::from_secs(15),
        "resumed broker back in the ISR",
        |s| {
            s["brokers"][paused.to_string()]["alive"] == true
                && TestCluster::partition(s, "pause", 0)["isr"]
                    .as_array()
                    .is_some_and(|isr| isr.len() == 3)
        },
    );
}
