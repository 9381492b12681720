//! Idempotent producers' latest batches in one partition's log, so that the leader recognises
//! a retry of a batch it already holds (KIP-98) and the producer's records are not stored twice.
//!
//! Derived from the log alone: every batch carries its producer's id, epoch and sequence
//! numbers, so a follower that becomes leader knows the batches it replicated, and recovery
//! rebuilds the index from the segments. Like Kafka, it keeps the last few batches of each
//! producer: a client has at most five requests in flight, and retries only those.

use super::batch::ProducerStamp;
use isr::Offset;
use std::collections::{HashMap, VecDeque};

/// Batches remembered per producer (Kafka's limit on an idempotent producer's requests in
/// flight).
pub const BATCHES_PER_PRODUCER: usize = 5;

/// One stored batch of an idempotent producer: who wrote it and where it lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stored {
    stamp: ProducerStamp,
    base: Offset,
    end: Offset,
}

#[derive(Debug, Default)]
pub struct Producers {
    latest: HashMap<i64, VecDeque<Stored>>,
}

impl Producers {
    /// Notes a batch appended at `base..end`.
    pub fn appended(&mut self, stamp: ProducerStamp, base: Offset, end: Offset) {
        let batches = self.latest.entry(stamp.producer_id).or_default();
        batches.push_back(Stored { stamp, base, end });
        if batches.len() > BATCHES_PER_PRODUCER {
            batches.pop_front();
        }
    }

    /// Forgets the batches at or above `end` (the log was truncated there).
    pub fn truncated(&mut self, end: Offset) {
        self.latest.retain(|_, batches| {
            batches.retain(|b| b.end <= end);
            !batches.is_empty()
        });
    }

    /// Where the log holds the batch `stamp` names, if it is one of its producer's latest: the
    /// same producer, epoch and sequence numbers.
    pub fn find(&self, stamp: &ProducerStamp) -> Option<(Offset, Offset)> {
        self.latest
            .get(&stamp.producer_id)?
            .iter()
            .find(|b| b.stamp == *stamp)
            .map(|b| (b.base, b.end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(first_sequence: i32) -> ProducerStamp {
        ProducerStamp {
            producer_id: 9,
            producer_epoch: 0,
            first_sequence,
            last_sequence: first_sequence + 1,
        }
    }

    #[test]
    fn finds_a_producers_latest_batches_until_truncated_or_pushed_out() {
        let mut p = Producers::default();
        for i in 0..7u64 {
            p.appended(stamp(2 * i as i32), Offset(2 * i), Offset(2 * i + 2));
        }
        assert_eq!(p.find(&stamp(0)), None, "older than the last five");
        assert_eq!(p.find(&stamp(4)), Some((Offset(4), Offset(6))));
        assert_eq!(p.find(&stamp(12)), Some((Offset(12), Offset(14))));
        let other_epoch = ProducerStamp {
            producer_epoch: 1,
            ..stamp(12)
        };
        assert_eq!(p.find(&other_epoch), None);
        p.truncated(Offset(12));
        assert_eq!(p.find(&stamp(12)), None);
        assert_eq!(p.find(&stamp(10)), Some((Offset(10), Offset(12))));
    }
}
