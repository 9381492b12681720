//! Consumer group membership: Kafka's classic rebalance protocol (JoinGroup, SyncGroup,
//! Heartbeat, LeaveGroup), so that subscribing consumers (librdkafka's `subscribe`, `kcat -G`,
//! kafka-python's group consumer) share a topic's partitions and take over each other's when one
//! leaves or dies.
//!
//! The broker only runs the membership; the members decide the assignment, as in Kafka: after a
//! rebalance the coordinator hands every member list to the group's leader, which assigns the
//! partitions and returns the assignment through SyncGroup. A rebalance starts when a member
//! joins, leaves or misses its session timeout; the others learn of it from their heartbeats
//! (REBALANCE_IN_PROGRESS) and join again; it ends when every member has, or at the longest
//! rebalance timeout without the laggards.
//!
//! Static members (KIP-345: a `group.instance.id`) keep their place across restarts: a static
//! member that rejoins under a new member id within its session timeout takes over its old
//! identity and assignment, and a stable group does not rebalance. They leave only by session
//! timeout or an explicit LeaveGroup naming their instance id.
//!
//! The group's coordinator is the broker that leads the group's partition of
//! `__consumer_offsets` ([`crate::offsets_topic`]). It persists the membership there as Kafka
//! does ([`StoredGroup`], Kafka's group metadata record): when the leader hands in a
//! generation's assignment, before any member gets its part, and when the last member leaves.
//! If the coordinator goes, the partition's next leader loads the group ([`Coordinator::load`])
//! and the members carry on in their generation, without a rebalance: their heartbeats and
//! commits are accepted as before. Because no member learns its assignment before the
//! generation is stored, a new coordinator never accepts a commit from a member of a
//! generation it has not loaded: a zombie's commit is refused (ILLEGAL_GENERATION) wherever it
//! lands. Committed offsets are records in the same partition, not kept here.

use bytes::Bytes;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Session timeouts a member may ask for (Kafka's group.min/max.session.timeout.ms are 6 s
/// and 30 min; a lower floor lets tests notice a dead member quickly).
pub const SESSION_TIMEOUTS: std::ops::RangeInclusive<Duration> =
    Duration::from_secs(1)..=Duration::from_secs(30 * 60);
/// How often a waiting JoinGroup or SyncGroup looks at the clock (session expiry, rebalance
/// deadline) when nothing else wakes it.
const RECHECK: Duration = Duration::from_millis(100);

/// Why a membership request was refused, with Kafka's error code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    #[error("NOT_COORDINATOR: another broker coordinates this group")]
    NotCoordinator,
    #[error("ILLEGAL_GENERATION: the group has moved on to another generation")]
    IllegalGeneration,
    #[error("INCONSISTENT_GROUP_PROTOCOL: no assignment protocol common to every member")]
    InconsistentProtocol,
    #[error("UNKNOWN_MEMBER_ID: not a member of the group")]
    UnknownMember,
    #[error("INVALID_SESSION_TIMEOUT: outside {SESSION_TIMEOUTS:?}")]
    InvalidSessionTimeout,
    #[error("REBALANCE_IN_PROGRESS: join the group again")]
    RebalanceInProgress,
    #[error("NON_EMPTY_GROUP: the group still has members")]
    NonEmptyGroup,
    #[error("GROUP_ID_NOT_FOUND: no such group")]
    GroupIdNotFound,
    #[error("FENCED_INSTANCE_ID: another member has taken over this group.instance.id")]
    FencedInstanceId,
    #[error("COORDINATOR_NOT_AVAILABLE: the group's membership could not be stored")]
    CoordinatorNotAvailable,
}

impl GroupError {
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

/// A JoinGroup, as the coordinator needs it.
#[derive(Clone, Debug)]
pub struct Join {
    pub group: String,
    /// Empty for a new member (or a restarted static one), which is then given an id.
    pub member_id: String,
    /// `group.instance.id`: set for a static member.
    pub instance_id: Option<String>,
    pub client_id: String,
    pub protocol_type: String,
    /// Assignment protocols the member offers, in its order of preference, with its metadata
    /// for each (opaque to the broker: the leader reads it).
    pub protocols: Vec<(String, Bytes)>,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
}

/// A completed join: what the JoinGroup response carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Joined {
    pub generation: i32,
    pub protocol_type: String,
    pub protocol: String,
    pub leader: String,
    pub member_id: String,
    /// For the leader only: every member with its instance id and its metadata for the chosen
    /// protocol.
    pub members: Vec<JoinedMember>,
}

/// One member as the group's leader sees it in a JoinGroup answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinedMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub metadata: Bytes,
}

/// A member's identity in a SyncGroup, Heartbeat or OffsetCommit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Caller<'a> {
    pub member_id: &'a str,
    /// `group.instance.id`, from the versions of the request that carry it.
    pub instance_id: Option<&'a str>,
    pub generation: i32,
}

/// A group as DescribeGroups and ListGroups report it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupDescription {
    pub group: String,
    /// Kafka's name of the group's state: Empty, PreparingRebalance, CompletingRebalance or
    /// Stable.
    pub state: &'static str,
    pub protocol_type: String,
    /// The assignment protocol of the current generation (empty while none is chosen).
    pub protocol: String,
    pub generation: i32,
    pub members: Vec<MemberDescription>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberDescription {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    /// The member's metadata for the current protocol (for consumers: its subscription).
    pub metadata: Bytes,
    /// What the leader assigned it in the current generation.
    pub assignment: Bytes,
}

/// A group's membership as its coordinator persists it, for the next coordinator to load
/// (Kafka's `GroupMetadataValue`): the generation, its protocol and leader, and each member
/// with its subscription and assignment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoredGroup {
    pub protocol_type: String,
    pub generation: i32,
    /// The generation's assignment protocol; empty while none is chosen.
    pub protocol: String,
    pub leader: Option<String>,
    pub members: Vec<StoredMember>,
}

/// One member of a [`StoredGroup`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoredMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    /// The member's metadata for the generation's protocol (a consumer's subscription).
    pub subscription: Bytes,
    pub assignment: Bytes,
}

#[derive(Debug)]
struct Member {
    instance_id: Option<String>,
    client_id: String,
    protocols: Vec<(String, Bytes)>,
    session_timeout: Duration,
    rebalance_timeout: Duration,
    last_seen: Instant,
    /// Has joined the rebalance in progress.
    joined: bool,
    assignment: Bytes,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Phase {
    /// No members.
    #[default]
    Empty,
    /// Waiting for every member to join, until the deadline (Kafka's PreparingRebalance).
    Joining {
        deadline: Instant,
    },
    /// Joined: waiting for the leader's assignment (Kafka's CompletingRebalance).
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

#[derive(Debug, Default)]
struct Group {
    generation: i32,
    phase: Phase,
    protocol_type: String,
    /// The assignment protocol chosen for the current generation.
    protocol: String,
    leader: Option<String>,
    members: BTreeMap<String, Member>,
    /// JoinGroup answers of the last completed rebalance, taken by the waiting members.
    answers: BTreeMap<String, Joined>,
    next_member: u64,
}

impl Group {
    /// Drops members whose session expired (not those waiting in a join); a rebalance follows.
    /// Whether anything changed.
    fn expire(&mut self, now: Instant) -> bool {
        let joining = matches!(self.phase, Phase::Joining { .. });
        let before = self.members.len();
        self.members.retain(|_, m| {
            (joining && m.joined) || now.duration_since(m.last_seen) <= m.session_timeout
        });
        if self.members.len() == before {
            return false;
        }
        self.membership_changed(now);
        true
    }

    /// After a member left or expired: rebalance among the rest, or become empty.
    fn membership_changed(&mut self, now: Instant) {
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

    fn start_rebalance(&mut self, now: Instant) {
        let longest = self
            .members
            .values()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or_default();
        self.phase = Phase::Joining {
            deadline: now + longest,
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
                metadata: metadata_for(m, protocol),
            })
            .collect()
    }

    /// Ends the join phase once every member has joined, or at the deadline without those that
    /// have not: a new generation, a protocol, a leader, and an answer for each member.
    fn try_complete(&mut self, now: Instant) -> bool {
        let Phase::Joining { deadline } = self.phase else {
            return false;
        };
        let all_in = self.members.values().all(|m| m.joined);
        if !all_in && now < deadline {
            return false;
        }
        self.members.retain(|_, m| m.joined);
        if self.members.is_empty() {
            self.phase = Phase::Empty;
            self.leader = None;
            self.protocol.clear();
            return true;
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
            m.assignment = Bytes::new();
            m.last_seen = now;
        }
        self.leader = Some(leader);
        self.protocol = protocol;
        self.phase = Phase::Syncing;
        true
    }

    /// The known member `caller` names, with the static member checks of KIP-345: a caller
    /// naming an instance id must be that instance's current member.
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

    /// Kafka's rule for a member's OffsetCommit: any phase but CompletingRebalance, in the
    /// group's current generation. While a rebalance is being prepared the members still own
    /// what they were assigned, and commit it before they rejoin (the commit a consumer makes
    /// when its partitions are revoked): refusing it would make the next owner read again
    /// what was already processed. Once the members have joined, the leader may be handing
    /// their partitions to others, so commits wait for the new generation.
    fn may_commit(&self, generation: i32) -> Result<(), GroupError> {
        if generation != self.generation {
            Err(GroupError::IllegalGeneration)
        } else if self.phase == Phase::Syncing {
            Err(GroupError::RebalanceInProgress)
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
            .find(|name| self.members.values().all(|m| offers(m, name)))
            .cloned()
    }

    fn describe(&self, name: &str) -> GroupDescription {
        GroupDescription {
            group: name.to_owned(),
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
                    metadata: metadata_for(m, &self.protocol),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }

    /// What the coordinator persists of the group.
    fn stored(&self) -> StoredGroup {
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
                    subscription: metadata_for(m, &self.protocol),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }

    /// A group as a new coordinator loads it: Stable in its stored generation (Empty without
    /// members), each member's session starting now, as Kafka loads one.
    fn from_stored(stored: StoredGroup, now: Instant) -> Group {
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
            answers: BTreeMap::new(),
            next_member: 0,
        }
    }

    /// A static member restarting under a new member id (KIP-345): it takes over its old
    /// identity and assignment. A stable group whose protocol stays the same answers at once,
    /// without a rebalance; otherwise the group rebalances. `None` when the caller must wait
    /// for the rebalance like any joining member.
    fn replace_static(
        &mut self,
        old: &str,
        new: &str,
        join: &Join,
        now: Instant,
    ) -> Option<Joined> {
        let mut member = self.members.remove(old)?;
        member.protocols = join.protocols.clone();
        member.session_timeout = join.session_timeout;
        member.rebalance_timeout = join.rebalance_timeout;
        member.client_id = join.client_id.clone();
        member.last_seen = now;
        member.joined = true;
        self.members.insert(new.to_owned(), member);
        self.answers.remove(old);
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
}

fn offers(m: &Member, protocol: &str) -> bool {
    m.protocols.iter().any(|(name, _)| name == protocol)
}

fn metadata_for(m: &Member, protocol: &str) -> Bytes {
    m.protocols
        .iter()
        .find(|(name, _)| name == protocol)
        .map(|(_, meta)| meta.clone())
        .unwrap_or_default()
}

/// What entering a join led to.
enum Entered {
    /// Answered at once (a static member rejoining a stable group).
    Answered(Joined),
    /// Waits for the rebalance as this member id.
    Waiting(String),
}

/// Every group this broker coordinates.
#[derive(Debug, Default)]
pub struct Coordinator {
    groups: Mutex<BTreeMap<String, Group>>,
    /// Rung on every change, for waiting joins and syncs.
    changed: Notify,
}

impl Coordinator {
    fn groups(&self) -> MutexGuard<'_, BTreeMap<String, Group>> {
        self.groups.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// JoinGroup: answers once the rebalance this join starts (or joins) is complete.
    pub async fn join(&self, join: Join) -> Result<Joined, GroupError> {
        if !SESSION_TIMEOUTS.contains(&join.session_timeout) {
            return Err(GroupError::InvalidSessionTimeout);
        }
        let entered = self.enter(&join);
        self.changed.notify_waiters();
        let member_id = match entered? {
            Entered::Answered(joined) => return Ok(joined),
            Entered::Waiting(id) => id,
        };
        loop {
            let notified = self.changed.notified();
            {
                let mut groups = self.groups();
                let group = groups
                    .get_mut(&join.group)
                    .ok_or(GroupError::UnknownMember)?;
                let now = Instant::now();
                if group.expire(now) | group.try_complete(now) {
                    self.changed.notify_waiters();
                }
                if let Some(answer) = group.answers.remove(&member_id) {
                    return Ok(answer);
                }
                if !group.members.contains_key(&member_id) {
                    return Err(GroupError::UnknownMember);
                }
            }
            let _ = tokio::time::timeout(RECHECK, notified).await;
        }
    }

    /// Adds or updates the joining member and starts a rebalance if none is in progress.
    fn enter(&self, join: &Join) -> Result<Entered, GroupError> {
        let mut groups = self.groups();
        let group = groups.entry(join.group.clone()).or_default();
        let now = Instant::now();
        group.expire(now);
        let others_agree = group
            .members
            .iter()
            .filter(|(id, _)| **id != join.member_id)
            .all(|(_, m)| join.protocols.iter().any(|(name, _)| offers(m, name)));
        let same_type = group.members.is_empty() || group.protocol_type == join.protocol_type;
        if join.protocols.is_empty() || !others_agree || !same_type {
            return Err(GroupError::InconsistentProtocol);
        }
        let holder = join
            .instance_id
            .as_deref()
            .and_then(|i| group.instance_member(i))
            .map(str::to_owned);
        let member_id = match (join.member_id.as_str(), holder) {
            ("", Some(old)) => {
                let new = fresh_id(group, join);
                return Ok(match group.replace_static(&old, &new, join, now) {
                    Some(joined) => Entered::Answered(joined),
                    None => {
                        group.try_complete(now);
                        Entered::Waiting(new)
                    }
                });
            }
            ("", None) => fresh_id(group, join),
            (id, Some(old)) if id != old => return Err(GroupError::FencedInstanceId),
            (id, _) if group.members.contains_key(id) => id.to_owned(),
            _ => return Err(GroupError::UnknownMember),
        };
        group.protocol_type = join.protocol_type.clone();
        if !matches!(group.phase, Phase::Joining { .. }) {
            group.start_rebalance(now);
        }
        let assignment = group
            .members
            .get(&member_id)
            .map(|m| m.assignment.clone())
            .unwrap_or_default();
        group.members.insert(
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
        if let Phase::Joining { deadline } = &mut group.phase {
            *deadline = (*deadline).max(now + join.rebalance_timeout);
        }
        group.answers.remove(&member_id);
        group.try_complete(now);
        Ok(Entered::Waiting(member_id))
    }

    /// SyncGroup: the leader hands in the assignment; every member gets its own part once it
    /// has, and once `store` has persisted the generation with it (Kafka's order: a member that
    /// learned its assignment can only be of a generation the next coordinator loads). If the
    /// store fails, the group rebalances and the leader gets the error. `protocol`, when the
    /// request names one (v5), must be the group's.
    pub async fn sync<S, F>(
        &self,
        group_id: &str,
        caller: Caller<'_>,
        protocol: Option<(&str, &str)>,
        assignments: Vec<(String, Bytes)>,
        store: S,
    ) -> Result<Bytes, GroupError>
    where
        S: FnOnce(StoredGroup) -> F,
        F: Future<Output = Result<(), GroupError>>,
    {
        let mut store = Some(store);
        loop {
            let notified = self.changed.notified();
            let to_store = {
                let mut groups = self.groups();
                let group = groups.get_mut(group_id).ok_or(GroupError::UnknownMember)?;
                let now = Instant::now();
                if group.expire(now) {
                    self.changed.notify_waiters();
                }
                group.member(caller.member_id, caller.instance_id)?;
                if let Some((kind, name)) = protocol {
                    if kind != group.protocol_type || name != group.protocol {
                        return Err(GroupError::InconsistentProtocol);
                    }
                }
                let is_leader = group.leader.as_deref() == Some(caller.member_id);
                if let Some(member) = group.members.get_mut(caller.member_id) {
                    member.last_seen = now;
                }
                group.settled_in(caller.generation)?;
                if group.phase == Phase::Stable {
                    let member = group.members.get(caller.member_id);
                    return Ok(member.map(|m| m.assignment.clone()).unwrap_or_default());
                }
                match store.take() {
                    Some(store) if group.phase == Phase::Syncing && is_leader => {
                        for (id, assignment) in &assignments {
                            if let Some(m) = group.members.get_mut(id) {
                                m.assignment = assignment.clone();
                            }
                        }
                        Some((store, group.stored()))
                    }
                    kept => {
                        store = kept;
                        None
                    }
                }
            };
            if let Some((store, stored)) = to_store {
                let generation = stored.generation;
                let result = store(stored).await;
                let mut groups = self.groups();
                let group = groups.get_mut(group_id).ok_or(GroupError::UnknownMember)?;
                if group.phase == Phase::Syncing && group.generation == generation {
                    match result {
                        Ok(()) => group.phase = Phase::Stable,
                        Err(_) => group.start_rebalance(Instant::now()),
                    }
                }
                drop(groups);
                self.changed.notify_waiters();
                result?;
                continue;
            }
            let _ = tokio::time::timeout(RECHECK, notified).await;
        }
    }

    /// The group's protocol type and chosen protocol (SyncGroup v5 answers with them).
    pub fn protocol(&self, group_id: &str) -> Option<(String, String)> {
        let groups = self.groups();
        let group = groups.get(group_id)?;
        Some((group.protocol_type.clone(), group.protocol.clone()))
    }

    /// Heartbeat: keeps the member's session; REBALANCE_IN_PROGRESS tells it to join again.
    pub fn heartbeat(&self, group_id: &str, caller: Caller<'_>) -> Result<(), GroupError> {
        let result = self.with_member(group_id, caller, |g| g.settled_in(caller.generation));
        self.changed.notify_waiters();
        result
    }

    /// LeaveGroup of one member, named by member id, instance id or both (v3 batches them):
    /// it goes at once, and the others rebalance without it.
    pub fn leave(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), GroupError> {
        let mut groups = self.groups();
        let group = groups.get_mut(group_id).ok_or(GroupError::UnknownMember)?;
        let id = match instance_id {
            Some(instance) => {
                let holder = group
                    .instance_member(instance)
                    .ok_or(GroupError::UnknownMember)?;
                if !member_id.is_empty() && member_id != holder {
                    return Err(GroupError::FencedInstanceId);
                }
                holder.to_owned()
            }
            None => member_id.to_owned(),
        };
        group.members.remove(&id).ok_or(GroupError::UnknownMember)?;
        group.answers.remove(&id);
        group.membership_changed(Instant::now());
        drop(groups);
        self.changed.notify_waiters();
        Ok(())
    }

    /// Whether an OffsetCommit may go ahead, by Kafka's rules: a consumer outside group
    /// membership (generation -1, no member id) commits to a group without members; a member
    /// commits in the group's current generation, in any phase but CompletingRebalance (see
    /// `Group::may_commit`), so that a consumer that lost its partitions cannot commit over
    /// their new owner while the one whose partitions are being revoked can still save its
    /// position.
    pub fn may_commit(&self, group_id: &str, caller: Caller<'_>) -> Result<(), GroupError> {
        let member =
            caller.generation >= 0 || !caller.member_id.is_empty() || caller.instance_id.is_some();
        let mut groups = self.groups();
        let Some(group) = groups.get_mut(group_id) else {
            return if member {
                Err(GroupError::IllegalGeneration)
            } else {
                Ok(())
            };
        };
        let now = Instant::now();
        if group.expire(now) {
            self.changed.notify_waiters();
        }
        if !member {
            return if group.members.is_empty() {
                Ok(())
            } else {
                Err(GroupError::UnknownMember)
            };
        }
        group.member(caller.member_id, caller.instance_id)?;
        if let Some(m) = group.members.get_mut(caller.member_id) {
            m.last_seen = now;
        }
        group.may_commit(caller.generation)
    }

    /// Runs `check` for a known member, after expiring sessions and noting that it is alive.
    fn with_member(
        &self,
        group_id: &str,
        caller: Caller<'_>,
        check: impl FnOnce(&Group) -> Result<(), GroupError>,
    ) -> Result<(), GroupError> {
        let mut groups = self.groups();
        let group = groups.get_mut(group_id).ok_or(GroupError::UnknownMember)?;
        let now = Instant::now();
        group.expire(now);
        group.member(caller.member_id, caller.instance_id)?;
        if let Some(member) = group.members.get_mut(caller.member_id) {
            member.last_seen = now;
        }
        check(group)
    }

    /// Every group this coordinator knows, described (members expired first).
    pub fn list(&self) -> Vec<GroupDescription> {
        let mut groups = self.groups();
        let now = Instant::now();
        groups
            .iter_mut()
            .map(|(name, g)| {
                g.expire(now);
                g.describe(name)
            })
            .collect()
    }

    /// One group, described; `None` when this coordinator does not know it.
    pub fn describe(&self, group_id: &str) -> Option<GroupDescription> {
        let mut groups = self.groups();
        let group = groups.get_mut(group_id)?;
        group.expire(Instant::now());
        Some(group.describe(group_id))
    }

    /// What is stored of a group now, for the caller to persist (after a LeaveGroup emptied
    /// it); `None` when this coordinator does not know it.
    pub fn stored(&self, group_id: &str) -> Option<StoredGroup> {
        self.groups().get(group_id).map(Group::stored)
    }

    /// Takes over the groups of one offsets partition, as loaded from it by a new coordinator:
    /// every group `belongs` to the partition is replaced by its stored state (or forgotten if
    /// none is stored), since what this broker held of them from an earlier term may be stale.
    /// Waiting joins and syncs of a replaced group are answered UNKNOWN_MEMBER_ID or
    /// REBALANCE_IN_PROGRESS, and join again.
    pub fn load(
        &self,
        belongs: impl Fn(&str) -> bool,
        loaded: impl IntoIterator<Item = (String, StoredGroup)>,
    ) {
        let now = Instant::now();
        let mut groups = self.groups();
        groups.retain(|name, _| !belongs(name));
        for (name, stored) in loaded {
            groups.insert(name, Group::from_stored(stored, now));
        }
        drop(groups);
        self.changed.notify_waiters();
    }

    /// Forgets a group without members (DeleteGroups); its committed offsets are the
    /// caller's to delete. NON_EMPTY_GROUP while it has members.
    pub fn delete(&self, group_id: &str) -> Result<(), GroupError> {
        let mut groups = self.groups();
        if let Some(group) = groups.get_mut(group_id) {
            group.expire(Instant::now());
            if !group.members.is_empty() {
                return Err(GroupError::NonEmptyGroup);
            }
            groups.remove(group_id);
        }
        Ok(())
    }
}

/// A new member id: the client id (or the instance id of a static member) and a counter,
/// skipping ids the group holds (a loaded group's counter starts again).
fn fresh_id(group: &mut Group, join: &Join) -> String {
    let prefix = join.instance_id.as_deref().unwrap_or(&join.client_id);
    loop {
        group.next_member += 1;
        let id = format!("{prefix}-{}", group.next_member);
        if !group.members.contains_key(&id) {
            return id;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn join(member_id: &str, client: &str) -> Join {
        Join {
            group: "g".into(),
            member_id: member_id.into(),
            instance_id: None,
            client_id: client.into(),
            protocol_type: "consumer".into(),
            protocols: vec![
                ("range".into(), Bytes::from(format!("{client}-range"))),
                ("roundrobin".into(), Bytes::from(format!("{client}-rr"))),
            ],
            session_timeout: Duration::from_secs(1),
            rebalance_timeout: Duration::from_secs(2),
        }
    }

    fn static_join(member_id: &str, instance: &str) -> Join {
        Join {
            instance_id: Some(instance.into()),
            session_timeout: Duration::from_secs(5),
            ..join(member_id, instance)
        }
    }

    /// A store that always succeeds.
    async fn kept(_: StoredGroup) -> Result<(), GroupError> {
        Ok(())
    }

    fn at(member_id: &str, generation: i32) -> Caller<'_> {
        Caller {
            member_id,
            instance_id: None,
            generation,
        }
    }

    #[tokio::test]
    async fn two_members_join_one_generation_and_the_leader_assigns() {
        let c = Arc::new(Coordinator::default());
        let a = c.join(join("", "a")).await.expect("a joins");
        assert_eq!((a.generation, a.leader.as_str()), (1, a.member_id.as_str()));
        assert_eq!(a.protocol, "range");
        // b joins: a rebalance, which a learns of from its heartbeat and joins.
        let b_join = tokio::spawn({
            let c = c.clone();
            async move { c.join(join("", "b")).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            c.heartbeat("g", at(&a.member_id, 1)),
            Err(GroupError::RebalanceInProgress)
        );
        let a2 = c.join(join(&a.member_id, "a")).await.expect("a rejoins");
        let b = b_join.await.expect("task").expect("b joins");
        assert_eq!((a2.generation, b.generation), (2, 2));
        assert_eq!(a2.leader, a.member_id, "the leader stays");
        let ids: Vec<&str> = a2.members.iter().map(|m| m.member_id.as_str()).collect();
        assert_eq!(ids.len(), 2);
        assert!(ids.contains(&b.member_id.as_str()));
        assert!(b.members.is_empty(), "only the leader sees the members");

        // b's sync waits for the leader's assignment.
        let b_sync = tokio::spawn({
            let (c, id) = (c.clone(), b.member_id.clone());
            async move { c.sync("g", at(&id, 2), None, Vec::new(), kept).await }
        });
        let plan = vec![
            (a.member_id.clone(), Bytes::from_static(b"p0")),
            (b.member_id.clone(), Bytes::from_static(b"p1")),
        ];
        assert_eq!(
            c.sync(
                "g",
                at(&a.member_id, 2),
                Some(("consumer", "range")),
                plan,
                kept
            )
            .await,
            Ok(Bytes::from_static(b"p0"))
        );
        assert_eq!(b_sync.await.expect("task"), Ok(Bytes::from_static(b"p1")));
        assert_eq!(c.heartbeat("g", at(&b.member_id, 2)), Ok(()));
        assert_eq!(
            c.heartbeat("g", at(&b.member_id, 1)),
            Err(GroupError::IllegalGeneration)
        );
        assert_eq!(c.may_commit("g", at(&b.member_id, 2)), Ok(()));
        assert_eq!(
            c.may_commit("g", at(&b.member_id, 1)),
            Err(GroupError::IllegalGeneration)
        );
        assert_eq!(
            c.may_commit("g", at("", -1)),
            Err(GroupError::UnknownMember),
            "outsiders commit only to a group without members"
        );
        assert_eq!(
            c.may_commit("other", at("", -1)),
            Ok(()),
            "manual assignment"
        );
        let described = c.describe("g").expect("known");
        assert_eq!((described.state, described.generation), ("Stable", 2));
        assert_eq!(described.members.len(), 2);
        assert_eq!(c.delete("g"), Err(GroupError::NonEmptyGroup));

        // a leaves: b rebalances alone and leads.
        assert_eq!(c.leave("g", &a.member_id, None), Ok(()));
        assert_eq!(
            c.heartbeat("g", at(&b.member_id, 2)),
            Err(GroupError::RebalanceInProgress)
        );
        let b3 = c.join(join(&b.member_id, "b")).await.expect("b rejoins");
        assert_eq!(
            (b3.generation, b3.leader.as_str()),
            (3, b.member_id.as_str())
        );
        assert_eq!(
            c.heartbeat("g", at(&a.member_id, 3)),
            Err(GroupError::UnknownMember)
        );
        assert_eq!(c.leave("g", &b.member_id, None), Ok(()));
        assert_eq!(c.describe("g").map(|d| d.state), Some("Empty"));
        assert_eq!(c.delete("g"), Ok(()));
        assert_eq!(c.describe("g"), None);
    }

    /// Kafka accepts a member's commits while the group prepares a rebalance (the member
    /// still owns its partitions and commits them before it rejoins) and refuses them only
    /// once everyone has joined and the leader is assigning.
    #[tokio::test]
    async fn members_commit_while_a_rebalance_is_prepared_but_not_while_it_completes() {
        let c = Arc::new(Coordinator::default());
        let a = c.join(join("", "a")).await.expect("a");
        c.sync("g", at(&a.member_id, 1), None, vec![], kept)
            .await
            .expect("a syncs");
        let b_join = tokio::spawn({
            let c = c.clone();
            async move { c.join(join("", "b")).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(c.describe("g").map(|d| d.state), Some("PreparingRebalance"));
        assert_eq!(
            c.may_commit("g", at(&a.member_id, 1)),
            Ok(()),
            "the revoking member saves its position"
        );
        let a2 = c.join(join(&a.member_id, "a")).await.expect("a rejoins");
        let b = b_join.await.expect("task").expect("b");
        assert_eq!(
            c.describe("g").map(|d| d.state),
            Some("CompletingRebalance")
        );
        assert_eq!(
            c.may_commit("g", at(&a.member_id, 2)),
            Err(GroupError::RebalanceInProgress)
        );
        assert_eq!(
            c.may_commit("g", at(&a.member_id, 1)),
            Err(GroupError::IllegalGeneration)
        );
        c.sync("g", at(&a2.member_id, 2), None, vec![], kept)
            .await
            .expect("leader syncs");
        assert_eq!(c.may_commit("g", at(&b.member_id, 2)), Ok(()));
    }

    #[tokio::test]
    async fn a_restarted_static_member_takes_its_place_without_a_rebalance() {
        let c = Arc::new(Coordinator::default());
        let a = c.join(static_join("", "ia")).await.expect("a");
        let b_join = tokio::spawn({
            let c = c.clone();
            async move { c.join(static_join("", "ib")).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let a = c
            .join(static_join(&a.member_id, "ia"))
            .await
            .expect("a rejoins");
        let b = b_join.await.expect("task").expect("b");
        assert_eq!(a.generation, 2);
        let ids: Vec<Option<&str>> = a.members.iter().map(|m| m.instance_id.as_deref()).collect();
        assert_eq!(
            ids,
            [Some("ia"), Some("ib")],
            "the leader sees instance ids"
        );
        let plan = vec![
            (a.member_id.clone(), Bytes::from_static(b"pa")),
            (b.member_id.clone(), Bytes::from_static(b"pb")),
        ];
        c.sync("g", at(&a.member_id, 2), None, plan, kept)
            .await
            .expect("a");
        c.sync("g", at(&b.member_id, 2), None, vec![], kept)
            .await
            .expect("b");

        // b restarts (a static member sends no LeaveGroup) and rejoins with no member id: it
        // gets a new id at once, in the same generation, and its old assignment.
        let b2 = c.join(static_join("", "ib")).await.expect("b restarts");
        assert_ne!(b2.member_id, b.member_id);
        assert_eq!(b2.generation, 2, "no rebalance");
        assert_eq!(b2.leader, a.member_id);
        assert_eq!(
            c.heartbeat("g", at(&a.member_id, 2)),
            Ok(()),
            "a notices nothing"
        );
        let caller = Caller {
            member_id: &b2.member_id,
            instance_id: Some("ib"),
            generation: 2,
        };
        assert_eq!(
            c.sync("g", caller, None, vec![], kept).await,
            Ok(Bytes::from_static(b"pb"))
        );
        // The old incarnation is fenced.
        let old = Caller {
            member_id: &b.member_id,
            instance_id: Some("ib"),
            generation: 2,
        };
        assert_eq!(c.heartbeat("g", old), Err(GroupError::FencedInstanceId));
        assert_eq!(c.may_commit("g", old), Err(GroupError::FencedInstanceId));
        assert_eq!(
            c.join(static_join(&b.member_id, "ib")).await,
            Err(GroupError::FencedInstanceId)
        );
        // Removing a static member by its instance id (what admin tools do) rebalances.
        assert_eq!(c.leave("g", "", Some("ib")), Ok(()));
        assert_eq!(
            c.heartbeat("g", at(&a.member_id, 2)),
            Err(GroupError::RebalanceInProgress)
        );
        assert_eq!(c.leave("g", "", Some("ib")), Err(GroupError::UnknownMember));
    }

    /// Two members in generation 2, assigned "p0" and "p1" by the leader; the generation as
    /// the leader's sync stored it.
    async fn stable_pair(c: &Arc<Coordinator>) -> (Joined, Joined, StoredGroup) {
        let a = c.join(join("", "a")).await.expect("a joins");
        let b_join = tokio::spawn({
            let c = c.clone();
            async move { c.join(join("", "b")).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let a = c.join(join(&a.member_id, "a")).await.expect("a rejoins");
        let b = b_join.await.expect("task").expect("b joins");
        let plan = vec![
            (a.member_id.clone(), Bytes::from_static(b"p0")),
            (b.member_id.clone(), Bytes::from_static(b"p1")),
        ];
        let stored = Arc::new(Mutex::new(None));
        let keep = |g: StoredGroup| {
            *stored.lock().expect("not poisoned") = Some(g);
            async { Ok(()) }
        };
        c.sync("g", at(&a.member_id, 2), None, plan, keep)
            .await
            .expect("the leader syncs");
        let stored = stored.lock().expect("not poisoned").take();
        (
            a,
            b,
            stored.expect("the leader's sync stored the generation"),
        )
    }

    #[tokio::test]
    async fn a_new_coordinator_loads_the_group_and_its_members_carry_on_in_their_generation() {
        let (a, b, stored) = stable_pair(&Arc::new(Coordinator::default())).await;
        assert_eq!((stored.generation, stored.protocol.as_str()), (2, "range"));
        assert_eq!(stored.leader.as_deref(), Some(a.member_id.as_str()));
        let parts: Vec<(&str, &[u8])> = stored
            .members
            .iter()
            .map(|m| (m.client_id.as_str(), m.assignment.as_ref()))
            .collect();
        assert_eq!(parts, [("a", &b"p0"[..]), ("b", &b"p1"[..])]);
        assert_eq!(
            stored.members[1].subscription,
            Bytes::from_static(b"b-range")
        );

        // The next coordinator knows nothing until it loads the partition.
        let next = Arc::new(Coordinator::default());
        next.load(|_| true, [("stale".to_owned(), StoredGroup::default())]);
        assert_eq!(
            next.heartbeat("g", at(&b.member_id, 2)),
            Err(GroupError::UnknownMember)
        );
        next.load(|g| g == "g" || g == "stale", [("g".to_owned(), stored)]);
        assert_eq!(
            next.describe("stale"),
            None,
            "replaced by what the partition holds"
        );
        assert_eq!(next.heartbeat("g", at(&a.member_id, 2)), Ok(()));
        assert_eq!(next.may_commit("g", at(&b.member_id, 2)), Ok(()));
        assert_eq!(
            next.may_commit("g", at(&b.member_id, 1)),
            Err(GroupError::IllegalGeneration),
            "a zombie of an older generation stays fenced"
        );
        assert_eq!(
            next.sync("g", at(&b.member_id, 2), None, vec![], kept)
                .await,
            Ok(Bytes::from_static(b"p1")),
            "a member that syncs again gets its assignment"
        );
        let described = next.describe("g").expect("loaded");
        assert_eq!((described.state, described.generation), ("Stable", 2));

        // A newcomer gets an id no loaded member holds, and a rebalance to generation 3.
        let c_join = tokio::spawn({
            let next = next.clone();
            async move { next.join(join("", "a")).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (a3, b3) = tokio::join!(
            next.join(join(&a.member_id, "a")),
            next.join(join(&b.member_id, "b"))
        );
        let (a3, b3) = (a3.expect("a rejoins"), b3.expect("b rejoins"));
        let newcomer = c_join.await.expect("task").expect("joins");
        assert_eq!(
            (a3.generation, b3.generation, newcomer.generation),
            (3, 3, 3)
        );
        assert_ne!(newcomer.member_id, a.member_id);
        assert_eq!(a3.members.len(), 3);
    }

    #[tokio::test]
    async fn no_member_learns_an_assignment_its_coordinator_failed_to_store() {
        let c = Arc::new(Coordinator::default());
        let a = c.join(join("", "a")).await.expect("a joins");
        let b_join = tokio::spawn({
            let c = c.clone();
            async move { c.join(join("", "b")).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let a = c.join(join(&a.member_id, "a")).await.expect("a rejoins");
        let b = b_join.await.expect("task").expect("b joins");
        let b_sync = tokio::spawn({
            let (c, id) = (c.clone(), b.member_id.clone());
            async move { c.sync("g", at(&id, 2), None, Vec::new(), kept).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let lost = |_: StoredGroup| async { Err(GroupError::CoordinatorNotAvailable) };
        let plan = vec![(b.member_id.clone(), Bytes::from_static(b"p1"))];
        assert_eq!(
            c.sync("g", at(&a.member_id, 2), None, plan, lost).await,
            Err(GroupError::CoordinatorNotAvailable)
        );
        assert_eq!(
            b_sync.await.expect("task"),
            Err(GroupError::RebalanceInProgress),
            "b never sees the unstored assignment"
        );
        assert_eq!(c.describe("g").map(|d| d.state), Some("PreparingRebalance"));
    }

    #[tokio::test]
    async fn a_silent_member_is_dropped_after_its_session_and_the_rest_rebalance() {
        let c = Coordinator::default();
        let a = c.join(join("", "a")).await.expect("a");
        let b = c.join(join("", "b")).await;
        // b's join started a rebalance that a never joins: it ends without a at the deadline
        // (a's session of 1 s runs out first).
        let b = b.expect("b");
        assert_eq!(b.generation, 2);
        assert_eq!(b.leader, b.member_id);
        assert_eq!(
            c.heartbeat("g", at(&a.member_id, 2)),
            Err(GroupError::UnknownMember)
        );
    }

    #[tokio::test]
    async fn members_must_share_a_protocol_and_known_ids() {
        let c = Coordinator::default();
        c.join(join("", "a")).await.expect("a");
        let mut other = join("", "x");
        other.protocols = vec![("sticky".into(), Bytes::new())];
        assert_eq!(c.join(other).await, Err(GroupError::InconsistentProtocol));
        assert_eq!(
            c.join(join("nobody", "y")).await,
            Err(GroupError::UnknownMember)
        );
        let mut short = join("", "z");
        short.session_timeout = Duration::from_millis(10);
        assert_eq!(c.join(short).await, Err(GroupError::InvalidSessionTimeout));
    }
}
