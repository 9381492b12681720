//! The consumer groups this broker coordinates: the driver of the core's [`isr::group::Group`]
//! (Kafka's classic rebalance protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, and the
//! generation check of OffsetCommit), so that subscribing consumers (librdkafka's `subscribe`,
//! `kcat -G`, kafka-python's group consumer) share a topic's partitions and take over each
//! other's when one leaves or dies. Every decision is the core's; this file keeps the groups
//! under a lock, passes the time (milliseconds since it started, the unit of the members'
//! timeouts), holds a JoinGroup or SyncGroup until its group can answer it, and tells its
//! [`Recorder`] every change, each request as one [`Group::step`], so that the broker's trace
//! can be replayed on the core.
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
use isr::group::{Change, Entered, Group, Identity, Input, Output, Synced};
use isr::{Rules, Tick};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

pub use isr::group::{
    Caller, GroupDescription, GroupError, Join, Joined, JoinedMember, MemberDescription,
    StoredGroup, StoredMember,
};

/// Session timeouts a member may ask for (Kafka's group.min/max.session.timeout.ms are 6 s
/// and 30 min; a lower floor lets tests notice a dead member quickly).
pub const SESSION_TIMEOUTS: std::ops::RangeInclusive<Duration> =
    Duration::from_secs(1)..=Duration::from_secs(30 * 60);
/// How often a waiting JoinGroup or SyncGroup looks at the clock (session expiry, rebalance
/// deadline) when nothing else wakes it.
const RECHECK: Duration = Duration::from_millis(100);

/// A timeout as the core's groups count it: in milliseconds, this driver's tick.
pub fn ticks(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Why a JoinGroup is not answered with a generation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JoinRefused {
    /// Refused with this error.
    Error(GroupError),
    /// A new member must join again with this member id (KIP-394, JoinGroup v4+).
    MemberIdRequired(String),
}

impl From<GroupError> for JoinRefused {
    fn from(e: GroupError) -> Self {
        JoinRefused::Error(e)
    }
}

/// Kafka's MEMBER_ID_REQUIRED error code.
pub const MEMBER_ID_REQUIRED: i16 = 79;

/// Told every change of every group, in the order the groups took them, with the time each
/// was given: the broker's trace records them, so that a replay can re-execute them on the
/// core (`isr::trace::Event::Group`).
pub type Recorder = Arc<dyn Fn(&str, Tick, &Change) + Send + Sync>;

type Groups = BTreeMap<String, Group>;

/// Every group this broker coordinates.
pub struct Coordinator {
    groups: Mutex<Groups>,
    /// The broker's rules (rule 16, the generation check of commits, among them).
    rules: Rules,
    /// `group.initial.rebalance.delay.ms`, in this driver's ticks (milliseconds).
    initial_delay: u64,
    /// Rung on every change that may answer a waiting join or sync.
    changed: Notify,
    started: Instant,
    recorder: Option<Recorder>,
}

impl std::fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator")
            .field("groups", &self.groups)
            .field("rules", &self.rules)
            .field("initial_delay", &self.initial_delay)
            .field("recording", &self.recorder.is_some())
            .finish_non_exhaustive()
    }
}

impl Default for Coordinator {
    fn default() -> Self {
        Coordinator {
            groups: Mutex::default(),
            rules: Rules::default(),
            initial_delay: 0,
            changed: Notify::new(),
            started: Instant::now(),
            recorder: None,
        }
    }
}

impl Coordinator {
    /// A coordinator whose groups, when a member joins them empty, wait `delay` for others
    /// before the rebalance completes (`group.initial.rebalance.delay.ms`; the default
    /// coordinator waits for none).
    pub fn with_initial_delay(delay: Duration) -> Coordinator {
        Coordinator {
            initial_delay: ticks(delay),
            ..Coordinator::default()
        }
    }

    /// This coordinator deciding under the broker's `rules` (the default: the safe ones).
    pub fn with_rules(self, rules: Rules) -> Coordinator {
        Coordinator { rules, ..self }
    }

    /// This coordinator telling `recorder` every change of its groups.
    pub fn recording(self, recorder: Recorder) -> Coordinator {
        Coordinator {
            recorder: Some(recorder),
            ..self
        }
    }

    fn groups(&self) -> MutexGuard<'_, Groups> {
        self.groups.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn now(&self) -> Tick {
        Tick(ticks(self.started.elapsed()))
    }

    fn record(&self, group: &str, now: Tick, change: impl FnOnce() -> Change) {
        if let Some(recorder) = &self.recorder {
            recorder(group, now, &change());
        }
    }

    /// Steps a known group, held under `groups`' lock, with `input` at the current time, and
    /// wakes the waiting joins and syncs if that changed it; `None` when the group is unknown.
    fn step_in(&self, groups: &mut Groups, group: &str, input: Input) -> Option<Output> {
        let g = groups.get_mut(group)?;
        let now = self.now();
        let before = g.changes();
        let output = g.step(&self.rules, now, &input);
        self.record(group, now, || Change::Stepped {
            input,
            output: output.clone(),
        });
        if g.changes() != before {
            self.changed.notify_waiters();
        }
        Some(output)
    }

    /// [`Coordinator::step_in`], taking the lock.
    fn step(&self, group: &str, input: Input) -> Option<Output> {
        self.step_in(&mut self.groups(), group, input)
    }

    /// A step that answers done or refused; UNKNOWN_MEMBER_ID for an unknown group.
    fn done(&self, group: &str, input: Input) -> Result<(), GroupError> {
        match self.step(group, input) {
            Some(Output::Done(result)) => result,
            _ => Err(GroupError::UnknownMember),
        }
    }

    /// JoinGroup: answers once the rebalance this join starts (or joins) is complete.
    pub async fn join(&self, group: &str, join: Join) -> Result<Joined, JoinRefused> {
        if !SESSION_TIMEOUTS.contains(&Duration::from_millis(join.session_timeout)) {
            return Err(GroupError::InvalidSessionTimeout.into());
        }
        let entered = {
            let mut groups = self.groups();
            if !groups.contains_key(group) {
                let initial_delay = self.initial_delay;
                let created = Group::default().with_initial_delay(initial_delay);
                groups.insert(group.to_owned(), created);
                self.record(group, self.now(), || Change::Created { initial_delay });
            }
            self.step_in(&mut groups, group, Input::Join(join))
        };
        let member_id = match entered {
            Some(Output::Entered(entered)) => match entered? {
                Entered::Answered(joined) => return Ok(joined),
                Entered::Waiting(id) => id,
                Entered::MemberIdRequired(id) => return Err(JoinRefused::MemberIdRequired(id)),
            },
            _ => return Err(GroupError::UnknownMember.into()),
        };
        loop {
            let notified = self.changed.notified();
            let input = Input::Joined {
                member_id: member_id.clone(),
            };
            match self.step(group, input) {
                Some(Output::Joined(Ok(Some(joined)))) => return Ok(joined),
                Some(Output::Joined(Ok(None))) => {}
                Some(Output::Joined(Err(e))) => return Err(e.into()),
                _ => return Err(GroupError::UnknownMember.into()),
            }
            let _ = tokio::time::timeout(RECHECK, notified).await;
        }
    }

    /// SyncGroup: the leader hands in the assignment; every member gets its own part once it
    /// has, and once `store` has persisted the generation with it (Kafka's order: a member that
    /// learned its assignment can only be of a generation the next coordinator loads). If the
    /// store fails, the group rebalances and the leader gets the error. `protocol`, when the
    /// request names one (v5), must be the group's.
    pub async fn sync<S, F>(
        &self,
        group: &str,
        caller: Caller<'_>,
        protocol: Option<(&str, &str)>,
        assignments: Vec<(String, Bytes)>,
        store: S,
    ) -> Result<Bytes, GroupError>
    where
        S: FnOnce(StoredGroup) -> F,
        F: Future<Output = Result<(), GroupError>>,
    {
        let assignments: Vec<(String, Vec<u8>)> = assignments
            .into_iter()
            .map(|(member, a)| (member, a.to_vec()))
            .collect();
        let protocol = protocol.map(|(kind, name)| (kind.to_owned(), name.to_owned()));
        let mut store = Some(store);
        loop {
            let notified = self.changed.notified();
            let input = Input::Sync {
                caller: Identity::of(caller),
                protocol: protocol.clone(),
                assignments: assignments.clone(),
            };
            let synced = match self.step(group, input) {
                Some(Output::Synced(synced)) => synced?,
                _ => return Err(GroupError::UnknownMember),
            };
            match (synced, store.take()) {
                (Synced::Assignment(assignment), _) => return Ok(Bytes::from(assignment)),
                (Synced::Store(stored), Some(store)) => {
                    let generation = stored.generation;
                    let result = store(stored).await;
                    let stored = result.is_ok();
                    self.step(group, Input::Stored { generation, stored });
                    result?;
                    continue;
                }
                (_, kept) => store = kept,
            }
            let _ = tokio::time::timeout(RECHECK, notified).await;
        }
    }

    /// The group's protocol type and chosen protocol (SyncGroup v5 answers with them).
    pub fn protocol(&self, group: &str) -> Option<(String, String)> {
        self.groups().get(group).map(Group::protocol)
    }

    /// Heartbeat: keeps the member's session; REBALANCE_IN_PROGRESS tells it to join again.
    pub fn heartbeat(&self, group: &str, caller: Caller<'_>) -> Result<(), GroupError> {
        self.done(group, Input::Heartbeat(Identity::of(caller)))
    }

    /// LeaveGroup of one member, named by member id, instance id or both (v3 batches them):
    /// it goes at once, and the others rebalance without it.
    pub fn leave(
        &self,
        group: &str,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), GroupError> {
        let input = Input::Leave {
            member_id: member_id.to_owned(),
            instance_id: instance_id.map(str::to_owned),
        };
        self.done(group, input)
    }

    /// Whether an OffsetCommit may go ahead ([`Group::may_commit`], under the broker's rules);
    /// a member committing to a group this coordinator does not know is of no generation it
    /// has (ILLEGAL_GENERATION).
    pub fn may_commit(&self, group: &str, caller: Caller<'_>) -> Result<(), GroupError> {
        match self.step(group, Input::Commit(Identity::of(caller))) {
            Some(Output::Done(result)) => result,
            _ if isr::group::is_member(caller) => Err(GroupError::IllegalGeneration),
            _ => Ok(()),
        }
    }

    /// Every group this coordinator knows, by name, described (members expired first).
    pub fn list(&self) -> Vec<(String, GroupDescription)> {
        let names: Vec<String> = self.groups().keys().cloned().collect();
        names
            .into_iter()
            .filter_map(|name| Some((name.clone(), self.describe(&name)?)))
            .collect()
    }

    /// One group, described (members whose session ran out dropped first); `None` when this
    /// coordinator does not know it.
    pub fn describe(&self, group: &str) -> Option<GroupDescription> {
        let mut groups = self.groups();
        self.step_in(&mut groups, group, Input::Expire)?;
        groups.get(group).map(Group::describe)
    }

    /// What is stored of a group now, for the caller to persist (after a LeaveGroup emptied
    /// it); `None` when this coordinator does not know it.
    pub fn stored(&self, group: &str) -> Option<StoredGroup> {
        self.groups().get(group).map(Group::stored)
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
        let now = self.now();
        let initial_delay = self.initial_delay;
        let mut groups = self.groups();
        groups.retain(|name, _| {
            let keep = !belongs(name);
            if !keep {
                self.record(name, now, || Change::Forgotten);
            }
            keep
        });
        for (name, stored) in loaded {
            self.record(&name, now, || Change::Loaded {
                stored: stored.clone(),
                initial_delay,
            });
            let group = Group::from_stored(stored, now).with_initial_delay(initial_delay);
            groups.insert(name, group);
        }
        drop(groups);
        self.changed.notify_waiters();
    }

    /// Forgets a group without members (DeleteGroups); its committed offsets are the
    /// caller's to delete. NON_EMPTY_GROUP while it has members.
    pub fn delete(&self, group: &str) -> Result<(), GroupError> {
        let mut groups = self.groups();
        if self.step_in(&mut groups, group, Input::Expire).is_none() {
            return Ok(());
        }
        if groups.get(group).is_some_and(Group::has_members) {
            return Err(GroupError::NonEmptyGroup);
        }
        groups.remove(group);
        self.record(group, self.now(), || Change::Forgotten);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn join(member_id: &str, client: &str) -> Join {
        Join {
            member_id: member_id.into(),
            instance_id: None,
            client_id: client.into(),
            protocol_type: "consumer".into(),
            protocols: vec![
                ("range".into(), format!("{client}-range").into_bytes()),
                ("roundrobin".into(), format!("{client}-rr").into_bytes()),
            ],
            session_timeout: 1_000,
            rebalance_timeout: 2_000,
            member_id_required: false,
        }
    }

    fn static_join(member_id: &str, instance: &str) -> Join {
        Join {
            instance_id: Some(instance.into()),
            session_timeout: 5_000,
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
    async fn members_that_join_an_empty_group_within_the_initial_delay_share_one_generation() {
        let c = Arc::new(Coordinator::with_initial_delay(Duration::from_millis(300)));
        let first = tokio::spawn({
            let c = c.clone();
            async move { c.join("g", join("", "a")).await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let b = c.join("g", join("", "b")).await.expect("b joins");
        let a = first.await.expect("task").expect("a joins");
        assert_eq!((a.generation, b.generation), (1, 1));
        assert_eq!(a.members.len() + b.members.len(), 2, "the leader sees both");
    }

    #[tokio::test]
    async fn a_v4_join_gives_the_new_member_its_id_first() {
        let c = Coordinator::default();
        let asking = |member_id: &str| Join {
            member_id_required: true,
            ..join(member_id, "a")
        };
        let Err(JoinRefused::MemberIdRequired(id)) = c.join("g", asking("")).await else {
            panic!("a new member is asked to join again with its id");
        };
        let joined = c.join("g", asking(&id)).await.expect("joins with its id");
        assert_eq!((joined.member_id, joined.generation), (id, 1));
    }

    #[tokio::test]
    async fn two_members_join_one_generation_and_the_leader_assigns() {
        let c = Arc::new(Coordinator::default());
        let a = c.join("g", join("", "a")).await.expect("a joins");
        assert_eq!((a.generation, a.leader.as_str()), (1, a.member_id.as_str()));
        assert_eq!(a.protocol, "range");
        // b joins: a rebalance, which a learns of from its heartbeat and joins.
        let b_join = tokio::spawn({
            let c = c.clone();
            async move { c.join("g", join("", "b")).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            c.heartbeat("g", at(&a.member_id, 1)),
            Err(GroupError::RebalanceInProgress)
        );
        let a2 = c
            .join("g", join(&a.member_id, "a"))
            .await
            .expect("a rejoins");
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
        let b3 = c
            .join("g", join(&b.member_id, "b"))
            .await
            .expect("b rejoins");
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
        let a = c.join("g", join("", "a")).await.expect("a");
        c.sync("g", at(&a.member_id, 1), None, vec![], kept)
            .await
            .expect("a syncs");
        let b_join = tokio::spawn({
            let c = c.clone();
            async move { c.join("g", join("", "b")).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(c.describe("g").map(|d| d.state), Some("PreparingRebalance"));
        assert_eq!(
            c.may_commit("g", at(&a.member_id, 1)),
            Ok(()),
            "the revoking member saves its position"
        );
        let a2 = c
            .join("g", join(&a.member_id, "a"))
            .await
            .expect("a rejoins");
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
        let a = c.join("g", static_join("", "ia")).await.expect("a");
        let b_join = tokio::spawn({
            let c = c.clone();
            async move { c.join("g", static_join("", "ib")).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let a = c
            .join("g", static_join(&a.member_id, "ia"))
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
        let b2 = c
            .join("g", static_join("", "ib"))
            .await
            .expect("b restarts");
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
            c.join("g", static_join(&b.member_id, "ib")).await,
            Err(GroupError::FencedInstanceId.into())
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
        let (a, b) = joined_pair(c).await;
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

    /// a joins alone (generation 1), b joins, a rejoins: both in generation 2, a leading.
    async fn joined_pair(c: &Arc<Coordinator>) -> (Joined, Joined) {
        let a = c.join("g", join("", "a")).await.expect("a joins");
        let b_join = tokio::spawn({
            let c = c.clone();
            async move { c.join("g", join("", "b")).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let a = c
            .join("g", join(&a.member_id, "a"))
            .await
            .expect("a rejoins");
        let b = b_join.await.expect("task").expect("b joins");
        (a, b)
    }

    #[tokio::test]
    async fn a_new_coordinator_loads_the_group_and_its_members_carry_on_in_their_generation() {
        let (a, b, stored) = stable_pair(&Arc::new(Coordinator::default())).await;
        assert_eq!((stored.generation, stored.protocol.as_str()), (2, "range"));
        assert_eq!(stored.leader.as_deref(), Some(a.member_id.as_str()));
        let parts: Vec<(&str, &[u8])> = stored
            .members
            .iter()
            .map(|m| (m.client_id.as_str(), m.assignment.as_slice()))
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
            async move { next.join("g", join("", "a")).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (a3, b3) = tokio::join!(
            next.join("g", join(&a.member_id, "a")),
            next.join("g", join(&b.member_id, "b"))
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
        let (a, b) = joined_pair(&c).await;
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
        let a = c.join("g", join("", "a")).await.expect("a");
        let b = c.join("g", join("", "b")).await;
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
        c.join("g", join("", "a")).await.expect("a");
        let mut other = join("", "x");
        other.protocols = vec![("sticky".into(), Vec::new())];
        assert_eq!(
            c.join("g", other).await,
            Err(GroupError::InconsistentProtocol.into())
        );
        assert_eq!(
            c.join("g", join("nobody", "y")).await,
            Err(GroupError::UnknownMember.into())
        );
        let mut short = join("", "z");
        short.session_timeout = 10;
        assert_eq!(
            c.join("g", short).await,
            Err(GroupError::InvalidSessionTimeout.into())
        );
    }
}
