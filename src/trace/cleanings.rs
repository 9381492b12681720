//! What the cleanings of a replayed run replaced: a record's digest is a checksum of its bytes,
//! so the batch a cleaning leaves has a digest of its own, and runs of emptied batches become
//! one. The replay installs each cleaning as it was made ([`super::Event::Cleaned`]), so that
//! every later Fetch and read answers with the very entries the real log gave; and it judges
//! the properties on the logs as they were before any cleaning, since the history holds the
//! records as they were committed and replicas clean on their own schedules. What a digest
//! cannot say is which records a cleaning removed: that it removed only superseded ones
//! (CleanedRecordsAreSuperseded) is the model's to check.

use super::digest::{starting_within, BasedEntry as Based};
use super::DigestLog;
use crate::types::PartitionId;
use std::collections::BTreeMap;

/// Per partition, each entry a cleaning left (with its first offset) and the entries it stands
/// for, as they were before any cleaning.
#[derive(Debug, Default)]
pub(super) struct Cleanings(BTreeMap<PartitionId, BTreeMap<Based, Vec<Based>>>);

impl Cleanings {
    /// A cleaning of `partition` replaced `replaced` with `cleaned`. An entry replaced that a
    /// cleaning left before stands for what that one stood for.
    pub(super) fn record(&mut self, partition: PartitionId, replaced: &[Based], cleaned: &[Based]) {
        let before: Vec<Based> = replaced
            .iter()
            .flat_map(|r| self.original(partition, r))
            .collect();
        let map = self.0.entry(partition).or_default();
        for c in cleaned {
            let stands_for = starting_within(&before, c.0, c.0 + c.1.record.width).to_vec();
            // Most of a cleaned segment is batches kept whole: they stand for themselves.
            if stands_for != [c.clone()] {
                map.insert(c.clone(), stands_for);
            }
        }
    }

    /// Whether any cleaning of `partition` was installed.
    pub(super) fn any(&self, partition: PartitionId) -> bool {
        self.0.get(&partition).is_some_and(|m| !m.is_empty())
    }

    /// What `entry` stands for before any cleaning: itself, unless a cleaning left it.
    pub(super) fn original(&self, partition: PartitionId, entry: &Based) -> Vec<Based> {
        match self.0.get(&partition).and_then(|m| m.get(entry)) {
            Some(stands_for) => stands_for.clone(),
            None => vec![entry.clone()],
        }
    }

    /// `log` as it was before any cleaning of `partition`.
    pub(super) fn uncleaned(&self, partition: PartitionId, log: &DigestLog) -> DigestLog {
        let entries = log
            .based_entries()
            .iter()
            .flat_map(|e| self.original(partition, e))
            .collect();
        log.with_entries(entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{Entry, Log};
    use crate::trace::Digest;
    use crate::types::{LeaderEpoch, Offset};

    const P: PartitionId = PartitionId(0);

    fn entry(epoch: u32, width: u64, checksum: u32) -> Entry<Digest> {
        Entry {
            epoch: LeaderEpoch(epoch),
            record: Digest {
                width,
                size: 100 * width,
                checksum,
            },
            producer: None,
        }
    }

    /// Four batches of two records, the last in epoch 2, all committed and cleanable.
    fn log() -> DigestLog {
        let mut log = DigestLog::default();
        log.append(&[
            entry(1, 2, 1),
            entry(1, 2, 2),
            entry(1, 2, 3),
            entry(2, 2, 4),
        ]);
        log.compact(Offset(8));
        log
    }

    #[test]
    fn a_cleaning_replaces_entries_and_the_replay_judges_the_log_as_it_was() {
        let mut log = log();
        let before = log.clone();
        // The first two batches emptied into one run; the third loses a record.
        let cleaned = [entry(1, 4, 10), entry(1, 2, 11)];
        let (replaced, installed) = log
            .install_cleaned(Offset(0), &cleaned)
            .expect("a cleaning");
        assert_eq!(replaced, before.based_entries()[..3]);
        assert_eq!(
            installed,
            [(0, cleaned[0].clone()), (4, cleaned[1].clone())]
        );
        assert_eq!(
            log.read(Offset(0), Offset(8), 10),
            [&cleaned[..], &[entry(2, 2, 4)]].concat()
        );
        assert_eq!(log.log_end_offset(), Offset(8));
        let mut cleanings = Cleanings::default();
        cleanings.record(P, &replaced, &installed);
        assert_eq!(cleanings.uncleaned(P, &log), before);
        // A second cleaning of what the first left stands for the entries before either.
        let again = [entry(1, 6, 20)];
        let (replaced, installed) = log.install_cleaned(Offset(0), &again).expect("again");
        cleanings.record(P, &replaced, &installed);
        assert_eq!(cleanings.uncleaned(P, &log), before);
        assert!(!cleanings.any(PartitionId(1)));
    }

    #[test]
    fn a_cleaning_a_cleaner_could_not_make_is_refused_and_changes_nothing() {
        let refused = |log: &mut DigestLog, from: u64, entries: &[Entry<Digest>]| {
            let before = log.clone();
            let result = log.install_cleaned(Offset(from), entries);
            assert_eq!(*log, before);
            result.expect_err("refused")
        };
        // Past where the core let compaction go (rule 18).
        let mut uncommitted = DigestLog::default();
        uncommitted.append(&[entry(1, 2, 1), entry(1, 2, 2)]);
        uncommitted.compact(Offset(2));
        let why = refused(&mut uncommitted, 0, &[entry(1, 4, 9)]);
        assert!(why.contains("rule 18"), "{why}");
        let mut log = log();
        // Splitting a batch, starting inside one, merging epochs.
        assert!(refused(&mut log, 0, &[entry(1, 1, 9), entry(1, 1, 8)]).contains("splits"));
        assert!(refused(&mut log, 1, &[entry(1, 3, 9)]).contains("start and end"));
        assert!(refused(&mut log, 4, &[entry(1, 4, 9)]).contains("epochs"));
        // A truncation lowers the bound.
        log.truncate_to(Offset(4));
        assert!(refused(&mut log, 0, &[entry(1, 6, 9)]).contains("rule 18"));
    }
}
