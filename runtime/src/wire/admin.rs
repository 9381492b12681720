//! Admin requests: what a broker asks the controller on behalf of Kafka clients, and what
//! `isr status` asks of everyone. The replication protocol itself never travels here.

use crate::controller::records::{put, Record};
use isr::MetadataRecord;
use isr::{BrokerId, ControllerEpoch, LeaderEpoch, Offset, PartitionId, PartitionState};
use isr_kafka::auth::{SecurityAnswer, SecurityChange, SecurityProtocol, SecurityState};
use isr_kafka::configs::{ConfigOp, ConfigResource};
use isr_kafka::{TopicId, TopicIds};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use thiserror::Error;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// The cluster as the controller knows it.
    Metadata,
    CreateTopic(TopicSpec),
    DeleteTopic(String),
    /// Grows a topic to `total` partitions: on the brokers `assignment` names for each new
    /// one, or where the controller places them if it is empty.
    CreatePartitions {
        topic: String,
        total: u32,
        #[serde(default)]
        assignment: Vec<Vec<BrokerId>>,
    },
    /// Changes a topic's or broker's config overrides (`replace`: AlterConfigs, which drops
    /// every override not set).
    AlterConfigs {
        resource: ConfigResource,
        ops: Vec<ConfigOp>,
        replace: bool,
    },
    /// A producer id unique in the cluster.
    AllocateProducerId,
    /// Asked of a broker: the state of every replica it hosts.
    Replicas,
    /// A broker about to stop asks, on its own session, to be fenced now so that what it
    /// leads moves at once (`Controller::on_controlled_shutdown`).
    ControlledShutdown {
        broker: BrokerId,
    },
    /// Changes the cluster's users or ACLs (checked by the broker that forwards it, or asked
    /// by an admin client holding a cluster certificate).
    Security(SecurityChange),
    /// The metadata offset of the asked one's view: the active controller's is how many deltas
    /// it has sent this session, a broker's how many it has applied ([`ClusterView::offset`]);
    /// and how many deltas it ignored (older than its view, after a gap, or about a partition
    /// its view does not have).
    MetadataOffset,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    Metadata(ClusterView),
    Done,
    ProducerId(i64),
    Replicas(Vec<ReplicaView>),
    Security(SecurityAnswer),
    MetadataOffset {
        offset: u64,
        /// Deltas ignored since the process started (a controller ignores none).
        stale_deltas: u64,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicSpec {
    pub name: String,
    pub partitions: u32,
    pub replication_factor: u16,
    /// Config overrides, `min.insync.replicas` among them (the controller's default applies
    /// without it).
    pub configs: BTreeMap<String, String>,
    /// Each partition's replicas, in preference order, when the client assigned them (Kafka's
    /// manual replica assignment); empty: the controller assigns them over the live brokers.
    #[serde(default)]
    pub assignment: Vec<Vec<BrokerId>>,
}

#[derive(Clone, Debug, PartialEq, Eq, Error, Serialize, Deserialize)]
pub enum AdminError {
    #[error("unknown topic or partition")]
    UnknownTopicOrPartition,
    #[error("topic {0} already exists")]
    TopicExists(String),
    #[error("invalid topic name: {0}")]
    InvalidTopic(String),
    #[error("invalid partition count: {0}")]
    InvalidPartitions(String),
    #[error("invalid replication factor: {0}")]
    InvalidReplicationFactor(String),
    #[error("invalid config: {0}")]
    InvalidConfig(String),
    #[error("cannot persist cluster metadata: {0}")]
    Storage(String),
    #[error("this node does not answer {0}")]
    Unsupported(String),
    /// Only a broker's own session may ask for its controlled shutdown.
    #[error("{0} may only be asked for by that broker")]
    NotYours(String),
    /// A broker could not reach the controller to answer for it, or the controller could not
    /// reach its store.
    #[error("controller unavailable: {0}")]
    Unavailable(String),
    /// Asked of a standby controller: the active one is elsewhere (or not elected yet).
    #[error("this controller is a standby; {}", match .0 {
        Some(active) => format!("the active controller is {} at {} (epoch {})", active.id, active.address, active.epoch.0),
        None => "no controller is active at the moment".to_string(),
    })]
    NotActive(Option<ControllerInfo>),
    /// A manual replica assignment names a broker that is not alive.
    #[error("invalid replica assignment: {0}")]
    InvalidReplicaAssignment(String),
}

/// The active controller: its id, where it listens, and the controller epoch it acts in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerInfo {
    pub id: u32,
    pub address: String,
    pub epoch: ControllerEpoch,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerView {
    /// Where other brokers and admin clients reach it.
    pub address: String,
    /// Its Kafka listeners by security protocol.
    pub listeners: BTreeMap<SecurityProtocol, String>,
    pub alive: bool,
}

/// The controller's metadata, as clients and status see it. The active controller pushes it
/// to every broker whenever it changes; brokers answer Metadata requests from their copy, so
/// clients find the current leaders while no controller is reachable.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterView {
    /// The controller that made this view.
    pub controller: Option<ControllerInfo>,
    pub brokers: BTreeMap<BrokerId, BrokerView>,
    /// Each topic's partitions, in partition-index order.
    pub topics: BTreeMap<String, Vec<PartitionId>>,
    pub partitions: BTreeMap<PartitionId, PartitionState>,
    /// Each topic's config overrides.
    pub topic_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// Each topic's id (KIP-516); a topic created before isr kept ids has none (the zero id, to
    /// clients).
    pub topic_ids: TopicIds,
    /// Dynamic broker config overrides: `""` cluster-wide, or by broker id.
    pub broker_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// Every partition id below this was created at some point: one a broker hosts that is
    /// below it and missing from `partitions` was deleted (ids are never reused).
    pub next_partition: u32,
    /// Users (their SCRAM credentials) and ACLs. Brokers need the credentials to check logins;
    /// admin clients are answered without them ([`ClusterView::without_credentials`]). Boxed,
    /// so that a frame carrying the view stays small.
    pub security: Box<SecurityState>,
    /// The metadata offset of the view in its controller's session: how many deltas the
    /// controller had sent when it made it. The next delta a broker applies is `offset + 1`.
    pub offset: u64,
}

impl ClusterView {
    /// Whether this view already holds everything `other` holds and more: both were made by
    /// the same controller in the same term, where offsets count the deltas sent, and this
    /// one is further on. A whole view that a broker asked for is read off its session before
    /// the deltas that follow it, but taken in by the asking task, which may run after the
    /// session's reader has applied them; it must not take the broker's metadata back.
    pub fn is_ahead_of(&self, other: &ClusterView) -> bool {
        self.controller == other.controller && self.offset > other.offset
    }

    /// The view as shown to anyone but a broker: without users' credentials.
    pub fn without_credentials(mut self) -> ClusterView {
        self.security = Box::new(self.security.without_credentials());
        self
    }

    /// The core partition behind a topic's partition index.
    pub fn partition_id(&self, topic: &str, index: u32) -> Option<PartitionId> {
        self.topics.get(topic)?.get(index as usize).copied()
    }

    /// A topic's id: the zero id for a topic without one.
    pub fn topic_id(&self, topic: &str) -> TopicId {
        self.topic_ids.get(topic).unwrap_or(TopicId::ZERO)
    }

    /// The topic whose id is `id`.
    pub fn topic_named_by(&self, id: TopicId) -> Option<&str> {
        self.topic_ids.name_of(id)
    }

    /// The first partition whose state a delta's `records` set that neither this view has nor
    /// the delta creates (its id between the view's `next_partition` and the delta's): the
    /// delta belongs to a history this view is not part of (a gap no offset showed, or a
    /// controller's bug), and applying it would invent a partition. Such a delta is not applied.
    pub fn unknown_partition(&self, records: &[Record]) -> Option<PartitionId> {
        let created_below = records
            .iter()
            .filter_map(|r| match r {
                Record::NextPartition(n) => Some(*n),
                _ => None,
            })
            .max()
            .unwrap_or(self.next_partition);
        let created = self.next_partition..created_below;
        records.iter().find_map(|r| match r {
            Record::Core(MetadataRecord::Partition { id, state: Some(_) })
                if !self.partitions.contains_key(id) && !created.contains(&id.0) =>
            {
                Some(*id)
            }
            _ => None,
        })
    }

    /// Applies a record of the controller's metadata, as a delta brings it: what the view
    /// shows changes as the controller's metadata did. Producer ids are no part of a view.
    pub fn apply(&mut self, record: &Record) {
        match record.clone() {
            Record::Core(MetadataRecord::Broker { id, state }) => {
                if let Some(b) = self.brokers.get_mut(&id) {
                    b.alive = state.is_some_and(|s| s.alive);
                }
            }
            Record::Core(MetadataRecord::Partition { id, state }) => {
                put(&mut self.partitions, id, state)
            }
            Record::Core(MetadataRecord::ControllerEpoch(_)) => {}
            Record::Topic { name, partitions } => put(&mut self.topics, name, partitions),
            Record::TopicConfigs { name, overrides } => {
                put(&mut self.topic_configs, name, overrides)
            }
            Record::BrokerConfigs { name, overrides } => {
                put(&mut self.broker_configs, name, overrides)
            }
            Record::Address { broker, address } => {
                let alive = self.brokers.get(&broker).is_some_and(|b| b.alive);
                let view = address.map(|a| BrokerView {
                    address: a.internal,
                    listeners: a.listeners,
                    alive,
                });
                put(&mut self.brokers, broker, view)
            }
            Record::NextPartition(n) => self.next_partition = n,
            Record::Security(state) => *self.security = state,
            Record::TopicId { name, id } => self.topic_ids.set(name, id),
            Record::NextProducerId(_) => {}
        }
    }
}

/// One replica as its broker sees it, with the leader's view of its followers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaView {
    pub partition: PartitionId,
    pub role: String,
    pub leader_epoch: LeaderEpoch,
    pub log_end_offset: Offset,
    pub high_watermark: Offset,
    /// The first offset the replica still holds (KIP-107: DeleteRecords, retention).
    #[serde(default)]
    pub log_start_offset: Offset,
    /// How far the replica's log is durable (fsynced): under `--flush page-cache` what lies
    /// above is in the page cache only, until a clean shutdown or the topic's `flush.ms`.
    #[serde(default)]
    pub flushed_offset: Offset,
    /// Leader only: each follower's LEO as proven by its last fetch in this epoch.
    pub followers: BTreeMap<BrokerId, Option<Offset>>,
    /// Set when the replica's storage failed and it stopped.
    pub failed: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(controller: Option<(u32, u32)>, offset: u64) -> ClusterView {
        ClusterView {
            controller: controller.map(|(id, epoch)| ControllerInfo {
                id,
                address: format!("127.0.0.1:{}", 9000 + id),
                epoch: ControllerEpoch(epoch),
            }),
            offset,
            ..ClusterView::default()
        }
    }

    /// Only the same controller's term orders views by offset: a later delta count is ahead;
    /// the same or an earlier one is not, and a view of another controller or term never is
    /// (its offsets count another session's deltas, from zero).
    #[test]
    fn a_view_is_ahead_only_of_an_earlier_one_of_the_same_term() {
        let kept = view(Some((1, 2)), 7);
        assert!(kept.is_ahead_of(&view(Some((1, 2)), 6)));
        assert!(!kept.is_ahead_of(&view(Some((1, 2)), 7)));
        assert!(!kept.is_ahead_of(&view(Some((1, 2)), 8)));
        assert!(!kept.is_ahead_of(&view(Some((1, 3)), 0)));
        assert!(!kept.is_ahead_of(&view(Some((2, 2)), 0)));
        assert!(!kept.is_ahead_of(&view(None, 0)));
    }
}
