//! Which APIs and versions isr speaks, and the ApiVersions answer.
//!
//! The server advertises this table and the isr client intersects it with what a broker
//! advertises, so both sides stay within tested ground. Only versions whose requests this crate decodes and whose responses it fills in correctly are
//! listed: a client picks the highest version both sides know, so an over-claim here breaks
//! real clients. tests/versions.rs sends every version listed here through the server and
//! back; kcat, kafka-python and confluent-kafka exercise the versions they pick.

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};

/// UNSUPPORTED_VERSION: the client's ApiVersions version is newer than ours.
const UNSUPPORTED_VERSION: i16 = 35;

/// (API, lowest, highest version) served.
///
/// Lower bounds: Produce 3 and Fetch 4 are the first versions carrying v2 record batches,
/// which are all this broker stores. Fetch names topics by id from v13 (KIP-516); v14 only adds
/// an error of tiered storage, which isr has not, and v15 the follower's replica state, which
/// consumers do not send; it stops before v16, whose answers to NOT_LEADER_OR_FOLLOWER carry the
/// new leader and its endpoint (KIP-951), which this broker does not fill in. OffsetFetch stops
/// before batched OffsetFetch (v8), which this broker does not implement. The group membership
/// APIs go up to the versions that carry static members (group.instance.id, KIP-345); from
/// JoinGroup v4 a new member is asked to join again with the id it is given
/// (MEMBER_ID_REQUIRED, KIP-394), as Kafka does.
pub const SUPPORTED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 9),
    (ApiKey::Fetch, 4, 15),
    (ApiKey::ListOffsets, 1, 9),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::OffsetCommit, 2, 8),
    (ApiKey::OffsetFetch, 1, 7),
    (ApiKey::FindCoordinator, 0, 4),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::InitProducerId, 0, 4),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::DescribeCluster, 0, 2),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::OffsetDelete, 0, 0),
    // After a v0 handshake the tokens travel as bare frames; from v1 in SaslAuthenticate.
    // librdkafka requires v0 to be advertised before it uses v1.
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
    // ACL v0 (no pattern types) is gone from Kafka 4 and from kafka-protocol.
    (ApiKey::DescribeAcls, 1, 3),
    (ApiKey::CreateAcls, 1, 3),
    (ApiKey::DeleteAcls, 1, 3),
    (ApiKey::DescribeUserScramCredentials, 0, 0),
    (ApiKey::AlterUserScramCredentials, 0, 0),
];

/// Whether `version` of `api` is served.
pub fn supports(api: ApiKey, version: i16) -> bool {
    SUPPORTED
        .iter()
        .any(|&(k, lo, hi)| k == api && (lo..=hi).contains(&version))
}

/// The ApiVersions answer. Only non-default fields are set, so no tagged fields are emitted in
/// flexible versions (librdkafka 2.0 rejects default-valued tagged fields there).
pub fn api_versions() -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_api_keys(
        SUPPORTED
            .iter()
            .map(|&(k, lo, hi)| {
                ApiVersion::default()
                    .with_api_key(k as i16)
                    .with_min_version(lo)
                    .with_max_version(hi)
            })
            .collect(),
    )
}

/// The answer to an ApiVersions request newer than we know: Kafka's convention is a v0
/// response with UNSUPPORTED_VERSION and the list, from which the client picks and retries.
pub fn unsupported_api_versions() -> ApiVersionsResponse {
    api_versions().with_error_code(UNSUPPORTED_VERSION)
}
