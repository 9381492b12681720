//! `isr cluster`: controllers and brokers as child processes on 127.0.0.1, for trying things
//! out. Each child logs to a file in its directory; SIGINT or SIGTERM stops them all cleanly.
//!
//! One controller uses the file store under `--dir`. Several share an etcd store (`--store`),
//! or a local etcd member this command starts itself (`--etcd`): one command for a demo of
//! controller failover. `--security` secures it ([`secure`]).

pub mod etcd;
mod secure;

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
    /// How many controllers; more than one needs a shared store (--store or --etcd), and one
    /// of them is active at a time.
    #[arg(long, default_value_t = 1)]
    pub controllers: u32,
    /// The controllers' shared store: etcd://HOST:PORT[,HOST:PORT...][/PREFIX].
    #[arg(long, value_name = "etcd://HOST:PORT[,...]", conflicts_with = "etcd")]
    pub store: Option<String>,
    /// Start a local etcd member (Debian's etcd-server must be installed) with its data under
    /// --dir, and use it as the controllers' store.
    #[arg(long)]
    pub etcd: bool,
    /// Directory holding each controller's and broker's data and log.
    #[arg(long)]
    pub dir: PathBuf,
    /// Controller c listens on port + c - 1 and broker i on port + controllers + i - 1 (with
    /// one controller: the controller on port, broker i on port + i); by default the OS picks.
    #[arg(long)]
    pub port: Option<u16>,
    /// Passed to every broker.
    #[arg(long, value_enum, default_value = "always")]
    pub flush: crate::broker::Flush,
    /// Passed to every broker.
    #[command(flatten)]
    pub topics: crate::broker::TopicDefaults,
    /// ssl or sasl-ssl: a throwaway CA, mutual TLS between every process, TLS listeners with
    /// ACLs (super user admin), and a client.properties in --dir; sasl-ssl adds SCRAM with an
    /// admin user and password. Printed at start.
    #[arg(long, value_enum, default_value = "plaintext")]
    pub security: secure::Security,
    /// Passed to every broker (`--acls`, `--super-user`); with --security, added to its own
    /// (ACLs on, super user admin).
    #[command(flatten)]
    pub access: crate::broker::AccessArgs,
}

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("--brokers must be at least 1")]
    NoBrokers,
    #[error("--controllers must be at least 1")]
    NoControllers,
    #[error("{0} controllers need a shared store: add --etcd, or --store etcd://HOST:PORT")]
    NoSharedStore(u32),
    #[error("port {0} + {1} processes exceeds 65535")]
    PortRange(u16, u32),
    #[error(transparent)]
    Etcd(#[from] etcd::EtcdError),
    #[error("{what}: {source}")]
    Io { what: String, source: io::Error },
    #[error("{0} exited before it was listening")]
    EarlyExit(String),
    #[error(transparent)]
    Secure(#[from] secure::SecureError),
}

pub struct Running {
    name: String,
    child: Child,
}

pub async fn run(args: ClusterArgs) -> Result<(), ClusterError> {
    if args.brokers == 0 {
        return Err(ClusterError::NoBrokers);
    }
    if args.controllers == 0 {
        return Err(ClusterError::NoControllers);
    }
    if args.controllers > 1 && args.store.is_none() && !args.etcd {
        return Err(ClusterError::NoSharedStore(args.controllers));
    }
    // With --etcd, the member's client and peer ports follow the brokers'.
    let processes = args.controllers + args.brokers + if args.etcd { 2 } else { 0 };
    if let Some(port) = args.port {
        if u32::from(port) + processes > u32::from(u16::MAX) {
            return Err(ClusterError::PortRange(port, processes));
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
    let store = match (&args.store, args.etcd) {
        (Some(store), _) => Some(store.clone()),
        (None, true) => {
            let ports = args.port.map(|p| {
                let first = u32::from(p) + args.controllers + args.brokers;
                (first as u16, first as u16 + 1)
            });
            let member = etcd::start(&args.dir.join("etcd"), ports, running).await?;
            announce(&format!("etcd {member}"));
            Some(format!("etcd://{member}"))
        }
        (None, false) => None,
    };
    let pki = match args.security {
        secure::Security::Plaintext => None,
        _ => Some(secure::Pki::create(&args.dir)?),
    };
    let tls_flags = |name: String| -> Result<Vec<String>, ClusterError> {
        Ok(match &pki {
            Some(pki) => pki.flags_for(&name)?.to_args(),
            None => Vec::new(),
        })
    };
    let mut controllers = Vec::new();
    for c in 1..=args.controllers {
        let (name, dir) = if args.controllers == 1 {
            ("controller".to_string(), args.dir.join("controller"))
        } else {
            (
                format!("controller {c}"),
                args.dir.join(format!("controller-{c}")),
            )
        };
        let mut cmd = vec![
            "controller".to_string(),
            "--id".to_string(),
            c.to_string(),
            "--listen".to_string(),
            addr(c - 1),
        ];
        match &store {
            Some(store) => cmd.extend(["--store".to_string(), store.clone()]),
            None => cmd.extend(["--dir".to_string(), dir.to_string_lossy().to_string()]),
        }
        cmd.extend(tls_flags(format!("controller-{c}"))?);
        controllers.push(start(&name, &dir, &cmd, running).await?);
    }
    let controller = controllers.join(",");
    let flush = match args.flush {
        crate::broker::Flush::Always => "always",
        crate::broker::Flush::PageCache => "page-cache",
    };
    let mut bootstrap = Vec::new();
    for i in 1..=args.brokers {
        let dir = args.dir.join(format!("broker-{i}"));
        let listen = match &pki {
            Some(_) => format!(
                "{}://{}",
                args.security.protocol(),
                addr(args.controllers + i - 1)
            ),
            None => addr(args.controllers + i - 1),
        };
        let mut flags: Vec<String> = [
            "broker",
            "--id",
            &i.to_string(),
            "--listen",
            &listen,
            "--controller",
            &controller,
            "--flush",
            flush,
            "--dir",
            &dir.to_string_lossy(),
        ]
        .map(String::from)
        .into();
        flags.extend(args.topics.to_args());
        flags.extend(tls_flags(format!("broker-{i}"))?);
        let mut access = args.access.clone();
        if pki.is_some() {
            let secured = secure::access();
            access.acls |= secured.acls;
            access.super_users.extend(secured.super_users);
        }
        flags.extend(access.to_args());
        let address = start(&format!("broker {i}"), &dir, &flags, running).await?;
        bootstrap.push(address);
    }
    let admin_tls = match &pki {
        Some(pki) => Some(pki.admin_tls()?),
        None => None,
    };
    wait_until_registered(&controller, args.brokers, admin_tls.as_ref()).await;
    for r in running.iter() {
        announce(&format!("{} pid {}", r.name, r.child.id().unwrap_or(0)));
    }
    announce(&format!("controller {controller}"));
    let bootstrap = bootstrap.join(",");
    announce(&format!("bootstrap {bootstrap}"));
    if let (Some(pki), Some(tls)) = (&pki, &admin_tls) {
        let password = match args.security {
            secure::Security::SaslSsl => Some(secure::create_admin(&controller, tls).await?),
            _ => None,
        };
        let config = secure::write_client_config(
            &args.dir,
            args.security,
            &bootstrap,
            pki,
            password.as_deref(),
        )?;
        announce(&format!("security {}", args.security.protocol()));
        announce(&format!("ca certificate {}", pki.ca().display()));
        match &password {
            Some(password) => {
                announce(&format!("admin user {}", secure::ADMIN));
                announce(&format!("admin password {password}"));
            }
            None => announce(&format!(
                "admin certificate {} key {}",
                pki.admin.cert.display(),
                pki.admin.key.display()
            )),
        }
        announce(&format!("client config {}", config.display()));
    }
    Ok(())
}

/// Waits (up to 20 s) until the active controller reports `brokers` brokers alive, so that the
/// cluster takes requests once its bootstrap address is printed.
async fn wait_until_registered(
    controllers: &str,
    brokers: u32,
    tls: Option<&crate::security::ClusterTls>,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while tokio::time::Instant::now() < deadline {
        if let Ok(view) = crate::status::view_of(controllers, tls).await {
            if view.brokers.values().filter(|b| b.alive).count() >= brokers as usize {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    warn!("not every broker registered within 20 s");
}

/// Starts one isr child, logging to a file in `dir`, and returns the address it announced.
async fn start(
    name: &str,
    dir: &Path,
    args: &[String],
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
