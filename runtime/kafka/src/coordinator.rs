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
//! Membership lives in the memory of one broker per group ([`coordinator_of`] picks it from the
//! live brokers). If that broker goes, the members find the next one and join it afresh, as
//! after a Kafka coordinator failover; committed offsets are kept by the cluster, not here.

use bytes::Bytes;
use isr::BrokerId;
use std::collections::BTreeMap;
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
        }
    }
}

/// A JoinGroup, as the coordinator needs it.
#[derive(Clone, Debug)]
pub struct Join {
    pub group: String,
    /// Empty for a new member, which is then given an id.
    pub member_id: String,
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
    pub protocol: String,
    pub leader: String,
    pub member_id: String,
    /// For the leader only: every member with its metadata for the chosen protocol.
    pub members: Vec<(String, Bytes)>,
}

/// Which live broker coordinates `group`: a hash of its name over the brokers in id order, so
/// that every broker answers FindCoordinator alike.
pub fn coordinator_of(group: &str, live: &[BrokerId]) -> Option<BrokerId> {
    let mut brokers = live.to_vec();
    brokers.sort_unstable();
    brokers.dedup();
    // FNV-1a: stable across processes and builds, unlike std's hasher.
    let hash = group.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let n = u64::try_from(brokers.len()).ok().filter(|&n| n > 0)?;
    brokers.get(usize::try_from(hash % n).ok()?).copied()
}

#[derive(Debug)]
struct Member {
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
    /// Waiting for every member to join, until the deadline.
    Joining {
        deadline: Instant,
    },
    /// Joined: waiting for the leader's assignment.
    Syncing,
    Stable,
}

#[derive(Debug, Default)]
struct Group {
    generation: i32,
    phase: Phase,
    protocol_type: String,
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
            return true;
        }
        self.generation += 1;
        let leader = match &self.leader {
            Some(l) if self.members.contains_key(l) => l.clone(),
            _ => self.members.keys().next().cloned().unwrap_or_default(),
        };
        let protocol = self.common_protocol(&leader).unwrap_or_default();
        let metadata: Vec<(String, Bytes)> = self
            .members
            .iter()
            .map(|(id, m)| (id.clone(), metadata_for(m, &protocol)))
            .collect();
        self.answers = self
            .members
            .keys()
            .map(|id| {
                let joined = Joined {
                    generation: self.generation,
                    protocol: protocol.clone(),
                    leader: leader.clone(),
                    member_id: id.clone(),
                    members: if *id == leader {
                        metadata.clone()
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
        self.phase = Phase::Syncing;
        true
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

    /// The first of the leader's protocols that every member offers.
    fn common_protocol(&self, leader: &str) -> Option<String> {
        let offered = &self.members.get(leader)?.protocols;
        offered
            .iter()
            .map(|(name, _)| name)
            .find(|name| self.members.values().all(|m| offers(m, name)))
            .cloned()
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
        let member_id = self.enter(&join)?;
        self.changed.notify_waiters();
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
    fn enter(&self, join: &Join) -> Result<String, GroupError> {
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
        let member_id = if join.member_id.is_empty() {
            group.next_member += 1;
            format!("{}-{}", join.client_id, group.next_member)
        } else if group.members.contains_key(&join.member_id) {
            join.member_id.clone()
        } else {
            return Err(GroupError::UnknownMember);
        };
        group.protocol_type = join.protocol_type.clone();
        if !matches!(group.phase, Phase::Joining { .. }) {
            group.start_rebalance(now);
        }
        group.members.insert(
            member_id.clone(),
            Member {
                protocols: join.protocols.clone(),
                session_timeout: join.session_timeout,
                rebalance_timeout: join.rebalance_timeout,
                last_seen: now,
                joined: true,
                assignment: Bytes::new(),
            },
        );
        if let Phase::Joining { deadline } = &mut group.phase {
            *deadline = (*deadline).max(now + join.rebalance_timeout);
        }
        group.answers.remove(&member_id);
        group.try_complete(now);
        Ok(member_id)
    }

    /// SyncGroup: the leader hands in the assignment; every member gets its own part once it
    /// has.
    pub async fn sync(
        &self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        assignments: Vec<(String, Bytes)>,
    ) -> Result<Bytes, GroupError> {
        loop {
            let notified = self.changed.notified();
            {
                let mut groups = self.groups();
                let group = groups.get_mut(group_id).ok_or(GroupError::UnknownMember)?;
                let now = Instant::now();
                if group.expire(now) {
                    self.changed.notify_waiters();
                }
                let is_leader = group.leader.as_deref() == Some(member_id);
                let member = group
                    .members
                    .get_mut(member_id)
                    .ok_or(GroupError::UnknownMember)?;
                member.last_seen = now;
                group.settled_in(generation)?;
                if group.phase == Phase::Syncing && is_leader {
                    for (id, assignment) in &assignments {
                        if let Some(m) = group.members.get_mut(id) {
                            m.assignment = assignment.clone();
                        }
                    }
                    group.phase = Phase::Stable;
                    self.changed.notify_waiters();
                }
                if group.phase == Phase::Stable {
                    let member = group.members.get(member_id);
                    return Ok(member.map(|m| m.assignment.clone()).unwrap_or_default());
                }
            }
            let _ = tokio::time::timeout(RECHECK, notified).await;
        }
    }

    /// Heartbeat: keeps the member's session; REBALANCE_IN_PROGRESS tells it to join again.
    pub fn heartbeat(
        &self,
        group_id: &str,
        generation: i32,
        member_id: &str,
    ) -> Result<(), GroupError> {
        let result = self.with_member(group_id, member_id, |g| g.settled_in(generation));
        self.changed.notify_waiters();
        result
    }

    /// LeaveGroup: the member goes at once, and the others rebalance without it.
    pub fn leave(&self, group_id: &str, member_id: &str) -> Result<(), GroupError> {
        let mut groups = self.groups();
        let group = groups.get_mut(group_id).ok_or(GroupError::UnknownMember)?;
        group
            .members
            .remove(member_id)
            .ok_or(GroupError::UnknownMember)?;
        group.answers.remove(member_id);
        group.membership_changed(Instant::now());
        drop(groups);
        self.changed.notify_waiters();
        Ok(())
    }

    /// Whether an OffsetCommit may go ahead: always for a consumer outside group membership
    /// (generation -1, no member id); for a member, only in the group's current, settled
    /// generation, so that a consumer that lost its partitions cannot commit over their new
    /// owner.
    pub fn may_commit(
        &self,
        group_id: &str,
        generation: i32,
        member_id: &str,
    ) -> Result<(), GroupError> {
        if generation < 0 && member_id.is_empty() {
            return Ok(());
        }
        if !self.groups().contains_key(group_id) {
            return Err(GroupError::IllegalGeneration);
        }
        self.with_member(group_id, member_id, |g| g.settled_in(generation))
    }

    /// Runs `check` for a known member, after expiring sessions and noting that it is alive.
    fn with_member(
        &self,
        group_id: &str,
        member_id: &str,
        check: impl FnOnce(&Group) -> Result<(), GroupError>,
    ) -> Result<(), GroupError> {
        let mut groups = self.groups();
        let group = groups.get_mut(group_id).ok_or(GroupError::UnknownMember)?;
        let now = Instant::now();
        group.expire(now);
        let member = group
            .members
            .get_mut(member_id)
            .ok_or(GroupError::UnknownMember)?;
        member.last_seen = now;
        check(group)
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

    #[test]
    fn the_coordinator_is_the_same_live_broker_for_everyone() {
        let brokers = [BrokerId(3), BrokerId(1), BrokerId(2)];
        let chosen = coordinator_of("orders", &brokers).expect("one");
        assert_eq!(
            coordinator_of("orders", &[BrokerId(2), BrokerId(3), BrokerId(1)]),
            Some(chosen)
        );
        let spread: std::collections::BTreeSet<_> = (0..30)
            .filter_map(|i| coordinator_of(&format!("g{i}"), &brokers))
            .collect();
        assert_eq!(spread.len(), 3, "groups spread over the brokers");
        assert_eq!(coordinator_of("orders", &[]), None);
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
            c.heartbeat("g", 1, &a.member_id),
            Err(GroupError::RebalanceInProgress)
        );
        let a2 = c.join(join(&a.member_id, "a")).await.expect("a rejoins");
        let b = b_join.await.expect("task").expect("b joins");
        assert_eq!((a2.generation, b.generation), (2, 2));
        assert_eq!(a2.leader, a.member_id, "the leader stays");
        let ids: Vec<&str> = a2.members.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids.len(), 2);
        assert!(ids.contains(&b.member_id.as_str()));
        assert!(b.members.is_empty(), "only the leader sees the members");

        // b's sync waits for the leader's assignment.
        let b_sync = tokio::spawn({
            let (c, id) = (c.clone(), b.member_id.clone());
            async move { c.sync("g", 2, &id, Vec::new()).await }
        });
        let plan = vec![
            (a.member_id.clone(), Bytes::from_static(b"p0")),
            (b.member_id.clone(), Bytes::from_static(b"p1")),
        ];
        assert_eq!(
            c.sync("g", 2, &a.member_id, plan).await,
            Ok(Bytes::from_static(b"p0"))
        );
        assert_eq!(b_sync.await.expect("task"), Ok(Bytes::from_static(b"p1")));
        assert_eq!(c.heartbeat("g", 2, &b.member_id), Ok(()));
        assert_eq!(
            c.heartbeat("g", 1, &b.member_id),
            Err(GroupError::IllegalGeneration)
        );
        assert_eq!(c.may_commit("g", 2, &b.member_id), Ok(()));
        assert_eq!(
            c.may_commit("g", 1, &b.member_id),
            Err(GroupError::IllegalGeneration)
        );
        assert_eq!(c.may_commit("other", -1, ""), Ok(()), "manual assignment");

        // a leaves: b rebalances alone and leads.
        assert_eq!(c.leave("g", &a.member_id), Ok(()));
        assert_eq!(
            c.heartbeat("g", 2, &b.member_id),
            Err(GroupError::RebalanceInProgress)
        );
        let b3 = c.join(join(&b.member_id, "b")).await.expect("b rejoins");
        assert_eq!(
            (b3.generation, b3.leader.as_str()),
            (3, b.member_id.as_str())
        );
        assert_eq!(
            c.heartbeat("g", 3, &a.member_id),
            Err(GroupError::UnknownMember)
        );
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
            c.heartbeat("g", 2, &a.member_id),
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
