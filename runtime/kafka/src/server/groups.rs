//! OffsetCommit and OffsetFetch: consumer groups' positions.
//!
//! Commits go to the group's coordinator, which checks a member's commit against the group's
//! membership ([`crate::Coordinator::may_commit`]); a consumer that assigns partitions itself
//! commits with generation -1 and no member id. Committed offsets live in the cluster (the
//! backend), so any broker answers OffsetFetch.

use super::membership::coordinating;
use crate::backend::{Backend, BackendError, CommittedOffset};
use crate::coordinator::Caller;
use isr::Offset;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use kafka_protocol::messages::{
    OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
};
use kafka_protocol::protocol::StrBytes;

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
    let refused = match coordinating(backend, group).await {
        Ok(c) => c.may_commit(group, caller).err().map(|e| e.code()),
        Err(code) => Some(code),
    };
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let name = topic.name.0.as_str();
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            let result = match (
                u32::try_from(p.partition_index),
                u64::try_from(p.committed_offset),
            ) {
                _ if refused.is_some() => Ok(()),
                (Err(_), _) => Err(BackendError::UnknownTopicOrPartition),
                (_, Err(_)) => Err(BackendError::OffsetOutOfRange),
                (Ok(partition), Ok(offset)) => {
                    let committed = CommittedOffset {
                        offset: Offset(offset),
                        metadata: p
                            .committed_metadata
                            .as_ref()
                            .map(|m| m.as_str().to_owned())
                            .unwrap_or_default(),
                    };
                    backend
                        .commit_offset(group, name, partition, committed)
                        .await
                }
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

/// Answers the named partitions. A request for all of a group's partitions (null topics)
/// gets an empty list: the backend is asked per partition and cannot enumerate a group.
pub async fn offset_fetch<B: Backend>(
    backend: &B,
    request: OffsetFetchRequest,
) -> OffsetFetchResponse {
    let group = request.group_id.0.as_str();
    let mut topics = Vec::new();
    for topic in request.topics.unwrap_or_default() {
        let name = topic.name.0.as_str();
        let mut partitions = Vec::with_capacity(topic.partition_indexes.len());
        for &index in &topic.partition_indexes {
            let result = match u32::try_from(index) {
                Ok(partition) => backend.fetch_offset(group, name, partition).await,
                Err(_) => Err(BackendError::UnknownTopicOrPartition),
            };
            let answer = OffsetFetchResponsePartition::default().with_partition_index(index);
            partitions.push(match result {
                Ok(Some(c)) => answer
                    .with_committed_offset(i64::try_from(c.offset.0).unwrap_or(i64::MAX))
                    .with_metadata(Some(StrBytes::from_string(c.metadata))),
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
