//! What storage reads from a stored Kafka v2 record batch header.
//!
//! The batch layout belongs to the Kafka layer ([`isr_kafka::batch`]: checking, stamping, and
//! reading the offsets a batch spans and its leader epoch); storage adds only what it needs to
//! walk a segment file: the length prefix, and how many batches fit a read budget.

pub use isr_kafka::batch::{
    base_offset, crc, empty, first_at_or_after, first_timestamp, from_offset, latest_record,
    leader_epoch, max_timestamp, producer, records, retain, stamp, validate, validate_stored,
    width, BatchError, RecordRef, HEADER_LEN, MAX_BATCH,
};
use thiserror::Error;

/// baseOffset (8) + batchLength (4): what precedes the length-counted part of a batch.
pub const LENGTH_PREFIX: usize = 12;

/// A length prefix that cannot start a batch.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("batch length {declared} is not between {HEADER_LEN} and {MAX_BATCH}")]
pub struct BadLength {
    declared: i32,
}

fn i32_at(bytes: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// The total size of the batch whose length prefix is `prefix`, checked for plausibility.
pub fn total_len(prefix: &[u8; LENGTH_PREFIX]) -> Result<usize, BadLength> {
    let declared = i32_at(prefix, 8);
    usize::try_from(declared)
        .ok()
        .map(|length| LENGTH_PREFIX + length)
        .filter(|total| (HEADER_LEN..=MAX_BATCH).contains(total))
        .ok_or(BadLength { declared })
}

/// How many batches of these `sizes`, taken in order, fit in `budget` bytes: always at least
/// one, so that a batch larger than the budget cannot stall a reader (Kafka's rule for fetches).
pub fn fitting(sizes: impl IntoIterator<Item = usize>, budget: usize) -> usize {
    let mut total = 0usize;
    let mut first = true;
    sizes
        .into_iter()
        .take_while(|&size| {
            total = total.saturating_add(size);
            std::mem::take(&mut first) || total <= budget
        })
        .count()
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use bytes::Bytes;
    use isr::{LeaderEpoch, Offset};
    use isr_kafka::client::records::{encode, Outgoing};

    /// A valid v2 batch of `values`, as a producer would send it.
    pub fn batch_of(values: &[&str]) -> Bytes {
        batch_at(0, values)
    }

    /// A valid v2 batch of `values`, every record at `timestamp`.
    pub fn batch_at(timestamp: i64, values: &[&str]) -> Bytes {
        let records: Vec<Outgoing> = values
            .iter()
            .map(|v| Outgoing {
                key: None,
                value: Bytes::copy_from_slice(v.as_bytes()),
            })
            .collect();
        encode(&records, timestamp).expect("encodable")
    }

    #[test]
    fn storage_reads_what_stamping_wrote() {
        let batch = batch_of(&["a", "b", "c"]);
        assert_eq!(width(&batch), 3);
        let stamped = stamp(&batch, Offset(42), LeaderEpoch(7));
        assert!(validate(&stamped).is_ok());
        assert_eq!(base_offset(&stamped), Some(42));
        assert_eq!(leader_epoch(&stamped), Some(LeaderEpoch(7)));
        let prefix: [u8; LENGTH_PREFIX] = stamped[..LENGTH_PREFIX].try_into().expect("prefix");
        assert_eq!(total_len(&prefix), Ok(stamped.len()));
        assert!(total_len(&[0; LENGTH_PREFIX]).is_err());
        assert!(total_len(&[0xff; LENGTH_PREFIX]).is_err());
    }

    #[test]
    fn fitting_keeps_at_least_one_batch_and_stays_within_the_budget() {
        let batches = [10, 20, 30];
        assert_eq!(fitting(batches, 5), 1);
        assert_eq!(fitting(batches, 30), 2);
        assert_eq!(fitting(batches, 60), 3);
        assert_eq!(fitting([], 60), 0);
    }
}
