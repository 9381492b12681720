//! Typed errors of the core.

use crate::types::{BrokerId, ControllerEpoch, LeaderEpoch, PartitionEpoch};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use thiserror::Error;

/// Why a leader refused a producer's write.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Error, Serialize, Deserialize,
)]
pub enum WriteError {
    /// This replica does not lead the partition (Kafka's NOT_LEADER_OR_FOLLOWER).
    #[error("NOT_LEADER_OR_FOLLOWER: this replica does not lead the partition")]
    NotLeader,
    /// acks=all while the ISR is smaller than `min.insync.replicas` (rule 9).
    #[error("NOT_ENOUGH_REPLICAS: the ISR has {isr} members, min.insync.replicas is {min}")]
    NotEnoughReplicas {
        /// How many members the ISR the controller last confirmed has.
        isr: usize,
        /// The partition's `min.insync.replicas`.
        min: usize,
    },
    /// The log did not take the records: its storage failed (Kafka's KAFKA_STORAGE_ERROR). The
    /// driver stops the replica; the producer retries with the next leader.
    #[error("KAFKA_STORAGE_ERROR: the leader's log did not take the records")]
    LogFailed,
    /// An idempotent producer's write holds more than one batch: its stamp would name them
    /// all (Kafka's INVALID_RECORD; clients send one batch per partition).
    #[error("INVALID_RECORD: an idempotent producer's write holds {count} batches, not one")]
    NotOneBatch {
        /// How many records (batches) the write held.
        count: usize,
    },
    /// An idempotent producer's batch does not follow its last one (Kafka's
    /// OUT_OF_ORDER_SEQUENCE_NUMBER): a batch in between is missing, or a new producer epoch
    /// does not start at 0. Nothing is stored.
    #[error("OUT_OF_ORDER_SEQUENCE_NUMBER: producer {producer_id} sent sequence {got}, the log expects {expected}")]
    OutOfOrderSequence {
        /// The producer.
        producer_id: i64,
        /// The sequence number the log's latest batch of it calls for.
        expected: i32,
        /// The batch's first sequence number.
        got: i32,
    },
    /// An idempotent producer's batch carries an older epoch of its id than the log's latest
    /// (Kafka's INVALID_PRODUCER_EPOCH): a newer producer with the same id fenced it.
    #[error("INVALID_PRODUCER_EPOCH: producer {producer_id} wrote in epoch {epoch}, the log holds epoch {current}")]
    InvalidProducerEpoch {
        /// The producer.
        producer_id: i64,
        /// The batch's epoch.
        epoch: i16,
        /// The latest epoch the log holds of it.
        current: i16,
    },
}

/// Why a request was answered with an error instead of data.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Error, Serialize, Deserialize,
)]
pub enum EpochError {
    /// The receiver does not lead the partition.
    #[error("NOT_LEADER_OR_FOLLOWER")]
    NotLeader,
    /// The sender's epoch is older than the receiver's (KIP-320).
    #[error("FENCED_LEADER_EPOCH")]
    FencedLeaderEpoch,
    /// The sender's epoch is newer than the receiver's: the receiver has not caught up (KIP-320).
    #[error("UNKNOWN_LEADER_EPOCH")]
    UnknownLeaderEpoch,
    /// The fetch offset lies outside the leader's log.
    #[error("OFFSET_OUT_OF_RANGE")]
    OffsetOutOfRange,
    /// The Fetch comes from an older incarnation of the follower than one the leader already
    /// heard from (KIP-903): a process that has since crashed and registered again.
    #[error("STALE_BROKER_EPOCH")]
    StaleBrokerEpoch,
}

/// Why the controller refused an AlterPartition (rule 7).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Error, Serialize, Deserialize)]
pub enum AlterPartitionError {
    /// The sender is not the partition's leader at the controller, or the ISR it proposes
    /// leaves itself out.
    #[error("the sender does not lead the partition")]
    NotLeader,
    /// The request was sent in another leader epoch than the controller's: a leader of an
    /// earlier term, deposed since (Kafka's FENCED_LEADER_EPOCH).
    #[error("FENCED_LEADER_EPOCH: request at {request}, controller at {current}")]
    FencedLeaderEpoch {
        /// The leader epoch the request was sent in.
        request: LeaderEpoch,
        /// The partition's leader epoch at the controller.
        current: LeaderEpoch,
    },
    /// The compare-and-set failed: the request was built on another version of the partition
    /// state than the controller's. A duplicate of an accepted request is refused this way, so
    /// the controller also sends the leader a LeaderAndIsr with the current state.
    #[error("INVALID_UPDATE_VERSION: request at {request}, controller at {current}")]
    InvalidUpdateVersion {
        /// The partition epoch the request was based on.
        request: PartitionEpoch,
        /// The partition epoch at the controller.
        current: PartitionEpoch,
    },
    /// Replicas the request adds that are not assigned, not alive, or registered since in
    /// another broker epoch than the one whose Fetch proved them caught up (KIP-903): a
    /// restarted incarnation may have lost what the old one fetched. Every one of them, so the
    /// answer does not depend on which the controller looked at first (it would on broker
    /// names, which the model checker's symmetry reduction assumes nothing does).
    #[error("INELIGIBLE_REPLICA: {} not alive, or re-registered since they fetched", names(.0))]
    IneligibleReplicas(BTreeSet<BrokerId>),
    /// The controller holds no such partition (never created, or deleted).
    #[error("unknown partition")]
    UnknownPartition,
    /// The leader has seen a newer controller than the one it asked: this one is deposed and
    /// must not decide (KAFKA-14154). The leader keeps its proposal and asks the current one.
    #[error("NOT_CONTROLLER: request from a broker at {request}, this controller is at {current}")]
    NotController {
        /// The newest controller epoch the leader had heard of.
        request: ControllerEpoch,
        /// The epoch of the controller that refused.
        current: ControllerEpoch,
    },
}

/// Why a consumer's read, or a DeleteRecords, was refused.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Error, Serialize, Deserialize,
)]
pub enum ReadError {
    /// This replica does not lead the partition: consumers read from the leader.
    #[error("NOT_LEADER_OR_FOLLOWER: this replica does not lead the partition")]
    NotLeader,
    /// The read starts below the log start offset or above the high watermark: only committed
    /// records are served. For DeleteRecords: the offset lies beyond the high watermark.
    #[error("OFFSET_OUT_OF_RANGE")]
    OffsetOutOfRange,
}

/// A value from outside (a command line, a config file) that names nothing known.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("invalid {what} `{value}`: expected one of {expected}")]
pub struct ParseError {
    /// What was being parsed: a setting's name (`acks`, `flush`, ...), or `rule` for an unknown
    /// rule switch.
    pub what: &'static str,
    /// The text given.
    pub value: String,
    /// The accepted values, comma-separated.
    pub expected: &'static str,
}

impl ParseError {
    /// The error for `value`, given for `what`, which accepts `expected`.
    pub fn new(what: &'static str, value: &str, expected: &'static str) -> Self {
        ParseError {
            what,
            value: value.to_string(),
            expected,
        }
    }
}

/// Why a [`Config`](crate::Config) cannot be run ([`Config::validate`](crate::Config::validate)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Error, Serialize, Deserialize)]
pub enum ConfigError {
    /// A setting below its least meaningful value: no replica could be in sync, no Fetch
    /// answer could carry a record, or a timer would fire on every tick.
    #[error("{setting} is {value}, but must be at least {least}: {why}")]
    TooSmall {
        /// The setting's field name in [`Config`](crate::Config).
        setting: &'static str,
        /// Its value (ticks for times).
        value: u64,
        /// The least value it may have.
        least: u64,
        /// Why a smaller one cannot run.
        why: &'static str,
    },
}

/// `b1, b2`: brokers for an error message.
fn names(brokers: &BTreeSet<BrokerId>) -> String {
    let names: Vec<String> = brokers.iter().map(ToString::to_string).collect();
    names.join(", ")
}
