//! The file store: the controller's metadata in a directory, for one machine.
//!
//! A lock on the directory is the controller role: the process that holds it is the only
//! controller, and the kernel releases it when the process dies, however it dies. So a second
//! controller on the same directory is refused at start, every write is the holder's, and the
//! role is never lost while the process runs. Each start is an election: the controller epoch
//! goes up by one, so brokers can tell a restarted controller from the one before.
//!
//! The metadata is kept as KRaft keeps `__cluster_metadata`: a snapshot (`metadata.bin`,
//! [`super::format`]) and an append-only log of the changes made since (`metadata.log`,
//! [`super::log`]), one batch of records per committed change, made durable before the
//! change's messages leave. A change costs the bytes of its records. Once the log outgrows the
//! snapshot, a new snapshot is written by a thread of its own (at 100,000 partitions it is
//! megabytes, and its fsync would stall the controller past brokers' session timeouts), while
//! changes go on to the log; once it is durable, the log's batches from before it are dropped.
//! A crash at any point leaves a log that replays onto the snapshot there is to the same state,
//! since a record sets a value.

use super::log::MetadataLog;
use super::{format, Candidate, StoreError, Won};
use crate::controller::metadata::Metadata;
use crate::controller::records::Record;
use crate::storage::checkpoint;
use crate::wire::admin::ControllerInfo;
use isr::ControllerEpoch;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use tokio::sync::watch;
use tracing::warn;

const SNAPSHOT: &str = "metadata.bin";
const LOG: &str = "metadata.log";
const LOCK: &str = "controller.lock";

/// The log is folded into a new snapshot once it is larger than the snapshot and this.
const SNAPSHOT_AFTER: u64 = 1 << 20;

pub struct FileStore {
    dir: PathBuf,
    me: Candidate,
    /// Held open for the lock's sake.
    _lock: File,
    epoch: ControllerEpoch,
    /// The role is never lost while the process runs: this never says otherwise.
    lost: watch::Sender<bool>,
    /// Open once the role is won.
    log: Option<MetadataLog>,
    /// The size of the last snapshot written or read.
    snapshot_bytes: u64,
    /// A snapshot being written: the log's length when its state was taken, and the writer's
    /// answer (the snapshot's size, or why it failed).
    folding: Option<(u64, mpsc::Receiver<Result<u64, StoreError>>)>,
}

impl FileStore {
    pub fn open(dir: &Path, me: Candidate) -> Result<FileStore, StoreError> {
        let io = |source| StoreError::Io {
            path: dir.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        let path = dir.join(LOCK);
        let lock = File::create(&path).map_err(|source| StoreError::Io {
            path: path.clone(),
            source,
        })?;
        // SAFETY: flock(2) on a descriptor this function owns; no memory is involved.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(StoreError::Locked(dir.to_path_buf()));
        }
        Ok(FileStore {
            dir: dir.to_path_buf(),
            me,
            _lock: lock,
            epoch: ControllerEpoch(0),
            lost: watch::channel(false).0,
            log: None,
            snapshot_bytes: 0,
            folding: None,
        })
    }

    fn snapshot_path(&self) -> PathBuf {
        self.dir.join(SNAPSHOT)
    }

    /// The snapshot, if there is one.
    fn load_snapshot(&mut self) -> Result<Option<Metadata>, StoreError> {
        let path = self.snapshot_path();
        match std::fs::read(&path) {
            Ok(bytes) => {
                self.snapshot_bytes = bytes.len() as u64;
                format::decode(&bytes, &path.display().to_string()).map(Some)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(StoreError::Io { path, source }),
        }
    }

    /// The lock is already held: the role is won. The metadata is the snapshot with the log's
    /// changes applied (a torn tail cut off); the new epoch is the stored one plus one.
    pub fn campaign(&mut self) -> Result<Won, StoreError> {
        let snapshot = self.load_snapshot()?;
        let (log, batches) = MetadataLog::open(&self.dir.join(LOG))?;
        let metadata = match (snapshot, batches.is_empty()) {
            (None, true) => None,
            (snapshot, _) => {
                let mut metadata = snapshot.unwrap_or_default();
                for record in batches.iter().flatten() {
                    metadata.apply(record);
                }
                Some(metadata)
            }
        };
        self.log = Some(log);
        self.epoch = metadata
            .as_ref()
            .map_or(ControllerEpoch(1), |m| m.controller.epoch().next());
        Ok(Won {
            epoch: self.epoch,
            metadata,
        })
    }

    /// Appends one change's records to the log, durably. Then: a snapshot written since drops
    /// the batches it holds from the log; and if the log has outgrown the snapshot, `current`
    /// (the metadata with the change made) is encoded and handed to a thread that writes it as
    /// the new snapshot.
    pub fn commit(&mut self, records: &[Record], current: &Metadata) -> Result<(), StoreError> {
        if records.is_empty() {
            return Ok(());
        }
        let log = self
            .log
            .as_mut()
            .ok_or_else(|| StoreError::Unavailable("the file store has no open log".into()))?;
        log.append(records)?;
        self.fold(false)?;
        let Some(log) = self.log.as_ref() else {
            return Ok(());
        };
        if self.folding.is_none() && log.bytes() > SNAPSHOT_AFTER.max(self.snapshot_bytes) {
            let bytes = format::encode(current);
            let path = self.dir.join(SNAPSHOT);
            let (done, answer) = mpsc::channel();
            std::thread::spawn(move || {
                let written = checkpoint::write_bytes(&path, &bytes)
                    .map(|()| bytes.len() as u64)
                    .map_err(|e| match e {
                        checkpoint::CheckpointError::Io { path, source } => {
                            StoreError::Io { path, source }
                        }
                        other => StoreError::Unavailable(other.to_string()),
                    });
                let _ = done.send(written);
            });
            self.folding = Some((log.bytes(), answer));
        }
        Ok(())
    }

    /// Finishes a snapshot written in the background, if it is done (or, with `wait`, once it
    /// is): the log drops the batches it holds. One that failed is left: the log still holds
    /// every change, and the next commit tries again.
    fn fold(&mut self, wait: bool) -> Result<(), StoreError> {
        let Some((point, answer)) = &self.folding else {
            return Ok(());
        };
        let written = match wait {
            true => answer.recv().ok(),
            false => answer.try_recv().ok(),
        };
        let point = *point;
        let written = match written {
            Some(written) => written,
            None if wait => Err(StoreError::Unavailable("the snapshot writer died".into())),
            None => return Ok(()),
        };
        self.folding = None;
        match written {
            Ok(bytes) => {
                self.snapshot_bytes = bytes;
                if let Some(log) = self.log.as_mut() {
                    log.drop_prefix(point)?;
                }
            }
            Err(e) => {
                warn!(error = %e, "could not write a metadata snapshot; the log keeps every change")
            }
        }
        Ok(())
    }

    pub fn lost_signal(&self) -> watch::Receiver<bool> {
        self.lost.subscribe()
    }

    pub fn active(&self) -> Option<ControllerInfo> {
        Some(ControllerInfo {
            id: self.me.id,
            address: self.me.address.clone(),
            epoch: self.epoch,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn me(id: u32) -> Candidate {
        Candidate {
            id,
            address: "127.0.0.1:1".into(),
            lease: Duration::from_secs(2),
        }
    }

    #[test]
    fn one_process_holds_a_directory_and_each_start_is_a_new_epoch() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut store = FileStore::open(dir.path(), me(1)).expect("open");
        assert!(matches!(
            FileStore::open(dir.path(), me(2)),
            Err(StoreError::Locked(_))
        ));
        let won = store.campaign().expect("won");
        assert_eq!(won.epoch, ControllerEpoch(1));
        assert!(won.metadata.is_none(), "a new cluster");
        let mut metadata = Metadata::default();
        metadata.begin();
        let _: isr::ControllerEffects<bytes::Bytes> =
            metadata.controller.take_office(won.epoch, isr::Tick(0));
        metadata.set(Record::NextPartition(1));
        let change = metadata.finish(Vec::new());
        store.commit(&change.records, &metadata).expect("written");
        drop(store);

        let mut again = FileStore::open(dir.path(), me(1)).expect("the lock went with it");
        let won = again.campaign().expect("won");
        assert_eq!(won.epoch, ControllerEpoch(2));
        assert_eq!(
            won.metadata.map(|m| m.controller.epoch()),
            Some(ControllerEpoch(1))
        );
    }

    /// A store on `dir` that won the role.
    fn won(dir: &Path) -> FileStore {
        let mut store = FileStore::open(dir, me(1)).expect("open");
        store.campaign().expect("won");
        store
    }

    /// Makes `record` in `metadata` and commits it to `store`.
    fn commit_one(store: &mut FileStore, metadata: &mut Metadata, record: Record) {
        metadata.begin();
        metadata.set(record);
        let change = metadata.finish(Vec::new());
        store.commit(&change.records, metadata).expect("commit");
    }

    /// Topic `topic-{t}` over `ids`.
    fn topic(t: usize, ids: &[isr::PartitionId]) -> Record {
        Record::Topic {
            name: format!("topic-{t}"),
            partitions: Some(ids.to_vec()),
        }
    }

    /// A topic's id is made durable with the topic: a restart finds each topic with the id it
    /// was given, and none for a topic deleted since.
    #[test]
    fn topic_ids_survive_a_restart_and_go_with_their_topics() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut store = won(dir.path());
        let (cfg, mut metadata) = crate::controller::metadata::tests::three_brokers();
        store
            .commit(&metadata.records(), &metadata)
            .expect("brokers");
        let spec = |name: &str| crate::controller::metadata::tests::spec(name, 1, &[]);
        for name in ["a", "b", "c"] {
            metadata.begin();
            let effects = metadata.create_topic(&cfg, &spec(name)).expect("create");
            let change = metadata.finish(effects);
            store.commit(&change.records, &metadata).expect("commit");
        }
        metadata.begin();
        metadata.delete_topic("b").expect("delete");
        let change = metadata.finish(Vec::new());
        store.commit(&change.records, &metadata).expect("commit");
        drop(store);

        let mut again = FileStore::open(dir.path(), me(1)).expect("open");
        let restarted = again.campaign().expect("won").metadata.expect("metadata");
        assert_eq!(restarted.topic_ids, metadata.topic_ids);
        assert_eq!(
            restarted
                .topic_ids
                .iter()
                .map(|(n, _)| n)
                .collect::<Vec<_>>(),
            ["a", "c"],
            "b's id went with it"
        );
        assert_ne!(restarted.topic_ids.get("a"), restarted.topic_ids.get("c"));
    }

    /// A snapshot is durable but the log still holds the batches it took (the controller
    /// stopped before dropping them, or while changes went on during the writing): a restart
    /// replays the whole log onto the snapshot and finds the metadata as it was.
    #[test]
    fn a_snapshot_over_a_log_that_still_holds_its_batches_restarts_to_the_same_metadata() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut store = won(dir.path());
        let mut metadata = Metadata::default();
        let ids: Vec<isr::PartitionId> = (0..100).map(isr::PartitionId).collect();
        let mut t = 0;
        while store.folding.is_none() {
            commit_one(&mut store, &mut metadata, topic(t, &ids));
            t += 1;
        }
        // The snapshot is written; changes made meanwhile, one of them over an older value.
        let (_, answer) = store.folding.take().expect("folding");
        answer.recv().expect("an answer").expect("snapshot written");
        // No other snapshot may start and fold the log meanwhile: its writer could finish
        // before the next commit looks, and take the batches this test keeps.
        store.snapshot_bytes = u64::MAX;
        for change in [
            Record::NextPartition(3),
            Record::Topic {
                name: "topic-0".into(),
                partitions: None,
            },
        ] {
            commit_one(&mut store, &mut metadata, change);
        }
        let logged = std::fs::metadata(dir.path().join(LOG)).expect("log").len();
        assert!(
            logged > SNAPSHOT_AFTER,
            "the log kept the snapshot's batches"
        );
        drop(store);
        let mut again = FileStore::open(dir.path(), me(1)).expect("open");
        assert_eq!(again.campaign().expect("won").metadata, Some(metadata));
    }

    /// Changes go to the log until it outgrows the snapshot; then a snapshot takes them and the
    /// log starts again. Either way a restart finds the metadata as it was, and a torn last
    /// change is cut off.
    #[test]
    fn the_log_folds_into_a_snapshot_and_a_restart_finds_every_change() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut store = won(dir.path());
        let mut metadata = Metadata::default();
        let ids: Vec<isr::PartitionId> = (1000..1100).map(isr::PartitionId).collect();
        let mut snapshots = 0;
        for t in 0..8000 {
            let logged = store.log.as_ref().map_or(0, MetadataLog::bytes);
            commit_one(&mut store, &mut metadata, topic(t, &ids));
            // The snapshot's writer is waited for here, to count the folds.
            store.fold(true).expect("fold");
            if store.log.as_ref().map_or(0, MetadataLog::bytes) < logged {
                snapshots += 1;
            }
        }
        assert!(snapshots >= 1, "the log was folded");
        let log_path = dir.path().join(LOG);
        let logged = std::fs::metadata(&log_path).expect("log").len();
        assert!(logged <= SNAPSHOT_AFTER.max(store.snapshot_bytes) + 1024);
        drop(store);
        let mut again = FileStore::open(dir.path(), me(1)).expect("open");
        assert_eq!(
            again.campaign().expect("won").metadata,
            Some(metadata.clone())
        );
        drop(again);
        // A change torn in the writing: the rest of the metadata is all there.
        let mut torn = won(dir.path());
        let before = metadata.clone();
        commit_one(&mut torn, &mut metadata, Record::NextPartition(7));
        drop(torn);
        let length = std::fs::metadata(&log_path).expect("log").len();
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&log_path)
            .expect("open");
        file.set_len(length - 1).expect("tear");
        let mut again = FileStore::open(dir.path(), me(1)).expect("open");
        assert_eq!(again.campaign().expect("won").metadata, Some(before));
    }
}
