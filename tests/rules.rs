//! One test per rule of the safe protocol (reference, section 2), named after it.
//!
//! Each test drives the simulated cluster through a short scripted schedule. Under
//! `Rules::default()` every property (and every replica's local consistency) holds after every
//! step; with the one switch the rule names turned back to its historical value, the same
//! script breaks a property — so each test fails if its rule stops being enforced. Rules 1 and
//! 2 have no switch: their tests check what the rule promises, and say so.
//!
//! Scripts name messages by route and kind, not by content, so one script runs under both
//! rule sets even where the two protocols send different things. Every action a script takes
//! must be enabled in the cluster at that moment: a script cannot do what the model could not.

mod common;

use common::{check_state, summary};
use isr::sim::{Action, Bounds, Cluster, Record, ReplicaId, PARTITION};
use isr::{
    Acks, BrokerId, Config, Effect, Envelope, FetchRequest, FlushPolicy, LeaderEpoch, Log, Message,
    Node, Offset, Property, ReplicaInput, Rules, Tick, TruncationRule, Violation, WriteError,
};
use std::collections::BTreeSet;

/// One step of a script.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// The producer writes the next record to broker n, which must believe it leads; under
    /// `flush=always` its log is then flushed (the broker asks for it at once).
    Write(u32),
    /// Follower n has a request to its leader in flight: it sent one after its last answer
    /// (or its order), or its request timer fires now.
    Fetch(u32),
    /// Delivers the first message in flight from → to of this kind (`Message::kind`).
    Deliver(Node, Node, &'static str),
    /// One round trip of follower n with its leader: send, deliver, deliver the answer.
    Round(u32),
    /// Rounds of follower n until a round changes nothing (at most ten).
    CatchUp(u32),
    /// Leader l proposes to drop follower f from the ISR.
    Shrink(u32, u32),
    /// The controller notices broker n is down.
    Fence(u32),
    /// The controller elects its preferred candidate (the first in assignment order), if it
    /// has one.
    TryElect,
    CleanShutdown(u32),
    UncleanCrash(u32),
    /// Broker n restarts; if its registration elects a leader, the preferred candidate.
    Restart(u32),
    /// Delivers control-plane messages (LeaderAndIsr, AlterPartition and its answer) until
    /// none is left, except those to or from the brokers listed.
    SettleExcept(&'static [u32]),
    /// The controller role moves; the old controller runs on as a zombie.
    Failover,
    /// The zombie controller fences broker n.
    ZombieFence(u32),
    /// The zombie controller elects its preferred candidate.
    ZombieElect,
    /// Delivers to broker n the zombie controller's newest LeaderAndIsr.
    ZombieOrder(u32),
    /// The idempotent producer sends record r again to broker n, which must believe it leads;
    /// flushed as a write is.
    Retry(u32, Record),
}
use Step::*;

/// Delivers every control-plane message.
const SETTLE: Step = SettleExcept(&[]);

fn b(n: u32) -> Node {
    Node::Broker(BrokerId(n))
}

/// A protocol variant for a script: rules, `min.insync.replicas` and the producer's acks.
#[derive(Clone, Copy, Debug)]
struct Variant {
    rules: Rules,
    min_isr: usize,
    acks: Acks,
    /// Whether the producer is idempotent (and may retry).
    idempotent: bool,
}

impl Variant {
    fn config(&self) -> Config {
        Config {
            rules: self.rules,
            min_insync_replicas: self.min_isr,
            ..Config::default()
        }
    }

    /// The same, with an idempotent producer that may retry.
    fn idempotent(self) -> Variant {
        Variant {
            idempotent: true,
            ..self
        }
    }
}

/// A cluster being driven by a script, with what it did so far.
struct Run {
    cfg: Config,
    bounds: Bounds,
    cluster: Cluster,
    trace: Vec<Action>,
    properties: Vec<Property>,
}

impl Run {
    fn new(replicas: u32, v: Variant, properties: &[Property]) -> Run {
        let cfg = v.config();
        let bounds = Bounds {
            replicas,
            partitions: 1,
            records: 10,
            max_leader_epoch: 10,
            controller_failovers: 1,
            disk_failures: 0,
            deletes: 0,
            compactions: 0,
            clean_crashes: 5,
            unclean_crashes: 5,
            drops: 5,
            duplicates: 0,
            session_expiries: 0,
            acks: v.acks,
            consumer: true,
            background_flush: false,
            idempotent: v.idempotent,
            producer_retries: if v.idempotent { 5 } else { 0 },
            consumers: 0,
            commits: 0,
            consumer_failures: 0,
            max_generation: 3,
            keep_dead: false,
            // Every discard of the reduction checked against the core as the scripts run.
            audit_dead: true,
            clock: 0,
            atomic: false,
        };
        let cluster = Cluster::new(&cfg, &bounds);
        Run {
            cfg,
            bounds,
            cluster,
            trace: Vec::new(),
            properties: properties.to_vec(),
        }
    }

    fn report(&self) -> String {
        let switches = self.cfg.rules.unsafe_switches();
        let mut out = format!(
            "\nrules: {}; min.insync.replicas={}; acks={}\nschedule ({} steps):\n",
            if switches.is_empty() {
                "safe".to_string()
            } else {
                switches.join(" ")
            },
            self.cfg.min_insync_replicas,
            self.bounds.acks,
            self.trace.len()
        );
        for (i, a) in self.trace.iter().enumerate() {
            out += &format!("  {:>3}. {a}\n", i + 1);
        }
        out + &summary(&self.cluster)
    }

    /// Takes one action, which must be enabled, and checks the properties.
    fn act(&mut self, action: Action) -> Result<(), Violation> {
        let enabled = self.cluster.actions(&self.cfg, &self.bounds);
        assert!(
            enabled.contains(&action),
            "script error: {action} is not enabled{}",
            self.report()
        );
        self.cluster.apply(&self.cfg, &self.bounds, &action);
        self.trace.push(action);
        check_state(&self.cluster, &self.properties)
    }

    /// The first enabled action of a kind: for elections, the preferred candidate, since the
    /// sim lists candidates in assignment order.
    fn first_enabled(&self, kind: impl Fn(&Action) -> bool) -> Option<Action> {
        self.cluster
            .actions(&self.cfg, &self.bounds)
            .into_iter()
            .find(kind)
    }

    fn find(&self, from: Node, to: Node, kinds: &[&str]) -> Option<Envelope<Record>> {
        self.cluster
            .network
            .iter()
            .find(|e| e.from == from && e.to == to && kinds.contains(&e.message.kind()))
            .cloned()
    }

    fn deliver(&mut self, from: Node, to: Node, kinds: &[&str]) -> Result<(), Violation> {
        let Some(e) = self.find(from, to, kinds) else {
            panic!(
                "script error: no {kinds:?} in flight from {from} to {to}{}",
                self.report()
            );
        };
        self.act(Action::Deliver(e))
    }

    /// What a round of follower n can change: its log, HW and role, and the leader's.
    fn progress_key(&self, n: u32) -> String {
        let r = &self.cluster.replicas[n as usize];
        let leader = r.leader().map(|l| &self.cluster.replicas[l.0 as usize]);
        format!(
            "{:?} {:?} {:?} {:?} {:?}",
            r.log(),
            r.high_watermark(),
            r.role(),
            leader.map(|l| l.high_watermark()),
            leader.map(|l| l.role()),
        )
    }

    /// Makes sure follower n has sent a request: the one it sent on its own (once its log is
    /// durable under `flush=always`: it flushes first), or a new one when its request timer
    /// fires (enabled only when none is in flight). A request its leader refuses forever is
    /// discarded at once.
    fn ask(&mut self, n: u32) -> Result<(), Violation> {
        let fetch = Action::FollowerFetch(BrokerId(n).into());
        if self.first_enabled(|a| *a == fetch).is_some() {
            return self.act(fetch);
        }
        if !self.cluster.replicas[n as usize].held().is_empty() {
            self.act(Action::Flush(BrokerId(n).into()))?;
        }
        let requests = ["Fetch", "OffsetForLeaderEpoch"];
        let leader = self.cluster.replicas[n as usize].leader();
        let in_flight = leader.and_then(|l| self.find(b(n), Node::Broker(l), &requests));
        // Discarded at once, the request leaves the request timer free to fire again.
        if in_flight.is_none() && self.first_enabled(|a| *a == fetch).is_none() {
            panic!(
                "script error: b{n} has no request in flight{}",
                self.report()
            );
        }
        Ok(())
    }

    fn round(&mut self, n: u32) -> Result<(), Violation> {
        let Some(leader) = self.cluster.replicas[n as usize].leader() else {
            panic!("script error: b{n} follows nobody{}", self.report());
        };
        let leader = leader.0;
        self.ask(n)?;
        let requests = ["Fetch", "OffsetForLeaderEpoch"];
        if self.find(b(n), b(leader), &requests).is_none() {
            // The sim discards a request its receiver refuses forever (one of an older epoch,
            // see `Replica::ignores_forever`): the round is a delivery that changes nothing.
            return Ok(());
        }
        self.deliver(b(n), b(leader), &requests)?;
        let answers = ["FetchResponse", "OffsetForLeaderEpochResponse"];
        if self.find(b(leader), b(n), &answers).is_none()
            && self.cluster.replicas[n as usize].is_online()
        {
            // The sim discards an answer its receiver ignores forever (an epoch error, see
            // `Replica::ignores_forever`): that is a delivery that changes nothing.
            return Ok(());
        }
        self.deliver(b(leader), b(n), &answers)
    }

    fn step(&mut self, step: Step) -> Result<(), Violation> {
        let id = BrokerId;
        match step {
            Write(n) | Retry(n, _) => {
                self.act(match step {
                    Retry(_, record) => Action::ProducerRetry {
                        leader: id(n).into(),
                        record,
                    },
                    _ => Action::LeaderWrite(id(n).into()),
                })?;
                let flush = Action::Flush(id(n).into());
                match self.first_enabled(|a| *a == flush) {
                    Some(flush) if self.cfg.rules.flush == FlushPolicy::Always => self.act(flush),
                    _ => Ok(()),
                }
            }
            Fetch(n) => self.ask(n),
            Deliver(from, to, kind) => self.deliver(from, to, &[kind]),
            Round(n) => self.round(n),
            CatchUp(n) => {
                for _ in 0..10 {
                    let before = self.progress_key(n);
                    self.round(n)?;
                    if self.progress_key(n) == before {
                        break;
                    }
                }
                Ok(())
            }
            Shrink(l, f) => self.act(Action::LeaderShrinkIsr {
                leader: id(l).into(),
                follower: id(f),
            }),
            Fence(n) => self.act(Action::ControllerShrinkIsr(id(n))),
            TryElect => match self.first_enabled(|a| matches!(a, Action::ControllerElectLeader(_)))
            {
                Some(elect) => self.act(elect),
                None => Ok(()),
            },
            CleanShutdown(n) => self.act(Action::CleanShutdown(id(n))),
            UncleanCrash(n) => self.act(Action::UncleanCrash(id(n))),
            Restart(n) => {
                let restart = self
                    .first_enabled(
                        |a| matches!(a, Action::Restart { broker, .. } if *broker == id(n)),
                    )
                    .unwrap_or_else(|| {
                        panic!("script error: b{n} cannot restart{}", self.report())
                    });
                self.act(restart)
            }
            Failover => self.act(Action::ControllerFailover),
            ZombieFence(n) => self.act(Action::ZombieShrinkIsr(id(n))),
            ZombieElect => {
                let elect = self
                    .first_enabled(|a| matches!(a, Action::ZombieElectLeader(_)))
                    .unwrap_or_else(|| {
                        panic!("script error: the zombie cannot elect{}", self.report())
                    });
                self.act(elect)
            }
            ZombieOrder(n) => {
                let zombie = self.cluster.zombie.as_ref().map(|z| z.epoch());
                let order = self
                    .cluster
                    .network
                    .iter()
                    .filter_map(|e| match &e.message {
                        Message::LeaderAndIsr(l)
                            if e.to == b(n) && Some(l.controller_epoch) == zombie =>
                        {
                            Some((l.state.partition_epoch, e))
                        }
                        _ => None,
                    })
                    .max_by_key(|&(version, _)| version)
                    .map(|(_, e)| e);
                let order = order.cloned().unwrap_or_else(|| {
                    panic!("script error: no zombie order to b{n}{}", self.report())
                });
                self.act(Action::Deliver(order))
            }
            SettleExcept(skip) => {
                let control = ["LeaderAndIsr", "AlterPartition", "AlterPartitionResponse"];
                let skipped = |node: Node| skip.iter().any(|&s| node == b(s));
                for _ in 0..50 {
                    let next = self.cluster.network.iter().find(|e| {
                        control.contains(&e.message.kind()) && !skipped(e.from) && !skipped(e.to)
                    });
                    match next.cloned() {
                        Some(e) => self.act(Action::Deliver(e))?,
                        None => return Ok(()),
                    }
                }
                panic!(
                    "script error: the control plane did not settle{}",
                    self.report()
                );
            }
        }
    }

    /// Runs the script, stopping at the first violation.
    fn script(&mut self, steps: &[Step]) -> Result<(), Violation> {
        check_state(&self.cluster, &self.properties)?;
        steps.iter().try_for_each(|&s| self.step(s))
    }
}

/// Every property.
const ALL: &[Property] = &Property::ALL;

/// Runs `steps` under `v` and asserts every property holds after every step. Returns the run.
fn holds(replicas: u32, v: Variant, steps: &[Step]) -> Run {
    holds_for(replicas, v, ALL, steps)
}

fn holds_for(replicas: u32, v: Variant, properties: &[Property], steps: &[Step]) -> Run {
    let mut run = Run::new(replicas, v, properties);
    if let Err(violation) = run.script(steps) {
        panic!(
            "under {:?} a property broke: {violation}{}",
            v.rules.unsafe_switches(),
            run.report()
        );
    }
    run
}

/// Runs `steps` under `v` and asserts that `expected` breaks; returns the violation.
fn breaks(replicas: u32, v: Variant, steps: &[Step], expected: Property) -> Violation {
    let mut run = Run::new(replicas, v, ALL);
    match run.script(steps) {
        Ok(()) => panic!(
            "under {:?} every property held: the rule's test has no teeth{}",
            v.rules.unsafe_switches(),
            run.report()
        ),
        Err(violation) => {
            assert_eq!(
                property_of(&violation),
                Some(expected),
                "expected {expected} to break, got: {violation}{}",
                run.report()
            );
            eprintln!(
                "{:?} breaks {expected} as expected: {violation}{}",
                v.rules.unsafe_switches(),
                run.report()
            );
            violation
        }
    }
}

fn property_of(v: &Violation) -> Option<Property> {
    Some(match v {
        Violation::StrongIsr { .. } => Property::StrongIsr,
        Violation::WeakIsr { .. } => Property::WeakIsr,
        Violation::LeaderInIsr { .. } => Property::LeaderInIsr,
        Violation::ValidHighWatermark { .. } => Property::ValidHighWatermark,
        Violation::LogMatching { .. } => Property::LogMatching,
        Violation::CommittedRecordLost { .. } => Property::CommittedRecordsSurviveLeaderFailure,
        Violation::ConsumedRecordRevoked { .. } => Property::ConsumerReadsAreNeverRevoked,
        Violation::StoredTwice { .. } => Property::IdempotentWritesStoredOnce,
        _ => return None,
    })
}

fn safe(min_isr: usize, acks: Acks) -> Variant {
    Variant {
        rules: Rules::default(),
        min_isr,
        acks,
        idempotent: false,
    }
}

fn with(rules: Rules, min_isr: usize, acks: Acks) -> Variant {
    Variant {
        rules,
        min_isr,
        acks,
        idempotent: false,
    }
}

/// The entries of broker n's log as (record, epoch).
fn log_of(run: &Run, n: u32) -> Vec<(Record, u32)> {
    run.cluster.replicas[n as usize]
        .log()
        .entries()
        .map(|e| (e.record, e.epoch.0))
        .collect()
}

fn controller_isr(run: &Run) -> BTreeSet<BrokerId> {
    run.cluster
        .controller
        .partition(PARTITION)
        .map(|s| s.isr.clone())
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// Rule 1: records carry the leader epoch; the epoch cache is derivable from the log.

/// Rule 1 has no switch. Every record carries the epoch of the leader that appended it, on every
/// replica that copied it, and every replica's epoch cache is the one derived from its log
/// (`check_local`, after every step) across two failovers.
#[test]
fn rule_1_records_carry_their_leader_epoch() {
    let run = holds(
        3,
        safe(1, Acks::All),
        &[
            Write(0),
            CatchUp(1),
            CatchUp(2),
            CleanShutdown(0),
            Fence(0),
            TryElect,
            SETTLE,
            Write(1),
            CatchUp(2),
            Restart(0),
            SETTLE,
            CatchUp(0),
            CatchUp(2),
        ],
    );
    // Record 1 was written by b0 in epoch 1, record 2 by b1 in epoch 2.
    let expected = vec![(1, 1), (2, 2)];
    for n in 0..3 {
        assert_eq!(log_of(&run, n), expected, "b{n}{}", run.report());
    }
}

// ---------------------------------------------------------------------------------------------
// Rule 2: a new leader appends under a new epoch, starting at its LEO.

/// Rule 2 has no switch. Each election bumps the epoch, the new leader records where its epoch
/// starts (its LEO when elected) and stamps its writes with the new epoch, so its epoch cache
/// gains an entry exactly there.
#[test]
fn rule_2_new_leader_appends_under_a_new_epoch() {
    let mut run = holds(
        2,
        safe(1, Acks::Leader),
        &[
            Write(0),
            CatchUp(1),
            Write(0),
            CatchUp(1),
            CleanShutdown(0),
            Fence(0),
            TryElect,
            SETTLE,
        ],
    );
    let leader = &run.cluster.replicas[1];
    let state = leader.leader_state().expect("b1 leads");
    assert_eq!(leader.leader_epoch(), LeaderEpoch(2));
    assert_eq!(state.epoch_start_offset(), Offset(2));
    assert_eq!(leader.epoch_cache().start_of(LeaderEpoch(2)), None);
    run.script(&[Write(1)])
        .expect("a write keeps the properties");
    let leader = &run.cluster.replicas[1];
    assert_eq!(
        leader.epoch_cache().start_of(LeaderEpoch(2)),
        Some(Offset(2))
    );
    assert_eq!(leader.epoch_cache().latest_epoch(), Some(LeaderEpoch(2)));
    assert_eq!(log_of(&run, 1), vec![(1, 1), (2, 1), (3, 2)]);
}

// ---------------------------------------------------------------------------------------------
// Rule 3: reconcile by OffsetForLeaderEpoch (KIP-279), never truncate to the HW.

/// KIP-101's first scenario. b1 fetched record 1, and its next fetch raised b0's HW, but the
/// answer carrying the new HW never reached b1 (it shut down). After its restart b1 follows b0
/// again; truncating to its own stale HW drops the committed record. b0 then stops, and b1, in
/// the ELR, is elected: the committed record is gone. KIP-279 reconciliation keeps it.
#[test]
fn rule_3_truncation_kip279_not_high_watermark() {
    let steps = [
        Write(0),
        Round(1),
        Fetch(1),
        Deliver(b(1), b(0), "Fetch"),
        CleanShutdown(1),
        Restart(1),
        SETTLE,
        CleanShutdown(0),
        Fence(0),
        TryElect,
        SETTLE,
    ];
    let run = holds(2, safe(2, Acks::Leader), &steps);
    assert_eq!(log_of(&run, 1), vec![(1, 1)], "{}", run.report());
    let old = Rules {
        truncation: TruncationRule::HighWatermark,
        ..Rules::default()
    };
    breaks(
        2,
        with(old, 2, Acks::Leader),
        &steps,
        Property::CommittedRecordsSurviveLeaderFailure,
    );
}

/// KAFKA-6361, fixed by KIP-279: 2 replicas, 3 epochs. b0 writes record 1 in epoch 1 and
/// stops; b1 leads epoch 2 and writes record 2 at the same offset; b1 crashes and b0, from the
/// ELR, leads epoch 3. b1 asks where its epoch 2 ends; b0 knows only epoch 1, ending at 1.
/// KIP-101 trusts that end and keeps b1's record 2 at offset 0: b1 rejoins the ISR with a log
/// that differs below the HW. KIP-279 asks again for epoch 1, which b1 never had, and truncates.
#[test]
fn rule_3_truncation_kip279_not_kip101() {
    let steps = [
        Write(0),
        CleanShutdown(0),
        Fence(0),
        SETTLE,
        Restart(0),
        SETTLE,
        Write(1),
        UncleanCrash(1),
        Restart(1),
        SETTLE,
        CatchUp(1),
        SETTLE,
        CatchUp(1),
    ];
    let run = holds(2, safe(2, Acks::Leader), &steps);
    assert_eq!(log_of(&run, 1), vec![(1, 1)], "{}", run.report());
    let old = Rules {
        truncation: TruncationRule::Kip101,
        ..Rules::default()
    };
    breaks(2, with(old, 2, Acks::Leader), &steps, Property::StrongIsr);
}

// ---------------------------------------------------------------------------------------------
// Rule 4: Fetch and truncation are fenced by epoch (KIP-320).

/// b2 never hears of epochs 2 and 3: it still follows b0 in epoch 1, with b0's old record 2 at
/// offset 1. Meanwhile b0 lost leadership, truncated that record while following b1 in epoch 2,
/// and leads again in epoch 3 with b1's record 3 there. b2's stale Fetch (epoch 1) reaches b0:
/// without fencing b0 serves it, counts b2's LEO and raises its HW over a log that differs at
/// offset 1. With fencing b0 answers FENCED_LEADER_EPOCH and nothing moves.
#[test]
fn rule_4_epoch_fencing() {
    let steps = [
        Write(0),
        CatchUp(1),
        CatchUp(2),
        CatchUp(1),
        Write(0),
        Round(2),
        CleanShutdown(0),
        Fence(0),
        TryElect,
        SettleExcept(&[2]),
        Write(1),
        Restart(0),
        SettleExcept(&[2]),
        CatchUp(0),
        SettleExcept(&[2]),
        CatchUp(0),
        CleanShutdown(1),
        Fence(1),
        TryElect,
        SettleExcept(&[2]),
        Round(2),
    ];
    holds(3, safe(1, Acks::Leader), &steps);
    let old = Rules {
        epoch_fencing: false,
        ..Rules::default()
    };
    breaks(3, with(old, 1, Acks::Leader), &steps, Property::StrongIsr);
}

// ---------------------------------------------------------------------------------------------
// Rule 5: HW rises only on proof, and only with min.insync.replicas in the ISR (KIP-966).

/// The ISR shrinks to the leader alone (b1 moves to the ELR: it holds everything committed so
/// far). Without strict min ISR the leader commits record 1 by itself; it stops, b1 is elected
/// from the ELR and lacks it. Strict min ISR freezes the HW instead, which is what makes the ELR
/// promise true.
#[test]
fn rule_5_strict_min_isr() {
    let steps = [
        Write(0),
        Shrink(0, 1),
        SETTLE,
        CleanShutdown(0),
        Fence(0),
        TryElect,
        SETTLE,
    ];
    let run = holds(2, safe(2, Acks::Leader), &steps);
    assert_eq!(run.cluster.replicas[0].high_watermark(), Offset(0));
    let old = Rules {
        strict_min_isr: false,
        ..Rules::default()
    };
    breaks(
        2,
        with(old, 2, Acks::Leader),
        &steps,
        Property::CommittedRecordsSurviveLeaderFailure,
    );
}

// ---------------------------------------------------------------------------------------------
// Rule 6: ISR expansion requires catching up to the current epoch (KAFKA-7128).

/// KAFKA-7128: b1 is elected in epoch 2 with record 1 committed but its HW still 0 (the answer
/// carrying HW 1 never arrived). Empty b2 fetches offset 0 ≥ HW 0: without the epoch check b1
/// admits it to the ISR, then stops, and b2 is elected without the committed record. With the
/// check b2 must first reach b1's epoch start (offset 1).
#[test]
fn rule_6_expansion_epoch_check() {
    let steps = [
        Write(0),
        Shrink(0, 2),
        SETTLE,
        Round(1),
        Fetch(1),
        Deliver(b(1), b(0), "Fetch"),
        CleanShutdown(0),
        Fence(0),
        TryElect,
        SETTLE,
        Fetch(2),
        Deliver(b(2), b(1), "Fetch"),
        SETTLE,
        CleanShutdown(1),
        Fence(1),
        TryElect,
        SETTLE,
    ];
    holds(3, safe(1, Acks::Leader), &steps);
    let old = Rules {
        expansion_epoch_check: false,
        ..Rules::default()
    };
    breaks(
        3,
        with(old, 1, Acks::Leader),
        &steps,
        Property::CommittedRecordsSurviveLeaderFailure,
    );
}

// ---------------------------------------------------------------------------------------------
// Rule 7: ISR changes go through the controller; HW over the maximal ISR meanwhile (AsyncIsr).

/// b0 proposes to drop b1 and, before the controller confirms, computes its HW over the
/// minimal ISR {b0}: record 1 is "committed" although the controller's ISR still holds b1,
/// which lacks it. Over the maximal ISR {b0, b1} the HW waits for b1.
#[test]
fn rule_7_maximal_isr_hw() {
    let steps = [
        Write(0),
        Shrink(0, 1),
        CleanShutdown(0),
        Fence(0),
        TryElect,
        SETTLE,
    ];
    holds(2, safe(2, Acks::Leader), &steps);
    let old = Rules {
        maximal_isr_hw: false,
        ..Rules::default()
    };
    breaks(2, with(old, 2, Acks::Leader), &steps, Property::StrongIsr);
}

// ---------------------------------------------------------------------------------------------
// Rule 8: clean election only.

/// The ISR shrinks to b0, which commits record 1 alone (min ISR 1) and stops. Only b1 is
/// alive and it is in neither the ISR nor the ELR: unclean election makes it leader without
/// record 1. The safe controller waits for b0, which is re-elected with it.
#[test]
fn rule_8_unclean_leader_election() {
    let steps = [
        Write(0),
        Shrink(0, 1),
        SETTLE,
        CleanShutdown(0),
        Fence(0),
        TryElect,
        SETTLE,
        Restart(0),
        SETTLE,
    ];
    let run = holds(2, safe(1, Acks::Leader), &steps);
    assert_eq!(
        run.cluster
            .controller
            .partition(PARTITION)
            .and_then(|s| s.leader),
        Some(BrokerId(0))
    );
    let old = Rules {
        unclean_leader_election: true,
        ..Rules::default()
    };
    breaks(
        2,
        with(old, 1, Acks::Leader),
        &steps,
        Property::CommittedRecordsSurviveLeaderFailure,
    );
}

// ---------------------------------------------------------------------------------------------
// Rule 9: acks=all is acknowledged at the HW, refused below min.insync.replicas.

/// With the ISR shrunk to the leader, an acks=all write is refused with NotEnoughReplicas under
/// `min.insync.replicas = 2`; under 1 it is accepted and acknowledged by the leader alone.
#[test]
fn rule_9_acks_all_refused_below_min_insync_replicas() {
    let steps = [Shrink(0, 1), SETTLE];
    let write = |id, acks| ReplicaInput::Write {
        id,
        records: vec![1],
        acks,
        producer: None,
    };
    let refusing = holds(2, safe(2, Acks::All), &steps);
    let mut leader = isr::Replica::clone(&refusing.cluster.replicas[0]);
    assert_eq!(
        leader.step(&refusing.cfg, Tick(0), write(1, Acks::All)),
        vec![Effect::FailWrite {
            partition: PARTITION,
            id: 1,
            error: WriteError::NotEnoughReplicas { isr: 1, min: 2 },
        }]
    );
    assert_eq!(
        leader.log_end_offset(),
        Offset(0),
        "a refused write appends nothing"
    );
    // acks=1 is not subject to the floor.
    leader.step(&refusing.cfg, Tick(0), write(2, Acks::Leader));
    assert_eq!(leader.log_end_offset(), Offset(1));

    let accepting = holds(2, safe(1, Acks::All), &steps);
    let mut leader = isr::Replica::clone(&accepting.cluster.replicas[0]);
    leader.step(&accepting.cfg, Tick(0), write(7, Acks::All));
    assert_eq!(leader.log_end_offset(), Offset(1));
    // min.insync.replicas=1: the lone leader acknowledges it once its log is durable.
    leader.log_mut().flush();
    let effects = leader.step(&accepting.cfg, Tick(0), ReplicaInput::Flushed(Offset(1)));
    assert!(effects.contains(&Effect::Acknowledge {
        partition: PARTITION,
        id: 7,
        base_offset: Offset(0),
    }));
}

/// jepsen-2013: the same schedule with unclean election on (Kafka's default then). Under
/// `min.insync.replicas = 1` the lone leader acknowledges an acks=all write, stops, and the
/// uncleanly elected b1 lacks it; under 2 the write is refused and nothing acknowledged is lost.
#[test]
fn rule_9_acks_all_jepsen_2013() {
    let unclean = Rules {
        unclean_leader_election: true,
        ..Rules::default()
    };
    let steps = [
        Shrink(0, 1),
        SETTLE,
        Write(0),
        CleanShutdown(0),
        Fence(0),
        TryElect,
        SETTLE,
    ];
    let run = holds(2, with(unclean, 2, Acks::All), &steps);
    assert!(run.cluster.history[0].acknowledged.is_empty());
    breaks(
        2,
        with(unclean, 1, Acks::All),
        &steps,
        Property::CommittedRecordsSurviveLeaderFailure,
    );
}

// ---------------------------------------------------------------------------------------------
// Rule 10: followers acknowledge what they can keep.

/// b1 fetches records 1 and 2 and its next Fetch proves them to b0, whose HW rises to 2. b1
/// crashes uncleanly and restarts. Flushing on append, b1 still holds them; with page-cache
/// acknowledgement it restarts empty while b0 still counts it in its ISR (until the
/// controller's LeaderAndIsr arrives), so b0's committed prefix is not on its ISR (WeakIsr).
#[test]
fn rule_10_flush_always() {
    let steps = [
        Write(0),
        Write(0),
        Round(1),
        Fetch(1),
        Deliver(b(1), b(0), "Fetch"),
        UncleanCrash(1),
        Restart(1),
    ];
    let run = holds(2, safe(1, Acks::Leader), &steps);
    assert_eq!(log_of(&run, 1), vec![(1, 1), (2, 1)]);
    let old = Rules {
        flush: FlushPolicy::PageCache,
        ..Rules::default()
    };
    breaks(2, with(old, 1, Acks::Leader), &steps, Property::WeakIsr);
}

/// last-replica-standing (KIP-966), at the reference's bounds: 3 replicas, min ISR 2,
/// page-cache acknowledgement, one unclean crash. Record 1 is committed on all three, the ISR
/// shrinks to b0, and b0 crashes uncleanly, losing it. With ELR, b2 (removed while the ISR was
/// below the floor) is eligible and b0, restarted uncleanly, is not: b2 leads with record 1.
/// Without ELR b0 stays the last ISR member, is re-elected empty, and record 1 is gone.
#[test]
fn rule_10_eligible_leader_replicas() {
    let kip966 = Rules {
        flush: FlushPolicy::PageCache,
        ..Rules::default()
    };
    let steps = [
        Write(0),
        CatchUp(1),
        CatchUp(2),
        CatchUp(1),
        Shrink(0, 1),
        SETTLE,
        Shrink(0, 2),
        SETTLE,
        UncleanCrash(0),
        Restart(0),
        SETTLE,
    ];
    let run = holds(3, with(kip966, 2, Acks::Leader), &steps);
    assert_eq!(
        run.cluster
            .controller
            .partition(PARTITION)
            .and_then(|s| s.leader),
        Some(BrokerId(2))
    );
    let old = Rules {
        eligible_leader_replicas: false,
        ..kip966
    };
    breaks(
        3,
        with(old, 2, Acks::Leader),
        &steps,
        Property::CommittedRecordsSurviveLeaderFailure,
    );
}

// ---------------------------------------------------------------------------------------------
// Rule 11: the controller epoch fences a deposed controller (KAFKA-6082).

/// The controller role moves; the old controller, unaware, fences the leader b0 and elects b1
/// in epoch 2 on its stale view. Without fencing the store takes those writes and b1 and b2
/// act on the zombie's orders: b1 leads epoch 2 and commits record 1 with b2, while the real
/// controller still has b0 leading epoch 1 without it: b1's committed prefix differs from that
/// of b0, a member of the controller's ISR (StrongIsr), and the controller's leader lacks a
/// committed record (CommittedRecordsSurviveLeaderFailure, checked after StrongIsr).
/// With fencing the store refuses the zombie's first step: it stops, nothing it decided leaves
/// it, and the new controller's leader b0 commits as usual.
/// Rule 14: every replica keeps the idempotent producer state of its own log. b0 appends the
/// producer's record and b1 replicates it; b0 stops before anyone answers the producer, the
/// controller fences it and elects b1, and the producer retries the record there. b1 knows the batch from its log and
/// answers the retry with its first offset. A replica that knew only the batches it took as
/// leader appends it a second time, and commits the duplicate.
#[test]
fn rule_14_producer_state_on_every_replica() {
    let script = [
        Write(0),
        Round(1),
        CleanShutdown(0),
        Fence(0),
        TryElect,
        SETTLE,
        Retry(1, 1),
    ];
    let run = holds(2, safe(1, Acks::All).idempotent(), &script);
    assert_eq!(log_of(&run, 1), [(1, 1)], "stored once");
    let leader_only = Rules {
        producer_state: false,
        ..Rules::default()
    };
    breaks(
        2,
        with(leader_only, 1, Acks::All).idempotent(),
        &script,
        Property::IdempotentWritesStoredOnce,
    );
}

#[test]
fn rule_11_controller_fencing() {
    let run = holds(
        3,
        safe(2, Acks::All),
        &[
            Failover,
            ZombieFence(0),
            SETTLE,
            Write(0),
            CatchUp(1),
            CatchUp(2),
        ],
    );
    assert!(run.cluster.zombie.is_none(), "refused, the zombie stops");
    let state = run
        .cluster
        .controller
        .partition(PARTITION)
        .expect("partition");
    assert_eq!(state.leader, Some(BrokerId(0)));
    assert!(!run.cluster.history[0].committed.is_empty());
    let old = Rules {
        controller_fencing: false,
        ..Rules::default()
    };
    breaks(
        3,
        with(old, 2, Acks::All),
        &[
            Failover,
            ZombieFence(0),
            ZombieElect,
            ZombieOrder(1),
            Write(1),
            ZombieOrder(2),
            CatchUp(2),
        ],
        Property::StrongIsr,
    );
}

// ---------------------------------------------------------------------------------------------
// Regressions found by the random schedules.

/// KIP-903 (found by the kip966 property tests): b1's Fetch at offset 2 is in flight when b1
/// crashes uncleanly and loses both records; after b1 restarts, that stale Fetch reaches b0.
/// It must not readmit b1 to the ISR: the controller knows b1 registered again since.
#[test]
fn kip903_stale_fetch_cannot_readmit_a_restarted_replica() {
    let kip966 = Rules {
        flush: FlushPolicy::PageCache,
        ..Rules::default()
    };
    let strong = &[
        Property::StrongIsr,
        Property::LeaderInIsr,
        Property::ValidHighWatermark,
        Property::LogMatching,
        Property::CommittedRecordsSurviveLeaderFailure,
        Property::ConsumerReadsAreNeverRevoked,
    ];
    let run = holds_for(
        3,
        with(kip966, 2, Acks::Leader),
        strong,
        &[
            Shrink(0, 2),
            SETTLE,
            Write(0),
            Write(0),
            Round(1),
            Fetch(1),
            UncleanCrash(1),
            Restart(1),
            SETTLE,
            Deliver(b(1), b(0), "Fetch"),
            SETTLE,
        ],
    );
    assert!(
        !controller_isr(&run).contains(&BrokerId(1)),
        "{}",
        run.report()
    );
    assert_eq!(run.cluster.replicas[0].high_watermark(), Offset(0));
}

/// The reduction's audit (`Bounds::audit_dead`, on in these scripts, the property tests and
/// `isr-check suite`) tells a message that acts from one that is dead by the core's own
/// receipt checks: a follower's Fetch of the current epoch moves the leader's view of it; the
/// same Fetch of an older epoch is refused with an error its sender ignores, and is inert.
#[test]
fn the_reduction_audit_tells_a_live_fetch_from_a_dead_one() {
    let cfg = Config::default();
    let cluster = Cluster::new(&cfg, &Bounds::default());
    let follower = &cluster.replicas[1];
    let fetch = |epoch| Envelope {
        from: Node::Broker(BrokerId(1)),
        to: Node::Broker(BrokerId(0)),
        message: Message::Fetch(FetchRequest {
            partition: PARTITION,
            replica: BrokerId(1),
            broker_epoch: follower.broker_epoch(),
            current_leader_epoch: epoch,
            fetch_offset: Offset(0),
            high_watermark: Offset(0),
            log_start_offset: Offset(0),
        }),
    };
    let current = cluster.replicas[0].leader_epoch();
    let live = isr::sim::dead_message_acts(&cfg, &cluster.replicas, &fetch(current));
    assert!(live.is_some_and(|what| what.contains("acts when delivered")));
    let older = LeaderEpoch(current.0 - 1);
    let stale = fetch(older);
    assert!(cluster.replicas[0].ignores_forever(&cfg, stale.from, &stale.message));
    assert_eq!(
        isr::sim::dead_message_acts(&cfg, &cluster.replicas, &stale),
        None
    );
}

/// A broker-wide step of the controller changes every partition at once: with two
/// partitions, both led by b0, fencing the stopped b0 leaves both leaderless and without b0 in
/// their ISR in one step of the core; b1 is elected in each, its replicas of both lead once the
/// LeaderAndIsr reach them, and b0's registration on restart brings it back into both ISRs.
/// Every property holds at every step.
#[test]
fn fencing_a_broker_moves_every_partition_it_led_in_one_step() {
    let cfg = Config::default();
    let bounds = Bounds {
        replicas: 2,
        partitions: 2,
        ..Bounds::default()
    };
    let (b0, b1) = (BrokerId(0), BrokerId(1));
    let mut c = Cluster::new(&cfg, &bounds);
    let partitions: Vec<_> = c.partitions().collect();
    assert_eq!(partitions.len(), 2);
    let leaders = |c: &Cluster| -> Vec<(Option<BrokerId>, u32)> {
        partitions
            .iter()
            .map(|&p| {
                let s = c.controller.partition(p).expect("created");
                (s.leader, s.leader_epoch.0)
            })
            .collect()
    };
    let holds = |c: &Cluster| {
        for p in Property::ALL {
            assert_eq!(c.check(p), Ok(()), "{}", summary(c));
        }
    };
    assert_eq!(leaders(&c), [(Some(b0), 1), (Some(b0), 1)]);
    c.apply(&cfg, &bounds, &Action::CleanShutdown(b0));
    holds(&c);
    c.apply(&cfg, &bounds, &Action::ControllerShrinkIsr(b0));
    holds(&c);
    assert_eq!(leaders(&c), [(None, 1), (None, 1)]);
    for &p in &partitions {
        let isr = &c.controller.partition(p).expect("created").isr;
        assert_eq!(isr, &BTreeSet::from([b1]));
    }
    // Each leaderless partition offers its candidate: the model elects each on its own (any
    // candidate may win); the runtime's next tick elects the preferred one of every
    // leaderless partition in one step (`Controller::elect_leaders`), a path among these.
    let elections: Vec<Action> = c
        .actions(&cfg, &bounds)
        .into_iter()
        .filter(|a| matches!(a, Action::ControllerElectLeader(_)))
        .collect();
    let expected: Vec<Action> = partitions
        .iter()
        .map(|&p| Action::ControllerElectLeader(ReplicaId::new(b1, p)))
        .collect();
    assert_eq!(elections, expected);
    for election in &elections {
        c.apply(&cfg, &bounds, election);
        holds(&c);
    }
    assert_eq!(leaders(&c), [(Some(b1), 2), (Some(b1), 2)]);
    let deliver_orders = |c: &mut Cluster| {
        while let Some(order) = c.actions(&cfg, &bounds).into_iter().find(
            |a| matches!(a, Action::Deliver(e) if matches!(e.message, Message::LeaderAndIsr(_))),
        ) {
            c.apply(&cfg, &bounds, &order);
            holds(c);
        }
    };
    deliver_orders(&mut c);
    for &p in &partitions {
        let replicas: Vec<_> = c.replicas_of(p).collect();
        assert!(replicas[1].is_leader(), "{}", summary(&c));
        assert!(!replicas[0].is_online());
    }
    // b0 comes back: its registration elects nobody (both partitions are led), and it rejoins
    // each ISR once it has fetched from b1.
    c.apply(
        &cfg,
        &bounds,
        &Action::Restart {
            broker: b0,
            elects: Vec::new(),
        },
    );
    holds(&c);
    for _ in 0..50 {
        if c.rejoined {
            break;
        }
        // Orders and ISR changes first, then fetches: a fetch loop alone never ends.
        let actions = c.actions(&cfg, &bounds);
        let control = actions.iter().find(|a| {
            matches!(a, Action::Deliver(e) if !matches!(
                e.message,
                Message::Fetch(_) | Message::FetchResponse(_)
            ))
        });
        let fetch = actions
            .iter()
            .find(|a| matches!(a, Action::Deliver(_) | Action::FollowerFetch(_)));
        let Some(next) = control.or(fetch).cloned() else {
            break;
        };
        c.apply(&cfg, &bounds, &next);
        holds(&c);
    }
    assert!(c.rejoined, "b0 is not back in both ISRs: {}", summary(&c));
    for &p in &partitions {
        let isr = &c.controller.partition(p).expect("created").isr;
        assert_eq!(isr, &BTreeSet::from([b0, b1]));
    }
}
