//! `isr cluster` starts a controller and brokers, prints where they are, and stops them all
//! cleanly on SIGTERM (each broker leaves its clean-shutdown marker).

mod common;

use common::ISR;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn cluster_starts_announces_and_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut child = Command::new(ISR)
        .args(["cluster", "--brokers", "2", "--dir"])
        .arg(dir.path())
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

    // SAFETY: kill(2) on our own child.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
    let start = Instant::now();
    let status = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break status;
        }
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("isr cluster did not stop");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
    for b in 1..=2 {
        let marker = dir.path().join(format!("broker-{b}/clean-shutdown"));
        assert!(marker.exists(), "broker {b} did not shut down cleanly");
    }
}
