//! Everything that can happen to a replica, as one type: the input of [`crate::Replica::step`].

use crate::message::{DeleteId, Message, ProduceId, ReadId};
use crate::producers::ProducerBatch;
use crate::types::{Acks, BrokerId, Node, Offset};
use serde::{Deserialize, Serialize};

/// One input to a replica. A driver feeds them one at a time, each with the time it happened
/// at, and carries out the effects each step returns, in order.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Input<R> {
    /// A protocol message arrived from `from` (a peer broker or the controller). The driver
    /// checks, as its connection does, that it came from `from` and is meant for this broker.
    Message {
        /// The sender.
        from: Node,
        /// What it sent.
        message: Message<R>,
    },
    /// A producer's records, to append as leader. Answered by [`crate::Effect::Acknowledge`]
    /// or [`crate::Effect::FailWrite`] carrying `id`.
    ///
    /// An idempotent producer's write is one batch with its stamp (`producer`). A retry of a
    /// batch the log holds (its first attempt was appended, here or by an earlier leader, and
    /// never answered) is answered as that write, with its offsets, and nothing is appended;
    /// a gap in the producer's sequence numbers or a fenced producer epoch is refused (rule 14,
    /// [`crate::Producers::admit`]).
    Write {
        /// The driver's id for the write, which its answer carries.
        id: ProduceId,
        /// The records, appended in order at the LEO under the leader's epoch.
        records: Vec<R>,
        /// When to acknowledge: not at all, once the leader holds the records, or once they
        /// are committed.
        acks: Acks,
        /// The idempotent producer's stamp of the write's one batch; `None` for a plain
        /// producer (and in traces written before it was here).
        #[serde(default)]
        producer: Option<ProducerBatch>,
    },
    /// A consumer reads committed records from `from`: at most `max_entries` entries and about
    /// `max_bytes` bytes (one entry always, so a large entry cannot stall it). Answered by
    /// [`crate::Effect::Read`] carrying `id`.
    Read {
        /// The driver's id for the read, which its answer carries.
        id: ReadId,
        /// The offset to read from: between the log start offset and the high watermark.
        from: Offset,
        /// The most entries to return.
        max_entries: usize,
        /// The most bytes of records to return, as [`crate::Log::size`] counts them (but always
        /// one entry, if there is one).
        max_bytes: usize,
    },
    /// DeleteRecords (KIP-107), to the leader: make `before` the log start offset, so that
    /// every record below it is gone. Refused with OffsetOutOfRange beyond the high watermark
    /// (rule 17): only committed records may be deleted. Answered by
    /// [`crate::Effect::RecordsDeleted`] carrying `id`; followers follow the new log start
    /// from their next Fetch answer.
    DeleteRecords {
        /// The driver's id for the request, which its answer carries.
        id: DeleteId,
        /// The new log start offset (the start of the entry holding it, if it lies inside one).
        before: Offset,
    },
    /// Retention, on any replica: the driver's retention policy (time, size) found the
    /// records below `before` expired. The log start moves there, but never past this
    /// replica's high watermark (rule 17): a follower must not delete what it may still have
    /// to serve as leader. Nothing is answered.
    Retain {
        /// The first offset retention keeps.
        before: Offset,
    },
    /// Compaction, on any replica: the driver's cleaner may remove the records that a later
    /// record of the same key supersedes ([`crate::Log::compact`]), up to this replica's high
    /// watermark (rule 18), so that what supersedes a removed record is committed. Nothing is
    /// answered.
    Compact,
    /// Time passed: every timer due by now (the step's `now`) fires.
    Tick,
    /// One timer fires, whatever the time. A model checker, which has no clock, uses this: any
    /// amount of time may pass between two steps.
    Timeout(Timer),
    /// The log is durable up to `offset` (the driver's flush completed).
    Flushed(Offset),
    /// The broker stops: cleanly (its log flushed first by the driver, pending writes failed),
    /// or not (a power loss: what the log had not made durable is gone, nothing is answered).
    Stop {
        /// True for a clean (controlled) shutdown, false for a power loss.
        clean: bool,
    },
    /// The broker starts again on what is durable, as a follower of nobody until the controller
    /// says otherwise.
    Restart,
}

/// The timers of a replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Timer {
    /// A follower's request went unanswered (lost, or answered with an error): ask again.
    Request,
    /// A leader's AlterPartition went unanswered: send it again.
    AlterPartition,
    /// A leader held the Fetches that found nothing new long enough: answer them now.
    FetchWait,
    /// A follower of this leader has not caught up for `replica_lag_max`: propose dropping it
    /// from the ISR (`LeaderShrinkIsr`).
    Lag(BrokerId),
    /// The high watermark checkpoint is due.
    Checkpoint,
}
