//! The log start offset (KIP-107): what DeleteRecords, retention and a leader's Fetch answers
//! do to it. Rule 17 keeps it at or below the high watermark, so only committed records are
//! ever deleted, and a replica that leads later holds every committed record above it.
//! Compaction, which removes superseded records, keeps to the high watermark too (rule 18).

use super::{Replica, Role};
use crate::config::Config;
use crate::error::ReadError;
use crate::log::Log;
use crate::message::{DeleteId, Effect, Effects};
use crate::producers::Producers;
use crate::types::Offset;

impl<L: Log> Replica<L> {
    /// DeleteRecords at the leader: the log start moves to `before`, even inside an entry (a
    /// record batch), as Kafka's does, if that is not beyond the high watermark (rule 17; off,
    /// up to the LEO). The answer is the log start after it, which a request at or below the
    /// current one leaves as it is.
    pub(super) fn delete_records(
        &mut self,
        cfg: &Config,
        id: DeleteId,
        before: Offset,
        effects: &mut Effects<L::Record>,
    ) {
        let limit = if cfg.rules.log_start_within_hw {
            self.high_watermark
        } else {
            self.log.log_end_offset()
        };
        let result = if !self.is_leader() {
            Err(ReadError::NotLeader)
        } else if before > limit {
            Err(ReadError::OffsetOutOfRange)
        } else {
            self.advance_log_start(cfg, before, effects);
            Ok(self.log.log_start_offset())
        };
        effects.push(Effect::RecordsDeleted {
            partition: self.partition,
            id,
            result,
        });
    }

    /// Retention on any running replica: the log start moves towards `before`, but not past
    /// the high watermark (rule 17), so a follower keeps what it may have to serve as leader.
    pub(super) fn retain(
        &mut self,
        cfg: &Config,
        before: Offset,
        effects: &mut Effects<L::Record>,
    ) {
        if self.is_online() {
            let target = self.within_high_watermark(cfg, before);
            self.advance_log_start(cfg, self.log.entry_start(target), effects);
        }
    }

    /// A follower takes its leader's log start from a Fetch answer, up to its own high
    /// watermark (rule 17): below that its log matches the leader's, so an offset inside an
    /// entry of one is inside the same entry of the other.
    pub(super) fn follow_log_start(
        &mut self,
        cfg: &Config,
        leader_start: Offset,
        effects: &mut Effects<L::Record>,
    ) {
        let target = self.within_high_watermark(cfg, leader_start);
        self.advance_log_start(cfg, target, effects);
    }

    /// Compaction on a running replica, up to its high watermark (rule 18; off, up to its
    /// LEO): below it every record is committed, so a record that supersedes another is in
    /// every log that may lead later, and no truncation takes it back.
    pub(super) fn compact(&mut self, cfg: &Config) {
        if self.is_online() {
            let below = if cfg.rules.compact_within_hw {
                self.high_watermark
            } else {
                self.log.log_end_offset()
            };
            self.log.compact(below);
        }
    }

    /// `offset`, capped at this replica's high watermark under rule 17.
    fn within_high_watermark(&self, cfg: &Config, offset: Offset) -> Offset {
        if cfg.rules.log_start_within_hw {
            offset.min(self.high_watermark)
        } else {
            offset
        }
    }

    /// Moves the log start to `offset`, with what depends on it: the epoch cache forgets what
    /// lies below, a log that jumps past its end (a follower starting afresh at its leader's
    /// log start) takes `offset` for its high watermark and forgets its producers, and a
    /// leader answers the Fetches it holds at once: their followers learn the new log start
    /// (or that they are below it) now, not when `fetch_max_wait` runs out.
    pub(super) fn advance_log_start(
        &mut self,
        cfg: &Config,
        offset: Offset,
        effects: &mut Effects<L::Record>,
    ) {
        if offset <= self.log.log_start_offset() {
            return;
        }
        let beyond_end = offset > self.log.log_end_offset();
        self.log.advance_log_start(offset);
        let end = self.log.log_end_offset();
        self.epoch_cache.truncate_from_start(offset, end);
        if beyond_end {
            self.producers = Producers::default();
            self.set_high_watermark(self.high_watermark.max(offset), effects);
        }
        if matches!(&self.role, Role::Leader(l) if !l.parked.is_empty()) {
            self.answer_parked(cfg, effects);
        }
    }
}
