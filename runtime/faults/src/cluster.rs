//! A scenario's cluster: real `isr` processes (a controller on a file store, or several on a
//! local etcd member; three brokers), each behind its own fault proxy, and what the harness does
//! to them: stop cleanly or hard, restart, pause and resume, switch disk faults on and off,
//! simulate a power loss; and what it sees of them, asked of the controllers directly.

use crate::proxy::{Faults, Node, Proxy};
use crate::workload::GROUP;
use isr::{Offset, PartitionState};
use isr_kafka::client::topic::{CreateArgs, TopicArgs, TopicCommand};
use isr_kafka::offsets_topic::{partition_for, OFFSETS_TOPIC};
use isr_runtime::cluster::{etcd, Running};
use isr_runtime::storage::faults as storage_faults;
use isr_runtime::storage::{checkpoint, LOG_START, SEGMENT_SUFFIX};
use isr_runtime::wire::admin::ClusterView;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::time::Instant;

pub const BROKERS: u32 = 3;
pub const TOPIC: &str = "faults";
pub const PARTITIONS: u32 = 3;

/// How a scenario's cluster is set up.
#[derive(Clone, Debug)]
pub struct Setup {
    /// One: a controller on the file store; more: on a local etcd member.
    pub controllers: u32,
    /// Brokers acknowledge from the page cache (`--flush page-cache`).
    pub page_cache: bool,
    /// `--rule NAME=VALUE` for every process.
    pub rules: Vec<&'static str>,
    pub min_isr: u16,
    /// The topic's configs, KEY=VALUE (`retention.ms`, `segment.ms`, ...).
    pub topic_configs: Vec<(&'static str, &'static str)>,
    /// Flags every broker is started with besides the usual ones.
    pub broker_flags: Vec<&'static str>,
}

impl Default for Setup {
    fn default() -> Setup {
        Setup {
            controllers: 1,
            page_cache: false,
            rules: Vec::new(),
            min_isr: 2,
            topic_configs: Vec::new(),
            broker_flags: Vec::new(),
        }
    }
}

/// One process of the cluster, and the proxy in front of it.
pub struct Member {
    pub node: Node,
    proxy: Proxy,
    child: Option<Child>,
    /// Where it listens now (not the proxy).
    listening: Option<String>,
    paused: bool,
    dir: PathBuf,
}

impl Member {
    pub fn running(&self) -> bool {
        self.child.is_some()
    }

    fn pid(&self) -> Option<i32> {
        self.child.as_ref()?.id().map(|p| p as i32)
    }
}

/// How a process is stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// SIGTERM: a controlled shutdown.
    Clean,
    /// SIGKILL.
    Hard,
}

pub struct Cluster {
    pub dir: tempfile::TempDir,
    isr: PathBuf,
    pub faults: Arc<Faults>,
    pub setup: Setup,
    store: Option<String>,
    /// The local etcd member, killed on drop.
    _etcd: Vec<Running>,
    pub controllers: Vec<Member>,
    pub brokers: Vec<Member>,
}

fn signal(pid: i32, signal: i32) {
    // SAFETY: kill(2) on a child this harness started and has not reaped; no memory involved.
    unsafe {
        libc::kill(pid, signal);
    }
}

impl Cluster {
    /// Starts the cluster, creates the topic (three partitions, replication factor 3), and waits
    /// until every partition has a leader and a full ISR.
    pub async fn start(isr: &Path, setup: Setup, keep: bool) -> Result<Cluster, String> {
        let dir = tempfile::Builder::new()
            .prefix("isr-faults-")
            .disable_cleanup(keep)
            .tempdir()
            .map_err(|e| format!("a temporary directory: {e}"))?;
        let traces = dir.path().join("traces");
        std::fs::create_dir(&traces).map_err(|e| format!("{}: {e}", traces.display()))?;
        let faults = Arc::new(Faults::default());
        let mut etcd_running = Vec::new();
        let store = if setup.controllers > 1 {
            let member = etcd::start(&dir.path().join("etcd"), None, &mut etcd_running)
                .await
                .map_err(|e| e.to_string())?;
            Some(format!("etcd://{member}"))
        } else {
            None
        };
        let mut cluster = Cluster {
            dir,
            isr: isr.to_path_buf(),
            faults: faults.clone(),
            setup,
            store,
            _etcd: etcd_running,
            controllers: Vec::new(),
            brokers: Vec::new(),
        };
        for c in 1..=cluster.setup.controllers {
            let node = Node::Controller(c);
            let member = cluster.member(node, format!("controller-{c}")).await?;
            cluster.controllers.push(member);
        }
        for b in 1..=BROKERS {
            let node = Node::Broker(b);
            let member = cluster.member(node, format!("broker-{b}")).await?;
            cluster.brokers.push(member);
        }
        for c in 1..=cluster.setup.controllers {
            cluster.spawn(Node::Controller(c)).await?;
        }
        for b in 1..=BROKERS {
            cluster.spawn(Node::Broker(b)).await?;
        }
        cluster
            .wait(Duration::from_secs(30), "every broker registered", |v| {
                v.brokers.values().filter(|b| b.alive).count() == BROKERS as usize
            })
            .await?;
        cluster.create_topic().await?;
        cluster.wait_healthy(Duration::from_secs(30)).await?;
        Ok(cluster)
    }

    async fn member(&self, node: Node, name: String) -> Result<Member, String> {
        let proxy = Proxy::start(node, self.faults.clone())
            .await
            .map_err(|e| format!("a proxy for {node}: {e}"))?;
        let dir = self.dir.path().join(name);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(Member {
            node,
            proxy,
            child: None,
            listening: None,
            paused: false,
            dir,
        })
    }

    /// Where every process writes its trace.
    pub fn traces(&self) -> PathBuf {
        self.dir.path().join("traces")
    }

    /// Every process of the cluster: the controllers, then the brokers.
    fn nodes(&self) -> Vec<Node> {
        self.controllers
            .iter()
            .chain(&self.brokers)
            .map(|m| m.node)
            .collect()
    }

    /// SIGKILLs every process, so that their traces are complete.
    pub async fn stop_all(&mut self) {
        for node in self.nodes() {
            self.stop(node, Stop::Hard).await;
        }
    }

    fn slot(&mut self, node: Node) -> &mut Member {
        match node {
            Node::Controller(c) => &mut self.controllers[c as usize - 1],
            Node::Broker(b) => &mut self.brokers[b as usize - 1],
            Node::Client => panic!("the clients are not a process"),
        }
    }

    /// The brokers' addresses as clients know them: the proxies.
    pub fn bootstrap(&self) -> Vec<String> {
        self.brokers
            .iter()
            .map(|b| b.proxy.address.clone())
            .collect()
    }

    /// The file a broker's storage fault layer reads.
    fn control_file(&self, broker: u32) -> PathBuf {
        self.brokers[broker as usize - 1].dir.join("storage-faults")
    }

    fn args(&self, node: Node) -> Vec<String> {
        let member = match node {
            Node::Controller(c) => &self.controllers[c as usize - 1],
            Node::Broker(b) => &self.brokers[b as usize - 1],
            Node::Client => unreachable!("the clients are not a process"),
        };
        let mut args: Vec<String> = Vec::new();
        match node {
            Node::Controller(c) => {
                args.extend(["controller".into(), "--id".into(), c.to_string()]);
                match &self.store {
                    Some(store) => args.extend(["--store".into(), store.clone()]),
                    None => args.extend([
                        "--dir".into(),
                        member.dir.join("data").display().to_string(),
                    ]),
                }
            }
            Node::Broker(b) => {
                let controllers: Vec<String> = self
                    .controllers
                    .iter()
                    .map(|c| c.proxy.address.clone())
                    .collect();
                let flush = if self.setup.page_cache {
                    "page-cache"
                } else {
                    "always"
                };
                args.extend([
                    "broker".into(),
                    "--id".into(),
                    b.to_string(),
                    "--controller".into(),
                    controllers.join(","),
                    "--dir".into(),
                    member.dir.join("data").display().to_string(),
                    "--flush".into(),
                    flush.into(),
                ]);
                args.extend(self.setup.broker_flags.iter().map(|f| f.to_string()));
            }
            Node::Client => {}
        }
        args.extend([
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--advertise".into(),
            member.proxy.address.clone(),
        ]);
        for rule in &self.setup.rules {
            // The brokers take the flush policy as --flush.
            if !(matches!(node, Node::Broker(_)) && rule.starts_with("flush=")) {
                args.extend(["--rule".into(), rule.to_string()]);
            }
        }
        args
    }

    /// Starts `node`'s process (again), and points its proxy at it.
    pub async fn spawn(&mut self, node: Node) -> Result<(), String> {
        let args = self.args(node);
        let control = match node {
            Node::Broker(b) => Some(self.control_file(b)),
            _ => None,
        };
        let isr = self.isr.clone();
        let traces = self.traces();
        let member = self.slot(node);
        let log_path = member.dir.join("log.txt");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| format!("{}: {e}", log_path.display()))?;
        let mut command = Command::new(&isr);
        command
            .args(&args)
            .env("RUST_LOG", "info")
            // Release builds too assert the core's invariants after every step.
            .env("ISR_CHECK_INVARIANTS", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .kill_on_drop(true);
        if let Some(control) = control {
            command.env(storage_faults::ENV, control);
        }
        // Every process traces its core's steps, for the replay after the run.
        command.env(isr_runtime::trace::ENV, traces);
        let mut child = command
            .spawn()
            .map_err(|e| format!("starting {} ({}): {e}", node, isr.display()))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let first = tokio::time::timeout(Duration::from_secs(15), lines.next_line()).await;
        let address = match first {
            Ok(Ok(Some(line))) => line.rsplit(' ').next().unwrap_or_default().to_string(),
            _ => return Err(format!("{node} did not start; see {}", log_path.display())),
        };
        // Keep reading, so the child never writes into a closed pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        member.proxy.set_upstream(Some(address.clone()));
        member.listening = Some(address);
        member.child = Some(child);
        member.paused = false;
        Ok(())
    }

    /// Stops `node`'s process and waits until it is gone.
    pub async fn stop(&mut self, node: Node, how: Stop) {
        let member = self.slot(node);
        member.proxy.set_upstream(None);
        let Some(mut child) = member.child.take() else {
            return;
        };
        member.listening = None;
        if let Some(pid) = child.id().map(|p| p as i32) {
            if member.paused {
                signal(pid, libc::SIGCONT);
            }
            signal(
                pid,
                match how {
                    Stop::Clean => libc::SIGTERM,
                    Stop::Hard => libc::SIGKILL,
                },
            );
        }
        member.paused = false;
        if tokio::time::timeout(Duration::from_secs(15), child.wait())
            .await
            .is_err()
        {
            let _ = child.kill().await;
        }
    }

    /// Whether `node`'s process has exited on its own (a broker whose disk failed); reaps it.
    pub fn exited(&mut self, node: Node) -> bool {
        let member = self.slot(node);
        let gone = member
            .child
            .as_mut()
            .is_some_and(|c| !matches!(c.try_wait(), Ok(None)));
        if gone {
            member.child = None;
            member.listening = None;
            member.proxy.set_upstream(None);
        }
        gone
    }

    /// SIGSTOP.
    /// The bytes every broker's data directory holds now.
    pub fn disk_usage(&self) -> u64 {
        fn size(path: &Path) -> u64 {
            match std::fs::read_dir(path) {
                Ok(entries) => entries.flatten().map(|e| size(&e.path())).sum(),
                Err(_) => std::fs::metadata(path).map_or(0, |m| m.len()),
            }
        }
        self.brokers.iter().map(|b| size(&b.dir.join("data"))).sum()
    }

    /// For each broker: how many of its partitions' logs start above 0 (their log start
    /// checkpoints), and the most segment files one of its partitions holds.
    pub fn log_starts(&self) -> Vec<(u32, usize, usize)> {
        self.brokers
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let root = b.dir.join("data").join("partitions");
                let dirs: Vec<PathBuf> = std::fs::read_dir(root)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|e| e.path())
                    .collect();
                let moved = dirs
                    .iter()
                    .filter_map(|d| checkpoint::read::<Offset>(&d.join(LOG_START)).ok())
                    .filter(|start| start.is_some_and(|s| s > Offset(0)))
                    .count();
                let segments = dirs
                    .iter()
                    .map(|d| {
                        std::fs::read_dir(d)
                            .into_iter()
                            .flatten()
                            .flatten()
                            .filter(|e| e.file_name().to_string_lossy().ends_with(SEGMENT_SUFFIX))
                            .count()
                    })
                    .max()
                    .unwrap_or(0);
                (i as u32 + 1, moved, segments)
            })
            .collect()
    }

    pub fn pause(&mut self, node: Node) {
        let member = self.slot(node);
        if let Some(pid) = member.pid() {
            signal(pid, libc::SIGSTOP);
            member.paused = true;
        }
    }

    /// SIGCONT.
    pub fn resume(&mut self, node: Node) {
        let member = self.slot(node);
        if let Some(pid) = member.pid() {
            signal(pid, libc::SIGCONT);
            member.paused = false;
        }
    }

    /// Switches a broker's disk faults: `words` as the storage fault layer reads them (none:
    /// off).
    pub fn disk_faults(&self, broker: u32, words: &[&str]) -> Result<(), String> {
        let path = self.control_file(broker);
        std::fs::write(&path, words.join("\n")).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// A power loss on a stopped broker: every segment loses what it had not synced, as the
    /// storage fault layer recorded it.
    pub fn lose_unsynced(&self, broker: u32) -> Result<u64, String> {
        let root = self.brokers[broker as usize - 1]
            .dir
            .join("data/partitions");
        let mut lost = 0;
        let io = |e: std::io::Error| e.to_string();
        for partition in std::fs::read_dir(&root).map_err(io)?.flatten() {
            for file in std::fs::read_dir(partition.path()).map_err(io)?.flatten() {
                let path = file.path();
                if path.extension().is_none_or(|e| e != "log") {
                    continue;
                }
                let synced =
                    std::fs::read_to_string(path.with_extension(storage_faults::SYNCED_SUFFIX))
                        .ok()
                        .and_then(|s| s.trim().parse::<u64>().ok())
                        .unwrap_or(0);
                let len = file.metadata().map_err(io)?.len();
                if len > synced {
                    let f = std::fs::OpenOptions::new()
                        .write(true)
                        .open(&path)
                        .map_err(io)?;
                    f.set_len(synced).map_err(io)?;
                    lost += len - synced;
                }
            }
        }
        Ok(lost)
    }

    /// Whether `broker`'s log says recovery cut a torn tail.
    pub fn cut_torn_tail(&self, broker: u32) -> bool {
        std::fs::read_to_string(self.brokers[broker as usize - 1].dir.join("log.txt"))
            .is_ok_and(|log| log.contains("truncating torn or corrupt log tail"))
    }

    /// Puts everything back: links healed, paused processes resumed, stopped ones started,
    /// disk faults off.
    pub async fn heal(&mut self) -> Result<(), String> {
        self.faults.heal();
        for b in 1..=BROKERS {
            self.disk_faults(b, &[])?;
        }
        for node in self.nodes() {
            self.exited(node);
            if self.slot(node).paused {
                self.resume(node);
            }
            if !self.slot(node).running() {
                self.spawn(node).await?;
            }
        }
        Ok(())
    }

    /// The controllers' view of the cluster, asked of the running ones directly (a standby
    /// names the active one); `None` if none answers within a second.
    pub async fn view(&self) -> Option<ClusterView> {
        let addresses: Vec<String> = self
            .controllers
            .iter()
            .filter(|c| !c.paused)
            .filter_map(|c| c.listening.clone())
            .collect();
        let addresses = addresses.join(",");
        let ask = isr_runtime::status::view_of(&addresses, None);
        tokio::time::timeout(Duration::from_secs(1), ask)
            .await
            .ok()?
            .ok()
    }

    /// Partition `index` of the topic, in `view`.
    pub fn partition(view: &ClusterView, index: u32) -> Option<&PartitionState> {
        view.partitions.get(&view.partition_id(TOPIC, index)?)
    }

    /// The leader of partition `index` and its followers (the other assigned replicas).
    pub async fn replicas(&self, index: u32) -> Option<(u32, Vec<u32>)> {
        let view = self.view().await?;
        let state = Self::partition(&view, index)?;
        let leader = state.leader?;
        let followers = state
            .assigned
            .iter()
            .filter(|&&b| b != leader)
            .map(|b| b.0)
            .collect();
        Some((leader.0, followers))
    }

    /// The broker coordinating the workload's group: the leader of its `__consumer_offsets`
    /// partition, by Kafka's hash of the group id.
    pub fn coordinator_in(view: &ClusterView) -> Option<u32> {
        let ids = view.topics.get(OFFSETS_TOPIC)?;
        let count = u32::try_from(ids.len()).ok()?;
        let id = ids.get(partition_for(GROUP, count) as usize)?;
        Some(view.partitions.get(id)?.leader?.0)
    }

    /// [`Cluster::coordinator_in`] the current view.
    pub async fn coordinator(&self) -> Option<u32> {
        Self::coordinator_in(&self.view().await?)
    }

    /// The active controller's id.
    pub async fn active_controller(&self) -> Option<u32> {
        Some(self.view().await?.controller?.id)
    }

    /// Polls the view until `done` holds; how long it took.
    pub async fn wait(
        &self,
        timeout: Duration,
        what: &str,
        done: impl Fn(&ClusterView) -> bool,
    ) -> Result<Duration, String> {
        let start = Instant::now();
        loop {
            let view = self.view().await;
            if view.as_ref().is_some_and(&done) {
                return Ok(start.elapsed());
            }
            if start.elapsed() > timeout {
                return Err(format!(
                    "not {what} within {} s (last view: {})",
                    timeout.as_secs(),
                    describe(view.as_ref())
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until every broker is alive and every partition has a leader and its whole
    /// assignment in the ISR.
    pub async fn wait_healthy(&self, timeout: Duration) -> Result<Duration, String> {
        self.wait(timeout, "healthy", |v| {
            v.brokers.values().filter(|b| b.alive).count() == BROKERS as usize
                && (0..PARTITIONS).all(|p| {
                    Self::partition(v, p)
                        .is_some_and(|s| s.leader.is_some() && s.isr.len() == s.assigned.len())
                })
        })
        .await
    }

    async fn create_topic(&self) -> Result<(), String> {
        let args = TopicArgs {
            command: TopicCommand::Create(CreateArgs {
                bootstrap: self.bootstrap().join(","),
                name: TOPIC.to_string(),
                partitions: Some(PARTITIONS),
                replication_factor: Some(BROKERS as u16),
                min_insync_replicas: Some(self.setup.min_isr),
                configs: self
                    .setup
                    .topic_configs
                    .iter()
                    .map(|&(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                replica_assignment: None,
            }),
        };
        isr_kafka::client::topic::run_with(args, &mut Vec::new())
            .await
            .map_err(|e| format!("creating the topic: {e}"))
    }
}

/// A view in one line, for errors: each partition's leader and ISR, and the live brokers.
pub fn describe(view: Option<&ClusterView>) -> String {
    let Some(v) = view else {
        return "no controller answered".into();
    };
    let alive: Vec<String> = v
        .brokers
        .iter()
        .filter(|(_, b)| b.alive)
        .map(|(id, _)| id.0.to_string())
        .collect();
    let partitions: Vec<String> = (0..PARTITIONS)
        .map(|p| match Cluster::partition(v, p) {
            Some(s) => {
                let isr: Vec<String> = s.isr.iter().map(|b| b.0.to_string()).collect();
                let leader = s.leader.map_or("none".into(), |l| l.0.to_string());
                format!("p{p} leader {leader} isr {{{}}}", isr.join(","))
            }
            None => format!("p{p} unknown"),
        })
        .collect();
    format!("alive {{{}}}; {}", alive.join(","), partitions.join("; "))
}
