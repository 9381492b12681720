//! Embedding the verified core in a service: three brokers and a controller, each a thread,
//! connected by in-process channels. Records are written to the leader with acks=all; then the
//! leader's process is killed (a power cut: what it had not flushed is gone), the controller
//! elects another leader, writing goes on, and the dead broker is restarted from what it kept on
//! disk — its flushed log and its high watermark checkpoint — and catches up. Every acknowledged
//! record is in every log at the end.
//!
//! The program decides nothing about the protocol. Each broker's thread drives one node of the
//! core, a `Broker` (its session with the controller, and its replica in the `Broker`'s
//! `Replicas`): it steps it once per input (a message, a write, the controller's answer),
//! carries out the effects — messages to their receiver's channel, a flush done through
//! `Replicas::update` and reported back, a checkpoint written, answers to the producer — and
//! sleeps until something arrives or `Broker::next_timeout`, when it steps `BrokerInput::Tick`.
//! The controller's thread drives a `Controller` alike. Swap channels for sockets and `MemLog`
//! for files and this is the shape of `runtime/`. Run: `cargo run --example three_replicas`.
//!
//! What a restarted process needs, and where it comes from:
//! - its log as durable on disk: the entries up to `Log::flushed_offset` (here, the in-memory
//!   log cut where a power cut would cut a file);
//! - its last high watermark checkpoint: the offset of the latest
//!   `Effect::CheckpointHighWatermark` it carried out (zero if none);
//! - whether its last stop was clean (KIP-966), which its session tells the controller when it
//!   registers.
//!
//! It starts a `Broker::new(id, clean_shutdown)` hosting `Replica::recover(id, partition, log,
//! checkpoint)`: the session registers, the controller's LeaderAndIsr makes the replica a
//! follower, which reconciles its log with the leader's (truncating what the leader does not
//! hold) and fetches the rest. The session heartbeats, and registers again if the controller
//! fenced the broker: the driver only carries its messages and tells it what it answered.

use isr::broker::{Effect as SessionEffect, Input as SessionInput};
use isr::{
    Acks, Broker, BrokerEffect, BrokerId, BrokerInput, Config, Controller, ControllerEffect,
    ControllerEffects, ControllerInput, Effect, Envelope, Log, MemLog, Message, Node, Offset,
    PartitionId, Replica, ReplicaInput, Tick, WriteError,
};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// How long a tick of the core's clock lasts here.
const TICK: Duration = Duration::from_millis(10);
const PARTITION: PartitionId = PartitionId(0);
/// Records written before the leader is killed, and as many after.
const RECORDS: u64 = 50;

/// What a node's thread receives.
enum Event {
    Message(Envelope<String>),
    /// A producer's write, to the leader; the acknowledgement (or refusal) goes to the sender.
    Write(u64, String, Producer),
    /// The controller's answer to a broker's registration or heartbeat, for its session.
    Session(SessionInput),
    /// Asks a broker for its log's records.
    Log(Sender<Vec<String>>),
    /// Asks the controller for the partition's ISR.
    Isr(Sender<BTreeSet<BrokerId>>),
    /// Kills a broker's process: what survives is sent back.
    Kill(Sender<Disk>),
}

type Routes = BTreeMap<Node, Sender<Event>>;
type Producer = Sender<Result<u64, WriteError>>;

/// What a broker's process leaves on disk.
struct Disk {
    log: MemLog<String>,
    hw_checkpoint: Offset,
}

/// One broker's process: its node of the core, the producers waiting for answers, a checkpoint.
struct Process {
    broker: Broker<MemLog<String>>,
    acks: BTreeMap<u64, Producer>,
    /// The high watermark checkpoint as last written (a file, in a real broker).
    checkpoint: Offset,
}

impl Process {
    /// Steps the broker and carries the effects out, in order: what a node's driver is.
    fn step(&mut self, cfg: &Config, now: Tick, input: BrokerInput<String>, routes: &Routes) {
        let mut inputs = VecDeque::from([input]);
        while let Some(input) = inputs.pop_front() {
            let mut flush = BTreeSet::new();
            for effect in self.broker.step(cfg, now, input) {
                match effect {
                    BrokerEffect::Session(SessionEffect::Send(envelope)) => send(routes, envelope),
                    // A silent controller: open another session (here it is always the same).
                    BrokerEffect::Session(SessionEffect::SessionLost) => {
                        inputs.push_back(BrokerInput::Session(SessionInput::SessionOpened))
                    }
                    BrokerEffect::Replica(effect) => match effect {
                        Effect::Send(envelope) => send(routes, envelope),
                        Effect::Acknowledge { id, .. } => self.answer(id, Ok(id)),
                        Effect::FailWrite { id, error, .. } => self.answer(id, Err(error)),
                        Effect::Flush { partition, .. } => {
                            flush.insert(partition);
                        }
                        Effect::CheckpointHighWatermark { offset, .. } => self.checkpoint = offset,
                        // Truncations and HW moves: nothing to do for an in-memory log.
                        _ => {}
                    },
                }
            }
            // A real log would fsync here, once for every flush asked for (group commit), through
            // `update`, which reschedules the replica (a flush may start a timer).
            let replicas = self.broker.replicas_mut();
            for partition in flush {
                let durable = replicas.update(cfg, partition, |replica, ()| {
                    replica.log_mut().flush();
                    replica.log().flushed_offset()
                });
                inputs.extend(durable.map(|offset| BrokerInput::Replica {
                    partition,
                    input: ReplicaInput::Flushed(offset),
                }));
            }
        }
    }

    fn answer(&mut self, id: u64, result: Result<u64, WriteError>) {
        if let Some(producer) = self.acks.remove(&id) {
            let _ = producer.send(result);
        }
    }

    /// What a power cut leaves: the log as far as it was flushed, and the last checkpoint.
    fn disk(&self) -> Disk {
        let replica = self.broker.replicas().get(PARTITION).expect("its replica");
        let mut log = replica.log().clone();
        // An in-memory stand-in for a file: cut it where the last fsync left the file.
        log.lose_unflushed();
        Disk {
            log,
            hw_checkpoint: self.checkpoint,
        }
    }
}

fn send(routes: &Routes, envelope: Envelope<String>) {
    let _ = routes[&envelope.to].send(Event::Message(envelope));
}

/// The core's time: ticks since `start`.
fn clock(start: Instant) -> Tick {
    Tick((start.elapsed().as_millis() / TICK.as_millis()) as u64)
}

/// One broker's process: its `Broker`, driven by its channel and its clock. `restarted` is
/// what a restarted process found on disk; its inbox is handed back when killed.
fn broker(
    id: BrokerId,
    cfg: Config,
    inbox: Receiver<Event>,
    routes: Routes,
    restarted: Option<Disk>,
) -> Receiver<Event> {
    let start = Instant::now();
    // A restarted process's last run was killed: its registration says unclean (KIP-966). A
    // first start has no last run to have lost anything.
    let clean_shutdown = restarted.is_none();
    let replica = match restarted {
        Some(disk) => Replica::recover(id, PARTITION, disk.log, disk.hw_checkpoint),
        None => Replica::new(id, PARTITION, MemLog::default()),
    };
    let mut node = Process {
        checkpoint: replica.hw_checkpoint(),
        broker: Broker::new(id, clean_shutdown),
        acks: BTreeMap::new(),
    };
    node.broker.replicas_mut().insert(&cfg, replica, ());
    let to_replica = |input| BrokerInput::Replica {
        partition: PARTITION,
        input,
    };
    let opened = BrokerInput::Session(SessionInput::SessionOpened);
    node.step(&cfg, clock(start), opened, &routes);
    loop {
        // Sleep until something arrives or the next timer is due; a due timer goes first.
        let next = node.broker.next_timeout(&cfg);
        let event = match next.map(|t| (TICK * t.0 as u32).saturating_sub(start.elapsed())) {
            Some(Duration::ZERO) => Err(RecvTimeoutError::Timeout),
            Some(wait) => inbox.recv_timeout(wait),
            None => inbox.recv().map_err(RecvTimeoutError::from),
        };
        let input = match event {
            Ok(Event::Message(e)) => to_replica(ReplicaInput::Message {
                from: e.from,
                message: e.message,
            }),
            Ok(Event::Write(id, record, ack)) => {
                node.acks.insert(id, ack);
                to_replica(ReplicaInput::Write {
                    id,
                    records: vec![record],
                    acks: Acks::All,
                    producer: None,
                })
            }
            Ok(Event::Session(input)) => BrokerInput::Session(input),
            Err(RecvTimeoutError::Timeout) => BrokerInput::Tick,
            Ok(Event::Log(reply)) => {
                let replica = node.broker.replicas().get(PARTITION).expect("its replica");
                let end = replica.log_end_offset();
                let log = replica.log().read(Offset(0), end, usize::MAX);
                let _ = reply.send(log.into_iter().map(|e| e.record).collect());
                continue;
            }
            Ok(Event::Kill(reply)) => {
                let _ = reply.send(node.disk());
                return inbox;
            }
            Ok(Event::Isr(_)) => continue,
            Err(RecvTimeoutError::Disconnected) => return inbox,
        };
        node.step(&cfg, clock(start), input, &routes);
    }
}

/// The controller: answers the brokers' registrations and heartbeats, creates the partition
/// once every broker registered, then answers AlterPartition and fences brokers whose
/// heartbeats stop.
fn controller(cfg: Config, inbox: Receiver<Event>, routes: Routes, brokers: Vec<BrokerId>) {
    let start = Instant::now();
    let now = || clock(start);
    let mut c = Controller::new();
    let to_session = |broker, input| {
        let _ = routes[&Node::Broker(broker)].send(Event::Session(input));
    };
    // Carries out a step's effects; whether it asked `broker` to register again.
    let carry_out = |effects: ControllerEffects<String>| {
        let mut must_register = BTreeSet::new();
        for effect in effects {
            match effect {
                ControllerEffect::Send(envelope) => send(&routes, envelope),
                ControllerEffect::MustRegister { broker } => {
                    must_register.insert(broker);
                    to_session(broker, SessionInput::MustRegister);
                }
            }
        }
        must_register
    };
    let mut created = false;
    let mut ticked = Tick(0);
    loop {
        let input = match inbox.recv_timeout(TICK) {
            Ok(Event::Message(e)) => Some(ControllerInput::Message {
                from: e.from,
                message: e.message,
            }),
            Ok(Event::Isr(reply)) => {
                let _ = reply.send(
                    c.partition(PARTITION)
                        .map(|p| p.isr.clone())
                        .unwrap_or_default(),
                );
                None
            }
            Ok(_) | Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        let t = now();
        let tick = (t > ticked).then_some(ControllerInput::Tick);
        ticked = ticked.max(t);
        for input in input.into_iter().chain(tick) {
            // A registration or a heartbeat is answered once stepped (a real controller would
            // answer once the step is durable), so the broker's session knows where it stands.
            let answer = match &input {
                ControllerInput::Message {
                    message: Message::BrokerRegistration { broker, .. },
                    ..
                } => Some((*broker, SessionInput::RegistrationAnswered)),
                ControllerInput::Message {
                    message: Message::BrokerHeartbeat { broker },
                    ..
                } => Some((*broker, SessionInput::HeartbeatAnswered)),
                _ => None,
            };
            let must_register = carry_out(c.step(&cfg, t, input));
            if let Some((broker, answer)) = answer {
                if !must_register.contains(&broker) {
                    to_session(broker, answer);
                }
            }
        }
        if !created && brokers.iter().all(|&b| c.is_alive(b)) {
            created = true;
            carry_out(
                c.create_partition(PARTITION, brokers.clone(), cfg.min_insync_replicas)
                    .expect("every broker is registered"),
            );
        }
    }
}

/// Writes records `from..to` with acks=all, each to whichever broker takes it: a refused or
/// unanswered write goes to the next broker, as a Kafka producer refreshes its metadata. Returns
/// the broker that took the last one.
fn produce(routes: &Routes, brokers: &[BrokerId], from: u64, to: u64) -> BrokerId {
    let (ack_tx, ack_rx) = channel();
    let mut at = 0;
    for id in from..to {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let broker = brokers[at % brokers.len()];
            let record = format!("record-{id}");
            let _ = routes[&Node::Broker(broker)].send(Event::Write(id, record, ack_tx.clone()));
            match ack_rx.recv_timeout(TICK * 20) {
                Ok(Ok(acked)) if acked == id => break,
                // Not the leader, or not enough replicas yet, or a dead broker: elsewhere, later.
                _ => at += 1,
            }
            assert!(Instant::now() < deadline, "record {id}: no broker took it");
            thread::sleep(TICK);
        }
    }
    brokers[at % brokers.len()]
}

/// Asks node `node` a question and waits for the answer.
fn ask<T>(routes: &Routes, node: Node, question: impl FnOnce(Sender<T>) -> Event) -> T {
    let (tx, rx) = channel();
    let _ = routes[&node].send(question(tx));
    rx.recv_timeout(Duration::from_secs(5)).expect("an answer")
}

fn main() {
    let cfg = Config {
        // Idle followers' fetches wait at the leader for up to 5 ticks instead of spinning.
        fetch_max_wait: Tick(5),
        ..Config::default()
    };
    // Checked once, before the first step: the core does not check it on every step.
    if let Err(e) = cfg.validate() {
        eprintln!("invalid configuration: {e}");
        std::process::exit(2);
    }
    let brokers: Vec<BrokerId> = (1..=3).map(BrokerId).collect();
    let mut routes = Routes::new();
    let mut inboxes = BTreeMap::new();
    for node in brokers
        .iter()
        .map(|&b| Node::Broker(b))
        .chain([Node::Controller])
    {
        let (tx, rx) = channel();
        routes.insert(node, tx);
        inboxes.insert(node, rx);
    }
    let take = |inboxes: &mut BTreeMap<Node, Receiver<Event>>, node| {
        inboxes.remove(&node).expect("an inbox")
    };
    let (r, b, inbox) = (
        routes.clone(),
        brokers.clone(),
        take(&mut inboxes, Node::Controller),
    );
    thread::spawn(move || controller(cfg, inbox, r, b));
    let spawn = |id: BrokerId, inbox, disk| -> JoinHandle<Receiver<Event>> {
        let r = routes.clone();
        thread::spawn(move || broker(id, cfg, inbox, r, disk))
    };
    let mut threads: BTreeMap<BrokerId, JoinHandle<Receiver<Event>>> = BTreeMap::new();
    for &id in &brokers {
        threads.insert(id, spawn(id, take(&mut inboxes, Node::Broker(id)), None));
    }

    let started = Instant::now();
    let leader = produce(&routes, &brokers, 0, RECORDS);
    println!(
        "{RECORDS} records acknowledged by {leader} (acks=all, min.insync.replicas=2) in {:?}",
        started.elapsed()
    );

    // Kill the leader. Its session expires, the controller elects a replica of the ISR, and
    // writing goes on there: every acknowledged record is on it (that is what acks=all bought).
    let disk = ask(&routes, Node::Broker(leader), Event::Kill);
    let inbox = threads
        .remove(&leader)
        .expect("a thread")
        .join()
        .expect("the broker's thread");
    println!(
        "killed {leader}: its disk holds {} records, high watermark checkpoint {:?}",
        disk.log.log_end_offset().0,
        disk.hw_checkpoint
    );
    let killed_at = Instant::now();
    let others: Vec<BrokerId> = brokers.iter().copied().filter(|&b| b != leader).collect();
    let new_leader = produce(&routes, &others, RECORDS, 2 * RECORDS);
    println!(
        "{new_leader} leads; {RECORDS} more records acknowledged {:?} after the kill",
        killed_at.elapsed()
    );

    // Restart it from its disk: it registers (last stop unclean), follows, reconciles, catches
    // up and rejoins the ISR.
    // A new process: what the old one's connections carried died with them.
    while inbox.try_recv().is_ok() {}
    threads.insert(leader, spawn(leader, inbox, Some(disk)));
    let restarted_at = Instant::now();
    let acknowledged: Vec<String> = (0..2 * RECORDS).map(|id| format!("record-{id}")).collect();
    loop {
        let isr = ask(&routes, Node::Controller, Event::Isr);
        let logs: Vec<Vec<String>> = brokers
            .iter()
            .map(|&b| ask(&routes, Node::Broker(b), Event::Log))
            .collect();
        // The logs are one log, holding every acknowledged record. (A write whose answer came
        // too late for the producer, which then wrote it again, may be in it twice: a Kafka
        // producer without idempotence does the same.)
        let one_log = logs.windows(2).all(|pair| pair[0] == pair[1]);
        let holds_all = acknowledged.iter().all(|r| logs[0].contains(r));
        if isr.len() == brokers.len() && one_log && holds_all {
            println!(
                "{leader} restarted, caught up and back in the ISR {isr:?} in {:?}",
                restarted_at.elapsed()
            );
            for (b, log) in brokers.iter().zip(&logs) {
                println!("{b}: {} records, last {:?}", log.len(), log.last());
            }
            break;
        }
        assert!(
            restarted_at.elapsed() < Duration::from_secs(10),
            "not caught up: ISR {isr:?}, logs {:?}",
            logs.iter().map(Vec::len).collect::<Vec<_>>()
        );
        thread::sleep(TICK * 5);
    }
    println!("every acknowledged record survived the leader's failure");
}
