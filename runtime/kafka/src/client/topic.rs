//! `isr topic create` and `isr topic list`.

use super::cluster::{Cluster, Route};
use super::error::ClientError;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use std::io::Write;

/// How long the broker may take to create a topic before answering REQUEST_TIMED_OUT.
const CREATE_TIMEOUT_MS: i32 = 30_000;

#[derive(Clone, Debug, clap::Args)]
pub struct TopicArgs {
    #[command(subcommand)]
    pub command: TopicCommand,
}

#[derive(Clone, Debug, clap::Subcommand)]
pub enum TopicCommand {
    /// Create a topic.
    Create(CreateArgs),
    /// List topics with each partition's leader, replicas and ISR.
    List(ListArgs),
}

#[derive(Clone, Debug, clap::Args)]
pub struct CreateArgs {
    /// A broker to start from: HOST:PORT, or several separated by commas.
    #[arg(long)]
    pub bootstrap: String,
    pub name: String,
    #[arg(long)]
    pub partitions: u32,
    #[arg(long)]
    pub replication_factor: u16,
    /// Writes with acks=all need this many in-sync replicas (the broker's default if absent).
    #[arg(long)]
    pub min_insync_replicas: Option<u16>,
}

#[derive(Clone, Debug, clap::Args)]
pub struct ListArgs {
    /// A broker to start from: HOST:PORT, or several separated by commas.
    #[arg(long)]
    pub bootstrap: String,
}

/// Runs a topic command, printing to stdout.
pub async fn run(args: TopicArgs) -> Result<(), ClientError> {
    run_with(args, &mut std::io::stdout().lock()).await
}

pub async fn run_with(args: TopicArgs, out: &mut impl Write) -> Result<(), ClientError> {
    match args.command {
        TopicCommand::Create(a) => create(a, out).await,
        TopicCommand::List(a) => list(a, out).await,
    }
}

async fn create(args: CreateArgs, out: &mut impl Write) -> Result<(), ClientError> {
    let too_big = |what: &str| ClientError::Usage(format!("--{what} is too large"));
    let mut topic = CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_string(args.name.clone())))
        .with_num_partitions(i32::try_from(args.partitions).map_err(|_| too_big("partitions"))?)
        .with_replication_factor(
            i16::try_from(args.replication_factor).map_err(|_| too_big("replication-factor"))?,
        );
    if let Some(m) = args.min_insync_replicas {
        topic = topic.with_configs(vec![CreatableTopicConfig::default()
            .with_name(StrBytes::from_static_str("min.insync.replicas"))
            .with_value(Some(StrBytes::from_string(m.to_string())))]);
    }
    let request = CreateTopicsRequest::default()
        .with_topics(vec![topic])
        .with_timeout_ms(CREATE_TIMEOUT_MS);
    let mut cluster = Cluster::connect(&args.bootstrap).await?;
    cluster
        .send(Route::Admin, &request, |_, answer: CreateTopicsResponse| {
            for result in &answer.topics {
                let message = result.error_message.as_ref().map(|m| m.as_str());
                if let Some(e) = ClientError::from_code(result.error_code, message) {
                    return Err(e);
                }
            }
            Ok(())
        })
        .await?;
    writeln!(
        out,
        "created topic {} ({} partitions, replication factor {})",
        args.name, args.partitions, args.replication_factor
    )
    .map_err(ClientError::Output)
}

fn ids(v: &[i32]) -> String {
    v.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
}

async fn list(args: ListArgs, out: &mut impl Write) -> Result<(), ClientError> {
    let cluster = Cluster::connect(&args.bootstrap).await?;
    for t in cluster.topics() {
        writeln!(out, "{} partitions={}", t.name, t.partitions.len())
            .map_err(ClientError::Output)?;
        for p in &t.partitions {
            writeln!(
                out,
                "  {} leader={} epoch={} replicas={} isr={}",
                p.partition,
                p.leader,
                p.leader_epoch,
                ids(&p.replicas),
                ids(&p.isr)
            )
            .map_err(ClientError::Output)?;
        }
    }
    Ok(())
}
