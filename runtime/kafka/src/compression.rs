//! `compression.type`: a topic that names a codec has each batch compressed with it, as Kafka
//! does — a batch in another codec (or none) is decompressed and compressed again, one in the
//! topic's codec is stored as it came, and `producer` (the default) stores every batch as the
//! producer compressed it.
//!
//! Decompressing is what a broker must never let a producer abuse: a few kilobytes of gzip can
//! inflate to gigabytes, and a snappy block declares its length before it is read. Every
//! codec here reads at most [`MAX_DECOMPRESSED`] bytes and refuses the batch beyond that,
//! before allocating more (kafka-protocol's own decompressors would allocate whatever the
//! batch asks). The same bounded reading lets a compacted topic check that a compressed
//! batch's records all have keys.

use crate::batch::RecordRef;
use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::compression::{self as cmpr, Compressor};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions,
};
use std::borrow::Cow;
use std::io::Read;

/// The most a batch's records may take once decompressed: 64 MiB, four times the largest
/// batch a broker stores ([`crate::batch::MAX_BATCH`]). Kafka's producers compress batches
/// of at most `batch.size` (16 KiB by default) up to `max.request.size` (1 MiB), so a real
/// batch is far below it.
pub const MAX_DECOMPRESSED: usize = 64 << 20;

/// A `compression.type`'s codec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    /// `uncompressed`.
    None,
    /// `gzip`.
    Gzip,
    /// `snappy`.
    Snappy,
    /// `lz4`.
    Lz4,
    /// `zstd`.
    Zstd,
}

/// The values `compression.type` takes, as Kafka's.
pub const COMPRESSION_TYPES: [&str; 6] =
    ["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];

impl Codec {
    /// The codec a `compression.type` value names: `Ok(None)` for `producer` (keep the
    /// producer's), an error naming the valid values for anything else.
    pub fn parse(value: &str) -> Result<Option<Codec>, String> {
        match value.trim().to_ascii_lowercase().as_str() {
            "producer" => Ok(None),
            "uncompressed" => Ok(Some(Codec::None)),
            "gzip" => Ok(Some(Codec::Gzip)),
            "snappy" => Ok(Some(Codec::Snappy)),
            "lz4" => Ok(Some(Codec::Lz4)),
            "zstd" => Ok(Some(Codec::Zstd)),
            other => Err(format!(
                "{other:?} is not one of {}",
                COMPRESSION_TYPES.join(", ")
            )),
        }
    }

    /// The codec a batch's attributes name; `None` for bits no codec has (such a batch is
    /// refused when read).
    pub fn of(batch: &[u8]) -> Option<Codec> {
        match crate::batch::attributes(batch)? & crate::batch::COMPRESSION_MASK {
            0 => Some(Codec::None),
            1 => Some(Codec::Gzip),
            2 => Some(Codec::Snappy),
            3 => Some(Codec::Lz4),
            4 => Some(Codec::Zstd),
            _ => None,
        }
    }

    fn compression(self) -> Compression {
        match self {
            Codec::None => Compression::None,
            Codec::Gzip => Compression::Gzip,
            Codec::Snappy => Compression::Snappy,
            Codec::Lz4 => Compression::Lz4,
            Codec::Zstd => Compression::Zstd,
        }
    }
}

/// Why a batch's records could not be read or written again.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CompressionError {
    /// The records do not decompress or decode.
    #[error("the batch's records do not decode: {0}")]
    Corrupt(String),
    /// The records would take more than [`MAX_DECOMPRESSED`] bytes decompressed.
    #[error("the batch's records decompress to more than {MAX_DECOMPRESSED} bytes")]
    TooLarge,
}

/// A batch that cannot be read is CORRUPT_MESSAGE; one too large once decompressed is
/// MESSAGE_TOO_LARGE, which a producer does not retry.
impl From<CompressionError> for crate::backend::BackendError {
    fn from(e: CompressionError) -> Self {
        match e {
            CompressionError::Corrupt(_) => Self::CorruptMessage(e.to_string()),
            CompressionError::TooLarge => Self::MessageTooLarge(e.to_string()),
        }
    }
}

/// A valid batch's records, decompressed within [`MAX_DECOMPRESSED`].
pub fn records(batch: &[u8]) -> Result<Vec<Record>, CompressionError> {
    let mut buf = Bytes::copy_from_slice(batch);
    let set = RecordBatchDecoder::decode_with_custom_compression(&mut buf, Some(decompress))
        .map_err(refusal)?;
    Ok(set.records)
}

/// The [`CompressionError`] behind an error of [`decompress`] or of kafka-protocol's decoder.
fn refusal(e: anyhow::Error) -> CompressionError {
    match e.downcast_ref::<CompressionError>() {
        Some(e) => e.clone(),
        None => CompressionError::Corrupt(format!("{e:#}")),
    }
}

/// The positions in a valid batch of its records without a key, which a compacted topic
/// refuses (Kafka: INVALID_RECORD, each such record named in the answer's `record_errors`); a
/// compressed batch is read within the bound. A control batch holds no producer's records:
/// none.
pub fn keyless_records(batch: &[u8]) -> Result<Vec<i32>, CompressionError> {
    let Some(readable) = Readable::of(batch)? else {
        return Ok(Vec::new());
    };
    let records = readable
        .records()
        .ok_or_else(|| CompressionError::Corrupt("its records do not parse".into()))?;
    Ok((0..)
        .zip(&records)
        .filter(|(_, r)| r.key.is_none())
        .map(|(i, _)| i)
        .collect())
}

/// A stored batch's records as compaction reads them, compressed or not: its records section,
/// decompressed if it was (within the bound), and the codec to write it back in.
pub struct Readable<'a> {
    codec: Codec,
    body: Cow<'a, [u8]>,
}

impl<'a> Readable<'a> {
    /// `batch`'s records section; `None` for a control batch, which compaction keeps whole (as
    /// it keeps one that does not read: the error).
    pub fn of(batch: &'a [u8]) -> Result<Option<Readable<'a>>, CompressionError> {
        let corrupt = |what: &str| CompressionError::Corrupt(what.into());
        let attributes = crate::batch::attributes(batch).ok_or_else(|| corrupt("no header"))?;
        if attributes & crate::batch::CONTROL != 0 {
            return Ok(None);
        }
        let codec = Codec::of(batch).ok_or_else(|| corrupt("an unknown codec"))?;
        let section = batch
            .get(crate::batch::HEADER_LEN..)
            .ok_or_else(|| corrupt("no records section"))?;
        let body = match codec {
            Codec::None => Cow::Borrowed(section),
            _ => {
                let mut data = Bytes::copy_from_slice(section);
                let out = decompress(&mut data, codec.compression()).map_err(refusal)?;
                Cow::Owned(out.to_vec())
            }
        };
        Ok(Some(Readable { codec, body }))
    }

    /// The batch's records, in order; `None` if they do not parse.
    pub fn records(&self) -> Option<Vec<RecordRef<'_>>> {
        crate::batch::records_in(&self.body)
    }

    /// `batch` (the one this was read from) holding only `kept` (records of [`Self::records`],
    /// in order), compressed again as it was: [`crate::batch::retain`]'s header rules. `None`
    /// if the codec failed to compress (the batch is then kept whole).
    pub fn retain(&self, batch: &[u8], kept: &[RecordRef<'_>]) -> Option<Bytes> {
        if self.codec == Codec::None {
            return Some(crate::batch::retain(batch, kept));
        }
        let mut compressed = BytesMut::new();
        let write = |tmp: &mut BytesMut| -> anyhow::Result<()> {
            kept.iter().for_each(|r| tmp.extend_from_slice(r.bytes));
            Ok(())
        };
        match self.codec {
            Codec::None => write(&mut compressed),
            Codec::Gzip => cmpr::Gzip::compress(&mut compressed, write),
            Codec::Snappy => cmpr::Snappy::compress(&mut compressed, write),
            Codec::Lz4 => cmpr::Lz4::compress(&mut compressed, write),
            Codec::Zstd => cmpr::Zstd::compress(&mut compressed, write),
        }
        .ok()?;
        Some(crate::batch::rebuilt(batch, kept, |out| {
            out.extend_from_slice(&compressed)
        }))
    }
}

/// `batch` with its records compressed by `codec`: the same records, offsets, timestamps and
/// producer fields in one batch; `batch` itself if it already is.
pub fn recompress(batch: Bytes, codec: Codec) -> Result<Bytes, CompressionError> {
    if Codec::of(&batch) == Some(codec) {
        return Ok(batch);
    }
    let records = records(&batch)?;
    let mut out = BytesMut::with_capacity(batch.len());
    let options = RecordEncodeOptions {
        version: 2,
        compression: codec.compression(),
    };
    RecordBatchEncoder::encode(&mut out, &records, &options)
        .map_err(|e| CompressionError::Corrupt(format!("{e:#}")))?;
    Ok(out.freeze())
}

/// The decompressor [`records`] hands kafka-protocol: each codec read through a reader that
/// stops one byte past the bound.
fn decompress(data: &mut Bytes, compression: Compression) -> anyhow::Result<Bytes> {
    let data = data.copy_to_bytes(data.remaining());
    let out = match compression {
        Compression::None => return Ok(data),
        Compression::Gzip => bounded(flate2::read::GzDecoder::new(data.reader()))?,
        Compression::Lz4 => bounded(lz4::Decoder::new(data.reader())?)?,
        Compression::Zstd => bounded(zstd::stream::read::Decoder::new(data.reader())?)?,
        Compression::Snappy => snappy(&data)?,
    };
    Ok(Bytes::from(out))
}

/// Everything `reader` yields, unless it is more than [`MAX_DECOMPRESSED`] bytes.
fn bounded(reader: impl Read) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    reader
        .take(MAX_DECOMPRESSED as u64 + 1)
        .read_to_end(&mut out)?;
    if out.len() > MAX_DECOMPRESSED {
        return Err(CompressionError::TooLarge.into());
    }
    Ok(out)
}

/// The header of the framing Kafka's Java clients write snappy in (xerial's): blocks follow,
/// each a big-endian length and a raw snappy block. librdkafka writes either that or one raw
/// block.
const XERIAL_MAGIC: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";

/// Snappy, xerial-framed or raw: every block's declared length is added up and checked against
/// the bound before anything is allocated.
fn snappy(data: &[u8]) -> anyhow::Result<Vec<u8>> {
    let blocks: Vec<&[u8]> = match data.strip_prefix(XERIAL_MAGIC.as_slice()) {
        None => vec![data],
        Some(mut rest) => {
            let mut blocks = Vec::new();
            while !rest.is_empty() {
                let (len, tail) = rest
                    .split_first_chunk::<4>()
                    .ok_or_else(|| CompressionError::Corrupt("a snappy block's length".into()))?;
                let len = u32::from_be_bytes(*len) as usize;
                if tail.len() < len {
                    return Err(CompressionError::Corrupt("a snappy block cut short".into()).into());
                }
                let (block, after) = tail.split_at(len);
                blocks.push(block);
                rest = after;
            }
            blocks
        }
    };
    let mut total = 0usize;
    for block in &blocks {
        total = total.saturating_add(snap::raw::decompress_len(block)?);
        if total > MAX_DECOMPRESSED {
            return Err(CompressionError::TooLarge.into());
        }
    }
    let mut out = vec![0; total];
    let mut at = 0;
    for block in blocks {
        at += snap::raw::Decoder::new().decompress(block, &mut out[at..])?;
    }
    out.truncate(at);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::records::{encode, Outgoing};

    fn batch_of(values: &[&str], keyed: bool) -> Bytes {
        let records: Vec<Outgoing> = values
            .iter()
            .map(|v| Outgoing {
                key: keyed.then(|| Bytes::copy_from_slice(v.as_bytes())),
                value: Bytes::copy_from_slice(v.as_bytes()),
            })
            .collect();
        encode(&records, 0).expect("encode")
    }

    fn values(batch: &[u8]) -> Vec<String> {
        records(batch)
            .expect("records")
            .into_iter()
            .map(|r| String::from_utf8_lossy(&r.value.unwrap_or_default()).into_owned())
            .collect()
    }

    #[test]
    fn every_codec_round_trips_a_batch_through_every_other() {
        let plain = batch_of(&["a", "bb", "ccc"], true);
        let codecs = [
            Codec::None,
            Codec::Gzip,
            Codec::Snappy,
            Codec::Lz4,
            Codec::Zstd,
        ];
        for from in codecs {
            let once = recompress(plain.clone(), from).expect("compress");
            assert_eq!(Codec::of(&once), Some(from));
            crate::batch::validate(&once).expect("a valid batch");
            for to in codecs {
                let again = recompress(once.clone(), to).expect("recompress");
                assert_eq!(Codec::of(&again), Some(to), "{from:?} → {to:?}");
                assert_eq!(values(&again), ["a", "bb", "ccc"], "{from:?} → {to:?}");
                assert_eq!(crate::batch::width(&again), 3);
            }
        }
    }

    #[test]
    fn a_batch_already_in_the_codec_is_kept_as_it_came() {
        let gzip = recompress(batch_of(&["x"], false), Codec::Gzip).expect("gzip");
        let kept = recompress(gzip.clone(), Codec::Gzip).expect("kept");
        assert_eq!(kept.as_ptr(), gzip.as_ptr(), "the same bytes, not a copy");
    }

    /// A gzip bomb: a batch whose single record inflates past the bound is refused as too
    /// large, not decompressed.
    #[test]
    fn a_batch_that_inflates_past_the_bound_is_refused() {
        let huge = "0".repeat(MAX_DECOMPRESSED + 1);
        let bomb = recompress(batch_of(&[&huge], false), Codec::Gzip).expect("gzip");
        assert!(bomb.len() < 1 << 20, "{} bytes compressed", bomb.len());
        assert_eq!(records(&bomb), Err(CompressionError::TooLarge));
        let snappy = recompress(batch_of(&[&huge], false), Codec::Snappy).expect("snappy");
        assert_eq!(records(&snappy), Err(CompressionError::TooLarge));
    }

    #[test]
    fn a_raw_snappy_block_that_declares_more_than_the_bound_is_refused_unread() {
        // A varint length of 2^32 - 1, then nothing: allocating it first would take 4 GiB.
        let block = [0xff, 0xff, 0xff, 0xff, 0x0f];
        let err = snappy(&block).expect_err("refused");
        assert!(
            matches!(
                err.downcast_ref::<CompressionError>(),
                Some(CompressionError::TooLarge)
            ),
            "{err:#}"
        );
    }

    #[test]
    fn garbage_in_a_compressed_batch_is_corrupt_not_a_panic() {
        let gzip = recompress(batch_of(&["a", "b"], false), Codec::Gzip).expect("gzip");
        let mut broken = gzip.to_vec();
        let last = broken.len() - 5;
        broken[last] ^= 0xff;
        assert!(matches!(
            records(&broken),
            Err(CompressionError::Corrupt(_))
        ));
    }

    #[test]
    fn a_compressed_batch_with_a_keyless_record_is_found_out() {
        for codec in [Codec::None, Codec::Lz4] {
            let keyed = recompress(batch_of(&["a", "b"], true), codec).expect("keyed");
            assert_eq!(keyless_records(&keyed), Ok(vec![]), "{codec:?}");
            let keyless = recompress(batch_of(&["a", "b"], false), codec).expect("keyless");
            assert_eq!(keyless_records(&keyless), Ok(vec![0, 1]), "{codec:?}");
        }
    }

    #[test]
    fn compression_types_parse_as_kafka_names_them() {
        assert_eq!(Codec::parse("producer"), Ok(None));
        assert_eq!(Codec::parse("ZSTD"), Ok(Some(Codec::Zstd)));
        assert_eq!(Codec::parse("uncompressed"), Ok(Some(Codec::None)));
        let err = Codec::parse("brotli").expect_err("refused");
        assert!(
            err.contains("uncompressed, zstd, lz4, snappy, gzip, producer"),
            "{err}"
        );
    }
}
