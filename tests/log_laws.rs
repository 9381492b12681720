//! Laws of the in-memory log and of the leader epoch cache.
//!
//! The protocol trusts three things about its storage: truncation and appends compose the
//! obvious way, the epoch cache it keeps incrementally is exactly the one derivable from the log
//! (rule 1), and OffsetForLeaderEpoch answers come out of that cache as the reference defines
//! them (rule 3). Each law is checked against a naive oracle computed from the entries
//! themselves, over random sequences of operations.

use isr::{Entry, EpochCache, Log, MemLog};
use isr::{LeaderEpoch, Offset};
use proptest::collection::vec;
use proptest::prelude::*;

/// One operation on a log and the epoch cache kept beside it, as a replica performs them.
#[derive(Clone, Debug)]
enum Op {
    /// Append `count` records in the log's last epoch plus `bump` (epochs never go down in a
    /// log: a leader appends in its own epoch, a follower copies a leader's suffix).
    Append {
        bump: u32,
        count: u8,
    },
    /// Truncate to this offset (may lie past the end: then a no-op).
    Truncate(u64),
    Flush,
    LoseUnflushed,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u32..=2, 1u8..=3).prop_map(|(bump, count)| Op::Append { bump, count }),
        2 => (0u64..=12).prop_map(Op::Truncate),
        1 => Just(Op::Flush),
        1 => Just(Op::LoseUnflushed),
    ]
}

/// A log and its incrementally kept cache after `ops`, the way `Replica` keeps them.
fn drive(ops: &[Op]) -> (MemLog<u32>, EpochCache) {
    let mut log = MemLog::new();
    let mut cache = EpochCache::default();
    let mut next_record = 0u32;
    for op in ops {
        match *op {
            Op::Append { bump, count } => {
                let last = log.entries().last().map_or(0, |e| e.epoch.0);
                let epoch = LeaderEpoch(last + bump);
                let entries: Vec<Entry<u32>> = (0..count)
                    .map(|_| {
                        next_record += 1;
                        Entry {
                            epoch,
                            record: next_record,
                            producer: None,
                        }
                    })
                    .collect();
                let first = log.log_end_offset();
                log.append(&entries);
                cache.record_all::<MemLog<u32>>(first, &entries);
            }
            Op::Truncate(o) => {
                log.truncate_to(Offset(o));
                cache.truncate_to(Offset(o));
            }
            Op::Flush => log.flush(),
            Op::LoseUnflushed => {
                // As `Replica::crash` does: the cache is rebuilt from what survived.
                log.lose_unflushed();
                cache = EpochCache::from_log(&log);
            }
        }
    }
    (log, cache)
}

/// The oracle for OffsetForLeaderEpoch: the largest epoch ≤ `requested` with a record in the
/// log, and the offset of the first record of a larger epoch (or the LEO).
fn naive_end_offset(log: &MemLog<u32>, requested: LeaderEpoch) -> Option<(LeaderEpoch, Offset)> {
    let entries: Vec<&Entry<u32>> = log.entries().collect();
    let epoch = entries
        .iter()
        .map(|e| e.epoch)
        .filter(|&e| e <= requested)
        .max()?;
    let end = entries
        .iter()
        .position(|e| e.epoch > epoch)
        .map_or(log.log_end_offset(), |i| Offset(i as u64));
    Some((epoch, end))
}

/// 2,000 cases a law. Failures are reported, not persisted: a regressions file beside the tests
/// would also be written by a mutation run (checker/mutants.sh plants faults in this tree) and
/// replay a mutant's failures against the real core from then on.
fn config() -> ProptestConfig {
    ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::with_cases(2_000)
    }
}

proptest! {
    #![proptest_config(config())]

    /// Truncating to `o` then appending leaves the first `min(o, LEO)` entries followed by the
    /// appended ones, and never leaves the flushed offset above the truncation point.
    #[test]
    fn truncate_then_append(ops in vec(op(), 0..30), to in 0u64..=12, count in 0u8..=4) {
        let (mut log, _) = drive(&ops);
        let before: Vec<Entry<u32>> = log.entries().cloned().collect();
        let flushed_before = log.flushed_offset();
        log.truncate_to(Offset(to));
        let kept = (to as usize).min(before.len());
        prop_assert_eq!(log.log_end_offset(), Offset(kept as u64));
        prop_assert_eq!(log.flushed_offset(), flushed_before.min(Offset(kept as u64)));
        let epoch = before.last().map_or(LeaderEpoch(0), |e| e.epoch);
        let appended: Vec<Entry<u32>> =
            (0..count).map(|i| Entry { epoch, record: 1000 + u32::from(i), producer: None }).collect();
        log.append(&appended);
        let mut expected = before[..kept].to_vec();
        expected.extend(appended.iter().cloned());
        let got: Vec<Entry<u32>> = log.entries().cloned().collect();
        prop_assert_eq!(got, expected.clone());
        prop_assert_eq!(log.log_end_offset(), Offset(expected.len() as u64));
        for (i, e) in expected.iter().enumerate() {
            prop_assert_eq!(log.entry(Offset(i as u64)), Some(e.clone()));
        }
        prop_assert_eq!(log.entry(log.log_end_offset()), None);
    }

    /// The cache a replica keeps by `record_all` and `truncate_to` (and rebuilds after a crash)
    /// equals the one `from_log` derives, after any sequence of operations (rule 1).
    #[test]
    fn incremental_cache_equals_from_log(ops in vec(op(), 0..40)) {
        let (log, cache) = drive(&ops);
        prop_assert_eq!(&cache, &EpochCache::from_log(&log));
        // And the cache's shape: epochs and start offsets strictly ascending, every start
        // holding a record of its epoch whose predecessor is of an older epoch.
        for pair in cache.entries().windows(2) {
            prop_assert!(pair[0].0 < pair[1].0 && pair[0].1 < pair[1].1);
        }
        for &(epoch, start) in cache.entries() {
            prop_assert_eq!(log.epoch_at(start), Some(epoch));
            if start.0 > 0 {
                prop_assert!(log.epoch_at(Offset(start.0 - 1)) < Some(epoch));
            }
        }
        prop_assert_eq!(cache.latest_epoch(), log.entries().last().map(|e| e.epoch));
    }

    /// `end_offset_for` answers as OffsetForLeaderEpoch is defined: the largest epoch not above
    /// the requested one, ending where the next larger epoch starts or at the LEO.
    #[test]
    fn end_offset_for_answers_the_largest_epoch_not_above(
        ops in vec(op(), 0..40),
        requested in 0u32..=30,
    ) {
        let (log, cache) = drive(&ops);
        let requested = LeaderEpoch(requested);
        prop_assert_eq!(
            cache.end_offset_for(requested, log.log_end_offset()),
            naive_end_offset(&log, requested)
        );
        if let Some((epoch, _)) = cache.end_offset_for(requested, log.log_end_offset()) {
            prop_assert_eq!(cache.start_of(epoch), log.entries().position(|e| e.epoch == epoch).map(|i| Offset(i as u64)));
        }
    }

    /// Flush makes everything durable; appends and truncations never raise the flushed offset
    /// above the LEO; an unclean crash keeps exactly the flushed prefix.
    #[test]
    fn flush_and_lose_unflushed(ops in vec(op(), 0..40), more in 0u8..=3) {
        let (mut log, _) = drive(&ops);
        prop_assert!(log.flushed_offset() <= log.log_end_offset());
        let before: Vec<Entry<u32>> = log.entries().cloned().collect();
        let flushed = log.flushed_offset();
        let mut crashed = log.clone();
        crashed.lose_unflushed();
        prop_assert_eq!(crashed.log_end_offset(), flushed);
        let survived: Vec<Entry<u32>> = crashed.entries().cloned().collect();
        prop_assert_eq!(&survived[..], &before[..flushed.0 as usize]);
        prop_assert_eq!(crashed.flushed_offset(), flushed);

        log.flush();
        prop_assert_eq!(log.flushed_offset(), log.log_end_offset());
        let epoch = before.last().map_or(LeaderEpoch(0), |e| e.epoch);
        let extra: Vec<Entry<u32>> =
            (0..more).map(|i| Entry { epoch, record: 500 + u32::from(i), producer: None }).collect();
        log.append(&extra);
        prop_assert_eq!(log.flushed_offset(), Offset(before.len() as u64));
        let mut after_flush = log.clone();
        after_flush.lose_unflushed();
        prop_assert_eq!(after_flush.entries().cloned().collect::<Vec<_>>(), before);
        log.flush();
        let mut again = log.clone();
        again.lose_unflushed();
        prop_assert_eq!(again, log);
    }

    /// `read(from, until, max)` is the slice of the log from `from`, up to `until` and the LEO,
    /// at most `max` entries.
    #[test]
    fn read_is_a_bounded_slice(ops in vec(op(), 0..30), from in 0u64..=12, until in 0u64..=14, max in 0usize..=5) {
        let (log, _) = drive(&ops);
        let all: Vec<Entry<u32>> = log.entries().cloned().collect();
        let end = (until as usize).min(all.len());
        let start = (from as usize).min(end);
        let expected: Vec<Entry<u32>> = all[start..end].iter().take(max).cloned().collect();
        prop_assert_eq!(log.read(Offset(from), Offset(until), max), expected);
    }
}

/// The worked example of the reference: epochs 1, 1, 3, 3, 4 at offsets 0–4.
#[test]
fn end_offset_for_worked_example() {
    let mut log = MemLog::new();
    for (record, epoch) in [(1u32, 1u32), (2, 1), (3, 3), (4, 3), (5, 4)] {
        log.append(&[Entry {
            epoch: LeaderEpoch(epoch),
            record,
            producer: None,
        }]);
    }
    let cache = EpochCache::from_log(&log);
    let leo = log.log_end_offset();
    assert_eq!(
        cache.entries(),
        &[
            (LeaderEpoch(1), Offset(0)),
            (LeaderEpoch(3), Offset(2)),
            (LeaderEpoch(4), Offset(4))
        ]
    );
    assert_eq!(cache.end_offset_for(LeaderEpoch(0), leo), None);
    assert_eq!(
        cache.end_offset_for(LeaderEpoch(1), leo),
        Some((LeaderEpoch(1), Offset(2)))
    );
    // Epoch 2 never wrote: the largest epoch below it is 1, which ends where 3 starts.
    assert_eq!(
        cache.end_offset_for(LeaderEpoch(2), leo),
        Some((LeaderEpoch(1), Offset(2)))
    );
    assert_eq!(
        cache.end_offset_for(LeaderEpoch(3), leo),
        Some((LeaderEpoch(3), Offset(4)))
    );
    assert_eq!(
        cache.end_offset_for(LeaderEpoch(4), leo),
        Some((LeaderEpoch(4), leo))
    );
    assert_eq!(
        cache.end_offset_for(LeaderEpoch(9), leo),
        Some((LeaderEpoch(4), leo))
    );
    let mut truncated = cache.clone();
    truncated.truncate_to(Offset(3));
    assert_eq!(
        truncated.entries(),
        &[(LeaderEpoch(1), Offset(0)), (LeaderEpoch(3), Offset(2))]
    );
    truncated.truncate_to(Offset(2));
    assert_eq!(truncated.entries(), &[(LeaderEpoch(1), Offset(0))]);
}

/// A log of record batches, as the runtime keeps Kafka's: record `w` occupies `w` offsets.
/// Only the epoch cache's width handling is under test here, so the log is deliberately naive.
#[derive(Clone, Debug, Default, PartialEq)]
struct BatchLog {
    /// (base offset, entry), ascending.
    entries: Vec<(Offset, Entry<u8>)>,
    flushed: Offset,
}

impl Log for BatchLog {
    type Record = u8;

    fn log_start_offset(&self) -> Offset {
        Offset(0)
    }
    fn log_end_offset(&self) -> Offset {
        self.entries
            .last()
            .map_or(Offset(0), |(o, e)| Offset(o.0 + u64::from(e.record)))
    }
    fn flushed_offset(&self) -> Offset {
        self.flushed
    }
    fn entry(&self, offset: Offset) -> Option<Entry<u8>> {
        self.entries
            .iter()
            .find(|(o, _)| *o == offset)
            .map(|(_, e)| e.clone())
    }
    fn read(&self, from: Offset, until: Offset, max: usize) -> Vec<Entry<u8>> {
        self.entries
            .iter()
            .filter(|(o, e)| o.0 + u64::from(e.record) > from.0 && *o < until)
            .take(max)
            .map(|(_, e)| e.clone())
            .collect()
    }
    fn append(&mut self, entries: &[Entry<u8>]) {
        for e in entries {
            let base = self.log_end_offset();
            self.entries.push((base, e.clone()));
        }
    }
    fn truncate_to(&mut self, offset: Offset) {
        self.entries.retain(|(o, _)| *o < offset);
        self.flushed = self.flushed.min(self.log_end_offset());
    }
    fn advance_log_start(&mut self, _offset: Offset) {
        unreachable!("the epoch cache's width laws never delete records")
    }
    fn flush(&mut self) {
        self.flushed = self.log_end_offset();
    }
    fn lose_unflushed(&mut self) {
        let flushed = self.flushed;
        self.entries.retain(|(o, _)| *o < flushed);
    }
    fn width(record: &u8) -> u64 {
        u64::from(*record)
    }
}

proptest! {
    #![proptest_config(config())]

    /// With records spanning several offsets (`Log::width`), the incrementally kept cache still
    /// equals `from_log`, its starts lie on batch boundaries, and `end_offset_for` still answers
    /// the largest epoch not above the requested one, ending where the next epoch's first batch
    /// starts.
    #[test]
    fn batch_widths_keep_the_cache_laws(
        ops in vec((0u32..=2, 1u8..=3, any::<bool>(), any::<prop::sample::Index>()), 0..30),
        requested in 0u32..=20,
    ) {
        let mut log = BatchLog::default();
        let mut cache = EpochCache::default();
        for (bump, width, truncate, at) in ops {
            if truncate && !log.entries.is_empty() {
                // Replicas truncate on batch boundaries only.
                let (to, _) = log.entries[at.index(log.entries.len())].clone();
                log.truncate_to(to);
                cache.truncate_to(to);
            } else {
                let last = log.entries.last().map_or(0, |(_, e)| e.epoch.0);
                let entry = Entry { epoch: LeaderEpoch(last + bump), record: width, producer: None };
                let first = log.log_end_offset();
                log.append(std::slice::from_ref(&entry));
                cache.record_all::<BatchLog>(first, std::slice::from_ref(&entry));
            }
        }
        prop_assert_eq!(&cache, &EpochCache::from_log(&log));
        let bases: Vec<Offset> = log.entries.iter().map(|(o, _)| *o).collect();
        for &(_, start) in cache.entries() {
            prop_assert!(bases.contains(&start));
        }
        let requested = LeaderEpoch(requested);
        let oracle = log
            .entries
            .iter()
            .map(|(_, e)| e.epoch)
            .filter(|&e| e <= requested)
            .max()
            .map(|epoch| {
                let end = log
                    .entries
                    .iter()
                    .find(|(_, e)| e.epoch > epoch)
                    .map_or(log.log_end_offset(), |(o, _)| *o);
                (epoch, end)
            });
        prop_assert_eq!(cache.end_offset_for(requested, log.log_end_offset()), oracle);
    }
}
