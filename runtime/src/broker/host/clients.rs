//! The client side of the replica thread: producer writes and consumer reads.

use super::{Committed, Host, HostError};
use crate::broker::hosted::ProduceReply;
use bytes::Bytes;
use isr::{Acks, Log, Offset, PartitionId, ReadError};
use isr_kafka::{ListedOffset, OffsetSpec};
use tracing::debug;

impl Host {
    pub(super) fn on_produce(
        &mut self,
        partition: PartitionId,
        acks: Acks,
        batches: Vec<Bytes>,
        reply: ProduceReply,
    ) {
        let cfg = self.cfg;
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
        let written = match retry {
            Some((base, end)) => {
                debug!(%partition, %base, %end, "a producer's retry of a stored batch");
                h.replica
                    .leader_retry(&cfg, base, end, acks, id)
                    .map(|effects| (base, effects))
            }
            None => h.replica.leader_write(&cfg, batches, acks, id),
        };
        match written {
            Err(e) => {
                let _ = reply.send(Err(e.into()));
            }
            Ok((base, effects)) => {
                if acks == Acks::All {
                    h.waiting.insert(id, reply);
                } else {
                    // Answered once the write is as durable as the flush policy asks.
                    h.held_acks.push((reply, base));
                }
                self.after(partition, effects);
                if retry.is_none() {
                    self.to_wake.insert(partition);
                }
            }
        }
    }

    pub(super) fn read(
        &mut self,
        partition: PartitionId,
        offset: Offset,
        max_bytes: usize,
    ) -> Result<Committed, HostError> {
        // Consumers see only what is durable here too, not just on the followers.
        self.release(partition);
        let most = self.cfg.fetch_max_entries;
        let h = self.hosted(partition)?;
        // Read only the batches that fit the answer: with large records, reading up to
        // `fetch_max_entries` of them and cutting afterwards cost a FetchResponse of one 200 KB
        // batch hundreds of milliseconds.
        let hw = h.replica.high_watermark();
        let fitting = h.replica.log().entries_within(offset, hw, max_bytes);
        let max_entries = most.min(fitting.max(1));
        let batches: Vec<Bytes> = h
            .replica
            .read_committed(offset, max_entries)?
            .into_iter()
            .map(|e| e.record)
            .collect();
        Ok(Committed {
            batches,
            high_watermark: h.replica.high_watermark(),
            log_start_offset: h.log_start_offset(),
        })
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
