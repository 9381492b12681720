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
//! A segment the cleaning removes nothing from is not written again.
//!
//! A reader that asks from inside such a run (a follower whose log ended at a batch boundary
//! the run merged away) is given the run from where it asked ([`batch::from_offset`]).

use super::batch::{self, RecordRef};
use super::segment::{BatchPosition, TimeIndex};
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
    /// Written since the last cleaning: only these say which record of a key is the latest
    /// (a cleaned segment holds at most one record of each key, one no later one superseded).
    pub dirty: bool,
}

/// A cleaning of one log: its closed segments below the point the core allows.
#[derive(Clone, Debug)]
pub struct Job {
    pub segments: Vec<SegmentJob>,
    /// Where the segments cleaned end: everything below was cleaned once this is installed.
    pub end: Offset,
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
    pub end: Offset,
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

fn read(file: &File, at: &BatchPosition) -> io::Result<Vec<u8>> {
    let mut buf = vec![0; at.len as usize];
    file.read_exact_at(&mut buf, at.position)?;
    Ok(buf)
}

/// What the segments say of each key and producer: the offset of each key's latest record, and
/// the base offset of each idempotent producer's last batch.
#[derive(Default)]
struct Latest {
    keys: HashMap<Vec<u8>, u64>,
    producers: HashMap<i64, u64>,
}

/// Reads the dirty segments for the latest record of each key (Kafka's offset map: what lies
/// in the segments cleaned before holds one record per key at most, so only what came since
/// can supersede one), and every segment's batches for each producer's last.
fn survey(job: &Job) -> io::Result<Latest> {
    let mut latest = Latest::default();
    for segment in &job.segments {
        for at in &segment.batches {
            if let Some(p) = at.producer {
                latest.producers.insert(p.producer_id, at.base);
            }
        }
        if !segment.dirty {
            continue;
        }
        let file = File::open(&segment.path)?;
        for at in &segment.batches {
            let bytes = read(&file, at)?;
            let readable = Readable::of(&bytes).ok().flatten();
            let records = readable.as_ref().and_then(Readable::records);
            for r in records.into_iter().flatten() {
                if let Some(key) = r.key {
                    let offset = at.base.saturating_add_signed(r.offset_delta);
                    // A key seen before is updated in place: no allocation per record.
                    match latest.keys.get_mut(key) {
                        Some(at) => *at = offset,
                        None => {
                            latest.keys.insert(key.to_vec(), offset);
                        }
                    }
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

impl Writer {
    fn put(&mut self, base: u64, bytes: &[u8]) -> io::Result<()> {
        self.file.write_all(bytes)?;
        self.batches.push(BatchPosition {
            base,
            width: batch::width(bytes),
            epoch: batch::leader_epoch(bytes).unwrap_or_default(),
            position: self.size,
            len: bytes.len() as u32,
            producer: batch::producer(bytes),
        });
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
/// keyless), and not a tombstone past `delete.retention.ms`.
fn keeps(latest: &Latest, job: &Job, base: u64, max_timestamp: i64, r: &RecordRef<'_>) -> bool {
    let Some(key) = r.key else {
        return true;
    };
    let offset = base.saturating_add_signed(r.offset_delta);
    let newest = latest.keys.get(key).is_none_or(|&o| o == offset);
    let expired = r.tombstone
        && job.delete_retention_ms >= 0
        && job.now_ms.saturating_sub(max_timestamp) > job.delete_retention_ms;
    newest && !expired
}

/// How many records of `segment` a cleaning removes: a segment it removes none from is left
/// as it is, unwritten (most of a compacted log, once cleaned, holds nothing more to remove).
fn removable(job: &Job, latest: &Latest, segment: &SegmentJob, source: &File) -> io::Result<u64> {
    let mut removed = 0;
    for at in &segment.batches {
        let bytes = read(source, at)?;
        let max_timestamp = batch::max_timestamp(&bytes).unwrap_or(-1);
        let readable = Readable::of(&bytes).ok().flatten();
        let records = readable.as_ref().and_then(Readable::records);
        for r in records.into_iter().flatten() {
            if !keeps(latest, job, at.base, max_timestamp, &r) {
                removed += 1;
            }
        }
    }
    Ok(removed)
}

/// The cleaned copy of `segment`, or `None` when the cleaning removes nothing from it.
fn clean_segment(
    job: &Job,
    latest: &Latest,
    segment: &SegmentJob,
    removed: &mut u64,
) -> io::Result<Option<CleanedSegment>> {
    let source = File::open(&segment.path)?;
    if removable(job, latest, segment, &source)? == 0 {
        return Ok(None);
    }
    let temp = temp_path(&segment.path);
    let file = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&temp)?;
    let mut out = Writer {
        file,
        size: 0,
        batches: Vec::new(),
        times: TimeIndex::default(),
        run: None,
    };
    if segment.prefix > 0 {
        let mut prefix = vec![0; segment.prefix as usize];
        source.read_exact_at(&mut prefix, 0)?;
        out.file.write_all(&prefix)?;
        out.size = segment.prefix;
    }
    for at in &segment.batches {
        let bytes = read(&source, at)?;
        let readable = Readable::of(&bytes).ok().flatten();
        let Some(records) = readable.as_ref().and_then(Readable::records) else {
            out.end_run()?;
            out.put(at.base, &bytes)?;
            continue;
        };
        let max_timestamp = batch::max_timestamp(&bytes).unwrap_or(-1);
        let kept: Vec<RecordRef<'_>> = records
            .iter()
            .filter(|r| keeps(latest, job, at.base, max_timestamp, r))
            .copied()
            .collect();
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
    out.end_run()?;
    out.file.sync_all()?;
    Ok(Some(CleanedSegment {
        job: segment.clone(),
        temp,
        size: out.size,
        batches: out.batches,
        times: out.times,
    }))
}

/// Cleans the job's segments into temporary files beside them (see the module documentation).
/// On an error, the files written so far are removed and nothing else has changed.
pub fn clean(job: &Job) -> io::Result<Cleaned> {
    let latest = survey(job)?;
    let mut removed_records = 0;
    let mut segments = Vec::with_capacity(job.segments.len());
    for segment in &job.segments {
        match clean_segment(job, &latest, segment, &mut removed_records) {
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
        end: job.end,
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
