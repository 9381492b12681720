//! `isr acl add|list|remove`: the cluster's ACLs (CreateAcls, DescribeAcls, DeleteAcls).
//!
//! An ACL allows (or, with `--permission deny`, denies) a principal from a host some
//! operations on one resource: `--topic NAME`, `--group NAME`, `--transactional-id NAME` or
//! `--cluster`, named literally or, with `--pattern prefixed`, by prefix.

use super::cluster::{Cluster, Route};
use super::error::{malformed, ClientError};
use super::topic::print_json;
use crate::auth::acl::{
    Acl, Operation, PatternFilter, PatternType, Permission, ResourceType, CLUSTER_NAME, WILDCARD,
};
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;
use serde_json::json;
use std::io::Write;

/// The filter code for "any" resource type, operation or permission.
const ANY: i8 = 1;

#[derive(Clone, Debug, clap::Args)]
pub struct AclArgs {
    #[command(subcommand)]
    pub command: AclCommand,
}

#[derive(Clone, Debug, clap::Subcommand)]
pub enum AclCommand {
    /// Allow (or deny) a principal operations on a resource.
    Add(AddArgs),
    /// List ACLs, all or those matching the given flags.
    List(FilterArgs),
    /// Remove the ACLs matching the given flags (at least one).
    Remove(FilterArgs),
}

/// Exactly one resource.
#[derive(Clone, Debug, clap::Args)]
#[group(required = true, multiple = false)]
pub struct Resource {
    /// A topic (`*` for every topic).
    #[arg(long)]
    pub topic: Option<String>,
    /// A consumer group (`*` for every group).
    #[arg(long)]
    pub group: Option<String>,
    /// A transactional id.
    #[arg(long)]
    pub transactional_id: Option<String>,
    /// The cluster (topic creation, ACL and user administration, idempotent writes).
    #[arg(long)]
    pub cluster: bool,
}

/// At most one resource.
#[derive(Clone, Debug, clap::Args)]
#[group(required = false, multiple = false)]
pub struct ResourceFilter {
    #[arg(long)]
    pub topic: Option<String>,
    #[arg(long)]
    pub group: Option<String>,
    #[arg(long)]
    pub transactional_id: Option<String>,
    #[arg(long)]
    pub cluster: bool,
}

#[derive(Clone, Debug, clap::Args)]
pub struct AddArgs {
    /// A broker to start from: HOST:PORT, or several separated by commas.
    #[arg(long)]
    pub bootstrap: String,
    /// Whom the ACL is for: User:NAME, or User:* for everyone.
    #[arg(long)]
    pub principal: String,
    /// Where the principal connects from: an address, or * for anywhere.
    #[arg(long, default_value = WILDCARD)]
    pub host: String,
    /// Read, Write, Create, Delete, Describe, Alter, DescribeConfigs, AlterConfigs,
    /// IdempotentWrite or All (repeatable).
    #[arg(long = "operation", required = true, value_parser = operation)]
    pub operations: Vec<Operation>,
    /// allow or deny.
    #[arg(long, default_value = "allow", value_parser = permission)]
    pub permission: Permission,
    /// literal (the name, or * for every name) or prefixed (every name starting so).
    #[arg(long, default_value = "literal", value_parser = pattern)]
    pub pattern: PatternType,
    #[command(flatten)]
    pub resource: Resource,
}

#[derive(Clone, Debug, clap::Args)]
pub struct FilterArgs {
    /// A broker to start from: HOST:PORT, or several separated by commas.
    #[arg(long)]
    pub bootstrap: String,
    #[arg(long)]
    pub principal: Option<String>,
    #[arg(long)]
    pub host: Option<String>,
    #[arg(long = "operation", value_parser = operation)]
    pub operation: Option<Operation>,
    #[arg(long, value_parser = permission)]
    pub permission: Option<Permission>,
    /// Only ACLs of this pattern type (default: any, with the name given exactly).
    #[arg(long, value_parser = pattern)]
    pub pattern: Option<PatternType>,
    #[command(flatten)]
    pub resource: ResourceFilter,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

fn operation(name: &str) -> Result<Operation, String> {
    Operation::from_name(name).ok_or_else(|| format!("{name}: one of {}", Operation::names()))
}

fn permission(name: &str) -> Result<Permission, String> {
    Permission::from_name(name).ok_or_else(|| format!("{name}: allow or deny"))
}

fn pattern(name: &str) -> Result<PatternType, String> {
    PatternType::from_name(name).ok_or_else(|| format!("{name}: literal or prefixed"))
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// The resource type and name the flags give.
fn resource(
    topic: &Option<String>,
    group: &Option<String>,
    transactional_id: &Option<String>,
    cluster: bool,
) -> Option<(ResourceType, String)> {
    match (topic, group, transactional_id) {
        (Some(t), _, _) => Some((ResourceType::Topic, t.clone())),
        (_, Some(g), _) => Some((ResourceType::Group, g.clone())),
        (_, _, Some(t)) => Some((ResourceType::TransactionalId, t.clone())),
        _ if cluster => Some((ResourceType::Cluster, CLUSTER_NAME.to_owned())),
        _ => None,
    }
}

pub async fn run(args: AclArgs) -> Result<(), ClientError> {
    run_with(args, &mut std::io::stdout().lock()).await
}

pub async fn run_with(args: AclArgs, out: &mut impl Write) -> Result<(), ClientError> {
    match args.command {
        AclCommand::Add(a) => add(a, out).await,
        AclCommand::List(a) => list(a, out).await,
        AclCommand::Remove(a) => remove(a, out).await,
    }
}

/// One ACL as a line: `allow User:alice * Read topic literal orders`.
fn line(acl: &Acl) -> String {
    format!(
        "{} {} {} {} {} {} {}",
        acl.permission,
        acl.principal,
        acl.host,
        acl.operation,
        acl.resource_type,
        acl.pattern,
        acl.resource_name
    )
}

fn to_json(acl: &Acl) -> serde_json::Value {
    json!({
        "permission": acl.permission.name(),
        "principal": acl.principal,
        "host": acl.host,
        "operation": acl.operation.name(),
        "resource_type": acl.resource_type.name(),
        "pattern": acl.pattern.name(),
        "name": acl.resource_name,
    })
}

async fn add(args: AddArgs, out: &mut impl Write) -> Result<(), ClientError> {
    let r = &args.resource;
    let (resource_type, name) = resource(&r.topic, &r.group, &r.transactional_id, r.cluster)
        .ok_or_else(|| ClientError::Usage("name a resource".into()))?;
    let acls: Vec<Acl> = args
        .operations
        .iter()
        .map(|&operation| Acl {
            resource_type,
            resource_name: name.clone(),
            pattern: args.pattern,
            principal: args.principal.clone(),
            host: args.host.clone(),
            operation,
            permission: args.permission,
        })
        .collect();
    for acl in &acls {
        acl.validate().map_err(ClientError::Usage)?;
    }
    let creations = acls
        .iter()
        .map(|a| {
            AclCreation::default()
                .with_resource_type(a.resource_type.code())
                .with_resource_name(text(&a.resource_name))
                .with_resource_pattern_type(a.pattern.code())
                .with_principal(text(&a.principal))
                .with_host(text(&a.host))
                .with_operation(a.operation.code())
                .with_permission_type(a.permission.code())
        })
        .collect();
    let mut cluster = Cluster::connect(&args.bootstrap).await?;
    let request = CreateAclsRequest::default().with_creations(creations);
    cluster
        .send(Route::Admin, &request, |_, a: CreateAclsResponse| {
            for r in &a.results {
                if let Some(e) = ClientError::from_code(
                    r.error_code,
                    r.error_message.as_ref().map(|m| m.as_str()),
                ) {
                    return Err(e);
                }
            }
            Ok(())
        })
        .await?;
    for acl in &acls {
        writeln!(out, "added {}", line(acl)).map_err(ClientError::Output)?;
    }
    Ok(())
}

/// The filter fields of a DescribeAcls or DeleteAcls request:
/// (type, name, pattern, principal, host, operation, permission).
type Filter = (
    i8,
    Option<StrBytes>,
    i8,
    Option<StrBytes>,
    Option<StrBytes>,
    i8,
    i8,
);

fn filter(args: &FilterArgs) -> Filter {
    let r = &args.resource;
    let resource = resource(&r.topic, &r.group, &r.transactional_id, r.cluster);
    (
        resource.as_ref().map_or(ANY, |(t, _)| t.code()),
        resource.map(|(_, n)| text(&n)),
        args.pattern.map_or(PatternFilter::Any.code(), |p| p.code()),
        args.principal.as_deref().map(text),
        args.host.as_deref().map(text),
        args.operation.map_or(ANY, Operation::code),
        args.permission.map_or(ANY, Permission::code),
    )
}

/// An ACL from a response's codes and names.
#[allow(clippy::too_many_arguments)]
fn acl(
    addr: &str,
    resource_type: i8,
    name: &StrBytes,
    pattern: i8,
    principal: &StrBytes,
    host: &StrBytes,
    operation: i8,
    permission: i8,
) -> Result<Acl, ClientError> {
    Ok(Acl {
        resource_type: ResourceType::from_code(resource_type)
            .ok_or_else(|| malformed(addr, "unknown resource type"))?,
        resource_name: name.as_str().to_owned(),
        pattern: PatternType::from_code(pattern)
            .ok_or_else(|| malformed(addr, "unknown pattern type"))?,
        principal: principal.as_str().to_owned(),
        host: host.as_str().to_owned(),
        operation: Operation::from_code(operation)
            .ok_or_else(|| malformed(addr, "unknown operation"))?,
        permission: Permission::from_code(permission)
            .ok_or_else(|| malformed(addr, "unknown permission"))?,
    })
}

fn print(acls: &[Acl], json: bool, prefix: &str, out: &mut impl Write) -> Result<(), ClientError> {
    if json {
        return print_json(out, &json!(acls.iter().map(to_json).collect::<Vec<_>>()));
    }
    for a in acls {
        writeln!(out, "{prefix}{}", line(a)).map_err(ClientError::Output)?;
    }
    Ok(())
}

async fn list(args: FilterArgs, out: &mut impl Write) -> Result<(), ClientError> {
    let (kind, name, pattern, principal, host, operation, permission) = filter(&args);
    let request = DescribeAclsRequest::default()
        .with_resource_type_filter(kind)
        .with_resource_name_filter(name)
        .with_pattern_type_filter(pattern)
        .with_principal_filter(principal)
        .with_host_filter(host)
        .with_operation(operation)
        .with_permission_type(permission);
    let mut cluster = Cluster::connect(&args.bootstrap).await?;
    let acls = cluster
        .send(Route::Admin, &request, |addr, a: DescribeAclsResponse| {
            if let Some(e) =
                ClientError::from_code(a.error_code, a.error_message.as_ref().map(|m| m.as_str()))
            {
                return Err(e);
            }
            let mut acls = Vec::new();
            for r in &a.resources {
                for d in &r.acls {
                    acls.push(acl(
                        addr,
                        r.resource_type,
                        &r.resource_name,
                        r.pattern_type,
                        &d.principal,
                        &d.host,
                        d.operation,
                        d.permission_type,
                    )?);
                }
            }
            Ok(acls)
        })
        .await?;
    print(&acls, args.json, "", out)
}

async fn remove(args: FilterArgs, out: &mut impl Write) -> Result<(), ClientError> {
    let (kind, name, pattern, principal, host, operation, permission) = filter(&args);
    if kind == ANY && principal.is_none() && host.is_none() && operation == ANY && permission == ANY
    {
        return Err(ClientError::Usage(
            "name what to remove: a resource, --principal, --host, --operation or --permission"
                .into(),
        ));
    }
    let request = DeleteAclsRequest::default().with_filters(vec![DeleteAclsFilter::default()
        .with_resource_type_filter(kind)
        .with_resource_name_filter(name)
        .with_pattern_type_filter(pattern)
        .with_principal_filter(principal)
        .with_host_filter(host)
        .with_operation(operation)
        .with_permission_type(permission)]);
    let mut cluster = Cluster::connect(&args.bootstrap).await?;
    let removed = cluster
        .send(Route::Admin, &request, |addr, a: DeleteAclsResponse| {
            let result = a
                .filter_results
                .first()
                .ok_or_else(|| malformed(addr, "no result for the filter"))?;
            if let Some(e) = ClientError::from_code(
                result.error_code,
                result.error_message.as_ref().map(|m| m.as_str()),
            ) {
                return Err(e);
            }
            result
                .matching_acls
                .iter()
                .map(|m| {
                    acl(
                        addr,
                        m.resource_type,
                        &m.resource_name,
                        m.pattern_type,
                        &m.principal,
                        &m.host,
                        m.operation,
                        m.permission_type,
                    )
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .await?;
    print(&removed, args.json, "removed ", out)
}
