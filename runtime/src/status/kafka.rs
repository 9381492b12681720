//! `isr status` for a client that holds a Kafka client's credentials only (`--command-config`,
//! as `isr cluster --security sasl-ssl` writes it) and no cluster certificate: what the Kafka
//! protocol tells. Partitions (leader, leader epoch, AR, ISR) and the controller's id come from
//! a Metadata answer, each leader's high watermark from ListOffsets (one request per leader).
//! Replicas' LEOs, the ELR, the controller's epoch and the brokers' metadata offsets travel only
//! in the cluster's own protocol, which needs the cluster certificate (`--tls-cert`): they are
//! shown as unknown, and a note says so.

use super::{PartitionRow, ReplicaRow};
use isr::BrokerId;
use isr_kafka::client::{ClientError, Cluster, Route, TopicView};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeMap;

/// What status shows from the Kafka protocol.
pub(super) struct KafkaView {
    pub controller: Option<i32>,
    /// Live brokers (a Metadata answer names no fenced one), by id, with their addresses.
    pub brokers: BTreeMap<i32, String>,
    pub rows: Vec<PartitionRow>,
}

/// Reads the cluster through the first of the comma-separated `bootstrap` brokers that answers,
/// connecting as `--command-config` says; only topic `only`, if given.
pub(super) async fn view(bootstrap: &str, only: Option<&str>) -> Result<KafkaView, ClientError> {
    let mut cluster = Cluster::connect(bootstrap).await?;
    if let Some(topic) = only {
        cluster.existing_topic(topic)?;
    }
    let topics: Vec<TopicView> = cluster
        .topics()
        .iter()
        .filter(|t| only.is_none_or(|o| o == t.name))
        .cloned()
        .collect();
    let high_watermarks = high_watermarks(&mut cluster, &topics).await;
    let rows = topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                let broker = |b: i32| BrokerId(u32::try_from(b).unwrap_or(u32::MAX));
                let leader = (p.leader >= 0).then(|| broker(p.leader));
                let hw = high_watermarks.get(&(t.name.clone(), p.partition)).copied();
                let replicas = p
                    .replicas
                    .iter()
                    .map(|&b| ReplicaRow {
                        broker: broker(b),
                        log_end_offset: None,
                        high_watermark: if Some(broker(b)) == leader { hw } else { None },
                        log_start_offset: None,
                        flushed_offset: None,
                        lag: None,
                        leader_view: None,
                        role: match (Some(broker(b)) == leader, p.isr.contains(&b)) {
                            (true, _) => "leader".to_string(),
                            (false, true) => "follower (in sync)".to_string(),
                            (false, false) => "follower (out of sync)".to_string(),
                        },
                    })
                    .collect();
                PartitionRow {
                    topic: t.name.clone(),
                    partition: p.partition,
                    id: None,
                    leader,
                    leader_epoch: u32::try_from(p.leader_epoch).unwrap_or_default(),
                    assigned: p.replicas.iter().map(|&b| broker(b)).collect(),
                    isr: p.isr.iter().map(|&b| broker(b)).collect(),
                    osr: p
                        .replicas
                        .iter()
                        .filter(|b| !p.isr.contains(b))
                        .map(|&b| broker(b))
                        .collect(),
                    elr: Vec::new(),
                    replicas,
                }
            })
        })
        .collect();
    Ok(KafkaView {
        controller: cluster.controller(),
        brokers: cluster.brokers(),
        rows,
    })
}

/// Each led partition's high watermark (ListOffsets latest), asked of its leader: one request
/// per leader for all the partitions it leads. A leader that does not answer leaves its
/// partitions' high watermarks unknown.
async fn high_watermarks(
    cluster: &mut Cluster,
    topics: &[TopicView],
) -> BTreeMap<(String, u32), u64> {
    let mut by_leader: BTreeMap<i32, BTreeMap<&str, Vec<u32>>> = BTreeMap::new();
    for t in topics {
        for p in t.partitions.iter().filter(|p| p.leader >= 0) {
            by_leader
                .entry(p.leader)
                .or_default()
                .entry(t.name.as_str())
                .or_default()
                .push(p.partition);
        }
    }
    let mut found = BTreeMap::new();
    for (leader, led) in by_leader {
        let request = ListOffsetsRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(-1))
            .with_topics(
                led.iter()
                    .map(|(topic, partitions)| {
                        ListOffsetsTopic::default()
                            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                            .with_partitions(
                                partitions
                                    .iter()
                                    .map(|&p| {
                                        ListOffsetsPartition::default()
                                            .with_partition_index(
                                                i32::try_from(p).unwrap_or(i32::MAX),
                                            )
                                            .with_timestamp(-1)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        let answer = cluster
            .send(
                Route::Broker(leader),
                &request,
                |_, answer: ListOffsetsResponse| Ok(answer),
            )
            .await;
        let Ok(answer) = answer else { continue };
        for t in answer.topics {
            for p in t.partitions.iter().filter(|p| p.error_code == 0) {
                if let (Ok(partition), Ok(offset)) =
                    (u32::try_from(p.partition_index), u64::try_from(p.offset))
                {
                    found.insert((t.name.0.as_str().to_owned(), partition), offset);
                }
            }
        }
    }
    found
}
