//! `isr cluster` starts a controller and brokers, prints where they are, passes the brokers'
//! topic flags on, and stops them all cleanly on SIGTERM (each broker leaves its clean-shutdown
//! marker).

mod common;

use common::{kafka, ISR};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Starts `isr cluster` with `flags` in `dir`: the process and the lines it announced, up to
/// the bootstrap list.
fn start(dir: &std::path::Path, flags: &[&str]) -> (Child, Vec<String>) {
    let mut child = Command::new(ISR)
        .args(["cluster", "--dir"])
        .arg(dir)
        .args(flags)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn isr cluster");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut announced = Vec::new();
    for line in lines.by_ref() {
        let line = line.expect("line");
        let done = line.starts_with("bootstrap ");
        announced.push(line);
        if done {
            break;
        }
    }
    (child, announced)
}

/// SIGTERM, and the exit status within 20 s.
fn stop(mut child: Child) -> std::process::ExitStatus {
    // SAFETY: kill(2) on our own child.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
    let start = Instant::now();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return status;
        }
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("isr cluster did not stop");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The first broker's address in an announced bootstrap list.
fn first_broker(announced: &[String]) -> String {
    let bootstrap = announced.last().expect("bootstrap line");
    let list = bootstrap.trim_start_matches("bootstrap ");
    list.split(',').next().expect("a broker").to_owned()
}

#[test]
fn cluster_starts_announces_and_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (child, announced) = start(dir.path(), &["--brokers", "2"]);
    assert!(
        announced.iter().any(|l| l.starts_with("controller pid ")),
        "{announced:?}"
    );
    assert_eq!(
        announced
            .iter()
            .filter(|l| l.starts_with("broker "))
            .count(),
        2
    );
    let bootstrap = announced.last().expect("bootstrap line");
    assert_eq!(
        bootstrap
            .trim_start_matches("bootstrap ")
            .split(',')
            .count(),
        2
    );

    let status = stop(child);
    assert!(status.success(), "{status}");
    for b in 1..=2 {
        let marker = dir.path().join(format!("broker-{b}/clean-shutdown"));
        assert!(marker.exists(), "broker {b} did not shut down cleanly");
    }
}

/// `partitions_of`, once the cluster has settled: a broker answers COORDINATOR_NOT_AVAILABLE
/// (15) until it has a session with the controller, and creation fails with
/// INVALID_REPLICATION_FACTOR (38) until a broker has registered.
fn partitions_once_settled(broker: &str, topic: &str) -> Result<usize, i16> {
    let start = Instant::now();
    loop {
        match kafka::partitions_of(broker, topic) {
            Err(-1 | 15 | 38) if start.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(100))
            }
            result => return result,
        }
    }
}

/// The brokers' topic flags reach every broker: topics are created on demand with
/// `--num-partitions`, or not at all with `--auto-create-topics false`.
#[test]
fn cluster_passes_topic_flags_to_its_brokers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (child, announced) = start(
        dir.path(),
        &[
            "--brokers",
            "2",
            "--num-partitions",
            "3",
            "--message-max-bytes",
            "2048",
        ],
    );
    let broker = first_broker(&announced);
    assert_eq!(partitions_once_settled(&broker, "fresh"), Ok(3));
    let big = "x".repeat(4096);
    assert_eq!(
        kafka::produce(&broker, "fresh", 0, &[big]),
        Err(kafka::MESSAGE_TOO_LARGE)
    );
    assert!(stop(child).success());

    let dir = tempfile::tempdir().expect("tempdir");
    let (child, announced) = start(
        dir.path(),
        &["--brokers", "1", "--auto-create-topics", "false"],
    );
    let unknown_topic = 3;
    assert_eq!(
        partitions_once_settled(&first_broker(&announced), "fresh"),
        Err(unknown_topic)
    );
    assert!(stop(child).success());
}
