//! Checks and stamps Kafka v2 record batches without decoding their records.
//!
//! The broker stores batches as producers sent them (unless a topic's `compression.type` asks
//! for another codec: [`crate::compression`]), so all it needs is to check that a batch is
//! whole and intact, learn how many offsets it spans, and write the two header fields that
//! Kafka leaves to the broker: the base offset and the partition leader epoch. Both lie before
//! the CRC-covered part, so stamping keeps the CRC valid. Compaction is the exception: it reads
//! an uncompressed batch's records (their keys) and writes the batch again with fewer
//! ([`records`], [`retain`], [`empty`]).

use bytes::{Bytes, BytesMut};
use isr::{LeaderEpoch, Offset, ProducerBatch};

/// The largest batch a broker stores, whatever its configs say: recovery takes a longer length
/// field in a segment for corruption, and one such batch always fits an internal frame.
/// (Kafka's default `message.max.bytes` is 1 MiB; topics may raise theirs up to this.)
pub const MAX_BATCH: usize = 16 << 20;

/// Bytes of the v2 batch header, up to and including the record count.
pub const HEADER_LEN: usize = 61;
/// Bytes before the batch-length field ends: the length counts everything after them.
const LOG_OVERHEAD: usize = 12;
const LEADER_EPOCH_AT: usize = 12;
const MAGIC_AT: usize = 16;
const CRC_AT: usize = 17;
/// The CRC covers the batch from the attributes field to its end.
const CRC_FROM: usize = 21;
const ATTRIBUTES_AT: usize = 21;
const LAST_OFFSET_DELTA_AT: usize = 23;
const BASE_TIMESTAMP_AT: usize = 27;
const MAX_TIMESTAMP_AT: usize = 35;
const PRODUCER_ID_AT: usize = 43;
const PRODUCER_EPOCH_AT: usize = 51;
const BASE_SEQUENCE_AT: usize = 53;
const RECORD_COUNT_AT: usize = 57;
/// Attribute bits naming the compression codec; 0 is none.
pub(crate) const COMPRESSION_MASK: i16 = 0x07;
/// Attribute bit set when every record's timestamp is the broker's append time.
const LOG_APPEND_TIME: i16 = 0x08;
/// Attribute bit of a control batch (a transaction marker).
pub(crate) const CONTROL: i16 = 0x20;

/// Why a batch was refused: every case is answered with CORRUPT_MESSAGE.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    #[error("batch of {0} bytes is shorter than the {HEADER_LEN}-byte v2 header")]
    TooShort(usize),
    #[error("batch length field says {declared} bytes but {actual} follow it")]
    LengthMismatch { declared: i64, actual: usize },
    #[error("magic byte {0}: only v2 record batches are accepted")]
    Magic(i8),
    #[error("CRC-32C mismatch: header says {declared:#010x}, content gives {actual:#010x}")]
    Crc { declared: u32, actual: u32 },
    #[error("record count {count} does not match last offset delta {last_offset_delta}")]
    Count { count: i32, last_offset_delta: i32 },
    #[error("record {index}: {reason}")]
    Record { index: u32, reason: &'static str },
}

/// What the broker learns from a valid batch's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    /// Offsets the batch spans: last offset delta + 1.
    pub offset_count: u32,
    /// Attribute bits (compression codec, timestamp type, transactional, control).
    pub attributes: i16,
    /// -1 unless the producer is idempotent or transactional.
    pub producer_id: i64,
}

fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Checks that `batch` is exactly one whole, intact v2 record batch, as a producer writes one:
/// one record per offset it spans.
pub fn validate(batch: &[u8]) -> Result<BatchHeader, BatchError> {
    check(batch, false)
}

/// Checks a stored batch — one a log holds, or a leader sends its followers — as [`validate`]
/// does, but as compaction may have left it: fewer records than offsets (offset deltas rising
/// with gaps, within the last offset delta), or none.
pub fn validate_stored(batch: &[u8]) -> Result<BatchHeader, BatchError> {
    check(batch, true)
}

fn check(batch: &[u8], stored: bool) -> Result<BatchHeader, BatchError> {
    if batch.len() < HEADER_LEN {
        return Err(BatchError::TooShort(batch.len()));
    }
    let declared = i64::from(be_i32(batch, 8));
    let actual = batch.len() - LOG_OVERHEAD;
    if declared != actual as i64 {
        return Err(BatchError::LengthMismatch { declared, actual });
    }
    let magic = batch[MAGIC_AT] as i8;
    if magic != 2 {
        return Err(BatchError::Magic(magic));
    }
    let declared_crc = be_i32(batch, CRC_AT) as u32;
    let actual_crc = crc32c::crc32c(&batch[CRC_FROM..]);
    if declared_crc != actual_crc {
        return Err(BatchError::Crc {
            declared: declared_crc,
            actual: actual_crc,
        });
    }
    let last_offset_delta = be_i32(batch, LAST_OFFSET_DELTA_AT);
    let count = be_i32(batch, RECORD_COUNT_AT);
    // An uncompressed or compressed batch alike must span as many offsets as it holds records
    // when produced: a producer never leaves gaps. Compaction leaves them, never more records
    // than offsets.
    let counted = if stored {
        last_offset_delta >= 0 && (0..=last_offset_delta.saturating_add(1)).contains(&count)
    } else {
        count > 0 && last_offset_delta == count - 1
    };
    if !counted {
        return Err(BatchError::Count {
            count,
            last_offset_delta,
        });
    }
    let attributes = i16::from_be_bytes([batch[ATTRIBUTES_AT], batch[ATTRIBUTES_AT + 1]]);
    if attributes & COMPRESSION_MASK == 0 {
        let gaps = stored.then_some(last_offset_delta);
        check_records(&batch[HEADER_LEN..], count as u32, gaps)?;
    }
    let producer_id = i64::from_be_bytes(
        batch[PRODUCER_ID_AT..PRODUCER_ID_AT + 8]
            .try_into()
            .unwrap_or([0xff; 8]),
    );
    Ok(BatchHeader {
        offset_count: last_offset_delta as u32 + 1,
        attributes,
        producer_id,
    })
}

/// Reads a zigzag varint (Kafka's record fields) from `b` at `*at`.
fn varint(b: &[u8], at: &mut usize) -> Option<i64> {
    let mut raw: u64 = 0;
    for shift in (0..70).step_by(7) {
        let byte = *b.get(*at)?;
        *at += 1;
        raw |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some((raw >> 1) as i64 ^ -((raw & 1) as i64));
        }
    }
    None
}

/// Skips a length-prefixed field of a record; `nullable` allows -1.
fn field(b: &[u8], at: &mut usize, nullable: bool) -> Option<()> {
    let len = varint(b, at)?;
    if len == -1 && nullable {
        return Some(());
    }
    let end = at.checked_add(usize::try_from(len).ok()?)?;
    (end <= b.len()).then(|| *at = end)
}

/// Checks the records of an uncompressed batch: each lies within its length, offset deltas
/// run 0, 1, 2... (with `gaps`, a stored batch's last offset delta: rise, up to it), and
/// nothing trails the last. Kafka brokers refuse such batches too; here it also keeps a
/// poisoned record (say, 2^31 headers) from ever reaching consumers, whose decoders
/// preallocate from those counts.
fn check_records(records: &[u8], count: u32, gaps: Option<i32>) -> Result<(), BatchError> {
    let mut at = 0;
    let mut previous = -1;
    for index in 0..count {
        let bad = |reason| BatchError::Record { index, reason };
        let len = varint(records, &mut at).ok_or(bad("truncated length"))?;
        let end = usize::try_from(len)
            .ok()
            .and_then(|l| at.checked_add(l))
            .filter(|&e| e <= records.len())
            .ok_or(bad("length exceeds the batch"))?;
        let r = &records[..end];
        at += 1; // attributes
        varint(r, &mut at).ok_or(bad("truncated timestamp delta"))?;
        let delta = varint(r, &mut at).ok_or(bad("truncated offset delta"))?;
        let in_order = match gaps {
            None => delta == i64::from(index),
            Some(last) => delta > previous && delta <= i64::from(last),
        };
        if !in_order {
            return Err(bad("offset deltas must run 0, 1, 2, ..."));
        }
        previous = delta;
        field(r, &mut at, true).ok_or(bad("key exceeds the record"))?;
        field(r, &mut at, true).ok_or(bad("value exceeds the record"))?;
        let headers = varint(r, &mut at).ok_or(bad("truncated header count"))?;
        if headers < 0 || headers > (end - at.min(end)) as i64 {
            return Err(bad("header count exceeds the record"));
        }
        for _ in 0..headers {
            field(r, &mut at, false).ok_or(bad("header key exceeds the record"))?;
            field(r, &mut at, true).ok_or(bad("header value exceeds the record"))?;
        }
        if at != end {
            return Err(bad("fields do not fill the record's length"));
        }
    }
    if at != records.len() {
        return Err(BatchError::Record {
            index: count,
            reason: "bytes trail the last record",
        });
    }
    Ok(())
}

/// Splits a produce request's record set into its batches, each validated. Kafka requires
/// exactly one batch per partition in a produce request; callers check the count.
pub fn split(mut records: Bytes) -> Result<Vec<(Bytes, BatchHeader)>, BatchError> {
    let mut out = Vec::new();
    while !records.is_empty() {
        if records.len() < LOG_OVERHEAD {
            return Err(BatchError::TooShort(records.len()));
        }
        let declared = be_i32(&records, 8);
        let total = usize::try_from(declared)
            .ok()
            .and_then(|d| d.checked_add(LOG_OVERHEAD))
            .filter(|&t| t <= records.len())
            .ok_or(BatchError::LengthMismatch {
                declared: i64::from(declared),
                actual: records.len() - LOG_OVERHEAD,
            })?;
        let batch = records.split_to(total);
        let header = validate(&batch)?;
        out.push((batch, header));
    }
    Ok(out)
}

/// A copy of `batch` carrying the base offset and partition leader epoch the broker assigned.
/// The CRC stays valid: neither field is covered by it.
pub fn stamp(batch: &[u8], base_offset: Offset, leader_epoch: LeaderEpoch) -> Bytes {
    let mut out = BytesMut::from(batch);
    if out.len() >= HEADER_LEN {
        out[..8].copy_from_slice(&(base_offset.0 as i64).to_be_bytes());
        out[LEADER_EPOCH_AT..LEADER_EPOCH_AT + 4]
            .copy_from_slice(&(leader_epoch.0 as i32).to_be_bytes());
    }
    out.freeze()
}

/// A copy of `batch` stamped with the broker's time, as a topic with
/// `message.timestamp.type=LogAppendTime` stores it: the timestamp-type attribute set and the
/// largest timestamp `now_ms` (every record of such a batch has that timestamp), the CRC
/// computed again, since both fields are covered by it. A header too short is left as it is
/// (batches are validated before).
pub fn with_log_append_time(batch: &[u8], now_ms: i64) -> Bytes {
    let mut out = BytesMut::from(batch);
    if out.len() >= HEADER_LEN {
        let attributes = i16::from_be_bytes([out[ATTRIBUTES_AT], out[ATTRIBUTES_AT + 1]]);
        out[ATTRIBUTES_AT..ATTRIBUTES_AT + 2]
            .copy_from_slice(&(attributes | LOG_APPEND_TIME).to_be_bytes());
        out[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&now_ms.to_be_bytes());
        let crc = crc32c::crc32c(&out[CRC_FROM..]);
        out[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    }
    out.freeze()
}

/// How many offsets a batch occupies: lastOffsetDelta + 1. Batches are validated before they
/// enter a log, so the fallback of 1 for a header too short to say only keeps this total.
pub fn width(batch: &[u8]) -> u64 {
    if batch.len() < HEADER_LEN {
        return 1;
    }
    u64::try_from(be_i32(batch, LAST_OFFSET_DELTA_AT)).map_or(1, |delta| delta + 1)
}

/// The CRC-32C a batch header carries (over everything from the attributes on): it names the
/// batch's content, and stamping (offset, leader epoch) leaves it as it was. 0 for a header too
/// short to hold one (batches are validated before they enter a log).
pub fn crc(batch: &[u8]) -> u32 {
    batch
        .get(CRC_AT..CRC_AT + 4)
        .map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// The partition leader epoch stamped in a batch header.
pub fn leader_epoch(batch: &[u8]) -> Option<LeaderEpoch> {
    if batch.len() < HEADER_LEN {
        return None;
    }
    u32::try_from(be_i32(batch, LEADER_EPOCH_AT))
        .ok()
        .map(LeaderEpoch)
}

/// The idempotent producer's stamp of a batch (KIP-98: its id and epoch, and the sequence
/// numbers of its first and last records; a retry resends the same batch, so the same stamp
/// identifies it); `None` for a plain producer (producer id or
/// base sequence -1) or a header too short to say.
pub fn producer(batch: &[u8]) -> Option<ProducerBatch> {
    if batch.len() < HEADER_LEN {
        return None;
    }
    let producer_id =
        i64::from_be_bytes(batch[PRODUCER_ID_AT..PRODUCER_ID_AT + 8].try_into().ok()?);
    let first_sequence = be_i32(batch, BASE_SEQUENCE_AT);
    if producer_id < 0 || first_sequence < 0 {
        return None;
    }
    let delta = be_i32(batch, LAST_OFFSET_DELTA_AT).max(0);
    // Sequence numbers wrap from i32::MAX to 0, as in Kafka's DefaultRecordBatch.
    let last_sequence = if first_sequence > i32::MAX - delta {
        delta - (i32::MAX - first_sequence) - 1
    } else {
        first_sequence + delta
    };
    Some(ProducerBatch {
        producer_id,
        producer_epoch: i16::from_be_bytes([
            batch[PRODUCER_EPOCH_AT],
            batch[PRODUCER_EPOCH_AT + 1],
        ]),
        first_sequence,
        last_sequence,
    })
}

fn be_i64(b: &[u8], at: usize) -> Option<i64> {
    Some(i64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The largest record timestamp of a batch (a header field), what a time index keeps.
pub fn max_timestamp(batch: &[u8]) -> Option<i64> {
    be_i64(batch, MAX_TIMESTAMP_AT)
}

/// Each record's (offset, timestamp) in a stored batch, in order, read from the record
/// headers. A compressed batch (the broker never decompresses) stands as one record at its
/// base offset with its first timestamp, and its largest: a reader starting at the base offset
/// misses none of its records. So does a log-append-time batch, whose records share one
/// timestamp.
fn record_times(batch: &[u8]) -> Vec<(i64, i64)> {
    let (Some(base), Some(first), Some(max)) = (
        base_offset(batch),
        be_i64(batch, BASE_TIMESTAMP_AT),
        max_timestamp(batch),
    ) else {
        return Vec::new();
    };
    let attributes = attributes(batch).unwrap_or_default();
    if attributes & LOG_APPEND_TIME != 0 {
        return vec![(base, max)];
    }
    if attributes & COMPRESSION_MASK != 0 {
        return vec![(base, first), (base, max)];
    }
    let records = &batch[HEADER_LEN..];
    let mut times = Vec::new();
    let mut at = 0;
    while at < records.len() {
        let Some(len) = varint(records, &mut at).and_then(|l| usize::try_from(l).ok()) else {
            break;
        };
        let end = at.saturating_add(len).min(records.len());
        let mut field = at + 1; // attributes
        let time = varint(&records[..end], &mut field);
        let offset = varint(&records[..end], &mut field);
        if let (Some(time), Some(offset)) = (time, offset) {
            times.push((base.saturating_add(offset), first.saturating_add(time)));
        }
        at = end;
    }
    times
}

/// The first record of a stored batch whose timestamp is at or after `target`: (offset,
/// timestamp). See `record_times` for compressed batches.
pub fn first_at_or_after(batch: &[u8], target: i64) -> Option<(i64, i64)> {
    record_times(batch).into_iter().find(|&(_, t)| t >= target)
}

/// The first record of a stored batch with the batch's largest timestamp: (offset,
/// timestamp).
pub fn latest_record(batch: &[u8]) -> Option<(i64, i64)> {
    let max = max_timestamp(batch)?;
    first_at_or_after(batch, max)
}

/// A batch's attribute bits (codec, timestamp type, transactional, control).
pub(crate) fn attributes(batch: &[u8]) -> Option<i16> {
    Some(i16::from_be_bytes(
        batch
            .get(ATTRIBUTES_AT..ATTRIBUTES_AT + 2)?
            .try_into()
            .ok()?,
    ))
}

/// The base offset stamped in a stored batch (its first 8 bytes).
pub fn base_offset(batch: &[u8]) -> Option<i64> {
    Some(i64::from_be_bytes(batch.get(..8)?.try_into().ok()?))
}

/// One record of an uncompressed batch, as compaction sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordRef<'a> {
    /// Its offset, less the batch's base offset.
    pub offset_delta: i64,
    /// Its timestamp, less the batch's first timestamp.
    pub timestamp_delta: i64,
    /// Its key; `None` for a null key.
    pub key: Option<&'a [u8]>,
    /// Whether its value is null: a tombstone, which deletes its key.
    pub tombstone: bool,
    /// The whole record, its length prefix included: what [`retain`] copies.
    pub bytes: &'a [u8],
}

/// The records of an uncompressed stored batch, in order; `None` for a compressed batch (read
/// it through [`crate::compression::Readable`]), a control batch, or a malformed one, which
/// compaction then keeps whole.
pub fn records(batch: &[u8]) -> Option<Vec<RecordRef<'_>>> {
    if attributes(batch)? & (COMPRESSION_MASK | CONTROL) != 0 {
        return None;
    }
    records_in(batch.get(HEADER_LEN..)?)
}

/// The records of a batch's records section (`body`: what follows the header, decompressed).
pub(crate) fn records_in(body: &[u8]) -> Option<Vec<RecordRef<'_>>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let start = at;
        let len = usize::try_from(varint(body, &mut at)?).ok()?;
        let end = at.checked_add(len).filter(|&e| e <= body.len())?;
        let r = &body[..end];
        at += 1; // attributes
        let timestamp_delta = varint(r, &mut at)?;
        let offset_delta = varint(r, &mut at)?;
        let key_len = varint(r, &mut at)?;
        let key = if key_len < 0 {
            None
        } else {
            let key_end = at.checked_add(usize::try_from(key_len).ok()?)?;
            let key = r.get(at..key_end)?;
            at = key_end;
            Some(key)
        };
        let tombstone = varint(r, &mut at)? < 0;
        out.push(RecordRef {
            offset_delta,
            timestamp_delta,
            key,
            tombstone,
            bytes: &body[start..end],
        });
        at = end;
    }
    Some(out)
}

fn put_i32(out: &mut [u8], at: usize, v: i32) {
    out[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

fn put_i64(out: &mut [u8], at: usize, v: i64) {
    out[at..at + 8].copy_from_slice(&v.to_be_bytes());
}

/// Sets a batch's length field from its size and computes its CRC again.
fn seal(mut out: BytesMut) -> Bytes {
    let length = i32::try_from(out.len() - LOG_OVERHEAD).unwrap_or(i32::MAX);
    put_i32(&mut out, 8, length);
    let crc = crc32c::crc32c(&out[CRC_FROM..]);
    out[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    out.freeze()
}

/// `batch` holding only `kept` (records of it, in order, from [`records`]): the header stays
/// — base offset, last offset delta, leader epoch, producer, first timestamp — but for the
/// record count, the largest timestamp (the kept records' largest, unless the broker stamped
/// the batch's time) and the CRC. Offsets stay where they are: a removed record leaves a gap,
/// as Kafka's cleaner leaves one.
pub fn retain(batch: &[u8], kept: &[RecordRef<'_>]) -> Bytes {
    rebuilt(batch, kept, |out| {
        kept.iter().for_each(|r| out.extend_from_slice(r.bytes));
    })
}

/// `batch`'s header over a new records section holding `kept`, which `body` writes (compressed
/// as the batch's attributes say, if they say so), by [`retain`]'s rules for the header.
pub(crate) fn rebuilt(
    batch: &[u8],
    kept: &[RecordRef<'_>],
    body: impl FnOnce(&mut BytesMut),
) -> Bytes {
    let mut out = BytesMut::from(&batch[..HEADER_LEN.min(batch.len())]);
    if out.len() < HEADER_LEN {
        return Bytes::copy_from_slice(batch);
    }
    body(&mut out);
    put_i32(&mut out, RECORD_COUNT_AT, kept.len() as i32);
    let attributes = i16::from_be_bytes([batch[ATTRIBUTES_AT], batch[ATTRIBUTES_AT + 1]]);
    if attributes & LOG_APPEND_TIME == 0 {
        let first = be_i64(batch, BASE_TIMESTAMP_AT).unwrap_or(-1);
        if let Some(max) = kept
            .iter()
            .map(|r| first.saturating_add(r.timestamp_delta))
            .max()
        {
            put_i64(&mut out, MAX_TIMESTAMP_AT, max);
        }
    }
    seal(out)
}

/// An empty batch over `width` offsets from `base` (at most `i32::MAX + 1`), in leader epoch
/// `epoch`, written by no producer, with these timestamps: what compaction leaves where a run
/// of batches lost every record, so that the offsets they spanned stay spanned.
pub fn empty(
    base: u64,
    width: u64,
    epoch: LeaderEpoch,
    first_timestamp: i64,
    max_timestamp: i64,
) -> Bytes {
    let mut out = BytesMut::zeroed(HEADER_LEN);
    put_i64(&mut out, 0, base as i64);
    put_i32(&mut out, LEADER_EPOCH_AT, epoch.0 as i32);
    out[MAGIC_AT] = 2;
    let last_offset_delta = i32::try_from(width.saturating_sub(1)).unwrap_or(i32::MAX);
    put_i32(&mut out, LAST_OFFSET_DELTA_AT, last_offset_delta);
    put_i64(&mut out, BASE_TIMESTAMP_AT, first_timestamp);
    put_i64(&mut out, MAX_TIMESTAMP_AT, max_timestamp);
    put_i64(&mut out, PRODUCER_ID_AT, -1);
    out[PRODUCER_EPOCH_AT..PRODUCER_EPOCH_AT + 2].copy_from_slice(&(-1i16).to_be_bytes());
    put_i32(&mut out, BASE_SEQUENCE_AT, -1);
    put_i32(&mut out, RECORD_COUNT_AT, 0);
    seal(out)
}

/// The first timestamp of a batch (a header field).
pub fn first_timestamp(batch: &[u8]) -> Option<i64> {
    be_i64(batch, BASE_TIMESTAMP_AT)
}

/// A stored `batch` that starts below `offset` and holds no record at or after it, read from
/// `offset` on: an empty batch over the offsets it spans from there, in its epoch. What a
/// follower gets when it asks from inside a run of offsets compaction emptied (its log ended
/// at a batch boundary the cleaner has since merged away), so that every entry it is sent
/// starts where it asks. `None` when the batch starts at or after `offset`, or may hold a
/// record there (a compressed batch with records says nothing of their offsets).
pub fn from_offset(batch: &[u8], offset: u64) -> Option<Bytes> {
    let base = u64::try_from(base_offset(batch)?).ok()?;
    let end = base + width(batch);
    if base >= offset || offset >= end {
        return None;
    }
    let count = be_i32(batch, RECORD_COUNT_AT);
    let below = match records(batch) {
        Some(records) => records
            .iter()
            .all(|r| base.saturating_add_signed(r.offset_delta) < offset),
        None => count == 0,
    };
    below.then(|| {
        empty(
            offset,
            end - offset,
            leader_epoch(batch).unwrap_or_default(),
            first_timestamp(batch).unwrap_or(-1),
            max_timestamp(batch).unwrap_or(-1),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::records::{encode, encode_timed, Outgoing};

    /// One batch whose records carry these timestamps, stamped at `base`.
    fn timed(base: u64, times: &[i64]) -> Bytes {
        let record = Outgoing {
            key: None,
            value: Bytes::from_static(b"v"),
        };
        let batch = encode_timed(times.iter().map(|&t| (&record, t))).expect("encode");
        stamp(&batch, Offset(base), LeaderEpoch(1))
    }

    #[test]
    fn finds_records_by_timestamp() {
        let b = timed(10, &[100, 300, 200, 300]);
        assert!(validate(&b).is_ok());
        assert_eq!(max_timestamp(&b), Some(300));
        assert_eq!(first_at_or_after(&b, 0), Some((10, 100)));
        assert_eq!(first_at_or_after(&b, 150), Some((11, 300)));
        assert_eq!(first_at_or_after(&b, 300), Some((11, 300)));
        assert_eq!(first_at_or_after(&b, 301), None);
        assert_eq!(latest_record(&b), Some((11, 300)));
    }

    #[test]
    fn a_compressed_batch_stands_as_its_base_offset() {
        // The codec bits are all the broker looks at: it never decompresses.
        let mut b = BytesMut::from(&timed(10, &[100, 300, 200])[..]);
        b[ATTRIBUTES_AT + 1] |= 1;
        assert_eq!(first_at_or_after(&b, 0), Some((10, 100)));
        assert_eq!(first_at_or_after(&b, 250), Some((10, 300)));
        assert_eq!(first_at_or_after(&b, 301), None);
        assert_eq!(latest_record(&b), Some((10, 300)));
    }

    fn batch(n: usize) -> Bytes {
        let records: Vec<Outgoing> = (0..n)
            .map(|i| Outgoing {
                key: None,
                value: Bytes::from(format!("v{i}")),
            })
            .collect();
        encode(&records, 0).expect("encode")
    }

    #[test]
    fn accepts_an_encoded_batch_and_counts_its_offsets() {
        let h = validate(&batch(3)).expect("valid");
        assert_eq!(h.offset_count, 3);
    }

    #[test]
    fn refuses_a_flipped_bit() {
        let mut b = BytesMut::from(&batch(2)[..]);
        let last = b.len() - 1;
        b[last] ^= 1;
        assert!(matches!(validate(&b), Err(BatchError::Crc { .. })));
    }

    #[test]
    fn refuses_truncation_and_wrong_magic() {
        let b = batch(2);
        assert!(matches!(
            validate(&b[..b.len() - 1]),
            Err(BatchError::LengthMismatch { .. })
        ));
        assert!(matches!(validate(&b[..10]), Err(BatchError::TooShort(10))));
        let mut m = BytesMut::from(&b[..]);
        m[MAGIC_AT] = 1;
        assert!(matches!(validate(&m), Err(BatchError::Magic(1))));
    }

    /// `b` as an idempotent producer would have sent it (the CRC is not fixed: only the header
    /// fields matter here).
    pub fn as_producer(b: &[u8], id: i64, epoch: i16, first_sequence: i32) -> Bytes {
        let mut out = BytesMut::from(b);
        out[PRODUCER_ID_AT..PRODUCER_ID_AT + 8].copy_from_slice(&id.to_be_bytes());
        out[PRODUCER_EPOCH_AT..PRODUCER_EPOCH_AT + 2].copy_from_slice(&epoch.to_be_bytes());
        out[BASE_SEQUENCE_AT..BASE_SEQUENCE_AT + 4].copy_from_slice(&first_sequence.to_be_bytes());
        out.freeze()
    }

    #[test]
    fn the_producer_stamp_names_the_sequences_a_batch_covers() {
        assert_eq!(producer(&batch(3)), None, "a plain producer's batch");
        let stamped = as_producer(&batch(3), 7, 2, 10);
        let expected = ProducerBatch {
            producer_id: 7,
            producer_epoch: 2,
            first_sequence: 10,
            last_sequence: 12,
        };
        assert_eq!(producer(&stamped), Some(expected));
        let wrapped = producer(&as_producer(&batch(3), 7, 2, i32::MAX - 1)).expect("stamp");
        assert_eq!(
            wrapped.last_sequence, 0,
            "sequences wrap to 0 after i32::MAX"
        );
        assert_eq!(producer(&batch(3)[..20]), None);
    }

    #[test]
    fn stamping_keeps_the_crc_and_sets_the_offset() {
        let s = stamp(&batch(2), Offset(42), LeaderEpoch(7));
        assert!(validate(&s).is_ok());
        assert_eq!(base_offset(&s), Some(42));
    }

    #[test]
    fn a_log_append_time_batch_carries_the_brokers_time_and_a_valid_crc() {
        let stamped = with_log_append_time(&batch(3), 1_700_000_000_000);
        let header = validate(&stamped).expect("the CRC was computed again");
        assert_ne!(header.attributes & LOG_APPEND_TIME, 0);
        assert_eq!(max_timestamp(&stamped), Some(1_700_000_000_000));
        assert_eq!(width(&stamped), 3);
        // Every record has the broker's time.
        assert!(record_times(&stamped)
            .iter()
            .all(|&(_, t)| t == 1_700_000_000_000));
    }

    #[test]
    fn refuses_a_record_claiming_absurd_headers() {
        let good = batch(1);
        // Last record's tail: value "v0" then header count 0 (zigzag 0). Claim 2^30 headers
        // and fix the CRC so that only the record walk can notice.
        let mut b = BytesMut::from(&good[..]);
        let last = b.len() - 1;
        assert_eq!(b[last], 0, "header count is the last byte");
        b[last] = 0x80;
        b.extend_from_slice(&[0x80, 0x80, 0x80, 0x08]);
        let len = (b.len() - LOG_OVERHEAD) as i32;
        b[8..12].copy_from_slice(&len.to_be_bytes());
        // The record's own length prefix (first byte after the header) grows by 4 too.
        b[HEADER_LEN] += 8; // zigzag: +4 bytes is +8 encoded
        let crc = crc32c::crc32c(&b[CRC_FROM..]);
        b[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
        assert!(
            matches!(validate(&b), Err(BatchError::Record { index: 0, .. })),
            "{:?}",
            validate(&b)
        );
    }

    #[test]
    fn split_finds_each_batch_and_refuses_garbage() {
        let mut two = BytesMut::from(&batch(1)[..]);
        two.extend_from_slice(&batch(2));
        assert_eq!(split(two.freeze()).expect("two").len(), 2);
        assert!(split(Bytes::from_static(&[0xff; 20])).is_err());
    }

    /// Records `(key, value)` (`None`: a tombstone) in one batch at `base`, epoch 3.
    fn keyed(base: u64, records: &[(Option<&str>, Option<&str>)]) -> Bytes {
        let entries: Vec<(Bytes, Option<Bytes>)> = records
            .iter()
            .map(|(k, v)| {
                (
                    Bytes::copy_from_slice(k.unwrap_or("").as_bytes()),
                    v.map(|v| Bytes::copy_from_slice(v.as_bytes())),
                )
            })
            .collect();
        let batch = crate::client::records::encode_entries(&entries, 100).expect("encode");
        stamp(&batch, Offset(base), LeaderEpoch(3))
    }

    #[test]
    fn compaction_keeps_the_batch_its_offsets_and_the_records_it_keeps() {
        let b = keyed(
            10,
            &[
                (Some("k1"), Some("a")),
                (Some("k2"), None),
                (Some("k1"), Some("c")),
            ],
        );
        let rs = records(&b).expect("uncompressed");
        let keys: Vec<_> = rs
            .iter()
            .map(|r| (r.key, r.offset_delta, r.tombstone))
            .collect();
        assert_eq!(
            keys,
            vec![
                (Some(&b"k1"[..]), 0, false),
                (Some(&b"k2"[..]), 1, true),
                (Some(&b"k1"[..]), 2, false)
            ]
        );
        assert_eq!(crate::compression::keyless_records(&b), Ok(vec![]));

        let kept = retain(&b, &rs[2..]);
        assert!(validate_stored(&kept).is_ok());
        assert!(validate(&kept).is_err(), "a producer never leaves gaps");
        assert_eq!((base_offset(&kept), width(&kept)), (Some(10), 3));
        assert_eq!(leader_epoch(&kept), Some(LeaderEpoch(3)));
        let read = crate::client::records::decode(kept.clone()).expect("clients read it");
        assert_eq!(read.len(), 1);
        assert_eq!(
            (read[0].offset, read[0].value.as_deref()),
            (12, Some(&b"c"[..]))
        );
        assert_eq!(crate::client::records::end_offset(&kept), Some(13));
        assert_eq!(from_offset(&kept, 11), None, "a record lies at or after 11");

        let run = empty(20, 5, LeaderEpoch(4), 1, 2);
        assert!(validate_stored(&run).is_ok());
        assert_eq!((base_offset(&run), width(&run)), (Some(20), 5));
        assert_eq!(records(&run).map(|r| r.len()), Some(0));
        assert_eq!(max_timestamp(&run), Some(2));
        let rest = from_offset(&run, 22).expect("inside the run");
        assert!(validate_stored(&rest).is_ok());
        assert_eq!((base_offset(&rest), width(&rest)), (Some(22), 3));
        assert_eq!(leader_epoch(&rest), Some(LeaderEpoch(4)));
        assert_eq!(from_offset(&run, 20), None, "it starts there already");
        assert_eq!(from_offset(&run, 25), None, "past its end");
    }

    #[test]
    fn a_stored_batch_may_have_gaps_but_never_more_records_than_offsets_or_out_of_order() {
        let b = keyed(0, &[(Some("a"), Some("1")), (Some("b"), Some("2"))]);
        let rs = records(&b).expect("records");
        // Both records kept, in the wrong order: refused.
        let swapped = retain(&b, &[rs[1], rs[0]]);
        assert!(validate_stored(&swapped).is_err());
        // Keyless records: a compacted topic refuses the batch, naming each.
        assert_eq!(
            crate::compression::keyless_records(&batch(2)),
            Ok(vec![0, 1])
        );
    }
}
