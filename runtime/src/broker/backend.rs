//! The broker as the Kafka layer sees it: [`isr_kafka::Backend`] over the replica thread (for
//! data and, in `__consumer_offsets`, consumer groups' offsets: [`offsets`]) and the controller
//! (for metadata, topics, configs and producer ids).

mod offsets;

use super::host::{Command, HostError};
use super::network::Net;
use crate::timing;
use crate::wire::admin::{AdminError, ClusterView, Request, Response, TopicSpec};
use crate::wire::rpc::RpcError;
use bytes::Bytes;
use isr::{Acks, BrokerId, Offset, PartitionId, ReadError, WriteError};
use isr_kafka::auth::acl::Authorizer;
use isr_kafka::auth::{SecurityAnswer, SecurityChange};
use isr_kafka::compression;
use isr_kafka::configs::{self, BrokerConfigs, ConfigOp, ConfigResource};
use isr_kafka::{
    Appended, Backend, BackendError, BrokerInfo, BrokerSettings, ClusterMetadata, CommittedOffset,
    Coordinator, FetchedData, GroupCoordinator, GroupOffset, ListedOffset, NewTopic, OffsetSpec,
    PartitionInfo, StoredGroup, TopicId, TopicInfo,
};
use std::collections::BTreeSet;
use std::sync::Arc;
use tokio::sync::{oneshot, Notify};

pub struct BrokerBackend {
    net: Arc<Net>,
    settings: BrokerSettings,
    /// Whether ACLs are enabled, and the super users (`--acls`, `--super-user`).
    acls: bool,
    super_users: Arc<BTreeSet<String>>,
    /// Rung by the replica thread whenever a high watermark moves.
    commits: Arc<Notify>,
    /// Membership of the consumer groups this broker coordinates.
    groups: Coordinator,
    /// What this broker has read of the offsets partitions it coordinates.
    views: offsets::Views,
}

impl BrokerBackend {
    pub fn new(
        net: Arc<Net>,
        commits: Arc<Notify>,
        settings: BrokerSettings,
        access: &super::AccessArgs,
        groups: Coordinator,
    ) -> BrokerBackend {
        BrokerBackend {
            net,
            acls: access.acls,
            super_users: Arc::new(access.super_users.iter().cloned().collect()),
            commits,
            groups,
            views: offsets::Views::default(),
            settings,
        }
    }

    /// Asks the active controller. Without one (none elected, or its store unreachable) the
    /// error is [`BackendError::ControllerUnavailable`], saying why.
    async fn ask(&self, request: Request) -> Result<Response, BackendError> {
        let link = self.net.outbox.controller().ok_or_else(|| {
            BackendError::ControllerUnavailable("no session with an active controller".into())
        })?;
        self.net
            .rpc
            .call(&link, request, timing::ADMIN_TIMEOUT)
            .await
            .map_err(|e| match e {
                RpcError::NotConnected | RpcError::Dial(_) => BackendError::ControllerUnavailable(
                    "the session with the controller closed".into(),
                ),
                RpcError::TimedOut(_) => BackendError::RequestTimedOut,
                RpcError::Refused(e) => admin_error(e),
            })
    }

    /// [`BackendError::ControllerUnavailable`] as a producer-id coordinator's error: clients
    /// look for the coordinator again.
    async fn ask_coordinator(&self, request: Request) -> Result<Response, BackendError> {
        self.ask(request).await.map_err(|e| match e {
            BackendError::ControllerUnavailable(_) => BackendError::CoordinatorNotAvailable,
            other => other,
        })
    }

    /// Asks the controller for an admin change expecting `Done`. The controller pushes the
    /// metadata it changed to every broker before it answers, on the same session, so this
    /// broker's next request sees the change.
    async fn change(&self, request: Request) -> Result<(), BackendError> {
        done(self.ask(request).await?)
    }

    /// What `find` finds in the metadata the controller pushed, or, when it finds nothing there
    /// (a topic just created, whose push may not have arrived), in the controller's.
    async fn look_up<T>(
        &self,
        find: impl Fn(&Arc<ClusterView>) -> Option<T>,
    ) -> Result<Option<T>, BackendError> {
        let cached = self.net.cluster_view().await.map_err(admin_error)?;
        if let Some(found) = find(&cached) {
            return Ok(Some(found));
        }
        let fresh = self.net.ask_metadata().await.map_err(admin_error)?;
        Ok(find(&fresh))
    }

    /// The partition behind a topic's partition index, with the metadata it was found in.
    async fn locate(
        &self,
        topic: &str,
        index: u32,
    ) -> Result<(PartitionId, Arc<ClusterView>), BackendError> {
        self.look_up(|view| Some((view.partition_id(topic, index)?, Arc::clone(view))))
            .await?
            .ok_or(BackendError::UnknownTopicOrPartition)
    }

    async fn partition_id(&self, topic: &str, index: u32) -> Result<PartitionId, BackendError> {
        Ok(self.locate(topic, index).await?.0)
    }

    async fn host<T>(
        &self,
        command: impl FnOnce(oneshot::Sender<Result<T, HostError>>) -> Command,
    ) -> Result<T, BackendError> {
        let (tx, rx) = oneshot::channel();
        self.net
            .host
            .send(command(tx))
            .map_err(|_| BackendError::NotLeaderOrFollower)?;
        match tokio::time::timeout(timing::PRODUCE_TIMEOUT, rx).await {
            Ok(Ok(result)) => result.map_err(host_error),
            Ok(Err(_)) => Err(BackendError::Storage("the replica stopped".into())),
            Err(_) => Err(BackendError::RequestTimedOut),
        }
    }
}

fn unexpected(response: Response) -> BackendError {
    BackendError::Internal(format!(
        "unexpected answer from the controller: {response:?}"
    ))
}

fn done(response: Response) -> Result<(), BackendError> {
    match response {
        Response::Done => Ok(()),
        other => Err(unexpected(other)),
    }
}

fn admin_error(e: AdminError) -> BackendError {
    match e {
        AdminError::UnknownTopicOrPartition => BackendError::UnknownTopicOrPartition,
        AdminError::TopicExists(_) => BackendError::TopicAlreadyExists,
        AdminError::InvalidTopic(s) => BackendError::InvalidTopic(s),
        AdminError::InvalidPartitions(s) => BackendError::InvalidPartitions(s),
        AdminError::InvalidReplicationFactor(s) => BackendError::InvalidReplicationFactor(s),
        AdminError::InvalidConfig(s) => BackendError::InvalidConfig(s),
        AdminError::Storage(s) => BackendError::Storage(s),
        AdminError::Unsupported(s) => BackendError::Internal(s),
        e @ (AdminError::Unavailable(_) | AdminError::NotActive(_)) => {
            BackendError::ControllerUnavailable(e.to_string())
        }
        AdminError::NotYours(s) => BackendError::Internal(s),
        AdminError::InvalidReplicaAssignment(s) => BackendError::InvalidReplicaAssignment(s),
    }
}

fn host_error(e: HostError) -> BackendError {
    match e {
        HostError::NotHosted
        | HostError::Write(WriteError::NotLeader)
        | HostError::Read(ReadError::NotLeader) => BackendError::NotLeaderOrFollower,
        HostError::Write(WriteError::NotEnoughReplicas { .. }) => BackendError::NotEnoughReplicas,
        HostError::Read(ReadError::OffsetOutOfRange) => BackendError::OffsetOutOfRange,
        HostError::Storage(s) => BackendError::Storage(s),
        HostError::Write(e @ WriteError::LogFailed) => BackendError::Storage(e.to_string()),
        HostError::Write(e @ WriteError::NotOneBatch { .. }) => BackendError::InvalidRecord {
            message: e.to_string(),
            records: Vec::new(),
        },
        HostError::Write(e @ WriteError::OutOfOrderSequence { .. }) => {
            BackendError::OutOfOrderSequence(e.to_string())
        }
        HostError::Write(e @ WriteError::InvalidProducerEpoch { .. }) => {
            BackendError::InvalidProducerEpoch(e.to_string())
        }
    }
}

/// Splits "host:port"; an address without a valid port is advertised with port 0.
fn host_port(address: &str) -> (String, u16) {
    match address.rsplit_once(':') {
        Some((host, port)) => (host.to_string(), port.parse().unwrap_or(0)),
        None => (address.to_string(), 0),
    }
}

/// The cluster for the Kafka layer. isr's controller is not a broker, and every broker forwards
/// admin requests to it; Metadata still names one broker as the controller, for clients that
/// send admin requests there. It names the lowest live broker id, so that every broker names
/// the same one.
fn to_kafka(me: BrokerId, view: &ClusterView) -> ClusterMetadata {
    let brokers: Vec<BrokerInfo> = view
        .brokers
        .iter()
        .filter(|(_, b)| b.alive)
        .map(|(&id, b)| {
            let (host, port) = host_port(&b.address);
            let listeners = b
                .listeners
                .iter()
                .map(|(&protocol, address)| (protocol, host_port(address)))
                .collect();
            BrokerInfo {
                id,
                host,
                port,
                listeners,
            }
        })
        .collect();
    let controller = brokers.iter().map(|b| b.id).min();
    let topics = view
        .topics
        .iter()
        .map(|(name, ids)| TopicInfo {
            name: name.clone(),
            id: view.topic_id(name),
            partitions: ids
                .iter()
                .enumerate()
                .filter_map(|(index, id)| {
                    let state = view.partitions.get(id)?;
                    Some(PartitionInfo {
                        partition: index as u32,
                        leader: state.leader,
                        leader_epoch: state.leader_epoch,
                        replicas: state.assigned.clone(),
                        isr: state.isr.iter().copied().collect(),
                        offline: state
                            .assigned
                            .iter()
                            .copied()
                            .filter(|b| !view.brokers.get(b).is_some_and(|b| b.alive))
                            .collect(),
                        min_insync_replicas: state.min_insync_replicas,
                    })
                })
                .collect(),
            configs: view.topic_configs.get(name).cloned().unwrap_or_default(),
        })
        .collect();
    ClusterMetadata {
        this_broker: me,
        controller,
        brokers,
        topics,
        broker_configs: view.broker_configs.clone(),
    }
}

impl Backend for BrokerBackend {
    fn coordinator(&self) -> &Coordinator {
        &self.groups
    }

    fn settings(&self) -> &BrokerSettings {
        &self.settings
    }

    fn authorizer(&self) -> Authorizer {
        Authorizer {
            enabled: self.acls,
            super_users: self.super_users.clone(),
            state: self.net.security(),
        }
    }

    /// Forwarded to the controller, which keeps users and ACLs in its metadata and pushes
    /// them to every broker before it answers.
    async fn alter_security(&self, change: SecurityChange) -> Result<SecurityAnswer, BackendError> {
        match self.ask(Request::Security(change)).await? {
            Response::Security(answer) => Ok(answer),
            other => Err(unexpected(other)),
        }
    }

    /// Answered from the metadata the controller pushed: clients find current leaders even
    /// while no controller is reachable.
    async fn metadata(&self) -> Result<ClusterMetadata, BackendError> {
        let view = self.net.cluster_view().await.map_err(admin_error)?;
        Ok(to_kafka(self.net.me, &view))
    }

    /// The id is read from the metadata the controller pushed before it answered; a topic
    /// deleted meanwhile is answered the zero id.
    async fn create_topic(&self, topic: NewTopic) -> Result<TopicId, BackendError> {
        let name = topic.name.clone();
        self.change(Request::CreateTopic(TopicSpec {
            name: topic.name,
            partitions: topic.partitions,
            replication_factor: topic.replication_factor,
            configs: topic.configs,
            assignment: topic.assignment,
        }))
        .await?;
        let id = self.look_up(|view| view.topic_ids.get(&name));
        Ok(id.await?.unwrap_or(TopicId::ZERO))
    }

    /// Looked up in the metadata the controller pushed: every Fetch by id asks.
    async fn topic_name(&self, id: TopicId) -> Result<Option<String>, BackendError> {
        self.look_up(|view| view.topic_named_by(id).map(str::to_owned))
            .await
    }

    async fn delete_topic(&self, name: &str) -> Result<(), BackendError> {
        self.change(Request::DeleteTopic(name.to_owned())).await
    }

    async fn create_partitions(
        &self,
        topic: &str,
        total: u32,
        assignment: Vec<Vec<BrokerId>>,
    ) -> Result<(), BackendError> {
        self.change(Request::CreatePartitions {
            topic: topic.to_owned(),
            total,
            assignment,
        })
        .await
    }

    async fn alter_configs(
        &self,
        resource: ConfigResource,
        ops: Vec<ConfigOp>,
        replace: bool,
    ) -> Result<(), BackendError> {
        self.change(Request::AlterConfigs {
            resource,
            ops,
            replace,
        })
        .await
    }

    async fn produce(
        &self,
        topic: &str,
        partition: u32,
        acks: Acks,
        batch: Bytes,
    ) -> Result<Appended, BackendError> {
        let (partition, view) = self.locate(topic, partition).await?;
        let (batch, log_append_time) = {
            let broker = BrokerConfigs {
                id: self.net.me,
                settings: &self.settings,
                dynamic: &view.broker_configs,
            };
            let overrides = view.topic_configs.get(topic).cloned().unwrap_or_default();
            configs::check_batch_size(batch.len(), topic, &overrides, &broker)?;
            let batch = match configs::compression(&overrides, &broker) {
                Some(codec) => {
                    let batch = compression::recompress(batch, codec)?;
                    configs::check_batch_size(batch.len(), topic, &overrides, &broker)?;
                    batch
                }
                None => batch,
            };
            if configs::compacted(&overrides, &broker) {
                let keyless = compression::keyless_records(&batch)?;
                if !keyless.is_empty() {
                    return Err(BackendError::InvalidRecord {
                        message: format!(
                            "{topic} is compacted (cleanup.policy=compact): every record needs \
                             a key"
                        ),
                        records: keyless,
                    });
                }
            }
            let stamp = configs::log_append_time(&overrides, &broker).then(timing::wall_clock_ms);
            (batch, stamp)
        };
        // The Kafka layer validated the batch; checking again here keeps anything malformed out
        // of the log whoever the caller is.
        let batches = isr_kafka::batch::split(batch)
            .map_err(|e| BackendError::CorruptMessage(e.to_string()))?
            .into_iter()
            .map(|(batch, _)| match log_append_time {
                Some(now) => isr_kafka::batch::with_log_append_time(&batch, now),
                None => batch,
            })
            .collect();
        let base_offset = self
            .host(|reply| Command::Produce {
                partition,
                acks,
                batches,
                reply,
            })
            .await?;
        Ok(Appended {
            base_offset,
            log_append_time,
        })
    }

    async fn fetch(
        &self,
        topic: &str,
        partition: u32,
        offset: Offset,
        max_bytes: u32,
    ) -> Result<FetchedData, BackendError> {
        let partition = self.partition_id(topic, partition).await?;
        let committed = self
            .host(|reply| Command::Read {
                partition,
                offset,
                max_bytes: max_bytes as usize,
                reply,
            })
            .await?;
        Ok(FetchedData {
            high_watermark: committed.high_watermark,
            log_start_offset: committed.log_start_offset,
            batches: committed.batches,
        })
    }

    async fn list_offsets(
        &self,
        topic: &str,
        partition: u32,
        spec: OffsetSpec,
    ) -> Result<Option<ListedOffset>, BackendError> {
        let partition = self.partition_id(topic, partition).await?;
        self.host(|reply| Command::ListOffsets {
            partition,
            spec,
            reply,
        })
        .await
    }

    async fn delete_records(
        &self,
        topic: &str,
        partition: u32,
        before: Option<Offset>,
    ) -> Result<Offset, BackendError> {
        let partition = self.partition_id(topic, partition).await?;
        self.host(|reply| Command::DeleteRecords {
            partition,
            before,
            reply,
        })
        .await
    }

    async fn group_coordinator(&self, group: &str) -> Result<GroupCoordinator, BackendError> {
        self.coordinator_of(group).await
    }

    async fn load_group(&self, group: &str) -> Result<(), BackendError> {
        self.load(group).await
    }

    async fn store_group(
        &self,
        group: &str,
        stored: Option<StoredGroup>,
    ) -> Result<(), BackendError> {
        self.store(group, stored).await
    }

    async fn commit_offsets(
        &self,
        group: &str,
        offsets: Vec<GroupOffset>,
    ) -> Vec<Result<(), BackendError>> {
        self.commit(group, offsets).await
    }

    async fn fetch_offset(
        &self,
        group: &str,
        topic: &str,
        partition: u32,
    ) -> Result<Option<CommittedOffset>, BackendError> {
        self.committed(group, topic, partition).await
    }

    async fn group_offsets(&self, group: &str) -> Result<Vec<GroupOffset>, BackendError> {
        self.offsets_of(group).await
    }

    async fn offset_groups(&self) -> Result<Vec<String>, BackendError> {
        self.coordinated_groups().await
    }

    async fn delete_offsets(
        &self,
        group: &str,
        partitions: Option<Vec<(String, u32)>>,
    ) -> Result<(), BackendError> {
        self.delete(group, partitions).await
    }

    async fn allocate_producer_id(&self) -> Result<i64, BackendError> {
        match self.ask_coordinator(Request::AllocateProducerId).await? {
            Response::ProducerId(id) => Ok(id),
            other => Err(unexpected(other)),
        }
    }

    fn committed_changed(&self) -> impl std::future::Future<Output = ()> + Send {
        self.commits.notified()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::admin::BrokerView;
    use isr::{LeaderEpoch, PartitionEpoch, PartitionState};
    use isr_kafka::auth::SecurityProtocol;

    #[test]
    fn metadata_lists_live_brokers_and_reports_replicas_on_fenced_ones_offline() {
        let mut view = ClusterView::default();
        for (id, alive) in [(1, true), (2, false), (4, true)] {
            let address = format!("127.0.0.1:909{id}");
            let listeners = [(SecurityProtocol::SaslSsl, format!("127.0.0.1:919{id}"))].into();
            view.brokers.insert(
                BrokerId(id),
                BrokerView {
                    address,
                    listeners,
                    alive,
                },
            );
        }
        view.topics.insert("t".into(), vec![PartitionId(7)]);
        view.partitions.insert(
            PartitionId(7),
            PartitionState {
                assigned: vec![BrokerId(2), BrokerId(1), BrokerId(3)],
                leader: Some(BrokerId(1)),
                leader_epoch: LeaderEpoch(2),
                isr: [BrokerId(1)].into(),
                elr: Default::default(),
                partition_epoch: PartitionEpoch(3),
                min_insync_replicas: 1,
            },
        );
        let meta = to_kafka(BrokerId(1), &view);
        let live: Vec<BrokerId> = meta.brokers.iter().map(|b| b.id).collect();
        assert_eq!(live, vec![BrokerId(1), BrokerId(4)]);
        assert_eq!(
            meta.brokers[1].listeners[&SecurityProtocol::SaslSsl],
            ("127.0.0.1".to_string(), 9194)
        );
        assert_eq!(meta.controller, Some(BrokerId(1)), "the lowest live broker");
        assert_eq!(
            to_kafka(BrokerId(4), &view).controller,
            Some(BrokerId(1)),
            "everywhere"
        );
        let p = &meta.topics[0].partitions[0];
        // Broker 3 was never registered: as offline as a fenced one.
        assert_eq!(p.offline, vec![BrokerId(2), BrokerId(3)]);
        assert_eq!(p.isr, vec![BrokerId(1)]);
    }
}
