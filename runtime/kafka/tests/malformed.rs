//! Bad input ends only the connection that sent it, or gets a Kafka error answer.

mod common;

use bytes::{BufMut, Bytes, BytesMut};
use common::TestServer;
use isr_kafka::client::Connection;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, OffsetFetchRequest,
    ProduceRequest, SyncGroupRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sends raw bytes and returns all the server answers before it closes (within 2 s).
async fn raw(server: &TestServer, bytes: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(server.addr).await.expect("connect");
    s.write_all(bytes).await.expect("write");
    // Half-close: a server that answered then sees the end of input and closes too.
    s.shutdown().await.expect("shutdown");
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(2), s.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "server neither answered nor closed");
    answer
}

fn frame(api: i16, version: i16, body: &[u8]) -> Vec<u8> {
    let mut b = BytesMut::new();
    b.put_i32(0);
    b.put_i16(api);
    b.put_i16(version);
    b.put_i32(7); // correlation id
    b.put_i16(-1); // null client id
    let flexible = kafka_protocol::messages::ApiKey::try_from(api)
        .is_ok_and(|k| k.request_header_version(version) >= 2);
    if flexible {
        b.put_u8(0); // flexible header: no tagged fields
    }
    b.put_slice(body);
    let len = (b.len() - 4) as i32;
    b[..4].copy_from_slice(&len.to_be_bytes());
    b.to_vec()
}

async fn still_serves(server: &TestServer) {
    Connection::open(&server.bootstrap())
        .await
        .expect("a fresh connection is served");
}

#[tokio::test]
async fn bad_frames_close_only_their_connection() {
    let server = TestServer::start().await;
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("negative length", (-5i32).to_be_bytes().to_vec()),
        (
            "oversized length",
            (200 * 1024 * 1024i32).to_be_bytes().to_vec(),
        ),
        ("frame shorter than a header", vec![0, 0, 0, 3, 0, 3, 0]),
        ("unknown api key", frame(999, 0, &[])),
        ("unsupported version", frame(0, 2, &[])),
        ("garbage body", frame(3, 12, &[0xff; 40])),
        // Metadata v1 claiming 2^31-1 topics in a 4-byte array header.
        ("absurd array count", frame(3, 1, &[0x7f, 0xff, 0xff, 0xff])),
    ];
    for (what, bytes) in cases {
        let answer = raw(&server, &bytes).await;
        assert!(
            answer.is_empty(),
            "{what}: expected a close, got {answer:?}"
        );
        still_serves(&server).await;
    }
}

#[tokio::test]
async fn an_apiversions_too_new_gets_the_list_and_unsupported_version() {
    let server = TestServer::start().await;
    let answer = raw(&server, &frame(18, 99, &[])).await;
    // length, correlation id 7, error code 35 (v0 layout), then the api array.
    assert!(answer.len() > 10, "{answer:?}");
    assert_eq!(&answer[4..8], &7i32.to_be_bytes());
    assert_eq!(&answer[8..10], &35i16.to_be_bytes());
}

fn produce_request(records: Bytes) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(1000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str("t")))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])])
}

fn valid_batch() -> Bytes {
    use kafka_protocol::records::*;
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: 0,
        timestamp: 0,
        key: None,
        value: Some(Bytes::from_static(b"hello")),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, [&record], &options).expect("encode");
    buf.freeze()
}

async fn produce_code(server: &TestServer, records: Bytes) -> i16 {
    let mut conn = Connection::open(&server.bootstrap()).await.expect("open");
    let answer = conn.send(&produce_request(records)).await.expect("answer");
    answer.responses[0].partition_responses[0].error_code
}

#[tokio::test]
async fn bad_batches_are_refused_with_kafka_codes() {
    let server = TestServer::start().await;
    server.backend.add_topic("t", 1);
    let mut flipped = BytesMut::from(&valid_batch()[..]);
    let last = flipped.len() - 1;
    flipped[last] ^= 0x01;
    assert_eq!(
        produce_code(&server, flipped.freeze()).await,
        2,
        "CRC mismatch: CORRUPT_MESSAGE"
    );
    let mut magic1 = BytesMut::from(&valid_batch()[..]);
    magic1[16] = 1;
    assert_eq!(
        produce_code(&server, magic1.freeze()).await,
        2,
        "magic 1: CORRUPT_MESSAGE"
    );
    let truncated = valid_batch().slice(..30);
    assert_eq!(
        produce_code(&server, truncated).await,
        2,
        "truncated: CORRUPT_MESSAGE"
    );
    let mut two = BytesMut::from(&valid_batch()[..]);
    two.extend_from_slice(&valid_batch());
    assert_eq!(
        produce_code(&server, two.freeze()).await,
        87,
        "two batches: INVALID_RECORD"
    );
    assert_eq!(server.backend.end("t", 0), 0, "nothing was stored");
    assert_eq!(produce_code(&server, valid_batch()).await, 0);
    assert_eq!(server.backend.end("t", 0), 1);
}

/// Kafka refuses the empty group id in the membership requests (INVALID_GROUP_ID) and accepts
/// it in the offset requests, for old clients that commit without a group.
#[tokio::test]
async fn membership_requests_for_the_empty_group_are_refused_as_invalid_group_id() {
    let server = TestServer::start().await;
    let mut conn = Connection::open(&server.bootstrap()).await.expect("open");
    let empty = GroupId(StrBytes::default());
    let join = JoinGroupRequest::default()
        .with_group_id(empty.clone())
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000);
    let joined = conn.send(&join).await.expect("join answered");
    assert_eq!(joined.error_code, 24, "JoinGroup");
    let sync = SyncGroupRequest::default().with_group_id(empty.clone());
    assert_eq!(conn.send(&sync).await.expect("answer").error_code, 24);
    let heartbeat = HeartbeatRequest::default().with_group_id(empty.clone());
    assert_eq!(conn.send(&heartbeat).await.expect("answer").error_code, 24);
    let leave = LeaveGroupRequest::default().with_group_id(empty.clone());
    assert_eq!(conn.send(&leave).await.expect("answer").error_code, 24);
    let fetch = OffsetFetchRequest::default().with_group_id(empty);
    let fetched = conn.send(&fetch).await.expect("answer");
    assert_ne!(
        fetched.error_code, 24,
        "the offset APIs take the empty group"
    );
    still_serves(&server).await;
}

#[tokio::test]
async fn a_prefix_already_read_by_the_caller_is_parsed_first() {
    // The runtime peeks at the first 4 bytes to route a connection, then hands them over.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = TestServer::start().await;
    let backend = std::sync::Arc::clone(&server.backend);
    let serve = tokio::spawn(async move {
        let (mut stream, peer) = listener.accept().await.expect("accept");
        let mut prefix = [0u8; 4];
        stream.read_exact(&mut prefix).await.expect("peek");
        let info = isr_kafka::ConnectionInfo::plaintext(peer);
        isr_kafka::serve_connection(stream, Bytes::copy_from_slice(&prefix), backend, info).await
    });
    let conn = Connection::open(&addr.to_string()).await;
    assert!(conn.is_ok(), "ApiVersions through a prefixed connection");
    drop(conn);
    let ended = tokio::time::timeout(Duration::from_secs(2), serve).await;
    assert!(
        matches!(ended, Ok(Ok(Ok(())))),
        "clean end when the client closes"
    );
}

#[tokio::test]
async fn random_bodies_never_bring_the_server_down() {
    let server = TestServer::start().await;
    server.backend.add_topic("t", 1);
    // A fixed xorshift sequence: reproducible, and varied enough to hit every length prefix.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for &(api, lo, hi) in isr_kafka::versions::SUPPORTED {
        for v in lo..=hi {
            for _ in 0..20 {
                let len = (next() % 64) as usize;
                let body: Vec<u8> = (0..len).map(|_| next() as u8).collect();
                raw(&server, &frame(api as i16, v, &body)).await;
            }
        }
    }
    still_serves(&server).await;
}
