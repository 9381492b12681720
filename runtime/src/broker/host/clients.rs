//! The client side of the replica thread: producer writes and consumer reads.

use super::{Host, HostError};
use crate::broker::beside::{DeleteReply, ProduceReply, ReadReply};
use crate::storage::batch;
use bytes::Bytes;
use isr::{Acks, LeaderEpoch, Log, Offset, PartitionId, ReadError, ReplicaInput};
use isr_kafka::{ListedOffset, OffsetSpec};

impl Host {
    /// A producer's batches, a write for the leader: answered when the core acknowledges or
    /// fails it. An idempotent producer's batch goes with its stamp, and the core decides
    /// whether it is new, a retry of a stored batch, or out of sequence (rule 14).
    pub(super) fn on_produce(
        &mut self,
        partition: PartitionId,
        acks: Acks,
        batches: Vec<Bytes>,
        reply: ProduceReply,
    ) {
        let id = self.next_produce;
        self.next_produce += 1;
        let h = match self.hosted(partition) {
            Ok((_, h)) => h,
            Err(e) => {
                let _ = reply.send(Err(e));
                return;
            }
        };
        // Idempotent producers send one batch per partition; the stamp of the first names the
        // write, and the core refuses a stamped write of several (INVALID_RECORD).
        let producer = batches.iter().find_map(|b| batch::producer(b));
        h.waiting.insert(id, reply);
        let input = ReplicaInput::Write {
            id,
            records: batches,
            acks,
            producer,
        };
        self.step(partition, input);
    }

    /// A consumer's read of committed records, answered with the core's `Read`.
    pub(super) fn on_read(
        &mut self,
        partition: PartitionId,
        from: Offset,
        max_bytes: usize,
        reply: ReadReply,
    ) {
        let id = self.next_read;
        self.next_read += 1;
        let h = match self.hosted(partition) {
            Ok((_, h)) => h,
            Err(e) => {
                let _ = reply.send(Err(e));
                return;
            }
        };
        h.reading.insert(id, reply);
        let max_entries = self.cfg.fetch_max_entries;
        self.step(
            partition,
            ReplicaInput::Read {
                id,
                from,
                max_entries,
                max_bytes,
            },
        );
    }

    /// DeleteRecords, answered with the core's `RecordsDeleted`: the log start moves to the
    /// entry holding `before` (to the high watermark when `None`), never beyond the high
    /// watermark (rule 17).
    pub(super) fn on_delete_records(
        &mut self,
        partition: PartitionId,
        before: Option<Offset>,
        reply: DeleteReply,
    ) {
        let id = self.next_delete;
        self.next_delete += 1;
        let (replica, h) = match self.hosted(partition) {
            Ok(hosted) => hosted,
            Err(e) => {
                let _ = reply.send(Err(e));
                return;
            }
        };
        let before = before.unwrap_or(replica.high_watermark());
        h.deleting.insert(id, reply);
        self.step(partition, ReplicaInput::DeleteRecords { id, before });
    }

    /// [`super::Command::Coordinating`]: NOT_LEADER_OR_FOLLOWER unless this broker leads the
    /// partition; the HW up to which it may load the partition's groups once the core says it
    /// may ([`isr::group::load_point`]).
    pub(super) fn coordinating(
        &mut self,
        partition: PartitionId,
    ) -> Result<Option<(LeaderEpoch, Offset)>, HostError> {
        let rules = self.cfg.rules;
        let (replica, _) = self.hosted(partition)?;
        if !replica.is_leader() {
            return Err(ReadError::NotLeader.into());
        }
        let load_point = isr::group::load_point(&rules, replica);
        let epoch = replica.leader_epoch();
        if let Some(tracer) = &self.tracer {
            tracer.load_point(partition, load_point);
        }
        Ok(load_point.map(|hw| (epoch, hw)))
    }

    /// ListOffsets on a partition this broker leads, over committed records only: the log
    /// start, the high watermark, or a record found by time through the segments' time indexes.
    pub(super) fn list_offsets(
        &mut self,
        partition: PartitionId,
        spec: OffsetSpec,
    ) -> Result<Option<ListedOffset>, HostError> {
        let (replica, _) = self.hosted(partition)?;
        if !replica.is_leader() {
            return Err(ReadError::NotLeader.into());
        }
        let log = replica.log();
        let hw = replica.high_watermark();
        let listed = |offset: Offset, timestamp: i64| ListedOffset {
            offset,
            timestamp,
            leader_epoch: log.epoch_at(offset),
        };
        Ok(match spec {
            OffsetSpec::Earliest => Some(listed(log.log_start_offset(), -1)),
            OffsetSpec::Latest => Some(ListedOffset {
                offset: hw,
                timestamp: -1,
                // The epoch of the last committed record.
                leader_epoch: hw.0.checked_sub(1).and_then(|o| log.epoch_at(Offset(o))),
            }),
            OffsetSpec::Timestamp(t) => log.offset_for_time(t, hw).map(|(o, ts)| listed(o, ts)),
            OffsetSpec::MaxTimestamp => log.max_timestamp_record(hw).map(|(o, ts)| listed(o, ts)),
        })
    }
}
