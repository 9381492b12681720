//! The replicated log, behind a trait the core defines.
//!
//! The core decides *what* to append, truncate and flush; an implementation decides *how*. The
//! in-memory [`MemLog`] serves the models and tests (it is `Clone + Hash + Eq` and clones in
//! constant time, so a model checker can keep millions of them); the runtime implements the
//! trait over segment files.
//!
//! Methods are infallible on purpose: a log that cannot write is a failed disk, which Kafka
//! answers by taking the log directory offline. A disk implementation records the error and its
//! driver stops the replica; the protocol never has to reason about half-applied appends.

use crate::producers::ProducerBatch;
use crate::types::{LeaderEpoch, Offset};
use serde::{Deserialize, Serialize};
use std::fmt::Debug;

/// One record in a log, stamped with the leader epoch it was first appended in (rule 1).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Entry<R> {
    /// The leader epoch of the leader that first appended it; followers copy it unchanged, and
    /// reconciliation compares logs by it (OffsetForLeaderEpoch).
    pub epoch: LeaderEpoch,
    /// The payload: what the producer wrote.
    pub record: R,
    /// The idempotent producer's stamp, if an idempotent producer wrote it: followers copy it
    /// with the record, and every replica's [`crate::Producers`] is built from it (absent in
    /// traces written before idempotent producers were in the core).
    #[serde(default)]
    pub producer: Option<ProducerBatch>,
}

impl<R> Entry<R> {
    /// A plain producer's record, appended in `epoch`.
    pub fn new(epoch: LeaderEpoch, record: R) -> Self {
        Entry {
            epoch,
            record,
            producer: None,
        }
    }
}

/// What a walk over a log's entry boundaries needs of an entry, without its record
/// ([`Log::entry_shape`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryShape {
    /// The leader epoch it was appended in.
    pub epoch: LeaderEpoch,
    /// How many offsets it occupies ([`Log::width`]).
    pub width: u64,
    /// Its idempotent producer's stamp, if any.
    pub producer: Option<ProducerBatch>,
}

/// Storage for one replica's log.
pub trait Log {
    /// What a record is: a small number in the models, bytes in the runtime.
    type Record: Clone + Debug + PartialEq;

    /// The first offset still held (retention may have removed what lies below).
    fn log_start_offset(&self) -> Offset;
    /// The offset the next appended record will get (LEO).
    fn log_end_offset(&self) -> Offset;
    /// Everything below this offset survives an unclean crash.
    fn flushed_offset(&self) -> Offset;
    /// The entry at `offset`, if the log holds it.
    fn entry(&self, offset: Offset) -> Option<Entry<Self::Record>>;
    /// Up to `max` entries holding offsets in `from..until`, the first being the one that holds
    /// `from` (fewer at the end of the log).
    fn read(&self, from: Offset, until: Offset, max: usize) -> Vec<Entry<Self::Record>>;
    /// Appends entries at the log end offset, in order. A log whose storage failed may take
    /// fewer, or none: the LEO says how many it took, and the replica answers nothing it did
    /// not (its driver then stops it).
    fn append(&mut self, entries: &[Entry<Self::Record>]);
    /// Removes every entry at or above `offset`; a no-op when `offset` is at or past the end.
    /// Never below the log start: what lies below it is gone already.
    fn truncate_to(&mut self, offset: Offset);
    /// Makes `offset` the log start (DeleteRecords, retention, a follower starting at its
    /// leader's log start): every offset below it is gone from every read, durably, before
    /// this returns. Past the log end the log becomes empty and its end moves to `offset` (a
    /// follower whose whole log lies below its leader's log start starts afresh there; the
    /// core then passes an entry boundary). A no-op at or below the current log start.
    /// `offset` may lie inside an entry (DeleteRecords at an offset inside a record batch
    /// moves the log start there, as Kafka's does, and followers take it): that entry stays
    /// whole, and a read from the log start gives it from its first offset, as Kafka gives a
    /// batch (its clients skip the records below the offset they asked for). A disk log may
    /// keep the files that hold what lies below until a whole segment is below it.
    fn advance_log_start(&mut self, offset: Offset);
    /// Compaction (Kafka's log cleaner): every record below `below` that a later record below
    /// `below` with the same key supersedes may be removed, now or later (a disk log cleans in
    /// the background, and may stop short of `below`). Offsets stay where they are: a removed
    /// record leaves a gap inside its entry and moves no other record, no entry boundary and
    /// no epoch, so an entry may span offsets that hold nothing, or hold nothing at all
    /// ([`Log::cleaned`]). Readers see entries as they are, gaps included: a follower copies
    /// them, and a consumer skips the offsets that hold no record. The core calls it only up
    /// to the replica's high watermark (rule 18). The default removes nothing: a log whose
    /// records have no keys.
    fn compact(&mut self, _below: Offset) {}

    /// The key compaction goes by, if `record` has one: a later record with the same key
    /// supersedes it. `None` (the default): compaction never removes it.
    fn key(_record: &Self::Record) -> Option<u64> {
        None
    }

    /// `record` once compaction has removed all it holds: an entry that keeps its offsets and
    /// epoch and holds no record (a gap). Properties compare replicas' entries through it, so
    /// that a replica that cleaned an entry and one that did not still agree. `record` itself
    /// for a log that never cleans (the default).
    fn cleaned(record: &Self::Record) -> Self::Record {
        record.clone()
    }

    /// Makes everything appended so far durable. The driver's to call, never the core's: the
    /// core asks for it ([`crate::Effect::Flush`]) and is told when it is done
    /// ([`crate::ReplicaInput::Flushed`]), so one flush may serve several steps (group commit).
    fn flush(&mut self);
    /// What an unclean crash does to the log: everything above the flushed offset is gone.
    /// A log that lives through real crashes has nothing to do here (the crash itself did it,
    /// and recovery reads back only what was durable): the default does nothing. A log that
    /// simulates crashes (the models' in-memory log) drops what lies above its flushed offset.
    fn lose_unflushed(&mut self) {}

    /// How many offsets a record occupies. One in the models; a Kafka record batch occupies one
    /// offset per record it holds, so the runtime can keep batches whole. Every offset the
    /// protocol uses (LEOs, high watermarks, epoch starts) lies on an entry boundary, since
    /// replicas append and truncate whole entries.
    fn width(_record: &Self::Record) -> u64 {
        1
    }

    /// How many bytes a record takes in a frame, for the byte limits of fetches and reads. One
    /// in the models.
    fn size(_record: &Self::Record) -> usize {
        1
    }

    /// [`Log::read`] within `max_bytes` as well: entries while their sizes add up to at most
    /// `max_bytes`, and always the first, so that an entry larger than the limit cannot stall a
    /// reader (Kafka's rule). A disk log may answer without reading what does not fit.
    fn read_within(
        &self,
        from: Offset,
        until: Offset,
        max_entries: usize,
        max_bytes: usize,
    ) -> Vec<Entry<Self::Record>> {
        let mut entries = self.read(from, until, max_entries);
        let mut total = 0usize;
        let keep = entries
            .iter()
            .take_while(|e| {
                total = total.saturating_add(Self::size(&e.record));
                total <= max_bytes
            })
            .count()
            .max(1);
        entries.truncate(keep);
        entries
    }

    /// The first offset of the entry holding `offset`: `offset` itself where every record
    /// occupies one offset, a batch's base offset in the runtime's logs. At or past the log
    /// end, or below the log start, `offset` itself.
    fn entry_start(&self, offset: Offset) -> Offset {
        offset
    }

    /// The leader epoch of the entry at `offset`.
    fn epoch_at(&self, offset: Offset) -> Option<LeaderEpoch> {
        self.entry(offset).map(|e| e.epoch)
    }

    /// The epoch, width and producer of the entry holding `offset`, without its record: what a
    /// walk over entry boundaries needs ([`crate::EpochCache::from_log`],
    /// [`crate::Producers::from_log`]). A disk log answers from its index instead of reading
    /// every record back.
    fn entry_shape(&self, offset: Offset) -> Option<EntryShape> {
        self.entry(offset).map(|e| EntryShape {
            epoch: e.epoch,
            width: Self::width(&e.record),
            producer: e.producer,
        })
    }
}

/// Whether `record` is a gap compaction left: a keyed record that holds nothing more to
/// remove ([`Log::cleaned`]).
pub fn is_gap<L: Log>(record: &L::Record) -> bool {
    L::key(record).is_some() && L::cleaned(record) == *record
}

/// What the in-memory log's compaction needs of a record: its key, and what is left of it once
/// a later record of the same key supersedes it ([`Log::key`], [`Log::cleaned`]). Records
/// without a key (the default) are never removed.
pub trait Compactable: Clone {
    /// The record's key, if it has one.
    fn key(&self) -> Option<u64> {
        None
    }
    /// The record once compaction removed it: a gap that keeps its key.
    fn cleaned(&self) -> Self {
        self.clone()
    }
}

/// The bit a models' record (`u8`) has set once cleaned: its number is the rest.
pub(crate) const GAP_BIT: u8 = 0x80;

/// The models' records (the simulated cluster's `Record`: numbers below 128): records `2k - 1` and
/// `2k` share key `k`, so each key's first record is superseded by its second, and a cleaned
/// record is its number with its high bit set: a gap that still names its key.
impl Compactable for u8 {
    fn key(&self) -> Option<u64> {
        Some(u64::from((self & !GAP_BIT).div_ceil(2)))
    }
    fn cleaned(&self) -> Self {
        self | GAP_BIT
    }
}

impl Compactable for u32 {}
impl Compactable for u64 {}
impl Compactable for String {}

/// Every entry's offset and shape, from the log start to its end: the walk over entry
/// boundaries that what is derived from a log ([`crate::EpochCache::from_log`],
/// [`crate::Producers::from_log`]) is built by.
/// The first is the entry holding the log start, from its own first offset (below the log
/// start when DeleteRecords put that inside it).
pub fn shapes<L: Log>(log: &L) -> impl Iterator<Item = (Offset, EntryShape)> + '_ {
    let end = log.log_end_offset();
    let mut next = Some(log.entry_start(log.log_start_offset())).filter(|&o| o < end);
    std::iter::from_fn(move || {
        let offset = next?;
        let shape = log.entry_shape(offset)?;
        let after = Offset(offset.0 + shape.width);
        next = Some(after).filter(|&o| o < end && shape.width > 0);
        Some((offset, shape))
    })
}

/// The first entry boundary at or above the log start: the log start itself, unless
/// DeleteRecords put it inside an entry ([`Log::advance_log_start`]), then that entry's end.
/// That entry is committed whole (the log start is at or below the high watermark, rule 17,
/// which lies on an entry boundary), so a truncation stops here and a high watermark is never
/// below it; and a follower whose log lies wholly below its leader's log start starts afresh
/// here, where the leader's entries begin.
pub fn first_boundary<L: Log>(log: &L) -> Offset {
    let start = log.log_start_offset();
    let base = log.entry_start(start);
    if base == start {
        return start;
    }
    log.entry_shape(base)
        .map_or(start, |shape| Offset(base.0 + shape.width))
}

/// An in-memory log backed by a persistent vector: cloning shares structure.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct MemLog<R: Clone> {
    /// The log start offset: the offset of `entries[0]` (zero in traces written before it moved).
    #[serde(default)]
    start: Offset,
    entries: imbl::Vector<Entry<R>>,
    flushed: Offset,
    /// Set while the disk under it is full: it takes no appends (the model's `DiskFull`).
    #[serde(default)]
    full: bool,
}

impl<R: Clone> Default for MemLog<R> {
    fn default() -> Self {
        MemLog {
            start: Offset(0),
            entries: imbl::Vector::new(),
            flushed: Offset(0),
            full: false,
        }
    }
}

impl<R: Clone> MemLog<R> {
    /// An empty log, nothing flushed: a new partition's.
    pub fn new() -> Self {
        Self::default()
    }

    /// Fills the disk under this log, or frees it: a full log takes no appends, as a disk log
    /// whose writes fail with ENOSPC.
    pub fn set_full(&mut self, full: bool) {
        self.full = full;
    }

    /// All entries from the log start, oldest first.
    pub fn entries(&self) -> impl Iterator<Item = &Entry<R>> {
        self.entries.iter()
    }

    /// The index in `entries` of `offset`, if the log holds it.
    fn index(&self, offset: Offset) -> Option<usize> {
        offset
            .0
            .checked_sub(self.start.0)
            .and_then(|i| usize::try_from(i).ok())
    }
}

impl<R: Compactable + Debug + PartialEq> Log for MemLog<R> {
    type Record = R;

    fn log_start_offset(&self) -> Offset {
        self.start
    }

    fn log_end_offset(&self) -> Offset {
        Offset(self.start.0 + self.entries.len() as u64)
    }

    fn flushed_offset(&self) -> Offset {
        self.flushed
    }

    fn entry(&self, offset: Offset) -> Option<Entry<R>> {
        self.index(offset)
            .and_then(|i| self.entries.get(i))
            .cloned()
    }

    fn read(&self, from: Offset, until: Offset, max: usize) -> Vec<Entry<R>> {
        let start = self.index(from).unwrap_or(usize::MAX);
        let count = until.0.saturating_sub(from.0).min(max as u64) as usize;
        self.entries
            .iter()
            .skip(start)
            .take(count)
            .cloned()
            .collect()
    }

    fn append(&mut self, entries: &[Entry<R>]) {
        if !self.full {
            self.entries.extend(entries.iter().cloned());
        }
    }

    fn truncate_to(&mut self, offset: Offset) {
        let offset = offset.max(self.start);
        if offset < self.log_end_offset() {
            self.entries.truncate((offset.0 - self.start.0) as usize);
            self.flushed = self.flushed.min(offset);
        }
    }

    fn advance_log_start(&mut self, offset: Offset) {
        if offset <= self.start {
            return;
        }
        let gone = (offset.0 - self.start.0).min(self.entries.len() as u64) as usize;
        self.entries = self.entries.skip(gone);
        self.start = offset;
        self.flushed = self.flushed.max(offset);
    }

    fn flush(&mut self) {
        self.flushed = self.log_end_offset();
    }

    /// Cleans at once: each keyed record below `below` with a later record of its key below
    /// `below` becomes its gap ([`Compactable::cleaned`]).
    fn compact(&mut self, below: Offset) {
        let end = self.index(below).map_or(0, |i| i.min(self.entries.len()));
        let mut latest = std::collections::BTreeMap::new();
        for (i, e) in self.entries.iter().take(end).enumerate() {
            if let Some(key) = e.record.key() {
                latest.insert(key, i);
            }
        }
        for i in 0..end {
            let entry = &self.entries[i];
            let superseded = entry
                .record
                .key()
                .is_some_and(|key| latest.get(&key).is_some_and(|&last| last > i));
            let gap = entry.record.cleaned();
            if superseded && gap != entry.record {
                let mut cleaned = entry.clone();
                cleaned.record = gap;
                self.entries.set(i, cleaned);
            }
        }
    }

    fn key(record: &R) -> Option<u64> {
        record.key()
    }

    fn cleaned(record: &R) -> R {
        record.cleaned()
    }

    fn lose_unflushed(&mut self) {
        self.entries
            .truncate(self.flushed.0.saturating_sub(self.start.0) as usize);
    }
}
