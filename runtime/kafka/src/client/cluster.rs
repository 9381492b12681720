//! The client's view of a cluster: brokers, partition leaders, connections, and retries that
//! follow leader changes.

use super::connection::Connection;
use super::error::ClientError;
use kafka_protocol::messages::{FindCoordinatorRequest, MetadataRequest, MetadataResponse};
use kafka_protocol::protocol::StrBytes;
use std::collections::HashMap;
use std::time::Duration;
use tokio::time::Instant;

/// How long a request keeps being retried while leadership moves (an election, a restart).
const RETRY_FOR: Duration = Duration::from_secs(20);
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_millis(1000);

/// One partition as the last metadata answer described it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionView {
    pub partition: u32,
    /// Kafka error code for the partition (LEADER_NOT_AVAILABLE while it has no leader).
    pub error_code: i16,
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicView {
    pub name: String,
    pub partitions: Vec<PartitionView>,
}

pub struct Cluster {
    bootstrap: Vec<String>,
    /// Broker id → "host:port".
    brokers: HashMap<i32, String>,
    controller: Option<i32>,
    topics: Vec<TopicView>,
    /// Open connections by address.
    connections: HashMap<String, Connection>,
}

impl Cluster {
    /// Reads the cluster's metadata from the first reachable of the comma-separated
    /// `bootstrap` addresses.
    pub async fn connect(bootstrap: &str) -> Result<Cluster, ClientError> {
        let bootstrap: Vec<String> = bootstrap
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        if bootstrap.is_empty() {
            return Err(ClientError::Usage(
                "--bootstrap needs at least one HOST:PORT".into(),
            ));
        }
        let mut cluster = Cluster {
            bootstrap,
            brokers: HashMap::new(),
            controller: None,
            topics: Vec::new(),
            connections: HashMap::new(),
        };
        cluster.refresh().await?;
        Ok(cluster)
    }

    /// Re-reads metadata, trying known brokers first and then the bootstrap addresses.
    pub async fn refresh(&mut self) -> Result<(), ClientError> {
        let mut candidates: Vec<String> = self.brokers.values().cloned().collect();
        candidates.sort();
        candidates.extend(self.bootstrap.iter().cloned());
        candidates.dedup();
        let mut last = None;
        for addr in &candidates {
            let request = MetadataRequest::default().with_topics(None);
            match self.connection(addr).await {
                Ok(conn) => match conn.send(&request).await {
                    Ok(answer) => {
                        self.absorb(answer);
                        return Ok(());
                    }
                    Err(e) => {
                        self.connections.remove(addr);
                        last = Some(e);
                    }
                },
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| ClientError::NoBroker(candidates.join(","))))
    }

    fn absorb(&mut self, answer: MetadataResponse) {
        self.brokers = answer
            .brokers
            .iter()
            .map(|b| (b.node_id.0, format!("{}:{}", b.host.as_str(), b.port)))
            .collect();
        self.controller = Some(answer.controller_id.0).filter(|&id| id >= 0);
        self.topics = answer
            .topics
            .iter()
            .filter(|t| t.error_code == 0)
            .filter_map(|t| {
                let name = t.name.as_ref()?.0.as_str().to_owned();
                let mut partitions: Vec<PartitionView> = t
                    .partitions
                    .iter()
                    .filter_map(|p| {
                        Some(PartitionView {
                            partition: u32::try_from(p.partition_index).ok()?,
                            error_code: p.error_code,
                            leader: p.leader_id.0,
                            leader_epoch: p.leader_epoch,
                            replicas: p.replica_nodes.iter().map(|b| b.0).collect(),
                            isr: p.isr_nodes.iter().map(|b| b.0).collect(),
                        })
                    })
                    .collect();
                partitions.sort_by_key(|p| p.partition);
                Some(TopicView { name, partitions })
            })
            .collect();
        self.topics.sort_by(|a, b| a.name.cmp(&b.name));
    }

    /// Topics as last read, by name.
    pub fn topics(&self) -> &[TopicView] {
        &self.topics
    }

    pub fn topic(&self, name: &str) -> Option<&TopicView> {
        self.topics.iter().find(|t| t.name == name)
    }

    /// A connection to `addr`, opened if needed.
    async fn connection(&mut self, addr: &str) -> Result<&mut Connection, ClientError> {
        if !self.connections.contains_key(addr) {
            let conn = Connection::open(addr).await?;
            self.connections.insert(addr.to_owned(), conn);
        }
        self.connections
            .get_mut(addr)
            .ok_or_else(|| ClientError::NoBroker(addr.to_owned()))
    }

    fn address_of(&self, broker: i32) -> Result<String, ClientError> {
        self.brokers
            .get(&broker)
            .cloned()
            .ok_or(ClientError::Kafka {
                code: kafka_protocol::error::ResponseError::LeaderNotAvailable.code(),
                message: format!("broker {broker} is not in the metadata"),
            })
    }

    /// Where admin requests go: the controller if known, else any broker.
    fn admin_address(&self) -> Result<String, ClientError> {
        match self.controller {
            Some(id) => self.address_of(id),
            None => self
                .brokers
                .values()
                .next()
                .or(self.bootstrap.first())
                .cloned()
                .ok_or_else(|| ClientError::NoBroker(self.bootstrap.join(","))),
        }
    }

    fn leader_address(&self, topic: &str, partition: u32) -> Result<String, ClientError> {
        let t = self.topic(topic).ok_or(ClientError::Kafka {
            code: kafka_protocol::error::ResponseError::UnknownTopicOrPartition.code(),
            message: format!("topic {topic} is not in the metadata"),
        })?;
        let p = t
            .partitions
            .iter()
            .find(|p| p.partition == partition)
            .ok_or_else(|| ClientError::NoSuchPartition {
                topic: topic.to_owned(),
                partition,
            })?;
        if let Some(e) = ClientError::from_code(p.error_code, None) {
            return Err(e);
        }
        self.address_of(p.leader)
    }

    async fn coordinator_address(&mut self, group: &str) -> Result<String, ClientError> {
        let addr = self.admin_address()?;
        let conn = self.connection(&addr).await?;
        let key = StrBytes::from_string(group.to_owned());
        // Version 4 batches keys in `coordinator_keys`; earlier versions take one `key`.
        let request = if conn.version_of::<FindCoordinatorRequest>()? >= 4 {
            FindCoordinatorRequest::default().with_coordinator_keys(vec![key])
        } else {
            FindCoordinatorRequest::default().with_key(key)
        };
        let answer = conn.send(&request).await?;
        let (code, message, host, port) = match answer.coordinators.first() {
            Some(c) => (
                c.error_code,
                c.error_message.clone(),
                c.host.clone(),
                c.port,
            ),
            None => (
                answer.error_code,
                answer.error_message,
                answer.host,
                answer.port,
            ),
        };
        if let Some(e) = ClientError::from_code(code, message.as_ref().map(|m| m.as_str())) {
            return Err(e);
        }
        Ok(format!("{}:{port}", host.as_str()))
    }

    /// Runs `op` on the connection to the partition's leader, following leader changes:
    /// on NOT_LEADER_OR_FOLLOWER, a missing leader or a lost connection it refreshes
    /// metadata, backs off and retries, for up to 20 seconds.
    pub async fn on_leader<T>(
        &mut self,
        topic: &str,
        partition: u32,
        mut op: impl AsyncFnMut(&mut Connection) -> Result<T, ClientError>,
    ) -> Result<T, ClientError> {
        self.retrying(async |c: &mut Cluster| {
            let addr = c.leader_address(topic, partition)?;
            c.run_on(&addr, &mut op).await
        })
        .await
    }

    /// Runs `op` on the controller (or any broker), retrying like `on_leader`.
    pub async fn on_admin<T>(
        &mut self,
        mut op: impl AsyncFnMut(&mut Connection) -> Result<T, ClientError>,
    ) -> Result<T, ClientError> {
        self.retrying(async |c: &mut Cluster| {
            let addr = c.admin_address()?;
            c.run_on(&addr, &mut op).await
        })
        .await
    }

    /// Runs `op` on the group's coordinator, retrying like `on_leader`.
    pub async fn on_coordinator<T>(
        &mut self,
        group: &str,
        mut op: impl AsyncFnMut(&mut Connection) -> Result<T, ClientError>,
    ) -> Result<T, ClientError> {
        self.retrying(async |c: &mut Cluster| {
            let addr = c.coordinator_address(group).await?;
            c.run_on(&addr, &mut op).await
        })
        .await
    }

    async fn run_on<T>(
        &mut self,
        addr: &str,
        op: &mut impl AsyncFnMut(&mut Connection) -> Result<T, ClientError>,
    ) -> Result<T, ClientError> {
        let result = match self.connection(addr).await {
            Ok(conn) => op(conn).await,
            Err(e) => Err(e),
        };
        if matches!(
            result,
            Err(ClientError::Io { .. } | ClientError::Protocol { .. })
        ) {
            // The stream may be mid-response: never reuse it.
            self.connections.remove(addr);
        }
        result
    }

    async fn retrying<T>(
        &mut self,
        mut attempt: impl AsyncFnMut(&mut Cluster) -> Result<T, ClientError>,
    ) -> Result<T, ClientError> {
        let deadline = Instant::now() + RETRY_FOR;
        let mut backoff = FIRST_BACKOFF;
        loop {
            match attempt(self).await {
                Err(e) if e.is_stale_route() && Instant::now() + backoff < deadline => {
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    // A failed refresh is retried with the next attempt.
                    let _ = self.refresh().await;
                }
                result => return result,
            }
        }
    }
}
