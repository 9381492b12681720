//! What a Kafka user's tools expect of a cluster, on a real one: confluent-kafka's producer,
//! consumer and admin client (runtime/kafka/tests/clients/confluent_admin.py: automatic topic
//! creation, offsets by time from the brokers' time indexes, commit metadata, a group's offsets
//! listed whole, topic and group admin, a size limit that takes effect on every broker,
//! transactions refused at once), deleted topics leaving no replica behind, and one controller
//! named by every broker. Without kcat or confluent-kafka these tests say "SKIPPED" and pass
//! (and fail under CI=true).

mod common;

use common::clients::{bootstrap, client_present, confluent_kafka_present, script, Client};
use common::TestCluster;
use std::process::Command;
use std::time::Duration;

/// The partition directories every running broker holds.
fn replicas_on_disk(cluster: &TestCluster) -> usize {
    (1..=cluster.brokers.len() as u32)
        .filter_map(|b| std::fs::read_dir(cluster.broker_dir(b).join("partitions")).ok())
        .map(|dirs| dirs.count())
        .sum()
}

/// The replicas the controller assigns, over every partition.
fn assigned_replicas(status: &serde_json::Value) -> usize {
    status["partitions"].as_array().map_or(0, |rows| {
        rows.iter()
            .filter_map(|r| r["replicas"].as_array())
            .map(Vec::len)
            .sum()
    })
}

#[test]
fn confluent_kafka_tools_work_on_a_cluster() {
    if !confluent_kafka_present() {
        return;
    }
    let cluster = TestCluster::start(3);
    let (status, out, err) = Client::run(
        Command::new("python3")
            .arg(script("confluent_admin.py"))
            .args([&bootstrap(&cluster), "compat"]),
        Duration::from_secs(180),
        "confluent_admin.py",
    );
    assert!(
        status.success(),
        "confluent_admin.py failed ({status})\nstdout:\n{out}\nstderr:\n{err}"
    );
    // The script deleted a topic of three partitions: once every broker has reread the
    // metadata, only the replicas of what is left remain on disk.
    cluster.wait_for(Duration::from_secs(10), "deleted replicas removed", |s| {
        let assigned = assigned_replicas(s);
        assigned > 0 && replicas_on_disk(&cluster) == assigned
    });
}

/// The broker id every running broker names as the controller in `kcat -L`.
fn controllers(cluster: &TestCluster) -> Vec<Option<String>> {
    (1..=cluster.brokers.len() as u32)
        .filter_map(|b| cluster.address(b))
        .map(|address| {
            let (_, out, _) = Client::run(
                Command::new("kcat").args(["-b", &address, "-L", "-m", "5"]),
                Duration::from_secs(20),
                "kcat -L",
            );
            out.lines()
                .find(|l| l.contains("(controller)"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_owned))
        })
        .collect()
}

/// isr's controller is not a broker; every broker names the lowest live broker id, so that
/// admin clients agree on one, and the next one when it goes.
#[test]
fn every_broker_names_the_same_controller() {
    if !client_present("kcat", &["-V"], "kcat is not installed") {
        return;
    }
    let mut cluster = TestCluster::start(3);
    let one = Some("1".to_owned());
    assert_eq!(controllers(&cluster), vec![one.clone(), one.clone(), one]);
    cluster.kill(1);
    cluster.wait_for(Duration::from_secs(10), "broker 1 fenced", |s| {
        s["brokers"]["1"]["alive"] == false
    });
    let two = Some("2".to_owned());
    assert_eq!(controllers(&cluster), vec![two.clone(), two]);
}
