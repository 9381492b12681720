//! The controller's durable state: the core controller plus what only the runtime needs (topic
//! names, broker addresses, producer ids). The controller commits it to its store
//! ([`super::store`]) after every step that changes it, before the step's messages leave.

use crate::wire::admin::{AdminError, BrokerView, ClusterView, ControllerInfo, TopicSpec};
use isr::{BrokerId, Config, Controller, Effects, PartitionId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Kafka's limit on topic names.
const MAX_TOPIC_NAME: usize = 249;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metadata {
    pub controller: Controller,
    pub topics: BTreeMap<String, Vec<PartitionId>>,
    pub addresses: BTreeMap<BrokerId, String>,
    pub next_partition: u32,
    pub next_producer_id: i64,
}

impl Metadata {
    /// The cluster as clients and brokers see it, made by the controller `by`.
    pub fn view(&self, by: Option<ControllerInfo>) -> ClusterView {
        ClusterView {
            controller: by,
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
    use isr::Tick;

    #[test]
    fn topics_are_created_over_live_brokers_with_valid_names_once() {
        let cfg = Config::default();
        let mut meta = Metadata::default();
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
        let back = meta.clone();
        assert_eq!(back.topics["t"], vec![PartitionId(0), PartitionId(1)]);
        let view = back.view(None);
        assert_eq!(view.partition_id("t", 1), Some(PartitionId(1)));
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
