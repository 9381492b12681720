//! Authorization: who sent a request, and the backend as that principal may use it, through
//! the listener it came by.
//!
//! Every request is served through an [`Authorized`] backend, which checks each topic and
//! cluster operation against the ACLs before passing it on (so a handler cannot forget one),
//! and answers [`Backend::authorize`] for the checks handlers make themselves: groups, whose
//! membership lives in the coordinator, and requests that stop short of the backend
//! (validate-only changes, topics named in Metadata). Which operation each API needs follows
//! Kafka's authorizer.

use crate::auth::acl::{Authorizer, Operation, ResourceType, CLUSTER_NAME};
use crate::auth::SecurityProtocol;
use crate::backend::{
    Appended, Backend, BackendError, BrokerSettings, ClusterMetadata, CommittedOffset, FetchedData,
    GroupCoordinator, GroupOffset, ListedOffset, NewTopic, OffsetSpec,
};
use crate::configs::{ConfigOp, ConfigResource};
use crate::coordinator::{Coordinator, StoredGroup};
use crate::topic_id::TopicId;
use bytes::Bytes;
use isr::{Acks, BrokerId, Offset};
use std::sync::Arc;

/// A principal connected from a host through a listener, and the authorizer that judges it.
pub struct Access {
    pub principal: String,
    pub host: String,
    pub listener: SecurityProtocol,
    pub authorizer: Authorizer,
}

impl Access {
    pub fn allows(&self, op: Operation, resource: ResourceType, name: &str) -> bool {
        self.authorizer
            .allows(&self.principal, &self.host, op, resource, name)
    }

    /// `Ok`, or the refusal Kafka's clients expect for that resource type.
    pub fn check(
        &self,
        op: Operation,
        resource: ResourceType,
        name: &str,
    ) -> Result<(), BackendError> {
        if self.allows(op, resource, name) {
            return Ok(());
        }
        let why = format!("{} may not {op} {resource} {name}", self.principal);
        Err(match resource {
            ResourceType::Topic => BackendError::TopicAuthorizationFailed(why),
            ResourceType::Group => BackendError::GroupAuthorizationFailed(why),
            ResourceType::Cluster => BackendError::ClusterAuthorizationFailed(why),
            ResourceType::TransactionalId => BackendError::TransactionalIdAuthorizationFailed(why),
        })
    }

    fn topic(&self, op: Operation, name: &str) -> Result<(), BackendError> {
        self.check(op, ResourceType::Topic, name)
    }

    fn cluster(&self, op: Operation) -> Result<(), BackendError> {
        self.check(op, ResourceType::Cluster, CLUSTER_NAME)
    }

    /// Creating a topic takes Create on the cluster or on the topic.
    fn create(&self, topic: &str) -> Result<(), BackendError> {
        match self.cluster(Operation::Create) {
            Ok(()) => Ok(()),
            Err(_) => self.topic(Operation::Create, topic),
        }
    }
}

/// Whether the caller may create `topic` (Create on the cluster or on the topic), for
/// validate-only requests, which stop short of [`Backend::create_topic`].
pub fn may_create<B: Backend>(backend: &B, topic: &str) -> Result<(), BackendError> {
    backend
        .authorize(Operation::Create, ResourceType::Cluster, CLUSTER_NAME)
        .or_else(|_| backend.authorize(Operation::Create, ResourceType::Topic, topic))
}

/// `inner` as `access.principal` may use it.
pub struct Authorized<B> {
    pub inner: Arc<B>,
    pub access: Access,
}

impl<B: Backend> Backend for Authorized<B> {
    fn coordinator(&self) -> &Coordinator {
        self.inner.coordinator()
    }

    fn settings(&self) -> &BrokerSettings {
        self.inner.settings()
    }

    fn authorizer(&self) -> Authorizer {
        self.access.authorizer.clone()
    }

    fn authorize(
        &self,
        op: Operation,
        resource: ResourceType,
        name: &str,
    ) -> Result<(), BackendError> {
        self.access.check(op, resource, name)
    }

    /// Topics the principal may not describe are left out, as if they did not exist; brokers
    /// are advertised at their listener of this connection's protocol. (A broker without one
    /// keeps its first listener's address rather than vanishing: every broker must see the
    /// same live brokers, since they pick group coordinators among them. Give every broker
    /// the same listener protocols.)
    async fn metadata(&self) -> Result<ClusterMetadata, BackendError> {
        let mut cluster = self.inner.metadata().await?;
        for b in &mut cluster.brokers {
            if let Some((host, port)) = b.listeners.get(&self.access.listener) {
                (b.host, b.port) = (host.clone(), *port);
            }
        }
        cluster.topics.retain(|t| {
            self.access
                .allows(Operation::Describe, ResourceType::Topic, &t.name)
        });
        Ok(cluster)
    }

    async fn create_topic(&self, topic: NewTopic) -> Result<TopicId, BackendError> {
        self.access.create(&topic.name)?;
        self.inner.create_topic(topic).await
    }

    /// Resolved whoever asks: what is then done with the topic is checked by its name (Kafka
    /// too answers TOPIC_AUTHORIZATION_FAILED, not UNKNOWN_TOPIC_ID, for a topic named by id
    /// that the caller may not read or delete).
    async fn topic_name(&self, id: TopicId) -> Result<Option<String>, BackendError> {
        self.inner.topic_name(id).await
    }

    async fn delete_topic(&self, name: &str) -> Result<(), BackendError> {
        self.access.topic(Operation::Delete, name)?;
        self.inner.delete_topic(name).await
    }

    async fn create_partitions(
        &self,
        topic: &str,
        total: u32,
        assignment: Vec<Vec<BrokerId>>,
    ) -> Result<(), BackendError> {
        self.access.topic(Operation::Alter, topic)?;
        self.inner.create_partitions(topic, total, assignment).await
    }

    async fn alter_configs(
        &self,
        resource: ConfigResource,
        ops: Vec<ConfigOp>,
        replace: bool,
    ) -> Result<(), BackendError> {
        match &resource {
            ConfigResource::Topic(name) => self.access.topic(Operation::AlterConfigs, name)?,
            ConfigResource::Broker(_) => self.access.cluster(Operation::AlterConfigs)?,
        }
        self.inner.alter_configs(resource, ops, replace).await
    }

    async fn produce(
        &self,
        topic: &str,
        partition: u32,
        acks: Acks,
        batch: Bytes,
    ) -> Result<Appended, BackendError> {
        self.access.topic(Operation::Write, topic)?;
        self.inner.produce(topic, partition, acks, batch).await
    }

    async fn fetch(
        &self,
        topic: &str,
        partition: u32,
        offset: Offset,
        max_bytes: u32,
    ) -> Result<FetchedData, BackendError> {
        self.access.topic(Operation::Read, topic)?;
        self.inner.fetch(topic, partition, offset, max_bytes).await
    }

    async fn list_offsets(
        &self,
        topic: &str,
        partition: u32,
        spec: OffsetSpec,
    ) -> Result<Option<ListedOffset>, BackendError> {
        self.access.topic(Operation::Describe, topic)?;
        self.inner.list_offsets(topic, partition, spec).await
    }

    async fn delete_records(
        &self,
        topic: &str,
        partition: u32,
        before: Option<Offset>,
    ) -> Result<Offset, BackendError> {
        self.access.topic(Operation::Delete, topic)?;
        self.inner.delete_records(topic, partition, before).await
    }

    async fn group_coordinator(&self, group: &str) -> Result<GroupCoordinator, BackendError> {
        self.inner.group_coordinator(group).await
    }

    async fn load_group(&self, group: &str) -> Result<(), BackendError> {
        self.inner.load_group(group).await
    }

    async fn store_group(
        &self,
        group: &str,
        stored: Option<StoredGroup>,
    ) -> Result<(), BackendError> {
        self.inner.store_group(group, stored).await
    }

    /// The group's Read was checked for the whole request; the topic's is checked here.
    async fn commit_offsets(
        &self,
        group: &str,
        offsets: Vec<GroupOffset>,
    ) -> Vec<Result<(), BackendError>> {
        let checks: Vec<Result<(), BackendError>> = offsets
            .iter()
            .map(|o| self.access.topic(Operation::Read, &o.topic))
            .collect();
        let allowed = offsets
            .into_iter()
            .zip(&checks)
            .filter(|(_, check)| check.is_ok())
            .map(|(o, _)| o)
            .collect();
        let mut written = self.inner.commit_offsets(group, allowed).await.into_iter();
        checks
            .into_iter()
            .map(|check| check.and_then(|()| written.next().unwrap_or(Ok(()))))
            .collect()
    }

    async fn fetch_offset(
        &self,
        group: &str,
        topic: &str,
        partition: u32,
    ) -> Result<Option<CommittedOffset>, BackendError> {
        self.access.topic(Operation::Describe, topic)?;
        self.inner.fetch_offset(group, topic, partition).await
    }

    /// Offsets in topics the principal may not describe are left out.
    async fn group_offsets(&self, group: &str) -> Result<Vec<GroupOffset>, BackendError> {
        let mut offsets = self.inner.group_offsets(group).await?;
        offsets.retain(|o| {
            self.access
                .allows(Operation::Describe, ResourceType::Topic, &o.topic)
        });
        Ok(offsets)
    }

    /// Groups the principal may not describe are left out, unless it may describe the
    /// cluster.
    async fn offset_groups(&self) -> Result<Vec<String>, BackendError> {
        let mut groups = self.inner.offset_groups().await?;
        if !self
            .access
            .allows(Operation::Describe, ResourceType::Cluster, CLUSTER_NAME)
        {
            groups.retain(|g| {
                self.access
                    .allows(Operation::Describe, ResourceType::Group, g)
            });
        }
        Ok(groups)
    }

    /// The group's Delete was checked for the whole request; deleting some partitions'
    /// offsets (OffsetDelete) also takes Read on their topics.
    async fn delete_offsets(
        &self,
        group: &str,
        partitions: Option<Vec<(String, u32)>>,
    ) -> Result<(), BackendError> {
        if let Some(named) = &partitions {
            for (topic, _) in named {
                self.access.topic(Operation::Read, topic)?;
            }
        }
        self.inner.delete_offsets(group, partitions).await
    }

    /// An idempotent producer needs IdempotentWrite on the cluster, or Write on some topic.
    async fn allocate_producer_id(&self) -> Result<i64, BackendError> {
        let a = &self.access;
        let writes_somewhere =
            a.authorizer
                .allows_some(&a.principal, &a.host, Operation::Write, ResourceType::Topic);
        if !writes_somewhere {
            a.cluster(Operation::IdempotentWrite)?;
        }
        self.inner.allocate_producer_id().await
    }

    async fn alter_security(
        &self,
        change: crate::auth::SecurityChange,
    ) -> Result<crate::auth::SecurityAnswer, BackendError> {
        self.access.cluster(Operation::Alter)?;
        self.inner.alter_security(change).await
    }

    fn committed_changed(&self) -> impl std::future::Future<Output = ()> + Send {
        self.inner.committed_changed()
    }
}
