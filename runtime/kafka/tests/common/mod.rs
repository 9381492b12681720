//! Test harness: an in-memory `Backend` served on 127.0.0.1 (port 0).
//!
//! Each partition is a list of stamped batches whose high watermark is simply the end of the
//! log, which is all the Kafka layer can observe. Faults can be queued per produce call so that
//! tests see how clients react to NOT_ENOUGH_REPLICAS or NOT_LEADER_OR_FOLLOWER.
#![allow(dead_code)] // Each test binary uses a different part of the harness.

use bytes::Bytes;
use isr::{Acks, BrokerId, LeaderEpoch, Offset};
use isr_kafka::batch;
use isr_kafka::{
    Backend, BackendError, BrokerInfo, ClusterMetadata, CommittedOffset, FetchedData, NewTopic,
    OffsetSpec, PartitionInfo, TopicInfo,
};
use std::collections::{BTreeMap, HashMap, VecDeque};
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
}

#[derive(Default)]
struct State {
    topics: BTreeMap<String, Vec<Partition>>,
    offsets: HashMap<(String, String, u32), CommittedOffset>,
    faults: VecDeque<BackendError>,
    next_producer_id: i64,
}

pub struct MemoryBackend {
    port: u16,
    state: Mutex<State>,
    /// Wakes waiting fetches when a produce commits (here: appends).
    commits: tokio::sync::Notify,
    groups: isr_kafka::Coordinator,
}

impl MemoryBackend {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Creates a topic directly, as a test's setup.
    pub fn add_topic(&self, name: &str, partitions: u32) {
        let mut state = self.state();
        state.topics.insert(
            name.to_owned(),
            (0..partitions).map(|_| Partition::default()).collect(),
        );
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

    async fn metadata(&self) -> Result<ClusterMetadata, BackendError> {
        let state = self.state();
        Ok(ClusterMetadata {
            this_broker: BROKER,
            controller: Some(BROKER),
            brokers: vec![BrokerInfo {
                id: BROKER,
                host: "127.0.0.1".into(),
                port: self.port,
            }],
            topics: state
                .topics
                .iter()
                .map(|(name, parts)| TopicInfo {
                    name: name.clone(),
                    partitions: (0..parts.len() as u32)
                        .map(|partition| PartitionInfo {
                            partition,
                            leader: Some(BROKER),
                            leader_epoch: LeaderEpoch(0),
                            replicas: vec![BROKER],
                            isr: vec![BROKER],
                            offline: Vec::new(),
                        })
                        .collect(),
                })
                .collect(),
        })
    }

    async fn create_topic(&self, topic: NewTopic) -> Result<(), BackendError> {
        if topic.replication_factor > 1 {
            return Err(BackendError::InvalidReplicationFactor(format!(
                "{} replicas asked, 1 broker available",
                topic.replication_factor
            )));
        }
        if self.state().topics.contains_key(&topic.name) {
            return Err(BackendError::TopicAlreadyExists);
        }
        self.add_topic(&topic.name, topic.partitions);
        Ok(())
    }

    async fn produce(
        &self,
        topic: &str,
        partition: u32,
        _acks: Acks,
        batch: Bytes,
    ) -> Result<Offset, BackendError> {
        if let Some(e) = self.state().faults.pop_front() {
            return Err(e);
        }
        let count = batch::validate(&batch)
            .map_err(|e| BackendError::CorruptMessage(e.to_string()))?
            .offset_count;
        self.with_partition(topic, partition, |p| {
            let base = p.end;
            let stamped = batch::stamp(&batch, Offset(base), LeaderEpoch(0));
            p.batches.push((base, stamped, u64::from(count)));
            p.end += u64::from(count);
            Ok(Offset(base))
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

    async fn list_offsets(
        &self,
        topic: &str,
        partition: u32,
        spec: OffsetSpec,
    ) -> Result<Offset, BackendError> {
        self.with_partition(topic, partition, |p| {
            Ok(match spec {
                OffsetSpec::Earliest => Offset(0),
                OffsetSpec::Latest => Offset(p.end),
            })
        })
    }

    async fn commit_offset(
        &self,
        group: &str,
        topic: &str,
        partition: u32,
        committed: CommittedOffset,
    ) -> Result<(), BackendError> {
        self.with_partition(topic, partition, |_| Ok(()))?;
        let key = (group.to_owned(), topic.to_owned(), partition);
        self.state().offsets.insert(key, committed);
        Ok(())
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

    async fn allocate_producer_id(&self) -> Result<i64, BackendError> {
        let mut state = self.state();
        state.next_producer_id += 1;
        Ok(state.next_producer_id)
    }

    fn committed_changed(&self) -> impl std::future::Future<Output = ()> + Send {
        self.commits.notified()
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
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let backend = Arc::new(MemoryBackend {
            port: addr.port(),
            state: Mutex::default(),
            commits: tokio::sync::Notify::new(),
            groups: isr_kafka::Coordinator::default(),
        });
        let served = Arc::clone(&backend);
        let accept = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                let backend = Arc::clone(&served);
                connections.spawn(async move {
                    if let Err(e) = isr_kafka::serve_connection(stream, Bytes::new(), backend).await
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
