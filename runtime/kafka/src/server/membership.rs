//! JoinGroup, SyncGroup, Heartbeat and LeaveGroup: Kafka requests to and from the
//! [`Coordinator`], answered NOT_COORDINATOR by a broker that does not coordinate the group.

use crate::backend::{Backend, BackendError};
use crate::coordinator::{coordinator_of, Coordinator, GroupError, Join};
use bytes::Bytes;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::StrBytes;
use std::time::Duration;

/// The coordinator, if this broker is the one for `group` (see [`coordinator_of`]).
async fn coordinating<'a, B: Backend>(backend: &'a B, group: &str) -> Result<&'a Coordinator, i16> {
    let cluster = backend.metadata().await.map_err(|e| e.code())?;
    let live: Vec<isr::BrokerId> = cluster.brokers.iter().map(|b| b.id).collect();
    match coordinator_of(group, &live) {
        Some(c) if c == cluster.this_broker => Ok(backend.coordinator()),
        Some(_) => Err(GroupError::NotCoordinator.code()),
        None => Err(BackendError::CoordinatorNotAvailable.code()),
    }
}

fn millis(ms: i32) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

pub async fn join_group<B: Backend>(
    backend: &B,
    request: JoinGroupRequest,
    version: i16,
    client_id: &str,
) -> JoinGroupResponse {
    let group = request.group_id.0.as_str();
    let refused = |code: i16| {
        JoinGroupResponse::default()
            .with_error_code(code)
            .with_generation_id(-1)
            .with_protocol_name(Some(StrBytes::default()))
            .with_member_id(request.member_id.clone())
    };
    let coordinator = match coordinating(backend, group).await {
        Ok(c) => c,
        Err(code) => return refused(code),
    };
    let join = Join {
        group: group.to_owned(),
        member_id: request.member_id.as_str().to_owned(),
        client_id: if client_id.is_empty() {
            "consumer"
        } else {
            client_id
        }
        .to_owned(),
        protocol_type: request.protocol_type.as_str().to_owned(),
        protocols: request
            .protocols
            .iter()
            .map(|p| (p.name.as_str().to_owned(), p.metadata.clone()))
            .collect(),
        session_timeout: millis(request.session_timeout_ms),
        // v0 has no rebalance timeout: Kafka takes the session timeout.
        rebalance_timeout: millis(if version >= 1 {
            request.rebalance_timeout_ms
        } else {
            request.session_timeout_ms
        }),
    };
    match coordinator.join(join).await {
        Ok(joined) => JoinGroupResponse::default()
            .with_generation_id(joined.generation)
            .with_protocol_name(Some(text(&joined.protocol)))
            .with_leader(text(&joined.leader))
            .with_member_id(text(&joined.member_id))
            .with_members(
                joined
                    .members
                    .into_iter()
                    .map(|(id, metadata)| {
                        JoinGroupResponseMember::default()
                            .with_member_id(text(&id))
                            .with_metadata(metadata)
                    })
                    .collect(),
            ),
        Err(e) => refused(e.code()),
    }
}

pub async fn sync_group<B: Backend>(backend: &B, request: SyncGroupRequest) -> SyncGroupResponse {
    let group = request.group_id.0.as_str();
    let result = match coordinating(backend, group).await {
        Ok(coordinator) => {
            let assignments: Vec<(String, Bytes)> = request
                .assignments
                .iter()
                .map(|a| (a.member_id.as_str().to_owned(), a.assignment.clone()))
                .collect();
            let member = request.member_id.as_str();
            coordinator
                .sync(group, request.generation_id, member, assignments)
                .await
                .map_err(GroupError::code)
        }
        Err(code) => Err(code),
    };
    match result {
        Ok(assignment) => SyncGroupResponse::default().with_assignment(assignment),
        Err(code) => SyncGroupResponse::default().with_error_code(code),
    }
}

pub async fn heartbeat<B: Backend>(backend: &B, request: HeartbeatRequest) -> HeartbeatResponse {
    let group = request.group_id.0.as_str();
    let code = match coordinating(backend, group).await {
        Ok(c) => c
            .heartbeat(group, request.generation_id, request.member_id.as_str())
            .err()
            .map_or(0, GroupError::code),
        Err(code) => code,
    };
    HeartbeatResponse::default().with_error_code(code)
}

pub async fn leave_group<B: Backend>(
    backend: &B,
    request: LeaveGroupRequest,
) -> LeaveGroupResponse {
    let group = request.group_id.0.as_str();
    let code = match coordinating(backend, group).await {
        Ok(c) => c
            .leave(group, request.member_id.as_str())
            .err()
            .map_or(0, GroupError::code),
        Err(code) => code,
    };
    LeaveGroupResponse::default().with_error_code(code)
}
