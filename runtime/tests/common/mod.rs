//! Real `isr` processes on 127.0.0.1 for integration tests. Ports are chosen by the OS (every
//! process listens on port 0 and announces its address on stdout); every process is killed when
//! its handle drops, so a failing test leaves nothing behind.

#![allow(dead_code)] // each test binary uses a different part of this module

pub mod clients;
pub mod etcd;
pub mod kafka;
pub mod load;

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
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

/// Controllers and brokers 1..=n, each with its own directory under a temporary one.
pub struct TestCluster {
    pub dir: tempfile::TempDir,
    /// Controller c at index c - 1 (`None`: killed).
    pub controllers: Vec<Option<Proc>>,
    /// Where each controller listens, kept across kills: a restart listens there again.
    controller_addresses: Vec<String>,
    /// The controllers' shared store (`etcd://...`), or `None` for the file store.
    store: Option<String>,
    pub brokers: Vec<Option<Proc>>,
    /// Flags every broker is started with, besides the ones every test needs.
    broker_flags: Vec<String>,
}

/// Where every process of a cluster writes its trace (`--trace`): one file per process, so a
/// restart starts a new one.
fn trace_file(traces: &Path, name: &str) -> PathBuf {
    let mut n = 0;
    loop {
        let candidate = traces.join(format!("{name}-{n}.jsonl"));
        if !candidate.exists() {
            return candidate;
        }
        n += 1;
    }
}

impl TestCluster {
    /// One controller on the file store, and `n` brokers.
    pub fn start(n: u32) -> TestCluster {
        Self::start_with(n, 1, None)
    }

    /// `n` brokers on the file store whose retention and compaction passes run every 200 ms
    /// (Kafka's `log.retention.check.interval.ms`), so a test sees them act within seconds.
    pub fn start_with_quick_retention(n: u32) -> TestCluster {
        Self::start_with_broker_flags(n, 1, None, &["--log-retention-check-interval-ms", "200"])
    }

    /// `controllers` controllers on `store` (`etcd://...`; `None`: the file store, one
    /// controller), and `n` brokers given them all.
    pub fn start_with(n: u32, controllers: u32, store: Option<String>) -> TestCluster {
        Self::start_with_broker_flags(n, controllers, store, &[])
    }

    /// As [`TestCluster::start_with`], every broker started with `flags` too.
    pub fn start_with_broker_flags(
        n: u32,
        controllers: u32,
        store: Option<String>,
        flags: &[&str],
    ) -> TestCluster {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("traces")).expect("traces directory");
        let mut cluster = TestCluster {
            dir,
            controllers: Vec::new(),
            controller_addresses: Vec::new(),
            store,
            brokers: Vec::new(),
            broker_flags: flags.iter().map(|f| f.to_string()).collect(),
        };
        for c in 1..=controllers {
            let controller = cluster.spawn_controller(c, "127.0.0.1:0");
            cluster
                .controller_addresses
                .push(controller.address.clone());
            cluster.controllers.push(Some(controller));
        }
        for id in 1..=n {
            let broker = cluster.spawn_broker(id);
            cluster.brokers.push(Some(broker));
        }
        cluster.wait_for(Duration::from_secs(20), "all brokers alive", |s| {
            let alive = s["brokers"]
                .as_object()
                .map_or(0, |b| b.values().filter(|b| b["alive"] == true).count());
            alive == n as usize
        });
        cluster
    }

    /// Every controller's address, comma-separated, as brokers and `status` take them.
    pub fn controller_list(&self) -> String {
        self.controller_addresses.join(",")
    }

    fn spawn_controller(&self, c: u32, listen: &str) -> Proc {
        let id = c.to_string();
        let dir = self.dir.path().join(match c {
            1 => "controller".to_string(),
            c => format!("controller-{c}"),
        });
        let dir = dir.to_string_lossy().to_string();
        let mut args = vec!["controller", "--id", &id, "--listen", listen];
        match &self.store {
            Some(store) => args.extend(["--store", store.as_str()]),
            None => args.extend(["--dir", dir.as_str()]),
        }
        let log = next_free(&self.dir.path().join(format!("controller-{c}.log")));
        let trace = trace_file(&self.traces(), &format!("controller-{c}"));
        let trace = trace.to_string_lossy();
        args.extend(["--trace", &trace]);
        Proc::start(&args, &log)
    }

    /// SIGKILL of controller `c`.
    pub fn kill_controller(&mut self, c: u32) {
        self.controllers[c as usize - 1] = None;
    }

    /// Starts controller `c` again, on its old address.
    pub fn restart_controller(&mut self, c: u32) {
        let address = self.controller_addresses[c as usize - 1].clone();
        let controller = self.spawn_controller(c, &address);
        self.controllers[c as usize - 1] = Some(controller);
    }

    /// Sends `signal` (SIGSTOP, SIGCONT) to controller `c`.
    pub fn signal_controller(&self, c: u32, signal: i32) {
        let pid = self.controllers[c as usize - 1]
            .as_ref()
            .expect("controller running")
            .pid();
        // SAFETY: kill(2) on our own child; no memory involved.
        unsafe {
            libc::kill(pid as libc::pid_t, signal);
        }
    }

    /// Waits until every running broker has a session with the controller of `epoch`: each
    /// answers status (from the metadata that controller pushed it) with that epoch.
    pub fn wait_for_sessions(&self, epoch: u64, timeout: Duration) {
        let start = Instant::now();
        for id in 1..=self.brokers.len() as u32 {
            let Some(address) = self.address(id) else {
                continue;
            };
            loop {
                let out = Command::new(ISR)
                    .args(["status", "--json", "--bootstrap", &address])
                    .output()
                    .expect("isr status");
                let status: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
                if status["controller"]["epoch"].as_u64() == Some(epoch) {
                    break;
                }
                assert!(
                    start.elapsed() < timeout,
                    "broker {id} has no session with the controller of epoch {epoch}: {status}"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }

    /// The active controller's id and epoch, as status reports them.
    pub fn active_controller(&self) -> Option<(u32, u64)> {
        let status = self.status();
        let controller = &status["controller"];
        Some((
            controller["id"].as_u64()? as u32,
            controller["epoch"].as_u64()?,
        ))
    }

    pub fn broker_dir(&self, id: u32) -> PathBuf {
        self.dir.path().join(format!("broker-{id}"))
    }

    fn spawn_broker(&self, id: u32) -> Proc {
        let log = self.dir.path().join(format!("broker-{id}.log"));
        let log = next_free(&log);
        let trace = trace_file(&self.traces(), &format!("broker-{id}"));
        let (trace, dir) = (trace.to_string_lossy(), self.broker_dir(id));
        let (id, dir, controllers) = (
            id.to_string(),
            dir.to_string_lossy(),
            self.controller_list(),
        );
        let mut args = vec![
            "broker",
            "--trace",
            &trace,
            "--id",
            &id,
            "--listen",
            "127.0.0.1:0",
            "--controller",
            &controllers,
            "--dir",
            &dir,
        ];
        args.extend(self.broker_flags.iter().map(String::as_str));
        Proc::start(&args, &log)
    }

    /// Where the processes write their traces.
    pub fn traces(&self) -> PathBuf {
        self.dir.path().join("traces")
    }

    /// Stops every process (SIGKILL), then replays their traces on the core
    /// ([`isr::trace::replay`], what `isr-check replay` does): the run must be a behaviour of
    /// the protocol, every property holding after every step. The number of steps replayed.
    pub fn stop_and_replay(&mut self) -> usize {
        let traces = self.stop_and_read_traces();
        let started = Instant::now();
        match isr::trace::replay(&traces) {
            Ok(accepted) => {
                eprintln!(
                    "replay: accepted {} steps of {} traces in {:?}",
                    accepted.steps,
                    accepted.traces,
                    started.elapsed()
                );
                accepted.steps
            }
            Err(d) => panic!(
                "the run is not a behaviour of the protocol (traces in {}): {}",
                self.traces().display(),
                d.why
            ),
        }
    }

    /// Stops every process (SIGKILL) and reads their traces, in file name order.
    pub fn stop_and_read_traces(&mut self) -> Vec<isr::trace::Trace> {
        self.controllers.iter_mut().for_each(|c| *c = None);
        self.brokers.iter_mut().for_each(|b| *b = None);
        // ISR_KEEP_TRACES=DIR keeps a copy, for `isr-check replay` by hand.
        if let Some(keep) = std::env::var_os("ISR_KEEP_TRACES") {
            let keep = PathBuf::from(keep);
            let _ = std::fs::create_dir_all(&keep);
            for f in std::fs::read_dir(self.traces())
                .into_iter()
                .flatten()
                .flatten()
            {
                let _ = std::fs::copy(f.path(), keep.join(f.file_name()));
            }
        }
        isr_runtime::trace::read_dir(&self.traces()).expect("traces")
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

    /// `isr status --json` asked of the controller: `{"controller": {...}, "brokers": {"ID":
    /// {"alive": ...}}, "partitions": [...]}` (brokers keyed by id, for lookups).
    pub fn status(&self) -> Value {
        status_of(&self.controller_list())
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
    /// has a leader. NOT_CONTROLLER (41) is retried for up to 10 s, as Kafka's admin clients
    /// retry it: a broker answers it between a controller's failover and its link to the new one.
    pub fn create_topic(&self, topic: &str, partitions: u64, min_isr: u32) {
        let address = self.address(1).expect("broker 1");
        let start = Instant::now();
        let mut code = kafka::create_topic(&address, topic, partitions as i32, 3, min_isr);
        while code == 41 && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(100));
            code = kafka::create_topic(&address, topic, partitions as i32, 3, min_isr);
        }
        assert_eq!(code, 0, "CreateTopics {topic}");
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
    /// Every caller expects a leader, so a status that names none (a controller between
    /// answers, a leaderless moment) is asked again for up to 5 s.
    pub fn leader(&self, topic: &str, index: u64) -> Option<(u32, String)> {
        let start = Instant::now();
        loop {
            let status = self.status();
            let leader = Self::partition(&status, topic, index)["leader"].as_u64();
            if let Some(found) = leader.and_then(|l| Some((l as u32, self.address(l as u32)?))) {
                return Some(found);
            }
            if start.elapsed() > Duration::from_secs(5) {
                return None;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for TestCluster {
    /// After a failed assertion, the end of every process's log: what CI shows of a failure.
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let mut logs: Vec<PathBuf> = std::fs::read_dir(self.dir.path())
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.to_string_lossy().contains(".log"))
            .collect();
        logs.sort();
        for log in logs {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(40)..];
            eprintln!("--- {} (last {} lines)", log.display(), tail.len());
            for line in tail {
                eprintln!("{line}");
            }
        }
    }
}

/// Runs `isr ARGS` with `stdin`; whether it succeeded, and its stdout then stderr.
pub fn isr(args: &[&str], stdin: &str) -> (bool, String) {
    let mut child = Command::new(ISR)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn isr");
    if let Some(mut input) = child.stdin.take() {
        input.write_all(stdin.as_bytes()).expect("stdin");
    }
    let out = child.wait_with_output().expect("isr output");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// `isr topic create NAME` with replication factor 3 and `partitions`, plus `extra` flags:
/// whether it worked, and what it printed.
pub fn isr_topic_create(
    bootstrap: &str,
    name: &str,
    partitions: u32,
    extra: &[&str],
) -> (bool, String) {
    let partitions = partitions.to_string();
    let mut args = vec![
        "topic",
        "create",
        name,
        "--bootstrap",
        bootstrap,
        "--partitions",
        &partitions,
        "--replication-factor",
        "3",
    ];
    args.extend_from_slice(extra);
    isr(&args, "")
}

/// `isr status --json --controller CONTROLLERS` as in [`TestCluster::status`]; Null fields when
/// no controller answers.
pub fn status_of(controllers: &str) -> Value {
    let out = Command::new(ISR)
        .args(["status", "--json", "--controller", controllers])
        .output()
        .expect("isr status");
    let status: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let mut brokers = serde_json::Map::new();
    for b in status["brokers"].as_array().into_iter().flatten() {
        if let Some(id) = b["id"].as_u64() {
            brokers.insert(
                id.to_string(),
                serde_json::json!({
                    "alive": b["alive"],
                    "metadata_offset": b["metadata_offset"],
                    "metadata_lag": b["metadata_lag"],
                    "stale_deltas": b["stale_deltas"],
                }),
            );
        }
    }
    serde_json::json!({
        "controller": status["controller"],
        "brokers": brokers,
        "partitions": status["partitions"],
    })
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
