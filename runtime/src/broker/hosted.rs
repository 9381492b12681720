//! One partition hosted by a broker: the core replica over its disk log, plus what the driver
//! keeps around it — checkpoints written, the follower's request in flight, fetches a leader
//! holds until there is data, producers waiting for their acknowledgement.

use super::host::HostError;
use crate::storage::{DiskLog, OpenError, PartitionDir, DEFAULT_SEGMENT_BYTES};
use crate::wire::admin::ReplicaView;
use bytes::Bytes;
use isr::{
    BrokerId, Effect, Envelope, EpochCache, FetchRequest, Log, Offset, PartitionId, ProduceId,
    Replica, Role,
};
use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;
use tokio::sync::oneshot;
use tracing::warn;

/// How an acks=all producer learns its write's fate.
pub type ProduceReply = oneshot::Sender<Result<Offset, HostError>>;

pub struct Hosted {
    pub replica: Replica<DiskLog>,
    dir: PartitionDir,
    saved_hw: Offset,
    saved_epochs: EpochCache,
    /// Follower: when the request to the leader was sent; `None` when none is outstanding.
    pub in_flight: Option<Instant>,
    /// Leader: fetches that found nothing new, answered when data arrives or they expire.
    pub parked: Vec<(FetchRequest, Instant)>,
    /// Leader: acks=all producers waiting for the high watermark.
    pub waiting: HashMap<ProduceId, ProduceReply>,
    /// Leader: the AlterPartition last sent, resent while still pending (the controller may
    /// never have received it).
    pub alter_sent: Option<(Envelope<Bytes>, Instant)>,
    /// Set when storage failed: the replica is stopped for good.
    pub failed: Option<String>,
    /// Effects of steps whose log still owes a sync (group commit), carried out in order by
    /// the host once [`Hosted::sync`] has made the log durable.
    pub held: Vec<Effect<Bytes>>,
    /// acks=0/1 answers (the leader's own write is enough) waiting for the same sync.
    pub held_acks: Vec<(ProduceReply, Offset)>,
}

impl Hosted {
    /// Recovers a partition from its directory (creating it when new).
    pub fn open(
        broker_dir: &Path,
        me: BrokerId,
        partition: PartitionId,
    ) -> Result<Hosted, OpenError> {
        let dir = PartitionDir::new(broker_dir, partition);
        let (mut log, hw) = dir.open(DEFAULT_SEGMENT_BYTES)?;
        log.defer_flushes();
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
        Ok(Hosted {
            saved_hw: hw,
            saved_epochs,
            replica,
            dir,
            in_flight: None,
            parked: Vec::new(),
            waiting: HashMap::new(),
            alter_sent: None,
            failed: None,
            held: Vec::new(),
            held_acks: Vec::new(),
        })
    }

    /// Writes the high watermark and epoch checkpoints if they changed. The high watermark saved
    /// is the core's durable one (what survives a crash), never ahead of the flushed log.
    pub fn checkpoint(&mut self) {
        self.sync();
        let hw = self.replica.hw_checkpoint();
        if hw != self.saved_hw {
            match self.dir.save_high_watermark(hw) {
                Ok(()) => self.saved_hw = hw,
                Err(e) => self.fail(e.to_string()),
            }
        }
        if *self.replica.epoch_cache() != self.saved_epochs {
            let epochs = self.replica.epoch_cache().clone();
            match self.dir.save_epochs(&epochs) {
                Ok(()) => self.saved_epochs = epochs,
                Err(e) => self.fail(e.to_string()),
            }
        }
    }

    /// Carries out the flushes the core asked for since the last sync: one fsync for all of
    /// them (group commit). Storage failure stops the replica, as for any write.
    pub fn sync(&mut self) {
        if self.replica.log().sync_owed() {
            self.replica.log_mut().sync_now();
            self.check_storage();
        }
    }

    /// Checks storage after a step; a failed log stops the replica (Kafka takes the log
    /// directory offline). Waiting producers are dropped, which answers them with an error.
    pub fn check_storage(&mut self) {
        if let Some(e) = self.replica.log().failure() {
            let msg = e.to_string();
            self.fail(msg);
        }
    }

    fn fail(&mut self, why: String) {
        if self.failed.is_none() {
            warn!(partition = %self.replica.partition(), error = %why,
                "storage failed; stopping the replica");
            self.replica.crash();
            self.waiting.clear();
            self.parked.clear();
            self.held.clear();
            self.held_acks.clear();
            self.failed = Some(why);
        }
    }

    pub fn view(&self) -> ReplicaView {
        let r = &self.replica;
        let role = match r.role() {
            Role::Offline => "offline".to_string(),
            Role::Leader(_) => "leader".to_string(),
            Role::Follower(f) => match f.leader {
                Some(l) => format!("follower of {l}"),
                None => "follower".to_string(),
            },
        };
        ReplicaView {
            partition: r.partition(),
            role,
            leader_epoch: r.leader_epoch(),
            log_end_offset: r.log_end_offset(),
            high_watermark: r.high_watermark(),
            followers: r
                .leader_state()
                .map(|l| {
                    l.followers
                        .iter()
                        .map(|(&b, p)| (b, p.log_end_offset))
                        .collect()
                })
                .unwrap_or_default(),
            failed: self.failed.clone(),
        }
    }

    pub fn log_start_offset(&self) -> Offset {
        self.replica.log().log_start_offset()
    }

    /// Removes the partition's directory, log and checkpoints (its topic was deleted), after
    /// answering waiting producers that it is not hosted here any more.
    pub fn remove(self) -> std::io::Result<()> {
        let Hosted {
            replica,
            dir,
            waiting,
            held_acks,
            ..
        } = self;
        let replies = waiting
            .into_values()
            .chain(held_acks.into_iter().map(|(r, _)| r));
        for reply in replies {
            let _ = reply.send(Err(HostError::NotHosted));
        }
        drop(replica);
        dir.remove()
    }
}
