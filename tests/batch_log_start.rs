//! DeleteRecords inside a record batch (KIP-107 as Kafka does it): the log start moves to the
//! offset asked for, not to the batch's first, on the leader and on its followers; the batch
//! holding it stays whole, is read from its first offset, and is committed whole; and a
//! follower whose log lies wholly below the leader's log start starts afresh at the first batch
//! boundary above it, where the leader's batches begin.
//!
//! The models' entries are one offset wide and cannot put the log start inside one: this runs
//! the core's replicas over logs of batches ([`DigestLog`], ten offsets an entry, as the
//! runtime's record batches), three brokers passing messages until none is left.

use isr::trace::{Digest, DigestLog};
use isr::{
    Acks, BrokerEpoch, BrokerId, Config, ControllerEpoch, Effect, Effects, Entry, Envelope,
    FlushPolicy, LeaderAndIsr, LeaderEpoch, Log, Message, Node, Offset, PartitionEpoch,
    PartitionId, PartitionState, ReadError, Replica, ReplicaInput, Rules, Tick,
};
use std::collections::{BTreeMap, VecDeque};

const PARTITION: PartitionId = PartitionId(0);
const BROKERS: [BrokerId; 3] = [BrokerId(1), BrokerId(2), BrokerId(3)];
const LEADER: BrokerId = BrokerId(1);
/// Offsets a batch spans.
const WIDTH: u64 = 10;

type Node3 = BTreeMap<BrokerId, Replica<DigestLog>>;

fn cfg() -> Config {
    Config {
        rules: Rules {
            flush: FlushPolicy::PageCache,
            ..Rules::default()
        },
        // Caught-up followers' fetches wait at the leader, so that the exchange comes to rest.
        fetch_max_wait: Tick(50),
        ..Config::default()
    }
}

/// The controller's order: b1 leads epoch 1 over all three brokers, with `isr` in sync.
fn order(broker: BrokerId, isr: &[BrokerId]) -> ReplicaInput<Digest> {
    ReplicaInput::Message {
        from: Node::Controller,
        message: Message::LeaderAndIsr(LeaderAndIsr {
            partition: PARTITION,
            state: PartitionState {
                assigned: BROKERS.to_vec(),
                leader: Some(LEADER),
                leader_epoch: LeaderEpoch(1),
                isr: isr.iter().copied().collect(),
                elr: Default::default(),
                partition_epoch: PartitionEpoch(1),
                min_insync_replicas: 1,
            },
            broker_epoch: BrokerEpoch(u64::from(broker.0)),
            controller_epoch: ControllerEpoch(1),
        }),
    }
}

/// A batch of [`WIDTH`] records.
fn batch(n: u32) -> Digest {
    Digest {
        width: WIDTH,
        size: 100,
        checksum: n,
    }
}

/// A cluster of replicas and the messages between them, delivered in order.
struct Cluster {
    replicas: Node3,
    in_flight: VecDeque<Envelope<Digest>>,
    now: u64,
    /// Effects other than sends and flushes, by broker, in order.
    seen: BTreeMap<BrokerId, Vec<Effect<Digest>>>,
}

impl Cluster {
    /// The replicas of `running` (the others' messages are lost), with `isr` in sync.
    fn new(running: &[BrokerId], isr: &[BrokerId]) -> Cluster {
        let mut c = Cluster {
            replicas: running
                .iter()
                .map(|&b| (b, Replica::new(b, PARTITION, DigestLog::default())))
                .collect(),
            in_flight: VecDeque::new(),
            now: 0,
            seen: BTreeMap::new(),
        };
        for &b in running {
            c.step(b, order(b, isr));
        }
        c.settle();
        c
    }

    fn step(&mut self, broker: BrokerId, input: ReplicaInput<Digest>) {
        let r = self
            .replicas
            .get_mut(&broker)
            .expect("a broker of the cluster");
        let effects = r.step(&cfg(), Tick(self.now), input);
        self.carry_out(broker, effects);
    }

    fn carry_out(&mut self, broker: BrokerId, effects: Effects<Digest>) {
        for effect in effects {
            match effect {
                Effect::Send(envelope) => self.in_flight.push_back(envelope),
                Effect::Flush { .. } => {
                    let r = self.replicas.get_mut(&broker).expect("stepped");
                    r.log_mut().flush();
                    let durable = r.log().flushed_offset();
                    let more = r.step(&cfg(), Tick(self.now), ReplicaInput::Flushed(durable));
                    self.carry_out(broker, more);
                }
                other => self.seen.entry(broker).or_default().push(other),
            }
        }
    }

    /// Delivers messages, and ticks time on when none is left, until nothing more happens
    /// for a while (held fetches time out and are asked again).
    fn settle(&mut self) {
        for _ in 0..200 {
            let mut delivered = 0;
            while let Some(envelope) = self.in_flight.pop_front() {
                delivered += 1;
                assert!(delivered < 10_000, "the messages never come to rest");
                let Node::Broker(to) = envelope.to else {
                    continue;
                };
                if self.replicas.contains_key(&to) {
                    let input = ReplicaInput::Message {
                        from: envelope.from,
                        message: envelope.message,
                    };
                    self.step(to, input);
                }
            }
            self.now += 10;
            let brokers: Vec<BrokerId> = self.replicas.keys().copied().collect();
            for b in brokers {
                self.step(b, ReplicaInput::Tick);
            }
        }
        for r in self.replicas.values() {
            r.check_local().expect("every replica consistent");
        }
    }

    fn replica(&self, b: u32) -> &Replica<DigestLog> {
        &self.replicas[&BrokerId(b)]
    }

    /// What the last DeleteRecords at b1 was answered.
    fn deleted(&self) -> Option<Result<Offset, ReadError>> {
        self.seen.get(&LEADER)?.iter().rev().find_map(|e| match e {
            Effect::RecordsDeleted { result, .. } => Some(*result),
            _ => None,
        })
    }
}

/// Three batches written at b1 and replicated to the others of `running`: offsets 0 to 29.
fn three_batches(running: &[BrokerId]) -> Cluster {
    let mut c = Cluster::new(running, running);
    for n in 0..3 {
        c.step(
            LEADER,
            ReplicaInput::Write {
                id: u64::from(n),
                records: vec![batch(n)],
                acks: Acks::All,
                producer: None,
            },
        );
        c.settle();
    }
    for r in c.replicas.values() {
        assert_eq!(
            (r.log_end_offset(), r.high_watermark()),
            (Offset(30), Offset(30))
        );
    }
    c
}

#[test]
fn delete_records_inside_a_batch_moves_every_replicas_log_start_to_the_offset() {
    let mut c = three_batches(&BROKERS);
    c.step(
        LEADER,
        ReplicaInput::DeleteRecords {
            id: 1,
            before: Offset(15),
        },
    );
    assert_eq!(
        c.deleted(),
        Some(Ok(Offset(15))),
        "Kafka's answer: the offset"
    );
    c.settle();
    for r in c.replicas.values() {
        assert_eq!(r.log().log_start_offset(), Offset(15), "{}", r.id());
        // The batch holding it stays whole, and starts its epoch at the log start.
        assert_eq!(r.log().entry_start(Offset(15)), Offset(10));
        assert_eq!(r.epoch_cache().entries(), &[(LeaderEpoch(1), Offset(15))]);
        assert_eq!(r.high_watermark(), Offset(30));
    }

    // A consumer reads from the log start and gets the batch from its first offset (Kafka's
    // clients skip what lies below the offset they asked for); below the log start, refused.
    let read = |c: &mut Cluster, from| {
        c.step(
            LEADER,
            ReplicaInput::Read {
                id: 1,
                from: Offset(from),
                max_entries: 9,
                max_bytes: 1 << 20,
            },
        );
        match c.seen[&LEADER].last() {
            Some(Effect::Read { result, .. }) => result.clone(),
            other => panic!("no read answer: {other:?}"),
        }
    };
    let answer = read(&mut c, 15).expect("at the log start");
    assert_eq!(answer.log_start_offset, Offset(15));
    assert_eq!(
        answer
            .entries
            .iter()
            .map(|e| e.record.checksum)
            .collect::<Vec<_>>(),
        [1, 2]
    );
    assert_eq!(read(&mut c, 14).err(), Some(ReadError::OffsetOutOfRange));

    // A replica restarted from that log keeps the log start and the epoch cache, and follows
    // its leader on: here from a high watermark checkpoint at the log start.
    let log = c.replica(2).log().clone();
    let restarted = Replica::recover(BrokerId(2), PARTITION, log, Offset(15));
    restarted.check_local().expect("consistent after a restart");
    assert_eq!(restarted.epoch_cache(), c.replica(2).epoch_cache());
    assert_eq!(
        restarted.high_watermark(),
        Offset(20),
        "the batch holding the log start is committed"
    );
    c.replicas.insert(BrokerId(2), restarted);
    c.step(BrokerId(2), order(BrokerId(2), &BROKERS));
    c.settle();
    c.step(
        LEADER,
        ReplicaInput::DeleteRecords {
            id: 2,
            before: Offset(30),
        },
    );
    c.settle();
    for r in c.replicas.values() {
        assert_eq!(
            (r.log().log_start_offset(), r.high_watermark()),
            (Offset(30), Offset(30)),
            "{}",
            r.id()
        );
    }
}

#[test]
fn a_follower_wholly_below_a_log_start_inside_a_batch_starts_afresh_at_the_next_batch() {
    // b3 is down, out of the ISR, while b1 and b2 write and delete.
    let in_sync = [BrokerId(1), BrokerId(2)];
    let mut c = three_batches(&in_sync);
    c.step(
        LEADER,
        ReplicaInput::DeleteRecords {
            id: 1,
            before: Offset(25),
        },
    );
    assert_eq!(c.deleted(), Some(Ok(Offset(25))));
    c.settle();

    // Then b3 comes up with an empty log: its Fetch from 0 is below the log start, and it
    // starts afresh where the leader's batches begin above it.
    c.replicas.insert(
        BrokerId(3),
        Replica::new(BrokerId(3), PARTITION, DigestLog::default()),
    );
    c.step(BrokerId(3), order(BrokerId(3), &in_sync));
    c.settle();
    let b3 = c.replica(3);
    assert_eq!(b3.log().log_start_offset(), Offset(30));
    assert_eq!(b3.log_end_offset(), Offset(30));
    assert_eq!(b3.high_watermark(), Offset(30));

    // It replicates what is written next.
    c.step(
        LEADER,
        ReplicaInput::Write {
            id: 9,
            records: vec![batch(3)],
            acks: Acks::All,
            producer: None,
        },
    );
    c.settle();
    let b3 = c.replica(3);
    assert_eq!(b3.log_end_offset(), Offset(40));
    assert_eq!(
        b3.log().entry(Offset(30)).map(|e: Entry<Digest>| e.record),
        Some(batch(3))
    );
    assert_eq!(c.replica(1).high_watermark(), Offset(40));
}
