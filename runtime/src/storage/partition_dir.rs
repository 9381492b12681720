//! One partition's directory on a broker: its segments, high watermark checkpoint and leader
//! epoch checkpoint.

use super::checkpoint::{self, CheckpointError};
use super::disk_log::DiskLog;
use isr::{EpochCache, Offset, PartitionId};
use std::io;
use std::path::{Path, PathBuf};
use tracing::warn;

const HIGH_WATERMARK: &str = "high-watermark.json";
const LEADER_EPOCHS: &str = "leader-epochs.json";

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("opening log {path}: {source}")]
    Log { path: PathBuf, source: io::Error },
}

#[derive(Clone, Debug)]
pub struct PartitionDir {
    path: PathBuf,
}

impl PartitionDir {
    pub fn new(broker_dir: &Path, partition: PartitionId) -> PartitionDir {
        PartitionDir {
            path: broker_dir.join("partitions").join(partition.0.to_string()),
        }
    }

    /// The partitions that have a directory under `broker_dir`.
    pub fn existing(broker_dir: &Path) -> io::Result<Vec<PartitionId>> {
        let root = broker_dir.join("partitions");
        if !root.exists() {
            return Ok(Vec::new());
        }
        let mut ids: Vec<PartitionId> = std::fs::read_dir(root)?
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().to_string_lossy().parse().ok())
            .map(PartitionId)
            .collect();
        ids.sort_unstable();
        Ok(ids)
    }

    /// Recovers the log and reads the high watermark checkpoint (zero when there is none).
    pub fn open(&self, segment_bytes: u64) -> Result<(DiskLog, Offset), OpenError> {
        let log = DiskLog::open(&self.path, segment_bytes).map_err(|source| OpenError::Log {
            path: self.path.clone(),
            source,
        })?;
        // A missing or unreadable checkpoint costs nothing but time: zero is always a safe high
        // watermark (the leader's fetch answers raise it), so it never stops a broker.
        let hw = match checkpoint::read(&self.path.join(HIGH_WATERMARK)) {
            Ok(hw) => hw.unwrap_or_default(),
            Err(e) => {
                warn!(error = %e, "ignoring the high watermark checkpoint; starting from 0");
                Offset(0)
            }
        };
        Ok((log, hw))
    }

    /// Removes the directory and everything in it (the partition was deleted).
    pub fn remove(&self) -> io::Result<()> {
        match std::fs::remove_dir_all(&self.path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => self.path.parent().map_or(Ok(()), super::sync_dir),
        }
    }

    pub fn save_high_watermark(&self, hw: Offset) -> Result<(), CheckpointError> {
        checkpoint::write(&self.path.join(HIGH_WATERMARK), &hw)
    }

    /// The epoch cache as last checkpointed. The log is the truth (the core rebuilds the cache
    /// from it); the checkpoint lets recovery notice when the two disagree.
    pub fn load_epochs(&self) -> Result<Option<EpochCache>, CheckpointError> {
        checkpoint::read(&self.path.join(LEADER_EPOCHS))
    }

    pub fn save_epochs(&self, epochs: &EpochCache) -> Result<(), CheckpointError> {
        checkpoint::write(&self.path.join(LEADER_EPOCHS), epochs)
    }
}
