//! OffsetCommit and OffsetFetch: consumer groups' positions.
//!
//! Commits go to the group's coordinator, which checks a member's commit against the group's
//! membership ([`crate::Coordinator::may_commit`]); a consumer that assigns partitions itself
//! commits with generation -1 and no member id. The backend keeps committed offsets (the `isr`
//! broker: in the group's partition of `__consumer_offsets`, which the coordinator leads), and
//! answers OffsetFetch on the coordinator only.

use super::authorized;
use super::membership::{coordinating, is_coordinator};
use crate::auth::acl::{Operation, ResourceType, CLUSTER_NAME};
use crate::backend::{Backend, BackendError, CommittedOffset, GroupOffset};
use crate::consumer_protocol::subscribed_topics;
use crate::coordinator::{Caller, GroupDescription, GroupError};
use crate::offsets_topic::{epoch_field, epoch_of_field};
use bytes::Bytes;
use isr::Offset;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use kafka_protocol::messages::{
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
    GroupId, ListGroupsRequest, ListGroupsResponse, OffsetCommitRequest, OffsetCommitResponse,
    OffsetDeleteRequest, OffsetDeleteResponse, OffsetFetchRequest, OffsetFetchResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::collections::{BTreeMap, BTreeSet};

/// GROUP_SUBSCRIBED_TO_TOPIC: OffsetDelete of a topic the group's members consume.
const GROUP_SUBSCRIBED_TO_TOPIC: i16 = 86;
/// The only group type isr runs (ListGroups v5): Kafka's classic protocol.
const CLASSIC: &str = "classic";

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

fn committed_answer(index: i32, c: CommittedOffset) -> OffsetFetchResponsePartition {
    OffsetFetchResponsePartition::default()
        .with_partition_index(index)
        .with_committed_offset(i64::try_from(c.offset.0).unwrap_or(i64::MAX))
        .with_committed_leader_epoch(epoch_field(c.leader_epoch))
        .with_metadata(Some(StrBytes::from_string(c.metadata)))
}

pub async fn offset_commit<B: Backend>(
    backend: &B,
    request: OffsetCommitRequest,
) -> OffsetCommitResponse {
    let group = request.group_id.0.as_str();
    let caller = Caller {
        member_id: request.member_id.as_str(),
        instance_id: request.group_instance_id.as_ref().map(|i| i.as_str()),
        generation: request.generation_id_or_member_epoch,
    };
    // A member of another generation commits nothing.
    let refused = match coordinating(backend, group, Operation::Read).await {
        Ok(c) => c.may_commit(group, caller).err().map(|e| e.code()),
        Err(code) => Some(code),
    };
    // Every valid position of the request, written together (one record batch); the others
    // are answered on their own.
    let mut positions = Vec::new();
    let mut invalid = Vec::new();
    for topic in &request.topics {
        for p in &topic.partitions {
            let position = match (
                u32::try_from(p.partition_index),
                u64::try_from(p.committed_offset),
            ) {
                (Err(_), _) => Err(BackendError::UnknownTopicOrPartition),
                (_, Err(_)) => Err(BackendError::OffsetOutOfRange),
                (Ok(partition), Ok(offset)) => Ok(GroupOffset {
                    topic: topic.name.0.as_str().to_owned(),
                    partition,
                    committed: CommittedOffset {
                        offset: Offset(offset),
                        leader_epoch: epoch_of_field(p.committed_leader_epoch),
                        metadata: p
                            .committed_metadata
                            .as_ref()
                            .map(|m| m.as_str().to_owned())
                            .unwrap_or_default(),
                    },
                }),
            };
            match position {
                Ok(position) => {
                    invalid.push(None);
                    positions.push(position);
                }
                Err(e) => invalid.push(Some(e)),
            }
        }
    }
    let mut written = match refused {
        Some(_) => Vec::new(),
        None => backend.commit_offsets(group, positions).await,
    }
    .into_iter();
    let mut invalid = invalid.into_iter();
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            let result = match invalid.next().flatten() {
                Some(e) => Err(e),
                None => written.next().unwrap_or(Ok(())),
            };
            partitions.push(
                OffsetCommitResponsePartition::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(refused.or(result.err().map(|e| e.code())).unwrap_or(0)),
            );
        }
        topics.push(
            OffsetCommitResponseTopic::default()
                .with_name(topic.name)
                .with_partitions(partitions),
        );
    }
    OffsetCommitResponse::default().with_topics(topics)
}

/// Answers the named partitions, or, when the request names no topics, every partition the
/// group has committed an offset for (what `kafka-consumer-groups --describe` and
/// `list_consumer_group_offsets` ask).
pub async fn offset_fetch<B: Backend>(
    backend: &B,
    request: OffsetFetchRequest,
) -> OffsetFetchResponse {
    let group = request.group_id.0.as_str();
    if let Err(e) = backend.authorize(Operation::Describe, ResourceType::Group, group) {
        return OffsetFetchResponse::default().with_error_code(e.code());
    }
    // The group's offsets, read once: a coordinator's refusal (NOT_COORDINATOR,
    // COORDINATOR_LOAD_IN_PROGRESS) is the whole request's, where clients look for it.
    let offsets = match backend.group_offsets(group).await {
        Ok(offsets) => offsets,
        Err(e) => return OffsetFetchResponse::default().with_error_code(e.code()),
    };
    let Some(wanted) = request.topics else {
        return OffsetFetchResponse::default().with_topics(by_topic(offsets));
    };
    let mut topics = Vec::new();
    for topic in wanted {
        let name = topic.name.0.as_str();
        let mut partitions = Vec::with_capacity(topic.partition_indexes.len());
        for &index in &topic.partition_indexes {
            let result = match u32::try_from(index) {
                Ok(partition) => backend.fetch_offset(group, name, partition).await,
                Err(_) => Err(BackendError::UnknownTopicOrPartition),
            };
            let answer = OffsetFetchResponsePartition::default().with_partition_index(index);
            partitions.push(match result {
                Ok(Some(c)) => committed_answer(index, c),
                Ok(None) => answer
                    .with_committed_offset(-1)
                    .with_metadata(Some(StrBytes::default())),
                Err(e) => answer.with_committed_offset(-1).with_error_code(e.code()),
            });
        }
        topics.push(
            OffsetFetchResponseTopic::default()
                .with_name(topic.name)
                .with_partitions(partitions),
        );
    }
    OffsetFetchResponse::default().with_topics(topics)
}

/// A group's offsets as OffsetFetch answers them, by topic.
fn by_topic(offsets: Vec<GroupOffset>) -> Vec<OffsetFetchResponseTopic> {
    let mut topics: BTreeMap<String, Vec<OffsetFetchResponsePartition>> = BTreeMap::new();
    for o in offsets {
        let index = i32::try_from(o.partition).unwrap_or(i32::MAX);
        topics
            .entry(o.topic)
            .or_default()
            .push(committed_answer(index, o.committed));
    }
    topics
        .into_iter()
        .map(|(name, partitions)| {
            OffsetFetchResponseTopic::default()
                .with_name(TopicName(StrBytes::from_string(name)))
                .with_partitions(partitions)
        })
        .collect()
}

/// The groups this broker coordinates: those with members here, and those that only have
/// committed offsets (Kafka lists them as Empty).
async fn coordinated<B: Backend>(
    backend: &B,
) -> Result<BTreeMap<String, GroupDescription>, BackendError> {
    let mut groups = BTreeMap::new();
    for (name, g) in backend.coordinator().list() {
        // A group whose coordinator moved away is not this broker's to list.
        if is_coordinator(backend, &name).await.unwrap_or(false) {
            groups.insert(name, g);
        }
    }
    for group in backend.offset_groups().await? {
        groups.entry(group).or_insert_with(without_members);
    }
    Ok(groups)
}

/// A group known only by its committed offsets.
fn without_members() -> GroupDescription {
    GroupDescription {
        state: "Empty",
        protocol_type: String::new(),
        protocol: String::new(),
        generation: 0,
        members: Vec::new(),
    }
}

/// ListGroups: the groups this broker coordinates (admin clients ask every broker), filtered
/// by state (v4) and type (v5; every isr group is "classic").
pub async fn list_groups<B: Backend>(
    backend: &B,
    request: ListGroupsRequest,
) -> ListGroupsResponse {
    let groups = match coordinated(backend).await {
        Ok(groups) => groups,
        Err(e) => return ListGroupsResponse::default().with_error_code(e.code()),
    };
    let states: BTreeSet<String> = request
        .states_filter
        .iter()
        .map(|s| s.as_str().to_ascii_lowercase())
        .collect();
    let classic_wanted = request.types_filter.is_empty()
        || request
            .types_filter
            .iter()
            .any(|t| t.as_str().eq_ignore_ascii_case(CLASSIC));
    // Without Describe on the cluster, only the groups the caller may describe are listed.
    let all = backend
        .authorize(Operation::Describe, ResourceType::Cluster, CLUSTER_NAME)
        .is_ok();
    let visible = |g: &str| {
        all || backend
            .authorize(Operation::Describe, ResourceType::Group, g)
            .is_ok()
    };
    let listed = groups
        .into_iter()
        .filter(|(name, g)| {
            classic_wanted
                && (states.is_empty() || states.contains(&g.state.to_ascii_lowercase()))
                && visible(name)
        })
        .map(|(name, g)| {
            ListedGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(name)))
                .with_protocol_type(StrBytes::from_string(g.protocol_type))
                .with_group_state(StrBytes::from_static_str(g.state))
                .with_group_type(StrBytes::from_static_str(CLASSIC))
        })
        .collect();
    ListGroupsResponse::default().with_groups(listed)
}

/// One group as DescribeGroups answers it: from the coordinator's membership, else Empty if
/// it has committed offsets, else Dead (Kafka's answer for a group it does not know).
async fn describe_one<B: Backend>(backend: &B, group: &str) -> DescribedGroup {
    let answer = DescribedGroup::default().with_group_id(GroupId(text(group)));
    let coordinator = match coordinating(backend, group, Operation::Describe).await {
        Ok(c) => c,
        Err(code) => return answer.with_error_code(code),
    };
    let description = match coordinator.describe(group) {
        Some(d) => d,
        None => match backend.group_offsets(group).await {
            Ok(offsets) if !offsets.is_empty() => without_members(),
            Ok(_) => {
                return answer
                    .with_group_state(StrBytes::from_static_str("Dead"))
                    .with_protocol_type(StrBytes::default())
                    .with_protocol_data(StrBytes::default())
            }
            Err(e) => return answer.with_error_code(e.code()),
        },
    };
    answer
        .with_group_state(StrBytes::from_static_str(description.state))
        .with_protocol_type(text(&description.protocol_type))
        .with_protocol_data(text(&description.protocol))
        .with_members(
            description
                .members
                .into_iter()
                .map(|m| {
                    DescribedGroupMember::default()
                        .with_member_id(text(&m.member_id))
                        .with_group_instance_id(m.instance_id.as_deref().map(text))
                        .with_client_id(text(&m.client_id))
                        .with_member_metadata(Bytes::from(m.metadata))
                        .with_member_assignment(Bytes::from(m.assignment))
                })
                .collect(),
        )
}

pub async fn describe_groups<B: Backend>(
    backend: &B,
    request: DescribeGroupsRequest,
) -> DescribeGroupsResponse {
    let mut groups = Vec::with_capacity(request.groups.len());
    for g in &request.groups {
        let described = describe_one(backend, g.0.as_str()).await;
        let described = match (request.include_authorized_operations, described.error_code) {
            (true, 0) => {
                let ops = authorized::operations(backend, ResourceType::Group, g.0.as_str());
                described.with_authorized_operations(ops)
            }
            _ => described,
        };
        groups.push(described);
    }
    DescribeGroupsResponse::default().with_groups(groups)
}

/// Deletes one group: refused while it has members; GROUP_ID_NOT_FOUND when it has neither
/// members nor committed offsets.
async fn delete_one<B: Backend>(backend: &B, group: &str) -> Result<(), i16> {
    let coordinator = coordinating(backend, group, Operation::Delete).await?;
    let known = coordinator.describe(group).is_some();
    coordinator.delete(group).map_err(GroupError::code)?;
    let offsets = backend.group_offsets(group).await.map_err(|e| e.code())?;
    if !known && offsets.is_empty() {
        return Err(GroupError::GroupIdNotFound.code());
    }
    backend
        .delete_offsets(group, None)
        .await
        .map_err(|e| e.code())
}

pub async fn delete_groups<B: Backend>(
    backend: &B,
    request: DeleteGroupsRequest,
) -> DeleteGroupsResponse {
    let mut results = Vec::with_capacity(request.groups_names.len());
    for g in request.groups_names {
        let code = delete_one(backend, g.0.as_str()).await.err().unwrap_or(0);
        results.push(
            DeletableGroupResult::default()
                .with_group_id(g)
                .with_error_code(code),
        );
    }
    DeleteGroupsResponse::default().with_results(results)
}

/// OffsetDelete: forgets a group's offsets for some partitions, except those of topics its
/// members consume (GROUP_SUBSCRIBED_TO_TOPIC), as Kafka does.
pub async fn offset_delete<B: Backend>(
    backend: &B,
    request: OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    let group = request.group_id.0.as_str();
    let refused = |code| OffsetDeleteResponse::default().with_error_code(code);
    let coordinator = match coordinating(backend, group, Operation::Delete).await {
        Ok(c) => c,
        Err(code) => return refused(code),
    };
    let described = coordinator.describe(group);
    let committed = match backend.group_offsets(group).await {
        Ok(c) => c,
        Err(e) => return refused(e.code()),
    };
    if described.is_none() && committed.is_empty() {
        return refused(GroupError::GroupIdNotFound.code());
    }
    let subscribed: BTreeSet<String> = described
        .filter(|d| d.protocol_type == "consumer")
        .map(|d| {
            d.members
                .iter()
                .flat_map(|m| subscribed_topics(&m.metadata))
                .collect()
        })
        .unwrap_or_default();
    let mut deleted = Vec::new();
    let mut topics = Vec::with_capacity(request.topics.len());
    for t in &request.topics {
        let name = t.name.0.as_str();
        let code = if subscribed.contains(name) {
            GROUP_SUBSCRIBED_TO_TOPIC
        } else {
            0
        };
        let partitions = t
            .partitions
            .iter()
            .map(|p| {
                if code == 0 {
                    if let Ok(index) = u32::try_from(p.partition_index) {
                        deleted.push((name.to_owned(), index));
                    }
                }
                OffsetDeleteResponsePartition::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(code)
            })
            .collect();
        topics.push(
            OffsetDeleteResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(partitions),
        );
    }
    if let Err(e) = backend.delete_offsets(group, Some(deleted)).await {
        return refused(e.code());
    }
    OffsetDeleteResponse::default().with_topics(topics)
}
