//! Embedding the verified core in a service: three replicas and a controller, each a thread,
//! connected by in-process channels, replicate records written to the leader.
//!
//! The program decides nothing about the protocol. Each node steps its core object with
//! whatever arrives (a message, a write, the passing of time) and carries out the effects it
//! returns: messages go to the channel of their receiver, a flush is done and reported back,
//! acknowledgements go to the producer. Swap the channels for sockets and `MemLog` for a file
//! and this is the shape of `runtime/`.
//!
//! Run it with `cargo run --example three_replicas`.

use isr::{
    Acks, BrokerId, Config, Controller, ControllerInput, Effect, Effects, Envelope, Log, MemLog,
    Message, Node, Offset, PartitionId, Replica, ReplicaInput, Tick,
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
    /// A producer's write, to the leader; the acknowledgement goes to `ack`.
    Write(u64, String, Sender<u64>),
    /// Asks for the node's log, and stops the node.
    Finish(Sender<Vec<String>>),
}

type Routes = BTreeMap<Node, Sender<Event>>;

/// Carries a step's effects out, in order: what a node's driver is.
fn carry_out<L: Log<Record = String>>(
    replica: Option<&mut Replica<L>>,
    effects: Effects<String>,
    routes: &Routes,
    acks: &mut BTreeMap<u64, Sender<u64>>,
    cfg: &Config,
    now: Tick,
) {
    let mut flush = false;
    for effect in effects {
        match effect {
            Effect::Send(envelope) => {
                let _ = routes[&envelope.to].send(Event::Message(envelope));
            }
            Effect::Acknowledge { id, .. } => {
                if let Some(producer) = acks.remove(&id) {
                    let _ = producer.send(id);
                }
            }
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

/// One broker: its replica of the partition, driven by its channel and its clock.
fn broker(id: BrokerId, cfg: Config, inbox: Receiver<Event>, routes: Routes) {
    let start = Instant::now();
    let now = || Tick((start.elapsed().as_millis() / TICK.as_millis()) as u64);
    let mut replica = Replica::new(id, PARTITION, MemLog::default());
    let mut acks = BTreeMap::new();
    let heartbeat = Envelope {
        from: Node::Broker(id),
        to: Node::Controller,
        message: Message::BrokerHeartbeat { broker: id },
    };
    loop {
        let input = match inbox.recv_timeout(TICK) {
            Ok(Event::Message(e)) => ReplicaInput::Message {
                from: e.from,
                message: e.message,
            },
            Ok(Event::Write(id, record, ack)) => {
                acks.insert(id, ack);
                ReplicaInput::Write {
                    id,
                    records: vec![record],
                    acks: Acks::All,
                }
            }
            Ok(Event::Finish(reply)) => {
                let end = replica.log_end_offset();
                let log = replica.log().read(Offset(0), end, usize::MAX);
                let _ = reply.send(log.into_iter().map(|e| e.record).collect());
                return;
            }
            Err(RecvTimeoutError::Timeout) => {
                // Sessions are the driver's business: a heartbeat every tick.
                let _ = routes[&Node::Controller].send(Event::Message(heartbeat.clone()));
                ReplicaInput::Tick
            }
            Err(RecvTimeoutError::Disconnected) => return,
        };
        let t = now();
        let effects = replica.step(&cfg, t, input);
        carry_out(Some(&mut replica), effects, &routes, &mut acks, &cfg, t);
    }
}

/// The controller: registers the brokers, creates the partition, then answers AlterPartition
/// and watches sessions.
fn controller(cfg: Config, inbox: Receiver<Event>, routes: Routes, brokers: Vec<BrokerId>) {
    let start = Instant::now();
    let now = || Tick((start.elapsed().as_millis() / TICK.as_millis()) as u64);
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
    loop {
        let input = match inbox.recv_timeout(TICK) {
            Ok(Event::Message(e)) => ControllerInput::Message {
                from: e.from,
                message: e.message,
            },
            Ok(_) => continue,
            Err(RecvTimeoutError::Timeout) => ControllerInput::Tick,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        let effects = c.step(&cfg, now(), input);
        carry_out::<MemLog<String>>(None, effects, &routes, &mut none, &cfg, now());
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
    let controller_inbox = inboxes.pop().expect("the controller's inbox");
    let mut threads = Vec::new();
    for (&id, inbox) in brokers.iter().zip(inboxes) {
        let routes = routes.clone();
        threads.push(thread::spawn(move || broker(id, cfg, inbox, routes)));
    }
    let (routes_c, brokers_c) = (routes.clone(), brokers.clone());
    thread::spawn(move || controller(cfg, controller_inbox, routes_c, brokers_c));

    // The controller makes the first broker leader; write to it and wait for each commit.
    let (ack_tx, ack_rx) = channel();
    let leader = &routes[&Node::Broker(brokers[0])];
    let started = Instant::now();
    for id in 0..RECORDS {
        let _ = leader.send(Event::Write(id, format!("record-{id}"), ack_tx.clone()));
        let acked = ack_rx.recv_timeout(Duration::from_secs(10));
        assert_eq!(acked, Ok(id), "record {id} was not acknowledged");
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
