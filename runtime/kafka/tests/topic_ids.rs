//! Topic ids (KIP-516) through the Kafka layer: CreateTopics v7 answers a new topic's id,
//! Metadata v10+ shows it and finds a topic by it, DeleteTopics v6 deletes by it and Fetch v13
//! reads by it; an id no topic has is UNKNOWN_TOPIC_ID (100) wherever it is named.

mod common;

use bytes::Bytes;
use common::TestServer;
use isr::Acks;
use isr_kafka::client::records::{decode, encode, Outgoing};
use isr_kafka::client::{produce, Connection};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

const UNKNOWN_TOPIC_ID: i16 = 100;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

/// An id no topic has (a version-4 UUID, as the controller draws).
fn stranger() -> Uuid {
    Uuid::from_u128(0x6c1f_6b4e_1e52_4d8e_9c4b_2f55_0d1e_77aa)
}

async fn open(server: &TestServer) -> Connection {
    Connection::open(&server.bootstrap()).await.expect("open")
}

/// CreateTopics v7 of one partition: the answer's error code and topic id.
async fn create(conn: &mut Connection, topic: &str) -> (i16, Uuid) {
    let request = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(1)
            .with_replication_factor(1)])
        .with_timeout_ms(5000);
    let a = conn.exchange(&request, 7).await.expect("CreateTopics");
    (a.topics[0].error_code, a.topics[0].topic_id)
}

/// Metadata v12 for the topics asked (by name, or by id with the name null), creating none.
async fn metadata(
    conn: &mut Connection,
    asked: Vec<MetadataRequestTopic>,
) -> Vec<MetadataResponseTopic> {
    let request = MetadataRequest::default()
        .with_topics(Some(asked))
        .with_allow_auto_topic_creation(false);
    conn.exchange(&request, 12).await.expect("Metadata").topics
}

fn by_name(topic: &str) -> MetadataRequestTopic {
    MetadataRequestTopic::default().with_name(Some(name(topic)))
}

fn by_id(id: Uuid) -> MetadataRequestTopic {
    MetadataRequestTopic::default()
        .with_name(None)
        .with_topic_id(id)
}

/// Fetch v13 of partition 0 of the topic `id` names, from offset 0.
async fn fetch(conn: &mut Connection, id: Uuid) -> FetchResponse {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(10)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic_id(id)
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    conn.exchange(&request, 13).await.expect("Fetch")
}

#[tokio::test]
async fn a_created_topic_has_one_id_that_metadata_shows_and_finds_it_by() {
    let server = TestServer::start().await;
    let mut conn = open(&server).await;
    let (code, id) = create(&mut conn, "orders").await;
    assert_eq!(code, 0);
    assert!(!id.is_nil(), "CreateTopics v7 answers the new topic's id");
    let (_, other) = create(&mut conn, "payments").await;
    assert_ne!(other, id, "each topic its own id");

    let first = metadata(&mut conn, vec![by_name("orders")]).await;
    let second = metadata(&mut conn, vec![by_name("orders")]).await;
    assert_eq!(
        first[0].topic_id, id,
        "Metadata shows the id CreateTopics gave"
    );
    assert_eq!(second[0].topic_id, id, "the same id every time");
    let all = conn
        .exchange(&MetadataRequest::default().with_topics(None), 12)
        .await
        .expect("all topics")
        .topics;
    let ids: Vec<(Option<TopicName>, Uuid)> =
        all.into_iter().map(|t| (t.name, t.topic_id)).collect();
    assert_eq!(
        ids,
        vec![(Some(name("orders")), id), (Some(name("payments")), other)]
    );

    let found = metadata(&mut conn, vec![by_id(other), by_id(stranger())]).await;
    assert_eq!(
        (&found[0].name, found[0].topic_id, found[0].error_code),
        (&Some(name("payments")), other, 0),
        "a topic asked by id is described"
    );
    assert_eq!(found[0].partitions.len(), 1);
    assert_eq!(
        (&found[1].name, found[1].topic_id, found[1].error_code),
        (&None, stranger(), UNKNOWN_TOPIC_ID)
    );
    let zero = metadata(&mut conn, vec![by_id(Uuid::nil())]).await;
    assert_eq!(
        zero[0].error_code, UNKNOWN_TOPIC_ID,
        "the zero id names no topic"
    );
}

#[tokio::test]
async fn delete_topics_v6_deletes_by_id_and_answers_name_and_id() {
    let server = TestServer::start().await;
    let mut conn = open(&server).await;
    let (_, id) = create(&mut conn, "orders").await;
    let (_, kept) = create(&mut conn, "kept").await;
    let delete = |topics: Vec<DeleteTopicState>| {
        DeleteTopicsRequest::default()
            .with_topics(topics)
            .with_timeout_ms(5000)
    };
    let by_id = |id: Uuid| {
        DeleteTopicState::default()
            .with_name(None)
            .with_topic_id(id)
    };

    let a = conn
        .exchange(&delete(vec![by_id(id), by_id(stranger())]), 6)
        .await
        .expect("DeleteTopics");
    let deleted = &a.responses[0];
    assert_eq!(
        (&deleted.name, deleted.topic_id, deleted.error_code),
        (&Some(name("orders")), id, 0)
    );
    let unknown = &a.responses[1];
    assert_eq!(
        (&unknown.name, unknown.topic_id, unknown.error_code),
        (&None, stranger(), UNKNOWN_TOPIC_ID)
    );
    let left = metadata(&mut conn, vec![by_name("orders"), by_name("kept")]).await;
    assert_eq!(
        left[0].error_code, 3,
        "orders is gone: UNKNOWN_TOPIC_OR_PARTITION"
    );
    assert_eq!((left[1].error_code, left[1].topic_id), (0, kept));

    // Once deleted, its id names nothing, even after a topic of the same name is created.
    let (_, again) = create(&mut conn, "orders").await;
    assert_ne!(again, id);
    let a = conn
        .exchange(&delete(vec![by_id(id)]), 6)
        .await
        .expect("again");
    assert_eq!(a.responses[0].error_code, UNKNOWN_TOPIC_ID);
    assert_eq!(
        metadata(&mut conn, vec![by_name("orders")]).await[0].error_code,
        0
    );

    // By name, v6 answers the id too; a name and an id together are refused.
    let named = DeleteTopicState::default().with_name(Some(name("kept")));
    let both = DeleteTopicState::default()
        .with_name(Some(name("orders")))
        .with_topic_id(again);
    let a = conn
        .exchange(&delete(vec![named, both]), 6)
        .await
        .expect("by name");
    assert_eq!(
        (a.responses[0].error_code, a.responses[0].topic_id),
        (0, kept)
    );
    assert_eq!(a.responses[1].error_code, 42, "INVALID_REQUEST");
    assert_eq!(
        metadata(&mut conn, vec![by_name("orders")]).await[0].error_code,
        0
    );
}

#[tokio::test]
async fn fetch_v13_reads_a_topic_by_its_id() {
    let server = TestServer::start().await;
    let mut conn = open(&server).await;
    let (_, id) = create(&mut conn, "orders").await;
    let values = ["a", "b", "c"];
    let records: Vec<Outgoing> = values
        .iter()
        .map(|v| Outgoing {
            key: None,
            value: Bytes::from(v.to_string()),
        })
        .collect();
    let batch = encode(&records, 0).expect("batch");
    let produced = conn
        .exchange(&produce::request("orders", 0, Acks::All, batch), 9)
        .await
        .expect("Produce");
    assert_eq!(produced.responses[0].partition_responses[0].error_code, 0);

    let a = fetch(&mut conn, id).await;
    assert_eq!(a.responses[0].topic_id, id, "answered by id");
    let p = &a.responses[0].partitions[0];
    assert_eq!((p.error_code, p.high_watermark), (0, 3));
    let read = decode(p.records.clone().expect("records")).expect("decode");
    let read: Vec<_> = read.iter().map(|r| (r.offset, r.value.clone())).collect();
    let expected: Vec<_> = (0..)
        .zip(values)
        .map(|(o, v)| (o, Some(Bytes::from(v))))
        .collect();
    assert_eq!(read, expected);

    for unknown in [stranger(), Uuid::nil()] {
        let a = fetch(&mut conn, unknown).await;
        assert_eq!(a.responses[0].topic_id, unknown);
        let p = &a.responses[0].partitions[0];
        assert_eq!(
            (p.error_code, p.high_watermark),
            (UNKNOWN_TOPIC_ID, -1),
            "{unknown}"
        );
        assert!(p.records.as_ref().is_none_or(|r| r.is_empty()));
    }
}
