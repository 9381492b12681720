//! What the broker keeps beside each replica it hosts: the partition's directory and the
//! checkpoints it wrote, and the producers and consumers waiting for the core's answers. The
//! core's [`isr::Replicas`] holds each replica with this, and knows when each replica's timers
//! are due; everything the protocol decides (requests, retries, held fetches, what waits for a
//! flush) is the replica's own state.

use super::host::{Committed, HostError};
use crate::storage::{DiskLog, OpenError, PartitionDir, DEFAULT_SEGMENT_BYTES};
use crate::trace::Tracer;
use crate::wire::admin::ReplicaView;
use isr::{
    BrokerId, DeleteId, EpochCache, Log, Offset, PartitionId, ProduceId, ReadId, Replica, Role,
};
use std::collections::HashMap;
use std::path::Path;
use tokio::sync::oneshot;
use tracing::warn;

/// How a producer learns its write's fate.
pub type ProduceReply = oneshot::Sender<Result<Offset, HostError>>;
/// How a consumer gets its records.
pub type ReadReply = oneshot::Sender<Result<Committed, HostError>>;
/// How a DeleteRecords learns the log start it left (or why it was refused).
pub type DeleteReply = oneshot::Sender<Result<Offset, HostError>>;

/// What the driver keeps beside one hosted replica.
pub struct Beside {
    dir: PartitionDir,
    saved_epochs: EpochCache,
    /// Producers waiting for the core's `Acknowledge` or `FailWrite`.
    pub waiting: HashMap<ProduceId, ProduceReply>,
    /// Consumers waiting for the core's `Read`.
    pub reading: HashMap<ReadId, ReadReply>,
    /// DeleteRecords waiting for the core's `RecordsDeleted`.
    pub deleting: HashMap<DeleteId, DeleteReply>,
    /// Set when storage failed, with why: the replica is stopped for good (the host takes it
    /// offline in the core, [`isr::Replicas::take_offline`]).
    pub failed: Option<String>,
    /// When the driver last flushed the log (wall-clock milliseconds; the time it was opened
    /// before the first): a topic's `flush.ms` counts from it.
    pub flushed_at_ms: i64,
}

impl Beside {
    /// Recovers a partition from its directory (creating it when new), and says what it found
    /// in the trace, if there is one: the replica, and what to keep beside it.
    pub fn open(
        broker_dir: &Path,
        me: BrokerId,
        partition: PartitionId,
        tracer: Option<&mut Tracer>,
    ) -> Result<(Replica<DiskLog>, Beside), OpenError> {
        let dir = PartitionDir::new(broker_dir, partition);
        let (log, hw) = dir.open(DEFAULT_SEGMENT_BYTES)?;
        if let Some(tracer) = tracer {
            tracer.open(partition, hw, &log);
        }
        let replica = Replica::recover(me, partition, log, hw);
        let saved_epochs = match dir.load_epochs() {
            Ok(saved) => saved.unwrap_or_default(),
            Err(e) => {
                warn!(%partition, error = %e, "ignoring the leader epoch checkpoint");
                EpochCache::default()
            }
        };
        if saved_epochs != *replica.epoch_cache() && !saved_epochs.entries().is_empty() {
            warn!(%partition, saved = ?saved_epochs, from_log = ?replica.epoch_cache(),
                "leader epoch checkpoint disagrees with the log; the log wins");
        }
        let beside = Beside {
            saved_epochs,
            dir,
            waiting: HashMap::new(),
            reading: HashMap::new(),
            deleting: HashMap::new(),
            failed: None,
            flushed_at_ms: crate::timing::wall_clock_ms(),
        };
        Ok((replica, beside))
    }

    /// Writes the high watermark checkpoint the core asked `replica` for, and the leader epoch
    /// checkpoint with it if that changed (the log is the source of both on recovery; the
    /// epoch file is for operators and tools).
    pub fn checkpoint(&mut self, replica: &Replica<DiskLog>, hw: Offset) {
        if let Err(e) = self.dir.save_high_watermark(hw) {
            return self.fail(replica.partition(), e.to_string());
        }
        if *replica.epoch_cache() != self.saved_epochs {
            let epochs = replica.epoch_cache().clone();
            match self.dir.save_epochs(&epochs) {
                Ok(()) => self.saved_epochs = epochs,
                Err(e) => self.fail(replica.partition(), e.to_string()),
            }
        }
    }

    /// Checks `replica`'s storage after a step or a flush; a failed log stops the replica
    /// (Kafka takes the log directory offline). Waiting producers and consumers are dropped,
    /// which answers them with an error.
    pub fn check_storage(&mut self, replica: &Replica<DiskLog>) {
        if let Some(e) = replica.log().failure() {
            let msg = e.to_string();
            self.fail(replica.partition(), msg);
        }
    }

    /// Stops the replica for good: it is never stepped again, and the broker stops (see
    /// [`super::host::Host::run`]).
    fn fail(&mut self, partition: PartitionId, why: String) {
        if self.failed.is_none() {
            warn!(%partition, error = %why, "storage failed; stopping the replica");
            self.waiting.clear();
            self.reading.clear();
            self.deleting.clear();
            self.failed = Some(why);
        }
    }

    /// `replica` as `isr status` shows it.
    pub fn view(&self, replica: &Replica<DiskLog>) -> ReplicaView {
        let role = match replica.role() {
            Role::Offline => "offline".to_string(),
            Role::Leader(_) => "leader".to_string(),
            Role::Follower(f) => match f.leader() {
                Some(l) => format!("follower of {l}"),
                None => "follower".to_string(),
            },
        };
        ReplicaView {
            partition: replica.partition(),
            role,
            leader_epoch: replica.leader_epoch(),
            log_end_offset: replica.log_end_offset(),
            high_watermark: replica.high_watermark(),
            log_start_offset: replica.log().log_start_offset(),
            flushed_offset: replica.log().flushed_offset(),
            followers: replica
                .leader_state()
                .map(|l| l.follower_log_end_offsets().collect())
                .unwrap_or_default(),
            failed: self.failed.clone(),
        }
    }

    /// Removes the partition's directory, log and checkpoints (its topic was deleted), after
    /// answering waiting producers and consumers that it is not hosted here any more, and
    /// closing `replica`'s log.
    pub fn remove(self, replica: Replica<DiskLog>) -> std::io::Result<()> {
        let Beside {
            dir,
            waiting,
            reading,
            deleting,
            ..
        } = self;
        for reply in waiting.into_values() {
            let _ = reply.send(Err(HostError::NotHosted));
        }
        for reply in reading.into_values() {
            let _ = reply.send(Err(HostError::NotHosted));
        }
        for reply in deleting.into_values() {
            let _ = reply.send(Err(HostError::NotHosted));
        }
        drop(replica);
        dir.remove()
    }
}
