//! Controller failover on real processes: the controller's state in a store (a file, or a real
//! etcd), several controllers with one active, zombie controllers fenced.
//!
//! - With the only controller down, current leaders keep taking acks=all writes and serving
//!   reads (brokers answer Metadata from the metadata the controller pushed); the controller
//!   comes back from its store in the next controller epoch.
//! - With etcd: the active controller's SIGKILL under load, then a leader's: a standby takes
//!   over, the partition fails over, and every acknowledged record is read back.
//! - A controller paused past its lease comes back a zombie: it stops acting, and nothing it
//!   knew overrides what its successor decided.
//! - Losing etcd members: one of three changes nothing; two stop metadata changes with a clear
//!   error while writes to current leaders go on; bringing them back resumes everything.

mod common;

use common::clients::{bootstrap, client_present};
use common::etcd::{self, Etcd};
use common::load::{Addresses, Load};
use common::{isr, isr_topic_create, TestCluster};
use serde_json::Value;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TOPIC: &str = "events";

fn addresses(cluster: &TestCluster) -> Addresses {
    Arc::new(Mutex::new(
        (1..=cluster.brokers.len() as u32)
            .filter_map(|b| Some((b, cluster.address(b)?)))
            .collect(),
    ))
}

/// `isr produce` of `values` with acks=all to partition 0; the offsets it printed.
fn produce(bootstrap: &str, topic: &str, values: &[&str]) -> Vec<u64> {
    let input: String = values.iter().map(|v| format!("{v}\n")).collect();
    let (ok, out) = isr(
        &[
            "produce",
            topic,
            "--bootstrap",
            bootstrap,
            "--partition",
            "0",
            "--acks",
            "all",
        ],
        &input,
    );
    assert!(ok, "isr produce failed: {out}");
    out.lines()
        .filter_map(|l| l.split_once(' ')?.1.trim().parse().ok())
        .collect()
}

/// Partition 0 of `topic` as kcat reads it to the high watermark: (offset, value).
fn kcat_read(bootstrap: &str, topic: &str) -> Vec<(u64, String)> {
    let out = Command::new("kcat")
        .args(["-b", bootstrap, "-t", topic, "-p", "0", "-C", "-e", "-q"])
        .args(["-o", "beginning", "-f", "%o %s\\n"])
        .output()
        .expect("kcat -C");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (offset, value) = l.split_once(' ')?;
            Some((offset.parse().ok()?, value.to_string()))
        })
        .collect()
}

fn leader_epoch(status: &Value, topic: &str, partition: u64) -> Option<u64> {
    TestCluster::partition(status, topic, partition)["leader_epoch"].as_u64()
}

#[test]
fn with_the_controller_down_current_leaders_keep_taking_writes() {
    let mut cluster = TestCluster::start(3);
    cluster.create_topic("t", 1, 2);
    let boot = bootstrap(&cluster);
    let before = cluster.status();
    let (_, epoch) = cluster.active_controller().expect("a controller");

    cluster.kill_controller(1);
    assert_eq!(produce(&boot, "t", &["a", "b", "c"]), vec![0, 1, 2]);
    // Clients still find the topic: brokers answer Metadata from their copy.
    let (ok, out) = isr(&["topic", "list", "--bootstrap", &boot], "");
    assert!(ok && out.contains('t'), "{out}");
    // Where the next record lands: after kcat's two, when kcat is here to write them.
    let mut next = 3;
    if client_present("kcat", &["-V"], "kcat is not installed") {
        next = 5;
        let mut kcat = Command::new("kcat")
            .args(["-b", &boot, "-t", "t", "-p", "0", "-P", "-X", "acks=all"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("kcat -P");
        {
            use std::io::Write;
            let mut stdin = kcat.stdin.take().expect("stdin");
            stdin.write_all(b"d\ne\n").expect("kcat stdin");
        }
        assert!(kcat.wait().expect("kcat -P").success(), "kcat -P failed");
        let read = kcat_read(&boot, "t");
        let values: Vec<&str> = read.iter().map(|(_, v)| v.as_str()).collect();
        assert_eq!(values, ["a", "b", "c", "d", "e"], "{read:?}");
        assert_eq!(
            read.iter().map(|(o, _)| *o).collect::<Vec<_>>(),
            [0, 1, 2, 3, 4]
        );
    }
    // Metadata changes wait for a controller.
    let (ok, out) = isr_topic_create(&boot, "u", 1, &[]);
    assert!(!ok, "a topic was created without a controller: {out}");
    assert!(out.contains("NOT_CONTROLLER"), "{out}");

    // Back from its store, in the next controller epoch, with nothing re-elected: the brokers
    // resume their sessions instead of registering as new incarnations.
    cluster.restart_controller(1);
    let after = cluster.wait_for(Duration::from_secs(10), "the controller back", |s| {
        s["controller"]["epoch"].as_u64() == Some(epoch + 1)
    });
    cluster.wait_for_sessions(epoch + 1, Duration::from_secs(10));
    assert_eq!(leader_epoch(&after, "t", 0), leader_epoch(&before, "t", 0));
    assert_eq!(
        TestCluster::partition(&after, "t", 0)["isr"],
        TestCluster::partition(&before, "t", 0)["isr"]
    );
    cluster.create_topic("u", 1, 2);
    assert_eq!(produce(&boot, "t", &["f"]), vec![next]);
}

/// An etcd of `members` members and a cluster of three brokers and two controllers on it, with
/// `TOPIC` created over `partitions`; `None` (the test is skipped) without etcd.
fn on_etcd(members: usize, partitions: u64) -> Option<(Etcd, TestCluster)> {
    if !etcd::present() {
        return None;
    }
    let etcd = Etcd::start(members);
    let cluster = TestCluster::start_with(3, 2, Some(etcd.store()));
    cluster.create_topic(TOPIC, partitions, 2);
    Some((etcd, cluster))
}

/// The active controller of a cluster on etcd, once one is.
fn wait_active(cluster: &TestCluster, timeout: Duration) -> (u32, u64) {
    let status = cluster.wait_for(timeout, "an active controller", |s| {
        s["controller"]["id"].is_u64()
    });
    let c = &status["controller"];
    (
        c["id"].as_u64().expect("id") as u32,
        c["epoch"].as_u64().expect("epoch"),
    )
}

#[test]
fn a_standby_takes_over_from_a_killed_active_controller_and_a_partition_fails_over() {
    let Some((_etcd, mut cluster)) = on_etcd(3, 3) else {
        return;
    };
    let addresses = addresses(&cluster);
    let load = Load::start(&cluster, &addresses, TOPIC, 3);
    std::thread::sleep(Duration::from_secs(1));

    // A consumer group commits its position in partition 1 before the failover.
    let boot = bootstrap(&cluster);
    let consume = |max: &str| {
        isr(
            &[
                "consume",
                TOPIC,
                "--bootstrap",
                &boot,
                "--partition",
                "1",
                "--group",
                "g",
                "--max",
                max,
            ],
            "",
        )
    };
    let (ok, out) = consume("3");
    assert!(ok, "{out}");
    let next: u64 = out
        .lines()
        .filter_map(|l| l.split_once(' ')?.0.parse::<u64>().ok())
        .next_back()
        .expect("records read")
        + 1;

    let (active, epoch) = wait_active(&cluster, Duration::from_secs(5));
    let killed = Instant::now();
    cluster.kill_controller(active);
    let status = cluster.wait_for(Duration::from_secs(15), "the standby active", |s| {
        s["controller"]["epoch"].as_u64() > Some(epoch)
    });
    let standby = status["controller"]["id"].as_u64().expect("id") as u32;
    assert_ne!(standby, active);
    eprintln!(
        "the standby took over {:?} after the kill",
        killed.elapsed()
    );
    // The group's commit survived: it resumes where it left off.
    let new_epoch = status["controller"]["epoch"].as_u64().expect("epoch");
    cluster.wait_for_sessions(new_epoch, Duration::from_secs(10));
    let (ok, out) = consume("1");
    assert!(ok, "{out}");
    assert!(
        out.starts_with(&format!("{next} ")),
        "the group did not resume at offset {next}: {out}"
    );

    let victim = cluster.leader(TOPIC, 0).expect("leader of partition 0").0;
    let killed = Instant::now();
    cluster.kill(victim);
    let status = cluster.wait_for(Duration::from_secs(15), "a new leader", |s| {
        let leader = TestCluster::partition(s, TOPIC, 0)["leader"].as_u64();
        leader.is_some_and(|l| l != u64::from(victim))
    });
    eprintln!(
        "the new controller elected {} {:?} after the leader's kill",
        TestCluster::partition(&status, TOPIC, 0)["leader"],
        killed.elapsed()
    );
    std::thread::sleep(Duration::from_secs(1));
    load.stop().assert_kept(&cluster, 50);
    // Three controllers' traces and the brokers', replayed on the core.
    cluster.stop_and_replay();
}

#[test]
fn a_paused_controller_comes_back_a_zombie_and_changes_nothing() {
    let Some((_etcd, mut cluster)) = on_etcd(1, 1) else {
        return;
    };
    let addresses = addresses(&cluster);
    let load = Load::start(&cluster, &addresses, TOPIC, 1);
    let (zombie, epoch) = wait_active(&cluster, Duration::from_secs(5));

    // Paused past its 2 s lease, the active controller loses the role without knowing.
    cluster.signal_controller(zombie, libc::SIGSTOP);
    let status = cluster.wait_for(Duration::from_secs(15), "the standby active", |s| {
        s["controller"]["epoch"].as_u64() > Some(epoch)
    });
    let successor = status["controller"]["id"].as_u64().expect("id") as u32;
    assert_ne!(successor, zombie);
    // The successor changes an ISR: a follower dies and is fenced.
    let leader = cluster.leader(TOPIC, 0).expect("leader").0;
    let follower = (1..=3).find(|&b| b != leader).expect("a follower");
    cluster.kill(follower);
    let changed = cluster.wait_for(Duration::from_secs(10), "the ISR shrunk", |s| {
        TestCluster::partition(s, TOPIC, 0)["isr"]
            .as_array()
            .is_some_and(|isr| isr.len() == 2)
    });

    // The zombie wakes with the old state in memory: every broker's session looks expired to
    // it. It must not act on that: it finds it lost the role (its lease, or a refused write).
    cluster.signal_controller(zombie, libc::SIGCONT);
    std::thread::sleep(Duration::from_secs(3));
    let after = cluster.status();
    assert_eq!(
        after["controller"]["id"].as_u64(),
        Some(u64::from(successor))
    );
    assert_eq!(
        TestCluster::partition(&after, TOPIC, 0)["isr"],
        TestCluster::partition(&changed, TOPIC, 0)["isr"],
        "the zombie changed the ISR: {after:#}"
    );
    assert_eq!(
        TestCluster::partition(&after, TOPIC, 0)["leader"],
        TestCluster::partition(&changed, TOPIC, 0)["leader"]
    );
    let log = std::fs::read_to_string(cluster.dir.path().join(format!("controller-{zombie}.log")))
        .expect("the zombie's log");
    assert!(
        log.contains("lost the controller role"),
        "the zombie did not notice: {log}"
    );
    load.stop().assert_kept(&cluster, 20);
    // The zombie's trace too: whatever it did after waking is a behaviour of the protocol.
    cluster.stop_and_replay();
}

#[test]
fn losing_etcd_members_stops_metadata_changes_but_not_writes() {
    let Some((mut etcd, cluster)) = on_etcd(3, 1) else {
        return;
    };
    let boot = bootstrap(&cluster);
    let create = |name: &str| isr_topic_create(&boot, name, 1, &[]);

    // One member of three down: a quorum remains, and the controllers carry on. If the killed
    // member led etcd, its election can outlast the controller's lease: the active controller
    // then stands down and one is elected again, so metadata changes resume within seconds.
    etcd.kill(0);
    create_within(&create, "one-down", Duration::from_secs(20));
    assert_eq!(produce(&boot, TOPIC, &["a"]), vec![0]);

    // Two down: no quorum. Metadata changes fail with a clear error; current leaders still
    // take acks=all writes (the ISR is whole).
    etcd.kill(1);
    std::thread::sleep(Duration::from_secs(1));
    let (ok, out) = create("two-down");
    assert!(!ok, "a topic was created without an etcd quorum: {out}");
    // NOT_CONTROLLER when no controller is active; REQUEST_TIMED_OUT when the active one took
    // the request and stood down before it could commit it.
    assert!(
        out.contains("NOT_CONTROLLER") || out.contains("REQUEST_TIMED_OUT"),
        "{out}"
    );
    assert_eq!(produce(&boot, TOPIC, &["b", "c"]), vec![1, 2]);

    // Back: a controller is active again and everything resumes.
    etcd.restart(0);
    etcd.restart(1);
    etcd.wait_healthy(Duration::from_secs(20));
    wait_active(&cluster, Duration::from_secs(20));
    create_within(&create, "back", Duration::from_secs(20));
    assert_eq!(produce(&boot, TOPIC, &["d"]), vec![3]);
}

/// Creates topic `name` with `create`, retrying until it succeeds or `timeout` passes. A retry
/// answered TOPIC_ALREADY_EXISTS succeeded too: an earlier attempt's answer was lost (its
/// controller stepped down after storing the topic), not its creation.
fn create_within(create: &dyn Fn(&str) -> (bool, String), name: &str, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    let mut retry = false;
    loop {
        let (ok, out) = create(name);
        if ok || (retry && out.contains("TOPIC_ALREADY_EXISTS")) {
            return;
        }
        retry = true;
        assert!(
            Instant::now() < deadline,
            "topic {name} not created within {timeout:?}: {out}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}
