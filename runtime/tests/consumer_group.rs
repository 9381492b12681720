//! Consumer groups on a real cluster: confluent-kafka consumers subscribe to a topic of a
//! three-broker cluster; the group's coordinator is one of the brokers (FindCoordinator sends
//! every member to it), the members share the partitions, the survivor takes over when one
//! leaves, and a new member resumes from the group's commits. The script is
//! runtime/kafka/tests/clients/confluent_group.py; without confluent-kafka the test says
//! "SKIPPED" and passes (CI installs it, and under CI=true a missing client fails the test).

mod common;

use common::clients::{bootstrap, confluent_kafka_present, run_script, script, Client};
use common::{isr, isr_topic_create, kafka, TestCluster};
use isr::group::{Change, Input, Output};
use isr::trace::Event;
use isr_kafka::offsets_topic::{partition_for, DEFAULT_PARTITIONS, OFFSETS_TOPIC};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn subscribing_consumers_share_take_over_and_resume_on_a_cluster() {
    if !confluent_kafka_present() {
        return;
    }
    let cluster = TestCluster::start(3);
    let start = Instant::now();
    let out = run_script(
        "confluent_group.py",
        &[&bootstrap(&cluster), "members"],
        Duration::from_secs(180),
    );
    eprintln!("{out}in {:?}", start.elapsed());
}

/// The broker coordinating a group (the leader of its `__consumer_offsets` partition) is
/// SIGKILLed: its member finds the next coordinator, the new leader of that partition, which
/// loaded the group's membership from the records it replicated, and carries on in its
/// generation: no rebalance, its next commit accepted at once, and it goes on reading from its
/// commits (nothing lost, nothing committed read twice).
#[test]
fn a_group_member_rides_out_the_loss_of_its_coordinator() {
    if !confluent_kafka_present() {
        return;
    }
    const GROUP: &str = "survivors";
    let mut cluster = TestCluster::start(3);
    cluster.create_topic("events", 3, 2);

    let mut client = Client::spawn(
        Command::new("python3")
            .arg(script("confluent_coordinator_failover.py"))
            .args([&bootstrap(&cluster), "events", GROUP])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let err = Client::drain(client.0.stderr.take().expect("stderr"));
    let mut lines = BufReader::new(client.0.stdout.take().expect("stdout")).lines();
    let ready = lines.next().and_then(Result::ok).unwrap_or_default();
    if ready != "ready" {
        drop(client);
        panic!(
            "the member never got ready ({ready:?})\nstderr:\n{}",
            err.join().unwrap_or_default()
        );
    }
    // The member committed: the offsets topic exists, and the group's partition has a leader.
    let offsets = u64::from(partition_for(GROUP, DEFAULT_PARTITIONS));
    let coordinator = TestCluster::partition(&cluster.status(), OFFSETS_TOPIC, offsets)["leader"]
        .as_u64()
        .expect("the group's offsets partition has a leader") as u32;
    cluster.kill(coordinator);
    cluster.wait_for(Duration::from_secs(10), "leaders without it", |s| {
        let moved = |topic, p| {
            let leader = TestCluster::partition(s, topic, p)["leader"].as_u64();
            leader.is_some_and(|l| l != u64::from(coordinator))
        };
        (0..3).all(|p| moved("events", p)) && moved(OFFSETS_TOPIC, offsets)
    });
    let mut stdin = client.0.stdin.take().expect("stdin");
    writeln!(stdin, "go").expect("tell the script");
    drop(stdin);
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = client.wait(
        Duration::from_secs(120),
        "confluent_coordinator_failover.py",
    );
    assert!(
        status.success(),
        "the member did not ride out the coordinator's loss ({status})\nstdout: {rest:?}\n\
         stderr:\n{}",
        err.join().unwrap_or_default()
    );
    // The run replays on the core, the coordinators' group changes with it: the next
    // coordinator loaded the group in the member's generation and took its commits.
    let traces = cluster.stop_and_read_traces();
    assert!(
        traces.iter().any(|t| loaded_then_committed(t, GROUP)),
        "no trace shows {GROUP} loaded and then committed to"
    );
    if let Err(d) = isr::trace::replay(&traces) {
        panic!("the run is not a behaviour of the protocol: {}", d.why);
    }
}

/// Whether a coordinator's trace loads `group` with a generation, and accepts a commit to it
/// afterwards.
fn loaded_then_committed(trace: &isr::trace::Trace, group: &str) -> bool {
    let changes = trace.events.iter().filter_map(|e| match e {
        Event::Group {
            group: g, change, ..
        } if g == group => Some(change),
        _ => None,
    });
    let mut loaded = false;
    for change in changes {
        match change {
            Change::Loaded { stored, .. } => loaded = stored.generation > 0,
            Change::Stepped {
                input: Input::Commit(_),
                output: Output::Done(Ok(())),
            } if loaded => return true,
            _ => {}
        }
    }
    false
}

/// Offsets live in `__consumer_offsets`, not with the controller: a group's commits are records
/// in its partition, acknowledged once committed, so SIGKILL of the broker coordinating the
/// group loses none of them. The next leader of that partition coordinates the group and
/// answers from the records it replicated: the group resumes where it committed.
#[test]
fn acknowledged_commits_survive_the_loss_of_the_coordinator() {
    const GROUP: &str = "keepers";
    let mut cluster = TestCluster::start(3);
    let b1 = cluster.address(1).expect("broker 1");
    let (ok, out) = isr_topic_create(&b1, "kept", 1, &["--min-insync-replicas", "2"]);
    assert!(ok, "{out}");
    let consume = |bootstrap: &str| {
        let args = [
            "consume",
            "kept",
            "--bootstrap",
            bootstrap,
            "--group",
            GROUP,
        ];
        let args = [&args[..], &["--from-beginning", "--until-end"]].concat();
        let (ok, out) = isr(&args, "");
        assert!(ok, "{out}");
        out
    };
    let (ok, out) = isr(&["produce", "kept", "--bootstrap", &b1], "a\nb\nc\n");
    assert!(ok, "{out}");
    assert_eq!(consume(&b1), "0 a\n1 b\n2 c\n");

    let offsets = u64::from(partition_for(GROUP, DEFAULT_PARTITIONS));
    let status = cluster.status();
    let row = TestCluster::partition(&status, OFFSETS_TOPIC, offsets);
    let coordinator = row["leader"]
        .as_u64()
        .expect("the offsets partition is led") as u32;
    assert_eq!(
        row["assigned"].as_array().map(Vec::len),
        Some(3),
        "replicated on every broker: {row}"
    );
    cluster.kill(coordinator);
    cluster.wait_for(Duration::from_secs(10), "a new coordinator", |s| {
        let leader = TestCluster::partition(s, OFFSETS_TOPIC, offsets)["leader"].as_u64();
        leader.is_some_and(|l| l != u64::from(coordinator))
    });
    let survivor = (1..=3).find(|&b| b != coordinator).expect("a survivor");
    let bootstrap = cluster.address(survivor).expect("a live broker");
    let (ok, out) = isr(&["produce", "kept", "--bootstrap", &bootstrap], "d\n");
    assert!(ok, "{out}");
    assert_eq!(
        consume(&bootstrap),
        "3 d\n",
        "resumed from the commit made before the coordinator died"
    );
}

/// One OffsetCommit naming several partitions is one record batch in the group's offsets
/// partition: every partition that exists gets its offset, and one that does not is refused
/// alone (UNKNOWN_TOPIC_OR_PARTITION), as Kafka answers.
#[test]
fn one_offset_commit_stores_every_partition_it_names_and_refuses_a_missing_one_alone() {
    const GROUP: &str = "batched";
    let cluster = TestCluster::start(3);
    let b1 = cluster.address(1).expect("broker 1");
    assert_eq!(kafka::create_topic(&b1, "many", 3, 3, 2), 0);
    let asked = [(0, 5), (1, 7), (9, 1), (2, 3)];
    let deadline = Instant::now() + Duration::from_secs(30);
    // The offsets topic is created by the first group that needs it, and its partitions need
    // leaders: COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR or LOAD_IN_PROGRESS meanwhile.
    let (coordinator, answer) = loop {
        let found = kafka::coordinator(&b1, GROUP);
        if let Ok(coordinator) = &found {
            let answer = kafka::commit(coordinator, GROUP, "many", &asked);
            if answer
                .iter()
                .all(|&(_, code)| !matches!(code, -1 | 14..=16))
            {
                break (coordinator.clone(), answer);
            }
        }
        assert!(
            Instant::now() < deadline,
            "no coordinator took the commit: {found:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(answer, [(0, 0), (1, 0), (9, 3), (2, 0)]);
    assert_eq!(
        kafka::committed(&coordinator, GROUP, "many", &[0, 1, 2, 9]),
        [(0, 5), (1, 7), (2, 3), (9, -1)]
    );
}
