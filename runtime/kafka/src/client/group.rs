//! `isr group list|describe|delete`: consumer groups, their members and their committed
//! offsets with the lag behind each partition's end.

pub use super::args::{DeleteArgs, ListArgs, NamedArgs};
use super::cluster::{Cluster, Route};
use super::consume::{self, Start};
use super::error::{malformed, ClientError};
use super::topic::print_json;
use crate::consumer_protocol::assigned_partitions;
use kafka_protocol::messages::{
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
    GroupId, ListGroupsRequest, ListGroupsResponse, OffsetFetchRequest, OffsetFetchResponse,
};
use kafka_protocol::protocol::StrBytes;
use serde_json::json;
use std::collections::BTreeMap;
use std::io::Write;

/// GROUP_ID_NOT_FOUND.
const GROUP_ID_NOT_FOUND: i16 = 69;

#[derive(Clone, Debug, clap::Args)]
pub struct GroupArgs {
    #[command(subcommand)]
    pub command: GroupCommand,
}

#[derive(Clone, Debug, clap::Subcommand)]
pub enum GroupCommand {
    /// List the consumer groups of the cluster, with their state.
    List(ListArgs),
    /// Show a group's state, members and assignments, and its committed offsets with the lag
    /// behind each partition's end.
    Describe(NamedArgs),
    /// Delete a group without members, and its committed offsets.
    Delete(DeleteArgs),
}

/// Runs a group command, printing to stdout.
pub async fn run(args: GroupArgs) -> Result<(), ClientError> {
    run_with(args, &mut std::io::stdout().lock()).await
}

pub async fn run_with(args: GroupArgs, out: &mut impl Write) -> Result<(), ClientError> {
    match args.command {
        GroupCommand::List(a) => list(a, out).await,
        GroupCommand::Describe(a) => describe(a, out).await,
        GroupCommand::Delete(a) => delete(a, out).await,
    }
}

fn group_id(group: &str) -> GroupId {
    GroupId(StrBytes::from_string(group.to_owned()))
}

fn output(out: &mut impl Write, text: &str) -> Result<(), ClientError> {
    out.write_all(text.as_bytes()).map_err(ClientError::Output)
}

/// A group as ListGroups answers it.
struct Listed {
    state: String,
    protocol_type: String,
}

/// Every group of the cluster: each broker lists those it coordinates.
async fn groups(cluster: &mut Cluster) -> Result<BTreeMap<String, Listed>, ClientError> {
    let mut all = BTreeMap::new();
    for broker in cluster.broker_ids() {
        let request = ListGroupsRequest::default();
        let listed = cluster
            .send(
                Route::Broker(broker),
                &request,
                |_, a: ListGroupsResponse| match ClientError::from_code(a.error_code, None) {
                    Some(e) => Err(e),
                    None => Ok(a.groups),
                },
            )
            .await?;
        for g in listed {
            all.insert(
                g.group_id.0.as_str().to_owned(),
                Listed {
                    state: g.group_state.as_str().to_owned(),
                    protocol_type: g.protocol_type.as_str().to_owned(),
                },
            );
        }
    }
    Ok(all)
}

/// The error for a group that does not exist, naming those that do.
async fn no_such_group(cluster: &mut Cluster, group: &str) -> ClientError {
    let names = match groups(cluster).await {
        Ok(all) if all.is_empty() => "none".to_owned(),
        Ok(all) => all.into_keys().collect::<Vec<_>>().join(", "),
        Err(e) => format!("(cannot list them: {e})"),
    };
    ClientError::Usage(format!("no group {group}; groups: {names}"))
}

async fn list(args: ListArgs, out: &mut impl Write) -> Result<(), ClientError> {
    let mut cluster = Cluster::connect(&args.bootstrap).await?;
    let all = groups(&mut cluster).await?;
    if args.json {
        let value: Vec<_> = all
            .iter()
            .map(|(g, l)| json!({"group": g, "state": l.state, "protocol_type": l.protocol_type}))
            .collect();
        return print_json(out, &json!(value));
    }
    for (g, l) in &all {
        let kind = if l.protocol_type.is_empty() {
            "-"
        } else {
            &l.protocol_type
        };
        output(
            out,
            &format!("{g} state={} protocol-type={kind}\n", l.state),
        )?;
    }
    Ok(())
}

/// One member of a described group.
struct Member {
    member_id: String,
    instance_id: Option<String>,
    client_id: String,
    assigned: Vec<(String, Vec<i32>)>,
}

/// One committed offset of a described group, with its partition's end.
struct Position {
    topic: String,
    partition: i32,
    committed: i64,
    metadata: String,
    end: Option<i64>,
}

async fn describe(args: NamedArgs, out: &mut impl Write) -> Result<(), ClientError> {
    let mut cluster = Cluster::connect(&args.bootstrap).await?;
    let group = args.name.as_str();
    let request = DescribeGroupsRequest::default().with_groups(vec![group_id(group)]);
    let described = cluster
        .send(
            Route::Coordinator(group),
            &request,
            |addr, a: DescribeGroupsResponse| {
                let g = a
                    .groups
                    .into_iter()
                    .next()
                    .ok_or_else(|| malformed(addr, "DescribeGroups answer names no group"))?;
                match ClientError::from_code(g.error_code, None) {
                    Some(e) => Err(e),
                    None => Ok(g),
                }
            },
        )
        .await?;
    let positions = offsets(&mut cluster, group).await?;
    let state = described.group_state.as_str().to_owned();
    if state == "Dead" && positions.is_empty() {
        return Err(no_such_group(&mut cluster, group).await);
    }
    let members: Vec<Member> = described
        .members
        .iter()
        .map(|m| Member {
            member_id: m.member_id.as_str().to_owned(),
            instance_id: m.group_instance_id.as_ref().map(|i| i.as_str().to_owned()),
            client_id: m.client_id.as_str().to_owned(),
            assigned: if described.protocol_type.as_str() == "consumer" {
                assigned_partitions(&m.member_assignment)
            } else {
                Vec::new()
            },
        })
        .collect();
    let protocol_type = described.protocol_type.as_str();
    let protocol = described.protocol_data.as_str();
    if args.json {
        let value = json!({
            "group": group,
            "state": state,
            "protocol_type": protocol_type,
            "protocol": protocol,
            "members": members.iter().map(|m| json!({
                "member_id": m.member_id,
                "instance_id": m.instance_id,
                "client_id": m.client_id,
                "assignment": m.assigned.iter()
                    .map(|(t, ps)| json!({"topic": t, "partitions": ps}))
                    .collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "offsets": positions.iter().map(|p| json!({
                "topic": p.topic,
                "partition": p.partition,
                "offset": p.committed,
                "metadata": p.metadata,
                "log_end_offset": p.end,
                "lag": p.end.map(|e| (e - p.committed).max(0)),
            })).collect::<Vec<_>>(),
        });
        return print_json(out, &value);
    }
    let kind = if protocol_type.is_empty() {
        "-"
    } else {
        protocol_type
    };
    output(
        out,
        &format!(
            "group {group} state={state} protocol-type={kind} protocol={} members={}\n",
            if protocol.is_empty() { "-" } else { protocol },
            members.len()
        ),
    )?;
    for m in &members {
        let assigned: Vec<String> = m
            .assigned
            .iter()
            .map(|(t, ps)| {
                let ps: Vec<String> = ps.iter().map(i32::to_string).collect();
                format!("{t}:{}", ps.join(","))
            })
            .collect();
        output(
            out,
            &format!(
                "  member {} client={} instance={} assigned={}\n",
                m.member_id,
                m.client_id,
                m.instance_id.as_deref().unwrap_or("-"),
                if assigned.is_empty() {
                    "-".to_owned()
                } else {
                    assigned.join(" ")
                }
            ),
        )?;
    }
    for p in &positions {
        let (end, lag) = match p.end {
            Some(e) => (e.to_string(), (e - p.committed).max(0).to_string()),
            None => ("?".into(), "?".into()),
        };
        output(
            out,
            &format!(
                "  {} {} offset={} end={end} lag={lag}{}\n",
                p.topic,
                p.partition,
                p.committed,
                if p.metadata.is_empty() {
                    String::new()
                } else {
                    format!(" metadata={:?}", p.metadata)
                }
            ),
        )?;
    }
    Ok(())
}

/// Every committed offset of the group, with each partition's end (None when its leader
/// cannot say, for instance while a new one is elected).
async fn offsets(cluster: &mut Cluster, group: &str) -> Result<Vec<Position>, ClientError> {
    // No topics: every partition the group committed.
    let request = OffsetFetchRequest::default()
        .with_group_id(group_id(group))
        .with_topics(None);
    let committed = cluster
        .send(
            Route::Coordinator(group),
            &request,
            |_, a: OffsetFetchResponse| match ClientError::from_code(a.error_code, None) {
                Some(e) => Err(e),
                None => Ok(a.topics),
            },
        )
        .await?;
    let mut positions = Vec::new();
    for t in committed {
        let topic = t.name.0.as_str().to_owned();
        for p in t.partitions.into_iter().filter(|p| p.error_code == 0) {
            let end = match u32::try_from(p.partition_index) {
                Ok(index) => consume::resolve(cluster, &topic, index, Start::Latest)
                    .await
                    .ok(),
                Err(_) => None,
            };
            positions.push(Position {
                topic: topic.clone(),
                partition: p.partition_index,
                committed: p.committed_offset,
                metadata: p
                    .metadata
                    .map(|m| m.as_str().to_owned())
                    .unwrap_or_default(),
                end,
            });
        }
    }
    Ok(positions)
}

async fn delete(args: DeleteArgs, out: &mut impl Write) -> Result<(), ClientError> {
    let mut cluster = Cluster::connect(&args.bootstrap).await?;
    let group = args.name.as_str();
    let request = DeleteGroupsRequest::default().with_groups_names(vec![group_id(group)]);
    let code = cluster
        .send(
            Route::Coordinator(group),
            &request,
            |addr, a: DeleteGroupsResponse| {
                let r = a
                    .results
                    .first()
                    .ok_or_else(|| malformed(addr, "DeleteGroups answer names no group"))?;
                // Stale routes are retried by `send`; the rest is answered below.
                match ClientError::from_code(r.error_code, None) {
                    Some(e) if e.is_stale_route() => Err(e),
                    _ => Ok(r.error_code),
                }
            },
        )
        .await?;
    match code {
        0 => output(out, &format!("deleted group {group}\n")),
        GROUP_ID_NOT_FOUND => Err(no_such_group(&mut cluster, group).await),
        code => Err(ClientError::Kafka {
            code,
            message: match code {
                68 => "the group still has members: stop its consumers first".into(),
                _ => String::new(),
            },
        }),
    }
}
