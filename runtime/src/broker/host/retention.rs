//! The retention pass on the replica thread: each hosted partition rolls its active segment
//! by its topic's `segment.bytes` and `segment.ms`; under `cleanup.policy=delete` the core
//! moves its log start to where the topic's `retention.ms` and `retention.bytes` let it (never
//! past the replica's high watermark: the core caps it, rule 17), and under `compact` the core
//! lets the log clean up to the high watermark (rule 18) and a cleaning starts on the cleaner
//! thread when enough of the log is dirty ([`Cleaner`]). Leaders and followers apply the
//! policy to their own segments, as Kafka's brokers do; followers also follow their leader's
//! log start.

use super::{Command, Host};
use crate::storage::cleaner::{self, Cleaned, CleaningPolicy, Job};
use crate::storage::retention::retention_point;
use crate::storage::throttle::Throttle;
use crate::storage::CleanedTo;
use isr::{Log, PartitionId, ReplicaInput};
use isr_kafka::configs::LogRetention;
use std::collections::BTreeSet;
use tokio::sync::mpsc;
use tracing::{info, warn};

/// The cleaner thread: cleans one log at a time, off the replica thread, so that compaction
/// never blocks produce or fetch; each result comes back as a [`Command::Cleaned`].
pub struct Cleaner {
    jobs: std::sync::mpsc::Sender<Task>,
    /// Partitions with a cleaning under way: one at a time each.
    busy: BTreeSet<PartitionId>,
}

/// What the cleaner thread does.
enum Task {
    /// Clean a log.
    Clean(PartitionId, Job),
    /// Make a cleaning installed in a partition's directory durable, then record where it
    /// ended ([`CleanedTo::persist`]): its renames dirtied the directory, and on ext4 without
    /// a journal the next fsync of a file created in it (the replica thread's, at the next
    /// segment roll) would otherwise write the directory out first, in the replica thread's
    /// time.
    Persist(CleanedTo),
}

impl Cleaner {
    /// Starts the thread, whose offset map takes at most `map_bytes` (the broker's one cleaner
    /// thread has the whole dedupe buffer); it ends when the cleaner is dropped (the replica
    /// thread's end).
    pub fn start(
        results: mpsc::UnboundedSender<Command>,
        map_bytes: u64,
        io_max_bytes_per_second: Option<f64>,
    ) -> std::io::Result<Cleaner> {
        let map_bytes = usize::try_from(map_bytes).unwrap_or(usize::MAX);
        let (jobs, queue) = std::sync::mpsc::channel::<Task>();
        std::thread::Builder::new()
            .name("cleaner".into())
            .spawn(move || {
                background_priority();
                let mut throttle = Throttle::new(io_max_bytes_per_second);
                for task in queue {
                    let (partition, job) = match task {
                        Task::Clean(partition, job) => (partition, job),
                        Task::Persist(cleaned_to) => {
                            if let Err(e) = cleaned_to.persist() {
                                warn!(error = %e, "cannot record a cleaning durably");
                            }
                            continue;
                        }
                    };
                    let result =
                        cleaner::clean(&job, map_bytes, &mut throttle).map_err(|e| e.to_string());
                    if let Err(mpsc::error::SendError(Command::Cleaned {
                        result: Ok(cleaned),
                        ..
                    })) = results.send(Command::Cleaned { partition, result })
                    {
                        cleaner::discard(&cleaned.segments);
                        return;
                    }
                }
            })?;
        Ok(Cleaner {
            jobs,
            busy: BTreeSet::new(),
        })
    }
}

/// Lowers the calling thread to the lowest CPU priority (nice 19): the cleaner's parsing and
/// hashing of whole segments then takes only CPU the replica and network threads leave, so
/// that it does not add to their latency when the cores are busy. Best effort: a thread that
/// may not lower itself keeps its priority.
fn background_priority() {
    // SAFETY: gettid and setpriority take no pointers; PRIO_PROCESS with a thread id sets the
    // nice value of that thread alone on Linux.
    unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 19);
    }
}

/// How a log's active segment rolls: at this many bytes, and (if any) once a record is this
/// many milliseconds newer than its first.
pub(super) type Rolling = (u64, Option<i64>);

impl Host {
    pub(super) fn on_retention(&mut self, policies: &[(PartitionId, LogRetention)], now_ms: i64) {
        let cfg = self.cfg;
        for &(partition, policy) in policies {
            let segment_ms = (policy.segment_ms >= 0).then_some(policy.segment_ms);
            // The log's segment settings change through the core, which reschedules the
            // replica after any change to its log.
            let pass = self.replicas.update(&cfg, partition, |replica, beside| {
                // flush.ms: a log with unflushed records whose last flush is that old joins the
                // next group commit (Kafka's log flusher, which runs every
                // log.flush.scheduler.interval.ms; here every pass).
                let flush_overdue = replica.log().flushed_offset() < replica.log_end_offset()
                    && now_ms.saturating_sub(beside.flushed_at_ms) >= policy.flush_ms;
                let log = replica.log_mut();
                log.set_rolling(policy.segment_bytes, segment_ms);
                let mut expired = None;
                if policy.delete {
                    let segments: Vec<_> = log.segments().collect();
                    let point = retention_point(&segments, &policy, now_ms);
                    expired = point.filter(|&p| p > log.log_start_offset());
                }
                (flush_overdue, expired)
            });
            let Some((flush_overdue, expired)) = pass else {
                self.rolling_ahead
                    .insert(partition, (policy.segment_bytes, segment_ms));
                continue;
            };
            self.rolling_ahead.remove(&partition);
            if let Some(before) = expired {
                self.step(partition, ReplicaInput::Retain { before });
            }
            if policy.compact {
                self.step(partition, ReplicaInput::Compact);
                self.start_cleaning(partition, &policy, now_ms);
            }
            if flush_overdue {
                self.flush_due.insert(partition);
            }
        }
    }

    /// Hands the partition's log to the cleaner thread, if it has enough to clean and no
    /// cleaning under way.
    fn start_cleaning(&mut self, partition: PartitionId, policy: &LogRetention, now_ms: i64) {
        let (Some(cleaner), Some(replica)) = (self.cleaner.as_mut(), self.replicas.get(partition))
        else {
            return;
        };
        if cleaner.busy.contains(&partition) {
            return;
        }
        let schedule = CleaningPolicy {
            min_dirty_ratio: policy.min_cleanable_dirty_ratio,
            min_lag_ms: policy.min_compaction_lag_ms,
            max_lag_ms: policy.max_compaction_lag_ms,
            delete_retention_ms: policy.delete_retention_ms,
        };
        let job = replica.log().cleaning_job(&schedule, now_ms);
        if let Some(job) = job {
            if cleaner.jobs.send(Task::Clean(partition, job)).is_ok() {
                cleaner.busy.insert(partition);
            }
        }
    }

    /// A cleaning finished: its segments replace the log's where the log has not changed
    /// under them ([`crate::storage::DiskLog::install`]).
    pub(super) fn on_cleaned(&mut self, partition: PartitionId, result: Result<Cleaned, String>) {
        if let Some(cleaner) = self.cleaner.as_mut() {
            cleaner.busy.remove(&partition);
        }
        let cleaned = match result {
            Ok(cleaned) => cleaned,
            Err(why) => {
                warn!(%partition, %why, "cleaning failed; the log is as it was");
                return;
            }
        };
        if self.replicas.get(partition).is_none() {
            cleaner::discard(&cleaned.segments);
            return;
        }
        let (records, bytes, end) = (cleaned.removed_records, cleaned.saved_bytes, cleaned.end);
        // Through the core, which reschedules the replica after its log changed.
        let cfg = self.cfg;
        let installed = self.replicas.update(&cfg, partition, |replica, _| {
            replica.log_mut().install(cleaned)
        });
        if let (Some(installed), Some(replica)) = (installed, self.replicas.get(partition)) {
            if let Some(tracer) = &self.tracer {
                tracer.cleaned(partition, replica.log(), &installed);
            }
            if let Some(cleaner) = &self.cleaner {
                let _ = cleaner.jobs.send(Task::Persist(replica.log().cleaned_to()));
            }
        }
        info!(%partition, removed_records = records, saved_bytes = bytes, cleaned_below = %end,
            "log cleaned");
        self.check(partition);
    }
}

#[cfg(test)]
mod tests {
    /// The cleaner's thread runs at the lowest priority, and only that thread.
    #[test]
    fn background_priority_lowers_the_calling_thread_alone() {
        // SAFETY: getpriority takes no pointers; errno is not consulted (19 and 0 are plain).
        let nice =
            || unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) };
        let before = nice();
        let lowered = std::thread::spawn(move || {
            super::background_priority();
            nice()
        })
        .join()
        .expect("thread");
        assert_eq!(lowered, 19);
        assert_eq!(nice(), before, "the calling thread alone");
    }
}
