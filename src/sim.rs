//! A whole partition's cluster in one value: brokers running the core, the controller, the
//! messages in flight, a producer, a consumer and the history of what they saw.
//!
//! This is the deterministic driver the stateright models and the property tests share. It
//! makes no protocol decision: every [`Action`] is one step of a [`Replica`] or the
//! [`Controller`] (`step`, with a [`ReplicaInput`] or [`ControllerInput`]), and the sim routes
//! the [`Effect`]s it returns. What it adds is what a model needs — a network that delays,
//! reorders, duplicates and drops, crashes with budgets, bounds — and the ghost state the
//! properties read. By default it has no clock: every step happens at tick 0, and a timer fires
//! when its action is taken (any amount of time may pass between two steps). With a clock
//! ([`Bounds::clock`]) time is part of the state instead: it advances a tick at a time
//! ([`Action::Tick`]), the replicas' timers fire when the core's deadlines say, and every message
//! arrives within a tick of being sent, so what a timer decides (a lagging follower leaves the
//! ISR) is checked against what time really allows.
//!
//! It is pure, `Clone + Hash + Eq`, and cheap to clone: replicas, controllers and the history are
//! shared between clones until one of them changes (copy on write), so a model checker can hold
//! millions of clusters and a step copies only what it changes.

use crate::broker::{Effect as SessionEffect, Input as SessionInput, Session as BrokerSession};
use crate::config::{Config, FlushPolicy};
use crate::controller::Input as ControllerInput;
use crate::controller::{Controller, Effect as ControllerEffect, Effects as ControllerEffects};
use crate::invariants::{short_acknowledgement, ClusterView, History, Property, Violation};
use crate::log::{is_gap, Entry, Log, MemLog};
use crate::message::{Effect, Effects, Envelope, Message};
use crate::producers::ProducerBatch;
use crate::replica::{Input as ReplicaInput, Replica, Timer};
use crate::types::{Acks, BrokerId, Node, Offset, PartitionId, Tick};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, VecDeque};
use std::fmt;
use std::sync::Arc;

mod consumers;

pub use consumers::{Consumer, Consumers, Coordinator, GroupAction, Payload, Phase};

/// Records in the simulation are small numbers: the n-th record written is `n`.
pub type Record = u8;

/// Why a broker registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Registering {
    /// It restarted: a new incarnation.
    Restarted,
    /// It runs on, and the controller fenced it (it heard a heartbeat from it, and answered
    /// MustRegister).
    Fenced,
}

/// The first partition a simulated cluster replicates, and with the default bounds the only
/// one.
pub const PARTITION: PartitionId = PartitionId(0);

/// One broker's replica of one partition: what the actions of a replica (its timers, a write
/// to it, a read from it, its flush, its election) name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ReplicaId {
    /// The broker that hosts it.
    pub broker: BrokerId,
    /// The partition it replicates.
    pub partition: PartitionId,
}

impl ReplicaId {
    /// Broker `broker`'s replica of `partition`.
    pub fn new(broker: BrokerId, partition: PartitionId) -> Self {
        ReplicaId { broker, partition }
    }
}

/// A broker's replica of the first partition: all there is with one partition.
impl From<BrokerId> for ReplicaId {
    fn from(broker: BrokerId) -> Self {
        ReplicaId::new(broker, PARTITION)
    }
}

/// `b1` for the first partition's replica (so one partition's traces name brokers alone), `b1
/// of p1` for another's.
impl fmt::Display for ReplicaId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.broker, of(self.partition))
    }
}

/// ` of p1` for a partition other than the first; nothing for the first.
fn of(partition: PartitionId) -> String {
    if partition == PARTITION {
        String::new()
    } else {
        format!(" of {partition}")
    }
}

/// How far a simulation may go: the model checker's bounds, the property tests' limits.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Bounds {
    /// Brokers, each hosting one replica of every partition; broker 0 leads first.
    pub replicas: u32,
    /// Partitions, each replicated on every broker (the checker's `--partitions`). With more
    /// than one, the controller's broker-wide steps (fencing a broker, its registration, its
    /// controlled shutdown) change several partitions at once, in one step of the core.
    #[serde(default = "one")]
    pub partitions: u32,
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
    /// Times a leader's disk may fill up under a write (`DiskFull`).
    pub disk_failures: u8,
    /// Whether the producer is idempotent (the checker's `--idempotent`): each record it
    /// writes is a batch stamped with producer id 0, epoch 0 and the record's sequence number
    /// in its partition, so that leaders admit it by their producer state (rule 14).
    #[serde(default)]
    pub idempotent: bool,
    /// Times the idempotent producer may send a record again (`ProducerRetry`), to whichever
    /// replica leads its partition then, as a producer whose request timed out or whose
    /// answer was lost does (the checker's `--producer-retries`).
    #[serde(default)]
    pub producer_retries: u8,
    /// Consumers in a group that reads the first partition and commits its position to the
    /// group's offsets partition, an extra partition replicated on every broker (the checker's
    /// `--consumers`); none by default. See [`Consumers`].
    #[serde(default)]
    pub consumers: u8,
    /// Offset commits the group's consumers make in all (the checker's `--commits`).
    #[serde(default)]
    pub commits: u8,
    /// Times a consumer may crash (and start again as a new member) or pause past its session
    /// timeout (the coordinator drops it while it runs on), in all (the checker's
    /// `--consumer-failures`).
    #[serde(default)]
    pub consumer_failures: u8,
    /// No rebalance of the group beyond this generation (the checker's `--max-generation`):
    /// a group whose coordinator cannot store its generations (its offsets partition below
    /// min ISR) rebalances again and again, as Kafka's does.
    #[serde(default = "three")]
    pub max_generation: u8,
    /// DeleteRecords requests that move a leader's log start, in all (the checker's
    /// `--deletes`); none by default. Each asks the leader of a data partition to delete below
    /// an offset between its log start and its LEO: one beyond its high watermark is refused
    /// (rule 17) and changes nothing.
    #[serde(default)]
    pub deletes: u8,
    /// Compaction passes that removed a record, in all (the checker's `--compactions`); none by
    /// default. Any running replica of a data partition may clean its log up to its high
    /// watermark (rule 18); records `2k - 1` and `2k` share key `k`, so the second supersedes
    /// the first ([`crate::Compactable`] for the models' records).
    #[serde(default)]
    pub compactions: u8,
    /// Keep the messages their receiver will ignore forever in flight, instead of discarding
    /// them (the checker's `--no-reduction`): their deliveries are then steps that change no
    /// node and send only messages dead in turn (an error answer its sender ignores), which is
    /// what the reduction claims; comparing the verdicts with and without it checks the claim.
    #[serde(default)]
    pub keep_dead: bool,
    /// Check the reduction's claim for every message it discards (the checker's
    /// `--audit-reduction`, on in `isr-check suite`): the receiver, stepped with it there and
    /// then, must stay as it is and send only messages their own receivers discard in turn
    /// ([`dead_message_acts`]). A fault in the core's receipt checks that
    /// [`Replica::ignores_forever`] does not share then fails the run instead of hiding in the
    /// pruned states.
    #[serde(default)]
    pub audit_dead: bool,
    /// Run the replicas' clocks up to this tick (the checker's `--clock`); 0, the default, runs
    /// none. With a clock the replicas' timers fire only when their deadlines come, by
    /// [`Action::Tick`], never by an action of their own; and the network and disks are timely:
    /// a tick waits until every message sent before the previous tick has arrived, so each
    /// arrives within a tick of being sent, and (under `flush=always`) until every log is
    /// flushed. A request or AlterPartition timer then comes due only for an answer that is
    /// late, which in a timely run none is; crashes, drops and session expiries stay actions,
    /// and end the run's timeliness ([`crate::ClusterView::timely`]).
    #[serde(default)]
    pub clock: u8,
    /// Atomic steps (the checker's `--model atomic`): every step runs to quiescence, as the
    /// TLA+ anchor's actions do. What a step sends is delivered within it, in the order sent,
    /// except requests (a follower's Fetch or OffsetForLeaderEpoch, the controller's
    /// LeaderAndIsr), which stay in flight until a step of their own delivers them, answers
    /// and all; under `flush=always` every append is flushed within the step that makes it.
    /// Held fetches are off ([`atomic`]). Crashes still lose what the flush policy leaves
    /// unflushed, but fall between steps, never inside one. Far fewer interleavings than the full model (the
    /// default): what only a late or reordered message shows (a FetchResponse of an old epoch
    /// arriving two elections later) is the full model's alone. See [`Cluster::settle`].
    #[serde(default)]
    pub atomic: bool,
}

/// Serde's default for [`Bounds::partitions`]: bounds written before partitions were one.
fn one() -> u32 {
    1
}

/// Serde's default for [`Bounds::max_generation`].
fn three() -> u8 {
    3
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            replicas: 3,
            partitions: 1,
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
            disk_failures: 0,
            idempotent: false,
            producer_retries: 0,
            consumers: 0,
            commits: 0,
            consumer_failures: 0,
            max_generation: 3,
            deletes: 0,
            compactions: 0,
            keep_dead: false,
            audit_dead: false,
            clock: 0,
            atomic: false,
        }
    }
}

/// The clocked simulations' `replica_lag_max`, in ticks ([`clocked`]). A message arrives
/// within a tick of being sent, so a fetch round takes at most two, and a follower that fetches
/// every round proves itself caught up at most four ticks back: the least lag that keeps it in
/// the ISR (spec/properties.md, FollowersFetchingEveryRoundStayInIsr).
pub const CLOCKED_LAG_MAX: Tick = Tick(4);

/// The clocked simulations' `request_timeout` and `alter_partition_timeout`, in ticks
/// ([`clocked`]): a request sent at `t` arrives by `t + 1` and its answer by `t + 2`, before
/// the tick to `t + 3`, so three is the least timeout no timely answer outlasts (a held Fetch
/// adds its wait to it: [`Replica::timers`]).
pub const CLOCKED_TIMEOUT: Tick = Tick(3);

/// The timings of a clocked simulation ([`Bounds::clock`]), over `cfg`'s: a follower may lag
/// [`CLOCKED_LAG_MAX`] ticks; a leader with fetch waits holds a Fetch that finds nothing new
/// for two ticks (one when only its high watermark is news); requests and AlterPartitions time
/// out after [`CLOCKED_TIMEOUT`], as soon as no timely answer can still come; and an error
/// answer does not bring a follower's next request forward (`retry_backoff` is a whole request
/// wait). That last keeps the dead-message reduction sound under a clock: a follower acts on an
/// error answer only by retrying sooner, which with it changes nothing, so such an answer stays
/// inert ([`Replica::ignores_forever`]). Timely runs get no error answers (no epoch changes
/// without a fault). Each timing is the tightest a timely run allows, so that a deadline a tick
/// early fails a property: FollowersFetchingEveryRoundStayInIsr for the lag,
/// TimelyRequestsAreNotRetried for the timeouts.
pub fn clocked(cfg: &mut Config) {
    cfg.replica_lag_max = CLOCKED_LAG_MAX;
    if cfg.fetch_max_wait.0 > 0 {
        cfg.fetch_max_wait = Tick(2);
        cfg.high_watermark_wait = Tick(1);
    }
    cfg.request_timeout = CLOCKED_TIMEOUT;
    cfg.alter_partition_timeout = CLOCKED_TIMEOUT;
    cfg.retry_backoff = Tick(cfg.request_timeout.0 + cfg.fetch_max_wait.0);
}

/// The settings of the atomic-step model ([`Bounds::atomic`]) over `cfg`'s: a leader answers
/// every Fetch in the step that receives it (no fetch waits), as the anchor's fetch does.
pub fn atomic(cfg: &mut Config) {
    cfg.fetch_max_wait = Tick(0);
    cfg.high_watermark_wait = Tick(0);
}

/// Whether an atomic step ([`Bounds::atomic`]) leaves `message` in flight for a step of its
/// own: a request (a follower's Fetch or OffsetForLeaderEpoch, the controller's LeaderAndIsr),
/// where the protocol's concurrency lives. Answers and AlterPartitions are acted on within the
/// step that sends them.
pub fn waits_for_its_own_step<R>(message: &Message<R>) -> bool {
    matches!(
        message,
        Message::Fetch(_) | Message::OffsetForLeaderEpoch(_) | Message::LeaderAndIsr(_)
    )
}

/// The most deliveries one atomic step may cascade into ([`Cluster::settle`]): far more than
/// any bounded run sends, so reaching it means messages answer each other forever.
const SETTLE_LIMIT: usize = 10_000;

/// One step of a simulation. The names are the TLA+ anchor's where it has one.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Action {
    /// The producer writes the next record to a replica that believes it leads.
    LeaderWrite(ReplicaId),
    /// The producer writes the next record to a broker that believes it leads, whose disk is
    /// full: its log takes nothing, and the broker stops, as a broker whose log directory
    /// failed does (its page cache survives: nothing it held is lost).
    DiskFull(ReplicaId),
    /// A follower's request timer fires and it sends its request (OffsetForLeaderEpoch or
    /// Fetch) to its leader again: taken only when neither the request nor its answer is in
    /// flight (it was lost, or answered with an error), as a timeout would find it.
    FollowerFetch(ReplicaId),
    /// A message in flight arrives.
    Deliver(Envelope<Record>),
    /// A message in flight is lost.
    Drop(Envelope<Record>),
    /// A message in flight is copied: it will arrive twice.
    Duplicate(Envelope<Record>),
    /// A leader's lag timer for a follower fires and it proposes to drop it from the ISR (any
    /// time may have passed).
    LeaderShrinkIsr {
        /// The leader whose timer fires.
        leader: ReplicaId,
        /// The follower it proposes to drop.
        follower: BrokerId,
    },
    /// The controller fences a broker whose session expired — it is down, or cut off — and
    /// shrinks it out of the ISR.
    ControllerShrinkIsr(BrokerId),
    /// A running broker that the controller fenced reaches it again and registers anew. Where
    /// that elects a leader, `elects` names the one chosen among each partition's candidates.
    Reregister {
        /// The fenced broker.
        broker: BrokerId,
        /// The leader its registration elects in each partition where it elects one.
        elects: Vec<ReplicaId>,
    },
    /// The controller elects this candidate leader of its leaderless partition: any candidate
    /// may win ([`Controller::election_candidates`]), as in the TLA+ anchor.
    ControllerElectLeader(ReplicaId),
    /// A broker flushes its log and stops.
    CleanShutdown(BrokerId),
    /// A broker dies, losing what it had not flushed.
    UncleanCrash(BrokerId),
    /// A stopped broker starts again and registers with the controller. Where that elects a
    /// leader, `elects` names the one chosen among each partition's candidates.
    Restart {
        /// The stopped broker.
        broker: BrokerId,
        /// The leader its registration elects in each partition where it elects one.
        elects: Vec<ReplicaId>,
    },
    /// A broker's log becomes durable (its flush completes: under `flush=always` the one the
    /// broker asked for, under page cache the OS's).
    Flush(ReplicaId),
    /// A leader's AlterPartition timer fires and it sends its pending proposal again: taken only
    /// when neither the request nor its answer is in flight.
    LeaderRetryAlterPartition(ReplicaId),
    /// A leader's held fetches waited long enough and are answered (only with a
    /// `fetch_max_wait`).
    FetchWaitExpired(ReplicaId),
    /// The consumer reads the committed records of the replica's partition it has not read yet,
    /// from the replica, a leader.
    ConsumerRead(ReplicaId),
    /// The active controller loses the role without noticing (a pause, a partition from the
    /// store): a new controller is elected through the store, takes over the state the store
    /// holds in the next controller epoch, and the old one runs on as a zombie.
    ControllerFailover,
    /// The zombie controller fences a broker: it hears no heartbeats, since brokers now talk
    /// to its successor.
    ZombieShrinkIsr(BrokerId),
    /// The zombie controller elects this candidate leader of what it believes is a leaderless
    /// partition.
    ZombieElectLeader(ReplicaId),
    /// A message in flight to the controller reaches the zombie instead.
    ZombieDeliver(Envelope<Record>),
    /// The idempotent producer sends `record` again, with its first attempt's stamp, to the
    /// replica that believes it leads the record's partition.
    ProducerRetry {
        /// The replica it goes to.
        leader: ReplicaId,
        /// The record, one the producer sent to that partition before.
        record: Record,
    },
    /// A step of the consumer group ([`Bounds::consumers`]).
    Group(GroupAction),
    /// A client asks a replica that believes it leads to delete the records below `before`
    /// (DeleteRecords, KIP-107; [`Bounds::deletes`]).
    DeleteRecords {
        /// The replica asked.
        leader: ReplicaId,
        /// The new log start offset asked for.
        before: Offset,
    },
    /// A running replica of a data partition runs its log cleaner ([`Bounds::compactions`]):
    /// records a later record of the same key supersedes become gaps, up to its high
    /// watermark (rule 18).
    Compact(ReplicaId),
    /// The clock advances a tick ([`Bounds::clock`]) and every running replica whose next
    /// timeout has come is ticked: its due timers fire. Taken only once every message sent
    /// before the previous tick has arrived and, under `flush=always`, every log is flushed.
    Tick,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::LeaderWrite(b) => write!(f, "LeaderWrite({b})"),
            Action::DiskFull(b) => write!(f, "DiskFull({b})"),
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
            Action::DeleteRecords { leader, before } => {
                write!(f, "DeleteRecords({leader}, before {before})")
            }
            Action::Compact(r) => write!(f, "Compact({r})"),
            Action::ControllerFailover => write!(f, "ControllerFailover"),
            Action::ZombieShrinkIsr(b) => write!(f, "ZombieShrinkIsr({b})"),
            Action::ZombieElectLeader(b) => write!(f, "ZombieElectLeader({b})"),
            Action::ZombieDeliver(e) => write!(f, "ZombieDeliver({})", describe(e)),
            Action::ProducerRetry { leader, record } => {
                write!(f, "ProducerRetry(record {record} to {leader})")
            }
            Action::Group(a) => write!(f, "{a}"),
            Action::Tick => write!(f, "Tick"),
        }
    }
}

impl Action {
    /// The message in flight the action names.
    pub fn message(&self) -> Option<&Envelope<Record>> {
        match self {
            Action::Deliver(e)
            | Action::Drop(e)
            | Action::Duplicate(e)
            | Action::ZombieDeliver(e) => Some(e),
            _ => None,
        }
    }

    /// Whether the action takes its message off the network (every one but `Duplicate`).
    pub fn takes_message(&self) -> bool {
        matches!(
            self,
            Action::Deliver(_) | Action::Drop(_) | Action::ZombieDeliver(_)
        )
    }
}

/// The candidates `controller` may elect now, partition by partition: those of each partition
/// that is leaderless and below the leader epoch bound.
fn electable(cfg: &Config, bounds: &Bounds, controller: &Controller) -> Vec<ReplicaId> {
    let mut candidates = Vec::new();
    for p in (0..bounds.partitions).map(PartitionId) {
        let state = controller.partition(p);
        if state.is_some_and(|s| s.leader.is_none() && s.leader_epoch.0 < bounds.max_leader_epoch) {
            let elected = controller.election_candidates(cfg, p).into_iter();
            candidates.extend(elected.map(|(b, _)| ReplicaId::new(b, p)));
        }
    }
    candidates
}

/// `, elects b1` when a registration elects b1 (`, elects b1, b2 of p1` in two partitions).
fn electing(elects: &[ReplicaId]) -> String {
    elects.iter().map(|r| format!(", elects {r}")).collect()
}

/// How a record reads in states and traces: its number, or, for a gap compaction left, the
/// number it held in brackets (`(1)`).
pub fn record_label(record: Record) -> String {
    if is_gap::<MemLog<Record>>(&record) {
        format!("({})", record & !crate::log::GAP_BIT)
    } else {
        record.to_string()
    }
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
                    .map(|en| format!("{}:{}", record_label(en.record), en.epoch))
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
    // The partition, when it is not the first: `b0→b1: p1 Fetch …`.
    let partition = match e.message.partition() {
        Some(p) if p != PARTITION => format!("{p} "),
        _ => String::new(),
    };
    format!("{}→{}: {partition}{body}", e.from, e.to)
}

/// `{b0,b1}` for a set of brokers.
pub fn set(s: &BTreeSet<BrokerId>) -> String {
    let items: Vec<String> = s.iter().map(|b| b.to_string()).collect();
    format!("{{{}}}", items.join(","))
}

/// The simulated cluster.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Cluster {
    /// Every replica: broker `b`'s of partition `p` at index `p × brokers + b` (with one
    /// partition, broker `b`'s at index `b`). A broker's replicas run and stop together.
    pub replicas: Vec<Arc<Replica<MemLog<Record>>>>,
    /// The active controller: the one that holds the controller role.
    pub controller: Arc<Controller>,
    /// The controller that lost the role and has not noticed: it acts on its in-memory state
    /// until the store refuses it (rule 11). At most one: a second failover lets the older
    /// zombie go.
    pub zombie: Option<Arc<Controller>>,
    /// What the store holds when it is not the active controller's state: only a zombie's
    /// unfenced write (`controller-fencing=off`) can make it differ, until the active
    /// controller's next write. The next controller takes over from it.
    pub stale_store: Option<Arc<Controller>>,
    /// The flush policy of the replicas (the same in every state), for the invariants.
    pub flush: FlushPolicy,
    /// Messages in flight: a multiset, kept sorted so equal networks are equal values.
    pub network: Vec<Envelope<Record>>,
    /// Ghost, per partition: what was committed, acknowledged and read, for the properties.
    pub history: Vec<Arc<History<Record>>>,
    /// Records written so far, to every partition (the next one is `written + 1`).
    pub written: u8,
    /// Ghost, per partition: the records the idempotent producer sent there, in order (a
    /// record's place is its sequence number). Empty unless [`Bounds::idempotent`].
    #[serde(default)]
    pub sent: Vec<Vec<Record>>,
    /// Producer retries so far, against [`Bounds::producer_retries`].
    #[serde(default)]
    pub producer_retries: u8,
    /// The consumer's position in each partition.
    pub consumer_offset: Vec<Offset>,
    /// Whether each broker's last stop was clean.
    pub last_stop_clean: Vec<bool>,
    /// Clean shutdowns so far, against [`Bounds::clean_crashes`].
    pub clean_crashes: u8,
    /// Unclean crashes so far, against [`Bounds::unclean_crashes`].
    pub unclean_crashes: u8,
    /// Messages lost so far, against [`Bounds::drops`].
    pub drops: u8,
    /// Messages duplicated so far, against [`Bounds::duplicates`].
    pub duplicates: u8,
    /// Running brokers fenced so far, against [`Bounds::session_expiries`].
    pub session_expiries: u8,
    /// Controller failovers so far, against [`Bounds::controller_failovers`].
    pub controller_failovers: u8,
    /// Full disks so far, against [`Bounds::disk_failures`].
    pub disk_failures: u8,
    /// Brokers that restarted and have not been back in every partition's ISR since.
    pub awaiting_rejoin: BTreeSet<BrokerId>,
    /// Ghost: a restarted broker has rejoined the ISR of every partition.
    pub rejoined: bool,
    /// Ghost: the first follower seen to act on an OffsetForLeaderEpoch answer without
    /// progress ([`crate::invariants::round_progressed`]). `None` in every run of a correct
    /// core, so it adds no state.
    pub stalled_reconciliation: Option<BrokerId>,
    /// The consumer group, its coordinators and its ghost state, when the bounds have
    /// consumers; its offsets partition is the last of [`Cluster::replicas`].
    #[serde(default)]
    pub consumers: Option<Arc<Consumers>>,
    /// DeleteRecords that moved a log start so far, against [`Bounds::deletes`].
    #[serde(default)]
    pub deletes: u8,
    /// Compaction passes that removed a record so far, against [`Bounds::compactions`].
    #[serde(default)]
    pub compactions: u8,
    /// Whether the clock runs ([`Bounds::clock`]), the same in every state.
    #[serde(default)]
    pub clocked: bool,
    /// The time every step happens at: tick 0 for good without a clock.
    #[serde(default)]
    pub now: Tick,
    /// With a clock, the messages sent since the last tick, as a sorted multiset: any other
    /// message in flight was sent before it and must arrive before the next. Some may have been
    /// discarded as dead since, but a copy still in flight could not be: its receiver would
    /// ignore it as well. Of two copies one of which arrives, the fresh one is struck off, which
    /// only makes the other due sooner.
    #[serde(default)]
    pub fresh: Vec<Envelope<Record>>,
    /// Ghost: the first broker whose request or AlterPartition timer came due while the run
    /// was timely, so that it sent again what every message's timeliness should have answered
    /// ([`crate::invariants::timely_requests_are_not_retried`]). `None` in every run of a
    /// correct core, so it adds no state.
    #[serde(default)]
    pub timely_retry: Option<BrokerId>,
}

impl Cluster {
    /// A running cluster: every broker registered, each partition created with every broker
    /// assigned and broker 0 leading in epoch 1, and every broker told so.
    pub fn new(cfg: &Config, bounds: &Bounds) -> Cluster {
        let offsets = u32::from(bounds.consumers > 0);
        let (n, partitions) = (bounds.replicas, bounds.partitions.max(1) + offsets);
        let mut cluster = Cluster {
            replicas: (0..partitions)
                .flat_map(|p| (0..n).map(move |b| (BrokerId(b), PartitionId(p))))
                .map(|(b, p)| Arc::new(Replica::new(b, p, MemLog::new())))
                .collect(),
            controller: Arc::new(Controller::new()),
            flush: cfg.rules.flush,
            zombie: None,
            stale_store: None,
            network: Vec::new(),
            history: vec![Arc::default(); partitions as usize],
            written: 0,
            sent: vec![Vec::new(); partitions as usize],
            producer_retries: 0,
            consumer_offset: vec![Offset(0); partitions as usize],
            last_stop_clean: vec![true; n as usize],
            clean_crashes: 0,
            unclean_crashes: 0,
            drops: 0,
            duplicates: 0,
            session_expiries: 0,
            controller_failovers: 0,
            disk_failures: 0,
            awaiting_rejoin: BTreeSet::new(),
            rejoined: false,
            stalled_reconciliation: None,
            consumers: (bounds.consumers > 0)
                .then(|| Arc::new(Consumers::new(bounds.consumers, n as usize))),
            deletes: 0,
            compactions: 0,
            clocked: bounds.clock > 0,
            now: Tick(0),
            fresh: Vec::new(),
            timely_retry: None,
        };
        let controller = Arc::make_mut(&mut cluster.controller);
        for b in 0..n {
            let register = ControllerInput::Register {
                broker: BrokerId(b),
                clean_shutdown: true,
                elects: Vec::new(),
            };
            let _: ControllerEffects<Record> = controller.step(cfg, Tick(0), register);
        }
        let mut announce = Vec::new();
        for p in 0..partitions {
            let assigned = (0..n).map(BrokerId).collect();
            announce.extend(
                controller
                    .create_partition(PartitionId(p), assigned, cfg.min_insync_replicas)
                    .expect("a fresh cluster has every broker alive"),
            );
        }
        // The initial LeaderAndIsr arrive at once (the followers' first requests wait in the
        // network): the interesting interleavings come later.
        for effect in announce {
            if let ControllerEffect::Send(envelope) = effect {
                let effects = cluster.deliver(cfg, &envelope);
                let sent = cluster.route(bounds, effects, None);
                carry(
                    cfg,
                    bounds,
                    &cluster.replicas,
                    &mut cluster.network,
                    None,
                    sent,
                    |_| true,
                );
            }
        }
        cluster
    }

    /// Every controller state in the cluster: the active controller's, the zombie's and a stale
    /// store's. Bounds on partition changes apply to each.
    pub fn controllers(&self) -> impl Iterator<Item = &Controller> {
        std::iter::once(&*self.controller)
            .chain(self.zombie.as_deref())
            .chain(self.stale_store.as_deref())
    }

    /// A snapshot of partition `p` for the invariants.
    pub fn view(&self, p: PartitionId) -> ClusterView<'_, MemLog<Record>> {
        ClusterView {
            partition: p,
            controller: &self.controller,
            replicas: self.replicas_of(p).map(|r| &**r).collect(),
            history: &self.history[p.0 as usize],
            flush: self.flush,
            stalled_reconciliation: self.stalled_reconciliation,
            timely: self.timely(),
            timely_retry: self.timely_retry,
        }
    }

    /// Whether the run so far was timely ([`ClusterView::timely`]): the clock runs, and no broker
    /// stopped, was fenced or lost its disk, no controller failed over, no message was lost,
    /// and no DeleteRecords moved a log start (a follower whose position it passed spends a
    /// round starting again from the new log start).
    pub fn timely(&self) -> bool {
        self.clocked
            && self.deletes == 0
            && self.clean_crashes == 0
            && self.unclean_crashes == 0
            && self.session_expiries == 0
            && self.disk_failures == 0
            && self.controller_failovers == 0
            && self.drops == 0
    }

    /// Checks one property, in every partition.
    pub fn check(&self, property: Property) -> Result<(), Violation> {
        if property.is_group() {
            return self.check_group(property);
        }
        self.partitions()
            .try_for_each(|p| property.check(&self.view(p)))
    }

    /// How many brokers the cluster has.
    pub fn broker_count(&self) -> usize {
        self.last_stop_clean.len()
    }

    /// The partitions, in order.
    pub fn partitions(&self) -> impl Iterator<Item = PartitionId> {
        (0..self.history.len() as u32).map(PartitionId)
    }

    /// The replicas of partition `p` that believe they lead and answered in this step: the
    /// one on `source` when the step is one broker's.
    fn acting_leaders(
        &self,
        p: PartitionId,
        source: Option<BrokerId>,
    ) -> impl Iterator<Item = &Arc<Replica<MemLog<Record>>>> {
        self.replicas_of(p)
            .filter(move |r| r.is_leader() && source.is_none_or(|s| s == r.id()))
    }

    /// Every broker's replica of partition `p`, in broker order.
    pub fn replicas_of(
        &self,
        p: PartitionId,
    ) -> impl Iterator<Item = &Arc<Replica<MemLog<Record>>>> {
        let n = self.broker_count();
        self.replicas[p.0 as usize * n..][..n].iter()
    }

    /// Broker `b`'s replicas, in partition order.
    pub fn replicas_on(&self, b: BrokerId) -> impl Iterator<Item = &Arc<Replica<MemLog<Record>>>> {
        self.replicas
            .iter()
            .skip(b.0 as usize)
            .step_by(self.broker_count())
    }

    /// Every replica, by [`ReplicaId`], in the order of [`Cluster::replicas`].
    fn replica_ids(&self) -> impl Iterator<Item = ReplicaId> + '_ {
        self.partitions()
            .flat_map(|p| self.brokers().map(move |b| ReplicaId::new(b, p)))
    }

    pub(crate) fn replica(&self, id: ReplicaId) -> &Replica<MemLog<Record>> {
        &self.replicas[slot(self.broker_count(), id)]
    }

    fn replica_mut(&mut self, id: ReplicaId) -> &mut Replica<MemLog<Record>> {
        let at = slot(self.broker_count(), id);
        Arc::make_mut(&mut self.replicas[at])
    }

    /// Whether broker `b` runs (its replicas run and stop together).
    fn is_online(&self, b: BrokerId) -> bool {
        self.replica(b.into()).is_online()
    }

    fn brokers(&self) -> impl Iterator<Item = BrokerId> {
        (0..self.broker_count() as u32).map(BrokerId)
    }

    /// Whether replica `id` has a request to its leader waiting for its log to be durable, or a
    /// Fetch parked at a running leader (which answers it within `fetch_max_wait`, before the
    /// request timer, `request_timeout`, fires). With one in flight too ([`request_of`]), its
    /// request timer cannot fire: [`Menu::choices`] checks the network.
    fn request_held(&self, id: ReplicaId) -> bool {
        let parked = self.replicas_of(id.partition).any(|r| {
            r.leader_state()
                .is_some_and(|l| l.parked.contains_key(&id.broker))
        });
        parked || self.replica(id).holds_request()
    }

    /// The enabled actions that do not depend on the messages in flight, and where those that
    /// do go: see [`Menu`].
    pub fn menu(&self, cfg: &Config, bounds: &Bounds) -> Menu {
        let mut listed = Vec::new();
        let mut replicas = Vec::new();
        let offsets = self.offsets_partition();
        for id in self.replica_ids() {
            let r = self.replica(id);
            // The producer and the lone consumer use the data partitions, not the group's.
            let data = Some(id.partition) != offsets;
            if r.is_leader() && data && self.written < bounds.records {
                listed.push(Action::LeaderWrite(id));
                if self.disk_failures < bounds.disk_failures {
                    listed.push(Action::DiskFull(id));
                }
            }
            if r.is_leader() && self.producer_retries < bounds.producer_retries {
                for &record in &self.sent[id.partition.0 as usize] {
                    listed.push(Action::ProducerRetry { leader: id, record });
                }
            }
            let fetch_at = listed.len();
            let (mut fetches, mut resends) = (false, false);
            // The replica's running timers, each an action whenever it may fire. Retries fire
            // only once what they retry is neither in flight nor answered in flight (a timeout
            // finds it lost): those go in by the network, at `fetch_at`. The checkpoint needs no
            // action: with the model's interval of zero the replica takes it with every flush.
            // With a clock they fire by the tick, when due.
            for (timer, _) in r.timers(cfg).into_iter().filter(|_| !self.clocked) {
                match timer {
                    Timer::Request => fetches = !self.request_held(id),
                    Timer::AlterPartition => resends = true,
                    Timer::FetchWait => listed.push(Action::FetchWaitExpired(id)),
                    Timer::Lag(follower) => listed.push(Action::LeaderShrinkIsr {
                        leader: id,
                        follower,
                    }),
                    Timer::Checkpoint => {}
                }
            }
            let unread = self.consumer_offset[id.partition.0 as usize] < r.high_watermark();
            if r.is_leader() && data && bounds.consumer && unread {
                listed.push(Action::ConsumerRead(id));
            }
            if r.is_online() && data && self.compactions < bounds.compactions {
                listed.push(Action::Compact(id));
            }
            if r.is_leader() && data && self.deletes < bounds.deletes {
                let (start, end) = (r.log().log_start_offset(), r.log_end_offset());
                for before in start.0 + 1..=end.0 {
                    listed.push(Action::DeleteRecords {
                        leader: id,
                        before: Offset(before),
                    });
                }
            }
            replicas.push(ReplicaMenu {
                id,
                fetch_at,
                fetches,
                resends,
                end: listed.len(),
            });
        }
        let later = listed.len();
        for b in self.brokers() {
            if self.is_online(b) {
                if self.clean_crashes < bounds.clean_crashes {
                    listed.push(Action::CleanShutdown(b));
                }
                if self.unclean_crashes < bounds.unclean_crashes {
                    listed.push(Action::UncleanCrash(b));
                }
                if !self.controller.is_alive(b) {
                    for elects in self.registration_choices(cfg, b, Registering::Fenced) {
                        listed.push(Action::Reregister { broker: b, elects });
                    }
                } else if self.session_expiries < bounds.session_expiries {
                    listed.push(Action::ControllerShrinkIsr(b));
                }
                let flushes = cfg.rules.flush == FlushPolicy::Always || bounds.background_flush;
                for p in self.partitions() {
                    let r = self.replica(ReplicaId::new(b, p));
                    if flushes && r.log().flushed_offset() < r.log_end_offset() {
                        listed.push(Action::Flush(ReplicaId::new(b, p)));
                    }
                }
            } else {
                if self.controller.is_alive(b) {
                    listed.push(Action::ControllerShrinkIsr(b));
                }
                for elects in self.registration_choices(cfg, b, Registering::Restarted) {
                    listed.push(Action::Restart { broker: b, elects });
                }
            }
        }
        for id in electable(cfg, bounds, &self.controller) {
            listed.push(Action::ControllerElectLeader(id));
        }
        if self.controller_failovers < bounds.controller_failovers {
            listed.push(Action::ControllerFailover);
        }
        if let Some(zombie) = &self.zombie {
            for b in zombie.alive_brokers() {
                listed.push(Action::ZombieShrinkIsr(b));
            }
            for id in electable(cfg, bounds, zombie) {
                listed.push(Action::ZombieElectLeader(id));
            }
        }
        listed.extend(
            self.group_actions(cfg, bounds)
                .into_iter()
                .map(Action::Group),
        );
        // A timely disk too: under `flush=always` every flush asked for is done before time
        // moves on (a follower's next Fetch waits for its flush).
        let flushed = cfg.rules.flush != FlushPolicy::Always || self.first_unflushed().is_none();
        let ticks = self.clocked && self.now.0 < u64::from(bounds.clock) && flushed;
        Menu {
            listed,
            replicas,
            drops: self.drops < bounds.drops,
            duplicates: self.duplicates < bounds.duplicates,
            later,
            zombie: self.zombie.is_some(),
            tick: ticks.then(|| self.fresh.clone()),
        }
    }

    /// Every action enabled in this state within `bounds`, in a deterministic order.
    pub fn actions(&self, cfg: &Config, bounds: &Bounds) -> Vec<Action> {
        let menu = self.menu(cfg, bounds);
        menu.choices(&self.network)
            .into_iter()
            .map(|c| c.action(&menu, &self.network))
            .collect()
    }

    /// Who the registration of `b` may elect: every combination of one candidate for each
    /// partition it leaves leaderless (one empty choice when it elects nowhere); nothing if
    /// `b`'s session does not register it. Each partition's choice is its own, so no choice
    /// falls back on the preferred candidate, which would make the model depend on the order
    /// of assignments (which symmetry reduction forgets).
    fn registration_choices(
        &self,
        cfg: &Config,
        b: BrokerId,
        why: Registering,
    ) -> Vec<Vec<ReplicaId>> {
        let Some(clean) = self.registration(cfg, b, why) else {
            return Vec::new();
        };
        let mut choices = vec![Vec::new()];
        for p in self.partitions() {
            let candidates = self.controller.registration_candidates(cfg, b, clean, p);
            if candidates.is_empty() {
                continue;
            }
            choices = choices
                .into_iter()
                .flat_map(|chosen| {
                    candidates.iter().map(move |&(c, _)| {
                        let mut chosen = chosen.clone();
                        chosen.push(ReplicaId::new(c, p));
                        chosen
                    })
                })
                .collect();
        }
        choices
    }
    /// Whether `b`'s session registers it, and if so whether its registration says its last
    /// stop was clean: the core's [`BrokerSession`] decides. Registrations here are atomic
    /// (sent, taken and answered in one step) and heartbeats are not modelled (a session's
    /// expiry is an action), so a broker's session between two steps is always one this builds
    /// from the cluster: a restarted broker's, opening; a running one's, registered and
    /// answered, told MustRegister. Keeping it in the state would add nothing to it.
    fn registration(&self, cfg: &Config, b: BrokerId, why: Registering) -> Option<bool> {
        let mut session = BrokerSession::new(b, self.last_stop_clean[b.0 as usize]);
        let mut sent = session.step(cfg, Tick(0), SessionInput::SessionOpened);
        if why == Registering::Fenced {
            let _: Vec<SessionEffect<Record>> =
                session.step(cfg, Tick(0), SessionInput::RegistrationAnswered);
            sent = session.step(cfg, Tick(0), SessionInput::MustRegister);
        }
        sent.into_iter()
            .find_map(|e: SessionEffect<Record>| match e {
                SessionEffect::Send(Envelope {
                    message: Message::BrokerRegistration { clean_shutdown, .. },
                    ..
                }) => Some(clean_shutdown),
                _ => None,
            })
    }

    /// Takes one step. Actions that are not enabled change nothing.
    pub fn apply(&mut self, cfg: &Config, bounds: &Bounds, action: &Action) {
        let traffic = match action.message() {
            Some(e) if !self.network.contains(e) => {
                self.observe();
                Traffic::default()
            }
            Some(e) => {
                if action.takes_message() {
                    if let Some(at) = self.network.iter().position(|x| x == e) {
                        self.network.remove(at);
                    }
                }
                self.act(cfg, bounds, action)
            }
            None => self.act(cfg, bounds, action),
        };
        self.send(cfg, bounds, traffic);
    }

    /// Puts what a step did to the network ([`Traffic`]) onto [`Cluster::network`], by
    /// [`carry`], and keeps the network sorted.
    fn send(&mut self, cfg: &Config, bounds: &Bounds, traffic: Traffic) {
        carry(
            cfg,
            bounds,
            &self.replicas,
            &mut self.network,
            traffic.closed,
            traffic.sent,
            |_| true,
        );
        self.network.sort_unstable();
    }

    /// What `action` does to everything but the network: the nodes, the budgets and the ghost
    /// state. It neither reads nor changes `network`: the message an action names must be in
    /// flight, and [`Action::takes_message`] says whether the caller takes it off first; what
    /// the step does to the network comes back as [`Traffic`], for [`carry`]. [`Cluster::apply`]
    /// is the two together; a search engine runs this part once for all the states that differ
    /// only in their messages.
    pub fn act(&mut self, cfg: &Config, bounds: &Bounds, action: &Action) -> Traffic {
        let traffic = self.act_once(cfg, bounds, action);
        if bounds.atomic {
            self.settle(cfg, bounds, traffic)
        } else {
            traffic
        }
    }

    /// The rest of an atomic step ([`Bounds::atomic`]) after `traffic`: the messages it sent
    /// are delivered, first sent first, and what they send in turn, until only requests are
    /// left (a follower's Fetch or OffsetForLeaderEpoch, the controller's LeaderAndIsr), which
    /// go on the network; under `flush=always` every running
    /// replica's log is flushed before each delivery, so the next message sees what an append
    /// made durable. A message to a broker that is down is lost, as on the network. The
    /// controller's messages are delivered to the active controller: a deposed one hears from
    /// brokers only in the full model.
    fn settle(&mut self, cfg: &Config, bounds: &Bounds, traffic: Traffic) -> Traffic {
        let brokers = self.broker_count();
        let mut pending: VecDeque<_> = traffic.sent.into();
        let mut kept = Vec::new();
        let mut deliveries = 0;
        loop {
            if cfg.rules.flush == FlushPolicy::Always {
                if let Some(id) = self.first_unflushed() {
                    pending.extend(self.act_once(cfg, bounds, &Action::Flush(id)).sent);
                    continue;
                }
            }
            let Some(e) = pending.pop_front() else { break };
            if waits_for_its_own_step(&e.message) {
                kept.push(e);
                continue;
            }
            if receiver_slot(brokers, &e).is_some_and(|at| !self.replicas[at].is_online()) {
                continue;
            }
            deliveries += 1;
            assert!(
                deliveries < SETTLE_LIMIT,
                "an atomic step does not settle: {} is its {deliveries}th delivery",
                describe(&e)
            );
            pending.extend(self.act_once(cfg, bounds, &Action::Deliver(e)).sent);
        }
        Traffic {
            closed: traffic.closed,
            sent: kept,
        }
    }

    /// The atomic-step state ([`Bounds::atomic`]) that this full-model state stands for, the
    /// projection `isr-check refines` checks: every message in flight that an atomic step
    /// would not leave waiting (an answer, an AlterPartition) is delivered, in the network's
    /// order, by the rest of an atomic step ([`Cluster::settle`]), which also flushes every
    /// log under `flush=always`. A state with only requests in flight and, under
    /// `flush=always`, every log flushed is its own projection.
    pub fn settled(&self, cfg: &Config, bounds: &Bounds) -> Cluster {
        let mut c = self.clone();
        let (waiting, due): (Vec<_>, Vec<_>) = std::mem::take(&mut c.network)
            .into_iter()
            .partition(|e| waits_for_its_own_step(&e.message));
        c.network = waiting;
        let traffic = c.settle(
            cfg,
            bounds,
            Traffic {
                closed: None,
                sent: due,
            },
        );
        c.send(cfg, bounds, traffic);
        c
    }

    /// The first running replica, in the order of [`Cluster::replicas`], whose log holds
    /// entries not yet durable.
    fn first_unflushed(&self) -> Option<ReplicaId> {
        self.replica_ids().find(|&id| {
            let r = self.replica(id);
            r.is_online() && r.log().flushed_offset() < r.log_end_offset()
        })
    }

    /// One action alone ([`Cluster::act`] without an atomic step's cascade).
    fn act_once(&mut self, cfg: &Config, bounds: &Bounds, action: &Action) -> Traffic {
        if let Some(e) = action.message().filter(|_| action.takes_message()) {
            if let Some(at) = self.fresh.iter().position(|x| x == e) {
                self.fresh.remove(at);
            }
        }
        let now = self.now;
        let mut closed = None;
        let effects = match action {
            Action::LeaderWrite(id) => {
                let record = self.written + 1;
                let write = self.write_of(bounds, id.partition, record);
                let r = self.replica_mut(*id);
                let before = r.log_end_offset();
                let effects = r.step(cfg, now, write);
                if r.log_end_offset() > before {
                    self.written = record;
                    if bounds.idempotent {
                        self.sent[id.partition.0 as usize].push(record);
                    }
                }
                effects
            }
            Action::ProducerRetry { leader, record } => {
                self.producer_retries += 1;
                let write = self.write_of(bounds, leader.partition, *record);
                self.replica_mut(*leader).step(cfg, now, write)
            }
            Action::DiskFull(id) => {
                self.disk_failures += 1;
                let record = self.written + 1;
                let write = self.write_of(bounds, id.partition, record);
                let producer = self.stamp(bounds, id.partition, record);
                let r = self.replica_mut(*id);
                let (base, epoch) = (r.log_end_offset(), r.leader_epoch());
                r.log_mut().set_full(true);
                let mut effects = r.step(cfg, now, write);
                r.log_mut().set_full(false);
                // An acknowledgement of the write names a record no log holds, which the
                // history must keep all the same ([`Cluster::route`] looks for acknowledged
                // records in the leaders' logs).
                let acked = effects.iter().any(
                    |e| matches!(e, Effect::Acknowledge { id, .. } if *id == u64::from(record)),
                );
                if acked && bounds.acks == Acks::All {
                    let short = short_acknowledgement(self.replica(*id), base);
                    let history = self.history_mut(id.partition);
                    let entry = Entry {
                        epoch,
                        record,
                        producer,
                    };
                    history.acknowledged.insert((base, entry));
                    history.short_acknowledgements.extend(short);
                }
                closed = Some(id.broker);
                self.last_stop_clean[id.broker.0 as usize] = false;
                effects.extend(self.stop_replicas(cfg, id.broker, false, true));
                effects
            }
            Action::FollowerFetch(id) => self.timeout(cfg, *id, Timer::Request),
            Action::Deliver(e) => {
                let answered = match (&e.message, e.to, e.from) {
                    (
                        Message::OffsetForLeaderEpochResponse(answer),
                        Node::Broker(b),
                        Node::Broker(from),
                    ) => {
                        let id = ReplicaId::new(b, answer.partition);
                        let before = self.replicas[slot(self.broker_count(), id)].clone();
                        Some((id, from, answer, before))
                    }
                    _ => None,
                };
                let effects = self.deliver(cfg, e);
                if let Some((id, from, answer, before)) = answered {
                    let after = self.replica(id);
                    if self.stalled_reconciliation.is_none()
                        && !crate::invariants::round_progressed(&before, from, answer, after)
                    {
                        self.stalled_reconciliation = Some(id.broker);
                    }
                }
                effects
            }
            Action::Drop(_) => {
                self.drops += 1;
                Vec::new()
            }
            Action::Duplicate(e) => {
                self.duplicates += 1;
                vec![Effect::Send(e.clone())]
            }
            Action::LeaderShrinkIsr { leader, follower } => {
                self.timeout(cfg, *leader, Timer::Lag(*follower))
            }
            Action::LeaderRetryAlterPartition(id) => self.timeout(cfg, *id, Timer::AlterPartition),
            Action::FetchWaitExpired(id) => self.timeout(cfg, *id, Timer::FetchWait),
            Action::ControllerShrinkIsr(b) => {
                if self.is_online(*b) {
                    self.session_expiries += 1;
                }
                self.active_step(|c| c.step(cfg, now, ControllerInput::Expire(*b)))
            }
            Action::Reregister { broker, elects } => {
                self.register(cfg, *broker, Registering::Fenced, elects)
            }
            Action::ControllerElectLeader(id) => {
                let elect = ControllerInput::Elect {
                    partition: id.partition,
                    leader: id.broker,
                };
                self.active_step(|c| c.step(cfg, now, elect))
            }
            Action::CleanShutdown(b) => {
                closed = Some(*b);
                self.stop(*b, true);
                self.stop_replicas(cfg, *b, true, true)
            }
            Action::UncleanCrash(b) => {
                closed = Some(*b);
                self.stop(*b, false);
                self.stop_replicas(cfg, *b, false, false)
            }
            Action::Restart { broker: b, elects } => {
                for p in self.partitions().collect::<Vec<_>>() {
                    let restart = ReplicaInput::Restart;
                    let _ = self
                        .replica_mut(ReplicaId::new(*b, p))
                        .step(cfg, now, restart);
                }
                let effects = self.register(cfg, *b, Registering::Restarted, elects);
                if !self.in_every_isr(*b) {
                    self.awaiting_rejoin.insert(*b);
                }
                effects
            }
            Action::Flush(id) => {
                let r = self.replica_mut(*id);
                r.log_mut().flush();
                let flushed = r.log().flushed_offset();
                r.step(cfg, now, ReplicaInput::Flushed(flushed))
            }
            Action::DeleteRecords { leader, before } => {
                let delete = ReplicaInput::DeleteRecords {
                    id: 0,
                    before: *before,
                };
                self.replica_mut(*leader).step(cfg, now, delete)
            }
            Action::Compact(id) => {
                let r = self.replica_mut(*id);
                let before = r.log().clone();
                let effects = r.step(cfg, now, ReplicaInput::Compact);
                if *r.log() != before {
                    self.compactions += 1;
                }
                effects
            }
            Action::ConsumerRead(id) => {
                let read = ReplicaInput::Read {
                    id: 0,
                    from: self.consumer_offset[id.partition.0 as usize],
                    max_entries: usize::MAX,
                    max_bytes: usize::MAX,
                };
                self.replica_mut(*id).step(cfg, now, read)
            }
            Action::ControllerFailover => {
                let stored = self.stale_store.take();
                let stored = stored.as_ref().unwrap_or(&self.controller);
                let epoch = self.controller.epoch().next();
                let (next, announce) = Controller::take_over(stored, epoch, now);
                self.zombie = Some(std::mem::replace(&mut self.controller, Arc::new(next)));
                self.controller_failovers += 1;
                sends_of(announce)
            }
            Action::ZombieShrinkIsr(b) => {
                self.zombie_step(cfg, |z| z.step(cfg, now, ControllerInput::Expire(*b)))
            }
            Action::ZombieElectLeader(id) => {
                let elect = ControllerInput::Elect {
                    partition: id.partition,
                    leader: id.broker,
                };
                self.zombie_step(cfg, |z| z.step(cfg, now, elect))
            }
            Action::ZombieDeliver(e) => {
                let input = ControllerInput::Message {
                    from: e.from,
                    message: e.message.clone(),
                };
                self.zombie_step(cfg, |z| z.step(cfg, now, input))
            }
            Action::Group(a) => self.group_act(cfg, bounds, a).unwrap_or_default(),
            Action::Tick => return self.tick(cfg, bounds),
        };
        let sent = self.route(bounds, effects, self.source(action));
        self.sent_now(&sent);
        self.observe();
        Traffic { closed, sent }
    }

    /// The clock advances a tick: every running replica whose next timeout has come is ticked,
    /// in the order of [`Cluster::replicas`], and what they send is this tick's.
    fn tick(&mut self, cfg: &Config, bounds: &Bounds) -> Traffic {
        self.now = Tick(self.now.0 + 1);
        self.fresh.clear();
        let mut sent = Vec::new();
        for id in self.replica_ids().collect::<Vec<_>>() {
            let r = self.replica(id);
            if !r.is_online() || r.next_timeout(cfg).is_none_or(|at| at > self.now) {
                continue;
            }
            let retries = r.timers(cfg).into_iter().any(|(timer, at)| {
                matches!(timer, Timer::Request | Timer::AlterPartition) && at <= self.now
            });
            if retries && self.timely() && self.timely_retry.is_none() {
                self.timely_retry = Some(id.broker);
            }
            let now = self.now;
            let effects = self.replica_mut(id).step(cfg, now, ReplicaInput::Tick);
            sent.extend(self.route(bounds, effects, Some(id.broker)));
        }
        self.sent_now(&sent);
        self.observe();
        Traffic { closed: None, sent }
    }

    /// With a clock, notes messages as sent in this tick.
    fn sent_now(&mut self, sent: &[Envelope<Record>]) {
        if self.clocked && !sent.is_empty() {
            self.fresh.extend(sent.iter().cloned());
            self.fresh.sort_unstable();
        }
    }

    /// The broker whose step `action` is, if it is one broker's: one of its replicas', or its
    /// stop.
    fn source(&self, action: &Action) -> Option<BrokerId> {
        match action {
            Action::LeaderWrite(id)
            | Action::DiskFull(id)
            | Action::FollowerFetch(id)
            | Action::LeaderShrinkIsr { leader: id, .. }
            | Action::LeaderRetryAlterPartition(id)
            | Action::FetchWaitExpired(id)
            | Action::Flush(id)
            | Action::ConsumerRead(id)
            | Action::DeleteRecords { leader: id, .. }
            | Action::Compact(id)
            | Action::ProducerRetry { leader: id, .. } => Some(id.broker),
            Action::CleanShutdown(b) | Action::UncleanCrash(b) => Some(*b),
            // The group's writes are its serving coordinator's.
            Action::Group(_) => self.serving().map(|(b, _)| b),
            Action::Deliver(e) => match e.to {
                Node::Broker(b) => Some(b),
                Node::Controller => None,
            },
            _ => None,
        }
    }

    /// A timer of replica `id` fires.
    fn timeout(&mut self, cfg: &Config, id: ReplicaId, timer: Timer) -> Effects<Record> {
        let now = self.now;
        self.replica_mut(id)
            .step(cfg, now, ReplicaInput::Timeout(timer))
    }

    /// Stops every replica of broker `b`, cleanly or not, each log flushed first if `flush`
    /// (a clean shutdown flushes; a full disk leaves the page cache, which survives, to the
    /// OS): the effects of all of them, in partition order.
    fn stop_replicas(
        &mut self,
        cfg: &Config,
        b: BrokerId,
        clean: bool,
        flush: bool,
    ) -> Effects<Record> {
        let (mut effects, now) = (Vec::new(), self.now);
        for p in self.partitions().collect::<Vec<_>>() {
            let r = self.replica_mut(ReplicaId::new(b, p));
            if flush {
                r.log_mut().flush();
            }
            effects.extend(r.step(cfg, now, ReplicaInput::Stop { clean }));
        }
        effects
    }

    /// Whether the active controller has `b` in the ISR of every partition.
    fn in_every_isr(&self, b: BrokerId) -> bool {
        self.partitions().all(|p| {
            self.controller
                .partition(p)
                .is_some_and(|s| s.isr.contains(&b))
        })
    }

    /// Partition `p`'s history, to change.
    fn history_mut(&mut self, p: PartitionId) -> &mut History<Record> {
        Arc::make_mut(&mut self.history[p.0 as usize])
    }

    /// A step of the active controller. It holds the role, so the store takes its write: a
    /// state a zombie left in the store is overwritten once the active controller changes its
    /// own.
    fn active_step(
        &mut self,
        step: impl FnOnce(&mut Controller) -> ControllerEffects<Record>,
    ) -> Effects<Record> {
        let before = self.stale_store.is_some().then(|| self.controller.clone());
        let effects = step(Arc::make_mut(&mut self.controller));
        if before.is_some_and(|before| before != self.controller) {
            self.stale_store = None;
        }
        sends_of(effects)
    }

    /// A step of the zombie controller: the store refuses it unless controller fencing is off
    /// ([`Controller::admitted_by_store`]); refused, the zombie learns it lost the role and
    /// stops, and nothing it decided leaves it. Admitted, a change of its state overwrites the
    /// store.
    fn zombie_step(
        &mut self,
        cfg: &Config,
        step: impl FnOnce(&mut Controller) -> ControllerEffects<Record>,
    ) -> Effects<Record> {
        let Some(mut zombie) = self.zombie.take() else {
            return Vec::new();
        };
        if !zombie.admitted_by_store(cfg, self.controller.epoch()) {
            return Vec::new();
        }
        let before = zombie.clone();
        let effects = step(Arc::make_mut(&mut zombie));
        if zombie != before {
            let stored = self.stale_store.as_ref().unwrap_or(&self.controller);
            self.stale_store = Some(Arc::new(zombie.written_over(stored)));
        }
        self.zombie = Some(zombie);
        sends_of(effects)
    }

    /// Broker `b` registers, electing `elects` where the registration elects.
    fn register(
        &mut self,
        cfg: &Config,
        b: BrokerId,
        why: Registering,
        elects: &[ReplicaId],
    ) -> Effects<Record> {
        let Some(clean) = self.registration(cfg, b, why) else {
            return Vec::new();
        };
        let register = ControllerInput::Register {
            broker: b,
            clean_shutdown: clean,
            elects: elects.iter().map(|r| (r.partition, r.broker)).collect(),
        };
        let now = self.now;
        self.active_step(|c| c.step(cfg, now, register))
    }

    /// The producer's write of `record` to partition `p` (the record is its own id), stamped
    /// when the producer is idempotent.
    fn write_of(&self, bounds: &Bounds, p: PartitionId, record: Record) -> ReplicaInput<Record> {
        ReplicaInput::Write {
            id: u64::from(record),
            records: vec![record],
            acks: bounds.acks,
            producer: self.stamp(bounds, p, record),
        }
    }

    /// The idempotent producer's stamp of `record` in partition `p`: its place among the
    /// records sent there (the next place for a record not sent yet).
    fn stamp(&self, bounds: &Bounds, p: PartitionId, record: Record) -> Option<ProducerBatch> {
        if !bounds.idempotent {
            return None;
        }
        let sent = &self.sent[p.0 as usize];
        let place = sent.iter().position(|&r| r == record).unwrap_or(sent.len());
        let sequence = i32::try_from(place).unwrap_or(i32::MAX);
        Some(ProducerBatch {
            producer_id: 0,
            producer_epoch: 0,
            first_sequence: sequence,
            last_sequence: sequence,
        })
    }

    /// A broker stops: its budget is spent (its connections close: see [`Traffic::closed`]).
    fn stop(&mut self, b: BrokerId, clean: bool) {
        if clean {
            self.clean_crashes += 1;
        } else {
            self.unclean_crashes += 1;
        }
        self.last_stop_clean[b.0 as usize] = clean;
    }

    /// Hands a message to its receiver's step.
    fn deliver(&mut self, cfg: &Config, e: &Envelope<Record>) -> Effects<Record> {
        let (from, message, now) = (e.from, e.message.clone(), self.now);
        match e.to {
            Node::Controller => {
                let input = ControllerInput::Message { from, message };
                self.active_step(|c| c.step(cfg, now, input))
            }
            Node::Broker(to) => {
                let Some(partition) = message.partition() else {
                    return Vec::new();
                };
                let input = ReplicaInput::Message { from, message };
                self.replica_mut(ReplicaId::new(to, partition))
                    .step(cfg, now, input)
            }
        }
    }

    /// Carries out effects: acknowledgements of acks=all writes and consumers' reads join the
    /// history, and the messages sent are returned for the network ([`carry`]). Asks for
    /// flushes and checkpoints need nothing here: a flush is its own action, and a checkpoint is
    /// the replica's own record of it.
    ///
    /// `source` is the broker whose step returned `effects`, if a broker's: an acknowledgement
    /// is judged against the leader that made it, never another. (Two replicas may both
    /// believe they lead and hold the record — a deposed leader that has not heard yet, and its
    /// successor that fetched it — and the successor may know fewer replicas to hold it; with
    /// an idempotent producer's retries, they may even hold the record in different epochs.)
    /// An acknowledgement a leader gives as it shuts down cleanly is not recorded: it is no
    /// longer a leader to judge it by.
    fn route(
        &mut self,
        bounds: &Bounds,
        effects: Effects<Record>,
        source: Option<BrokerId>,
    ) -> Vec<Envelope<Record>> {
        let mut sent = Vec::new();
        // Answers to the group's writes to its offsets partition (always acks=all): by whom,
        // which record, stored or not.
        let offsets = self.offsets_partition();
        let mut offsets_answers = Vec::new();
        for effect in effects {
            match effect {
                Effect::Send(e) => sent.push(e),
                Effect::Acknowledge {
                    partition,
                    id,
                    base_offset,
                } if bounds.acks == Acks::All || Some(partition) == offsets => {
                    let acked = self.acting_leaders(partition, source).find_map(|r| {
                        let entry = r.entry(base_offset).filter(|e| u64::from(e.record) == id)?;
                        Some((r, entry))
                    });
                    if let Some((leader, entry)) = acked {
                        if Some(partition) == offsets {
                            offsets_answers.push((Some(leader.id()), entry.record, true));
                        }
                        let ack = (base_offset, entry);
                        let history = &self.history[partition.0 as usize];
                        // A retry of a write committed in an earlier step is answered at once:
                        // that commit is what the answer rests on, and it was judged then. The
                        // leader's view of its followers may have gone back since (a duplicated
                        // old Fetch), which says nothing of the copies.
                        let short = if history.committed.contains(&ack) {
                            None
                        } else {
                            short_acknowledgement(leader, base_offset)
                        };
                        if short.is_some() || !history.acknowledged.contains(&ack) {
                            let history = self.history_mut(partition);
                            history.short_acknowledgements.extend(short);
                            history.acknowledged.insert(ack);
                        }
                    }
                }
                Effect::Read {
                    partition,
                    result: Ok(answer),
                    ..
                } => {
                    let at = partition.0 as usize;
                    let from = self.consumer_offset[at];
                    let history = Arc::make_mut(&mut self.history[at]);
                    if from < answer.log_start_offset && !answer.entries.is_empty() {
                        history
                            .reads_below_log_start
                            .insert((from, answer.log_start_offset));
                    }
                    for (i, entry) in answer.entries.into_iter().enumerate() {
                        let offset = Offset(from.0 + i as u64);
                        history.consumed.insert((offset, entry));
                        self.consumer_offset[at] = offset.next();
                    }
                }
                // The consumer's position lies below the log start: it resets to the earliest
                // offset, as a consumer with `auto.offset.reset=earliest` asks ListOffsets.
                Effect::Read {
                    partition,
                    result: Err(crate::ReadError::OffsetOutOfRange),
                    ..
                } => {
                    let start = self
                        .acting_leaders(partition, source)
                        .map(|r| r.log().log_start_offset())
                        .next();
                    let at = partition.0 as usize;
                    if let Some(start) = start.filter(|&s| s > self.consumer_offset[at]) {
                        self.consumer_offset[at] = start;
                    }
                }
                Effect::RecordsDeleted { result: Ok(_), .. } => self.deletes += 1,
                Effect::FailWrite { partition, id, .. } if Some(partition) == offsets => {
                    let record = Record::try_from(id).unwrap_or_default();
                    offsets_answers.push((source, record, false));
                }
                Effect::Acknowledge { .. }
                | Effect::Read { .. }
                | Effect::RecordsDeleted { .. }
                | Effect::FailWrite { .. }
                | Effect::Truncated { .. }
                | Effect::HighWatermark { .. }
                | Effect::Flush { .. }
                | Effect::CheckpointHighWatermark { .. } => {}
            }
        }
        for (leader, record, stored) in offsets_answers {
            self.offsets_written(leader, record, stored);
        }
        sent
    }

    /// Updates the ghost state after a step: the history of commits, and which restarted
    /// brokers are back in every ISR.
    fn observe(&mut self) {
        self.unload_resigned();
        for p in self.partitions().collect::<Vec<_>>() {
            let history = &self.history[p.0 as usize];
            let new = history.new_commits(self.replicas_of(p).map(|r| &**r));
            if !new.is_empty() {
                self.history_mut(p).committed.extend(new);
            }
        }
        let back: Vec<BrokerId> = self
            .awaiting_rejoin
            .iter()
            .filter(|&&b| self.in_every_isr(b) && self.is_online(b))
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

/// What a step ([`Cluster::act`]) does to the messages in flight, besides taking the message it
/// names off the network.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// A broker that stopped: its connections close, so everything in flight *to* it is lost
    /// (what it sent stays in flight).
    pub closed: Option<BrokerId>,
    /// The messages sent, in order. Those to a broker that is down are lost.
    pub sent: Vec<Envelope<Record>>,
}

/// A message in flight as a network holds it: the envelope itself ([`Cluster::network`]), or a
/// search engine's shared copy.
pub trait InFlight {
    /// The message.
    fn envelope(&self) -> &Envelope<Record>;

    /// Whether two messages in flight are copies of one message.
    fn same(&self, other: &Self) -> bool {
        self.envelope() == other.envelope()
    }
}

impl InFlight for Envelope<Record> {
    fn envelope(&self) -> &Envelope<Record> {
        self
    }
}

/// Where replica `id` is in [`Cluster::replicas`], with `brokers` brokers.
fn slot(brokers: usize, id: ReplicaId) -> usize {
    id.partition.0 as usize * brokers + id.broker.0 as usize
}

/// The index in [`Cluster::replicas`] of the replica a message to a broker is for, with
/// `brokers` brokers; `None` for a message to the controller.
pub fn receiver_slot(brokers: usize, e: &Envelope<Record>) -> Option<usize> {
    match e.to {
        Node::Broker(b) => Some(slot(
            brokers,
            ReplicaId::new(b, e.message.partition().unwrap_or(PARTITION)),
        )),
        Node::Controller => None,
    }
}

/// Carries out a step's [`Traffic`] on a network: closes the stopped broker's connections, adds
/// the messages sent to running brokers and the controller (at the end: a caller that keeps its
/// network sorted sorts it again), and discards the messages their receiver will ignore forever
/// ([`Replica::ignores_forever`]): delivering one is a step that changes nothing, so every
/// pruned state is one the unpruned network reaches too, and the properties never look at the
/// network. `replicas` are the cluster's after the step ([`Cluster::replicas`]); of the messages
/// already in flight, only those to a replica whose index `changed` holds for are looked at
/// again (the others were kept against the same replica before).
pub fn carry<M: InFlight>(
    cfg: &Config,
    bounds: &Bounds,
    replicas: &[Arc<Replica<MemLog<Record>>>],
    network: &mut Vec<M>,
    closed: Option<BrokerId>,
    sent: impl IntoIterator<Item = M>,
    changed: impl Fn(usize) -> bool,
) {
    let brokers = bounds.replicas as usize;
    let ignored = |e: &Envelope<Record>| match receiver_slot(brokers, e) {
        Some(_) if bounds.keep_dead => false,
        Some(at) => {
            let dead = replicas[at].ignores_forever(cfg, e.from, &e.message);
            if dead && bounds.audit_dead {
                if let Some(what) = dead_message_acts(cfg, replicas, e) {
                    panic!("the reduction is unsound: {what}");
                }
            }
            dead
        }
        None => false,
    };
    if let Some(b) = closed {
        network.retain(|m| m.envelope().to != Node::Broker(b));
    }
    network.retain(|m| {
        let e = m.envelope();
        !receiver_slot(brokers, e).is_some_and(&changed) || !ignored(e)
    });
    for m in sent {
        let e = m.envelope();
        let down = receiver_slot(brokers, e).is_some_and(|at| !replicas[at].is_online());
        if !down && !ignored(e) {
            network.push(m);
        }
    }
}

/// What `e`, a message its receiver ignores forever ([`Replica::ignores_forever`]), would do
/// if delivered now, by the core's own receipt checks: `None` when it is inert — its receiver,
/// stepped with it at its own time, stays as it is and sends only messages dead in turn (the
/// error answer to a request of an epoch it will never lead, which its sender ignores; at the
/// receiver's own time, the retry such an answer brings forward changes nothing either) — and
/// otherwise what it does. The sim's reduction then never stands in for a check of the core: a fault there (a
/// leader that answers a Fetch of an older epoch, a broker that obeys a deposed controller)
/// shows up as a message that acts, not as a smaller state space.
pub fn dead_message_acts(
    cfg: &Config,
    replicas: &[Arc<Replica<MemLog<Record>>>],
    e: &Envelope<Record>,
) -> Option<String> {
    let brokers = replicas
        .iter()
        .take_while(|r| r.partition() == PARTITION)
        .count();
    let receiver = &*replicas[receiver_slot(brokers, e)?];
    let mut copy = receiver.clone();
    let deliver = ReplicaInput::Message {
        from: e.from,
        message: e.message.clone(),
    };
    let effects: Effects<Record> = copy.step(cfg, receiver.now(), deliver);
    let dead_answer = |effect: &Effect<Record>| match effect {
        Effect::Send(answer) => receiver_slot(brokers, answer).is_some_and(|at| {
            let r = &replicas[at];
            !r.is_online() || r.ignores_forever(cfg, answer.from, &answer.message)
        }),
        _ => false,
    };
    (copy != *receiver || !effects.iter().all(dead_answer)).then(|| {
        format!(
            "the dead message {} acts when delivered: {effects:?}",
            describe(e)
        )
    })
}

/// Whether `e` is a request of replica `id` to its leader, or the answer to one: while one is
/// in flight, it sends no other (its FollowerFetch waits).
fn request_of(e: &Envelope<Record>, id: ReplicaId) -> bool {
    let b = Node::Broker(id.broker);
    e.message.partition() == Some(id.partition)
        && match &e.message {
            Message::Fetch(_) | Message::OffsetForLeaderEpoch(_) => e.from == b,
            Message::FetchResponse(_) | Message::OffsetForLeaderEpochResponse(_) => e.to == b,
            _ => false,
        }
}

/// Whether `e` is leader `id`'s AlterPartition, or the answer to it: while one is in flight,
/// its AlterPartition timer does not fire (the controller may still answer).
fn proposal_of(e: &Envelope<Record>, id: ReplicaId) -> bool {
    let b = Node::Broker(id.broker);
    e.message.partition() == Some(id.partition)
        && match &e.message {
            Message::AlterPartition(_) => e.from == b,
            Message::AlterPartitionResponse(_) => e.to == b,
            _ => false,
        }
}

/// The enabled actions of a cluster apart from its messages in flight ([`Cluster::menu`]):
/// those that depend on the messages are filled in by [`Menu::choices`] for a given network, in
/// the order of [`Cluster::actions`]. A search engine keeps one menu for all the states that
/// differ only in their messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Menu {
    /// The actions that name no message: per replica (a producer write, then its ISR shrinks
    /// and a consumer read), then, from `later` on, those listed after the messages (stops,
    /// restarts, registrations, fencing, flushes, elections, failovers, the zombie's shrinks
    /// and elections).
    listed: Vec<Action>,
    /// Per replica, in the order of [`Cluster::replicas`]: where its actions end in `listed`,
    /// and where its FollowerFetch goes.
    replicas: Vec<ReplicaMenu>,
    later: usize,
    /// Whether a message may be lost, or copied.
    drops: bool,
    duplicates: bool,
    /// Whether a zombie may take a message to the controller (listed last).
    zombie: bool,
    /// With a clock that may advance: the messages sent since the last tick. The tick is
    /// enabled once every message in flight is among them (listed last of all).
    tick: Option<Vec<Envelope<Record>>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ReplicaMenu {
    /// The replica.
    id: ReplicaId,
    /// Its FollowerFetch goes before `listed[fetch_at]`, after its producer write.
    fetch_at: usize,
    /// Whether its request timer runs and nothing holds its request: it fires (a
    /// FollowerFetch), unless a request or answer of its is in flight.
    fetches: bool,
    /// Whether its AlterPartition timer runs: it fires (a LeaderRetryAlterPartition), unless
    /// the proposal or its answer is in flight.
    resends: bool,
    /// Its actions end before `listed[end]`.
    end: usize,
}

/// An enabled action of a [`Menu`], naming a message in flight by its index in the network.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Choice {
    /// An action that names no message in flight, by its index among the menu's.
    Listed(usize),
    /// `FollowerFetch` of this replica.
    Fetch(ReplicaId),
    /// `LeaderRetryAlterPartition` of this replica.
    Resend(ReplicaId),
    /// `Deliver` of the message at this index of the network.
    Deliver(usize),
    /// `Drop` of the message at this index.
    Drop(usize),
    /// `Duplicate` of the message at this index.
    Duplicate(usize),
    /// `ZombieDeliver` of the message at this index.
    ZombieDeliver(usize),
    /// `Tick`.
    Tick,
}

impl Menu {
    /// How many actions name no message in flight: [`Choice::Listed`] indices are below.
    pub fn listed(&self) -> usize {
        self.listed.len()
    }

    /// The enabled actions when `network` is in flight, in the order of [`Cluster::actions`]
    /// when the network is sorted as a cluster keeps it. Of copies of one message next to each
    /// other only the first is named: delivering either is the same step.
    pub fn choices<M: InFlight>(&self, network: &[M]) -> Vec<Choice> {
        let mut out = Vec::new();
        let mut next = 0;
        for menu in &self.replicas {
            let b = menu.id;
            out.extend((next..menu.fetch_at).map(Choice::Listed));
            if menu.fetches && !network.iter().any(|m| request_of(m.envelope(), b)) {
                out.push(Choice::Fetch(b));
            }
            if menu.resends && !network.iter().any(|m| proposal_of(m.envelope(), b)) {
                out.push(Choice::Resend(b));
            }
            out.extend((menu.fetch_at..menu.end).map(Choice::Listed));
            next = menu.end;
        }
        let mut previous: Option<&M> = None;
        for (i, m) in network.iter().enumerate() {
            if previous.is_some_and(|p| p.same(m)) {
                continue;
            }
            previous = Some(m);
            out.push(Choice::Deliver(i));
            if self.drops {
                out.push(Choice::Drop(i));
            }
            if self.duplicates {
                out.push(Choice::Duplicate(i));
            }
        }
        out.extend((self.later..self.listed.len()).map(Choice::Listed));
        if self.zombie {
            let mut previous: Option<&M> = None;
            for (i, m) in network.iter().enumerate() {
                if m.envelope().to != Node::Controller || previous.is_some_and(|p| p.same(m)) {
                    continue;
                }
                previous = Some(m);
                out.push(Choice::ZombieDeliver(i));
            }
        }
        if self
            .tick
            .as_ref()
            .is_some_and(|fresh| all_fresh(network, fresh))
        {
            out.push(Choice::Tick);
        }
        out
    }
}

impl Choice {
    /// The action itself, for the menu and the network the choice was made from.
    pub fn action<M: InFlight>(&self, menu: &Menu, network: &[M]) -> Action {
        let e = |i: usize| network[i].envelope().clone();
        match *self {
            Choice::Listed(i) => menu.listed[i].clone(),
            Choice::Fetch(b) => Action::FollowerFetch(b),
            Choice::Resend(b) => Action::LeaderRetryAlterPartition(b),
            Choice::Deliver(i) => Action::Deliver(e(i)),
            Choice::Drop(i) => Action::Drop(e(i)),
            Choice::Duplicate(i) => Action::Duplicate(e(i)),
            Choice::ZombieDeliver(i) => Action::ZombieDeliver(e(i)),
            Choice::Tick => Action::Tick,
        }
    }

    /// The message in flight the action names, by its index.
    pub fn message(&self) -> Option<usize> {
        match *self {
            Choice::Listed(_) | Choice::Fetch(_) | Choice::Resend(_) | Choice::Tick => None,
            Choice::Deliver(i)
            | Choice::Drop(i)
            | Choice::Duplicate(i)
            | Choice::ZombieDeliver(i) => Some(i),
        }
    }
}

/// Whether every message of `network` is among `fresh` (a sorted multiset), copies counted:
/// none was sent before the last tick.
fn all_fresh<M: InFlight>(network: &[M], fresh: &[Envelope<Record>]) -> bool {
    network.iter().all(|m| {
        let e = m.envelope();
        let copies = network.iter().filter(|n| n.envelope() == e).count();
        let start = fresh.partition_point(|x| x < e);
        fresh[start..].iter().take_while(|x| *x == e).count() >= copies
    })
}

/// The messages among a controller step's effects, as the replicas' effects carry them to the
/// network. A MustRegister answers a heartbeat, and the sim has none: a fenced broker registers
/// again by an action of its own.
fn sends_of(effects: ControllerEffects<Record>) -> Effects<Record> {
    effects
        .into_iter()
        .filter_map(ControllerEffect::into_sent)
        .map(Effect::Send)
        .collect()
}
