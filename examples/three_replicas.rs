//! Embedding the verified core in a service: three replicas and a controller, each a thread,
//! connected by in-process channels, replicate records written to the leader.
//!
//! The program decides nothing about the protocol. Each node steps its core object with what
//! arrives (a message, a write, the passing of time) and carries out the effects: messages go
//! to their receiver's channel, a flush is done and reported back, answers go to the producer.
//! Swap channels for sockets and `MemLog` for files and this is the shape of `runtime/`.
//! Run it with `cargo run --example three_replicas`.

use isr::{
    Acks, BrokerId, Config, Controller, ControllerInput, Effect, Effects, Envelope, Log, MemLog,
    Message, Node, Offset, PartitionId, Replica, ReplicaInput, Tick, WriteError,
};
use std::collections::BTreeMap;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::thread;
use std::time::{Duration, Instant};

/// How long a tick of the core's clock lasts here.
const TICK: Duration = Duration::from_millis(10);
const PARTITION: PartitionId = PartitionId(0);
const RECORDS: u64 = 100;

/// What a node's thread receives.
enum Event {
    Message(Envelope<String>),
    /// A producer's write, to the leader; the acknowledgement (or refusal) goes to `ack`.
    Write(u64, String, Producer),
    /// Asks for the node's log, and stops the node.
    Finish(Sender<Vec<String>>),
}

type Routes = BTreeMap<Node, Sender<Event>>;
type Producer = Sender<Result<u64, WriteError>>;

/// Carries a step's effects out, in order: what a node's driver is.
fn carry_out<L: Log<Record = String>>(
    replica: Option<&mut Replica<L>>,
    effects: Effects<String>,
    routes: &Routes,
    acks: &mut BTreeMap<u64, Producer>,
    cfg: &Config,
    now: Tick,
) {
    let mut flush = false;
    for effect in effects {
        match effect {
            Effect::Send(envelope) => {
                let _ = routes[&envelope.to].send(Event::Message(envelope));
            }
            Effect::Acknowledge { id, .. } => answer(acks, id, Ok(id)),
            Effect::FailWrite { id, error, .. } => answer(acks, id, Err(error)),
            Effect::Flush { .. } => flush = true,
            // Truncations, HW moves, checkpoints: nothing to do for an in-memory log.
            _ => {}
        }
    }
    // A real log would fsync here (once for every flush asked for: group commit).
    if let (true, Some(replica)) = (flush, replica) {
        replica.log_mut().flush();
        let durable = replica.log().flushed_offset();
        let effects = replica.step(cfg, now, ReplicaInput::Flushed(durable));
        carry_out(Some(replica), effects, routes, acks, cfg, now);
    }
}

fn answer(acks: &mut BTreeMap<u64, Producer>, id: u64, result: Result<u64, WriteError>) {
    if let Some(producer) = acks.remove(&id) {
        let _ = producer.send(result);
    }
}

/// The core's time: ticks since `start`.
fn clock(start: Instant) -> Tick {
    Tick((start.elapsed().as_millis() / TICK.as_millis()) as u64)
}

/// One broker: its replica of the partition, driven by its channel and its clock.
fn broker(id: BrokerId, cfg: Config, inbox: Receiver<Event>, routes: Routes) {
    let start = Instant::now();
    let now = || clock(start);
    let mut replica = Replica::new(id, PARTITION, MemLog::default());
    let mut acks = BTreeMap::new();
    let heartbeat = Envelope {
        from: Node::Broker(id),
        to: Node::Controller,
        message: Message::BrokerHeartbeat { broker: id },
    };
    let mut ticked = Tick(0);
    loop {
        let input = match inbox.recv_timeout(TICK) {
            Ok(Event::Message(e)) => Some(ReplicaInput::Message {
                from: e.from,
                message: e.message,
            }),
            Ok(Event::Write(id, record, ack)) => {
                acks.insert(id, ack);
                Some(ReplicaInput::Write {
                    id,
                    records: vec![record],
                    acks: Acks::All,
                })
            }
            Ok(Event::Finish(reply)) => {
                let end = replica.log_end_offset();
                let log = replica.log().read(Offset(0), end, usize::MAX);
                let _ = reply.send(log.into_iter().map(|e| e.record).collect());
                return;
            }
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        // Once per tick, busy or idle: the core's timers, and a heartbeat (sessions are the
        // driver's business).
        let t = now();
        let mut inputs: Vec<_> = input.into_iter().collect();
        if t > ticked {
            ticked = t;
            inputs.push(ReplicaInput::Tick);
            let _ = routes[&Node::Controller].send(Event::Message(heartbeat.clone()));
        }
        for input in inputs {
            let effects = replica.step(&cfg, t, input);
            carry_out(Some(&mut replica), effects, &routes, &mut acks, &cfg, t);
        }
    }
}

/// The controller: registers the brokers, creates the partition, then answers AlterPartition
/// and watches sessions.
fn controller(cfg: Config, inbox: Receiver<Event>, routes: Routes, brokers: Vec<BrokerId>) {
    let start = Instant::now();
    let now = || clock(start);
    let mut c = Controller::new();
    let mut none = BTreeMap::new();
    for &broker in &brokers {
        let register = ControllerInput::Register {
            broker,
            clean_shutdown: true,
            elects: None,
        };
        let _: Effects<String> = c.step(&cfg, now(), register);
    }
    let effects = c
        .create_partition(PARTITION, brokers, cfg.min_insync_replicas)
        .expect("every broker is registered");
    carry_out::<MemLog<String>>(None, effects, &routes, &mut none, &cfg, now());
    let mut ticked = Tick(0);
    loop {
        let input = match inbox.recv_timeout(TICK) {
            Ok(Event::Message(e)) => Some(ControllerInput::Message {
                from: e.from,
                message: e.message,
            }),
            Ok(_) | Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        let t = now();
        let tick = (t > ticked).then_some(ControllerInput::Tick);
        ticked = ticked.max(t);
        for input in input.into_iter().chain(tick) {
            let effects = c.step(&cfg, t, input);
            carry_out::<MemLog<String>>(None, effects, &routes, &mut none, &cfg, t);
        }
    }
}

fn main() {
    let cfg = Config {
        // Idle followers' fetches wait at the leader for up to 5 ticks instead of spinning.
        fetch_max_wait: Tick(5),
        ..Config::default()
    };
    let brokers: Vec<BrokerId> = (1..=3).map(BrokerId).collect();
    let mut routes = Routes::new();
    let mut inboxes = Vec::new();
    for node in brokers
        .iter()
        .map(|&b| Node::Broker(b))
        .chain([Node::Controller])
    {
        let (tx, rx) = channel();
        routes.insert(node, tx);
        inboxes.push(rx);
    }
    let (r, b, inbox) = (
        routes.clone(),
        brokers.clone(),
        inboxes.pop().expect("an inbox"),
    );
    thread::spawn(move || controller(cfg, inbox, r, b));
    let mut threads = Vec::new();
    for (&id, inbox) in brokers.iter().zip(inboxes) {
        let r = routes.clone();
        threads.push(thread::spawn(move || broker(id, cfg, inbox, r)));
    }

    // The controller makes the first broker leader; write to it and wait for each commit.
    let (ack_tx, ack_rx) = channel();
    let leader = &routes[&Node::Broker(brokers[0])];
    let started = Instant::now();
    for id in 0..RECORDS {
        // Refused until the controller's order makes it leader: try again a tick later.
        loop {
            let _ = leader.send(Event::Write(id, format!("record-{id}"), ack_tx.clone()));
            match ack_rx.recv_timeout(Duration::from_secs(10)) {
                Ok(Ok(acked)) if acked == id => break,
                Ok(Err(WriteError::NotLeader)) => thread::sleep(TICK),
                other => panic!("record {id}: {other:?}"),
            }
        }
    }
    println!(
        "{RECORDS} records acknowledged (acks=all, min.insync.replicas=2) in {:?}",
        started.elapsed()
    );

    // Every follower in the ISR has every acknowledged record; one dropped from it under load
    // catches up within a few fetches.
    thread::sleep(Duration::from_millis(200));
    for &b in &brokers {
        let (tx, rx) = channel();
        let _ = routes[&Node::Broker(b)].send(Event::Finish(tx));
        let log = rx.recv().expect("a log");
        println!("{b}: {} records, last {:?}", log.len(), log.last());
        assert_eq!(log.len() as u64, RECORDS, "{b} is behind");
    }
    for t in threads {
        let _ = t.join();
    }
}
