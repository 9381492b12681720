//! Segment files opened on demand, and closed when others need the room: a broker's open files
//! are bounded, whatever the number of partitions it hosts.
//!
//! Every segment keeps its file through a [`Handle`]. A handle opens its file at first use and
//! keeps it open while it is used; once more than [`capacity`] handles are open, the least
//! recently used one is closed (the CLOCK algorithm: a handle used since the hand last passed it
//! gets a second chance). A process may hold only so many files (20,000 on the machines here,
//! and Kafka's guidance is to raise the limit past the number of segments), and an idle
//! partition's segment has no reason to hold one.
//!
//! Closing loses nothing: appended bytes are in the page cache, and an fsync through a file
//! opened later makes durable everything written to the file before it (fsync(2) is of the
//! file, not of the descriptor).

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// How many segment files the process keeps open at most, unless `ISR_OPEN_SEGMENTS` says
/// otherwise: well under the 20,000 open files a process may have here, leaving room for
/// connections and everything else.
const DEFAULT_CAPACITY: usize = 8_000;

/// The most segment files this process keeps open.
pub fn capacity() -> usize {
    static CAPACITY: OnceLock<usize> = OnceLock::new();
    *CAPACITY.get_or_init(|| {
        std::env::var("ISR_OPEN_SEGMENTS")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&n| n > 0)
            .unwrap_or(DEFAULT_CAPACITY)
    })
}

/// One segment's file, open or not.
#[derive(Debug)]
pub struct Handle {
    path: PathBuf,
    file: Mutex<Option<Arc<File>>>,
    /// Used since the clock's hand last passed.
    used: AtomicBool,
}

/// The open handles, in the order the clock's hand visits them.
struct Clock {
    open: Vec<Weak<Handle>>,
    hand: usize,
}

fn clock() -> &'static Mutex<Clock> {
    static CLOCK: OnceLock<Mutex<Clock>> = OnceLock::new();
    CLOCK.get_or_init(|| {
        Mutex::new(Clock {
            open: Vec::new(),
            hand: 0,
        })
    })
}

impl Handle {
    /// A handle on the file at `path`, created if absent. It is opened now, to fail here if it
    /// cannot be.
    pub fn create(path: &Path) -> io::Result<Arc<Handle>> {
        let handle = Arc::new(Handle {
            path: path.to_path_buf(),
            file: Mutex::new(None),
            used: AtomicBool::new(true),
        });
        handle.file()?;
        Ok(handle)
    }

    /// The file, opened if it was closed.
    pub fn file(self: &Arc<Self>) -> io::Result<Arc<File>> {
        self.used.store(true, Ordering::Relaxed);
        let mut slot = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(file) = slot.as_ref() {
            return Ok(file.clone());
        }
        let file = Arc::new(
            OpenOptions::new()
                .read(true)
                .append(true)
                .create(true)
                .truncate(false)
                .open(&self.path)?,
        );
        *slot = Some(file.clone());
        drop(slot);
        self.opened();
        Ok(file)
    }

    /// Whether the file is open now.
    #[cfg(test)]
    fn is_open(&self) -> bool {
        self.file
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// Counts this handle among the open ones, closing others past the capacity.
    fn opened(self: &Arc<Self>) {
        let mut clock = clock().lock().unwrap_or_else(|p| p.into_inner());
        clock.open.push(Arc::downgrade(self));
        let mut open = clock.open.len();
        while open > capacity() {
            let hand = clock.hand % clock.open.len();
            let Some(other) = clock.open[hand].upgrade() else {
                clock.open.swap_remove(hand);
                open -= 1;
                continue;
            };
            if Arc::ptr_eq(&other, self) || other.used.swap(false, Ordering::Relaxed) {
                clock.hand = hand + 1;
                continue;
            }
            // Closed: its file goes once no read or write holds it any more.
            *other.file.lock().unwrap_or_else(|p| p.into_inner()) = None;
            clock.open.swap_remove(hand);
            open -= 1;
        }
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // Its entry in the clock no longer upgrades, and is dropped when the hand reaches it;
        // sweep now and then so that deleted partitions leave no trail.
        if let Ok(mut clock) = clock().try_lock() {
            if clock.open.len() > 2 * capacity() {
                clock.open.retain(|w| w.strong_count() > 0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// Past the capacity the least recently used files close, and reopen on use with every
    /// byte written before. (The capacity is the process's: this test opens more than it.)
    #[test]
    fn files_past_the_capacity_close_and_reopen_with_their_bytes() {
        let dir = tempfile::tempdir().expect("tempdir");
        // Handles other tests of this process dropped keep their entries until the hand
        // reaches them: swept first, or they would reorder the clock this test checks.
        clock()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .open
            .retain(|w| w.strong_count() > 0);
        let n = capacity() + 50;
        let handles: Vec<Arc<Handle>> = (0..n)
            .map(|i| {
                let h = Handle::create(&dir.path().join(format!("{i}.log"))).expect("create");
                (&*h.file().expect("file"))
                    .write_all(format!("segment {i}").as_bytes())
                    .expect("write");
                h
            })
            .collect();
        let open = handles.iter().filter(|h| h.is_open()).count();
        assert!(open <= capacity(), "{open} open, capacity {}", capacity());
        assert!(!handles[0].is_open(), "the first, unused since, was closed");
        assert!(handles[n - 1].is_open());
        let mut text = String::new();
        use std::io::Read;
        (&*handles[0].file().expect("reopened"))
            .read_to_string(&mut text)
            .expect("read");
        assert_eq!(text, "segment 0");
        assert!(handles[0].is_open());
    }
}
