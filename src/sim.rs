//! A whole partition's cluster in one value: brokers running the core, the controller, the
//! messages in flight, a producer, a consumer and the history of what they saw.
//!
//! This is the deterministic driver the stateright models and the property tests share. It
//! makes no protocol decision: every [`Action`] is one step of a [`Replica`] or the
//! [`Controller`] (`step`, with a [`ReplicaInput`] or [`ControllerInput`]), and the sim routes
//! the [`Effect`]s it returns. What it adds is what a model needs — a network that delays,
//! reorders, duplicates and drops, crashes with budgets, bounds — and the ghost state the
//! properties read. It has no clock: every step happens at tick 0, and a timer fires when its
//! action is taken (any amount of time may pass between two steps).
//!
//! It is pure, `Clone + Hash + Eq`, and cheap to clone (logs share structure), so a model checker
//! can hold millions of clusters.

use crate::config::{Config, FlushPolicy};
use crate::controller::{Controller, Input as ControllerInput};
use crate::invariants::{ClusterView, History, Property, Violation};
use crate::log::{Log, MemLog};
use crate::message::{Effect, Effects, Envelope, Message};
use crate::replica::{Input as ReplicaInput, Replica, Timer};
use crate::types::{Acks, BrokerId, Node, Offset, PartitionId, Tick};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;

/// Records in the simulation are small numbers: the n-th record written is `n`.
pub type Record = u8;

/// The one partition a simulated cluster replicates.
pub const PARTITION: PartitionId = PartitionId(0);

/// How far a simulation may go: the model checker's bounds, the property tests' limits.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Bounds {
    /// Brokers, each hosting one replica; broker 0 leads first.
    pub replicas: u32,
    /// Records the producer writes in all.
    pub records: u8,
    /// No election beyond this leader epoch (the first leader has epoch 1).
    pub max_leader_epoch: u32,
    /// Clean shutdowns in all.
    pub clean_crashes: u8,
    /// Unclean crashes in all.
    pub unclean_crashes: u8,
    /// Messages the network may lose in all.
    pub drops: u8,
    /// Messages the network may deliver twice, in all.
    pub duplicates: u8,
    /// Times the controller may lose a *running* broker's heartbeats (a network partition) and
    /// fence it. The broker keeps acting on its old role — a zombie leader, a stale follower —
    /// until it registers again.
    pub session_expiries: u8,
    /// What the producer asks for.
    pub acks: Acks,
    /// Whether a consumer reads.
    pub consumer: bool,
    /// Whether the OS may flush a broker's page cache at any time (only matters under the
    /// page-cache flush policy).
    pub background_flush: bool,
    /// Times the controller role may move to a new controller (`ControllerFailover`) while the
    /// old one keeps running as a zombie.
    pub controller_failovers: u8,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            replicas: 3,
            records: 2,
            max_leader_epoch: 3,
            clean_crashes: 1,
            unclean_crashes: 1,
            drops: 0,
            duplicates: 0,
            session_expiries: 0,
            acks: Acks::All,
            consumer: true,
            background_flush: false,
            controller_failovers: 0,
        }
    }
}

/// One step of a simulation. The names are the TLA+ anchor's where it has one.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Action {
    /// The producer writes the next record to a broker that believes it leads.
    LeaderWrite(BrokerId),
    /// A follower's request timer fires and it sends its request (OffsetForLeaderEpoch or
    /// Fetch) to its leader again: taken only when neither the request nor its answer is in
    /// flight (it was lost, or answered with an error), as a timeout would find it.
    FollowerFetch(BrokerId),
    /// A message in flight arrives.
    Deliver(Envelope<Record>),
    /// A message in flight is lost.
    Drop(Envelope<Record>),
    /// A message in flight is copied: it will arrive twice.
    Duplicate(Envelope<Record>),
    /// A leader's lag timer for a follower fires and it proposes to drop it from the ISR (any
    /// time may have passed).
    LeaderShrinkIsr {
        leader: BrokerId,
        follower: BrokerId,
    },
    /// The controller fences a broker whose session expired — it is down, or cut off — and
    /// shrinks it out of the ISR.
    ControllerShrinkIsr(BrokerId),
    /// A running broker that the controller fenced reaches it again and registers anew. If
    /// that elects a leader, `elects` is the one chosen among the candidates.
    Reregister {
        broker: BrokerId,
        elects: Option<BrokerId>,
    },
    /// The controller elects this candidate leader of the leaderless partition: any candidate
    /// may win ([`Controller::election_candidates`]), as in the TLA+ anchor.
    ControllerElectLeader(BrokerId),
    /// A broker flushes its log and stops.
    CleanShutdown(BrokerId),
    /// A broker dies, losing what it had not flushed.
    UncleanCrash(BrokerId),
    /// A stopped broker starts again and registers with the controller. If that elects a
    /// leader, `elects` is the one chosen among the candidates.
    Restart {
        broker: BrokerId,
        elects: Option<BrokerId>,
    },
    /// A broker's log becomes durable (its flush completes: under `flush=always` the one the
    /// broker asked for, under page cache the OS's).
    Flush(BrokerId),
    /// A leader's AlterPartition timer fires and it sends its pending proposal again: taken only
    /// when neither the request nor its answer is in flight.
    LeaderRetryAlterPartition(BrokerId),
    /// A leader's held fetches waited long enough and are answered (only with a
    /// `fetch_max_wait`).
    FetchWaitExpired(BrokerId),
    /// The consumer reads the committed records it has not read yet from a leader.
    ConsumerRead(BrokerId),
    /// The active controller loses the role without noticing (a pause, a partition from the
    /// store): a new controller is elected through the store, takes over the state the store
    /// holds in the next controller epoch, and the old one runs on as a zombie.
    ControllerFailover,
    /// The zombie controller fences a broker: it hears no heartbeats, since brokers now talk
    /// to its successor.
    ZombieShrinkIsr(BrokerId),
    /// The zombie controller elects this candidate leader of what it believes is a leaderless
    /// partition.
    ZombieElectLeader(BrokerId),
    /// A message in flight to the controller reaches the zombie instead.
    ZombieDeliver(Envelope<Record>),
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::LeaderWrite(b) => write!(f, "LeaderWrite({b})"),
            Action::FollowerFetch(b) => write!(f, "FollowerFetch({b})"),
            Action::Deliver(e) => write!(f, "Deliver({})", describe(e)),
            Action::Drop(e) => write!(f, "Drop({})", describe(e)),
            Action::Duplicate(e) => write!(f, "Duplicate({})", describe(e)),
            Action::LeaderShrinkIsr { leader, follower } => {
                write!(f, "LeaderShrinkIsr({leader} drops {follower})")
            }
            Action::ControllerShrinkIsr(b) => write!(f, "ControllerShrinkIsr({b})"),
            Action::Reregister { broker, elects } => {
                write!(f, "Reregister({broker}{})", electing(elects))
            }
            Action::ControllerElectLeader(b) => write!(f, "ControllerElectLeader({b})"),
            Action::CleanShutdown(b) => write!(f, "CleanShutdown({b})"),
            Action::UncleanCrash(b) => write!(f, "UncleanCrash({b})"),
            Action::Restart { broker, elects } => {
                write!(f, "Restart({broker}{})", electing(elects))
            }
            Action::Flush(b) => write!(f, "Flush({b})"),
            Action::LeaderRetryAlterPartition(b) => write!(f, "LeaderRetryAlterPartition({b})"),
            Action::FetchWaitExpired(b) => write!(f, "FetchWaitExpired({b})"),
            Action::ConsumerRead(b) => write!(f, "ConsumerRead({b})"),
            Action::ControllerFailover => write!(f, "ControllerFailover"),
            Action::ZombieShrinkIsr(b) => write!(f, "ZombieShrinkIsr({b})"),
            Action::ZombieElectLeader(b) => write!(f, "ZombieElectLeader({b})"),
            Action::ZombieDeliver(e) => write!(f, "ZombieDeliver({})", describe(e)),
        }
    }
}

/// The candidates `controller` may elect now: its partition is leaderless and below the leader
/// epoch bound.
fn electable(cfg: &Config, bounds: &Bounds, controller: &Controller) -> Vec<BrokerId> {
    let state = controller.partition(PARTITION);
    if state.is_some_and(|s| s.leader.is_none() && s.leader_epoch.0 < bounds.max_leader_epoch) {
        controller
            .election_candidates(cfg, PARTITION)
            .into_iter()
            .map(|(b, _)| b)
            .collect()
    } else {
        Vec::new()
    }
}

/// `, elects b1` when a registration elects b1.
fn electing(elects: &Option<BrokerId>) -> String {
    elects.map_or(String::new(), |b| format!(", elects {b}"))
}

/// A one-line description of a message: kind, route and the fields that matter.
pub fn describe(e: &Envelope<Record>) -> String {
    let body = match &e.message {
        Message::Fetch(r) => format!("Fetch offset={} {}", r.fetch_offset, r.current_leader_epoch),
        Message::FetchResponse(r) => match &r.result {
            Ok(f) => {
                let recs: Vec<String> = f
                    .entries
                    .iter()
                    .map(|en| format!("{}:{}", en.record, en.epoch))
                    .collect();
                format!(
                    "FetchResponse {} from={} [{}] hw={}",
                    r.leader_epoch,
                    r.fetch_offset,
                    recs.join(","),
                    f.high_watermark
                )
            }
            Err(err) => format!("FetchResponse {} {err}", r.leader_epoch),
        },
        Message::OffsetForLeaderEpoch(r) => format!(
            "OffsetForLeaderEpoch {} requested={}",
            r.current_leader_epoch, r.requested_epoch
        ),
        Message::OffsetForLeaderEpochResponse(r) => match &r.result {
            Ok(Some((epoch, end))) => format!(
                "OffsetForLeaderEpochResponse {} requested={} -> {epoch} ends at {end}",
                r.leader_epoch, r.requested_epoch
            ),
            Ok(None) => format!("OffsetForLeaderEpochResponse {} -> none", r.leader_epoch),
            Err(err) => format!("OffsetForLeaderEpochResponse {} {err}", r.leader_epoch),
        },
        Message::AlterPartition(r) => format!(
            "AlterPartition isr={} {} {}",
            set(&r.new_isr),
            r.leader_epoch,
            r.partition_epoch
        ),
        Message::AlterPartitionResponse(r) => match &r.result {
            Ok(s) => format!(
                "AlterPartitionResponse {} ok isr={} {}",
                r.controller_epoch,
                set(&s.isr),
                s.partition_epoch
            ),
            Err(err) => format!("AlterPartitionResponse {} {err}", r.controller_epoch),
        },
        Message::LeaderAndIsr(l) => {
            let leader = l.state.leader.map_or("none".into(), |b| b.to_string());
            format!(
                "LeaderAndIsr {} leader={leader} {} isr={} elr={} {}",
                l.controller_epoch,
                l.state.leader_epoch,
                set(&l.state.isr),
                set(&l.state.elr),
                l.state.partition_epoch
            )
        }
        Message::BrokerRegistration {
            broker,
            clean_shutdown,
        } => {
            format!("BrokerRegistration {broker} clean={clean_shutdown}")
        }
        Message::BrokerHeartbeat { broker } => format!("BrokerHeartbeat {broker}"),
    };
    format!("{}→{}: {body}", e.from, e.to)
}

/// `{b0,b1}` for a set of brokers.
pub fn set(s: &BTreeSet<BrokerId>) -> String {
    let items: Vec<String> = s.iter().map(|b| b.to_string()).collect();
    format!("{{{}}}", items.join(","))
}

/// The simulated cluster.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Cluster {
    /// Replica of broker `i` at index `i`.
    pub replicas: Vec<Replica<MemLog<Record>>>,
    /// The active controller: the one that holds the controller role.
    pub controller: Controller,
    /// The controller that lost the role and has not noticed: it acts on its in-memory state
    /// until the store refuses it (rule 11). At most one: a second failover lets the older
    /// zombie go.
    pub zombie: Option<Controller>,
    /// What the store holds when it is not the active controller's state: only a zombie's
    /// unfenced write (`controller-fencing=off`) can make it differ, until the active
    /// controller's next write. The next controller takes over from it.
    pub stale_store: Option<Controller>,
    /// Messages in flight: a multiset, kept sorted so equal networks are equal values.
    pub network: Vec<Envelope<Record>>,
    pub history: History<Record>,
    /// Records written so far (the next one is `written + 1`).
    pub written: u8,
    /// The consumer's position.
    pub consumer_offset: Offset,
    /// Whether each broker's last stop was clean.
    pub last_stop_clean: Vec<bool>,
    pub clean_crashes: u8,
    pub unclean_crashes: u8,
    pub drops: u8,
    pub duplicates: u8,
    pub session_expiries: u8,
    pub controller_failovers: u8,
    /// Brokers that restarted and have not been back in the controller's ISR since.
    pub awaiting_rejoin: BTreeSet<BrokerId>,
    /// Ghost: a restarted replica has rejoined the ISR.
    pub rejoined: bool,
}

impl Cluster {
    /// A running cluster: every broker registered, the partition created with broker 0 leading
    /// in epoch 1, and every broker told so.
    pub fn new(cfg: &Config, bounds: &Bounds) -> Cluster {
        let n = bounds.replicas;
        let mut cluster = Cluster {
            replicas: (0..n)
                .map(|b| Replica::new(BrokerId(b), PARTITION, MemLog::new()))
                .collect(),
            controller: Controller::new(),
            zombie: None,
            stale_store: None,
            network: Vec::new(),
            history: History::default(),
            written: 0,
            consumer_offset: Offset(0),
            last_stop_clean: vec![true; n as usize],
            clean_crashes: 0,
            unclean_crashes: 0,
            drops: 0,
            duplicates: 0,
            session_expiries: 0,
            controller_failovers: 0,
            awaiting_rejoin: BTreeSet::new(),
            rejoined: false,
        };
        for b in 0..n {
            let register = ControllerInput::Register {
                broker: BrokerId(b),
                clean_shutdown: true,
                elects: None,
            };
            let _: Effects<Record> = cluster.controller.step(cfg, Tick(0), register);
        }
        let assigned = (0..n).map(BrokerId).collect();
        let announce = cluster
            .controller
            .create_partition(PARTITION, assigned, cfg.min_insync_replicas)
            .expect("a fresh cluster has every broker alive");
        // The initial LeaderAndIsr arrive at once (the followers' first requests wait in the
        // network): the interesting interleavings come later.
        for effect in announce {
            if let Effect::Send(envelope) = effect {
                let effects = cluster.deliver(cfg, envelope);
                cluster.route(bounds, effects);
            }
        }
        cluster
    }

    /// Every controller state in the cluster: the active controller's, the zombie's and a stale
    /// store's. Bounds on partition changes apply to each.
    pub fn controllers(&self) -> impl Iterator<Item = &Controller> {
        std::iter::once(&self.controller)
            .chain(self.zombie.as_ref())
            .chain(self.stale_store.as_ref())
    }

    /// A snapshot for the invariants.
    pub fn view(&self) -> ClusterView<'_, MemLog<Record>> {
        ClusterView {
            partition: PARTITION,
            controller: &self.controller,
            replicas: &self.replicas,
            history: &self.history,
        }
    }

    /// Checks one property.
    pub fn check(&self, property: Property) -> Result<(), Violation> {
        property.check(&self.view())
    }

    fn replica(&self, b: BrokerId) -> &Replica<MemLog<Record>> {
        &self.replicas[b.0 as usize]
    }

    fn replica_mut(&mut self, b: BrokerId) -> &mut Replica<MemLog<Record>> {
        &mut self.replicas[b.0 as usize]
    }

    fn brokers(&self) -> impl Iterator<Item = BrokerId> {
        (0..self.replicas.len() as u32).map(BrokerId)
    }

    /// Whether broker `b` has a request to its leader, or the answer to one, in flight, a
    /// request waiting for its log to be durable, or a Fetch parked at a running leader (which
    /// answers it within `fetch_max_wait`, before the request timer, `request_timeout`, fires).
    fn request_in_flight(&self, b: BrokerId) -> bool {
        let parked = self.replicas.iter().any(|r| {
            r.leader_state()
                .is_some_and(|l| l.parked.iter().any(|p| p.request.replica == b))
        });
        let is_request = |e: &Envelope<Record>| {
            matches!(
                e.message,
                Message::Fetch(_) | Message::OffsetForLeaderEpoch(_)
            )
        };
        parked
            || self
                .replica(b)
                .held()
                .iter()
                .any(|(_, e)| matches!(e, Effect::Send(env) if is_request(env)))
            || self.network.iter().any(|e| match &e.message {
                Message::Fetch(_) | Message::OffsetForLeaderEpoch(_) => e.from == Node::Broker(b),
                Message::FetchResponse(_) | Message::OffsetForLeaderEpochResponse(_) => {
                    e.to == Node::Broker(b)
                }
                _ => false,
            })
    }

    /// Whether leader `b` has an AlterPartition, or the answer to one, in flight.
    fn proposal_in_flight(&self, b: BrokerId) -> bool {
        self.network.iter().any(|e| match &e.message {
            Message::AlterPartition(_) => e.from == Node::Broker(b),
            Message::AlterPartitionResponse(_) => e.to == Node::Broker(b),
            _ => false,
        })
    }

    /// Every action enabled in this state within `bounds`, in a deterministic order.
    pub fn actions(&self, cfg: &Config, bounds: &Bounds) -> Vec<Action> {
        let mut actions = Vec::new();
        for b in self.brokers() {
            let r = self.replica(b);
            if r.is_leader() && self.written < bounds.records {
                actions.push(Action::LeaderWrite(b));
            }
            // The replica's running timers, each an action whenever it may fire. Retries fire
            // only once what they retry is neither in flight nor answered in flight: a timeout
            // finds it lost. The checkpoint needs no action: with the model's interval of zero
            // the replica takes it with every flush.
            for (timer, _) in r.timers(cfg) {
                match timer {
                    Timer::Request if !self.request_in_flight(b) => {
                        actions.push(Action::FollowerFetch(b))
                    }
                    Timer::AlterPartition if !self.proposal_in_flight(b) => {
                        actions.push(Action::LeaderRetryAlterPartition(b))
                    }
                    Timer::FetchWait => actions.push(Action::FetchWaitExpired(b)),
                    Timer::Lag(follower) => actions.push(Action::LeaderShrinkIsr {
                        leader: b,
                        follower,
                    }),
                    Timer::Request | Timer::AlterPartition | Timer::Checkpoint => {}
                }
            }
            if r.is_leader() && bounds.consumer && self.consumer_offset < r.high_watermark() {
                actions.push(Action::ConsumerRead(b));
            }
        }
        let mut previous = None;
        for e in &self.network {
            if previous == Some(e) {
                continue; // a duplicate: delivering either copy is the same step
            }
            previous = Some(e);
            actions.push(Action::Deliver(e.clone()));
            if self.drops < bounds.drops {
                actions.push(Action::Drop(e.clone()));
            }
            if self.duplicates < bounds.duplicates {
                actions.push(Action::Duplicate(e.clone()));
            }
        }
        for b in self.brokers() {
            let r = self.replica(b);
            if r.is_online() {
                if self.clean_crashes < bounds.clean_crashes {
                    actions.push(Action::CleanShutdown(b));
                }
                if self.unclean_crashes < bounds.unclean_crashes {
                    actions.push(Action::UncleanCrash(b));
                }
                if !self.controller.is_alive(b) {
                    for elects in self.registration_choices(cfg, b, true) {
                        actions.push(Action::Reregister { broker: b, elects });
                    }
                } else if self.session_expiries < bounds.session_expiries {
                    actions.push(Action::ControllerShrinkIsr(b));
                }
                let flushes = cfg.rules.flush == FlushPolicy::Always || bounds.background_flush;
                if flushes && r.log().flushed_offset() < r.log_end_offset() {
                    actions.push(Action::Flush(b));
                }
            } else {
                if self.controller.is_alive(b) {
                    actions.push(Action::ControllerShrinkIsr(b));
                }
                let clean = self.last_stop_clean[b.0 as usize];
                for elects in self.registration_choices(cfg, b, clean) {
                    actions.push(Action::Restart { broker: b, elects });
                }
            }
        }
        for b in electable(cfg, bounds, &self.controller) {
            actions.push(Action::ControllerElectLeader(b));
        }
        if self.controller_failovers < bounds.controller_failovers {
            actions.push(Action::ControllerFailover);
        }
        if let Some(zombie) = &self.zombie {
            for b in zombie.alive_brokers() {
                actions.push(Action::ZombieShrinkIsr(b));
            }
            for b in electable(cfg, bounds, zombie) {
                actions.push(Action::ZombieElectLeader(b));
            }
            let mut previous = None;
            for e in self.network.iter().filter(|e| e.to == Node::Controller) {
                if previous != Some(e) {
                    actions.push(Action::ZombieDeliver(e.clone()));
                }
                previous = Some(e);
            }
        }
        actions
    }

    /// Who the registration of `b` may elect: each candidate, or `None` when it elects nobody.
    fn registration_choices(
        &self,
        cfg: &Config,
        b: BrokerId,
        clean: bool,
    ) -> Vec<Option<BrokerId>> {
        let candidates = self
            .controller
            .registration_candidates(cfg, b, clean, PARTITION);
        if candidates.is_empty() {
            vec![None]
        } else {
            candidates.into_iter().map(|(c, _)| Some(c)).collect()
        }
    }

    /// Takes one step. Actions that are not enabled change nothing.
    pub fn apply(&mut self, cfg: &Config, bounds: &Bounds, action: &Action) {
        let now = Tick(0);
        let effects = match action {
            Action::LeaderWrite(b) => {
                let record = self.written + 1;
                let write = ReplicaInput::Write {
                    id: u64::from(record),
                    records: vec![record],
                    acks: bounds.acks,
                };
                let r = self.replica_mut(*b);
                let before = r.log_end_offset();
                let effects = r.step(cfg, now, write);
                if r.log_end_offset() > before {
                    self.written = record;
                }
                effects
            }
            Action::FollowerFetch(b) => self.timeout(cfg, *b, Timer::Request),
            Action::Deliver(e) => match self.take(e) {
                Some(e) => self.deliver(cfg, e),
                None => Vec::new(),
            },
            Action::Drop(e) => {
                if self.take(e).is_some() {
                    self.drops += 1;
                }
                Vec::new()
            }
            Action::Duplicate(e) => {
                if self.network.contains(e) {
                    self.duplicates += 1;
                    vec![Effect::Send(e.clone())]
                } else {
                    Vec::new()
                }
            }
            Action::LeaderShrinkIsr { leader, follower } => {
                self.timeout(cfg, *leader, Timer::Lag(*follower))
            }
            Action::LeaderRetryAlterPartition(b) => self.timeout(cfg, *b, Timer::AlterPartition),
            Action::FetchWaitExpired(b) => self.timeout(cfg, *b, Timer::FetchWait),
            Action::ControllerShrinkIsr(b) => {
                if self.replica(*b).is_online() {
                    self.session_expiries += 1;
                }
                self.active_step(|c| c.step(cfg, now, ControllerInput::Expire(*b)))
            }
            Action::Reregister { broker, elects } => self.register(cfg, *broker, true, *elects),
            Action::ControllerElectLeader(b) => {
                let elect = ControllerInput::Elect {
                    partition: PARTITION,
                    leader: *b,
                };
                self.active_step(|c| c.step(cfg, now, elect))
            }
            Action::CleanShutdown(b) => {
                self.stop(*b, true);
                let r = self.replica_mut(*b);
                r.log_mut().flush();
                r.step(cfg, now, ReplicaInput::Stop { clean: true })
            }
            Action::UncleanCrash(b) => {
                self.stop(*b, false);
                self.replica_mut(*b)
                    .step(cfg, now, ReplicaInput::Stop { clean: false })
            }
            Action::Restart { broker: b, elects } => {
                let _ = self.replica_mut(*b).step(cfg, now, ReplicaInput::Restart);
                let clean = self.last_stop_clean[b.0 as usize];
                let effects = self.register(cfg, *b, clean, *elects);
                let in_isr = self
                    .controller
                    .partition(PARTITION)
                    .is_some_and(|s| s.isr.contains(b));
                if !in_isr {
                    self.awaiting_rejoin.insert(*b);
                }
                effects
            }
            Action::Flush(b) => {
                let r = self.replica_mut(*b);
                r.log_mut().flush();
                let flushed = r.log().flushed_offset();
                r.step(cfg, now, ReplicaInput::Flushed(flushed))
            }
            Action::ConsumerRead(b) => {
                let read = ReplicaInput::Read {
                    id: 0,
                    from: self.consumer_offset,
                    max_entries: usize::MAX,
                    max_bytes: usize::MAX,
                };
                self.replica_mut(*b).step(cfg, now, read)
            }
            Action::ControllerFailover => {
                let stored = self.stale_store.take();
                let stored = stored.as_ref().unwrap_or(&self.controller);
                let epoch = self.controller.epoch().next();
                let (next, announce) = Controller::take_over(stored, epoch, Tick(0));
                self.zombie = Some(std::mem::replace(&mut self.controller, next));
                self.controller_failovers += 1;
                announce
            }
            Action::ZombieShrinkIsr(b) => {
                self.zombie_step(cfg, |z| z.step(cfg, now, ControllerInput::Expire(*b)))
            }
            Action::ZombieElectLeader(b) => {
                let elect = ControllerInput::Elect {
                    partition: PARTITION,
                    leader: *b,
                };
                self.zombie_step(cfg, |z| z.step(cfg, now, elect))
            }
            Action::ZombieDeliver(e) => match self.take(e) {
                Some(Envelope { from, message, .. }) => {
                    let input = ControllerInput::Message { from, message };
                    self.zombie_step(cfg, |z| z.step(cfg, now, input))
                }
                None => Vec::new(),
            },
        };
        self.route(bounds, effects);
        self.observe(cfg);
    }

    /// A timer of broker `b`'s replica fires.
    fn timeout(&mut self, cfg: &Config, b: BrokerId, timer: Timer) -> Effects<Record> {
        self.replica_mut(b)
            .step(cfg, Tick(0), ReplicaInput::Timeout(timer))
    }

    /// A step of the active controller. It holds the role, so the store takes its write: a
    /// state a zombie left in the store is overwritten once the active controller changes its
    /// own.
    fn active_step(
        &mut self,
        step: impl FnOnce(&mut Controller) -> Effects<Record>,
    ) -> Effects<Record> {
        let before = self.stale_store.is_some().then(|| self.controller.clone());
        let effects = step(&mut self.controller);
        if before.is_some_and(|before| before != self.controller) {
            self.stale_store = None;
        }
        effects
    }

    /// A step of the zombie controller: the store refuses it unless controller fencing is off
    /// ([`Controller::admitted_by_store`]); refused, the zombie learns it lost the role and
    /// stops, and nothing it decided leaves it. Admitted, a change of its state overwrites the
    /// store.
    fn zombie_step(
        &mut self,
        cfg: &Config,
        step: impl FnOnce(&mut Controller) -> Effects<Record>,
    ) -> Effects<Record> {
        let Some(mut zombie) = self.zombie.take() else {
            return Vec::new();
        };
        if !zombie.admitted_by_store(cfg, self.controller.epoch()) {
            return Vec::new();
        }
        let before = zombie.clone();
        let effects = step(&mut zombie);
        if zombie != before {
            let stored = self.stale_store.as_ref().unwrap_or(&self.controller);
            self.stale_store = Some(zombie.written_over(stored));
        }
        self.zombie = Some(zombie);
        effects
    }

    /// Broker `b` registers, electing `elects` if the registration elects.
    fn register(
        &mut self,
        cfg: &Config,
        b: BrokerId,
        clean: bool,
        elects: Option<BrokerId>,
    ) -> Effects<Record> {
        let register = ControllerInput::Register {
            broker: b,
            clean_shutdown: clean,
            elects,
        };
        self.active_step(|c| c.step(cfg, Tick(0), register))
    }

    /// Removes one copy of `e` from the network.
    fn take(&mut self, e: &Envelope<Record>) -> Option<Envelope<Record>> {
        let i = self.network.iter().position(|x| x == e)?;
        Some(self.network.remove(i))
    }

    /// A broker stops: its budget is spent and its connections close, losing what was in flight
    /// to it.
    fn stop(&mut self, b: BrokerId, clean: bool) {
        if clean {
            self.clean_crashes += 1;
        } else {
            self.unclean_crashes += 1;
        }
        self.last_stop_clean[b.0 as usize] = clean;
        self.network.retain(|e| e.to != Node::Broker(b));
    }

    /// Hands a message to its receiver's step.
    fn deliver(&mut self, cfg: &Config, e: Envelope<Record>) -> Effects<Record> {
        let (from, message) = (e.from, e.message);
        match e.to {
            Node::Controller => {
                let input = ControllerInput::Message { from, message };
                self.active_step(|c| c.step(cfg, Tick(0), input))
            }
            Node::Broker(to) => {
                let input = ReplicaInput::Message { from, message };
                self.replica_mut(to).step(cfg, Tick(0), input)
            }
        }
    }

    /// Carries out effects: messages join the network (unless their receiver is down),
    /// acknowledgements of acks=all writes and consumers' reads join the history. Asks for
    /// flushes and checkpoints need nothing here: a flush is its own action, and a checkpoint is
    /// the replica's own record of it.
    fn route(&mut self, bounds: &Bounds, effects: Effects<Record>) {
        for effect in effects {
            match effect {
                Effect::Send(e) => {
                    let down = matches!(e.to, Node::Broker(b) if !self.replica(b).is_online());
                    if !down {
                        let at = self.network.partition_point(|x| x <= &e);
                        self.network.insert(at, e);
                    }
                }
                Effect::Acknowledge {
                    id, base_offset, ..
                } if bounds.acks == Acks::All => {
                    let entry = self
                        .replicas
                        .iter()
                        .filter(|r| r.is_leader())
                        .find_map(|r| r.entry(base_offset).filter(|e| u64::from(e.record) == id));
                    if let Some(entry) = entry {
                        self.history.acknowledged.insert((base_offset, entry));
                    }
                }
                Effect::Read {
                    result: Ok(answer), ..
                } => {
                    let from = self.consumer_offset;
                    for (i, entry) in answer.entries.into_iter().enumerate() {
                        let offset = Offset(from.0 + i as u64);
                        self.history.consumed.insert((offset, entry));
                        self.consumer_offset = offset.next();
                    }
                }
                Effect::Acknowledge { .. }
                | Effect::Read { .. }
                | Effect::FailWrite { .. }
                | Effect::Truncated { .. }
                | Effect::HighWatermark { .. }
                | Effect::Flush { .. }
                | Effect::CheckpointHighWatermark { .. }
                | Effect::MustRegister { .. } => {}
            }
        }
    }

    /// Updates the ghost state after a step, and discards the messages their receiver will
    /// ignore forever ([`Replica::ignores_forever`]): delivering one is a step that changes
    /// nothing, so every pruned state is one the unpruned network reaches too, and the
    /// properties never look at the network.
    fn observe(&mut self, cfg: &Config) {
        let replicas = &self.replicas;
        self.network.retain(|e| match e.to {
            Node::Broker(b) => !replicas[b.0 as usize].ignores_forever(cfg, &e.message),
            Node::Controller => true,
        });
        self.history.observe_commits(&self.replicas);
        if let Some(state) = self.controller.partition(PARTITION) {
            let back: Vec<BrokerId> = self
                .awaiting_rejoin
                .iter()
                .filter(|b| state.isr.contains(b) && self.replica(**b).is_online())
                .copied()
                .collect();
            if !back.is_empty() {
                self.rejoined = true;
            }
            for b in back {
                self.awaiting_rejoin.remove(&b);
            }
        }
    }
}
