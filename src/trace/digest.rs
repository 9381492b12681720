//! Records as traces keep them, and a log of them to replay on.

use crate::log::{Entry, Log};
use crate::types::Offset;
use serde::{Deserialize, Serialize};

/// A record reduced to what the protocol sees of it — how many offsets it spans and how many
/// bytes it takes — and a checksum of its content, so that a replay can tell one record from
/// another without storing it. A driver computes it (the runtime takes a Kafka batch's CRC,
/// which stamping the offset and leader epoch leaves unchanged).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Digest {
    /// How many offsets the record spans ([`Log::width`]): one per record of a Kafka batch.
    pub width: u64,
    /// How many bytes it takes ([`Log::size`]), for the byte limits of fetches and reads.
    pub size: u64,
    /// A checksum of its content (in the runtime, the CRC field of the Kafka batch's header).
    pub checksum: u32,
}

/// An entry of a [`DigestLog`] with its first offset.
pub type BasedEntry = (u64, Entry<Digest>);

/// The entries of `entries` (in offset order) that start from `from` up to `until`.
pub(super) fn starting_within(entries: &[BasedEntry], from: u64, until: u64) -> &[BasedEntry] {
    let lo = entries.partition_point(|(base, _)| *base < from);
    let hi = entries.partition_point(|(base, _)| *base < until);
    &entries[lo..hi.max(lo)]
}

/// A log of [`Digest`]s that answers every [`Log`] method as a log of the records they stand
/// for would: entries span [`Digest::width`] offsets, and an entry holds every offset it spans.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DigestLog {
    /// The log start offset: no entry ends at or below it.
    start: Offset,
    /// (base offset, entry), in offset order, without gaps.
    entries: Vec<BasedEntry>,
    flushed: Offset,
    /// Set when the storage this log stands for failed: it takes no entry ending past this.
    failed_at: Option<Offset>,
    /// How far the core let compaction go ([`Log::compact`], rule 18): a cleaning installed
    /// must end at or below it ([`DigestLog::install_cleaned`]).
    clean_bound: Offset,
}

impl DigestLog {
    /// A log holding `entries` from `log_start`, all durable: what a replica recovered. The
    /// first entry starts at `first_offset` when that lies below the log start (DeleteRecords
    /// inside a record batch).
    pub fn recovered(
        log_start: Offset,
        first_offset: Option<Offset>,
        entries: &[Entry<Digest>],
    ) -> DigestLog {
        let mut log = DigestLog {
            start: first_offset.map_or(log_start, |first| first.min(log_start)),
            ..DigestLog::default()
        };
        log.append(entries);
        log.flush();
        log.advance_log_start(log_start);
        log
    }

    /// From now on, takes no entry that would end past `end`, as a log whose disk failed at
    /// that point (a disk log takes entries one by one until a write fails).
    pub fn fail_at(&mut self, end: Offset) {
        self.failed_at = Some(end);
    }

    /// Every entry, oldest first.
    pub fn entries(&self) -> impl Iterator<Item = &Entry<Digest>> {
        self.entries.iter().map(|(_, e)| e)
    }

    /// Every entry with its first offset, oldest first.
    pub fn based_entries(&self) -> &[BasedEntry] {
        &self.entries
    }

    /// This log with other entries over the same offsets (what a replay compares in place of
    /// cleaned ones); those that end at or below the log start are left out.
    pub fn with_entries(&self, entries: Vec<BasedEntry>) -> DigestLog {
        let start = self.start.0;
        DigestLog {
            entries: entries
                .into_iter()
                .filter(|(base, e)| base + e.record.width > start)
                .collect(),
            ..self.clone()
        }
    }

    /// A cleaning installed outside any step (the runtime's cleaner): from `from`, `entries`
    /// take the place of the entries over the same offsets. It must end at or below the bound
    /// the core let compaction go to (rule 18), start and end where entries did, and only
    /// merge entries, within one leader epoch, never split one. The entries replaced and the
    /// entries installed, with their first offsets; or why the cleaning is not one a cleaner
    /// may make.
    pub fn install_cleaned(
        &mut self,
        from: Offset,
        entries: &[Entry<Digest>],
    ) -> Result<(Vec<BasedEntry>, Vec<BasedEntry>), String> {
        let mut cleaned = Vec::with_capacity(entries.len());
        let mut end = from.0;
        for e in entries {
            cleaned.push((end, e.clone()));
            end += e.record.width;
        }
        if end > self.clean_bound.0 {
            return Err(format!(
                "a cleaning of offsets {from} to {end}, past {} where the core let compaction go (rule 18)",
                self.clean_bound
            ));
        }
        let lo = self
            .entries
            .partition_point(|(base, e)| base + e.record.width <= from.0);
        let hi = self.entries.partition_point(|(base, _)| *base < end);
        let old = &self.entries[lo..hi];
        if old.is_empty()
            || old[0].0 < from.0
            || old
                .last()
                .is_some_and(|(base, e)| base + e.record.width != end)
        {
            return Err(format!(
                "a cleaning of offsets {from} to {end}, which do not start and end where entries do"
            ));
        }
        for (base, e) in &cleaned {
            let until = base + e.record.width;
            let within = starting_within(old, *base, until);
            let merged = within.iter().all(|(_, o)| o.epoch == e.epoch);
            let ends_where_one_did = within
                .last()
                .is_some_and(|(b, o)| b + o.record.width == until);
            if !merged || (*base >= old[0].0 && !ends_where_one_did) {
                return Err(format!(
                    "a cleaning that splits an entry or merges leader epochs at offset {base}"
                ));
            }
        }
        let start = self.start.0;
        let kept = cleaned
            .iter()
            .filter(|(base, e)| base + e.record.width > start)
            .cloned();
        let replaced = self.entries.splice(lo..hi, kept).collect();
        Ok((replaced, cleaned))
    }

    /// The first offset of the entry holding `offset`.
    pub fn base_of(&self, offset: Offset) -> Option<Offset> {
        self.find(offset).map(|i| Offset(self.entries[i].0))
    }

    /// The position of the entry holding `offset`.
    fn find(&self, offset: Offset) -> Option<usize> {
        let i = self
            .entries
            .partition_point(|(base, e)| base + e.record.width <= offset.0);
        (i < self.entries.len() && self.entries[i].0 <= offset.0).then_some(i)
    }
}

impl Log for DigestLog {
    type Record = Digest;

    fn log_start_offset(&self) -> Offset {
        self.start
    }

    fn log_end_offset(&self) -> Offset {
        Offset(
            self.entries
                .last()
                .map_or(self.start.0, |(base, e)| base + e.record.width),
        )
    }

    fn flushed_offset(&self) -> Offset {
        self.flushed
    }

    fn entry(&self, offset: Offset) -> Option<Entry<Digest>> {
        self.find(offset).map(|i| self.entries[i].1.clone())
    }

    fn entry_start(&self, offset: Offset) -> Offset {
        self.base_of(offset).unwrap_or(offset)
    }

    fn read(&self, from: Offset, until: Offset, max: usize) -> Vec<Entry<Digest>> {
        let Some(first) = self.find(from) else {
            return Vec::new();
        };
        self.entries[first..]
            .iter()
            .take(max)
            .take_while(|(base, _)| *base < until.0)
            .map(|(_, e)| e.clone())
            .collect()
    }

    fn append(&mut self, entries: &[Entry<Digest>]) {
        for entry in entries {
            let base = self.log_end_offset().0;
            if self
                .failed_at
                .is_some_and(|end| base + entry.record.width > end.0)
            {
                return;
            }
            self.entries.push((base, entry.clone()));
        }
    }

    fn truncate_to(&mut self, offset: Offset) {
        let cut = self
            .find(offset)
            .unwrap_or_else(|| self.entries.partition_point(|(base, _)| *base < offset.0));
        self.entries.truncate(cut);
        self.flushed = self.flushed.min(self.log_end_offset());
        self.clean_bound = self.clean_bound.min(self.log_end_offset());
    }

    fn compact(&mut self, below: Offset) {
        self.clean_bound = self.clean_bound.max(below.min(self.log_end_offset()));
    }

    fn advance_log_start(&mut self, offset: Offset) {
        if offset <= self.start {
            return;
        }
        let gone = self
            .entries
            .partition_point(|(base, e)| base + e.record.width <= offset.0);
        self.entries.drain(..gone);
        self.start = offset;
        self.flushed = self.flushed.max(offset);
    }

    fn flush(&mut self) {
        self.flushed = self.log_end_offset();
    }

    fn lose_unflushed(&mut self) {
        let keep = self
            .entries
            .partition_point(|(base, e)| base + e.record.width <= self.flushed.0);
        self.entries.truncate(keep);
        self.clean_bound = self.clean_bound.min(self.log_end_offset());
    }

    fn width(record: &Digest) -> u64 {
        record.width
    }

    fn size(record: &Digest) -> usize {
        usize::try_from(record.size).unwrap_or(usize::MAX)
    }
}
