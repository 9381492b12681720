//! The safety properties, as pure functions over a snapshot of one partition's cluster.
//!
//! The models check them as `always` properties, the property tests after every step, and the
//! runtime's debug builds assert [`replica_is_consistent`] after every transition. Each returns
//! the first [`Violation`] it finds, worded so that a counterexample explains itself.

use crate::config::FlushPolicy;
use crate::controller::Controller;
use crate::epoch_cache::EpochCache;
use crate::log::{is_gap, Entry, Log};
use crate::replica::{Replica, Role};
use crate::types::{BrokerId, LeaderEpoch, Offset, PartitionId};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Debug};
use thiserror::Error;

mod group;

pub use group::{
    acknowledged_commits_survive, consumer_resumes_without_loss, fenced_members_cannot_commit,
    OffsetsRecord,
};

/// What a driver has seen happen to a partition, kept beside the cluster so properties can speak
/// about the past: records that were committed, acknowledged to a producer, or read by a consumer.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct History<R: Ord> {
    /// Every (offset, entry) that was ever below some leader's high watermark.
    pub committed: BTreeSet<(Offset, Entry<R>)>,
    /// Every (offset, entry) acknowledged to an acks=all producer.
    pub acknowledged: BTreeSet<(Offset, Entry<R>)>,
    /// Every (offset, entry) a consumer was given.
    pub consumed: BTreeSet<(Offset, Entry<R>)>,
    /// acks=all acknowledgements given while the acknowledging leader knew fewer than
    /// `min.insync.replicas` replicas to hold the record: (offset, copies it knew of). Empty in
    /// every run of a correct protocol, so it adds no state to a model's.
    #[serde(default)]
    pub short_acknowledgements: BTreeSet<(Offset, usize)>,
    /// Reads answered with records below the answering leader's log start: (the offset read
    /// from, that log start). Empty in every run of a correct protocol.
    #[serde(default)]
    pub reads_below_log_start: BTreeSet<(Offset, Offset)>,
}

impl<R: Ord> Default for History<R> {
    fn default() -> Self {
        History {
            committed: BTreeSet::new(),
            acknowledged: BTreeSet::new(),
            consumed: BTreeSet::new(),
            short_acknowledgements: BTreeSet::new(),
            reads_below_log_start: BTreeSet::new(),
        }
    }
}

impl<R: Ord + Clone> History<R> {
    /// Records as committed everything below the high watermark of every replica that believes
    /// it leads. Call after every step.
    pub fn observe_commits<'r, L: Log<Record = R> + 'r>(
        &mut self,
        replicas: impl IntoIterator<Item = &'r Replica<L>>,
    ) {
        let new = self.new_commits(replicas);
        self.committed.extend(new);
    }

    /// What [`History::observe_commits`] would add: the entries below the high watermark of a
    /// replica that believes it leads that are not recorded as committed yet.
    pub fn new_commits<'r, L: Log<Record = R> + 'r>(
        &self,
        replicas: impl IntoIterator<Item = &'r Replica<L>>,
    ) -> Vec<(Offset, Entry<R>)> {
        let mut new = Vec::new();
        for r in replicas.into_iter().filter(|r| r.is_leader()) {
            for o in 0..r.high_watermark().0 {
                // A gap compaction left is not a record: what it held was committed before.
                if let Some(entry) = r.entry(Offset(o)).filter(|e| !is_gap::<L>(&e.record)) {
                    let commit = (Offset(o), entry);
                    if !self.committed.contains(&commit) && !new.contains(&commit) {
                        new.push(commit);
                    }
                }
            }
        }
        new
    }
}

/// A snapshot of one partition: the controller, every replica, and the history.
pub struct ClusterView<'a, L: Log>
where
    L::Record: Ord,
{
    /// The partition the properties speak of.
    pub partition: PartitionId,
    /// The active controller: its partition state is the truth (the ISR, the leader).
    pub controller: &'a Controller,
    /// Every replica of the partition, running or not.
    pub replicas: Vec<&'a Replica<L>>,
    /// What the driver saw happen: commits, acknowledgements, reads.
    pub history: &'a History<L::Record>,
    /// The flush policy the replicas run under: what a leader counts of its own log.
    pub flush: FlushPolicy,
    /// A follower that acted on an OffsetForLeaderEpoch answer without ending its
    /// reconciliation or lowering the epoch it asks about ([`round_progressed`]), as the
    /// driver saw it happen.
    pub stalled_reconciliation: Option<BrokerId>,
    /// The driver vouches that the run so far was timely: every message arrived within a tick
    /// of being sent, no broker stopped or was fenced, nothing was lost, and every timer fired
    /// when due and not before. Only then does a follower fetch every round, and
    /// [`followers_fetching_every_round_stay_in_isr`] speak. The model's clock sets it; a driver
    /// that cannot say so leaves it `false`.
    pub timely: bool,
    /// With a clock, the first broker whose request or AlterPartition timer came due in a
    /// timely run, as the driver saw it ([`timely_requests_are_not_retried`]).
    pub timely_retry: Option<BrokerId>,
}

/// A broken property, with the evidence. Each message names the property and says what was
/// found, so a counterexample explains itself.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum Violation {
    /// **StrongIsr** broken.
    #[error("StrongIsr: leader {leader} has HW {hw}, but ISR member {member} differs at offset {offset}")]
    StrongIsr {
        /// The replica that believes it leads.
        leader: BrokerId,
        /// The running member of the controller's ISR that differs from it.
        member: BrokerId,
        /// The leader's high watermark.
        hw: Offset,
        /// The first offset below it where the two logs differ.
        offset: Offset,
    },
    /// **WeakIsr** broken.
    #[error("WeakIsr: leader {leader} has HW {hw}, but its cached ISR member {member} differs at offset {offset}")]
    WeakIsr {
        /// The replica that believes it leads.
        leader: BrokerId,
        /// The running member of its cached ISR that differs from it.
        member: BrokerId,
        /// The leader's high watermark.
        hw: Offset,
        /// The first offset below it where the two logs differ.
        offset: Offset,
    },
    /// **LeaderInIsr** broken.
    #[error("LeaderInIsr: the controller's leader {leader} is not in its ISR")]
    LeaderInIsr {
        /// The controller's leader.
        leader: BrokerId,
    },
    /// **ValidHighWatermark** broken.
    #[error(
        "ValidHighWatermark: leader {leader} has HW {hw}, but ISR member {member} has LEO {leo}"
    )]
    ValidHighWatermark {
        /// The replica that believes it leads.
        leader: BrokerId,
        /// The ISR member whose log is shorter than the leader's HW.
        member: BrokerId,
        /// The leader's high watermark.
        hw: Offset,
        /// The member's log end offset.
        leo: Offset,
    },
    /// **LogMatching** broken.
    #[error("LogMatching: {a} and {b} differ at offset {offset}, below both of their HWs")]
    LogMatching {
        /// One replica (the smaller id).
        a: BrokerId,
        /// The other.
        b: BrokerId,
        /// The first offset below both HWs where their logs differ.
        offset: Offset,
    },
    /// **CommittedRecordsSurviveLeaderFailure** broken.
    #[error("CommittedRecordsSurviveLeaderFailure: leader {leader} lacks the committed record at offset {offset} ({record})")]
    CommittedRecordLost {
        /// The current leader.
        leader: BrokerId,
        /// Where the committed record was.
        offset: Offset,
        /// The committed entry, as the history kept it.
        record: String,
    },
    /// **ConsumerReadsAreNeverRevoked** broken.
    #[error("ConsumerReadsAreNeverRevoked: leader {leader} lacks the consumed record at offset {offset} ({record})")]
    ConsumedRecordRevoked {
        /// The current leader.
        leader: BrokerId,
        /// Where the consumed record was.
        offset: Offset,
        /// The consumed entry, as the history kept it.
        record: String,
    },
    /// **HighWatermarkKeepsUp** broken.
    #[error("HighWatermarkKeepsUp: leader {leader} has HW {hw}, but its confirmed ISR's fetches prove {proven}")]
    HighWatermarkBehind {
        /// The leader.
        leader: BrokerId,
        /// Its high watermark.
        hw: Offset,
        /// What its own log and its confirmed ISR's fetches prove.
        proven: Offset,
    },
    /// **ReconciliationProgresses** broken.
    #[error("ReconciliationProgresses: {follower} acted on an OffsetForLeaderEpoch answer and asks about the same epoch again")]
    ReconciliationStalled {
        /// The follower that made no progress.
        follower: BrokerId,
    },
    /// **FollowersFetchingEveryRoundStayInIsr** broken.
    #[error("FollowersFetchingEveryRoundStayInIsr: in a timely run, {follower} left the ISR {by}")]
    LeftIsr {
        /// The follower left out.
        follower: BrokerId,
        /// Who left it out: a leader's proposal, or the controller's ISR.
        by: String,
    },
    /// **TimelyRequestsAreNotRetried** broken.
    #[error("TimelyRequestsAreNotRetried: in a timely run, {broker}'s request or AlterPartition timer came due: it asks again for what should have been answered")]
    RetriedInTimelyRun {
        /// The broker whose timer came due.
        broker: BrokerId,
    },
    /// **ReplicasAreConsistent** broken.
    #[error("ReplicasAreConsistent: replica {replica} is inconsistent: {what}")]
    Replica {
        /// The inconsistent replica.
        replica: BrokerId,
        /// Which of its local invariants fails, and how.
        what: String,
    },
    /// **AcknowledgedOnMinIsr** broken.
    #[error("AcknowledgedOnMinIsr: the acks=all write at offset {offset} was acknowledged by a leader that knew {copies} replicas to hold it, fewer than min.insync.replicas")]
    AcknowledgedShort {
        /// Where the acknowledged record is.
        offset: Offset,
        /// How many replicas the leader knew to hold it ([`known_copies`]).
        copies: usize,
    },
    /// **ControllerStateIsConsistent** broken.
    #[error("ControllerStateIsConsistent: {what}")]
    ControllerState {
        /// Which part of the controller's partition state is inconsistent, and how.
        what: String,
    },
    /// **IdempotentWritesStoredOnce** broken.
    #[error("IdempotentWritesStoredOnce: replica {replica} holds below its HW producer {producer_id}'s sequence {sequence} at offset {offset}, {what}")]
    StoredTwice {
        /// The replica whose committed log breaks it.
        replica: BrokerId,
        /// The producer.
        producer_id: i64,
        /// The batch's first sequence number.
        sequence: i32,
        /// Where the offending batch lies.
        offset: Offset,
        /// Whether it repeats an earlier batch or comes out of sequence order.
        what: &'static str,
    },
    /// **ConsumerResumesWithoutLoss** broken.
    #[error("ConsumerResumesWithoutLoss: the group would resume at {resume}, past the committed record at offset {offset} that no member processed")]
    SkippedRecord {
        /// The unprocessed committed record's offset.
        offset: Offset,
        /// Where the group would resume.
        resume: Offset,
    },
    /// **AcknowledgedCommitsSurvive** broken.
    #[error("AcknowledgedCommitsSurvive: coordinator {coordinator} holds the group's position at {}, behind the commit of {acknowledged} acknowledged to a consumer", held.map_or("none".to_string(), |o| o.to_string()))]
    CommitMovedBack {
        /// The serving coordinator.
        coordinator: BrokerId,
        /// The position it holds.
        held: Option<Offset>,
        /// The last position acknowledged to a consumer.
        acknowledged: Offset,
    },
    /// **FencedMembersCannotCommit** broken.
    #[error("FencedMembersCannotCommit: replica {replica} holds at offset {offset} a commit of generation {generation}, after generation {group} was stored")]
    FencedCommit {
        /// The replica of the offsets partition.
        replica: BrokerId,
        /// Where the fenced commit lies.
        offset: Offset,
        /// Its generation.
        generation: i32,
        /// The newer generation stored before it.
        group: i32,
    },
    /// **LogStartWithinHighWatermark** broken.
    #[error("LogStartWithinHighWatermark: {replica}'s log start {log_start} is above its HW {hw}: records no replica may have committed are deleted")]
    LogStartAboveHighWatermark {
        /// The replica.
        replica: BrokerId,
        /// Its log start offset.
        log_start: Offset,
        /// Its high watermark.
        hw: Offset,
    },
    /// **NoReadBelowLogStart** broken.
    #[error("NoReadBelowLogStart: a consumer reading from offset {from} was given records, but the log starts at {log_start}")]
    ReadBelowLogStart {
        /// The offset read from.
        from: Offset,
        /// The answering leader's log start offset.
        log_start: Offset,
    },
    /// **CleanedRecordsAreSuperseded** broken.
    #[error("CleanedRecordsAreSuperseded: replica {replica} cleaned the record at offset {offset}, but no later record it holds or that was committed has its key {key}")]
    CleanedUnsuperseded {
        /// The replica whose log holds the gap.
        replica: BrokerId,
        /// Where the cleaned record was.
        offset: Offset,
        /// Its key.
        key: u64,
    },
    /// **LeaderEpochsAreUnique** broken.
    #[error("LeaderEpochsAreUnique: leader epoch {epoch} names both {a} and {b} as leader")]
    LeaderEpochTwice {
        /// The epoch named twice.
        epoch: LeaderEpoch,
        /// One leader it names (the smaller id).
        a: BrokerId,
        /// The other.
        b: BrokerId,
    },
}

/// The properties of section 4 of the reference, by their anchor names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Property {
    /// [`strong_isr`]: a leader's committed prefix is on every running member of the
    /// controller's ISR.
    StrongIsr,
    /// [`weak_isr`]: the same, against the leader's cached ISR.
    WeakIsr,
    /// [`leader_in_isr`]: the controller's leader is in its ISR.
    LeaderInIsr,
    /// [`valid_high_watermark`]: no leader's HW passes an ISR member's LEO.
    ValidHighWatermark,
    /// [`log_matching`]: two replicas agree below both of their HWs.
    LogMatching,
    /// [`committed_records_survive`]: the current leader holds every committed record.
    CommittedRecordsSurviveLeaderFailure,
    /// [`consumer_reads_never_revoked`]: the current leader holds every record a consumer read.
    ConsumerReadsAreNeverRevoked,
    /// [`high_watermark_keeps_up`]: a leader's HW is no lower than its ISR's fetches prove.
    HighWatermarkKeepsUp,
    /// [`reconciliation_progresses`]: no follower acts on an OffsetForLeaderEpoch answer
    /// without progress.
    ReconciliationProgresses,
    /// [`replica_is_consistent`], for every replica.
    ReplicasAreConsistent,
    /// [`acknowledged_on_min_isr`]: acks=all acknowledgements are given on min ISR copies.
    AcknowledgedOnMinIsr,
    /// [`controller_state_is_consistent`]: ISR and ELR disjoint, the ELR empty at min ISR,
    /// epochs in step.
    ControllerStateIsConsistent,
    /// [`leader_epochs_are_unique`]: one leader per leader epoch.
    LeaderEpochsAreUnique,
    /// [`idempotent_writes_stored_once`]: no idempotent producer's batch is committed twice or
    /// out of order.
    IdempotentWritesStoredOnce,
    /// [`log_start_within_high_watermark`]: no replica's log start passes its HW.
    LogStartWithinHighWatermark,
    /// [`no_read_below_log_start`]: no consumer is given records below the log start.
    NoReadBelowLogStart,
    /// [`consumer_resumes_without_loss`]: wherever a consumer group resumes, every committed
    /// record below was processed.
    ConsumerResumesWithoutLoss,
    /// [`acknowledged_commits_survive`]: the coordinator's position is never behind an
    /// acknowledged commit.
    AcknowledgedCommitsSurvive,
    /// [`fenced_members_cannot_commit`]: no commit of an older generation follows a newer
    /// generation in the offsets partition.
    FencedMembersCannotCommit,
    /// [`cleaned_records_are_superseded`]: compaction removed only records a later committed
    /// record of the same key supersedes.
    CleanedRecordsAreSuperseded,
    /// [`followers_fetching_every_round_stay_in_isr`]: in a timely run no follower leaves the
    /// ISR.
    FollowersFetchingEveryRoundStayInIsr,
    /// [`timely_requests_are_not_retried`]: in a timely run no request or AlterPartition is
    /// sent again.
    TimelyRequestsAreNotRetried,
}

impl Property {
    /// Every property, in the order the checker reports them.
    pub const ALL: [Property; 22] = [
        Property::StrongIsr,
        Property::WeakIsr,
        Property::LeaderInIsr,
        Property::ValidHighWatermark,
        Property::LogMatching,
        Property::CommittedRecordsSurviveLeaderFailure,
        Property::ConsumerReadsAreNeverRevoked,
        Property::HighWatermarkKeepsUp,
        Property::ReconciliationProgresses,
        Property::ReplicasAreConsistent,
        Property::AcknowledgedOnMinIsr,
        Property::ControllerStateIsConsistent,
        Property::LeaderEpochsAreUnique,
        Property::IdempotentWritesStoredOnce,
        Property::LogStartWithinHighWatermark,
        Property::NoReadBelowLogStart,
        Property::ConsumerResumesWithoutLoss,
        Property::AcknowledgedCommitsSurvive,
        Property::FencedMembersCannotCommit,
        Property::CleanedRecordsAreSuperseded,
        Property::FollowersFetchingEveryRoundStayInIsr,
        Property::TimelyRequestsAreNotRetried,
    ];

    /// Whether a property of a consumer group, not of one partition: [`Property::check`]
    /// finds it holding of any partition, and a driver with a group checks it on the group
    /// (the model's `Cluster::check`).
    pub fn is_group(self) -> bool {
        matches!(
            self,
            Property::ConsumerResumesWithoutLoss
                | Property::AcknowledgedCommitsSurvive
                | Property::FencedMembersCannotCommit
        )
    }

    /// The property's name, as spec/properties.md and the checker spell it (the TLA+
    /// anchor's where it has one).
    pub fn name(self) -> &'static str {
        match self {
            Property::StrongIsr => "StrongIsr",
            Property::WeakIsr => "WeakIsr",
            Property::LeaderInIsr => "LeaderInIsr",
            Property::ValidHighWatermark => "ValidHighWatermark",
            Property::LogMatching => "LogMatching",
            Property::CommittedRecordsSurviveLeaderFailure => {
                "CommittedRecordsSurviveLeaderFailure"
            }
            Property::ConsumerReadsAreNeverRevoked => "ConsumerReadsAreNeverRevoked",
            Property::HighWatermarkKeepsUp => "HighWatermarkKeepsUp",
            Property::ReconciliationProgresses => "ReconciliationProgresses",
            Property::ReplicasAreConsistent => "ReplicasAreConsistent",
            Property::AcknowledgedOnMinIsr => "AcknowledgedOnMinIsr",
            Property::ControllerStateIsConsistent => "ControllerStateIsConsistent",
            Property::LeaderEpochsAreUnique => "LeaderEpochsAreUnique",
            Property::IdempotentWritesStoredOnce => "IdempotentWritesStoredOnce",
            Property::LogStartWithinHighWatermark => "LogStartWithinHighWatermark",
            Property::NoReadBelowLogStart => "NoReadBelowLogStart",
            Property::ConsumerResumesWithoutLoss => "ConsumerResumesWithoutLoss",
            Property::AcknowledgedCommitsSurvive => "AcknowledgedCommitsSurvive",
            Property::FencedMembersCannotCommit => "FencedMembersCannotCommit",
            Property::CleanedRecordsAreSuperseded => "CleanedRecordsAreSuperseded",
            Property::FollowersFetchingEveryRoundStayInIsr => {
                "FollowersFetchingEveryRoundStayInIsr"
            }
            Property::TimelyRequestsAreNotRetried => "TimelyRequestsAreNotRetried",
        }
    }

    /// Checks this property on a snapshot.
    pub fn check<L: Log>(self, view: &ClusterView<'_, L>) -> Result<(), Violation>
    where
        L::Record: Ord + Debug,
    {
        match self {
            Property::StrongIsr => strong_isr(view),
            Property::WeakIsr => weak_isr(view),
            Property::LeaderInIsr => leader_in_isr(view),
            Property::ValidHighWatermark => valid_high_watermark(view),
            Property::LogMatching => log_matching(view),
            Property::CommittedRecordsSurviveLeaderFailure => committed_records_survive(view),
            Property::ConsumerReadsAreNeverRevoked => consumer_reads_never_revoked(view),
            Property::HighWatermarkKeepsUp => high_watermark_keeps_up(view),
            Property::ReconciliationProgresses => reconciliation_progresses(view),
            Property::ReplicasAreConsistent => view
                .replicas
                .iter()
                .try_for_each(|r| replica_is_consistent(r)),
            Property::AcknowledgedOnMinIsr => acknowledged_on_min_isr(view),
            Property::ControllerStateIsConsistent => controller_state_is_consistent(view),
            Property::LeaderEpochsAreUnique => leader_epochs_are_unique(view),
            Property::IdempotentWritesStoredOnce => view
                .replicas
                .iter()
                .try_for_each(|r| idempotent_writes_stored_once(r)),
            Property::LogStartWithinHighWatermark => view
                .replicas
                .iter()
                .try_for_each(|r| log_start_within_high_watermark(r)),
            Property::NoReadBelowLogStart => no_read_below_log_start(view),
            Property::CleanedRecordsAreSuperseded => cleaned_records_are_superseded(view),
            Property::FollowersFetchingEveryRoundStayInIsr => {
                followers_fetching_every_round_stay_in_isr(view)
            }
            Property::TimelyRequestsAreNotRetried => timely_requests_are_not_retried(view),
            Property::ConsumerResumesWithoutLoss
            | Property::AcknowledgedCommitsSurvive
            | Property::FencedMembersCannotCommit => Ok(()),
        }
    }
}

impl fmt::Display for Property {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Every property, in order; the first violation found.
pub fn check_all<L: Log>(view: &ClusterView<'_, L>) -> Result<(), Violation>
where
    L::Record: Ord + Debug,
{
    Property::ALL.iter().try_for_each(|p| p.check(view))
}

impl<L: Log> ClusterView<'_, L>
where
    L::Record: Ord,
{
    fn replica(&self, id: BrokerId) -> Option<&Replica<L>> {
        self.replicas.iter().copied().find(|r| r.id() == id)
    }

    /// The controller's ISR for the partition.
    fn controller_isr(&self) -> BTreeSet<BrokerId> {
        self.controller
            .partition(self.partition)
            .map(|s| s.isr.clone())
            .unwrap_or_default()
    }

    /// The replica that leads according to the controller, once it has taken office in the
    /// controller's epoch.
    fn current_leader(&self) -> Option<&Replica<L>> {
        let state = self.controller.partition(self.partition)?;
        let leader = self.replica(state.leader?)?;
        (leader.is_leader() && leader.leader_epoch() == state.leader_epoch).then_some(leader)
    }
}

/// `entry` as compaction may leave it ([`Log::cleaned`]): two replicas agree on an entry when
/// they hold it alike, or one cleaned what the other still holds.
fn cleaned<L: Log>(entry: &Entry<L::Record>) -> Entry<L::Record> {
    Entry {
        epoch: entry.epoch,
        record: L::cleaned(&entry.record),
        producer: entry.producer,
    }
}

/// The first offset below `hw`, at or above both log starts, where two replicas differ
/// (compaction's gaps aside).
/// Walks entry by entry: where both hold the same entry, they hold it over the same offsets,
/// so the next offset to compare is the next entry's (a record batch spans many offsets in the
/// runtime's logs).
fn first_difference<L: Log>(a: &Replica<L>, b: &Replica<L>, hw: Offset) -> Option<Offset> {
    // Below either log start there is nothing to compare: deleted records were committed.
    // From the first offset of the entry holding it, so that the walk keeps to entry
    // boundaries when DeleteRecords put the log start inside an entry.
    let start = a.log().log_start_offset().max(b.log().log_start_offset());
    let mut o = a.log().entry_start(start);
    while o < hw {
        let here = a.entry(o);
        if here.as_ref().map(cleaned::<L>) != b.entry(o).as_ref().map(cleaned::<L>) {
            return Some(o);
        }
        let width = here.map_or(1, |e| L::width(&e.record)).max(1);
        o = Offset(o.0 + width);
    }
    None
}

/// Checks every leader's committed prefix against the running members of an ISR.
fn isr_agrees<L: Log, F, V>(
    view: &ClusterView<'_, L>,
    isr_of: F,
    violation: V,
) -> Result<(), Violation>
where
    L::Record: Ord,
    F: Fn(&Replica<L>) -> BTreeSet<BrokerId>,
    V: Fn(BrokerId, BrokerId, Offset, Offset) -> Violation,
{
    for &leader in view.replicas.iter().filter(|r| r.is_leader()) {
        let hw = leader.high_watermark();
        for member in isr_of(leader) {
            let Some(m) = view.replica(member).filter(|m| m.is_online()) else {
                continue;
            };
            if let Some(offset) = first_difference(leader, m, hw) {
                return Err(violation(leader.id(), member, hw, offset));
            }
        }
    }
    Ok(())
}

/// **StrongIsr**: for every replica that believes it leads, each offset below its HW holds the
/// same entry on it and on every running member of the controller's ISR.
pub fn strong_isr<L: Log>(view: &ClusterView<'_, L>) -> Result<(), Violation>
where
    L::Record: Ord,
{
    let isr = view.controller_isr();
    isr_agrees(
        view,
        |_| isr.clone(),
        |leader, member, hw, offset| Violation::StrongIsr {
            leader,
            member,
            hw,
            offset,
        },
    )
}

/// **WeakIsr**: the same as StrongIsr, against the leader's own cached ISR.
pub fn weak_isr<L: Log>(view: &ClusterView<'_, L>) -> Result<(), Violation>
where
    L::Record: Ord,
{
    let cached = |r: &Replica<L>| r.leader_state().map(|l| l.isr.clone()).unwrap_or_default();
    isr_agrees(view, cached, |leader, member, hw, offset| {
        Violation::WeakIsr {
            leader,
            member,
            hw,
            offset,
        }
    })
}

/// **LeaderInIsr**: the controller's leader, when there is one, is in the controller's ISR.
pub fn leader_in_isr<L: Log>(view: &ClusterView<'_, L>) -> Result<(), Violation>
where
    L::Record: Ord,
{
    match view.controller.partition(view.partition) {
        Some(s) => match s.leader {
            Some(leader) if !s.isr.contains(&leader) => Err(Violation::LeaderInIsr { leader }),
            _ => Ok(()),
        },
        None => Ok(()),
    }
}

/// **ValidHighWatermark**: every running member of the controller's ISR has LEO ≥ the current
/// leader's HW.
pub fn valid_high_watermark<L: Log>(view: &ClusterView<'_, L>) -> Result<(), Violation>
where
    L::Record: Ord,
{
    let Some(leader) = view.current_leader() else {
        return Ok(());
    };
    let hw = leader.high_watermark();
    for member in view.controller_isr() {
        if let Some(m) = view.replica(member).filter(|m| m.is_online()) {
            if m.log_end_offset() < hw {
                return Err(Violation::ValidHighWatermark {
                    leader: leader.id(),
                    member,
                    hw,
                    leo: m.log_end_offset(),
                });
            }
        }
    }
    Ok(())
}

/// **LogMatching**: any two replicas agree on every offset below both of their HWs.
pub fn log_matching<L: Log>(view: &ClusterView<'_, L>) -> Result<(), Violation>
where
    L::Record: Ord,
{
    for (i, &a) in view.replicas.iter().enumerate() {
        for &b in &view.replicas[i + 1..] {
            let hw = a.high_watermark().min(b.high_watermark());
            if let Some(offset) = first_difference(a, b, hw) {
                return Err(Violation::LogMatching {
                    a: a.id(),
                    b: b.id(),
                    offset,
                });
            }
        }
    }
    Ok(())
}

/// The first record of `records`, at or above the current leader's log start, that it does
/// not hold at its offset: records below it were deleted (by DeleteRecords or retention, only
/// once committed: rule 17), not lost. A gap compaction left where the record was counts as
/// holding it: [`cleaned_records_are_superseded`] says a later committed record of its key is
/// there.
fn first_missing<'r, L: Log>(
    view: &ClusterView<'_, L>,
    records: impl Iterator<Item = &'r (Offset, Entry<L::Record>)>,
) -> Option<(BrokerId, Offset, String)>
where
    L::Record: Ord + Debug + 'r,
{
    let leader = view.current_leader()?;
    let start = leader.log().log_start_offset();
    records
        .filter(|(o, e)| {
            *o >= start && leader.entry(*o).as_ref().map(cleaned::<L>) != Some(cleaned::<L>(e))
        })
        .map(|(o, e)| (leader.id(), *o, format!("{:?}@{}", e.record, e.epoch)))
        .next()
}

/// **CommittedRecordsSurviveLeaderFailure**: every record that was committed or acknowledged
/// under acks=all is held, at the same offset, by the current leader, unless it lies below the
/// leader's log start (deleted).
pub fn committed_records_survive<L: Log>(view: &ClusterView<'_, L>) -> Result<(), Violation>
where
    L::Record: Ord + Debug,
{
    let records = view
        .history
        .committed
        .iter()
        .chain(&view.history.acknowledged);
    match first_missing(view, records) {
        Some((leader, offset, record)) => Err(Violation::CommittedRecordLost {
            leader,
            offset,
            record,
        }),
        None => Ok(()),
    }
}

/// **ConsumerReadsAreNeverRevoked**: every record a consumer was given is held, at the same
/// offset, by the current leader, unless it lies below the leader's log start (deleted).
pub fn consumer_reads_never_revoked<L: Log>(view: &ClusterView<'_, L>) -> Result<(), Violation>
where
    L::Record: Ord + Debug,
{
    match first_missing(view, view.history.consumed.iter()) {
        Some((leader, offset, record)) => Err(Violation::ConsumedRecordRevoked {
            leader,
            offset,
            record,
        }),
        None => Ok(()),
    }
}

/// **HighWatermarkKeepsUp** (progress at the leader): a replica that believes it leads, whose
/// confirmed ISR has at least `min.insync.replicas` members and another member besides
/// itself, with no ISR change pending and every other ISR member's fetch recorded in this
/// epoch, has a HW no lower than what those fetches and its own log prove: `min(its replicated
/// offset, their fetch offsets)`, where the replicated offset is its durable log end under
/// `flush=always` ([`Replica::replicated_offset`]). The step that brings the proof (a fetch, or
/// the leader's flush) raises the HW, so while the ISR is healthy the HW advances as fast as the
/// followers fetch and the leader flushes. (A leader whose ISR is itself alone is left out: it raises its
/// HW at its next write or fetch, not on taking office; see spec/properties.md.)
pub fn high_watermark_keeps_up<L: Log>(view: &ClusterView<'_, L>) -> Result<(), Violation>
where
    L::Record: Ord,
{
    for &r in view.replicas.iter() {
        let Some(l) = r.leader_state() else { continue };
        if l.proposed_isr.is_some() || l.isr.len() < l.min_insync_replicas.max(2) {
            continue;
        }
        let mut proven = r.replicated_offset(view.flush);
        let fetched = l.isr.iter().filter(|&&m| m != r.id()).all(|m| {
            match l.followers.get(m).and_then(|p| p.log_end_offset) {
                Some(p) => {
                    proven = proven.min(p);
                    true
                }
                None => false,
            }
        });
        if fetched && r.high_watermark() < proven {
            return Err(Violation::HighWatermarkBehind {
                leader: r.id(),
                hw: r.high_watermark(),
                proven,
            });
        }
    }
    Ok(())
}

/// Whether a follower that received `answer` from `from` made progress: when the answer is to
/// its question (the epoch it asks about), from its leader, in its epoch, and not an error, it
/// ends its reconciliation or asks about an older epoch than before. The epoch asked about is
/// the latest in its log, and each answer about an older epoch truncates that one away (rule 3,
/// KIP-279), so reconciliation ends within as many rounds as the log has epochs: a bounded form
/// of "reconciliation terminates". Other answers (late, stale, failed) are not judged.
pub fn round_progressed<L: Log>(
    before: &Replica<L>,
    from: BrokerId,
    answer: &crate::message::OffsetForLeaderEpochResponse,
    after: &Replica<L>,
) -> bool {
    use crate::replica::{FollowerPhase, FollowerState, Role};
    let reconciling = |r: &Replica<L>| match r.role() {
        Role::Follower(FollowerState {
            leader: Some(l),
            phase: FollowerPhase::Reconciling { requested },
            ..
        }) => Some((*l, r.leader_epoch(), *requested)),
        _ => None,
    };
    let Some((leader, epoch, asked)) = reconciling(before) else {
        return true;
    };
    let to_the_question = leader == from
        && answer.leader_epoch == epoch
        && answer.requested_epoch == asked
        && answer.result.is_ok();
    match reconciling(after) {
        Some((l, e, again)) if to_the_question && l == leader && e == epoch => again < asked,
        _ => true,
    }
}

/// **ReconciliationProgresses**: no follower has acted on an OffsetForLeaderEpoch answer
/// without progress ([`round_progressed`], as the driver records it).
pub fn reconciliation_progresses<L: Log>(view: &ClusterView<'_, L>) -> Result<(), Violation>
where
    L::Record: Ord,
{
    match view.stalled_reconciliation {
        Some(follower) => Err(Violation::ReconciliationStalled { follower }),
        None => Ok(()),
    }
}

/// **FollowersFetchingEveryRoundStayInIsr**: in a timely run ([`ClusterView::timely`]) every
/// follower fetches every round, so none leaves the ISR: every replica the controller assigns
/// stays in its ISR and in each leader's, and no leader proposes an ISR without it. Kafka's
/// caught-up rule (rule 19, KAFKA-4485) is what keeps it so under steady writes, as long as a
/// fetch round fits well within `replica_lag_max` (spec/properties.md).
pub fn followers_fetching_every_round_stay_in_isr<L: Log>(
    view: &ClusterView<'_, L>,
) -> Result<(), Violation>
where
    L::Record: Ord,
{
    if !view.timely {
        return Ok(());
    }
    let Some(state) = view.controller.partition(view.partition) else {
        return Ok(());
    };
    let left = |isr: &BTreeSet<BrokerId>, by: String| match state
        .assigned
        .iter()
        .find(|b| !isr.contains(b))
    {
        Some(&follower) => Err(Violation::LeftIsr { follower, by }),
        None => Ok(()),
    };
    left(&state.isr, "of the controller".to_string())?;
    for r in &view.replicas {
        if let Some(l) = r.leader_state() {
            left(l.isr(), format!("of leader {}", r.id()))?;
            if let Some(proposed) = l.proposed_isr() {
                left(proposed, format!("that {} proposed", r.id()))?;
            }
        }
    }
    Ok(())
}

/// **TimelyRequestsAreNotRetried**: in a timely run ([`ClusterView::timely`]) every request a
/// follower sends (Fetch, OffsetForLeaderEpoch) and every AlterPartition a leader sends is
/// answered before the timer that would send it again comes due, as the driver saw it
/// ([`ClusterView::timely_retry`]): a timeout is for a lost request or a lost peer, never for
/// one that is merely slow within the network's bound. A request timer a tick early (a held
/// Fetch's wait forgotten in it) retries for nothing, and this says so.
pub fn timely_requests_are_not_retried<L: Log>(view: &ClusterView<'_, L>) -> Result<(), Violation>
where
    L::Record: Ord,
{
    match view.timely_retry {
        Some(broker) => Err(Violation::RetriedInTimelyRun { broker }),
        None => Ok(()),
    }
}

/// How many replicas `leader` knows to hold the entry at `offset`: itself, if its log holds it,
/// and each follower whose last fetch in its epoch proved a log end past it. What a leader
/// knows, not what the logs hold: under page-cache acknowledgement a follower may lose what it
/// reported in an unclean crash (KIP-966 bounds those crashes, not the count).
pub fn known_copies<L: Log>(leader: &Replica<L>, offset: Offset) -> usize {
    let own = usize::from(leader.log_end_offset() > offset);
    let followers = leader.leader_state().map_or(0, |state| {
        state
            .followers
            .values()
            .filter(|f| f.log_end_offset.is_some_and(|leo| leo > offset))
            .count()
    });
    own + followers
}

/// What the history keeps of `leader`'s acknowledgement of the acks=all write at `offset`, if
/// it knew fewer than its `min.insync.replicas` replicas to hold it ([`known_copies`]): the
/// offset and the copies it knew of, for [`History::short_acknowledgements`].
pub fn short_acknowledgement<L: Log>(
    leader: &Replica<L>,
    offset: Offset,
) -> Option<(Offset, usize)> {
    let state = leader.leader_state()?;
    let copies = known_copies(leader, offset);
    (copies < state.min_insync_replicas).then_some((offset, copies))
}

/// **AcknowledgedOnMinIsr**: every acks=all acknowledgement was given by a leader that knew at
/// least `min.insync.replicas` replicas to hold the record ([`short_acknowledgement`], which
/// the driver notes in the history as it carries the acknowledgement out). Strict min ISR guards it through
/// the high watermark; without this property a fault there is caught only if it loses a
/// committed record, which the ELR can hide.
pub fn acknowledged_on_min_isr<L: Log>(view: &ClusterView<'_, L>) -> Result<(), Violation>
where
    L::Record: Ord,
{
    match view.history.short_acknowledgements.iter().next() {
        Some(&(offset, copies)) => Err(Violation::AcknowledgedShort { offset, copies }),
        None => Ok(()),
    }
}

/// **ControllerStateIsConsistent**: in the controller's partition state, the ISR and the ELR
/// are disjoint subsets of the assigned replicas; the ELR is empty while the ISR has at least
/// `min.insync.replicas` members (KIP-966 keeps eligible replicas only below it); and the
/// partition epoch is never behind the leader epoch (every election bumps both, every other
/// change the partition epoch alone, so the two only grow, together).
pub fn controller_state_is_consistent<L: Log>(view: &ClusterView<'_, L>) -> Result<(), Violation>
where
    L::Record: Ord,
{
    let Some(state) = view.controller.partition(view.partition) else {
        return Ok(());
    };
    let what = if let Some(b) = state.isr.intersection(&state.elr).next() {
        format!(
            "{b} is in both the ISR {:?} and the ELR {:?}",
            state.isr, state.elr
        )
    } else if !state.elr.is_empty() && state.isr.len() >= state.min_insync_replicas {
        format!(
            "the ELR {:?} is not empty, but the ISR {:?} has min.insync.replicas={} members",
            state.elr, state.isr, state.min_insync_replicas
        )
    } else if let Some(b) = state
        .isr
        .union(&state.elr)
        .find(|b| !state.assigned.contains(b))
    {
        format!(
            "{b} is in the ISR or the ELR but not assigned {:?}",
            state.assigned
        )
    } else if state.partition_epoch.0 < state.leader_epoch.0 {
        format!(
            "partition epoch {} is behind leader epoch {}",
            state.partition_epoch.0, state.leader_epoch.0
        )
    } else {
        return Ok(());
    };
    Err(Violation::ControllerState { what })
}

/// **IdempotentWritesStoredOnce**: below a replica's high watermark — what a consumer may
/// read — each batch of an idempotent producer is stored at most once, and a producer's batches
/// of one epoch lie in sequence order. With every acks=all acknowledgement committed
/// (**CommittedRecordsSurviveLeaderFailure**), each acknowledged write is then in the log
/// exactly once, however often it was retried and whichever leaders took the retries.
pub fn idempotent_writes_stored_once<L: Log>(r: &Replica<L>) -> Result<(), Violation> {
    let mut last: BTreeMap<(i64, i16), i32> = BTreeMap::new();
    let committed = crate::log::shapes(r.log()).take_while(|&(o, _)| o < r.high_watermark());
    for (offset, shape) in committed {
        if let Some(batch) = shape.producer {
            let key = (batch.producer_id, batch.producer_epoch);
            let what = match last.get(&key) {
                Some(&previous) if batch.first_sequence == previous => Some("a second time"),
                // Sequence numbers wrap at i32::MAX: compare by their distance.
                Some(&previous) if batch.first_sequence.wrapping_sub(previous) < 0 => {
                    Some("after a later one")
                }
                _ => None,
            };
            if let Some(what) = what {
                return Err(Violation::StoredTwice {
                    replica: r.id(),
                    producer_id: batch.producer_id,
                    sequence: batch.first_sequence,
                    offset,
                    what,
                });
            }
            last.insert(key, batch.first_sequence);
        }
    }
    Ok(())
}

/// **LogStartWithinHighWatermark** (rule 17): a replica's log start offset is at or below its
/// high watermark, so every record a replica deleted was committed, and the replica that
/// leads next holds every committed record above its own log start.
pub fn log_start_within_high_watermark<L: Log>(r: &Replica<L>) -> Result<(), Violation> {
    let (log_start, hw) = (r.log().log_start_offset(), r.high_watermark());
    if log_start > hw {
        return Err(Violation::LogStartAboveHighWatermark {
            replica: r.id(),
            log_start,
            hw,
        });
    }
    Ok(())
}

/// **NoReadBelowLogStart**: no consumer was given records from an offset below the log start
/// of the leader that answered, as the driver saw the answers
/// ([`History::reads_below_log_start`]).
pub fn no_read_below_log_start<L: Log>(view: &ClusterView<'_, L>) -> Result<(), Violation>
where
    L::Record: Ord,
{
    match view.history.reads_below_log_start.first() {
        Some(&(from, log_start)) => Err(Violation::ReadBelowLogStart { from, log_start }),
        None => Ok(()),
    }
}

/// **CleanedRecordsAreSuperseded** (rule 18): every gap compaction left in a replica's log
/// names a key that a later record has, one the replica still holds or one that was
/// committed, so a consumer that reads the replica's log from its start ends with every key's
/// latest committed value. Broken when a replica cleans a record that an uncommitted one
/// supersedes, and a failover then truncates the newer one away: the gap stays, and the key
/// has lost its committed value. (The history may learn of a commit late — a leader's last
/// flush as it shuts down raises its HW as it leaves office — so the property does not ask
/// that the later record be committed already.)
pub fn cleaned_records_are_superseded<L: Log>(view: &ClusterView<'_, L>) -> Result<(), Violation>
where
    L::Record: Ord,
{
    for &r in &view.replicas {
        let log = r.log();
        for o in log.log_start_offset().0..log.log_end_offset().0 {
            let Some(gap) = log.entry(Offset(o)).filter(|e| is_gap::<L>(&e.record)) else {
                continue;
            };
            let key = L::key(&gap.record);
            let later = |at: u64, record: &L::Record| at > o && L::key(record) == key;
            let superseded = view
                .history
                .committed
                .iter()
                .any(|(at, e)| later(at.0, &e.record))
                || (o + 1..log.log_end_offset().0)
                    .any(|at| log.entry(Offset(at)).is_some_and(|e| later(at, &e.record)));
            if !superseded {
                return Err(Violation::CleanedUnsuperseded {
                    replica: r.id(),
                    offset: Offset(o),
                    key: key.unwrap_or_default(),
                });
            }
        }
    }
    Ok(())
}

/// **LeaderEpochsAreUnique**: no two elections gave one leader epoch to different leaders, as
/// far as the state shows them: the controller's leader and epoch, each leader's epoch, and the
/// leader each running follower follows in its epoch name one leader per epoch.
pub fn leader_epochs_are_unique<L: Log>(view: &ClusterView<'_, L>) -> Result<(), Violation>
where
    L::Record: Ord,
{
    let controller = view
        .controller
        .partition(view.partition)
        .and_then(|s| Some((s.leader_epoch, s.leader?)));
    let replicas = view.replicas.iter().filter_map(|r| match r.role() {
        Role::Leader(_) => Some((r.leader_epoch(), r.id())),
        Role::Follower(f) => Some((r.leader_epoch(), f.leader?)),
        Role::Offline => None,
    });
    let mut named: BTreeMap<LeaderEpoch, BrokerId> = BTreeMap::new();
    for (epoch, leader) in controller.into_iter().chain(replicas) {
        match named.insert(epoch, leader) {
            Some(other) if other != leader => {
                return Err(Violation::LeaderEpochTwice {
                    epoch,
                    a: other.min(leader),
                    b: other.max(leader),
                })
            }
            _ => {}
        }
    }
    Ok(())
}

/// **ReplicasAreConsistent**, for one replica: HW ≤ LEO, flushed ≤ LEO, the epoch cache is the
/// one derivable from the log, a leader is in its own ISR, and a Fetch a leader holds finds
/// nothing new (it asks from the LEO: a write answers every held Fetch, so a held one below
/// the LEO is a follower kept waiting for records it could have).
pub fn replica_is_consistent<L: Log>(r: &Replica<L>) -> Result<(), Violation> {
    let fail = |what: String| {
        Err(Violation::Replica {
            replica: r.id(),
            what,
        })
    };
    let leo = r.log_end_offset();
    if r.high_watermark() > leo {
        return fail(format!("HW {} above LEO {leo}", r.high_watermark()));
    }
    if r.log().flushed_offset() > leo {
        return fail(format!(
            "flushed offset {} above LEO {leo}",
            r.log().flushed_offset()
        ));
    }
    if *r.epoch_cache() != EpochCache::from_log(r.log()) {
        return fail(format!(
            "epoch cache {:?} is not the log's",
            r.epoch_cache().entries()
        ));
    }
    if let Some(l) = r.leader_state() {
        if !l.isr.contains(&r.id()) {
            return fail("leads but is not in its own ISR".to_string());
        }
        if let Some(p) = l.parked.values().find(|p| p.request.fetch_offset != leo) {
            return fail(format!(
                "holds {}'s Fetch from offset {}, but its LEO is {leo}",
                p.request.replica, p.request.fetch_offset
            ));
        }
    }
    Ok(())
}
