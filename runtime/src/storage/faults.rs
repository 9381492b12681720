//! Disk faults for tests, under the segment files: a failing fsync, a full disk, a crash in the
//! middle of a write, and a record of what each segment had made durable (so that a harness can
//! simulate a power loss after killing the process). `isr-faults` uses them; nothing else should.
//!
//! Off unless the environment variable [`ENV`] names a control file when the process starts.
//! Off, each hook costs one load of a [`OnceLock`] and a branch. On, the control file is read
//! before every segment write and fsync, so a test switches faults on and off while the broker
//! runs by rewriting it. It holds words, one per line (a missing or empty file: no fault):
//!
//! - `fsync-eio`: every fsync of a segment fails with EIO, syncing nothing;
//! - `write-enospc`: every append to a segment fails with ENOSPC, writing nothing;
//! - `write-torn-crash`: the next append writes the first half of its batch, then the process
//!   kills itself with SIGKILL (a crash while a batch is half written).
//!
//! With the variable set, every successful fsync of a segment also writes the segment's synced
//! length next to it, in `<base>.synced` (a new, empty segment writes 0): the bytes a power loss
//! would leave. These files are not the log's: recovery ignores them.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The environment variable that switches the fault layer on, naming its control file.
pub const ENV: &str = "ISR_STORAGE_FAULTS";
/// The suffix of the files recording a segment's synced length.
pub const SYNCED_SUFFIX: &str = "synced";

static CONTROL: OnceLock<Option<PathBuf>> = OnceLock::new();

/// The control file, if the fault layer is on.
fn control() -> Option<&'static Path> {
    CONTROL
        .get_or_init(|| std::env::var_os(ENV).map(PathBuf::from))
        .as_deref()
}

/// Whether the control file holds `word` now.
fn switched_on(control: &Path, word: &str) -> bool {
    std::fs::read_to_string(control).is_ok_and(|text| text.lines().any(|l| l.trim() == word))
}

/// Before `bytes` are appended to a segment: a full disk refuses them; a crash mid-write writes
/// half of them and kills the process.
pub fn before_write(mut file: &File, bytes: &[u8]) -> io::Result<()> {
    let Some(control) = control() else {
        return Ok(());
    };
    if switched_on(control, "write-enospc") {
        return Err(io::Error::from_raw_os_error(libc::ENOSPC));
    }
    if switched_on(control, "write-torn-crash") {
        // The half reaches the page cache, which outlives the process: recovery finds it.
        let _ = file.write_all(&bytes[..bytes.len() / 2]);
        // SAFETY: kill(2) of this very process; no memory is involved.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
    }
    Ok(())
}

/// Before a segment is fsynced: a failing disk refuses.
pub fn before_sync() -> io::Result<()> {
    match control() {
        Some(control) if switched_on(control, "fsync-eio") => {
            Err(io::Error::from_raw_os_error(libc::EIO))
        }
        _ => Ok(()),
    }
}

/// After `segment` was fsynced (or created empty) at `len` bytes: notes what a power loss would
/// leave of it. Best effort: the note is a test's aid, not the log's.
pub fn synced(segment: &Path, len: u64) {
    if control().is_some() {
        let _ = std::fs::write(segment.with_extension(SYNCED_SUFFIX), len.to_string());
    }
}
