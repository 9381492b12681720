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
    /// The replica that leads the partition; `None` while it is leaderless (its leader was
    /// fenced and no candidate could be elected yet).
    pub leader: Option<BrokerId>,
    /// The leader epoch of the current (or, while leaderless, the last) leader: bumped at every
    /// election (rule 2), not when the leader is fenced.
    pub leader_epoch: LeaderEpoch,
    /// The in-sync replicas as the controller has committed them: the truth, which the leader's
    /// cached ISR follows. A leader, when set, is a member.
    pub isr: BTreeSet<BrokerId>,
    /// Eligible Leader Replicas (KIP-966): out of the ISR, yet known to hold every committed record.
    pub elr: BTreeSet<BrokerId>,
    /// The version of this state, bumped at every change of leader, ISR or ELR: what an
    /// AlterPartition compares-and-sets against (rule 7).
    pub partition_epoch: PartitionEpoch,
    /// The partition's `min.insync.replicas` (a topic config; [`crate::Config`]'s default at
    /// creation): the ISR size below which acks=all writes are refused (rule 9) and, under
    /// strict min ISR, the high watermark stops (rule 5).
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
    /// The partition fetched.
    pub partition: PartitionId,
    /// The follower fetching (Kafka's replica id).
    pub replica: BrokerId,
    /// The fetching broker's incarnation (KIP-903).
    pub broker_epoch: BrokerEpoch,
    /// The leader epoch the follower is in; with epoch fencing the leader answers only a Fetch
    /// in its own epoch (rule 4).
    pub current_leader_epoch: LeaderEpoch,
    /// The follower's log end offset: where the records it asks for start, and the progress
    /// the leader counts towards the high watermark and ISR membership.
    pub fetch_offset: Offset,
    /// The follower's high watermark and log start: what it has heard of the leader's. A
    /// leader holds a Fetch that finds nothing new only briefly (`high_watermark_wait`) while
    /// they lag its own, so that a follower hears a high watermark or log start that moved
    /// after its last answer soon, even on a partition no record comes to (a follower that
    /// restarted with an old checkpoint, or whose Fetch proved the last record replicated).
    pub high_watermark: Offset,
    /// The follower's log start (see `high_watermark`).
    pub log_start_offset: Offset,
}

/// The leader's answer to a Fetch.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FetchResponse<R> {
    /// The partition fetched.
    pub partition: PartitionId,
    /// The answering replica's leader epoch (the request's own when a broker without the
    /// replica refuses it); with epoch fencing a follower acts only on an answer in its own
    /// epoch (rule 4).
    pub leader_epoch: LeaderEpoch,
    /// Echo of the request's fetch offset, so a late duplicate is recognised.
    pub fetch_offset: Offset,
    /// The records, or why the leader refused the Fetch.
    pub result: Result<FetchedRecords<R>, EpochError>,
    /// The answering replica's log start offset, in every answer (KIP-107): a follower moves
    /// its own up to it (never past its own high watermark, rule 17), and a follower whose
    /// fetch offset lies below it, refused with OffsetOutOfRange, starts afresh there.
    #[serde(default)]
    pub log_start_offset: Offset,
    /// The answering replica's first entry boundary at or above its log start
    /// ([`crate::log::first_boundary`]): where a follower whose log lies wholly below the log
    /// start starts afresh. The log start itself unless DeleteRecords put it inside a record
    /// batch (zero in traces written before).
    #[serde(default)]
    pub first_boundary: Offset,
}

impl<R> FetchResponse<R> {
    /// Where a follower refused for fetching below this answer's log start starts afresh.
    pub fn fresh_start(&self) -> Offset {
        self.first_boundary.max(self.log_start_offset)
    }
}

/// What a Fetch the leader served carries.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FetchedRecords<R> {
    /// Entries from the fetch offset on, in offset order, within `fetch_max_entries` and
    /// `fetch_max_bytes` (but always the first); empty when the follower is at the leader's
    /// LEO.
    pub entries: Vec<Entry<R>>,
    /// The leader's high watermark after counting this Fetch: the follower takes it, capped at
    /// its own LEO (it may move down).
    pub high_watermark: Offset,
}

/// A follower's truncation handshake (rule 3).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct OffsetForLeaderEpochRequest {
    /// The partition reconciled.
    pub partition: PartitionId,
    /// The follower asking.
    pub replica: BrokerId,
    /// The leader epoch the follower is in; fenced as a Fetch's is (rule 4).
    pub current_leader_epoch: LeaderEpoch,
    /// The follower's latest epoch (or the epoch it asks about after a previous answer).
    pub requested_epoch: LeaderEpoch,
}

/// The leader's answer to an OffsetForLeaderEpoch: where the asked-for epoch ends in its log.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct OffsetForLeaderEpochResponse {
    /// The partition reconciled.
    pub partition: PartitionId,
    /// The answering replica's leader epoch (the request's own when a broker without the
    /// replica refuses it); fenced as a Fetch answer's is (rule 4).
    pub leader_epoch: LeaderEpoch,
    /// Echo of the request's epoch: a follower acts only on the answer to the question it is
    /// asking now.
    pub requested_epoch: LeaderEpoch,
    /// The largest epoch ≤ the requested one that the leader knows, and where it ends;
    /// `Ok(None)` when the leader knows no epoch that old.
    pub result: Result<Option<(LeaderEpoch, Offset)>, EpochError>,
}

/// A leader's request to change the ISR (rule 7).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AlterPartitionRequest {
    /// The partition whose ISR changes.
    pub partition: PartitionId,
    /// The leader asking; the controller refuses anyone else (`NotLeader`).
    pub leader: BrokerId,
    /// The leader's epoch; the controller refuses another (`FencedLeaderEpoch`).
    pub leader_epoch: LeaderEpoch,
    /// The version of the partition state the proposal is based on: the compare-and-set's
    /// expected value (`InvalidUpdateVersion` if the controller's differs).
    pub partition_epoch: PartitionEpoch,
    /// The whole ISR proposed (not a delta): the current one with followers added or one
    /// removed.
    pub new_isr: BTreeSet<BrokerId>,
    /// For each replica the request adds, the incarnation whose fetches proved it caught up
    /// (KIP-903): the controller refuses the change if that broker has re-registered since.
    pub broker_epochs: BTreeMap<BrokerId, BrokerEpoch>,
    /// The newest controller epoch the leader has seen: a controller older than that is a
    /// deposed one and must not decide (KAFKA-14154).
    pub controller_epoch: ControllerEpoch,
}

/// The controller's answer to an AlterPartition. It echoes what identifies the proposal, so the
/// leader can tell the answer to its pending one from a late or duplicated answer.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AlterPartitionResponse {
    /// The partition whose ISR was to change.
    pub partition: PartitionId,
    /// The version the request was based on, and the ISR it proposed: a leader acts only on the
    /// answer to the proposal it has pending, never on a late answer to an older one.
    pub request_partition_epoch: PartitionEpoch,
    /// The ISR the request proposed (see `request_partition_epoch`).
    pub requested_isr: BTreeSet<BrokerId>,
    /// The request's broker epochs. Two proposals of the same ISR on the same version differ
    /// in them when the first was built on a fetch by an incarnation that has since
    /// re-registered; a late (or duplicated) refusal of the first must not cancel the second.
    pub requested_broker_epochs: BTreeMap<BrokerId, BrokerEpoch>,
    /// The epoch of the controller that answered (rule 11).
    pub controller_epoch: ControllerEpoch,
    /// The partition's new state, in a new partition epoch, or why the change was refused.
    pub result: Result<PartitionState, AlterPartitionError>,
}

/// The controller's order to a broker about one partition.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct LeaderAndIsr {
    /// The partition it is about.
    pub partition: PartitionId,
    /// The partition's whole state at the controller: the receiver leads, follows or learns an
    /// ISR change from it, and ignores it unless its (leader epoch, partition epoch) is newer
    /// than the one it acts on.
    pub state: PartitionState,
    /// The receiving broker's current incarnation, which its fetches must carry.
    pub broker_epoch: BrokerEpoch,
    /// The epoch of the controller that sent it (rule 11).
    pub controller_epoch: ControllerEpoch,
}

/// Everything that travels between brokers and the controller.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Message<R> {
    /// Follower → leader: records from its log end offset on, which also reports its progress.
    Fetch(FetchRequest),
    /// Leader → follower: the answer to a Fetch.
    FetchResponse(FetchResponse<R>),
    /// Follower → leader: where does this epoch end in your log? (rule 3)
    OffsetForLeaderEpoch(OffsetForLeaderEpochRequest),
    /// Leader → follower: the answer to an OffsetForLeaderEpoch.
    OffsetForLeaderEpochResponse(OffsetForLeaderEpochResponse),
    /// Leader → controller: a proposed ISR change (Kafka's AlterPartition, formerly AlterIsr).
    AlterPartition(AlterPartitionRequest),
    /// Controller → leader: the answer to an AlterPartition.
    AlterPartitionResponse(AlterPartitionResponse),
    /// Controller → broker: a partition's current state, which makes the broker lead or follow.
    LeaderAndIsr(LeaderAndIsr),
    /// A broker (re)joins the cluster, saying whether its last shutdown was clean (KIP-966).
    BrokerRegistration {
        /// The broker registering.
        broker: BrokerId,
        /// Whether its last run stopped cleanly, its log flushed. If not, it may have lost
        /// records it had acknowledged, and with ELR the controller drops it from the ELR.
        clean_shutdown: bool,
    },
    /// Broker → controller: the broker is alive. A session whose heartbeats stop for
    /// `session_timeout` ends with the broker fenced (rule 12); a fenced broker's heartbeat is
    /// answered with [`crate::ControllerEffect::MustRegister`].
    BrokerHeartbeat {
        /// The broker heartbeating.
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
    /// The sender.
    pub from: Node,
    /// The receiver, whom the driver delivers it to.
    pub to: Node,
    /// What is sent.
    pub message: Message<R>,
}

impl<R> Envelope<R> {
    /// What broker `me` answers a follower's request for a partition it hosts no replica of:
    /// it has not heard of the partition yet (the controller's LeaderAndIsr reaches brokers in
    /// any order, so a follower may ask its new leader first), or no longer has it.
    /// NOT_LEADER_OR_FOLLOWER, as Kafka answers: an error answer makes the follower ask again
    /// after `retry_backoff`, where a request left unanswered would wait out its request timer
    /// (for a Fetch, `fetch_max_wait` longer). `None` for anything but a request of a broker's.
    pub fn refused_without_replica(&self, me: BrokerId) -> Option<Envelope<R>> {
        let Node::Broker(follower) = self.from else {
            return None;
        };
        let message = match &self.message {
            Message::Fetch(req) => Message::FetchResponse(FetchResponse {
                partition: req.partition,
                leader_epoch: req.current_leader_epoch,
                fetch_offset: req.fetch_offset,
                result: Err(EpochError::NotLeader),
                log_start_offset: Offset(0),
                first_boundary: Offset(0),
            }),
            Message::OffsetForLeaderEpoch(req) => {
                Message::OffsetForLeaderEpochResponse(OffsetForLeaderEpochResponse {
                    partition: req.partition,
                    leader_epoch: req.current_leader_epoch,
                    requested_epoch: req.requested_epoch,
                    result: Err(EpochError::NotLeader),
                })
            }
            _ => return None,
        };
        Some(Envelope {
            from: Node::Broker(me),
            to: Node::Broker(follower),
            message,
        })
    }
}

/// Identifies a producer's write so its acknowledgement can find it. Chosen by the driver.
pub type ProduceId = u64;

/// Identifies a consumer's read so its answer can find it. Chosen by the driver.
pub type ReadId = u64;

/// Identifies a DeleteRecords request so its answer can find it. Chosen by the driver.
pub type DeleteId = u64;

/// What a consumer's read found.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ReadAnswer<R> {
    /// Committed entries from the one holding the offset asked for, in offset order.
    pub entries: Vec<Entry<R>>,
    /// The leader's high watermark: the read returns nothing at or past it, and a consumer
    /// caught up to it waits for [`Effect::HighWatermark`].
    pub high_watermark: Offset,
    /// The leader's log start offset: reads below it are out of range.
    pub log_start_offset: Offset,
}

/// What a replica step asks its driver to do, or tells it happened. The log itself is changed
/// through the [`crate::Log`] trait; these are the rest. (A controller step has its own,
/// [`crate::ControllerEffect`].)
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
        /// The partition written.
        partition: PartitionId,
        /// The write's id, as the driver gave it.
        id: ProduceId,
        /// The offset of the write's first record.
        base_offset: Offset,
    },
    /// A write is refused, or a pending acks=all write can no longer be acknowledged by this
    /// replica: answer the producer with the error (it retries elsewhere or later).
    FailWrite {
        /// The partition written.
        partition: PartitionId,
        /// The write's id, as the driver gave it.
        id: ProduceId,
        /// Why: the write was refused at once, or, for a pending acks=all write,
        /// [`WriteError::NotLeader`]: the leader's term ended (another leader, a new epoch, a
        /// clean stop) before the write was committed.
        error: WriteError,
    },
    /// The log was truncated from `from` (its old LEO) down to `to`.
    Truncated {
        /// The partition truncated.
        partition: PartitionId,
        /// The log end offset before the truncation.
        from: Offset,
        /// The log end offset after it: every entry at or above it is gone.
        to: Offset,
    },
    /// The high watermark moved (consumers waiting for data may find some).
    HighWatermark {
        /// The partition.
        partition: PartitionId,
        /// The new high watermark: records below it are committed as far as this replica knows.
        offset: Offset,
    },
    /// Make the log durable up to at least `up_to` (one fsync may serve several of these: group
    /// commit), then step the replica with `Flushed`.
    Flush {
        /// The partition whose log to flush.
        partition: PartitionId,
        /// The log end offset after the append that asks: what must be durable.
        up_to: Offset,
    },
    /// Write the high watermark checkpoint (what a restart after an unclean crash starts from).
    CheckpointHighWatermark {
        /// The partition.
        partition: PartitionId,
        /// The high watermark to write, never above the flushed offset; it may be lower than
        /// the last one written (after a truncation).
        offset: Offset,
    },
    /// The answer to a consumer's read.
    Read {
        /// The partition read.
        partition: PartitionId,
        /// The read's id, as the driver gave it.
        id: ReadId,
        /// The committed records found, or why the read was refused.
        result: Result<ReadAnswer<R>, ReadError>,
    },
    /// The answer to a DeleteRecords ([`crate::ReplicaInput::DeleteRecords`]).
    RecordsDeleted {
        /// The partition.
        partition: PartitionId,
        /// The request's id, as the driver gave it.
        id: DeleteId,
        /// The leader's log start offset after it (Kafka's low watermark), or why it was
        /// refused: not the leader, or an offset beyond the high watermark (rule 17).
        result: Result<Offset, ReadError>,
    },
}

impl<R> Effect<R> {
    /// The message this effect sends, if it is a [`Effect::Send`].
    pub fn sent(&self) -> Option<&Envelope<R>> {
        match self {
            Effect::Send(envelope) => Some(envelope),
            _ => None,
        }
    }
}

/// The effects of one replica step, in order.
pub type Effects<R> = Vec<Effect<R>>;
