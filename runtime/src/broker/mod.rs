//! `isr broker`: hosts replicas of many partitions, each an [`isr::Replica`] over a disk log.
//!
//! The replicas live on one thread ([`host`]); the network ([`network`]) and the Kafka layer
//! ([`backend`]) talk to it through commands. A clean shutdown leaves a marker file so that the
//! next start can tell the controller its log is complete (KIP-966 needs to know).

mod backend;
pub(crate) mod beside;
mod host;
mod network;
mod outbox;
mod policy_changes;

use crate::security::listeners::{Listener, ListenerSpec};
use crate::security::{Role, SecurityError, TlsArgs};
use crate::storage::{checkpoint, sync_dir};
use crate::timing;
use crate::wire::BrokerAddress;
use backend::BrokerBackend;
use host::{Command, Host};
use isr::{BrokerId, FlushPolicy, Node, Rules};
use isr_kafka::Coordinator;
use network::Net;
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::{mpsc, oneshot, Notify};
use tracing::{info, warn};

const CLEAN_SHUTDOWN_MARKER: &str = "clean-shutdown";

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Flush {
    /// fsync before anything is acknowledged or reported to the leader.
    Always,
    /// Leave it to the page cache, as Kafka does by default; fsync on clean shutdown only.
    PageCache,
}

#[derive(clap::Args, Debug)]
pub struct BrokerArgs {
    /// This broker's id, unique in the cluster.
    #[arg(long)]
    pub id: u32,
    /// The first listener, [PROTOCOL://]HOST:PORT (PLAINTEXT without a protocol; port 0: any
    /// free port, printed at start): Kafka clients, and other brokers and admin clients. With
    /// --tls-cert it must be SSL or SASL_SSL, since they connect with mutual TLS.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub listen: ListenerSpec,
    /// Another Kafka listener, PROTOCOL://HOST:PORT: PLAINTEXT, SSL, SASL_PLAINTEXT or
    /// SASL_SSL (repeatable; one per protocol).
    #[arg(long = "listener", value_name = "PROTOCOL://HOST:PORT")]
    pub listeners: Vec<ListenerSpec>,
    /// The address peers and clients are told to reach the --listen listener at, when it is not
    /// the one it listens on (a proxy or a NAT in between; isr-faults puts its fault proxy
    /// there). Default: the address it listens on.
    #[arg(long, value_name = "HOST:PORT")]
    pub advertise: Option<String>,
    /// The controllers' addresses, comma-separated: the broker finds the active one among them
    /// (a standby names it), and looks again after a controller failover.
    #[arg(
        long,
        value_name = "HOST:PORT[,HOST:PORT...]",
        default_value = "127.0.0.1:9090"
    )]
    pub controller: String,
    /// Directory for this broker's partitions.
    #[arg(long)]
    pub dir: PathBuf,
    #[arg(long, value_enum, default_value = "always")]
    pub flush: Flush,
    /// Switch a core rule away from the safe protocol, as `isr-check --rule` does in the model
    /// (repeatable; `flush` is --flush). Only to reproduce a historical bug on real processes:
    /// every process of the cluster must be given the same switches.
    #[arg(long = "rule", value_name = "NAME=VALUE")]
    pub rules: Vec<timing::RuleSwitch>,
    #[command(flatten)]
    pub topics: TopicDefaults,
    /// The broker's certificate (CN broker-<id>) for its TLS listeners and for mutual TLS with
    /// the controllers and other brokers.
    #[command(flatten)]
    pub tls: TlsArgs,
    #[command(flatten)]
    pub access: AccessArgs,
    /// Record every input the broker's replicas were stepped with, and the effects that came
    /// back, as JSON lines in FILE, for `isr-check replay` (also: ISR_TRACE=DIR).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
}

/// Who may do what: Kafka's authorizer settings.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct AccessArgs {
    /// Enable ACLs: a request no ACL allows is denied (TOPIC_, GROUP_ or
    /// CLUSTER_AUTHORIZATION_FAILED), except for the super users.
    #[arg(long)]
    pub acls: bool,
    /// A principal allowed everything, User:NAME (repeatable; Kafka's super.users).
    #[arg(long = "super-user", value_name = "User:NAME")]
    pub super_users: Vec<String>,
}

impl AccessArgs {
    /// The flags as `isr broker` arguments (for `isr cluster`).
    pub fn to_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if self.acls {
            args.push("--acls".to_string());
        }
        for user in &self.super_users {
            args.push(format!("--super-user={user}"));
        }
        args
    }
}

/// How this broker treats topics: Kafka's static broker configs of the same names.
#[derive(clap::Args, Clone, Debug)]
pub struct TopicDefaults {
    /// auto.create.topics.enable: a Metadata request that allows it creates unknown topics.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "true|false")]
    pub auto_create_topics: bool,
    /// num.partitions: partitions of a topic created without a count (and automatically).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub num_partitions: u32,
    /// default.replication.factor: replicas of a topic created without a factor.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    pub default_replication_factor: u16,
    /// message.max.bytes: the largest record batch a producer may write (MESSAGE_TOO_LARGE
    /// above), unless a topic's max.message.bytes or a dynamic broker config says otherwise.
    #[arg(long, default_value_t = isr_kafka::configs::MESSAGE_MAX_BYTES,
        value_parser = clap::value_parser!(u32).range(0..=crate::storage::batch::MAX_BATCH as i64))]
    pub message_max_bytes: u32,
    /// offsets.topic.num.partitions: the partitions of `__consumer_offsets`, where consumer
    /// groups' offsets are committed, when the first group creates it (every broker should
    /// say the same; a group's coordinator is the leader of one of them).
    #[arg(long, default_value_t = isr_kafka::offsets_topic::DEFAULT_PARTITIONS,
        value_parser = clap::value_parser!(u32).range(1..=1_000))]
    pub offsets_topic_partitions: u32,
    /// group.initial.rebalance.delay.ms: how long the first member of an empty consumer group
    /// waits for others before its first rebalance completes (Kafka's 3 s; 0 for none).
    #[arg(long, default_value_t = 3_000, value_name = "MS",
        value_parser = clap::value_parser!(u64).range(0..=300_000))]
    pub group_initial_rebalance_delay_ms: u64,
    /// log.retention.check.interval.ms: how often the broker applies each topic's retention
    /// (retention.ms, retention.bytes, segment.bytes, segment.ms) to its replicas.
    #[arg(long, default_value_t = 300_000, value_name = "MS",
        value_parser = clap::value_parser!(u64).range(1..))]
    pub log_retention_check_interval_ms: u64,
    /// log.cleaner.backoff.ms: how often the broker looks for compacted logs with enough to
    /// clean (Kafka's 15 s), at most as long as the retention check interval.
    #[arg(long, default_value_t = 15_000, value_name = "MS",
        value_parser = clap::value_parser!(u64).range(1..))]
    pub log_cleaner_backoff_ms: u64,
    /// log.cleaner.dedupe.buffer.size: the most memory the cleaner's map of keys takes (Kafka's
    /// 128 MiB; one cleaner thread, so all of it); a log with more dirty keys than it holds is
    /// cleaned in several passes.
    #[arg(long, default_value_t = crate::storage::offset_map::DEFAULT_DEDUPE_BUFFER_BYTES,
        value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1024..))]
    pub log_cleaner_dedupe_buffer_size: u64,
    /// log.cleaner.io.max.bytes.per.second: the most bytes a second the cleaner reads and
    /// writes, sleeping when it is ahead, so that its I/O trickles beside produce and fetch
    /// rather than bursting; unlimited if absent (Kafka's default).
    #[arg(long, value_name = "BYTES", value_parser = positive_rate)]
    pub log_cleaner_io_max_bytes_per_second: Option<f64>,
}

/// A rate in bytes a second: a positive, finite number.
fn positive_rate(value: &str) -> Result<f64, String> {
    match value.trim().parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err(format!(
            "{value:?}: must be a positive number of bytes a second"
        )),
    }
}

impl TopicDefaults {
    /// The flags as `isr broker` arguments (for `isr cluster`).
    pub fn to_args(&self) -> Vec<String> {
        vec![
            format!("--auto-create-topics={}", self.auto_create_topics),
            format!("--num-partitions={}", self.num_partitions),
            format!(
                "--default-replication-factor={}",
                self.default_replication_factor
            ),
            format!("--message-max-bytes={}", self.message_max_bytes),
            format!(
                "--offsets-topic-partitions={}",
                self.offsets_topic_partitions
            ),
            format!(
                "--group-initial-rebalance-delay-ms={}",
                self.group_initial_rebalance_delay_ms
            ),
            format!(
                "--log-retention-check-interval-ms={}",
                self.log_retention_check_interval_ms
            ),
            format!("--log-cleaner-backoff-ms={}", self.log_cleaner_backoff_ms),
            format!(
                "--log-cleaner-dedupe-buffer-size={}",
                self.log_cleaner_dedupe_buffer_size
            ),
        ]
        .into_iter()
        .chain(
            self.log_cleaner_io_max_bytes_per_second
                .map(|r| format!("--log-cleaner-io-max-bytes-per-second={r}")),
        )
        .collect()
    }

    fn settings(&self, cfg: &isr::Config) -> isr_kafka::BrokerSettings {
        isr_kafka::BrokerSettings {
            auto_create_topics: self.auto_create_topics,
            num_partitions: self.num_partitions,
            default_replication_factor: self.default_replication_factor,
            min_insync_replicas: u16::try_from(cfg.min_insync_replicas).unwrap_or(u16::MAX),
            message_max_bytes: self.message_max_bytes,
            segment_bytes: crate::storage::DEFAULT_SEGMENT_BYTES,
            offsets_topic_partitions: self.offsets_topic_partitions,
            group_initial_rebalance_delay_ms: self.group_initial_rebalance_delay_ms,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error(transparent)]
    Security(#[from] SecurityError),
    /// The controllers refuse this broker's certificate, or it theirs: no retry helps.
    #[error("cannot join the cluster: {0}")]
    Refused(String),
    #[error("data directory {path}: {source}")]
    Dir { path: PathBuf, source: io::Error },
    #[error("recovering partitions: {0}")]
    Recovery(String),
    #[error("storage failed, stopping the broker: {0}")]
    Storage(String),
    #[error("cannot record the clean shutdown: {0}")]
    Marker(#[from] checkpoint::CheckpointError),
    #[error("--rule flush=... is not taken by a broker: use --flush")]
    FlushRule,
}

pub async fn run(args: BrokerArgs) -> Result<(), BrokerError> {
    if args.rules.iter().any(|r| r.name == "flush") {
        return Err(BrokerError::FlushRule);
    }
    let me = BrokerId(args.id);
    let stop = StopSignals::install();
    let dir_error = |source| BrokerError::Dir {
        path: args.dir.clone(),
        source,
    };
    std::fs::create_dir_all(&args.dir).map_err(dir_error)?;
    let clean_shutdown = take_marker(&args.dir).map_err(dir_error)?;
    let tls = args.tls.load(Some(&Role::Broker(me)))?.map(Arc::new);
    let specs = listener_specs(&args, tls.is_some())?;
    if tls.is_none() && (args.access.acls || specs.iter().any(|s| s.protocol.sasl())) {
        warn!(
            "logins or ACLs without a cluster certificate (--tls-cert): the links between \
             brokers and to the controllers are not authenticated, so anyone who reaches those \
             ports can change users and ACLs or pose as a broker"
        );
    }
    let mut listeners = Vec::new();
    for spec in &specs {
        listeners.push(Listener::bind(spec, tls.as_deref()).await?);
    }
    let address = BrokerAddress {
        internal: listeners[0].address.clone(),
        listeners: listeners
            .iter()
            .map(|l| (l.protocol, l.address.clone()))
            .collect(),
    };
    let flush = match args.flush {
        Flush::Always => FlushPolicy::Always,
        Flush::PageCache => FlushPolicy::PageCache,
    };
    let rules = Rules {
        flush,
        ..timing::rules(&args.rules)
    };
    // `--advertise` stands for the `--listen` listener, which also carries the internal links.
    let mut advertised = address.clone();
    if let Some(a) = &args.advertise {
        advertised.internal = a.clone();
        advertised
            .listeners
            .insert(listeners[0].protocol, a.clone());
    }
    let (commands, inbox) = mpsc::unbounded_channel();
    let controllers = args
        .controller
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(str::to_string)
        .collect();
    let (fatal, mut refused) = oneshot::channel();
    let cfg = timing::config_with(rules);
    let net = Arc::new(Net::new(
        advertised.clone(),
        controllers,
        commands.clone(),
        tls,
        fatal,
        isr::BrokerSession::new(me, clean_shutdown),
        cfg,
    ));
    // Rung by the replica thread whenever a high watermark moves; Kafka fetches waiting for
    // data (long polls) listen.
    let commits = Arc::new(Notify::new());
    let tracer = crate::trace::Tracer::start(args.trace.as_deref(), Node::Broker(me), cfg)
        .map_err(BrokerError::Recovery)?;
    let settings = args.topics.settings(&cfg);
    let delay = Duration::from_millis(settings.group_initial_rebalance_delay_ms);
    let mut groups = Coordinator::with_initial_delay(delay).with_rules(cfg.rules);
    if let Some(tracer) = tracer.clone() {
        // The coordinator's group changes go to the same trace as the replicas' steps.
        groups = groups.recording(Arc::new(move |group, now, change| {
            tracer.group(group, now, change)
        }));
    }
    let host = Host::open(
        me,
        cfg,
        args.dir.clone(),
        net.outbox.clone(),
        commits.clone(),
        tracer,
    )
    .map_err(BrokerError::Recovery)?
    .with_cleaner(
        host::Cleaner::start(
            commands.clone(),
            args.topics.log_cleaner_dedupe_buffer_size,
            args.topics.log_cleaner_io_max_bytes_per_second,
        )
        .map_err(dir_error)?,
    );
    let (finished, mut replicas_done) = oneshot::channel();
    std::thread::Builder::new()
        .name(format!("replicas-{me}"))
        .spawn(move || {
            let _ = finished.send(host.run(inbox));
        })
        .map_err(dir_error)?;
    announce(&format!(
        "isr broker {} listening on {}",
        me.0, address.internal
    ));
    for l in &listeners[1..] {
        announce(&format!(
            "isr broker {} listener {}://{}",
            me.0, l.protocol, l.address
        ));
    }
    info!(broker = %me, %address, %advertised, clean_shutdown,
        check_invariants = host::checks_invariants(), rules = ?rules.unsafe_switches(),
        acls = args.access.acls, tls = ?net.tls_role(), "broker started");

    let backend = Arc::new(BrokerBackend::new(
        net.clone(),
        commits,
        settings,
        &args.access,
        groups,
    ));
    for listener in listeners {
        tokio::spawn(net.clone().accept_loop(listener, backend.clone()));
    }
    tokio::spawn(net.clone().controller_session());
    tokio::spawn(ticks(commands.clone()));
    tokio::spawn(retention_checks(
        net.clone(),
        commands.clone(),
        args.topics.settings(&cfg),
        Duration::from_millis(args.topics.log_retention_check_interval_ms),
        Duration::from_millis(args.topics.log_cleaner_backoff_ms),
    ));

    tokio::select! {
        _ = stop.wait() => {}
        Ok(why) = &mut refused => return Err(BrokerError::Refused(why)),
        result = &mut replicas_done => {
            // The replica thread only stops on its own when storage failed; no marker, since
            // the log may be incomplete.
            let why = match result {
                Ok(Err(why)) => why,
                _ => "the replica thread ended".to_string(),
            };
            return Err(BrokerError::Storage(why));
        }
    }
    info!("shutting down cleanly");
    // Leadership moves now, not a session timeout after the process is gone. Without the
    // controller the broker still stops; its session then expires as after a crash.
    match net.controlled_shutdown().await {
        Ok(()) => info!("controlled shutdown: the controller has fenced this broker"),
        Err(why) => warn!(%why, "controlled shutdown not confirmed; stopping anyway"),
    }
    if commands.send(Command::Shutdown).is_ok() && matches!(replicas_done.await, Ok(Ok(()))) {
        checkpoint::write(&args.dir.join(CLEAN_SHUTDOWN_MARKER), &true)?;
    }
    Ok(())
}

/// The listeners to bind: `--listen` first, then each `--listener`; one per protocol, and with
/// a cluster certificate the first must be TLS (brokers and admin clients connect there with
/// mutual TLS).
fn listener_specs(args: &BrokerArgs, secured: bool) -> Result<Vec<ListenerSpec>, SecurityError> {
    let mut specs = vec![args.listen.clone()];
    for spec in &args.listeners {
        if specs.iter().any(|s| s.protocol == spec.protocol) {
            return Err(SecurityError::Config(format!(
                "two {} listeners: a broker has at most one listener per protocol",
                spec.protocol
            )));
        }
        specs.push(spec.clone());
    }
    if secured && !args.listen.protocol.tls() {
        return Err(SecurityError::Config(format!(
            "--listen {} is not TLS: with --tls-cert, other brokers and admin clients connect to \
             the first listener with mutual TLS, so make it SSL:// or SASL_SSL://",
            args.listen
        )));
    }
    Ok(specs)
}

/// Whether the last run ended cleanly; removes the marker, durably, so that a crash of this run
/// is not mistaken for a clean stop.
fn take_marker(dir: &Path) -> io::Result<bool> {
    let marker = dir.join(CLEAN_SHUTDOWN_MARKER);
    match std::fs::remove_file(&marker) {
        Ok(()) => {
            sync_dir(dir)?;
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// The retention pass: each topic's policy, from its configs in the metadata the controller
/// pushed, goes to the replica thread — every `cleaner_backoff` for compaction (and segment
/// rolling), and with deletion by time and size every `retention_interval`, as Kafka's cleaner
/// and retention checks run on their own schedules (15 s and 5 min by default). A topic
/// created or whose configs changed gets a pass of its own at once, without deletion, so that
/// its segments roll by its own configs from its first record ([`policy_changes`]). The offsets
/// topic is compacted and never deleted by time, as Kafka's is: deleting its oldest records
/// would lose groups' commits.
async fn retention_checks(
    net: Arc<Net>,
    commands: mpsc::UnboundedSender<Command>,
    settings: isr_kafka::BrokerSettings,
    retention_interval: Duration,
    cleaner_backoff: Duration,
) {
    let mut ticks = tokio::time::interval(cleaner_backoff.min(retention_interval));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    let mut last_deletion = tokio::time::Instant::now();
    loop {
        // `only`: the topics a change names; `None`, every topic.
        let (deleting, only) = tokio::select! {
            _ = ticks.tick() => {
                let deleting = last_deletion.elapsed() >= retention_interval;
                if deleting {
                    last_deletion = tokio::time::Instant::now();
                }
                (deleting, None)
            }
            changed = net.policy_changes.next() => (false, changed),
        };
        let Ok(view) = net.cluster_view().await else {
            continue;
        };
        let broker = isr_kafka::configs::BrokerConfigs {
            id: net.me,
            settings: &settings,
            dynamic: &view.broker_configs,
        };
        let empty = BTreeMap::new();
        let policies = view
            .topics
            .iter()
            .filter(|(name, _)| only.as_ref().is_none_or(|topics| topics.contains(*name)))
            .flat_map(|(name, ids)| {
                let overrides = view.topic_configs.get(name).unwrap_or(&empty);
                // The offsets topic is compacted and never deleted by time, whatever configs
                // it was created with (a cluster from before compaction created it without).
                let mut policy = if name == isr_kafka::offsets_topic::OFFSETS_TOPIC {
                    isr_kafka::configs::offsets_topic_retention(settings.segment_bytes)
                } else {
                    isr_kafka::configs::log_retention(overrides, &broker)
                };
                policy.delete &= deleting;
                ids.iter().map(move |&id| (id, policy))
            })
            .collect();
        let now_ms = timing::wall_clock_ms();
        if commands
            .send(Command::Retention { policies, now_ms })
            .is_err()
        {
            return;
        }
    }
}

async fn ticks(commands: mpsc::UnboundedSender<Command>) {
    let mut interval = tokio::time::interval(timing::TICK);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        if commands.send(Command::Tick).is_err() {
            return;
        }
    }
}

/// SIGTERM and SIGINT, caught from the moment this is created: a process installs it before
/// it announces itself, so a stop request can never arrive while the default action (dying
/// uncleanly) is still in place.
pub struct StopSignals {
    term: Option<Signal>,
    int: Option<Signal>,
}

impl StopSignals {
    pub fn install() -> StopSignals {
        StopSignals {
            term: signal(SignalKind::terminate()).ok(),
            int: signal(SignalKind::interrupt()).ok(),
        }
    }

    /// Resolves on the first SIGTERM or SIGINT.
    pub async fn wait(mut self) {
        match (&mut self.term, &mut self.int) {
            (Some(term), Some(int)) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
            }
            _ => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
}

/// Prints a line on stdout for whoever started this process (tests and `isr cluster` read the
/// bound address from it).
pub fn announce(line: &str) {
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}
