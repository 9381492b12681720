//! `isr cluster` starts a controller and brokers, prints where they are, passes the brokers'
//! topic flags on, and stops them all cleanly on SIGTERM (each broker leaves its clean-shutdown
//! marker).

mod common;

use common::{kafka, ISR};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Starts `isr cluster ARGS --dir DIR` and reads what it announces, up to the bootstrap line.
fn spawn_cluster(args: &[&str], dir: &std::path::Path) -> (Child, Vec<String>) {
    let mut child = Command::new(ISR)
        .arg("cluster")
        .args(args)
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn isr cluster");
    let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut announced = Vec::new();
    for line in lines {
        let line = line.expect("line");
        let done = line.starts_with("bootstrap ");
        announced.push(line);
        if done {
            break;
        }
    }
    (child, announced)
}

/// SIGTERM, and the exit status within 30 s.
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
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("isr cluster did not stop");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn cluster_starts_announces_and_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (child, announced) = spawn_cluster(&["--brokers", "2"], dir.path());
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

/// `isr cluster --controllers 2 --etcd`: a local etcd member, two controllers on it (one
/// active), brokers that know both; status names the active controller.
#[test]
fn cluster_with_two_controllers_on_a_local_etcd() {
    if !common::etcd::present() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let args = ["--brokers", "1", "--controllers", "2", "--etcd"];
    let (child, announced) = spawn_cluster(&args, dir.path());
    for expected in [
        "etcd pid ",
        "controller 1 pid ",
        "controller 2 pid ",
        "broker 1 pid ",
    ] {
        assert!(
            announced.iter().any(|l| l.starts_with(expected)),
            "no `{expected}` in {announced:?}"
        );
    }
    let controllers = announced
        .iter()
        .find_map(|l| l.strip_prefix("controller ").filter(|a| a.contains(',')))
        .expect("the controllers' addresses")
        .to_string();
    let status = common::status_of(&controllers);
    assert!(status["controller"]["id"].is_u64(), "{status:#}");
    let status = stop(child);
    assert!(status.success(), "{status}");
}

#[test]
fn several_controllers_need_a_shared_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(ISR)
        .args(["cluster", "--controllers", "2", "--dir"])
        .arg(dir.path())
        .output()
        .expect("isr cluster");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("need a shared store"), "{stderr}");
}

/// The first broker's address in an announced bootstrap list.
fn first_broker(announced: &[String]) -> String {
    let bootstrap = announced.last().expect("bootstrap line");
    let list = bootstrap.trim_start_matches("bootstrap ");
    list.split(',').next().expect("a broker").to_owned()
}

/// The brokers' topic flags reach every broker: topics are created on demand with
/// `--num-partitions`, batches are held to `--message-max-bytes`, and no topic is created with
/// `--auto-create-topics false`.
#[test]
fn cluster_passes_topic_flags_to_its_brokers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let flags = [
        "--brokers",
        "2",
        "--num-partitions",
        "3",
        "--message-max-bytes",
        "2048",
    ];
    let (child, announced) = spawn_cluster(&flags, dir.path());
    let broker = first_broker(&announced);
    assert_eq!(kafka::partitions_of(&broker, "fresh"), Ok(3));
    let big = "x".repeat(4096);
    assert_eq!(
        kafka::produce(&broker, "fresh", 0, &[big]),
        Err(kafka::MESSAGE_TOO_LARGE)
    );
    assert!(stop(child).success());

    let dir = tempfile::tempdir().expect("tempdir");
    let flags = ["--brokers", "1", "--auto-create-topics", "false"];
    let (child, announced) = spawn_cluster(&flags, dir.path());
    let unknown_topic = 3;
    assert_eq!(
        kafka::partitions_of(&first_broker(&announced), "fresh"),
        Err(unknown_topic)
    );
    assert!(stop(child).success());
}
