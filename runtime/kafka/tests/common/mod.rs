//! Test harness: an in-memory `Backend` served on 127.0.0.1 (port 0).
//!
//! Each partition is a list of stamped batches whose high watermark is simply the end of the
//! log, which is all the Kafka layer can observe. Faults can be queued per produce call so that
//! tests see how clients react to NOT_ENOUGH_REPLICAS or NOT_LEADER_OR_FOLLOWER. Topic and
//! broker configs are kept as the controller keeps them (overrides, applied with
//! `configs::apply`), and produce enforces `max.message.bytes` as a broker does. A server may
//! be secured ([`Secured`]): SASL on its listener, users and ACLs kept as the controller keeps
//! them (`SecurityState::apply`).
#![allow(dead_code)] // Each test binary uses a different part of the harness.

mod present;
#[allow(unused_imports)] // Only the tests that drive real clients use it.
pub use present::client_present;

use bytes::Bytes;
use isr::{Acks, BrokerId, LeaderEpoch, Offset};
use isr_kafka::auth::acl::{Acl, Authorizer};
use isr_kafka::auth::sasl::SaslMechanism;
use isr_kafka::auth::scram::{Mechanism, ScramCredential};
use isr_kafka::auth::throttle::LoginThrottle;
use isr_kafka::auth::{SecurityAnswer, SecurityChange, SecurityProtocol, SecurityState};
use isr_kafka::batch;
use isr_kafka::client::security::{ClientSecurity, SaslLogin};
use isr_kafka::configs::{self, BrokerConfigs, ConfigOp, ConfigResource};
use isr_kafka::{
    Appended, Backend, BackendError, BrokerInfo, BrokerSettings, ClusterMetadata, CommittedOffset,
    FetchedData, GroupCoordinator, GroupOffset, ListedOffset, NewTopic, OffsetSpec, PartitionInfo,
    StoredGroup, TopicId, TopicInfo,
};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

const BROKER: BrokerId = BrokerId(1);

#[derive(Default)]
struct Partition {
    /// (base offset, stamped batch, offsets spanned)
    batches: Vec<(u64, Bytes, u64)>,
    end: u64,
    /// The log start offset: DeleteRecords drops the batches wholly below it.
    start: u64,
}

#[derive(Default)]
struct State {
    topics: BTreeMap<String, Vec<Partition>>,
    /// Each topic's id, drawn when it is created, as the controller draws it.
    ids: BTreeMap<String, TopicId>,
    topic_configs: BTreeMap<String, BTreeMap<String, String>>,
    broker_configs: BTreeMap<String, BTreeMap<String, String>>,
    offsets: HashMap<(String, String, u32), CommittedOffset>,
    faults: VecDeque<BackendError>,
    next_producer_id: i64,
}

pub struct MemoryBackend {
    port: u16,
    settings: BrokerSettings,
    state: Mutex<State>,
    /// Wakes waiting fetches when a produce commits (here: appends).
    commits: tokio::sync::Notify,
    groups: isr_kafka::Coordinator,
    acls: bool,
    super_users: Arc<BTreeSet<String>>,
    security: Mutex<Arc<SecurityState>>,
}

impl MemoryBackend {
    /// Adds a user with SCRAM-SHA-256 and SCRAM-SHA-512 credentials for `password`.
    pub fn add_user(&self, name: &str, password: &str) {
        let upserts = Mechanism::ALL
            .into_iter()
            .map(|m| {
                let credential = ScramCredential::from_password(m, password, 4096).expect("cred");
                (name.to_owned(), m, credential)
            })
            .collect();
        self.change_security(SecurityChange::AlterScram {
            upserts,
            deletions: vec![],
        });
    }

    pub fn add_acls(&self, acls: Vec<Acl>) {
        self.change_security(SecurityChange::CreateAcls(acls));
    }

    fn change_security(&self, change: SecurityChange) -> SecurityAnswer {
        let mut current = self.security.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = (**current).clone();
        let answer = next.apply(change);
        *current = Arc::new(next);
        answer
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Creates a topic directly, as a test's setup; its new id.
    pub fn add_topic(&self, name: &str, partitions: u32) -> TopicId {
        let id = TopicId::random().expect("randomness");
        let mut state = self.state();
        state.topics.insert(
            name.to_owned(),
            (0..partitions).map(|_| Partition::default()).collect(),
        );
        state.ids.insert(name.to_owned(), id);
        id
    }

    /// The next produce calls fail with these errors, in order.
    pub fn fail_next_produces(&self, errors: impl IntoIterator<Item = BackendError>) {
        self.state().faults.extend(errors);
    }

    /// Offsets stored in a partition.
    pub fn end(&self, topic: &str, partition: usize) -> u64 {
        self.state()
            .topics
            .get(topic)
            .map_or(0, |p| p[partition].end)
    }

    fn with_partition<T>(
        &self,
        topic: &str,
        partition: u32,
        f: impl FnOnce(&mut Partition) -> Result<T, BackendError>,
    ) -> Result<T, BackendError> {
        let mut state = self.state();
        let p = state
            .topics
            .get_mut(topic)
            .and_then(|t| t.get_mut(partition as usize))
            .ok_or(BackendError::UnknownTopicOrPartition)?;
        f(p)
    }
}

impl Backend for MemoryBackend {
    fn coordinator(&self) -> &isr_kafka::Coordinator {
        &self.groups
    }

    fn settings(&self) -> &BrokerSettings {
        &self.settings
    }

    async fn metadata(&self) -> Result<ClusterMetadata, BackendError> {
        let state = self.state();
        Ok(ClusterMetadata {
            broker_configs: state.broker_configs.clone(),
            this_broker: BROKER,
            controller: Some(BROKER),
            brokers: vec![BrokerInfo {
                id: BROKER,
                host: "127.0.0.1".into(),
                port: self.port,
                listeners: BTreeMap::new(),
            }],
            topics: state
                .topics
                .iter()
                .map(|(name, parts)| TopicInfo {
                    name: name.clone(),
                    id: state.ids.get(name).copied().unwrap_or_default(),
                    partitions: (0..parts.len() as u32)
                        .map(|partition| PartitionInfo {
                            partition,
                            leader: Some(BROKER),
                            leader_epoch: LeaderEpoch(0),
                            replicas: vec![BROKER],
                            isr: vec![BROKER],
                            offline: Vec::new(),
                            min_insync_replicas: 1,
                        })
                        .collect(),
                    configs: state.topic_configs.get(name).cloned().unwrap_or_default(),
                })
                .collect(),
        })
    }

    async fn create_topic(&self, topic: NewTopic) -> Result<TopicId, BackendError> {
        if topic.replication_factor > 1 {
            return Err(BackendError::InvalidReplicationFactor(format!(
                "{} replicas asked, 1 broker available",
                topic.replication_factor
            )));
        }
        if self.state().topics.contains_key(&topic.name) {
            return Err(BackendError::TopicAlreadyExists);
        }
        let id = self.add_topic(&topic.name, topic.partitions);
        self.state().topic_configs.insert(topic.name, topic.configs);
        Ok(id)
    }

    async fn delete_topic(&self, name: &str) -> Result<(), BackendError> {
        let mut state = self.state();
        state
            .topics
            .remove(name)
            .ok_or(BackendError::UnknownTopicOrPartition)?;
        state.topic_configs.remove(name);
        state.ids.remove(name);
        state.offsets.retain(|(_, t, _), _| t != name);
        Ok(())
    }

    async fn create_partitions(
        &self,
        topic: &str,
        total: u32,
        _: Vec<Vec<BrokerId>>,
    ) -> Result<(), BackendError> {
        let mut state = self.state();
        let parts = state
            .topics
            .get_mut(topic)
            .ok_or(BackendError::UnknownTopicOrPartition)?;
        while parts.len() < total as usize {
            parts.push(Partition::default());
        }
        Ok(())
    }

    async fn alter_configs(
        &self,
        resource: ConfigResource,
        ops: Vec<ConfigOp>,
        replace: bool,
    ) -> Result<(), BackendError> {
        let mut state = self.state();
        let overrides = match resource {
            ConfigResource::Topic(name) => {
                if !state.topics.contains_key(&name) {
                    return Err(BackendError::UnknownTopicOrPartition);
                }
                state.topic_configs.entry(name).or_default()
            }
            ConfigResource::Broker(name) => state.broker_configs.entry(name).or_default(),
        };
        configs::apply(overrides, &ops, replace);
        Ok(())
    }

    async fn produce(
        &self,
        topic: &str,
        partition: u32,
        _acks: Acks,
        batch: Bytes,
    ) -> Result<Appended, BackendError> {
        if let Some(e) = self.state().faults.pop_front() {
            return Err(e);
        }
        {
            let state = self.state();
            let broker = BrokerConfigs {
                id: BROKER,
                settings: &self.settings,
                dynamic: &state.broker_configs,
            };
            let overrides = state.topic_configs.get(topic).cloned().unwrap_or_default();
            configs::check_batch_size(batch.len(), topic, &overrides, &broker)?;
        }
        let count = batch::validate(&batch)
            .map_err(|e| BackendError::CorruptMessage(e.to_string()))?
            .offset_count;
        self.with_partition(topic, partition, |p| {
            let base = p.end;
            let stamped = batch::stamp(&batch, Offset(base), LeaderEpoch(0));
            p.batches.push((base, stamped, u64::from(count)));
            p.end += u64::from(count);
            Ok(Appended {
                base_offset: Offset(base),
                log_append_time: None,
            })
        })
        .inspect(|_| self.commits.notify_waiters())
    }

    async fn fetch(
        &self,
        topic: &str,
        partition: u32,
        offset: Offset,
        max_bytes: u32,
    ) -> Result<FetchedData, BackendError> {
        self.with_partition(topic, partition, |p| {
            if offset.0 > p.end {
                return Err(BackendError::OffsetOutOfRange);
            }
            let mut batches = Vec::new();
            let mut size = 0usize;
            for (base, b, count) in &p.batches {
                if base + count <= offset.0 {
                    continue;
                }
                if !batches.is_empty() && size + b.len() > max_bytes as usize {
                    break;
                }
                size += b.len();
                batches.push(b.clone());
            }
            Ok(FetchedData {
                high_watermark: Offset(p.end),
                log_start_offset: Offset(0),
                batches,
            })
        })
    }

    async fn delete_records(
        &self,
        topic: &str,
        partition: u32,
        before: Option<Offset>,
    ) -> Result<Offset, BackendError> {
        self.with_partition(topic, partition, |p| {
            let before = before.map_or(p.end, |o| o.0);
            if before > p.end {
                return Err(BackendError::OffsetOutOfRange);
            }
            p.start = p.start.max(before);
            let start = p.start;
            p.batches.retain(|(base, _, width)| base + width > start);
            Ok(Offset(p.start))
        })
    }

    async fn list_offsets(
        &self,
        topic: &str,
        partition: u32,
        spec: OffsetSpec,
    ) -> Result<Option<ListedOffset>, BackendError> {
        self.with_partition(topic, partition, |p| {
            let at = |offset: u64, timestamp: i64| ListedOffset {
                offset: Offset(offset),
                timestamp,
                leader_epoch: Some(LeaderEpoch(0)),
            };
            let found = |(o, t): (i64, i64)| at(o as u64, t);
            Ok(match spec {
                OffsetSpec::Earliest => Some(at(p.start, -1)),
                OffsetSpec::Latest => Some(at(p.end, -1)),
                OffsetSpec::Timestamp(target) => p
                    .batches
                    .iter()
                    .find_map(|(_, b, _)| batch::first_at_or_after(b, target))
                    .map(found),
                OffsetSpec::MaxTimestamp => p
                    .batches
                    .iter()
                    .max_by_key(|(base, b, _)| (batch::max_timestamp(b), std::cmp::Reverse(*base)))
                    .and_then(|(_, b, _)| batch::latest_record(b))
                    .map(found),
            })
        })
    }

    /// One broker: it coordinates every group.
    async fn group_coordinator(&self, _group: &str) -> Result<GroupCoordinator, BackendError> {
        Ok(GroupCoordinator {
            broker: BROKER,
            here: true,
        })
    }

    /// One broker, whose coordinator lives as long as the backend: nothing to load.
    async fn load_group(&self, _group: &str) -> Result<(), BackendError> {
        Ok(())
    }

    /// Nothing to store: no other coordinator ever takes over.
    async fn store_group(
        &self,
        _group: &str,
        _stored: Option<StoredGroup>,
    ) -> Result<(), BackendError> {
        Ok(())
    }

    async fn commit_offsets(
        &self,
        group: &str,
        offsets: Vec<GroupOffset>,
    ) -> Vec<Result<(), BackendError>> {
        offsets
            .into_iter()
            .map(|o| {
                self.with_partition(&o.topic, o.partition, |_| Ok(()))?;
                let key = (group.to_owned(), o.topic, o.partition);
                self.state().offsets.insert(key, o.committed);
                Ok(())
            })
            .collect()
    }

    async fn fetch_offset(
        &self,
        group: &str,
        topic: &str,
        partition: u32,
    ) -> Result<Option<CommittedOffset>, BackendError> {
        let key = (group.to_owned(), topic.to_owned(), partition);
        Ok(self.state().offsets.get(&key).cloned())
    }

    async fn group_offsets(&self, group: &str) -> Result<Vec<GroupOffset>, BackendError> {
        let mut offsets: Vec<GroupOffset> = self
            .state()
            .offsets
            .iter()
            .filter(|((g, _, _), _)| g == group)
            .map(|((_, topic, partition), committed)| GroupOffset {
                topic: topic.clone(),
                partition: *partition,
                committed: committed.clone(),
            })
            .collect();
        offsets.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        Ok(offsets)
    }

    async fn offset_groups(&self) -> Result<Vec<String>, BackendError> {
        let groups: std::collections::BTreeSet<String> = self
            .state()
            .offsets
            .keys()
            .map(|(g, _, _)| g.clone())
            .collect();
        Ok(groups.into_iter().collect())
    }

    async fn delete_offsets(
        &self,
        group: &str,
        partitions: Option<Vec<(String, u32)>>,
    ) -> Result<(), BackendError> {
        self.state().offsets.retain(|(g, t, p), _| {
            g != group
                || partitions
                    .as_ref()
                    .is_some_and(|only| !only.iter().any(|(ot, op)| ot == t && op == p))
        });
        Ok(())
    }

    async fn allocate_producer_id(&self) -> Result<i64, BackendError> {
        let mut state = self.state();
        state.next_producer_id += 1;
        Ok(state.next_producer_id)
    }

    fn authorizer(&self) -> Authorizer {
        Authorizer {
            enabled: self.acls,
            super_users: self.super_users.clone(),
            state: self
                .security
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }

    async fn alter_security(&self, change: SecurityChange) -> Result<SecurityAnswer, BackendError> {
        Ok(self.change_security(change))
    }

    fn committed_changed(&self) -> impl std::future::Future<Output = ()> + Send {
        self.commits.notified()
    }
}

/// How a test server's listener is secured.
pub struct Secured {
    pub protocol: SecurityProtocol,
    /// Whether ACLs are enabled (default deny).
    pub acls: bool,
    pub super_users: Vec<String>,
}

/// A login as `user` over SASL_PLAINTEXT with SCRAM-SHA-512.
pub fn login(user: &str, password: &str) -> ClientSecurity {
    ClientSecurity {
        protocol: SecurityProtocol::SaslPlaintext,
        tls: None,
        sasl: Some(SaslLogin {
            mechanism: SaslMechanism::Scram(Mechanism::Sha512),
            user: user.into(),
            password: password.into(),
        }),
    }
}

/// A Kafka server over a `MemoryBackend`; dropping it stops the accept loop and every
/// connection it spawned.
pub struct TestServer {
    pub addr: SocketAddr,
    pub backend: Arc<MemoryBackend>,
    accept: JoinHandle<()>,
}

impl TestServer {
    pub async fn start() -> TestServer {
        TestServer::with_settings(BrokerSettings::default()).await
    }

    /// A server whose broker has these static settings (for instance auto-creation off).
    pub async fn with_settings(settings: BrokerSettings) -> TestServer {
        TestServer::serve(settings, None).await
    }

    /// A server whose listener and authorizer are secured as `secured` says.
    pub async fn secured(secured: Secured) -> TestServer {
        TestServer::serve(BrokerSettings::default(), Some(secured)).await
    }

    async fn serve(settings: BrokerSettings, secured: Option<Secured>) -> TestServer {
        let protocol = secured
            .as_ref()
            .map_or(SecurityProtocol::Plaintext, |s| s.protocol);
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let backend = Arc::new(MemoryBackend {
            port: addr.port(),
            settings,
            state: Mutex::default(),
            commits: tokio::sync::Notify::new(),
            groups: isr_kafka::Coordinator::default(),
            acls: secured.as_ref().is_some_and(|s| s.acls),
            super_users: Arc::new(
                secured
                    .map(|s| s.super_users.into_iter().collect())
                    .unwrap_or_default(),
            ),
            security: Mutex::default(),
        });
        let served = Arc::clone(&backend);
        let logins = Arc::new(LoginThrottle::default());
        let accept = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((stream, peer)) = listener.accept().await {
                let backend = Arc::clone(&served);
                let info = isr_kafka::ConnectionInfo {
                    protocol,
                    peer,
                    tls_principal: None,
                    logins: logins.clone(),
                };
                connections.spawn(async move {
                    if let Err(e) =
                        isr_kafka::serve_connection(stream, Bytes::new(), backend, info).await
                    {
                        eprintln!("test server: connection closed: {e}");
                    }
                });
            }
        });
        TestServer {
            addr,
            backend,
            accept,
        }
    }

    pub fn bootstrap(&self) -> String {
        self.addr.to_string()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        // Aborting the accept task drops its JoinSet, which aborts every connection task.
        self.accept.abort();
    }
}
