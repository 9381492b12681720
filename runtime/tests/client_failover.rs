//! The failover scenario of `failover.rs`, seen by real Kafka clients on a real cluster: three
//! `isr` brokers, a topic with RF 3 and min ISR 2, acks=all writes from kcat and from
//! confluent-kafka (both librdkafka, with the idempotent producer) while the leader of partition
//! 0 is SIGKILLed and later restarted. Each client must ride out the election without a failed
//! delivery, every record it was told is acknowledged must be read back at exactly the offset it
//! was acknowledged at and only there (the broker recognises an idempotent producer's retry of a
//! batch it already holds, so a retry through the election is not stored twice), and the
//! restarted broker must rejoin the ISR.
//!
//! kcat and confluent-kafka are installed by runtime/kafka/tests/clients/install.sh (CI runs
//! it); without them these tests say "SKIPPED" and pass (and fail under CI=true).

mod common;

use common::clients::{bootstrap, client_present, confluent_kafka_present, script, Client};
use common::TestCluster;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// The replica row of the current leader of a partition, once that leader reports itself as
/// leader.
fn leader_replica<'a>(status: &'a Value, topic: &str, partition: u64) -> Option<&'a Value> {
    let row = TestCluster::partition(status, topic, partition);
    let leader = row["leader"].as_u64()?;
    row["replicas"]
        .as_array()?
        .iter()
        .find(|r| r["broker"] == leader && r["role"] == "leader")
}

fn high_watermark(status: &Value, topic: &str, partition: u64) -> u64 {
    leader_replica(status, topic, partition)
        .map_or(0, |r| r["high_watermark"].as_u64().unwrap_or_default())
}

fn in_isr(status: &Value, topic: &str, partition: u64, broker: u32) -> bool {
    TestCluster::partition(status, topic, partition)["isr"]
        .as_array()
        .is_some_and(|isr| isr.contains(&Value::from(broker)))
}

/// Starts three brokers and creates `topic` (RF 3, min ISR 2), waiting for every leader.
fn cluster_with_topic(topic: &str, partitions: u64) -> TestCluster {
    let cluster = TestCluster::start(3);
    cluster.create_topic(topic, partitions, 2);
    cluster.wait_for(Duration::from_secs(20), "leaders", |s| {
        (0..partitions).all(|p| leader_replica(s, topic, p).is_some())
    });
    cluster
}

/// SIGKILLs the leader of `topic`/0 and waits for another broker to lead it. Returns the victim
/// and the new leader's log end offset as first seen in its new role: every record at or past
/// that offset was written by the new leader, after the kill. Then waits until the victim is out
/// of the ISR of every partition, so that its return to them later means it rejoined.
fn kill_leader_of_partition_0(
    cluster: &mut TestCluster,
    topic: &str,
    partitions: u64,
) -> (u32, u64) {
    let victim = cluster.leader(topic, 0).expect("leader of partition 0").0;
    let killed_at = Instant::now();
    cluster.kill(victim);
    let status = cluster.wait_for(Duration::from_secs(30), "a new leader", |s| {
        leader_replica(s, topic, 0).is_some_and(|r| r["broker"] != victim)
    });
    let replica = leader_replica(&status, topic, 0).expect("new leader");
    eprintln!(
        "killed broker {victim}; broker {} leads {topic}/0 after {:?}",
        replica["broker"],
        killed_at.elapsed()
    );
    let new_leader_start = replica["log_end_offset"].as_u64().expect("LEO");
    cluster.wait_for(
        Duration::from_secs(30),
        "the killed broker out of every ISR",
        |s| (0..partitions).all(|p| !in_isr(s, topic, p, victim)),
    );
    eprintln!(
        "broker {victim} out of every ISR after {:?}",
        killed_at.elapsed()
    );
    (victim, new_leader_start)
}

/// Restarts `victim` and waits until it is back in the ISR of every partition.
fn restart_into_every_isr(cluster: &mut TestCluster, victim: u32, topic: &str, partitions: u64) {
    let restarted_at = Instant::now();
    cluster.restart(victim);
    cluster.wait_for(
        Duration::from_secs(60),
        "the restarted broker in every ISR",
        |s| (0..partitions).all(|p| in_isr(s, topic, p, victim)),
    );
    eprintln!(
        "broker {victim} back in every ISR after {:?}",
        restarted_at.elapsed()
    );
}

/// kcat 1.7.1 reads its input in blocks of 1024 bytes and produces a line only once the block
/// holding it is complete (or at end of input): lines of 7 bytes fed every 10 ms went out 189 at
/// a time. Lines of exactly 1024 bytes, newline included, are produced as soon as they are
/// written.
const KCAT_LINE: usize = 1024;

fn kcat_value(i: usize) -> String {
    let mut value = format!("k-{i} ");
    value.push_str(&".".repeat(KCAT_LINE - 1 - value.len()));
    value
}

/// One kcat delivery report at verbosity 3 (`-v -v`):
/// `% Message delivered to partition P (offset O) on broker B`, as (partition, offset, broker).
fn kcat_delivery(line: &str) -> Option<(i32, i64, u32)> {
    let rest = line.strip_prefix("% Message delivered to partition ")?;
    let (partition, rest) = rest.split_once(" (offset ")?;
    let (offset, broker) = rest.split_once(") on broker ")?;
    Some((
        partition.parse().ok()?,
        offset.parse().ok()?,
        broker.trim().parse().ok()?,
    ))
}

/// kcat -P (librdkafka, acks=all, idempotent) on partition 0 through a leader kill and restart.
///
/// Acknowledged offsets come from kcat's own delivery reports: at verbosity 3 it prints
/// `Message delivered to partition P (offset O) on broker B` for every message (a failure prints
/// `Delivery failed for message: ...` and makes kcat exit 1). The reports carry no value, but
/// with the idempotent producer librdkafka reports the messages of one partition in the order
/// they were produced, so the i-th report is the i-th line fed in. Records acknowledged before
/// the kill are those the victim acknowledged; records acknowledged after it are those at or
/// past the new leader's log end offset when it took over.
#[test]
fn kcat_failover() {
    if !client_present("kcat", &["-V"], "kcat is not installed") {
        return;
    }
    const TOPIC: &str = "lines";
    const PARTITIONS: u64 = 1;
    let started = Instant::now();
    let mut cluster = cluster_with_topic(TOPIC, PARTITIONS);

    let mut producer = Client::spawn(
        Command::new("kcat")
            .args(["-P", "-b", &bootstrap(&cluster), "-t", TOPIC, "-p", "0"])
            .args(["-X", "acks=all", "-X", "enable.idempotence=true"])
            .args(["-X", "message.timeout.ms=30000", "-v", "-v"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    );
    let reports = Client::drain(producer.0.stderr.take().expect("stderr"));
    let stop = Arc::new(AtomicBool::new(false));
    let feeder = {
        let mut stdin = producer.0.stdin.take().expect("stdin");
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut sent = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let value = kcat_value(sent.len());
                if stdin.write_all(format!("{value}\n").as_bytes()).is_err() {
                    break; // kcat is gone: its exit status tells why
                }
                sent.push(value);
                std::thread::sleep(Duration::from_millis(5));
            }
            sent // dropping stdin ends kcat's input
        })
    };

    // Kill the leader once it has committed a good number of records, wait for the election,
    // let the new leader commit some, restart the victim and let it rejoin, and write a little
    // more.
    let status = cluster.wait_for(Duration::from_secs(30), "200 records committed", |s| {
        high_watermark(s, TOPIC, 0) >= 200
    });
    eprintln!(
        "high watermark {} before the kill",
        high_watermark(&status, TOPIC, 0)
    );
    let (victim, new_leader_start) = kill_leader_of_partition_0(&mut cluster, TOPIC, PARTITIONS);
    cluster.wait_for(
        Duration::from_secs(30),
        "200 records committed by the new leader",
        |s| high_watermark(s, TOPIC, 0) >= new_leader_start + 200,
    );
    restart_into_every_isr(&mut cluster, victim, TOPIC, PARTITIONS);
    let status = cluster.status();
    let rejoined_at = high_watermark(&status, TOPIC, 0);
    cluster.wait_for(
        Duration::from_secs(30),
        "100 more records after the rejoin",
        |s| high_watermark(s, TOPIC, 0) >= rejoined_at + 100,
    );
    stop.store(true, Ordering::Relaxed);
    let sent = feeder.join().expect("feeder");
    let exit = producer.wait(Duration::from_secs(90), "kcat -P");
    let reports = reports.join().expect("kcat -P stderr");

    let failures: Vec<&str> = reports
        .lines()
        .filter(|l| l.contains("Delivery failed"))
        .collect();
    assert!(
        exit.success() && failures.is_empty(),
        "kcat -P exited with {exit}; {} failed deliveries: {failures:?}\nstderr:\n{reports}",
        failures.len()
    );
    let delivered: Vec<(i32, i64, u32)> = reports.lines().filter_map(kcat_delivery).collect();
    assert_eq!(
        delivered.len(),
        sent.len(),
        "one delivery report per line fed to kcat"
    );
    assert!(
        delivered.iter().all(|&(p, _, _)| p == 0),
        "a report for another partition"
    );
    assert!(
        delivered.windows(2).all(|w| w[0].1 < w[1].1),
        "delivery reports out of offset order: {delivered:?}"
    );
    let before = delivered.iter().filter(|d| d.2 == victim).count();
    let after = delivered
        .iter()
        .filter(|d| d.1 >= new_leader_start as i64)
        .count();
    eprintln!(
        "kcat: {} lines acknowledged, {before} by broker {victim} before the kill, {after} \
         written by the new leader after it",
        sent.len()
    );
    assert!(
        before >= 50,
        "only {before} records acknowledged before the kill"
    );
    assert!(
        after >= 50,
        "only {after} records acknowledged after the kill"
    );

    let (exit, out, err) = Client::run(
        Command::new("kcat")
            .args(["-C", "-b", &bootstrap(&cluster), "-t", TOPIC, "-p", "0"])
            .args(["-o", "beginning", "-e", "-f", "%o %s\n"]),
        Duration::from_secs(60),
        "kcat -C",
    );
    assert!(exit.success(), "kcat -C exited with {exit}\nstderr:\n{err}");
    let log: BTreeMap<i64, &str> = out
        .lines()
        .filter_map(|l| {
            let (offset, value) = l.split_once(' ')?;
            Some((offset.parse().ok()?, value))
        })
        .collect();
    for (value, &(_, offset, broker)) in sent.iter().zip(&delivered) {
        assert_eq!(
            log.get(&offset).copied(),
            Some(value.as_str()),
            "the record acknowledged at offset {offset} by broker {broker} is not there \
             ({} records read back)",
            log.len()
        );
    }
    let mut copies: HashMap<&str, usize> = HashMap::new();
    for value in log.values() {
        *copies.entry(value).or_default() += 1;
    }
    let twice: Vec<&&str> = copies
        .iter()
        .filter(|(_, &n)| n > 1)
        .map(|(v, _)| v)
        .collect();
    eprintln!(
        "kcat: {} records read back, {} values stored more than once; {:?} in all",
        log.len(),
        twice.len(),
        started.elapsed()
    );
    assert!(twice.is_empty(), "stored more than once: {twice:?}");
    assert!(in_isr(&cluster.status(), TOPIC, 0, victim));
    cluster.stop_and_replay();
}

/// confluent-kafka's Producer (acks=all, idempotent) over the three partitions of a topic
/// through a kill and restart of the leader of partition 0; the script
/// (runtime/kafka/tests/clients/confluent_failover.py) checks every delivery report against
/// what a Consumer reads back afterwards.
#[test]
fn confluent_kafka_failover() {
    if !confluent_kafka_present() {
        return;
    }
    const TOPIC: &str = "orders";
    const PARTITIONS: u64 = 3;
    const SECONDS: u64 = 10;
    let started = Instant::now();
    let mut cluster = cluster_with_topic(TOPIC, PARTITIONS);

    let mut client = Client::spawn(
        Command::new("python3")
            .arg(script("confluent_failover.py"))
            .args([&bootstrap(&cluster), TOPIC, &SECONDS.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let err = Client::drain(client.0.stderr.take().expect("stderr"));
    let (lines_tx, lines) = mpsc::channel();
    let out = {
        let stdout = client.0.stdout.take().expect("stdout");
        std::thread::spawn(move || {
            let mut all = String::new();
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = lines_tx.send(line.clone());
                all.push_str(&line);
                all.push('\n');
            }
            all
        })
    };

    // Kill the leader of partition 0 once the script reports acknowledged records.
    let acked = |line: &str| line.strip_prefix("acked ")?.parse::<u64>().ok();
    let before = loop {
        match lines.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => match acked(&line) {
                Some(n) if n >= 200 => break n,
                _ => {}
            },
            Err(e) => {
                let _ = client.0.kill();
                let exit = client.0.wait().expect("wait");
                panic!(
                    "no 200 acknowledgements from the script ({e}); it exited with {exit}\n\
                     stdout:\n{}\nstderr:\n{}",
                    out.join().unwrap_or_default(),
                    err.join().unwrap_or_default()
                );
            }
        }
    };
    let (victim, new_leader_start) = kill_leader_of_partition_0(&mut cluster, TOPIC, PARTITIONS);
    restart_into_every_isr(&mut cluster, victim, TOPIC, PARTITIONS);

    let exit = client.wait(Duration::from_secs(SECONDS + 150), "confluent_failover.py");
    let (out, err) = (out.join().expect("stdout"), err.join().expect("stderr"));
    assert!(
        exit.success(),
        "confluent_failover.py exited with {exit}\nstdout:\n{out}\nstderr:\n{err}"
    );
    let summary: Value = out
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no JSON summary from the script\nstdout:\n{out}"));
    let offsets_0 = summary["offsets"]["0"].as_array().expect("offsets of 0");
    let after = offsets_0
        .iter()
        .filter(|o| o.as_u64().is_some_and(|o| o >= new_leader_start))
        .count();
    eprintln!(
        "confluent-kafka: {} acknowledged, {before} before the kill, {after} on partition 0 \
         written by the new leader after it; {} read back; values stored more than once: {}; \
         {:?} in all",
        summary["acked"],
        summary["read"],
        summary["duplicates"],
        started.elapsed()
    );
    assert_eq!(summary["failed"], 0, "{summary}");
    assert!(
        after >= 50,
        "only {after} records acknowledged on partition 0 after the kill"
    );
    let status = cluster.status();
    assert!((0..PARTITIONS).all(|p| in_isr(&status, TOPIC, p, victim)));
    cluster.stop_and_replay();
}
