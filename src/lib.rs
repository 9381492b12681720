//! # isr: Kafka-style partition replication as pure state transitions
//!
//! This crate is the protocol, and only the protocol: leaders and followers of a partition, the
//! in-sync replica set (ISR), the high watermark (HW), leader epochs and the controller that
//! elects leaders. It does no I/O, reads no clock, starts no thread and draws no random number.
//! Inputs (messages, producer writes, consumer reads, ticks and timers, completed flushes,
//! crashes) go in through one method each of [`Replica`], [`Controller`] and a broker's
//! [`BrokerSession`] with the controller, `step`; outputs
//! come back as [`Effect`]s for the driver to carry out, in order; logs sit behind the [`Log`]
//! trait. A broker's session and the replicas it hosts are one node too, [`Broker`], whose
//! [`Replicas`] keep their timers' deadlines so that a tick steps only the replicas due.
//!
//! Three drivers use it: the stateright models (`isr-models`), which explore every interleaving;
//! the property tests, which run random schedules; and the network runtime (`isr-runtime`), which
//! moves the same messages over TCP. None of them re-implements a transition. The simulated
//! cluster the first two drive (`sim`, `permute`) is behind the `sim` feature: a service that
//! embeds the core (see `examples/three_replicas.rs`) does not link it. Likewise the traces of
//! a deployment's steps and their replay on the core (`trace`), which the runtime writes and
//! `isr-check replay` checks, are behind the `trace` feature.
//!
//! Every rule whose absence once lost data in Kafka is a switch in [`Rules`]; the default is the
//! safe protocol. The properties that must hold are pure functions in [`invariants`].
//!
//! ## A driver
//!
//! Three replicas and a controller in one thread, a queue for the network, flushes done at once.
//! The driver decides nothing: it hands each node what arrives and carries out what comes back,
//! in order. `examples/three_replicas.rs` is the same with threads, a clock, heartbeats, and a
//! leader killed and restarted; spec/protocol.md §6 is the driver's contract.
//!
//! ```
//! use isr::*;
//! use std::collections::VecDeque;
//!
//! type Net = VecDeque<Envelope<String>>;
//!
//! /// Carries out a replica step's effects: messages into the network, acks=all answers to the
//! /// producer, a flush done and reported back to the replica (durable first).
//! fn carry(cfg: &Config, mut effects: Effects<String>, replica: &mut Replica<MemLog<String>>,
//!          net: &mut Net, acked: &mut Vec<u64>) {
//!     while !effects.is_empty() {
//!         let mut flush = false;
//!         for effect in effects {
//!             match effect {
//!                 Effect::Send(envelope) => net.push_back(envelope),
//!                 Effect::Acknowledge { id, .. } => acked.push(id),
//!                 Effect::Flush { .. } => flush = true,
//!                 _ => {} // HW moves, checkpoints, truncations: nothing to do in memory
//!             }
//!         }
//!         effects = Vec::new();
//!         if flush {
//!             replica.log_mut().flush();
//!             let durable = replica.log().flushed_offset();
//!             effects = replica.step(cfg, Tick(0), ReplicaInput::Flushed(durable));
//!         }
//!     }
//! }
//!
//! /// Carries out a controller step's effects, its state kept (in memory here): its messages
//! /// into the network. (Its other effect answers a fenced broker's heartbeat: none here.)
//! fn carry_controller(effects: ControllerEffects<String>, net: &mut Net) {
//!     net.extend(effects.into_iter().filter_map(ControllerEffect::into_sent));
//! }
//!
//! // A follower's Fetch that finds nothing waits at the leader (here, until data arrives: no
//! // tick is ever sent) instead of spinning.
//! let cfg = Config { fetch_max_wait: Tick(100), ..Config::default() };
//! let (partition, brokers) = (PartitionId(0), [BrokerId(0), BrokerId(1), BrokerId(2)]);
//! let mut replicas: Vec<_> = brokers.iter().map(|&b| Replica::new(b, partition, MemLog::new())).collect();
//! let mut controller = Controller::new();
//! let (mut net, mut acked) = (Net::new(), Vec::new());
//! // Delivers every message in flight, and what they cause, until the network is quiet.
//! let settle = |replicas: &mut Vec<Replica<MemLog<String>>>, controller: &mut Controller, net: &mut Net, acked: &mut Vec<u64>| {
//!     while let Some(Envelope { from, to, message }) = net.pop_front() {
//!         match to {
//!             Node::Controller => {
//!                 let effects = controller.step(&cfg, Tick(0), ControllerInput::Message { from, message });
//!                 carry_controller(effects, net);
//!             }
//!             Node::Broker(b) => {
//!                 let r = &mut replicas[b.0 as usize];
//!                 let effects = r.step(&cfg, Tick(0), ReplicaInput::Message { from, message });
//!                 carry(&cfg, effects, r, net, acked);
//!             }
//!         }
//!     }
//! };
//!
//! // Each broker registers; the controller creates the partition on all three.
//! for broker in brokers {
//!     let message = Message::BrokerRegistration { broker, clean_shutdown: true };
//!     net.push_back(Envelope { from: Node::Broker(broker), to: Node::Controller, message });
//! }
//! settle(&mut replicas, &mut controller, &mut net, &mut acked);
//! let created = controller.create_partition(partition, brokers.to_vec(), cfg.min_insync_replicas).unwrap();
//! carry_controller(created, &mut net);
//! settle(&mut replicas, &mut controller, &mut net, &mut acked);
//!
//! // A producer writes one record with acks=all to the leader: acknowledged once committed.
//! let leader = replicas.iter().position(|r| r.is_leader()).expect("a leader");
//! let write = ReplicaInput::Write { id: 7, records: vec!["hello".to_string()], acks: Acks::All, producer: None };
//! let effects = replicas[leader].step(&cfg, Tick(0), write);
//! carry(&cfg, effects, &mut replicas[leader], &mut net, &mut acked);
//! settle(&mut replicas, &mut controller, &mut net, &mut acked);
//! assert_eq!(acked, [7]);
//! for r in &replicas {
//!     assert_eq!(r.entry(Offset(0)).map(|e| e.record), Some("hello".to_string()));
//! }
//! ```

// Every public item says what it is for: the API is read from its docs.
#![deny(missing_docs)]

pub mod broker;
pub mod config;
pub mod controller;
pub mod epoch_cache;
pub mod error;
pub mod group;
pub mod invariants;
pub mod log;
pub mod message;
#[cfg(feature = "sim")]
pub mod permute;
pub mod producers;
pub mod replica;
#[cfg(feature = "sim")]
pub mod sim;
#[cfg(feature = "trace")]
pub mod trace;
pub mod types;

pub use broker::{Broker, BrokerEffect, BrokerInput, Replicas, Session as BrokerSession};
pub use config::{Config, FlushPolicy, Rules, TruncationRule};
pub use controller::{
    BrokerState, Controller, ControllerError, Effect as ControllerEffect,
    Effects as ControllerEffects, Election, Input as ControllerInput, MetadataRecord, Ready,
};
pub use epoch_cache::EpochCache;
pub use error::{AlterPartitionError, ConfigError, EpochError, ParseError, ReadError, WriteError};
pub use invariants::{ClusterView, History, Property, Violation};
pub use log::{is_gap, Compactable, Entry, EntryShape, Log, MemLog};
pub use message::{
    AlterPartitionRequest, AlterPartitionResponse, DeleteId, Effect, Effects, Envelope,
    FetchRequest, FetchResponse, FetchedRecords, LeaderAndIsr, Message,
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, PartitionState, ProduceId,
    ReadAnswer, ReadId,
};
pub use producers::{Admission, ProducerBatch, Producers};
pub use replica::{
    FollowerPhase, FollowerProgress, FollowerState, Input as ReplicaInput, LeaderState,
    ParkedFetch, PendingWrite, Replica, Role, Timer,
};
pub use types::{
    Acks, BrokerEpoch, BrokerId, ControllerEpoch, LeaderEpoch, Node, Offset, PartitionEpoch,
    PartitionId, Tick,
};
