//! Idempotent producers (KIP-98): what each replica knows of the producers whose batches its
//! log holds, so that a leader stores a retried batch once, refuses a gap in a producer's
//! sequence numbers and refuses a producer fenced by a newer epoch of its id.
//!
//! The state is a function of the log: every batch carries its producer's id, epoch and
//! sequence numbers ([`crate::Entry::producer`]). So every replica keeps it, from the batches it
//! appends as leader and the ones it replicates as follower, and rebuilds it from its log on
//! restart and after a truncation. A follower that becomes leader then recognises the retry of
//! a batch its predecessor appended and never answered; a leader that knew only the batches it
//! took itself would store that retry a second time (the `producer-state` rule switch).
//!
//! Like Kafka, it keeps the last [`BATCHES_PER_PRODUCER`] batches of each producer: a client has
//! at most five requests in flight, and retries only those.

use crate::error::WriteError;
use crate::log::{shapes, Log};
use crate::types::Offset;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// Batches remembered per producer: Kafka's limit on an idempotent producer's requests in
/// flight, so a retry is always of one of them.
pub const BATCHES_PER_PRODUCER: usize = 5;

/// What an idempotent producer stamps on a batch (Kafka's record batch header): who wrote it,
/// in which epoch of its id, and the sequence numbers of its first and last record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ProducerBatch {
    /// The id the producer was given (InitProducerId).
    pub producer_id: i64,
    /// The epoch of that id: a newer one fences the producers of older ones.
    pub producer_epoch: i16,
    /// The sequence number of the batch's first record.
    pub first_sequence: i32,
    /// The sequence number of its last record (sequence numbers wrap from `i32::MAX` to 0).
    pub last_sequence: i32,
}

/// One stored batch of a producer, and where the log holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct Stored {
    batch: ProducerBatch,
    base_offset: Offset,
    end_offset: Offset,
}

/// What a leader does with a producer's batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Append it: the next batch of its producer, or the first this log sees of it.
    Append,
    /// The log holds it already at `base_offset..end_offset` (a retry whose first attempt was
    /// appended and not answered): answer it as that write, append nothing.
    Duplicate {
        /// Where the stored batch starts.
        base_offset: Offset,
        /// Just past its last record.
        end_offset: Offset,
    },
}

/// The latest batches of every producer whose batches a log holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Producers {
    latest: BTreeMap<i64, VecDeque<Stored>>,
}

impl Producers {
    /// The state of `log`: a walk over its entries' shapes (a disk log answers them from its
    /// index, without reading records back).
    pub fn from_log<L: Log>(log: &L) -> Producers {
        let mut producers = Producers::default();
        for (offset, shape) in shapes(log) {
            if let Some(batch) = shape.producer {
                producers.appended(batch, offset, Offset(offset.0 + shape.width));
            }
        }
        producers
    }

    /// Whether the log holds no producer's batch.
    pub fn is_empty(&self) -> bool {
        self.latest.is_empty()
    }

    /// What a leader does with `batch`, as Kafka decides it: the retry of a stored batch is a
    /// duplicate; a batch of an older epoch than its producer's latest is refused
    /// (INVALID_PRODUCER_EPOCH); a newer epoch starts at sequence 0; within an epoch, sequence
    /// numbers follow on without a gap (OUT_OF_ORDER_SEQUENCE_NUMBER). A producer the log holds
    /// nothing of may start anywhere: its earlier batches may have been removed.
    pub fn admit(&self, batch: &ProducerBatch) -> Result<Admission, WriteError> {
        let Some(stored) = self.latest.get(&batch.producer_id) else {
            return Ok(Admission::Append);
        };
        if let Some(s) = stored.iter().find(|s| s.batch == *batch) {
            return Ok(Admission::Duplicate {
                base_offset: s.base_offset,
                end_offset: s.end_offset,
            });
        }
        let Some(last) = stored.back().map(|s| s.batch) else {
            return Ok(Admission::Append);
        };
        let expected = if batch.producer_epoch == last.producer_epoch {
            last.last_sequence.wrapping_add(1).max(0)
        } else {
            0
        };
        if batch.producer_epoch < last.producer_epoch {
            Err(WriteError::InvalidProducerEpoch {
                producer_id: batch.producer_id,
                epoch: batch.producer_epoch,
                current: last.producer_epoch,
            })
        } else if batch.first_sequence != expected {
            Err(WriteError::OutOfOrderSequence {
                producer_id: batch.producer_id,
                expected,
                got: batch.first_sequence,
            })
        } else {
            Ok(Admission::Append)
        }
    }

    /// Notes `batch` appended at `base_offset..end_offset`. A newer epoch of its producer
    /// forgets the older one's batches.
    pub(crate) fn appended(
        &mut self,
        batch: ProducerBatch,
        base_offset: Offset,
        end_offset: Offset,
    ) {
        let stored = self.latest.entry(batch.producer_id).or_default();
        if stored
            .back()
            .is_some_and(|s| s.batch.producer_epoch != batch.producer_epoch)
        {
            stored.clear();
        }
        stored.push_back(Stored {
            batch,
            base_offset,
            end_offset,
        });
        if stored.len() > BATCHES_PER_PRODUCER {
            stored.pop_front();
        }
    }

    /// Forgets the batches at or above `offset` (the log was truncated there), without
    /// rebuilding from the log: what a replica that keeps only the batches it took as leader
    /// can do (`producer-state=off`).
    pub(crate) fn truncate_to(&mut self, offset: Offset) {
        self.latest.retain(|_, stored| {
            stored.retain(|s| s.end_offset <= offset);
            !stored.is_empty()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(epoch: i16, first: i32, last: i32) -> ProducerBatch {
        ProducerBatch {
            producer_id: 9,
            producer_epoch: epoch,
            first_sequence: first,
            last_sequence: last,
        }
    }

    fn producers(batches: &[ProducerBatch]) -> Producers {
        let mut p = Producers::default();
        for (i, b) in batches.iter().enumerate() {
            p.appended(*b, Offset(2 * i as u64), Offset(2 * i as u64 + 2));
        }
        p
    }

    #[test]
    fn a_retry_of_one_of_the_last_five_batches_is_a_duplicate_of_where_it_lies() {
        let all: Vec<_> = (0..7).map(|i| batch(0, 2 * i, 2 * i + 1)).collect();
        let p = producers(&all);
        assert_eq!(
            p.admit(&all[4]),
            Ok(Admission::Duplicate {
                base_offset: Offset(8),
                end_offset: Offset(10)
            })
        );
        let pushed_out = p.admit(&all[1]);
        assert!(
            matches!(
                pushed_out,
                Err(WriteError::OutOfOrderSequence {
                    expected: 14,
                    got: 2,
                    ..
                })
            ),
            "{pushed_out:?}"
        );
        assert_eq!(p.admit(&batch(0, 14, 20)), Ok(Admission::Append));
    }

    #[test]
    fn a_gap_an_older_epoch_and_a_new_epoch_not_at_zero_are_refused() {
        let p = producers(&[batch(3, 0, 4), batch(3, 5, 5)]);
        assert!(matches!(
            p.admit(&batch(3, 7, 8)),
            Err(WriteError::OutOfOrderSequence {
                expected: 6,
                got: 7,
                ..
            })
        ));
        assert!(matches!(
            p.admit(&batch(2, 6, 6)),
            Err(WriteError::InvalidProducerEpoch {
                epoch: 2,
                current: 3,
                ..
            })
        ));
        assert!(matches!(
            p.admit(&batch(4, 1, 1)),
            Err(WriteError::OutOfOrderSequence {
                expected: 0,
                got: 1,
                ..
            })
        ));
        assert_eq!(p.admit(&batch(4, 0, 3)), Ok(Admission::Append));
        assert_eq!(p.admit(&batch(3, 6, 9)), Ok(Admission::Append));
    }

    #[test]
    fn sequence_numbers_wrap_and_an_unknown_producer_may_start_anywhere() {
        let p = producers(&[batch(0, i32::MAX - 1, i32::MAX)]);
        assert_eq!(p.admit(&batch(0, 0, 2)), Ok(Admission::Append));
        assert_eq!(
            Producers::default().admit(&batch(0, 41, 42)),
            Ok(Admission::Append)
        );
    }

    #[test]
    fn a_new_epoch_forgets_the_old_ones_batches_and_truncation_forgets_what_it_removed() {
        let mut p = producers(&[batch(0, 0, 0), batch(0, 1, 1)]);
        p.appended(batch(1, 0, 0), Offset(4), Offset(5));
        assert!(matches!(
            p.admit(&batch(0, 1, 1)),
            Err(WriteError::InvalidProducerEpoch { .. })
        ));
        p.truncate_to(Offset(4));
        assert!(p.is_empty(), "the older epoch's batches were forgotten");
    }
}
