//! A local, single-member etcd for `isr cluster --etcd`: Debian's `etcd-server`, its data in the
//! cluster's directory, listening on loopback only.
//!
//! For a demo and for tests, not for production: one member is no quorum to lose.

use super::Running;
use std::io;
use std::net::TcpListener;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::Command;

#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    #[error("--etcd needs etcd on PATH (Debian: apt-get install etcd-server): {0}")]
    NotInstalled(io::Error),
    #[error("{what}: {source}")]
    Io { what: String, source: io::Error },
    #[error("the local etcd member did not become healthy within 20 s; see {0}")]
    Unhealthy(String),
}

/// Starts the member (on `ports` = (client, peer), or ports the OS has free) and returns its
/// client address once it answers healthy.
pub async fn start(
    dir: &Path,
    ports: Option<(u16, u16)>,
    running: &mut Vec<Running>,
) -> Result<String, EtcdError> {
    let io_err = |what: String| move |source| EtcdError::Io { what, source };
    std::fs::create_dir_all(dir).map_err(io_err(format!("creating {}", dir.display())))?;
    let (client, peer) = match ports {
        Some(ports) => ports,
        None => (free_port()?, free_port()?),
    };
    let client = format!("127.0.0.1:{client}");
    let peer = format!("http://127.0.0.1:{peer}");
    let log_path = dir.join("log.txt");
    let log = std::fs::File::create(&log_path)
        .map_err(io_err(format!("creating {}", log_path.display())))?;
    let child = Command::new("etcd")
        .arg("--name")
        .arg("isr")
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("--listen-client-urls")
        .arg(format!("http://{client}"))
        .arg("--advertise-client-urls")
        .arg(format!("http://{client}"))
        .arg("--listen-peer-urls")
        .arg(&peer)
        .arg("--initial-advertise-peer-urls")
        .arg(&peer)
        .arg("--initial-cluster")
        .arg(format!("isr={peer}"))
        // Elections every half second rather than every second: etcd grants leases of no less
        // than 1.5 election timeouts, and the controllers' default lease is 1 s.
        .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .map_err(EtcdError::NotInstalled)?;
    running.push(Running {
        name: "etcd".to_string(),
        child,
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if healthy(&client).await {
            return Ok(client);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(EtcdError::Unhealthy(log_path.display().to_string()))
}

fn free_port() -> Result<u16, EtcdError> {
    let io_err = |source| EtcdError::Io {
        what: "finding a free port".into(),
        source,
    };
    let listener = TcpListener::bind("127.0.0.1:0").map_err(io_err)?;
    Ok(listener.local_addr().map_err(io_err)?.port())
}

/// Whether etcd's `/health` at `client` says it has a leader and answers.
async fn healthy(client: &str) -> bool {
    let ask = async {
        let mut stream = TcpStream::connect(client).await.ok()?;
        let request = format!("GET /health HTTP/1.0\r\nHost: {client}\r\n\r\n");
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.ok()?;
        Some(String::from_utf8_lossy(&answer).contains("\"health\":\"true\""))
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(1), ask).await,
        Ok(Some(true))
    )
}
