//! The controller's metadata changes as records: what a step writes to the store and sends to
//! brokers, in place of the whole metadata.
//!
//! A record is the new value of one entity: a core record ([`isr::MetadataRecord`]: a
//! partition's state, a broker's registration or fencing, the controller epoch) or one of the
//! runtime's own (a topic's partitions, id and configs, a broker's address, users and ACLs). A step's cost — in time, bytes written and bytes sent — is that of what it
//! changed, not that of the cluster.
//!
//! Every change of the metadata is made in a [`Change`]: [`Metadata::begin`] starts it,
//! operations change the metadata in place (the core controller notes its own changes; the
//! runtime's go through [`Metadata::set`]), and [`Metadata::finish`] hands back the records to
//! make durable and the effects that may leave once they are. If the store does not take them,
//! [`Metadata::undo`] puts everything back as it was.

use super::metadata::{Metadata, Overrides};
use crate::wire::BrokerAddress;
use bytes::Bytes;
use isr::{BrokerId, ControllerEffects as Effects, MetadataRecord, PartitionId, Ready};
use isr_kafka::auth::SecurityState;
use isr_kafka::TopicId;
use serde::{Deserialize, Serialize};

/// One change to the controller's metadata: the new value of one entity. `None`: removed.
///
/// Stores keep records in postcard, which writes a variant as its index: a new kind of record
/// goes last, so that what older stores wrote still reads as it was written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Record {
    /// A change of the core controller's state.
    Core(MetadataRecord),
    /// A topic's partitions, in partition-index order.
    Topic {
        name: String,
        partitions: Option<Vec<PartitionId>>,
    },
    /// A topic's config overrides.
    TopicConfigs {
        name: String,
        overrides: Option<Overrides>,
    },
    /// Dynamic broker config overrides: `""` cluster-wide, else by broker id.
    BrokerConfigs {
        name: String,
        overrides: Option<Overrides>,
    },
    /// Where a broker listens.
    Address {
        broker: BrokerId,
        address: Option<BrokerAddress>,
    },
    /// Every partition id below this was created at some point.
    NextPartition(u32),
    NextProducerId(i64),
    /// Users' SCRAM credentials and the ACLs.
    Security(SecurityState),
    /// A topic's id (KIP-516), drawn when the topic is created. Its own record rather than a
    /// field of [`Record::Topic`], so that stores written before ids still read: a topic from
    /// one has no id, and clients are answered the zero id for it, as Kafka answers for a topic
    /// without one.
    TopicId {
        name: String,
        id: Option<TopicId>,
    },
}

impl Record {
    /// Whether the record removes its entity.
    pub fn removes(&self) -> bool {
        match self {
            Record::Core(MetadataRecord::Broker { state, .. }) => state.is_none(),
            Record::Core(MetadataRecord::Partition { state, .. }) => state.is_none(),
            Record::Core(MetadataRecord::ControllerEpoch(_)) => false,
            Record::Topic { partitions, .. } => partitions.is_none(),
            Record::TopicConfigs { overrides, .. } | Record::BrokerConfigs { overrides, .. } => {
                overrides.is_none()
            }
            Record::Address { address, .. } => address.is_none(),
            Record::TopicId { id, .. } => id.is_none(),
            Record::NextPartition(_) | Record::NextProducerId(_) | Record::Security(_) => false,
        }
    }

    /// Whether a store that writes a large change in several pieces should write this record
    /// last: a broker's registration or fencing. Each piece is a consistent state on its own
    /// (partitions are independent), but a broker recorded as fenced while a partition it led
    /// still names it would leave that partition without an election until it came back.
    pub fn goes_last(&self) -> bool {
        matches!(
            self,
            Record::Core(MetadataRecord::Broker { .. } | MetadataRecord::ControllerEpoch(_))
        )
    }
}

/// Sets `key` to `value` in `map`, or removes it for `None`: how a record sets an entity.
pub fn put<K: Ord, V>(map: &mut std::collections::BTreeMap<K, V>, key: K, value: Option<V>) {
    match value {
        Some(v) => map.insert(key, v),
        None => map.remove(&key),
    };
}

/// A change under way: the records of the runtime's own entities so far, and the values they
/// replaced (for undo). No part of the metadata: two metadata that differ only in it are equal.
#[derive(Clone, Debug, Default)]
pub struct Journal {
    records: Vec<Record>,
    undo: Vec<Record>,
}

impl PartialEq for Journal {
    fn eq(&self, _: &Journal) -> bool {
        true
    }
}

impl Eq for Journal {}

/// What one change of the metadata decided: the records to make durable, then the effects.
#[derive(Debug)]
#[must_use = "a change's records must be made durable and its effects carried out"]
pub struct Change {
    /// What to persist, in the order made.
    pub records: Vec<Record>,
    /// What may leave once they are durable.
    pub effects: Effects<Bytes>,
    /// The core controller's part, kept for undo.
    core: Ready<Bytes>,
    /// The runtime's entities as they were, latest first.
    undo: Vec<Record>,
}

impl Metadata {
    /// Starts a change.
    pub fn begin(&mut self) {
        self.controller.begin();
        self.journal = Some(Journal::default());
    }

    /// Ends the change [`Metadata::begin`] started: its records (the core's first) and
    /// `effects`, to carry out once they are durable.
    pub fn finish(&mut self, effects: Effects<Bytes>) -> Change {
        let mut core = self.controller.finish(effects);
        let journal = self.journal.take().unwrap_or_default();
        let mut records: Vec<Record> = core.records.iter().cloned().map(Record::Core).collect();
        records.extend(journal.records);
        let effects = std::mem::take(&mut core.effects);
        Change {
            records,
            effects,
            core,
            undo: journal.undo,
        }
    }

    /// Puts back what `change` changed: the store did not take it.
    pub fn undo(&mut self, change: Change) {
        for record in change.undo.iter().rev() {
            self.apply(record);
        }
        self.controller.undo(change.core);
    }

    /// Sets one of the runtime's entities, noting its old value if a change is under way.
    pub fn set(&mut self, record: Record) {
        if self.journal.is_some() {
            let before = self.current(&record);
            if before != record {
                if let Some(journal) = self.journal.as_mut() {
                    journal.undo.push(before);
                    journal.records.push(record.clone());
                }
            } else {
                return;
            }
        }
        self.apply(&record);
    }

    /// Applies a durable record: recovery from a store, replay of a log.
    pub fn apply(&mut self, record: &Record) {
        match record.clone() {
            Record::Core(r) => self.controller.apply(&r),
            Record::Topic { name, partitions } => put(&mut self.topics, name, partitions),
            Record::TopicConfigs { name, overrides } => {
                put(&mut self.topic_configs, name, overrides)
            }
            Record::BrokerConfigs { name, overrides } => {
                put(&mut self.broker_configs, name, overrides)
            }
            Record::Address { broker, address } => put(&mut self.addresses, broker, address),
            Record::NextPartition(n) => self.next_partition = n,
            Record::NextProducerId(n) => self.next_producer_id = n,
            Record::Security(state) => self.security = state,
            Record::TopicId { name, id } => self.topic_ids.set(name, id),
        }
    }

    /// The current value of the entity `record` sets, as a record.
    fn current(&self, record: &Record) -> Record {
        match record {
            Record::Core(r) => Record::Core(r.clone()),
            Record::Topic { name, .. } => Record::Topic {
                name: name.clone(),
                partitions: self.topics.get(name).cloned(),
            },
            Record::TopicConfigs { name, .. } => Record::TopicConfigs {
                name: name.clone(),
                overrides: self.topic_configs.get(name).cloned(),
            },
            Record::BrokerConfigs { name, .. } => Record::BrokerConfigs {
                name: name.clone(),
                overrides: self.broker_configs.get(name).cloned(),
            },
            Record::Address { broker, .. } => Record::Address {
                broker: *broker,
                address: self.addresses.get(broker).cloned(),
            },
            Record::NextPartition(_) => Record::NextPartition(self.next_partition),
            Record::NextProducerId(_) => Record::NextProducerId(self.next_producer_id),
            Record::Security(_) => Record::Security(self.security.clone()),
            Record::TopicId { name, .. } => Record::TopicId {
                name: name.clone(),
                id: self.topic_ids.get(name),
            },
        }
    }

    /// The whole metadata as records: what a new store would hold.
    #[cfg(test)]
    pub fn records(&self) -> Vec<Record> {
        let mut records: Vec<Record> = self
            .controller
            .records()
            .into_iter()
            .map(Record::Core)
            .collect();
        records.extend(self.topics.iter().map(|(name, ids)| Record::Topic {
            name: name.clone(),
            partitions: Some(ids.clone()),
        }));
        records.extend(self.topic_ids.iter().map(|(name, &id)| Record::TopicId {
            name: name.clone(),
            id: Some(id),
        }));
        records.extend(
            self.topic_configs
                .iter()
                .map(|(name, o)| Record::TopicConfigs {
                    name: name.clone(),
                    overrides: Some(o.clone()),
                }),
        );
        records.extend(
            self.broker_configs
                .iter()
                .map(|(name, o)| Record::BrokerConfigs {
                    name: name.clone(),
                    overrides: Some(o.clone()),
                }),
        );
        records.extend(self.addresses.iter().map(|(&broker, a)| Record::Address {
            broker,
            address: Some(a.clone()),
        }));
        records.push(Record::NextPartition(self.next_partition));
        records.push(Record::NextProducerId(self.next_producer_id));
        records.push(Record::Security(self.security.clone()));
        records
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::admin::TopicSpec;
    use isr::{Config, ControllerInput, Tick};
    use isr_kafka::configs::{ConfigOp, ConfigResource};

    /// Three registered brokers with addresses, as a controller has them.
    fn three_brokers() -> (Config, Metadata) {
        let (cfg, mut meta) = crate::controller::metadata::tests::three_brokers();
        for b in 1..=3 {
            meta.set(Record::Address {
                broker: BrokerId(b),
                address: Some(BrokerAddress::plaintext(format!("127.0.0.1:{b}"))),
            });
        }
        (cfg, meta)
    }

    fn spec(name: &str, partitions: u32) -> TopicSpec {
        TopicSpec {
            name: name.into(),
            partitions,
            replication_factor: 3,
            configs: [("retention.ms".to_string(), "9".to_string())].into(),
            assignment: Vec::new(),
        }
    }

    /// A broker that applies each change's records to its view sees what the controller's
    /// metadata shows, change after change; and a store that applies them to its snapshot
    /// rebuilds the metadata.
    #[test]
    fn views_and_stores_follow_the_metadata_through_its_records() {
        let (cfg, mut meta) = three_brokers();
        let mut view = meta.view(None);
        let mut stored = meta.clone();
        type Op = Box<dyn Fn(&Config, &mut Metadata) -> Effects<Bytes>>;
        let ops: Vec<Op> = vec![
            Box::new(|cfg, m| m.create_topic(cfg, &spec("a", 4)).expect("a")),
            Box::new(|cfg, m| m.create_topic(cfg, &spec("b", 2)).expect("b")),
            Box::new(|_, m| m.create_partitions("b", 5, &[]).expect("grow")),
            Box::new(|cfg, m| {
                let set = vec![ConfigOp::Set("min.insync.replicas".into(), "3".into())];
                m.alter_configs(cfg, &ConfigResource::Topic("a".into()), &set, false)
                    .expect("config")
            }),
            Box::new(|cfg, m| {
                m.controller.step(
                    cfg,
                    Tick(1),
                    ControllerInput::ControlledShutdown(BrokerId(2)),
                )
            }),
            Box::new(|_, m| {
                m.delete_topic("a").expect("delete");
                Vec::new()
            }),
            Box::new(|_, m| {
                m.set(Record::Address {
                    broker: BrokerId(3),
                    address: Some(BrokerAddress::plaintext("127.0.0.1:33".into())),
                });
                Vec::new()
            }),
        ];
        for (i, op) in ops.iter().enumerate() {
            meta.begin();
            let effects = op(&cfg, &mut meta);
            let change = meta.finish(effects);
            assert!(!change.records.is_empty(), "op {i} changed something");
            for record in &change.records {
                view.apply(record);
                stored.apply(record);
            }
            assert_eq!(view, meta.view(None), "op {i}");
            assert_eq!(stored, meta, "op {i}");
        }
    }

    #[test]
    fn a_change_the_store_refused_is_undone_whole() {
        let (cfg, mut meta) = three_brokers();
        meta.create_topic(&cfg, &spec("a", 3)).expect("a");
        let before = meta.clone();
        meta.begin();
        let _ = meta.create_topic(&cfg, &spec("b", 3)).expect("b");
        meta.delete_topic("a").expect("delete");
        let _: Effects<Bytes> = meta.controller.step(
            &cfg,
            Tick(1),
            ControllerInput::ControlledShutdown(BrokerId(1)),
        );
        meta.set(Record::NextProducerId(9));
        let change = meta.finish(Vec::new());
        assert_ne!(meta, before);
        meta.undo(change);
        assert_eq!(meta, before);
    }
}
