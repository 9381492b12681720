//! What a Kafka user's tools expect of a cluster, on a real one: confluent-kafka's producer,
//! consumer and admin client (runtime/kafka/tests/clients/confluent_admin.py: automatic topic
//! creation, offsets by time from the brokers' time indexes, commit metadata, a group's offsets
//! listed whole, topic and group admin, a size limit that takes effect on every broker,
//! transactions refused at once), deleted topics leaving no replica behind, one controller
//! named by every broker, and `isr group` seeing a kcat group member. Without kcat or confluent-kafka these tests say "SKIPPED" and pass
//! (and fail under CI=true).

mod common;

use common::clients::{bootstrap, client_present, confluent_kafka_present, run_script, Client};
use common::{kafka, TestCluster, ISR};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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
    run_script(
        "confluent_admin.py",
        &[&bootstrap(&cluster), "compat"],
        Duration::from_secs(180),
    );
    // The script deleted a topic of three partitions: once every broker has reread the
    // metadata, only the replicas of what is left remain on disk.
    cluster.wait_for(Duration::from_secs(10), "deleted replicas removed", |s| {
        let assigned = assigned_replicas(s);
        assigned > 0 && replicas_on_disk(&cluster) == assigned
    });
}

#[test]
fn log_append_time_topics_carry_the_brokers_time() {
    if !confluent_kafka_present() {
        return;
    }
    let cluster = TestCluster::start(3);
    run_script(
        "confluent_log_append_time.py",
        &[&bootstrap(&cluster)],
        Duration::from_secs(120),
    );
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

/// `isr ARGS`: exit status, stdout and stderr.
fn isr(args: &[&str]) -> (bool, String, String) {
    let (status, out, err) =
        Client::run(Command::new(ISR).args(args), Duration::from_secs(60), "isr");
    (status.success(), out, err)
}

/// `isr group` on a cluster whose group has a live kcat member: describe shows it with its
/// assignment and the lag, list shows the group Stable, and delete is refused while it lives.
#[test]
fn isr_group_commands_see_a_kcat_member() {
    if !client_present("kcat", &["-V"], "kcat is not installed") {
        return;
    }
    let cluster = TestCluster::start(3);
    cluster.create_topic("watched", 2, 2);
    let (_, leader) = cluster.leader("watched", 0).expect("a leader");
    let values: Vec<String> = (0..5).map(|i| format!("v{i}")).collect();
    kafka::produce(&leader, "watched", 0, &values).expect("produce");
    let boot = bootstrap(&cluster);
    let _member = Client::spawn(
        Command::new("kcat")
            .args(["-b", &boot, "-G", "watchers", "watched", "-q"])
            .args([
                "-X",
                "auto.offset.reset=earliest",
                "-X",
                "auto.commit.interval.ms=100",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    let describe = || {
        let (ok, out, err) = isr(&[
            "group",
            "describe",
            "watchers",
            "--bootstrap",
            &boot,
            "--json",
        ]);
        assert!(ok || err.contains("no group"), "{err}");
        serde_json::from_str::<serde_json::Value>(&out).unwrap_or_default()
    };
    let start = Instant::now();
    let group = loop {
        let group = describe();
        let committed = group["offsets"]
            .as_array()
            .and_then(|o| o.iter().find(|o| o["partition"] == 0))
            .is_some_and(|o| o["offset"] == 5 && o["lag"] == 0);
        if group["state"] == "Stable" && committed {
            break group;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "last: {group}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let members = group["members"].as_array().expect("members");
    assert_eq!(members.len(), 1, "{group}");
    let assigned: Vec<_> = members[0]["assignment"][0]["partitions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(assigned.len(), 2, "both partitions: {group}");

    let (ok, out, _) = isr(&["group", "list", "--bootstrap", &boot]);
    assert!(
        ok && out.contains("watchers state=Stable protocol-type=consumer"),
        "{out}"
    );
    let (ok, _, err) = isr(&["group", "delete", "watchers", "--bootstrap", &boot]);
    assert!(!ok && err.contains("NON_EMPTY_GROUP"), "{err}");
}
