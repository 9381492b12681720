//! `__consumer_offsets`: where consumer groups' committed offsets live, as Kafka keeps them.
//!
//! A group's offsets go to one partition of this internal topic, picked by Kafka's own hash of
//! the group id ([`partition_for`]), so tools that compute a group's coordinator agree with
//! isr's. The leader of that partition coordinates the group. A commit is a record in the
//! partition, written with acks=all and acknowledged once committed: an acknowledged commit
//! survives the coordinator's failure by the replication protocol the model checks, and a new
//! coordinator finds it by reading the partition ([`OffsetsView`]).
//!
//! The partition also holds each group's membership ([`StoredGroup`]), which a new coordinator
//! loads so that the members carry on without a rebalance.
//!
//! Records use Kafka's own layout (`OffsetCommitKey` v1 with `OffsetCommitValue` v3, and
//! `GroupMetadataKey` v2 with `GroupMetadataValue` v3; a record without a value deletes its
//! key), so they read as Kafka's do. Records of other kinds (newer key versions) are skipped; a
//! record that does not parse is skipped with an error for the caller to log, never fatal.

use crate::client::records::{self, Incoming};
use crate::coordinator::{StoredGroup, StoredMember};
use crate::CommittedOffset;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use isr::{LeaderEpoch, Offset};
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
/// Key version of a group's membership.
const GROUP_KEY: i16 = 2;
/// Group value version written: v3 has every member's static instance id.
const GROUP_VALUE_VERSION: i16 = 3;

/// A leader epoch as Kafka's messages carry it: -1 for none.
pub fn epoch_field(epoch: Option<LeaderEpoch>) -> i32 {
    epoch.and_then(|e| i32::try_from(e.0).ok()).unwrap_or(-1)
}

/// A leader epoch from Kafka's field: any negative value is none.
pub fn epoch_of_field(field: i32) -> Option<LeaderEpoch> {
    u32::try_from(field).ok().map(LeaderEpoch)
}

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

fn put_nullable_string(buf: &mut BytesMut, s: Option<&str>) -> Result<(), String> {
    match s {
        Some(s) => put_string(buf, s),
        None => {
            buf.put_i16(-1);
            Ok(())
        }
    }
}

fn get_nullable_string(buf: &mut Bytes) -> Result<Option<String>, String> {
    if buf.remaining() >= 2 && buf.chunk()[..2] == (-1i16).to_be_bytes() {
        buf.advance(2);
        return Ok(None);
    }
    get_string(buf).map(Some)
}

fn put_bytes(buf: &mut BytesMut, b: &[u8]) -> Result<(), String> {
    buf.put_i32(i32::try_from(b.len()).map_err(|_| format!("{} bytes is too long", b.len()))?);
    buf.put_slice(b);
    Ok(())
}

/// Bytes with an `i32` length; a null (-1) reads as empty.
fn get_bytes(buf: &mut Bytes) -> Result<Bytes, String> {
    let len = get(buf, 4, Buf::get_i32)?;
    if len < 0 {
        return Ok(Bytes::new());
    }
    let len = usize::try_from(len).map_err(|_| "a length too large")?;
    if buf.remaining() < len {
        return Err(format!("{len} bytes truncated"));
    }
    Ok(buf.split_to(len))
}

/// A member's timeout, kept in milliseconds (the coordinator's ticks), as Kafka's `int32`.
fn millis(ms: u64) -> i32 {
    i32::try_from(ms).unwrap_or(i32::MAX)
}

fn get_millis(buf: &mut Bytes) -> Result<u64, String> {
    u64::try_from(get(buf, 4, Buf::get_i32)?).map_err(|_| "a negative timeout".into())
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
                value.put_i32(epoch_field(c.leader_epoch));
                put_string(&mut value, &c.metadata)?;
                value.put_i64(timestamp);
                Some(value.freeze())
            }
        };
        Ok((key.freeze(), value))
    }

    /// Parses an offset commit's key (after its version) and value.
    fn decode(mut key: Bytes, value: Option<Bytes>) -> Result<OffsetRecord, String> {
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
                let leader_epoch = if version >= 3 {
                    epoch_of_field(get(&mut value, 4, Buf::get_i32)?)
                } else {
                    None
                };
                let metadata = get_string(&mut value)?;
                Some(CommittedOffset {
                    offset: Offset(offset),
                    leader_epoch,
                    metadata,
                })
            }
        };
        Ok(OffsetRecord {
            key: OffsetKey {
                group,
                topic,
                partition,
            },
            committed,
        })
    }
}

/// A record of a group's membership: stored, or (without a value) deleted with the group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupRecord {
    pub group: String,
    pub stored: Option<StoredGroup>,
}

impl GroupRecord {
    /// The record's key and value bytes, in Kafka's layout (`GroupMetadataValue` v3).
    pub fn encode(&self, timestamp: i64) -> Result<(Bytes, Option<Bytes>), String> {
        let mut key = BytesMut::new();
        key.put_i16(GROUP_KEY);
        put_string(&mut key, &self.group)?;
        let Some(g) = &self.stored else {
            return Ok((key.freeze(), None));
        };
        let mut value = BytesMut::new();
        value.put_i16(GROUP_VALUE_VERSION);
        put_string(&mut value, &g.protocol_type)?;
        value.put_i32(g.generation);
        put_nullable_string(
            &mut value,
            Some(&g.protocol)
                .filter(|p| !p.is_empty())
                .map(String::as_str),
        )?;
        put_nullable_string(&mut value, g.leader.as_deref())?;
        value.put_i64(timestamp);
        value.put_i32(i32::try_from(g.members.len()).map_err(|_| "too many members")?);
        for m in &g.members {
            put_string(&mut value, &m.member_id)?;
            put_nullable_string(&mut value, m.instance_id.as_deref())?;
            put_string(&mut value, &m.client_id)?;
            put_string(&mut value, "")?; // client host: not tracked
            value.put_i32(millis(m.rebalance_timeout));
            value.put_i32(millis(m.session_timeout));
            put_bytes(&mut value, &m.subscription)?;
            put_bytes(&mut value, &m.assignment)?;
        }
        Ok((key.freeze(), Some(value.freeze())))
    }

    /// Parses a group's key (after its version) and value, of any version up to 3.
    fn decode(mut key: Bytes, value: Option<Bytes>) -> Result<GroupRecord, String> {
        let group = get_string(&mut key)?;
        let Some(mut value) = value else {
            return Ok(GroupRecord {
                group,
                stored: None,
            });
        };
        let version = get(&mut value, 2, Buf::get_i16)?;
        if !(0..=GROUP_VALUE_VERSION).contains(&version) {
            return Err(format!(
                "group value version {version} is newer than this broker's"
            ));
        }
        let protocol_type = get_string(&mut value)?;
        let generation = get(&mut value, 4, Buf::get_i32)?;
        let protocol = get_nullable_string(&mut value)?.unwrap_or_default();
        let leader = get_nullable_string(&mut value)?;
        if version >= 2 {
            get(&mut value, 8, Buf::get_i64)?; // current state timestamp
        }
        let count = get(&mut value, 4, Buf::get_i32)?;
        let mut members = Vec::new();
        for _ in 0..count.max(0) {
            let member_id = get_string(&mut value)?;
            let instance_id = if version >= 3 {
                get_nullable_string(&mut value)?
            } else {
                None
            };
            let client_id = get_string(&mut value)?;
            get_string(&mut value)?; // client host
            let session_first = version == 0;
            let first = get_millis(&mut value)?;
            let (rebalance_timeout, session_timeout) = if session_first {
                (first, first) // v0 has no rebalance timeout: Kafka takes the session's
            } else {
                (first, get_millis(&mut value)?)
            };
            members.push(StoredMember {
                member_id,
                instance_id,
                client_id,
                session_timeout,
                rebalance_timeout,
                subscription: get_bytes(&mut value)?.to_vec(),
                assignment: get_bytes(&mut value)?.to_vec(),
            });
        }
        Ok(GroupRecord {
            group,
            stored: Some(StoredGroup {
                protocol_type,
                generation,
                protocol,
                leader,
                members,
            }),
        })
    }
}

/// A record of the offsets topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    Offset(OffsetRecord),
    Group(GroupRecord),
}

impl Record {
    pub fn encode(&self, timestamp: i64) -> Result<(Bytes, Option<Bytes>), String> {
        match self {
            Record::Offset(r) => r.encode(timestamp),
            Record::Group(r) => r.encode(timestamp),
        }
    }

    /// Parses a record of the offsets topic: `Ok(None)` for a record of another kind.
    pub fn decode(key: Option<Bytes>, value: Option<Bytes>) -> Result<Option<Record>, String> {
        let mut key = key.ok_or("a record without a key")?;
        let version = get(&mut key, 2, Buf::get_i16)?;
        match version {
            0..=OFFSET_KEY => OffsetRecord::decode(key, value).map(|r| Some(Record::Offset(r))),
            GROUP_KEY => GroupRecord::decode(key, value).map(|r| Some(Record::Group(r))),
            _ => Ok(None),
        }
    }
}

/// One record batch holding `records`, ready to produce to the group's offsets partition.
pub fn batch(records: &[Record], timestamp: i64) -> Result<Bytes, String> {
    let entries = records
        .iter()
        .map(|r| r.encode(timestamp))
        .collect::<Result<Vec<_>, _>>()?;
    records::encode_entries(&entries, timestamp).map_err(|e| e.to_string())
}

/// The committed offsets and stored groups that one partition of the offsets topic holds, as
/// read from it: the last record of each key wins, and a deletion removes it.
#[derive(Clone, Debug, Default)]
pub struct OffsetsView {
    offsets: BTreeMap<OffsetKey, CommittedOffset>,
    members: BTreeMap<String, StoredGroup>,
}

impl OffsetsView {
    /// Applies records read from the partition, in offset order. Returns the offsets of the
    /// records that did not parse, with why, for the caller to log: they are skipped.
    pub fn apply(&mut self, read: Vec<Incoming>) -> Vec<(i64, String)> {
        let mut skipped = Vec::new();
        for record in read {
            match Record::decode(record.key, record.value) {
                Ok(Some(Record::Offset(OffsetRecord { key, committed }))) => match committed {
                    Some(c) => {
                        self.offsets.insert(key, c);
                    }
                    None => {
                        self.offsets.remove(&key);
                    }
                },
                Ok(Some(Record::Group(GroupRecord { group, stored }))) => match stored {
                    Some(g) => {
                        self.members.insert(group, g);
                    }
                    None => {
                        self.members.remove(&group);
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

    /// The groups with a committed offset or a stored membership here.
    pub fn groups(&self) -> BTreeSet<String> {
        let with_offsets = self.offsets.keys().map(|k| &k.group);
        with_offsets.chain(self.members.keys()).cloned().collect()
    }

    /// A group's membership as last stored here.
    pub fn stored(&self, group: &str) -> Option<&StoredGroup> {
        self.members.get(group)
    }

    /// Every group's stored membership, for a new coordinator to load.
    pub fn stored_groups(&self) -> impl Iterator<Item = (&String, &StoredGroup)> {
        self.members.iter()
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
                leader_epoch: (o % 2 == 1).then_some(LeaderEpoch(o as u32)),
                metadata: format!("m{o}"),
            }),
        }
    }

    fn read_back(records: &[OffsetRecord]) -> Vec<Incoming> {
        let records: Vec<Record> = records.iter().cloned().map(Record::Offset).collect();
        records::decode(batch(&records, 5).expect("encodes")).expect("decodes")
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
        // Key version 3 on: the records of Kafka's newer consumer protocol (KIP-848).
        let mut newer_kind = BytesMut::new();
        newer_kind.put_i16(3);
        put_string(&mut newer_kind, "g").expect("short");
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
                key: Some(newer_kind.freeze()),
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

    fn group(generation: i32) -> StoredGroup {
        let member = |id: &str, instance: Option<&str>| StoredMember {
            member_id: id.into(),
            instance_id: instance.map(Into::into),
            client_id: "rdkafka".into(),
            session_timeout: 6_000,
            rebalance_timeout: 300_000,
            subscription: format!("{id}-subscription").into_bytes(),
            assignment: format!("{id}-assignment").into_bytes(),
        };
        StoredGroup {
            protocol_type: "consumer".into(),
            generation,
            protocol: "range".into(),
            leader: Some("m-1".into()),
            members: vec![member("m-1", None), member("m-2", Some("host-2"))],
        }
    }

    #[test]
    fn a_groups_membership_reads_back_as_stored_and_goes_with_its_deletion() {
        let stored = |g: &str, stored| {
            Record::Group(GroupRecord {
                group: g.into(),
                stored,
            })
        };
        let written = [
            stored("g", Some(group(1))),
            Record::Offset(record("g", 0, Some(3))),
            stored("g", Some(group(2))),
            stored("h", Some(group(7))),
            stored("h", None),
            stored(
                "e",
                Some(StoredGroup {
                    generation: 4,
                    ..StoredGroup::default()
                }),
            ),
        ];
        let read = records::decode(batch(&written, 5).expect("encodes")).expect("decodes");
        let mut view = OffsetsView::default();
        assert!(view.apply(read).is_empty());
        assert_eq!(view.stored("g"), Some(&group(2)), "the last of a key wins");
        assert_eq!(view.stored("h"), None, "deleted");
        let empty = view.stored("e").expect("an empty group is stored");
        assert_eq!(
            (empty.generation, empty.protocol.as_str(), &empty.leader),
            (4, "", &None)
        );
        assert_eq!(view.stored_groups().count(), 2);
        assert_eq!(
            view.groups(),
            BTreeSet::from(["e".to_owned(), "g".to_owned()])
        );
    }

    /// Kafka's version 0 value: no rebalance timeout (the session's stands for it), no
    /// timestamp, no instance ids.
    #[test]
    fn a_group_stored_by_kafkas_oldest_version_reads() {
        let mut value = BytesMut::new();
        value.put_i16(0);
        put_string(&mut value, "consumer").expect("short");
        value.put_i32(9);
        put_string(&mut value, "range").expect("short");
        value.put_i16(-1); // no leader
        value.put_i32(1);
        put_string(&mut value, "m").expect("short");
        put_string(&mut value, "client").expect("short");
        put_string(&mut value, "/10.0.0.1").expect("short");
        value.put_i32(10_000);
        put_bytes(&mut value, b"sub").expect("short");
        value.put_i32(-1); // a null assignment
        let mut key = BytesMut::new();
        key.put_i16(GROUP_KEY);
        put_string(&mut key, "old").expect("short");
        let read = Record::decode(Some(key.freeze()), Some(value.freeze()));
        let Ok(Some(Record::Group(GroupRecord {
            group: name,
            stored: Some(g),
        }))) = read
        else {
            panic!("not read: {read:?}");
        };
        assert_eq!((name.as_str(), g.generation, g.leader), ("old", 9, None));
        let m = &g.members[0];
        assert_eq!(m.session_timeout, 10_000);
        assert_eq!(m.rebalance_timeout, m.session_timeout);
        assert_eq!(
            (m.subscription.as_ref(), m.assignment.as_ref()),
            (&b"sub"[..], &b""[..])
        );
        // Truncated anywhere: an error, never a panic.
        let (key, value) = GroupRecord {
            group: "g".into(),
            stored: Some(group(1)),
        }
        .encode(0)
        .expect("encodes");
        let value = value.expect("a value");
        for cut in 0..value.len() {
            assert!(
                Record::decode(Some(key.clone()), Some(value.slice(..cut))).is_err(),
                "cut at {cut}"
            );
        }
    }
}
