//! One partition's replica on one broker: its log, high watermark, epochs and role.
//!
//! Every protocol decision a broker makes about a partition is made here, behind one entry
//! point: [`Replica::step`] takes an [`Input`] — a message, a producer's write, a consumer's read,
//! a tick, a completed flush, a stop or a restart — and returns the [`Effect`]s for the driver to
//! carry out, in order. The replica keeps its own timers (request retries, held fetches, ISR lag,
//! checkpoints), driven by the ticks it is given ([`Replica::next_timeout`] says when to give the
//! next), and holds back what must wait for durability ([`Effect::Flush`]).
//!
//! The leader side lives in `leader.rs`, the follower side in `follower.rs`, role changes in
//! `roles.rs`, durability and crashes in `durability.rs`, timers in `timers.rs`; this file holds
//! the state and the dispatch.

mod durability;
mod follower;
mod input;
mod leader;
mod log_start;
mod roles;
#[cfg(test)]
mod tests;
mod timers;

use crate::config::Config;
use crate::epoch_cache::EpochCache;
use crate::log::{Entry, Log};
use crate::message::{Effect, Effects, FetchRequest, Message, ProduceId};
use crate::producers::Producers;
use crate::types::{
    BrokerEpoch, BrokerId, ControllerEpoch, LeaderEpoch, Node, Offset, PartitionEpoch, PartitionId,
    Tick,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

pub use follower::FollowerPhase;
pub use input::{Input, Timer};

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

/// What a follower keeps while [`Role::Follower`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FollowerState {
    /// The leader it follows, as the controller last said; `None` after a restart, or while the
    /// partition is leaderless: it sends nothing then.
    pub(crate) leader: Option<BrokerId>,
    /// Whether it is still finding where its log and the leader's agree (rule 3), or fetching.
    pub(crate) phase: FollowerPhase,
    /// When the last request went to the leader: the request timer runs from there.
    pub(crate) last_request: Tick,
    /// The leader epoch that request was sent in (the follower's then), while it waits for its
    /// answer; `None` before the first. A follower has one request out at a time (as Kafka's
    /// fetcher): the answer, or the request timer, sends the next. An answer from an older
    /// epoch than the request's cannot be its answer.
    pub(crate) request_out: Option<LeaderEpoch>,
}

impl FollowerState {
    /// The leader it follows, as the controller last said; `None` after a restart, or while
    /// the partition is leaderless.
    pub fn leader(&self) -> Option<BrokerId> {
        self.leader
    }

    /// Whether it is still finding where its log and the leader's agree (rule 3), or fetching.
    pub fn phase(&self) -> FollowerPhase {
        self.phase
    }
}

/// What the leader knows about one follower.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FollowerProgress {
    /// The follower's LEO as proven by its last Fetch in this epoch; `None` until it fetched
    /// (rule 5: only fetches in the leader's current epoch count).
    pub(crate) log_end_offset: Option<Offset>,
    /// The incarnation that sent that fetch (KIP-903).
    pub(crate) broker_epoch: BrokerEpoch,
    /// The last time the follower was caught up (Kafka's `lastCaughtUpTimeMs`): when one of its
    /// fetches reached the leader's LEO of that moment, or its previous fetch's time when a fetch
    /// reached the LEO the leader had at that previous fetch.
    pub(crate) last_caught_up: Tick,
    /// The follower's previous fetch: when it was counted and the leader's LEO then. Kafka's
    /// `lastFetchTimeMs` and `lastFetchLeaderLogEndOffset`, which its caught-up rule needs.
    pub(crate) previous_fetch: Option<(Tick, Offset)>,
}

/// An acks=all write waiting for the high watermark to pass it (rule 9).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PendingWrite {
    /// The write's id, as the driver gave it: the acknowledgement carries it.
    pub(crate) id: ProduceId,
    /// The offset of the write's first record, which the acknowledgement reports.
    pub(crate) base_offset: Offset,
    /// One past the write's last record: acknowledged once HW ≥ this.
    pub(crate) end_offset: Offset,
}

/// A follower's Fetch that found nothing new, held until data comes or `until` (Kafka's
/// fetch.max.wait): the leader has already counted the progress it reports.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ParkedFetch {
    /// The Fetch held, answered as it stands once released.
    pub(crate) request: FetchRequest,
    /// When the wait is over and it is answered empty (`FetchWait` timer): `fetch_max_wait`
    /// after it came, less up to half of that by partition id.
    pub(crate) until: Tick,
}

/// What a leader keeps while [`Role::Leader`], for the term of its leader epoch: its cached ISR
/// and pending change, its followers' progress, and the writes and fetches it holds. Rebuilt
/// from the controller's state each time the replica takes office.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LeaderState {
    /// The assigned replicas (AR), in preference order, as the controller sent them.
    pub(crate) assigned: Vec<BrokerId>,
    /// The ISR as last confirmed by the controller.
    pub(crate) isr: BTreeSet<BrokerId>,
    /// The ISR proposed in an AlterPartition the controller has not answered yet (rule 7).
    pub(crate) proposed_isr: Option<BTreeSet<BrokerId>>,
    /// The broker epochs the pending proposal names for the replicas it adds (KIP-903).
    pub(crate) proposed_broker_epochs: BTreeMap<BrokerId, BrokerEpoch>,
    /// The LEO when this replica became leader: where its epoch starts (rule 2, rule 6).
    pub(crate) epoch_start_offset: Offset,
    /// The partition's `min.insync.replicas`, as the controller sent it: acks=all writes are
    /// refused below it (rule 9), and under strict min ISR the high watermark stops (rule 5).
    pub(crate) min_insync_replicas: usize,
    /// The progress of every other assigned replica, as this term's fetches proved it.
    pub(crate) followers: BTreeMap<BrokerId, FollowerProgress>,
    /// The acks=all writes not yet committed, in the order they were appended (Kafka's
    /// produce purgatory).
    pub(crate) pending_writes: Vec<PendingWrite>,
    /// When the pending proposal was last sent: it is sent again after `alter_partition_timeout`
    /// unanswered. `None` once the controller answered it with a version conflict: the
    /// LeaderAndIsr that comes with that answer settles it, so it is not sent again (as in
    /// Kafka, which resends only what got no answer).
    pub(crate) proposal_sent: Option<Tick>,
    /// Fetches held until data comes (`fetch_max_wait`): the latest of each follower. Keyed
    /// by follower, since the order they came in decides nothing (they are answered together),
    /// so states that differ only in that order are one value.
    pub(crate) parked: BTreeMap<BrokerId, ParkedFetch>,
}

impl FollowerProgress {
    /// Kafka's caught-up rule (`Replica.updateFetchState`), for a fetch at `fetch_offset`
    /// counted at `now` by a leader whose LEO is `leo`. A fetch that reaches the LEO proves the
    /// follower caught up now. Under steady writes that almost never happens: the LEO moves on
    /// while the fetch travels. So a fetch that reaches the LEO the leader had at the follower's
    /// previous fetch proves it caught up as of that previous fetch, one round trip ago. Without
    /// that second case a healthy follower one round behind leaves the ISR once
    /// `replica_lag_max` passes without a lucky fetch (spec/protocol.md §3.3). The second case
    /// is rule 19's ([`crate::Rules::caught_up_previous_fetch`]).
    pub(crate) fn count_catch_up(
        &mut self,
        cfg: &Config,
        fetch_offset: Offset,
        leo: Offset,
        now: Tick,
    ) {
        if fetch_offset >= leo {
            self.last_caught_up = now;
        } else if let Some((at, previous_leo)) = self
            .previous_fetch
            .filter(|_| cfg.rules.caught_up_previous_fetch)
        {
            if fetch_offset >= previous_leo {
                self.last_caught_up = self.last_caught_up.max(at);
            }
        }
        self.previous_fetch = Some((now, leo));
    }
}

impl LeaderState {
    /// The ISR as last confirmed by the controller.
    pub fn isr(&self) -> &BTreeSet<BrokerId> {
        &self.isr
    }

    /// The ISR proposed in an AlterPartition the controller has not answered yet (rule 7).
    pub fn proposed_isr(&self) -> Option<&BTreeSet<BrokerId>> {
        self.proposed_isr.as_ref()
    }

    /// Whether a proposal is out and waits for an answer, so a new controller session should
    /// be sent it again ([`crate::replica::Timer::AlterPartition`]).
    pub fn proposal_out(&self) -> bool {
        self.proposal_sent.is_some()
    }

    /// The LEO when this replica became leader: where its epoch starts (rule 2, rule 6).
    pub fn epoch_start_offset(&self) -> Offset {
        self.epoch_start_offset
    }

    /// Each other assigned replica's LEO as this term's fetches proved it (`None` until it
    /// fetched in this epoch).
    pub fn follower_log_end_offsets(
        &self,
    ) -> impl Iterator<Item = (BrokerId, Option<Offset>)> + '_ {
        self.followers.iter().map(|(&b, p)| (b, p.log_end_offset))
    }

    /// Forgets the pending ISR change: confirmed, refused, or superseded.
    pub(crate) fn clear_proposal(&mut self) {
        self.proposed_isr = None;
        self.proposed_broker_epochs.clear();
        self.proposal_sent = None;
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
#[serde(bound(
    serialize = "L: Serialize, L::Record: Serialize",
    deserialize = "L: Deserialize<'de>, L::Record: Deserialize<'de>"
))]
pub struct Replica<L: Log> {
    pub(crate) id: BrokerId,
    pub(crate) partition: PartitionId,
    pub(crate) log: L,
    pub(crate) epoch_cache: EpochCache,
    /// The idempotent producers' latest batches in the log (rule 14), derived from it as the
    /// epoch cache is.
    pub(crate) producers: Producers,
    pub(crate) high_watermark: Offset,
    /// The high watermark checkpoint as last written (the lower of the HW and the flushed
    /// offset, at most every `hw_checkpoint_interval`, at once after a truncation): what an
    /// unclean crash leaves behind.
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
    /// The time of the latest step: timers run from it.
    pub(crate) now: Tick,
    /// When the high watermark checkpoint was last asked for (`hw_checkpoint_interval`).
    pub(crate) checkpointed_at: Tick,
    /// Effects waiting for the log to be durable up to an offset (rule 10, `flush=always`), in
    /// the order they were decided: a follower's next Fetch, acks=0/1 answers.
    pub(crate) held: Vec<(Offset, Effect<L::Record>)>,
}

impl<L: Log> Replica<L> {
    /// A replica over an existing log, waiting for the controller to tell it its role. The log
    /// may hold data (a broker starting up); the epoch cache is rebuilt from it.
    pub fn new(id: BrokerId, partition: PartitionId, log: L) -> Self {
        Self::recover(id, partition, log, Offset(0))
    }

    /// A replica over a log recovered from disk, with its last high watermark checkpoint: how a
    /// restarted broker process starts each of its replicas. It keeps the log as far as it was
    /// flushed and the offset of the last [`Effect::CheckpointHighWatermark`] it carried out
    /// (zero if none), then registers with the controller, saying whether its last stop was
    /// clean; the controller's LeaderAndIsr gives the replica its role. A driver that keeps the
    /// replica object across a crash uses [`Input::Stop`] and [`Input::Restart`] instead, which
    /// come to the same (spec/protocol.md §6, `examples/three_replicas.rs`).
    pub fn recover(id: BrokerId, partition: PartitionId, log: L, hw_checkpoint: Offset) -> Self {
        let mut replica = Replica {
            id,
            partition,
            log,
            epoch_cache: EpochCache::default(),
            producers: Producers::default(),
            high_watermark: hw_checkpoint,
            hw_checkpoint,
            leader_epoch: LeaderEpoch(0),
            partition_epoch: PartitionEpoch(0),
            broker_epoch: BrokerEpoch(0),
            controller_epoch: ControllerEpoch(0),
            role: Role::Offline,
            now: Tick(0),
            checkpointed_at: Tick(0),
            held: Vec::new(),
        };
        replica.restart();
        replica
    }

    /// Takes one input, which happened at `now`; the effects, in the order the driver must carry
    /// them out. An input that does not apply (a write to a follower, a timer that is not
    /// running) changes nothing, or is answered with an error effect. Time only moves forward: a
    /// `now` earlier than one already seen counts as that one.
    pub fn step(&mut self, cfg: &Config, now: Tick, input: Input<L::Record>) -> Effects<L::Record> {
        self.now = self.now.max(now);
        let mut effects = Vec::new();
        match input {
            Input::Message { from, message } => self.on_message(cfg, from, message, &mut effects),
            Input::Write {
                id,
                records,
                acks,
                producer,
            } => self.write(cfg, id, records, acks, producer, &mut effects),
            Input::Read {
                id,
                from,
                max_entries,
                max_bytes,
            } => effects.push(self.read(id, from, max_entries, max_bytes)),
            Input::DeleteRecords { id, before } => {
                self.delete_records(cfg, id, before, &mut effects)
            }
            Input::Retain { before } => self.retain(cfg, before, &mut effects),
            Input::Compact => self.compact(cfg),
            Input::Tick => self.on_tick(cfg, &mut effects),
            Input::Timeout(timer) => {
                if self
                    .timers(cfg)
                    .iter()
                    .any(|&(running, _)| running == timer)
                {
                    self.fire(cfg, timer, &mut effects);
                }
            }
            Input::Flushed(_) => self.on_flushed(cfg, &mut effects),
            Input::Stop { clean } => self.stop(cfg, clean, &mut effects),
            Input::Restart => {
                self.restart();
                if !cfg.rules.producer_state {
                    // A replica that keeps its producers only in memory restarts without them.
                    self.producers = Producers::default();
                }
            }
        }
        effects
    }

    /// A message from the network, to the transition of its kind.
    fn on_message(
        &mut self,
        cfg: &Config,
        from: Node,
        message: Message<L::Record>,
        effects: &mut Effects<L::Record>,
    ) {
        if !self.is_online() {
            return;
        }
        match (from, message) {
            (Node::Controller, Message::LeaderAndIsr(m)) => {
                self.on_leader_and_isr(cfg, &m, effects)
            }
            (Node::Controller, Message::AlterPartitionResponse(m)) => {
                self.on_alter_partition_response(cfg, &m, effects)
            }
            (Node::Broker(_), Message::Fetch(m)) => self.on_fetch(cfg, m, effects),
            (Node::Broker(_), Message::OffsetForLeaderEpoch(m)) => {
                self.on_offset_for_leader_epoch(cfg, &m, effects)
            }
            (Node::Broker(leader), Message::FetchResponse(m)) => {
                self.on_fetch_response(cfg, leader, &m, effects)
            }
            (Node::Broker(leader), Message::OffsetForLeaderEpochResponse(m)) => {
                self.on_offset_for_leader_epoch_response(cfg, leader, &m, effects)
            }
            _ => {}
        }
    }

    /// The broker this replica lives on (its replica id).
    pub fn id(&self) -> BrokerId {
        self.id
    }
    /// The partition it replicates.
    pub fn partition(&self) -> PartitionId {
        self.partition
    }
    /// Its log, to read: only the replica's transitions append to it or truncate it.
    pub fn log(&self) -> &L {
        &self.log
    }
    /// Mutable access for the driver's own storage work: making the log durable
    /// ([`Log::flush`], before stepping `Flushed`), servicing storage failures.
    pub fn log_mut(&mut self) -> &mut L {
        &mut self.log
    }
    /// The leader epoch cache: where each leader epoch starts in the log. Always the one
    /// [`EpochCache::from_log`] derives from the log.
    pub fn epoch_cache(&self) -> &EpochCache {
        &self.epoch_cache
    }
    /// The idempotent producers' latest batches in the log (rule 14): always the ones
    /// [`Producers::from_log`] derives from it, unless `producer-state` is off.
    pub fn producers(&self) -> &Producers {
        &self.producers
    }
    /// The time of this replica's latest step: what its timers count from.
    pub fn now(&self) -> Tick {
        self.now
    }

    /// The high watermark (HW): offsets below it are committed as far as this replica knows.
    /// Never above the LEO; a leader's never decreases in its term, a follower's may (it takes
    /// the leader's).
    pub fn high_watermark(&self) -> Offset {
        self.high_watermark
    }
    /// The high watermark as last checkpointed ([`Effect::CheckpointHighWatermark`]): what a
    /// restart after an unclean crash starts from. Written at most every
    /// `hw_checkpoint_interval` and only as far as the log is durable, so it may lag the HW; a
    /// truncation lowers it at once.
    pub fn hw_checkpoint(&self) -> Offset {
        self.hw_checkpoint
    }
    /// The log end offset (LEO): the offset the next appended record gets.
    pub fn log_end_offset(&self) -> Offset {
        self.log.log_end_offset()
    }
    /// The newest leader epoch this replica was told of (right after a restart, the newest in
    /// its log). Its requests carry it, and with epoch fencing it answers only requests of it
    /// (rule 4).
    pub fn leader_epoch(&self) -> LeaderEpoch {
        self.leader_epoch
    }
    /// The version of the controller's partition state this replica acts on (0 after a
    /// restart): a leader's AlterPartition is based on it. A follower notes it when its term
    /// begins, not at the ISR changes of its term.
    pub fn partition_epoch(&self) -> PartitionEpoch {
        self.partition_epoch
    }
    /// This broker's incarnation, as the controller last told it in a LeaderAndIsr (KIP-903; 0
    /// after a restart): its Fetches carry it.
    pub fn broker_epoch(&self) -> BrokerEpoch {
        self.broker_epoch
    }
    /// The newest controller epoch this replica has heard from, in a LeaderAndIsr or an
    /// AlterPartition answer (0 after a restart). With controller fencing, orders and answers
    /// of an older one come from a deposed controller and are ignored (rule 11).
    pub fn controller_epoch(&self) -> ControllerEpoch {
        self.controller_epoch
    }
    /// What it is doing: offline, following or leading.
    pub fn role(&self) -> &Role {
        &self.role
    }
    /// Whether this replica believes it leads. A belief: a leader the controller has replaced
    /// goes on believing it until the LeaderAndIsr that says so reaches it.
    pub fn is_leader(&self) -> bool {
        matches!(self.role, Role::Leader(_))
    }
    /// Whether this replica leads and its high watermark has reached the start of its leader
    /// epoch: only then is every record an earlier leader committed below its HW. A new
    /// leader's HW may lag its predecessor's until its followers' fetches move it (Kafka
    /// answers ListOffsets OFFSET_NOT_AVAILABLE meanwhile), so a reader that must see every
    /// committed record, such as a group coordinator loading the offsets a previous one
    /// acknowledged, waits for this.
    pub fn has_high_watermark_reached_current_epoch(&self) -> bool {
        self.leader_state()
            .is_some_and(|l| self.high_watermark >= l.epoch_start_offset)
    }
    /// Whether its broker is running: not stopped since its last restart.
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
    /// The effects held back until the log is durable, with the offset each waits for.
    pub fn held(&self) -> &[(Offset, Effect<L::Record>)] {
        &self.held
    }

    /// Whether this running replica would ignore `message` now and in every future state until
    /// it stops, or answer it only with an error its sender ignores. Drivers may then discard
    /// the message: delivering it could change nothing but when a timer fires (an error answer
    /// brings the request timer's retry forward), and a model checker without a clock sees no
    /// change at all; with one, the models make the retry as slow as the request timer
    /// (`sim::clocked`), so that it brings nothing forward either. A model checker uses this to
    /// avoid exploring the interleavings of dead messages.
    ///
    /// Sound because a running replica's leader, partition, broker and controller epochs, and
    /// the epoch of its request out, only grow (they reset only at a restart, and a stop loses
    /// everything in flight to the broker), and:
    /// * error answers are ignored whatever the replica's state;
    /// * a stale order stays stale, and so does an ISR change of the term a follower follows in,
    ///   until its next term, whose orders are newer anyway (with controller fencing a term has
    ///   one leader);
    /// * a request of an epoch the replica will never lead is refused with an epoch error
    ///   (`refuses_requests_of`), and so is a Fetch of a follower's incarnation older than one
    ///   the leader counted (`refuses_incarnation_of`);
    /// * an answer from an epoch older than a follower's and than its request out can never be
    ///   used, nor taken for the answer to that request (`outlived`).
    ///
    /// A model's hook (feature `sim`): a deployment delivers every message.
    #[cfg(feature = "sim")]
    pub fn ignores_forever(&self, cfg: &Config, from: Node, message: &Message<L::Record>) -> bool {
        if !self.is_online() {
            return false;
        }
        let from = match from {
            Node::Broker(b) => Some(b),
            Node::Controller => None,
        };
        let deposed = |epoch| cfg.rules.controller_fencing && epoch < self.controller_epoch;
        match message {
            Message::LeaderAndIsr(m) => {
                let stale = (m.state.leader_epoch, m.state.partition_epoch)
                    <= (self.leader_epoch, self.partition_epoch)
                    || self.isr_change_of_followed_term(cfg, &m.state);
                m.partition == self.partition
                    && (deposed(m.controller_epoch)
                        || stale
                            && m.broker_epoch <= self.broker_epoch
                            && m.controller_epoch <= self.controller_epoch)
            }
            Message::Fetch(req) => {
                self.refuses_requests_of(cfg, req.current_leader_epoch)
                    || self.refuses_incarnation_of(cfg, req)
            }
            Message::OffsetForLeaderEpoch(crate::message::OffsetForLeaderEpochRequest {
                current_leader_epoch: epoch,
                ..
            }) => self.refuses_requests_of(cfg, *epoch),
            Message::FetchResponse(r) => match &r.result {
                Err(e) if *e != crate::error::EpochError::OffsetOutOfRange => true,
                _ => from.is_some_and(|from| self.outlived(cfg, from, r.leader_epoch)),
            },
            Message::OffsetForLeaderEpochResponse(r) => {
                r.result.is_err()
                    || from.is_some_and(|from| self.outlived(cfg, from, r.leader_epoch))
            }
            // A stale answer from a newer controller than this replica heard of still teaches
            // a leader that controller's epoch (rule 11), so it is not dead.
            Message::AlterPartitionResponse(r) => {
                r.request_partition_epoch < self.partition_epoch
                    && r.controller_epoch <= self.controller_epoch
                    || deposed(r.controller_epoch)
            }
            _ => false,
        }
    }

    /// Whether a follower's request sent in leader `epoch` is refused with an epoch error now and
    /// in every later state of this running replica, so that its answer is an error, which the
    /// follower ignores (rule 4). With epoch fencing that holds of an epoch older than this
    /// replica's, since its epoch only grows; and of its own epoch while it does not lead,
    /// since with controller fencing a replica that does not lead an epoch never will: the
    /// epoch has another leader, or none (the controller fenced its leader, or this replica
    /// restarted, and its registration fences it if it led), and every election opens a new
    /// epoch.
    #[cfg(feature = "sim")]
    fn refuses_requests_of(&self, cfg: &Config, epoch: LeaderEpoch) -> bool {
        cfg.rules.epoch_fencing
            && (epoch < self.leader_epoch
                || cfg.rules.controller_fencing && epoch == self.leader_epoch && !self.is_leader())
    }

    /// Whether a Fetch of this leader's epoch is from an incarnation of its follower older than
    /// one it already counted a fetch of (KIP-903), and so refused now and for the rest of the
    /// term: the broker epoch it records for the follower only grows within the term, and
    /// later terms refuse the Fetch by its epoch (with epoch fencing).
    #[cfg(feature = "sim")]
    fn refuses_incarnation_of(&self, cfg: &Config, req: &FetchRequest) -> bool {
        let Role::Leader(l) = &self.role else {
            return false;
        };
        cfg.rules.epoch_fencing
            && req.current_leader_epoch == self.leader_epoch
            && l.followers
                .get(&req.replica)
                .is_some_and(|progress| req.broker_epoch < progress.broker_epoch)
    }

    /// Replica-local invariants, for debug assertions in drivers: HW ≤ LEO, the epoch cache is
    /// the one derivable from the log, a leader is in its own ISR.
    pub fn check_local(&self) -> Result<(), crate::invariants::Violation> {
        crate::invariants::replica_is_consistent(self)
    }
}
