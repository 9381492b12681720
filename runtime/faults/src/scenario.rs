//! The scenarios: what each does to the cluster, and what it expects of the history.
//!
//! Every scenario runs replication factor 3 with min ISR 2 unless it says otherwise, and leaves
//! the cluster healed (links restored, processes resumed and restarted, disk faults off): the
//! runner then waits for it to be healthy and reads everything back. "The leader" is partition
//! 0's leader when the fault begins; a bounce chases the role (Kafka's replication tests do too).

use crate::cluster::{Cluster, Setup, Stop, PARTITIONS};
use crate::proxy::Node;
use crate::rng::Rng;
use std::fmt;
use std::time::Duration;
use tokio::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expected {
    /// Nothing acknowledged may be lost: any loss is a bug.
    Safe,
    /// A configuration the model checker shows losing acknowledged writes: the loss must be
    /// observed, or the scenario did not reproduce it.
    Loss,
}

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Expected::Safe => "safe",
            Expected::Loss => "loss",
        })
    }
}

/// What Kafka's replication tests do to a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    CleanShutdown,
    HardShutdown,
    CleanBounce,
    HardBounce,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Leader,
    Follower,
    /// The one controller, on the file store.
    Controller,
    /// The active one of three controllers on etcd.
    ActiveController,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disk {
    FailingFsync,
    Full,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Matrix(Action, Target),
    Pause(Target),
    LeaderFromController,
    LeaderFromFollowers,
    FollowerFromLeader,
    Bridge,
    Flapping,
    Rolling,
    SlowFollower,
    Disk(Disk, Target),
    CrashMidWrite,
    /// SIGKILL of the broker that coordinates the workload's consumer group (the leader of the
    /// group's `__consumer_offsets` partition), then its restart.
    CoordinatorFailover,
    /// The topic keeps 5 s of records in 1 s segments under the steady producers, and a
    /// follower is paused past the retention: it comes back below its leader's log start.
    RetentionUnderLoad,
    Jepsen2013,
    LastReplicaStanding,
}

pub struct Scenario {
    pub name: String,
    /// What is done, in a few words, for the table.
    pub fault: String,
    pub expected: Expected,
    pub kind: Kind,
}

impl Scenario {
    pub fn setup(&self) -> Setup {
        match self.kind {
            Kind::Matrix(_, Target::ActiveController) | Kind::Pause(Target::ActiveController) => {
                Setup {
                    controllers: 3,
                    ..Setup::default()
                }
            }
            Kind::Jepsen2013 => Setup {
                rules: vec!["unclean-election=on", "elr=off"],
                min_isr: 1,
                ..Setup::default()
            },
            Kind::RetentionUnderLoad => Setup {
                topic_configs: vec![("retention.ms", "5000"), ("segment.ms", "1000")],
                broker_flags: vec!["--log-retention-check-interval-ms", "500"],
                ..Setup::default()
            },
            Kind::LastReplicaStanding => Setup {
                page_cache: true,
                rules: vec!["flush=page-cache", "elr=off"],
                ..Setup::default()
            },
            _ => Setup::default(),
        }
    }

    /// Idempotent acks=all producers per partition: more for the slow follower, whose writes
    /// take most of a second each while it is in the ISR, so that its latency has samples.
    pub fn acks_all(&self) -> u32 {
        if self.kind == Kind::SlowFollower {
            4
        } else {
            1
        }
    }

    /// acks=1 producers per partition: the slow follower needs writes that do not wait for it,
    /// so that the leader's log end moves while its fetches are in flight.
    pub fn acks_one(&self) -> u32 {
        u32::from(self.kind == Kind::SlowFollower)
    }
}

/// Every scenario, in the order `run all` runs them.
pub fn all() -> Vec<Scenario> {
    let mut all = Vec::new();
    let mut add = |name: String, fault: String, expected, kind| {
        all.push(Scenario {
            name,
            fault,
            expected,
            kind,
        })
    };
    let actions = [
        (Action::CleanShutdown, "clean-shutdown", "SIGTERM"),
        (Action::HardShutdown, "hard-shutdown", "SIGKILL"),
        (
            Action::CleanBounce,
            "clean-bounce",
            "SIGTERM+restart, chased",
        ),
        (Action::HardBounce, "hard-bounce", "SIGKILL+restart, chased"),
    ];
    let targets = [
        (Target::Leader, "leader", "leader"),
        (Target::Follower, "follower", "follower"),
        (Target::Controller, "controller", "controller"),
        (
            Target::ActiveController,
            "active-controller",
            "active of 3 controllers (etcd)",
        ),
    ];
    for (target, t_name, t_what) in targets {
        for (action, a_name, a_what) in actions {
            add(
                format!("{a_name}-{t_name}"),
                format!("{a_what} of the {t_what}"),
                Expected::Safe,
                Kind::Matrix(action, target),
            );
        }
    }
    let safe = Expected::Safe;
    add(
        "pause-leader".into(),
        "SIGSTOP the leader past its session, SIGCONT".into(),
        safe,
        Kind::Pause(Target::Leader),
    );
    add(
        "pause-active-controller".into(),
        "SIGSTOP the active controller past its lease, SIGCONT".into(),
        safe,
        Kind::Pause(Target::ActiveController),
    );
    let partitions = [
        (
            "partition-leader-controller",
            "leader cut from the controller, clients reach it",
            Kind::LeaderFromController,
        ),
        (
            "partition-leader-followers",
            "leader cut from both followers",
            Kind::LeaderFromFollowers,
        ),
        (
            "partition-follower",
            "one follower cut from the leader",
            Kind::FollowerFromLeader,
        ),
        (
            "partition-bridge",
            "bridge: leader sees one follower only",
            Kind::Bridge,
        ),
        (
            "partition-flapping",
            "random links cut and healed every 0.4-1.2 s",
            Kind::Flapping,
        ),
        (
            "partition-rolling",
            "each node isolated in turn",
            Kind::Rolling,
        ),
        (
            "slow-follower",
            "the leader-follower link delayed 200 ms each way",
            Kind::SlowFollower,
        ),
    ];
    for (name, fault, kind) in partitions {
        add(name.into(), fault.into(), safe, kind);
    }
    for (disk, d_name, d_what) in [
        (Disk::FailingFsync, "disk-fsync", "fsync fails (EIO)"),
        (Disk::Full, "disk-full", "disk full (ENOSPC)"),
    ] {
        for (target, t_name) in [(Target::Leader, "leader"), (Target::Follower, "follower")] {
            add(
                format!("{d_name}-{t_name}"),
                format!("{d_what} on the {t_name}, then restart"),
                safe,
                Kind::Disk(disk, target),
            );
        }
    }
    add(
        "crash-mid-write".into(),
        "the leader dies with a batch half written".into(),
        safe,
        Kind::CrashMidWrite,
    );
    add(
        "coordinator-failover".into(),
        "SIGKILL of the group's coordinator, then restart".into(),
        safe,
        Kind::CoordinatorFailover,
    );
    add(
        "retention-under-load".into(),
        "retention.ms=5000, segment.ms=1000; a follower paused past it".into(),
        safe,
        Kind::RetentionUnderLoad,
    );
    add(
        "jepsen-2013".into(),
        "min ISR 1, unclean election: leader alone in the ISR, killed".into(),
        Expected::Loss,
        Kind::Jepsen2013,
    );
    add(
        "last-replica-standing".into(),
        "page-cache acks, no ELR: last ISR member loses power".into(),
        Expected::Loss,
        Kind::LastReplicaStanding,
    );
    all
}

/// A scenario in progress: the cluster, the clock, and what was done when.
pub struct Run {
    pub cluster: Cluster,
    pub start: Instant,
    /// How long faults last (`--duration`).
    pub duration: Duration,
    pub rng: Rng,
    /// Each step of the fault schedule, with its time.
    pub schedule: Vec<(Duration, String)>,
    /// Something the scenario required did not happen (a broker that kept running on a failed
    /// disk, a state never reached): the run fails, whatever the history says.
    pub problems: Vec<String>,
    /// Moments worth marking on a latency chart.
    pub marks: Vec<(Duration, String)>,
    pub verbose: bool,
    /// What the workload did so far (a scenario may wait for it: a group that has committed).
    pub history: crate::history::Recorder,
}

impl Run {
    pub fn now(&self) -> Duration {
        self.start.elapsed()
    }

    pub fn log(&mut self, what: impl Into<String>) {
        let what = what.into();
        if self.verbose {
            eprintln!("  {:>6.1} s  {what}", self.now().as_secs_f64());
        }
        self.schedule.push((self.now(), what));
    }

    fn mark(&mut self, what: &str) {
        self.log(what);
        self.marks.push((self.now(), what.to_string()));
    }

    async fn sleep(&self, d: Duration) {
        tokio::time::sleep(d).await;
    }

    /// `duration`, but at least `floor`: some faults need time to show (a session to expire, a
    /// follower to fall out of the ISR).
    fn at_least(&self, floor: Duration) -> Duration {
        self.duration.max(floor)
    }

    /// Partition 0's leader and followers now.
    async fn replicas(&self) -> Result<(u32, Vec<u32>), String> {
        for _ in 0..50 {
            if let Some(r) = self.cluster.replicas(0).await {
                return Ok(r);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err("partition 0 has no leader".into())
    }

    /// The node `target` names now.
    async fn resolve(&self, target: Target) -> Result<Node, String> {
        Ok(match target {
            Target::Leader => Node::Broker(self.replicas().await?.0),
            Target::Follower => Node::Broker(self.replicas().await?.1[0]),
            Target::Controller => Node::Controller(1),
            Target::ActiveController => Node::Controller(
                self.cluster
                    .active_controller()
                    .await
                    .ok_or("no active controller")?,
            ),
        })
    }

    /// Waits until `check` holds, or records a problem naming `what`.
    async fn until(
        &mut self,
        timeout: Duration,
        what: &str,
        check: impl Fn(&isr_runtime::wire::admin::ClusterView) -> bool,
    ) -> bool {
        match self.cluster.wait(timeout, what, check).await {
            Ok(_) => {
                self.log(what);
                true
            }
            Err(e) => {
                self.problems.push(e);
                false
            }
        }
    }

    /// Waits until `broker`'s process exits on its own (its disk failed), or records a problem.
    async fn exits(&mut self, broker: u32, why: &str) -> bool {
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if self.cluster.exited(Node::Broker(broker)) {
                self.log(format!("b{broker} stopped by itself ({why})"));
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.problems
            .push(format!("b{broker} kept running after {why}"));
        false
    }
}

fn broker(node: Node) -> Option<u32> {
    match node {
        Node::Broker(b) => Some(b),
        _ => None,
    }
}

/// Carries out `kind`'s fault schedule.
pub async fn inject(kind: Kind, run: &mut Run) -> Result<(), String> {
    match kind {
        Kind::Matrix(action, target) => matrix(run, action, target).await,
        Kind::Pause(target) => {
            let victim = run.resolve(target).await?;
            run.cluster.pause(victim);
            run.log(format!("SIGSTOP {victim}"));
            run.sleep(run.at_least(Duration::from_secs(3))).await;
            run.cluster.resume(victim);
            run.log(format!("SIGCONT {victim}"));
            Ok(())
        }
        Kind::LeaderFromController => {
            let (leader, _) = run.replicas().await?;
            for c in 1..=run.cluster.setup.controllers {
                run.cluster
                    .faults
                    .cut_both(Node::Broker(leader), Node::Controller(c));
            }
            run.log(format!("cut {}", run.cluster.faults.describe()));
            run.sleep(run.at_least(Duration::from_secs(3))).await;
            Ok(())
        }
        Kind::LeaderFromFollowers => {
            let (leader, followers) = run.replicas().await?;
            let followers: Vec<Node> = followers.into_iter().map(Node::Broker).collect();
            run.cluster
                .faults
                .partition(&[Node::Broker(leader)], &followers);
            run.log(format!("cut {}", run.cluster.faults.describe()));
            run.sleep(run.at_least(Duration::from_secs(4))).await;
            Ok(())
        }
        Kind::FollowerFromLeader => {
            let (leader, followers) = run.replicas().await?;
            run.cluster
                .faults
                .cut_both(Node::Broker(leader), Node::Broker(followers[0]));
            run.log(format!("cut {}", run.cluster.faults.describe()));
            run.sleep(run.at_least(Duration::from_secs(4))).await;
            Ok(())
        }
        Kind::Bridge => {
            // The leader reaches one follower (the bridge) and no one else; the bridge
            // reaches everyone.
            let (leader, followers) = run.replicas().await?;
            let l = Node::Broker(leader);
            run.cluster.faults.cut_both(l, Node::Broker(followers[1]));
            for c in 1..=run.cluster.setup.controllers {
                run.cluster.faults.cut_both(l, Node::Controller(c));
            }
            run.log(format!(
                "bridge b{} between b{leader} and the rest: cut {}",
                followers[0],
                run.cluster.faults.describe()
            ));
            run.sleep(run.at_least(Duration::from_secs(4))).await;
            Ok(())
        }
        Kind::Flapping => flapping(run).await,
        Kind::Rolling => rolling(run).await,
        Kind::SlowFollower => slow_follower(run).await,
        Kind::Disk(disk, target) => {
            let victim = broker(run.resolve(target).await?).ok_or("not a broker")?;
            let (word, why) = match disk {
                Disk::FailingFsync => ("fsync-eio", "a failed fsync"),
                Disk::Full => ("write-enospc", "a full disk"),
            };
            run.cluster.disk_faults(victim, &[word])?;
            run.log(format!("b{victim}: {word}"));
            run.exits(victim, why).await;
            run.cluster.disk_faults(victim, &[])?;
            run.sleep(run.at_least(Duration::from_secs(1))).await;
            run.log(format!("b{victim}: disk repaired, restarting"));
            Ok(())
        }
        Kind::CrashMidWrite => {
            let (leader, _) = run.replicas().await?;
            run.cluster.disk_faults(leader, &["write-torn-crash"])?;
            run.log(format!("b{leader}: write-torn-crash"));
            run.exits(leader, "a crash mid-write").await;
            run.cluster.disk_faults(leader, &[])?;
            run.sleep(run.at_least(Duration::from_secs(1))).await;
            run.log(format!("b{leader}: restarting"));
            Ok(())
        }
        Kind::CoordinatorFailover => coordinator_failover(run).await,
        Kind::RetentionUnderLoad => retention_under_load(run).await,
        Kind::Jepsen2013 => jepsen_2013(run).await,
        Kind::LastReplicaStanding => last_replica_standing(run).await,
    }
}

/// Retention under the steady producers: a follower is paused past the retention (its
/// partitions' leaders delete what it lacks), then resumed, and the run goes on until
/// retention has moved the log start of every partition on every broker. The disk usage is
/// sampled throughout (its peak is logged), and no partition may keep more segments than
/// retention allows (5 s in 1 s segments, the active one and a few more for the checks'
/// interval).
async fn retention_under_load(run: &mut Run) -> Result<(), String> {
    const MOST_SEGMENTS: usize = 10;
    let (_, followers) = run.replicas().await?;
    let follower = Node::Broker(followers[0]);
    let began = Instant::now();
    let mut peak = 0u64;
    let mut paused = false;
    let until = began + run.at_least(Duration::from_secs(14));
    while Instant::now() < until {
        let t = began.elapsed();
        if !paused && t >= Duration::from_secs(1) && t < Duration::from_secs(8) {
            run.cluster.pause(follower);
            run.log(format!("SIGSTOP {follower}, past the retention"));
            paused = true;
        } else if paused && t >= Duration::from_secs(8) {
            run.cluster.resume(follower);
            run.log(format!("SIGCONT {follower}: below its leaders' log start"));
            paused = false;
        }
        peak = peak.max(run.cluster.disk_usage());
        run.sleep(Duration::from_millis(250)).await;
    }
    if paused {
        run.cluster.resume(follower);
    }
    // Every broker's replicas of the topic have moved their log start (a follower's log start
    // follows its leader's, and its own retention).
    let deadline = Instant::now() + Duration::from_secs(20);
    let starts = loop {
        let starts = run.cluster.log_starts();
        let done = starts
            .iter()
            .all(|&(_, moved, _)| moved >= PARTITIONS as usize);
        if done || Instant::now() > deadline {
            break starts;
        }
        peak = peak.max(run.cluster.disk_usage());
        run.sleep(Duration::from_millis(250)).await;
    };
    run.log(format!(
        "disk usage peak {:.2} MiB over every broker; log starts moved (broker, partitions, most segments): {starts:?}",
        peak as f64 / f64::from(1 << 20)
    ));
    for (broker, moved, segments) in starts {
        if moved < PARTITIONS as usize {
            run.problems.push(format!(
                "broker {broker}: {moved} of the topic's {PARTITIONS} partitions moved their log start"
            ));
        }
        if segments > MOST_SEGMENTS {
            run.problems.push(format!(
                "broker {broker}: a partition holds {segments} segments, more than retention keeps"
            ));
        }
    }
    Ok(())
}

/// Kafka's replication-test cell: stop the target once (shutdown), or stop and restart it
/// repeatedly, each time whoever holds the role then (bounce).
async fn matrix(run: &mut Run, action: Action, target: Target) -> Result<(), String> {
    let how = match action {
        Action::CleanShutdown | Action::CleanBounce => Stop::Clean,
        Action::HardShutdown | Action::HardBounce => Stop::Hard,
    };
    if matches!(action, Action::CleanShutdown | Action::HardShutdown) {
        let victim = run.resolve(target).await?;
        run.cluster.stop(victim, how).await;
        run.log(format!("{how:?} stop of {victim}"));
        run.sleep(run.at_least(Duration::from_secs(2))).await;
        return Ok(());
    }
    let bounces = (run.duration.as_secs() / 4).clamp(1, 5) as u32;
    let period = run.at_least(Duration::from_secs(3)) / bounces;
    for i in 1..=bounces {
        let began = Instant::now();
        let victim = run.resolve(target).await?;
        run.cluster.stop(victim, how).await;
        run.log(format!("bounce {i}/{bounces}: {how:?} stop of {victim}"));
        match victim {
            // As Kafka's hard bounce waits for ZooKeeper to register the loss: the session
            // expires, or the standby takes over, before the restart.
            Node::Broker(b) => {
                let gone = move |v: &isr_runtime::wire::admin::ClusterView| {
                    v.brokers
                        .get(&isr::BrokerId(b))
                        .is_some_and(|info| !info.alive)
                };
                run.until(Duration::from_secs(10), &format!("b{b} fenced"), gone)
                    .await;
            }
            Node::Controller(c) if target == Target::ActiveController => {
                let moved = move |v: &isr_runtime::wire::admin::ClusterView| {
                    v.controller.as_ref().is_some_and(|a| a.id != c)
                };
                run.until(Duration::from_secs(10), "another controller active", moved)
                    .await;
            }
            _ => {}
        }
        run.cluster.spawn(victim).await?;
        run.log(format!("bounce {i}/{bounces}: {victim} restarted"));
        if let Node::Broker(b) = victim {
            let back = move |v: &isr_runtime::wire::admin::ClusterView| {
                v.brokers
                    .get(&isr::BrokerId(b))
                    .is_some_and(|info| info.alive)
            };
            run.until(Duration::from_secs(15), &format!("b{b} registered"), back)
                .await;
        }
        run.sleep(period.saturating_sub(began.elapsed())).await;
    }
    Ok(())
}

/// Links between random pairs of nodes cut and healed, at random moments.
async fn flapping(run: &mut Run) -> Result<(), String> {
    let mut nodes: Vec<Node> = (1..=3).map(Node::Broker).collect();
    nodes.extend((1..=run.cluster.setup.controllers).map(Node::Controller));
    let end = Instant::now() + run.at_least(Duration::from_secs(4));
    let mut cut = std::collections::BTreeSet::new();
    while Instant::now() < end {
        let a = nodes[run.rng.below(nodes.len() as u64) as usize];
        let b = nodes[run.rng.below(nodes.len() as u64) as usize];
        if run.rng.below(4) == 0 {
            run.cluster.faults.heal();
            cut.clear();
            run.log("heal all");
        } else if a != b {
            if cut.remove(&(a.min(b), a.max(b))) {
                run.cluster.faults.heal();
                for &(x, y) in &cut {
                    run.cluster.faults.cut_both(x, y);
                }
            } else {
                cut.insert((a.min(b), a.max(b)));
                run.cluster.faults.cut_both(a, b);
            }
            run.log(format!("now cut: {}", run.cluster.faults.describe()));
        }
        let wait = 400 + run.rng.below(800);
        run.sleep(Duration::from_millis(wait)).await;
    }
    Ok(())
}

/// Each node isolated from every other (clients included) in turn: the brokers, partition
/// 0's leader first, then the controller.
async fn rolling(run: &mut Run) -> Result<(), String> {
    let (leader, followers) = run.replicas().await?;
    let mut order: Vec<Node> = std::iter::once(leader)
        .chain(followers)
        .map(Node::Broker)
        .collect();
    order.push(Node::Controller(1));
    let mut everyone: Vec<Node> = (1..=3).map(Node::Broker).collect();
    everyone.extend((1..=run.cluster.setup.controllers).map(Node::Controller));
    everyone.push(Node::Client);
    let each = run.at_least(Duration::from_secs(8)) / order.len() as u32;
    for node in order {
        let others: Vec<Node> = everyone.iter().copied().filter(|&n| n != node).collect();
        run.cluster.faults.heal();
        run.cluster.faults.partition(&[node], &others);
        run.log(format!("isolate {node}"));
        run.sleep(each).await;
    }
    Ok(())
}

/// How much the slow follower's links are delayed, each way.
pub const SLOW: Duration = Duration::from_millis(200);

/// A follower whose link to partition 0's leader is slow but that keeps up: by Kafka's caught-up
/// rule (a fetch that reaches the log end the leader had at the previous fetch counts) it stays
/// in the ISR, one round trip behind, well past replica.lag.time.max; acks=all writes wait that
/// round trip instead of failing, and latency falls back after the heal. (The link also carries
/// the partition the slow follower leads, where the fast follower is the one behind it.)
async fn slow_follower(run: &mut Run) -> Result<(), String> {
    run.mark("normal");
    run.sleep(Duration::from_secs(2)).await;
    let (leader, followers) = run.replicas().await?;
    let slow = followers[0];
    let (l, f) = (Node::Broker(leader), Node::Broker(slow));
    run.cluster.faults.delay(l, f, SLOW);
    run.cluster.faults.delay(f, l, SLOW);
    run.mark(&format!(
        "link b{leader}-b{slow} delayed {} ms each way",
        SLOW.as_millis()
    ));
    // Longer than replica.lag.time.max (3 s), under writes: still in the ISR.
    run.sleep(run.at_least(Duration::from_secs(5))).await;
    let member = move |v: &isr_runtime::wire::admin::ClusterView| {
        Cluster::partition(v, 0).is_some_and(|s| s.isr.contains(&isr::BrokerId(slow)))
    };
    let what = format!("b{slow} still in the ISR, one round trip behind");
    if run.until(Duration::from_secs(1), &what, member).await {
        run.mark(&what);
    }
    run.cluster.faults.heal();
    run.mark("healed");
    run.sleep(Duration::from_secs(2)).await;
    Ok(())
}

/// How soon both members of the group must have committed once the workload starts.
const COMMITTING_WITHIN: Duration = Duration::from_secs(20);

/// How many of the group's members have had a commit acknowledged.
fn committers(run: &Run) -> usize {
    let history = run.history.lock();
    let members: std::collections::BTreeSet<&str> = history
        .commits
        .iter()
        .map(|c| c.consumer.as_str())
        .collect();
    members.len()
}

/// How soon the group's members must commit again after their coordinator's SIGKILL.
pub const RESUME_WITHIN: Duration = Duration::from_secs(5);

/// The group's coordinator dies: the leader of its `__consumer_offsets` partition, SIGKILLed
/// while the members consume and commit. The partition's next leader must coordinate the group
/// from what it replicated (its commits and its membership): the members carry on within
/// [`RESUME_WITHIN`], nothing they committed is read again, nothing is skipped (the history's
/// checks). The broker is restarted once another leads the partition.
async fn coordinator_failover(run: &mut Run) -> Result<(), String> {
    // Not during the group's first rebalance (it waits group.initial.rebalance.delay.ms, 3 s):
    // the kill must come while both members commit, so that the next coordinator has a
    // generation and commits to load.
    let deadline = Instant::now() + COMMITTING_WITHIN;
    while committers(run) < 2 {
        if Instant::now() > deadline {
            run.problems.push(format!(
                "the group's members had not both committed within {COMMITTING_WITHIN:?}"
            ));
            return Ok(());
        }
        run.sleep(Duration::from_millis(50)).await;
    }
    run.log("both members have committed");
    let coordinator = run
        .cluster
        .coordinator()
        .await
        .ok_or("the group has no coordinator")?;
    run.cluster
        .stop(Node::Broker(coordinator), Stop::Hard)
        .await;
    run.mark(&format!("SIGKILL b{coordinator}, the group's coordinator"));
    let moved = move |v: &isr_runtime::wire::admin::ClusterView| {
        Cluster::coordinator_in(v).is_some_and(|b| b != coordinator)
    };
    let what = "the group's offsets partition led by another broker";
    run.until(Duration::from_secs(10), what, moved).await;
    run.sleep(run.at_least(Duration::from_secs(3))).await;
    run.cluster.spawn(Node::Broker(coordinator)).await?;
    run.log(format!("b{coordinator} restarted"));
    Ok(())
}

/// Cuts partition 0's leader from its followers and waits until it has shrunk the ISR to
/// itself: the leader, or `None` (a problem recorded) if it never did.
async fn leader_left_alone(run: &mut Run) -> Result<Option<u32>, String> {
    let (leader, followers) = run.replicas().await?;
    let f: Vec<Node> = followers.iter().copied().map(Node::Broker).collect();
    run.cluster.faults.partition(&[Node::Broker(leader)], &f);
    run.log(format!("b{leader} cut from its followers"));
    let alone = |v: &isr_runtime::wire::admin::ClusterView| {
        Cluster::partition(v, 0).is_some_and(|s| s.isr.len() == 1)
    };
    let what = format!("ISR of p0 = {{b{leader}}}");
    let reached = run.until(Duration::from_secs(20), &what, alone).await;
    Ok(reached.then_some(leader))
}

/// The 2013 Jepsen case (the `jepsen-2013` preset): min ISR 1 and unclean election. The
/// leader is cut from its followers, shrinks the ISR to itself and goes on acknowledging acks=all
/// writes alone; then it dies, and the controller elects a follower that never had them.
async fn jepsen_2013(run: &mut Run) -> Result<(), String> {
    let Some(leader) = leader_left_alone(run).await? else {
        return Ok(());
    };
    let l = Node::Broker(leader);
    run.sleep(run.at_least(Duration::from_secs(2))).await;
    run.cluster.stop(l, Stop::Hard).await;
    run.log(format!("SIGKILL b{leader}"));
    let unclean = move |v: &isr_runtime::wire::admin::ClusterView| {
        Cluster::partition(v, 0).is_some_and(|s| s.leader.is_some_and(|b| b.0 != leader))
    };
    run.until(
        Duration::from_secs(15),
        "p0 led by a follower (unclean election)",
        unclean,
    )
    .await;
    run.sleep(Duration::from_secs(1)).await;
    Ok(())
}

/// The `last-replica-standing` preset: page-cache acknowledgement without ELR. Writes are
/// committed by the full ISR but never synced; the ISR shrinks to the leader alone; the leader
/// loses power (SIGKILL, then everything it had not synced is dropped) and, as the last ISR
/// member, is elected again with what little survived, and the followers follow it.
async fn last_replica_standing(run: &mut Run) -> Result<(), String> {
    run.sleep(run.at_least(Duration::from_secs(2)) / 2).await;
    let Some(leader) = leader_left_alone(run).await? else {
        return Ok(());
    };
    let l = Node::Broker(leader);
    run.cluster.stop(l, Stop::Hard).await;
    let lost = run.cluster.lose_unsynced(leader)?;
    run.log(format!(
        "b{leader} lost power: SIGKILL, {lost} unsynced bytes dropped"
    ));
    run.cluster.spawn(l).await?;
    run.log(format!("b{leader} restarted"));
    let again = move |v: &isr_runtime::wire::admin::ClusterView| {
        Cluster::partition(v, 0).is_some_and(|s| s.leader.is_some_and(|b| b.0 == leader))
    };
    run.until(
        Duration::from_secs(15),
        &format!("b{leader} re-elected"),
        again,
    )
    .await;
    run.sleep(run.at_least(Duration::from_secs(2)) / 2).await;
    Ok(())
}
