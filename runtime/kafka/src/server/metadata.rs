//! Metadata and FindCoordinator: where topics' leaders and the group coordinator are.

use crate::backend::{Backend, BackendError, ClusterMetadata, PartitionInfo, TopicInfo};
use crate::coordinator::coordinator_of;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, FindCoordinatorRequest, FindCoordinatorResponse, MetadataRequest, MetadataResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;

/// Name advertised as the cluster id: clients only compare it across brokers.
const CLUSTER_ID: &str = "isr";
/// FindCoordinator key type of consumer groups; 1 (transactions) is not served.
const GROUP_KEY: i8 = 0;
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

fn topic(t: &TopicInfo) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_name(Some(topic_name(&t.name)))
        .with_partitions(t.partitions.iter().map(partition).collect())
}

fn error_topic(name: &str, error: &BackendError) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_name(Some(topic_name(name)))
        .with_error_code(error.code())
}

/// Describes the requested topics (all when the request names none). Topics are never
/// created implicitly: an unknown one is answered UNKNOWN_TOPIC_OR_PARTITION, whatever
/// `allow_auto_topic_creation` says, so a typo cannot create a topic.
pub async fn metadata<B: Backend>(backend: &B, request: MetadataRequest) -> MetadataResponse {
    let wanted: Option<Vec<String>> = request.topics.map(|topics| {
        topics
            .into_iter()
            .filter_map(|t| t.name.map(|n| n.0.as_str().to_owned()))
            .collect()
    });
    let cluster = match backend.metadata().await {
        Ok(cluster) => cluster,
        Err(e) => {
            let topics = wanted.unwrap_or_default();
            return MetadataResponse::default()
                .with_topics(topics.iter().map(|n| error_topic(n, &e)).collect());
        }
    };
    let topics = match wanted {
        // Version 0 uses an empty list (newer versions null) for "all topics".
        Some(names) if !names.is_empty() => names
            .iter()
            .map(|n| match cluster.topics.iter().find(|t| &t.name == n) {
                Some(t) => topic(t),
                None => error_topic(n, &BackendError::UnknownTopicOrPartition),
            })
            .collect(),
        _ => cluster.topics.iter().map(topic).collect(),
    };
    MetadataResponse::default()
        .with_brokers(
            cluster
                .brokers
                .iter()
                .map(|b| {
                    MetadataResponseBroker::default()
                        .with_node_id(broker_id(b.id))
                        .with_host(StrBytes::from_string(b.host.clone()))
                        .with_port(i32::from(b.port))
                })
                .collect(),
        )
        .with_cluster_id(Some(StrBytes::from_static_str(CLUSTER_ID)))
        .with_controller_id(cluster.controller.map_or(BrokerId(-1), broker_id))
        .with_topics(topics)
}

/// The broker coordinating `group`: one live broker per group (see [`coordinator_of`]), where
/// its membership lives. Committed offsets live in the cluster, so any broker serves
/// OffsetCommit and OffsetFetch, but members go to this one.
fn coordinator(
    cluster: &ClusterMetadata,
    group: &str,
) -> Result<(BrokerId, String, i32), BackendError> {
    let live: Vec<isr::BrokerId> = cluster.brokers.iter().map(|b| b.id).collect();
    let chosen = coordinator_of(group, &live).ok_or(BackendError::CoordinatorNotAvailable)?;
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
        backend.metadata().await
    } else {
        Err(BackendError::CoordinatorNotAvailable)
    };
    let find = |key: &str| {
        cluster
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|c| coordinator(c, key))
    };
    if version >= BATCHED_FIND_COORDINATOR {
        let coordinators = request
            .coordinator_keys
            .into_iter()
            .map(|key| {
                let found = find(key.as_str());
                let c = Coordinator::default().with_key(key);
                match found {
                    Ok((id, host, port)) => c
                        .with_node_id(id)
                        .with_host(StrBytes::from_string(host))
                        .with_port(port),
                    Err(e) => c
                        .with_node_id(BrokerId(-1))
                        .with_error_code(e.code())
                        .with_error_message(Some(StrBytes::from_string(e.to_string()))),
                }
            })
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    let answer = FindCoordinatorResponse::default();
    match find(request.key.as_str()) {
        Ok((id, host, port)) => answer
            .with_node_id(id)
            .with_host(StrBytes::from_string(host))
            .with_port(port),
        Err(e) => {
            let answer = answer.with_node_id(BrokerId(-1)).with_error_code(e.code());
            if version >= 1 {
                answer.with_error_message(Some(StrBytes::from_string(e.to_string())))
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
        };
        let p = partition(&info);
        assert_eq!(p.error_code, BackendError::LeaderNotAvailable.code());
        assert_eq!(p.leader_id, BrokerId(-1));
        assert_eq!(p.leader_epoch, 4);
        assert_eq!(p.isr_nodes, vec![BrokerId(2)]);
        assert_eq!(p.offline_replicas, vec![BrokerId(2), BrokerId(3)]);
    }
}
