//! A consumer group at its coordinator: Kafka's classic rebalance protocol (JoinGroup,
//! SyncGroup, Heartbeat, LeaveGroup, and the generation check of OffsetCommit) as pure state
//! transitions. Time enters as [`Tick`]s, in whatever unit the driver measures the members'
//! timeouts in (the runtime: milliseconds); nothing here waits. A driver hands each request to
//! the group and answers with what comes back; a join or sync that cannot be answered yet is
//! asked again ([`Group::joined`], [`Group::sync`]) when the group changes or time passes.
//!
//! The members decide the assignment, as in Kafka: after a rebalance the coordinator hands
//! every member's metadata to the group's leader, which assigns and returns the assignment
//! through SyncGroup. A rebalance starts when a member joins, leaves or misses its session
//! timeout; the others learn of it from their heartbeats (REBALANCE_IN_PROGRESS) and join
//! again; it ends when every member has, or at the longest rebalance timeout without the
//! laggards. Static members (KIP-345: a `group.instance.id`) keep their place across restarts.
//!
//! A driver that records what it does hands the group every request as one [`Input`] through
//! [`Group::step`] (the runtime's coordinator does, into the broker's trace), so that a replay
//! can check each answer against the core's.
//!
//! The generation is persisted before any member learns its assignment ([`Synced::Store`],
//! Kafka's order): a coordinator that takes over loads it ([`Group::from_stored`]) and the
//! members carry on in it, while a member of an older generation is refused wherever it
//! commits (spec/protocol.md §8; `tests/group.rs`). The model drives it (`sim::Consumers`,
//! spec/protocol.md §8.1), checking ConsumerResumesWithoutLoss, AcknowledgedCommitsSurvive and
//! FencedMembersCannotCommit.

use crate::config::Rules;
use crate::log::Log;
use crate::replica::Replica;
use crate::types::{Offset, Tick};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

mod step;

pub use step::{Change, Identity, Input, Output};

/// Why a group request was refused, with Kafka's error code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum GroupError {
    /// Another broker coordinates the group.
    #[error("NOT_COORDINATOR: another broker coordinates this group")]
    NotCoordinator,
    /// The caller's generation is not the group's.
    #[error("ILLEGAL_GENERATION: the group has moved on to another generation")]
    IllegalGeneration,
    /// The joining member shares no assignment protocol (or protocol type) with the others.
    #[error("INCONSISTENT_GROUP_PROTOCOL: no assignment protocol common to every member")]
    InconsistentProtocol,
    /// The caller is not a member of the group.
    #[error("UNKNOWN_MEMBER_ID: not a member of the group")]
    UnknownMember,
    /// The session timeout asked for is outside the coordinator's bounds.
    #[error("INVALID_SESSION_TIMEOUT: outside the coordinator's bounds")]
    InvalidSessionTimeout,
    /// A rebalance is in progress: the member must join again.
    #[error("REBALANCE_IN_PROGRESS: join the group again")]
    RebalanceInProgress,
    /// The group still has members (it cannot be deleted).
    #[error("NON_EMPTY_GROUP: the group still has members")]
    NonEmptyGroup,
    /// No such group.
    #[error("GROUP_ID_NOT_FOUND: no such group")]
    GroupIdNotFound,
    /// A newer member holds the caller's static instance id.
    #[error("FENCED_INSTANCE_ID: another member has taken over this group.instance.id")]
    FencedInstanceId,
    /// The group's membership could not be stored.
    #[error("COORDINATOR_NOT_AVAILABLE: the group's membership could not be stored")]
    CoordinatorNotAvailable,
}

impl GroupError {
    /// Kafka's error code.
    pub fn code(self) -> i16 {
        match self {
            GroupError::NotCoordinator => 16,
            GroupError::IllegalGeneration => 22,
            GroupError::InconsistentProtocol => 23,
            GroupError::UnknownMember => 25,
            GroupError::InvalidSessionTimeout => 26,
            GroupError::RebalanceInProgress => 27,
            GroupError::NonEmptyGroup => 68,
            GroupError::GroupIdNotFound => 69,
            GroupError::FencedInstanceId => 82,
            GroupError::CoordinatorNotAvailable => 15,
        }
    }
}

/// A JoinGroup, as the group needs it. Timeouts are in the driver's ticks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Join {
    /// Empty for a new member (or a restarted static one), which is then given an id.
    pub member_id: String,
    /// `group.instance.id`: set for a static member.
    pub instance_id: Option<String>,
    /// The client's `client.id`.
    pub client_id: String,
    /// The kind of group (`consumer` for consumers): every member's must be the same.
    pub protocol_type: String,
    /// Assignment protocols the member offers, in its order of preference, with its metadata
    /// for each (opaque to the coordinator: the leader reads it).
    pub protocols: Vec<(String, Vec<u8>)>,
    /// How long the member may stay silent before it is dropped, in ticks.
    pub session_timeout: u64,
    /// How long a rebalance waits for the member to join, in ticks.
    pub rebalance_timeout: u64,
    /// Whether a new member without an id is first given one and asked to join again with it
    /// (KIP-394, JoinGroup v4+), so that a client whose first answer is lost does not leave a
    /// member behind that the group waits for: its id is pending, not a member, until it joins
    /// with it, and is forgotten after its session timeout.
    pub member_id_required: bool,
}

/// A completed join: what the JoinGroup response carries.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Joined {
    /// The generation the rebalance made.
    pub generation: i32,
    /// The group's protocol type.
    pub protocol_type: String,
    /// The assignment protocol chosen.
    pub protocol: String,
    /// The member id of the group's leader, which assigns.
    pub leader: String,
    /// This member's id.
    pub member_id: String,
    /// For the leader only: every member with its instance id and its metadata for the chosen
    /// protocol.
    pub members: Vec<JoinedMember>,
}

/// One member as the group's leader sees it in a JoinGroup answer.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct JoinedMember {
    /// The member's id.
    pub member_id: String,
    /// Its static instance id, if any.
    pub instance_id: Option<String>,
    /// Its metadata for the chosen protocol (a consumer's subscription).
    pub metadata: Vec<u8>,
}

/// A member's identity in a SyncGroup, Heartbeat or OffsetCommit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Caller<'a> {
    /// The member id the request names.
    pub member_id: &'a str,
    /// `group.instance.id`, from the versions of the request that carry it.
    pub instance_id: Option<&'a str>,
    /// The generation the request names (-1 outside group membership).
    pub generation: i32,
}

/// What entering a join led to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Entered {
    /// Answered at once (a static member rejoining a stable group).
    Answered(Joined),
    /// Waits for the rebalance as this member id: ask [`Group::joined`].
    Waiting(String),
    /// A new member must join again with this member id (KIP-394: MEMBER_ID_REQUIRED).
    MemberIdRequired(String),
}

/// What a SyncGroup gets now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Synced {
    /// The member's assignment in the current generation.
    Assignment(Vec<u8>),
    /// The leader handed in the assignment: persist this, report with [`Group::stored_result`],
    /// then ask again. No member gets its part before.
    Store(StoredGroup),
    /// Not yet: ask again when the group changes or time passes.
    Wait,
}

/// A group as DescribeGroups and ListGroups report it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupDescription {
    /// Kafka's name of the group's state: Empty, PreparingRebalance, CompletingRebalance or
    /// Stable.
    pub state: &'static str,
    /// The group's protocol type.
    pub protocol_type: String,
    /// The assignment protocol of the current generation (empty while none is chosen).
    pub protocol: String,
    /// The current generation.
    pub generation: i32,
    /// Every member.
    pub members: Vec<MemberDescription>,
}

/// One member as DescribeGroups reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberDescription {
    /// The member's id.
    pub member_id: String,
    /// Its static instance id, if any.
    pub instance_id: Option<String>,
    /// Its client's `client.id`.
    pub client_id: String,
    /// The member's metadata for the current protocol (for consumers: its subscription).
    pub metadata: Vec<u8>,
    /// What the leader assigned it in the current generation.
    pub assignment: Vec<u8>,
}

/// A group's membership as its coordinator persists it, for the next coordinator to load
/// (Kafka's `GroupMetadataValue`): the generation, its protocol and leader, and each member
/// with its subscription and assignment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StoredGroup {
    /// The group's protocol type.
    pub protocol_type: String,
    /// The generation stored.
    pub generation: i32,
    /// The generation's assignment protocol; empty while none is chosen.
    pub protocol: String,
    /// The member id of the generation's leader.
    pub leader: Option<String>,
    /// The generation's members.
    pub members: Vec<StoredMember>,
}

/// One member of a [`StoredGroup`]; timeouts in the driver's ticks.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StoredMember {
    /// The member's id.
    pub member_id: String,
    /// Its static instance id, if any.
    pub instance_id: Option<String>,
    /// Its client's `client.id`.
    pub client_id: String,
    /// Its session timeout, in ticks.
    pub session_timeout: u64,
    /// Its rebalance timeout, in ticks.
    pub rebalance_timeout: u64,
    /// The member's metadata for the generation's protocol (a consumer's subscription).
    pub subscription: Vec<u8>,
    /// What the leader assigned it.
    pub assignment: Vec<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct Member {
    instance_id: Option<String>,
    client_id: String,
    protocols: Vec<(String, Vec<u8>)>,
    session_timeout: u64,
    rebalance_timeout: u64,
    last_seen: Tick,
    /// Has joined the rebalance in progress.
    joined: bool,
    assignment: Vec<u8>,
}

impl Member {
    fn offers(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|(name, _)| name == protocol)
    }

    fn metadata_for(&self, protocol: &str) -> Vec<u8> {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, meta)| meta.clone())
            .unwrap_or_default()
    }

    fn expired(&self, now: Tick) -> bool {
        now.0.saturating_sub(self.last_seen.0) > self.session_timeout
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
enum Phase {
    /// No members.
    #[default]
    Empty,
    /// Waiting for every member to join, until the deadline (Kafka's PreparingRebalance); a
    /// group that was empty also waits until `not_before` for more members to come
    /// (`group.initial.rebalance.delay.ms`).
    Joining {
        deadline: Tick,
        not_before: Tick,
    },
    /// Joined: waiting for the leader's assignment, then for it to be stored (Kafka's
    /// CompletingRebalance).
    Syncing,
    Stable,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Empty => "Empty",
            Phase::Joining { .. } => "PreparingRebalance",
            Phase::Syncing => "CompletingRebalance",
            Phase::Stable => "Stable",
        }
    }
}

/// One consumer group at its coordinator.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Group {
    generation: i32,
    phase: Phase,
    protocol_type: String,
    /// The assignment protocol chosen for the current generation.
    protocol: String,
    leader: Option<String>,
    members: BTreeMap<String, Member>,
    /// Member ids given to new members that must join again with them (KIP-394), with when
    /// and for how long (their session timeout) each stays reserved.
    pending: BTreeMap<String, (Tick, u64)>,
    /// JoinGroup answers of the last completed rebalance, taken by the waiting members.
    answers: BTreeMap<String, Joined>,
    next_member: u64,
    /// Counts the changes a waiting join or sync may be answered by.
    changes: u64,
    /// `group.initial.rebalance.delay.ms`, in ticks: how long the first member of an empty group
    /// waits for others before its rebalance completes (0: none).
    initial_delay: u64,
}

impl Group {
    /// The group with `group.initial.rebalance.delay.ms` set, in ticks: when a member joins it
    /// empty, the rebalance waits that long for others (and as long again after each newcomer,
    /// within the longest rebalance timeout), so consumers started together share one
    /// generation instead of one rebalance each (Kafka's default: 3 s; 0 for none, as
    /// [`Group::default`]).
    pub fn with_initial_delay(mut self, ticks: u64) -> Group {
        self.initial_delay = ticks;
        self
    }

    /// A count of the changes that may answer a waiting join or sync: a driver that holds
    /// them wakes them when it moves.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// The group's current generation (0 before its first rebalance completes).
    pub fn generation(&self) -> i32 {
        self.generation
    }

    /// JoinGroup: adds or updates the joining member and starts a rebalance if none is in
    /// progress. Session timeouts are the driver's to bound (INVALID_SESSION_TIMEOUT).
    pub fn join(&mut self, join: &Join, now: Tick) -> Result<Entered, GroupError> {
        self.expire(now);
        let others_agree = self
            .members
            .iter()
            .filter(|(id, _)| **id != join.member_id)
            .all(|(_, m)| join.protocols.iter().any(|(name, _)| m.offers(name)));
        let same_type = self.members.is_empty() || self.protocol_type == join.protocol_type;
        if join.protocols.is_empty() || !others_agree || !same_type {
            return Err(GroupError::InconsistentProtocol);
        }
        let holder = join
            .instance_id
            .as_deref()
            .and_then(|i| self.instance_member(i))
            .map(str::to_owned);
        let member_id = match (join.member_id.as_str(), holder) {
            ("", Some(old)) => {
                let new = self.fresh_id(join);
                return Ok(match self.replace_static(&old, &new, join, now) {
                    Some(joined) => Entered::Answered(joined),
                    None => {
                        self.try_complete(now);
                        Entered::Waiting(new)
                    }
                });
            }
            ("", None) if join.member_id_required => {
                let id = self.fresh_id(join);
                self.pending.insert(id.clone(), (now, join.session_timeout));
                return Ok(Entered::MemberIdRequired(id));
            }
            ("", None) => self.fresh_id(join),
            (id, Some(old)) if id != old => return Err(GroupError::FencedInstanceId),
            (id, _) if self.members.contains_key(id) => id.to_owned(),
            (id, _) if self.pending.remove(id).is_some() => id.to_owned(),
            _ => return Err(GroupError::UnknownMember),
        };
        self.protocol_type = join.protocol_type.clone();
        let was_empty = self.members.is_empty();
        let new_member = !self.members.contains_key(&member_id);
        if !matches!(self.phase, Phase::Joining { .. }) {
            self.start_rebalance(now);
        }
        let assignment = self
            .members
            .get(&member_id)
            .map(|m| m.assignment.clone())
            .unwrap_or_default();
        self.members.insert(
            member_id.clone(),
            Member {
                instance_id: join.instance_id.clone(),
                client_id: join.client_id.clone(),
                protocols: join.protocols.clone(),
                session_timeout: join.session_timeout,
                rebalance_timeout: join.rebalance_timeout,
                last_seen: now,
                joined: true,
                assignment,
            },
        );
        if let Phase::Joining {
            deadline,
            not_before,
        } = &mut self.phase
        {
            *deadline = (*deadline).max(Tick(now.0 + join.rebalance_timeout));
            // Kafka's InitialDelayedJoin: the first member of an empty group waits the initial
            // delay for others, and each newcomer meanwhile extends it, within the deadline.
            let delaying = was_empty || (new_member && now < *not_before);
            if delaying && self.initial_delay > 0 {
                *not_before = Tick(now.0 + self.initial_delay).min(*deadline);
            }
        }
        self.answers.remove(&member_id);
        self.changes += 1;
        self.try_complete(now);
        Ok(Entered::Waiting(member_id))
    }

    /// A waiting join's answer, once its rebalance is complete; `Ok(None)` while it is not.
    pub fn joined(&mut self, member_id: &str, now: Tick) -> Result<Option<Joined>, GroupError> {
        self.expire(now);
        self.try_complete(now);
        if let Some(answer) = self.answers.remove(member_id) {
            return Ok(Some(answer));
        }
        if self.members.contains_key(member_id) {
            Ok(None)
        } else {
            Err(GroupError::UnknownMember)
        }
    }

    /// SyncGroup. The leader hands in the assignment and gets [`Synced::Store`]; every member
    /// gets its part once the generation is stored. `protocol`, when the request names one
    /// (v5), must be the group's.
    pub fn sync(
        &mut self,
        caller: Caller<'_>,
        protocol: Option<(&str, &str)>,
        assignments: &[(String, Vec<u8>)],
        now: Tick,
    ) -> Result<Synced, GroupError> {
        self.expire(now);
        self.member(caller.member_id, caller.instance_id)?;
        if let Some((kind, name)) = protocol {
            if kind != self.protocol_type || name != self.protocol {
                return Err(GroupError::InconsistentProtocol);
            }
        }
        self.seen(caller.member_id, now);
        self.settled_in(caller.generation)?;
        match self.phase {
            Phase::Stable => Ok(Synced::Assignment(
                self.members
                    .get(caller.member_id)
                    .map(|m| m.assignment.clone())
                    .unwrap_or_default(),
            )),
            Phase::Syncing if self.leader.as_deref() == Some(caller.member_id) => {
                for (id, assignment) in assignments {
                    if let Some(m) = self.members.get_mut(id) {
                        m.assignment = assignment.clone();
                    }
                }
                Ok(Synced::Store(self.stored()))
            }
            _ => Ok(Synced::Wait),
        }
    }

    /// How storing `generation` ended: stored, the group is Stable and its members get their
    /// parts; not stored, it rebalances and no member ever learns that assignment.
    pub fn stored_result(&mut self, generation: i32, stored: bool, now: Tick) {
        if self.phase == Phase::Syncing && self.generation == generation {
            self.changes += 1;
            if stored {
                self.phase = Phase::Stable;
            } else {
                self.start_rebalance(now);
            }
        }
    }

    /// Heartbeat: keeps the member's session; REBALANCE_IN_PROGRESS tells it to join again.
    pub fn heartbeat(&mut self, caller: Caller<'_>, now: Tick) -> Result<(), GroupError> {
        self.expire(now);
        self.member(caller.member_id, caller.instance_id)?;
        self.seen(caller.member_id, now);
        self.settled_in(caller.generation)
    }

    /// LeaveGroup of one member, named by member id, instance id or both: it goes at once, and
    /// the others rebalance without it.
    pub fn leave(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        now: Tick,
    ) -> Result<(), GroupError> {
        let id = match instance_id {
            Some(instance) => {
                let holder = self
                    .instance_member(instance)
                    .ok_or(GroupError::UnknownMember)?;
                if !member_id.is_empty() && member_id != holder {
                    return Err(GroupError::FencedInstanceId);
                }
                holder.to_owned()
            }
            None => member_id.to_owned(),
        };
        self.members.remove(&id).ok_or(GroupError::UnknownMember)?;
        self.answers.remove(&id);
        self.membership_changed(now);
        Ok(())
    }

    /// Whether an OffsetCommit may go ahead, by Kafka's rules. A consumer outside group
    /// membership (generation -1, no member id) commits only to a group without members. A
    /// member commits in the group's current generation, in any phase but
    /// CompletingRebalance: while a rebalance is being prepared the members still own what
    /// they were assigned, and commit it before they rejoin (refusing it would make the next
    /// owner read again what was processed); once they have joined, the leader may be handing
    /// their partitions to others, so commits wait for the new generation. So a consumer that
    /// lost its partitions cannot commit over their new owner (FencedMembersCannotCommit).
    /// With rule 16 off ([`Rules::generation_check`]) every commit is accepted.
    pub fn may_commit(
        &mut self,
        rules: &Rules,
        caller: Caller<'_>,
        now: Tick,
    ) -> Result<(), GroupError> {
        self.expire(now);
        if !rules.generation_check {
            return Ok(());
        }
        if !is_member(caller) {
            return if self.members.is_empty() {
                Ok(())
            } else {
                Err(GroupError::UnknownMember)
            };
        }
        self.member(caller.member_id, caller.instance_id)?;
        self.seen(caller.member_id, now);
        if caller.generation != self.generation {
            Err(GroupError::IllegalGeneration)
        } else if self.phase == Phase::Syncing {
            Err(GroupError::RebalanceInProgress)
        } else {
            Ok(())
        }
    }

    /// The group as DescribeGroups reports it, as of its last step: a driver steps it with
    /// [`Input::Expire`] first, so that members whose session ran out are gone.
    pub fn describe(&self) -> GroupDescription {
        GroupDescription {
            state: self.phase.name(),
            protocol_type: self.protocol_type.clone(),
            protocol: self.protocol.clone(),
            generation: self.generation,
            members: self
                .members
                .iter()
                .map(|(id, m)| MemberDescription {
                    member_id: id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    metadata: m.metadata_for(&self.protocol),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }

    /// The group's protocol type and chosen protocol (SyncGroup v5 answers with them).
    pub fn protocol(&self) -> (String, String) {
        (self.protocol_type.clone(), self.protocol.clone())
    }

    /// Whether the group has members (DeleteGroups refuses it then: NON_EMPTY_GROUP), as of
    /// its last step ([`Input::Expire`] drops those whose session ran out).
    pub fn has_members(&self) -> bool {
        !self.members.is_empty()
    }

    /// What the coordinator persists of the group.
    pub fn stored(&self) -> StoredGroup {
        StoredGroup {
            protocol_type: self.protocol_type.clone(),
            generation: self.generation,
            protocol: self.protocol.clone(),
            leader: self.leader.clone(),
            members: self
                .members
                .iter()
                .map(|(id, m)| StoredMember {
                    member_id: id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    session_timeout: m.session_timeout,
                    rebalance_timeout: m.rebalance_timeout,
                    subscription: m.metadata_for(&self.protocol),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }

    /// A group as a new coordinator loads it: Stable in its stored generation (Empty without
    /// members), each member's session starting now, as Kafka loads one.
    pub fn from_stored(stored: StoredGroup, now: Tick) -> Group {
        let members: BTreeMap<String, Member> = stored
            .members
            .into_iter()
            .map(|m| {
                let member = Member {
                    instance_id: m.instance_id,
                    client_id: m.client_id,
                    protocols: vec![(stored.protocol.clone(), m.subscription)],
                    session_timeout: m.session_timeout,
                    rebalance_timeout: m.rebalance_timeout,
                    last_seen: now,
                    joined: false,
                    assignment: m.assignment,
                };
                (m.member_id, member)
            })
            .collect();
        let phase = if members.is_empty() {
            Phase::Empty
        } else {
            Phase::Stable
        };
        Group {
            generation: stored.generation,
            phase,
            protocol_type: stored.protocol_type,
            protocol: stored.protocol,
            leader: stored.leader.filter(|l| members.contains_key(l)),
            members,
            pending: BTreeMap::new(),
            answers: BTreeMap::new(),
            next_member: 0,
            changes: 0,
            initial_delay: 0,
        }
    }

    /// Drops members whose session expired (not those waiting in a join), and member ids
    /// handed out that were not used within theirs; a rebalance follows a member's.
    fn expire(&mut self, now: Tick) {
        self.pending
            .retain(|_, (given, timeout)| now.0.saturating_sub(given.0) <= *timeout);
        let joining = matches!(self.phase, Phase::Joining { .. });
        let before = self.members.len();
        self.members
            .retain(|_, m| (joining && m.joined) || !m.expired(now));
        if self.members.len() != before {
            self.membership_changed(now);
        }
    }

    fn seen(&mut self, member_id: &str, now: Tick) {
        if let Some(m) = self.members.get_mut(member_id) {
            m.last_seen = now;
        }
    }

    /// After a member left or expired: rebalance among the rest, or become empty.
    fn membership_changed(&mut self, now: Tick) {
        self.changes += 1;
        if self.members.is_empty() {
            self.phase = Phase::Empty;
            self.leader = None;
            self.protocol.clear();
        } else if !matches!(self.phase, Phase::Joining { .. }) {
            self.start_rebalance(now);
        } else {
            self.try_complete(now);
        }
    }

    fn start_rebalance(&mut self, now: Tick) {
        self.changes += 1;
        let longest = self
            .members
            .values()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or_default();
        self.phase = Phase::Joining {
            deadline: Tick(now.0 + longest),
            not_before: now,
        };
        for m in self.members.values_mut() {
            m.joined = false;
        }
    }

    /// Every member with its metadata for `protocol`, as the leader receives them.
    fn member_list(&self, protocol: &str) -> Vec<JoinedMember> {
        self.members
            .iter()
            .map(|(id, m)| JoinedMember {
                member_id: id.clone(),
                instance_id: m.instance_id.clone(),
                metadata: m.metadata_for(protocol),
            })
            .collect()
    }

    /// Ends the join phase once every member has joined, or at the deadline without those that
    /// have not: a new generation, a protocol, a leader, and an answer for each member.
    fn try_complete(&mut self, now: Tick) {
        let Phase::Joining {
            deadline,
            not_before,
        } = self.phase
        else {
            return;
        };
        let waiting = now < not_before || !self.members.values().all(|m| m.joined);
        if waiting && now < deadline {
            return;
        }
        self.changes += 1;
        self.members.retain(|_, m| m.joined);
        if self.members.is_empty() {
            self.phase = Phase::Empty;
            self.leader = None;
            self.protocol.clear();
            return;
        }
        self.generation += 1;
        let leader = match &self.leader {
            Some(l) if self.members.contains_key(l) => l.clone(),
            _ => self.members.keys().next().cloned().unwrap_or_default(),
        };
        let protocol = self.common_protocol(&leader).unwrap_or_default();
        let members = self.member_list(&protocol);
        self.answers = self
            .members
            .keys()
            .map(|id| {
                let joined = Joined {
                    generation: self.generation,
                    protocol_type: self.protocol_type.clone(),
                    protocol: protocol.clone(),
                    leader: leader.clone(),
                    member_id: id.clone(),
                    members: if *id == leader {
                        members.clone()
                    } else {
                        Vec::new()
                    },
                };
                (id.clone(), joined)
            })
            .collect();
        for m in self.members.values_mut() {
            m.assignment = Vec::new();
            m.last_seen = now;
        }
        self.leader = Some(leader);
        self.protocol = protocol;
        self.phase = Phase::Syncing;
    }

    /// The known member `member_id`, with the static member checks of KIP-345: a caller naming
    /// an instance id must be that instance's current member.
    fn member(&self, member_id: &str, instance_id: Option<&str>) -> Result<(), GroupError> {
        if let Some(instance) = instance_id {
            match self.instance_member(instance) {
                Some(id) if id == member_id => {}
                Some(_) => return Err(GroupError::FencedInstanceId),
                None => return Err(GroupError::UnknownMember),
            }
        }
        if self.members.contains_key(member_id) {
            Ok(())
        } else {
            Err(GroupError::UnknownMember)
        }
    }

    /// The member id a static member currently holds.
    fn instance_member(&self, instance: &str) -> Option<&str> {
        self.members
            .iter()
            .find(|(_, m)| m.instance_id.as_deref() == Some(instance))
            .map(|(id, _)| id.as_str())
    }

    /// Whether a member may act in `generation`: not while members are joining, nor in a
    /// generation the group has left.
    fn settled_in(&self, generation: i32) -> Result<(), GroupError> {
        if matches!(self.phase, Phase::Joining { .. }) {
            Err(GroupError::RebalanceInProgress)
        } else if generation != self.generation {
            Err(GroupError::IllegalGeneration)
        } else {
            Ok(())
        }
    }

    /// The protocol the next generation would choose, with the current leader.
    fn next_protocol(&self) -> Option<String> {
        self.common_protocol(self.leader.as_deref()?)
    }

    /// The first of the leader's protocols that every member offers.
    fn common_protocol(&self, leader: &str) -> Option<String> {
        let offered = &self.members.get(leader)?.protocols;
        offered
            .iter()
            .map(|(name, _)| name)
            .find(|name| self.members.values().all(|m| m.offers(name)))
            .cloned()
    }

    /// A static member restarting under a new member id (KIP-345): it takes over its old
    /// identity and assignment. A stable group whose protocol stays the same answers at once,
    /// without a rebalance; otherwise the group rebalances. `None` when the caller must wait
    /// for the rebalance like any joining member.
    fn replace_static(&mut self, old: &str, new: &str, join: &Join, now: Tick) -> Option<Joined> {
        let mut member = self.members.remove(old)?;
        member.protocols = join.protocols.clone();
        member.session_timeout = join.session_timeout;
        member.rebalance_timeout = join.rebalance_timeout;
        member.client_id = join.client_id.clone();
        member.last_seen = now;
        member.joined = true;
        self.members.insert(new.to_owned(), member);
        self.answers.remove(old);
        self.changes += 1;
        // Kafka answers with the leader id from before the replacement, so that a restarted
        // leader does not compute an assignment a stable group would never hand out.
        let leader_before = self.leader.clone().unwrap_or_default();
        if self.leader.as_deref() == Some(old) {
            self.leader = Some(new.to_owned());
        }
        match self.phase {
            Phase::Stable if self.next_protocol().as_deref() == Some(&self.protocol) => {
                let is_leader = self.leader.as_deref() == Some(new);
                Some(Joined {
                    generation: self.generation,
                    protocol_type: self.protocol_type.clone(),
                    protocol: self.protocol.clone(),
                    leader: leader_before,
                    member_id: new.to_owned(),
                    members: if is_leader {
                        self.member_list(&self.protocol)
                    } else {
                        Vec::new()
                    },
                })
            }
            Phase::Joining { .. } => None,
            _ => {
                // The old id may already be in the leader's hands (CompletingRebalance), or
                // the protocol changes: rebalance, with this member already in.
                self.start_rebalance(now);
                if let Some(m) = self.members.get_mut(new) {
                    m.joined = true;
                }
                None
            }
        }
    }

    /// A new member id: the client id (or the instance id of a static member) and a counter,
    /// skipping ids the group holds (a loaded group's counter starts again).
    fn fresh_id(&mut self, join: &Join) -> String {
        let prefix = join.instance_id.as_deref().unwrap_or(&join.client_id);
        loop {
            self.next_member += 1;
            let id = format!("{prefix}-{}", self.next_member);
            if !self.members.contains_key(&id) && !self.pending.contains_key(&id) {
                return id;
            }
        }
    }
}

/// How far a coordinator may load the groups of its offsets partition now, from the replica
/// of that partition it hosts: up to the high watermark, once the replica leads and its HW has
/// reached its current leader epoch (rule 15, Kafka's HasHighWatermarkReachedCurrentEpoch);
/// `None` before. A new leader's HW lags its predecessor's until its followers fetch again, so
/// a coordinator that loaded earlier could miss a commit the last one acknowledged — with the
/// rule off ([`Rules::coordinator_load`]) it loads up to whatever its HW is as soon as it leads.
pub fn load_point<L: Log>(rules: &Rules, replica: &Replica<L>) -> Option<Offset> {
    let settled = replica.has_high_watermark_reached_current_epoch();
    (replica.is_leader() && (settled || !rules.coordinator_load)).then(|| replica.high_watermark())
}

/// Whether a committer speaks as a group member (a generation, a member id or an instance
/// id), not as a consumer that assigns itself partitions.
pub fn is_member(caller: Caller<'_>) -> bool {
    caller.generation >= 0 || !caller.member_id.is_empty() || caller.instance_id.is_some()
}
