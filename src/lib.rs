//! # isr: Kafka-style partition replication as pure state transitions
//!
//! This crate is the protocol, and only the protocol: leaders and followers of a partition, the
//! in-sync replica set (ISR), the high watermark (HW), leader epochs and the controller that
//! elects leaders. It does no I/O, reads no clock, starts no thread and draws no random number.
//! Inputs (messages, producer writes, consumer reads, ticks and timers, completed flushes,
//! crashes) go in through one method each of [`Replica`], [`Controller`] and a broker's
//! [`BrokerSession`] with the controller, `step`; outputs
//! come back as [`Effect`]s for the driver to carry out, in order; logs sit behind the [`Log`]
//! trait.
//!
//! Three drivers use it: the stateright models (`isr-models`), which explore every interleaving;
//! the property tests, which run random schedules; and the network runtime (`isr-runtime`), which
//! moves the same messages over TCP. None of them re-implements a transition. The simulated
//! cluster the first two drive (`sim`, `permute`) is behind the `sim` feature: a service that
//! embeds the core (see `examples/three_replicas.rs`) does not link it.
//!
//! Every rule whose absence once lost data in Kafka is a switch in [`Rules`]; the default is the
//! safe protocol. The properties that must hold are pure functions in [`invariants`].

// Every public item says what it is for: the API is read from its docs.
#![deny(missing_docs)]

pub mod broker;
pub mod config;
pub mod controller;
pub mod epoch_cache;
pub mod error;
pub mod invariants;
pub mod log;
pub mod message;
#[cfg(feature = "sim")]
pub mod permute;
pub mod replica;
#[cfg(feature = "sim")]
pub mod sim;
pub mod trace;
pub mod types;

pub use broker::Session as BrokerSession;
pub use config::{Config, FlushPolicy, Rules, TruncationRule};
pub use controller::{
    BrokerState, Controller, ControllerError, Election, Input as ControllerInput, MetadataRecord,
    Ready,
};
pub use epoch_cache::EpochCache;
pub use error::{AlterPartitionError, ConfigError, EpochError, ParseError, ReadError, WriteError};
pub use invariants::{ClusterView, History, Property, Violation};
pub use log::{Entry, Log, MemLog};
pub use message::{
    AlterPartitionRequest, AlterPartitionResponse, Effect, Effects, Envelope, FetchRequest,
    FetchResponse, FetchedRecords, LeaderAndIsr, Message, OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse, PartitionState, ProduceId, ReadAnswer, ReadId,
};
pub use replica::{
    FollowerPhase, FollowerProgress, FollowerState, Input as ReplicaInput, LeaderState,
    ParkedFetch, PendingWrite, Replica, Role, Timer,
};
pub use types::{
    Acks, BrokerEpoch, BrokerId, ControllerEpoch, LeaderEpoch, Node, Offset, PartitionEpoch,
    PartitionId, Tick,
};
