//! The client side of the replica thread: producer writes and consumer reads.

use super::{Host, HostError};
use crate::broker::hosted::{ProduceReply, ReadReply};
use bytes::Bytes;
use isr::{Acks, Log, Offset, PartitionId, ReadError, ReplicaInput};
use isr_kafka::{ListedOffset, OffsetSpec};
use tracing::debug;

impl Host {
    /// A producer's batches: a write for the leader, or, when the log holds them already,
    /// a retry. Answered when the core acknowledges or fails it.
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
            Ok(h) => h,
            Err(e) => {
                let _ = reply.send(Err(e));
                return;
            }
        };
        // An idempotent producer's retry of a batch the log holds (its first attempt was never
        // answered, perhaps by an earlier leader): answered with the first attempt's offsets, as
        // Kafka does, instead of being stored twice. Producers send one batch per partition.
        let retry = match &batches[..] {
            [batch] => h.replica.log().stored_as(batch),
            _ => None,
        };
        h.waiting.insert(id, reply);
        let input = match retry {
            Some((base_offset, end_offset)) => {
                debug!(%partition, %base_offset, %end_offset, "a producer's retry of a stored batch");
                ReplicaInput::Retry {
                    id,
                    base_offset,
                    end_offset,
                    acks,
                }
            }
            None => ReplicaInput::Write {
                id,
                records: batches,
                acks,
            },
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
            Ok(h) => h,
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

    /// ListOffsets on a partition this broker leads, over committed records only: the log
    /// start, the high watermark, or a record found by time through the segments' time indexes.
    pub(super) fn list_offsets(
        &mut self,
        partition: PartitionId,
        spec: OffsetSpec,
    ) -> Result<Option<ListedOffset>, HostError> {
        let h = self.hosted(partition)?;
        if !h.replica.is_leader() {
            return Err(ReadError::NotLeader.into());
        }
        let log = h.replica.log();
        let hw = h.replica.high_watermark();
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
