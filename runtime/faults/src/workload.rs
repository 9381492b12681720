//! The workload a scenario runs while it injects faults: producers and consumer group members,
//! each a task recording every operation in the [`Recorder`].
//!
//! - An **idempotent acks=all producer** writes one record at a time to its partition, each a
//!   batch stamped with its producer id and the next sequence number, and retries that very
//!   batch (to whichever broker leads now) until it is acknowledged: a broker holding it answers
//!   the retry with the first attempt's offsets, so nothing is stored twice.
//! - An **acks=1 producer** sends each record once; an error leaves it indeterminate.
//! - A **group member** joins the consumer group (Kafka's classic protocol: JoinGroup, the
//!   leader's round-robin assignment through SyncGroup, heartbeats), resumes each assigned
//!   partition from the group's committed offset, reads from the leader, and commits after
//!   every read; a rebalance makes it join again. A lost coordinator does not: like Kafka's
//!   clients it finds the new one and carries on in its generation, which the new coordinator
//!   loaded from the group's offsets partition (it joins again only if it is refused there).

use crate::client::Router;
use crate::history::{Acks, Commit, Outcome, Read, Recorder, Told, Write};
use bytes::Bytes;
use isr_kafka::client::consume::{
    commit_request, commit_result, committed_offset, fetch_request, fetched_records,
    list_offsets_request, listed_offset, offset_fetch_request, EARLIEST,
};
use isr_kafka::client::produce::{base_offset, request};
use isr_kafka::client::records::{self, Idempotent, Outgoing};
use isr_kafka::client::ClientError;
use isr_kafka::consumer_protocol::assigned_partitions;
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, GroupId, HeartbeatRequest,
    InitProducerIdRequest, JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest, TopicName,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// How long one produce attempt may take before the producer gives up on that connection and
/// looks for the leader again (a paused or partitioned leader answers nothing): short, so that
/// the unavailability measured is the cluster's more than the client's.
const PRODUCE_TIMEOUT: Duration = Duration::from_millis(1500);
/// An acks=1 producer's pace: enough to keep a leader's log end moving (a slow follower's
/// fetches then always find it further on), not so much that it loads the machine.
const ACKS_ONE_EVERY: Duration = Duration::from_millis(10);
/// How long a group request may take (a JoinGroup waits for the other members).
const GROUP_TIMEOUT: Duration = Duration::from_secs(8);
/// How long a consumer's fetch waits for new records at the leader.
const FETCH_WAIT_MS: i32 = 200;
const BACKOFF: Duration = Duration::from_millis(100);
/// The group's session and rebalance timeouts.
const SESSION_MS: i32 = 6_000;
const REBALANCE_MS: i32 = 3_000;
const HEARTBEAT_EVERY: Duration = Duration::from_secs(1);
pub const GROUP: &str = "faults";

/// Who runs, against which cluster.
#[derive(Clone)]
pub struct Plan {
    pub bootstrap: Vec<String>,
    pub topic: String,
    pub partitions: u32,
    /// Idempotent acks=all producers per partition.
    pub acks_all: u32,
    /// acks=1 producers per partition.
    pub acks_one: u32,
    /// Consumer group members.
    pub members: u32,
}

/// The running workload.
pub struct Workload {
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
}

/// What every task shares: where to record, the scenario's clock, when to stop.
#[derive(Clone)]
struct Context {
    plan: Plan,
    history: Recorder,
    start: Instant,
    stop: watch::Receiver<bool>,
}

impl Context {
    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    fn stopping(&self) -> bool {
        *self.stop.borrow()
    }

    /// Sleeps `d`, or less if the workload stops meanwhile.
    async fn pause(&mut self, d: Duration) {
        let _ = tokio::time::timeout(d, self.stop.wait_for(|&s| s)).await;
    }
}

impl Workload {
    /// Starts every producer and member; `start` is the scenario's time zero.
    pub fn start(plan: Plan, history: Recorder, start: Instant) -> Workload {
        let (stop, stopped) = watch::channel(false);
        let cx = Context {
            plan: plan.clone(),
            history,
            start,
            stop: stopped,
        };
        let mut tasks = JoinSet::new();
        for p in 0..plan.partitions {
            for i in 0..plan.acks_all {
                let name = format!("all{p}.{i}");
                tasks.spawn(produce(cx.clone(), name, p, Acks::All));
            }
            for i in 0..plan.acks_one {
                let name = format!("one{p}.{i}");
                tasks.spawn(produce(cx.clone(), name, p, Acks::One));
            }
        }
        for m in 0..plan.members {
            tasks.spawn(member(cx.clone(), format!("member{m}")));
        }
        Workload { stop, tasks }
    }

    /// Stops every task; each finishes the operation it is in (a write gets one more attempt).
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        let all = async { while self.tasks.join_next().await.is_some() {} };
        if tokio::time::timeout(Duration::from_secs(15), all)
            .await
            .is_err()
        {
            self.tasks.abort_all();
        }
    }
}

/// The producer id and epoch for an idempotent producer, asked of any broker until one answers.
async fn producer_id(cx: &mut Context, router: &mut Router) -> Option<(i64, i16)> {
    let mut n = 0;
    while !cx.stopping() {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(-1);
        let addr = router.any_broker(n);
        n += 1;
        if let Ok(answer) = router.call(&addr, &request, PRODUCE_TIMEOUT).await {
            if answer.error_code == 0 {
                return Some((answer.producer_id.0, answer.producer_epoch));
            }
        }
        router.refresh().await;
        cx.pause(BACKOFF).await;
    }
    None
}

async fn produce(mut cx: Context, name: String, partition: u32, acks: Acks) {
    let mut router = Router::new(&cx.plan.bootstrap, &cx.plan.topic);
    router.refresh().await;
    let idempotent = match acks {
        Acks::All => match producer_id(&mut cx, &mut router).await {
            Some(id) => Some(id),
            None => return,
        },
        Acks::One => None,
    };
    let mut sequence: i32 = 0;
    while !cx.stopping() {
        let value = format!("{name}-{sequence}");
        let stamp = idempotent.map(|(producer_id, producer_epoch)| Idempotent {
            producer_id,
            producer_epoch,
            first_sequence: sequence,
        });
        let record = Outgoing {
            key: None,
            value: Bytes::from(value.clone()),
        };
        let Ok(batch) = records::encode_as(&[record], records::now_ms(), stamp) else {
            return;
        };
        let index = cx.history.invoke(Write {
            producer: name.clone(),
            partition,
            value,
            acks,
            invoked: cx.now(),
            completed: None,
            outcome: Outcome::Pending,
        });
        let request = request(&cx.plan.topic, partition, acks.into(), batch);
        let outcome = write_once(&mut cx, &mut router, partition, &request, stamp.is_some()).await;
        cx.history.complete(index, outcome, cx.now());
        sequence += 1;
        if acks == Acks::One {
            cx.pause(ACKS_ONE_EVERY).await;
        }
    }
}

impl From<Acks> for isr::Acks {
    fn from(acks: Acks) -> isr::Acks {
        match acks {
            Acks::All => isr::Acks::All,
            Acks::One => isr::Acks::Leader,
        }
    }
}

/// One write: until acknowledged when `retry` (an idempotent producer; after the workload is
/// told to stop, one last attempt), else one attempt.
async fn write_once(
    cx: &mut Context,
    router: &mut Router,
    partition: u32,
    request: &kafka_protocol::messages::ProduceRequest,
    retry: bool,
) -> Outcome {
    let mut last = String::from("no leader known");
    let mut attempts_after_stop = 0;
    loop {
        if cx.stopping() {
            if attempts_after_stop > 0 {
                return Outcome::Indeterminate(last);
            }
            attempts_after_stop += 1;
        }
        match router.leader(partition) {
            None => router.refresh().await,
            Some(addr) => match router.call(&addr, request, PRODUCE_TIMEOUT).await {
                Ok(answer) => match base_offset(&addr, &answer) {
                    Ok(offset) => return Outcome::Acked(offset),
                    Err(e) => last = e.to_string(),
                },
                Err(e) => last = e.to_string(),
            },
        }
        if !retry {
            return Outcome::Indeterminate(last);
        }
        router.forget(partition);
        cx.pause(BACKOFF).await;
        router.refresh().await;
    }
}

/// One group member's life: join, consume what it was assigned, commit, heartbeat; join again
/// whenever the group moves on or the coordinator is lost.
async fn member(mut cx: Context, name: String) {
    let mut router = Router::new(&cx.plan.bootstrap, &cx.plan.topic);
    router.refresh().await;
    let mut member_id = String::new();
    let mut n = 0usize;
    while !cx.stopping() {
        n += 1;
        let Ok(coordinator) = router.coordinator(GROUP, n).await else {
            cx.pause(BACKOFF).await;
            router.refresh().await;
            continue;
        };
        let joined = join(&mut cx, &mut router, &coordinator, &mut member_id).await;
        let Some((generation, partitions)) = joined else {
            cx.pause(BACKOFF).await;
            continue;
        };
        let mut session = Session {
            coordinator,
            generation,
            member_id: member_id.clone(),
        };
        consume(
            &mut cx,
            &mut router,
            &name,
            &mut session,
            &partitions,
            &mut n,
        )
        .await;
    }
    if !member_id.is_empty() {
        if let Ok(coordinator) = router.coordinator(GROUP, n).await {
            let leave = LeaveGroupRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str(GROUP)))
                .with_member_id(StrBytes::from_string(member_id));
            let _ = router.call(&coordinator, &leave, GROUP_TIMEOUT).await;
        }
    }
}

/// A member's place in one generation of the group.
struct Session {
    coordinator: String,
    generation: i32,
    member_id: String,
}

/// JoinGroup then SyncGroup: the generation and this member's partitions. The group's leader
/// assigns the topic's partitions round-robin over the members in id order.
async fn join(
    cx: &mut Context,
    router: &mut Router,
    coordinator: &str,
    member_id: &mut String,
) -> Option<(i32, Vec<u32>)> {
    let group = GroupId(StrBytes::from_static_str(GROUP));
    let topic = StrBytes::from_string(cx.plan.topic.clone());
    let subscription = encode(
        &ConsumerProtocolSubscription::default().with_topics(vec![topic.clone()]),
        0,
    )?;
    let request = JoinGroupRequest::default()
        .with_group_id(group.clone())
        .with_session_timeout_ms(SESSION_MS)
        .with_rebalance_timeout_ms(REBALANCE_MS)
        .with_member_id(StrBytes::from_string(member_id.clone()))
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(StrBytes::from_static_str("roundrobin"))
            .with_metadata(subscription)]);
    let joined = router
        .call(coordinator, &request, GROUP_TIMEOUT)
        .await
        .ok()?;
    match joined.error_code {
        0 => {}
        // MEMBER_ID_REQUIRED (KIP-394, JoinGroup v4+): join again with the id it gives.
        79 => {
            *member_id = joined.member_id.as_str().to_string();
            return None;
        }
        // UNKNOWN_MEMBER_ID: join afresh.
        25 => {
            member_id.clear();
            return None;
        }
        _ => return None,
    }
    *member_id = joined.member_id.as_str().to_string();
    let mut assignments = Vec::new();
    if joined.leader == joined.member_id {
        let mut members: Vec<String> = joined
            .members
            .iter()
            .map(|m| m.member_id.as_str().to_string())
            .collect();
        members.sort();
        for (i, m) in members.iter().enumerate() {
            let mine: Vec<i32> = (0..cx.plan.partitions)
                .filter(|p| *p as usize % members.len() == i)
                .map(|p| p as i32)
                .collect();
            let assignment = ConsumerProtocolAssignment::default().with_assigned_partitions(vec![
                TopicPartition::default()
                    .with_topic(TopicName(topic.clone()))
                    .with_partitions(mine),
            ]);
            assignments.push(
                SyncGroupRequestAssignment::default()
                    .with_member_id(StrBytes::from_string(m.clone()))
                    .with_assignment(encode(&assignment, 0)?),
            );
        }
    }
    let sync = SyncGroupRequest::default()
        .with_group_id(group)
        .with_generation_id(joined.generation_id)
        .with_member_id(joined.member_id.clone())
        .with_protocol_type(Some(StrBytes::from_static_str("consumer")))
        .with_protocol_name(joined.protocol_name.clone())
        .with_assignments(assignments);
    let synced = router.call(coordinator, &sync, GROUP_TIMEOUT).await.ok()?;
    if synced.error_code != 0 {
        return None;
    }
    let partitions = assigned(&synced.assignment, &cx.plan.topic);
    Some((joined.generation_id, partitions))
}

/// A consumer protocol message as its bytes: a version, then the message at that version.
fn encode<M: Encodable>(message: &M, version: i16) -> Option<Bytes> {
    let mut buf = bytes::BytesMut::new();
    buf.extend_from_slice(&version.to_be_bytes());
    message.encode(&mut buf, version).ok()?;
    Some(buf.freeze())
}

/// This member's partitions of the topic in an assignment (read within its bounds).
fn assigned(assignment: &[u8], topic: &str) -> Vec<u32> {
    assigned_partitions(assignment)
        .into_iter()
        .filter(|(t, _)| t == topic)
        .flat_map(|(_, partitions)| partitions)
        .filter_map(|p| u32::try_from(p).ok())
        .collect()
}

/// Consumes `partitions` in one generation until the group moves on, no coordinator is found
/// within a session, or the workload stops.
async fn consume(
    cx: &mut Context,
    router: &mut Router,
    name: &str,
    session: &mut Session,
    partitions: &[u32],
    n: &mut usize,
) {
    let mut positions = Vec::new();
    for &p in partitions {
        let invoked = cx.now();
        let request = offset_fetch_request(GROUP, &cx.plan.topic, p);
        let answer = router
            .call(&session.coordinator, &request, GROUP_TIMEOUT)
            .await;
        let Ok(Ok(offset)) = answer.map(|a| committed_offset(&a)) else {
            return;
        };
        cx.history.lock().told.push(Told {
            consumer: name.to_string(),
            partition: p,
            offset,
            invoked,
        });
        positions.push((p, offset.unwrap_or(0)));
    }
    let mut heartbeat = Instant::now();
    while !cx.stopping() {
        for (p, position) in positions.iter_mut() {
            if let Err(e) = read(cx, router, name, session, *p, position).await {
                let lost = coordinator_lost(&e);
                if group_moved_on(&e) || lost && !refind(cx, router, session, n).await {
                    return;
                }
            }
        }
        if positions.is_empty() {
            cx.pause(Duration::from_millis(FETCH_WAIT_MS as u64)).await;
        }
        if heartbeat.elapsed() >= HEARTBEAT_EVERY {
            heartbeat = Instant::now();
            let request = HeartbeatRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str(GROUP)))
                .with_generation_id(session.generation)
                .with_member_id(StrBytes::from_string(session.member_id.clone()));
            let answer = router
                .call(&session.coordinator, &request, GROUP_TIMEOUT)
                .await;
            let carry_on = match answer {
                Ok(answer) if answer.error_code == 0 => true,
                Ok(answer) if matches!(answer.error_code, 14..=16) => {
                    refind(cx, router, session, n).await
                }
                Err(e) if coordinator_lost(&e) => refind(cx, router, session, n).await,
                _ => false,
            };
            if !carry_on {
                return;
            }
        }
    }
}

/// Whether an error means this member must join again: a rebalance, or another generation.
fn group_moved_on(e: &ClientError) -> bool {
    matches!(e, ClientError::Kafka { code, .. } if matches!(code, 22 | 25 | 27))
}

/// Whether an error means the coordinator is gone, loading, or no longer coordinates.
fn coordinator_lost(e: &ClientError) -> bool {
    matches!(e, ClientError::Kafka { code, .. } if matches!(code, 14..=16))
        || matches!(e, ClientError::Io { .. } | ClientError::Connect { .. })
}

/// Finds the group's coordinator again, within a session timeout: whether one was found (the
/// member then carries on in its generation there).
async fn refind(
    cx: &mut Context,
    router: &mut Router,
    session: &mut Session,
    n: &mut usize,
) -> bool {
    let deadline = Instant::now() + Duration::from_millis(SESSION_MS as u64);
    while Instant::now() < deadline && !cx.stopping() {
        *n += 1;
        match router.coordinator(GROUP, *n).await {
            Ok(coordinator) => {
                session.coordinator = coordinator;
                return true;
            }
            Err(_) => {
                cx.pause(BACKOFF).await;
                router.refresh().await;
            }
        }
    }
    false
}

/// One fetch of `partition` at `position` from its leader; the records read are recorded, and
/// the new position committed.
async fn read(
    cx: &mut Context,
    router: &mut Router,
    name: &str,
    session: &Session,
    partition: u32,
    position: &mut i64,
) -> Result<(), ClientError> {
    let Some(leader) = router.leader(partition) else {
        router.refresh().await;
        return Ok(());
    };
    let request = fetch_request(&cx.plan.topic, partition, *position, FETCH_WAIT_MS);
    let wait = Duration::from_millis(FETCH_WAIT_MS as u64) + PRODUCE_TIMEOUT;
    let data = match router.call(&leader, &request, wait).await {
        Ok(answer) => fetched_records(&leader, answer),
        Err(e) => Err(e),
    };
    let data = match data {
        Ok((data, _)) => data,
        // Retention deleted what this member had not read yet: it starts again at the log
        // start, as a consumer with auto.offset.reset=earliest does.
        Err(e) if e.is_offset_out_of_range() => {
            let request = list_offsets_request(&cx.plan.topic, partition, EARLIEST);
            let answer = router.call(&leader, &request, PRODUCE_TIMEOUT).await?;
            let start = listed_offset(&leader, answer)?;
            *position = (*position).max(start);
            return Ok(());
        }
        Err(_) => {
            // Not the leader any more, or unreachable: look again, and come back next round.
            router.forget(partition);
            router.refresh().await;
            return Ok(());
        }
    };
    let at = cx.now();
    let batch = records::decode(data).map_err(|reason| ClientError::Records {
        topic: cx.plan.topic.clone(),
        partition,
        offset: *position,
        reason,
    })?;
    let before = *position;
    {
        let mut h = cx.history.lock();
        for r in &batch {
            if r.offset < *position {
                continue;
            }
            let value = r.value.as_deref().unwrap_or_default();
            h.reads.push(Read {
                consumer: name.to_string(),
                partition,
                offset: r.offset,
                value: String::from_utf8_lossy(value).into_owned(),
                at,
            });
            *position = r.offset + 1;
        }
    }
    if *position == before {
        return Ok(());
    }
    let invoked = cx.now();
    let request = commit_request(
        GROUP,
        (session.generation, &session.member_id),
        &cx.plan.topic,
        partition,
        *position,
    );
    let answer = router
        .call(&session.coordinator, &request, GROUP_TIMEOUT)
        .await?;
    commit_result(&answer)?;
    cx.history.lock().commits.push(Commit {
        consumer: name.to_string(),
        partition,
        offset: *position,
        invoked,
        completed: cx.now(),
    });
    Ok(())
}
