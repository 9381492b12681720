//! The isr client commands against the in-memory Kafka server.

mod common;

use clap::Parser;
use common::TestServer;
use isr::Acks;
use isr_kafka::client::consume::{self, ConsumeArgs};
use isr_kafka::client::group::{self, GroupArgs, GroupCommand};
use isr_kafka::client::produce::{self, ProduceArgs};
use isr_kafka::client::topic::{self, CreateArgs, ListArgs, TopicArgs, TopicCommand};
use isr_kafka::BackendError;

async fn create(
    server: &TestServer,
    name: &str,
    partitions: u32,
    rf: u16,
) -> Result<String, String> {
    let mut out = Vec::new();
    let args = TopicArgs {
        command: TopicCommand::Create(CreateArgs {
            bootstrap: server.bootstrap(),
            name: name.into(),
            partitions: Some(partitions),
            replication_factor: Some(rf),
            min_insync_replicas: Some(1),
            configs: Vec::new(),
            replica_assignment: None,
        }),
    };
    topic::run_with(args, &mut out)
        .await
        .map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

fn produce_args(server: &TestServer, topic: &str) -> ProduceArgs {
    ProduceArgs {
        bootstrap: server.bootstrap(),
        topic: topic.into(),
        partition: None,
        key: None,
        acks: Acks::All,
    }
}

async fn produce(args: ProduceArgs, input: &str) -> Result<String, String> {
    let mut out = Vec::new();
    produce::run_with(args, input.as_bytes(), &mut out)
        .await
        .map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

fn consume_args(server: &TestServer, topic: &str) -> ConsumeArgs {
    ConsumeArgs {
        bootstrap: server.bootstrap(),
        topic: topic.into(),
        partition: 0,
        from_beginning: true,
        offset: None,
        group: None,
        max: None,
        until_end: false,
    }
}

async fn consume(args: ConsumeArgs) -> Result<String, String> {
    let mut out = Vec::new();
    consume::run_with(args, &mut out)
        .await
        .map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

#[tokio::test]
async fn create_list_produce_consume() {
    let server = TestServer::start().await;
    assert_eq!(
        create(&server, "events", 2, 1).await.as_deref(),
        Ok("created topic events (2 partitions, replication factor 1)\n")
    );
    let mut listed = Vec::new();
    let list = TopicArgs {
        command: TopicCommand::List(ListArgs {
            bootstrap: server.bootstrap(),
            json: false,
        }),
    };
    topic::run_with(list, &mut listed).await.expect("list");
    assert_eq!(
        String::from_utf8_lossy(&listed),
        "events partitions=2\n  0 leader=1 epoch=0 replicas=1 isr=1\n  1 leader=1 epoch=0 replicas=1 isr=1\n"
    );
    let produced = produce(produce_args(&server, "events"), "a\nb\nc\n").await;
    assert_eq!(produced.as_deref(), Ok("0 0\n0 1\n0 2\n"));
    let mut on_one = produce_args(&server, "events");
    on_one.partition = Some(1);
    on_one.acks = Acks::Leader;
    assert_eq!(produce(on_one, "x\n").await.as_deref(), Ok("1 0\n"));

    let read = consume(ConsumeArgs {
        max: Some(3),
        ..consume_args(&server, "events")
    })
    .await;
    assert_eq!(read.as_deref(), Ok("0 a\n1 b\n2 c\n"));
    let from_one = ConsumeArgs {
        max: Some(2),
        offset: Some(1),
        from_beginning: false,
        ..consume_args(&server, "events")
    };
    assert_eq!(consume(from_one).await.as_deref(), Ok("1 b\n2 c\n"));
}

#[tokio::test]
async fn acks_zero_prints_nothing_but_writes() {
    let server = TestServer::start().await;
    server.backend.add_topic("quiet", 1);
    let args = ProduceArgs {
        acks: Acks::None,
        ..produce_args(&server, "quiet")
    };
    assert_eq!(produce(args, "a\nb\n").await.as_deref(), Ok(""));
    // The server answers nothing to acks=0; a later read shows both records.
    let read = consume(ConsumeArgs {
        max: Some(2),
        ..consume_args(&server, "quiet")
    })
    .await;
    assert_eq!(read.as_deref(), Ok("0 a\n1 b\n"));
}

#[tokio::test]
async fn a_group_resumes_where_it_committed() {
    let server = TestServer::start().await;
    server.backend.add_topic("g", 1);
    produce(produce_args(&server, "g"), "a\nb\nc\nd\n")
        .await
        .expect("produce");
    let grouped = |max| ConsumeArgs {
        group: Some("readers".into()),
        max: Some(max),
        ..consume_args(&server, "g")
    };
    assert_eq!(consume(grouped(2)).await.as_deref(), Ok("0 a\n1 b\n"));
    assert_eq!(consume(grouped(2)).await.as_deref(), Ok("2 c\n3 d\n"));
}

#[tokio::test]
async fn a_refused_write_names_the_reason() {
    let server = TestServer::start().await;
    server.backend.add_topic("t", 1);
    server
        .backend
        .fail_next_produces([BackendError::NotEnoughReplicas]);
    let err = produce(produce_args(&server, "t"), "a\n")
        .await
        .expect_err("refused");
    assert!(err.starts_with("NOT_ENOUGH_REPLICAS"), "{err}");
    assert_eq!(server.backend.end("t", 0), 0);
}

#[tokio::test]
async fn produce_follows_a_leader_change() {
    let server = TestServer::start().await;
    server.backend.add_topic("t", 1);
    server.backend.fail_next_produces([
        BackendError::NotLeaderOrFollower,
        BackendError::LeaderNotAvailable,
    ]);
    assert_eq!(
        produce(produce_args(&server, "t"), "a\n").await.as_deref(),
        Ok("0 0\n")
    );
}

#[tokio::test]
async fn keys_pick_partitions_as_kafka_does() {
    let server = TestServer::start().await;
    server.backend.add_topic("k", 4);
    let args = ProduceArgs {
        key: Some("21".into()),
        ..produce_args(&server, "k")
    };
    // murmur2("21") = -973932308; & 0x7fffffff = 1173551340; % 4 = 0.
    let expected = (((-973932308i32) as u32 & 0x7fff_ffff) % 4).to_string();
    let out = produce(args, "v\n").await.expect("produce");
    assert_eq!(out, format!("{expected} 0\n"));
}

#[tokio::test]
async fn errors_are_one_clear_line() {
    let server = TestServer::start().await;
    create(&server, "dup", 1, 1).await.expect("create");
    let dup = create(&server, "dup", 1, 1).await.expect_err("duplicate");
    assert!(dup.starts_with("TOPIC_ALREADY_EXISTS"), "{dup}");
    let rf = create(&server, "wide", 1, 3)
        .await
        .expect_err("rf 3 on one broker");
    assert!(rf.starts_with("INVALID_REPLICATION_FACTOR"), "{rf}");
    let bad = create(&server, "no/slash", 1, 1)
        .await
        .expect_err("bad name");
    assert!(bad.starts_with("INVALID_TOPIC_EXCEPTION"), "{bad}");
    let past = ConsumeArgs {
        offset: Some(5),
        from_beginning: false,
        max: Some(1),
        ..consume_args(&server, "dup")
    };
    let oor = consume(past).await.expect_err("offset past end");
    assert!(oor.starts_with("OFFSET_OUT_OF_RANGE"), "{oor}");
    let missing = produce(produce_args(&server, "nope"), "a\n")
        .await
        .expect_err("unknown topic");
    assert!(
        missing.starts_with("UNKNOWN_TOPIC_OR_PARTITION"),
        "{missing}"
    );
    assert!(!missing.contains('\n'), "{missing}");
    let nowhere = ListArgs {
        bootstrap: "127.0.0.1:1".into(),
        json: false,
    };
    let e = topic::run_with(
        TopicArgs {
            command: TopicCommand::List(nowhere),
        },
        &mut Vec::new(),
    )
    .await
    .expect_err("nothing listens on port 1");
    assert!(
        e.to_string().starts_with("cannot connect to 127.0.0.1:1"),
        "{e}"
    );
}

/// The commands parse as the runtime's `isr` binary will expose them.
#[derive(clap::Parser)]
enum Cli {
    Produce(ProduceArgs),
    Consume(ConsumeArgs),
    Topic(TopicArgs),
    Group(GroupArgs),
}

#[test]
fn command_lines_parse() {
    let p = Cli::try_parse_from([
        "isr",
        "produce",
        "t",
        "--bootstrap",
        "h:1",
        "--acks",
        "1",
        "--partition",
        "2",
    ]);
    assert!(matches!(
        p,
        Ok(Cli::Produce(ProduceArgs {
            acks: Acks::Leader,
            partition: Some(2),
            ..
        }))
    ));
    assert!(
        Cli::try_parse_from(["isr", "produce", "t", "--bootstrap", "h:1", "--acks", "2"]).is_err()
    );
    assert!(Cli::try_parse_from([
        "isr",
        "produce",
        "t",
        "--bootstrap",
        "h:1",
        "--key",
        "k",
        "--partition",
        "1"
    ])
    .is_err());
    let c = Cli::try_parse_from([
        "isr",
        "consume",
        "t",
        "--bootstrap",
        "h:1",
        "--offset",
        "3",
        "--group",
        "g",
        "--max",
        "9",
    ]);
    assert!(matches!(
        c,
        Ok(Cli::Consume(ConsumeArgs {
            offset: Some(3),
            max: Some(9),
            ..
        }))
    ));
    assert!(Cli::try_parse_from([
        "isr",
        "consume",
        "t",
        "--bootstrap",
        "h:1",
        "--offset",
        "3",
        "--from-beginning"
    ])
    .is_err());
    let t = Cli::try_parse_from([
        "isr",
        "topic",
        "create",
        "n",
        "--bootstrap",
        "h:1",
        "--partitions",
        "3",
        "--replication-factor",
        "3",
        "--min-insync-replicas",
        "2",
    ]);
    assert!(matches!(t, Ok(Cli::Topic(_))));
    let alter = Cli::try_parse_from([
        "isr",
        "topic",
        "alter",
        "n",
        "--bootstrap",
        "h:1",
        "--set",
        "retention.ms=5",
        "--delete",
        "segment.ms",
    ]);
    let Ok(Cli::Topic(TopicArgs {
        command: TopicCommand::Alter(a),
    })) = alter
    else {
        panic!("topic alter parses: {alter:?}", alter = alter.err());
    };
    assert_eq!(a.set, [("retention.ms".to_owned(), "5".to_owned())]);
    assert_eq!(a.delete, ["segment.ms"]);
    // A malformed setting names the configs there are.
    let bad = Cli::try_parse_from([
        "isr",
        "topic",
        "alter",
        "n",
        "--bootstrap",
        "h",
        "--set",
        "x",
    ])
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(
        bad.contains("KEY=VALUE") && bad.contains("retention.ms"),
        "{bad}"
    );
    // An unknown subcommand names the valid ones.
    let unknown = Cli::try_parse_from(["isr", "group", "purge", "g", "--bootstrap", "h"])
        .err()
        .map(|e| e.render().to_string())
        .unwrap_or_default();
    assert!(unknown.contains("purge"), "{unknown}");
    for command in [
        &[
            "isr",
            "topic",
            "describe",
            "n",
            "--bootstrap",
            "h",
            "--json",
        ][..],
        &["isr", "topic", "delete", "n", "--bootstrap", "h"],
        &[
            "isr",
            "topic",
            "add-partitions",
            "n",
            "--bootstrap",
            "h",
            "--partitions",
            "4",
        ],
        &[
            "isr",
            "topic",
            "create",
            "n",
            "--bootstrap",
            "h",
            "--config",
            "retention.ms=1",
        ],
        &["isr", "topic", "list", "--bootstrap", "h", "--json"],
        &["isr", "group", "list", "--bootstrap", "h", "--json"],
        &[
            "isr",
            "group",
            "describe",
            "g",
            "--bootstrap",
            "h",
            "--json",
        ],
        &["isr", "group", "delete", "g", "--bootstrap", "h"],
        &["isr", "consume", "t", "--bootstrap", "h", "--until-end"],
    ] {
        assert!(Cli::try_parse_from(command).is_ok(), "{command:?}");
    }
}

/// Runs a topic command: its output, or its error as one line.
async fn topic_command(command: TopicCommand) -> Result<String, String> {
    let mut out = Vec::new();
    topic::run_with(TopicArgs { command }, &mut out)
        .await
        .map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Runs a group command: its output, or its error as one line.
async fn group_command(command: GroupCommand) -> Result<String, String> {
    let mut out = Vec::new();
    group::run_with(GroupArgs { command }, &mut out)
        .await
        .map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

#[tokio::test]
async fn topics_are_described_altered_grown_and_deleted() {
    use isr_kafka::client::topic::{AddPartitionsArgs, AlterArgs, DeleteArgs, NamedArgs};
    let server = TestServer::start().await;
    let b = server.bootstrap();
    create(&server, "orders", 1, 1).await.expect("create");
    let described = |json| {
        topic_command(TopicCommand::Describe(NamedArgs {
            bootstrap: b.clone(),
            name: "orders".into(),
            json,
        }))
    };
    let text = described(false).await.expect("describe");
    assert!(
        text.starts_with("orders partitions=1 replication-factor=1\n"),
        "{text}"
    );
    // The topic's id, as Kafka's tools write it (22 characters of URL-safe base64).
    let id = text
        .lines()
        .nth(1)
        .and_then(|l| l.strip_prefix("topic-id="))
        .unwrap_or_default()
        .to_owned();
    assert_eq!(id.len(), 22, "{text}");
    assert_ne!(id, "AAAAAAAAAAAAAAAAAAAAAA", "a new topic has an id");
    assert!(
        text.contains("  max.message.bytes=1048588 (default)\n"),
        "{text}"
    );
    assert!(text.contains("  min.insync.replicas=1 (topic)\n"), "{text}");
    let alter = |set: Vec<(String, String)>, delete: Vec<String>| {
        topic_command(TopicCommand::Alter(AlterArgs {
            bootstrap: b.clone(),
            name: "orders".into(),
            set,
            delete,
        }))
    };
    let set = vec![("retention.ms".to_owned(), "5000".to_owned())];
    assert_eq!(
        alter(set, vec!["min.insync.replicas".into()])
            .await
            .as_deref(),
        Ok("altered topic orders: retention.ms=5000, min.insync.replicas reset\n")
    );
    let json: serde_json::Value =
        serde_json::from_str(&described(true).await.expect("json")).expect("valid JSON");
    let retention = json["configs"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == "retention.ms"))
        .expect("retention.ms");
    assert_eq!(
        (&retention["value"], &retention["source"]),
        (&"5000".into(), &"topic".into())
    );
    assert_eq!(json["partitions"][0]["leader"], 1);
    assert_eq!(json["topic_id"], id.as_str());
    let unknown = alter(vec![("retention.hours".into(), "1".into())], vec![])
        .await
        .expect_err("unknown config");
    assert!(
        unknown.starts_with("INVALID_CONFIG: unknown topic config retention.hours; known: "),
        "{unknown}"
    );
    let grown = topic_command(TopicCommand::AddPartitions(AddPartitionsArgs {
        bootstrap: b.clone(),
        name: "orders".into(),
        partitions: 3,
        replica_assignment: None,
    }))
    .await;
    assert_eq!(
        grown.as_deref(),
        Ok("topic orders now has 3 partitions (was 1)\n")
    );
    let delete = |name: &str| {
        topic_command(TopicCommand::Delete(DeleteArgs {
            bootstrap: b.clone(),
            name: name.into(),
        }))
    };
    assert_eq!(
        delete("orders").await.as_deref(),
        Ok("deleted topic orders\n")
    );
    let gone = delete("orders").await.expect_err("deleted already");
    assert_eq!(gone, "no topic orders; topics: none");
    let listed = topic_command(TopicCommand::List(ListArgs {
        bootstrap: b.clone(),
        json: true,
    }))
    .await;
    assert_eq!(listed.as_deref(), Ok("[]\n"));
}

#[tokio::test]
async fn groups_are_listed_described_and_deleted() {
    use isr_kafka::client::group::{DeleteArgs, ListArgs, NamedArgs};
    let server = TestServer::start().await;
    let b = server.bootstrap();
    create(&server, "events", 1, 1).await.expect("create");
    produce(produce_args(&server, "events"), "a\nb\nc\n")
        .await
        .expect("produce");
    // A consumer group reads two of three records and commits.
    let read = ConsumeArgs {
        group: Some("readers".into()),
        max: Some(2),
        ..consume_args(&server, "events")
    };
    consume(read).await.expect("consume");
    let listed = group_command(GroupCommand::List(ListArgs {
        bootstrap: b.clone(),
        json: false,
    }))
    .await;
    assert_eq!(
        listed.as_deref(),
        Ok("readers state=Empty protocol-type=-\n")
    );
    let describe = |group: &str, json| {
        group_command(GroupCommand::Describe(NamedArgs {
            bootstrap: b.clone(),
            name: group.into(),
            json,
        }))
    };
    assert_eq!(
        describe("readers", false).await.as_deref(),
        Ok("group readers state=Empty protocol-type=- protocol=- members=0\n  events 0 offset=2 end=3 lag=1\n")
    );
    let json: serde_json::Value =
        serde_json::from_str(&describe("readers", true).await.expect("json")).expect("JSON");
    assert_eq!(json["offsets"][0]["lag"], 1);
    assert_eq!(
        describe("writers", false).await.expect_err("unknown"),
        "no group writers; groups: readers"
    );
    let delete = |group: &str| {
        group_command(GroupCommand::Delete(DeleteArgs {
            bootstrap: b.clone(),
            name: group.into(),
        }))
    };
    assert_eq!(
        delete("readers").await.as_deref(),
        Ok("deleted group readers\n")
    );
    assert_eq!(
        delete("readers").await.expect_err("gone"),
        "no group readers; groups: none"
    );
}

#[tokio::test]
async fn consume_until_end_stops_at_the_high_watermark() {
    let server = TestServer::start().await;
    create(&server, "finite", 1, 1).await.expect("create");
    let to_end = ConsumeArgs {
        until_end: true,
        ..consume_args(&server, "finite")
    };
    assert_eq!(
        consume(to_end.clone()).await.as_deref(),
        Ok(""),
        "empty: stops at once"
    );
    produce(produce_args(&server, "finite"), "a\nb\nc\n")
        .await
        .expect("produce");
    assert_eq!(
        consume(to_end.clone()).await.as_deref(),
        Ok("0 a\n1 b\n2 c\n")
    );
    let from_one = ConsumeArgs {
        offset: Some(1),
        from_beginning: false,
        ..to_end
    };
    assert_eq!(consume(from_one).await.as_deref(), Ok("1 b\n2 c\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_consumer_sees_a_new_record_promptly() {
    let server = TestServer::start().await;
    server.backend.add_topic("live", 1);
    let waiting = ConsumeArgs {
        from_beginning: false,
        max: Some(1),
        ..consume_args(&server, "live")
    };
    let reader = tokio::spawn(async move {
        let mut out = Vec::new();
        let result = consume::run_with(waiting, &mut out)
            .await
            .map_err(|e| e.to_string());
        result.map(|_| String::from_utf8_lossy(&out).into_owned())
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let started = std::time::Instant::now();
    produce(produce_args(&server, "live"), "fresh\n")
        .await
        .expect("produce");
    let read = tokio::time::timeout(std::time::Duration::from_secs(5), reader)
        .await
        .expect("consumer returned")
        .expect("consumer task");
    assert_eq!(read.as_deref(), Ok("0 fresh\n"));
    // The long poll answers within its 5 ms polling step plus scheduling, not at max wait.
    assert!(
        started.elapsed() < std::time::Duration::from_millis(400),
        "{:?}",
        started.elapsed()
    );
}
