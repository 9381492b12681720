//! Shared driver of the random-schedule property tests (proptest and quickcheck alike).
//!
//! A schedule is a sequence of choices: at each step the driver lists the actions the simulated
//! cluster enables within its bounds and takes the one the next choice picks (modulo their
//! number). Both test frameworks generate and shrink plain `Vec<u16>`s this way, so a shrunk
//! failure is always a short schedule, and the driver turns it back into the actions it took,
//! which is what a failure report prints.

#![allow(dead_code)] // each test binary uses a different part of this module

use isr::sim::{atomic, clocked, describe, set, Action, Bounds, Cluster, ReplicaId};
use isr::{
    Acks, BrokerId, Config, FlushPolicy, Log, Message, Node, Property, Role, Rules, Tick, Violation,
};
use std::fmt;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The knobs a random schedule varies besides its choices. Kept small and plain so that both
/// frameworks can generate and shrink them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Knobs {
    /// 2–4 brokers.
    pub replicas: u32,
    /// 1–2 partitions, each on every broker.
    pub partitions: u32,
    /// Asked-for `min.insync.replicas`; clamped to `1..=replicas`.
    pub min_isr: usize,
    pub acks_all: bool,
    pub records: u8,
    pub max_leader_epoch: u32,
    pub clean_crashes: u8,
    pub unclean_crashes: u8,
    pub drops: u8,
    /// Messages the network may deliver twice.
    pub duplicates: u8,
    /// Running brokers the controller may fence (zombie leaders, stale followers).
    pub session_expiries: u8,
    /// Times the controller role may move while the old controller runs on as a zombie.
    pub controller_failovers: u8,
    /// Times a leader's disk may fill up under a write.
    pub disk_failures: u8,
    /// DeleteRecords that may move a leader's log start.
    pub deletes: u8,
    /// Compaction passes that may remove a superseded record.
    pub compactions: u8,
    /// Run the replicas' clocks up to this tick (0: none, every timer an action of its own):
    /// timers fire only when due and every message arrives within a tick, so a timely run
    /// must keep every follower in the ISR.
    pub clock: u8,
    /// The atomic-step model: each step runs to quiescence, only requests wait between steps.
    pub atomic: bool,
    pub consumer: bool,
    pub background_flush: bool,
    /// An idempotent producer that may retry this many times; `None` for a plain producer.
    pub producer_retries: Option<u8>,
    /// Consumers in a group over the first partition (0: none), committing through the
    /// coordinator at the leader of the group's offsets partition.
    pub consumers: u8,
    /// A broker the controller's LeaderAndIsr reach late: they are not delivered during the
    /// first `slow_steps` steps (unless nothing else is enabled). Uniform random choice delivers
    /// control messages quickly; the bugs of epoch fencing (rule 4) and of ISR expansion
    /// (rule 6) need a broker that keeps acting on a stale LeaderAndIsr across failovers.
    pub slow_broker: Option<u32>,
    pub slow_steps: u16,
}

/// Which protocol a schedule runs, and so which properties must hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// Every rule on, followers acknowledge flushed data: every property, any crashes.
    Safe,
    /// Every rule on, page-cache acknowledgement, min ISR 2, at most one unclean crash: every
    /// property but WeakIsr (a leader's cached ISR may still list a replica that restarted empty
    /// after an unclean crash until the controller's shrink reaches it; StrongIsr, over the
    /// controller's ISR, must hold).
    Kip966,
    /// The safe protocol with some switches at their historical values: every property is
    /// checked, and the tests expect one to break.
    Weakened(Rules),
}

/// A protocol variant with its bounds and the properties it must keep.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub cfg: Config,
    pub bounds: Bounds,
    pub properties: Vec<Property>,
    /// The broker whose LeaderAndIsr are held back, and for how many steps.
    pub slow: Option<(BrokerId, usize)>,
}

impl Scenario {
    pub fn new(protocol: Protocol, k: &Knobs) -> Scenario {
        let replicas = k.replicas.clamp(2, 4);
        let mut cfg = Config::default();
        let mut bounds = Bounds {
            replicas,
            partitions: k.partitions.clamp(1, 2),
            records: k.records,
            max_leader_epoch: k.max_leader_epoch,
            clean_crashes: k.clean_crashes,
            unclean_crashes: k.unclean_crashes,
            drops: k.drops,
            duplicates: k.duplicates,
            session_expiries: k.session_expiries,
            controller_failovers: k.controller_failovers,
            disk_failures: k.disk_failures,
            deletes: k.deletes,
            compactions: k.compactions,
            clock: k.clock,
            atomic: k.atomic,
            acks: if k.acks_all { Acks::All } else { Acks::Leader },
            consumer: k.consumer,
            background_flush: k.background_flush,
            idempotent: k.producer_retries.is_some(),
            producer_retries: k.producer_retries.unwrap_or(0),
            consumers: k.consumers,
            commits: 3,
            consumer_failures: 2,
            max_generation: 4,
            keep_dead: false,
            // Each discard of the reduction is checked against the core as the schedule runs.
            audit_dead: true,
        };
        let properties = match protocol {
            Protocol::Safe | Protocol::Weakened(_) => {
                if let Protocol::Weakened(rules) = protocol {
                    cfg.rules = rules;
                }
                cfg.min_insync_replicas = k.min_isr.clamp(1, replicas.min(3) as usize);
                Property::ALL.to_vec()
            }
            Protocol::Kip966 => {
                cfg.rules.flush = FlushPolicy::PageCache;
                cfg.min_insync_replicas = 2;
                bounds.unclean_crashes = bounds.unclean_crashes.min(1);
                Property::ALL
                    .into_iter()
                    .filter(|&p| p != Property::WeakIsr)
                    .collect()
            }
        };
        if k.clock > 0 {
            // Leaders hold fetches, as in the clocked presets.
            cfg.fetch_max_wait = Tick(1);
            clocked(&mut cfg);
        }
        if k.atomic {
            atomic(&mut cfg);
        }
        let slow = k
            .slow_broker
            .filter(|&b| b < replicas)
            .map(|b| (BrokerId(b), usize::from(k.slow_steps)));
        Scenario {
            cfg,
            bounds,
            properties,
            slow,
        }
    }
}

/// A schedule that broke a property: what ran, what it did, what broke, where it ended.
pub struct Failure {
    pub scenario: Scenario,
    pub trace: Vec<Action>,
    pub violation: Violation,
    pub cluster: Cluster,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.scenario;
        let switches = s.cfg.rules.unsafe_switches();
        writeln!(f)?;
        writeln!(
            f,
            "rules: {}; min.insync.replicas={}",
            if switches.is_empty() {
                "safe".to_string()
            } else {
                switches.join(" ")
            },
            s.cfg.min_insync_replicas
        )?;
        writeln!(f, "bounds: {:?}", s.bounds)?;
        if let Some((b, steps)) = s.slow.filter(|&(_, steps)| steps > 0) {
            writeln!(
                f,
                "LeaderAndIsr to {b} held back for the first {steps} steps"
            )?;
        }
        writeln!(f, "schedule ({} steps):", self.trace.len())?;
        for (i, a) in self.trace.iter().enumerate() {
            writeln!(f, "  {:>3}. {a}", i + 1)?;
        }
        writeln!(f, "violation: {}", self.violation)?;
        write!(f, "{}", summary(&self.cluster))
    }
}

impl fmt::Debug for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The end state, one line per replica plus the controller and the network.
pub fn summary(c: &Cluster) -> String {
    let mut out = String::from("state:\n");
    for (p, s) in c
        .partitions()
        .filter_map(|p| Some((p, c.controller.partition(p)?)))
    {
        let leader = s.leader.map_or("none".to_string(), |b| b.to_string());
        out += &format!(
            "  controller: {p} leader={leader} {} isr={} elr={} {}\n",
            s.leader_epoch,
            set(&s.isr),
            set(&s.elr),
            s.partition_epoch
        );
    }
    for r in &c.replicas {
        let role = match r.role() {
            Role::Offline => "offline".to_string(),
            Role::Follower(f) => format!(
                "follower of {} ({:?})",
                f.leader().map_or("none".to_string(), |b| b.to_string()),
                f.phase()
            ),
            Role::Leader(l) => format!(
                "leader isr={} proposed={}",
                set(l.isr()),
                l.proposed_isr().map_or("-".to_string(), set)
            ),
        };
        let log: Vec<String> = r
            .log()
            .entries()
            .map(|e| format!("{}:{}", e.record, e.epoch))
            .collect();
        out += &format!(
            "  {}: {role} {} hw={} flushed={} log=[{}]\n",
            ReplicaId::new(r.id(), r.partition()),
            r.leader_epoch(),
            r.high_watermark(),
            r.log().flushed_offset(),
            log.join(",")
        );
    }
    for e in &c.network {
        out += &format!("  in flight: {}\n", describe(e));
    }
    out
}

/// Checks what must hold in every state: the scenario's properties and every replica's local
/// consistency.
pub fn check_state(c: &Cluster, properties: &[Property]) -> Result<(), Violation> {
    for r in &c.replicas {
        r.check_local()?;
    }
    for &p in properties {
        c.check(p)?;
    }
    Ok(())
}

/// The sim's reduction, checked: every message in flight whose receiver
/// [`isr::Replica::ignores_forever`] says will ignore it is inert when delivered
/// ([`isr::sim::dead_message_acts`]). The sim discards such messages; with `Bounds::keep_dead`
/// they stay in flight, so this sees each of them at every later step, and a message that is
/// dead now but acts later fails here too.
pub fn dead_messages_are_inert(c: &Cluster, cfg: &Config) -> Result<(), Violation> {
    for e in &c.network {
        let Node::Broker(b) = e.to else { continue };
        let Some(at) = isr::sim::receiver_slot(c.broker_count(), e) else {
            continue;
        };
        if !c.replicas[at].ignores_forever(cfg, e.from, &e.message) {
            continue;
        }
        if let Some(what) = isr::sim::dead_message_acts(cfg, &c.replicas, e) {
            return Err(Violation::Replica { replica: b, what });
        }
    }
    Ok(())
}

/// Runs one schedule, checking after every step. Returns the number of steps taken and the end
/// state; a schedule ends early when nothing is enabled.
pub fn run(scenario: &Scenario, choices: &[u16]) -> Result<(usize, Cluster), Box<Failure>> {
    let (cfg, bounds) = (&scenario.cfg, &scenario.bounds);
    let mut cluster = Cluster::new(cfg, bounds);
    let mut trace = Vec::new();
    let fail = |cluster: Cluster, trace: Vec<Action>, violation| {
        Box::new(Failure {
            scenario: scenario.clone(),
            trace,
            violation,
            cluster,
        })
    };
    if let Err(v) = check_state(&cluster, &scenario.properties) {
        return Err(fail(cluster, trace, v));
    }
    for (step, &choice) in choices.iter().enumerate() {
        let mut actions = cluster.actions(cfg, bounds);
        if actions.is_empty() {
            break;
        }
        if let Some((slow, _)) = scenario.slow.filter(|&(_, until)| step < until) {
            let held_back = |a: &Action| {
                matches!(a, Action::Deliver(e) if e.from == Node::Controller
                    && e.to == Node::Broker(slow)
                    && matches!(e.message, Message::LeaderAndIsr(_)))
            };
            if actions.iter().any(|a| !held_back(a)) {
                actions.retain(|a| !held_back(a));
            }
        }
        let action = actions[usize::from(choice) % actions.len()].clone();
        cluster.apply(cfg, bounds, &action);
        trace.push(action);
        let checked = check_state(&cluster, &scenario.properties).and_then(|()| {
            if bounds.keep_dead {
                dead_messages_are_inert(&cluster, cfg)
            } else {
                Ok(())
            }
        });
        if let Err(v) = checked {
            return Err(fail(cluster, trace, v));
        }
    }
    Ok((trace.len(), cluster))
}

/// What a property test ran, for the line it prints at its end.
pub struct Stats {
    pub schedules: AtomicU64,
    pub steps: AtomicU64,
    /// Schedules that committed at least one record: a guard against a vacuous run.
    pub committed: AtomicU64,
    /// Schedules where a leader elected after the first committed a record of its own epoch.
    pub failover_commits: AtomicU64,
    /// Schedules where a restarted replica rejoined the ISR.
    pub rejoined: AtomicU64,
    /// Schedules where the controller role moved while the old controller ran on.
    pub failed_over: AtomicU64,
}

impl Stats {
    pub const fn new() -> Stats {
        Stats {
            schedules: AtomicU64::new(0),
            steps: AtomicU64::new(0),
            committed: AtomicU64::new(0),
            failover_commits: AtomicU64::new(0),
            rejoined: AtomicU64::new(0),
            failed_over: AtomicU64::new(0),
        }
    }

    /// Counts a schedule of `steps` steps that ended in `end` (`None` when it failed).
    pub fn count(&self, steps: usize, end: Option<&Cluster>) {
        self.schedules.fetch_add(1, Ordering::Relaxed);
        self.steps.fetch_add(steps as u64, Ordering::Relaxed);
        let Some(c) = end else { return };
        let committed: Vec<_> = c.history.iter().flat_map(|h| &h.committed).collect();
        let flags = [
            (!committed.is_empty(), &self.committed),
            (
                committed.iter().any(|(_, e)| e.epoch.0 >= 2),
                &self.failover_commits,
            ),
            (c.rejoined, &self.rejoined),
            (c.controller_failovers > 0, &self.failed_over),
        ];
        for (flag, counter) in flags {
            if flag {
                counter.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Asserts that the run reached the states the reference's reachability checks name: a
    /// commit, a commit after a failover, a restarted replica back in the ISR.
    pub fn assert_not_vacuous(&self, name: &str) {
        for (what, counter) in [
            ("committed a record", &self.committed),
            ("committed after a failover", &self.failover_commits),
            ("saw a restarted replica rejoin the ISR", &self.rejoined),
            ("saw the controller role move", &self.failed_over),
        ] {
            assert!(
                counter.load(Ordering::Relaxed) > 0,
                "{name}: no schedule {what}: the run was vacuous"
            );
        }
    }

    /// Prints `name: N schedules, S steps, T s (...)` to stderr and returns N. Written to the
    /// stderr handle rather than with `eprintln!`, which the test harness captures for passing
    /// tests: the numbers must show in every CI log.
    pub fn report(&self, name: &str, started: Instant) -> u64 {
        let n = self.schedules.load(Ordering::Relaxed);
        let _ = writeln!(
            std::io::stderr().lock(),
            "{name}: {n} schedules, {} steps, {:.2} s ({} committed a record, {} after a \
             failover, {} saw a rejoin, {} saw a controller failover)",
            self.steps.load(Ordering::Relaxed),
            started.elapsed().as_secs_f64(),
            self.committed.load(Ordering::Relaxed),
            self.failover_commits.load(Ordering::Relaxed),
            self.rejoined.load(Ordering::Relaxed),
            self.failed_over.load(Ordering::Relaxed),
        );
        n
    }
}

/// Runs a schedule and counts it; the error is the readable failure report.
pub fn run_counted(
    stats: &Stats,
    protocol: Protocol,
    knobs: &Knobs,
    choices: &[u16],
) -> Result<(), String> {
    run_scenario_counted(stats, &Scenario::new(protocol, knobs), choices)
}

/// Runs a schedule of `scenario` and counts it; the error is the readable failure report.
pub fn run_scenario_counted(
    stats: &Stats,
    scenario: &Scenario,
    choices: &[u16],
) -> Result<(), String> {
    match run(scenario, choices) {
        Ok((steps, cluster)) => {
            stats.count(steps, Some(&cluster));
            Ok(())
        }
        Err(failure) => {
            stats.count(failure.trace.len(), None);
            Err(failure.to_string())
        }
    }
}

/// The seed of the random schedules: `ISR_TEST_SEED` if it names a number, fresh randomness if it
/// says `random`, else a fixed default. CI runs the default, so a submission that passed once
/// passes again; `ISR_TEST_SEED=random cargo test --release` explores new schedules, and a
/// failure's printed seed reproduces it.
pub fn seed() -> Option<u64> {
    const DEFAULT: u64 = 20_261_129;
    match std::env::var("ISR_TEST_SEED") {
        Ok(v) if v == "random" => None,
        Ok(v) => Some(v.parse().unwrap_or(DEFAULT)),
        Err(_) => Some(DEFAULT),
    }
}
