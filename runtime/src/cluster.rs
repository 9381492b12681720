//! `isr cluster`: a controller and N brokers as child processes on 127.0.0.1, for trying things
//! out. Each child logs to a file in its directory; SIGINT or SIGTERM stops them all cleanly.

use crate::broker::{announce, StopSignals};
use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tracing::warn;

#[derive(clap::Args, Debug)]
pub struct ClusterArgs {
    /// How many brokers.
    #[arg(long, default_value_t = 3)]
    pub brokers: u32,
    /// Directory holding the controller's and each broker's data and log.
    #[arg(long)]
    pub dir: PathBuf,
    /// The controller listens on this port and broker i on port + i; by default the OS picks.
    #[arg(long)]
    pub port: Option<u16>,
    /// Passed to every broker.
    #[arg(long, value_enum, default_value = "always")]
    pub flush: crate::broker::Flush,
    /// Passed to every broker.
    #[command(flatten)]
    pub topics: crate::broker::TopicDefaults,
}

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("--brokers must be at least 1")]
    NoBrokers,
    #[error("port {0} + {1} brokers exceeds 65535")]
    PortRange(u16, u32),
    #[error("{what}: {source}")]
    Io { what: String, source: io::Error },
    #[error("{0} exited before it was listening")]
    EarlyExit(String),
}

struct Running {
    name: String,
    child: Child,
}

pub async fn run(args: ClusterArgs) -> Result<(), ClusterError> {
    if args.brokers == 0 {
        return Err(ClusterError::NoBrokers);
    }
    if let Some(port) = args.port {
        if u32::from(port) + args.brokers > u32::from(u16::MAX) {
            return Err(ClusterError::PortRange(port, args.brokers));
        }
    }
    let addr = |i: u32| format!("127.0.0.1:{}", args.port.map_or(0, |p| u32::from(p) + i));
    let stop = StopSignals::install();
    let mut running = Vec::new();
    let result = start_all(&args, &addr, &mut running).await;
    if result.is_ok() {
        stop.wait().await;
    }
    stop_all(&mut running).await;
    result
}

async fn start_all(
    args: &ClusterArgs,
    addr: &dyn Fn(u32) -> String,
    running: &mut Vec<Running>,
) -> Result<(), ClusterError> {
    let controller_dir = args.dir.join("controller");
    let controller = start(
        "controller",
        &controller_dir,
        &["controller", "--listen", &addr(0)],
        running,
    )
    .await?;
    let flush = match args.flush {
        crate::broker::Flush::Always => "always",
        crate::broker::Flush::PageCache => "page-cache",
    };
    let mut bootstrap = Vec::new();
    let topic_flags = args.topics.to_args();
    for i in 1..=args.brokers {
        let id = i.to_string();
        let address_flag = addr(i);
        let mut flags = vec![
            "broker",
            "--id",
            &id,
            "--listen",
            &address_flag,
            "--controller",
            &controller,
            "--flush",
            flush,
        ];
        flags.extend(topic_flags.iter().map(String::as_str));
        let address = start(
            &format!("broker {i}"),
            &args.dir.join(format!("broker-{i}")),
            &flags,
            running,
        )
        .await?;
        bootstrap.push(address);
    }
    for r in running.iter() {
        announce(&format!("{} pid {}", r.name, r.child.id().unwrap_or(0)));
    }
    announce(&format!("controller {controller}"));
    announce(&format!("bootstrap {}", bootstrap.join(",")));
    Ok(())
}

/// Starts one child in `dir` (as its `--dir`) and returns the address it announced.
async fn start(
    name: &str,
    dir: &Path,
    args: &[&str],
    running: &mut Vec<Running>,
) -> Result<String, ClusterError> {
    let io_err = |what: String| move |source| ClusterError::Io { what, source };
    std::fs::create_dir_all(dir).map_err(io_err(format!("creating {}", dir.display())))?;
    let exe = std::env::current_exe().map_err(io_err("finding the isr binary".into()))?;
    let log_path = dir.join("log.txt");
    let log = std::fs::File::create(&log_path)
        .map_err(io_err(format!("creating {}", log_path.display())))?;
    let mut child = Command::new(exe)
        .args(args)
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .map_err(io_err(format!("starting {name}")))?;
    let stdout = child.stdout.take();
    running.push(Running {
        name: name.to_string(),
        child,
    });
    let Some(stdout) = stdout else {
        return Err(ClusterError::EarlyExit(name.to_string()));
    };
    let mut lines = BufReader::new(stdout).lines();
    let first = tokio::time::timeout(Duration::from_secs(10), lines.next_line()).await;
    let address = match first {
        Ok(Ok(Some(line))) => line.rsplit(' ').next().unwrap_or_default().to_string(),
        _ => return Err(ClusterError::EarlyExit(name.to_string())),
    };
    // Keep reading so the child never writes into a closed pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(address)
}

/// Asks every child to stop cleanly (SIGTERM), brokers first, and kills what is still running
/// after 10 s.
async fn stop_all(running: &mut [Running]) {
    for r in running.iter_mut().rev() {
        if let Some(pid) = r.child.id() {
            // SAFETY: kill(2) on a child we spawned and have not reaped; no memory involved.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGTERM);
            }
        }
        match tokio::time::timeout(Duration::from_secs(10), r.child.wait()).await {
            Ok(Ok(status)) => announce(&format!("{} stopped ({status})", r.name)),
            _ => {
                warn!(name = %r.name, "did not stop within 10 s; killing");
                let _ = r.child.kill().await;
            }
        }
    }
}
