//! Real `isr` processes on 127.0.0.1 for integration tests. Ports are chosen by the OS (every
//! process listens on port 0 and announces its address on stdout); every process is killed when
//! its handle drops, so a failing test leaves nothing behind.

#![allow(dead_code)] // each test binary uses a different part of this module

pub mod clients;
pub mod kafka;

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const ISR: &str = env!("CARGO_BIN_EXE_isr");

/// A child process, SIGKILLed and reaped on drop.
pub struct Proc {
    pub child: Child,
    pub address: String,
}

impl Proc {
    /// Starts `isr ARGS` and waits for the address it announces.
    pub fn start(args: &[&str], log: &Path) -> Proc {
        let log = std::fs::File::create(log).expect("log file");
        let mut child = Command::new(ISR)
            .args(args)
            .env("RUST_LOG", "info")
            // Release builds too assert the core's invariants after every step.
            .env("ISR_CHECK_INVARIANTS", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("spawn isr");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("announce line");
        let address = line
            .trim()
            .rsplit(' ')
            .next()
            .unwrap_or_default()
            .to_string();
        assert!(address.contains(':'), "no address announced: {line:?}");
        Proc { child, address }
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A controller and brokers 1..=n, each with its own directory under a temporary one.
pub struct TestCluster {
    pub dir: tempfile::TempDir,
    pub controller: Proc,
    pub brokers: Vec<Option<Proc>>,
}

impl TestCluster {
    pub fn start(n: u32) -> TestCluster {
        let dir = tempfile::tempdir().expect("tempdir");
        let cdir = dir.path().join("controller");
        let controller = Proc::start(
            &[
                "controller",
                "--listen",
                "127.0.0.1:0",
                "--dir",
                &cdir.to_string_lossy(),
            ],
            &dir.path().join("controller.log"),
        );
        let mut cluster = TestCluster {
            dir,
            controller,
            brokers: Vec::new(),
        };
        for id in 1..=n {
            let broker = cluster.spawn_broker(id);
            cluster.brokers.push(Some(broker));
        }
        cluster.wait_for(Duration::from_secs(10), "all brokers alive", |s| {
            let alive = s["brokers"]
                .as_object()
                .map_or(0, |b| b.values().filter(|b| b["alive"] == true).count());
            alive == n as usize
        });
        cluster
    }

    pub fn broker_dir(&self, id: u32) -> PathBuf {
        self.dir.path().join(format!("broker-{id}"))
    }

    fn spawn_broker(&self, id: u32) -> Proc {
        let log = self.dir.path().join(format!("broker-{id}.log"));
        let log = next_free(&log);
        Proc::start(
            &[
                "broker",
                "--id",
                &id.to_string(),
                "--listen",
                "127.0.0.1:0",
                "--controller",
                &self.controller.address,
                "--dir",
                &self.broker_dir(id).to_string_lossy(),
            ],
            &log,
        )
    }

    /// SIGKILL: no clean shutdown, no flush.
    pub fn kill(&mut self, id: u32) {
        self.brokers[id as usize - 1] = None;
    }

    pub fn restart(&mut self, id: u32) {
        let broker = self.spawn_broker(id);
        self.brokers[id as usize - 1] = Some(broker);
    }

    pub fn address(&self, id: u32) -> Option<String> {
        self.brokers
            .get(id as usize - 1)?
            .as_ref()
            .map(|b| b.address.clone())
    }

    /// `isr status --json`, plus the controller's broker list, as one JSON value:
    /// `{"partitions": [...], "brokers": {...}}`.
    pub fn status(&self) -> Value {
        let out = Command::new(ISR)
            .args(["status", "--json", "--controller", &self.controller.address])
            .output()
            .expect("isr status");
        let partitions: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let table = Command::new(ISR)
            .args(["status", "--controller", &self.controller.address])
            .output()
            .expect("isr status");
        let mut brokers = serde_json::Map::new();
        for line in String::from_utf8_lossy(&table.stdout).lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            if let ["broker", id, _, state] = words[..] {
                brokers.insert(
                    id.to_string(),
                    serde_json::json!({"alive": state == "alive"}),
                );
            }
        }
        serde_json::json!({"partitions": partitions, "brokers": brokers})
    }

    /// Polls status until `done` holds, panicking with the last status after `timeout`.
    pub fn wait_for(&self, timeout: Duration, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            let status = self.status();
            if done(&status) {
                return status;
            }
            if start.elapsed() > timeout {
                panic!("timed out waiting for {what}; last status: {status:#}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Creates `topic` (replication factor 3) through broker 1 and waits until every partition
    /// has a leader.
    pub fn create_topic(&self, topic: &str, partitions: u64, min_isr: u32) {
        let address = self.address(1).expect("broker 1");
        assert_eq!(
            kafka::create_topic(&address, topic, partitions as i32, 3, min_isr),
            0,
            "CreateTopics {topic}"
        );
        self.wait_for(Duration::from_secs(10), "leaders", |s| {
            (0..partitions).all(|p| Self::partition(s, topic, p)["leader"].is_u64())
        });
    }

    /// The partition row of `topic`/`index` in a status.
    pub fn partition<'a>(status: &'a Value, topic: &str, index: u64) -> &'a Value {
        status["partitions"]
            .as_array()
            .and_then(|rows| {
                rows.iter()
                    .find(|r| r["topic"] == topic && r["partition"] == index)
            })
            .unwrap_or(&Value::Null)
    }

    /// The current leader of a partition and its address, once it has one that is running.
    pub fn leader(&self, topic: &str, index: u64) -> Option<(u32, String)> {
        let status = self.status();
        let leader = Self::partition(&status, topic, index)["leader"].as_u64()? as u32;
        Some((leader, self.address(leader)?))
    }
}

/// `path`, or `path.1`, `path.2`... if it exists (a restarted broker keeps its old log).
fn next_free(path: &Path) -> PathBuf {
    let mut candidate = path.to_path_buf();
    let mut n = 0;
    while candidate.exists() {
        n += 1;
        candidate = path.with_extension(format!("log.{n}"));
    }
    candidate
}
