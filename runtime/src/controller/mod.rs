//! `isr controller`: a controller process.
//!
//! It wraps [`isr::Controller`] (every decision: fencing, elections, ISR changes) with a store
//! that holds its metadata and the controller role ([`store`]), a clock, and connections to
//! brokers ([`connections`]). One task owns the state; connection tasks feed it events, so
//! every transition runs alone and in arrival order. With the file store the one controller is
//! always active; with etcd several processes share the store and one is active ([`active`])
//! while the others stand by ([`standby`]) and take over when it goes.

mod active;
mod connections;
mod isr_changes;
pub(crate) mod metadata;
pub mod records;
mod standby;
pub(crate) mod store;

use crate::broker::{announce, StopSignals};
use crate::security::{Role, SecurityError, TlsArgs};
use crate::wire::link;
use active::Ended;
use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::time::Duration;
use store::{Candidate, Store, StoreError, StoreSpec};
use tokio::sync::watch;
use tracing::{info, warn};

#[derive(clap::Args, Debug)]
pub struct ControllerArgs {
    /// This controller's id, unique among the controllers of a cluster.
    #[arg(long, default_value_t = 1)]
    pub id: u32,
    /// Address to listen on for brokers and admin clients (port 0: any free port, printed at
    /// start).
    #[arg(long, default_value = "127.0.0.1:9090")]
    pub listen: String,
    /// The address brokers and clients are told to reach this controller at (by the store,
    /// and by a standby naming the active controller), when it is not the one it listens on.
    /// Default: the address it listens on.
    #[arg(long, value_name = "HOST:PORT")]
    pub advertise: Option<String>,
    /// Directory for the cluster metadata: the file store, for a single controller.
    #[arg(long, required_unless_present = "store", conflicts_with = "store")]
    pub dir: Option<PathBuf>,
    /// A store several controllers share, one of them active:
    /// etcd://HOST:PORT[,HOST:PORT...][/PREFIX] (the prefix defaults to `isr`).
    #[arg(long, value_name = "etcd://HOST:PORT[,...]")]
    pub store: Option<String>,
    /// Seconds the controller role outlives the active controller's last word to etcd (its
    /// lease): how soon a standby takes over from a controller that died. etcd grants no less
    /// than 1.5 election timeouts (2 s with its defaults; 1 s with --election-timeout 500, as
    /// `isr cluster --etcd` runs it).
    #[arg(long, value_name = "SECS", default_value_t = 1,
        value_parser = clap::value_parser!(u64).range(1..=60))]
    pub lease: u64,
    /// Switch a core rule away from the safe protocol, as `isr-check --rule` does in the model
    /// (repeatable): `unclean-election=on`, `elr=off`... Only to reproduce a historical bug on
    /// real processes: every process of the cluster must be given the same switches.
    #[arg(long = "rule", value_name = "NAME=VALUE")]
    pub rules: Vec<crate::timing::RuleSwitch>,
    /// With a certificate (CN controller-<id>), every broker and admin client must connect
    /// with mutual TLS and a certificate from the same CA.
    #[command(flatten)]
    pub tls: TlsArgs,
    /// Record every input the controller was stepped with, and the effects that came back, as
    /// JSON lines in FILE, for `isr-check replay` (also: ISR_TRACE=DIR).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error("cannot listen on {address}: {source}")]
    Listen { address: String, source: io::Error },
    #[error("{0}")]
    Spec(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Security(#[from] SecurityError),
}

/// After a failed campaign (the store unreachable), wait this long before the next.
const CAMPAIGN_RETRY: Duration = Duration::from_millis(500);

pub async fn run(args: ControllerArgs) -> Result<(), ControllerError> {
    let stop = StopSignals::install();
    let spec = match (&args.store, &args.dir) {
        (Some(store), _) => StoreSpec::parse_etcd(store).map_err(ControllerError::Spec)?,
        (None, Some(dir)) => StoreSpec::File(dir.clone()),
        (None, None) => {
            return Err(ControllerError::Spec(
                "a controller needs --dir DIR or --store etcd://HOST:PORT[,...]".into(),
            ))
        }
    };
    let tls = args.tls.load(Some(&Role::Controller(args.id)))?;
    let (listener, bound) =
        link::listen(&args.listen)
            .await
            .map_err(|source| ControllerError::Listen {
                address: args.listen.clone(),
                source,
            })?;
    let address = args.advertise.clone().unwrap_or_else(|| bound.clone());
    let rules = crate::timing::rules(&args.rules);
    let me = Candidate {
        id: args.id,
        address: address.clone(),
        lease: Duration::from_secs(args.lease),
    };
    let mut store = Store::open(&spec, me).await?;
    announce(&format!("isr controller listening on {bound}"));
    info!(id = args.id, %bound, advertised = %address, store = ?spec,
        rules = ?rules.unsafe_switches(), tls = ?tls.as_ref().map(|t| t.role.to_string()),
        "controller started");
    let mut tracer = crate::trace::Tracer::start(
        args.trace.as_deref(),
        isr::Node::Controller,
        crate::timing::config_with(rules),
    )
    .map_err(ControllerError::Spec)?;
    let actor = active::Actor {
        id: args.id,
        address,
        rules,
    };
    let (events, mut inbox) = connections::inbox();
    let acceptor = tls
        .as_ref()
        .map(|t| tokio_rustls::TlsAcceptor::from(t.required.clone()));
    tokio::spawn(connections::accept_loop(listener, acceptor, events));
    let (stopping, mut stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        stop.wait().await;
        let _ = stopping.send(true);
    });
    let mut links = BTreeMap::new();
    loop {
        let won = tokio::select! {
            won = standby::stand_by(&mut store, &mut inbox, &mut links) => won,
            _ = stop_rx.wait_for(|&stop| stop) => return Ok(()),
        };
        let won = match won {
            Ok(won) => won,
            Err(e @ (StoreError::NewerFormat { .. } | StoreError::Corrupt { .. })) => {
                return Err(e.into())
            }
            Err(e) => {
                warn!(error = %e, "campaign failed; trying again");
                tokio::time::sleep(CAMPAIGN_RETRY).await;
                continue;
            }
        };
        let ended = active::act(
            &mut store,
            won,
            &actor,
            &mut inbox,
            &mut links,
            &mut stop_rx,
            &mut tracer,
        )
        .await;
        if let Ended::Stopped = ended {
            info!("stopped; the controller role is given up");
            return Ok(());
        }
    }
}
