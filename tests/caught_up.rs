//! Kafka's caught-up rule, as a property over timed runs: under steady writes, a follower that
//! fetches every round stays in the ISR, whatever the network's delays, as long as a round trip
//! fits in half of `replica_lag_max`.
//!
//! The model checker cannot say this: it fires the lag timer at any moment (time may always have
//! passed), so it checks that shrinking the ISR is safe, not that it is rare. Here time is real
//! in the core's sense: one leader and two followers, the core's [`Replica`]s, exchange their
//! messages through a network that delays each by 1 to `d` ticks (in order on each link, as TCP
//! does), while a producer writes to the leader on every tick and every node is ticked. The
//! leader must never propose a smaller ISR. Why the bound: a fetch that arrives at `a₂` proves
//! its follower caught up as of the previous fetch's arrival `a₁` (it asks from the log end the
//! leader had then), and the next fetch arrives by `a₃ ≤ a₁ + 4d`; so the follower is never
//! more than `4d` behind its last proof. One more round comes first: a follower reconciles with
//! its new leader (OffsetForLeaderEpoch) before its first fetch, so its second fetch, the first
//! that can prove anything, arrives up to `5d` after the leader took office and counted it
//! caught up. `5d < replica_lag_max` keeps it in.
//!
//! Under the old rule, where only a fetch reaching the leader's log end of the moment counted,
//! the same runs shrink the ISR almost at once: the log end moves on every tick, so no fetch
//! ever reaches it. `a_follower_a_round_trip_too_slow_leaves_the_isr` shows the harness sees a
//! shrink when one is due.

use isr::{
    Acks, BrokerEpoch, BrokerId, Config, ControllerEpoch, Effect, Envelope, FlushPolicy,
    LeaderAndIsr, LeaderEpoch, Log, MemLog, Message, Node, Offset, PartitionEpoch, PartitionId,
    PartitionState, Replica, ReplicaInput, Rules, Tick,
};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, RngAlgorithm, TestRng, TestRunner};
use std::collections::{BTreeMap, BTreeSet};

const PARTITION: PartitionId = PartitionId(0);
const BROKERS: [BrokerId; 3] = [BrokerId(1), BrokerId(2), BrokerId(3)];
const LEADER: BrokerId = BrokerId(1);
/// Ticks per run: a hundred rounds and more at the longest delays.
const TICKS: u64 = 1_500;

/// What a run saw.
#[derive(Debug)]
struct Outcome {
    /// The first ISR the leader proposed that left a follower out, and when.
    shrink: Option<(Tick, BTreeSet<BrokerId>)>,
    /// The leader's log end offset at the end.
    leader_leo: Offset,
    /// Each follower's log end offset at the end.
    follower_leos: Vec<Offset>,
}

/// Messages in flight: by delivery tick, then by the order they were sent.
#[derive(Default)]
struct Network {
    in_flight: BTreeMap<(Tick, u64), Envelope<u64>>,
    sent: u64,
    /// The latest delivery tick of each link, so that a link delivers in order.
    link_busy_until: BTreeMap<(Node, Node), Tick>,
}

impl Network {
    fn send(&mut self, now: Tick, delay: u64, envelope: Envelope<u64>) {
        let link = (envelope.from, envelope.to);
        let at = Tick(now.0 + delay).max(self.link_busy_until.get(&link).copied().unwrap_or(now));
        self.link_busy_until.insert(link, at);
        self.sent += 1;
        self.in_flight.insert((at, self.sent), envelope);
    }

    /// The next message due at or before `now`.
    fn due(&mut self, now: Tick) -> Option<Envelope<u64>> {
        let (&key, _) = self
            .in_flight
            .iter()
            .next()
            .filter(|((at, _), _)| *at <= now)?;
        self.in_flight.remove(&key)
    }
}

/// The controller's order: b1 leads epoch 1 with every broker in the ISR.
fn order(broker: BrokerId) -> ReplicaInput<u64> {
    ReplicaInput::Message {
        from: Node::Controller,
        message: Message::LeaderAndIsr(LeaderAndIsr {
            partition: PARTITION,
            state: PartitionState {
                assigned: BROKERS.to_vec(),
                leader: Some(LEADER),
                leader_epoch: LeaderEpoch(1),
                isr: BROKERS.into_iter().collect(),
                elr: Default::default(),
                partition_epoch: PartitionEpoch(1),
                min_insync_replicas: 1,
            },
            broker_epoch: BrokerEpoch(u64::from(broker.0)),
            controller_epoch: ControllerEpoch(1),
        }),
    }
}

/// Runs the three replicas for [`TICKS`] ticks under `cfg`, the network delaying the `n`th
/// message by `delays[n % delays.len()]` ticks.
fn run(cfg: &Config, delays: &[u64]) -> Outcome {
    let mut replicas: BTreeMap<BrokerId, Replica<MemLog<u64>>> = BROKERS
        .into_iter()
        .map(|b| (b, Replica::new(b, PARTITION, MemLog::default())))
        .collect();
    let mut net = Network::default();
    let mut shrink = None;
    let mut next_delay = delays.iter().copied().cycle();
    // Steps one replica and carries its effects out: messages onto the network, flushes done
    // at once (a disk that never lags), a smaller proposed ISR noted.
    let mut step = |replicas: &mut BTreeMap<BrokerId, Replica<MemLog<u64>>>,
                    net: &mut Network,
                    broker: BrokerId,
                    now: Tick,
                    input: ReplicaInput<u64>| {
        let replica = replicas.get_mut(&broker).expect("one of BROKERS");
        let mut effects = replica.step(cfg, now, input);
        while !effects.is_empty() {
            let mut flush = false;
            for effect in effects {
                match effect {
                    Effect::Send(envelope) => {
                        if let Message::AlterPartition(proposal) = &envelope.message {
                            if proposal.new_isr.len() < BROKERS.len() && shrink.is_none() {
                                shrink = Some((now, proposal.new_isr.clone()));
                            }
                        }
                        // The controller is not simulated: the ISR never changes, so nothing is
                        // ever sent to it but a shrink, which ends the property.
                        if envelope.to != Node::Controller {
                            let delay = next_delay.next().unwrap_or(1);
                            net.send(now, delay, envelope);
                        }
                    }
                    Effect::Flush { .. } => flush = true,
                    _ => {}
                }
            }
            effects = if flush {
                replica.log_mut().flush();
                let durable = replica.log().flushed_offset();
                replica.step(cfg, now, ReplicaInput::Flushed(durable))
            } else {
                Vec::new()
            };
        }
    };
    for broker in BROKERS {
        step(&mut replicas, &mut net, broker, Tick(0), order(broker));
    }
    for t in 1..=TICKS {
        let now = Tick(t);
        let write = ReplicaInput::Write {
            id: t,
            records: vec![t],
            acks: Acks::Leader,
            producer: None,
        };
        step(&mut replicas, &mut net, LEADER, now, write);
        while let Some(envelope) = net.due(now) {
            let input = ReplicaInput::Message {
                from: envelope.from,
                message: envelope.message,
            };
            let to = match envelope.to {
                Node::Broker(b) => b,
                Node::Controller => unreachable!("nothing is sent to the controller"),
            };
            step(&mut replicas, &mut net, to, now, input);
        }
        for broker in BROKERS {
            step(&mut replicas, &mut net, broker, now, ReplicaInput::Tick);
        }
    }
    Outcome {
        shrink,
        leader_leo: replicas[&LEADER].log_end_offset(),
        follower_leos: BROKERS[1..]
            .iter()
            .map(|b| replicas[b].log_end_offset())
            .collect(),
    }
}

fn config(flush: FlushPolicy) -> Config {
    Config {
        rules: Rules {
            flush,
            ..Rules::default()
        },
        ..Config::default()
    }
}

/// The longest one-way delay that keeps `5d < replica_lag_max`.
fn longest_delay(cfg: &Config) -> u64 {
    (cfg.replica_lag_max.0 - 1) / 5
}

#[test]
fn followers_fetching_every_round_stay_in_the_isr_under_steady_writes() {
    let mut runner = TestRunner::new_with_rng(
        ProptestConfig {
            cases: 200,
            failure_persistence: None,
            ..ProptestConfig::default()
        },
        TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    );
    let cases = (any::<bool>(), 1u64..=5, vec(0u64..1_000, 1..64));
    runner
        .run(&cases, |(always, d, choices)| {
            let cfg = config(if always {
                FlushPolicy::Always
            } else {
                FlushPolicy::PageCache
            });
            let d = d.min(longest_delay(&cfg));
            let delays: Vec<u64> = choices.iter().map(|c| 1 + c % d).collect();
            let outcome = run(&cfg, &delays);
            prop_assert_eq!(outcome.shrink, None, "delays {:?}", delays);
            // The followers did keep up: each within a few rounds of the leader's log end.
            for leo in &outcome.follower_leos {
                prop_assert!(
                    leo.0 + 4 * d >= outcome.leader_leo.0,
                    "a follower at {:?} of {:?}",
                    leo,
                    outcome.leader_leo
                );
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
}

/// The harness sees a shrink when one is due: with every delay one tick longer than the bound
/// allows, a follower's first proof comes too late, and the leader proposes it out.
#[test]
fn a_follower_a_round_trip_too_slow_leaves_the_isr() {
    let cfg = config(FlushPolicy::PageCache);
    let too_slow = longest_delay(&cfg) + 1;
    let outcome = run(&cfg, &[too_slow]);
    let (at, isr) = outcome.shrink.expect("the ISR shrinks");
    assert!(
        isr.len() < BROKERS.len() && isr.contains(&LEADER),
        "{isr:?}"
    );
    assert!(
        at.0 <= 8 * too_slow + cfg.replica_lag_max.0,
        "within a few rounds: {at:?}"
    );
}
