//! Topic administration (CreateTopics, DeleteTopics, CreatePartitions) and InitProducerId.
//!
//! The controller is not a broker: every broker takes these requests and forwards them through
//! the backend, so it does not matter which one a client picks (Metadata names the lowest live
//! broker id as the controller, so that admin clients agree on one).

use super::{codes, topic_ids};
use crate::auth::acl::{Operation, ResourceType};
use crate::backend::{Backend, BackendError, BrokerSettings, NewTopic};
use crate::configs::{self, BrokerConfigs};
use crate::names::check_topic;
use crate::topic_id::TopicId;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DeleteTopicsRequest, DeleteTopicsResponse, InitProducerIdRequest, InitProducerIdResponse,
    ProducerId, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

/// CreateTopics v5 is the first to answer with the topic's configs.
const CONFIGS_IN_ANSWER: i16 = 5;
/// DeleteTopics v6 names topics in `topics`, each by name or by id, and answers both.
const TOPICS_BY_ID: i16 = 6;

fn text(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

fn timeout(ms: i32) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// Runs an admin call within the request's timeout (REQUEST_TIMED_OUT past it).
async fn within<T>(
    ms: i32,
    call: impl Future<Output = Result<T, BackendError>>,
) -> Result<T, BackendError> {
    tokio::time::timeout(timeout(ms), call)
        .await
        .unwrap_or(Err(BackendError::RequestTimedOut))
}

/// A count given as -1 takes the broker's default; others must be positive.
fn count<T: TryFrom<i32>>(
    n: i32,
    default: T,
    error: impl Fn(String) -> BackendError,
) -> Result<T, BackendError> {
    match n {
        -1 => Ok(default),
        n => T::try_from(n)
            .ok()
            .filter(|_| n > 0)
            .ok_or_else(|| error(format!("{n}: must be at least 1"))),
    }
}

/// Turns a request's topic into a backend request, with the broker's defaults for counts
/// given as -1 (Kafka's `num.partitions` and `default.replication.factor`).
fn new_topic(t: &CreatableTopic, settings: &BrokerSettings) -> Result<NewTopic, BackendError> {
    let name = t.name.0.as_str().to_owned();
    check_topic(&name)?;
    let assignment = manual_assignment(t)?;
    let (partitions, replication_factor) = match assignment.first() {
        Some(first) => (
            assignment.len() as u32,
            u16::try_from(first.len())
                .map_err(|_| BackendError::InvalidReplicaAssignment("too many replicas".into()))?,
        ),
        None => (
            count(
                t.num_partitions,
                settings.num_partitions,
                BackendError::InvalidPartitions,
            )?,
            count(
                t.replication_factor.into(),
                settings.default_replication_factor,
                BackendError::InvalidReplicationFactor,
            )?,
        ),
    };
    let mut overrides = BTreeMap::new();
    for config in &t.configs {
        let key = config.name.as_str();
        let value = config.value.as_ref().map(|v| v.as_str()).unwrap_or("");
        configs::check_topic_config(key, value)?;
        overrides.insert(key.to_owned(), value.trim().to_owned());
    }
    Ok(NewTopic {
        name,
        partitions,
        replication_factor,
        configs: overrides,
        assignment,
    })
}

/// A CreateTopics manual replica assignment, as each partition's replicas in partition order:
/// every partition index from 0 once, with the partition and replica counts left to it (-1),
/// as Kafka requires (INVALID_REQUEST otherwise). Whether the brokers are alive, distinct and
/// as many in every partition is the controller's to judge (INVALID_REPLICA_ASSIGNMENT).
fn manual_assignment(t: &CreatableTopic) -> Result<Vec<Vec<isr::BrokerId>>, BackendError> {
    if t.assignments.is_empty() {
        return Ok(Vec::new());
    }
    if t.num_partitions != -1 || t.replication_factor != -1 {
        return Err(BackendError::InvalidRequest(
            "a replica assignment leaves the partition count and replication factor at -1".into(),
        ));
    }
    let mut by_index: BTreeMap<i32, Vec<isr::BrokerId>> = BTreeMap::new();
    for a in &t.assignments {
        let brokers = a
            .broker_ids
            .iter()
            .map(|b| u32::try_from(b.0).map(isr::BrokerId))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| {
                BackendError::InvalidReplicaAssignment(format!(
                    "partition {}: a negative broker id",
                    a.partition_index
                ))
            })?;
        if by_index.insert(a.partition_index, brokers).is_some() {
            return Err(BackendError::InvalidReplicaAssignment(format!(
                "partition {} assigned twice",
                a.partition_index
            )));
        }
    }
    let contiguous = by_index.keys().copied().eq(0..by_index.len() as i32);
    if !contiguous {
        return Err(BackendError::InvalidReplicaAssignment(
            "the partitions must be numbered from 0 without gaps".into(),
        ));
    }
    Ok(by_index.into_values().collect())
}

/// The configs a CreateTopics v5+ answer carries for a topic: every topic config, with the
/// broker's values where the request set none.
async fn described<B: Backend>(backend: &B, topic: &NewTopic) -> Vec<CreatableTopicConfigs> {
    let (dynamic, me) = match backend.metadata().await {
        Ok(m) => (m.broker_configs, m.this_broker),
        Err(_) => (BTreeMap::new(), isr::BrokerId(0)),
    };
    let broker = BrokerConfigs {
        id: me,
        settings: backend.settings(),
        dynamic: &dynamic,
    };
    let min_isr = configs::min_insync_replicas(&topic.configs, &broker, topic.replication_factor);
    configs::describe_topic(&topic.configs, min_isr, &broker)
        .into_iter()
        .map(|d| {
            CreatableTopicConfigs::default()
                .with_name(StrBytes::from_static_str(d.name))
                .with_value(Some(text(d.value)))
                .with_read_only(d.read_only)
                .with_config_source(d.source as i8)
        })
        .collect()
}

/// CreateTopics; from v7 a created topic is answered with its new id (a validate-only request
/// creates none: the zero id).
pub async fn create_topics<B: Backend>(
    backend: &B,
    request: CreateTopicsRequest,
    version: i16,
) -> CreateTopicsResponse {
    let mut results = Vec::with_capacity(request.topics.len());
    for t in &request.topics {
        let spec = new_topic(t, backend.settings());
        let outcome = match &spec {
            Ok(spec) if request.validate_only => {
                super::access::may_create(backend, &spec.name).map(|()| TopicId::ZERO)
            }
            Ok(spec) => within(request.timeout_ms, backend.create_topic(spec.clone())).await,
            Err(e) => Err(e.clone()),
        };
        let mut result = CreatableTopicResult::default()
            .with_name(t.name.clone())
            .with_num_partitions(t.num_partitions)
            .with_replication_factor(t.replication_factor);
        match (outcome, spec) {
            (Ok(id), Ok(spec)) => {
                result = result
                    .with_topic_id(id.into())
                    .with_num_partitions(i32::try_from(spec.partitions).unwrap_or(i32::MAX))
                    .with_replication_factor(
                        i16::try_from(spec.replication_factor).unwrap_or(i16::MAX),
                    );
                if version >= CONFIGS_IN_ANSWER {
                    result = result.with_configs(Some(described(backend, &spec).await));
                }
            }
            (Err(e), _) | (Ok(_), Err(e)) => {
                result = result
                    .with_error_code(e.code())
                    .with_error_message(Some(text(e.detail())));
            }
        }
        results.push(result);
    }
    CreateTopicsResponse::default().with_topics(results)
}

/// DeleteTopics: by name (every version), or from v6 by id (name null), answered with the
/// topic's name and id. An id no topic the caller may describe has is UNKNOWN_TOPIC_ID, as is
/// the zero id; both a name and an id is INVALID_REQUEST, as in Kafka. An id is resolved to its
/// topic's name from this broker's metadata and the topic deleted by name (the controller
/// deletes by name).
pub async fn delete_topics<B: Backend>(
    backend: &B,
    request: DeleteTopicsRequest,
    version: i16,
) -> DeleteTopicsResponse {
    let asked: Vec<(Option<TopicName>, TopicId)> = if version >= TOPICS_BY_ID {
        let topics = request.topics.into_iter();
        topics.map(|t| (t.name, t.topic_id.into())).collect()
    } else {
        let names = request.topic_names.into_iter();
        names.map(|n| (Some(n), TopicId::ZERO)).collect()
    };
    // Where each topic's id (answered from v6) and the topic an id names are found.
    let cluster = backend.metadata().await;
    let mut responses = Vec::with_capacity(asked.len());
    for (name, id) in asked {
        let target = match (name, id) {
            (Some(name), TopicId::ZERO) => {
                let found = cluster.as_ref().ok().and_then(|c| {
                    let topic = c.topics.iter().find(|t| t.name == name.0.as_str());
                    topic.map(|t| t.id)
                });
                Ok((name, found.unwrap_or(TopicId::ZERO)))
            }
            (Some(name), _) => Err((
                Some(name),
                BackendError::InvalidRequest("a topic named by both name and id".into()),
            )),
            (None, _) => match &cluster {
                Ok(c) => topic_ids::find(c, id)
                    .map(|t| (TopicName(text(t.name.clone())), id))
                    .ok_or((None, BackendError::UnknownTopicId)),
                Err(e) => Err((None, e.clone())),
            },
        };
        responses.push(match target {
            Ok((name, id)) => {
                let checked = check_topic(name.0.as_str())
                    .and_then(|()| crate::names::check_not_internal(name.0.as_str(), "delete"));
                let outcome = match checked {
                    Ok(()) => {
                        within(request.timeout_ms, backend.delete_topic(name.0.as_str())).await
                    }
                    Err(e) => Err(e),
                };
                deleted(Some(name), id, outcome)
            }
            Err((name, e)) => deleted(name, id, Err(e)),
        });
    }
    DeleteTopicsResponse::default().with_responses(responses)
}

/// One topic's DeleteTopics answer (its id is only encoded from v6 on).
fn deleted(
    name: Option<TopicName>,
    id: TopicId,
    outcome: Result<(), BackendError>,
) -> DeletableTopicResult {
    let result = DeletableTopicResult::default()
        .with_name(name)
        .with_topic_id(id.into());
    match outcome {
        Ok(()) => result,
        Err(e) => result
            .with_error_code(e.code())
            .with_error_message(Some(text(e.detail()))),
    }
}

/// CreatePartitions: grows topics to the requested totals, the new partitions on the brokers
/// the request assigns them to, or where the controller places them.
pub async fn create_partitions<B: Backend>(
    backend: &B,
    request: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let cluster = backend.metadata().await;
    let mut results = Vec::with_capacity(request.topics.len());
    for t in &request.topics {
        let name = t.name.0.as_str();
        let outcome = async {
            backend.authorize(Operation::Alter, ResourceType::Topic, name)?;
            let total = u32::try_from(t.count)
                .map_err(|_| BackendError::InvalidPartitions(format!("{}: negative", t.count)))?;
            let assignment = new_partitions_assignment(t)?;
            let cluster = cluster.as_ref().map_err(Clone::clone)?;
            let current = cluster.topics.iter().find(|x| x.name == name);
            match current.map(|x| x.partitions.len()) {
                None => Err(BackendError::UnknownTopicOrPartition),
                Some(n) if total as usize <= n => Err(BackendError::InvalidPartitions(format!(
                    "topic {name} has {n} partitions; asked for {total} in all"
                ))),
                Some(_) if request.validate_only => Ok(()),
                Some(_) => {
                    let grow = backend.create_partitions(name, total, assignment);
                    within(request.timeout_ms, grow).await
                }
            }
        }
        .await;
        let result = CreatePartitionsTopicResult::default().with_name(t.name.clone());
        results.push(match outcome {
            Ok(()) => result,
            Err(e) => result
                .with_error_code(e.code())
                .with_error_message(Some(text(e.detail()))),
        });
    }
    CreatePartitionsResponse::default().with_results(results)
}

/// A CreatePartitions assignment: each new partition's brokers, in preference order (none:
/// the controller places them). How many lists, and whether each names as many distinct live
/// brokers as the topic's replication factor, is the controller's to judge
/// (INVALID_REPLICA_ASSIGNMENT).
fn new_partitions_assignment(
    t: &CreatePartitionsTopic,
) -> Result<Vec<Vec<isr::BrokerId>>, BackendError> {
    t.assignments
        .iter()
        .flatten()
        .map(|a| {
            a.broker_ids
                .iter()
                .map(|b| u32::try_from(b.0).map(isr::BrokerId))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| BackendError::InvalidReplicaAssignment("a negative broker id".into()))
        })
        .collect()
}

/// Hands out producer ids so that idempotent producers (kafka-python and librdkafka enable
/// them by default or on request) can start; transactions are refused at once (see
/// [`codes::TRANSACTIONS_UNSUPPORTED`]).
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
