//! Consumer groups on a real cluster: confluent-kafka consumers subscribe to a topic of a
//! three-broker cluster; the group's coordinator is one of the brokers (FindCoordinator sends
//! every member to it), the members share the partitions, the survivor takes over when one
//! leaves, and a new member resumes from the group's commits. The script is
//! runtime/kafka/tests/clients/confluent_group.py; without confluent-kafka the test says
//! "SKIPPED" and passes (CI installs it).

mod common;

use common::TestCluster;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn subscribing_consumers_share_take_over_and_resume_on_a_cluster() {
    let importable = Command::new("python3")
        .args(["-c", "import confluent_kafka"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !importable {
        eprintln!("SKIPPED: python3 cannot import confluent_kafka");
        return;
    }
    let cluster = TestCluster::start(3);
    let bootstrap: Vec<String> = (1..=3).filter_map(|b| cluster.address(b)).collect();
    let script: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "kafka",
        "tests",
        "clients",
        "confluent_group.py",
    ]
    .iter()
    .collect();
    let mut child = Command::new("python3")
        .arg(&script)
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
