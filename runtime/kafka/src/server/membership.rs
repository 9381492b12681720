//! JoinGroup, SyncGroup, Heartbeat and LeaveGroup: Kafka requests to and from the
//! [`Coordinator`], answered NOT_COORDINATOR by a broker that does not coordinate the group.

use crate::auth::acl::{Operation, ResourceType};
use crate::backend::{Backend, BackendError};
use crate::coordinator::{
    Caller, Coordinator, GroupError, Join, JoinRefused, StoredGroup, MEMBER_ID_REQUIRED,
};
use bytes::Bytes;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::StrBytes;

/// The coordinator, if this broker is the one for `group` and has loaded it
/// ([`Backend::load_group`]), and the caller may do `op` on the group
/// (GROUP_AUTHORIZATION_FAILED otherwise, before anything about the group is revealed or
/// changed).
pub(super) async fn coordinating<'a, B: Backend>(
    backend: &'a B,
    group: &str,
    op: Operation,
) -> Result<&'a Coordinator, i16> {
    backend
        .authorize(op, ResourceType::Group, group)
        .map_err(|e| e.code())?;
    backend.load_group(group).await.map_err(|e| e.code())?;
    Ok(backend.coordinator())
}

/// Persists a group's membership through the backend, as the coordinator asks (see
/// [`Coordinator::sync`]): a refusal tells the client to look for the coordinator again.
async fn store<B: Backend>(
    backend: &B,
    group: &str,
    stored: Option<StoredGroup>,
) -> Result<(), GroupError> {
    backend
        .store_group(group, stored)
        .await
        .map_err(|e| match e {
            BackendError::NotCoordinator => GroupError::NotCoordinator,
            _ => GroupError::CoordinatorNotAvailable,
        })
}

/// Whether this broker coordinates `group`.
pub(super) async fn is_coordinator<B: Backend>(
    backend: &B,
    group: &str,
) -> Result<bool, BackendError> {
    Ok(backend.group_coordinator(group).await?.here)
}

/// INVALID_GROUP_ID: a membership request (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) naming
/// the empty group. Kafka refuses it there; the offset APIs accept it, for old clients that
/// commit offsets without a group.
const INVALID_GROUP_ID: i16 = 24;

/// [`coordinating`] for a membership request: its group id must not be empty.
async fn coordinating_members<'a, B: Backend>(
    backend: &'a B,
    group: &str,
) -> Result<&'a Coordinator, i16> {
    if group.is_empty() {
        return Err(INVALID_GROUP_ID);
    }
    coordinating(backend, group, Operation::Read).await
}

/// A timeout from a request, in the coordinator's ticks (milliseconds).
fn millis(ms: i32) -> u64 {
    u64::try_from(ms).unwrap_or(0)
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

fn opt_str(s: &Option<StrBytes>) -> Option<&str> {
    s.as_ref().map(|s| s.as_str())
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
    let coordinator = match coordinating_members(backend, group).await {
        Ok(c) => c,
        Err(code) => return refused(code),
    };
    let join = Join {
        member_id: request.member_id.as_str().to_owned(),
        instance_id: opt_str(&request.group_instance_id).map(str::to_owned),
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
            .map(|p| (p.name.as_str().to_owned(), p.metadata.to_vec()))
            .collect(),
        session_timeout: millis(request.session_timeout_ms),
        // v0 has no rebalance timeout: Kafka takes the session timeout.
        rebalance_timeout: millis(if version >= 1 {
            request.rebalance_timeout_ms
        } else {
            request.session_timeout_ms
        }),
        // KIP-394: from v4 a new member is given its id first and joins again with it.
        member_id_required: version >= 4,
    };
    match coordinator.join(group, join).await {
        Ok(joined) => JoinGroupResponse::default()
            .with_generation_id(joined.generation)
            .with_protocol_type(Some(text(&joined.protocol_type)))
            .with_protocol_name(Some(text(&joined.protocol)))
            .with_leader(text(&joined.leader))
            .with_member_id(text(&joined.member_id))
            .with_members(
                joined
                    .members
                    .into_iter()
                    .map(|m| {
                        JoinGroupResponseMember::default()
                            .with_member_id(text(&m.member_id))
                            .with_group_instance_id(m.instance_id.as_deref().map(text))
                            .with_metadata(Bytes::from(m.metadata))
                    })
                    .collect(),
            ),
        Err(JoinRefused::Error(e)) => refused(e.code()),
        Err(JoinRefused::MemberIdRequired(id)) => {
            refused(MEMBER_ID_REQUIRED).with_member_id(text(&id))
        }
    }
}

pub async fn sync_group<B: Backend>(backend: &B, request: SyncGroupRequest) -> SyncGroupResponse {
    let group = request.group_id.0.as_str();
    let result = match coordinating_members(backend, group).await {
        Ok(coordinator) => {
            let assignments: Vec<(String, Bytes)> = request
                .assignments
                .iter()
                .map(|a| (a.member_id.as_str().to_owned(), a.assignment.clone()))
                .collect();
            let caller = Caller {
                member_id: request.member_id.as_str(),
                instance_id: opt_str(&request.group_instance_id),
                generation: request.generation_id,
            };
            // v5 names the protocol; earlier versions leave both null.
            let protocol = opt_str(&request.protocol_type).zip(opt_str(&request.protocol_name));
            let persist = |stored| store(backend, group, Some(stored));
            coordinator
                .sync(group, caller, protocol, assignments, persist)
                .await
                .map(|assignment| (assignment, coordinator.protocol(group)))
                .map_err(GroupError::code)
        }
        Err(code) => Err(code),
    };
    match result {
        Ok((assignment, protocol)) => {
            let (kind, name) = protocol.unwrap_or_default();
            SyncGroupResponse::default()
                .with_assignment(assignment)
                .with_protocol_type(Some(text(&kind)))
                .with_protocol_name(Some(text(&name)))
        }
        Err(code) => SyncGroupResponse::default().with_error_code(code),
    }
}

pub async fn heartbeat<B: Backend>(backend: &B, request: HeartbeatRequest) -> HeartbeatResponse {
    let group = request.group_id.0.as_str();
    let code = match coordinating_members(backend, group).await {
        Ok(c) => c
            .heartbeat(
                group,
                Caller {
                    member_id: request.member_id.as_str(),
                    instance_id: opt_str(&request.group_instance_id),
                    generation: request.generation_id,
                },
            )
            .err()
            .map_or(0, GroupError::code),
        Err(code) => code,
    };
    HeartbeatResponse::default().with_error_code(code)
}

/// LeaveGroup: v0-2 name one member; v3 on batch members by member id and/or instance id
/// (how admin tools remove static members) and answer each.
pub async fn leave_group<B: Backend>(
    backend: &B,
    request: LeaveGroupRequest,
    version: i16,
) -> LeaveGroupResponse {
    let group = request.group_id.0.to_string();
    let group = group.as_str();
    let coordinator = match coordinating_members(backend, group).await {
        Ok(c) => c,
        Err(code) => return LeaveGroupResponse::default().with_error_code(code),
    };
    let response = if version < 3 {
        let code = coordinator
            .leave(group, request.member_id.as_str(), None)
            .err()
            .map_or(0, GroupError::code);
        LeaveGroupResponse::default().with_error_code(code)
    } else {
        leave_members(coordinator, group, request)
    };
    // The last member gone: stored so, as Kafka stores an emptied group, or a coordinator that
    // took over would wait for the departed members' sessions before it rebalanced a newcomer.
    // Best effort: the members have left whatever it answers, and if the store fails the
    // next coordinator only waits out their sessions.
    if let Some(empty) = coordinator.stored(group).filter(|g| g.members.is_empty()) {
        let _ = store(backend, group, Some(empty)).await;
    }
    response
}

/// LeaveGroup v3 on: each named member leaves, and is answered on its own.
fn leave_members(
    coordinator: &Coordinator,
    group: &str,
    request: LeaveGroupRequest,
) -> LeaveGroupResponse {
    let members = request
        .members
        .into_iter()
        .map(|m| {
            let code = coordinator
                .leave(group, m.member_id.as_str(), opt_str(&m.group_instance_id))
                .err()
                .map_or(0, GroupError::code);
            MemberResponse::default()
                .with_member_id(m.member_id)
                .with_group_instance_id(m.group_instance_id)
                .with_error_code(code)
        })
        .collect();
    LeaveGroupResponse::default().with_members(members)
}
