//! kcat (librdkafka) producing to and consuming from the isr Kafka server.

mod common;

use common::TestServer;
use isr_kafka::Backend;
use std::process::Stdio;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

/// kcat is installed by tests/clients/install.sh (see `client_present`).
fn kcat_present() -> bool {
    common::client_present("kcat", &["-V"], "kcat is not installed")
}

/// The error lines kcat printed.
fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

async fn kcat(args: &[&str], input: &str) -> std::process::Output {
    let mut child = Command::new("kcat")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn kcat");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(input.as_bytes())
        .await
        .expect("write stdin");
    drop(stdin);
    tokio::time::timeout(std::time::Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("kcat finished within 30 s")
        .expect("kcat output")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_produces_and_consumes() {
    if !kcat_present() {
        return;
    }
    let server = TestServer::start().await;
    server.backend.add_topic("lines", 1);
    let b = server.bootstrap();
    for acks in ["-1", "1"] {
        let out = kcat(
            &[
                "-b",
                &b,
                "-P",
                "-t",
                "lines",
                "-p",
                "0",
                "-X",
                &format!("acks={acks}"),
            ],
            "one\ntwo\nthree\n",
        )
        .await;
        assert!(
            out.status.success(),
            "kcat -P: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(server.backend.end("lines", 0), 6);
    let out = kcat(
        &[
            "-b",
            &b,
            "-C",
            "-t",
            "lines",
            "-p",
            "0",
            "-o",
            "beginning",
            "-e",
            "-f",
            "%o %s\n",
        ],
        "",
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "kcat -C: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout,
        "0 one\n1 two\n2 three\n3 one\n4 two\n5 three\n",
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_lists_metadata() {
    if !kcat_present() {
        return;
    }
    let server = TestServer::start().await;
    server.backend.add_topic("alpha", 3);
    let out = kcat(&["-b", &server.bootstrap(), "-L"], "").await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "kcat -L: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("topic \"alpha\" with 3 partitions"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_reports_a_refused_write() {
    if !kcat_present() {
        return;
    }
    let server = TestServer::start().await;
    server.backend.add_topic("strict", 1);
    server.backend.fail_next_produces(std::iter::repeat_n(
        isr_kafka::BackendError::NotEnoughReplicas,
        50,
    ));
    let out = kcat(
        &[
            "-b",
            &server.bootstrap(),
            "-P",
            "-t",
            "strict",
            "-p",
            "0",
            "-X",
            "acks=all",
            "-X",
            "message.timeout.ms=5000",
            "-X",
            "retries=0",
        ],
        "refused\n",
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Not enough in-sync replicas"), "{stderr}");
    assert_eq!(server.backend.end("strict", 0), 0);
}

/// `kcat -G`: a balanced consumer in a group reads a topic, commits, and a second run of the
/// same group resumes after what the first one read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_consumes_as_a_group_member_and_resumes_from_its_commits() {
    if !kcat_present() {
        return;
    }
    let server = TestServer::start().await;
    server.backend.add_topic("grouped", 2);
    let b = server.bootstrap();
    let produce = |p: &'static str, lines: &'static str| {
        let b = b.clone();
        async move {
            let out = kcat(&["-b", &b, "-P", "-t", "grouped", "-p", p], lines).await;
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    };
    produce("0", "a\nb\n").await;
    produce("1", "c\n").await;
    let consume = |count: &'static str| {
        let b = b.clone();
        async move {
            let args = [
                "-b",
                &b,
                "-G",
                "readers",
                "grouped",
                "-c",
                count,
                "-f",
                "%p %o %s\n",
                "-X",
                "auto.offset.reset=earliest",
            ];
            let out = kcat(&args, "").await;
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(str::to_owned)
                .collect();
            lines.sort();
            lines
        }
    };
    assert_eq!(consume("3").await, ["0 0 a", "0 1 b", "1 0 c"]);
    produce("1", "d\n").await;
    // A restarted member of the group starts at the commits, so it sees only the new record.
    assert_eq!(consume("1").await, ["1 1 d"]);
}

/// A running `kcat -G` member whose stdout lines are collected as they come.
struct Member {
    child: tokio::process::Child,
    lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Member {
    fn start(bootstrap: &str, group: &str, topic: &str) -> Member {
        use tokio::io::AsyncBufReadExt;
        let mut child = Command::new("kcat")
            .args([
                "-b",
                bootstrap,
                "-u",
                "-G",
                group,
                topic,
                "-f",
                "%p %o %s\n",
                "-X",
                "auto.offset.reset=earliest",
                "-X",
                "session.timeout.ms=6000",
                "-X",
                "heartbeat.interval.ms=200",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn kcat -G");
        let stdout = child.stdout.take().expect("stdout");
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = lines.clone();
        tokio::spawn(async move {
            let mut reader = tokio::io::BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                sink.lock().expect("lines").push(line);
            }
        });
        Member { child, lines }
    }

    fn count(&self) -> usize {
        self.lines.lock().expect("lines").len()
    }

    /// SIGTERM: kcat closes its consumer, which commits and leaves the group.
    async fn stop(mut self) -> Vec<String> {
        let pid = self.child.id().expect("running");
        let killed = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .await
            .expect("kill");
        assert!(killed.success());
        tokio::time::timeout(std::time::Duration::from_secs(20), self.child.wait())
            .await
            .expect("kcat stopped within 20 s")
            .expect("kcat exit");
        // Give the reader task the last lines.
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let lines = self.lines.lock().expect("lines").clone();
        lines
    }
}

/// Waits until `done` holds, panicking with `what` after 30 s.
async fn until(what: &str, done: impl Fn() -> bool) {
    let start = std::time::Instant::now();
    while !done() {
        assert!(
            start.elapsed().as_secs() < 30,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Two `kcat -G` members share a topic while records keep coming: a member joining and a
/// member leaving each rebalance the group, and every record comes out exactly once. The
/// member whose partitions are revoked commits before it rejoins, while the group prepares
/// the rebalance; Kafka accepts those commits, and the next owner starts after them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_group_rebalances_deliver_every_record_once() {
    if !kcat_present() {
        return;
    }
    let server = TestServer::start().await;
    server.backend.add_topic("shared", 3);
    let b = server.bootstrap();
    let produce = |from: usize| {
        let b = b.clone();
        async move {
            let lines: String = (from..from + 50).map(|i| format!("r{i}\n")).collect();
            let out = kcat(&["-b", &b, "-P", "-t", "shared"], &lines).await;
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    };
    let members = |n: usize| {
        let groups = server.backend.coordinator().describe("readers");
        groups.is_some_and(|g| g.state == "Stable" && g.members.len() == n)
    };
    produce(0).await;
    let a = Member::start(&b, "readers", "shared");
    until("a to read the first 50", || a.count() >= 50).await;
    let second = Member::start(&b, "readers", "shared");
    until("both members in a stable group", || members(2)).await;
    produce(50).await;
    until("the next 50", || a.count() + second.count() >= 100).await;
    let from_second = second.stop().await;
    until("a alone in a stable group", || members(1)).await;
    produce(100).await;
    until("all 150", || a.count() + from_second.len() >= 150).await;
    // Anything read twice would show up now.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let mut all = a.stop().await;
    all.extend(from_second);
    let mut values: Vec<&str> = all.iter().filter_map(|l| l.rsplit(' ').next()).collect();
    values.sort_unstable();
    let total = values.len();
    values.dedup();
    assert_eq!(
        (total, values.len()),
        (150, 150),
        "each record exactly once; lines: {all:?}"
    );
}

/// A record over the topic's size limit is refused with MESSAGE_TOO_LARGE, which librdkafka
/// does not retry: kcat reports it long before its message timeout (a retriable
/// CORRUPT_MESSAGE had it resend the batch once a second until then).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_is_told_at_once_that_a_record_is_too_large() {
    if !kcat_present() {
        return;
    }
    let server = TestServer::start().await;
    server.backend.add_topic("limited", 1);
    let record = format!("{}\n", "x".repeat(2_000_000));
    let out = kcat(
        &[
            "-b",
            &server.bootstrap(),
            "-P",
            "-t",
            "limited",
            "-p",
            "0",
            // librdkafka's own check would refuse it first: let the broker decide.
            "-X",
            "message.max.bytes=10000000",
            "-X",
            "message.timeout.ms=120000",
        ],
        &record,
    )
    .await;
    assert!(
        stderr(&out).contains("Broker: Message size too large"),
        "{}",
        stderr(&out)
    );
    assert_eq!(server.backend.end("limited", 0), 0);
}

/// An illegal topic name is refused with INVALID_TOPIC_EXCEPTION, at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_is_told_at_once_that_a_topic_name_is_illegal() {
    if !kcat_present() {
        return;
    }
    let server = TestServer::start().await;
    let args = [
        "-b",
        &server.bootstrap(),
        "-P",
        "-t",
        "no/slashes",
        "-X",
        "message.timeout.ms=120000",
    ];
    let out = kcat(&args, "x\n").await;
    assert!(
        stderr(&out).contains("Broker: Invalid topic"),
        "{}",
        stderr(&out)
    );
}

/// A producer's unknown topic is created (Kafka's auto.create.topics.enable, on by default),
/// unless the broker turns it off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_creates_topics_unless_the_broker_says_not_to() {
    if !kcat_present() {
        return;
    }
    let server = TestServer::start().await;
    let produce = |b: String| async move {
        let args = [
            "-b",
            &b,
            "-P",
            "-t",
            "fresh",
            "-X",
            "message.timeout.ms=5000",
        ];
        kcat(&args, "hello\n").await
    };
    let out = produce(server.bootstrap()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        server.backend.end("fresh", 0),
        1,
        "created with one partition"
    );

    let settings = isr_kafka::BrokerSettings {
        auto_create_topics: false,
        ..Default::default()
    };
    let strict = TestServer::with_settings(settings).await;
    // librdkafka waits for the topic to appear, until its message timeout.
    let out = produce(strict.bootstrap()).await;
    assert!(stderr(&out).contains("Delivery failed"), "{}", stderr(&out));
    let listed = kcat(&["-b", &strict.bootstrap(), "-L"], "").await;
    assert!(
        !String::from_utf8_lossy(&listed.stdout).contains("fresh"),
        "no topic was created"
    );
}
