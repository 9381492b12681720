//! The client's view of a cluster: brokers, partition leaders, connections, and retries that
//! follow leader changes.

use super::connection::Connection;
use super::error::ClientError;
use super::security::{self, ClientSecurity};
use crate::topic_id::TopicId;
use kafka_protocol::messages::{
    FindCoordinatorRequest, FindCoordinatorResponse, MetadataRequest, MetadataResponse,
};
use kafka_protocol::protocol::Request;
use kafka_protocol::protocol::StrBytes;
use std::collections::HashMap;
use std::time::Duration;
use tokio::time::Instant;

/// How long a request keeps being retried while leadership moves (an election, a restart).
const RETRY_FOR: Duration = Duration::from_secs(20);
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_millis(1000);

/// Where a request must go.
#[derive(Clone, Copy, Debug)]
pub enum Route<'a> {
    /// The leader of a topic's partition.
    Leader(&'a str, u32),
    /// The controller if known, else any broker.
    Admin,
    /// A consumer group's coordinator.
    Coordinator(&'a str),
    /// One broker, by id.
    Broker(i32),
}

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
    /// Its id (Metadata v10+); zero from a broker that answers none, or for a topic created
    /// before isr kept ids.
    pub id: TopicId,
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
    security: ClientSecurity,
}

impl Cluster {
    /// Reads the cluster's metadata from the first reachable of the comma-separated
    /// `bootstrap` addresses, connecting as this process is configured to.
    pub async fn connect(bootstrap: &str) -> Result<Cluster, ClientError> {
        Cluster::connect_with(bootstrap, security::current()).await
    }

    /// [`Cluster::connect`] with explicit connection security.
    pub async fn connect_with(
        bootstrap: &str,
        security: ClientSecurity,
    ) -> Result<Cluster, ClientError> {
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
            security,
        };
        cluster.refresh().await?;
        Ok(cluster)
    }

    /// Re-reads metadata, trying known brokers first and then the bootstrap addresses.
    pub async fn refresh(&mut self) -> Result<(), ClientError> {
        let mut candidates: Vec<String> = self.brokers.values().cloned().collect();
        candidates.sort();
        for addr in &self.bootstrap {
            if !candidates.contains(addr) {
                candidates.push(addr.clone());
            }
        }
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
                Some(TopicView {
                    name,
                    id: t.topic_id.into(),
                    partitions,
                })
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

    /// A topic by name, or an error that names the topics there are.
    pub fn existing_topic(&self, name: &str) -> Result<&TopicView, ClientError> {
        self.topic(name).ok_or_else(|| {
            let names: Vec<&str> = self.topics.iter().map(|t| t.name.as_str()).collect();
            ClientError::Usage(format!(
                "no topic {name}; topics: {}",
                if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                }
            ))
        })
    }

    /// The controller's id, as the last metadata answer named it.
    pub fn controller(&self) -> Option<i32> {
        self.controller
    }

    /// The brokers the last metadata answer named (live ones), by id, with their addresses.
    pub fn brokers(&self) -> std::collections::BTreeMap<i32, String> {
        self.brokers
            .iter()
            .map(|(&id, a)| (id, a.clone()))
            .collect()
    }

    /// The ids of the brokers, in order.
    pub fn broker_ids(&self) -> Vec<i32> {
        let mut ids: Vec<i32> = self.brokers.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    /// The version of `R` spoken with the broker `route` leads to (every isr broker speaks the
    /// same), for requests whose fields depend on it.
    pub async fn version_of<R: Request>(&mut self, route: Route<'_>) -> Result<i16, ClientError> {
        let addr = self.address(&route).await?;
        self.connection(&addr).await?.version_of::<R>()
    }

    /// A connection to `addr`, opened if needed.
    async fn connection(&mut self, addr: &str) -> Result<&mut Connection, ClientError> {
        if !self.connections.contains_key(addr) {
            let conn = Connection::open_with(addr, &self.security).await?;
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
        let request = find_coordinator_request(conn, group)?;
        let answer = conn.send(&request).await?;
        coordinator_address(answer)
    }

    /// Sends `request` where `route` says and hands the answer to `answer`, following
    /// leader changes: when sending fails on a lost connection, or `answer` returns
    /// NOT_LEADER_OR_FOLLOWER, a missing leader and the like, it refreshes metadata, backs off
    /// and retries, for up to 20 seconds. Other errors return at once.
    pub async fn send<R, T>(
        &mut self,
        route: Route<'_>,
        request: &R,
        mut answer: impl FnMut(&str, R::Response) -> Result<T, ClientError>,
    ) -> Result<T, ClientError>
    where
        R: Request,
    {
        self.retrying(route, request, true, |addr, response| match response {
            Some(r) => answer(addr, r),
            None => Err(ClientError::Protocol {
                addr: addr.to_owned(),
                reason: "no answer".into(),
            }),
        })
        .await
    }

    /// Sends a request that gets no answer (produce with acks=0), retrying like `send`
    /// while the route is stale.
    pub async fn send_unanswered<R: Request>(
        &mut self,
        route: Route<'_>,
        request: &R,
    ) -> Result<(), ClientError> {
        self.retrying(route, request, false, |_, _| Ok(())).await
    }

    async fn retrying<R: Request, T>(
        &mut self,
        route: Route<'_>,
        request: &R,
        answered: bool,
        mut answer: impl FnMut(&str, Option<R::Response>) -> Result<T, ClientError>,
    ) -> Result<T, ClientError> {
        let deadline = Instant::now() + RETRY_FOR;
        let mut backoff = FIRST_BACKOFF;
        loop {
            let result = self
                .attempt(&route, request, answered)
                .await
                .and_then(|(addr, response)| answer(&addr, response));
            match result {
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

    async fn address(&mut self, route: &Route<'_>) -> Result<String, ClientError> {
        match *route {
            Route::Leader(topic, partition) => self.leader_address(topic, partition),
            Route::Admin => self.admin_address(),
            Route::Coordinator(group) => self.coordinator_address(group).await,
            Route::Broker(id) => self.address_of(id),
        }
    }

    async fn attempt<R: Request>(
        &mut self,
        route: &Route<'_>,
        request: &R,
        answered: bool,
    ) -> Result<(String, Option<R::Response>), ClientError> {
        let addr = self.address(route).await?;
        let conn = self.connection(&addr).await?;
        let sent = if answered {
            conn.send(request).await.map(Some)
        } else {
            conn.send_only(request).await.map(|_| None)
        };
        if matches!(
            sent,
            Err(ClientError::Io { .. } | ClientError::Protocol { .. })
        ) {
            // The stream may be mid-response: never reuse it.
            self.connections.remove(&addr);
        }
        sent.map(|response| (addr, response))
    }
}

/// A FindCoordinator for `group`, in the form `conn`'s negotiated version takes.
pub fn find_coordinator_request(
    conn: &Connection,
    group: &str,
) -> Result<FindCoordinatorRequest, ClientError> {
    let key = StrBytes::from_string(group.to_owned());
    // Version 4 batches keys in `coordinator_keys`; earlier versions take one `key`.
    Ok(if conn.version_of::<FindCoordinatorRequest>()? >= 4 {
        FindCoordinatorRequest::default().with_coordinator_keys(vec![key])
    } else {
        FindCoordinatorRequest::default().with_key(key)
    })
}

/// The coordinator's "host:port" a FindCoordinator answer names, or its refusal.
pub fn coordinator_address(answer: FindCoordinatorResponse) -> Result<String, ClientError> {
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
