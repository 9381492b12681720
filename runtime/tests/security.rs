//! TLS, SASL and ACLs with real processes and real clients (kcat, kafka-python,
//! confluent-kafka): `isr cluster --security sasl-ssl` serves them over SASL_SSL with
//! SCRAM-SHA-512, and each refusal is fast and clear: a wrong password, a plaintext client on a
//! TLS listener, a topic an ACL denies, a broker with a certificate from another CA, an expired
//! certificate.

mod common;

use common::clients::{
    client_present, confluent_kafka_present, kafka_python_present, script, Client,
};
use common::{Proc, ISR};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const DAY: Duration = Duration::from_secs(24 * 3600);

/// `isr ARGS`: whether it succeeded, stdout, stderr.
fn isr(args: &[&str]) -> (bool, String, String) {
    isr_with(args, None)
}

/// `isr ARGS` with `input` on its standard input (none: closed).
fn isr_with(args: &[&str], input: Option<&str>) -> (bool, String, String) {
    let mut child = Command::new(ISR)
        .args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("isr");
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        std::io::Write::write_all(&mut stdin, text.as_bytes()).expect("stdin");
    }
    let out = child.wait_with_output().expect("isr");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn kcat_present() -> bool {
    client_present("kcat", &["-V"], "kcat is not installed")
}

/// kcat with `args` (and, to produce, `input` as lines of a file, `-l`), killed after 30 s:
/// (success, stdout, stderr).
fn kcat(args: &[&str], input: Option<&str>) -> (bool, String, String) {
    let mut command = Command::new("kcat");
    command.args(args);
    let file = tempfile::NamedTempFile::new().expect("input file");
    if let Some(text) = input {
        std::fs::write(file.path(), text).expect("input");
        command.arg("-l").arg(file.path());
    }
    let (status, out, err) = Client::run(&mut command, Duration::from_secs(30), "kcat");
    (status.success(), out, err)
}

/// secure_client.py CLIENT PROPERTIES ACTION TOPIC: its exit status and output.
fn secure_client(
    client: &str,
    properties: &Path,
    action: &str,
    topic: &str,
) -> (ExitStatus, String) {
    // Every login of these tests comes from 127.0.0.1, whose failures the broker's throttle
    // counts together: past ten, a login waits up to 5 s before it is judged, and kafka-python
    // gives a connection only what is left of its bootstrap time. 15 s covers the wait.
    secure_client_bootstrapping(client, properties, action, topic, "15000")
}

/// [`secure_client`] with kafka-python's bootstrap time (`bootstrap_ms`).
fn secure_client_bootstrapping(
    client: &str,
    properties: &Path,
    action: &str,
    topic: &str,
    bootstrap_ms: &str,
) -> (ExitStatus, String) {
    let (status, out, err) = Client::run(
        Command::new("python3")
            .arg(script("secure_client.py"))
            .arg(client)
            .arg(properties)
            .args([action, topic])
            .env("ISR_BOOTSTRAP_TIMEOUT_MS", bootstrap_ms),
        Duration::from_secs(90),
        "secure_client.py",
    );
    (status, out + &err)
}

/// A copy of `properties` with some keys replaced (a user's login, a wrong password).
fn with(properties: &Path, changes: &[(&str, &str)], name: &str) -> PathBuf {
    let text = std::fs::read_to_string(properties).expect("properties");
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| !changes.iter().any(|(k, _)| l.starts_with(&format!("{k}="))))
        .map(String::from)
        .collect();
    lines.extend(changes.iter().map(|(k, v)| format!("{k}={v}")));
    let path = properties.with_file_name(name);
    std::fs::write(&path, lines.join("\n") + "\n").expect("write properties");
    path
}

/// `isr cluster --security sasl-ssl`, and what it printed up to the client config line.
struct SecureCluster {
    child: Child,
    lines: Vec<String>,
    dir: tempfile::TempDir,
}

impl SecureCluster {
    /// `isr cluster --security SECURITY --brokers BROKERS`.
    fn start(security: &str, brokers: u32) -> SecureCluster {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut child = Command::new(ISR)
            .args(["cluster", "--security", security, "--brokers"])
            .arg(brokers.to_string())
            .arg("--dir")
            .arg(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn isr cluster");
        let mut lines = Vec::new();
        for line in BufReader::new(child.stdout.take().expect("stdout")).lines() {
            let line = line.expect("line");
            let done = line.starts_with("client config ");
            lines.push(line);
            if done {
                break;
            }
        }
        SecureCluster { child, lines, dir }
    }

    /// The value of the announced line starting with `key`.
    fn value(&self, key: &str) -> String {
        self.lines
            .iter()
            .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string()))
            .unwrap_or_else(|| panic!("no {key} line in {:?}", self.lines))
    }
}

impl Drop for SecureCluster {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child; its children stop with it (SIGTERM).
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_sasl_ssl_cluster_serves_real_clients_and_refuses_the_rest() {
    let cluster = SecureCluster::start("sasl-ssl", 2);
    let bootstrap = cluster.value("bootstrap");
    let ca = PathBuf::from(cluster.value("ca certificate"));
    let password = cluster.value("admin password");
    let config = PathBuf::from(cluster.value("client config"));
    assert_eq!(cluster.value("admin user"), "admin");
    assert!(ca.exists() && password.len() >= 16, "{:?}", cluster.lines);
    assert_eq!(config, cluster.dir.path().join("client.properties"));
    let text = std::fs::read_to_string(&config).expect("client.properties");
    for wanted in [
        format!("bootstrap.servers={bootstrap}"),
        "security.protocol=SASL_SSL".into(),
        "sasl.mechanism=SCRAM-SHA-512".into(),
        "sasl.username=admin".into(),
        format!("sasl.password={password}"),
        format!("ssl.ca.location={}", ca.display()),
    ] {
        assert!(text.lines().any(|l| l == wanted), "{wanted} in {text}");
    }
    let mode = std::fs::metadata(&config).expect("mode").permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o600
    );
    let config_s = config.to_string_lossy().to_string();
    let b = bootstrap.as_str();

    // The isr commands read the same file.
    let (ok, out, err) = isr(&[
        "topic",
        "create",
        "secured",
        "--bootstrap",
        b,
        "--partitions",
        "1",
        "--replication-factor",
        "2",
        "--command-config",
        &config_s,
    ]);
    assert!(ok, "{out}{err}");
    let (ok, _, err) = isr(&["topic", "list", "--bootstrap", b]);
    assert!(!ok, "no PLAINTEXT listener: {err}");

    if kcat_present() {
        let (ok, _, err) = kcat(&["-F", &config_s, "-P", "-t", "secured"], Some("a\nb\nc\n"));
        assert!(ok, "kcat produce over SASL_SSL/SCRAM-SHA-512: {err}");
        let (ok, out, err) = kcat(
            &[
                "-F", &config_s, "-C", "-t", "secured", "-e", "-f", "%o %s\n",
            ],
            None,
        );
        assert!(ok, "{err}");
        assert_eq!(out, "0 a\n1 b\n2 c\n");
        // SASL/PLAIN too, since the password travels inside TLS.
        let (ok, out, err) = kcat(
            &[
                "-F",
                &config_s,
                "-X",
                "sasl.mechanism=PLAIN",
                "-L",
                "-t",
                "secured",
            ],
            None,
        );
        assert!(
            ok && out.contains("topic \"secured\""),
            "PLAIN over SASL_SSL: {out}{err}"
        );
    }
    if confluent_kafka_present() {
        let (status, out) = secure_client("confluent", &config, "roundtrip", "by-confluent");
        assert!(status.success() && out.contains("OK"), "{out}");
    }
    if kafka_python_present() {
        let (status, out) = secure_client("kafka-python", &config, "roundtrip", "by-kafka-python");
        assert!(status.success() && out.contains("OK"), "{out}");
    }

    // A user whose ACLs allow one topic.
    let secret = cluster.dir.path().join("alice.password");
    std::fs::write(&secret, "alice-secret\n").expect("password file");
    let (ok, out, err) = isr(&[
        "user",
        "add",
        "alice",
        "--password-file",
        &secret.to_string_lossy(),
        "--bootstrap",
        b,
        "--command-config",
        &config_s,
    ]);
    assert!(ok && out.contains("user alice"), "{out}{err}");
    let (ok, out, err) = isr(&[
        "acl",
        "add",
        "--principal",
        "User:alice",
        "--operation",
        "read",
        "--operation",
        "write",
        "--topic",
        "allowed",
        "--bootstrap",
        b,
        "--command-config",
        &config_s,
    ]);
    assert!(ok, "{out}{err}");
    let (ok, out, err) = isr(&[
        "user",
        "list",
        "--bootstrap",
        b,
        "--command-config",
        &config_s,
    ]);
    assert!(
        ok && out.contains("alice SCRAM-SHA-256") && out.contains("admin "),
        "{out}{err}"
    );
    let (ok, out, err) = isr(&[
        "acl",
        "list",
        "--bootstrap",
        b,
        "--command-config",
        &config_s,
    ]);
    assert_eq!(out, "allow User:alice * Read topic literal allowed\nallow User:alice * Write topic literal allowed\n", "{ok} {err}");
    let (ok, _, _) = isr(&[
        "topic",
        "create",
        "allowed",
        "--bootstrap",
        b,
        "--command-config",
        &config_s,
    ]);
    assert!(ok);
    let alice = with(
        &config,
        &[
            ("sasl.username", "alice"),
            ("sasl.password", "alice-secret"),
        ],
        "alice.properties",
    );
    let alice_s = alice.to_string_lossy().to_string();
    if kcat_present() {
        let (ok, _, err) = kcat(&["-F", &alice_s, "-P", "-t", "allowed"], Some("x\n"));
        assert!(ok, "alice may write to allowed: {err}");
        let (_, out, _) = kcat(&["-F", &alice_s, "-L"], None);
        assert!(
            out.contains("topic \"allowed\"") && !out.contains("\"secured\""),
            "Metadata hides what alice may not describe: {out}"
        );
        let (ok, _, err) = kcat(&["-F", &alice_s, "-P", "-t", "secured"], Some("y\n"));
        assert!(
            !ok && err.contains("Topic authorization failed"),
            "ACL-denied: {err}"
        );
    }
    if confluent_kafka_present() {
        let (status, out) = secure_client("confluent", &alice, "produce", "secured");
        assert_eq!(status.code(), Some(3), "{out}");
        assert!(out.contains("ERROR TOPIC_AUTHORIZATION_FAILED"), "{out}");
    }
    if kafka_python_present() {
        let (status, out) = secure_client("kafka-python", &alice, "produce", "secured");
        assert_eq!(status.code(), Some(3), "{out}");
        assert!(out.contains("TopicAuthorizationFailedError"), "{out}");
    }

    python_clients_manage_users_acls_and_groups(&config, &alice);

    // Admin requests over the internal protocol need a cluster certificate.
    let (ok, _, err) = isr(&["status", "--bootstrap", b]);
    assert!(!ok, "status without a certificate: {err}");
    let tls = cluster.dir.path().join("tls");
    let (ok, out, err) = isr(&[
        "status",
        "--bootstrap",
        b,
        "--tls-cert",
        &tls.join("admin.pem").to_string_lossy(),
        "--tls-key",
        &tls.join("admin.key").to_string_lossy(),
        "--tls-ca",
        &ca.to_string_lossy(),
    ]);
    assert!(
        ok && out.contains("broker 2 ") && out.contains("secured/0"),
        "{out}{err}"
    );

    // Refusals. A wrong password, each client for a user of its own: failures slow that user
    // down (and, past ten, every login from the address), while a first failure is answered
    // at once. kcat, which retries, goes last.
    let wrong_login = |user: &str| {
        let (ok, out, err) = isr(&[
            "user",
            "add",
            user,
            "--password",
            "right-secret",
            "--bootstrap",
            b,
            "--command-config",
            &config_s,
        ]);
        assert!(ok, "{out}{err}");
        with(
            &config,
            &[("sasl.username", user), ("sasl.password", "guess")],
            &format!("{user}.properties"),
        )
    };
    let wrong = wrong_login("bob-isr").to_string_lossy().to_string();
    let (ok, _, err) = isr(&[
        "topic",
        "list",
        "--bootstrap",
        b,
        "--command-config",
        &wrong,
    ]);
    assert!(!ok && err.contains("SASL_AUTHENTICATION_FAILED"), "{err}");
    if confluent_kafka_present() {
        let started = Instant::now();
        let wrong = wrong_login("bob-confluent");
        let (status, out) = secure_client("confluent", &wrong, "produce", "secured");
        assert_eq!(status.code(), Some(3), "{out}");
        assert!(
            out.contains("ERROR _AUTHENTICATION") && out.contains("invalid credentials"),
            "{out}"
        );
        assert!(started.elapsed() < Duration::from_secs(10), "{out}");
    }
    // kcat before kafka-python, which retries its refused login until its bootstrap time runs
    // out: each retry is a failure from 127.0.0.1, and past ten the broker's throttle makes
    // every login from that address wait its turn (up to 5 s), longer than kcat's 3 s.
    if kcat_present() {
        let wrong = wrong_login("bob-kcat").to_string_lossy().to_string();
        let started = Instant::now();
        let (ok, _, err) = kcat(&["-F", &wrong, "-L", "-m", "3"], None);
        assert!(!ok && err.contains("invalid credentials"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }
    if kafka_python_present() {
        let started = Instant::now();
        let wrong = wrong_login("bob-kafka-python");
        let (status, out) = secure_client("kafka-python", &wrong, "produce", "secured");
        assert!(!status.success(), "{out}");
        assert!(out.contains("SaslAuthenticationFailedError"), "{out}");
        // kafka-python retries a refused login until its bootstrap time (15 s) runs out, so its
        // exit takes that long; the refusal itself is the error it logged on the way.
        assert!(started.elapsed() < Duration::from_secs(25), "{out}");
    }
    // A plaintext client on the TLS listener.
    let plain = with(
        &config,
        &[("security.protocol", "PLAINTEXT")],
        "plain.properties",
    );
    if kcat_present() {
        let started = Instant::now();
        let (ok, _, err) = kcat(&["-b", b, "-L", "-m", "3"], None);
        assert!(
            !ok && err.contains("incorrect security.protocol configuration"),
            "{err}"
        );
        assert!(started.elapsed() < Duration::from_secs(10));
    }
    if confluent_kafka_present() {
        let started = Instant::now();
        let (status, out) = secure_client("confluent", &plain, "produce", "secured");
        assert_eq!(status.code(), Some(3), "{out}");
        // librdkafka calls the closed connections a transport failure, or, once every
        // bootstrap broker closed one, all brokers down.
        assert!(
            out.contains("ERROR _TRANSPORT") || out.contains("ERROR _ALL_BROKERS_DOWN"),
            "{out}"
        );
        assert!(out.contains("connection closed by peer"), "{out}");
        assert!(started.elapsed() < Duration::from_secs(10), "{out}");
    }
    if kafka_python_present() {
        let started = Instant::now();
        // No login here: a broker that closes every connection is retried for the bootstrap
        // time, which this refusal should not wait out.
        let (status, out) =
            secure_client_bootstrapping("kafka-python", &plain, "produce", "secured", "5000");
        assert_eq!(status.code(), Some(3), "{out}");
        assert!(
            out.contains("socket disconnected") && out.contains("Unable to bootstrap"),
            "{out}"
        );
        assert!(started.elapsed() < Duration::from_secs(10), "{out}");
    }
}

/// Every isr client command on a SASL_SSL cluster, with nothing but the client config that
/// `isr cluster --security sasl-ssl` writes (`--command-config`): topics, produce, consume with
/// a group, groups, perf, users, ACLs and status. Status has no cluster certificate here, so it
/// reads what the Kafka protocol tells (before, it waited 15 s on the TLS listener for an
/// answer that never came).
#[test]
fn every_client_command_works_with_the_client_config_of_a_sasl_ssl_cluster() {
    let cluster = SecureCluster::start("sasl-ssl", 2);
    let bootstrap = cluster.value("bootstrap");
    let config = cluster.value("client config");
    let secret = cluster.dir.path().join("carol.password");
    std::fs::write(&secret, "carol-secret\n").expect("password file");
    let secret = secret.to_string_lossy().to_string();
    let run = |args: &[&str], input: Option<&str>| -> String {
        let mut all = args.to_vec();
        all.extend(["--bootstrap", &bootstrap, "--command-config", &config]);
        let (ok, out, err) = isr_with(&all, input);
        assert!(ok, "isr {}: {out}{err}", args.join(" "));
        out
    };
    let topic = ["topic", "create", "cmds", "--partitions", "2"];
    run(&[&topic[..], &["--replication-factor", "2"]].concat(), None);
    assert!(run(&["topic", "list"], None).contains("cmds"));
    assert!(run(&["topic", "describe", "cmds"], None).contains("cmds"));
    run(
        &["topic", "alter", "cmds", "--set", "retention.ms=3600000"],
        None,
    );
    run(
        &["topic", "add-partitions", "cmds", "--partitions", "3"],
        None,
    );
    run(&["produce", "cmds"], Some("a\nb\nc\n"));
    let read = ["consume", "cmds", "--from-beginning", "--until-end"];
    let out = run(&[&read[..], &["--group", "g1"]].concat(), None);
    assert!(
        out.contains('a') && out.contains('b') && out.contains('c'),
        "{out}"
    );
    assert!(run(&["group", "list"], None).contains("g1"));
    assert!(run(&["group", "describe", "g1"], None).contains("cmds"));
    run(&["group", "delete", "g1"], None);
    run(
        &["perf", "produce", "--topic", "cmds", "--records", "100"],
        None,
    );
    run(
        &["perf", "consume", "--topic", "cmds", "--records", "100"],
        None,
    );
    run(&["user", "add", "carol", "--password-file", &secret], None);
    assert!(run(&["user", "list"], None).contains("carol"));
    run(&["user", "remove", "carol"], None);
    let grant = [
        "--principal",
        "User:bob",
        "--operation",
        "read",
        "--topic",
        "cmds",
    ];
    run(&[&["acl", "add"][..], &grant[..]].concat(), None);
    assert!(run(&["acl", "list"], None).contains("User:bob"));
    run(&["acl", "remove", "--principal", "User:bob"], None);

    // Status from the Kafka protocol: leaders, epochs, AR and ISR, the leaders' high
    // watermarks; what only the cluster's own protocol carries is unknown, and said to be.
    let out = run(&["status", "cmds"], None);
    assert!(
        out.contains("cmds/0") && out.contains("cmds/2") && out.contains("--tls-cert"),
        "{out}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&run(&["status", "--json"], None)).expect("status --json");
    let partitions = json["partitions"].as_array().expect("partitions");
    let first = partitions
        .iter()
        .find(|p| p["topic"] == "cmds" && p["partition"] == 0)
        .expect("cmds/0");
    let leader = &first["replicas"]
        .as_array()
        .expect("replicas")
        .iter()
        .find(|r| r["role"] == "leader")
        .expect("a leader");
    // The three records and perf's hundred went to partitions 0..3; partition 0 got some.
    assert!(leader["high_watermark"].as_u64().is_some(), "{first}");
    assert_eq!(first["isr"].as_array().map(Vec::len), Some(2), "{first}");
    run(&["topic", "delete", "cmds"], None);
}

#[test]
fn an_ssl_cluster_knows_clients_by_their_certificates() {
    let cluster = SecureCluster::start("ssl", 1);
    let bootstrap = cluster.value("bootstrap");
    assert_eq!(cluster.value("security"), "SSL");
    let admin = cluster.value("admin certificate");
    let (cert, key) = admin.split_once(" key ").expect("certificate and key");
    let config = PathBuf::from(cluster.value("client config"));
    let text = std::fs::read_to_string(&config).expect("client.properties");
    for wanted in [
        format!("bootstrap.servers={bootstrap}"),
        "security.protocol=SSL".into(),
        format!("ssl.certificate.location={cert}"),
        format!("ssl.key.location={key}"),
    ] {
        assert!(text.lines().any(|l| l == wanted), "{wanted} in {text}");
    }
    assert!(!text.contains("sasl."), "no SASL: {text}");
    let config_s = config.to_string_lossy().to_string();
    let (ok, out, err) = isr(&[
        "topic",
        "create",
        "by-certificate",
        "--bootstrap",
        &bootstrap,
        "--command-config",
        &config_s,
    ]);
    assert!(ok, "the admin's certificate is a super user: {out}{err}");
    if kcat_present() {
        let produce = ["-F", &config_s, "-P", "-t", "by-certificate"];
        let (ok, _, err) = kcat(&produce, Some("one\ntwo\n"));
        assert!(ok, "{err}");
        let consume = [
            "-F",
            &config_s,
            "-C",
            "-t",
            "by-certificate",
            "-e",
            "-f",
            "%o %s\n",
        ];
        let (ok, out, err) = kcat(&consume, None);
        assert!(ok && out == "0 one\n1 two\n", "{out}{err}");
        // Without a certificate, a client is User:ANONYMOUS, which no ACL allows anything.
        let anonymous = with(
            &config,
            &[("ssl.certificate.location", ""), ("ssl.key.location", "")],
            "anonymous.properties",
        );
        let anonymous_s = anonymous.to_string_lossy().to_string();
        let (ok, _, err) = kcat(
            &["-F", &anonymous_s, "-P", "-t", "by-certificate"],
            Some("x\n"),
        );
        assert!(!ok && err.contains("Topic authorization failed"), "{err}");
    }
}

/// The Python clients present (each checked once: under CI a missing one fails).
fn python_clients() -> Vec<&'static str> {
    let mut clients = Vec::new();
    if confluent_kafka_present() {
        clients.push("confluent");
    }
    if kafka_python_present() {
        clients.push("kafka-python");
    }
    clients
}

/// Consumer groups need their own ACL (GROUP_AUTHORIZATION_FAILED without, a prefixed one
/// covers them); and each client's admin API manages users (Describe/AlterUserScramCredentials)
/// and ACLs (Create/Describe/DeleteAcls), which take effect on the next request
/// (secure_admin.py). `alice` may read and write the topic `allowed`.
fn python_clients_manage_users_acls_and_groups(config: &Path, alice: &Path) {
    let bootstrap = property(config, "bootstrap.servers");
    let config_s = config.to_string_lossy().to_string();
    let admin = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--bootstrap", &bootstrap, "--command-config", &config_s]);
        let (ok, out, err) = isr(&all);
        assert!(ok, "isr {args:?}: {out}{err}");
    };
    let clients = python_clients();
    for client in &clients {
        let (status, out) = secure_client(client, alice, "produce", "allowed");
        assert!(status.success(), "{client}: alice writes to allowed: {out}");
        let (status, out) = secure_client(client, alice, "group", "allowed");
        assert_eq!(status.code(), Some(3), "{client}: {out}");
        assert!(
            out.contains("ERROR GROUP_AUTHORIZATION_FAILED")
                || out.contains("ERROR GroupAuthorizationFailedError"),
            "{client}: {out}"
        );
    }
    admin(&[
        "acl",
        "add",
        "--principal",
        "User:alice",
        "--operation",
        "read",
        "--group",
        "secure-group",
        "--pattern",
        "prefixed",
    ]);
    // kafka-python first: its bootstrap gives up on a login answered later than about a second,
    // and the deleted user's attempts by confluent's producer (librdkafka tries every broker)
    // add failed logins from 127.0.0.1, which the broker's throttle makes every later login
    // from that address wait for.
    for client in clients.iter().rev().copied() {
        let (status, out) = secure_client(client, alice, "group", "allowed");
        assert!(status.success() && out.contains("OK"), "{client}: {out}");

        let topic = format!("managed-by-{client}");
        admin(&["topic", "create", &topic]);
        let (status, out, err) = Client::run(
            Command::new("python3")
                .arg(script("secure_admin.py"))
                .args([client, config_s.as_str(), &format!("dave-{client}"), &topic]),
            Duration::from_secs(120),
            "secure_admin.py",
        );
        assert!(
            status.success() && out.contains("OK"),
            "{client}: {out}{err}"
        );
    }
}

/// The value of `key` in a properties file.
fn property(path: &Path, key: &str) -> String {
    let text = std::fs::read_to_string(path).expect("properties");
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")).map(str::to_string))
        .unwrap_or_else(|| panic!("no {key} in {text}"))
}

/// A test CA of its own, and certificates it signs (valid or expired).
struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    dir: PathBuf,
    cert: PathBuf,
}

/// A certificate and its key, as files.
struct Cert {
    cert: String,
    key: String,
}

impl TestCa {
    fn new(dir: &Path, name: &str) -> TestCa {
        std::fs::create_dir_all(dir).expect("ca dir");
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        validity(&mut params, false);
        let key = KeyPair::generate().expect("key");
        let cert = params.self_signed(&key).expect("ca");
        let path = dir.join("ca.pem");
        std::fs::write(&path, cert.pem()).expect("write ca");
        TestCa {
            issuer: Issuer::new(params, key),
            dir: dir.to_owned(),
            cert: path,
        }
    }

    /// A certificate whose CN is `name`, for 127.0.0.1; expired if asked.
    fn issue(&self, name: &str, expired: bool) -> Cert {
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).expect("params");
        params
            .subject_alt_names
            .push(SanType::IpAddress([127, 0, 0, 1].into()));
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        validity(&mut params, expired);
        let key = KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &self.issuer).expect("sign");
        let stem = if expired {
            format!("{name}-expired")
        } else {
            name.to_string()
        };
        let (c, k) = (
            self.dir.join(format!("{stem}.pem")),
            self.dir.join(format!("{stem}.key")),
        );
        std::fs::write(&c, cert.pem()).expect("cert");
        std::fs::write(&k, key.serialize_pem()).expect("key");
        Cert {
            cert: c.to_string_lossy().into_owned(),
            key: k.to_string_lossy().into_owned(),
        }
    }

    fn flags(&self, cert: &Cert) -> Vec<String> {
        vec![
            "--tls-cert".into(),
            cert.cert.clone(),
            "--tls-key".into(),
            cert.key.clone(),
            "--tls-ca".into(),
            self.cert.to_string_lossy().into_owned(),
        ]
    }
}

/// Valid for a month from yesterday, or expired yesterday.
fn validity(params: &mut CertificateParams, expired: bool) {
    let now = rcgen::date_time_ymd(1970, 1, 1)
        + SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
    if expired {
        params.not_before = now - 30 * DAY;
        params.not_after = now - DAY;
    } else {
        params.not_before = now - DAY;
        params.not_after = now + 30 * DAY;
    }
}

/// `isr ARGS` as a long-running process, and the first `lines` lines it announces.
fn spawn(args: &[String], log: &Path, lines: usize) -> (Proc, Vec<String>) {
    let mut child = Command::new(ISR)
        .args(args)
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::from(std::fs::File::create(log).expect("log")))
        .spawn()
        .expect("spawn isr");
    let mut reader = BufReader::new(child.stdout.take().expect("stdout"));
    let mut announced = Vec::new();
    for _ in 0..lines {
        let mut line = String::new();
        reader.read_line(&mut line).expect("announce line");
        announced.push(line.trim().to_string());
    }
    // Keep the pipe open (and drained) for the rest of the process's life.
    std::thread::spawn(move || for _ in reader.lines() {});
    let address = announced[0]
        .rsplit(' ')
        .next()
        .unwrap_or_default()
        .to_string();
    (Proc { child, address }, announced)
}

/// `isr ARGS` run to its end within 20 s: its exit status, how long it took, its stderr.
fn run_to_end(args: &[String]) -> (ExitStatus, Duration, String) {
    let started = Instant::now();
    let (status, _, err) =
        Client::run(Command::new(ISR).args(args), Duration::from_secs(20), "isr");
    (status, started.elapsed(), err)
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

#[test]
fn processes_and_clients_need_valid_certificates_from_the_cluster_ca() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let ca = TestCa::new(&d.join("ca"), "test cluster CA");
    let other = TestCa::new(&d.join("other"), "another CA");
    let admin = ca.issue("admin", false);
    let admin_flags = ca.flags(&admin);

    let mut controller_args = strings(&[
        "controller",
        "--id",
        "1",
        "--listen",
        "127.0.0.1:0",
        "--dir",
    ]);
    controller_args.push(d.join("controller").to_string_lossy().into_owned());
    controller_args.extend(ca.flags(&ca.issue("controller-1", false)));
    let (controller, _) = spawn(&controller_args, &d.join("controller.log"), 1);
    let broker_args = |id: &str, cert: Vec<String>| {
        let mut args = strings(&[
            "broker",
            "--id",
            id,
            "--listen",
            "SSL://127.0.0.1:0",
            "--listener",
            "SASL_PLAINTEXT://127.0.0.1:0",
            "--controller",
            &controller.address,
            "--acls",
            "--super-user",
            "User:admin",
            "--dir",
        ]);
        args.push(
            d.join(format!("broker-{id}"))
                .to_string_lossy()
                .into_owned(),
        );
        args.extend(cert);
        args
    };
    let (broker, announced) = spawn(
        &broker_args("1", ca.flags(&ca.issue("broker-1", false))),
        &d.join("broker-1.log"),
        2,
    );
    let ssl = broker.address.clone();
    let sasl = announced[1]
        .rsplit("://")
        .next()
        .expect("SASL_PLAINTEXT listener")
        .to_string();
    assert!(
        announced[1].contains("listener SASL_PLAINTEXT://"),
        "{announced:?}"
    );

    // The broker registers over mutual TLS; status needs a certificate too.
    let mut status_args = strings(&["status", "--json", "--controller", &controller.address]);
    status_args.extend(admin_flags.clone());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (ok, out, _) = isr(&status_args.iter().map(String::as_str).collect::<Vec<_>>());
        if ok && out.contains("\"alive\": true") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "broker 1 never registered: {out}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (ok, _, err) = isr(&["status", "--controller", &controller.address]);
    assert!(!ok, "no certificate, no status: {err}");

    // Brokers without a valid certificate from this CA never join, and say why at once.
    for (what, flags, id, wanted) in [
        (
            "a certificate and CA of another cluster",
            other.flags(&other.issue("broker-2", false)),
            "2",
            "cannot join the cluster",
        ),
        (
            "a certificate from another CA",
            ca.flags(&other.issue("broker-2", false)),
            "2",
            "not signed by the cluster CA",
        ),
        (
            "an expired certificate",
            ca.flags(&ca.issue("broker-2", true)),
            "2",
            "expired",
        ),
        (
            "another broker's certificate",
            ca.flags(&ca.issue("broker-1", false)),
            "3",
            "names broker 1",
        ),
    ] {
        let (status, took, err) = run_to_end(&broker_args(id, flags));
        assert!(!status.success(), "{what}: {err}");
        assert!(err.contains(wanted), "{what}: {err}");
        assert!(took < Duration::from_secs(10), "{what}: {took:?}");
    }
    let (_, out, _) = isr(&status_args.iter().map(String::as_str).collect::<Vec<_>>());
    let status: serde_json::Value = serde_json::from_str(&out).expect("status json");
    assert_eq!(
        status["brokers"].as_array().map(Vec::len),
        Some(1),
        "only broker 1 ever registered: {status}"
    );

    // Kafka clients on the SSL listener: the admin's certificate is User:admin (a super user).
    let admin_ssl = d.join("admin-ssl.properties");
    std::fs::write(
        &admin_ssl,
        format!(
            "security.protocol=SSL\nssl.ca.location={}\nssl.certificate.location={}\nssl.key.location={}\n",
            ca.cert.display(),
            admin.cert,
            admin.key
        ),
    )
    .expect("properties");
    let admin_ssl = admin_ssl.to_string_lossy().into_owned();
    let (ok, out, err) = isr(&[
        "user",
        "add",
        "carol",
        "--password",
        "carol-secret",
        "--mechanism",
        "SCRAM-SHA-256",
        "--bootstrap",
        &ssl,
        "--command-config",
        &admin_ssl,
    ]);
    assert!(ok, "{out}{err}");
    let (ok, out, err) = isr(&[
        "topic",
        "create",
        "orders",
        "--bootstrap",
        &ssl,
        "--command-config",
        &admin_ssl,
    ]);
    assert!(ok, "{out}{err}");
    if !kcat_present() {
        return;
    }
    let ca_path = ca.cert.to_string_lossy().into_owned();
    let ssl_client = |cert: Option<&Cert>| {
        let mut args = vec![
            "-b".to_string(),
            ssl.clone(),
            "-L".into(),
            "-m".into(),
            "5".into(),
            "-X".into(),
            "security.protocol=ssl".into(),
            "-X".into(),
            format!("ssl.ca.location={ca_path}"),
        ];
        if let Some(c) = cert {
            args.extend(["-X".into(), format!("ssl.certificate.location={}", c.cert)]);
            args.extend(["-X".into(), format!("ssl.key.location={}", c.key)]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        kcat(&args, None)
    };
    let (ok, out, err) = ssl_client(Some(&admin));
    assert!(ok && out.contains("topic \"orders\""), "{out}{err}");
    let (ok, out, err) = ssl_client(None);
    assert!(
        ok && !out.contains("orders"),
        "anonymous sees no topic: {out}{err}"
    );
    let started = Instant::now();
    let (ok, _, err) = ssl_client(Some(&ca.issue("client", true)));
    assert!(
        !ok && err.contains("expired"),
        "an expired client certificate: {err}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    let (ok, _, err) = ssl_client(Some(&other.issue("client", false)));
    assert!(
        !ok && err.contains("unknown ca"),
        "a certificate from another CA: {err}"
    );

    // SASL_PLAINTEXT: SCRAM only (PLAIN would send the password in the clear), and the
    // brokers are advertised at their SASL_PLAINTEXT listener.
    let scram = [
        "-b",
        &sasl,
        "-L",
        "-m",
        "5",
        "-X",
        "security.protocol=sasl_plaintext",
        "-X",
        "sasl.username=carol",
        "-X",
        "sasl.password=carol-secret",
    ];
    let (ok, out, err) = kcat(
        &[&scram[..], &["-X", "sasl.mechanism=SCRAM-SHA-256"]].concat(),
        None,
    );
    assert!(
        ok && out.contains(&format!("broker 1 at {sasl}")),
        "{out}{err}"
    );
    assert!(!out.contains("orders"), "carol has no ACL: {out}");
    let (ok, _, err) = kcat(
        &[&scram[..], &["-X", "sasl.mechanism=PLAIN"]].concat(),
        None,
    );
    assert!(!ok && err.contains("PLAIN"), "{err}");
    drop(broker);
    drop(controller);
}
