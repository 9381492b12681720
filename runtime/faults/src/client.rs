//! The workload's Kafka client: isr-kafka's connections and request builders, with routing made
//! for faults. Every request has a short deadline (a partitioned broker answers nothing, and
//! waiting out the client's 45 s would hide the fault), a connection that failed is never
//! reused, and metadata is asked of every broker and merged by leader epoch, so a zombie
//! leader's stale answer loses to the current leader's (as Kafka clients do since KIP-320).

use isr_kafka::client::{coordinator_address, find_coordinator_request, ClientError, Connection};
use kafka_protocol::messages::MetadataRequest;
use kafka_protocol::protocol::Request;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;
use tokio::task::JoinSet;

/// How long opening a connection (TCP and ApiVersions) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a metadata answer may take.
const METADATA_TIMEOUT: Duration = Duration::from_secs(1);
/// How long a refresh waits for the other brokers once one has answered: enough for every
/// reachable broker (and so the current leader) to answer, without waiting out a partitioned
/// one's full timeout on every refresh.
const METADATA_GRACE: Duration = Duration::from_millis(200);

pub struct Router {
    bootstrap: Vec<String>,
    topic: String,
    /// Broker id → address, as the brokers advertise them (the proxies).
    brokers: BTreeMap<i32, String>,
    /// Partition → (leader, leader epoch), the highest epoch any broker reported.
    leaders: BTreeMap<u32, (i32, i32)>,
    connections: HashMap<String, Connection>,
}

/// A request that timed out, as a client error.
fn timed_out(addr: &str) -> ClientError {
    ClientError::Io {
        addr: addr.to_string(),
        source: std::io::ErrorKind::TimedOut.into(),
    }
}

impl Router {
    pub fn new(bootstrap: &[String], topic: &str) -> Router {
        Router {
            bootstrap: bootstrap.to_vec(),
            topic: topic.to_string(),
            brokers: BTreeMap::new(),
            leaders: BTreeMap::new(),
            connections: HashMap::new(),
        }
    }

    /// Sends `request` to `addr`, opening a connection if needed, within `timeout`. A
    /// connection that failed or timed out is closed (an answer may still be on its way).
    pub async fn call<R: Request>(
        &mut self,
        addr: &str,
        request: &R,
        timeout: Duration,
    ) -> Result<R::Response, ClientError> {
        if !self.connections.contains_key(addr) {
            let conn = tokio::time::timeout(CONNECT_TIMEOUT, Connection::open(addr))
                .await
                .map_err(|_| timed_out(addr))??;
            self.connections.insert(addr.to_string(), conn);
        }
        let conn = self
            .connections
            .get_mut(addr)
            .ok_or_else(|| ClientError::NoBroker(addr.to_string()))?;
        let answer = tokio::time::timeout(timeout, conn.send(request))
            .await
            .unwrap_or_else(|_| Err(timed_out(addr)));
        if matches!(
            answer,
            Err(ClientError::Io { .. } | ClientError::Protocol { .. })
        ) {
            self.connections.remove(addr);
        }
        answer
    }

    /// Asks every broker it knows of (and the bootstrap ones) for metadata, all at once (a
    /// paused broker must not hold the others' answers up), and keeps, for each partition,
    /// the leader of the highest epoch reported. Once one has answered, the others get
    /// [`METADATA_GRACE`] more: a partitioned broker would otherwise cost its whole timeout.
    pub async fn refresh(&mut self) {
        let mut ask: Vec<String> = self.brokers.values().cloned().collect();
        for b in &self.bootstrap {
            if !ask.contains(b) {
                ask.push(b.clone());
            }
        }
        let mut asking = JoinSet::new();
        for addr in ask {
            let conn = self.connections.remove(&addr);
            asking.spawn(async move {
                let ask = async {
                    let mut conn = match conn {
                        Some(conn) => conn,
                        None => Connection::open(&addr).await.ok()?,
                    };
                    let request = MetadataRequest::default().with_topics(None);
                    let answer = conn.send(&request).await.ok()?;
                    Some((conn, answer))
                };
                let answered = tokio::time::timeout(METADATA_TIMEOUT, ask).await;
                (addr, answered.ok().flatten())
            });
        }
        let mut leaders: BTreeMap<u32, (i32, i32)> = BTreeMap::new();
        let mut until: Option<tokio::time::Instant> = None;
        loop {
            let next = match until {
                None => asking.join_next().await,
                Some(t) => match tokio::time::timeout_at(t, asking.join_next()).await {
                    Ok(next) => next,
                    // The rest are slow or cut off: dropping the set abandons them.
                    Err(_) => break,
                },
            };
            let Some(Ok((addr, answered))) = next else {
                break;
            };
            let Some((conn, answer)) = answered else {
                continue;
            };
            until.get_or_insert_with(|| tokio::time::Instant::now() + METADATA_GRACE);
            self.connections.insert(addr, conn);
            for b in &answer.brokers {
                let address = format!("{}:{}", b.host.as_str(), b.port);
                self.brokers.insert(b.node_id.0, address);
            }
            let topic = answer
                .topics
                .iter()
                .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == self.topic));
            for p in topic.into_iter().flat_map(|t| &t.partitions) {
                let Ok(index) = u32::try_from(p.partition_index) else {
                    continue;
                };
                if p.error_code != 0 || p.leader_id.0 < 0 {
                    continue;
                }
                let known = leaders
                    .entry(index)
                    .or_insert((p.leader_id.0, p.leader_epoch));
                if p.leader_epoch > known.1 {
                    *known = (p.leader_id.0, p.leader_epoch);
                }
            }
        }
        self.leaders = leaders;
    }

    /// The address of `partition`'s leader, as last refreshed.
    pub fn leader(&self, partition: u32) -> Option<String> {
        let (leader, _) = self.leaders.get(&partition)?;
        self.brokers.get(leader).cloned()
    }

    /// Forgets what it knew of `partition`'s leader (after an error from it).
    pub fn forget(&mut self, partition: u32) {
        self.leaders.remove(&partition);
    }

    /// Every broker address known, then the bootstrap ones.
    pub fn any_broker(&self, n: usize) -> String {
        let mut all: Vec<&String> = self.brokers.values().collect();
        all.extend(self.bootstrap.iter());
        all[n % all.len()].clone()
    }

    /// The coordinator of `group`, asked of the `n`th broker.
    pub async fn coordinator(&mut self, group: &str, n: usize) -> Result<String, ClientError> {
        let addr = self.any_broker(n);
        if !self.connections.contains_key(&addr) {
            // Opens the connection, whose negotiated version the request's form depends on.
            self.call(&addr, &MetadataRequest::default(), METADATA_TIMEOUT)
                .await?;
        }
        let conn = self
            .connections
            .get(&addr)
            .ok_or_else(|| ClientError::NoBroker(addr.clone()))?;
        let request = find_coordinator_request(conn, group)?;
        let answer = self.call(&addr, &request, METADATA_TIMEOUT).await?;
        coordinator_address(answer)
    }
}
