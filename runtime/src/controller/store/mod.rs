//! Where the controller role is won and the controller's metadata is kept.
//!
//! One interface, two stores, one controller code path:
//! - a file ([`file`]): the default for one machine. One controller process holds the directory
//!   (a lock), and so the role, for as long as it runs.
//! - etcd ([`etcd`]): several controller processes campaign for the role through etcd's
//!   election API under a lease; one is active, the others stand by and take over when its
//!   lease expires.
//!
//! Every write is conditional on the writer still holding the role (rule 11, KAFKA-6082): the
//! etcd store compares the election's leader key in the same transaction as the write. The
//! controller commits the state a step produced before the step's messages leave, and a step
//! that changed nothing is still confirmed ([`Store::commit`] with `None`), so a controller that
//! lost the role without noticing (a zombie) neither writes nor steers anyone.

mod etcd;
mod file;
pub(crate) mod format;
mod log;

use super::metadata::Metadata;
use super::records::Record;
use crate::wire::admin::ControllerInfo;
use isr::ControllerEpoch;
use std::path::PathBuf;
use std::time::Duration;
use thiserror::Error;
use tokio::sync::watch;

#[derive(Debug, Error)]
pub enum StoreError {
    #[error(
        "the store refused the write of controller epoch {0}: this controller lost the \
         controller role"
    )]
    Fenced(ControllerEpoch),
    #[error("the store is unavailable: {0}")]
    Unavailable(String),
    #[error("cannot reach etcd at {endpoints}: {reason}")]
    Unreachable { endpoints: String, reason: String },
    #[error(
        "{place} holds controller metadata in format {found}, newer than this isr's format \
         {supported}: run a newer isr on it"
    )]
    NewerFormat {
        place: String,
        found: u16,
        supported: u16,
    },
    #[error("{place} is not isr controller metadata: {reason}")]
    Corrupt { place: String, reason: String },
    #[error("controller id {id} is already running ({holder}); give each controller its own --id")]
    DuplicateId { id: u32, holder: String },
    #[error("another controller process uses {0}: one file store serves one controller")]
    Locked(PathBuf),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Which store, as given on the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreSpec {
    /// A directory on this machine.
    File(PathBuf),
    /// etcd endpoints (`host:port`) and the key prefix under which the cluster lives.
    Etcd {
        endpoints: Vec<String>,
        prefix: String,
    },
}

impl StoreSpec {
    /// Parses `etcd://HOST:PORT[,HOST:PORT...][/PREFIX]`; the prefix defaults to `isr`, so
    /// one etcd can hold several clusters under different prefixes.
    pub fn parse_etcd(spec: &str) -> Result<StoreSpec, String> {
        let rest = spec.strip_prefix("etcd://").ok_or_else(|| {
            format!("invalid --store `{spec}`: expected etcd://HOST:PORT[,HOST:PORT...][/PREFIX]")
        })?;
        let (hosts, prefix) = rest.split_once('/').unwrap_or((rest, "isr"));
        let endpoints: Vec<String> = hosts
            .split(',')
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .map(str::to_string)
            .collect();
        let valid = |h: &String| {
            h.rsplit_once(':')
                .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok())
        };
        if endpoints.is_empty() || !endpoints.iter().all(valid) {
            return Err(format!(
                "invalid --store `{spec}`: expected etcd://HOST:PORT[,HOST:PORT...][/PREFIX]"
            ));
        }
        let prefix = prefix.trim_matches('/');
        if prefix.is_empty() {
            return Err(format!("invalid --store `{spec}`: the key prefix is empty"));
        }
        Ok(StoreSpec::Etcd {
            endpoints,
            prefix: prefix.to_string(),
        })
    }
}

/// This controller, as it announces itself to the store.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub id: u32,
    /// Where brokers and clients reach it.
    pub address: String,
    /// How long the role outlives this process's last word to the store (etcd's lease TTL).
    pub lease: Duration,
}

/// The role, won: the controller epoch it was won in, and the state the store held.
pub struct Won {
    pub epoch: ControllerEpoch,
    /// `None` for a store nothing was ever written to: a new cluster.
    pub metadata: Option<Metadata>,
}

pub enum Store {
    File(file::FileStore),
    /// Boxed: an etcd client is a few KiB.
    Etcd(Box<etcd::EtcdStore>),
}

impl Store {
    /// Opens the store for `me`. Fails with a clear error when the store cannot be reached or
    /// used: an unreachable etcd names its endpoints; a second process with the same id, or on
    /// the same directory, is refused.
    pub async fn open(spec: &StoreSpec, me: Candidate) -> Result<Store, StoreError> {
        Ok(match spec {
            StoreSpec::File(dir) => Store::File(file::FileStore::open(dir, me)?),
            StoreSpec::Etcd { endpoints, prefix } => Store::Etcd(Box::new(
                etcd::EtcdStore::open(endpoints, prefix, me).await?,
            )),
        })
    }

    /// Waits until this controller holds the role, then starts the next controller epoch and
    /// reads the state the store holds. Cancel-safe: a standby keeps answering while it waits.
    pub async fn campaign(&mut self) -> Result<Won, StoreError> {
        match self {
            Store::File(s) => s.campaign(),
            Store::Etcd(s) => s.campaign().await,
        }
    }

    /// Writes one change's records, or with none only confirms the role, provided this
    /// controller still holds it: otherwise [`StoreError::Fenced`], and the controller must
    /// stop acting. `current` is the metadata with the change made, which a store that keeps
    /// snapshots may write as its next one.
    pub async fn commit(
        &mut self,
        records: &[Record],
        current: &Metadata,
    ) -> Result<(), StoreError> {
        match self {
            Store::File(s) => s.commit(records, current),
            Store::Etcd(s) => s.commit(records).await,
        }
    }

    /// Becomes true once this controller has lost the role (its lease is gone, or cannot have
    /// been renewed in time). Never, for a file store.
    pub fn lost_signal(&self) -> watch::Receiver<bool> {
        match self {
            Store::File(s) => s.lost_signal(),
            Store::Etcd(s) => s.lost_signal(),
        }
    }

    /// Finds the active controller for a standby's redirects, without borrowing the store
    /// (which is campaigning meanwhile).
    pub fn lookup(&self) -> Lookup {
        match self {
            Store::File(s) => Lookup::Fixed(s.active()),
            Store::Etcd(s) => Lookup::Etcd(Box::new(s.keys())),
        }
    }

    /// Gives the role up at once (a clean stop), so a standby need not wait out the lease.
    pub async fn resign(&mut self) {
        if let Store::Etcd(s) = self {
            s.resign().await;
        }
    }
}

/// Where a standby learns who the active controller is.
#[derive(Clone)]
pub enum Lookup {
    Fixed(Option<ControllerInfo>),
    Etcd(Box<etcd::Keys>),
}

impl Lookup {
    pub async fn active(&self) -> Option<ControllerInfo> {
        match self {
            Lookup::Fixed(active) => active.clone(),
            Lookup::Etcd(keys) => keys.active().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn etcd_specs_name_endpoints_and_a_prefix() {
        assert_eq!(
            StoreSpec::parse_etcd("etcd://127.0.0.1:2379,127.0.0.1:2380"),
            Ok(StoreSpec::Etcd {
                endpoints: vec!["127.0.0.1:2379".into(), "127.0.0.1:2380".into()],
                prefix: "isr".into(),
            })
        );
        assert_eq!(
            StoreSpec::parse_etcd("etcd://h:1/clusters/a/"),
            Ok(StoreSpec::Etcd {
                endpoints: vec!["h:1".into()],
                prefix: "clusters/a".into(),
            })
        );
        for bad in [
            "h:1",
            "etcd://",
            "etcd://h",
            "etcd://h:port",
            "etcd://h:1/",
            "etcd://:1",
        ] {
            assert!(StoreSpec::parse_etcd(bad).is_err(), "{bad}");
        }
    }

    /// Metadata of `partitions` partitions in topics of 100 (replication factor 3, min ISR 2)
    /// over three live brokers.
    fn metadata_of(cfg: &isr::Config, partitions: u32) -> Metadata {
        let mut metadata = Metadata::default();
        for b in 1..=3 {
            let registration = isr::ControllerInput::Message {
                from: isr::Node::Broker(isr::BrokerId(b)),
                message: isr::Message::BrokerRegistration {
                    broker: isr::BrokerId(b),
                    clean_shutdown: true,
                },
            };
            let _: isr::ControllerEffects<()> =
                metadata.controller.step(cfg, isr::Tick(0), registration);
        }
        for t in 0..partitions.div_ceil(100) {
            let spec = crate::wire::admin::TopicSpec {
                name: format!("topic-{t}"),
                partitions: 100.min(partitions - t * 100),
                replication_factor: 3,
                configs: [("min.insync.replicas".to_string(), "2".to_string())].into(),
                assignment: Vec::new(),
            };
            metadata.create_topic(cfg, &spec).expect("topic");
        }
        metadata
    }

    /// The `i`-th ISR change of a benchmark: partition `i` (of `partitions`) drops its last
    /// follower from the ISR, or, the next time round, takes it back.
    fn isr_change(meta: &Metadata, i: u64, partitions: u32) -> isr::ControllerInput<bytes::Bytes> {
        let id = isr::PartitionId((i % u64::from(partitions)) as u32);
        let state = meta.controller.partition(id).expect("partition");
        let leader = state.leader.expect("a leader");
        let follower = *state.assigned.last().expect("assigned");
        let mut new_isr = state.isr.clone();
        let mut broker_epochs = std::collections::BTreeMap::new();
        if !new_isr.remove(&follower) {
            new_isr.insert(follower);
            broker_epochs.insert(follower, meta.controller.brokers()[&follower].epoch);
        }
        isr::ControllerInput::Message {
            from: isr::Node::Broker(leader),
            message: isr::Message::AlterPartition(isr::AlterPartitionRequest {
                partition: id,
                leader,
                leader_epoch: state.leader_epoch,
                partition_epoch: state.partition_epoch,
                new_isr,
                broker_epochs,
                controller_epoch: meta.controller.epoch(),
            }),
        }
    }

    /// What one ISR change costs each store, at two cluster sizes: it writes the records of
    /// what it changed (one partition), never the whole metadata, so the bytes per change are
    /// the same at 1,000 and at 100,000 partitions.
    /// Run: `runtime/bench/cluster.sh change-bytes`, or `cargo test --release -p isr-runtime
    /// --lib commit_rates -- --ignored --nocapture`
    #[tokio::test]
    #[ignore = "a benchmark: prints figures"]
    async fn commit_rates() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut running = Vec::new();
        let etcd = crate::cluster::etcd::start(&dir.path().join("etcd"), None, &mut running)
            .await
            .expect("etcd (runtime/tests/etcd/install.sh)");
        let me = |id| Candidate {
            id,
            address: "127.0.0.1:1".into(),
            lease: Duration::from_secs(2),
        };
        let cfg = isr::Config::default();
        for partitions in [1_000, 100_000] {
            for name in ["file", "etcd"] {
                let spec = match name {
                    "file" => StoreSpec::File(dir.path().join(format!("file-{partitions}"))),
                    _ => StoreSpec::Etcd {
                        endpoints: vec![etcd.clone()],
                        prefix: format!("bench-{partitions}"),
                    },
                };
                let mut store = Store::open(&spec, me(1)).await.expect("open");
                store.campaign().await.expect("won");
                let mut metadata = metadata_of(&cfg, partitions);
                let started = Instant::now();
                store
                    .commit(&metadata.records(), &metadata)
                    .await
                    .expect("the whole metadata");
                let loaded = started.elapsed();
                let log = dir.path().join(format!("file-{partitions}/metadata.log"));
                let log_bytes = || std::fs::metadata(&log).map_or(0, |m| m.len());
                let n = 1_000u64;
                // What each commit appended: a snapshot may cut the log meanwhile (the whole
                // metadata written first makes it large), so a commit across a cut is not
                // counted.
                let (mut appended, mut counted) = (0, 0u64);
                let mut record_bytes = 0;
                let mut stepping = Duration::ZERO;
                let started = Instant::now();
                for i in 0..n {
                    let input = isr_change(&metadata, i, partitions);
                    let stepped = Instant::now();
                    metadata.begin();
                    let effects = metadata.controller.step(&cfg, isr::Tick(0), input);
                    let change = metadata.finish(effects);
                    stepping += stepped.elapsed();
                    assert_eq!(change.records.len(), 1, "one partition changed");
                    record_bytes += postcard::to_allocvec(&change.records)
                        .expect("encode")
                        .len();
                    let before = log_bytes();
                    store
                        .commit(&change.records, &metadata)
                        .await
                        .expect("commit");
                    if let Some(grown) = log_bytes().checked_sub(before) {
                        appended += grown;
                        counted += 1;
                    }
                }
                let secs = started.elapsed().as_secs_f64();
                let written = match name {
                    "file" => format!("{} bytes appended", appended / counted.max(1)),
                    _ => format!("{} bytes of values", record_bytes as u64 / n),
                };
                eprintln!(
                    "{name} store, {partitions} partitions: {:.0} ISR changes/s ({:.3} ms \
                     each, {:.1} µs of it the step); {written} per change; the whole \
                     metadata written in {:.2} s",
                    n as f64 / secs,
                    secs * 1000.0 / n as f64,
                    stepping.as_secs_f64() * 1e6 / n as f64,
                    loaded.as_secs_f64()
                );
            }
        }
    }
}
