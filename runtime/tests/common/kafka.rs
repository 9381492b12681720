//! A minimal blocking Kafka client for tests, independent of the code under test: CreateTopics
//! v4, Metadata v8, Produce v7, Fetch v11, FindCoordinator v1, OffsetCommit v2 and OffsetFetch
//! v1 (all non-flexible), encoded with kafka-protocol.

use bytes::{Bytes, BytesMut};
use isr_kafka::client::records::{encode, Outgoing};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, FetchRequest, FetchResponse,
    FindCoordinatorRequest, FindCoordinatorResponse, GroupId, MetadataRequest, MetadataResponse,
    OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
    ProduceRequest, ProduceResponse, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::{Compression, RecordBatchDecoder, RecordSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

pub const NOT_ENOUGH_REPLICAS: i16 = 19;
pub const MESSAGE_TOO_LARGE: i16 = 10;

fn call<Req: Encodable, Resp: Decodable>(
    address: &str,
    key: ApiKey,
    version: i16,
    request: &Req,
) -> std::io::Result<Resp> {
    let mut stream = TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(40)))?;
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(1)
        .with_client_id(Some(StrBytes::from_static_str("test")));
    let mut body = BytesMut::new();
    header.encode(&mut body, 1).map_err(other)?;
    request.encode(&mut body, version).map_err(other)?;
    stream.write_all(&(body.len() as i32).to_be_bytes())?;
    stream.write_all(&body)?;
    let mut len = [0u8; 4];
    stream.read_exact(&mut len)?;
    let mut buf = vec![0u8; i32::from_be_bytes(len) as usize];
    stream.read_exact(&mut buf)?;
    let mut buf = Bytes::from(buf);
    ResponseHeader::decode(&mut buf, 0).map_err(other)?;
    Resp::decode(&mut buf, version).map_err(other)
}

fn other(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

fn topic_name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_string()))
}

pub fn create_topic(address: &str, topic: &str, partitions: i32, rf: i16, min_isr: u32) -> i16 {
    let min_isr = min_isr.to_string();
    create_topic_with(
        address,
        topic,
        partitions,
        rf,
        &[("min.insync.replicas", &min_isr)],
    )
}

/// CreateTopics with these config overrides: the error code.
pub fn create_topic_with(
    address: &str,
    topic: &str,
    partitions: i32,
    rf: i16,
    configs: &[(&str, &str)],
) -> i16 {
    let configs = configs
        .iter()
        .map(|(k, v)| {
            CreatableTopicConfig::default()
                .with_name(StrBytes::from_string(k.to_string()))
                .with_value(Some(StrBytes::from_string(v.to_string())))
        })
        .collect();
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(topic_name(topic))
            .with_num_partitions(partitions)
            .with_replication_factor(rf)
            .with_configs(configs)]);
    let response: CreateTopicsResponse =
        call(address, ApiKey::CreateTopics, 4, &request).expect("CreateTopics");
    response.topics.first().map_or(-1, |t| t.error_code)
}

/// Metadata of one topic, allowing the broker to create it: its partition count, or the
/// Kafka error code.
pub fn partitions_of(address: &str, topic: &str) -> Result<usize, i16> {
    let request = MetadataRequest::default()
        .with_allow_auto_topic_creation(true)
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(topic_name(topic)))
        ]));
    let response: MetadataResponse =
        call(address, ApiKey::Metadata, 8, &request).map_err(|_| -1i16)?;
    let t = response.topics.first().ok_or(-1i16)?;
    match t.error_code {
        0 => Ok(t.partitions.len()),
        code => Err(code),
    }
}

/// One batch of `values`, as a producer sends it.
pub fn batch(values: &[String]) -> Bytes {
    let records: Vec<Outgoing> = values
        .iter()
        .map(|v| Outgoing {
            key: None,
            value: Bytes::from(v.clone()),
        })
        .collect();
    encode(&records, 0).expect("encode batch")
}

/// Produces one batch with acks=all: the base offset, or the Kafka error code.
pub fn produce(address: &str, topic: &str, partition: i32, values: &[String]) -> Result<i64, i16> {
    produce_batch(address, topic, partition, batch(values))
}

/// Produces `batch` as it is with acks=all: the base offset, or the Kafka error code.
pub fn produce_batch(address: &str, topic: &str, partition: i32, batch: Bytes) -> Result<i64, i16> {
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(batch))])]);
    let response: ProduceResponse =
        call(address, ApiKey::Produce, 7, &request).map_err(|_| -1i16)?;
    let p = response
        .responses
        .first()
        .and_then(|t| t.partition_responses.first())
        .ok_or(-1i16)?;
    if p.error_code != 0 {
        return Err(p.error_code);
    }
    Ok(p.base_offset)
}

/// The committed batches of a partition from `offset` on, decoded, with the high watermark.
fn fetch_sets(
    address: &str,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<(Vec<RecordSet>, i64), i16> {
    let request = FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_max_wait_ms(0)
        .with_max_bytes(64 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic_name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(64 << 20)])]);
    let response: FetchResponse = call(address, ApiKey::Fetch, 11, &request).map_err(|_| -1i16)?;
    let p = response
        .responses
        .first()
        .and_then(|t| t.partitions.first())
        .ok_or(-1i16)?;
    if p.error_code != 0 {
        return Err(p.error_code);
    }
    let mut bytes = p.records.clone().unwrap_or_default();
    let sets = RecordBatchDecoder::decode_all(&mut bytes).map_err(|_| -2i16)?;
    Ok((sets, p.high_watermark))
}

/// Every committed record from `offset` on, as (offset, value), with the high watermark.
pub fn fetch(
    address: &str,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<(Vec<(i64, String)>, i64), i16> {
    let (sets, hw) = fetch_sets(address, topic, partition, offset)?;
    let records = sets
        .into_iter()
        .flat_map(|set| set.records)
        .map(|r| {
            let value = r.value.map(|v| String::from_utf8_lossy(&v).to_string());
            (r.offset, value.unwrap_or_default())
        })
        .collect();
    Ok((records, hw))
}

/// The codec of each committed batch of a partition from `offset`, as the leader stores it.
pub fn stored_codecs(address: &str, topic: &str, partition: i32, offset: i64) -> Vec<Compression> {
    let (sets, _) = fetch_sets(address, topic, partition, offset).expect("Fetch");
    sets.into_iter().map(|set| set.compression).collect()
}

/// Every committed record of a partition, from `offset` up to the high watermark. One Fetch
/// answer is bounded (the broker sends at most `fetch_max_entries` batches), so this fetches
/// until it reaches the high watermark, or until an answer brings nothing new.
pub fn fetch_all(
    address: &str,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<(Vec<(i64, String)>, i64), i16> {
    let mut all = Vec::new();
    let mut next = offset;
    loop {
        let (records, hw) = fetch(address, topic, partition, next)?;
        let Some(&(last, _)) = records.last() else {
            return Ok((all, hw));
        };
        all.extend(records.into_iter().filter(|(o, _)| *o >= next));
        next = last + 1;
        if next >= hw {
            return Ok((all, hw));
        }
    }
}

/// The "host:port" of `group`'s coordinator, or the Kafka error code.
pub fn coordinator(address: &str, group: &str) -> Result<String, i16> {
    let request = FindCoordinatorRequest::default().with_key(StrBytes::from_string(group.into()));
    let answer: FindCoordinatorResponse =
        call(address, ApiKey::FindCoordinator, 1, &request).map_err(|_| -1i16)?;
    match answer.error_code {
        0 => Ok(format!("{}:{}", answer.host.as_str(), answer.port)),
        code => Err(code),
    }
}

/// One OffsetCommit of `offsets` (partition, offset) of `topic` for `group`, outside group
/// membership: each partition's error code, in order.
pub fn commit(address: &str, group: &str, topic: &str, offsets: &[(i32, i64)]) -> Vec<(i32, i16)> {
    let partitions = offsets
        .iter()
        .map(|&(p, o)| {
            OffsetCommitRequestPartition::default()
                .with_partition_index(p)
                .with_committed_offset(o)
        })
        .collect();
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.into())))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(partitions)]);
    let answer: Result<OffsetCommitResponse, _> = call(address, ApiKey::OffsetCommit, 2, &request);
    match answer {
        Ok(answer) => answer
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| (p.partition_index, p.error_code))
            .collect(),
        Err(_) => offsets.iter().map(|&(p, _)| (p, -1)).collect(),
    }
}

/// `group`'s committed offsets of `partitions` of `topic` (-1: none), in order.
pub fn committed(address: &str, group: &str, topic: &str, partitions: &[i32]) -> Vec<(i32, i64)> {
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.into())))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(topic_name(topic))
            .with_partition_indexes(partitions.to_vec())]));
    let answer: OffsetFetchResponse =
        call(address, ApiKey::OffsetFetch, 1, &request).expect("OffsetFetch answered");
    answer
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| (p.partition_index, p.committed_offset))
        .collect()
}
