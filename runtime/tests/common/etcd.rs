//! Real etcd members (Debian's `etcd-server`) on loopback ports, for the controllers' store:
//! one member, or a three-member cluster whose members a test can kill and restart. Every
//! member is killed when the value drops.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Member {
    name: String,
    client: String,
    peer: String,
    child: Option<Child>,
}

pub struct Etcd {
    dir: tempfile::TempDir,
    members: Vec<Member>,
}

/// Whether etcd is installed (else the test says it is skipped). Under `CI=true` it must be:
/// a missing etcd fails the test rather than turning it green unrun.
pub fn present() -> bool {
    let ok = Command::new("etcd")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let ci = std::env::var_os("CI").is_some_and(|v| v == "true");
    assert!(
        ok || !ci,
        "etcd is not installed: runtime/tests/etcd/install.sh installs it"
    );
    if !ok {
        eprintln!("SKIPPED: etcd is not installed (runtime/tests/etcd/install.sh installs it)");
    }
    ok
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

impl Etcd {
    /// Starts `n` members as one cluster and waits until it answers.
    pub fn start(n: usize) -> Etcd {
        let dir = tempfile::tempdir().expect("tempdir");
        let members: Vec<Member> = (1..=n)
            .map(|i| Member {
                name: format!("m{i}"),
                client: format!("127.0.0.1:{}", free_port()),
                peer: format!("http://127.0.0.1:{}", free_port()),
                child: None,
            })
            .collect();
        let mut etcd = Etcd { dir, members };
        for i in 0..n {
            etcd.spawn(i);
        }
        etcd.wait_healthy(Duration::from_secs(20));
        etcd
    }

    fn spawn(&mut self, i: usize) {
        let cluster: Vec<String> = self
            .members
            .iter()
            .map(|m| format!("{}={}", m.name, m.peer))
            .collect();
        let m = &self.members[i];
        let data: PathBuf = self.dir.path().join(&m.name);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(format!("{}.log", m.name)))
            .expect("etcd log");
        let child = Command::new("etcd")
            .args(["--name", &m.name])
            .arg("--data-dir")
            .arg(&data)
            .args(["--listen-client-urls", &format!("http://{}", m.client)])
            .args(["--advertise-client-urls", &format!("http://{}", m.client)])
            .args(["--listen-peer-urls", &m.peer])
            .args(["--initial-advertise-peer-urls", &m.peer])
            .args(["--initial-cluster", &cluster.join(",")])
            .args(["--initial-cluster-token", "isr-test"])
            // Quick elections among members, so that losing one costs a test little time.
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("spawn etcd");
        self.members[i].child = Some(child);
    }

    /// The controllers' `--store`.
    pub fn store(&self) -> String {
        let endpoints: Vec<&str> = self.members.iter().map(|m| m.client.as_str()).collect();
        format!("etcd://{}", endpoints.join(","))
    }

    /// SIGKILL of member `i` (0-based).
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts member `i` again on its data.
    pub fn restart(&mut self, i: usize) {
        self.spawn(i);
    }

    /// Waits until some running member reports the cluster healthy (it has a leader and a
    /// quorum).
    pub fn wait_healthy(&self, timeout: Duration) {
        let start = Instant::now();
        while start.elapsed() < timeout {
            let healthy = self
                .members
                .iter()
                .filter(|m| m.child.is_some())
                .any(|m| health(&m.client));
            if healthy {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let logs: Vec<String> = self
            .members
            .iter()
            .map(|m| {
                std::fs::read_to_string(self.dir.path().join(format!("{}.log", m.name)))
                    .unwrap_or_default()
            })
            .collect();
        panic!(
            "etcd did not become healthy within {timeout:?}; logs:\n{}",
            logs.join("\n")
        );
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}

/// etcd's `/health` on one member: `{"health":"true"}` once the cluster has a leader.
fn health(client: &str) -> bool {
    let ask = || -> std::io::Result<String> {
        let mut stream = TcpStream::connect(client)?;
        stream.set_read_timeout(Some(Duration::from_secs(1)))?;
        write!(stream, "GET /health HTTP/1.0\r\nHost: {client}\r\n\r\n")?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer)?;
        Ok(answer)
    };
    ask().is_ok_and(|a| a.contains("\"health\":\"true\""))
}

/// `etcdctl ARGS` against `endpoints`; its stdout.
pub fn etcdctl(endpoints: &str, args: &[&str]) -> String {
    let out = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", endpoints])
        .args(args)
        .output()
        .expect("etcdctl (runtime/tests/etcd/install.sh installs it)");
    assert!(
        out.status.success(),
        "etcdctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}
