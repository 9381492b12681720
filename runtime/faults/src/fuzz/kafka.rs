//! Kafka request frames, through the very server the brokers run (`isr_kafka::serve_connection`)
//! over an in-memory connection, against a backend that accepts everything: the input is what
//! a client sends on one connection; the server must answer, or close it, never panic.

use bytes::{BufMut, Bytes, BytesMut};
use isr::{Acks, BrokerId, LeaderEpoch, Offset};
use isr_kafka::auth::acl::Authorizer;
use isr_kafka::auth::scram::{Mechanism, ScramCredential};
use isr_kafka::auth::{SecurityChange, SecurityState};
use isr_kafka::client::consume::{commit_request, fetch_request, offset_fetch_request};
use isr_kafka::client::produce;
use isr_kafka::configs::{ConfigOp, ConfigResource};
use isr_kafka::versions::SUPPORTED;
use isr_kafka::{
    Appended, Backend, BackendError, BrokerInfo, BrokerSettings, ClusterMetadata, CommittedOffset,
    Coordinator, FetchedData, GroupCoordinator, GroupOffset, ListedOffset, NewTopic, OffsetSpec,
    PartitionInfo, StoredGroup, TopicId, TopicInfo,
};
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, HeaderVersion, StrBytes};
use std::future::Future;

/// A backend that takes every request: the fuzzer is after the layer above it.
pub struct Accepting {
    /// Who may log in (SASL targets): user alice, password `alice-secret`.
    authorizer: Authorizer,
    groups: Coordinator,
    settings: BrokerSettings,
    batch: Bytes,
}

impl Accepting {
    pub fn new(batch: Bytes) -> Accepting {
        Accepting {
            authorizer: Authorizer::default(),
            groups: Coordinator::default(),
            settings: BrokerSettings::default(),
            batch,
        }
    }
}

impl Accepting {
    /// With user alice (password `alice-secret`), whose SCRAM credentials take one PBKDF2
    /// iteration: a login costs the fuzzer nothing, and the server's logic is the same.
    pub fn with_alice(batch: Bytes) -> Accepting {
        let mut state = SecurityState::default();
        let upserts = Mechanism::ALL
            .into_iter()
            .filter_map(|m| {
                let credential = ScramCredential::from_password(m, "alice-secret", 1).ok()?;
                Some(("alice".to_owned(), m, credential))
            })
            .collect();
        state.apply(SecurityChange::AlterScram {
            upserts,
            deletions: Vec::new(),
        });
        Accepting {
            authorizer: Authorizer {
                state: std::sync::Arc::new(state),
                ..Authorizer::default()
            },
            ..Accepting::new(batch)
        }
    }
}

impl Backend for Accepting {
    fn authorizer(&self) -> Authorizer {
        self.authorizer.clone()
    }

    fn coordinator(&self) -> &Coordinator {
        &self.groups
    }

    fn settings(&self) -> &BrokerSettings {
        &self.settings
    }

    async fn metadata(&self) -> Result<ClusterMetadata, BackendError> {
        let b = BrokerId(1);
        Ok(ClusterMetadata {
            this_broker: b,
            controller: Some(b),
            brokers: vec![BrokerInfo {
                id: b,
                host: "127.0.0.1".into(),
                port: 9092,
                listeners: Default::default(),
            }],
            topics: vec![TopicInfo {
                name: "orders".into(),
                id: TopicId::default(),
                partitions: vec![PartitionInfo {
                    partition: 0,
                    leader: Some(b),
                    leader_epoch: LeaderEpoch(1),
                    replicas: vec![b],
                    isr: vec![b],
                    offline: Vec::new(),
                    min_insync_replicas: 1,
                }],
                configs: [("retention.ms".to_string(), "-1".to_string())].into(),
            }],
            broker_configs: Default::default(),
        })
    }

    async fn create_topic(&self, _: NewTopic) -> Result<TopicId, BackendError> {
        Ok(TopicId::default())
    }

    async fn delete_topic(&self, _: &str) -> Result<(), BackendError> {
        Ok(())
    }

    async fn create_partitions(
        &self,
        _: &str,
        _: u32,
        _: Vec<Vec<BrokerId>>,
    ) -> Result<(), BackendError> {
        Ok(())
    }

    async fn alter_configs(
        &self,
        _: ConfigResource,
        _: Vec<ConfigOp>,
        _: bool,
    ) -> Result<(), BackendError> {
        Ok(())
    }

    async fn produce(&self, _: &str, _: u32, _: Acks, _: Bytes) -> Result<Appended, BackendError> {
        Ok(Appended {
            base_offset: Offset(0),
            log_append_time: None,
        })
    }

    async fn fetch(
        &self,
        _: &str,
        _: u32,
        offset: Offset,
        _: u32,
    ) -> Result<FetchedData, BackendError> {
        Ok(FetchedData {
            high_watermark: Offset(1),
            log_start_offset: Offset(0),
            batches: if offset == Offset(0) {
                vec![self.batch.clone()]
            } else {
                Vec::new()
            },
        })
    }

    async fn list_offsets(
        &self,
        _: &str,
        _: u32,
        _: OffsetSpec,
    ) -> Result<Option<ListedOffset>, BackendError> {
        Ok(Some(ListedOffset {
            offset: Offset(0),
            timestamp: -1,
            leader_epoch: Some(LeaderEpoch(1)),
        }))
    }

    async fn delete_records(
        &self,
        _: &str,
        _: u32,
        before: Option<Offset>,
    ) -> Result<Offset, BackendError> {
        Ok(before.unwrap_or(Offset(0)))
    }

    async fn group_coordinator(&self, _group: &str) -> Result<GroupCoordinator, BackendError> {
        Ok(GroupCoordinator {
            broker: BrokerId(1),
            here: true,
        })
    }

    async fn load_group(&self, _: &str) -> Result<(), BackendError> {
        Ok(())
    }

    async fn store_group(&self, _: &str, _: Option<StoredGroup>) -> Result<(), BackendError> {
        Ok(())
    }

    async fn commit_offsets(
        &self,
        _: &str,
        offsets: Vec<GroupOffset>,
    ) -> Vec<Result<(), BackendError>> {
        offsets.iter().map(|_| Ok(())).collect()
    }

    async fn fetch_offset(
        &self,
        _: &str,
        _: &str,
        _: u32,
    ) -> Result<Option<CommittedOffset>, BackendError> {
        Ok(Some(CommittedOffset {
            offset: Offset(1),
            leader_epoch: None,
            metadata: String::new(),
        }))
    }

    async fn group_offsets(&self, _: &str) -> Result<Vec<GroupOffset>, BackendError> {
        Ok(vec![GroupOffset {
            topic: "orders".into(),
            partition: 0,
            committed: CommittedOffset {
                offset: Offset(1),
                leader_epoch: None,
                metadata: String::new(),
            },
        }])
    }

    async fn offset_groups(&self) -> Result<Vec<String>, BackendError> {
        Ok(vec!["group".into()])
    }

    async fn delete_offsets(
        &self,
        _: &str,
        _: Option<Vec<(String, u32)>>,
    ) -> Result<(), BackendError> {
        Ok(())
    }

    async fn allocate_producer_id(&self) -> Result<i64, BackendError> {
        Ok(5)
    }

    /// Never: a waiting fetch waits out its (virtual) deadline in one step.
    fn committed_changed(&self) -> impl Future<Output = ()> + Send {
        std::future::pending()
    }
}

fn name(s: &'static str) -> StrBytes {
    StrBytes::from_static_str(s)
}

/// `request` at `version` with its header, without the length prefix; `None` where the
/// request's fields do not exist at that version.
fn frame<R: Encodable + HeaderVersion>(key: ApiKey, version: i16, request: &R) -> Option<Vec<u8>> {
    let mut buf = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(name("fuzz")))
        .encode(&mut buf, R::header_version(version))
        .ok()?;
    request.encode(&mut buf, version).ok()?;
    Some(buf.to_vec())
}

/// Every request isr serves, at every version it serves, filled in as clients fill them.
pub fn seeds(batch: &Bytes) -> Vec<Vec<u8>> {
    let group = || GroupId(name("group"));
    let topic = || TopicName(name("orders"));
    let mut seeds = Vec::new();
    for &(key, lo, hi) in SUPPORTED {
        for v in lo..=hi {
            let seed = match key {
                ApiKey::Produce => frame(
                    key,
                    v,
                    &produce::request("orders", 0, Acks::All, batch.clone()),
                ),
                ApiKey::Fetch => frame(key, v, &fetch_request("orders", 0, 0, 100)),
                ApiKey::ListOffsets => frame(
                    key,
                    v,
                    &ListOffsetsRequest::default().with_topics(vec![ListOffsetsTopic::default()
                        .with_name(topic())
                        .with_partitions(
                            vec![ListOffsetsPartition::default().with_timestamp(-1)],
                        )]),
                ),
                ApiKey::Metadata => frame(
                    key,
                    v,
                    &MetadataRequest::default().with_topics(Some(vec![
                        MetadataRequestTopic::default().with_name(Some(topic())),
                    ])),
                ),
                ApiKey::OffsetCommit => {
                    frame(key, v, &commit_request("group", (1, "m-1"), "orders", 0, 5))
                }
                ApiKey::OffsetFetch => frame(key, v, &offset_fetch_request("group", "orders", 0)),
                ApiKey::FindCoordinator => {
                    let r = FindCoordinatorRequest::default();
                    let r = if v >= 4 {
                        r.with_coordinator_keys(vec![name("group")])
                    } else {
                        r.with_key(name("group"))
                    };
                    frame(key, v, &r)
                }
                ApiKey::ApiVersions => frame(key, v, &ApiVersionsRequest::default()),
                ApiKey::CreateTopics => frame(
                    key,
                    v,
                    &CreateTopicsRequest::default()
                        .with_timeout_ms(1000)
                        .with_topics(vec![CreatableTopic::default()
                            .with_name(topic())
                            .with_num_partitions(3)
                            .with_replication_factor(3)
                            .with_configs(vec![CreatableTopicConfig::default()
                                .with_name(name("min.insync.replicas"))
                                .with_value(Some(name("2")))])]),
                ),
                ApiKey::InitProducerId => frame(key, v, &InitProducerIdRequest::default()),
                ApiKey::JoinGroup => frame(
                    key,
                    v,
                    &JoinGroupRequest::default()
                        .with_group_id(group())
                        .with_session_timeout_ms(6000)
                        .with_rebalance_timeout_ms(3000)
                        .with_protocol_type(name("consumer"))
                        .with_protocols(vec![JoinGroupRequestProtocol::default()
                            .with_name(name("range"))
                            .with_metadata(Bytes::from_static(b"\0\0\0\0\0\x01\0\x06orders"))]),
                ),
                ApiKey::SyncGroup => frame(
                    key,
                    v,
                    &SyncGroupRequest::default()
                        .with_group_id(group())
                        .with_generation_id(1)
                        .with_member_id(name("m-1"))
                        .with_assignments(vec![SyncGroupRequestAssignment::default()
                            .with_member_id(name("m-1"))
                            .with_assignment(Bytes::from_static(b"\0\0\0\0\0\x01"))]),
                ),
                ApiKey::Heartbeat => frame(
                    key,
                    v,
                    &HeartbeatRequest::default()
                        .with_group_id(group())
                        .with_generation_id(1)
                        .with_member_id(name("m-1")),
                ),
                ApiKey::LeaveGroup => frame(
                    key,
                    v,
                    &LeaveGroupRequest::default()
                        .with_group_id(group())
                        .with_member_id(name("m-1")),
                ),
                ApiKey::DeleteTopics => {
                    let r = DeleteTopicsRequest::default().with_timeout_ms(1000);
                    let r = if v >= 6 {
                        r.with_topics(vec![DeleteTopicState::default().with_name(Some(topic()))])
                    } else {
                        r.with_topic_names(vec![topic()])
                    };
                    frame(key, v, &r)
                }
                ApiKey::CreatePartitions => frame(
                    key,
                    v,
                    &CreatePartitionsRequest::default().with_topics(vec![
                        CreatePartitionsTopic::default()
                            .with_name(topic())
                            .with_count(6),
                    ]),
                ),
                ApiKey::DescribeConfigs => frame(
                    key,
                    v,
                    &DescribeConfigsRequest::default().with_resources(vec![
                        DescribeConfigsResource::default()
                            .with_resource_type(2)
                            .with_resource_name(name("orders")),
                    ]),
                ),
                ApiKey::AlterConfigs => frame(
                    key,
                    v,
                    &AlterConfigsRequest::default().with_resources(vec![
                        alter_configs_request::AlterConfigsResource::default()
                            .with_resource_type(2)
                            .with_resource_name(name("orders"))
                            .with_configs(vec![alter_configs_request::AlterableConfig::default()
                                .with_name(name("retention.ms"))
                                .with_value(Some(name("1000")))]),
                    ]),
                ),
                ApiKey::IncrementalAlterConfigs => frame(
                    key,
                    v,
                    &IncrementalAlterConfigsRequest::default().with_resources(vec![
                        incremental_alter_configs_request::AlterConfigsResource::default()
                            .with_resource_type(2)
                            .with_resource_name(name("orders"))
                            .with_configs(vec![
                                incremental_alter_configs_request::AlterableConfig::default()
                                    .with_name(name("max.message.bytes"))
                                    .with_config_operation(0)
                                    .with_value(Some(name("2000000"))),
                            ]),
                    ]),
                ),
                ApiKey::DescribeCluster => frame(key, v, &DescribeClusterRequest::default()),
                ApiKey::ListGroups => frame(key, v, &ListGroupsRequest::default()),
                ApiKey::DescribeGroups => frame(
                    key,
                    v,
                    &DescribeGroupsRequest::default().with_groups(vec![group()]),
                ),
                ApiKey::DeleteGroups => frame(
                    key,
                    v,
                    &DeleteGroupsRequest::default().with_groups_names(vec![group()]),
                ),
                ApiKey::OffsetDelete => frame(
                    key,
                    v,
                    &OffsetDeleteRequest::default()
                        .with_group_id(group())
                        .with_topics(vec![OffsetDeleteRequestTopic::default()
                            .with_name(topic())
                            .with_partitions(vec![OffsetDeleteRequestPartition::default()])]),
                ),
                ApiKey::DescribeAcls => frame(
                    key,
                    v,
                    &DescribeAclsRequest::default()
                        .with_resource_type_filter(1)
                        .with_pattern_type_filter(1)
                        .with_operation(1)
                        .with_permission_type(1),
                ),
                ApiKey::CreateAcls => frame(
                    key,
                    v,
                    &CreateAclsRequest::default().with_creations(vec![AclCreation::default()
                        .with_resource_type(2)
                        .with_resource_name(name("orders"))
                        .with_resource_pattern_type(3)
                        .with_principal(name("User:alice"))
                        .with_host(name("*"))
                        .with_operation(3)
                        .with_permission_type(3)]),
                ),
                ApiKey::DeleteAcls => frame(
                    key,
                    v,
                    &DeleteAclsRequest::default().with_filters(vec![DeleteAclsFilter::default()
                        .with_resource_type_filter(1)
                        .with_pattern_type_filter(1)
                        .with_operation(1)
                        .with_permission_type(1)]),
                ),
                ApiKey::DescribeUserScramCredentials => {
                    frame(key, v, &DescribeUserScramCredentialsRequest::default())
                }
                ApiKey::AlterUserScramCredentials => {
                    frame(key, v, &AlterUserScramCredentialsRequest::default())
                }
                // A PLAINTEXT connection refuses these before reading their bodies: they
                // are seeds of the SASL target ([`sasl_seeds`]).
                _ => None,
            };
            seeds.extend(seed);
        }
    }
    seeds
}

/// What a client sends to log in on a SASL_SSL listener: SaslHandshake for each
/// mechanism at every version, SaslAuthenticate with a PLAIN token and a SCRAM first message,
/// bare tokens (after a v0 handshake), and ApiVersions, which is served before the login.
pub fn sasl_seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for mechanism in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI"] {
        for v in 0..=1 {
            let handshake = SaslHandshakeRequest::default().with_mechanism(name(mechanism));
            seeds.extend(frame(ApiKey::SaslHandshake, v, &handshake));
        }
    }
    let tokens: [&[u8]; 4] = [
        b"\0alice\0alice-secret",
        b"\0alice\0guess",
        b"n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL",
        b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
    ];
    for token in tokens {
        for v in 0..=2 {
            let authenticate =
                SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(token));
            seeds.extend(frame(ApiKey::SaslAuthenticate, v, &authenticate));
        }
        seeds.push(token.to_vec());
    }
    seeds.extend(frame(
        ApiKey::ApiVersions,
        3,
        &ApiVersionsRequest::default(),
    ));
    seeds
}

/// Puts a length prefix before `body` (the right one, unless `wrong` says otherwise).
pub fn prefixed(out: &mut Vec<u8>, body: &[u8], wrong: Option<u32>) {
    let len = wrong.unwrap_or(body.len() as u32);
    let mut prefix = BytesMut::with_capacity(4);
    prefix.put_u32(len);
    out.extend_from_slice(&prefix);
    out.extend_from_slice(body);
}
