//! `isr status`: the active controller, each partition's leader, epoch, AR, ISR, OSR and ELR
//! from the controller's metadata, and each replica's LEO, HW and lag from the brokers that
//! host it.

mod kafka;

use crate::security::{certificate_refusal, ClusterTls, SecurityError, TlsArgs};
use crate::timing;
use crate::wire::admin::{AdminError, ClusterView, ReplicaView, Request, Response};
use crate::wire::codec::FrameError;
use crate::wire::link::{self, Reader};
use crate::wire::rpc::{Rpc, RpcError};
use crate::wire::{codec, Frame, Peer};
use isr::{BrokerId, PartitionId};
use isr_kafka::auth::SecurityProtocol;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

#[derive(clap::Args, Debug)]
pub struct StatusArgs {
    /// Only this topic.
    pub topic: Option<String>,
    /// A broker to ask: HOST:PORT, or several separated by commas (tried in turn). The broker
    /// answers with the controller's metadata, and status then asks every live broker for the
    /// replicas it hosts.
    #[arg(long, required_unless_present = "controller")]
    pub bootstrap: Option<String>,
    /// Ask a controller directly instead (it answers even when every broker is down):
    /// HOST:PORT, or several separated by commas; a standby names the active one.
    #[arg(long, conflicts_with = "bootstrap")]
    pub controller: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// In a cluster with TLS: a certificate from the cluster CA to connect with.
    #[command(flatten)]
    pub tls: TlsArgs,
}

#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error("asking {address} for the cluster's metadata: {source}")]
    Controller { address: String, source: RpcError },
    #[error("cannot reach the controller at {address}: {reason}")]
    Unreachable { address: String, reason: String },
    #[error("status needs --bootstrap HOST:PORT[,HOST:PORT...] or --controller HOST:PORT")]
    NoAddress,
    #[error("unknown topic {0}")]
    UnknownTopic(String),
    #[error(transparent)]
    Security(#[from] SecurityError),
    #[error(transparent)]
    Kafka(#[from] isr_kafka::client::ClientError),
}

#[derive(Serialize)]
struct ReplicaRow {
    broker: BrokerId,
    /// `None` when the broker could not be asked.
    log_end_offset: Option<u64>,
    high_watermark: Option<u64>,
    /// The first offset the replica still holds (DeleteRecords and retention move it).
    log_start_offset: Option<u64>,
    /// How far the replica's log is durable (JSON only).
    flushed_offset: Option<u64>,
    /// How far the replica's LEO is behind the leader's.
    lag: Option<u64>,
    /// For a follower: its LEO as the leader last saw it in a fetch of the current epoch (what
    /// the leader's high watermark and ISR decisions go by).
    leader_view: Option<u64>,
    role: String,
}

/// What `status --json` prints.
#[derive(Serialize)]
struct Status {
    /// The active controller that made the metadata: `{"id": N, "epoch": E, "address": ...}`.
    controller: Option<ControllerRow>,
    brokers: Vec<BrokerRow>,
    partitions: Vec<PartitionRow>,
}

#[derive(Serialize)]
struct ControllerRow {
    id: u32,
    epoch: u32,
    address: String,
}

#[derive(Serialize)]
struct BrokerRow {
    id: BrokerId,
    address: String,
    alive: bool,
    /// How many of the active controller's metadata deltas the broker has applied, and how
    /// many it is behind; `null` if it did not answer.
    metadata_offset: Option<u64>,
    metadata_lag: Option<u64>,
    /// Deltas the broker ignored (older than its view, or after a gap, which has it ask for
    /// the whole view): counted, never applied.
    stale_deltas: Option<u64>,
}

#[derive(Serialize)]
struct PartitionRow {
    topic: String,
    partition: u32,
    /// The core's partition id; unknown (left out) when read over the Kafka protocol.
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<PartitionId>,
    leader: Option<BrokerId>,
    leader_epoch: u32,
    assigned: Vec<BrokerId>,
    isr: Vec<BrokerId>,
    osr: Vec<BrokerId>,
    elr: Vec<BrokerId>,
    replicas: Vec<ReplicaRow>,
}

/// Asks one node a question over a fresh admin connection (mutual TLS with `tls`).
async fn ask(
    address: &str,
    request: Request,
    tls: Option<&ClusterTls>,
) -> Result<Response, RpcError> {
    let (reader, link, _) = link::dial(address, Peer::Client, tls).await.map_err(|e| {
        RpcError::Dial(match &e {
            FrameError::Io(io) => certificate_refusal(io).unwrap_or_else(|| e.to_string()),
            other => other.to_string(),
        })
    })?;
    let rpc = Rpc::default();
    let answers = tokio::spawn(read_answers(reader, rpc.clone()));
    let answer = rpc.call(&link, request, timing::ADMIN_TIMEOUT).await;
    answers.abort();
    answer
}

async fn read_answers(mut reader: Reader, rpc: Rpc) {
    while let Ok(Some(frame)) = codec::read(&mut reader).await {
        if let Frame::Response { id, result } = frame {
            rpc.complete(id, result);
        }
    }
    rpc.abandon_all();
}

/// The controller's view, from `--controller`, or from the first `--bootstrap` broker that
/// answers; the error names the last address tried.
async fn view_from(
    args: &StatusArgs,
    tls: Option<&ClusterTls>,
) -> Result<ClusterView, StatusError> {
    let given = args.controller.as_ref().or(args.bootstrap.as_ref());
    view_of(given.map_or("", String::as_str), tls).await
}

/// The controller's view, asked of the first of `addresses` (comma-separated controllers or
/// brokers) that answers, following a standby's redirect to the active controller.
pub async fn view_of(
    addresses: &str,
    tls: Option<&ClusterTls>,
) -> Result<ClusterView, StatusError> {
    match ask_active(addresses, Request::Metadata, tls).await? {
        Response::Metadata(view) => Ok(view),
        other => Err(StatusError::Unreachable {
            address: addresses.to_string(),
            reason: format!("unexpected answer {other:?}"),
        }),
    }
}

/// Asks the active controller `request`, through the first of `addresses` (comma-separated
/// controllers, or brokers, which answer Metadata for it) that answers, following a
/// standby's redirect.
pub async fn ask_active(
    addresses: &str,
    request: Request,
    tls: Option<&ClusterTls>,
) -> Result<Response, StatusError> {
    let mut addresses: VecDeque<String> = Some(addresses)
        .map(|list| {
            list.split(',')
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let mut tried = BTreeSet::new();
    let mut last = StatusError::NoAddress;
    while let Some(address) = addresses.pop_front() {
        if !tried.insert(address.clone()) {
            continue;
        }
        match ask(&address, request.clone(), tls).await {
            Ok(answer) => return Ok(answer),
            // A standby controller names the active one: ask it next.
            Err(RpcError::Refused(AdminError::NotActive(Some(active)))) => {
                addresses.push_front(active.address)
            }
            Err(source) => last = StatusError::Controller { address, source },
        }
    }
    Err(last)
}

pub async fn run(args: StatusArgs) -> Result<(), StatusError> {
    // A Kafka client's credentials and no cluster certificate: what the Kafka protocol tells.
    let kafka_client =
        isr_kafka::client::security::current().protocol != SecurityProtocol::Plaintext;
    if let (Some(bootstrap), true, None) = (&args.bootstrap, kafka_client, &args.tls.tls_cert) {
        return over_kafka(bootstrap, &args).await;
    }
    let tls = args.tls.load(None)?;
    let view = view_from(&args, tls.as_ref()).await?;
    if let Some(topic) = &args.topic {
        if !view.topics.contains_key(topic) {
            return Err(StatusError::UnknownTopic(topic.clone()));
        }
    }
    let mut hosted: BTreeMap<(BrokerId, PartitionId), ReplicaView> = BTreeMap::new();
    let mut offsets: BTreeMap<BrokerId, (u64, u64)> = BTreeMap::new();
    for (&broker, info) in view.brokers.iter().filter(|(_, b)| b.alive) {
        let asked = ask(&info.address, Request::Replicas, tls.as_ref()).await;
        let Ok(Response::Replicas(replicas)) = asked else {
            // Paused or gone: one timeout is enough; it would not answer the next either.
            continue;
        };
        hosted.extend(replicas.into_iter().map(|r| ((broker, r.partition), r)));
        let asked = ask(&info.address, Request::MetadataOffset, tls.as_ref()).await;
        if let Ok(Response::MetadataOffset {
            offset,
            stale_deltas,
        }) = asked
        {
            offsets.insert(broker, (offset, stale_deltas));
        }
    }
    // The controller's own offset, asked of it (a broker's view carries the broker's).
    let controller_offset = match &view.controller {
        Some(c) => match ask(&c.address, Request::MetadataOffset, tls.as_ref()).await {
            Ok(Response::MetadataOffset { offset, .. }) => Some(offset),
            _ => None,
        },
        None => None,
    };
    let metadata = |id: &BrokerId| {
        let (offset, stale) = offsets.get(id).copied().unzip();
        let lag = controller_offset
            .zip(offset)
            .map(|(c, b)| c.saturating_sub(b));
        (offset, lag, stale)
    };
    let rows = rows(&view, &hosted, args.topic.as_deref());
    if args.json {
        let status = Status {
            controller: view.controller.as_ref().map(|c| ControllerRow {
                id: c.id,
                epoch: c.epoch.0,
                address: c.address.clone(),
            }),
            brokers: view
                .brokers
                .iter()
                .map(|(&id, b)| {
                    let (metadata_offset, metadata_lag, stale_deltas) = metadata(&id);
                    BrokerRow {
                        id,
                        address: b.address.clone(),
                        alive: b.alive,
                        metadata_offset,
                        metadata_lag,
                        stale_deltas,
                    }
                })
                .collect(),
            partitions: rows,
        };
        match serde_json::to_string_pretty(&status) {
            Ok(json) => println!("{json}"),
            Err(e) => eprintln!("isr: cannot encode status: {e}"),
        }
    } else {
        print_table(&view, &rows, metadata);
    }
    Ok(())
}

/// `isr status` over the Kafka protocol ([`kafka`]).
async fn over_kafka(bootstrap: &str, args: &StatusArgs) -> Result<(), StatusError> {
    let view = kafka::view(bootstrap, args.topic.as_deref()).await?;
    let brokers: Vec<_> = view
        .brokers
        .iter()
        .map(|(id, address)| {
            serde_json::json!({"id": id, "address": address, "alive": true,
            "metadata_offset": null, "metadata_lag": null, "stale_deltas": null})
        })
        .collect();
    if args.json {
        let status = serde_json::json!({
            "source": "kafka",
            "controller": view.controller.map(|id| serde_json::json!({"id": id})),
            "brokers": brokers,
            "partitions": view.rows,
        });
        match serde_json::to_string_pretty(&status) {
            Ok(json) => println!("{json}"),
            Err(e) => eprintln!("isr: cannot encode status: {e}"),
        }
        return Ok(());
    }
    let controller = view
        .controller
        .map_or("unknown".to_string(), |c| c.to_string());
    println!(
        "controller {controller} (read over the Kafka protocol: the controller's epoch, the ELR, \
         followers' LEO and HW and metadata offsets need the cluster certificate: --tls-cert, \
         --tls-key, --tls-ca)"
    );
    for (id, address) in &view.brokers {
        println!("broker {id} {address} alive");
    }
    print_partitions(&view.rows);
    Ok(())
}

fn rows(
    view: &ClusterView,
    hosted: &BTreeMap<(BrokerId, PartitionId), ReplicaView>,
    only: Option<&str>,
) -> Vec<PartitionRow> {
    let mut rows = Vec::new();
    for (topic, ids) in view
        .topics
        .iter()
        .filter(|(t, _)| only.is_none_or(|o| o == *t))
    {
        for (index, id) in ids.iter().enumerate() {
            let Some(state) = view.partitions.get(id) else {
                continue;
            };
            let leader = state.leader.and_then(|l| hosted.get(&(l, *id)));
            let leader_leo = leader.map(|r| r.log_end_offset.0);
            let replicas = state
                .assigned
                .iter()
                .map(|&b| {
                    let r = hosted.get(&(b, *id));
                    let leo = r.map(|r| r.log_end_offset.0);
                    ReplicaRow {
                        broker: b,
                        log_end_offset: leo,
                        high_watermark: r.map(|r| r.high_watermark.0),
                        log_start_offset: r.map(|r| r.log_start_offset.0),
                        flushed_offset: r.map(|r| r.flushed_offset.0),
                        lag: leader_leo.zip(leo).map(|(l, f)| l.saturating_sub(f)),
                        leader_view: leader
                            .and_then(|l| l.followers.get(&b).copied().flatten())
                            .map(|o| o.0),
                        role: r.map_or("unreachable".to_string(), |r| match &r.failed {
                            Some(why) => format!("failed: {why}"),
                            None => r.role.clone(),
                        }),
                    }
                })
                .collect();
            rows.push(PartitionRow {
                topic: topic.clone(),
                partition: index as u32,
                id: Some(*id),
                leader: state.leader,
                leader_epoch: state.leader_epoch.0,
                assigned: state.assigned.clone(),
                isr: state.isr.iter().copied().collect(),
                osr: state.osr(),
                elr: state.elr.iter().copied().collect(),
                replicas,
            });
        }
    }
    rows
}

fn list(ids: &[BrokerId]) -> String {
    let names: Vec<String> = ids.iter().map(|b| b.0.to_string()).collect();
    format!("[{}]", names.join(","))
}

fn opt(v: Option<u64>) -> String {
    v.map_or("-".to_string(), |v| v.to_string())
}

fn print_table(
    view: &ClusterView,
    rows: &[PartitionRow],
    metadata: impl Fn(&BrokerId) -> (Option<u64>, Option<u64>, Option<u64>),
) {
    match &view.controller {
        Some(c) => println!("controller {} epoch {} at {}", c.id, c.epoch.0, c.address),
        None => println!("controller unknown"),
    }
    for (id, b) in &view.brokers {
        let state = if b.alive { "alive" } else { "fenced" };
        let (offset, lag, stale) = metadata(id);
        println!(
            "broker {} {} {state}, metadata offset {} (lag {}, {} stale deltas)",
            id.0,
            b.address,
            opt(offset),
            opt(lag),
            opt(stale)
        );
    }
    print_partitions(rows);
}

fn print_partitions(rows: &[PartitionRow]) {
    for row in rows {
        let leader = row.leader.map_or("none".to_string(), |l| l.0.to_string());
        let id = row.id.map_or(String::new(), |id| format!(" ({id})"));
        println!(
            "{}/{}{id} leader {leader} epoch {} AR {} ISR {} OSR {} ELR {}",
            row.topic,
            row.partition,
            row.leader_epoch,
            list(&row.assigned),
            list(&row.isr),
            list(&row.osr),
            list(&row.elr),
        );
        for r in &row.replicas {
            let seen = r
                .leader_view
                .map_or(String::new(), |o| format!(", leader saw LEO {o}"));
            println!(
                "  broker {} log start {} LEO {} HW {} lag {} ({}{seen})",
                r.broker.0,
                opt(r.log_start_offset),
                opt(r.log_end_offset),
                opt(r.high_watermark),
                opt(r.lag),
                r.role
            );
        }
    }
}
