//! The etcd store: several controller processes, one active, elected through etcd v3.
//!
//! Keys, under the cluster's prefix:
//! - `format`: the metadata format of the cluster (a newer one is refused);
//! - `controllers/ID`: the address of the running controller with that id, under its lease, so
//!   two processes cannot run with the same id;
//! - `election`: etcd's election (a campaign under the controller's lease); the leader key's
//!   value is `ID ADDRESS`;
//! - `epoch`: the controller epoch, bumped by each new leader in a transaction that checks it
//!   still leads;
//! - `meta/...`: the controller's metadata, one key per entity ([`entity_key`]): a partition,
//!   a broker, a topic, a topic's id, a config, an address, the users and ACLs. Each
//!   value is the entity's latest [`Record`] in postcard; a removed entity has no key.
//!
//! A change writes only the keys of what it changed, so its cost is that of the change and no
//! cluster is too large for etcd's request limit. A change of up to [`TXN_OPS`] entities (every
//! change but a broker's fencing, registration or a topic of many partitions) is one
//! transaction; a larger one is written in pieces, each a consistent state on its own, brokers'
//! records last ([`Record::goes_last`]). Its messages leave only once every piece is written.
//!
//! Every write is a transaction that first compares the creation revision of this
//! controller's leader key: once its lease is gone (it expired, or the process was paused past
//! it), that key is deleted and every write fails — KAFKA-6082's fencing, by etcd. A task keeps
//! the lease alive and says the role is lost as soon as the lease may have expired, so an active
//! controller stops acting at once, before any write of its is refused.

use super::{Candidate, StoreError, Won};
use crate::controller::metadata::Metadata;
use crate::controller::records::Record;
use crate::wire::admin::ControllerInfo;
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, GetOptions, LeaderKey, PutOptions, Txn, TxnOp,
    TxnOpResponse,
};
use isr::ControllerEpoch;
use isr::MetadataRecord;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tracing::{info, warn};

/// How long one request to etcd may take before the store is declared unavailable. Without a
/// quorum etcd answers nothing: metadata changes must then fail with a clear error, not hang.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);

/// The layout of the cluster's keys this isr writes and reads: 5 is one key per entity of the
/// metadata (4 and before kept the whole metadata in one key, which is no longer read); 6 keeps
/// no consumer group offsets (they are records in `__consumer_offsets`).
pub const LAYOUT: u16 = 6;

/// The most entities one transaction writes: etcd refuses more than 128 operations in one
/// transaction by default (`--max-txn-ops`).
pub const TXN_OPS: usize = 100;

/// The most bytes of values one transaction writes, well under etcd's default request limit
/// (1.5 MiB, `--max-request-bytes`).
const TXN_BYTES: usize = 512 * 1024;

/// How many keys one read of the metadata asks for.
const PAGE: i64 = 1000;

/// A connection to the cluster's keys in etcd: what a standby needs to find the active
/// controller, and what the store is built on. Cheap to clone.
#[derive(Clone)]
pub struct Keys {
    client: Client,
    /// The endpoints as given, for error messages.
    endpoints: String,
    prefix: String,
}

pub struct EtcdStore {
    keys: Keys,
    client: Client,
    me: Candidate,
    lease: i64,
    /// Becomes true once the lease is gone or may have expired.
    lost: watch::Receiver<bool>,
    /// The leader key of the campaign this controller won, while it holds the role.
    leader: Option<LeaderKey>,
    epoch: ControllerEpoch,
}

impl EtcdStore {
    pub async fn open(
        endpoints: &[String],
        prefix: &str,
        me: Candidate,
    ) -> Result<EtcdStore, StoreError> {
        let shown = endpoints.join(",");
        let unreachable = |reason: String| StoreError::Unreachable {
            endpoints: shown.clone(),
            reason,
        };
        // Refused at once, not after a timeout, by a member that has lost its quorum: a
        // controller that cannot commit must say so promptly and keep answering heartbeats.
        let options = ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(2))
            .with_timeout(REQUEST_TIMEOUT)
            .with_require_leader(true);
        let client =
            match tokio::time::timeout(REQUEST_TIMEOUT, Client::connect(endpoints, Some(options)))
                .await
            {
                Ok(Ok(client)) => client,
                Ok(Err(e)) => return Err(unreachable(e.to_string())),
                Err(_) => return Err(unreachable(format!("no answer within {REQUEST_TIMEOUT:?}"))),
            };
        let (_, lost) = watch::channel(true);
        let mut store = EtcdStore {
            keys: Keys {
                client: client.clone(),
                endpoints: shown.clone(),
                prefix: prefix.to_string(),
            },
            client,
            me,
            lease: 0,
            lost,
            leader: None,
            epoch: ControllerEpoch(0),
        };
        store.check_format().await.map_err(|e| match e {
            StoreError::Unavailable(reason) => unreachable(reason),
            other => other,
        })?;
        store.join().await?;
        Ok(store)
    }

    fn key(&self, name: &str) -> String {
        self.keys.key(name)
    }

    async fn ask<T, F>(&self, what: &str, request: F) -> Result<T, StoreError>
    where
        F: std::future::Future<Output = Result<T, etcd_client::Error>>,
    {
        self.keys.ask(what, request).await
    }

    pub fn keys(&self) -> Keys {
        self.keys.clone()
    }

    /// Becomes true once this controller's lease is gone or may have expired.
    pub fn lost_signal(&self) -> watch::Receiver<bool> {
        self.lost.clone()
    }

    /// Refuses a cluster whose metadata format is newer than this isr's, and records ours in a
    /// new one.
    async fn check_format(&mut self) -> Result<(), StoreError> {
        let key = self.key("format");
        let mut kv = self.client.kv_client();
        let txn = Txn::new()
            .when([Compare::version(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key.clone(), LAYOUT.to_string(), None)])
            .or_else([TxnOp::get(key.clone(), None)]);
        let answer = self.ask("recording the format", kv.txn(txn)).await?;
        if answer.succeeded() {
            return Ok(());
        }
        let found = first_value(&answer.op_responses()).unwrap_or_default();
        let place = format!("etcd key {key}");
        let found: u16 = String::from_utf8_lossy(&found)
            .trim()
            .parse()
            .map_err(|_| StoreError::Corrupt {
                place: place.clone(),
                reason: format!("format `{}`", String::from_utf8_lossy(&found)),
            })?;
        if found > LAYOUT {
            return Err(StoreError::NewerFormat {
                place,
                found,
                supported: LAYOUT,
            });
        }
        if found < LAYOUT {
            return Err(StoreError::Corrupt {
                place,
                reason: format!(
                    "format {found}, written by an older isr, is no longer read (this isr \
                     reads {LAYOUT}): start the cluster under a new prefix"
                ),
            });
        }
        Ok(())
    }

    /// Takes a lease, keeps it alive, and registers this controller's id under it: a second
    /// process with the same id is refused while this one's lease lives.
    async fn join(&mut self) -> Result<(), StoreError> {
        let ttl = self.me.lease.as_secs().max(1) as i64;
        let mut lease = self.client.lease_client();
        let granted = self.ask("granting a lease", lease.grant(ttl, None)).await?;
        self.lease = granted.id();
        if granted.ttl() != ttl {
            warn!(
                asked = ttl,
                granted = granted.ttl(),
                "etcd granted another lease TTL"
            );
        }
        let key = self.key(&format!("controllers/{}", self.me.id));
        let mut kv = self.client.kv_client();
        let txn = Txn::new()
            .when([Compare::version(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(
                key.clone(),
                self.me.address.clone(),
                Some(PutOptions::new().with_lease(self.lease)),
            )])
            .or_else([TxnOp::get(key.clone(), None)]);
        let answer = self
            .ask("registering the controller id", kv.txn(txn))
            .await?;
        if !answer.succeeded() {
            let holder = first_value(&answer.op_responses()).unwrap_or_default();
            let _ = lease.revoke(self.lease).await;
            return Err(StoreError::DuplicateId {
                id: self.me.id,
                holder: format!("at {}", String::from_utf8_lossy(&holder)),
            });
        }
        let (tell, lost) = watch::channel(false);
        self.lost = lost;
        tokio::spawn(keep_alive(
            self.client.clone(),
            self.lease,
            Duration::from_secs(granted.ttl().max(1) as u64),
            tell,
        ));
        Ok(())
    }

    pub async fn campaign(&mut self) -> Result<Won, StoreError> {
        if *self.lost.borrow() {
            // The role was lost with the lease: campaign again under a new one. The old lease
            // may still live in etcd if only this process lost touch; give it up first, or this
            // controller's own id key would look like another process's.
            let mut lease = self.client.lease_client();
            let _ = self
                .ask("revoking the old lease", lease.revoke(self.lease))
                .await;
            self.join().await?;
        }
        let mut election = self.client.election_client();
        let value = format!("{} {}", self.me.id, self.me.address);
        let won = election
            .campaign(self.key("election"), value, self.lease)
            .await
            .map_err(|e| {
                StoreError::Unavailable(format!("etcd at {}: campaign: {e}", self.keys.endpoints))
            })?;
        let leader = won
            .leader()
            .cloned()
            .ok_or_else(|| StoreError::Unavailable("a campaign won without a leader key".into()))?;
        self.leader = Some(leader);
        self.epoch = self.bump_epoch().await?;
        let metadata = self.load().await?;
        info!(epoch = %self.epoch, "won the controller role");
        Ok(Won {
            epoch: self.epoch,
            metadata,
        })
    }

    /// The comparison that fences this controller's writes: its leader key still exists, as
    /// created by its campaign.
    fn holds_role(&self) -> Result<Compare, StoreError> {
        let leader = self.leader.as_ref().ok_or(StoreError::Fenced(self.epoch))?;
        Ok(Compare::create_revision(
            leader.key().to_vec(),
            CompareOp::Equal,
            leader.rev(),
        ))
    }

    /// Starts the next controller epoch: read, then write it back one higher, provided this
    /// controller still leads and nobody wrote it in between.
    async fn bump_epoch(&mut self) -> Result<ControllerEpoch, StoreError> {
        let key = self.key("epoch");
        loop {
            let mut kv = self.client.kv_client();
            let read = self
                .ask("reading the epoch", kv.get(key.clone(), None))
                .await?;
            let (current, unchanged) = match read.kvs().first() {
                Some(kv) => {
                    let text = String::from_utf8_lossy(kv.value()).to_string();
                    let epoch = text
                        .trim()
                        .parse::<u32>()
                        .map_err(|_| StoreError::Corrupt {
                            place: format!("etcd key {key}"),
                            reason: format!("epoch `{text}`"),
                        })?;
                    let at =
                        Compare::mod_revision(key.clone(), CompareOp::Equal, kv.mod_revision());
                    (ControllerEpoch(epoch), at)
                }
                None => (
                    ControllerEpoch(0),
                    Compare::version(key.clone(), CompareOp::Equal, 0),
                ),
            };
            let next = current.next();
            let txn = Txn::new()
                .when([self.holds_role()?, unchanged])
                .and_then([TxnOp::put(key.clone(), next.0.to_string(), None)]);
            if self
                .ask("writing the epoch", kv.txn(txn))
                .await?
                .succeeded()
            {
                return Ok(next);
            }
            if !self.still_leads().await? {
                return Err(StoreError::Fenced(next));
            }
        }
    }

    async fn still_leads(&self) -> Result<bool, StoreError> {
        let txn = Txn::new().when([self.holds_role()?]);
        let mut kv = self.client.kv_client();
        Ok(self
            .ask("confirming the role", kv.txn(txn))
            .await?
            .succeeded())
    }

    /// The metadata the `meta/` keys hold, read a page at a time; `None` if there are none.
    async fn load(&self) -> Result<Option<Metadata>, StoreError> {
        let prefix = self.key("meta/");
        let end = self.key("meta0");
        let mut from = prefix.clone().into_bytes();
        let mut metadata: Option<Metadata> = None;
        loop {
            let mut kv = self.client.kv_client();
            let options = GetOptions::new().with_range(end.clone()).with_limit(PAGE);
            let page = self
                .ask("reading the metadata", kv.get(from.clone(), Some(options)))
                .await?;
            for kv in page.kvs() {
                let record: Record =
                    postcard::from_bytes(kv.value()).map_err(|e| StoreError::Corrupt {
                        place: format!("etcd key {}", String::from_utf8_lossy(kv.key())),
                        reason: format!("a record this isr cannot read: {e}"),
                    })?;
                metadata
                    .get_or_insert_with(Metadata::default)
                    .apply(&record);
            }
            match page.kvs().last() {
                Some(last) if page.more() => {
                    from = last.key().to_vec();
                    from.push(0);
                }
                _ => return Ok(metadata),
            }
        }
    }

    /// Writes one change's records (the key of each entity it changed), or with none only
    /// confirms the role, provided this controller still holds it.
    pub async fn commit(&mut self, records: &[Record]) -> Result<(), StoreError> {
        // The last record of each entity; brokers' last of all.
        let mut latest: BTreeMap<String, &Record> = BTreeMap::new();
        for record in records {
            latest.insert(self.key(&entity_key(record)), record);
        }
        let (last, first): (Vec<_>, Vec<_>) = latest.into_iter().partition(|(_, r)| r.goes_last());
        let mut pieces: Vec<Vec<TxnOp>> = vec![Vec::new()];
        let mut bytes = 0;
        for (key, record) in first.into_iter().chain(last) {
            let op = if record.removes() {
                TxnOp::delete(key, None)
            } else {
                let value = postcard::to_allocvec(record).map_err(|e| {
                    StoreError::Unavailable(format!("a record postcard cannot encode: {e}"))
                })?;
                bytes += value.len();
                TxnOp::put(key, value, None)
            };
            let full = pieces
                .last()
                .is_some_and(|p| p.len() >= TXN_OPS || (bytes > TXN_BYTES && !p.is_empty()));
            if full {
                pieces.push(Vec::new());
                bytes = 0;
            }
            if let Some(piece) = pieces.last_mut() {
                piece.push(op);
            }
        }
        for writes in pieces {
            let txn = Txn::new().when([self.holds_role()?]).and_then(writes);
            let mut kv = self.client.kv_client();
            if !self
                .ask("writing the metadata", kv.txn(txn))
                .await?
                .succeeded()
            {
                self.leader = None;
                return Err(StoreError::Fenced(self.epoch));
            }
        }
        Ok(())
    }

    pub async fn resign(&mut self) {
        self.leader = None;
        let mut lease = self.client.lease_client();
        if let Err(e) = self
            .ask("revoking the lease", lease.revoke(self.lease))
            .await
        {
            warn!(error = %e, "could not give the role up; it goes when the lease expires");
        }
    }
}

impl Keys {
    fn key(&self, name: &str) -> String {
        format!("{}/{name}", self.prefix)
    }

    /// Runs one request, mapping an error or a timeout to [`StoreError::Unavailable`].
    async fn ask<T, F>(&self, what: &str, request: F) -> Result<T, StoreError>
    where
        F: std::future::Future<Output = Result<T, etcd_client::Error>>,
    {
        match tokio::time::timeout(REQUEST_TIMEOUT, request).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) => Err(StoreError::Unavailable(format!(
                "etcd at {}: {what}: {e}",
                self.endpoints
            ))),
            Err(_) => Err(StoreError::Unavailable(format!(
                "etcd at {}: {what}: no answer within {REQUEST_TIMEOUT:?} (has it lost its \
                 quorum?)",
                self.endpoints
            ))),
        }
    }

    /// The active controller, as the election's leader key and the epoch key say.
    pub async fn active(&self) -> Option<ControllerInfo> {
        let mut election = self.client.election_client();
        let leader = self
            .ask(
                "asking for the leader",
                election.leader(self.key("election")),
            )
            .await
            .ok()?;
        let value = String::from_utf8_lossy(leader.kv()?.value()).to_string();
        let (id, address) = value.split_once(' ')?;
        let mut kv = self.client.kv_client();
        let epoch = self
            .ask("reading the epoch", kv.get(self.key("epoch"), None))
            .await
            .ok()?;
        let epoch = epoch
            .kvs()
            .first()
            .and_then(|kv| String::from_utf8_lossy(kv.value()).trim().parse().ok())
            .unwrap_or(0);
        Some(ControllerInfo {
            id: id.parse().ok()?,
            address: address.to_string(),
            epoch: ControllerEpoch(epoch),
        })
    }
}

/// The key, under the cluster's prefix, of the entity a record sets: one per partition,
/// broker, topic, topic id, config, address; one for the users and ACLs. A topic's id has a key
/// of its own, so that a cluster written before ids reads as it was (its topics without ids).
pub fn entity_key(record: &Record) -> String {
    match record {
        Record::Core(MetadataRecord::ControllerEpoch(_)) => "meta/controller-epoch".into(),
        Record::Core(MetadataRecord::Broker { id, .. }) => format!("meta/broker/{}", id.0),
        Record::Core(MetadataRecord::Partition { id, .. }) => {
            format!("meta/partition/{:010}", id.0)
        }
        Record::Topic { name, .. } => format!("meta/topic/{name}"),
        Record::TopicConfigs { name, .. } => format!("meta/topic-configs/{name}"),
        Record::TopicId { name, .. } => format!("meta/topic-id/{name}"),
        Record::BrokerConfigs { name, .. } => format!("meta/broker-configs/{name}"),
        Record::Address { broker, .. } => format!("meta/address/{}", broker.0),
        Record::NextPartition(_) => "meta/next-partition".into(),
        Record::NextProducerId(_) => "meta/next-producer-id".into(),
        Record::Security(_) => "meta/security".into(),
    }
}

/// The value of the first key a transaction's `get` returned.
fn first_value(responses: &[TxnOpResponse]) -> Option<Vec<u8>> {
    responses.iter().find_map(|r| match r {
        TxnOpResponse::Get(get) => get.kvs().first().map(|kv| kv.value().to_vec()),
        _ => None,
    })
}

/// Renews the lease three times per TTL, and says it is lost once etcd says so, or once no
/// renewal has succeeded for a whole TTL: etcd may have let it expire by then (a renewal counts
/// from when it was asked, since etcd extends the lease from when it receives it). A broken
/// renewal stream is reopened on the next round.
async fn keep_alive(mut client: Client, lease: i64, ttl: Duration, lost: watch::Sender<bool>) {
    let period = ttl / 3;
    let mut renewed = Instant::now();
    let mut stream = None;
    loop {
        let asked = Instant::now();
        let renewal = tokio::time::timeout(period, async {
            if stream.is_none() {
                stream = Some(client.lease_keep_alive(lease).await?);
            }
            let Some((keeper, answers)) = stream.as_mut() else {
                return Ok(None);
            };
            keeper.keep_alive().await?;
            answers.message().await
        })
        .await;
        match renewal {
            Ok(Ok(Some(answer))) if answer.ttl() > 0 => renewed = asked,
            Ok(Ok(Some(_))) => {
                warn!("the controller lease expired");
                let _ = lost.send(true);
                return;
            }
            Ok(Ok(None)) | Ok(Err(_)) | Err(_) => stream = None,
        }
        if renewed.elapsed() >= ttl {
            warn!(?ttl, "the controller lease could not be renewed in time");
            let _ = lost.send(true);
            return;
        }
        tokio::time::sleep_until((asked + period).into()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(id: u32) -> Candidate {
        Candidate {
            id,
            address: format!("127.0.0.1:{id}"),
            lease: Duration::from_secs(2),
        }
    }

    fn metadata(next_partition: u32) -> Metadata {
        Metadata {
            next_partition,
            ..Metadata::default()
        }
    }

    /// A real etcd in `dir`: its endpoint, and the process to keep while it serves. `None`
    /// (the test is skipped) where etcd is not installed, which CI does not allow.
    async fn etcd(dir: &std::path::Path) -> Option<(String, Vec<crate::cluster::Running>)> {
        let installed = std::process::Command::new("etcd")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !installed {
            assert!(
                std::env::var_os("CI").is_none_or(|v| v != "true"),
                "etcd is not installed: runtime/tests/etcd/install.sh installs it"
            );
            eprintln!("SKIPPED: etcd is not installed");
            return None;
        }
        let mut running = Vec::new();
        let endpoint = crate::cluster::etcd::start(dir, None, &mut running)
            .await
            .expect("etcd");
        Some((endpoint, running))
    }

    /// KAFKA-6082 against a real etcd: once a controller's lease is gone (revoked here, as it
    /// expires during a pause), a standby wins the next epoch from its state, and every write
    /// of the deposed controller is refused, a mere confirmation of the role included.
    #[tokio::test]
    async fn a_controller_that_lost_the_role_cannot_write() {
        let dir = tempfile::tempdir().expect("tempdir");
        let Some((endpoint, _running)) = etcd(dir.path()).await else {
            return;
        };
        let endpoints = [endpoint];
        let mut a = EtcdStore::open(&endpoints, "t", candidate(1))
            .await
            .expect("a");
        let won = a.campaign().await.expect("a wins");
        assert_eq!(won.epoch, ControllerEpoch(1));
        assert!(won.metadata.is_none());
        a.commit(&[Record::NextPartition(1)])
            .await
            .expect("a writes");

        let mut b = EtcdStore::open(&endpoints, "t", candidate(2))
            .await
            .expect("b");
        assert_eq!(
            a.keys().active().await.map(|c| (c.id, c.epoch)),
            Some((1, ControllerEpoch(1)))
        );
        let standby = tokio::spawn(async move {
            let won = b.campaign().await;
            (won, b)
        });
        let mut raw = Client::connect(&endpoints, None).await.expect("client");
        raw.lease_revoke(a.lease).await.expect("revoke a's lease");
        let (won, mut b) = standby.await.expect("b's campaign");
        let won = won.expect("b wins");
        assert_eq!(won.epoch, ControllerEpoch(2));
        assert_eq!(won.metadata, Some(metadata(1)));
        b.commit(&[Record::NextPartition(2)])
            .await
            .expect("b writes");

        assert!(matches!(
            a.commit(&[Record::NextPartition(3)]).await,
            Err(StoreError::Fenced(ControllerEpoch(1)))
        ));
        assert!(matches!(a.commit(&[]).await, Err(StoreError::Fenced(_))));
        let stored = raw.get("t/meta/next-partition", None).await.expect("get");
        let stored: Record = postcard::from_bytes(stored.kvs()[0].value()).expect("decode");
        assert_eq!(
            stored,
            Record::NextPartition(2),
            "the zombie's write did not land"
        );
    }

    /// A topic's id has a key of its own: a controller that takes over finds each topic with
    /// the id it was given, and the key goes with its topic.
    #[tokio::test]
    async fn topic_ids_are_kept_in_etcd_and_go_with_their_topics() {
        let dir = tempfile::tempdir().expect("tempdir");
        let Some((endpoint, _running)) = etcd(dir.path()).await else {
            return;
        };
        let endpoints = [endpoint];
        let mut a = EtcdStore::open(&endpoints, "t", candidate(1))
            .await
            .expect("a");
        a.campaign().await.expect("a wins");
        let (cfg, mut metadata) = crate::controller::metadata::tests::three_brokers();
        a.commit(&metadata.records()).await.expect("brokers");
        let spec = |name: &str| crate::controller::metadata::tests::spec(name, 1, &[]);
        for name in ["kept", "gone"] {
            metadata.begin();
            let effects = metadata.create_topic(&cfg, &spec(name)).expect("create");
            let change = metadata.finish(effects);
            a.commit(&change.records).await.expect("commit");
        }
        metadata.begin();
        metadata.delete_topic("gone").expect("delete");
        let change = metadata.finish(Vec::new());
        a.commit(&change.records).await.expect("commit");
        a.resign().await;

        let mut b = EtcdStore::open(&endpoints, "t", candidate(2))
            .await
            .expect("b");
        let taken = b
            .campaign()
            .await
            .expect("b wins")
            .metadata
            .expect("metadata");
        assert_eq!(taken.topic_ids, metadata.topic_ids);
        let names: Vec<&String> = taken.topic_ids.iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["kept"]);
        let mut raw = Client::connect(&endpoints, None).await.expect("client");
        let key = |name: &str| format!("t/meta/topic-id/{name}");
        let stored = raw.get(key("kept"), None).await.expect("get");
        let stored: Record = postcard::from_bytes(stored.kvs()[0].value()).expect("decode");
        assert_eq!(
            stored,
            Record::TopicId {
                name: "kept".into(),
                id: metadata.topic_ids.get("kept"),
            }
        );
        assert!(raw
            .get(key("gone"), None)
            .await
            .expect("get")
            .kvs()
            .is_empty());
    }
}
