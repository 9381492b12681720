//! The core's [`Log`] over segment files: one Kafka record batch per entry.
//!
//! An in-memory index (offset → segment, position, length, epoch) is rebuilt by a recovery scan
//! when the log is opened; the scan stops at the first torn or corrupt batch and cuts the log
//! there, dropping any later segment, since nothing after a gap can be trusted to follow it.
//!
//! The log start offset (KIP-107) is kept in a checkpoint beside the segments, written durably
//! before any segment below it is removed; at open, the larger of it and the first segment's
//! base offset is the log start (a checkpoint that cannot be read is ignored, with a warning:
//! the segments say where the log starts, and at worst records deleted logically come back).
//! Segments wholly below it are removed; the one that holds it stays until it is wholly below.
//! Where compaction's cleanings ended is kept the same way ([`CleanedTo`]), clamped to the log
//! recovered.
//!
//! `Log` methods are infallible by design (a failed disk is not a protocol event): the first I/O
//! error is kept in [`DiskLog::failure`], every later change is refused, and the broker stops
//! the replica when it sees the failure.

use super::batch;
use super::checkpoint;
use super::cleaned_to::CleanedTo;
use super::cleaner::{self, Cleaned, CleaningPolicy, Job, SegmentJob};
use super::segment::{self, BatchPosition, Segment};
use bytes::Bytes;
use isr::{Entry, EntryShape, Log, Offset};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use tracing::warn;

/// A new segment is started once the active one has grown past this.
pub const DEFAULT_SEGMENT_BYTES: u64 = 128 << 20;

/// The log start offset checkpoint's file name, in the log's directory.
pub const LOG_START: &str = "log-start-offset.json";

#[derive(Debug)]
struct Indexed {
    at: BatchPosition,
    segment: usize,
}

#[derive(Debug)]
pub struct DiskLog {
    dir: PathBuf,
    /// The log start offset: no entry of the index ends at or below it.
    start: Offset,
    segment_bytes: u64,
    /// The active segment also rolls once a batch is this many milliseconds newer than its
    /// first batch (the topic's `segment.ms`); `None`: only by size.
    segment_ms: Option<i64>,
    segments: Vec<Segment>,
    index: Vec<Indexed>,
    flushed: Offset,
    failure: Option<io::Error>,
    /// How far compaction may clean: the core's bound (its high watermark, rule 18), lowered
    /// by a truncation below it.
    clean_bound: Offset,
    /// Where the cleanings installed ended: what lies below was cleaned once.
    cleaned_to: CleanedTo,
    /// How many truncations cut the log below `clean_bound`: see [`Job::truncations`].
    truncations: u64,
}

impl DiskLog {
    /// Opens (or creates) the log in `dir`, recovering it: see the module documentation.
    pub fn open(dir: &Path, segment_bytes: u64) -> io::Result<DiskLog> {
        fs::create_dir_all(dir)?;
        let mut bases: Vec<u64> = fs::read_dir(dir)?
            .filter_map(|e| e.ok())
            .filter_map(|e| segment::parse_name(&e.file_name().to_string_lossy()))
            .collect();
        bases.sort_unstable();
        let mut log = DiskLog {
            dir: dir.to_path_buf(),
            start: Offset(0),
            segment_bytes,
            segment_ms: None,
            segments: Vec::new(),
            index: Vec::new(),
            flushed: Offset(0),
            failure: None,
            clean_bound: Offset(0),
            cleaned_to: CleanedTo::read(dir),
            truncations: 0,
        };
        remove_cleanings(dir)?;
        let mut cut = false;
        for base in bases {
            // The first segment starts wherever retention left the log; each next one where
            // the one before it ends.
            let expected = if log.segments.is_empty() {
                base
            } else {
                log.end()
            };
            if cut || base != expected {
                warn!(dir = %dir.display(), base, expected, "removing segment after a gap");
                fs::remove_file(dir.join(segment::file_name(base)))?;
                cut = true;
                continue;
            }
            let (mut seg, scan) = Segment::open_and_scan(dir, base)?;
            if let Some((valid, why)) = scan.torn {
                warn!(
                    segment = %seg.path.display(),
                    valid_bytes = valid,
                    dropped_bytes = seg.size() - valid,
                    reason = %why,
                    "truncating torn or corrupt log tail"
                );
                seg.truncate(valid)?;
                seg.sync()?;
                cut = true;
            }
            let n = log.segments.len();
            for at in scan.batches {
                log.index.push(Indexed { at, segment: n });
            }
            log.segments.push(seg);
        }
        if log.segments.is_empty() {
            log.segments.push(Segment::create(dir, 0)?);
            sync_dir(dir)?;
        }
        let first = Offset(log.segments.first().map_or(0, |s| s.base));
        let checkpointed = match checkpoint::read::<Offset>(&dir.join(LOG_START)) {
            Ok(start) => start.unwrap_or_default(),
            Err(e) => {
                warn!(error = %e, "ignoring the log start checkpoint; the segments say where the log starts");
                first
            }
        };
        log.start = first;
        log.drop_below(checkpointed)?;
        log.flushed = Offset(log.end());
        // A cleaner checkpoint past a tail that recovery cut goes, before anything is appended
        // there.
        if log.cleaned_to.cut(log.flushed)? {
            sync_dir(dir)?;
        }
        Ok(log)
    }

    /// Drops what lies below `offset` from the index and removes the segments wholly below it
    /// (the checkpoint saying so is already durable); past the end, every segment goes and an
    /// empty one starts at `offset`.
    fn drop_below(&mut self, offset: Offset) -> io::Result<()> {
        if offset <= self.start {
            return Ok(());
        }
        let beyond_end = offset.0 > self.end();
        let gone = self
            .index
            .partition_point(|e| e.at.base + e.at.width <= offset.0);
        self.index.drain(..gone);
        self.start = offset;
        // Segment `i` is wholly below `offset` when the next one starts at or below it.
        let below = if beyond_end {
            self.segments.len()
        } else {
            self.segments
                .windows(2)
                .take_while(|pair| pair[1].base <= offset.0)
                .count()
        };
        if below == 0 {
            return Ok(());
        }
        for seg in self.segments.drain(..below) {
            fs::remove_file(&seg.path)?;
        }
        for e in &mut self.index {
            e.segment -= below;
        }
        if self.segments.is_empty() {
            self.segments.push(Segment::create(&self.dir, offset.0)?);
        }
        sync_dir(&self.dir)
    }

    /// When the active segment rolls: at `segment_bytes`, or once a batch is `segment_ms`
    /// newer than its first (the topic's `segment.bytes` and `segment.ms`, which may change).
    pub fn set_rolling(&mut self, segment_bytes: u64, segment_ms: Option<i64>) {
        self.segment_bytes = segment_bytes.max(1);
        self.segment_ms = segment_ms;
    }

    /// The segments, oldest first: their base offsets, sizes and largest timestamps, for the
    /// retention policy.
    pub fn segments(&self) -> impl Iterator<Item = &Segment> {
        self.segments.iter()
    }

    /// The first I/O error this log met, after which it refuses every change.
    pub fn failure(&self) -> Option<&io::Error> {
        self.failure.as_ref()
    }

    /// The cleaning compaction may do now (see [`cleaner`]): of the closed segments below the
    /// core's bound (rule 18) and older than `min.compaction.lag.ms`, if they hold at least
    /// `min.cleanable.dirty.ratio` of their bytes not cleaned yet, or if their oldest dirty
    /// record is older than `max.compaction.lag.ms`. The active segment is never cleaned.
    pub fn cleaning_job(&self, policy: &CleaningPolicy, now_ms: i64) -> Option<Job> {
        let bound = self.clean_bound.0;
        let old_enough = |seg: &Segment| {
            policy.min_lag_ms <= 0
                || seg
                    .times
                    .largest()
                    .is_none_or(|t| now_ms.saturating_sub(t) >= policy.min_lag_ms)
        };
        // Segment i is closed and below the bound when the next one starts at or below it.
        let closed = self
            .segments
            .windows(2)
            .take_while(|pair| pair[1].base <= bound && old_enough(&pair[0]))
            .count();
        if closed == 0 || self.failure.is_some() {
            return None;
        }
        // Segment n is dirty when it ends past what the last cleaning covered.
        let cleaned_to = self.cleaned_to.get();
        let dirty = |n: usize| self.segments[n + 1].base > cleaned_to.0;
        let total: u64 = self.segments[..closed].iter().map(Segment::size).sum();
        let dirty_bytes: u64 = (0..closed)
            .filter(|&n| dirty(n))
            .map(|n| self.segments[n].size())
            .sum();
        // Kafka counts the lag from the first dirty segment's first batch.
        let overdue = (0..closed)
            .find(|&n| dirty(n))
            .and_then(|n| self.segments[n].times.first())
            .is_some_and(|t| now_ms.saturating_sub(t) > policy.max_lag_ms);
        if dirty_bytes == 0
            || ((dirty_bytes as f64) < policy.min_dirty_ratio * total as f64 && !overdue)
        {
            return None;
        }
        // A segment of empty batches only (runs an earlier cleaning left) has no key to learn
        // and nothing to remove: the cleaner neither reads nor writes it.
        let segments = (0..closed)
            .filter_map(|n| {
                let (lo, hi) = self.segment_span(n);
                let batches: Vec<_> = self.index[lo..hi].iter().map(|e| e.at).collect();
                if batches.iter().all(|b| b.len as usize <= batch::HEADER_LEN) {
                    return None;
                }
                let seg = &self.segments[n];
                Some(SegmentJob {
                    base: seg.base,
                    path: seg.path.clone(),
                    size: seg.size(),
                    prefix: batches.first().map_or(seg.size(), |b| b.position),
                    batches,
                })
            })
            .collect();
        Some(Job {
            segments,
            start: cleaned_to,
            end: Offset(self.segments[closed].base),
            truncations: self.truncations,
            now_ms,
            delete_retention_ms: policy.delete_retention_ms,
        })
    }

    /// Where the cleanings installed end, for the cleaner thread to make durable
    /// ([`CleanedTo::persist`]).
    pub fn cleaned_to(&self) -> CleanedTo {
        self.cleaned_to.clone()
    }

    /// Puts a finished cleaning in place: each cleaned segment replaces its segment, unless
    /// that changed since the job was made (deleted, its log start moved), in which case its
    /// cleaned copy is dropped; after a truncation below the cleaning bound, the whole
    /// cleaning is dropped ([`Job::truncations`]). Offsets, epochs and the log's end stay as
    /// they were. The renames are not made durable here (no directory fsync on the replica
    /// thread; the cleaner thread syncs the directory next, then writes the checkpoint): a
    /// crash that loses one leaves the segment as it was before the cleaning, as valid as the
    /// cleaned one, and the cleaned copy, durable already, is removed at the next open.
    /// Returns the offsets of each segment replaced, from its first batch to its end: what a
    /// trace records ([`crate::trace::Tracer::cleaned`]).
    pub fn install(&mut self, cleaned: Cleaned) -> Vec<(Offset, Offset)> {
        let mut installed = Vec::new();
        if self.failure.is_some() || cleaned.truncations != self.truncations {
            cleaner::discard(&cleaned.segments);
            return installed;
        }
        for c in cleaned.segments {
            let Some(n) = self.segments.iter().position(|s| s.base == c.job.base) else {
                let _ = fs::remove_file(&c.temp);
                continue;
            };
            let (lo, hi) = self.segment_span(n);
            let unchanged = self.segments[n].size() == c.job.size
                && self.index[lo..hi]
                    .iter()
                    .map(|e| e.at)
                    .eq(c.job.batches.iter().copied());
            if !unchanged {
                let _ = fs::remove_file(&c.temp);
                continue;
            }
            let result = fs::rename(&c.temp, &self.segments[n].path)
                .and_then(|()| Segment::open_cleaned(&self.dir, c.job.base, c.times));
            let Some(segment) = self.record(result) else {
                return installed;
            };
            self.segments[n] = segment;
            if let (Some(first), Some(last)) = (c.batches.first(), c.batches.last()) {
                installed.push((Offset(first.base), Offset(last.base + last.width)));
            }
            let entries = c.batches.into_iter().map(|at| Indexed { at, segment: n });
            self.index.splice(lo..hi, entries);
        }
        self.cleaned_to.installed(cleaned.end);
        installed
    }

    /// The index positions of segment `n`'s entries.
    fn segment_span(&self, n: usize) -> (usize, usize) {
        let lo = self.index.partition_point(|e| e.segment < n);
        let hi = self.index.partition_point(|e| e.segment <= n);
        (lo, hi)
    }

    fn end(&self) -> u64 {
        let empty = self
            .segments
            .first()
            .map_or(0, |s| s.base)
            .max(self.start.0);
        self.index.last().map_or(empty, |i| i.at.base + i.at.width)
    }

    /// The index position of the entry holding `offset`.
    fn find(&self, offset: Offset) -> Option<usize> {
        let i = self
            .index
            .partition_point(|e| e.at.base + e.at.width <= offset.0);
        (i < self.index.len() && self.index[i].at.base <= offset.0).then_some(i)
    }

    fn load(&self, i: usize) -> Option<Entry<Bytes>> {
        let e = self.index.get(i)?;
        match self.segments[e.segment].read(e.at.position, e.at.len) {
            Ok(bytes) => Some(Entry {
                epoch: e.at.epoch,
                record: Bytes::from(bytes),
                producer: e.at.producer,
            }),
            Err(err) => {
                // Reads cannot record the failure (they take &self); a missing entry makes the
                // replica answer with fewer records, and the next write will fail the log.
                warn!(dir = %self.dir.display(), offset = e.at.base, %err, "log read failed");
                None
            }
        }
    }

    /// How many entries from the one holding `from` (and below `until`) fit in `max_bytes`:
    /// always at least one if there is any, as for [`batch::fitting`]. Answered from the index,
    /// so that a reader can ask the log for exactly what it will send instead of reading
    /// entries from disk only to drop them.
    pub fn entries_within(&self, from: Offset, until: Offset, max_bytes: usize) -> usize {
        let Some(first) = self.find(from) else {
            return 0;
        };
        let sizes = self.index[first..]
            .iter()
            .take_while(|e| e.at.base < until.0)
            .map(|e| e.at.len as usize);
        batch::fitting(sizes, max_bytes)
    }

    /// The first record at or after `target` (milliseconds) below `until`: its offset and
    /// timestamp. The segments' time indexes find its batch; the batch's record headers give
    /// the record (see [`batch::first_at_or_after`] for compressed batches).
    pub fn offset_for_time(&self, target: i64, until: Offset) -> Option<(Offset, i64)> {
        let base = self
            .segments
            .iter()
            .find_map(|s| s.times.first_at_or_after(target, until.0))?;
        let entry = self.load(self.find(Offset(base))?)?;
        let (offset, timestamp) = batch::first_at_or_after(&entry.record, target)?;
        Some((Offset(u64::try_from(offset).ok()?), timestamp))
    }

    /// The first record with the largest timestamp below `until` (ListOffsets' max-timestamp).
    pub fn max_timestamp_record(&self, until: Offset) -> Option<(Offset, i64)> {
        let (_, base) = self
            .segments
            .iter()
            .filter_map(|s| s.times.max_below(until.0))
            // The largest timestamp; of equals, the earliest batch.
            .min_by_key(|&(t, base)| (std::cmp::Reverse(t), base))?;
        let entry = self.load(self.find(Offset(base))?)?;
        let (offset, timestamp) = batch::latest_record(&entry.record)?;
        Some((Offset(u64::try_from(offset).ok()?), timestamp))
    }

    /// Makes everything appended so far durable: one fsync per segment written since, however
    /// many appends and flush requests came before it (the broker's group commit).
    fn sync(&mut self) {
        if self.failure.is_some() {
            return;
        }
        let result = self.segments.iter_mut().try_for_each(Segment::sync);
        if self.record(result).is_some() {
            self.flushed = self.log_end_offset();
        }
    }

    fn record<T>(&mut self, result: io::Result<T>) -> Option<T> {
        match result {
            Ok(v) => Some(v),
            Err(err) => {
                warn!(dir = %self.dir.display(), %err, "log I/O failed; the log is now offline");
                self.failure.get_or_insert(err);
                None
            }
        }
    }

    fn append_one(&mut self, entry: &Entry<Bytes>) -> io::Result<()> {
        let base = self.end();
        let max_timestamp = batch::max_timestamp(&entry.record).unwrap_or(-1);
        let (segment_bytes, segment_ms) = (self.segment_bytes, self.segment_ms);
        let due = |s: &Segment| {
            s.size() >= segment_bytes
                || segment_ms.zip(s.times.first()).is_some_and(|(ms, first)| {
                    s.size() > 0 && max_timestamp.saturating_sub(first) >= ms
                })
        };
        if self.segments.last().is_some_and(due) {
            self.segments.push(Segment::create(&self.dir, base)?);
            sync_dir(&self.dir)?;
        }
        let stamped = batch::stamp(&entry.record, Offset(base), entry.epoch);
        let n = self.segments.len() - 1;
        let position = self.segments[n].append(&stamped)?;
        self.segments[n].times.note(max_timestamp, base);
        let at = BatchPosition {
            base,
            width: batch::width(&stamped),
            epoch: entry.epoch,
            position,
            len: stamped.len() as u32,
            producer: batch::producer(&stamped),
        };
        self.index.push(Indexed { at, segment: n });
        Ok(())
    }

    fn truncate_index(&mut self, i: usize) -> io::Result<()> {
        let (segment, position, offset) = match self.index.get(i) {
            Some(e) => (e.segment, e.at.position, e.at.base),
            None => return Ok(()),
        };
        self.index.truncate(i);
        // A segment emptied entirely is removed, unless it is the first (the log keeps one).
        let keep = if position == 0 && segment > 0 {
            segment
        } else {
            segment + 1
        };
        for seg in self.segments.drain(keep..) {
            fs::remove_file(&seg.path)?;
        }
        if keep > segment {
            self.segments[segment].times.cut(offset);
            self.segments[segment].truncate(position)?;
        }
        sync_dir(&self.dir)
    }
}

/// Removes what a cleaning that a crash interrupted left: its temporary files, never renamed
/// over their segments.
fn remove_cleanings(dir: &Path) -> io::Result<()> {
    for entry in fs::read_dir(dir)?.filter_map(|e| e.ok()) {
        if entry
            .file_name()
            .to_string_lossy()
            .ends_with(cleaner::CLEANED_SUFFIX)
        {
            warn!(file = %entry.path().display(), "removing an unfinished cleaning");
            fs::remove_file(entry.path())?;
        }
    }
    Ok(())
}

/// Makes a directory's entries (created, renamed, removed files) durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()
}

impl Log for DiskLog {
    type Record = Bytes;

    fn log_start_offset(&self) -> Offset {
        self.start
    }

    fn log_end_offset(&self) -> Offset {
        Offset(self.end())
    }

    fn flushed_offset(&self) -> Offset {
        self.flushed
    }

    fn entry(&self, offset: Offset) -> Option<Entry<Bytes>> {
        self.load(self.find(offset)?)
    }

    /// An entry that starts below `from` — a run of offsets compaction emptied, which a
    /// follower's log may end inside of — is read from `from` on ([`batch::from_offset`]), so
    /// that what a reader gets starts where it asked.
    fn read(&self, from: Offset, until: Offset, max: usize) -> Vec<Entry<Bytes>> {
        let Some(first) = self.find(from) else {
            return Vec::new();
        };
        let mut entries: Vec<Entry<Bytes>> = (first..self.index.len())
            .take(max)
            .take_while(|&i| self.index[i].at.base < until.0)
            .map_while(|i| self.load(i))
            .collect();
        if let Some(e) = entries.first_mut() {
            if let Some(rest) = batch::from_offset(&e.record, from.0) {
                e.record = rest;
            }
        }
        entries
    }

    fn append(&mut self, entries: &[Entry<Bytes>]) {
        for entry in entries {
            if self.failure.is_some() {
                return;
            }
            let result = self.append_one(entry);
            self.record(result);
        }
    }

    fn truncate_to(&mut self, offset: Offset) {
        if self.failure.is_some() {
            return;
        }
        let cut = self
            .find(offset)
            .unwrap_or_else(|| self.index.partition_point(|e| e.at.base < offset.0));
        let Some(new_end) = self.index.get(cut).map(|e| Offset(e.at.base)) else {
            return;
        };
        if new_end < self.clean_bound {
            self.truncations += 1;
        }
        // The cleaner checkpoint goes first: the truncation's directory sync makes it durable.
        let result = self
            .cleaned_to
            .cut(new_end)
            .and_then(|_| self.truncate_index(cut));
        self.record(result);
        let end = self.log_end_offset();
        self.flushed = self.flushed.min(end);
        self.clean_bound = self.clean_bound.min(end);
    }

    /// Lets the cleaner work up to `below` (the core's high watermark: rule 18); the cleaning
    /// itself happens in the background ([`DiskLog::cleaning_job`], [`DiskLog::install`]).
    fn compact(&mut self, below: Offset) {
        self.clean_bound = self.clean_bound.max(below.min(self.log_end_offset()));
    }

    /// The checkpoint goes first, durably: a crash between it and the segments' removal
    /// leaves segments below the log start, which the next open removes.
    fn advance_log_start(&mut self, offset: Offset) {
        if self.failure.is_some() || offset <= self.start {
            return;
        }
        if let Err(e) = checkpoint::write(&self.dir.join(LOG_START), &offset) {
            self.record::<()>(Err(io::Error::other(e.to_string())));
            return;
        }
        let result = self.drop_below(offset);
        self.record(result);
        self.flushed = self.flushed.max(offset);
    }

    fn flush(&mut self) {
        if self.flushed < self.log_end_offset() {
            self.sync();
        }
    }

    /// Nothing to do: after a real crash the lost bytes are already gone, and recovery found
    /// the rest.
    fn width(record: &Bytes) -> u64 {
        batch::width(record)
    }

    fn size(record: &Bytes) -> usize {
        record.len()
    }

    /// Reads only the entries that fit, sized from the index.
    fn read_within(
        &self,
        from: Offset,
        until: Offset,
        max_entries: usize,
        max_bytes: usize,
    ) -> Vec<Entry<Bytes>> {
        let fitting = self.entries_within(from, until, max_bytes);
        self.read(from, until, max_entries.min(fitting))
    }

    fn entry_start(&self, offset: Offset) -> Offset {
        self.find(offset)
            .map_or(offset, |i| Offset(self.index[i].at.base))
    }

    fn epoch_at(&self, offset: Offset) -> Option<isr::LeaderEpoch> {
        self.find(offset).map(|i| self.index[i].at.epoch)
    }

    fn entry_shape(&self, offset: Offset) -> Option<EntryShape> {
        self.find(offset).map(|i| EntryShape {
            epoch: self.index[i].at.epoch,
            width: self.index[i].at.width,
            producer: self.index[i].at.producer,
        })
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::storage::batch::tests::{batch_at, batch_of};
    use isr::LeaderEpoch;
    use std::fs::OpenOptions;

    /// Kafka's dedupe buffer: no test log fills it.
    pub(crate) const MAP_BYTES: usize =
        crate::storage::offset_map::DEFAULT_DEDUPE_BUFFER_BYTES as usize;

    /// Cleans `job` as the cleaner thread does, with Kafka's map size and no I/O limit.
    pub(crate) fn clean_all(job: &Job) -> Cleaned {
        cleaner::clean(
            job,
            MAP_BYTES,
            &mut crate::storage::throttle::Throttle::unlimited(),
        )
        .expect("clean")
    }

    fn entry(epoch: u32, values: &[&str]) -> Entry<Bytes> {
        Entry {
            epoch: LeaderEpoch(epoch),
            record: batch_of(values),
            producer: None,
        }
    }

    fn values(log: &DiskLog) -> Vec<(u32, i64)> {
        log.read(log.log_start_offset(), log.log_end_offset(), usize::MAX)
            .iter()
            .map(|e| (e.epoch.0, batch::base_offset(&e.record).unwrap_or(-1)))
            .collect()
    }

    #[test]
    fn append_read_truncate_and_reopen_round_trip() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = DiskLog::open(dir.path(), 200).expect("open");
        log.append(&[entry(1, &["a", "b"]), entry(1, &["c"])]);
        log.append(&[entry(2, &["d", "e", "f"]), entry(3, &["g"])]);
        assert_eq!(log.log_end_offset(), Offset(7));
        assert!(log.segments.len() > 1, "small segments roll");
        assert_eq!(values(&log), vec![(1, 0), (1, 2), (2, 3), (3, 6)]);
        assert_eq!(log.entry(Offset(4)).map(|e| e.epoch), Some(LeaderEpoch(2)));
        assert_eq!(log.read(Offset(1), Offset(3), 10).len(), 2);
        assert_eq!(log.read(Offset(1), Offset(7), 1).len(), 1);
        let sizes: Vec<usize> = log.index.iter().map(|e| e.at.len as usize).collect();
        assert_eq!(
            log.entries_within(Offset(1), Offset(7), 0),
            1,
            "at least one"
        );
        assert_eq!(
            log.entries_within(Offset(1), Offset(7), sizes[0] + sizes[1]),
            2
        );
        assert_eq!(
            log.entries_within(Offset(1), Offset(3), usize::MAX),
            2,
            "up to until"
        );
        assert_eq!(
            log.entries_within(Offset(7), Offset(9), usize::MAX),
            0,
            "past the end"
        );
        log.flush();
        assert_eq!(log.flushed_offset(), Offset(7));

        log.truncate_to(Offset(3));
        assert_eq!(log.log_end_offset(), Offset(3));
        log.append(&[entry(4, &["x"])]);
        drop(log);

        let log = DiskLog::open(dir.path(), 200).expect("reopen");
        assert_eq!(values(&log), vec![(1, 0), (1, 2), (4, 3)]);
        assert_eq!(log.log_end_offset(), Offset(4));
        assert!(log.failure().is_none());
    }

    /// DeleteRecords inside a batch (KIP-107): the log start is the offset, the batch holding
    /// it stays whole and is read from its first offset, and all of it survives a reopen.
    #[test]
    fn a_log_start_inside_a_batch_keeps_the_batch_and_survives_a_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = DiskLog::open(dir.path(), 200).expect("open");
        log.append(&[entry(1, &["a", "b", "c"]), entry(1, &["d", "e", "f"])]);
        log.append(&[entry(2, &["g", "h"])]);
        log.flush();
        log.advance_log_start(Offset(4));
        let check = |log: &DiskLog| {
            assert_eq!(log.log_start_offset(), Offset(4));
            assert_eq!(log.entry_start(Offset(4)), Offset(3));
            assert_eq!(isr::log::first_boundary(log), Offset(6));
            assert_eq!(values(log), vec![(1, 3), (2, 6)]);
            let read = log.read(Offset(4), Offset(8), 10);
            assert_eq!(read.len(), 2);
            assert_eq!(batch::base_offset(&read[0].record), Some(3));
            assert_eq!(
                isr::EpochCache::from_log(log).entries(),
                &[(LeaderEpoch(1), Offset(4)), (LeaderEpoch(2), Offset(6))]
            );
        };
        check(&log);
        drop(log);
        let log = DiskLog::open(dir.path(), 200).expect("reopen");
        check(&log);
        assert_eq!(log.log_end_offset(), Offset(8));
    }

    fn timed(epoch: u32, timestamp: i64, values: &[&str]) -> Entry<Bytes> {
        Entry {
            epoch: LeaderEpoch(epoch),
            record: batch_at(timestamp, values),
            producer: None,
        }
    }

    #[test]
    fn the_time_indexes_find_offsets_by_time_across_segments_and_a_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = DiskLog::open(dir.path(), 150).expect("open");
        // Offsets 0-1 at t=100, 2 at t=50, 3-4 at t=300, 5 at t=200: several small segments.
        log.append(&[
            timed(1, 100, &["a", "b"]),
            timed(1, 50, &["c"]),
            timed(1, 300, &["d", "e"]),
            timed(2, 200, &["f"]),
        ]);
        assert!(log.segments.len() > 1);
        let end = log.log_end_offset();
        let at = |log: &DiskLog, t: i64, until: Offset| log.offset_for_time(t, until);
        assert_eq!(at(&log, 0, end), Some((Offset(0), 100)));
        assert_eq!(at(&log, 60, end), Some((Offset(0), 100)));
        assert_eq!(at(&log, 101, end), Some((Offset(3), 300)));
        assert_eq!(
            at(&log, 150, end),
            Some((Offset(3), 300)),
            "not offset 5 at 200"
        );
        assert_eq!(at(&log, 301, end), None);
        assert_eq!(at(&log, 101, Offset(3)), None, "only below until");
        assert_eq!(log.max_timestamp_record(end), Some((Offset(3), 300)));
        assert_eq!(log.max_timestamp_record(Offset(3)), Some((Offset(0), 100)));
        assert_eq!(log.max_timestamp_record(Offset(0)), None);
        drop(log);

        let mut log = DiskLog::open(dir.path(), 150).expect("reopen");
        assert_eq!(
            at(&log, 150, end),
            Some((Offset(3), 300)),
            "rebuilt by recovery"
        );
        log.truncate_to(Offset(3));
        log.append(&[timed(3, 120, &["g"])]);
        assert_eq!(at(&log, 101, log.log_end_offset()), Some((Offset(3), 120)));
        assert_eq!(
            log.max_timestamp_record(log.log_end_offset()),
            Some((Offset(3), 120))
        );
    }

    #[test]
    fn appends_are_durable_only_once_flushed_and_reads_keep_to_their_limits() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = DiskLog::open(dir.path(), DEFAULT_SEGMENT_BYTES).expect("open");
        log.append(&[entry(1, &["a", "b"]), entry(1, &["c"])]);
        assert_eq!(log.flushed_offset(), Offset(0));
        log.append(&[entry(1, &["d"])]);
        log.flush();
        assert_eq!(log.flushed_offset(), Offset(4));

        let first = log.entry(Offset(0)).expect("entry").record.len();
        let end = log.log_end_offset();
        assert_eq!(log.read_within(Offset(0), end, 10, first).len(), 1);
        assert_eq!(
            log.read_within(Offset(0), end, 10, 0).len(),
            1,
            "one always"
        );
        assert_eq!(log.read_within(Offset(0), end, 2, usize::MAX).len(), 2);
        assert_eq!(log.read_within(Offset(2), end, 10, usize::MAX).len(), 2);
    }

    #[test]
    fn a_torn_tail_is_truncated_on_recovery() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = DiskLog::open(dir.path(), DEFAULT_SEGMENT_BYTES).expect("open");
        log.append(&[entry(1, &["a"]), entry(1, &["b", "c"]), entry(1, &["d"])]);
        drop(log);
        let path = dir.path().join(segment::file_name(0));
        let len = fs::metadata(&path).expect("segment").len();
        let file = OpenOptions::new().write(true).open(&path).expect("open");
        file.set_len(len - 5).expect("tear");
        drop(file);

        let mut log = DiskLog::open(dir.path(), DEFAULT_SEGMENT_BYTES).expect("recover");
        assert_eq!(log.log_end_offset(), Offset(3));
        log.append(&[entry(2, &["e"])]);
        drop(log);
        let log = DiskLog::open(dir.path(), DEFAULT_SEGMENT_BYTES).expect("reopen");
        assert_eq!(values(&log), vec![(1, 0), (1, 1), (2, 3)]);
    }

    #[test]
    fn a_flipped_byte_cuts_the_log_there_and_drops_later_segments() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = DiskLog::open(dir.path(), 100).expect("open");
        for v in ["a", "b", "c", "d"] {
            log.append(&[entry(1, &[v])]);
        }
        let second = log.index[1].at;
        let path = log.segments[log.index[1].segment].path.clone();
        drop(log);
        let mut bytes = fs::read(&path).expect("read");
        let at = (second.position + u64::from(second.len) - 1) as usize;
        bytes[at] ^= 0x55;
        fs::write(&path, bytes).expect("write");

        let log = DiskLog::open(dir.path(), 100).expect("recover");
        assert_eq!(log.log_end_offset(), Offset(1));
        assert_eq!(values(&log), vec![(1, 0)]);
    }

    /// One batch of keyed records `(key, value)` (`None`: a tombstone) in `epoch`, at `timestamp`.
    pub(crate) fn keyed(
        epoch: u32,
        timestamp: i64,
        records: &[(&str, Option<&str>)],
    ) -> Entry<Bytes> {
        let entries: Vec<(Bytes, Option<Bytes>)> = records
            .iter()
            .map(|(k, v)| {
                (
                    Bytes::from(k.to_string()),
                    v.map(|v| Bytes::from(v.to_string())),
                )
            })
            .collect();
        Entry {
            epoch: LeaderEpoch(epoch),
            record: isr_kafka::client::records::encode_entries(&entries, timestamp)
                .expect("encodable"),
            producer: None,
        }
    }

    /// Every record of the log: (offset, key, value).
    pub(crate) fn contents(log: &DiskLog) -> Vec<(i64, String, Option<String>)> {
        log.read(log.log_start_offset(), log.log_end_offset(), usize::MAX)
            .into_iter()
            .flat_map(|e| isr_kafka::client::records::decode(e.record).expect("readable"))
            .map(|r| {
                let text = |b: Option<Bytes>| b.map(|b| String::from_utf8_lossy(&b).into_owned());
                (r.offset, text(r.key).unwrap_or_default(), text(r.value))
            })
            .collect()
    }

    /// What a cleaning below `cleaned_below` leaves of `records` (offset, key, value): each
    /// key's latest record below that point (tombstones dropped too with `drop_tombstones`),
    /// and everything above it.
    pub(crate) fn cleaned_to(
        records: &[(i64, String, Option<String>)],
        cleaned_below: i64,
        drop_tombstones: bool,
    ) -> Vec<(i64, String, Option<String>)> {
        let latest = |offset: i64, key: &str| {
            !records
                .iter()
                .any(|(o, k, _)| *o > offset && *o < cleaned_below && k == key)
        };
        records
            .iter()
            .filter(|(o, k, v)| {
                *o >= cleaned_below || (latest(*o, k) && (v.is_some() || !drop_tombstones))
            })
            .cloned()
            .collect()
    }

    #[test]
    fn cleaning_keeps_each_keys_latest_record_every_offset_and_every_epochs_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = DiskLog::open(dir.path(), 250).expect("open");
        let now = 1_000_000;
        let old = now - 10_000;
        // Epoch 1: key a written five times, b twice, a tombstone for c long ago; epoch 2:
        // more of a and b. Small segments: several close.
        let mut n = 0;
        for (epoch, key, value) in [
            (1, "a", Some("a1")),
            (1, "a", Some("a2")),
            (1, "a", Some("a3")),
            (1, "c", Some("c1")),
            (1, "b", Some("b1")),
            (1, "a", Some("a4")),
            (1, "c", None),
            (2, "a", Some("a5")),
            (2, "b", Some("b2")),
            (2, "a", Some("a6")),
            (2, "b", Some("b3")),
            (2, "a", Some("a7")),
            (2, "d", Some("d1")),
        ] {
            log.append(&[keyed(epoch, old + n, &[(key, value)])]);
            n += 1;
        }
        log.append(&[keyed(2, old + n, &[("a", Some("a8")), ("b", Some("b4"))])]);
        assert!(log.segments.len() > 2, "small segments roll");
        let end = log.log_end_offset();
        let before = contents(&log);
        let epochs = isr::EpochCache::from_log(&log);
        assert!(
            log.cleaning_job(&CleaningPolicy::eager(1000), now)
                .is_none(),
            "nothing is cleaned above the core's bound"
        );

        log.compact(end);
        let job = log
            .cleaning_job(&CleaningPolicy::eager(1000), now)
            .expect("closed segments below the bound");
        let cleaned_below = job.end.0 as i64;
        assert!(
            cleaned_below < end.0 as i64,
            "the active segment is never cleaned"
        );
        let cleaned = clean_all(&job);
        assert!(cleaned.removed_records > 0);
        log.install(cleaned);

        // Below the cleaned point, each key's latest record there stays (the tombstone too old
        // to keep goes); above it, everything stays. No offset moves.
        let expected = cleaned_to(&before, cleaned_below, true);
        assert!(expected.len() < before.len());
        assert_eq!(contents(&log), expected);
        assert_eq!(log.log_end_offset(), end);
        assert_eq!(
            isr::EpochCache::from_log(&log),
            epochs,
            "every epoch starts where it did"
        );

        // A run of emptied batches is one entry; a reader asking from inside it gets it from
        // there on.
        let run = log
            .index
            .iter()
            .find(|e| e.at.width > 1 && e.at.len as usize == batch::HEADER_LEN)
            .map(|e| e.at)
            .expect("a run of emptied batches");
        let inside = Offset(run.base + 1);
        let read = log.read(inside, end, usize::MAX);
        assert_eq!(batch::base_offset(&read[0].record), Some(inside.0 as i64));
        assert_eq!(batch::width(&read[0].record), run.width - 1);
        assert_eq!(
            read.iter().map(|e| batch::width(&e.record)).sum::<u64>(),
            end.0 - inside.0
        );

        // Nothing more to clean until more is written; the cleaned log recovers as it is.
        assert!(log
            .cleaning_job(&CleaningPolicy::eager(1000), now)
            .is_none());
        let after = contents(&log);
        drop(log);
        let log = DiskLog::open(dir.path(), 250).expect("reopen");
        assert_eq!(contents(&log), after);
        assert_eq!(log.log_end_offset(), end);
    }

    /// `min.compaction.lag.ms` keeps segments with young records out of a cleaning;
    /// `max.compaction.lag.ms` cleans a log whose dirty ratio is below the threshold once its
    /// oldest dirty record is old enough (KIP-354).
    #[test]
    fn compaction_lags_hold_young_segments_back_and_push_old_dirt_through() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = DiskLog::open(dir.path(), 250).expect("open");
        let now = 1_000_000;
        for n in 0..10 {
            log.append(&[keyed(1, now - 10_000 + n, &[("a", Some("old"))])]);
        }
        for n in 0..5 {
            log.append(&[keyed(1, now - 10 + n, &[("a", Some("new"))])]);
        }
        log.compact(log.log_end_offset());
        let eager = CleaningPolicy::eager(1000);
        let all = log.cleaning_job(&eager, now).expect("a job");
        let held_back = CleaningPolicy {
            min_lag_ms: 1000,
            ..eager
        };
        let old = log.cleaning_job(&held_back, now).expect("the old segments");
        assert!(old.end < all.end, "segments with young records wait");
        let young = log
            .segments
            .iter()
            .find(|s| s.base == old.end.0)
            .and_then(|s| s.times.largest())
            .expect("the first segment held back has a timestamp");
        assert!(now - young < 1000, "it holds a record younger than the lag");
        assert!(old
            .segments
            .iter()
            .filter_map(|j| log.segments.iter().find(|s| s.base == j.base))
            .all(|s| s.times.largest().is_some_and(|t| now - t >= 1000)));

        // Clean everything, then write a little more: little of the log is dirty.
        let cleaned = clean_all(&all);
        log.install(cleaned);
        for n in 0..6 {
            log.append(&[keyed(1, now - 5 + n, &[("b", Some("more"))])]);
        }
        log.compact(log.log_end_offset());
        let lazy = CleaningPolicy {
            min_dirty_ratio: 1.0,
            max_lag_ms: 20_000,
            ..eager
        };
        assert!(
            log.cleaning_job(&lazy, now).is_none(),
            "below the dirty ratio, within the lag"
        );
        let overdue = CleaningPolicy {
            max_lag_ms: 5,
            ..lazy
        };
        let job = log
            .cleaning_job(&overdue, now)
            .expect("past max.compaction.lag.ms, whatever the ratio");
        assert_eq!(
            job.start, all.end,
            "it starts where the last cleaning ended"
        );
    }

    /// Compressed batches are cleaned too: each loses its superseded records and is written
    /// back in its own codec, its offsets where they were.
    #[test]
    fn compressed_batches_are_cleaned_and_stay_in_their_codec() {
        use isr_kafka::compression::{recompress, Codec};
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = DiskLog::open(dir.path(), 400).expect("open");
        let codecs = [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd];
        // Batch i: a key of its own, which stays, and key a, which each next batch supersedes.
        for (i, codec) in codecs.into_iter().enumerate() {
            let (own, value) = (format!("k{i}"), i.to_string());
            let mut e = keyed(1, i as i64, &[(&own, Some(&value)), ("a", Some(&value))]);
            e.record = recompress(e.record, codec).expect("compress");
            log.append(&[e]);
        }
        for i in 10..20 {
            log.append(&[keyed(1, i, &[("z", Some("active"))])]);
        }
        let before = contents(&log);
        let end = log.log_end_offset();
        log.compact(end);
        let job = log
            .cleaning_job(&CleaningPolicy::eager(-1), 100)
            .expect("a job");
        let cleaned_below = job.end.0 as i64;
        assert!(
            cleaned_below >= 8,
            "the compressed batches are below {cleaned_below}"
        );
        let cleaned = clean_all(&job);
        assert!(cleaned.removed_records >= 3);
        log.install(cleaned);

        let expected = cleaned_to(&before, cleaned_below, false);
        assert_eq!(contents(&log), expected);
        assert_eq!(log.log_end_offset(), end, "no offset moved");
        // Each compressed batch is still in its codec, the first three with one record left.
        let stored = log.read(Offset(0), Offset(8), usize::MAX);
        let shapes: Vec<(Option<Codec>, usize)> = stored
            .iter()
            .map(|e| {
                let records = isr_kafka::client::records::decode(e.record.clone());
                (Codec::of(&e.record), records.map_or(0, |r| r.len()))
            })
            .collect();
        let want: Vec<(Option<Codec>, usize)> = codecs
            .iter()
            .zip([1, 1, 1, 2])
            .map(|(c, n)| (Some(*c), n))
            .collect();
        assert_eq!(shapes, want);
    }

    #[test]
    fn a_cleaning_of_a_segment_that_changed_meanwhile_is_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = DiskLog::open(dir.path(), 200).expect("open");
        for i in 0..8 {
            log.append(&[keyed(1, i, &[("k", Some("v"))])]);
        }
        log.compact(log.log_end_offset());
        let job = log
            .cleaning_job(&CleaningPolicy::eager(1000), 100)
            .expect("job");
        let cleaned = clean_all(&job);
        let temps: Vec<_> = cleaned.segments.iter().map(|s| s.temp.clone()).collect();
        // An unclean election truncates into the first segment under the cleaner.
        log.truncate_to(Offset(1));
        let before = contents(&log);
        log.install(cleaned);
        assert_eq!(contents(&log), before);
        assert!(
            temps.iter().all(|t| !t.exists()),
            "dropped copies are removed"
        );
        // A cleaning a crash interrupted is removed at the next open.
        std::fs::write(dir.path().join("00000000000000000000.log.cleaned"), b"x").expect("write");
        drop(log);
        let log = DiskLog::open(dir.path(), 200).expect("reopen");
        assert_eq!(contents(&log), before);
        assert!(!dir.path().join("00000000000000000000.log.cleaned").exists());
    }
}
