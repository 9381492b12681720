//! SASL logins, failed logins and ACLs on the Kafka layer, against the in-memory server on a
//! SASL_PLAINTEXT listener (TLS listeners and real clients are tested with real brokers, in
//! runtime/tests/security.rs).

mod common;

use bytes::Bytes;
use common::{login, Secured, TestServer};
use isr_kafka::auth::acl::{Acl, Operation, PatternType, Permission, ResourceType};
use isr_kafka::auth::scram::Mechanism;
use isr_kafka::auth::throttle::FIRST_DELAY;
use isr_kafka::auth::SecurityProtocol;
use isr_kafka::client::acl::{self as acl_cmd, AclArgs, AclCommand};
use isr_kafka::client::records::{encode, Outgoing};
use isr_kafka::client::security::{self, ClientSecurity};
use isr_kafka::client::user::{self, UserArgs, UserCommand};
use isr_kafka::client::{ClientError, Connection};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use std::time::{Duration, Instant};

const SASL_AUTHENTICATION_FAILED: i16 = 58;
const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
const GROUP_AUTHORIZATION_FAILED: i16 = 30;
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
const SECURITY_DISABLED: i16 = 54;

/// A SASL_PLAINTEXT listener with ACLs on, super user admin, user alice, topics orders and
/// secret.
async fn secured() -> TestServer {
    let server = TestServer::secured(Secured {
        protocol: SecurityProtocol::SaslPlaintext,
        acls: true,
        super_users: vec!["User:admin".into()],
    })
    .await;
    server.backend.add_user("admin", "admin-secret");
    server.backend.add_user("alice", "alice-secret");
    server.backend.add_topic("orders", 1);
    server.backend.add_topic("secret", 1);
    server
}

fn allow(principal: &str, op: Operation, kind: ResourceType, name: &str) -> Acl {
    Acl {
        resource_type: kind,
        resource_name: name.into(),
        pattern: PatternType::Literal,
        principal: principal.into(),
        host: "*".into(),
        operation: op,
        permission: Permission::Allow,
    }
}

/// A connection logged in as `user` of [`secured`] (password `<user>-secret`).
async fn as_user(server: &TestServer, user: &str) -> Connection {
    let login = login(user, &format!("{user}-secret"));
    Connection::open_with(&server.bootstrap(), &login)
        .await
        .expect(user)
}

fn topic(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

async fn metadata(conn: &mut Connection, topics: Option<&[&str]>) -> Vec<(String, i16)> {
    let request = MetadataRequest::default().with_topics(topics.map(|names| {
        names
            .iter()
            .map(|n| MetadataRequestTopic::default().with_name(Some(topic(n))))
            .collect()
    }));
    let answer = conn.exchange(&request, 4).await.expect("metadata");
    answer
        .topics
        .iter()
        .map(|t| {
            let name = t.name.as_ref().map_or("", |n| n.0.as_str()).to_owned();
            (name, t.error_code)
        })
        .collect()
}

async fn produce(conn: &mut Connection, to: &str) -> i16 {
    let record = Outgoing {
        key: None,
        value: Bytes::from_static(b"v"),
    };
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic(to))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(encode(&[record], 0).expect("batch")))])]);
    let answer = conn.exchange(&request, 7).await.expect("produce");
    answer.responses[0].partition_responses[0].error_code
}

async fn fetch(conn: &mut Connection, from: &str) -> i16 {
    let request = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic(from))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_partition_max_bytes(1 << 20)])]);
    let answer = conn.exchange(&request, 11).await.expect("fetch");
    answer.responses[0].partitions[0].error_code
}

#[tokio::test]
async fn nothing_but_sasl_is_served_before_the_login() {
    let server = secured().await;
    let mut conn = Connection::open_with(&server.bootstrap(), &ClientSecurity::default())
        .await
        .expect("ApiVersions is served before the login");
    let refused = conn.exchange(&MetadataRequest::default(), 1).await;
    assert!(
        matches!(refused, Err(ClientError::Io { .. })),
        "Metadata before the login closes the connection: {refused:?}"
    );
    let mut admin = Connection::open_with(&server.bootstrap(), &login("admin", "admin-secret"))
        .await
        .expect("login");
    assert_eq!(metadata(&mut admin, None).await.len(), 2);
}

#[tokio::test]
async fn a_wrong_password_gets_sasl_authentication_failed_and_the_connection_closes() {
    let server = secured().await;
    let addr = server.bootstrap();
    // What a login costs the client (its key derivation, slow in debug builds), to tell a
    // wait from work.
    let started = Instant::now();
    Connection::open_with(&addr, &login("alice", "alice-secret"))
        .await
        .expect("login");
    let login_time = started.elapsed();
    let mut messages = Vec::new();
    for (user, password) in [("alice", "wrong"), ("mallory", "alice-secret")] {
        let started = Instant::now();
        match Connection::open_with(&addr, &login(user, password)).await {
            Err(ClientError::Kafka { code, message }) => {
                assert_eq!(code, SASL_AUTHENTICATION_FAILED, "{message}");
                messages.push(message);
            }
            other => panic!("{user}: {:?}", other.map(|_| "logged in")),
        }
        assert!(
            started.elapsed() < login_time * 2 + FIRST_DELAY,
            "a first failure is answered at once: {:?}",
            started.elapsed()
        );
    }
    assert_eq!(
        messages[0], messages[1],
        "an unknown user and a wrong password look alike"
    );
    assert!(
        messages[0].contains("invalid credentials"),
        "{}",
        messages[0]
    );

    // By hand: after the refusal the broker closes the connection.
    let mut conn = Connection::open_with(&addr, &ClientSecurity::default())
        .await
        .expect("open");
    let handshake =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("SCRAM-SHA-512"));
    let answer = conn.exchange(&handshake, 1).await.expect("handshake");
    assert_eq!(answer.error_code, 0);
    let garbage = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(b"n,,x"));
    let refused = conn.exchange(&garbage, 2).await.expect("answered");
    assert_eq!(refused.error_code, SASL_AUTHENTICATION_FAILED);
    let after = conn.exchange(&ApiVersionsRequest::default(), 0).await;
    assert!(after.is_err(), "closed");
}

#[tokio::test]
async fn repeated_failures_are_slowed_down_for_that_user_and_address() {
    let server = secured().await;
    let addr = server.bootstrap();
    // The n-th failure makes the next attempt wait FIRST_DELAY * 2^(n-1) after it; the
    // client's own key derivation counts towards the wait, so the fifth attempt shows it best.
    let mut waits = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let refused = Connection::open_with(&addr, &login("alice", "guess")).await;
        assert!(refused.is_err());
        waits.push(started.elapsed());
    }
    let last_failure = Instant::now();
    assert!(waits[4] >= FIRST_DELAY * 8, "{waits:?}");
    assert!(waits[4] > waits[0] + FIRST_DELAY * 4, "{waits:?}");
    // Another user at the same address is not slowed down by alice's failures.
    let started = Instant::now();
    Connection::open_with(&addr, &login("admin", "admin-secret"))
        .await
        .expect("admin");
    let admin = started.elapsed();
    assert!(admin < waits[0] * 2 + FIRST_DELAY, "{admin:?} {waits:?}");
    // The right password still gets in, in its turn: 2^4 steps after the fifth failure.
    Connection::open_with(&addr, &login("alice", "alice-secret"))
        .await
        .expect("login");
    assert!(last_failure.elapsed() >= FIRST_DELAY * 16 - Duration::from_millis(50));
}

#[tokio::test]
async fn acls_allow_what_they_name_deny_wins_and_metadata_hides_the_rest() {
    let server = secured().await;
    server.backend.add_acls(vec![
        allow("User:alice", Operation::Read, ResourceType::Topic, "orders"),
        allow("User:alice", Operation::Read, ResourceType::Group, "g"),
    ]);
    let mut alice = as_user(&server, "alice").await;
    let mut admin = as_user(&server, "admin").await;

    assert_eq!(metadata(&mut alice, None).await, [("orders".into(), 0)]);
    assert_eq!(
        metadata(&mut alice, Some(&["secret", "fresh"])).await,
        [
            ("secret".into(), TOPIC_AUTHORIZATION_FAILED),
            ("fresh".into(), TOPIC_AUTHORIZATION_FAILED)
        ],
        "named topics she may not describe are refused, and not created"
    );
    assert_eq!(
        metadata(&mut admin, None).await.len(),
        2,
        "nothing was created"
    );
    assert_eq!(
        produce(&mut alice, "orders").await,
        TOPIC_AUTHORIZATION_FAILED
    );
    assert_eq!(fetch(&mut alice, "orders").await, 0);
    assert_eq!(
        fetch(&mut alice, "secret").await,
        TOPIC_AUTHORIZATION_FAILED
    );
    assert_eq!(produce(&mut admin, "secret").await, 0, "the super user may");

    let find = |group: &str| {
        FindCoordinatorRequest::default().with_key(StrBytes::from_string(group.to_owned()))
    };
    let found = alice.exchange(&find("g"), 1).await.expect("find");
    assert_eq!(found.error_code, 0);
    let found = alice.exchange(&find("h"), 1).await.expect("find");
    assert_eq!(found.error_code, GROUP_AUTHORIZATION_FAILED);
    let acls = DescribeAclsRequest::default()
        .with_resource_type_filter(1)
        .with_resource_name_filter(None)
        .with_pattern_type_filter(1)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(1)
        .with_permission_type(1);
    let described = alice.exchange(&acls, 3).await.expect("describe acls");
    assert_eq!(described.error_code, CLUSTER_AUTHORIZATION_FAILED);
    let described = admin.exchange(&acls, 3).await.expect("describe acls");
    assert_eq!(described.resources.len(), 2);

    // A prefixed Write lets her produce; a Deny on the topic wins over it.
    let mut write = allow("User:alice", Operation::Write, ResourceType::Topic, "ord");
    write.pattern = PatternType::Prefixed;
    server.backend.add_acls(vec![write]);
    assert_eq!(produce(&mut alice, "orders").await, 0);
    let mut deny = allow(
        "User:alice",
        Operation::Write,
        ResourceType::Topic,
        "orders",
    );
    deny.permission = Permission::Deny;
    server.backend.add_acls(vec![deny]);
    assert_eq!(
        produce(&mut alice, "orders").await,
        TOPIC_AUTHORIZATION_FAILED
    );
}

#[tokio::test]
async fn acl_requests_without_acls_enabled_are_security_disabled() {
    let server = TestServer::start().await;
    let mut conn = Connection::open(&server.bootstrap()).await.expect("open");
    let request = DescribeAclsRequest::default()
        .with_resource_type_filter(1)
        .with_pattern_type_filter(1)
        .with_operation(1)
        .with_permission_type(1);
    let answer = conn.exchange(&request, 1).await.expect("answer");
    assert_eq!(answer.error_code, SECURITY_DISABLED);
}

async fn users(args: UserCommand) -> Result<String, String> {
    let mut out = Vec::new();
    user::run_with(UserArgs { command: args }, &mut out)
        .await
        .map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

async fn acls(args: AclCommand) -> Result<String, String> {
    let mut out = Vec::new();
    acl_cmd::run_with(AclArgs { command: args }, &mut out)
        .await
        .map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Parses `isr SUBCOMMAND ARGS` into the command's arguments, as the binary does.
fn parse<T: clap::Subcommand>(args: &[&str]) -> T {
    #[derive(clap::Parser)]
    struct Cli<T: clap::Subcommand> {
        #[command(subcommand)]
        command: T,
    }
    <Cli<T> as clap::Parser>::try_parse_from(std::iter::once("isr").chain(args.iter().copied()))
        .map(|cli| cli.command)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

#[tokio::test]
async fn users_and_acls_are_managed_with_the_isr_commands() {
    // The commands connect as this process is configured to: as admin.
    security::configure(login("admin", "admin-secret"));
    let server = secured().await;
    let b = server.bootstrap();
    let added = users(parse(&[
        "add",
        "carol",
        "--password",
        "pw",
        "--bootstrap",
        &b,
    ]))
    .await;
    assert_eq!(
        added.as_deref(),
        Ok("user carol: SCRAM-SHA-256, SCRAM-SHA-512\n")
    );
    let listed = users(parse(&["list", "--bootstrap", &b]))
        .await
        .expect("list");
    assert!(
        listed.contains("carol SCRAM-SHA-256:8192 SCRAM-SHA-512:8192\n")
            && listed.contains("alice SCRAM-SHA-256:4096"),
        "{listed}"
    );
    Connection::open_with(&b, &login("carol", "pw"))
        .await
        .expect("carol logs in");
    let removed = users(parse(&["remove", "carol", "--bootstrap", &b])).await;
    assert_eq!(
        removed.as_deref(),
        Ok("removed user carol: SCRAM-SHA-256, SCRAM-SHA-512\n")
    );
    assert!(Connection::open_with(&b, &login("carol", "pw"))
        .await
        .is_err());
    let missing = users(parse(&["remove", "nobody", "--bootstrap", &b])).await;
    assert_eq!(
        missing.err().as_deref(),
        Some("no user nobody; users: admin, alice")
    );

    let add = parse(&[
        "add",
        "--principal",
        "User:carol",
        "--operation",
        "read",
        "--operation",
        "describe",
        "--topic",
        "orders",
        "--bootstrap",
        &b,
    ]);
    let added = acls(add).await.expect("acl add");
    assert_eq!(
        added,
        "added allow User:carol * Read topic literal orders\n\
         added allow User:carol * Describe topic literal orders\n"
    );
    let listed = acls(parse(&[
        "list",
        "--principal",
        "User:carol",
        "--bootstrap",
        &b,
    ]))
    .await
    .expect("list");
    assert_eq!(listed.lines().count(), 2, "{listed}");
    let json = acls(parse(&[
        "list",
        "--json",
        "--topic",
        "orders",
        "--bootstrap",
        &b,
    ]))
    .await
    .expect("json");
    assert!(json.contains(r#""operation":"Read""#), "{json}");
    let removed = acls(parse(&[
        "remove",
        "--principal",
        "User:carol",
        "--operation",
        "read",
        "--bootstrap",
        &b,
    ]))
    .await;
    assert_eq!(
        removed.as_deref(),
        Ok("removed allow User:carol * Read topic literal orders\n")
    );
    let everything = acls(parse(&["remove", "--bootstrap", &b])).await;
    assert!(everything.unwrap_err().contains("name what to remove"));
    let bad = acls(parse(&[
        "add",
        "--principal",
        "carol",
        "--operation",
        "read",
        "--cluster",
        "--bootstrap",
        &b,
    ]))
    .await;
    assert!(bad.unwrap_err().contains("User:NAME"));
}

/// Sends one request frame (header v1) on a raw stream.
async fn send_request<R: kafka_protocol::protocol::Encodable>(
    stream: &mut tokio::net::TcpStream,
    key: ApiKey,
    version: i16,
    request: &R,
) {
    use kafka_protocol::protocol::Encodable;
    let mut body = bytes::BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(StrBytes::from_static_str("raw")))
        .encode(&mut body, 1)
        .expect("header");
    request.encode(&mut body, version).expect("body");
    send_raw(stream, &body).await;
}

async fn send_raw(stream: &mut tokio::net::TcpStream, bytes: &[u8]) {
    use tokio::io::AsyncWriteExt;
    let len = u32::try_from(bytes.len()).expect("len").to_be_bytes();
    stream.write_all(&len).await.expect("write");
    stream.write_all(bytes).await.expect("write");
}

async fn read_raw(stream: &mut tokio::net::TcpStream) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).await.expect("length");
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    stream.read_exact(&mut body).await.expect("body");
    body
}

#[tokio::test]
async fn after_a_v0_handshake_the_tokens_travel_bare() {
    use isr_kafka::auth::scram::ScramClient;
    let server = secured().await;
    let mut stream = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    let handshake =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("SCRAM-SHA-256"));
    send_request(&mut stream, ApiKey::SaslHandshake, 0, &handshake).await;
    let answer = read_raw(&mut stream).await;
    assert_eq!(&answer[4..6], &[0, 0], "handshake accepted");
    let (client, first) =
        ScramClient::start(Mechanism::Sha256, "alice", "alice-secret").expect("start");
    send_raw(&mut stream, &first).await;
    let challenge = read_raw(&mut stream).await;
    let (expect, last) = client.respond(&challenge).expect("respond");
    send_raw(&mut stream, &last).await;
    expect
        .verify(&read_raw(&mut stream).await)
        .expect("the server proves itself");
    // Logged in: Metadata is served.
    send_request(
        &mut stream,
        ApiKey::Metadata,
        1,
        &MetadataRequest::default(),
    )
    .await;
    let answer = read_raw(&mut stream).await;
    assert_eq!(&answer[..4], &7i32.to_be_bytes(), "answered");
}

#[tokio::test]
async fn a_refused_connection_closes_after_its_client_or_a_second_later() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = secured().await;
    let refused = || async {
        let mut stream = tokio::net::TcpStream::connect(server.addr)
            .await
            .expect("connect");
        let handshake = SaslHandshakeRequest::default()
            .with_mechanism(StrBytes::from_static_str("SCRAM-SHA-512"));
        send_request(&mut stream, ApiKey::SaslHandshake, 1, &handshake).await;
        assert_eq!(&read_raw(&mut stream).await[4..6], &[0, 0], "handshake");
        let garbage =
            SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(b"n,,x"));
        send_request(&mut stream, ApiKey::SaslAuthenticate, 1, &garbage).await;
        let answer = read_raw(&mut stream).await;
        assert_eq!(&answer[4..6], &SASL_AUTHENTICATION_FAILED.to_be_bytes());
        stream
    };
    // The refusal is not followed at once by the end of the stream, which some clients would
    // read together with it and then drop both: the broker waits for the client to close.
    let mut stream = refused().await;
    let mut byte = [0u8; 1];
    let early = tokio::time::timeout(Duration::from_millis(300), stream.read(&mut byte)).await;
    assert!(early.is_err(), "still open: {early:?}");
    stream.shutdown().await.expect("half-close");
    let end = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut byte)).await;
    assert!(matches!(end, Ok(Ok(0))), "closed after the client: {end:?}");

    // A client that never closes is closed on a second later, whatever it still sends.
    let mut stream = refused().await;
    let started = Instant::now();
    send_request(
        &mut stream,
        ApiKey::ApiVersions,
        0,
        &ApiVersionsRequest::default(),
    )
    .await;
    let end = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut byte)).await;
    assert!(matches!(end, Ok(Ok(0))), "closed, unanswered: {end:?}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

/// Authorized operations (KIP-430): asked for, Metadata, DescribeCluster and DescribeGroups
/// answer the caller's operations on each resource as Kafka's bitfield — all of Kafka's for
/// the super user, what the ACLs allow for another; not asked for, nothing (INT32_MIN).
#[tokio::test]
async fn authorized_operations_are_what_the_acls_allow_the_caller() {
    let server = secured().await;
    server.backend.add_acls(vec![allow(
        "User:alice",
        Operation::Read,
        ResourceType::Topic,
        "orders",
    )]);
    let mut alice = as_user(&server, "alice").await;
    let mut admin = as_user(&server, "admin").await;
    let asked = |include: bool| {
        MetadataRequest::default()
            .with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(topic("orders")))
            ]))
            .with_include_cluster_authorized_operations(include)
            .with_include_topic_authorized_operations(include)
    };
    let answer = admin.exchange(&asked(true), 10).await.expect("metadata");
    assert_eq!(answer.topics[0].topic_authorized_operations, 0xDF8);
    assert_eq!(answer.cluster_authorized_operations, 0x1FA0);
    let answer = admin.exchange(&asked(false), 10).await.expect("metadata");
    assert_eq!(answer.topics[0].topic_authorized_operations, i32::MIN);
    assert_eq!(answer.cluster_authorized_operations, i32::MIN);

    // Read implies Describe; nothing on the cluster.
    let answer = alice.exchange(&asked(true), 10).await.expect("metadata");
    let (read, describe) = (1 << Operation::Read.code(), 1 << Operation::Describe.code());
    assert_eq!(
        answer.topics[0].topic_authorized_operations,
        read | describe
    );
    assert_eq!(answer.cluster_authorized_operations, 0);

    let cluster =
        DescribeClusterRequest::default().with_include_cluster_authorized_operations(true);
    let described = admin.exchange(&cluster, 0).await.expect("describe cluster");
    assert_eq!(described.cluster_authorized_operations, 0x1FA0);
}
