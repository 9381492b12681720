//! kafka-python and confluent-kafka producing to and consuming from the isr Kafka server.

mod common;

use common::TestServer;
use std::path::PathBuf;
use std::process::Stdio;
use tokio::process::Command;

/// Whether `python3` can import `module` (see `client_present`).
fn importable(module: &str) -> bool {
    common::client_present(
        "python3",
        &["-c", &format!("import {module}")],
        &format!("python3 cannot import {module}"),
    )
}

async fn run_script(script: &str, topic: &str) {
    let server = TestServer::start().await;
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests", "clients", script]
        .iter()
        .collect();
    let child = Command::new("python3")
        .arg(&path)
        .args([&server.bootstrap(), topic])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn python3");
    let out = tokio::time::timeout(std::time::Duration::from_secs(90), child.wait_with_output())
        .await
        .expect("script finished within 90 s")
        .expect("script output");
    assert!(
        out.status.success(),
        "{script} failed\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_roundtrip() {
    if importable("kafka") {
        run_script("kafka_python_roundtrip.py", "kp").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confluent_kafka_roundtrip() {
    if importable("confluent_kafka") {
        run_script("confluent_roundtrip.py", "ck").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confluent_kafka_consumer_group() {
    if importable("confluent_kafka") {
        run_script("confluent_group.py", "grouped").await;
    }
}

/// A static member (group.instance.id) restarts and takes its partitions back without a
/// rebalance of the others (KIP-345).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confluent_kafka_static_member_restarts_without_a_rebalance() {
    if importable("confluent_kafka") {
        run_script("confluent_static_member.py", "statics").await;
    }
}

/// Automatic topic creation, offsets by time, commit metadata, whole-group offsets, the admin
/// APIs, a size limit that takes effect and transactions refused at once, as confluent-kafka's
/// Producer, Consumer and AdminClient use them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confluent_kafka_admin_and_compatibility() {
    if importable("confluent_kafka") {
        run_script("confluent_admin.py", "compat").await;
    }
}

/// The same as kafka-python's KafkaProducer, KafkaConsumer and KafkaAdminClient use them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_admin_and_compatibility() {
    if importable("kafka") {
        run_script("kafka_python_admin.py", "compat").await;
    }
}
