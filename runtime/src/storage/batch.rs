//! Kafka v2 record batches, the unit of storage and replication.
//!
//! A batch is stored and served exactly as the producer sent it, except for the two header fields
//! the leader owns: the base offset and the partition leader epoch. Both precede the CRC'd region
//! (which starts at `attributes`), so stamping them never requires recomputing the CRC. The batch
//! length, also outside the CRC, is checked against what is actually there.

use bytes::Bytes;
use isr::{LeaderEpoch, Offset};
use thiserror::Error;

/// baseOffset (8) + batchLength (4): what precedes the length-counted part of a batch.
pub const LENGTH_PREFIX: usize = 12;
/// The full v2 batch header, up to and including the record count.
pub const HEADER_LEN: usize = 61;
/// The part of the header that `batchLength` counts.
const MIN_BATCH_LENGTH: usize = HEADER_LEN - LENGTH_PREFIX;
const EPOCH_AT: usize = 12;
const MAGIC_AT: usize = 16;
const CRC_AT: usize = 17;
const CRC_FROM: usize = 21;
const LAST_OFFSET_DELTA_AT: usize = 23;
const RECORD_COUNT_AT: usize = 57;
/// No batch may exceed this: a length field above it is corruption, not a batch.
pub const MAX_BATCH: usize = 16 << 20;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum BatchError {
    #[error("{available} bytes cannot hold a record batch header")]
    Truncated { available: usize },
    #[error("batch length {declared} is invalid ({available} bytes available)")]
    BadLength { declared: i64, available: usize },
    #[error("magic {0} is not record batch format v2")]
    BadMagic(i8),
    #[error("CRC-32C mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    BadCrc { stored: u32, computed: u32 },
    #[error("record count {count} disagrees with last offset delta {last_offset_delta}")]
    BadCount { count: i32, last_offset_delta: i32 },
}

fn i32_at(bytes: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// The total size of the batch whose length prefix starts `bytes`, checked for plausibility.
pub fn total_len(bytes: &[u8]) -> Result<usize, BatchError> {
    if bytes.len() < LENGTH_PREFIX {
        return Err(BatchError::Truncated {
            available: bytes.len(),
        });
    }
    let declared = i32_at(bytes, 8);
    let length = usize::try_from(declared).unwrap_or(0);
    if !(MIN_BATCH_LENGTH..=MAX_BATCH).contains(&length) {
        return Err(BatchError::BadLength {
            declared: declared.into(),
            available: bytes.len(),
        });
    }
    Ok(LENGTH_PREFIX + length)
}

/// Checks one whole batch: length, magic, CRC-32C and record count.
pub fn validate(batch: &[u8]) -> Result<(), BatchError> {
    let total = total_len(batch)?;
    if total != batch.len() {
        return Err(BatchError::BadLength {
            declared: (total - LENGTH_PREFIX) as i64,
            available: batch.len(),
        });
    }
    let magic = batch[MAGIC_AT] as i8;
    if magic != 2 {
        return Err(BatchError::BadMagic(magic));
    }
    let stored = u32::from_be_bytes([
        batch[CRC_AT],
        batch[CRC_AT + 1],
        batch[CRC_AT + 2],
        batch[CRC_AT + 3],
    ]);
    let computed = crc32c::crc32c(&batch[CRC_FROM..]);
    if stored != computed {
        return Err(BatchError::BadCrc { stored, computed });
    }
    let count = i32_at(batch, RECORD_COUNT_AT);
    let last_offset_delta = i32_at(batch, LAST_OFFSET_DELTA_AT);
    if count <= 0 || last_offset_delta != count - 1 {
        return Err(BatchError::BadCount {
            count,
            last_offset_delta,
        });
    }
    Ok(())
}

/// How many offsets a batch occupies: lastOffsetDelta + 1. Batches are validated before they
/// enter a log, so the fallback of 1 for a header too short to say only keeps this total.
pub fn width(batch: &[u8]) -> u64 {
    if batch.len() < HEADER_LEN {
        return 1;
    }
    u64::try_from(i32_at(batch, LAST_OFFSET_DELTA_AT)).map_or(1, |delta| delta + 1)
}

/// The base offset written in a batch header.
pub fn base_offset(batch: &[u8]) -> Option<u64> {
    let head: [u8; 8] = batch.get(..8)?.try_into().ok()?;
    u64::try_from(i64::from_be_bytes(head)).ok()
}

/// The partition leader epoch written in a batch header.
pub fn leader_epoch(batch: &[u8]) -> Option<LeaderEpoch> {
    if batch.len() < HEADER_LEN {
        return None;
    }
    u32::try_from(i32_at(batch, EPOCH_AT)).ok().map(LeaderEpoch)
}

/// The batch with its base offset and leader epoch set, as it is stored and served.
pub fn stamped(batch: &[u8], base: Offset, epoch: LeaderEpoch) -> Vec<u8> {
    let mut out = batch.to_vec();
    if out.len() >= HEADER_LEN {
        out[..8].copy_from_slice(&(base.0 as i64).to_be_bytes());
        out[EPOCH_AT..EPOCH_AT + 4].copy_from_slice(&(epoch.0 as i32).to_be_bytes());
    }
    out
}

/// Splits a producer's record set into validated batches.
pub fn split(mut records: Bytes) -> Result<Vec<Bytes>, BatchError> {
    let mut batches = Vec::new();
    while !records.is_empty() {
        let total = total_len(&records)?;
        if total > records.len() {
            return Err(BatchError::BadLength {
                declared: (total - LENGTH_PREFIX) as i64,
                available: records.len(),
            });
        }
        let batch = records.split_to(total);
        validate(&batch)?;
        batches.push(batch);
    }
    Ok(batches)
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    /// A valid v2 batch of `values`, as a producer would send it.
    pub fn batch_of(values: &[&str]) -> Bytes {
        let records: Vec<Record> = values
            .iter()
            .enumerate()
            .map(|(i, v)| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                sequence: i as i32,
                timestamp: 0,
                key: None,
                value: Some(Bytes::copy_from_slice(v.as_bytes())),
                headers: Default::default(),
            })
            .collect();
        let mut buf = bytes::BytesMut::new();
        let options = RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        };
        RecordBatchEncoder::encode(&mut buf, &records, &options).expect("encodable");
        buf.freeze()
    }

    #[test]
    fn a_produced_batch_validates_and_stamping_keeps_its_crc() {
        let batch = batch_of(&["a", "b", "c"]);
        assert_eq!(validate(&batch), Ok(()));
        assert_eq!(width(&batch), 3);
        let stamped = stamped(&batch, Offset(42), LeaderEpoch(7));
        assert_eq!(validate(&stamped), Ok(()));
        assert_eq!(base_offset(&stamped), Some(42));
        assert_eq!(leader_epoch(&stamped), Some(LeaderEpoch(7)));
    }

    #[test]
    fn a_flipped_byte_or_a_short_buffer_is_refused() {
        let batch = batch_of(&["hello"]);
        let mut bad = batch.to_vec();
        let last = bad.len() - 1;
        bad[last] ^= 0xff;
        assert!(matches!(validate(&bad), Err(BatchError::BadCrc { .. })));
        assert!(split(batch.slice(..batch.len() - 3)).is_err());
        assert!(split(Bytes::from_static(b"\0\0\0\0")).is_err());
        let two = [batch.as_ref(), batch.as_ref()].concat();
        assert_eq!(split(Bytes::from(two)).map(|b| b.len()), Ok(2));
    }
}
