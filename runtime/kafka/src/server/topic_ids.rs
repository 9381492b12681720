//! Topics named by id (KIP-516): Metadata v10+, DeleteTopics v6 and Fetch v13+ may name a topic
//! by its id alone. The zero id is no id, so it names no topic, not even one created before isr
//! kept ids (whose id is zero): such a topic is reached by name only.

use crate::backend::{Backend, BackendError, ClusterMetadata, TopicInfo};
use crate::topic_id::TopicId;

/// The topic of `cluster` whose id is `id`.
pub fn find(cluster: &ClusterMetadata, id: TopicId) -> Option<&TopicInfo> {
    if id == TopicId::ZERO {
        return None;
    }
    cluster.topics.iter().find(|t| t.id == id)
}

/// The name of the topic whose id is `id`: UNKNOWN_TOPIC_ID if no topic has it.
pub async fn name_of<B: Backend>(backend: &B, id: TopicId) -> Result<String, BackendError> {
    if id == TopicId::ZERO {
        return Err(BackendError::UnknownTopicId);
    }
    backend
        .topic_name(id)
        .await?
        .ok_or(BackendError::UnknownTopicId)
}
