//! The controller: broker liveness, leader elections and the true ISR of every partition.
//!
//! It is the single writer of partition state. Brokers propose ISR changes (AlterPartition) and
//! the controller accepts them by compare-and-set on the partition epoch (rule 7); it elects
//! leaders from the ISR, then the ELR, and outside both only when unclean election is on
//! (rule 8); it fences brokers whose session expired, shrinking them out of every ISR.
//!
//! The role itself moves. A controller is elected through a store that also holds its state
//! (etcd or a file in the runtime, ZooKeeper in Kafka's seeds), and a new one takes over from
//! there in the next controller epoch ([`Controller::take_over`]). The one it replaced may not
//! know yet — a paused or partitioned process — and keeps acting on its in-memory state: a
//! zombie. Rule 11 (KAFKA-6082) fences it twice. The store takes a step of a controller only
//! while that controller holds the role ([`Controller::admitted_by_store`]): its write, and with
//! it every message the step sends, so the zombie's first step after its successor's election
//! is refused and it stops. And every message carries the controller epoch, so brokers can
//! ignore orders from an epoch older than one they have seen.

/// Implements equality and hashing for a value the controller keeps that is no part of its
/// state (a cache, the journal of the step under way): every two are equal and hash alike, so
/// two controllers in the same state compare equal whatever these hold, as the model checker
/// needs.
macro_rules! not_state {
    ($t:ty) => {
        impl PartialEq for $t {
            fn eq(&self, _: &$t) -> bool {
                true
            }
        }

        impl Eq for $t {}

        impl std::hash::Hash for $t {
            fn hash<H: std::hash::Hasher>(&self, _: &mut H) {}
        }
    };
}

mod effect;
mod input;
mod records;

pub use effect::{Effect, Effects};
pub use input::Input;
use records::Journal;
pub use records::{MetadataRecord, Ready};

use crate::config::Config;
use crate::error::AlterPartitionError;
use crate::message::{
    AlterPartitionRequest, AlterPartitionResponse, Envelope, LeaderAndIsr, Message, PartitionState,
};
use crate::types::{
    BrokerEpoch, BrokerId, ControllerEpoch, LeaderEpoch, Node, PartitionEpoch, PartitionId, Tick,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use thiserror::Error;

/// What the controller knows of a broker.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BrokerState {
    /// Registered and not fenced.
    pub alive: bool,
    /// When its last heartbeat (or registration) arrived, in the controller's ticks: the
    /// session expires once `session_timeout` has passed since (rule 12). Reset for every live
    /// broker when a controller takes office.
    pub last_heartbeat: Tick,
    /// The incarnation of its latest registration.
    pub epoch: BrokerEpoch,
}

/// How a leader was chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Election {
    /// From the ISR: no committed record can be lost.
    Clean,
    /// From the ELR (KIP-966): out of the ISR, but known to hold every committed record.
    Eligible,
    /// From outside both: committed records may be lost (rule 8).
    Unclean,
}

/// Why a partition could not be created or a leader elected.
#[derive(Clone, Debug, PartialEq, Eq, Error, Serialize, Deserialize)]
pub enum ControllerError {
    /// The controller holds no such partition (never created, or deleted).
    #[error("unknown partition {0}")]
    UnknownPartition(PartitionId),
    /// A partition of that id exists already (ids are never reused).
    #[error("partition {0} already exists")]
    PartitionExists(PartitionId),
    /// An election was asked for a partition that has a leader: leaders are elected only for
    /// leaderless partitions.
    #[error("partition {0} has a leader")]
    HasLeader(PartitionId),
    /// No replica may lead: none alive in the ISR, nor (with ELR) in the ELR, and unclean
    /// election is off or no assigned replica is alive. The partition stays leaderless.
    #[error("no replica of partition {0} can be elected")]
    NoEligibleReplica(PartitionId),
    /// The broker named is not one of [`Controller::election_candidates`].
    #[error("{1} is not a candidate for leader of partition {0}")]
    IneligibleLeader(PartitionId, BrokerId),
    /// A new partition's assigned replicas must all be alive, and there must be at least one.
    #[error("replication factor {factor} needs {factor} live brokers, {alive} are alive")]
    NotEnoughBrokers {
        /// The replication factor asked for: how many replicas were assigned.
        factor: usize,
        /// How many of them are alive.
        alive: usize,
    },
    /// `min.insync.replicas` must be at least 1 and at most the replication factor (given),
    /// or no write with acks=all could ever succeed.
    #[error("min.insync.replicas must be between 1 and the replication factor {0}")]
    InvalidMinIsr(usize),
}

/// The controller: the single writer of every partition's leader, ISR and ELR, and the judge of
/// broker liveness (Kafka's KRaft controller; `quorumState` in the TLA+ anchor).
///
/// A pure state machine like [`crate::Replica`]: [`Controller::step`] takes one input and
/// returns the effects. A driver that persists it uses [`Controller::handle`], which also
/// returns the records to make durable first. Its state is what the store holds; a new
/// controller takes it over with [`Controller::take_over`] in the next [`ControllerEpoch`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Controller {
    /// The controller epoch this controller acts in: stamped on everything it sends.
    pub(crate) epoch: ControllerEpoch,
    pub(crate) brokers: BTreeMap<BrokerId, BrokerState>,
    pub(crate) partitions: BTreeMap<PartitionId, PartitionState>,
    /// Registrations so far: the source of broker epochs, which only grow.
    pub(crate) registrations: u64,
    /// What the step under way changed, for a driver that persists records.
    #[serde(skip)]
    pub(crate) journal: Journal,
    /// Whether a leaderless partition may have become electable since a tick last looked.
    #[serde(skip)]
    pub(crate) unlooked: Unlooked,
}

/// Whether any broker or partition changed since a tick last looked for partitions to elect a
/// leader for: set by every change ([`Controller::note`]), cleared by the look. Who may lead
/// depends on nothing else (the partition's state and which brokers are alive), and a look
/// elects wherever it can, so a tick with nothing changed since would find nothing: it does
/// not look, and an idle cluster's ticks cost nothing however many partitions it has. Like the
/// journal, no part of the controller's state: equal and hashed alike whatever its value, never
/// serialized (a controller read back looks once).
#[derive(Clone, Debug)]
pub(crate) struct Unlooked(pub(crate) bool);

impl Default for Unlooked {
    fn default() -> Self {
        Unlooked(true)
    }
}

not_state!(Unlooked);

impl Default for Controller {
    fn default() -> Self {
        Controller {
            epoch: ControllerEpoch(1),
            brokers: BTreeMap::new(),
            partitions: BTreeMap::new(),
            registrations: 0,
            journal: Journal::default(),
            unlooked: Unlooked::default(),
        }
    }
}

impl Controller {
    /// The first controller of a new cluster, in controller epoch 1.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes one input, which happened at `now`; the effects, in the order the driver must
    /// carry them out once it has committed the new state (rule 11). An input that does not
    /// apply (a broker speaking for another, an election without a leaderless partition)
    /// changes nothing.
    pub fn step<R>(&mut self, cfg: &Config, now: Tick, input: Input<R>) -> Effects<R> {
        match input {
            Input::Message { from, message } => match message {
                Message::BrokerRegistration {
                    broker,
                    clean_shutdown,
                } if from == Node::Broker(broker) => {
                    self.register(cfg, now, broker, clean_shutdown, Some(&[]))
                }
                Message::BrokerHeartbeat { broker } if from == Node::Broker(broker) => {
                    if self.on_heartbeat(broker, now) {
                        Vec::new()
                    } else {
                        vec![Effect::MustRegister { broker }]
                    }
                }
                Message::AlterPartition(req) if from == Node::Broker(req.leader) => {
                    self.on_alter_partition(cfg, &req)
                }
                _ => Vec::new(),
            },
            Input::Tick => self.on_tick(cfg, now),
            #[cfg(feature = "sim")]
            Input::Expire(broker) => self.fence_broker(cfg, broker),
            #[cfg(feature = "sim")]
            Input::Elect { partition, leader } => self
                .elect_leader_as(cfg, partition, leader)
                .unwrap_or_default(),
            Input::Register {
                broker,
                clean_shutdown,
                elects,
            } => self.register(cfg, now, broker, clean_shutdown, Some(&elects)),
            Input::ControlledShutdown(broker) => self.on_controlled_shutdown(cfg, broker),
            Input::SessionOpened(broker) => self.announce_to(broker),
        }
    }

    /// The controller epoch this controller acts in.
    pub fn epoch(&self) -> ControllerEpoch {
        self.epoch
    }

    /// Rule 11 (KAFKA-6082): whether the store takes a step of this controller — the write of
    /// its new state, and so every message the step sends — while the controller elected in
    /// `holder` holds the role. A driver commits a step's state to the store before it carries
    /// out the step's effects; a refused step's effects are dropped and the controller stops
    /// (it has learnt it lost the role). Without fencing every write lands, whoever makes it.
    pub fn admitted_by_store(&self, cfg: &Config, holder: ControllerEpoch) -> bool {
        !cfg.rules.controller_fencing || self.epoch == holder
    }

    /// What the store holds once this controller's write lands over `stored` (the store's
    /// content before): this controller's state, except the source of broker epochs. Those
    /// come from a counter of the store itself (etcd's revision, ZooKeeper's zxid, KRaft's log
    /// offset), which a write of controller state cannot roll back, so no two registrations
    /// ever get the same epoch, even when an unfenced zombie writes.
    pub fn written_over(&self, stored: &Controller) -> Controller {
        let mut written = self.clone();
        written.registrations = written.registrations.max(stored.registrations);
        written
    }

    /// `ControllerFailover`: the controller elected in `epoch` takes over the state its
    /// predecessor left in the store (`stored`), and tells every live broker the state of each
    /// of its partitions in the new epoch. Every broker believed alive gets a fresh session:
    /// heartbeat times are the old controller's clock, and a broker that heartbeated the old
    /// controller a moment ago must not be fenced for it. The announcement matters because
    /// brokers ignore older controllers once they have heard a newer one (rule 11): an order
    /// the predecessor sent just before it lost the role might never be acted on, so the new
    /// controller repeats what is current, as Kafka's does when it takes office.
    pub fn take_over<R>(
        stored: &Controller,
        epoch: ControllerEpoch,
        now: Tick,
    ) -> (Controller, Effects<R>) {
        let mut next = stored.clone();
        let effects = next.take_office(epoch, now);
        (next, effects)
    }

    /// [`Controller::take_over`] in place, for a driver that persists records: this controller
    /// holds the state the store held, and takes office in `epoch`. Between
    /// [`Controller::begin`] and [`Controller::finish`], its one record is the new epoch.
    pub fn take_office<R>(&mut self, epoch: ControllerEpoch, now: Tick) -> Effects<R> {
        self.note(records::Key::Epoch);
        self.epoch = epoch;
        for b in self.brokers.values_mut().filter(|b| b.alive) {
            b.last_heartbeat = now;
        }
        self.partitions
            .keys()
            .flat_map(|&id| self.announce(id))
            .collect()
    }

    /// When the controller next has something to do if nothing else happens: the first tick at
    /// which a live broker's session will have expired. `None`: no live broker.
    pub fn next_timeout(&self, cfg: &Config) -> Option<Tick> {
        self.brokers
            .values()
            .filter(|b| b.alive)
            .map(|b| Tick(b.last_heartbeat.0 + cfg.session_timeout.0 + 1))
            .min()
    }

    /// The state of partition `id` (the truth that LeaderAndIsr carries), if it exists.
    pub fn partition(&self, id: PartitionId) -> Option<&PartitionState> {
        self.partitions.get(&id)
    }
    /// Every partition's state, by id.
    pub fn partitions(&self) -> &BTreeMap<PartitionId, PartitionState> {
        &self.partitions
    }
    /// Every broker that ever registered, with what the controller knows of it (fenced ones
    /// included).
    pub fn brokers(&self) -> &BTreeMap<BrokerId, BrokerState> {
        &self.brokers
    }
    /// Whether the controller believes `broker` alive: registered and not fenced. A belief: a
    /// crashed broker stays alive until its session expires.
    pub fn is_alive(&self, broker: BrokerId) -> bool {
        self.brokers.get(&broker).is_some_and(|b| b.alive)
    }
    /// The brokers the controller believes alive, in id order.
    pub fn alive_brokers(&self) -> Vec<BrokerId> {
        self.brokers
            .iter()
            .filter(|(_, b)| b.alive)
            .map(|(&id, _)| id)
            .collect()
    }

    /// Creates a partition over `assigned`, all of which must be alive. The first leads, in
    /// leader epoch 1, with every assigned replica in the ISR.
    pub fn create_partition<R>(
        &mut self,
        id: PartitionId,
        assigned: Vec<BrokerId>,
        min_insync_replicas: usize,
    ) -> Result<Effects<R>, ControllerError> {
        if self.partitions.contains_key(&id) {
            return Err(ControllerError::PartitionExists(id));
        }
        let alive = assigned.iter().filter(|&&b| self.is_alive(b)).count();
        if assigned.is_empty() || alive < assigned.len() {
            return Err(ControllerError::NotEnoughBrokers {
                factor: assigned.len(),
                alive,
            });
        }
        if min_insync_replicas == 0 || min_insync_replicas > assigned.len() {
            return Err(ControllerError::InvalidMinIsr(assigned.len()));
        }
        let state = PartitionState {
            leader: assigned.first().copied(),
            leader_epoch: LeaderEpoch(1),
            isr: assigned.iter().copied().collect(),
            elr: BTreeSet::new(),
            partition_epoch: PartitionEpoch(1),
            min_insync_replicas,
            assigned,
        };
        self.note_partition(id);
        self.partitions.insert(id, state);
        Ok(self.announce(id))
    }

    /// LeaderAndIsr for a partition to every live assigned broker.
    fn announce<R>(&self, id: PartitionId) -> Effects<R> {
        let Some(state) = self.partitions.get(&id) else {
            return Vec::new();
        };
        state
            .assigned
            .iter()
            .filter(|&&b| self.is_alive(b))
            .map(|&b| self.send(b, id, state))
            .collect()
    }

    fn send<R>(&self, to: BrokerId, partition: PartitionId, state: &PartitionState) -> Effect<R> {
        let broker_epoch = self.brokers.get(&to).map(|b| b.epoch).unwrap_or_default();
        Effect::Send(Envelope {
            from: Node::Controller,
            to: Node::Broker(to),
            message: Message::LeaderAndIsr(LeaderAndIsr {
                partition,
                state: state.clone(),
                broker_epoch,
                controller_epoch: self.epoch,
            }),
        })
    }

    /// The candidates the registration of `broker` would elect from in partition `id`, in
    /// preference order: empty if the partition would still have a leader, or none can be
    /// elected.
    pub fn registration_candidates(
        &self,
        cfg: &Config,
        broker: BrokerId,
        clean_shutdown: bool,
        id: PartitionId,
    ) -> Vec<(BrokerId, Election)> {
        let Some(state) = self.partitions.get(&id) else {
            return Vec::new();
        };
        // Only a partition without a leader, or led by the broker that registers again (whom
        // registration fences first), gets an election.
        let fenced = self.is_alive(broker) && state.leader == Some(broker);
        if state.leader.is_some() && !fenced {
            return Vec::new();
        }
        // Here the partition is leaderless after the registration: it elects nobody (`None`).
        let mut after = self.clone();
        let _: Effects<()> = after.register(cfg, Tick(0), broker, clean_shutdown, None);
        after.election_candidates(cfg, id)
    }

    /// A broker (re)registers. A new incarnation of a live broker first fences the old one.
    /// After an unclean shutdown it leaves every ELR: it may have lost committed records and is
    /// not electable until it rejoins the ISR (KIP-966). Then leaderless partitions get a leader
    /// if they can, and the broker learns the state of each of its partitions. `elect`: `None`
    /// elects nobody (to ask who could be elected); `Some(chosen)` elects in every leaderless
    /// partition, the leader `chosen` names for it where it is a candidate, else the preferred
    /// candidate (the model checker explores every choice,
    /// [`Controller::registration_candidates`]; the runtime takes the preferred ones).
    fn register<R>(
        &mut self,
        cfg: &Config,
        now: Tick,
        broker: BrokerId,
        clean_shutdown: bool,
        elect: Option<&[(PartitionId, BrokerId)]>,
    ) -> Effects<R> {
        let mut effects = Vec::new();
        if self.is_alive(broker) {
            effects.extend(self.fence_broker(cfg, broker));
        }
        self.registrations += 1;
        self.note_broker(broker);
        self.brokers.insert(
            broker,
            BrokerState {
                alive: true,
                last_heartbeat: now,
                epoch: BrokerEpoch(self.registrations),
            },
        );
        let ids: Vec<PartitionId> = self.partitions.keys().copied().collect();
        for id in ids {
            let leaves_elr = !clean_shutdown
                && cfg.rules.eligible_leader_replicas
                && self.partitions[&id].elr.contains(&broker);
            if leaves_elr {
                self.note_partition(id);
                let state = self.partitions.get_mut(&id).expect("listed above");
                state.elr.remove(&broker);
                state.partition_epoch = state.partition_epoch.next();
                effects.extend(self.announce(id));
            }
            if let Some(chosen) = elect {
                if self.partitions[&id].leader.is_none() {
                    let prefer = chosen.iter().find(|(p, _)| *p == id).map(|&(_, b)| b);
                    let preferred = prefer.filter(|&b| {
                        self.election_candidates(cfg, id)
                            .iter()
                            .any(|&(c, _)| c == b)
                    });
                    let elected = match preferred {
                        Some(b) => self.elect_leader_as(cfg, id, b),
                        None => self.elect_leader(cfg, id),
                    };
                    effects.extend(elected.unwrap_or_default());
                }
            }
            let state = &self.partitions[&id];
            if state.assigned.contains(&broker) {
                effects.push(self.send(broker, id, state));
            }
        }
        dedup_sends(effects)
    }

    /// A broker's heartbeat: its session lives on if the controller believes it alive, and
    /// the answer is true. False: it was fenced (its session expired, or a new controller
    /// never knew it alive), and it must register again, as a new incarnation, before it is
    /// part of the cluster again.
    fn on_heartbeat(&mut self, broker: BrokerId, now: Tick) -> bool {
        match self.brokers.get_mut(&broker).filter(|b| b.alive) {
            Some(b) => {
                b.last_heartbeat = now;
                true
            }
            None => false,
        }
    }

    /// The state of every partition assigned to `broker`, for a broker that has just opened a
    /// session with this controller: after a failover, brokers find the new controller, and
    /// this is how each learns the new controller epoch and whatever it missed (what
    /// [`Controller::take_over`] announces to every broker at once). Changes nothing.
    fn announce_to<R>(&self, broker: BrokerId) -> Effects<R> {
        self.partitions
            .iter()
            .filter(|(_, state)| state.assigned.contains(&broker))
            .map(|(&id, state)| self.send(broker, id, state))
            .collect()
    }

    /// Time passes: fence every broker whose session expired, then elect where needed.
    fn on_tick<R>(&mut self, cfg: &Config, now: Tick) -> Effects<R> {
        let expired: Vec<BrokerId> = self
            .brokers
            .iter()
            .filter(|(_, b)| {
                b.alive && now.0.saturating_sub(b.last_heartbeat.0) > cfg.session_timeout.0
            })
            .map(|(&id, _)| id)
            .collect();
        let mut effects = Vec::new();
        for broker in expired {
            effects.extend(self.fence_broker(cfg, broker));
        }
        if std::mem::replace(&mut self.unlooked.0, false) {
            effects.extend(self.elect_leaders(cfg));
        }
        dedup_sends(effects)
    }

    /// Elects a leader for every leaderless partition that has a candidate.
    fn elect_leaders<R>(&mut self, cfg: &Config) -> Effects<R> {
        let leaderless: Vec<PartitionId> = self
            .partitions
            .iter()
            .filter(|(_, s)| s.leader.is_none())
            .map(|(&id, _)| id)
            .collect();
        leaderless
            .into_iter()
            .flat_map(|id| self.elect_leader(cfg, id).unwrap_or_default())
            .collect()
    }

    /// `ControllerShrinkIsr`: the broker is dead (session expired, or shut down). It leaves
    /// every ISR; if that leaves the ISR below `min.insync.replicas`, it joins the ELR, since
    /// strict min ISR froze the high watermark while it still held everything (KIP-966). Without
    /// ELR, the last ISR member stays in the ISR, as in Kafka before KIP-966. A partition it led
    /// is left without a leader until [`Controller::elect_leader`].
    fn fence_broker<R>(&mut self, cfg: &Config, broker: BrokerId) -> Effects<R> {
        if self.brokers.contains_key(&broker) {
            self.note_broker(broker);
        }
        if let Some(b) = self.brokers.get_mut(&broker) {
            b.alive = false;
        }
        let changed: Vec<PartitionId> = self
            .partitions
            .iter()
            .filter(|(_, state)| {
                let leaves_isr = state.isr.contains(&broker)
                    && (cfg.rules.eligible_leader_replicas || state.isr.len() > 1);
                leaves_isr || state.leader == Some(broker)
            })
            .map(|(&id, _)| id)
            .collect();
        for &id in &changed {
            self.note_partition(id);
            let state = self.partitions.get_mut(&id).expect("listed above");
            if state.isr.contains(&broker) {
                if cfg.rules.eligible_leader_replicas {
                    state.isr.remove(&broker);
                    if state.isr.len() < state.min_insync_replicas {
                        state.elr.insert(broker);
                    }
                } else if state.isr.len() > 1 {
                    state.isr.remove(&broker);
                }
            }
            if state.leader == Some(broker) {
                state.leader = None;
            }
            state.partition_epoch = state.partition_epoch.next();
        }
        changed
            .into_iter()
            .flat_map(|id| self.announce(id))
            .collect()
    }

    /// Controlled shutdown: a broker about to stop asks to be fenced now. It is the same
    /// `ControllerShrinkIsr` as an expired session of a running broker (which the model checks),
    /// followed at once by `ControllerElectLeader` for what it led, so its partitions move to an
    /// ISR member without waiting out the session timeout. The broker must not heartbeat or
    /// register again in that run; a restart registers as usual. A broker already fenced changes
    /// nothing.
    fn on_controlled_shutdown<R>(&mut self, cfg: &Config, broker: BrokerId) -> Effects<R> {
        if !self.is_alive(broker) {
            return Vec::new();
        }
        let mut effects = self.fence_broker(cfg, broker);
        effects.extend(self.elect_leaders(cfg));
        dedup_sends(effects)
    }

    /// Who may be elected for partition `id`, and how, in preference order (assignment order):
    /// the live members of the ISR (`Election::Clean`); if there are none, with ELR, the live
    /// members of the ELR (`Eligible`); if there are none either, with unclean election, every
    /// live assigned replica (`Unclean`). Empty when nobody can be elected. Any of them may win
    /// (the model checker explores each); the runtime elects the first, the preferred leader.
    pub fn election_candidates(&self, cfg: &Config, id: PartitionId) -> Vec<(BrokerId, Election)> {
        let Some(state) = self.partitions.get(&id) else {
            return Vec::new();
        };
        let live = |set: &BTreeSet<BrokerId>, how: Election| -> Vec<(BrokerId, Election)> {
            state
                .assigned
                .iter()
                .copied()
                .filter(|b| set.contains(b) && self.is_alive(*b))
                .map(|b| (b, how))
                .collect()
        };
        let clean = live(&state.isr, Election::Clean);
        if !clean.is_empty() {
            return clean;
        }
        if cfg.rules.eligible_leader_replicas {
            let eligible = live(&state.elr, Election::Eligible);
            if !eligible.is_empty() {
                return eligible;
            }
        }
        if cfg.rules.unclean_leader_election {
            let all = state.assigned.iter().copied().collect();
            return live(&all, Election::Unclean);
        }
        Vec::new()
    }

    /// The preferred candidate: the first of [`Controller::election_candidates`].
    pub fn election_candidate(
        &self,
        cfg: &Config,
        id: PartitionId,
    ) -> Option<(BrokerId, Election)> {
        self.election_candidates(cfg, id).into_iter().next()
    }

    /// `ControllerElectLeader` as the runtime runs it: elects the preferred candidate
    /// ([`Controller::election_candidate`]) with [`Controller::elect_leader_as`].
    fn elect_leader<R>(
        &mut self,
        cfg: &Config,
        id: PartitionId,
    ) -> Result<Effects<R>, ControllerError> {
        let (leader, _) = self
            .election_candidate(cfg, id)
            .ok_or(ControllerError::NoEligibleReplica(id))?;
        self.elect_leader_as(cfg, id, leader)
    }

    /// `ControllerElectLeader`: elects `leader`, one of [`Controller::election_candidates`],
    /// for a leaderless partition in a new leader epoch (rule 2, rule 8) and tells the assigned
    /// brokers. An ELR or unclean winner becomes the whole ISR.
    fn elect_leader_as<R>(
        &mut self,
        cfg: &Config,
        id: PartitionId,
        leader: BrokerId,
    ) -> Result<Effects<R>, ControllerError> {
        let state = self
            .partitions
            .get(&id)
            .ok_or(ControllerError::UnknownPartition(id))?;
        if state.leader.is_some() {
            return Err(ControllerError::HasLeader(id));
        }
        let candidates = self.election_candidates(cfg, id);
        if candidates.is_empty() {
            return Err(ControllerError::NoEligibleReplica(id));
        }
        let how = candidates
            .iter()
            .find(|&&(b, _)| b == leader)
            .map(|&(_, how)| how)
            .ok_or(ControllerError::IneligibleLeader(id, leader))?;
        self.note_partition(id);
        let state = self.partitions.get_mut(&id).expect("checked above");
        state.leader = Some(leader);
        state.leader_epoch = state.leader_epoch.next();
        state.partition_epoch = state.partition_epoch.next();
        match how {
            Election::Clean => {}
            Election::Eligible => {
                state.elr.remove(&leader);
                state.isr = BTreeSet::from([leader]);
            }
            Election::Unclean => {
                state.elr.clear();
                state.isr = BTreeSet::from([leader]);
            }
        }
        Ok(self.announce(id))
    }

    /// Accepts or refuses a leader's AlterPartition by compare-and-set on the partition epoch
    /// (rule 7). Replicas it adds must be alive in the incarnation that fetched (KIP-903).
    /// Replicas it removes while the ISR is below `min.insync.replicas` join the ELR; once the
    /// ISR is back at the floor the ELR is emptied. A leader that has seen a newer controller
    /// is refused with NOT_CONTROLLER before anything else: this controller is deposed, and its
    /// view of the partition must not decide (rule 12, KAFKA-14154).
    fn on_alter_partition<R>(&mut self, cfg: &Config, req: &AlterPartitionRequest) -> Effects<R> {
        let result = self.alter_partition(cfg, req);
        let mut effects = Vec::new();
        if let (Err(AlterPartitionError::InvalidUpdateVersion { .. }), Some(state)) =
            (&result, self.partitions.get(&req.partition))
        {
            // The leader acts on an old version: send it the current one, as the metadata
            // update that follows such a refusal in Kafka. A duplicate of an accepted request
            // lands here too, and this is how its sender learns the outcome.
            effects.push(self.send(req.leader, req.partition, state));
        }
        effects.push(Effect::Send(Envelope {
            from: Node::Controller,
            to: Node::Broker(req.leader),
            message: Message::AlterPartitionResponse(AlterPartitionResponse {
                partition: req.partition,
                request_partition_epoch: req.partition_epoch,
                requested_isr: req.new_isr.clone(),
                requested_broker_epochs: req.broker_epochs.clone(),
                controller_epoch: self.epoch,
                result,
            }),
        }));
        effects
    }

    fn alter_partition(
        &mut self,
        cfg: &Config,
        req: &AlterPartitionRequest,
    ) -> Result<PartitionState, AlterPartitionError> {
        if cfg.rules.controller_fencing && req.controller_epoch > self.epoch {
            return Err(AlterPartitionError::NotController {
                request: req.controller_epoch,
                current: self.epoch,
            });
        }
        if self.partitions.contains_key(&req.partition) {
            self.note_partition(req.partition);
        }
        let brokers = &self.brokers;
        let eligible = |b: &BrokerId| {
            brokers
                .get(b)
                .is_some_and(|s| s.alive && req.broker_epochs.get(b) == Some(&s.epoch))
        };
        let state = self
            .partitions
            .get_mut(&req.partition)
            .ok_or(AlterPartitionError::UnknownPartition)?;
        if state.leader != Some(req.leader) || !req.new_isr.contains(&req.leader) {
            return Err(AlterPartitionError::NotLeader);
        }
        if req.leader_epoch != state.leader_epoch {
            return Err(AlterPartitionError::FencedLeaderEpoch {
                request: req.leader_epoch,
                current: state.leader_epoch,
            });
        }
        if req.partition_epoch != state.partition_epoch {
            return Err(AlterPartitionError::InvalidUpdateVersion {
                request: req.partition_epoch,
                current: state.partition_epoch,
            });
        }
        let ineligible: BTreeSet<BrokerId> = req
            .new_isr
            .iter()
            .filter(|b| !state.isr.contains(b) && (!eligible(b) || !state.assigned.contains(b)))
            .copied()
            .collect();
        if !ineligible.is_empty() {
            return Err(AlterPartitionError::IneligibleReplicas(ineligible));
        }
        let removed: Vec<BrokerId> = state.isr.difference(&req.new_isr).copied().collect();
        state.isr = req.new_isr.clone();
        if cfg.rules.eligible_leader_replicas {
            if state.isr.len() >= state.min_insync_replicas {
                state.elr.clear();
            } else {
                state.elr.extend(removed);
                state.elr.retain(|b| !req.new_isr.contains(b));
            }
        }
        state.partition_epoch = state.partition_epoch.next();
        Ok(state.clone())
    }

    /// Deletes a partition (DeleteTopics): the controller stops electing for it and forgets it,
    /// and returns its last state. Nothing is sent:
    /// no live state refers to a deleted partition, and its replicas learn from the cluster
    /// metadata that it is gone (partition ids are never reused).
    pub fn delete_partition(&mut self, id: PartitionId) -> Result<PartitionState, ControllerError> {
        if self.partitions.contains_key(&id) {
            self.note_partition(id);
        }
        let state = self
            .partitions
            .remove(&id)
            .ok_or(ControllerError::UnknownPartition(id))?;
        Ok(state)
    }

    /// Changes a partition's `min.insync.replicas` (a topic config change) in a new partition
    /// epoch, and tells the assigned brokers: the leader applies it to writes and to the high
    /// watermark from then on. As after an ISR change, the ELR is emptied once the ISR is at
    /// the new floor; raising the floor adds nobody to the ELR, since replicas already out of
    /// the ISR may lack committed records.
    pub fn set_min_insync_replicas<R>(
        &mut self,
        id: PartitionId,
        min_insync_replicas: usize,
    ) -> Result<Effects<R>, ControllerError> {
        if self.partitions.contains_key(&id) {
            self.note_partition(id);
        }
        let state = self
            .partitions
            .get_mut(&id)
            .ok_or(ControllerError::UnknownPartition(id))?;
        if min_insync_replicas == 0 || min_insync_replicas > state.assigned.len() {
            return Err(ControllerError::InvalidMinIsr(state.assigned.len()));
        }
        if state.min_insync_replicas == min_insync_replicas {
            return Ok(Vec::new());
        }
        state.min_insync_replicas = min_insync_replicas;
        if state.isr.len() >= min_insync_replicas {
            state.elr.clear();
        }
        state.partition_epoch = state.partition_epoch.next();
        Ok(self.announce(id))
    }
}

/// Keeps only the last LeaderAndIsr per (broker, partition) in a batch of effects: earlier ones
/// are superseded before they could matter, and dropping them keeps the network small.
fn dedup_sends<R>(effects: Effects<R>) -> Effects<R> {
    let mut seen = BTreeSet::new();
    let mut kept: Vec<Effect<R>> = Vec::with_capacity(effects.len());
    for effect in effects.into_iter().rev() {
        if let Effect::Send(Envelope {
            to,
            message: Message::LeaderAndIsr(l),
            ..
        }) = &effect
        {
            if !seen.insert((*to, l.partition)) {
                continue;
            }
        }
        kept.push(effect);
    }
    kept.reverse();
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Rules;

    fn leaders_and_isrs(effects: &Effects<()>) -> Vec<(BrokerId, PartitionState)> {
        effects
            .iter()
            .filter_map(|e| match e {
                Effect::Send(Envelope {
                    to: Node::Broker(b),
                    message: Message::LeaderAndIsr(l),
                    ..
                }) => Some((*b, l.state.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_controlled_shutdown_moves_leadership_to_the_isr_at_once() {
        let (cfg, mut c, p) = three();

        let effects = c.on_controlled_shutdown::<()>(&cfg, BrokerId(1));
        let state = c.partition(p).expect("partition").clone();
        assert!(!c.is_alive(BrokerId(1)));
        assert_eq!(state.leader, Some(BrokerId(2)));
        assert_eq!(state.leader_epoch, LeaderEpoch(2));
        assert_eq!(state.isr, BTreeSet::from([BrokerId(2), BrokerId(3)]));
        // Only the final state goes out, to the live replicas only.
        let sent = leaders_and_isrs(&effects);
        assert_eq!(
            sent,
            vec![(BrokerId(2), state.clone()), (BrokerId(3), state.clone())]
        );

        // Asking again (a retry) changes nothing.
        assert!(c.on_controlled_shutdown::<()>(&cfg, BrokerId(1)).is_empty());
        assert_eq!(c.partition(p), Some(&state));
    }

    #[test]
    fn the_last_isr_member_shutting_down_joins_the_elr_and_leads_again_after_restart() {
        let cfg = Config::default();
        let mut c = Controller::new();
        for b in 1..=2 {
            register(&cfg, &mut c, b, true);
        }
        let p = PartitionId(0);
        c.create_partition::<()>(p, vec![BrokerId(1), BrokerId(2)], 2)
            .expect("created");
        c.on_controlled_shutdown::<()>(&cfg, BrokerId(2));
        c.on_controlled_shutdown::<()>(&cfg, BrokerId(1));
        let state = c.partition(p).expect("partition");
        assert_eq!(state.leader, None);
        assert!(state.isr.is_empty());
        assert_eq!(state.elr, BTreeSet::from([BrokerId(1), BrokerId(2)]));
        // A clean restart keeps it in the ELR, so it is elected again.
        register(&cfg, &mut c, 1, true);
        assert_eq!(c.partition(p).and_then(|s| s.leader), Some(BrokerId(1)));
    }

    /// Registers broker `b` as a registration message would (electing the preferred candidate).
    fn register(cfg: &Config, c: &mut Controller, b: u32, clean_shutdown: bool) {
        let message = Message::BrokerRegistration {
            broker: BrokerId(b),
            clean_shutdown,
        };
        let input = Input::Message {
            from: Node::Broker(BrokerId(b)),
            message,
        };
        let _: Effects<()> = c.step(cfg, Tick(0), input);
    }

    /// Three live brokers, partition 0 over them with min ISR 2, led by b1.
    fn three() -> (Config, Controller, PartitionId) {
        let cfg = Config::default();
        let mut c = Controller::new();
        for b in 1..=3 {
            register(&cfg, &mut c, b, true);
        }
        let p = PartitionId(0);
        let assigned = vec![BrokerId(1), BrokerId(2), BrokerId(3)];
        c.create_partition::<()>(p, assigned, 2).expect("created");
        (cfg, c, p)
    }

    #[test]
    fn any_live_isr_member_is_a_candidate_and_the_runtime_takes_the_first() {
        let (cfg, mut c, p) = three();
        c.fence_broker::<()>(&cfg, BrokerId(1));
        let clean = |b| (BrokerId(b), Election::Clean);
        assert_eq!(c.election_candidates(&cfg, p), vec![clean(2), clean(3)]);
        assert_eq!(c.election_candidate(&cfg, p), Some(clean(2)));
        // Any candidate may win; a broker that is not one may not.
        let mut other = c.clone();
        assert_eq!(
            other.elect_leader_as::<()>(&cfg, p, BrokerId(1)),
            Err(ControllerError::IneligibleLeader(p, BrokerId(1)))
        );
        other
            .elect_leader_as::<()>(&cfg, p, BrokerId(3))
            .expect("b3 is a candidate");
        let state = other.partition(p).expect("partition");
        assert_eq!(state.leader, Some(BrokerId(3)));
        assert_eq!(state.leader_epoch, LeaderEpoch(2));
        assert_eq!(state.isr, BTreeSet::from([BrokerId(2), BrokerId(3)]));
        // The runtime's election is the first candidate's.
        let mut preferred = c.clone();
        preferred.elect_leader::<()>(&cfg, p).expect("elected");
        c.elect_leader_as::<()>(&cfg, p, BrokerId(2))
            .expect("elected");
        assert_eq!(preferred, c);
        assert_eq!(
            c.elect_leader_as::<()>(&cfg, p, BrokerId(3)),
            Err(ControllerError::HasLeader(p))
        );
    }

    #[test]
    fn eligible_and_unclean_candidates_come_only_when_the_isr_has_none() {
        let (cfg, mut c, p) = three();
        for b in [2, 3, 1] {
            c.fence_broker::<()>(&cfg, BrokerId(b));
        }
        // b3 left the ISR at the floor, b1 as the last member: both in the ELR, neither live.
        let state = c.partition(p).expect("partition").clone();
        assert!(state.isr.is_empty());
        assert_eq!(state.elr, BTreeSet::from([BrokerId(1), BrokerId(3)]));
        assert!(c.election_candidates(&cfg, p).is_empty());
        // A clean restart of b2 (not in the ELR) makes no candidate either; of b3, one.
        assert!(c
            .registration_candidates(&cfg, BrokerId(2), true, p)
            .is_empty());
        assert_eq!(
            c.registration_candidates(&cfg, BrokerId(3), true, p),
            vec![(BrokerId(3), Election::Eligible)]
        );
        register(&cfg, &mut c, 2, true);
        assert_eq!(c.partition(p).and_then(|s| s.leader), None);
        // With unclean election the live b2 is a candidate, electable only as unclean.
        let unclean = Config {
            rules: Rules {
                unclean_leader_election: true,
                ..Rules::default()
            },
            ..cfg
        };
        assert_eq!(
            c.election_candidates(&unclean, p),
            vec![(BrokerId(2), Election::Unclean)]
        );
        register(&cfg, &mut c, 3, true);
        let state = c.partition(p).expect("partition");
        assert_eq!(state.leader, Some(BrokerId(3)));
        assert_eq!(state.isr, BTreeSet::from([BrokerId(3)]));
        assert_eq!(state.elr, BTreeSet::from([BrokerId(1)]));
    }

    #[test]
    fn a_registration_elects_the_candidate_chosen() {
        let (cfg, mut c, p) = three();
        c.fence_broker::<()>(&cfg, BrokerId(2));
        c.fence_broker::<()>(&cfg, BrokerId(1));
        // Only b3 is left in the ISR; b1 in the ELR. Registering b2 elects among the ISR.
        assert_eq!(
            c.registration_candidates(&cfg, BrokerId(2), true, p),
            vec![(BrokerId(3), Election::Clean)]
        );
        // Re-registering the live b3 fences it first: the ISR is then empty, and the ELR
        // (b1 is not live, b3 is) offers b3 alone.
        assert_eq!(
            c.registration_candidates(&cfg, BrokerId(3), true, p),
            vec![(BrokerId(3), Election::Eligible)]
        );
        let mut preferred = c.clone();
        register(&cfg, &mut preferred, 2, true);
        let register = Input::Register {
            broker: BrokerId(2),
            clean_shutdown: true,
            elects: vec![(p, BrokerId(3))],
        };
        let _: Effects<()> = c.step(&cfg, Tick(0), register);
        assert_eq!(preferred, c);
        assert_eq!(c.partition(p).and_then(|s| s.leader), Some(BrokerId(3)));
    }

    #[test]
    fn a_deleted_partition_is_forgotten_and_never_elected() {
        let (cfg, mut c, p) = three();
        let gone = c.delete_partition(p).expect("exists");
        assert_eq!(gone.assigned.len(), 3);
        assert_eq!(c.partition(p), None);
        assert_eq!(
            c.delete_partition(p),
            Err(ControllerError::UnknownPartition(p))
        );
        // Fencing its former leader elects nothing for it.
        let effects: Effects<()> = c.fence_broker(&cfg, BrokerId(1));
        assert!(effects.is_empty());
        assert!(c.elect_leaders::<()>(&cfg).is_empty());
    }

    #[test]
    fn a_min_isr_change_reaches_every_live_replica_in_a_new_partition_epoch() {
        let (cfg, mut c, p) = three();
        let before = c.partition(p).expect("p").clone();
        let effects: Effects<()> = c.set_min_insync_replicas(p, 3).expect("valid");
        let sent = leaders_and_isrs(&effects);
        assert_eq!(sent.len(), 3, "every assigned live broker");
        for (_, state) in &sent {
            assert_eq!(state.min_insync_replicas, 3);
            assert_eq!(state.partition_epoch, before.partition_epoch.next());
            assert_eq!(
                state.leader_epoch, before.leader_epoch,
                "same leader, same term"
            );
        }
        assert_eq!(
            c.set_min_insync_replicas::<()>(p, 4),
            Err(ControllerError::InvalidMinIsr(3))
        );
        assert_eq!(
            c.set_min_insync_replicas::<()>(p, 0),
            Err(ControllerError::InvalidMinIsr(3))
        );
        assert!(c
            .set_min_insync_replicas::<()>(p, 3)
            .expect("same")
            .is_empty());
        // Two brokers die: with a floor of 3 they join the ELR; lowering the floor to 1, at
        // or below the ISR, empties it, as an ISR change back to the floor would.
        c.fence_broker::<()>(&cfg, BrokerId(3));
        c.fence_broker::<()>(&cfg, BrokerId(2));
        assert_eq!(
            c.partition(p).map(|s| s.elr.clone()),
            Some(BTreeSet::from([BrokerId(2), BrokerId(3)]))
        );
        let effects: Effects<()> = c.set_min_insync_replicas(p, 1).expect("valid");
        assert_eq!(
            leaders_and_isrs(&effects).len(),
            1,
            "only broker 1 is alive"
        );
        let state = c.partition(p).expect("p");
        assert!(state.elr.is_empty());
        assert_eq!(state.isr, BTreeSet::from([BrokerId(1)]));
        assert_eq!(
            c.set_min_insync_replicas::<()>(PartitionId(5), 1),
            Err(ControllerError::UnknownPartition(PartitionId(5)))
        );
    }

    /// A leader's AlterPartition adding nothing: drops b3 from the ISR of [`three`]'s
    /// partition, as b1 (the leader, epoch 1) would propose it having heard controller `seen`.
    fn drop_b3(seen: ControllerEpoch) -> AlterPartitionRequest {
        AlterPartitionRequest {
            partition: PartitionId(0),
            leader: BrokerId(1),
            leader_epoch: LeaderEpoch(1),
            partition_epoch: PartitionEpoch(1),
            new_isr: BTreeSet::from([BrokerId(1), BrokerId(2)]),
            broker_epochs: BTreeMap::new(),
            controller_epoch: seen,
        }
    }

    fn answer(effects: &Effects<()>) -> &AlterPartitionResponse {
        effects
            .iter()
            .find_map(|e| match e {
                Effect::Send(Envelope {
                    message: Message::AlterPartitionResponse(r),
                    ..
                }) => Some(r),
                _ => None,
            })
            .expect("an answer")
    }

    #[test]
    fn a_new_controller_takes_over_the_stored_state_in_the_next_epoch_and_announces_it() {
        let (cfg, mut old, p) = three();
        assert!(old.on_heartbeat(BrokerId(1), Tick(3)));
        old.fence_broker::<()>(&cfg, BrokerId(3));
        let (new, announce) = Controller::take_over::<()>(&old, old.epoch().next(), Tick(50));
        assert_eq!(new.epoch(), ControllerEpoch(2));
        assert_eq!(new.partition(p), old.partition(p));
        // Live brokers get a fresh session on the new controller's clock; the fenced stays so.
        assert!(!new.is_alive(BrokerId(3)));
        for b in [1, 2] {
            assert_eq!(new.brokers()[&BrokerId(b)].last_heartbeat, Tick(50));
        }
        // The current state goes to every live assigned broker, stamped with the new epoch.
        let sent = leaders_and_isrs(&announce);
        let state = new.partition(p).expect("partition").clone();
        assert_eq!(
            sent,
            vec![(BrokerId(1), state.clone()), (BrokerId(2), state)]
        );
        assert!(announce.iter().all(|e| matches!(e, Effect::Send(Envelope {
            message: Message::LeaderAndIsr(l), ..
        }) if l.controller_epoch == ControllerEpoch(2))));
    }

    #[test]
    fn the_store_takes_only_the_holders_steps_unless_fencing_is_off() {
        let (cfg, old, _) = three();
        let (new, _) = Controller::take_over::<()>(&old, old.epoch().next(), Tick(0));
        assert!(new.admitted_by_store(&cfg, new.epoch()));
        assert!(!old.admitted_by_store(&cfg, new.epoch()));
        let unfenced = Config {
            rules: Rules {
                controller_fencing: false,
                ..Rules::default()
            },
            ..cfg
        };
        assert!(old.admitted_by_store(&unfenced, new.epoch()));
    }

    #[test]
    fn a_deposed_controller_refuses_a_leader_that_heard_its_successor() {
        let (cfg, mut old, p) = three();
        let before = old.partition(p).cloned();
        let effects = old.on_alter_partition::<()>(&cfg, &drop_b3(ControllerEpoch(2)));
        assert_eq!(
            answer(&effects).result,
            Err(AlterPartitionError::NotController {
                request: ControllerEpoch(2),
                current: ControllerEpoch(1),
            })
        );
        assert_eq!(old.partition(p).cloned(), before, "nothing changed");
        // A leader at the controller's own epoch is served.
        let effects = old.on_alter_partition::<()>(&cfg, &drop_b3(ControllerEpoch(1)));
        let answer = answer(&effects);
        assert_eq!(answer.controller_epoch, ControllerEpoch(1));
        assert!(answer.result.is_ok());
    }

    /// A broker speaks only for itself: a registration, a heartbeat or an AlterPartition sent
    /// by one broker in another's name changes nothing. A broker's own heartbeat keeps its
    /// session, and a fenced broker's is answered with an order to register again.
    #[test]
    fn a_broker_speaking_for_another_is_ignored_and_its_own_heartbeat_keeps_its_session() {
        let (cfg, mut c, p) = three();
        assert_eq!(c.partitions().keys().collect::<Vec<_>>(), [&p]);
        let from_b3 = |message| Input::Message {
            from: Node::Broker(BrokerId(3)),
            message,
        };
        let before = c.clone();
        for message in [
            Message::BrokerRegistration {
                broker: BrokerId(2),
                clean_shutdown: false,
            },
            Message::BrokerHeartbeat {
                broker: BrokerId(2),
            },
            Message::AlterPartition(drop_b3(ControllerEpoch(1))),
        ] {
            let effects: Effects<()> = c.step(&cfg, Tick(10), from_b3(message.clone()));
            assert!(effects.is_empty(), "{message:?}: {effects:?}");
            assert_eq!(c, before, "{message:?}");
        }
        let heartbeat = |b| Input::Message {
            from: Node::Broker(BrokerId(b)),
            message: Message::BrokerHeartbeat {
                broker: BrokerId(b),
            },
        };
        for b in [1, 3] {
            let effects: Effects<()> = c.step(&cfg, Tick(10), heartbeat(b));
            assert!(effects.is_empty(), "{effects:?}");
        }
        // b2's session, silent since tick 0, expires after session_timeout (18); the others'
        // heartbeats at tick 10 keep theirs.
        let _: Effects<()> = c.step(&cfg, Tick(20), Input::Tick);
        assert_eq!(c.alive_brokers(), vec![BrokerId(1), BrokerId(3)]);
        let effects: Effects<()> = c.step(&cfg, Tick(21), heartbeat(2));
        assert_eq!(
            effects,
            vec![Effect::MustRegister {
                broker: BrokerId(2)
            }]
        );
    }

    /// A partition is created only over live brokers, with a min ISR from 1 to its replication
    /// factor: what an operator asks for is refused otherwise, with the reason.
    #[test]
    fn a_partition_is_created_only_over_live_brokers_with_a_min_isr_it_can_meet() {
        let (_, mut c, _) = three();
        let q = PartitionId(1);
        let brokers = |v: &[u32]| v.iter().map(|&b| BrokerId(b)).collect::<Vec<_>>();
        assert_eq!(
            c.create_partition::<()>(q, vec![], 1).err(),
            Some(ControllerError::NotEnoughBrokers {
                factor: 0,
                alive: 0
            })
        );
        assert_eq!(
            c.create_partition::<()>(q, brokers(&[1, 4]), 1).err(),
            Some(ControllerError::NotEnoughBrokers {
                factor: 2,
                alive: 1
            })
        );
        for min_isr in [0, 3] {
            assert_eq!(
                c.create_partition::<()>(q, brokers(&[1, 2]), min_isr).err(),
                Some(ControllerError::InvalidMinIsr(2))
            );
        }
        assert!(c.create_partition::<()>(q, brokers(&[1, 2]), 2).is_ok());
    }

    /// Only a partition left without a leader elects: a live follower's registration offers no
    /// candidate; the live leader's fences it first, and then elects among the rest of the
    /// ISR — the preferred one when the broker asked for is not a candidate.
    #[test]
    fn a_registration_elects_only_where_it_leaves_no_leader() {
        let (cfg, c, p) = three();
        assert!(c
            .registration_candidates(&cfg, BrokerId(2), true, p)
            .is_empty());
        let clean = |b| (BrokerId(b), Election::Clean);
        assert_eq!(
            c.registration_candidates(&cfg, BrokerId(1), true, p),
            vec![clean(2), clean(3)]
        );
        let mut again = c.clone();
        let register = Input::Register {
            broker: BrokerId(1),
            clean_shutdown: true,
            elects: vec![(p, BrokerId(1))],
        };
        let _: Effects<()> = again.step(&cfg, Tick(0), register);
        let state = again.partition(p).expect("partition");
        assert_eq!(state.leader, Some(BrokerId(2)));
        assert_eq!(state.isr, BTreeSet::from([BrokerId(2), BrokerId(3)]));
    }

    /// A broker that opens a session with this controller (after a failover) is told the
    /// state of each partition it is assigned, and of no other.
    #[test]
    fn a_new_session_learns_the_state_of_its_partitions() {
        let (cfg, mut c, p) = three();
        register(&cfg, &mut c, 4, true);
        let state = c.partition(p).expect("partition").clone();
        let told = |c: &mut Controller, b| {
            let effects: Effects<()> = c.step(&cfg, Tick(0), Input::SessionOpened(BrokerId(b)));
            leaders_and_isrs(&effects)
        };
        assert_eq!(told(&mut c, 2), vec![(BrokerId(2), state)]);
        assert!(told(&mut c, 4).is_empty());
    }

    /// A tick looks for partitions to elect a leader for only when a broker or partition
    /// changed since the last look: an idle cluster's ticks cost nothing however many
    /// partitions it has, and a change is still acted on at the next tick.
    #[test]
    fn a_tick_looks_for_elections_only_after_a_change() {
        let (cfg, mut c, p) = three();
        let _: Effects<()> = c.step(&cfg, Tick(1), Input::Tick);
        assert!(!c.unlooked.0);
        let heartbeat = Input::Message {
            from: Node::Broker(BrokerId(2)),
            message: Message::BrokerHeartbeat {
                broker: BrokerId(2),
            },
        };
        let _: Effects<()> = c.step(&cfg, Tick(2), heartbeat);
        assert!(
            !c.unlooked.0,
            "a heartbeat changes nothing elections depend on"
        );
        // The partition loses its leader, as every change does, through `note`.
        c.note_partition(p);
        c.partitions.get_mut(&p).expect("partition").leader = None;
        assert!(c.unlooked.0);
        let effects: Effects<()> = c.step(&cfg, Tick(3), Input::Tick);
        assert_eq!(c.partition(p).and_then(|s| s.leader), Some(BrokerId(1)));
        assert_eq!(leaders_and_isrs(&effects).len(), 3, "every replica told");
    }

    /// A session lasts `session_timeout` ticks after the last heartbeat, and expires after.
    #[test]
    fn a_session_expires_only_once_the_timeout_has_passed() {
        let (cfg, mut c, _) = three();
        let timeout = cfg.session_timeout.0;
        let _: Effects<()> = c.step(&cfg, Tick(timeout), Input::Tick);
        assert!((1..=3).all(|b| c.is_alive(BrokerId(b))));
        let _: Effects<()> = c.step(&cfg, Tick(timeout + 1), Input::Tick);
        assert!((1..=3).all(|b| !c.is_alive(BrokerId(b))));
    }
}
