//! Metadata, FindCoordinator and DescribeCluster: where topics' leaders, the group coordinator
//! and the controller are. Metadata also creates topics on demand, as Kafka does when
//! `auto.create.topics.enable` is on.

use super::{authorized, codes, topic_ids};
use crate::auth::acl::{Operation, ResourceType, CLUSTER_NAME};
use crate::backend::{Backend, BackendError, ClusterMetadata, NewTopic, PartitionInfo, TopicInfo};
use crate::topic_id::TopicId;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeClusterRequest, DescribeClusterResponse, FindCoordinatorRequest,
    FindCoordinatorResponse, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeMap;

/// Name advertised as the cluster id: clients only compare it across brokers.
const CLUSTER_ID: &str = "isr";
/// FindCoordinator key type of consumer groups; 1 (transactions) is refused.
const GROUP_KEY: i8 = 0;
/// Metadata v4 is the first to say whether the client allows topic creation; before, Kafka
/// always allowed it.
const ALLOW_AUTO_CREATE_FIELD: i16 = 4;
/// DescribeCluster endpoint types: brokers (1) are what a broker describes.
const BROKER_ENDPOINTS: i8 = 1;
/// MISMATCHED_ENDPOINT_TYPE: DescribeCluster asked a broker for controller endpoints.
const MISMATCHED_ENDPOINT_TYPE: i16 = 114;
/// FindCoordinator v4 batches keys in `coordinator_keys`; earlier versions send one `key`.
const BATCHED_FIND_COORDINATOR: i16 = 4;

fn broker_id(id: isr::BrokerId) -> BrokerId {
    BrokerId(i32::try_from(id.0).unwrap_or(i32::MAX))
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

fn partition(p: &PartitionInfo) -> MetadataResponsePartition {
    let ids = |v: &[isr::BrokerId]| v.iter().copied().map(broker_id).collect();
    MetadataResponsePartition::default()
        .with_error_code(match p.leader {
            Some(_) => 0,
            None => BackendError::LeaderNotAvailable.code(),
        })
        .with_partition_index(i32::try_from(p.partition).unwrap_or(i32::MAX))
        .with_leader_id(p.leader.map_or(BrokerId(-1), broker_id))
        .with_leader_epoch(i32::try_from(p.leader_epoch.0).unwrap_or(i32::MAX))
        .with_replica_nodes(ids(&p.replicas))
        .with_isr_nodes(ids(&p.isr))
        .with_offline_replicas(ids(&p.offline))
}

fn brokers(cluster: &ClusterMetadata) -> Vec<MetadataResponseBroker> {
    cluster
        .brokers
        .iter()
        .map(|b| {
            MetadataResponseBroker::default()
                .with_node_id(broker_id(b.id))
                .with_host(StrBytes::from_string(b.host.clone()))
                .with_port(i32::from(b.port))
        })
        .collect()
}

/// A topic a Metadata request asks for: by name, or (v10+, its name null) by id.
enum Asked {
    Name(String),
    Id(TopicId),
}

/// A topic's answer; its id is only encoded from v10 on.
fn topic(t: &TopicInfo) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_name(Some(topic_name(&t.name)))
        .with_topic_id(t.id.into())
        .with_is_internal(t.name == crate::offsets_topic::OFFSETS_TOPIC)
        .with_partitions(t.partitions.iter().map(partition).collect())
}

fn error_topic(name: &str, error: &BackendError) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_name(Some(topic_name(name)))
        .with_error_code(error.code())
}

/// The answer for a topic asked by id that could not be described: the id, no name.
fn error_topic_id(id: TopicId, error: &BackendError) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_name(None)
        .with_topic_id(id.into())
        .with_error_code(error.code())
}

fn asked_error(asked: &Asked, error: &BackendError) -> MetadataResponseTopic {
    match asked {
        Asked::Name(name) => error_topic(name, error),
        Asked::Id(id) => error_topic_id(*id, error),
    }
}

/// Creates the `missing` topics the request may create (Kafka's automatic topic creation,
/// with the broker's `num.partitions` and `default.replication.factor`); the error for each
/// it could not create. A topic another request created meanwhile counts as created.
async fn auto_create<B: Backend>(
    backend: &B,
    missing: &[String],
) -> BTreeMap<String, BackendError> {
    let settings = backend.settings();
    let mut failed = BTreeMap::new();
    for name in missing {
        let topic = NewTopic {
            name: name.clone(),
            partitions: settings.num_partitions,
            replication_factor: settings.default_replication_factor,
            configs: BTreeMap::new(),
            assignment: Vec::new(),
        };
        match backend.create_topic(topic).await {
            Ok(_) | Err(BackendError::TopicAlreadyExists) => {}
            Err(e) => {
                failed.insert(name.clone(), e);
            }
        }
    }
    failed
}

/// Describes the requested topics (all when the request names none). An unknown topic with a
/// legal name is created when the request allows it (always before v4) and the broker's
/// `auto.create.topics.enable` is on; otherwise it is answered UNKNOWN_TOPIC_OR_PARTITION. An
/// illegal name is answered INVALID_TOPIC_EXCEPTION, which producers do not retry. A topic
/// asked by id (v10+, name null) is described if some topic the caller may describe has that
/// id, else answered UNKNOWN_TOPIC_ID (revealing nothing of a topic it may not describe); no
/// topic is created for an id.
pub async fn metadata<B: Backend>(
    backend: &B,
    request: MetadataRequest,
    version: i16,
) -> MetadataResponse {
    let asked: Option<Vec<Asked>> = request.topics.map(|topics| {
        topics
            .into_iter()
            .map(|t| match t.name {
                Some(name) => Asked::Name(name.0.as_str().to_owned()),
                None => Asked::Id(t.topic_id.into()),
            })
            .collect()
    });
    let wanted: Option<Vec<String>> = asked.as_ref().map(|asked| {
        asked
            .iter()
            .filter_map(|a| match a {
                Asked::Name(name) => Some(name.clone()),
                Asked::Id(_) => None,
            })
            .collect()
    });
    let may_create = (version < ALLOW_AUTO_CREATE_FIELD || request.allow_auto_topic_creation)
        && backend.settings().auto_create_topics;
    let mut cluster = match backend.metadata().await {
        Ok(cluster) => cluster,
        Err(e) => {
            let topics = asked.unwrap_or_default();
            return MetadataResponse::default()
                .with_topics(topics.iter().map(|a| asked_error(a, &e)).collect());
        }
    };
    // A named topic the caller may not describe is refused, whether it exists or not (and so
    // never created): TOPIC_AUTHORIZATION_FAILED reveals nothing.
    let mut failed: BTreeMap<String, BackendError> = wanted
        .iter()
        .flatten()
        .filter_map(|n| {
            let refused = backend.authorize(Operation::Describe, ResourceType::Topic, n);
            refused.err().map(|e| (n.clone(), e))
        })
        .collect();
    if let (Some(names), true) = (&wanted, may_create) {
        let missing: Vec<String> = names
            .iter()
            .filter(|n| crate::names::check_topic(n).is_ok() && !failed.contains_key(*n))
            .filter(|n| !cluster.topics.iter().any(|t| &t.name == *n))
            .cloned()
            .collect();
        if !missing.is_empty() {
            failed = auto_create(backend, &missing).await;
            match backend.metadata().await {
                Ok(fresh) => cluster = fresh,
                Err(e) => {
                    for name in missing {
                        failed.entry(name).or_insert_with(|| e.clone());
                    }
                }
            }
        }
    }
    let topics: Vec<MetadataResponseTopic> = match asked {
        // Version 0 uses an empty list (newer versions null) for "all topics".
        Some(asked) if !asked.is_empty() => asked
            .iter()
            .map(|a| match a {
                Asked::Name(n) => match cluster.topics.iter().find(|t| &t.name == n) {
                    Some(t) if !failed.contains_key(n) => topic(t),
                    _ => {
                        let e = failed
                            .remove(n)
                            .or_else(|| crate::names::check_topic(n).err())
                            .unwrap_or(BackendError::UnknownTopicOrPartition);
                        error_topic(n, &e)
                    }
                },
                Asked::Id(id) => match topic_ids::find(&cluster, *id) {
                    Some(t) => topic(t),
                    None => error_topic_id(*id, &BackendError::UnknownTopicId),
                },
            })
            .collect(),
        _ => cluster.topics.iter().map(topic).collect(),
    };
    let topics = if request.include_topic_authorized_operations {
        topics
            .into_iter()
            .map(|t| match (&t.name, t.error_code) {
                (Some(name), 0) => {
                    let ops = authorized::operations(backend, ResourceType::Topic, name.0.as_str());
                    t.with_topic_authorized_operations(ops)
                }
                _ => t,
            })
            .collect()
    } else {
        topics
    };
    let cluster_ops = if request.include_cluster_authorized_operations {
        authorized::operations(backend, ResourceType::Cluster, CLUSTER_NAME)
    } else {
        authorized::NOT_ASKED
    };
    MetadataResponse::default()
        .with_brokers(brokers(&cluster))
        .with_cluster_id(Some(StrBytes::from_static_str(CLUSTER_ID)))
        .with_controller_id(cluster.controller.map_or(BrokerId(-1), broker_id))
        .with_topics(topics)
        .with_cluster_authorized_operations(cluster_ops)
}

/// DescribeCluster: the live brokers and the one admin requests should go to (the same
/// controller id as Metadata's).
pub async fn describe_cluster<B: Backend>(
    backend: &B,
    request: DescribeClusterRequest,
    version: i16,
) -> DescribeClusterResponse {
    let answer =
        DescribeClusterResponse::default().with_cluster_id(StrBytes::from_static_str(CLUSTER_ID));
    // v0 has no endpoint type: it always means brokers.
    if version >= 1 && request.endpoint_type != BROKER_ENDPOINTS {
        return answer
            .with_error_code(MISMATCHED_ENDPOINT_TYPE)
            .with_error_message(Some(StrBytes::from_static_str(
                "isr brokers describe broker endpoints (1); the controller is not a Kafka endpoint",
            )));
    }
    let answer = if request.include_cluster_authorized_operations {
        let ops = authorized::operations(backend, ResourceType::Cluster, CLUSTER_NAME);
        answer.with_cluster_authorized_operations(ops)
    } else {
        answer
    };
    match backend.metadata().await {
        Ok(cluster) => answer
            .with_controller_id(cluster.controller.map_or(BrokerId(-1), broker_id))
            .with_brokers(
                cluster
                    .brokers
                    .iter()
                    .map(|b| {
                        DescribeClusterBroker::default()
                            .with_broker_id(broker_id(b.id))
                            .with_host(StrBytes::from_string(b.host.clone()))
                            .with_port(i32::from(b.port))
                    })
                    .collect(),
            ),
        Err(e) => answer
            .with_controller_id(BrokerId(-1))
            .with_error_code(e.code())
            .with_error_message(Some(StrBytes::from_string(e.detail()))),
    }
}

/// The broker coordinating `group` ([`Backend::group_coordinator`]), as FindCoordinator names
/// it: where its members join and its offsets are committed.
async fn coordinator<B: Backend>(
    backend: &B,
    cluster: &ClusterMetadata,
    group: &str,
) -> Result<(BrokerId, String, i32), BackendError> {
    let chosen = backend.group_coordinator(group).await?.broker;
    cluster
        .brokers
        .iter()
        .find(|b| b.id == chosen)
        .map(|b| (broker_id(b.id), b.host.clone(), i32::from(b.port)))
        .ok_or(BackendError::CoordinatorNotAvailable)
}

pub async fn find_coordinator<B: Backend>(
    backend: &B,
    request: FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    let cluster = if request.key_type == GROUP_KEY {
        backend.metadata().await.map_err(|e| (e.code(), e.detail()))
    } else {
        // Transactions: a non-retriable answer, so that a transactional producer fails at once.
        Err((
            codes::TRANSACTIONS_UNSUPPORTED,
            codes::TRANSACTIONS_UNSUPPORTED_MESSAGE.to_owned(),
        ))
    };
    let find = |key: String| {
        let cluster = cluster.clone();
        async move {
            backend
                .authorize(Operation::Describe, ResourceType::Group, &key)
                .map_err(|e| (e.code(), e.detail()))?;
            coordinator(backend, &cluster?, &key)
                .await
                .map_err(|e| (e.code(), e.detail()))
        }
    };
    if version >= BATCHED_FIND_COORDINATOR {
        let mut coordinators = Vec::with_capacity(request.coordinator_keys.len());
        for key in request.coordinator_keys {
            let found = find(key.as_str().to_owned()).await;
            let c = Coordinator::default().with_key(key);
            coordinators.push(match found {
                Ok((id, host, port)) => c
                    .with_node_id(id)
                    .with_host(StrBytes::from_string(host))
                    .with_port(port),
                Err((code, message)) => c
                    .with_node_id(BrokerId(-1))
                    .with_error_code(code)
                    .with_error_message(Some(StrBytes::from_string(message))),
            });
        }
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    let answer = FindCoordinatorResponse::default();
    match find(request.key.as_str().to_owned()).await {
        Ok((id, host, port)) => answer
            .with_node_id(id)
            .with_host(StrBytes::from_string(host))
            .with_port(port),
        Err((code, message)) => {
            let answer = answer.with_node_id(BrokerId(-1)).with_error_code(code);
            if version >= 1 {
                answer.with_error_message(Some(StrBytes::from_string(message)))
            } else {
                answer
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use isr::LeaderEpoch;

    #[test]
    fn a_leaderless_partition_reports_its_offline_replicas() {
        let info = PartitionInfo {
            partition: 2,
            leader: None,
            leader_epoch: LeaderEpoch(4),
            replicas: vec![isr::BrokerId(1), isr::BrokerId(2), isr::BrokerId(3)],
            isr: vec![isr::BrokerId(2)],
            offline: vec![isr::BrokerId(2), isr::BrokerId(3)],
            min_insync_replicas: 2,
        };
        let p = partition(&info);
        assert_eq!(p.error_code, BackendError::LeaderNotAvailable.code());
        assert_eq!(p.leader_id, BrokerId(-1));
        assert_eq!(p.leader_epoch, 4);
        assert_eq!(p.isr_nodes, vec![BrokerId(2)]);
        assert_eq!(p.offline_replicas, vec![BrokerId(2), BrokerId(3)]);
    }
}
