//! What the workload did and saw, operation by operation, and the checker that judges it.
//!
//! Every write is recorded when invoked and when it completes: acknowledged at an offset, or
//! indeterminate (an error or a timeout: the write may or may not be in the log, and either is
//! allowed). Every record a consumer read is recorded with its offset, every offset commit a
//! group member made, and every committed offset it was told. After the run, the whole log is
//! read back, and [`check`] compares: Jepsen's way, on real processes.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acks {
    All,
    One,
}

/// How a write ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Still running when the history was read (counted as indeterminate).
    Pending,
    /// Acknowledged: the record is at this offset.
    Acked(i64),
    /// An error or no answer: it may or may not have been written.
    Indeterminate(String),
}

#[derive(Clone, Debug)]
pub struct Write {
    pub producer: String,
    pub partition: u32,
    /// Unique in the run: `PRODUCER-SEQUENCE`.
    pub value: String,
    pub acks: Acks,
    pub invoked: Duration,
    pub completed: Option<Duration>,
    pub outcome: Outcome,
}

/// A record a consumer read: committed (below the high watermark) when it was served.
#[derive(Clone, Debug)]
pub struct Read {
    pub consumer: String,
    pub partition: u32,
    pub offset: i64,
    pub value: String,
    pub at: Duration,
}

/// A group member's offset commit that the coordinator acknowledged.
#[derive(Clone, Debug)]
pub struct Commit {
    pub consumer: String,
    pub partition: u32,
    pub offset: i64,
    pub invoked: Duration,
    pub completed: Duration,
}

/// A committed offset a group member was told (OffsetFetch), as it took over a partition.
#[derive(Clone, Debug)]
pub struct Told {
    pub consumer: String,
    pub partition: u32,
    pub offset: Option<i64>,
    pub invoked: Duration,
}

#[derive(Default)]
pub struct History {
    pub writes: Vec<Write>,
    pub reads: Vec<Read>,
    pub commits: Vec<Commit>,
    pub told: Vec<Told>,
}

/// The history, shared by the workload's tasks.
#[derive(Clone, Default)]
pub struct Recorder(Arc<Mutex<History>>);

impl Recorder {
    pub fn lock(&self) -> MutexGuard<'_, History> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a write's invocation; its index, for [`Recorder::complete`].
    pub fn invoke(&self, write: Write) -> usize {
        let mut h = self.lock();
        h.writes.push(write);
        h.writes.len() - 1
    }

    pub fn complete(&self, index: usize, outcome: Outcome, at: Duration) {
        if let Some(w) = self.lock().writes.get_mut(index) {
            w.outcome = outcome;
            w.completed = Some(at);
        }
    }
}

/// The log as read back after the heal: each partition's records in offset order from its log
/// start, and the group's committed offsets.
#[derive(Clone, Debug, Default)]
pub struct FinalState {
    pub logs: BTreeMap<u32, Vec<(i64, String)>>,
    /// Each partition's log start when it was read back: what lies below was deleted
    /// (retention, DeleteRecords), not lost. Absent: 0.
    pub log_starts: BTreeMap<u32, i64>,
    pub committed: BTreeMap<u32, Option<i64>>,
}

/// When the faults were healed, and when the workload ran, for the availability figures.
#[derive(Clone, Copy, Debug)]
pub struct Timeline {
    pub workload_start: Duration,
    pub healed: Duration,
    pub workload_end: Duration,
}

/// An acknowledged write the final log does not hold where it was acknowledged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lost {
    pub value: String,
    pub partition: u32,
    pub acked_at: i64,
    /// Where the final log holds it instead, if anywhere.
    pub found_at: Option<i64>,
    pub acks: Acks,
}

/// The checker's findings for one run.
#[derive(Clone, Debug, Default)]
pub struct Findings {
    pub attempted: usize,
    pub acknowledged: usize,
    pub indeterminate: usize,
    /// Acknowledged writes below their partition's log start: deleted, as retention may.
    pub deleted: usize,
    pub lost: Vec<Lost>,
    /// Values the final log holds at more than one offset.
    pub duplicated: Vec<(String, Vec<i64>)>,
    pub out_of_order: Vec<String>,
    /// Records a consumer read that the final log no longer holds at that offset.
    pub revoked_reads: Vec<String>,
    /// A committed offset below one the group had already committed.
    pub commit_regressions: Vec<String>,
    /// Records below a committed offset that no member read: the group resumed past them.
    pub skipped: Vec<String>,
    /// The longest time the group went without an acknowledged commit, from the first to the
    /// workload's end, and when that stretch began.
    pub commit_gap: Duration,
    pub commit_gap_from: Duration,
    pub reads: usize,
    pub commits: usize,
    /// The longest time a partition went without an acknowledged acks=all write, which, and
    /// when that stretch began.
    pub unavailable: Duration,
    pub unavailable_partition: Option<u32>,
    pub unavailable_from: Duration,
    /// From the heal to the first acknowledged acks=all write of the slowest partition
    /// (`None`: some partition had none after the heal).
    pub recovered: Option<Duration>,
}

/// The value's producer and sequence number (`PRODUCER-SEQUENCE`).
fn producer_and_sequence(value: &str) -> Option<(&str, u64)> {
    let (producer, seq) = value.rsplit_once('-')?;
    Some((producer, seq.parse().ok()?))
}

impl FinalState {
    /// Partition `p`'s log start when it was read back.
    pub fn log_start(&self, p: u32) -> i64 {
        self.log_starts.get(&p).copied().unwrap_or(0)
    }
}

/// Judges `history` against the log read back after the run.
pub fn check(history: &History, last: &FinalState, timeline: Timeline) -> Findings {
    let mut f = Findings {
        attempted: history.writes.len(),
        reads: history.reads.len(),
        commits: history.commits.len(),
        ..Findings::default()
    };
    let mut holds: HashMap<&str, Vec<(u32, i64)>> = HashMap::new();
    for (&p, log) in &last.logs {
        for (offset, value) in log {
            holds.entry(value.as_str()).or_default().push((p, *offset));
        }
    }
    for w in &history.writes {
        match w.outcome {
            Outcome::Acked(offset) if offset < last.log_start(w.partition) => {
                f.acknowledged += 1;
                f.deleted += 1;
            }
            Outcome::Acked(offset) => {
                f.acknowledged += 1;
                let found = holds.get(w.value.as_str());
                let here = found.is_some_and(|at| at.contains(&(w.partition, offset)));
                if !here {
                    f.lost.push(Lost {
                        value: w.value.clone(),
                        partition: w.partition,
                        acked_at: offset,
                        found_at: found.and_then(|at| at.first()).map(|&(_, o)| o),
                        acks: w.acks,
                    });
                }
            }
            _ => f.indeterminate += 1,
        }
    }
    let mut duplicated: Vec<(String, Vec<i64>)> = holds
        .iter()
        .filter(|(_, at)| at.len() > 1)
        .map(|(v, at)| (v.to_string(), at.iter().map(|&(_, o)| o).collect()))
        .collect();
    duplicated.sort();
    f.duplicated = duplicated;
    f.out_of_order = order(history, last);
    f.revoked_reads = revoked(history, last);
    f.commit_regressions = regressions(history, last);
    f.skipped = skipped(history, last);
    availability(history, timeline, &mut f);
    commit_gap(history, timeline, &mut f);
    f
}

/// ConsumerResumesWithoutLoss: every record below the group's committed offset of a partition
/// (the highest acknowledged commit, or what it holds after the run if higher) was read by some
/// member, so no resume, rebalance or coordinator failover skipped one.
fn skipped(history: &History, last: &FinalState) -> Vec<String> {
    let mut read: BTreeMap<u32, BTreeSet<i64>> = BTreeMap::new();
    for r in &history.reads {
        read.entry(r.partition).or_default().insert(r.offset);
    }
    let mut found = Vec::new();
    for (&p, log) in &last.logs {
        let acked = history
            .commits
            .iter()
            .filter(|c| c.partition == p)
            .map(|c| c.offset)
            .max();
        let committed = acked.max(last.committed.get(&p).copied().flatten());
        let Some(committed) = committed else {
            continue;
        };
        let seen = read.get(&p);
        let missed: Vec<i64> = log
            .iter()
            .map(|&(o, _)| o)
            .filter(|o| *o < committed && !seen.is_some_and(|s| s.contains(o)))
            .collect();
        if let (Some(first), n) = (missed.first(), missed.len()) {
            found.push(format!(
                "partition {p}: {n} records below the committed offset {committed} never read, \
                 the first at offset {first}"
            ));
        }
    }
    found
}

/// The longest stretch without an acknowledged commit of the group, from its first commit to
/// the workload's end.
fn commit_gap(history: &History, timeline: Timeline, f: &mut Findings) {
    let mut times: Vec<Duration> = history.commits.iter().map(|c| c.completed).collect();
    times.sort();
    let Some(&first) = times.first() else {
        return;
    };
    let mut previous = first;
    for &t in times.iter().chain([&timeline.workload_end]) {
        if t.saturating_sub(previous) > f.commit_gap {
            f.commit_gap = t.saturating_sub(previous);
            f.commit_gap_from = previous;
        }
        previous = previous.max(t);
    }
}

/// Offsets out of order: a partition's log not numbered on from its log start, a producer's
/// records in the log out of its sequence order, or a producer acknowledged at a lower offset
/// than its previous write.
fn order(history: &History, last: &FinalState) -> Vec<String> {
    let mut found = Vec::new();
    for (&p, log) in &last.logs {
        let start = last.log_start(p);
        if let Some(bad) = log
            .iter()
            .enumerate()
            .find(|(i, (o, _))| *o != start + *i as i64)
        {
            found.push(format!(
                "partition {p}: record {} is at offset {}",
                bad.0, bad.1 .0
            ));
        }
        let mut latest: HashMap<&str, u64> = HashMap::new();
        for (offset, value) in log {
            let Some((producer, seq)) = producer_and_sequence(value) else {
                continue;
            };
            if let Some(&before) = latest.get(producer) {
                if seq <= before {
                    found.push(format!(
                        "partition {p}: {value} at offset {offset} follows {producer}-{before}"
                    ));
                }
            }
            latest.insert(producer, seq);
        }
    }
    let mut acked: HashMap<&str, i64> = HashMap::new();
    for w in &history.writes {
        if let Outcome::Acked(offset) = w.outcome {
            if let Some(&before) = acked.get(w.producer.as_str()) {
                if offset <= before {
                    found.push(format!(
                        "{} acknowledged at offset {offset}, after an earlier write at {before}",
                        w.value
                    ));
                }
            }
            acked.insert(&w.producer, offset);
        }
    }
    found
}

/// ConsumerReadsAreNeverRevoked: every record a consumer read is in the final log, there,
/// unless it lies below the log start (deleted).
fn revoked(history: &History, last: &FinalState) -> Vec<String> {
    let logs: HashMap<u32, HashMap<i64, &str>> = last
        .logs
        .iter()
        .map(|(&p, log)| (p, log.iter().map(|(o, v)| (*o, v.as_str())).collect()))
        .collect();
    let mut seen = BTreeSet::new();
    let mut found = Vec::new();
    for r in &history.reads {
        if r.offset < last.log_start(r.partition)
            || !seen.insert((r.partition, r.offset, r.value.as_str()))
        {
            continue;
        }
        let now = logs.get(&r.partition).and_then(|l| l.get(&r.offset));
        if now != Some(&r.value.as_str()) {
            found.push(format!(
                "{} read {} at {}/{} ({:.1} s); the log now holds {}",
                r.consumer,
                r.value,
                r.partition,
                r.offset,
                r.at.as_secs_f64(),
                now.unwrap_or(&"nothing")
            ));
        }
    }
    found
}

/// Group committed offsets moving backwards: an acknowledged commit, or a committed offset a
/// member was told, below a commit acknowledged before it started; and the final committed
/// offset below the highest acknowledged commit.
fn regressions(history: &History, last: &FinalState) -> Vec<String> {
    let mut found = Vec::new();
    let mut by_partition: BTreeMap<u32, Vec<&Commit>> = BTreeMap::new();
    for c in &history.commits {
        by_partition.entry(c.partition).or_default().push(c);
    }
    // The highest commit of `p` acknowledged before `t`.
    let before = |p: u32, t: Duration| {
        by_partition
            .get(&p)
            .into_iter()
            .flatten()
            .filter(|c| c.completed < t)
            .map(|c| c.offset)
            .max()
    };
    for c in &history.commits {
        if let Some(high) = before(c.partition, c.invoked).filter(|&h| c.offset < h) {
            found.push(format!(
                "{} committed {} for partition {} at {:.1} s, after {high} was committed",
                c.consumer,
                c.offset,
                c.partition,
                c.invoked.as_secs_f64()
            ));
        }
    }
    for t in &history.told {
        if let Some(high) = before(t.partition, t.invoked).filter(|&h| t.offset < Some(h)) {
            found.push(format!(
                "{} was told {:?} for partition {} at {:.1} s, after {high} was committed",
                t.consumer,
                t.offset,
                t.partition,
                t.invoked.as_secs_f64()
            ));
        }
    }
    for (p, commits) in &by_partition {
        let high = commits.iter().map(|c| c.offset).max();
        let now = last.committed.get(p).copied().flatten();
        if now < high {
            found.push(format!(
                "partition {p}: the group's committed offset is {now:?} after {high:?} was committed"
            ));
        }
    }
    found
}

/// The longest stretch without an acknowledged acks=all write, per partition, over the whole
/// workload; and how long after the heal every partition had one again.
fn availability(history: &History, timeline: Timeline, f: &mut Findings) {
    let mut acks: BTreeMap<u32, Vec<Duration>> = BTreeMap::new();
    for w in &history.writes {
        if let (Outcome::Acked(_), Some(at), Acks::All) = (&w.outcome, w.completed, w.acks) {
            acks.entry(w.partition).or_default().push(at);
        }
    }
    let mut recovered = Some(Duration::ZERO);
    for (&p, times) in acks.iter_mut() {
        times.sort();
        let mut previous = timeline.workload_start;
        for &t in times.iter().chain([&timeline.workload_end]) {
            let gap = t.saturating_sub(previous);
            if gap > f.unavailable {
                f.unavailable = gap;
                f.unavailable_partition = Some(p);
                f.unavailable_from = previous;
            }
            previous = previous.max(t);
        }
        let first_after = times.iter().find(|&&t| t >= timeline.healed);
        recovered = match (recovered, first_after) {
            (Some(r), Some(&t)) => Some(r.max(t - timeline.healed)),
            _ => None,
        };
    }
    f.recovered = if acks.is_empty() { None } else { recovered };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn write(producer: &str, seq: u64, partition: u32, outcome: Outcome, at: u64) -> Write {
        Write {
            producer: producer.into(),
            partition,
            value: format!("{producer}-{seq}"),
            acks: Acks::All,
            invoked: ms(at.saturating_sub(1)),
            completed: Some(ms(at)),
            outcome,
        }
    }

    fn timeline() -> Timeline {
        Timeline {
            workload_start: ms(0),
            healed: ms(500),
            workload_end: ms(1000),
        }
    }

    fn log(values: &[&str]) -> Vec<(i64, String)> {
        values
            .iter()
            .enumerate()
            .map(|(i, v)| (i as i64, v.to_string()))
            .collect()
    }

    #[test]
    fn records_below_the_log_start_are_deleted_not_lost_and_the_log_counts_from_it() {
        let history = History {
            writes: vec![
                write("a", 0, 0, Outcome::Acked(0), 100),
                write("a", 1, 0, Outcome::Acked(1), 200),
                write("a", 2, 0, Outcome::Acked(2), 300),
            ],
            reads: vec![Read {
                consumer: "m1".into(),
                partition: 0,
                offset: 0,
                value: "a-0".into(),
                at: ms(150),
            }],
            ..History::default()
        };
        let last = FinalState {
            logs: BTreeMap::from([(0, vec![(2, "a-2".to_string())])]),
            log_starts: BTreeMap::from([(0, 2)]),
            ..FinalState::default()
        };
        let f = check(&history, &last, timeline());
        assert_eq!((f.acknowledged, f.deleted), (3, 2));
        assert!(f.lost.is_empty(), "{:?}", f.lost);
        assert!(f.out_of_order.is_empty(), "{:?}", f.out_of_order);
        assert!(f.revoked_reads.is_empty(), "{:?}", f.revoked_reads);
        // Above the log start, a missing write is still lost.
        let gone = FinalState {
            logs: BTreeMap::from([(0, vec![(1, "a-1".to_string())])]),
            log_starts: BTreeMap::from([(0, 1)]),
            ..FinalState::default()
        };
        let f = check(&history, &gone, timeline());
        assert_eq!(f.lost.len(), 1, "{:?}", f.lost);
        assert_eq!(f.lost[0].value, "a-2");
    }

    #[test]
    fn a_clean_history_has_no_findings() {
        let history = History {
            writes: vec![
                write("a", 0, 0, Outcome::Acked(0), 100),
                write("a", 1, 0, Outcome::Indeterminate("timeout".into()), 200),
                write("a", 2, 0, Outcome::Acked(1), 600),
            ],
            ..History::default()
        };
        let last = FinalState {
            logs: BTreeMap::from([(0, log(&["a-0", "a-2"]))]),
            ..FinalState::default()
        };
        let f = check(&history, &last, timeline());
        assert_eq!((f.attempted, f.acknowledged, f.indeterminate), (3, 2, 1));
        assert!(f.lost.is_empty() && f.duplicated.is_empty() && f.out_of_order.is_empty());
        // 100 → 600 is the longest stretch without an acknowledgement.
        assert_eq!(f.unavailable, ms(500));
        assert_eq!(
            (f.unavailable_partition, f.unavailable_from),
            (Some(0), ms(100))
        );
        assert_eq!(f.recovered, Some(ms(100)));
    }

    #[test]
    fn lost_moved_duplicated_and_reordered_writes_are_found() {
        let history = History {
            writes: vec![
                write("a", 0, 0, Outcome::Acked(0), 100),
                write("a", 1, 0, Outcome::Acked(1), 200),
                write("a", 2, 0, Outcome::Acked(2), 300),
                write("b", 0, 0, Outcome::Acked(1), 300),
                write("b", 1, 0, Outcome::Acked(0), 400),
            ],
            ..History::default()
        };
        // a-1 lost, a-2 moved to 0 and stored twice, a-0 after a-2.
        let last = FinalState {
            logs: BTreeMap::from([(0, log(&["a-2", "b-0", "a-0", "a-2"]))]),
            ..FinalState::default()
        };
        let f = check(&history, &last, timeline());
        let lost: Vec<(&str, Option<i64>)> = f
            .lost
            .iter()
            .map(|l| (l.value.as_str(), l.found_at))
            .collect();
        assert_eq!(
            lost,
            vec![
                ("a-0", Some(2)),
                ("a-1", None),
                ("a-2", Some(0)),
                ("b-1", None)
            ]
        );
        assert_eq!(f.duplicated, vec![("a-2".to_string(), vec![0, 3])]);
        // In the log, a-0 comes after a-2; in the acknowledgements, b-1 before b-0.
        assert_eq!(f.out_of_order.len(), 2, "{:?}", f.out_of_order);
        assert!(f.out_of_order[0].contains("a-0 at offset 2 follows a-2"));
        assert!(f.out_of_order[1].contains("b-1 acknowledged at offset 0"));
        assert_eq!(f.recovered, None, "no acknowledgement after the heal");
    }

    #[test]
    fn a_read_that_disappears_and_a_commit_that_moves_back_are_found() {
        let history = History {
            reads: vec![Read {
                consumer: "m1".into(),
                partition: 0,
                offset: 1,
                value: "a-1".into(),
                at: ms(300),
            }],
            commits: vec![
                Commit {
                    consumer: "m1".into(),
                    partition: 0,
                    offset: 2,
                    invoked: ms(300),
                    completed: ms(310),
                },
                Commit {
                    consumer: "m2".into(),
                    partition: 0,
                    offset: 1,
                    invoked: ms(400),
                    completed: ms(410),
                },
            ],
            told: vec![Told {
                consumer: "m2".into(),
                partition: 0,
                offset: None,
                invoked: ms(350),
            }],
            ..History::default()
        };
        let last = FinalState {
            logs: BTreeMap::from([(0, log(&["a-0", "x-9"]))]),
            committed: BTreeMap::from([(0, Some(1))]),
            ..FinalState::default()
        };
        let f = check(&history, &last, timeline());
        assert_eq!(f.revoked_reads.len(), 1, "{:?}", f.revoked_reads);
        assert!(f.revoked_reads[0].contains("x-9"));
        // m2 told nothing after 2 was committed, m2 committing 1, and the final 1 < 2.
        assert_eq!(f.commit_regressions.len(), 3, "{:?}", f.commit_regressions);
    }

    #[test]
    fn a_record_below_a_commit_that_no_member_read_and_the_longest_commit_gap_are_found() {
        let read = |partition, offset| Read {
            consumer: "m1".into(),
            partition,
            offset,
            value: format!("a-{offset}"),
            at: ms(100),
        };
        let commit = |partition, offset, completed| Commit {
            consumer: "m1".into(),
            partition,
            offset,
            invoked: ms(completed - 5),
            completed: ms(completed),
        };
        let history = History {
            reads: vec![read(0, 0), read(0, 2), read(1, 0)],
            commits: vec![commit(0, 3, 100), commit(1, 1, 150), commit(0, 3, 700)],
            ..History::default()
        };
        let last = FinalState {
            logs: BTreeMap::from([(0, log(&["a-0", "a-1", "a-2", "a-3"])), (1, log(&["a-0"]))]),
            committed: BTreeMap::from([(0, Some(3)), (1, Some(1))]),
            ..FinalState::default()
        };
        let f = check(&history, &last, timeline());
        assert_eq!(f.skipped.len(), 1, "{:?}", f.skipped);
        assert!(
            f.skipped[0].contains("partition 0: 1 records") && f.skipped[0].contains("offset 1"),
            "{:?}",
            f.skipped
        );
        assert_eq!((f.commit_gap, f.commit_gap_from), (ms(550), ms(150)));
    }
}
