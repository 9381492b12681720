//! Every advertised version of every API, sent by the isr client's encoder, decoded and
//! answered by the server, and the answer decoded again: the table in versions.rs claims
//! nothing this test does not exercise. The server is a SASL_PLAINTEXT listener with ACLs
//! enabled, and the sweep runs as its super user, so that the security APIs answer for real.

mod common;

use bytes::Bytes;
use common::{login, Secured, TestServer};
use isr_kafka::auth::acl::{Operation, PatternType, Permission, ResourceType};
use isr_kafka::auth::scram::{Mechanism, ScramClient};
use isr_kafka::auth::SecurityProtocol;
use isr_kafka::client::records::{encode, Outgoing};
use isr_kafka::client::security::ClientSecurity;
use isr_kafka::client::Connection;
use isr_kafka::versions::SUPPORTED;
use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

/// The leader epoch the OffsetCommit sweep commits with, and OffsetFetch must give back.
const COMMITTED_EPOCH: i32 = 7;

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

/// A lone member joins group `g` (JoinGroup v`v`; from v4 in two round trips, KIP-394) and
/// leads generation 1 of it.
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
    let mut a = conn.exchange(&request, v).await.expect("answer");
    if v >= 4 {
        // KIP-394: a new member is given its id first, and joins again with it.
        assert_eq!((a.error_code, a.generation_id), (79, -1), "v{v}");
        assert!(
            !a.member_id.is_empty(),
            "v{v}: MEMBER_ID_REQUIRED names the id"
        );
        let again = request.clone().with_member_id(a.member_id.clone());
        a = conn.exchange(&again, v).await.expect("answer");
    }
    assert_eq!((a.error_code, a.generation_id), (0, 1), "v{v}");
    assert_eq!(a.leader, a.member_id, "v{v}: a lone member leads");
    assert_eq!(a.members.len(), 1, "v{v}");
    assert_eq!(a.members[0].metadata, Bytes::from_static(b"meta"), "v{v}");
    (a.member_id, a.generation_id)
}

/// Creates a topic (CreateTopics v2) for a sweep case.
async fn create(conn: &mut Connection, topic: &str, partitions: i32) {
    let request = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(partitions)
            .with_replication_factor(1)])
        .with_timeout_ms(5000);
    let a = conn.exchange(&request, 2).await.expect("answer");
    assert_eq!(a.topics[0].error_code, 0, "create {topic}");
}

/// The super user's login.
fn admin() -> ClientSecurity {
    login("admin", "admin-secret")
}

fn acl_creation(topic: &str) -> AclCreation {
    AclCreation::default()
        .with_resource_type(ResourceType::Topic.code())
        .with_resource_name(StrBytes::from_string(topic.to_owned()))
        .with_resource_pattern_type(PatternType::Prefixed.code())
        .with_principal(StrBytes::from_static_str("User:alice"))
        .with_host(StrBytes::from_static_str("*"))
        .with_operation(Operation::Read.code())
        .with_permission_type(Permission::Allow.code())
}

async fn sweep(api: ApiKey, v: i16, conn: &mut Connection, addr: &str) {
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
            // From v13 the topic is named by its id, which Metadata (v10+) gives.
            let topics = vec![MetadataRequestTopic::default().with_name(Some(name("t")))];
            let metadata = MetadataRequest::default().with_topics(Some(topics));
            let id = conn.exchange(&metadata, 12).await.expect("metadata").topics[0].topic_id;
            assert!(!id.is_nil());
            let mut request = FetchRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_max_wait_ms(10)
                .with_min_bytes(1)
                .with_max_bytes(1 << 20)
                .with_topics(vec![FetchTopic::default()
                    .with_topic(name("t"))
                    .with_topic_id(id)
                    .with_partitions(vec![FetchPartition::default()
                        .with_partition(0)
                        .with_fetch_offset(0)
                        .with_partition_max_bytes(1 << 20)])]);
            if v >= 7 {
                request = request.with_session_epoch(-1);
            }
            let a = conn.exchange(&request, v).await.expect("answer");
            if v >= 13 {
                assert_eq!(a.responses[0].topic_id, id, "v{v}");
            }
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
            // By timestamp: every record in "t" was produced after the Unix epoch, none in
            // the year 2500.
            for (timestamp, offset) in [(0, 0), (16_725_225_600_000, -1)] {
                let request = ListOffsetsRequest::default()
                    .with_replica_id(BrokerId(-1))
                    .with_topics(vec![ListOffsetsTopic::default()
                        .with_name(name("t"))
                        .with_partitions(vec![ListOffsetsPartition::default()
                            .with_partition_index(0)
                            .with_timestamp(timestamp)])]);
                let a = conn.exchange(&request, v).await.expect("answer");
                let p = &a.topics[0].partitions[0];
                assert_eq!((p.error_code, p.offset), (0, offset), "v{v} at {timestamp}");
            }
        }
        ApiKey::DeleteRecords => {
            // Below the log start: nothing moves (the other cases read "t" from offset 0).
            // Beyond the end: OFFSET_OUT_OF_RANGE.
            let delete = |offset| {
                DeleteRecordsRequest::default()
                    .with_topics(vec![DeleteRecordsTopic::default()
                        .with_name(name("t"))
                        .with_partitions(vec![DeleteRecordsPartition::default()
                            .with_partition_index(0)
                            .with_offset(offset)])])
                    .with_timeout_ms(1000)
            };
            let a = conn.exchange(&delete(0), v).await.expect("answer");
            let p = &a.topics[0].partitions[0];
            assert_eq!((p.error_code, p.low_watermark), (0, 0), "v{v}");
            let a = conn.exchange(&delete(1 << 40), v).await.expect("answer");
            let p = &a.topics[0].partitions[0];
            assert_eq!(p.error_code, 1, "v{v}: OFFSET_OUT_OF_RANGE");
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
                        .with_committed_offset(i64::from(v))
                        // From v6 a commit carries the epoch of the last record read (KIP-320).
                        .with_committed_leader_epoch(if v >= 6 {
                            COMMITTED_EPOCH
                        } else {
                            -1
                        })])]);
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
            // The sweep's last commit (its newest version) carried an epoch; from v5 the answer
            // gives it back.
            if v >= 5 {
                assert_eq!(p.committed_leader_epoch, COMMITTED_EPOCH, "v{v}");
            }
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
        ApiKey::DeleteTopics => {
            let doomed = format!("doomed{v}");
            create(conn, &doomed, 1).await;
            let mut request = DeleteTopicsRequest::default().with_timeout_ms(5000);
            request = if v >= 6 {
                request.with_topics(vec![
                    DeleteTopicState::default().with_name(Some(name(&doomed)))
                ])
            } else {
                request.with_topic_names(vec![name(&doomed)])
            };
            let a = conn.exchange(&request, v).await.expect("answer");
            assert_eq!(a.responses[0].error_code, 0, "v{v}");
            let again = conn.exchange(&request, v).await.expect("answer");
            assert_eq!(again.responses[0].error_code, 3, "v{v}: gone");
        }
        ApiKey::CreatePartitions => {
            let growing = format!("growing{v}");
            create(conn, &growing, 1).await;
            let request = CreatePartitionsRequest::default()
                .with_timeout_ms(5000)
                .with_topics(vec![CreatePartitionsTopic::default()
                    .with_name(name(&growing))
                    .with_count(3)]);
            let a = conn.exchange(&request, v).await.expect("answer");
            assert_eq!(a.results[0].error_code, 0, "v{v}");
            let again = conn.exchange(&request, v).await.expect("answer");
            assert_eq!(again.results[0].error_code, 37, "v{v}: INVALID_PARTITIONS");
        }
        ApiKey::DescribeConfigs => {
            let request = DescribeConfigsRequest::default()
                .with_include_synonyms(true)
                .with_resources(vec![
                    DescribeConfigsResource::default()
                        .with_resource_type(2)
                        .with_resource_name(StrBytes::from_static_str("t"))
                        .with_configuration_keys(None),
                    DescribeConfigsResource::default()
                        .with_resource_type(4)
                        .with_resource_name(StrBytes::from_static_str("1"))
                        .with_configuration_keys(Some(vec![StrBytes::from_static_str(
                            "message.max.bytes",
                        )])),
                ]);
            let a = conn.exchange(&request, v).await.expect("answer");
            let (topic, broker) = (&a.results[0], &a.results[1]);
            assert_eq!((topic.error_code, broker.error_code), (0, 0), "v{v}");
            let max = topic
                .configs
                .iter()
                .find(|c| c.name.as_str() == "max.message.bytes")
                .expect("max.message.bytes");
            assert_eq!(
                max.value.as_ref().map(|s| s.as_str()),
                Some("1048588"),
                "v{v}"
            );
            assert!(!max.synonyms.is_empty(), "v{v}");
            if v >= 3 {
                assert_eq!(max.config_type, 3, "v{v}: INT");
            }
            assert_eq!(broker.configs.len(), 1, "v{v}: only the key asked");
        }
        ApiKey::AlterConfigs => {
            let request =
                AlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default(
                )
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("t"))
                .with_configs(vec![AlterableConfig::default()
                    .with_name(StrBytes::from_static_str("retention.ms"))
                    .with_value(Some(StrBytes::from_string(format!("{}", 1000 + v))))])]);
            let a = conn.exchange(&request, v).await.expect("answer");
            assert_eq!(a.responses[0].error_code, 0, "v{v}");
        }
        ApiKey::IncrementalAlterConfigs => {
            use kafka_protocol::messages::incremental_alter_configs_request as inc;
            let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
                inc::AlterConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_static_str("t"))
                    .with_configs(vec![inc::AlterableConfig::default()
                        .with_name(StrBytes::from_static_str("retention.ms"))
                        .with_config_operation(0)
                        .with_value(Some(StrBytes::from_static_str("5000")))]),
            ]);
            let a = conn.exchange(&request, v).await.expect("answer");
            assert_eq!(a.responses[0].error_code, 0, "v{v}");
        }
        ApiKey::DescribeCluster => {
            let mut request = DescribeClusterRequest::default();
            if v >= 1 {
                request = request.with_endpoint_type(1);
            }
            let a = conn.exchange(&request, v).await.expect("answer");
            assert_eq!((a.error_code, a.brokers.len()), (0, 1), "v{v}");
            assert_eq!(a.controller_id, BrokerId(1), "v{v}");
        }
        ApiKey::ListGroups => {
            let a = conn
                .exchange(&ListGroupsRequest::default(), v)
                .await
                .expect("answer");
            assert_eq!(a.error_code, 0, "v{v}");
            let g = a
                .groups
                .iter()
                .find(|g| g.group_id.0.as_str() == "g")
                .expect("the offsets-only group g");
            if v >= 4 {
                assert_eq!(g.group_state.as_str(), "Empty", "v{v}");
            }
        }
        ApiKey::DescribeGroups => {
            let request = DescribeGroupsRequest::default()
                .with_groups(vec![GroupId(StrBytes::from_static_str("join0"))]);
            let a = conn.exchange(&request, v).await.expect("answer");
            let g = &a.groups[0];
            assert_eq!((g.error_code, g.members.len()), (0, 1), "v{v}");
            assert_eq!(g.protocol_type.as_str(), "consumer", "v{v}");
        }
        ApiKey::DeleteGroups => {
            let g = format!("deleted{v}");
            let commit = OffsetCommitRequest::default()
                .with_group_id(GroupId(StrBytes::from_string(g.clone())))
                .with_generation_id_or_member_epoch(-1)
                .with_topics(vec![OffsetCommitRequestTopic::default()
                    .with_name(name("t"))
                    .with_partitions(vec![OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(1)])]);
            conn.exchange(&commit, 2).await.expect("commit");
            let request = DeleteGroupsRequest::default()
                .with_groups_names(vec![GroupId(StrBytes::from_string(g))]);
            let a = conn.exchange(&request, v).await.expect("answer");
            assert_eq!(a.results[0].error_code, 0, "v{v}");
            let again = conn.exchange(&request, v).await.expect("answer");
            assert_eq!(again.results[0].error_code, 69, "v{v}: GROUP_ID_NOT_FOUND");
        }
        ApiKey::OffsetDelete => {
            let request = OffsetDeleteRequest::default()
                .with_group_id(group)
                .with_topics(vec![OffsetDeleteRequestTopic::default()
                    .with_name(name("t"))
                    .with_partitions(vec![
                        OffsetDeleteRequestPartition::default().with_partition_index(1)
                    ])]);
            let a = conn.exchange(&request, v).await.expect("answer");
            assert_eq!(a.error_code, 0, "v{v}");
            assert_eq!(a.topics[0].partitions[0].error_code, 0, "v{v}");
        }
        ApiKey::SaslHandshake => {
            let request = SaslHandshakeRequest::default()
                .with_mechanism(StrBytes::from_static_str("SCRAM-SHA-256"));
            let a = conn.exchange(&request, v).await.expect("answer");
            assert_eq!(a.error_code, 34, "v{v}: ILLEGAL_SASL_STATE once logged in");
            let mut fresh = Connection::open_with(addr, &ClientSecurity::default())
                .await
                .expect("open");
            let a = fresh.exchange(&request, v).await.expect("answer");
            assert_eq!(a.error_code, 0, "v{v}");
            let offered: Vec<&str> = a.mechanisms.iter().map(|m| m.as_str()).collect();
            assert_eq!(
                offered,
                ["SCRAM-SHA-256", "SCRAM-SHA-512"],
                "no PLAIN without TLS"
            );
        }
        ApiKey::SaslAuthenticate => {
            let mut fresh = Connection::open_with(addr, &ClientSecurity::default())
                .await
                .expect("open");
            let handshake = SaslHandshakeRequest::default()
                .with_mechanism(StrBytes::from_static_str("SCRAM-SHA-256"));
            fresh.exchange(&handshake, 1).await.expect("handshake");
            let (client, first) =
                ScramClient::start(Mechanism::Sha256, "admin", "admin-secret").expect("start");
            let step =
                |token: Vec<u8>| SaslAuthenticateRequest::default().with_auth_bytes(token.into());
            let a = fresh.exchange(&step(first), v).await.expect("first");
            assert_eq!(a.error_code, 0, "v{v}");
            let (expect, last) = client.respond(&a.auth_bytes).expect("respond");
            let a = fresh.exchange(&step(last), v).await.expect("final");
            assert_eq!(a.error_code, 0, "v{v}");
            expect.verify(&a.auth_bytes).expect("server proof");
            let topics = fresh
                .exchange(&MetadataRequest::default().with_topics(None), 1)
                .await
                .expect("metadata once logged in");
            assert!(!topics.topics.is_empty(), "v{v}");
        }
        ApiKey::CreateAcls => {
            let request = CreateAclsRequest::default()
                .with_creations(vec![acl_creation(&format!("acl{v}-"))]);
            let a = conn.exchange(&request, v).await.expect("answer");
            assert_eq!(a.results[0].error_code, 0, "v{v}");
        }
        ApiKey::DescribeAcls => {
            let request = DescribeAclsRequest::default()
                .with_resource_type_filter(ResourceType::Topic.code())
                .with_resource_name_filter(Some(StrBytes::from_static_str("acl1-")))
                .with_pattern_type_filter(PatternType::Prefixed.code())
                .with_principal_filter(None)
                .with_host_filter(None)
                .with_operation(1)
                .with_permission_type(1);
            let a = conn.exchange(&request, v).await.expect("answer");
            assert_eq!((a.error_code, a.resources.len()), (0, 1), "v{v}");
            assert_eq!(a.resources[0].acls[0].principal.as_str(), "User:alice");
        }
        ApiKey::DeleteAcls => {
            let filter = DeleteAclsFilter::default()
                .with_resource_type_filter(ResourceType::Topic.code())
                .with_resource_name_filter(Some(StrBytes::from_string(format!("acl{v}-"))))
                .with_pattern_type_filter(1)
                .with_principal_filter(None)
                .with_host_filter(None)
                .with_operation(1)
                .with_permission_type(1);
            let a = conn
                .exchange(&DeleteAclsRequest::default().with_filters(vec![filter]), v)
                .await
                .expect("answer");
            let r = &a.filter_results[0];
            assert_eq!((r.error_code, r.matching_acls.len()), (0, 1), "v{v}");
        }
        ApiKey::DescribeUserScramCredentials => {
            let a = conn
                .exchange(&DescribeUserScramCredentialsRequest::default(), v)
                .await
                .expect("answer");
            let users: Vec<&str> = a.results.iter().map(|r| r.user.as_str()).collect();
            assert_eq!(users, ["admin", "bob"], "v{v}");
            assert_eq!(a.results[0].credential_infos.len(), 2);
        }
        ApiKey::AlterUserScramCredentials => {
            let salt = Bytes::from_static(b"0123456789abcdef");
            let salted = Mechanism::Sha256.salted_password(b"bob-secret", &salt, 4096);
            let upsert = ScramCredentialUpsertion::default()
                .with_name(StrBytes::from_static_str("bob"))
                .with_mechanism(Mechanism::Sha256.code())
                .with_iterations(4096)
                .with_salt(salt)
                .with_salted_password(salted.into());
            let request = AlterUserScramCredentialsRequest::default().with_upsertions(vec![upsert]);
            let a = conn.exchange(&request, v).await.expect("answer");
            assert_eq!(a.results[0].error_code, 0, "v{v}");
            let unknown = ScramCredentialDeletion::default()
                .with_name(StrBytes::from_static_str("nobody"))
                .with_mechanism(Mechanism::Sha256.code());
            let request = AlterUserScramCredentialsRequest::default().with_deletions(vec![unknown]);
            let a = conn.exchange(&request, v).await.expect("answer");
            assert_eq!(a.results[0].error_code, 91, "v{v}: RESOURCE_NOT_FOUND");
        }
        other => panic!("{other:?} is advertised but has no sweep case here"),
    }
}

#[tokio::test]
async fn every_advertised_version_round_trips() {
    let server = TestServer::secured(Secured {
        protocol: SecurityProtocol::SaslPlaintext,
        acls: true,
        super_users: vec!["User:admin".into()],
    })
    .await;
    server.backend.add_topic("t", 2);
    server.backend.add_user("admin", "admin-secret");
    let addr = server.bootstrap();
    let mut conn = Connection::open_with(&addr, &admin()).await.expect("open");
    // Produce before Fetch, OffsetCommit before OffsetFetch, CreateAcls before DescribeAcls
    // and DeleteAcls, AlterUserScramCredentials (bob) before its Describe: the table is in
    // that order.
    let mut order: Vec<_> = SUPPORTED.to_vec();
    let late = [
        ApiKey::DescribeAcls,
        ApiKey::DeleteAcls,
        ApiKey::DescribeUserScramCredentials,
    ];
    order.sort_by_key(|(api, _, _)| late.contains(api));
    for (api, lo, hi) in order {
        for v in lo..=hi {
            sweep(api, v, &mut conn, &addr).await;
        }
    }
}
