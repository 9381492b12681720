//! `__consumer_offsets`: where consumer groups' committed offsets live, as Kafka keeps them.
//!
//! A group's offsets go to one partition of this internal topic, picked by Kafka's own hash of
//! the group id ([`partition_for`]), so tools that compute a group's coordinator agree with
//! isr's. The leader of that partition coordinates the group. A commit is a record in the
//! partition, written with acks=all and acknowledged once committed: an acknowledged commit
//! survives the coordinator's failure by the replication protocol the model checks, and a new
//! coordinator finds it by reading the partition ([`OffsetsView`]).
//!
//! Records use Kafka's own layout (`OffsetCommitKey` v1, `OffsetCommitValue` v3; a record
//! without a value deletes the key), so they read as Kafka's do. Records of other kinds (Kafka's
//! group metadata, key version 2) are skipped; a record that does not parse is skipped with an
//! error for the caller to log, never fatal.

use crate::client::records::{self, Incoming};
use crate::CommittedOffset;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use isr::Offset;
use std::collections::{BTreeMap, BTreeSet};

/// The internal topic's name.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";
/// Its number of partitions unless configured (Kafka's `offsets.topic.num.partitions`).
pub const DEFAULT_PARTITIONS: u32 = 50;
/// Its replication factor when the cluster has as many brokers (Kafka's
/// `offsets.topic.replication.factor`).
pub const REPLICATION_FACTOR: u16 = 3;
/// Its `min.insync.replicas` when it has as many replicas.
pub const MIN_INSYNC_REPLICAS: u16 = 2;

/// Key version of an offset commit (Kafka writes 1; 0 is its older form, same layout).
const OFFSET_KEY: i16 = 1;
/// Value version written: offset, leader epoch, metadata, commit timestamp.
const VALUE_VERSION: i16 = 3;

/// The partition of [`OFFSETS_TOPIC`] that holds `group`'s offsets: Java's `String.hashCode`
/// of the group id, made non-negative as Kafka's `Utils.abs` does, modulo `partitions`.
pub fn partition_for(group: &str, partitions: u32) -> u32 {
    let hash = group
        .encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
    let abs = if hash == i32::MIN {
        0
    } else {
        hash.unsigned_abs()
    };
    abs % partitions.max(1)
}

/// One partition's committed offset in a group: the key of an offsets record.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct OffsetKey {
    pub group: String,
    pub topic: String,
    pub partition: u32,
}

/// A record of the offsets topic: a commit, or (without a value) a deletion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetRecord {
    pub key: OffsetKey,
    pub committed: Option<CommittedOffset>,
}

fn put_string(buf: &mut BytesMut, s: &str) -> Result<(), String> {
    let len = i16::try_from(s.len()).map_err(|_| format!("{} bytes is too long", s.len()))?;
    buf.put_i16(len);
    buf.put_slice(s.as_bytes());
    Ok(())
}

fn get_string(buf: &mut Bytes) -> Result<String, String> {
    if buf.remaining() < 2 {
        return Err("truncated string length".into());
    }
    let len = usize::try_from(buf.get_i16()).map_err(|_| "negative string length")?;
    if buf.remaining() < len {
        return Err(format!("string of {len} bytes truncated"));
    }
    String::from_utf8(buf.split_to(len).to_vec()).map_err(|_| "a string not in UTF-8".into())
}

fn get<T>(buf: &mut Bytes, size: usize, read: impl FnOnce(&mut Bytes) -> T) -> Result<T, String> {
    if buf.remaining() < size {
        return Err("truncated".into());
    }
    Ok(read(buf))
}

impl OffsetRecord {
    /// The record's key and value bytes, in Kafka's layout.
    pub fn encode(&self, timestamp: i64) -> Result<(Bytes, Option<Bytes>), String> {
        let mut key = BytesMut::new();
        key.put_i16(OFFSET_KEY);
        put_string(&mut key, &self.key.group)?;
        put_string(&mut key, &self.key.topic)?;
        key.put_i32(i32::try_from(self.key.partition).map_err(|_| "partition index too large")?);
        let value = match &self.committed {
            None => None,
            Some(c) => {
                let mut value = BytesMut::new();
                value.put_i16(VALUE_VERSION);
                value.put_i64(i64::try_from(c.offset.0).map_err(|_| "offset too large")?);
                value.put_i32(-1);
                put_string(&mut value, &c.metadata)?;
                value.put_i64(timestamp);
                Some(value.freeze())
            }
        };
        Ok((key.freeze(), value))
    }

    /// Parses a record of the offsets topic: `Ok(None)` for a record of another kind.
    pub fn decode(
        key: Option<Bytes>,
        value: Option<Bytes>,
    ) -> Result<Option<OffsetRecord>, String> {
        let mut key = key.ok_or("a record without a key")?;
        let version = get(&mut key, 2, Buf::get_i16)?;
        if !(0..=OFFSET_KEY).contains(&version) {
            return Ok(None);
        }
        let group = get_string(&mut key)?;
        let topic = get_string(&mut key)?;
        let partition = u32::try_from(get(&mut key, 4, Buf::get_i32)?)
            .map_err(|_| "a negative partition index")?;
        let committed = match value {
            None => None,
            Some(mut value) => {
                let version = get(&mut value, 2, Buf::get_i16)?;
                if !(0..=VALUE_VERSION).contains(&version) {
                    return Err(format!(
                        "value version {version} is newer than this broker's"
                    ));
                }
                let offset = u64::try_from(get(&mut value, 8, Buf::get_i64)?)
                    .map_err(|_| "a negative offset")?;
                if version >= 3 {
                    get(&mut value, 4, Buf::get_i32)?; // leader epoch
                }
                let metadata = get_string(&mut value)?;
                Some(CommittedOffset {
                    offset: Offset(offset),
                    metadata,
                })
            }
        };
        Ok(Some(OffsetRecord {
            key: OffsetKey {
                group,
                topic,
                partition,
            },
            committed,
        }))
    }
}

/// One record batch holding `records`, ready to produce to the group's offsets partition.
pub fn batch(records: &[OffsetRecord], timestamp: i64) -> Result<Bytes, String> {
    let entries = records
        .iter()
        .map(|r| r.encode(timestamp))
        .collect::<Result<Vec<_>, _>>()?;
    records::encode_entries(&entries, timestamp).map_err(|e| e.to_string())
}

/// The committed offsets that one partition of the offsets topic holds, as read from it: the
/// last record of each key wins, and a deletion removes it.
#[derive(Clone, Debug, Default)]
pub struct OffsetsView {
    offsets: BTreeMap<OffsetKey, CommittedOffset>,
}

impl OffsetsView {
    /// Applies records read from the partition, in offset order. Returns the offsets of the
    /// records that did not parse, with why, for the caller to log: they are skipped.
    pub fn apply(&mut self, read: Vec<Incoming>) -> Vec<(i64, String)> {
        let mut skipped = Vec::new();
        for record in read {
            match OffsetRecord::decode(record.key, record.value) {
                Ok(Some(OffsetRecord { key, committed })) => match committed {
                    Some(c) => {
                        self.offsets.insert(key, c);
                    }
                    None => {
                        self.offsets.remove(&key);
                    }
                },
                Ok(None) => {}
                Err(e) => skipped.push((record.offset, e)),
            }
        }
        skipped
    }

    /// A group's committed offset in one partition.
    pub fn committed(&self, group: &str, topic: &str, partition: u32) -> Option<&CommittedOffset> {
        self.offsets.get(&OffsetKey {
            group: group.to_owned(),
            topic: topic.to_owned(),
            partition,
        })
    }

    /// Every committed offset of a group.
    pub fn of_group<'a>(
        &'a self,
        group: &'a str,
    ) -> impl Iterator<Item = (&'a OffsetKey, &'a CommittedOffset)> + 'a {
        self.offsets.iter().filter(move |(k, _)| k.group == group)
    }

    /// The groups with a committed offset here.
    pub fn groups(&self) -> BTreeSet<String> {
        self.offsets.keys().map(|k| k.group.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values computed with Java's `Math.abs("...".hashCode()) % 50`, as Kafka's
    /// `GroupCoordinator.partitionFor` does: a group's coordinator is where Kafka would put it.
    #[test]
    fn a_group_goes_to_the_partition_kafka_would_pick() {
        // "a".hashCode() = 97; "orders".hashCode() = -1008770331; "" = 0.
        assert_eq!(partition_for("a", 50), 47);
        assert_eq!(partition_for("orders", 50), 31);
        assert_eq!(partition_for("", 50), 0);
        // "polygenelubricants".hashCode() is Integer.MIN_VALUE, which Utils.abs maps to 0.
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        // Java hashes UTF-16 code units: "é" is 233, "😀" the pair 0xD83D 0xDE00 (1772899).
        assert_eq!(partition_for("é", 50), 233 % 50);
        assert_eq!(partition_for("😀", 50), 1_772_899 % 50);
    }

    fn record(group: &str, partition: u32, offset: Option<u64>) -> OffsetRecord {
        OffsetRecord {
            key: OffsetKey {
                group: group.into(),
                topic: "t".into(),
                partition,
            },
            committed: offset.map(|o| CommittedOffset {
                offset: Offset(o),
                metadata: format!("m{o}"),
            }),
        }
    }

    fn read_back(records: &[OffsetRecord]) -> Vec<Incoming> {
        records::decode(batch(records, 5).expect("encodes")).expect("decodes")
    }

    #[test]
    fn records_read_back_as_written_and_the_last_of_a_key_wins() {
        let written = [
            record("g", 0, Some(3)),
            record("g", 1, Some(4)),
            record("h", 0, Some(9)),
            record("g", 0, Some(7)),
            record("h", 0, None),
        ];
        let mut view = OffsetsView::default();
        assert!(view.apply(read_back(&written)).is_empty());
        assert_eq!(
            view.committed("g", "t", 0).map(|c| c.offset),
            Some(Offset(7))
        );
        assert_eq!(
            view.committed("g", "t", 0).map(|c| c.metadata.as_str()),
            Some("m7")
        );
        assert_eq!(view.of_group("g").count(), 2);
        assert_eq!(view.committed("h", "t", 0), None, "deleted");
        assert_eq!(view.groups(), BTreeSet::from(["g".to_owned()]));
    }

    #[test]
    fn a_record_that_does_not_parse_is_skipped_and_named_and_other_kinds_are_ignored() {
        let good = record("g", 0, Some(1)).encode(0).expect("encodes");
        let mut group_metadata = BytesMut::new();
        group_metadata.put_i16(2);
        put_string(&mut group_metadata, "g").expect("short");
        let mut newer = BytesMut::new();
        newer.put_i16(9);
        let read = vec![
            Incoming {
                offset: 0,
                timestamp: 0,
                key: Some(Bytes::from_static(&[0, 1, 0, 5, b'g'])),
                value: None,
            },
            Incoming {
                offset: 1,
                timestamp: 0,
                key: Some(group_metadata.freeze()),
                value: Some(Bytes::from_static(b"anything")),
            },
            Incoming {
                offset: 2,
                timestamp: 0,
                key: Some(good.0.clone()),
                value: Some(newer.freeze()),
            },
            Incoming {
                offset: 3,
                timestamp: 0,
                key: None,
                value: None,
            },
            Incoming {
                offset: 4,
                timestamp: 0,
                key: Some(good.0),
                value: good.1,
            },
        ];
        let mut view = OffsetsView::default();
        let skipped: Vec<i64> = view.apply(read).into_iter().map(|(o, _)| o).collect();
        assert_eq!(skipped, [0, 2, 3], "truncated key, newer value, no key");
        assert_eq!(
            view.committed("g", "t", 0).map(|c| c.offset),
            Some(Offset(1))
        );
    }
}
