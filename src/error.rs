//! Typed errors of the core.

use crate::types::{BrokerId, ControllerEpoch, LeaderEpoch, Offset, PartitionEpoch};
use serde::{Deserialize, Serialize};
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
    NotEnoughReplicas { isr: usize, min: usize },
    /// The log did not take the records: its storage failed (Kafka's KAFKA_STORAGE_ERROR). The
    /// driver stops the replica; the producer retries with the next leader.
    #[error("KAFKA_STORAGE_ERROR: the leader's log did not take the records")]
    LogFailed,
    /// A retry named records the log does not hold (`Replica::leader_retry`).
    #[error("offsets {base_offset}..{end_offset} are not in the log")]
    NotInLog {
        base_offset: Offset,
        end_offset: Offset,
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

/// Why a leader could not propose an ISR change.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Error, Serialize, Deserialize,
)]
pub enum IsrChangeError {
    #[error("this replica does not lead the partition")]
    NotLeader,
    #[error("an AlterPartition is already pending")]
    ChangePending,
    #[error("{0} is not a follower in the ISR")]
    NotAFollowerInIsr(BrokerId),
}

/// Why the controller refused an AlterPartition (rule 7).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Error, Serialize, Deserialize)]
pub enum AlterPartitionError {
    #[error("the sender does not lead the partition")]
    NotLeader,
    #[error("FENCED_LEADER_EPOCH: request at {request}, controller at {current}")]
    FencedLeaderEpoch {
        request: LeaderEpoch,
        current: LeaderEpoch,
    },
    #[error("INVALID_UPDATE_VERSION: request at {request}, controller at {current}")]
    InvalidUpdateVersion {
        request: PartitionEpoch,
        current: PartitionEpoch,
    },
    #[error("INELIGIBLE_REPLICA: {0} is not alive, or has re-registered since it fetched")]
    IneligibleReplica(BrokerId),
    #[error("unknown partition")]
    UnknownPartition,
    /// The leader has seen a newer controller than the one it asked: this one is deposed and
    /// must not decide (KAFKA-14154). The leader keeps its proposal and asks the current one.
    #[error("NOT_CONTROLLER: request from a broker at {request}, this controller is at {current}")]
    NotController {
        request: ControllerEpoch,
        current: ControllerEpoch,
    },
}

/// Why a consumer's read was refused.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Error, Serialize, Deserialize,
)]
pub enum ReadError {
    #[error("NOT_LEADER_OR_FOLLOWER: this replica does not lead the partition")]
    NotLeader,
    #[error("OFFSET_OUT_OF_RANGE")]
    OffsetOutOfRange,
}

/// A value from outside (a command line, a config file) that names nothing known.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("invalid {what} `{value}`: expected one of {expected}")]
pub struct ParseError {
    pub what: &'static str,
    pub value: String,
    pub expected: &'static str,
}

impl ParseError {
    pub fn new(what: &'static str, value: &str, expected: &'static str) -> Self {
        ParseError {
            what,
            value: value.to_string(),
            expected,
        }
    }
}
