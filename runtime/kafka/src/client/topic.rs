//! `isr topic create|list|describe|delete|alter|add-partitions|delete-records`.

pub use super::args::{DeleteArgs, ListArgs, NamedArgs};
use super::cluster::{Cluster, PartitionView, Route, TopicView};
use super::error::{malformed, ClientError};
use crate::configs::{self, Source};
use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsTopic,
};
use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    BrokerId, CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest,
    CreateTopicsResponse, DeleteRecordsRequest, DeleteRecordsResponse, DeleteTopicsRequest,
    DeleteTopicsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use serde_json::json;
use std::io::Write;
use std::time::Duration;

/// How long the broker may take to carry out a topic change before answering
/// REQUEST_TIMED_OUT.
const ADMIN_TIMEOUT_MS: i32 = 30_000;
/// How long a created topic may take to reach the metadata of the broker that answers.
const CREATED_VISIBLE_WITHIN: Duration = Duration::from_secs(10);
/// DescribeConfigs resource type of topics.
const TOPIC: i8 = 2;
/// IncrementalAlterConfigs operations.
const SET: i8 = 0;
const DELETE: i8 = 1;

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
    /// Show a topic's partitions and every config, with where each value comes from.
    Describe(NamedArgs),
    /// Delete a topic, its partitions and their records.
    Delete(DeleteArgs),
    /// Set or reset a topic's configs.
    Alter(AlterArgs),
    /// Grow a topic to more partitions (new ones start empty).
    AddPartitions(AddPartitionsArgs),
    /// Delete a partition's records below an offset (DeleteRecords, KIP-107): its log start
    /// moves there, on the leader at once and on the followers as they fetch. Only committed
    /// records can be deleted: an offset beyond the high watermark is refused
    /// (OFFSET_OUT_OF_RANGE) and deletes nothing. Prints the new log start.
    DeleteRecords(DeleteRecordsArgs),
}

#[derive(Clone, Debug, clap::Args)]
pub struct DeleteRecordsArgs {
    /// A broker to start from: HOST:PORT, or several separated by commas.
    #[arg(long)]
    pub bootstrap: String,
    pub name: String,
    /// The partition's index in the topic.
    #[arg(long)]
    pub partition: u32,
    /// The new log start offset: every record below it is deleted (-1: the high watermark,
    /// every committed record).
    #[arg(long, allow_hyphen_values = true)]
    pub before: i64,
}

#[derive(Clone, Debug, clap::Args)]
pub struct CreateArgs {
    /// A broker to start from: HOST:PORT, or several separated by commas.
    #[arg(long)]
    pub bootstrap: String,
    pub name: String,
    /// Partitions (default: the broker's num.partitions).
    #[arg(long)]
    pub partitions: Option<u32>,
    /// Replicas of each partition (default: the broker's default.replication.factor).
    #[arg(long)]
    pub replication_factor: Option<u16>,
    /// Writes with acks=all need this many in-sync replicas (the broker's default if absent).
    #[arg(long)]
    pub min_insync_replicas: Option<u16>,
    /// A topic config, KEY=VALUE (repeatable), e.g. retention.ms=86400000.
    #[arg(long = "config", value_name = "KEY=VALUE", value_parser = key_value)]
    pub configs: Vec<(String, String)>,
    /// Each partition's replicas, as kafka-topics takes them: partitions separated by commas,
    /// their brokers by colons, the preferred leader first (`1:2,2:3,3:1`). Sets the partition
    /// count and the replication factor.
    #[arg(long, value_name = "B:B,B:B...", value_parser = replica_assignment,
          conflicts_with_all = ["partitions", "replication_factor"])]
    pub replica_assignment: Option<ReplicaAssignment>,
}

/// Each partition's broker ids, in partition order (`--replica-assignment`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaAssignment(pub Vec<Vec<i32>>);

/// `1:2,2:3` as each partition's broker ids.
fn replica_assignment(s: &str) -> Result<ReplicaAssignment, String> {
    s.split(',')
        .map(|partition| {
            partition
                .split(':')
                .map(|b| {
                    b.trim()
                        .parse::<i32>()
                        .ok()
                        .filter(|b| *b >= 0)
                        .ok_or_else(|| format!("`{b}` is not a broker id in `{s}`"))
                })
                .collect()
        })
        .collect::<Result<_, _>>()
        .map(ReplicaAssignment)
}

#[derive(Clone, Debug, clap::Args)]
pub struct AlterArgs {
    /// A broker to start from: HOST:PORT, or several separated by commas.
    #[arg(long)]
    pub bootstrap: String,
    pub name: String,
    /// Set a config, KEY=VALUE (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = key_value)]
    pub set: Vec<(String, String)>,
    /// Reset a config to its default (repeatable).
    #[arg(long = "delete", value_name = "KEY")]
    pub delete: Vec<String>,
}

#[derive(Clone, Debug, clap::Args)]
pub struct AddPartitionsArgs {
    /// A broker to start from: HOST:PORT, or several separated by commas.
    #[arg(long)]
    pub bootstrap: String,
    pub name: String,
    /// The topic's partition count afterwards (as kafka-topics --alter --partitions).
    #[arg(long)]
    pub partitions: u32,
    /// Every partition's replicas, the existing ones first, as kafka-topics --alter takes them
    /// (`1:2,2:3,3:1`): only the new partitions' lists are sent, and those brokers hold them,
    /// the preferred leader first. As many lists as --partitions.
    #[arg(long, value_name = "B:B,B:B...", value_parser = replica_assignment)]
    pub replica_assignment: Option<ReplicaAssignment>,
}

/// Parses `KEY=VALUE`.
fn key_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!(
            "expected KEY=VALUE; topic configs: {}",
            configs::topic_config_names().join(", ")
        )),
    }
}

/// Runs a topic command, printing to stdout.
pub async fn run(args: TopicArgs) -> Result<(), ClientError> {
    run_with(args, &mut std::io::stdout().lock()).await
}

pub async fn run_with(args: TopicArgs, out: &mut impl Write) -> Result<(), ClientError> {
    match args.command {
        TopicCommand::Create(a) => create(a, out).await,
        TopicCommand::List(a) => list(a, out).await,
        TopicCommand::Describe(a) => describe(a, out).await,
        TopicCommand::Delete(a) => delete(a, out).await,
        TopicCommand::Alter(a) => alter(a, out).await,
        TopicCommand::AddPartitions(a) => add_partitions(a, out).await,
        TopicCommand::DeleteRecords(a) => delete_records(a, out).await,
    }
}

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// The first error of an admin answer as a client error.
fn refused(code: i16, message: &Option<StrBytes>) -> Result<(), ClientError> {
    match ClientError::from_code(code, message.as_ref().map(|m| m.as_str())) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn output(out: &mut impl Write, text: &str) -> Result<(), ClientError> {
    out.write_all(text.as_bytes()).map_err(ClientError::Output)
}

/// Prints a JSON value on one line.
pub(super) fn print_json(
    out: &mut impl Write,
    value: &serde_json::Value,
) -> Result<(), ClientError> {
    writeln!(out, "{value}").map_err(ClientError::Output)
}

async fn create(args: CreateArgs, out: &mut impl Write) -> Result<(), ClientError> {
    let too_big = |what: &str| ClientError::Usage(format!("--{what} is too large"));
    let partitions = match args.partitions {
        Some(n) => i32::try_from(n).map_err(|_| too_big("partitions"))?,
        None => -1,
    };
    let replication_factor = match args.replication_factor {
        Some(n) => i16::try_from(n).map_err(|_| too_big("replication-factor"))?,
        None => -1,
    };
    let mut configs = args.configs.clone();
    if let Some(m) = args.min_insync_replicas {
        configs.push(("min.insync.replicas".into(), m.to_string()));
    }
    let assignments = args
        .replica_assignment
        .iter()
        .flat_map(|a| &a.0)
        .enumerate()
        .map(|(index, brokers)| {
            CreatableReplicaAssignment::default()
                .with_partition_index(index as i32)
                .with_broker_ids(brokers.iter().map(|&b| BrokerId(b)).collect())
        })
        .collect();
    let topic = CreatableTopic::default()
        .with_name(name(&args.name))
        .with_num_partitions(partitions)
        .with_replication_factor(replication_factor)
        .with_assignments(assignments)
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| {
                    CreatableTopicConfig::default()
                        .with_name(text(k))
                        .with_value(Some(text(v)))
                })
                .collect(),
        );
    let request = CreateTopicsRequest::default()
        .with_topics(vec![topic])
        .with_timeout_ms(ADMIN_TIMEOUT_MS);
    let mut cluster = Cluster::connect(&args.bootstrap).await?;
    cluster
        .send(Route::Admin, &request, |_, answer: CreateTopicsResponse| {
            answer
                .topics
                .iter()
                .try_for_each(|t| refused(t.error_code, &t.error_message))
        })
        .await?;
    // The controller has the topic; the broker answering metadata learns of it by the next
    // delta, a moment later.
    let deadline = tokio::time::Instant::now() + CREATED_VISIBLE_WITHIN;
    cluster.refresh().await?;
    while cluster.topic(&args.name).is_none() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        cluster.refresh().await?;
    }
    let created = cluster.existing_topic(&args.name)?;
    let factor = created.partitions.first().map_or(0, |p| p.replicas.len());
    output(
        out,
        &format!(
            "created topic {} ({} partitions, replication factor {factor})\n",
            args.name,
            created.partitions.len()
        ),
    )
}

fn ids(v: &[i32]) -> String {
    v.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
}

fn partition_line(p: &PartitionView) -> String {
    format!(
        "  {} leader={} epoch={} replicas={} isr={}\n",
        p.partition,
        p.leader,
        p.leader_epoch,
        ids(&p.replicas),
        ids(&p.isr)
    )
}

fn partition_json(p: &PartitionView) -> serde_json::Value {
    json!({
        "partition": p.partition,
        "leader": (p.leader >= 0).then_some(p.leader),
        "leader_epoch": p.leader_epoch,
        "replicas": p.replicas,
        "isr": p.isr,
    })
}

fn topic_json(t: &TopicView) -> serde_json::Value {
    json!({
        "topic": t.name,
        "partitions": t.partitions.iter().map(partition_json).collect::<Vec<_>>(),
    })
}

async fn list(args: ListArgs, out: &mut impl Write) -> Result<(), ClientError> {
    let cluster = Cluster::connect(&args.bootstrap).await?;
    if args.json {
        let topics: Vec<_> = cluster.topics().iter().map(topic_json).collect();
        return print_json(out, &json!(topics));
    }
    for t in cluster.topics() {
        output(
            out,
            &format!("{} partitions={}\n", t.name, t.partitions.len()),
        )?;
        for p in &t.partitions {
            output(out, &partition_line(p))?;
        }
    }
    Ok(())
}

/// One described config: name, value, source and whether it can be changed.
struct Config {
    name: String,
    value: Option<String>,
    source: &'static str,
    read_only: bool,
}

async fn describe(args: NamedArgs, out: &mut impl Write) -> Result<(), ClientError> {
    let mut cluster = Cluster::connect(&args.bootstrap).await?;
    let topic = cluster.existing_topic(&args.name)?.clone();
    let request =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(TOPIC)
            .with_resource_name(text(&args.name))
            .with_configuration_keys(None)]);
    let configs = cluster
        .send(
            Route::Admin,
            &request,
            |addr, answer: DescribeConfigsResponse| {
                let result =
                    answer.results.into_iter().next().ok_or_else(|| {
                        malformed(addr, "DescribeConfigs answer names no resource")
                    })?;
                refused(result.error_code, &result.error_message)?;
                Ok(result
                    .configs
                    .into_iter()
                    .map(|c| Config {
                        name: c.name.as_str().to_owned(),
                        value: c.value.map(|v| v.as_str().to_owned()),
                        source: Source::from_code(c.config_source).map_or("unknown", Source::name),
                        read_only: c.read_only,
                    })
                    .collect::<Vec<_>>())
            },
        )
        .await?;
    if args.json {
        let mut value = topic_json(&topic);
        value["topic_id"] = json!(topic.id.to_string());
        value["configs"] = configs
            .iter()
            .map(|c| {
                json!({"name": c.name, "value": c.value, "source": c.source,
                       "read_only": c.read_only})
            })
            .collect();
        return print_json(out, &value);
    }
    let factor = topic.partitions.first().map_or(0, |p| p.replicas.len());
    output(
        out,
        &format!(
            "{} partitions={} replication-factor={factor}\n",
            topic.name,
            topic.partitions.len()
        ),
    )?;
    output(out, &format!("topic-id={}\n", topic.id))?;
    for p in &topic.partitions {
        output(out, &partition_line(p))?;
    }
    output(out, "configs:\n")?;
    for c in &configs {
        let value = c.value.as_deref().unwrap_or("");
        output(out, &format!("  {}={value} ({})\n", c.name, c.source))?;
    }
    Ok(())
}

async fn delete_records(args: DeleteRecordsArgs, out: &mut impl Write) -> Result<(), ClientError> {
    if args.before < -1 {
        return Err(ClientError::Usage(format!(
            "--before {}: an offset, or -1 for the high watermark",
            args.before
        )));
    }
    let mut cluster = Cluster::connect(&args.bootstrap).await?;
    cluster.existing_topic(&args.name)?;
    let index = i32::try_from(args.partition)
        .map_err(|_| ClientError::Usage("--partition is too large".into()))?;
    let request = DeleteRecordsRequest::default()
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(name(&args.name))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(index)
                .with_offset(args.before)])])
        .with_timeout_ms(ADMIN_TIMEOUT_MS);
    let start = cluster
        .send(
            Route::Leader(&args.name, args.partition),
            &request,
            |addr, answer: DeleteRecordsResponse| {
                let p = answer
                    .topics
                    .first()
                    .and_then(|t| t.partitions.first())
                    .ok_or_else(|| malformed(addr, "DeleteRecords answer names no partition"))?;
                refused(p.error_code, &None)?;
                Ok(p.low_watermark)
            },
        )
        .await?;
    output(
        out,
        &format!("{}/{} log start {start}\n", args.name, args.partition),
    )
}

async fn delete(args: DeleteArgs, out: &mut impl Write) -> Result<(), ClientError> {
    let mut cluster = Cluster::connect(&args.bootstrap).await?;
    cluster.existing_topic(&args.name)?;
    // v6 names topics in `topics` (where a topic id may stand instead); earlier versions in
    // `topic_names`.
    let version = cluster
        .version_of::<DeleteTopicsRequest>(Route::Admin)
        .await?;
    let request = DeleteTopicsRequest::default().with_timeout_ms(ADMIN_TIMEOUT_MS);
    let request = if version >= 6 {
        request.with_topics(vec![
            DeleteTopicState::default().with_name(Some(name(&args.name)))
        ])
    } else {
        request.with_topic_names(vec![name(&args.name)])
    };
    cluster
        .send(Route::Admin, &request, |_, answer: DeleteTopicsResponse| {
            answer
                .responses
                .iter()
                .try_for_each(|r| refused(r.error_code, &r.error_message))
        })
        .await?;
    output(out, &format!("deleted topic {}\n", args.name))
}

async fn alter(args: AlterArgs, out: &mut impl Write) -> Result<(), ClientError> {
    if args.set.is_empty() && args.delete.is_empty() {
        return Err(ClientError::Usage(format!(
            "nothing to change: give --set KEY=VALUE or --delete KEY; topic configs: {}",
            configs::topic_config_names().join(", ")
        )));
    }
    let mut cluster = Cluster::connect(&args.bootstrap).await?;
    cluster.existing_topic(&args.name)?;
    let changes = args
        .set
        .iter()
        .map(|(k, v)| {
            AlterableConfig::default()
                .with_name(text(k))
                .with_config_operation(SET)
                .with_value(Some(text(v)))
        })
        .chain(args.delete.iter().map(|k| {
            AlterableConfig::default()
                .with_name(text(k))
                .with_config_operation(DELETE)
                .with_value(None)
        }))
        .collect();
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(TOPIC)
            .with_resource_name(text(&args.name))
            .with_configs(changes),
    ]);
    cluster
        .send(
            Route::Admin,
            &request,
            |_, answer: IncrementalAlterConfigsResponse| {
                answer
                    .responses
                    .iter()
                    .try_for_each(|r| refused(r.error_code, &r.error_message))
            },
        )
        .await?;
    let mut changed: Vec<String> = args.set.iter().map(|(k, v)| format!("{k}={v}")).collect();
    changed.extend(args.delete.iter().map(|k| format!("{k} reset")));
    output(
        out,
        &format!("altered topic {}: {}\n", args.name, changed.join(", ")),
    )
}

async fn add_partitions(args: AddPartitionsArgs, out: &mut impl Write) -> Result<(), ClientError> {
    let mut cluster = Cluster::connect(&args.bootstrap).await?;
    let have = cluster.existing_topic(&args.name)?.partitions.len();
    let count = i32::try_from(args.partitions)
        .map_err(|_| ClientError::Usage("--partitions is too large".into()))?;
    let assignments = match &args.replica_assignment {
        None => None,
        Some(a) if a.0.len() != args.partitions as usize => {
            return Err(ClientError::Usage(format!(
                "--replica-assignment lists {} partitions; --partitions is {}",
                a.0.len(),
                args.partitions
            )))
        }
        Some(a) => Some(
            a.0.iter()
                .skip(have)
                .map(|brokers| {
                    CreatePartitionsAssignment::default()
                        .with_broker_ids(brokers.iter().map(|&b| BrokerId(b)).collect())
                })
                .collect(),
        ),
    };
    let request = CreatePartitionsRequest::default()
        .with_timeout_ms(ADMIN_TIMEOUT_MS)
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(name(&args.name))
            .with_count(count)
            .with_assignments(assignments)]);
    cluster
        .send(
            Route::Admin,
            &request,
            |_, answer: CreatePartitionsResponse| {
                answer
                    .results
                    .iter()
                    .try_for_each(|r| refused(r.error_code, &r.error_message))
            },
        )
        .await?;
    output(
        out,
        &format!(
            "topic {} now has {} partitions (was {have})\n",
            args.name, args.partitions
        ),
    )
}
