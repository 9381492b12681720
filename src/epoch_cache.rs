//! The leader epoch cache: for each epoch with records in the log, the offset of its first record.
//!
//! It is derivable from the log (rule 1), and [`EpochCache::from_log`] does exactly that; a
//! replica keeps one up to date incrementally so that answering OffsetForLeaderEpoch costs a
//! lookup, and the runtime persists it as a checkpoint. The law tests assert the two agree.

use crate::log::{Entry, Log};
use crate::types::{LeaderEpoch, Offset};
use serde::{Deserialize, Serialize};

/// Epoch → start offset, ascending in both.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct EpochCache {
    starts: Vec<(LeaderEpoch, Offset)>,
}

impl EpochCache {
    /// Rebuilds the cache by scanning a log.
    pub fn from_log<L: Log>(log: &L) -> EpochCache {
        let mut cache = EpochCache::default();
        // An entry that holds the log start starts its epoch there, as the cache's
        // `truncate_from_start` keeps it.
        let start = log.log_start_offset();
        for (offset, shape) in crate::log::shapes(log) {
            cache.record(shape.epoch, offset.max(start));
        }
        cache
    }

    /// (epoch, start offset) pairs, oldest first.
    pub fn entries(&self) -> &[(LeaderEpoch, Offset)] {
        &self.starts
    }

    /// The epoch of the last record in the log, if any.
    pub fn latest_epoch(&self) -> Option<LeaderEpoch> {
        self.starts.last().map(|&(e, _)| e)
    }

    /// The start offset of `epoch`, if the log holds records of it.
    pub fn start_of(&self, epoch: LeaderEpoch) -> Option<Offset> {
        self.starts
            .iter()
            .find(|&&(e, _)| e == epoch)
            .map(|&(_, o)| o)
    }

    /// Notes that a record of `epoch` sits at `offset` (appends arrive in offset order).
    pub fn record(&mut self, epoch: LeaderEpoch, offset: Offset) {
        if self.latest_epoch().is_none_or(|latest| epoch > latest) {
            self.starts.push((epoch, offset));
        }
    }

    /// Notes entries appended to `L` at `first`.
    pub fn record_all<L: Log>(&mut self, first: Offset, entries: &[Entry<L::Record>]) {
        let mut offset = first;
        for entry in entries {
            self.record(entry.epoch, offset);
            offset = Offset(offset.0 + L::width(&entry.record));
        }
    }

    /// Forgets every epoch whose records all lie at or above `offset`.
    pub fn truncate_to(&mut self, offset: Offset) {
        self.starts.retain(|&(_, start)| start < offset);
    }

    /// Forgets what lies below a new log start `offset` in a log ending at `log_end`: the epoch
    /// of the entry at `offset` now starts there, and older epochs are gone (Kafka's
    /// `truncateFromStart`); nothing is left when the log is empty.
    pub fn truncate_from_start(&mut self, offset: Offset, log_end: Offset) {
        if offset >= log_end {
            self.starts.clear();
            return;
        }
        let first = self
            .starts
            .iter()
            .rposition(|&(_, start)| start <= offset)
            .unwrap_or(0);
        self.starts.drain(..first);
        if let Some(entry) = self.starts.first_mut() {
            entry.1 = entry.1.max(offset);
        }
    }

    /// The answer to OffsetForLeaderEpoch(`requested`) for a log ending at `log_end`: the largest
    /// epoch not above `requested` and the offset where it ends (the start of the next larger
    /// epoch, or `log_end`). `None` when the log has no epoch that old.
    ///
    /// A leader whose current epoch has no records yet answers for that epoch itself: see
    /// [`crate::Replica`]'s OffsetForLeaderEpoch handling.
    pub fn end_offset_for(
        &self,
        requested: LeaderEpoch,
        log_end: Offset,
    ) -> Option<(LeaderEpoch, Offset)> {
        let idx = self.starts.iter().rposition(|&(e, _)| e <= requested)?;
        let end = self
            .starts
            .get(idx + 1)
            .map_or(log_end, |&(_, start)| start);
        Some((self.starts[idx].0, end))
    }
}
