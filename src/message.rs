//! The messages of the protocol, and the effects a transition asks its driver to carry out.
//!
//! Messages are plain serde data: the models keep them in a simulated network, the runtime puts
//! them in length-prefixed frames. Every message names its partition, so one connection between
//! two brokers can carry the replication of all partitions, as in Kafka.

use crate::error::{AlterPartitionError, EpochError, ReadError, WriteError};
use crate::log::Entry;
use crate::types::{
    BrokerEpoch, BrokerId, ControllerEpoch, LeaderEpoch, Node, Offset, PartitionEpoch, PartitionId,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::collections::BTreeSet;

/// The controller's view of one partition, as sent in LeaderAndIsr and AlterPartition answers.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PartitionState {
    /// The assigned replicas (AR), in preference order.
    pub assigned: Vec<BrokerId>,
    pub leader: Option<BrokerId>,
    pub leader_epoch: LeaderEpoch,
    pub isr: BTreeSet<BrokerId>,
    /// Eligible Leader Replicas (KIP-966): out of the ISR, yet known to hold every committed record.
    pub elr: BTreeSet<BrokerId>,
    pub partition_epoch: PartitionEpoch,
    pub min_insync_replicas: usize,
}

impl PartitionState {
    /// The out-of-sync replicas: assigned but not in the ISR. Derived, never stored.
    pub fn osr(&self) -> Vec<BrokerId> {
        self.assigned
            .iter()
            .copied()
            .filter(|b| !self.isr.contains(b))
            .collect()
    }
}

/// A follower's pull (rule 4: it carries the follower's current leader epoch).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FetchRequest {
    pub partition: PartitionId,
    pub replica: BrokerId,
    /// The fetching broker's incarnation (KIP-903).
    pub broker_epoch: BrokerEpoch,
    pub current_leader_epoch: LeaderEpoch,
    pub fetch_offset: Offset,
}

/// The leader's answer to a Fetch.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FetchResponse<R> {
    pub partition: PartitionId,
    pub leader_epoch: LeaderEpoch,
    /// Echo of the request's fetch offset, so a late duplicate is recognised.
    pub fetch_offset: Offset,
    pub result: Result<FetchedRecords<R>, EpochError>,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FetchedRecords<R> {
    pub entries: Vec<Entry<R>>,
    pub high_watermark: Offset,
}

/// A follower's truncation handshake (rule 3).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct OffsetForLeaderEpochRequest {
    pub partition: PartitionId,
    pub replica: BrokerId,
    pub current_leader_epoch: LeaderEpoch,
    /// The follower's latest epoch (or the epoch it asks about after a previous answer).
    pub requested_epoch: LeaderEpoch,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct OffsetForLeaderEpochResponse {
    pub partition: PartitionId,
    pub leader_epoch: LeaderEpoch,
    pub requested_epoch: LeaderEpoch,
    /// The largest epoch ≤ the requested one that the leader knows, and where it ends;
    /// `Ok(None)` when the leader knows no epoch that old.
    pub result: Result<Option<(LeaderEpoch, Offset)>, EpochError>,
}

/// A leader's request to change the ISR (rule 7).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AlterPartitionRequest {
    pub partition: PartitionId,
    pub leader: BrokerId,
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: PartitionEpoch,
    pub new_isr: BTreeSet<BrokerId>,
    /// For each replica the request adds, the incarnation whose fetches proved it caught up
    /// (KIP-903): the controller refuses the change if that broker has re-registered since.
    pub broker_epochs: BTreeMap<BrokerId, BrokerEpoch>,
    /// The newest controller epoch the leader has seen: a controller older than that is a
    /// deposed one and must not decide (KAFKA-14154).
    pub controller_epoch: ControllerEpoch,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AlterPartitionResponse {
    pub partition: PartitionId,
    /// The version the request was based on, and the ISR it proposed: a leader acts only on the
    /// answer to the proposal it has pending, never on a late answer to an older one.
    pub request_partition_epoch: PartitionEpoch,
    pub requested_isr: BTreeSet<BrokerId>,
    /// The request's broker epochs. Two proposals of the same ISR on the same version differ
    /// in them when the first was built on a fetch by an incarnation that has since
    /// re-registered; a late (or duplicated) refusal of the first must not cancel the second.
    pub requested_broker_epochs: BTreeMap<BrokerId, BrokerEpoch>,
    /// The epoch of the controller that answered (rule 11).
    pub controller_epoch: ControllerEpoch,
    pub result: Result<PartitionState, AlterPartitionError>,
}

/// The controller's order to a broker about one partition.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct LeaderAndIsr {
    pub partition: PartitionId,
    pub state: PartitionState,
    /// The receiving broker's current incarnation, which its fetches must carry.
    pub broker_epoch: BrokerEpoch,
    /// The epoch of the controller that sent it (rule 11).
    pub controller_epoch: ControllerEpoch,
}

/// Everything that travels between brokers and the controller.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Message<R> {
    Fetch(FetchRequest),
    FetchResponse(FetchResponse<R>),
    OffsetForLeaderEpoch(OffsetForLeaderEpochRequest),
    OffsetForLeaderEpochResponse(OffsetForLeaderEpochResponse),
    AlterPartition(AlterPartitionRequest),
    AlterPartitionResponse(AlterPartitionResponse),
    LeaderAndIsr(LeaderAndIsr),
    /// A broker (re)joins the cluster, saying whether its last shutdown was clean (KIP-966).
    BrokerRegistration {
        broker: BrokerId,
        clean_shutdown: bool,
    },
    BrokerHeartbeat {
        broker: BrokerId,
    },
}

impl<R> Message<R> {
    /// The TLA+-style name of the message kind, for traces and diagrams.
    pub fn kind(&self) -> &'static str {
        match self {
            Message::Fetch(_) => "Fetch",
            Message::FetchResponse(_) => "FetchResponse",
            Message::OffsetForLeaderEpoch(_) => "OffsetForLeaderEpoch",
            Message::OffsetForLeaderEpochResponse(_) => "OffsetForLeaderEpochResponse",
            Message::AlterPartition(_) => "AlterPartition",
            Message::AlterPartitionResponse(_) => "AlterPartitionResponse",
            Message::LeaderAndIsr(_) => "LeaderAndIsr",
            Message::BrokerRegistration { .. } => "BrokerRegistration",
            Message::BrokerHeartbeat { .. } => "BrokerHeartbeat",
        }
    }

    /// The partition a message is about; `None` for the broker-wide ones.
    pub fn partition(&self) -> Option<PartitionId> {
        match self {
            Message::Fetch(m) => Some(m.partition),
            Message::FetchResponse(m) => Some(m.partition),
            Message::OffsetForLeaderEpoch(m) => Some(m.partition),
            Message::OffsetForLeaderEpochResponse(m) => Some(m.partition),
            Message::AlterPartition(m) => Some(m.partition),
            Message::AlterPartitionResponse(m) => Some(m.partition),
            Message::LeaderAndIsr(m) => Some(m.partition),
            Message::BrokerRegistration { .. } | Message::BrokerHeartbeat { .. } => None,
        }
    }
}

/// A message with its sender and receiver.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Envelope<R> {
    pub from: Node,
    pub to: Node,
    pub message: Message<R>,
}

/// Identifies a producer's write so its acknowledgement can find it. Chosen by the driver.
pub type ProduceId = u64;

/// Identifies a consumer's read so its answer can find it. Chosen by the driver.
pub type ReadId = u64;

/// What a consumer's read found.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ReadAnswer<R> {
    /// Committed entries from the one holding the offset asked for, in offset order.
    pub entries: Vec<Entry<R>>,
    pub high_watermark: Offset,
    pub log_start_offset: Offset,
}

/// What a transition asks its driver to do, or tells it happened. The log itself is changed
/// through the [`crate::Log`] trait; these are the rest.
///
/// The order of a step's effects is the order to carry them out in, and what must be durable
/// before something may leave is the core's concern: under `flush=always` an effect that reports
/// or acknowledges data (a follower's next Fetch, an acks=0/1 answer) is held back by the core
/// until the driver says the log is durable that far ([`crate::ReplicaInput::Flushed`]); the
/// step that appended asks for that with [`Effect::Flush`]. A driver carries out effects as they
/// come and never holds or drops one.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Effect<R> {
    /// Send a message.
    Send(Envelope<R>),
    /// A write is acknowledged: acks=all once committed (the high watermark passed it),
    /// acks=0/1 once the leader holds it (durably, under `flush=always`). Answer the producer.
    Acknowledge {
        partition: PartitionId,
        id: ProduceId,
        base_offset: Offset,
    },
    /// A pending acks=all write can no longer be acknowledged by this replica.
    FailWrite {
        partition: PartitionId,
        id: ProduceId,
        error: WriteError,
    },
    /// The log was truncated from `from` (its old LEO) down to `to`.
    Truncated {
        partition: PartitionId,
        from: Offset,
        to: Offset,
    },
    /// The high watermark moved (consumers waiting for data may find some).
    HighWatermark {
        partition: PartitionId,
        offset: Offset,
    },
    /// Make the log durable up to at least `up_to` (one fsync may serve several of these: group
    /// commit), then step the replica with `Flushed`.
    Flush {
        partition: PartitionId,
        up_to: Offset,
    },
    /// Write the high watermark checkpoint (what a restart after an unclean crash starts from).
    CheckpointHighWatermark {
        partition: PartitionId,
        offset: Offset,
    },
    /// The answer to a consumer's read.
    Read {
        partition: PartitionId,
        id: ReadId,
        result: Result<ReadAnswer<R>, ReadError>,
    },
    /// The controller heard a heartbeat from a broker it has fenced: the broker must register
    /// again, as a new incarnation, to be part of the cluster.
    MustRegister { broker: BrokerId },
}

/// The effects of one transition, in order.
pub type Effects<R> = Vec<Effect<R>>;
