//! The controller's durable state: the core controller plus what only the runtime needs (topic
//! names and ids, broker addresses, producer ids, configs, users and ACLs): none of it is replication protocol, so none of it is in the core. Every change is made
//! as records ([`super::records`]), which the controller commits to its store
//! ([`super::store`]) before the change's messages leave.

use super::records::{Journal, Record};
use crate::wire::admin::{AdminError, BrokerView, ClusterView, ControllerInfo, TopicSpec};
use crate::wire::BrokerAddress;
use isr::{BrokerId, Config, Controller, ControllerEffects as Effects, PartitionId};
use isr_kafka::auth::SecurityState;
use isr_kafka::configs::{self, ConfigOp, ConfigResource};
use isr_kafka::{TopicId, TopicIds};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The most partitions a topic may have.
const MAX_PARTITIONS: u32 = 10_000;
const MIN_INSYNC: &str = "min.insync.replicas";

/// Config overrides by name.
pub type Overrides = BTreeMap<String, String>;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metadata {
    pub controller: Controller,
    pub topics: BTreeMap<String, Vec<PartitionId>>,
    pub addresses: BTreeMap<BrokerId, BrokerAddress>,
    pub next_partition: u32,
    pub next_producer_id: i64,
    /// Each topic's config overrides (`min.insync.replicas` among them, which the core
    /// partitions also hold: this records that it was set, for DescribeConfigs).
    pub topic_configs: BTreeMap<String, Overrides>,
    /// Dynamic broker config overrides: `""` cluster-wide, else by broker id.
    pub broker_configs: BTreeMap<String, Overrides>,
    /// The users' SCRAM credentials (salted and iterated; never a password) and the ACLs,
    /// changed with `SecurityState::apply`.
    pub security: SecurityState,
    /// The change under way, if one is ([`Metadata::begin`]).
    #[serde(skip)]
    pub(super) journal: Option<Journal>,
    /// Each topic's id (KIP-516). A topic created before isr kept ids has none: clients are
    /// answered the zero id for it, as Kafka answers for a topic without one. The last field,
    /// which the snapshot format relies on ([`super::store::format`]).
    pub topic_ids: TopicIds,
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
                            address: address.internal.clone(),
                            listeners: address.listeners.clone(),
                            alive,
                        },
                    )
                })
                .collect(),
            topics: self.topics.clone(),
            partitions: self.controller.partitions().clone(),
            topic_configs: self.topic_configs.clone(),
            topic_ids: self.topic_ids.clone(),
            broker_configs: self.broker_configs.clone(),
            next_partition: self.next_partition,
            security: Box::new(self.security.clone()),
            offset: 0,
        }
    }

    /// Creates a topic: partition `i` is assigned to `replication_factor` live brokers starting
    /// at the `i`-th (in id order, offset by the topic's first partition id), so leaders spread.
    /// The topic gets a new random id.
    pub fn create_topic(
        &mut self,
        cfg: &Config,
        spec: &TopicSpec,
    ) -> Result<Effects<bytes::Bytes>, AdminError> {
        isr_kafka::names::check_topic(&spec.name)
            .map_err(|e| AdminError::InvalidTopic(e.to_string()))?;
        if self.topics.contains_key(&spec.name) {
            return Err(AdminError::TopicExists(spec.name.clone()));
        }
        for (name, value) in &spec.configs {
            configs::check_topic_config(name, value)
                .map_err(|e| AdminError::InvalidConfig(e.to_string()))?;
        }
        let factor = usize::from(spec.replication_factor);
        let min_isr = match spec.configs.get(MIN_INSYNC) {
            Some(v) => parse_min_isr(v)?,
            None => cfg.min_insync_replicas.min(factor),
        };
        let id = TopicId::random().map_err(|e| {
            AdminError::Unavailable(format!("no randomness for the topic's id: {e}"))
        })?;
        let (ids, effects) = if spec.assignment.is_empty() {
            self.add_partitions(spec.partitions, factor, min_isr)?
        } else {
            self.add_assigned(&spec.assignment, min_isr)?
        };
        self.set(Record::Topic {
            name: spec.name.clone(),
            partitions: Some(ids),
        });
        self.set(Record::TopicId {
            name: spec.name.clone(),
            id: Some(id),
        });
        if !spec.configs.is_empty() {
            self.set(Record::TopicConfigs {
                name: spec.name.clone(),
                overrides: Some(spec.configs.clone()),
            });
        }
        Ok(effects)
    }

    /// Creates `count` partitions of `factor` replicas each, over the live brokers.
    fn add_partitions(
        &mut self,
        count: u32,
        factor: usize,
        min_isr: usize,
    ) -> Result<(Vec<PartitionId>, Effects<bytes::Bytes>), AdminError> {
        if count == 0 || count > MAX_PARTITIONS {
            return Err(AdminError::InvalidPartitions(format!(
                "{count} is not between 1 and {MAX_PARTITIONS}"
            )));
        }
        let alive = self.controller.alive_brokers();
        if factor == 0 || factor > alive.len() {
            return Err(AdminError::InvalidReplicationFactor(format!(
                "{factor} needs as many live brokers; {} are alive",
                alive.len()
            )));
        }
        let assignment: Vec<Vec<BrokerId>> = (self.next_partition..self.next_partition + count)
            .map(|next| {
                let start = (next as usize) % alive.len();
                (0..factor)
                    .map(|k| alive[(start + k) % alive.len()])
                    .collect()
            })
            .collect();
        self.create_assigned(&assignment, min_isr, AdminError::InvalidReplicationFactor)
    }

    /// Creates one partition per list of `assignment`, on exactly those brokers in that order
    /// (Kafka's manual replica assignment): each list must name distinct live brokers, and
    /// all as many.
    fn add_assigned(
        &mut self,
        assignment: &[Vec<BrokerId>],
        min_isr: usize,
    ) -> Result<(Vec<PartitionId>, Effects<bytes::Bytes>), AdminError> {
        let invalid = |why: String| Err(AdminError::InvalidReplicaAssignment(why));
        let count = assignment.len() as u32;
        if count > MAX_PARTITIONS {
            return Err(AdminError::InvalidPartitions(format!(
                "{count} is not between 1 and {MAX_PARTITIONS}"
            )));
        }
        let factor = assignment.first().map_or(0, Vec::len);
        let alive = self.controller.alive_brokers();
        for (index, replicas) in assignment.iter().enumerate() {
            let distinct: BTreeSet<&BrokerId> = replicas.iter().collect();
            if replicas.is_empty() || replicas.len() != factor || distinct.len() != factor {
                return invalid(format!(
                    "partition {index}: {} replicas; every partition needs the same number ({factor}) of distinct brokers",
                    replicas.len()
                ));
            }
            if let Some(b) = replicas.iter().find(|b| !alive.contains(b)) {
                return invalid(format!("partition {index}: broker {b} is not alive"));
            }
        }
        self.create_assigned(assignment, min_isr, AdminError::InvalidReplicaAssignment)
    }

    /// Creates one partition per list of `assignment`, its replicas in that order, after the
    /// last partition id; `refused` words the core's refusal.
    fn create_assigned(
        &mut self,
        assignment: &[Vec<BrokerId>],
        min_isr: usize,
        refused: fn(String) -> AdminError,
    ) -> Result<(Vec<PartitionId>, Effects<bytes::Bytes>), AdminError> {
        let factor = assignment.first().map_or(0, Vec::len);
        if min_isr == 0 || min_isr > factor {
            return Err(AdminError::InvalidConfig(format!(
                "{MIN_INSYNC}={min_isr} is not between 1 and the replication factor {factor}"
            )));
        }
        let mut ids = Vec::new();
        let mut effects = Vec::new();
        for (next, replicas) in (self.next_partition..).zip(assignment) {
            let id = PartitionId(next);
            let created = self
                .controller
                .create_partition(id, replicas.clone(), min_isr)
                .map_err(|e| refused(e.to_string()))?;
            effects.extend(created);
            ids.push(id);
        }
        self.set(Record::NextPartition(
            self.next_partition + ids.len() as u32,
        ));
        Ok((ids, effects))
    }

    /// Grows a topic to `total` partitions, with the replication factor and floor of its first:
    /// placed over the live brokers, or, with an `assignment`, one list of brokers per new
    /// partition, each as many as the topic's replication factor (Kafka's CreatePartitions
    /// with assignments).
    pub fn create_partitions(
        &mut self,
        topic: &str,
        total: u32,
        assignment: &[Vec<BrokerId>],
    ) -> Result<Effects<bytes::Bytes>, AdminError> {
        let ids = self
            .topics
            .get(topic)
            .ok_or(AdminError::UnknownTopicOrPartition)?;
        let have = ids.len() as u32;
        if total <= have {
            return Err(AdminError::InvalidPartitions(format!(
                "topic {topic} has {have} partitions; asked for {total} in all"
            )));
        }
        let first = ids
            .first()
            .and_then(|id| self.controller.partition(*id))
            .ok_or(AdminError::UnknownTopicOrPartition)?;
        let (factor, min_isr) = (first.assigned.len(), first.min_insync_replicas);
        let mut ids = ids.clone();
        let (added, effects) = if assignment.is_empty() {
            self.add_partitions(total - have, factor, min_isr)?
        } else if assignment.len() as u32 != total - have {
            return Err(AdminError::InvalidReplicaAssignment(format!(
                "{} assignments for {} new partitions",
                assignment.len(),
                total - have
            )));
        } else if let Some(other) = assignment.iter().find(|a| a.len() != factor) {
            return Err(AdminError::InvalidReplicaAssignment(format!(
                "{} replicas where topic {topic} has {factor}",
                other.len()
            )));
        } else {
            self.add_assigned(assignment, min_isr)?
        };
        ids.extend(added);
        self.set(Record::Topic {
            name: topic.to_owned(),
            partitions: Some(ids),
        });
        Ok(effects)
    }

    /// Deletes a topic: its partitions leave the core controller and the groups' offsets, and
    /// brokers drop their replicas once the metadata no longer lists them.
    pub fn delete_topic(&mut self, topic: &str) -> Result<(), AdminError> {
        let ids = self
            .topics
            .get(topic)
            .cloned()
            .ok_or(AdminError::UnknownTopicOrPartition)?;
        self.set(Record::Topic {
            name: topic.to_owned(),
            partitions: None,
        });
        for id in &ids {
            // A partition the core does not know is as deleted as can be.
            let _ = self.controller.delete_partition(*id);
        }
        self.set(Record::TopicConfigs {
            name: topic.to_owned(),
            overrides: None,
        });
        self.set(Record::TopicId {
            name: topic.to_owned(),
            id: None,
        });
        Ok(())
    }

    /// Changes a topic's or broker's config overrides. A topic's `min.insync.replicas` goes to
    /// every partition in the core (checked against the replication factor first, so that a
    /// refused change changes nothing); without an override the controller's default applies.
    pub fn alter_configs(
        &mut self,
        cfg: &Config,
        resource: &ConfigResource,
        ops: &[ConfigOp],
        replace: bool,
    ) -> Result<Effects<bytes::Bytes>, AdminError> {
        configs::check_change(resource, ops).map_err(|e| match e.code() {
            17 => AdminError::InvalidTopic(e.to_string()),
            _ => AdminError::InvalidConfig(e.to_string()),
        })?;
        let topic = match resource {
            ConfigResource::Broker(name) => {
                let mut overrides = self.broker_configs.get(name).cloned().unwrap_or_default();
                configs::apply(&mut overrides, ops, replace);
                self.set(Record::BrokerConfigs {
                    name: name.clone(),
                    overrides: Some(overrides).filter(|o| !o.is_empty()),
                });
                return Ok(Vec::new());
            }
            ConfigResource::Topic(topic) => topic,
        };
        let ids = self
            .topics
            .get(topic)
            .ok_or(AdminError::UnknownTopicOrPartition)?
            .clone();
        let mut overrides = self.topic_configs.get(topic).cloned().unwrap_or_default();
        configs::apply(&mut overrides, ops, replace);
        let partitions: Vec<_> = ids
            .iter()
            .filter_map(|id| Some((*id, self.controller.partition(*id)?.assigned.len())))
            .collect();
        let floor = |factor: usize| match overrides.get(MIN_INSYNC) {
            Some(v) => parse_min_isr(v),
            None => Ok(cfg.min_insync_replicas.min(factor)),
        };
        for &(_, factor) in &partitions {
            let min_isr = floor(factor)?;
            if min_isr > factor {
                return Err(AdminError::InvalidConfig(format!(
                    "{MIN_INSYNC}={min_isr} exceeds the replication factor {factor}"
                )));
            }
        }
        let mut effects = Vec::new();
        for (id, factor) in partitions {
            let changed = self
                .controller
                .set_min_insync_replicas(id, floor(factor)?)
                .map_err(|e| AdminError::InvalidConfig(e.to_string()))?;
            effects.extend(changed);
        }
        self.set(Record::TopicConfigs {
            name: topic.clone(),
            overrides: Some(overrides).filter(|o| !o.is_empty()),
        });
        Ok(effects)
    }
}

fn parse_min_isr(value: &str) -> Result<usize, AdminError> {
    value.trim().parse().ok().filter(|&n| n > 0).ok_or_else(|| {
        AdminError::InvalidConfig(format!("{MIN_INSYNC}={value}: a positive integer"))
    })
}
#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use isr::Tick;

    /// Three registered brokers, as a controller has them.
    pub(in crate::controller) fn three_brokers() -> (Config, Metadata) {
        let cfg = Config::default();
        let mut meta = Metadata::default();
        for b in 1..=3 {
            let registration = isr::ControllerInput::Message {
                from: isr::Node::Broker(BrokerId(b)),
                message: isr::Message::BrokerRegistration {
                    broker: BrokerId(b),
                    clean_shutdown: true,
                },
            };
            let _: Effects<bytes::Bytes> = meta.controller.step(&cfg, Tick(0), registration);
        }
        (cfg, meta)
    }

    pub(crate) fn spec(name: &str, partitions: u32, configs: &[(&str, &str)]) -> TopicSpec {
        TopicSpec {
            name: name.into(),
            partitions,
            replication_factor: 3,
            configs: configs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            assignment: Vec::new(),
        }
    }

    fn min_isr(meta: &Metadata, topic: &str) -> Vec<usize> {
        meta.topics[topic]
            .iter()
            .map(|id| {
                meta.controller
                    .partition(*id)
                    .expect("p")
                    .min_insync_replicas
            })
            .collect()
    }

    #[test]
    fn a_manual_assignment_places_each_partition_on_its_brokers_in_order() {
        let (cfg, mut meta) = three_brokers();
        let assigned = |lists: &[&[u32]]| TopicSpec {
            assignment: lists
                .iter()
                .map(|l| l.iter().map(|&b| BrokerId(b)).collect())
                .collect(),
            ..spec("m", 0, &[("min.insync.replicas", "1")])
        };
        meta.create_topic(&cfg, &assigned(&[&[3, 1], &[2, 3]]))
            .expect("create");
        let replicas = |p: u32| {
            meta.controller
                .partition(PartitionId(p))
                .map(|s| (s.assigned.clone(), s.leader))
        };
        assert_eq!(
            replicas(0),
            Some((vec![BrokerId(3), BrokerId(1)], Some(BrokerId(3))))
        );
        assert_eq!(
            replicas(1),
            Some((vec![BrokerId(2), BrokerId(3)], Some(BrokerId(2))))
        );
        for bad in [&[&[1, 1][..]][..], &[&[1, 2], &[3]], &[&[1, 4]], &[&[]]] {
            let spec = TopicSpec {
                name: "bad".into(),
                ..assigned(bad)
            };
            assert!(
                matches!(
                    meta.clone().create_topic(&cfg, &spec),
                    Err(AdminError::InvalidReplicaAssignment(_))
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn topics_are_created_with_their_configs_over_live_brokers_once() {
        let (cfg, mut meta) = three_brokers();
        let t = spec(
            "t",
            2,
            &[("min.insync.replicas", "2"), ("retention.ms", "1000")],
        );
        meta.create_topic(&cfg, &t).expect("create");
        let back = meta.clone();
        assert_eq!(back.topics["t"], vec![PartitionId(0), PartitionId(1)]);
        assert_eq!(back.view(None).partition_id("t", 1), Some(PartitionId(1)));
        assert_eq!(back.topic_configs["t"]["retention.ms"], "1000");
        assert!(matches!(
            back.clone().create_topic(&cfg, &t),
            Err(AdminError::TopicExists(_))
        ));
        assert!(matches!(
            back.clone().create_topic(&cfg, &spec("no/slashes", 1, &[])),
            Err(AdminError::InvalidTopic(_))
        ));
        assert!(matches!(
            back.clone()
                .create_topic(&cfg, &spec("c", 1, &[("cleanup.policy", "shred")])),
            Err(AdminError::InvalidConfig(_))
        ));
    }

    #[test]
    fn topics_grow_and_go() {
        let (cfg, mut meta) = three_brokers();
        meta.create_topic(&cfg, &spec("t", 1, &[("min.insync.replicas", "3")]))
            .expect("t");
        assert!(matches!(
            meta.create_partitions("t", 1, &[]),
            Err(AdminError::InvalidPartitions(_))
        ));
        assert!(!meta
            .create_partitions("t", 3, &[])
            .expect("grow")
            .is_empty());
        assert_eq!(meta.topics["t"].len(), 3);
        assert_eq!(
            min_isr(&meta, "t"),
            [3, 3, 3],
            "new partitions keep the floor"
        );
        // With an assignment: one list per new partition, as many brokers as the topic's
        // factor, distinct and alive; the replicas go exactly there, in that order.
        let b = |ids: &[u32]| ids.iter().map(|&i| BrokerId(i)).collect::<Vec<_>>();
        for bad in [
            vec![b(&[3, 2, 1])],                // two new partitions, one list
            vec![b(&[3, 2, 1]), b(&[1, 2])],    // another replication factor
            vec![b(&[3, 2, 1]), b(&[1, 1, 2])], // a broker twice
            vec![b(&[3, 2, 1]), b(&[1, 2, 9])], // a broker not alive
        ] {
            assert!(
                matches!(
                    meta.clone().create_partitions("t", 5, &bad),
                    Err(AdminError::InvalidReplicaAssignment(_))
                ),
                "{bad:?}"
            );
        }
        let manual = [b(&[3, 2, 1]), b(&[2, 1, 3])];
        assert!(!meta
            .create_partitions("t", 5, &manual)
            .expect("grow")
            .is_empty());
        let placed: Vec<Vec<BrokerId>> = meta.topics["t"][3..]
            .iter()
            .map(|id| {
                meta.controller
                    .partition(*id)
                    .expect("created")
                    .assigned
                    .clone()
            })
            .collect();
        assert_eq!(placed, manual);
        let ids = meta.topics["t"].clone();
        meta.delete_topic("t").expect("delete");
        let view = meta.view(None);
        assert!(ids
            .iter()
            .all(|id| id.0 < view.next_partition && !view.partitions.contains_key(id)));
        assert!(meta.topic_configs.is_empty());
        assert_eq!(
            meta.delete_topic("t"),
            Err(AdminError::UnknownTopicOrPartition)
        );
        // A new topic of the same name gets new partitions.
        meta.create_topic(&cfg, &spec("t", 1, &[])).expect("again");
        assert!(!ids.contains(&meta.topics["t"][0]));
    }

    #[test]
    fn each_topic_gets_an_id_of_its_own_which_goes_with_it() {
        let (cfg, mut meta) = three_brokers();
        meta.create_topic(&cfg, &spec("a", 1, &[])).expect("a");
        meta.create_topic(&cfg, &spec("b", 2, &[])).expect("b");
        let id = |meta: &Metadata, name: &str| meta.topic_ids.get(name).expect("an id");
        let (a, b) = (id(&meta, "a"), id(&meta, "b"));
        assert_ne!(a, TopicId::ZERO);
        assert_ne!(a, b, "two topics, two ids");
        let view = meta.view(None);
        assert_eq!((view.topic_id("a"), view.topic_named_by(b)), (a, Some("b")));

        meta.delete_topic("a").expect("delete");
        assert_eq!(meta.topic_ids.get("a"), None);
        assert_eq!(meta.view(None).topic_named_by(a), None);
        meta.create_topic(&cfg, &spec("a", 1, &[])).expect("again");
        assert_ne!(
            id(&meta, "a"),
            a,
            "a topic of the same name is another topic"
        );

        // A topic from a store written before ids has none: clients see the zero id.
        meta.topic_ids.set("b".into(), None);
        assert_eq!(meta.view(None).topic_id("b"), TopicId::ZERO);
        assert_eq!(meta.view(None).topic_named_by(TopicId::ZERO), None);
    }

    #[test]
    fn a_min_isr_change_reaches_the_core_and_a_refused_one_changes_nothing() {
        let (cfg, mut meta) = three_brokers();
        meta.create_topic(&cfg, &spec("t", 2, &[])).expect("t");
        assert_eq!(min_isr(&meta, "t"), [2, 2], "the controller's default");
        let topic = ConfigResource::Topic("t".into());
        let set = |v: &str| vec![ConfigOp::Set("min.insync.replicas".into(), v.into())];
        let effects = meta
            .alter_configs(&cfg, &topic, &set("3"), false)
            .expect("3");
        assert!(!effects.is_empty(), "the brokers are told");
        assert_eq!(min_isr(&meta, "t"), [3, 3]);
        assert!(matches!(
            meta.alter_configs(&cfg, &topic, &set("4"), false),
            Err(AdminError::InvalidConfig(_))
        ));
        assert_eq!(min_isr(&meta, "t"), [3, 3]);
        assert_eq!(meta.topic_configs["t"]["min.insync.replicas"], "3");
        // AlterConfigs replaces every override: back to the default.
        let retention = vec![ConfigOp::Set("retention.ms".into(), "5".into())];
        meta.alter_configs(&cfg, &topic, &retention, true)
            .expect("replace");
        assert_eq!(min_isr(&meta, "t"), [2, 2]);
        assert_eq!(meta.topic_configs["t"].len(), 1);
        let broker = ConfigResource::Broker(String::new());
        let max = vec![ConfigOp::Set("message.max.bytes".into(), "2000".into())];
        meta.alter_configs(&cfg, &broker, &max, false)
            .expect("broker");
        assert_eq!(
            meta.view(None).broker_configs[""]["message.max.bytes"],
            "2000"
        );
        assert!(matches!(
            meta.alter_configs(&cfg, &ConfigResource::Topic("nope".into()), &max, false),
            Err(AdminError::InvalidConfig(_))
        ));
    }
}
