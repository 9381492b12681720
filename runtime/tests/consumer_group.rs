//! Consumer groups on a real cluster: confluent-kafka consumers subscribe to a topic of a
//! three-broker cluster; the group's coordinator is one of the brokers (FindCoordinator sends
//! every member to it), the members share the partitions, the survivor takes over when one
//! leaves, and a new member resumes from the group's commits. The script is
//! runtime/kafka/tests/clients/confluent_group.py; without confluent-kafka the test says
//! "SKIPPED" and passes (CI installs it).

mod common;

use common::{kafka, TestCluster};
use isr::BrokerId;
use isr_kafka::coordinator::coordinator_of;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn confluent_kafka_importable() -> bool {
    let importable = Command::new("python3")
        .args(["-c", "import confluent_kafka"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !importable {
        eprintln!("SKIPPED: python3 cannot import confluent_kafka");
    }
    importable
}

fn script(name: &str) -> PathBuf {
    [
        env!("CARGO_MANIFEST_DIR"),
        "kafka",
        "tests",
        "clients",
        name,
    ]
    .iter()
    .collect()
}

/// A child process, SIGKILLed and reaped if the test ends early.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn subscribing_consumers_share_take_over_and_resume_on_a_cluster() {
    if !confluent_kafka_importable() {
        return;
    }
    let cluster = TestCluster::start(3);
    let bootstrap: Vec<String> = (1..=3).filter_map(|b| cluster.address(b)).collect();
    let mut child = Command::new("python3")
        .arg(script("confluent_group.py"))
        .args([&bootstrap.join(","), "members"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn python3");
    let start = Instant::now();
    while child.try_wait().expect("try_wait").is_none() {
        if start.elapsed() > Duration::from_secs(180) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("output");
    assert!(
        out.status.success(),
        "confluent_group.py failed ({})\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!(
        "{}in {:?}",
        String::from_utf8_lossy(&out.stdout),
        start.elapsed()
    );
}

/// The broker coordinating a group is SIGKILLed: its member finds the next coordinator, joins
/// again and goes on reading from its commits (nothing lost, nothing committed read twice).
#[test]
fn a_group_member_rides_out_the_loss_of_its_coordinator() {
    if !confluent_kafka_importable() {
        return;
    }
    const GROUP: &str = "survivors";
    let mut cluster = TestCluster::start(3);
    let bootstrap: Vec<String> = (1..=3).filter_map(|b| cluster.address(b)).collect();
    let first = cluster.address(1).expect("broker 1");
    assert_eq!(kafka::create_topic(&first, "events", 3, 3, 2), 0);
    cluster.wait_for(Duration::from_secs(10), "leaders", |s| {
        (0..3).all(|p| TestCluster::partition(s, "events", p)["leader"].is_u64())
    });
    let brokers = [BrokerId(1), BrokerId(2), BrokerId(3)];
    let coordinator = coordinator_of(GROUP, &brokers).expect("a coordinator").0;

    let mut child = KillOnDrop(
        Command::new("python3")
            .arg(script("confluent_coordinator_failover.py"))
            .args([&bootstrap.join(","), "events", GROUP])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn python3"),
    );
    let stderr = {
        let mut pipe = child.0.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut pipe, &mut text);
            text
        })
    };
    let mut lines = BufReader::new(child.0.stdout.take().expect("stdout")).lines();
    let ready = lines.next().and_then(Result::ok).unwrap_or_default();
    if ready != "ready" {
        drop(child);
        panic!(
            "the member never got ready ({ready:?})\nstderr:\n{}",
            stderr.join().unwrap_or_default()
        );
    }
    cluster.kill(coordinator);
    cluster.wait_for(Duration::from_secs(10), "leaders without it", |s| {
        (0..3).all(|p| {
            let leader = TestCluster::partition(s, "events", p)["leader"].as_u64();
            leader.is_some_and(|l| l != u64::from(coordinator))
        })
    });
    let mut stdin = child.0.stdin.take().expect("stdin");
    writeln!(stdin, "go").expect("tell the script");
    drop(stdin);
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.0.wait().expect("wait");
    assert!(
        status.success(),
        "the member did not ride out the coordinator's loss ({status})\nstdout: {rest:?}\n\
         stderr:\n{}",
        stderr.join().unwrap_or_default()
    );
}
