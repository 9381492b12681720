//! What a caller lets a search's visited set take in memory, where the set spills past that,
//! and what the spilling came to.

use super::spill::SpillError;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// A bound on the memory of one search's visited set, shared by the caller and the search: the
/// caller reads [`Budget::spilled`] and [`Budget::take_error`] once the search is over.
#[derive(Debug)]
pub struct Budget {
    /// Bytes the set's table in memory, and the index of what it put on disk, may take.
    pub limit: usize,
    /// Where the set makes its own directory for its file, at its first flush.
    pub dir: PathBuf,
    fingerprints: AtomicUsize,
    merges: AtomicUsize,
    error: Mutex<Option<SpillError>>,
}

/// What a search's visited set put on disk: the fingerprints there at the end, and the number
/// of flushes that merged the memory table into the file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Spilled {
    pub fingerprints: usize,
    pub merges: usize,
}

impl Budget {
    /// A budget for one search, shared with it ([`super::Limits::with_memory`]): the caller
    /// keeps a handle to read what the search spilled once it is over.
    pub fn new(limit: usize, dir: PathBuf) -> Arc<Budget> {
        Arc::new(Budget {
            limit,
            dir,
            fingerprints: AtomicUsize::new(0),
            merges: AtomicUsize::new(0),
            error: Mutex::new(None),
        })
    }

    /// What the set put on disk so far.
    pub fn spilled(&self) -> Spilled {
        Spilled {
            fingerprints: self.fingerprints.load(Ordering::Relaxed),
            merges: self.merges.load(Ordering::Relaxed),
        }
    }

    /// The error that ended the search, if the disk failed it (once: the error is taken).
    pub fn take_error(&self) -> Option<SpillError> {
        self.error.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// A flush left `on_disk` fingerprints in the file.
    pub(super) fn merged(&self, on_disk: usize) {
        self.fingerprints.store(on_disk, Ordering::Relaxed);
        self.merges.fetch_add(1, Ordering::Relaxed);
    }

    /// The disk failed; the first error is the one reported.
    pub(super) fn fail(&self, e: SpillError) {
        self.error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(e);
    }
}
