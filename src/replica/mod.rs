//! One partition's replica on one broker: its log, high watermark, epochs and role.
//!
//! All protocol decisions a broker makes about a partition are methods here. A driver (a model,
//! a test, the runtime) feeds it inputs — messages, producer writes, ticks, crashes — and carries
//! out the [`Effect`]s it returns. The leader side lives in `leader.rs`, the follower side in
//! `follower.rs`; this file holds the state, role changes, crashes and restarts.

mod follower;
mod leader;

use crate::config::{Config, FlushPolicy, TruncationRule};
use crate::epoch_cache::EpochCache;
use crate::log::{Entry, Log};
use crate::message::{Effect, Effects, LeaderAndIsr, Message, ProduceId};
use crate::types::{
    BrokerEpoch, BrokerId, ControllerEpoch, LeaderEpoch, Offset, PartitionEpoch, PartitionId, Tick,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

pub use follower::FollowerPhase;

/// What a replica is doing for its partition.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Role {
    /// The broker is down (crashed or shut down). It answers nothing.
    Offline,
    /// Following `leader`, or waiting to learn who leads (`leader: None`).
    Follower(FollowerState),
    /// Leading the partition in the replica's current leader epoch.
    Leader(LeaderState),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FollowerState {
    pub leader: Option<BrokerId>,
    pub phase: FollowerPhase,
}

/// What the leader knows about one follower.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FollowerProgress {
    /// The follower's LEO as proven by its last Fetch in this epoch; `None` until it fetched
    /// (rule 5: only fetches in the leader's current epoch count).
    pub log_end_offset: Option<Offset>,
    /// The incarnation that sent that fetch (KIP-903).
    pub broker_epoch: BrokerEpoch,
    /// The last time the follower's fetch reached the leader's LEO.
    pub last_caught_up: Tick,
}

/// An acks=all write waiting for the high watermark to pass it (rule 9).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PendingWrite {
    pub id: ProduceId,
    pub base_offset: Offset,
    /// One past the write's last record: acknowledged once HW ≥ this.
    pub end_offset: Offset,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LeaderState {
    pub assigned: Vec<BrokerId>,
    /// The ISR as last confirmed by the controller.
    pub isr: BTreeSet<BrokerId>,
    /// The ISR proposed in an AlterPartition the controller has not answered yet (rule 7).
    pub proposed_isr: Option<BTreeSet<BrokerId>>,
    /// The broker epochs the pending proposal names for the replicas it adds (KIP-903).
    pub proposed_broker_epochs: BTreeMap<BrokerId, BrokerEpoch>,
    /// The LEO when this replica became leader: where its epoch starts (rule 2, rule 6).
    pub epoch_start_offset: Offset,
    pub min_insync_replicas: usize,
    pub followers: BTreeMap<BrokerId, FollowerProgress>,
    pub pending_writes: Vec<PendingWrite>,
}

impl LeaderState {
    /// Forgets the pending ISR change: confirmed, refused, or superseded.
    pub fn clear_proposal(&mut self) {
        self.proposed_isr = None;
        self.proposed_broker_epochs.clear();
    }

    /// The ISR the high watermark is computed over (rule 7): while a change is pending, the
    /// maximal ISR (confirmed ∪ proposed) under the safe rule, else the minimal one.
    pub fn high_watermark_isr(&self, maximal: bool) -> BTreeSet<BrokerId> {
        match &self.proposed_isr {
            None => self.isr.clone(),
            Some(p) if maximal => self.isr.union(p).copied().collect(),
            Some(p) => self.isr.intersection(p).copied().collect(),
        }
    }
}

/// One partition's replica on one broker.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Replica<L> {
    pub(crate) id: BrokerId,
    pub(crate) partition: PartitionId,
    pub(crate) log: L,
    pub(crate) epoch_cache: EpochCache,
    pub(crate) high_watermark: Offset,
    /// The high watermark as of the last flush: what an unclean crash leaves behind.
    pub(crate) hw_checkpoint: Offset,
    /// The latest leader epoch this replica has been told of.
    pub(crate) leader_epoch: LeaderEpoch,
    /// The version of the controller's partition state this replica acts on.
    pub(crate) partition_epoch: PartitionEpoch,
    /// This broker's incarnation, as the controller last told it (KIP-903).
    pub(crate) broker_epoch: BrokerEpoch,
    /// The newest controller epoch this replica has heard from (rule 11): orders and answers
    /// from an older controller come from a deposed one.
    pub(crate) controller_epoch: ControllerEpoch,
    pub(crate) role: Role,
}

impl<L: Log> Replica<L> {
    /// A replica over an existing log, waiting for the controller to tell it its role. The log
    /// may hold data (a broker starting up); the epoch cache is rebuilt from it.
    pub fn new(id: BrokerId, partition: PartitionId, log: L) -> Self {
        Self::recover(id, partition, log, Offset(0))
    }

    /// A replica over a log recovered from disk, with its last high watermark checkpoint.
    pub fn recover(id: BrokerId, partition: PartitionId, log: L, hw_checkpoint: Offset) -> Self {
        let mut replica = Replica {
            id,
            partition,
            log,
            epoch_cache: EpochCache::default(),
            high_watermark: hw_checkpoint,
            hw_checkpoint,
            leader_epoch: LeaderEpoch(0),
            partition_epoch: PartitionEpoch(0),
            broker_epoch: BrokerEpoch(0),
            controller_epoch: ControllerEpoch(0),
            role: Role::Offline,
        };
        replica.restart();
        replica
    }

    pub fn id(&self) -> BrokerId {
        self.id
    }
    pub fn partition(&self) -> PartitionId {
        self.partition
    }
    pub fn log(&self) -> &L {
        &self.log
    }
    /// Mutable access for drivers that must service their storage (flush errors, retention).
    pub fn log_mut(&mut self) -> &mut L {
        &mut self.log
    }
    pub fn epoch_cache(&self) -> &EpochCache {
        &self.epoch_cache
    }
    pub fn high_watermark(&self) -> Offset {
        self.high_watermark
    }
    pub fn hw_checkpoint(&self) -> Offset {
        self.hw_checkpoint
    }
    pub fn log_end_offset(&self) -> Offset {
        self.log.log_end_offset()
    }
    pub fn leader_epoch(&self) -> LeaderEpoch {
        self.leader_epoch
    }
    pub fn partition_epoch(&self) -> PartitionEpoch {
        self.partition_epoch
    }
    pub fn broker_epoch(&self) -> BrokerEpoch {
        self.broker_epoch
    }
    pub fn controller_epoch(&self) -> ControllerEpoch {
        self.controller_epoch
    }
    pub fn role(&self) -> &Role {
        &self.role
    }
    pub fn is_leader(&self) -> bool {
        matches!(self.role, Role::Leader(_))
    }
    pub fn is_online(&self) -> bool {
        !matches!(self.role, Role::Offline)
    }
    /// The leader state, when this replica believes it leads.
    pub fn leader_state(&self) -> Option<&LeaderState> {
        match &self.role {
            Role::Leader(l) => Some(l),
            _ => None,
        }
    }
    /// Who this replica believes leads the partition.
    pub fn leader(&self) -> Option<BrokerId> {
        match &self.role {
            Role::Leader(_) => Some(self.id),
            Role::Follower(f) => f.leader,
            Role::Offline => None,
        }
    }
    /// The entry at `offset`, if held.
    pub fn entry(&self, offset: Offset) -> Option<Entry<L::Record>> {
        self.log.entry(offset)
    }

    /// Applies the controller's LeaderAndIsr: become leader, become follower, or take note of an
    /// ISR change. Stale orders (older leader epoch, or same epoch and no newer partition epoch)
    /// are ignored, whatever the rules: Kafka always did that much. With controller fencing
    /// (rule 11), so is an order from a controller older than one this replica has heard from.
    pub fn on_leader_and_isr(
        &mut self,
        cfg: &Config,
        now: Tick,
        msg: &LeaderAndIsr,
    ) -> Effects<L::Record> {
        let state = &msg.state;
        if !self.is_online()
            || msg.partition != self.partition
            || !self.hears_controller(cfg, msg.controller_epoch)
        {
            return Vec::new();
        }
        // Broker epochs only grow, so the newest is right even on an otherwise stale order: a
        // broker that re-registered without a partition change must still fetch as its new
        // incarnation, or it could never rejoin the ISR.
        self.broker_epoch = self.broker_epoch.max(msg.broker_epoch);
        if (state.leader_epoch, state.partition_epoch) <= (self.leader_epoch, self.partition_epoch)
        {
            return Vec::new();
        }
        let new_epoch = state.leader_epoch != self.leader_epoch;
        let was_following = self.leader();
        self.leader_epoch = state.leader_epoch;
        self.partition_epoch = state.partition_epoch;
        let mut effects = Vec::new();
        if state.leader == Some(self.id) {
            match &mut self.role {
                Role::Leader(l) if !new_epoch => {
                    // Same term, new ISR from the controller: it supersedes any pending change.
                    l.isr = state.isr.clone();
                    l.clear_proposal();
                    l.assigned = state.assigned.clone();
                    l.min_insync_replicas = state.min_insync_replicas;
                    self.maybe_advance_high_watermark(cfg, &mut effects);
                }
                _ => self.become_leader(now, msg, &mut effects),
            }
        } else {
            self.fail_pending_writes(&mut effects);
            if new_epoch || was_following != state.leader || self.is_leader() {
                self.become_follower(cfg, state.leader, &mut effects);
            }
        }
        effects
    }

    /// Rule 11: whether an order or answer from the controller of `epoch` may be acted on: with
    /// controller fencing only if no newer controller has been heard from. Notes the epoch.
    fn hears_controller(&mut self, cfg: &Config, epoch: ControllerEpoch) -> bool {
        if cfg.rules.controller_fencing && epoch < self.controller_epoch {
            return false;
        }
        self.controller_epoch = self.controller_epoch.max(epoch);
        true
    }

    fn become_leader(&mut self, now: Tick, msg: &LeaderAndIsr, effects: &mut Effects<L::Record>) {
        self.fail_pending_writes(effects);
        let state = &msg.state;
        let followers = state
            .assigned
            .iter()
            .filter(|&&b| b != self.id)
            .map(|&b| {
                let progress = FollowerProgress {
                    log_end_offset: None,
                    broker_epoch: BrokerEpoch(0),
                    last_caught_up: now,
                };
                (b, progress)
            })
            .collect();
        self.role = Role::Leader(LeaderState {
            assigned: state.assigned.clone(),
            isr: state.isr.clone(),
            proposed_isr: None,
            proposed_broker_epochs: BTreeMap::new(),
            epoch_start_offset: self.log.log_end_offset(),
            min_insync_replicas: state.min_insync_replicas,
            followers,
            pending_writes: Vec::new(),
        });
    }

    fn become_follower(
        &mut self,
        cfg: &Config,
        leader: Option<BrokerId>,
        effects: &mut Effects<L::Record>,
    ) {
        if cfg.rules.truncation == TruncationRule::HighWatermark && leader.is_some() {
            // The seeds' rule (pre-KIP-101): drop everything above the own high watermark.
            self.truncate_to(cfg, self.high_watermark, effects);
        }
        let phase = match (cfg.rules.truncation, self.epoch_cache.latest_epoch()) {
            (TruncationRule::HighWatermark, _) | (_, None) => FollowerPhase::Fetching,
            (_, Some(latest)) => FollowerPhase::Reconciling { requested: latest },
        };
        self.role = Role::Follower(FollowerState { leader, phase });
    }

    /// Answers every pending acks=all write with NOT_LEADER: this replica will not commit them.
    fn fail_pending_writes(&mut self, effects: &mut Effects<L::Record>) {
        if let Role::Leader(l) = &mut self.role {
            for w in l.pending_writes.drain(..) {
                effects.push(Effect::FailWrite {
                    partition: self.partition,
                    id: w.id,
                    error: crate::error::WriteError::NotLeader,
                });
            }
        }
    }

    /// Appends entries at the log end, keeping the epoch cache and durability in step.
    fn append(&mut self, cfg: &Config, entries: &[Entry<L::Record>]) {
        let first = self.log.log_end_offset();
        self.log.append(entries);
        self.epoch_cache.record_all::<L>(first, entries);
        self.persist(cfg);
    }

    /// Truncates the log (and what depends on it) to `offset`.
    fn truncate_to(&mut self, cfg: &Config, offset: Offset, effects: &mut Effects<L::Record>) {
        let from = self.log.log_end_offset();
        if offset >= from {
            return;
        }
        self.log.truncate_to(offset);
        self.epoch_cache.truncate_to(offset);
        self.high_watermark = self.high_watermark.min(offset);
        self.hw_checkpoint = self.hw_checkpoint.min(offset);
        self.persist(cfg);
        effects.push(Effect::Truncated {
            partition: self.partition,
            from,
            to: offset,
        });
    }

    /// Sets the high watermark and checkpoints it under the flush-always policy.
    fn set_high_watermark(&mut self, cfg: &Config, hw: Offset, effects: &mut Effects<L::Record>) {
        if hw != self.high_watermark {
            self.high_watermark = hw;
            self.persist(cfg);
            effects.push(Effect::HighWatermark {
                partition: self.partition,
                offset: hw,
            });
        }
    }

    /// Under `FlushPolicy::Always`, makes the log and the high watermark durable now.
    fn persist(&mut self, cfg: &Config) {
        if cfg.rules.flush == FlushPolicy::Always {
            self.flush();
        }
    }

    /// Flushes the log and checkpoints the high watermark (the OS's periodic flush, or a clean
    /// shutdown's).
    pub fn flush(&mut self) {
        self.log.flush();
        self.hw_checkpoint = self.high_watermark;
    }

    /// Clean shutdown: flush everything, then stop.
    pub fn clean_shutdown(&mut self) -> Effects<L::Record> {
        let mut effects = Vec::new();
        self.fail_pending_writes(&mut effects);
        self.flush();
        self.role = Role::Offline;
        effects
    }

    /// Unclean crash: everything above the flushed offset is lost, and the high watermark falls
    /// back to its last checkpoint. Nothing is answered: the process is gone.
    pub fn crash(&mut self) {
        self.log.lose_unflushed();
        self.epoch_cache = EpochCache::from_log(&self.log);
        self.high_watermark = self.hw_checkpoint.min(self.log.log_end_offset());
        self.hw_checkpoint = self.high_watermark;
        self.role = Role::Offline;
    }

    /// Restart after a shutdown or crash: recover from what is on disk and wait, as a follower
    /// of nobody, for the controller's LeaderAndIsr. The driver registers the broker.
    ///
    /// Only what is durable survives: the log, its epochs (rebuilt from it) and the checkpointed
    /// high watermark. The current leader epoch is taken from the log, and any partition epoch
    /// is accepted from the controller again.
    pub fn restart(&mut self) {
        self.epoch_cache = EpochCache::from_log(&self.log);
        self.high_watermark = self.hw_checkpoint.min(self.log.log_end_offset());
        self.hw_checkpoint = self.high_watermark;
        self.leader_epoch = self.epoch_cache.latest_epoch().unwrap_or_default();
        self.partition_epoch = PartitionEpoch(0);
        self.broker_epoch = BrokerEpoch(0);
        self.controller_epoch = ControllerEpoch(0);
        self.role = Role::Follower(FollowerState {
            leader: None,
            phase: FollowerPhase::Fetching,
        });
    }

    /// Whether this running replica would ignore `message` now and in every future state until
    /// it stops. Drivers may then discard the message: delivering it could change nothing.
    ///
    /// Sound because a running replica's leader, partition, broker and controller epochs only
    /// grow (they reset only at a restart, and a stop loses everything in flight to the
    /// broker), and because error answers are ignored whatever the replica's state. A model
    /// checker uses this to avoid exploring the interleavings of dead messages.
    pub fn ignores_forever(&self, cfg: &Config, message: &Message<L::Record>) -> bool {
        if !self.is_online() {
            return false;
        }
        let deposed = |epoch| cfg.rules.controller_fencing && epoch < self.controller_epoch;
        match message {
            Message::LeaderAndIsr(m) => {
                m.partition == self.partition
                    && (deposed(m.controller_epoch)
                        || (m.state.leader_epoch, m.state.partition_epoch)
                            <= (self.leader_epoch, self.partition_epoch)
                            && m.broker_epoch <= self.broker_epoch
                            && m.controller_epoch <= self.controller_epoch)
            }
            Message::FetchResponse(r) => {
                matches!(&r.result, Err(e) if *e != crate::error::EpochError::OffsetOutOfRange)
            }
            Message::OffsetForLeaderEpochResponse(r) => r.result.is_err(),
            Message::AlterPartitionResponse(r) => {
                r.request_partition_epoch < self.partition_epoch || deposed(r.controller_epoch)
            }
            _ => false,
        }
    }

    /// Replica-local invariants, for debug assertions in drivers: HW ≤ LEO, the epoch cache is
    /// the one derivable from the log, a leader is in its own ISR.
    pub fn check_local(&self) -> Result<(), crate::invariants::Violation> {
        crate::invariants::replica_is_consistent(self)
    }
}
