//! The controller's durable state: the core controller plus what only the runtime needs (topic
//! names, broker addresses, producer ids), saved atomically after every change that matters.

use crate::storage::checkpoint::{self, CheckpointError, Encoding};
use crate::wire::admin::{AdminError, BrokerView, ClusterView, TopicSpec};
use isr::{BrokerId, Config, Controller, Effects, PartitionId, Tick};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Binary: the core controller keys group offsets by (group, partition), which JSON cannot.
const FILE: &str = "metadata.bin";
/// Kafka's limit on topic names.
const MAX_TOPIC_NAME: usize = 249;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Metadata {
    pub controller: Controller,
    pub topics: BTreeMap<String, Vec<PartitionId>>,
    pub addresses: BTreeMap<BrokerId, String>,
    /// The controller's clock, kept so that heartbeat ages stay meaningful across a restart.
    pub now: Tick,
    pub next_partition: u32,
    pub next_producer_id: i64,
}

pub struct Store {
    path: PathBuf,
}

impl Store {
    pub fn new(dir: &Path) -> Store {
        Store {
            path: dir.join(FILE),
        }
    }

    pub fn load(&self) -> Result<Metadata, CheckpointError> {
        Ok(checkpoint::read(&self.path, Encoding::Binary)?.unwrap_or_default())
    }

    pub fn save(&self, metadata: &Metadata) -> Result<(), CheckpointError> {
        checkpoint::write(&self.path, metadata, Encoding::Binary)
    }
}

impl Metadata {
    pub fn view(&self) -> ClusterView {
        ClusterView {
            brokers: self
                .addresses
                .iter()
                .map(|(&id, address)| {
                    let alive = self.controller.is_alive(id);
                    (
                        id,
                        BrokerView {
                            address: address.clone(),
                            alive,
                        },
                    )
                })
                .collect(),
            topics: self.topics.clone(),
            partitions: self.controller.partitions().clone(),
        }
    }

    /// Creates a topic: partition `i` is assigned to `replication_factor` live brokers starting
    /// at the `i`-th (in id order, offset by the topic's first partition id), so leaders spread.
    pub fn create_topic(
        &mut self,
        cfg: &Config,
        spec: &TopicSpec,
    ) -> Result<Effects<bytes::Bytes>, AdminError> {
        validate_name(&spec.name)?;
        if self.topics.contains_key(&spec.name) {
            return Err(AdminError::TopicExists(spec.name.clone()));
        }
        if spec.partitions == 0 || spec.partitions > 10_000 {
            return Err(AdminError::InvalidPartitions(format!(
                "{} is not between 1 and 10000",
                spec.partitions
            )));
        }
        let alive = self.controller.alive_brokers();
        let factor = usize::from(spec.replication_factor);
        if factor == 0 || factor > alive.len() {
            return Err(AdminError::InvalidReplicationFactor(format!(
                "{factor} needs as many live brokers; {} are alive",
                alive.len()
            )));
        }
        let min_isr = spec
            .min_insync_replicas
            .map_or(cfg.min_insync_replicas.min(factor), usize::from);
        if min_isr == 0 || min_isr > factor {
            return Err(AdminError::InvalidConfig(format!(
                "{min_isr} is not between 1 and the replication factor {factor}"
            )));
        }
        let mut ids = Vec::new();
        let mut effects = Vec::new();
        for _ in 0..spec.partitions {
            let id = PartitionId(self.next_partition);
            let start = (self.next_partition as usize) % alive.len();
            let assigned = (0..factor)
                .map(|k| alive[(start + k) % alive.len()])
                .collect();
            let created = self
                .controller
                .create_partition(id, assigned, min_isr)
                .map_err(|e| AdminError::InvalidReplicationFactor(e.to_string()))?;
            effects.extend(created);
            self.next_partition += 1;
            ids.push(id);
        }
        self.topics.insert(spec.name.clone(), ids);
        Ok(effects)
    }
}

/// Kafka's rule: 1 to 249 characters of ASCII letters, digits, '.', '_' and '-', not "." or "..".
fn validate_name(name: &str) -> Result<(), AdminError> {
    let legal = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if name.is_empty() || name.len() > MAX_TOPIC_NAME || !legal || name == "." || name == ".." {
        return Err(AdminError::InvalidTopic(format!(
            "`{name}`: use 1 to {MAX_TOPIC_NAME} of [a-zA-Z0-9._-]"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use isr::Offset;

    #[test]
    fn metadata_with_topics_and_group_offsets_survives_a_restart() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::new(dir.path());
        let cfg = Config::default();
        let mut meta = store.load().expect("empty");
        for b in 1..=3 {
            let _: Effects<bytes::Bytes> =
                meta.controller
                    .on_broker_registration(&cfg, Tick(0), BrokerId(b), true);
        }
        let spec = TopicSpec {
            name: "t".into(),
            partitions: 2,
            replication_factor: 3,
            min_insync_replicas: Some(2),
        };
        meta.create_topic(&cfg, &spec).expect("create");
        meta.controller
            .commit_offset("group", PartitionId(1), Offset(42));
        store.save(&meta).expect("save");

        let back = store.load().expect("load");
        assert_eq!(back.topics, meta.topics);
        assert_eq!(back.controller, meta.controller);
        assert_eq!(
            back.controller.committed_offset("group", PartitionId(1)),
            Some(Offset(42))
        );
        assert!(matches!(
            back.clone().create_topic(&cfg, &spec),
            Err(AdminError::TopicExists(_))
        ));
        let bad = TopicSpec {
            name: "no/slashes".into(),
            ..spec
        };
        assert!(matches!(
            back.clone().create_topic(&cfg, &bad),
            Err(AdminError::InvalidTopic(_))
        ));
    }
}
