//! One segment file: an append-only run of stamped record batches, named after its base offset,
//! with its time index.

use super::batch;
use super::faults;
use super::handles::Handle;
use isr::{LeaderEpoch, ProducerBatch};
use std::io::{self, BufReader, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
    pub producer: Option<ProducerBatch>,
}

/// A segment's time index, as Kafka keeps one per segment: (timestamp, base offset) of each
/// batch that raised the segment's largest timestamp so far, so timestamps grow along it. The
/// first batch whose largest timestamp reaches some time is the first entry at or after it;
/// and the segment's largest timestamp (which retention by time looks at) is the last entry.
/// Rebuilt by the recovery scan, like the offset index.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TimeIndex {
    entries: Vec<(i64, u64)>,
}

impl TimeIndex {
    /// Notes a batch appended at `base` whose largest timestamp is `max_timestamp`.
    pub fn note(&mut self, max_timestamp: i64, base: u64) {
        if self.entries.last().is_none_or(|&(t, _)| max_timestamp > t) {
            self.entries.push((max_timestamp, base));
        }
    }

    /// The first batch's largest timestamp, if the segment holds a batch with one: where
    /// rolling by time (`segment.ms`) counts from, as in Kafka.
    pub fn first(&self) -> Option<i64> {
        self.entries.first().map(|&(t, _)| t)
    }

    /// The segment's largest timestamp, if it holds a batch with one.
    pub fn largest(&self) -> Option<i64> {
        self.entries.last().map(|&(t, _)| t)
    }

    /// Forgets batches at or above `offset` (truncation).
    pub fn cut(&mut self, offset: u64) {
        let keep = self.entries.partition_point(|&(_, base)| base < offset);
        self.entries.truncate(keep);
    }

    /// The base offset of the first batch below `until` whose largest timestamp is at or after
    /// `target`.
    pub fn first_at_or_after(&self, target: i64, until: u64) -> Option<u64> {
        let i = self.entries.partition_point(|&(t, _)| t < target);
        self.entries
            .get(i)
            .map(|&(_, base)| base)
            .filter(|&base| base < until)
    }

    /// The largest timestamp of the batches below `until`, and the base offset of the first
    /// batch that has it.
    pub fn max_below(&self, until: u64) -> Option<(i64, u64)> {
        let n = self.entries.partition_point(|&(_, base)| base < until);
        n.checked_sub(1).map(|i| self.entries[i])
    }
}

/// How a recovery scan ended.
#[derive(Debug)]
pub struct Scan {
    pub batches: Vec<BatchPosition>,
    /// The valid batches' time index.
    pub times: TimeIndex,
    /// Set when the scan stopped before the end of the file: the valid prefix length and why.
    pub torn: Option<(u64, String)>,
}

#[derive(Debug)]
pub struct Segment {
    pub base: u64,
    pub path: PathBuf,
    /// Its file, open only while used ([`super::handles`]).
    file: Arc<Handle>,
    size: u64,
    /// Appended to (or created) since the last fsync.
    dirty: bool,
    pub times: TimeIndex,
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
        let file = Handle::create(&path)?;
        let size = file.file()?.metadata()?.len();
        if size == 0 {
            faults::synced(&path, 0);
        }
        Ok(Segment {
            base,
            path,
            file,
            size,
            dirty: true,
            times: TimeIndex::default(),
        })
    }

    /// Opens the segment a cleaning wrote, fsynced and renamed over the one at `base`: durable
    /// already, so the next group commit has nothing to sync in it.
    pub fn open_cleaned(dir: &Path, base: u64, times: TimeIndex) -> io::Result<Segment> {
        let mut segment = Segment::create(dir, base)?;
        segment.dirty = false;
        segment.times = times;
        faults::synced(&segment.path, segment.size);
        Ok(segment)
    }

    /// Opens an existing segment and scans it from the start: see [`scan`].
    pub fn open_and_scan(dir: &Path, base: u64) -> io::Result<(Segment, Scan)> {
        let mut segment = Segment::create(dir, base)?;
        let reader = BufReader::with_capacity(1 << 20, segment.file.file()?.try_clone()?);
        let mut scan = scan(reader, segment.size, base);
        segment.times = std::mem::take(&mut scan.times);
        Ok((segment, scan))
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// Appends one stamped batch, returning where it lies.
    pub fn append(&mut self, bytes: &[u8]) -> io::Result<u64> {
        let file = self.file.file()?;
        faults::before_write(&file, bytes)?;
        let position = self.size;
        (&*file).write_all(bytes)?;
        self.size += bytes.len() as u64;
        self.dirty = true;
        Ok(position)
    }

    pub fn read(&self, position: u64, len: u32) -> io::Result<Vec<u8>> {
        let mut buf = vec![0; len as usize];
        self.file.file()?.read_exact_at(&mut buf, position)?;
        Ok(buf)
    }

    /// Cuts the file at `len` bytes (the caller cuts the time index).
    pub fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.file.file()?.set_len(len)?;
        self.size = len;
        self.dirty = true;
        Ok(())
    }

    pub fn sync(&mut self) -> io::Result<()> {
        if self.dirty {
            faults::before_sync()?;
            self.file.file()?.sync_data()?;
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
    let mut times = TimeIndex::default();
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
        if let Err(e) = batch::validate_stored(&buf) {
            break Some((position, e.to_string()));
        }
        if batch::base_offset(&buf) != i64::try_from(next).ok() {
            break Some((position, format!("batch does not start at offset {next}")));
        }
        let width = batch::width(&buf);
        times.note(batch::max_timestamp(&buf).unwrap_or(-1), next);
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
    Scan {
        batches,
        times,
        torn,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_time_index_finds_the_first_batch_reaching_a_time() {
        let mut t = TimeIndex::default();
        // Batches at 0, 3, 5, 9 with largest timestamps 100, 90, 300, 200.
        for (ts, base) in [(100, 0), (90, 3), (300, 5), (200, 9)] {
            t.note(ts, base);
        }
        assert_eq!(t.first_at_or_after(50, 20), Some(0));
        assert_eq!(t.first_at_or_after(100, 20), Some(0));
        assert_eq!(t.first_at_or_after(101, 20), Some(5));
        assert_eq!(t.first_at_or_after(101, 5), None, "not below until");
        assert_eq!(t.first_at_or_after(301, 20), None);
        assert_eq!(t.max_below(20), Some((300, 5)));
        assert_eq!(t.max_below(5), Some((100, 0)));
        assert_eq!(t.max_below(0), None);
        t.cut(5);
        assert_eq!(t.max_below(20), Some((100, 0)));
        t.note(150, 5);
        assert_eq!(t.first_at_or_after(101, 20), Some(5));
    }
}
