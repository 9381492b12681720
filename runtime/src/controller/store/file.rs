//! The file store: the controller's metadata in one file of a directory, for one machine.
//!
//! A lock on the directory is the controller role: the process that holds it is the only
//! controller, and the kernel releases it when the process dies, however it dies. So a second
//! controller on the same directory is refused at start, every write is the holder's, and the
//! role is never lost while the process runs. Each start is an election: the controller epoch
//! goes up by one, so brokers can tell a restarted controller from the one before.

use super::format;
use super::{Candidate, StoreError, Won};
use crate::controller::metadata::Metadata;
use crate::storage::checkpoint;
use crate::wire::admin::ControllerInfo;
use isr::ControllerEpoch;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use tokio::sync::watch;

const METADATA: &str = "metadata.bin";
const LOCK: &str = "controller.lock";

pub struct FileStore {
    dir: PathBuf,
    me: Candidate,
    /// Held open for the lock's sake.
    _lock: File,
    epoch: ControllerEpoch,
    /// The role is never lost while the process runs: this never says otherwise.
    lost: watch::Sender<bool>,
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
        })
    }

    fn path(&self) -> PathBuf {
        self.dir.join(METADATA)
    }

    fn load(&self) -> Result<Option<Metadata>, StoreError> {
        let path = self.path();
        match std::fs::read(&path) {
            Ok(bytes) => format::decode(&bytes, &path.display().to_string()).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(StoreError::Io { path, source }),
        }
    }

    /// The lock is already held: the role is won. The new epoch is the stored one plus one.
    pub fn campaign(&mut self) -> Result<Won, StoreError> {
        let metadata = self.load()?;
        self.epoch = metadata
            .as_ref()
            .map_or(ControllerEpoch(1), |m| m.controller.epoch().next());
        Ok(Won {
            epoch: self.epoch,
            metadata,
        })
    }

    pub fn commit(&mut self, metadata: Option<&Metadata>) -> Result<(), StoreError> {
        let Some(metadata) = metadata else {
            return Ok(());
        };
        checkpoint::write_bytes(&self.path(), &format::encode(metadata)).map_err(|e| match e {
            checkpoint::CheckpointError::Io { path, source } => StoreError::Io { path, source },
            other => StoreError::Unavailable(other.to_string()),
        })
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
        let (controller, _) =
            isr::Controller::take_over::<()>(&isr::Controller::new(), won.epoch, isr::Tick(0));
        let metadata = Metadata {
            controller,
            ..Metadata::default()
        };
        store.commit(Some(&metadata)).expect("written");
        drop(store);

        let mut again = FileStore::open(dir.path(), me(1)).expect("the lock went with it");
        let won = again.campaign().expect("won");
        assert_eq!(won.epoch, ControllerEpoch(2));
        assert_eq!(
            won.metadata.map(|m| m.controller.epoch()),
            Some(ControllerEpoch(1))
        );
    }
}
