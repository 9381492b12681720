//! Building and reading v2 record batches on the client side (uncompressed).

use super::error::ClientError;
use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

/// One record to produce.
pub struct Outgoing {
    pub key: Option<Bytes>,
    pub value: Bytes,
}

/// One record read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Incoming {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
}

/// Milliseconds since the Unix epoch: Kafka's record timestamps.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// An idempotent producer's stamp on a batch (KIP-98): its id and epoch, and the sequence
/// number of the batch's first record in its partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Idempotent {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub first_sequence: i32,
}

/// Encodes `records` as one uncompressed v2 batch (base offset 0: the broker assigns it).
pub fn encode(records: &[Outgoing], timestamp: i64) -> Result<Bytes, ClientError> {
    encode_as(records, timestamp, None)
}

/// [`encode`], stamped by an idempotent producer when `producer` is given: a broker that
/// already holds the batch answers a retry of it with the first attempt's offsets.
pub fn encode_as(
    records: &[Outgoing],
    timestamp: i64,
    producer: Option<Idempotent>,
) -> Result<Bytes, ClientError> {
    encode_batch(records.iter().map(|r| (r, timestamp)), producer)
}

/// Encodes records, each with its own timestamp, as one uncompressed v2 batch.
pub fn encode_timed<'a>(
    records: impl IntoIterator<Item = (&'a Outgoing, i64)>,
) -> Result<Bytes, ClientError> {
    encode_batch(records, None)
}

/// Encodes keyed records, where a record without a value is a tombstone (a key deleted, in a
/// compacted topic), as one uncompressed v2 batch.
pub fn encode_entries(
    entries: &[(Bytes, Option<Bytes>)],
    timestamp: i64,
) -> Result<Bytes, ClientError> {
    let records = entries
        .iter()
        .map(|(key, value)| (Some(key.clone()), value.clone(), timestamp));
    encode_records(records, None)
}

fn encode_batch<'a>(
    records: impl IntoIterator<Item = (&'a Outgoing, i64)>,
    producer: Option<Idempotent>,
) -> Result<Bytes, ClientError> {
    let records = records
        .into_iter()
        .map(|(r, timestamp)| (r.key.clone(), Some(r.value.clone()), timestamp));
    encode_records(records, producer)
}

/// Encodes (key, value, timestamp) records as one uncompressed v2 batch.
fn encode_records(
    records: impl IntoIterator<Item = (Option<Bytes>, Option<Bytes>, i64)>,
    producer: Option<Idempotent>,
) -> Result<Bytes, ClientError> {
    let (producer_id, producer_epoch, first_sequence) = producer.map_or((-1, -1, 0), |p| {
        (p.producer_id, p.producer_epoch, p.first_sequence)
    });
    let records: Vec<Record> = records
        .into_iter()
        .zip(0..)
        .map(|((key, value, timestamp), i)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i64::from(i),
            // The encoder groups records into one batch while offset - sequence is constant.
            sequence: first_sequence.wrapping_add(i),
            timestamp,
            key,
            value,
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &options)
        .map_err(|e| ClientError::Usage(format!("cannot encode records: {e}")))?;
    Ok(buf.freeze())
}

/// Decodes the whole batches in a fetch answer; a trailing partial batch (a broker may cut
/// one at its byte limit) is ignored, and control records are skipped.
/// Where the last whole batch of `data` (a Fetch answer's records) ends: the offset a reader
/// asks from next, even where the batch holds no record (a run of offsets a compacted topic's
/// cleaner emptied) or its last offsets hold none (cleaned records leave gaps).
pub fn end_offset(data: &[u8]) -> Option<i64> {
    let mut end = None;
    let mut at = 0;
    while let Some(header) = data.get(at..at + crate::batch::HEADER_LEN) {
        let length = i32::from_be_bytes([header[8], header[9], header[10], header[11]]);
        let total = usize::try_from(length).ok()?.checked_add(12)?;
        if at + total > data.len() {
            break;
        }
        let batch = &data[at..at + total];
        let base = crate::batch::base_offset(batch)?;
        end = Some(base.saturating_add(crate::batch::width(batch) as i64));
        at += total;
    }
    end
}

pub fn decode(mut data: Bytes) -> Result<Vec<Incoming>, String> {
    let mut out = Vec::new();
    while data.len() >= 12 {
        let declared = i32::from_be_bytes([data[8], data[9], data[10], data[11]]);
        let Some(total) = usize::try_from(declared)
            .ok()
            .and_then(|d| d.checked_add(12))
        else {
            return Err(format!("negative batch length {declared}"));
        };
        if total > data.len() {
            break;
        }
        let mut batch = data.split_to(total);
        // The same checks the broker applies on produce: CRC, and records within bounds
        // before the decoder preallocates from their counts.
        crate::batch::validate_stored(&batch).map_err(|e| e.to_string())?;
        let set = RecordBatchDecoder::decode(&mut batch).map_err(|e| e.to_string())?;
        out.extend(
            set.records
                .into_iter()
                .filter(|r| !r.control)
                .map(|r| Incoming {
                    offset: r.offset,
                    timestamp: r.timestamp,
                    key: r.key,
                    value: r.value,
                }),
        );
    }
    Ok(out)
}
