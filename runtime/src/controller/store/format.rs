//! How controller metadata is written to a store: a magic, the format version, then postcard.
//!
//! The version lets a later isr change the layout while an older one refuses it with a reason
//! instead of misreading it (postcard is not self-describing: a field added by a newer version
//! would shift everything after it).

use super::StoreError;
use crate::controller::metadata::Metadata;

/// The format this isr writes and reads: 2 added topic and broker configs and commit metadata;
/// 3 brokers' Kafka listeners, and users' SCRAM credentials and ACLs; 4 moved consumer groups'
/// committed offsets out of the core controller's state, next to their metadata strings; 5 keeps
/// no committed offsets (they are records in `__consumer_offsets`, which brokers replicate); 6
/// adds topics' ids, after everything else.
pub const FORMAT: u16 = 6;
/// The oldest format still read: 5 is 6 without topics' ids, which are the metadata's last
/// field, a map; so a format-5 body followed by one zero byte (postcard's empty map) is the
/// format-6 encoding of the same metadata with no topic ids.
const WITHOUT_TOPIC_IDS: u16 = 5;
const MAGIC: &[u8; 4] = b"ISRM";

pub fn encode(metadata: &Metadata) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&FORMAT.to_be_bytes());
    // Encoding into a Vec fails only on types postcard cannot express, and Metadata has none:
    // the round-trip test below would catch one.
    postcard::to_extend(metadata, out).unwrap_or_else(|e| {
        panic!("controller metadata is not postcard-encodable: {e}");
    })
}

/// Reads what [`encode`] wrote; `place` names where it came from, for errors.
pub fn decode(bytes: &[u8], place: &str) -> Result<Metadata, StoreError> {
    let corrupt = |reason: String| StoreError::Corrupt {
        place: place.to_string(),
        reason,
    };
    let Some(rest) = bytes.strip_prefix(MAGIC) else {
        return Err(corrupt(format!(
            "it does not start with {:?}",
            String::from_utf8_lossy(MAGIC)
        )));
    };
    let (version, body) = match rest {
        [a, b, body @ ..] => (u16::from_be_bytes([*a, *b]), body),
        _ => return Err(corrupt("it ends before its format version".into())),
    };
    if version > FORMAT {
        return Err(StoreError::NewerFormat {
            place: place.to_string(),
            found: version,
            supported: FORMAT,
        });
    }
    let upgraded;
    let body = match version {
        FORMAT => body,
        WITHOUT_TOPIC_IDS => {
            upgraded = [body, &[0]].concat();
            &upgraded[..]
        }
        _ => return Err(corrupt(format!("format {version} is no longer read"))),
    };
    match postcard::take_from_bytes(body) {
        Ok((metadata, [])) => Ok(metadata),
        Ok((_, extra)) => Err(corrupt(format!("{} bytes after the metadata", extra.len()))),
        Err(e) => Err(corrupt(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_round_trips_and_other_formats_are_refused_with_a_reason() {
        let mut metadata = Metadata::default();
        metadata
            .topics
            .insert("t".into(), vec![isr::PartitionId(3)]);
        let bytes = encode(&metadata);
        assert_eq!(
            decode(&bytes, "x").expect("decodes").topics,
            metadata.topics
        );

        let mut newer = bytes.clone();
        newer[4..6].copy_from_slice(&(FORMAT + 1).to_be_bytes());
        let err = decode(&newer, "etcd key isr/metadata").expect_err("newer");
        assert!(matches!(err, StoreError::NewerFormat { found, .. } if found == FORMAT + 1));
        assert!(err.to_string().contains("etcd key isr/metadata"), "{err}");

        for bad in [&b"nope"[..], &bytes[..5], &bytes[..bytes.len() - 1], b""] {
            assert!(matches!(decode(bad, "x"), Err(StoreError::Corrupt { .. })));
        }
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert!(matches!(
            decode(&trailing, "x"),
            Err(StoreError::Corrupt { .. })
        ));
        let mut older = bytes.clone();
        older[4..6].copy_from_slice(&(WITHOUT_TOPIC_IDS - 1).to_be_bytes());
        assert!(matches!(
            decode(&older, "x"),
            Err(StoreError::Corrupt { .. })
        ));
    }

    /// A snapshot written before topic ids (format 5: the same layout without the last map)
    /// reads as the same metadata with no ids; one written with ids keeps them.
    #[test]
    fn a_snapshot_from_before_topic_ids_reads_without_ids() {
        let mut metadata = Metadata::default();
        metadata
            .topics
            .insert("old".into(), vec![isr::PartitionId(0)]);
        metadata.next_partition = 1;
        let six = encode(&metadata);
        assert_eq!(six.last(), Some(&0), "an empty map of ids ends the body");
        let mut five = six[..six.len() - 1].to_vec();
        five[4..6].copy_from_slice(&WITHOUT_TOPIC_IDS.to_be_bytes());
        let read = decode(&five, "x").expect("format 5 reads");
        assert_eq!(read, metadata);
        assert!(read.topic_ids.is_empty());

        let id = isr_kafka::TopicId::random().expect("id");
        metadata.topic_ids.set("old".into(), Some(id));
        assert_eq!(
            decode(&encode(&metadata), "x")
                .expect("6")
                .topic_ids
                .get("old"),
            Some(id)
        );
    }
}
