//! What the Kafka layer needs from a broker.
//!
//! The Kafka protocol server (`serve_connection`) translates requests into calls on this trait
//! and answers with what it returns; the runtime implements it over its replicas, storage and
//! controller. Keeping the boundary this narrow lets the protocol layer be tested against an
//! in-memory backend and lets the runtime evolve without touching wire encoding.
//!
//! Partitions are numbered within their topic (`u32`, Kafka's partition index); brokers, epochs
//! and offsets use the core's newtypes so that they cannot be confused with one another.

use crate::auth::acl::{Authorizer, Operation, ResourceType};
use crate::auth::{SecurityAnswer, SecurityChange, SecurityProtocol};
use crate::configs::{ConfigOp, ConfigResource};
use crate::topic_id::TopicId;
use bytes::Bytes;
use isr::{Acks, BrokerId, LeaderEpoch, Offset};
use std::collections::BTreeMap;
use std::future::Future;

/// A broker as clients should reach it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerInfo {
    pub id: BrokerId,
    /// Host name or address advertised to clients.
    pub host: String,
    pub port: u16,
    /// Its Kafka listeners (host, port) by security protocol: a client is told each broker's
    /// listener of the protocol it came through (`host` and `port` for a broker without one).
    pub listeners: BTreeMap<SecurityProtocol, (String, u16)>,
}

/// What an append answers: the batch's base offset, and the broker's time it was stamped with
/// when its topic's `message.timestamp.type` is LogAppendTime ([`crate::batch::with_log_append_time`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Appended {
    pub base_offset: Offset,
    /// The Produce answer's `log_append_time_ms`; `None` (-1) under CreateTime.
    pub log_append_time: Option<i64>,
}

/// One partition of a topic as the controller last described it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionInfo {
    /// Index of the partition within its topic.
    pub partition: u32,
    /// `None` while the partition has no leader (clients then see LEADER_NOT_AVAILABLE).
    pub leader: Option<BrokerId>,
    pub leader_epoch: LeaderEpoch,
    pub replicas: Vec<BrokerId>,
    pub isr: Vec<BrokerId>,
    /// Assigned replicas on brokers the controller has fenced (Metadata's `offline_replicas`).
    pub offline: Vec<BrokerId>,
    /// Writes with acks=all need this many in-sync replicas (the topic's min.insync.replicas).
    pub min_insync_replicas: usize,
}

/// A topic and all its partitions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicInfo {
    pub name: String,
    /// Its id (KIP-516); [`TopicId::ZERO`] for a topic created before isr kept ids.
    pub id: TopicId,
    pub partitions: Vec<PartitionInfo>,
    /// The topic's config overrides (`max.message.bytes`, `retention.ms`, ...): what was set
    /// at creation or since, without defaults. See [`crate::configs`].
    pub configs: BTreeMap<String, String>,
}

/// The whole cluster as this broker knows it. The Kafka layer filters it per request, so
/// the backend need not know which topics a client asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterMetadata {
    /// The broker answering: it is also advertised as group coordinator (FindCoordinator).
    pub this_broker: BrokerId,
    /// The broker clients should send admin requests to; `None` if unknown.
    pub controller: Option<BrokerId>,
    pub brokers: Vec<BrokerInfo>,
    pub topics: Vec<TopicInfo>,
    /// Dynamic broker config overrides, by resource name: `""` for the cluster-wide default,
    /// a broker id for one broker (which wins). Static settings are [`Backend::settings`].
    pub broker_configs: BTreeMap<String, BTreeMap<String, String>>,
}

/// A topic to create (CreateTopics).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewTopic {
    pub name: String,
    pub partitions: u32,
    pub replication_factor: u16,
    /// Config overrides (`min.insync.replicas` among them), already validated (see
    /// [`crate::configs`]); the broker's values apply to the rest.
    pub configs: BTreeMap<String, String>,
    /// A manual replica assignment: each partition's replicas, in preference order (the first
    /// is the preferred leader), one list per partition, all of `replication_factor` distinct
    /// brokers. Empty: the controller assigns them.
    pub assignment: Vec<Vec<BrokerId>>,
}

/// What a fetch returns: committed data only.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FetchedData {
    pub high_watermark: Offset,
    pub log_start_offset: Offset,
    /// Whole v2 record batches, each already carrying its assigned base offset, in offset
    /// order, all below the high watermark. The first may start before the requested offset
    /// (clients skip the records they did not ask for). Their total size should not exceed the
    /// requested `max_bytes`, except that one batch is always returned if any is available, so
    /// that a batch larger than `max_bytes` cannot stall a consumer (Kafka's rule too).
    pub batches: Vec<Bytes>,
}

/// Which offset ListOffsets asks for. Only committed records (below the high watermark) are
/// ever considered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The log start offset.
    Earliest,
    /// The high watermark: the offset the next committed record will take.
    Latest,
    /// The committed record with the largest timestamp (KIP-734), the first of several.
    MaxTimestamp,
    /// The first committed record whose timestamp is at or after this one (milliseconds since
    /// the Unix epoch): what `offsets_for_times` asks.
    Timestamp(i64),
}

/// A ListOffsets answer for one partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListedOffset {
    pub offset: Offset,
    /// The record's timestamp, or -1 for the earliest and latest offsets (Kafka answers so).
    pub timestamp: i64,
    /// The leader epoch of the record at `offset` (of the last record, for the latest offset),
    /// if known: clients use it to detect truncation (KIP-320).
    pub leader_epoch: Option<LeaderEpoch>,
}

/// A consumer group's committed offset in one partition of a topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupOffset {
    pub topic: String,
    pub partition: u32,
    pub committed: CommittedOffset,
}

/// A broker's static settings: its command-line flags and built-in defaults, which Kafka
/// calls static broker configs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerSettings {
    /// `auto.create.topics.enable`: Metadata requests that allow it create unknown topics.
    pub auto_create_topics: bool,
    /// `num.partitions`: partitions of a topic created without a count.
    pub num_partitions: u32,
    /// `default.replication.factor`: replicas of a topic created without a factor.
    pub default_replication_factor: u16,
    /// `min.insync.replicas`: the floor of a topic created without one (at most its
    /// replication factor).
    pub min_insync_replicas: u16,
    /// `message.max.bytes`: the largest record batch accepted, unless a dynamic broker config
    /// or the topic's `max.message.bytes` says otherwise.
    pub message_max_bytes: u32,
    /// `log.segment.bytes`: where the log starts a new segment file.
    pub segment_bytes: u64,
    /// `offsets.topic.num.partitions`: the partitions of `__consumer_offsets` when the first
    /// group needs it (see [`crate::offsets_topic`]).
    pub offsets_topic_partitions: u32,
    /// `group.initial.rebalance.delay.ms`: how long the first member of an empty group waits
    /// for others before its rebalance completes ([`isr::group::Group::with_initial_delay`]).
    pub group_initial_rebalance_delay_ms: u64,
}

impl Default for BrokerSettings {
    /// Kafka's defaults.
    fn default() -> Self {
        BrokerSettings {
            auto_create_topics: true,
            num_partitions: 1,
            default_replication_factor: 1,
            min_insync_replicas: 1,
            message_max_bytes: crate::configs::MESSAGE_MAX_BYTES,
            segment_bytes: 1 << 30,
            offsets_topic_partitions: crate::offsets_topic::DEFAULT_PARTITIONS,
            group_initial_rebalance_delay_ms: 3_000,
        }
    }
}

/// Where a consumer group is coordinated ([`Backend::group_coordinator`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupCoordinator {
    pub broker: BrokerId,
    /// Whether it is this broker.
    pub here: bool,
}

/// A consumer group's committed position in one partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedOffset {
    /// The offset of the next record the group will read.
    pub offset: Offset,
    /// The leader epoch of the last record the group read (KIP-320), as the client committed
    /// it: a consumer that resumes here asks the leader whether its log still holds that epoch
    /// up to `offset`, and so notices a truncation below it. `None` when the client sent none.
    pub leader_epoch: Option<LeaderEpoch>,
    /// Opaque client metadata, returned as stored.
    pub metadata: String,
}

/// Why a backend refused a request. Each variant maps onto one Kafka error code, which is what
/// the client sees; the text is for logs and the isr client's one-line messages.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    #[error("NOT_LEADER_OR_FOLLOWER: this broker does not lead the partition")]
    NotLeaderOrFollower,
    #[error("LEADER_NOT_AVAILABLE: the partition has no leader at the moment")]
    LeaderNotAvailable,
    #[error("NOT_ENOUGH_REPLICAS: the in-sync replicas are fewer than min.insync.replicas")]
    NotEnoughReplicas,
    #[error("NOT_ENOUGH_REPLICAS_AFTER_APPEND: appended, but the ISR shrank below min.insync.replicas before commit")]
    NotEnoughReplicasAfterAppend,
    #[error("UNKNOWN_TOPIC_OR_PARTITION: no such topic or partition")]
    UnknownTopicOrPartition,
    /// A request named a topic by an id no topic has (KIP-516).
    #[error("UNKNOWN_TOPIC_ID: no topic has this id")]
    UnknownTopicId,
    #[error("OFFSET_OUT_OF_RANGE: offset outside the log")]
    OffsetOutOfRange,
    #[error("TOPIC_ALREADY_EXISTS: a topic of that name exists")]
    TopicAlreadyExists,
    #[error("INVALID_TOPIC_EXCEPTION: {0}")]
    InvalidTopic(String),
    #[error("INVALID_PARTITIONS: {0}")]
    InvalidPartitions(String),
    #[error("INVALID_REPLICATION_FACTOR: {0}")]
    InvalidReplicationFactor(String),
    #[error("INVALID_CONFIG: {0}")]
    InvalidConfig(String),
    #[error("INVALID_REPLICA_ASSIGNMENT: {0}")]
    InvalidReplicaAssignment(String),
    #[error("MESSAGE_TOO_LARGE: {0}")]
    MessageTooLarge(String),
    #[error("INVALID_REQUEST: {0}")]
    InvalidRequest(String),
    #[error("REQUEST_TIMED_OUT: the request did not complete in time")]
    RequestTimedOut,
    #[error("CORRUPT_MESSAGE: {0}")]
    CorruptMessage(String),
    #[error("COORDINATOR_NOT_AVAILABLE: the group coordinator is not available")]
    CoordinatorNotAvailable,
    /// This broker does not coordinate the group (any more): the client looks it up again.
    #[error("NOT_COORDINATOR: another broker coordinates this group")]
    NotCoordinator,
    /// This broker has just become the group's coordinator and has not read every offset
    /// committed before it yet: the client asks again.
    #[error("COORDINATOR_LOAD_IN_PROGRESS: the coordinator is loading the group's offsets")]
    CoordinatorLoadInProgress,
    /// A metadata change (a topic created) needs the active controller, and there is none that
    /// can act: none elected, or its store unreachable. Kafka's NOT_CONTROLLER, which clients
    /// retry after refreshing their metadata.
    #[error("NOT_CONTROLLER: no controller can make this change now: {0}")]
    ControllerUnavailable(String),
    #[error("TOPIC_AUTHORIZATION_FAILED: {0}")]
    TopicAuthorizationFailed(String),
    #[error("GROUP_AUTHORIZATION_FAILED: {0}")]
    GroupAuthorizationFailed(String),
    #[error("CLUSTER_AUTHORIZATION_FAILED: {0}")]
    ClusterAuthorizationFailed(String),
    #[error("TRANSACTIONAL_ID_AUTHORIZATION_FAILED: {0}")]
    TransactionalIdAuthorizationFailed(String),
    /// ACL requests to a broker without ACLs enabled (Kafka: no authorizer configured).
    #[error("SECURITY_DISABLED: {0}")]
    SecurityDisabled(String),
    #[error("KAFKA_STORAGE_ERROR: {0}")]
    Storage(String),
    /// An idempotent producer's batch does not follow its last one: nothing was stored.
    #[error("OUT_OF_ORDER_SEQUENCE_NUMBER: {0}")]
    OutOfOrderSequence(String),
    /// An idempotent producer fenced by a newer epoch of its id.
    #[error("INVALID_PRODUCER_EPOCH: {0}")]
    InvalidProducerEpoch(String),
    /// A batch Kafka refuses whole for what is in it: `records` are the positions in the batch
    /// of the records at fault (the answer's `record_errors`), empty when the batch as a whole
    /// is.
    #[error("INVALID_RECORD: {message}")]
    InvalidRecord { message: String, records: Vec<i32> },
    #[error("UNKNOWN_SERVER_ERROR: {0}")]
    Internal(String),
}

impl BackendError {
    /// What a response's error message says: the text without the code's name, which the
    /// client shows from the code (`INVALID_CONFIG: INVALID_CONFIG: ...` otherwise).
    pub fn detail(&self) -> String {
        let full = self.to_string();
        match full.split_once(": ") {
            Some((name, rest)) if name.chars().all(|c| c.is_ascii_uppercase() || c == '_') => {
                rest.to_owned()
            }
            _ => full,
        }
    }

    /// The Kafka protocol error code sent to the client.
    pub fn code(&self) -> i16 {
        match self {
            BackendError::Internal(_) => -1,
            BackendError::OffsetOutOfRange => 1,
            BackendError::CorruptMessage(_) => 2,
            BackendError::UnknownTopicOrPartition => 3,
            BackendError::UnknownTopicId => 100,
            BackendError::LeaderNotAvailable => 5,
            BackendError::NotLeaderOrFollower => 6,
            BackendError::RequestTimedOut => 7,
            BackendError::CoordinatorLoadInProgress => 14,
            BackendError::CoordinatorNotAvailable => 15,
            BackendError::NotCoordinator => 16,
            BackendError::ControllerUnavailable(_) => 41,
            BackendError::InvalidTopic(_) => 17,
            BackendError::NotEnoughReplicas => 19,
            BackendError::NotEnoughReplicasAfterAppend => 20,
            BackendError::TopicAlreadyExists => 36,
            BackendError::InvalidPartitions(_) => 37,
            BackendError::InvalidReplicationFactor(_) => 38,
            BackendError::InvalidConfig(_) => 40,
            BackendError::MessageTooLarge(_) => 10,
            BackendError::InvalidReplicaAssignment(_) => 39,
            BackendError::InvalidRequest(_) => 42,
            BackendError::Storage(_) => 56,
            BackendError::OutOfOrderSequence(_) => 45,
            BackendError::InvalidProducerEpoch(_) => 47,
            BackendError::InvalidRecord { .. } => 87,
            BackendError::TopicAuthorizationFailed(_) => 29,
            BackendError::GroupAuthorizationFailed(_) => 30,
            BackendError::ClusterAuthorizationFailed(_) => 31,
            BackendError::TransactionalIdAuthorizationFailed(_) => 53,
            BackendError::SecurityDisabled(_) => 54,
        }
    }
}

/// What a broker offers the Kafka layer. One value serves every connection (hence `Sync` and
/// `'static`); methods return `Send` futures so that each connection can run on any worker.
///
/// Offsets are assigned by the backend. Batches handed to [`Backend::produce`] have been checked
/// by the Kafka layer (magic 2, CRC-32C, length, record count: see [`crate::batch`]); the
/// backend stores them as received except for the base offset and partition leader epoch
/// header fields, which lie outside the CRC and which it sets with
/// [`crate::batch::stamp`] so that fetches serve correct offsets.
pub trait Backend: Send + Sync + 'static {
    /// The consumer groups this broker coordinates (membership only: committed offsets go
    /// through [`Backend::commit_offsets`]). A backend keeps one for its lifetime.
    fn coordinator(&self) -> &crate::Coordinator;

    /// This broker's static settings (its flags and defaults).
    fn settings(&self) -> &BrokerSettings;

    /// The cluster as this broker knows it.
    fn metadata(&self) -> impl Future<Output = Result<ClusterMetadata, BackendError>> + Send;

    /// Creates a topic; returns its id (which the controller drew) once the controller has
    /// accepted it.
    fn create_topic(
        &self,
        topic: NewTopic,
    ) -> impl Future<Output = Result<TopicId, BackendError>> + Send;

    /// The name of the topic whose id is `id`, `None` if no topic has it: requests that name
    /// topics by id (Fetch v13+, DeleteTopics v6) are served by name from there. Never asked for
    /// the zero id, which stands for no id (the Kafka layer answers it UNKNOWN_TOPIC_ID). The
    /// default looks through [`Backend::metadata`]; a backend with a cheaper way overrides it,
    /// since every Fetch by id asks.
    fn topic_name(
        &self,
        id: TopicId,
    ) -> impl Future<Output = Result<Option<String>, BackendError>> + Send {
        async move {
            let cluster = self.metadata().await?;
            Ok(cluster
                .topics
                .into_iter()
                .find(|t| t.id == id)
                .map(|t| t.name))
        }
    }

    /// Deletes a topic and every partition of it, with the groups' offsets in them
    /// (DeleteTopics); returns once the controller has.
    fn delete_topic(&self, name: &str) -> impl Future<Output = Result<(), BackendError>> + Send;

    /// Grows a topic to `total` partitions (CreatePartitions); the new ones start empty. With
    /// an `assignment` (one list of brokers per new partition, in preference order) they go on
    /// exactly those brokers; without one the backend places them.
    fn create_partitions(
        &self,
        topic: &str,
        total: u32,
        assignment: Vec<Vec<BrokerId>>,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;

    /// Changes a topic's or broker's config overrides: `replace` drops every override the
    /// operations do not set (AlterConfigs), otherwise they are applied to the current ones
    /// (IncrementalAlterConfigs). The operations are validated by the Kafka layer
    /// ([`crate::configs`]); the backend checks what depends on its state (a topic's
    /// `min.insync.replicas` against its replication factor).
    fn alter_configs(
        &self,
        resource: ConfigResource,
        ops: Vec<ConfigOp>,
        replace: bool,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;

    /// Appends one v2 record batch (as received, already validated) to a partition this broker
    /// leads, and returns the base offset assigned to it. A batch longer than the topic's
    /// effective `max.message.bytes` ([`crate::configs::max_message_bytes`]) is refused with
    /// `MessageTooLarge`. Resolves according to `acks`:
    /// `All` once the high watermark passes the batch, `Leader` once appended locally. With
    /// `None` the client expects no answer, but the Kafka layer still awaits the result (to
    /// keep a connection's writes in order) and discards it.
    fn produce(
        &self,
        topic: &str,
        partition: u32,
        acks: Acks,
        batch: Bytes,
    ) -> impl Future<Output = Result<Appended, BackendError>> + Send;

    /// Committed batches from `offset` on, at most about `max_bytes` (see [`FetchedData`]).
    /// Returns promptly with no batches when nothing is committed at `offset` yet; the Kafka
    /// layer does the long-poll waiting. An `offset` above the high watermark or below the log
    /// start is `OffsetOutOfRange`; exactly at the high watermark is an empty answer.
    fn fetch(
        &self,
        topic: &str,
        partition: u32,
        offset: Offset,
        max_bytes: u32,
    ) -> impl Future<Output = Result<FetchedData, BackendError>> + Send;

    /// An offset of a partition this broker leads (ListOffsets); `None` when no committed
    /// record matches (a timestamp after every record's, or an empty log for MaxTimestamp).
    fn list_offsets(
        &self,
        topic: &str,
        partition: u32,
        spec: OffsetSpec,
    ) -> impl Future<Output = Result<Option<ListedOffset>, BackendError>> + Send;

    /// DeleteRecords (KIP-107) on a partition this broker leads: its log start moves to
    /// `before` (to the high watermark when `None`, Kafka's -1); the answer is the new log
    /// start (the low watermark). Beyond the high watermark: `OffsetOutOfRange`, nothing
    /// deleted.
    fn delete_records(
        &self,
        topic: &str,
        partition: u32,
        before: Option<Offset>,
    ) -> impl Future<Output = Result<Offset, BackendError>> + Send;

    /// The broker that coordinates `group`: its members join there, and its offsets are
    /// committed and read there. COORDINATOR_NOT_AVAILABLE while there is none.
    fn group_coordinator(
        &self,
        group: &str,
    ) -> impl Future<Output = Result<GroupCoordinator, BackendError>> + Send;

    /// Readies this broker to answer for `group` as its coordinator: NOT_COORDINATOR when
    /// another broker coordinates it, COORDINATOR_LOAD_IN_PROGRESS until this one has loaded
    /// the group's stored membership into [`Backend::coordinator`] (and its offsets), so that
    /// a coordinator that took over answers the members in their generation.
    fn load_group(&self, group: &str) -> impl Future<Output = Result<(), BackendError>> + Send;

    /// Persists a group's membership where its next coordinator loads it, or with `None`
    /// deletes it (with the group); answered once durable as the backend promises.
    fn store_group(
        &self,
        group: &str,
        stored: Option<crate::coordinator::StoredGroup>,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;

    /// Records a consumer group's positions (OffsetCommit), on the group's coordinator, in one
    /// write: answered once durable as the backend promises (the `isr` broker: one record batch
    /// committed in the group's offsets partition), with one result per position, in order. A
    /// position in a partition that does not exist is refused alone.
    fn commit_offsets(
        &self,
        group: &str,
        offsets: Vec<GroupOffset>,
    ) -> impl Future<Output = Vec<Result<(), BackendError>>> + Send;

    /// A consumer group's position in a partition, `None` if it never committed one
    /// (OffsetFetch).
    fn fetch_offset(
        &self,
        group: &str,
        topic: &str,
        partition: u32,
    ) -> impl Future<Output = Result<Option<CommittedOffset>, BackendError>> + Send;

    /// Every committed offset of a group (OffsetFetch naming no topics).
    fn group_offsets(
        &self,
        group: &str,
    ) -> impl Future<Output = Result<Vec<GroupOffset>, BackendError>> + Send;

    /// The groups with committed offsets that this broker coordinates (ListGroups: admin
    /// clients ask every broker).
    fn offset_groups(&self) -> impl Future<Output = Result<Vec<String>, BackendError>> + Send;

    /// Deletes a group's committed offsets: those of the named partitions (OffsetDelete), or
    /// all of them (`None`, DeleteGroups).
    fn delete_offsets(
        &self,
        group: &str,
        partitions: Option<Vec<(String, u32)>>,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;

    /// A producer id unique in the cluster (InitProducerId), for idempotent producers. The
    /// producer stamps each batch with its id and sequence numbers, and a backend that
    /// recognises a retry of a batch it holds answers it with the stored offsets (the `isr`
    /// broker does, for each producer's latest five batches, and refuses a sequence gap).
    fn allocate_producer_id(&self) -> impl Future<Output = Result<i64, BackendError>> + Send;

    /// How this broker authorizes: whether ACLs are enabled, its super users, and the
    /// cluster's users and ACLs as it last heard of them (SASL logins check passwords against
    /// those users' SCRAM credentials). The default: no users, ACLs disabled.
    fn authorizer(&self) -> Authorizer {
        Authorizer::default()
    }

    /// Whether the principal of the request being served may do `op` on a resource. The Kafka
    /// layer serves each request through a wrapper that answers this; a backend itself
    /// allows everything.
    fn authorize(
        &self,
        _op: Operation,
        _resource: ResourceType,
        _name: &str,
    ) -> Result<(), BackendError> {
        Ok(())
    }

    /// Changes the cluster's users or ACLs (AlterUserScramCredentials, CreateAcls,
    /// DeleteAcls); validated by the Kafka layer. The default keeps none.
    fn alter_security(
        &self,
        _change: SecurityChange,
    ) -> impl Future<Output = Result<SecurityAnswer, BackendError>> + Send {
        async {
            Err(BackendError::SecurityDisabled(
                "this broker keeps no users or ACLs".into(),
            ))
        }
    }

    /// Resolves when committed data may have grown on this broker (any partition), so that a
    /// waiting fetch (long poll) reads again. The Kafka layer creates this future *before*
    /// reading and awaits it after, so a backend built on `tokio::sync::Notify` should return
    /// a `notified()` future created here (it sees `notify_waiters` from its creation on) and
    /// call `notify_waiters` whenever a high watermark advances. Spurious wake-ups are fine.
    ///
    /// The default polls: it resolves after [`POLL_INTERVAL`], bounding the added latency.
    fn committed_changed(&self) -> impl Future<Output = ()> + Send {
        tokio::time::sleep(POLL_INTERVAL)
    }
}

/// How often a waiting fetch reads again when the backend does not signal commits.
pub const POLL_INTERVAL: std::time::Duration = std::time::Duration::from_millis(5);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_message_leaves_the_code_name_to_the_code() {
        let e = BackendError::InvalidConfig("retention.ms=soon: not a number".into());
        assert_eq!(e.detail(), "retention.ms=soon: not a number");
        assert_eq!(
            BackendError::NotEnoughReplicas.detail(),
            "the in-sync replicas are fewer than min.insync.replicas"
        );
    }
}
