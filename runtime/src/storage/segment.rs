//! One segment file: an append-only run of stamped record batches, named after its base offset.

use super::batch::{self, ProducerStamp};
use super::faults;
use isr::LeaderEpoch;
use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

pub const SUFFIX: &str = ".log";

/// Where one batch lies: what the in-memory index keeps per entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchPosition {
    pub base: u64,
    pub width: u64,
    pub epoch: LeaderEpoch,
    pub position: u64,
    pub len: u32,
    /// The idempotent producer that wrote the batch, if any.
    pub producer: Option<ProducerStamp>,
}

/// How a recovery scan ended.
#[derive(Debug)]
pub struct Scan {
    pub batches: Vec<BatchPosition>,
    /// Set when the scan stopped before the end of the file: the valid prefix length and why.
    pub torn: Option<(u64, String)>,
}

#[derive(Debug)]
pub struct Segment {
    pub base: u64,
    pub path: PathBuf,
    file: File,
    size: u64,
    /// Appended to (or created) since the last fsync.
    dirty: bool,
}

/// The file name of the segment starting at `base`, sortable as text.
pub fn file_name(base: u64) -> String {
    format!("{base:020}{SUFFIX}")
}

/// The base offset a segment file name encodes, if it is one.
pub fn parse_name(name: &str) -> Option<u64> {
    name.strip_suffix(SUFFIX)?.parse().ok()
}

impl Segment {
    pub fn create(dir: &Path, base: u64) -> io::Result<Segment> {
        let path = dir.join(file_name(base));
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .truncate(false)
            .open(&path)?;
        let size = file.metadata()?.len();
        if size == 0 {
            faults::synced(&path, 0);
        }
        Ok(Segment {
            base,
            path,
            file,
            size,
            dirty: true,
        })
    }

    /// Opens an existing segment and scans it from the start: see [`scan`].
    pub fn open_and_scan(dir: &Path, base: u64) -> io::Result<(Segment, Scan)> {
        let segment = Segment::create(dir, base)?;
        let reader = BufReader::with_capacity(1 << 20, segment.file.try_clone()?);
        let scan = scan(reader, segment.size, base);
        Ok((segment, scan))
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// Appends one stamped batch, returning where it lies.
    pub fn append(&mut self, bytes: &[u8]) -> io::Result<u64> {
        faults::before_write(&mut self.file, bytes)?;
        let position = self.size;
        self.file.write_all(bytes)?;
        self.size += bytes.len() as u64;
        self.dirty = true;
        Ok(position)
    }

    pub fn read(&self, position: u64, len: u32) -> io::Result<Vec<u8>> {
        let mut buf = vec![0; len as usize];
        self.file.read_exact_at(&mut buf, position)?;
        Ok(buf)
    }

    /// Cuts the file at `len` bytes.
    pub fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.file.set_len(len)?;
        self.size = len;
        self.dirty = true;
        Ok(())
    }

    pub fn sync(&mut self) -> io::Result<()> {
        if self.dirty {
            faults::before_sync()?;
            self.file.sync_data()?;
            self.dirty = false;
            faults::synced(&self.path, self.size);
        }
        Ok(())
    }
}

/// Reads a segment of `size` bytes starting at offset `base` from `reader`, validating every
/// batch (length, magic, CRC-32C, contiguous offsets) until the first that fails. A length
/// prefix that claims more bytes than the segment has left is a torn batch, found without
/// reading (or allocating) what it claims.
pub fn scan(mut reader: impl Read, size: u64, base: u64) -> Scan {
    let mut batches = Vec::new();
    let mut position = 0u64;
    let mut next = base;
    let mut buf = Vec::new();
    let torn = loop {
        if position == size {
            break None;
        }
        let mut prefix = [0u8; batch::LENGTH_PREFIX];
        if reader.read_exact(&mut prefix).is_err() {
            break Some((position, "torn batch header".to_string()));
        }
        let total = match batch::total_len(&prefix) {
            Ok(total) => total,
            Err(e) => break Some((position, e.to_string())),
        };
        if total as u64 > size - position {
            break Some((position, format!("torn batch of {total} bytes")));
        }
        buf.clear();
        buf.extend_from_slice(&prefix);
        buf.resize(total, 0);
        if reader.read_exact(&mut buf[batch::LENGTH_PREFIX..]).is_err() {
            break Some((position, format!("torn batch of {total} bytes")));
        }
        if let Err(e) = batch::validate(&buf) {
            break Some((position, e.to_string()));
        }
        if batch::base_offset(&buf) != i64::try_from(next).ok() {
            break Some((position, format!("batch does not start at offset {next}")));
        }
        let width = batch::width(&buf);
        batches.push(BatchPosition {
            base: next,
            width,
            epoch: batch::leader_epoch(&buf).unwrap_or_default(),
            position,
            len: total as u32,
            producer: batch::producer(&buf),
        });
        next += width;
        position += total as u64;
    };
    Scan { batches, torn }
}
