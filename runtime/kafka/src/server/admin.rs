//! CreateTopics and InitProducerId.

use super::codes;
use crate::backend::{Backend, BackendError, NewTopic};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::{
    CreateTopicsRequest, CreateTopicsResponse, InitProducerIdRequest, InitProducerIdResponse,
    ProducerId,
};
use kafka_protocol::protocol::StrBytes;
use std::time::Duration;

/// The only topic config honoured; any other is refused rather than silently ignored.
const MIN_INSYNC: &str = "min.insync.replicas";
/// Kafka's longest legal topic name.
const MAX_TOPIC_NAME: usize = 249;

/// Kafka's topic naming rule: 1 to 249 of `[a-zA-Z0-9._-]`, and not `.` or `..`.
fn check_name(name: &str) -> Result<(), BackendError> {
    let legal = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > MAX_TOPIC_NAME || name == "." || name == ".." {
        return Err(BackendError::InvalidTopic(format!(
            "topic name must be 1 to {MAX_TOPIC_NAME} characters, not . or .."
        )));
    }
    if !name.chars().all(legal) {
        return Err(BackendError::InvalidTopic(format!(
            "topic name {name:?} may hold only ASCII letters, digits, '.', '_' and '-'"
        )));
    }
    Ok(())
}

/// Turns a request's topic into a backend request; -1 counts mean Kafka's broker defaults
/// (one partition, replication factor one).
fn new_topic(t: &CreatableTopic) -> Result<NewTopic, BackendError> {
    let name = t.name.0.as_str().to_owned();
    check_name(&name)?;
    if !t.assignments.is_empty() {
        return Err(BackendError::InvalidReplicationFactor(
            "manual replica assignment is not supported".into(),
        ));
    }
    let partitions = match t.num_partitions {
        -1 => 1,
        n => u32::try_from(n).ok().filter(|&n| n > 0).ok_or_else(|| {
            BackendError::InvalidPartitions(format!("{n} partitions: must be at least 1"))
        })?,
    };
    let replication_factor = match t.replication_factor {
        -1 => 1,
        n => u16::try_from(n).ok().filter(|&n| n > 0).ok_or_else(|| {
            BackendError::InvalidReplicationFactor(format!("{n}: must be at least 1"))
        })?,
    };
    let mut min_insync_replicas = None;
    for config in &t.configs {
        let key = config.name.as_str();
        let value = config.value.as_ref().map(|v| v.as_str()).unwrap_or("");
        if key != MIN_INSYNC {
            return Err(BackendError::InvalidConfig(format!(
                "config {key} is not supported (only {MIN_INSYNC})"
            )));
        }
        let m = value
            .parse::<u16>()
            .ok()
            .filter(|&m| m > 0)
            .ok_or_else(|| {
                BackendError::InvalidConfig(format!(
                    "{MIN_INSYNC}={value}: must be a positive integer"
                ))
            })?;
        min_insync_replicas = Some(m);
    }
    Ok(NewTopic {
        name,
        partitions,
        replication_factor,
        min_insync_replicas,
    })
}

pub async fn create_topics<B: Backend>(
    backend: &B,
    request: CreateTopicsRequest,
) -> CreateTopicsResponse {
    let timeout = Duration::from_millis(u64::try_from(request.timeout_ms).unwrap_or(0));
    let mut results = Vec::with_capacity(request.topics.len());
    for t in &request.topics {
        let outcome = match new_topic(t) {
            Ok(_) if request.validate_only => Ok(()),
            Ok(spec) => tokio::time::timeout(timeout, backend.create_topic(spec))
                .await
                .unwrap_or(Err(BackendError::RequestTimedOut)),
            Err(e) => Err(e),
        };
        let result = CreatableTopicResult::default()
            .with_name(t.name.clone())
            .with_num_partitions(t.num_partitions)
            .with_replication_factor(t.replication_factor);
        results.push(match outcome {
            Ok(()) => result,
            Err(e) => result
                .with_error_code(e.code())
                .with_error_message(Some(StrBytes::from_string(e.to_string()))),
        });
    }
    CreateTopicsResponse::default().with_topics(results)
}

/// Hands out producer ids so that idempotent producers (kafka-python and librdkafka enable
/// them by default or on request) can start; transactions are refused.
pub async fn init_producer_id<B: Backend>(
    backend: &B,
    request: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let answer = InitProducerIdResponse::default();
    if request.transactional_id.is_some() {
        return answer.with_error_code(codes::TRANSACTIONS_UNSUPPORTED);
    }
    match backend.allocate_producer_id().await {
        Ok(id) => answer
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(0),
        Err(e) => answer.with_error_code(e.code()),
    }
}
