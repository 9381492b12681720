//! kcat (librdkafka) producing to and consuming from the isr Kafka server.

mod common;

use common::TestServer;
use std::process::Stdio;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

/// kcat is installed by tests/clients/install.sh; without it these tests say so and pass.
fn kcat_present() -> bool {
    let found = std::process::Command::new("kcat")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !found {
        eprintln!("SKIPPED: kcat is not installed (run runtime/kafka/tests/clients/install.sh)");
    }
    found
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
