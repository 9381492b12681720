//! Topic ids (KIP-516): a random UUID per topic, drawn by the controller when it creates the
//! topic. A name can be reused once its topic is deleted; an id cannot, so a client that fetches
//! or deletes by id never reaches a newer topic of the same name.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;

/// A topic's id: a version-4 UUID. The zero id is Kafka's "no id": clients send it for a topic
/// they name, and a topic created before isr kept ids has it (Kafka answers the zero id for a
/// topic without one, too).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct TopicId(pub [u8; 16]);

impl TopicId {
    pub const ZERO: TopicId = TopicId([0; 16]);

    /// A new id from the operating system's randomness. As Kafka's `Uuid.randomUuid` does, it is
    /// drawn again while its text would start with `-`, so that it never reads as a flag on a
    /// command line.
    pub fn random() -> Result<TopicId, getrandom::Error> {
        loop {
            let mut bytes = [0; 16];
            getrandom::fill(&mut bytes)?;
            let id = TopicId::from(uuid::Builder::from_random_bytes(bytes).into_uuid());
            if !id.to_string().starts_with('-') {
                return Ok(id);
            }
        }
    }
}

impl From<uuid::Uuid> for TopicId {
    fn from(id: uuid::Uuid) -> TopicId {
        TopicId(id.into_bytes())
    }
}

impl From<TopicId> for uuid::Uuid {
    fn from(id: TopicId) -> uuid::Uuid {
        uuid::Uuid::from_bytes(id.0)
    }
}

/// Kafka's text for an id (its `Uuid.toString`, what `kafka-topics.sh --describe` shows):
/// URL-safe base64 without padding, 22 characters.
impl fmt::Display for TopicId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use base64::Engine;
        f.write_str(&base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(self.0))
    }
}

/// Each topic's id, and each id's topic: a request that names topics by id (a consumer's every
/// Fetch, from v13) finds each in a lookup, not a scan of every topic. Serialized as the map
/// from name to id alone; the other way is rebuilt on reading.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopicIds {
    by_name: BTreeMap<String, TopicId>,
    by_id: BTreeMap<TopicId, String>,
}

impl TopicIds {
    /// The id of topic `name`, if it has one.
    pub fn get(&self, name: &str) -> Option<TopicId> {
        self.by_name.get(name).copied()
    }

    /// The topic whose id is `id`.
    pub fn name_of(&self, id: TopicId) -> Option<&str> {
        self.by_id.get(&id).map(String::as_str)
    }

    /// Gives topic `name` the id `id`, or none (`None`: the topic is gone).
    pub fn set(&mut self, name: String, id: Option<TopicId>) {
        if let Some(old) = self.by_name.remove(&name) {
            self.by_id.remove(&old);
        }
        if let Some(id) = id {
            self.by_id.insert(id, name.clone());
            self.by_name.insert(name, id);
        }
    }

    /// Whether no topic has an id.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Every topic with its id, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &TopicId)> {
        self.by_name.iter()
    }
}

impl Serialize for TopicIds {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.by_name.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for TopicIds {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let by_name = BTreeMap::<String, TopicId>::deserialize(deserializer)?;
        let by_id = by_name.iter().map(|(n, &id)| (id, n.clone())).collect();
        Ok(TopicIds { by_name, by_id })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_random_version_4_uuids_written_as_kafka_writes_them() {
        let (a, b) = (TopicId::random().expect("a"), TopicId::random().expect("b"));
        assert_ne!(a, b);
        assert_ne!(a, TopicId::ZERO);
        let uuid = uuid::Uuid::from(a);
        assert_eq!(uuid.get_version_num(), 4);
        assert_eq!(uuid.get_variant(), uuid::Variant::RFC4122);
        assert_eq!(TopicId::from(uuid), a);
        // Kafka's Uuid(0x123456789abcdef0, 0x0fedcba987654321).toString().
        let kafka = TopicId::from(uuid::Uuid::from_u64_pair(
            0x1234_5678_9abc_def0,
            0x0fed_cba9_8765_4321,
        ));
        assert_eq!(kafka.to_string(), "EjRWeJq83vAP7cuph2VDIQ");
        assert_eq!(TopicId::ZERO.to_string(), "AAAAAAAAAAAAAAAAAAAAAA");
    }

    #[test]
    fn topic_ids_are_found_both_ways_through_changes_and_serialization() {
        let (a, b) = (TopicId([1; 16]), TopicId([2; 16]));
        let mut ids = TopicIds::default();
        ids.set("t".into(), Some(a));
        ids.set("u".into(), Some(b));
        ids.set("t".into(), Some(TopicId([3; 16])));
        assert_eq!((ids.name_of(a), ids.name_of(b)), (None, Some("u")));
        assert_eq!(ids.get("t"), Some(TopicId([3; 16])));
        ids.set("u".into(), None);
        assert_eq!((ids.get("u"), ids.name_of(b)), (None, None));
        let json = serde_json::to_string(&ids).expect("serialize");
        let back: TopicIds = serde_json::from_str(&json).expect("deserialize");
        assert_eq!(back, ids);
        assert_eq!(back.name_of(TopicId([3; 16])), Some("t"));
    }
}
