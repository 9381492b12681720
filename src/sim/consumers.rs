//! The consumer group the model drives ([`Bounds::consumers`]): consumers that join a group,
//! read and process the first partition, and commit their position; the group's coordinator
//! (the core's [`Group`]) at the broker that leads the group's offsets partition, which is
//! replicated by the same core as the data; and the ghost state the group's properties read.
//!
//! Nothing here decides for the protocol. A consumer's request to its coordinator is one step
//! (the model's consumers reach the coordinator that the controller's metadata names, as a
//! client that asked FindCoordinator does), and every answer is the core's: [`Group`] for the
//! membership and the generation check ([`Group::may_commit`], rule 16), [`group::load_point`]
//! for when and how far a new coordinator loads (rule 15), and the replica of the offsets
//! partition for what is stored and when it is acknowledged. What the model adds is what the
//! consumer application does: the group's leader assigns the partition to the first member,
//! an owner reads one committed record at a time and processes it, commits its position and
//! waits for the answer before it rejoins (what a consumer's revocation callback does), and
//! crashes. A member's session expiry is the coordinator dropping it ([`Group::leave`]): the
//! model's clock stands still, so any silence may outlast a session.
//!
//! Records of the offsets partition are indices into [`Consumers::payloads`] (plus one): a
//! commit (the generation it was made in and the position) or the group's membership as the
//! coordinator stores it ([`StoredGroup`], Kafka's group metadata record).

use super::{Cluster, Record, ReplicaId, PARTITION};
use crate::config::Config;
use crate::error::ReadError;
use crate::group::{self, Caller, Entered, Group, GroupError, Join, StoredGroup, Synced};
use crate::invariants::{
    acknowledged_commits_survive, consumer_resumes_without_loss, fenced_members_cannot_commit,
    OffsetsRecord, Violation,
};
use crate::log::{Entry, Log, MemLog};
use crate::message::{Effect, Effects};
use crate::replica::Input as ReplicaInput;
use crate::types::{Acks, BrokerId, LeaderEpoch, Offset, PartitionId, Tick};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::sync::Arc;

/// The group's clock: it stands still, so no session expires and no rebalance times out by
/// itself (a rebalance waits for every member, or for the coordinator to drop one).
const NOW: Tick = Tick(0);
/// A member's session timeout, in the group's ticks.
const SESSION_TIMEOUT: u64 = 1;
/// How long a rebalance waits for a member, in the group's ticks: longer than the clock runs.
const REBALANCE_TIMEOUT: u64 = 1;
/// A member's assignment when the group's leader gives it the partition.
const OWNS: &[u8] = &[1];

/// The group: its consumers, each broker's coordinator, the records of its offsets partition,
/// the budgets spent and the ghost state of its properties.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Consumers {
    /// Each consumer, by index.
    pub members: Vec<Consumer>,
    /// Each broker's coordinator, by broker: the group as it loaded it, while its replica of
    /// the offsets partition leads in the epoch it loaded in (a coordinator that resigns or
    /// stops forgets the group, as Kafka's unloads it).
    pub coordinators: Vec<Option<Coordinator>>,
    /// What each record of the offsets partition holds: record `r` is `payloads[r - 1]`.
    pub payloads: Vec<Payload>,
    /// Consumer crashes and pauses so far, against [`super::Bounds::consumer_failures`].
    pub failures: u8,
    /// Offset commits so far, against [`super::Bounds::commits`].
    pub commits: u8,
    /// Ghost: every record of the first partition a member processed, with its offset.
    pub processed: BTreeSet<(Offset, Entry<Record>)>,
    /// Ghost: the position of the last commit acknowledged to a consumer.
    pub acknowledged: Option<Offset>,
}

/// A broker's coordinator of the group.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Coordinator {
    /// The leader epoch of the offsets partition it loaded the group in.
    pub epoch: LeaderEpoch,
    /// The group, as loaded and changed since.
    pub group: Group,
    /// The group's committed position in the first partition: the last commit it loaded or
    /// was acknowledged since.
    pub offset: Option<Offset>,
}

/// What a record of the offsets partition holds.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Payload {
    /// An offset commit: the position, and the generation of the member that made it.
    Commit {
        /// The committer's generation.
        generation: i32,
        /// The position committed.
        offset: Offset,
    },
    /// The group's membership, stored before any member learns its assignment.
    Group(StoredGroup),
}

/// Where a consumer is in the group's protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Phase {
    /// Must join (new, or told to rejoin).
    Out,
    /// Sent JoinGroup; waits for the rebalance to complete.
    Joining,
    /// Joined the generation; waits for its assignment.
    Syncing,
    /// A member of its generation, with its assignment.
    Stable {
        /// Whether the group's leader gave it the partition.
        owns: bool,
    },
}

/// One consumer.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Consumer {
    /// Its member id; empty before the group gave it one.
    pub member_id: String,
    /// The generation it believes it is in.
    pub generation: i32,
    /// Where it is in the protocol.
    pub phase: Phase,
    /// Its position in the partition while it holds it: the next record to read.
    pub position: Option<Offset>,
    /// The position it committed last.
    pub committed: Option<Offset>,
    /// The record of its commit that awaits an answer.
    pub pending: Option<Record>,
    /// The coordinator its JoinGroup or SyncGroup went to, with the leader epoch it served
    /// in: if another serves now, the request failed (NOT_COORDINATOR) and it joins again.
    pub at: Option<(BrokerId, LeaderEpoch)>,
}

impl Consumer {
    fn new() -> Consumer {
        Consumer {
            member_id: String::new(),
            generation: -1,
            phase: Phase::Out,
            position: None,
            committed: None,
            pending: None,
            at: None,
        }
    }

    fn caller(&self) -> Caller<'_> {
        Caller {
            member_id: &self.member_id,
            instance_id: None,
            generation: self.generation,
        }
    }

    /// Told to rejoin: a member the group dropped forgets its id too.
    fn rejoin(&mut self, error: GroupError) {
        self.phase = Phase::Out;
        if error == GroupError::UnknownMember {
            self.member_id.clear();
        }
    }
}

impl Consumers {
    /// `consumers` consumers that have not joined yet, on `brokers` brokers.
    pub fn new(consumers: u8, brokers: usize) -> Consumers {
        Consumers {
            members: vec![Consumer::new(); consumers as usize],
            coordinators: vec![None; brokers],
            payloads: Vec::new(),
            failures: 0,
            commits: 0,
            processed: BTreeSet::new(),
            acknowledged: None,
        }
    }

    fn payload(&self, record: Record) -> Option<&Payload> {
        self.payloads.get(usize::from(record).checked_sub(1)?)
    }
}

/// Adds `payload` to `payloads`: the record of the offsets partition that holds it.
fn record(payloads: &mut Vec<Payload>, payload: Payload) -> Record {
    payloads.push(payload);
    Record::try_from(payloads.len()).expect("the model's bounds keep payloads few")
}

/// The JoinGroup consumer `c` sends, as the member it believes it is.
fn join(c: usize, member_id: &str) -> Join {
    Join {
        member_id: member_id.to_owned(),
        instance_id: None,
        client_id: format!("c{c}"),
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Vec::new())],
        session_timeout: SESSION_TIMEOUT,
        rebalance_timeout: REBALANCE_TIMEOUT,
        member_id_required: false,
    }
}

/// What a consumer's request leads to besides the group's change.
enum Then {
    Nothing,
    /// The coordinator at this broker appends this record to the offsets partition.
    Write(BrokerId, Record),
    /// This leader of the first partition answers a read from this offset.
    Read(ReplicaId, Offset),
}

/// One step of the group: its actions in [`super::Action`].
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum GroupAction {
    /// The broker that leads the offsets partition loads the group from it.
    Load(BrokerId),
    /// Consumer `c` sends JoinGroup.
    Join(usize),
    /// Consumer `c` asks for its JoinGroup's answer or its assignment (the group's leader hands
    /// in the assignment with it).
    Sync(usize),
    /// Consumer `c`'s heartbeat is answered with an error: the group rebalances, or dropped it.
    Heartbeat(usize),
    /// Consumer `c` reads and processes the next committed record of the partition it owns.
    Poll(usize),
    /// Consumer `c` commits its position.
    Commit(usize),
    /// Consumer `c` crashes and starts again with nothing: a new member to be.
    Crash(usize),
    /// The coordinator drops a member whose session expired (its consumer crashed, or paused).
    Expire(String),
}

impl std::fmt::Display for GroupAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GroupAction::Load(b) => write!(f, "CoordinatorLoad({b})"),
            GroupAction::Join(c) => write!(f, "ConsumerJoin(c{c})"),
            GroupAction::Sync(c) => write!(f, "ConsumerSync(c{c})"),
            GroupAction::Heartbeat(c) => write!(f, "ConsumerHeartbeat(c{c})"),
            GroupAction::Poll(c) => write!(f, "ConsumerPoll(c{c})"),
            GroupAction::Commit(c) => write!(f, "ConsumerCommit(c{c})"),
            GroupAction::Crash(c) => write!(f, "ConsumerCrash(c{c})"),
            GroupAction::Expire(m) => write!(f, "MemberExpires({m})"),
        }
    }
}

impl Cluster {
    /// The offsets partition, when the model has a group: the last partition.
    pub fn offsets_partition(&self) -> Option<PartitionId> {
        self.consumers
            .as_ref()
            .map(|_| PartitionId(self.history.len() as u32 - 1))
    }

    /// The replica that leads partition `p` by the controller's metadata and knows it: where a
    /// client that looked the leader up sends its request.
    fn metadata_leader(&self, p: PartitionId) -> Option<ReplicaId> {
        let state = self.controller.partition(p)?;
        let id = ReplicaId::new(state.leader?, p);
        let r = self.replica(id);
        (r.is_leader() && r.leader_epoch() == state.leader_epoch).then_some(id)
    }

    /// The broker that coordinates the group now, with its coordinator: the metadata's leader
    /// of the offsets partition, once it has loaded the group. A coordinator kept in
    /// [`Consumers::coordinators`] is always one of its replica's current term
    /// ([`Cluster::unload_resigned`] runs after every step).
    pub(super) fn serving(&self) -> Option<(BrokerId, &Coordinator)> {
        let consumers = self.consumers.as_deref()?;
        let id = self.metadata_leader(self.offsets_partition()?)?;
        let c = consumers.coordinators[id.broker.0 as usize].as_ref()?;
        Some((id.broker, c))
    }

    /// The group's enabled actions, in a deterministic order: each is taken only where it
    /// changes something (a request the coordinator would leave waiting is not a step).
    pub(super) fn group_actions(&self, cfg: &Config, bounds: &super::Bounds) -> Vec<GroupAction> {
        let (Some(consumers), Some(offsets)) =
            (self.consumers.as_deref(), self.offsets_partition())
        else {
            return Vec::new();
        };
        let mut out = Vec::new();
        if let Some(id) = self.metadata_leader(offsets) {
            let loaded = consumers.coordinators[id.broker.0 as usize].is_some();
            if !loaded && group::load_point(&cfg.rules, self.replica(id)).is_some() {
                out.push(GroupAction::Load(id.broker));
            }
        }
        let failures = consumers.failures < bounds.consumer_failures;
        for c in 0..consumers.members.len() {
            for action in [
                GroupAction::Join(c),
                GroupAction::Sync(c),
                GroupAction::Heartbeat(c),
                GroupAction::Poll(c),
                GroupAction::Commit(c),
            ] {
                let mut trial = consumers.clone();
                if self
                    .consumer_step(cfg, bounds, &mut trial, &action, c)
                    .is_some()
                {
                    out.push(action);
                }
            }
            // A consumer that has done nothing yet has nothing to lose.
            if failures && consumers.members[c] != Consumer::new() {
                out.push(GroupAction::Crash(c));
            }
        }
        if let Some((_, coordinator)) = self.serving() {
            for m in coordinator.group.describe().members {
                let live = consumers.members.iter().any(|c| c.member_id == m.member_id);
                if failures || !live {
                    out.push(GroupAction::Expire(m.member_id));
                }
            }
        }
        out
    }

    /// Takes a step of the group: the effects of the replica steps it made, or `None` if the
    /// action changes nothing here.
    pub(super) fn group_act(
        &mut self,
        cfg: &Config,
        bounds: &super::Bounds,
        action: &GroupAction,
    ) -> Option<Effects<Record>> {
        let offsets = self.offsets_partition()?;
        let mut consumers = self.consumers.as_deref()?.clone();
        let mut effects = Vec::new();
        let c = match action {
            GroupAction::Load(b) => {
                let id = ReplicaId::new(*b, offsets);
                let r = self.replica(id);
                let upto = group::load_point(&cfg.rules, r)?;
                let (mut stored, mut offset) = (None, None);
                for o in 0..upto.0 {
                    match r.entry(Offset(o)).and_then(|e| consumers.payload(e.record)) {
                        Some(Payload::Group(g)) => stored = Some(g.clone()),
                        Some(Payload::Commit { offset: at, .. }) => offset = Some(*at),
                        None => {}
                    }
                }
                let group = stored.map_or_else(Group::default, |g| Group::from_stored(g, NOW));
                consumers.coordinators[b.0 as usize] = Some(Coordinator {
                    epoch: r.leader_epoch(),
                    group,
                    offset,
                });
                None
            }
            GroupAction::Crash(c) => {
                consumers.failures += 1;
                consumers.members[*c] = Consumer::new();
                None
            }
            GroupAction::Expire(member) => {
                let (k, _) = self.serving()?;
                let coordinator = consumers.coordinators[k.0 as usize].as_mut()?;
                coordinator.group.leave(member, None, NOW).ok()?;
                if consumers.members.iter().any(|c| c.member_id == *member) {
                    consumers.failures += 1;
                }
                None
            }
            GroupAction::Join(c)
            | GroupAction::Sync(c)
            | GroupAction::Heartbeat(c)
            | GroupAction::Poll(c)
            | GroupAction::Commit(c) => Some(*c),
        };
        if let Some(c) = c {
            let then = self.consumer_step(cfg, bounds, &mut consumers, action, c)?;
            effects = self.carry_out(cfg, &mut consumers, c, offsets, then);
        }
        self.consumers = Some(Arc::new(consumers));
        Some(effects)
    }

    /// The replica step a request of consumer `c` leads to: the coordinator's append to the
    /// offsets partition, or the leader's answer to a read, which the consumer processes.
    fn carry_out(
        &mut self,
        cfg: &Config,
        consumers: &mut Consumers,
        c: usize,
        offsets: PartitionId,
        then: Then,
    ) -> Effects<Record> {
        match then {
            Then::Nothing => Vec::new(),
            Then::Write(broker, record) => {
                let input = ReplicaInput::Write {
                    id: u64::from(record),
                    records: vec![record],
                    acks: Acks::All,
                    producer: None,
                };
                self.replica_mut(ReplicaId::new(broker, offsets))
                    .step(cfg, NOW, input)
            }
            Then::Read(leader, from) => {
                let read = ReplicaInput::Read {
                    id: c as u64 + 1,
                    from,
                    max_entries: 1,
                    max_bytes: usize::MAX,
                };
                let log_start = self.replica(leader).log().log_start_offset();
                for effect in self.replica_mut(leader).step(cfg, NOW, read) {
                    match effect {
                        Effect::Read {
                            result: Ok(answer), ..
                        } => {
                            for (i, entry) in answer.entries.into_iter().enumerate() {
                                let offset = Offset(from.0 + i as u64);
                                consumers.processed.insert((offset, entry));
                                consumers.members[c].position = Some(offset.next());
                            }
                        }
                        // Its position was deleted (DeleteRecords): it resumes at the log
                        // start, as a consumer with auto.offset.reset=earliest does.
                        Effect::Read {
                            result: Err(ReadError::OffsetOutOfRange),
                            ..
                        } if from < log_start => {
                            consumers.members[c].position = Some(log_start);
                        }
                        _ => {}
                    }
                }
                Vec::new()
            }
        }
    }

    /// What a request of consumer `c` does to the group, and what the coordinator or the
    /// partition's leader then does (the caller's replica step): `None` if it changes nothing.
    fn consumer_step(
        &self,
        cfg: &Config,
        bounds: &super::Bounds,
        consumers: &mut Consumers,
        action: &GroupAction,
        c: usize,
    ) -> Option<Then> {
        if let GroupAction::Poll(_) = action {
            let me = &consumers.members[c];
            let position = me
                .position
                .filter(|_| me.phase == Phase::Stable { owns: true })?;
            let leader = self.metadata_leader(PARTITION)?;
            return (self.replica(leader).high_watermark() > position)
                .then_some(Then::Read(leader, position));
        }
        let (k, _) = self.serving()?;
        let coordinator = consumers.coordinators[k.0 as usize].as_mut()?;
        let here = Some((k, coordinator.epoch));
        let me = &mut consumers.members[c];
        if matches!(me.phase, Phase::Joining | Phase::Syncing) && me.at != here {
            // Its coordinator resigned: the request fails, and it joins the new one.
            if let GroupAction::Sync(_) = action {
                me.phase = Phase::Out;
                me.at = None;
                return Some(Then::Nothing);
            }
            return None;
        }
        match action {
            GroupAction::Join(_) => {
                let bounded = coordinator.group.generation() >= i32::from(bounds.max_generation);
                if me.phase != Phase::Out || me.pending.is_some() || bounded {
                    return None;
                }
                match coordinator.group.join(&join(c, &me.member_id), NOW) {
                    Ok(Entered::Waiting(id)) => {
                        me.member_id = id;
                        me.phase = Phase::Joining;
                        me.position = None;
                        me.at = here;
                    }
                    Ok(Entered::Answered(_) | Entered::MemberIdRequired(_)) => return None,
                    Err(e) if e == GroupError::UnknownMember && !me.member_id.is_empty() => {
                        me.rejoin(e)
                    }
                    Err(_) => return None,
                }
                Some(Then::Nothing)
            }
            GroupAction::Sync(_) if me.phase == Phase::Joining => {
                match coordinator.group.joined(&me.member_id, NOW) {
                    Ok(Some(joined)) => {
                        me.generation = joined.generation;
                        me.phase = Phase::Syncing;
                        if joined.members.is_empty() {
                            return Some(Then::Nothing);
                        }
                        // The group's leader assigns: the partition to the first member.
                        let plan: Vec<(String, Vec<u8>)> = joined
                            .members
                            .iter()
                            .enumerate()
                            .map(|(i, m)| {
                                (
                                    m.member_id.clone(),
                                    if i == 0 { OWNS.to_vec() } else { Vec::new() },
                                )
                            })
                            .collect();
                        let caller = Caller {
                            member_id: &me.member_id,
                            instance_id: None,
                            generation: me.generation,
                        };
                        match coordinator.group.sync(caller, None, &plan, NOW) {
                            Ok(Synced::Store(stored)) => {
                                let record =
                                    record(&mut consumers.payloads, Payload::Group(stored));
                                Some(Then::Write(k, record))
                            }
                            Ok(_) => Some(Then::Nothing),
                            Err(e) => {
                                me.rejoin(e);
                                Some(Then::Nothing)
                            }
                        }
                    }
                    Ok(None) => None,
                    Err(e) => {
                        me.rejoin(e);
                        Some(Then::Nothing)
                    }
                }
            }
            GroupAction::Sync(_) if me.phase == Phase::Syncing => {
                match coordinator.group.sync(me.caller(), None, &[], NOW) {
                    Ok(Synced::Assignment(assignment)) => {
                        let owns = assignment == OWNS;
                        me.phase = Phase::Stable { owns };
                        // An owner resumes from the group's committed position (OffsetFetch),
                        // or from the start without one.
                        me.position = owns.then(|| coordinator.offset.unwrap_or(Offset(0)));
                        me.committed = coordinator.offset.filter(|_| owns);
                        Some(Then::Nothing)
                    }
                    Ok(Synced::Store(_) | Synced::Wait) => None,
                    Err(e) => {
                        me.rejoin(e);
                        Some(Then::Nothing)
                    }
                }
            }
            GroupAction::Heartbeat(_) => {
                if !matches!(me.phase, Phase::Stable { .. }) {
                    return None;
                }
                let e = coordinator.group.heartbeat(me.caller(), NOW).err()?;
                me.rejoin(e);
                Some(Then::Nothing)
            }
            GroupAction::Commit(_) => {
                let position = me.position?;
                let member = matches!(me.phase, Phase::Stable { owns: true } | Phase::Out);
                if !member
                    || me.member_id.is_empty()
                    || me.pending.is_some()
                    || me.committed == Some(position)
                    || consumers.commits >= bounds.commits
                {
                    return None;
                }
                consumers.commits += 1;
                if let Err(e) = coordinator.group.may_commit(&cfg.rules, me.caller(), NOW) {
                    me.rejoin(e);
                    return Some(Then::Nothing);
                }
                me.committed = Some(position);
                let generation = me.generation;
                let record = record(
                    &mut consumers.payloads,
                    Payload::Commit {
                        generation,
                        offset: position,
                    },
                );
                me.pending = Some(record);
                Some(Then::Write(k, record))
            }
            _ => None,
        }
    }

    /// The answer to a write of the offsets partition by `leader`: a commit acknowledged (the
    /// coordinator's position moves to it, and its consumer hears so), or the group's
    /// membership stored (its members may learn their assignments); or, when `stored` is
    /// false, the write failed.
    /// `leader` is the broker whose step answered, when known.
    pub(super) fn offsets_written(
        &mut self,
        leader: Option<BrokerId>,
        record: Record,
        stored: bool,
    ) {
        let Some(consumers) = self.consumers.as_mut() else {
            return;
        };
        let consumers = Arc::make_mut(consumers);
        let payload = consumers.payload(record).cloned();
        let coordinator = leader.and_then(|b| consumers.coordinators[b.0 as usize].as_mut());
        match payload {
            Some(Payload::Commit { offset, .. }) => {
                if let (Some(coordinator), true) = (coordinator, stored) {
                    coordinator.offset = Some(offset);
                }
                for me in consumers.members.iter_mut() {
                    if me.pending == Some(record) {
                        me.pending = None;
                        if stored {
                            consumers.acknowledged = Some(offset);
                        }
                    }
                }
            }
            Some(Payload::Group(g)) => {
                if let Some(coordinator) = coordinator {
                    coordinator.group.stored_result(g.generation, stored, NOW);
                }
            }
            None => {}
        }
    }

    /// After a step: a coordinator whose replica no longer leads in the epoch it loaded in, or
    /// stopped, forgets the group.
    pub(super) fn unload_resigned(&mut self) {
        let Some(offsets) = self.offsets_partition() else {
            return;
        };
        let resigned: Vec<usize> = self.consumers.as_deref().map_or(Vec::new(), |consumers| {
            consumers
                .coordinators
                .iter()
                .enumerate()
                .filter(|(b, c)| {
                    c.as_ref().is_some_and(|c| {
                        let r = self.replica(ReplicaId::new(BrokerId(*b as u32), offsets));
                        !r.is_leader() || r.leader_epoch() != c.epoch
                    })
                })
                .map(|(b, _)| b)
                .collect()
        });
        if let (false, Some(consumers)) = (resigned.is_empty(), self.consumers.as_mut()) {
            let consumers = Arc::make_mut(consumers);
            for b in resigned {
                consumers.coordinators[b] = None;
            }
        }
    }

    /// Checks one of the group's properties ([`crate::Property::is_group`]); `Ok` without a
    /// group.
    pub(super) fn check_group(&self, property: crate::Property) -> Result<(), Violation> {
        let (Some(consumers), Some(offsets)) =
            (self.consumers.as_deref(), self.offsets_partition())
        else {
            return Ok(());
        };
        let serving = self.serving();
        match property {
            crate::Property::ConsumerResumesWithoutLoss => {
                let resume = consumers
                    .members
                    .iter()
                    .filter_map(|c| c.position)
                    .chain(serving.and_then(|(_, c)| c.offset));
                // The furthest any replica's log start moved: only DeleteRecords at the leader
                // moves one (followers follow it), and only over committed records (rule 17).
                let deleted_below = self
                    .replicas_of(PARTITION)
                    .map(|r| r.log().log_start_offset())
                    .max()
                    .unwrap_or(Offset(0));
                consumer_resumes_without_loss::<MemLog<Record>>(
                    &self.history[PARTITION.0 as usize].committed,
                    &consumers.processed,
                    resume,
                    deleted_below,
                )
            }
            crate::Property::AcknowledgedCommitsSurvive => acknowledged_commits_survive(
                consumers.acknowledged,
                serving.map(|(b, c)| (b, c.offset)),
            ),
            crate::Property::FencedMembersCannotCommit => {
                self.replicas_of(offsets).try_for_each(|r| {
                    let records = (0..r.log_end_offset().0).filter_map(|o| {
                        let entry = r.entry(Offset(o))?;
                        let record = match consumers.payload(entry.record)? {
                            Payload::Commit { generation, .. } => OffsetsRecord::Commit {
                                generation: *generation,
                            },
                            Payload::Group(g) => OffsetsRecord::Group {
                                generation: g.generation,
                            },
                        };
                        Some((Offset(o), record))
                    });
                    fenced_members_cannot_commit(r.id(), records)
                })
            }
            _ => Ok(()),
        }
    }
}
