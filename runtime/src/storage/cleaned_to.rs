//! How far a log was cleaned, kept across restarts (Kafka's `cleaner-offset-checkpoint`): below
//! it, every key has one record at most, so a cleaning reads only what lies above it for the
//! latest record of each key ([`super::cleaner`]). Without it a restarted broker would read and
//! rewrite every compacted log whole once more.
//!
//! The checkpoint never claims more than what is installed and durable: it is written only
//! after the directory holding the cleaned segments' renames was synced, and a truncation
//! below it removes it (durably, with the truncation's own directory sync) before anything is
//! appended there again. A claim too high would let records written after a truncation pass
//! for cleaned and keep their superseded versions forever; too low only costs a cleaning.

use super::checkpoint::{self, CheckpointError};
use super::disk_log::sync_dir;
use isr::Offset;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tracing::warn;

/// The checkpoint's file name, in the log's directory.
pub const CLEANER_CHECKPOINT: &str = "cleaner-offset-checkpoint.json";

/// Where a log's installed cleanings end, shared by the replica thread (which installs them
/// and truncates the log) and the cleaner thread (which makes them durable, off the replica
/// thread's time): the lock orders a truncation against a checkpoint being written.
#[derive(Clone, Debug)]
pub struct CleanedTo {
    path: PathBuf,
    offset: Arc<Mutex<Offset>>,
}

impl CleanedTo {
    /// The checkpoint in `dir`, as written; a missing one is 0, and so is one that cannot be
    /// read, with a warning naming it (it costs one full cleaning, never the broker's start).
    /// The caller clamps it to the log it recovered ([`Self::cut`]).
    pub(super) fn read(dir: &Path) -> CleanedTo {
        let path = dir.join(CLEANER_CHECKPOINT);
        let offset = match checkpoint::read::<Offset>(&path) {
            Ok(offset) => offset.unwrap_or_default(),
            Err(e) => {
                warn!(file = %path.display(), error = %e,
                    "ignoring the cleaner checkpoint; the next cleaning reads the whole log");
                Offset(0)
            }
        };
        CleanedTo {
            path,
            offset: Arc::new(Mutex::new(offset)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Offset> {
        // The value is one offset, whole whatever a panicking holder did.
        self.offset.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Where the installed cleanings end.
    pub(super) fn get(&self) -> Offset {
        *self.lock()
    }

    /// A cleaning up to `end` is installed: its renames are not durable yet, and
    /// [`Self::persist`] syncs them before writing the checkpoint.
    pub(super) fn installed(&self, end: Offset) {
        let mut offset = self.lock();
        *offset = (*offset).max(end);
    }

    /// The log ends at `end` now (truncated, or recovered shorter): what lies above is not
    /// cleaned any more, and a checkpoint that says it is goes. The removal is durable with the
    /// caller's next directory sync, which must come before anything is appended above `end`.
    /// Whether the checkpoint was removed.
    pub(super) fn cut(&self, end: Offset) -> io::Result<bool> {
        let mut offset = self.lock();
        if *offset <= end {
            return Ok(false);
        }
        *offset = end;
        match fs::remove_file(&self.path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(true),
        }
    }

    /// Makes the installed cleanings durable, on the cleaner thread: the directory first (the
    /// cleaned segments' renames), then the checkpoint, so that no crash leaves it claiming a
    /// cleaning that the crash undid. A truncation meanwhile waits for the lock, then removes
    /// what this wrote if it claims too much; what this writes never exceeds what the
    /// truncation left.
    pub fn persist(&self) -> Result<(), CheckpointError> {
        let installed = self.get();
        let dir = self.path.parent().unwrap_or(Path::new("."));
        sync_dir(dir).map_err(|source| CheckpointError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let offset = self.lock();
        checkpoint::write(&self.path, &(*offset).min(installed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::cleaner::CleaningPolicy;
    use crate::storage::disk_log::tests::{clean_all, keyed};
    use crate::storage::DiskLog;
    use isr::Log;

    /// Rounds of keys `k0`..`k7`, one record each batch, in segments of 200 bytes: several
    /// close.
    fn write_rounds(log: &mut DiskLog, rounds: std::ops::Range<i64>) {
        for round in rounds {
            for k in 0..8 {
                let (key, value) = (format!("k{k}"), format!("{round}"));
                log.append(&[keyed(1, round * 10 + k, &[(&key, Some(&value))])]);
            }
        }
    }

    /// Cleans what the log allows now, and makes it durable as the cleaner thread does; where
    /// it ended.
    fn clean_and_persist(log: &mut DiskLog) -> Offset {
        log.compact(log.log_end_offset());
        let job = log
            .cleaning_job(&CleaningPolicy::eager(-1), 1_000)
            .expect("a job");
        let cleaned = clean_all(&job);
        let end = cleaned.end;
        log.install(cleaned);
        log.cleaned_to().persist().expect("persist");
        end
    }

    #[test]
    fn a_cleaning_is_remembered_across_a_restart_and_forgotten_above_a_truncation() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = DiskLog::open(dir.path(), 200).expect("open");
        write_rounds(&mut log, 0..4);
        let end = clean_and_persist(&mut log);
        assert!(end > Offset(0));
        let path = dir.path().join(CLEANER_CHECKPOINT);
        assert!(matches!(checkpoint::read::<Offset>(&path), Ok(Some(o)) if o == end));
        drop(log);

        // Reopened, the log has nothing dirty below the checkpoint: no job, where a log that
        // forgot would clean every closed segment again.
        let mut log = DiskLog::open(dir.path(), 200).expect("reopen");
        log.compact(log.log_end_offset());
        assert!(log
            .cleaning_job(&CleaningPolicy::eager(-1), 1_000)
            .is_none());
        write_rounds(&mut log, 4..6);
        log.compact(log.log_end_offset());
        let job = log
            .cleaning_job(&CleaningPolicy::eager(-1), 1_000)
            .expect("new records");
        assert_eq!(job.start, end, "only what came since is dirty");

        // A truncation below the checkpoint removes it; the log cleans from the cut on.
        let cut = Offset(end.0 / 2);
        log.truncate_to(cut);
        assert!(!path.exists());
        assert!(log.cleaned_to().get() <= cut);
        drop(log);
        let log = DiskLog::open(dir.path(), 200).expect("reopen");
        assert_eq!(log.cleaned_to().get(), Offset(0));
    }

    #[test]
    fn a_corrupt_or_too_high_checkpoint_costs_a_cleaning_not_the_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = DiskLog::open(dir.path(), 200).expect("open");
        write_rounds(&mut log, 0..4);
        let end = log.log_end_offset();
        drop(log);
        let path = dir.path().join(CLEANER_CHECKPOINT);

        fs::write(&path, b"{not json").expect("garble");
        let mut log = DiskLog::open(dir.path(), 200).expect("a corrupt checkpoint is not fatal");
        assert_eq!(log.cleaned_to().get(), Offset(0));
        log.compact(end);
        assert_eq!(
            log.cleaning_job(&CleaningPolicy::eager(-1), 1_000)
                .map(|j| j.start),
            Some(Offset(0))
        );
        drop(log);

        // One past the log's end (a tail lost in a crash): clamped, and removed so that what
        // is appended there later is not taken for cleaned.
        checkpoint::write(&path, &Offset(end.0 + 100)).expect("write");
        let log = DiskLog::open(dir.path(), 200).expect("open");
        assert_eq!(log.cleaned_to().get(), end);
        assert!(!path.exists());
    }
}
