//! Log compaction (Kafka's log cleaner): rewrites a log's closed segments below the point the
//! core allows (its high watermark, rule 18) keeping the latest record of each key.
//!
//! The work is split so that cleaning never blocks produce or fetch. The replica thread asks
//! the log for a [`Job`] — the closed segments to clean and where their batches lie
//! ([`super::DiskLog::cleaning_job`]) — and hands it to a cleaner thread, which reads them,
//! writes each again beside it (`<segment>.cleaned`, fsynced) and returns a [`Cleaned`]. Back on
//! the replica thread, [`super::DiskLog::install`] renames each cleaned file over its segment,
//! unless the segment changed meanwhile (truncated, deleted by retention), in which case that
//! one is dropped. A crash leaves either segment, old or cleaned, both valid: the recovery scan
//! removes stray `.cleaned` files.
//!
//! What a cleaning keeps, as Kafka's cleaner does:
//! - every offset: a removed record leaves a gap in its batch, whose base offset, last offset
//!   delta, leader epoch and producer stay ([`batch::retain`]);
//! - the latest record of each key in the segments cleaned; a tombstone (null value) only
//!   until its batch is `delete.retention.ms` old;
//! - records without a key, and batches it cannot read (control batches, and compressed ones
//!   whose records do not decompress within their bound), whole; a compressed batch it removes
//!   records from is compressed again in its codec ([`Readable`]);
//! - a batch left with no record becomes part of one empty batch spanning a run of them in
//!   one leader epoch within one segment ([`batch::empty`]), so a fully cleaned run costs one
//!   header and every epoch's first offset stays an entry's; an idempotent producer's last
//!   batch stays as its own (empty) batch, so its sequence numbers survive a restart.
//!
//! A segment the cleaning removes nothing from is not written again. Its pass over a segment
//! reads and decodes each batch once (after the survey, which reads the dirty ones for the map
//! of keys, as Kafka's does): the batches before the segment's first removal are only read
//! again as bytes, in large reads, to be copied as they are.
//!
//! The latest record of each key comes from the dirty part of the log only, from where the
//! last cleaning ended ([`Job::start`], kept across restarts: [`super::CleanedTo`]) up: below,
//! each key has one record at most, which only a later one can supersede. The keys go into an
//! [`OffsetMap`] of bounded size (Kafka's dedupe buffer); when it is full, the cleaning ends
//! at the first record whose key did not fit ([`Cleaned::end`]), and the next one goes on from
//! there. That point may lie inside a segment, as in Kafka's cleaner (whose older versions
//! stopped with an error on a segment with more records than the map holds): the segment is
//! cleaned below it and kept as it is from it, so that a log makes progress whatever its
//! segments hold, at least one map's worth of keys per cleaning.
//!
//! A reader that asks from inside such a run (a follower whose log ended at a batch boundary
//! the run merged away) is given the run from where it asked ([`batch::from_offset`]).

use super::batch::{self, RecordRef};
use super::offset_map::OffsetMap;
use super::segment::{BatchPosition, TimeIndex};
use super::throttle::Throttle;
use isr::{LeaderEpoch, Offset};
use isr_kafka::compression::Readable;
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// What a cleaning temporary file's name ends with, beside its segment's.
pub const CLEANED_SUFFIX: &str = ".cleaned";

/// One closed segment to clean, as the log's index knows it.
#[derive(Clone, Debug)]
pub struct SegmentJob {
    /// Its base offset (its file name).
    pub base: u64,
    pub path: PathBuf,
    /// Its size when the job was made: a segment whose size changed is not installed.
    pub size: u64,
    /// Bytes at its start that lie below the log start: copied as they are, so that the file
    /// still starts at its base offset.
    pub prefix: u64,
    /// Its batches above the log start, in offset order.
    pub batches: Vec<BatchPosition>,
}

/// When a compacted log is cleaned, and how much of it: its topic's configs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CleaningPolicy {
    /// The share of the cleanable segments' bytes that must be dirty before a cleaning starts
    /// (`min.cleanable.dirty.ratio`).
    pub min_dirty_ratio: f64,
    /// A segment holding a record newer than this is not cleaned yet
    /// (`min.compaction.lag.ms`; 0: no lag).
    pub min_lag_ms: i64,
    /// A log whose oldest dirty record is older than this is cleaned whatever its dirty ratio
    /// (`max.compaction.lag.ms`, KIP-354).
    pub max_lag_ms: i64,
    /// How long a tombstone stays after its batch was written (`delete.retention.ms`).
    pub delete_retention_ms: i64,
}

impl CleaningPolicy {
    /// Cleans whatever is dirty at once, keeping tombstones `delete_retention_ms`: for tests.
    #[cfg(test)]
    pub fn eager(delete_retention_ms: i64) -> CleaningPolicy {
        CleaningPolicy {
            min_dirty_ratio: 0.0,
            min_lag_ms: 0,
            max_lag_ms: i64::MAX,
            delete_retention_ms,
        }
    }
}

/// A cleaning of one log: its closed segments below the point the core allows.
#[derive(Clone, Debug)]
pub struct Job {
    pub segments: Vec<SegmentJob>,
    /// Where the last cleaning ended: records from here on are dirty (written since), and only
    /// they say which record of a key is the latest.
    pub start: Offset,
    /// Where the segments end: the most this cleaning covers, if its map holds their keys.
    pub end: Offset,
    /// How many times the log had been truncated below its cleaning bound when the job was
    /// made: a cleaning made before another truncation is dropped whole, since its map may
    /// hold records that are gone (and would remove the records they superseded).
    pub truncations: u64,
    /// Wall-clock milliseconds, as record timestamps are.
    pub now_ms: i64,
    /// How long a tombstone stays after its batch was written (`delete.retention.ms`).
    pub delete_retention_ms: i64,
}

/// One segment as the cleaner wrote it again.
#[derive(Debug)]
pub struct CleanedSegment {
    pub job: SegmentJob,
    /// The cleaned file, fsynced, beside the segment.
    pub temp: PathBuf,
    pub size: u64,
    /// Its batches above the log start.
    pub batches: Vec<BatchPosition>,
    pub times: TimeIndex,
}

/// What a cleaning produced, for [`super::DiskLog::install`].
#[derive(Debug)]
pub struct Cleaned {
    pub segments: Vec<CleanedSegment>,
    /// Where the cleaning ended: the job's end, or the first record whose key did not fit in
    /// the map. Everything below holds one record of each key at most once this is installed.
    pub end: Offset,
    /// The job's [`Job::truncations`].
    pub truncations: u64,
    /// Records removed, and bytes saved, over every segment.
    pub removed_records: u64,
    pub saved_bytes: u64,
}

/// The temporary file a segment's cleaned copy is written to.
pub fn temp_path(segment: &Path) -> PathBuf {
    let mut name = segment.as_os_str().to_owned();
    name.push(CLEANED_SUFFIX);
    PathBuf::from(name)
}

/// Reads one batch, paced by `throttle`.
fn read(file: &File, at: &BatchPosition, throttle: &mut Throttle) -> io::Result<Vec<u8>> {
    let mut buf = vec![0; at.len as usize];
    file.read_exact_at(&mut buf, at.position)?;
    throttle.pace(u64::from(at.len));
    Ok(buf)
}

/// What the segments say of each key and producer: the offset of each key's latest record below
/// `end`, and the base offset of each idempotent producer's last batch.
struct Latest {
    keys: OffsetMap,
    producers: HashMap<i64, u64>,
    /// Where the map's knowledge ends: the job's end, or the first record that did not fit.
    end: u64,
}

/// Reads the dirty records (from the job's start) for the latest record of each key, in offset
/// order, into a map of at most `map_bytes`, until the map is full; and every segment's
/// batches for each producer's last.
fn survey(job: &Job, map_bytes: usize, throttle: &mut Throttle) -> io::Result<Latest> {
    let start = job.start.0;
    let dirty = |at: &&BatchPosition| at.base + at.width > start;
    // At most one key per dirty offset: the map is no larger than that needs.
    let expected = job
        .segments
        .iter()
        .flat_map(|s| s.batches.iter().filter(dirty))
        .map(|at| at.base + at.width - at.base.max(start))
        .sum::<u64>();
    let mut latest = Latest {
        keys: OffsetMap::new(map_bytes, usize::try_from(expected).unwrap_or(usize::MAX)),
        producers: HashMap::new(),
        end: job.end.0,
    };
    for at in job.segments.iter().flat_map(|s| &s.batches) {
        if let Some(p) = at.producer {
            latest.producers.insert(p.producer_id, at.base);
        }
    }
    for segment in &job.segments {
        if !segment.batches.iter().any(|at| dirty(&at)) {
            continue;
        }
        let file = File::open(&segment.path)?;
        for at in segment.batches.iter().filter(dirty) {
            let bytes = read(&file, at, throttle)?;
            let readable = Readable::of(&bytes).ok().flatten();
            let records = readable.as_ref().and_then(Readable::records);
            for r in records.into_iter().flatten() {
                let offset = at.base.saturating_add_signed(r.offset_delta);
                let Some(key) = r.key.filter(|_| offset >= start) else {
                    continue;
                };
                if !latest.keys.put(key, offset) {
                    latest.end = offset;
                    return Ok(latest);
                }
            }
        }
    }
    Ok(latest)
}

/// A run of batches left with no record: one empty batch once written.
struct Run {
    base: u64,
    end: u64,
    epoch: LeaderEpoch,
    first_timestamp: i64,
    max_timestamp: i64,
}

/// The cleaned copy of one segment, being written.
struct Writer {
    file: File,
    size: u64,
    batches: Vec<BatchPosition>,
    times: TimeIndex,
    run: Option<Run>,
}

/// How many bytes a cleaned copy copies as they are at a time: few reads for a segment's
/// untouched start, in a buffer of bounded size.
const COPY_CHUNK: u64 = 1 << 20;

/// The entry of batch `bytes`, at offset `base` and byte `position` of its file: what the
/// recovery scan finds there.
fn entry(base: u64, bytes: &[u8], position: u64) -> BatchPosition {
    BatchPosition {
        base,
        width: batch::width(bytes),
        epoch: batch::leader_epoch(bytes).unwrap_or_default(),
        position,
        len: bytes.len() as u32,
        producer: batch::producer(bytes),
    }
}

impl Writer {
    /// Creates the cleaned copy at `temp` starting with the first `len` bytes of `source` as
    /// they are: the bytes below the log start and the batches before the first one the
    /// cleaning removes a record from, whose `batches` (at the same positions) and `times` the
    /// scan noted. Paced, read and written, by `throttle`.
    fn copying(
        source: &File,
        temp: &Path,
        len: u64,
        batches: Vec<BatchPosition>,
        times: TimeIndex,
        throttle: &mut Throttle,
    ) -> io::Result<Writer> {
        let mut file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(temp)?;
        let mut buf = vec![0; len.min(COPY_CHUNK) as usize];
        let mut copied = 0;
        while copied < len {
            let n = (len - copied).min(COPY_CHUNK) as usize;
            source.read_exact_at(&mut buf[..n], copied)?;
            file.write_all(&buf[..n])?;
            throttle.pace(2 * n as u64);
            copied += n as u64;
        }
        Ok(Writer {
            file,
            size: len,
            batches,
            times,
            run: None,
        })
    }

    fn put(&mut self, base: u64, bytes: &[u8]) -> io::Result<()> {
        self.file.write_all(bytes)?;
        self.batches.push(entry(base, bytes, self.size));
        self.times
            .note(batch::max_timestamp(bytes).unwrap_or(-1), base);
        self.size += bytes.len() as u64;
        Ok(())
    }

    fn end_run(&mut self) -> io::Result<()> {
        if let Some(run) = self.run.take() {
            let empty = batch::empty(
                run.base,
                run.end - run.base,
                run.epoch,
                run.first_timestamp,
                run.max_timestamp,
            );
            self.put(run.base, &empty)?;
        }
        Ok(())
    }

    /// Adds a batch left with no record to the run, or starts one: a run stays in one leader
    /// epoch, so each epoch's first offset stays where an entry starts.
    fn emptied(&mut self, at: &BatchPosition, bytes: &[u8]) -> io::Result<()> {
        let end = at.base + at.width;
        let first = batch::first_timestamp(bytes).unwrap_or(-1);
        let max = batch::max_timestamp(bytes).unwrap_or(-1);
        match &mut self.run {
            Some(run)
                if run.epoch == at.epoch && run.end == at.base && end - run.base <= 1 << 31 =>
            {
                run.end = end;
                run.max_timestamp = run.max_timestamp.max(max);
                Ok(())
            }
            _ => {
                self.end_run()?;
                self.run = Some(Run {
                    base: at.base,
                    end,
                    epoch: at.epoch,
                    first_timestamp: first,
                    max_timestamp: max,
                });
                Ok(())
            }
        }
    }
}

/// Whether compaction keeps record `r` of the batch at `base`: the latest of its key (or
/// keyless), and not a tombstone past `delete.retention.ms`; and every record from where the
/// map's knowledge ends (even an old tombstone: an older record of its key may be kept below).
fn keeps(latest: &Latest, job: &Job, base: u64, max_timestamp: i64, r: &RecordRef<'_>) -> bool {
    let offset = base.saturating_add_signed(r.offset_delta);
    let Some(key) = r.key.filter(|_| offset < latest.end) else {
        return true;
    };
    let newest = latest.keys.get(key).is_none_or(|o| o == offset);
    let expired = r.tombstone
        && job.delete_retention_ms >= 0
        && job.now_ms.saturating_sub(max_timestamp) > job.delete_retention_ms;
    newest && !expired
}

/// The cleaned copy of `segment`, or `None` when the cleaning removes nothing from it (most of
/// a compacted log, once cleaned, holds nothing more to remove: it is left as it is).
///
/// Each batch is read and decoded once. Until the first batch the cleaning removes a record
/// from, nothing is written (a segment may turn out to need no copy at all): the scan only
/// notes each batch's entry and largest timestamp. From that batch on, the copy is written
/// batch by batch; everything before it (the bytes below the log start, then the batches kept
/// whole) is copied as it is, in large reads without decoding, at the same positions.
///
/// Copied as it is, an empty batch before the first removal (a run an earlier cleaning left)
/// stays its own entry, where writing it batch by batch would merge it into one run with its
/// empty neighbours (the first removal's batch too, if that one is emptied now and follows it):
/// either is a valid log with the same records, offsets and epochs; this one keeps those few
/// headers more. Empty batches from the first removal on are merged as before.
fn clean_segment(
    job: &Job,
    latest: &Latest,
    segment: &SegmentJob,
    removed: &mut u64,
    throttle: &mut Throttle,
) -> io::Result<Option<CleanedSegment>> {
    let source = File::open(&segment.path)?;
    let temp = temp_path(&segment.path);
    // The entries and time index of the batches kept whole before the first removal.
    let mut untouched = Vec::new();
    let mut untouched_times = TimeIndex::default();
    let mut out: Option<Writer> = None;
    // How much of what was written is paced already.
    let mut paced = 0;
    for at in &segment.batches {
        if let Some(out) = &out {
            throttle.pace(out.size - paced);
            paced = out.size;
        }
        let bytes = read(&source, at, throttle)?;
        let readable = Readable::of(&bytes).ok().flatten();
        let records = readable.as_ref().and_then(Readable::records);
        let max_timestamp = batch::max_timestamp(&bytes).unwrap_or(-1);
        let keep = |r: &RecordRef<'_>| keeps(latest, job, at.base, max_timestamp, r);
        if out.is_none() && records.iter().flatten().all(keep) {
            untouched.push(entry(at.base, &bytes, at.position));
            untouched_times.note(max_timestamp, at.base);
            continue;
        }
        let out = match &mut out {
            Some(out) => out,
            None => {
                let start = Writer::copying(
                    &source,
                    &temp,
                    at.position,
                    std::mem::take(&mut untouched),
                    std::mem::take(&mut untouched_times),
                    throttle,
                )?;
                paced = start.size;
                out.insert(start)
            }
        };
        let Some(records) = records else {
            out.end_run()?;
            out.put(at.base, &bytes)?;
            continue;
        };
        let kept: Vec<RecordRef<'_>> = records.iter().filter(|r| keep(r)).copied().collect();
        let last_of_producer = at
            .producer
            .is_some_and(|p| latest.producers.get(&p.producer_id) == Some(&at.base));
        let smaller = (kept.len() < records.len() && (!kept.is_empty() || last_of_producer))
            .then(|| readable.as_ref().and_then(|r| r.retain(&bytes, &kept)))
            .flatten();
        if kept.is_empty() && !last_of_producer {
            *removed += records.len() as u64;
            out.emptied(at, &bytes)?;
        } else if let Some(smaller) = smaller {
            *removed += (records.len() - kept.len()) as u64;
            out.end_run()?;
            out.put(at.base, &smaller)?;
        } else {
            // Nothing to remove, or a codec that failed to compress: kept whole.
            out.end_run()?;
            out.put(at.base, &bytes)?;
        }
    }
    let Some(mut out) = out else {
        return Ok(None);
    };
    out.end_run()?;
    throttle.pace(out.size - paced);
    out.file.sync_all()?;
    Ok(Some(CleanedSegment {
        job: segment.clone(),
        temp,
        size: out.size,
        batches: out.batches,
        times: out.times,
    }))
}

/// Cleans the job's segments into temporary files beside them, with an offset map of at most
/// `map_bytes` (see the module documentation). On an error, the files written so far are
/// removed and nothing else has changed.
/// Its reads and writes are paced by `throttle`.
pub fn clean(job: &Job, map_bytes: usize, throttle: &mut Throttle) -> io::Result<Cleaned> {
    let latest = survey(job, map_bytes, throttle)?;
    let mut removed_records = 0;
    let mut segments = Vec::with_capacity(job.segments.len());
    for segment in job.segments.iter().take_while(|s| s.base < latest.end) {
        match clean_segment(job, &latest, segment, &mut removed_records, throttle) {
            Ok(cleaned) => segments.extend(cleaned),
            Err(e) => {
                let _ = fs::remove_file(temp_path(&segment.path));
                discard(&segments);
                return Err(e);
            }
        }
    }
    let saved_bytes = segments
        .iter()
        .map(|s| s.job.size.saturating_sub(s.size))
        .sum();
    Ok(Cleaned {
        segments,
        end: Offset(latest.end),
        truncations: job.truncations,
        removed_records,
        saved_bytes,
    })
}

/// Removes the temporary files of cleaned segments that will not be installed.
pub fn discard(segments: &[CleanedSegment]) {
    for s in segments {
        let _ = fs::remove_file(&s.temp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::disk_log::tests::{clean_all, cleaned_to, contents, keyed};
    use crate::storage::offset_map::SLOT_BYTES;
    use crate::storage::segment;
    use crate::storage::DiskLog;
    use isr::Log;
    use std::collections::BTreeSet;

    /// Three rounds over keys `k0`..`k39`, four records a batch, a tombstone for `k7` long ago
    /// in the second; segments of 500 bytes, so that a map of a few keys fills inside one.
    fn written(dir: &Path) -> DiskLog {
        let mut log = DiskLog::open(dir, 500).expect("open");
        for round in 0..3 {
            for first in (0..40).step_by(4) {
                let records: Vec<(String, Option<String>)> = (first..first + 4)
                    .map(|k| {
                        let value = (round != 1 || k != 7).then(|| format!("{round}"));
                        (format!("k{k}"), value)
                    })
                    .collect();
                let refs: Vec<(&str, Option<&str>)> = records
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_deref()))
                    .collect();
                log.append(&[keyed(1, round, &refs)]);
            }
        }
        log.compact(log.log_end_offset());
        log
    }

    /// The keys of the records in `[from, to)`.
    fn keys_between(records: &[(i64, String, Option<String>)], from: u64, to: u64) -> usize {
        let range = from as i64..to as i64;
        let keys: BTreeSet<&str> = records
            .iter()
            .filter(|(o, _, _)| range.contains(o))
            .map(|(_, k, _)| k.as_str())
            .collect();
        keys.len()
    }

    #[test]
    fn a_map_too_small_for_the_dirty_keys_cleans_in_passes_to_what_one_pass_leaves() {
        let (one, many) = (
            tempfile::tempdir().expect("dir"),
            tempfile::tempdir().expect("dir"),
        );
        let mut log = written(one.path());
        let before = contents(&log);
        let job = log
            .cleaning_job(&CleaningPolicy::eager(0), 1_000)
            .expect("a job");
        let cleaned = clean_all(&job);
        assert_eq!(cleaned.end, job.end, "a large map takes every dirty key");
        let bound = job.end;
        log.install(cleaned);
        let expected = cleaned_to(&before, bound.0 as i64, true);
        assert_eq!(contents(&log), expected);

        // A map of 5 keys for 40: a pass ends where the map filled, often inside a segment,
        // and the next goes on from there, until the same point.
        let small = 6 * SLOT_BYTES;
        assert_eq!(OffsetMap::new(small, usize::MAX).capacity(), 5);
        let mut log = written(many.path());
        let mut passes = 0;
        while let Some(job) = log.cleaning_job(&CleaningPolicy::eager(0), 1_000) {
            assert_eq!(job.end, bound);
            let cleaned = clean(&job, small, &mut Throttle::unlimited()).expect("clean");
            assert!(cleaned.end > job.start, "every pass makes progress");
            let mapped = keys_between(&before, job.start.0, cleaned.end.0);
            assert!(mapped <= 5, "{mapped} keys mapped into a map of 5");
            log.install(cleaned);
            passes += 1;
        }
        assert!(passes >= 8, "{passes} passes for 40 keys, 5 at a time");
        assert_eq!(contents(&log), expected);
    }

    /// A segment whose first removal lies in its middle: what comes before it (the bytes below
    /// the log start, then the batches kept whole) is copied byte for byte at the same
    /// positions, the cleaned file is what the recovery scan finds there (entries and time
    /// index), and the log reads back what a cleaning leaves. Cleaned again, with nothing left
    /// to remove from it, the segment is not written.
    #[test]
    fn a_segment_whose_first_removal_is_in_its_middle_keeps_its_start_as_it_was() {
        let dir = tempfile::tempdir().expect("dir");
        let mut log = DiskLog::open(dir.path(), 1 << 20).expect("open");
        // Offsets: x 0 (below the log start), a 1, c d 2-3, b 4, e 5, b 6, f g 7-8, f 9; the
        // largest timestamps go up and down, so the time index skips some batches.
        for (timestamp, records) in [
            (100, &[("x", Some("1"))][..]),
            (150, &[("a", Some("1"))]),
            (300, &[("c", Some("1")), ("d", Some("1"))]),
            (200, &[("b", Some("1"))]),
            (400, &[("e", Some("1"))]),
            (350, &[("b", Some("2"))]),
            (500, &[("f", Some("1")), ("g", Some("1"))]),
            (450, &[("f", Some("2"))]),
        ] {
            log.append(&[keyed(1, timestamp, records)]);
        }
        // The next batch starts a segment: the first one is closed.
        log.set_rolling(1, None);
        log.append(&[keyed(1, 600, &[("z", Some("1"))])]);
        log.set_rolling(1 << 20, None);
        log.advance_log_start(Offset(1));
        log.compact(log.log_end_offset());
        let before = contents(&log);

        let job = log
            .cleaning_job(&CleaningPolicy::eager(-1), 1_000)
            .expect("a job");
        assert_eq!(job.segments.len(), 1, "the first segment only: {job:?}");
        let source = &job.segments[0];
        assert!(source.prefix > 0, "x lies below the log start");
        let first_removal = source
            .batches
            .iter()
            .position(|at| at.base == 4)
            .expect("b's first batch");
        assert_eq!(first_removal, 2, "after a and c d");
        let cleaned = clean_all(&job);
        assert_eq!(cleaned.removed_records, 2, "b and f's first records");
        assert_eq!(cleaned.segments.len(), 1);
        let c = &cleaned.segments[0];

        let (old, new) = (
            fs::read(&source.path).expect("segment"),
            fs::read(&c.temp).expect("cleaned copy"),
        );
        let kept = source.batches[first_removal].position as usize;
        assert_eq!(new[..kept], old[..kept], "the start is copied as it is");
        assert_eq!(c.batches[..first_removal], source.batches[..first_removal]);
        assert_eq!(c.size, new.len() as u64);
        // The recovery scan from the log start on (x's batch is the prefix).
        let prefix = source.prefix as usize;
        let mut scan = segment::scan(&new[prefix..], c.size - source.prefix, 1);
        assert_eq!(scan.torn, None);
        scan.batches
            .iter_mut()
            .for_each(|at| at.position += source.prefix);
        assert_eq!(scan.batches, c.batches);
        assert_eq!(scan.times, c.times);
        // a, c d, b's emptied batch, e, b, g, f.
        let bases: Vec<u64> = c.batches.iter().map(|at| at.base).collect();
        assert_eq!(bases, vec![1, 2, 4, 5, 6, 7, 9]);

        let bound = job.end;
        log.install(cleaned);
        let expected = cleaned_to(&before, bound.0 as i64, true);
        assert_eq!(expected.len(), before.len() - 2);
        assert_eq!(contents(&log), expected);
        drop(log);
        let mut log = DiskLog::open(dir.path(), 1 << 20).expect("reopen");
        assert_eq!(contents(&log), expected);

        // New keys in a segment of their own: the cleaned one is read, not written again.
        log.set_rolling(1, None);
        log.append(&[keyed(1, 700, &[("h", Some("1"))])]);
        log.set_rolling(1 << 20, None);
        log.compact(log.log_end_offset());
        let job = log
            .cleaning_job(&CleaningPolicy::eager(-1), 1_000)
            .expect("a job");
        assert!(job.segments.iter().any(|s| s.base == 0));
        let cleaned = clean_all(&job);
        assert_eq!(cleaned.removed_records, 0);
        assert!(cleaned.segments.is_empty(), "{:?}", cleaned.segments);
        assert!(!temp_path(&job.segments[0].path).exists());
    }
}
