//! Every advertised version of every API, sent by the isr client's encoder, decoded and
//! answered by the server, and the answer decoded again: the table in versions.rs claims
//! nothing this test does not exercise.

mod common;

use bytes::Bytes;
use common::TestServer;
use isr_kafka::client::records::{encode, Outgoing};
use isr_kafka::client::Connection;
use isr_kafka::versions::SUPPORTED;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

fn batch(value: &str) -> Bytes {
    let record = Outgoing {
        key: None,
        value: Bytes::from(value.to_owned()),
    };
    encode(&[record], 0).expect("encode")
}

/// A lone member joins group `g` (JoinGroup v`v`) and leads generation 1 of it.
async fn join(conn: &mut Connection, g: &str, v: i16) -> (StrBytes, i32) {
    let protocol = JoinGroupRequestProtocol::default()
        .with_name(StrBytes::from_static_str("range"))
        .with_metadata(Bytes::from_static(b"meta"));
    let request = JoinGroupRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(g.to_owned())))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![protocol]);
    let a = conn.exchange(&request, v).await.expect("answer");
    assert_eq!((a.error_code, a.generation_id), (0, 1), "v{v}");
    assert_eq!(a.leader, a.member_id, "v{v}: a lone member leads");
    assert_eq!(a.members.len(), 1, "v{v}");
    assert_eq!(a.members[0].metadata, Bytes::from_static(b"meta"), "v{v}");
    (a.member_id, a.generation_id)
}

async fn sweep(api: ApiKey, v: i16, conn: &mut Connection) {
    let group = GroupId(StrBytes::from_static_str("g"));
    match api {
        ApiKey::ApiVersions => {
            let a = conn
                .exchange(&ApiVersionsRequest::default(), v)
                .await
                .expect("answer");
            assert_eq!(
                (a.error_code, a.api_keys.len()),
                (0, SUPPORTED.len()),
                "v{v}"
            );
        }
        ApiKey::Metadata => {
            let topics = vec![MetadataRequestTopic::default().with_name(Some(name("t")))];
            let a = conn
                .exchange(&MetadataRequest::default().with_topics(Some(topics)), v)
                .await
                .expect("answer");
            assert_eq!(a.brokers.len(), 1, "v{v}");
            assert_eq!(
                (a.topics[0].error_code, a.topics[0].partitions.len()),
                (0, 2),
                "v{v}"
            );
        }
        ApiKey::CreateTopics => {
            let topic = CreatableTopic::default()
                .with_name(name(&format!("created{v}")))
                .with_num_partitions(1)
                .with_replication_factor(1);
            let request = CreateTopicsRequest::default()
                .with_topics(vec![topic])
                .with_timeout_ms(5000);
            let a = conn.exchange(&request, v).await.expect("answer");
            assert_eq!(a.topics[0].error_code, 0, "v{v}");
        }
        ApiKey::InitProducerId => {
            let a = conn
                .exchange(
                    &InitProducerIdRequest::default().with_transactional_id(None),
                    v,
                )
                .await
                .expect("answer");
            assert_eq!(a.error_code, 0, "v{v}");
            assert!(a.producer_id.0 > 0, "v{v}");
        }
        ApiKey::Produce => {
            let request = ProduceRequest::default()
                .with_acks(-1)
                .with_timeout_ms(5000)
                .with_topic_data(vec![TopicProduceData::default()
                    .with_name(name("t"))
                    .with_partition_data(vec![PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(batch(&format!("v{v}"))))])]);
            let a = conn.exchange(&request, v).await.expect("answer");
            assert_eq!(a.responses[0].partition_responses[0].error_code, 0, "v{v}");
        }
        ApiKey::Fetch => {
            let mut request = FetchRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_max_wait_ms(10)
                .with_min_bytes(1)
                .with_max_bytes(1 << 20)
                .with_topics(vec![FetchTopic::default()
                    .with_topic(name("t"))
                    .with_partitions(vec![FetchPartition::default()
                        .with_partition(0)
                        .with_fetch_offset(0)
                        .with_partition_max_bytes(1 << 20)])]);
            if v >= 7 {
                request = request.with_session_epoch(-1);
            }
            let a = conn.exchange(&request, v).await.expect("answer");
            let p = &a.responses[0].partitions[0];
            assert_eq!(p.error_code, 0, "v{v}");
            assert!(p.high_watermark > 0, "v{v}");
            assert!(p.records.as_ref().is_some_and(|r| !r.is_empty()), "v{v}");
        }
        ApiKey::ListOffsets => {
            let request = ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![ListOffsetsTopic::default()
                    .with_name(name("t"))
                    .with_partitions(vec![ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(-2)])]);
            let a = conn.exchange(&request, v).await.expect("answer");
            let p = &a.topics[0].partitions[0];
            assert_eq!((p.error_code, p.offset), (0, 0), "v{v}");
        }
        ApiKey::FindCoordinator => {
            let key = StrBytes::from_static_str("g");
            let request = if v >= 4 {
                FindCoordinatorRequest::default().with_coordinator_keys(vec![key])
            } else {
                FindCoordinatorRequest::default().with_key(key)
            };
            let a = conn.exchange(&request, v).await.expect("answer");
            let port = if v >= 4 {
                a.coordinators[0].port
            } else {
                a.port
            };
            assert!(port > 0, "v{v}");
        }
        ApiKey::OffsetCommit => {
            let request = OffsetCommitRequest::default()
                .with_group_id(group)
                .with_generation_id_or_member_epoch(-1)
                .with_topics(vec![OffsetCommitRequestTopic::default()
                    .with_name(name("t"))
                    .with_partitions(vec![OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(i64::from(v))])]);
            let a = conn.exchange(&request, v).await.expect("answer");
            assert_eq!(a.topics[0].partitions[0].error_code, 0, "v{v}");
        }
        ApiKey::OffsetFetch => {
            let request = OffsetFetchRequest::default()
                .with_group_id(group)
                .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                    .with_name(name("t"))
                    .with_partition_indexes(vec![0])]));
            let a = conn.exchange(&request, v).await.expect("answer");
            let p = &a.topics[0].partitions[0];
            assert_eq!(p.error_code, 0, "v{v}");
            assert!(
                p.committed_offset >= 0,
                "v{v}: committed by the OffsetCommit sweep"
            );
        }
        ApiKey::JoinGroup => {
            join(conn, &format!("join{v}"), v).await;
        }
        ApiKey::SyncGroup => {
            let g = format!("sync{v}");
            let (member, generation) = join(conn, &g, 0).await;
            let assignment = SyncGroupRequestAssignment::default()
                .with_member_id(member.clone())
                .with_assignment(Bytes::from_static(b"plan"));
            let mut request = SyncGroupRequest::default()
                .with_group_id(GroupId(StrBytes::from_string(g)))
                .with_generation_id(generation)
                .with_member_id(member)
                .with_assignments(vec![assignment]);
            if v >= 5 {
                request = request
                    .with_protocol_type(Some(StrBytes::from_static_str("consumer")))
                    .with_protocol_name(Some(StrBytes::from_static_str("range")));
            }
            let a = conn.exchange(&request, v).await.expect("answer");
            assert_eq!(a.error_code, 0, "v{v}");
            assert_eq!(a.assignment, Bytes::from_static(b"plan"), "v{v}");
            if v >= 5 {
                assert_eq!(
                    a.protocol_name.as_ref().map(|p| p.as_str()),
                    Some("range"),
                    "v{v}"
                );
            }
        }
        ApiKey::Heartbeat => {
            let g = format!("beat{v}");
            let (member, generation) = join(conn, &g, 0).await;
            let request = HeartbeatRequest::default()
                .with_group_id(GroupId(StrBytes::from_string(g)))
                .with_generation_id(generation)
                .with_member_id(member);
            let a = conn.exchange(&request, v).await.expect("answer");
            assert_eq!(a.error_code, 0, "v{v}");
        }
        ApiKey::LeaveGroup => {
            let g = format!("leave{v}");
            let (member, _) = join(conn, &g, 0).await;
            let request =
                LeaveGroupRequest::default().with_group_id(GroupId(StrBytes::from_string(g)));
            let request = if v >= 3 {
                request.with_members(vec![MemberIdentity::default().with_member_id(member)])
            } else {
                request.with_member_id(member)
            };
            // v3 on answers per member.
            let code =
                |a: &LeaveGroupResponse| a.members.first().map_or(a.error_code, |m| m.error_code);
            let a = conn.exchange(&request, v).await.expect("answer");
            assert_eq!((a.error_code, code(&a)), (0, 0), "v{v}");
            let again = conn.exchange(&request, v).await.expect("answer");
            assert_eq!(code(&again), 25, "v{v}: UNKNOWN_MEMBER_ID once gone");
        }
        other => panic!("{other:?} is advertised but has no sweep case here"),
    }
}

#[tokio::test]
async fn every_advertised_version_round_trips() {
    let server = TestServer::start().await;
    server.backend.add_topic("t", 2);
    let mut conn = Connection::open(&server.bootstrap()).await.expect("open");
    // Produce before Fetch and OffsetCommit before OffsetFetch: the table is in that order.
    for &(api, lo, hi) in SUPPORTED {
        for v in lo..=hi {
            sweep(api, v, &mut conn).await;
        }
    }
}
