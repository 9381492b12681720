//! DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics and brokers (the
//! names, defaults and checks are in [`crate::configs`]).

use crate::auth::acl::{Operation, ResourceType, CLUSTER_NAME};
use crate::backend::{Backend, BackendError, ClusterMetadata};
use crate::configs::{self, BrokerConfigs, ConfigOp, ConfigResource, Described, Kind};
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse as IncrementalResourceResponse;
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;

/// Kafka's resource type codes.
const TOPIC: i8 = 2;
const BROKER: i8 = 4;
/// IncrementalAlterConfigs operations.
const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

fn text(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

/// The resource a request names, or why isr does not serve it.
/// Whether the caller may do `op` (DescribeConfigs, AlterConfigs) on a resource's configs:
/// a topic's, or the brokers' (the cluster's, to the authorizer).
fn authorize<B: Backend>(
    backend: &B,
    op: Operation,
    resource: &ConfigResource,
) -> Result<(), BackendError> {
    match resource {
        ConfigResource::Topic(name) => backend.authorize(op, ResourceType::Topic, name),
        ConfigResource::Broker(_) => backend.authorize(op, ResourceType::Cluster, CLUSTER_NAME),
    }
}

fn resource(kind: i8, name: &str) -> Result<ConfigResource, BackendError> {
    match kind {
        TOPIC => Ok(ConfigResource::Topic(name.to_owned())),
        BROKER => Ok(ConfigResource::Broker(name.to_owned())),
        other => Err(BackendError::InvalidRequest(format!(
            "resource type {other} is not supported: topics ({TOPIC}) and brokers ({BROKER})"
        ))),
    }
}

/// The configs of one resource, as isr holds them.
fn describe(
    resource: &ConfigResource,
    cluster: &ClusterMetadata,
    broker: &BrokerConfigs<'_>,
) -> Result<Vec<Described>, BackendError> {
    match resource {
        ConfigResource::Topic(name) => {
            crate::names::check_topic(name)?;
            let topic = cluster
                .topics
                .iter()
                .find(|t| &t.name == name)
                .ok_or(BackendError::UnknownTopicOrPartition)?;
            let min_isr = topic
                .partitions
                .first()
                .map_or(0, |p| p.min_insync_replicas);
            Ok(configs::describe_topic(&topic.configs, min_isr, broker))
        }
        // The cluster-wide default: only what was set dynamically.
        ConfigResource::Broker(id) if id.is_empty() => Ok(broker
            .describe()
            .into_iter()
            .filter_map(|mut d| {
                let layer = d
                    .synonyms
                    .iter()
                    .find(|s| s.2 == configs::Source::DynamicDefaultBroker)?
                    .clone();
                d.value = layer.1.clone();
                d.source = layer.2;
                d.synonyms = vec![layer];
                Some(d)
            })
            .collect()),
        ConfigResource::Broker(id) if id.parse::<u32>().ok() == Some(broker.id.0) => {
            Ok(broker.describe())
        }
        ConfigResource::Broker(id) => Err(BackendError::InvalidRequest(format!(
            "this is broker {}: ask broker {id} for its own configs",
            broker.id.0
        ))),
    }
}

pub async fn describe_configs<B: Backend>(
    backend: &B,
    request: DescribeConfigsRequest,
    version: i16,
) -> DescribeConfigsResponse {
    let cluster = backend.metadata().await;
    let results = request
        .resources
        .iter()
        .map(|r| {
            let answer = DescribeConfigsResult::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            let described = cluster.as_ref().map_err(Clone::clone).and_then(|cluster| {
                let broker = BrokerConfigs {
                    id: cluster.this_broker,
                    settings: backend.settings(),
                    dynamic: &cluster.broker_configs,
                };
                let resource = resource(r.resource_type, r.resource_name.as_str())?;
                authorize(backend, Operation::DescribeConfigs, &resource)?;
                describe(&resource, cluster, &broker)
            });
            match described {
                Ok(configs) => {
                    // Null asks for every config (an empty list, as in Kafka, for none).
                    let wanted = |d: &Described| {
                        r.configuration_keys
                            .as_ref()
                            .is_none_or(|keys| keys.iter().any(|k| k.as_str() == d.name))
                    };
                    answer.with_configs(
                        configs
                            .into_iter()
                            .filter(wanted)
                            .map(|d| config(d, &request, version))
                            .collect(),
                    )
                }
                Err(e) => answer
                    .with_error_code(e.code())
                    .with_error_message(Some(text(e.detail()))),
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

fn config(
    d: Described,
    request: &DescribeConfigsRequest,
    version: i16,
) -> DescribeConfigsResourceResult {
    let mut c = DescribeConfigsResourceResult::default()
        .with_name(StrBytes::from_static_str(d.name))
        .with_value(Some(text(d.value)))
        .with_read_only(d.read_only)
        .with_config_source(d.source as i8);
    if request.include_synonyms {
        c = c.with_synonyms(
            d.synonyms
                .into_iter()
                .map(|(name, value, source)| {
                    DescribeConfigsSynonym::default()
                        .with_name(StrBytes::from_static_str(name))
                        .with_value(Some(text(value)))
                        .with_source(source as i8)
                })
                .collect(),
        );
    }
    if version >= 3 {
        c = c.with_config_type(d.kind as i8);
        if request.include_documentation {
            c = c.with_documentation(Some(StrBytes::from_static_str(d.doc)));
        }
    }
    c
}

/// One resource of an AlterConfigs or IncrementalAlterConfigs request: its type, its name,
/// and its operations (or why they cannot be carried out).
type Change = (i8, StrBytes, Result<Vec<ConfigOp>, BackendError>);

/// A list config's value with `values` (comma-separated) appended, each unless already there,
/// or subtracted: Kafka's APPEND and SUBTRACT. Other configs refuse both (INVALID_CONFIG).
fn list_change(current: &Described, append: bool, values: &str) -> Result<String, BackendError> {
    if current.kind != Kind::List {
        return Err(BackendError::InvalidConfig(format!(
            "{}: APPEND and SUBTRACT apply to list configs only",
            current.name
        )));
    }
    let items = |v: &str| -> Vec<String> {
        v.split(',')
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let mut list = items(&current.value);
    for value in items(values) {
        if append && !list.contains(&value) {
            list.push(value);
        } else if !append {
            list.retain(|x| *x != value);
        }
    }
    Ok(list.join(","))
}

/// Checks and (unless `validate_only`) applies each resource's change, in order: each
/// resource's type, name, error code and message.
async fn alter_each<B: Backend>(
    backend: &B,
    changes: Vec<Change>,
    replace: bool,
    validate_only: bool,
) -> Vec<(i8, StrBytes, i16, Option<StrBytes>)> {
    let mut outcomes = Vec::with_capacity(changes.len());
    for (kind, name, ops) in changes {
        let outcome = async {
            let resource = resource(kind, name.as_str())?;
            let ops = ops?;
            authorize(backend, Operation::AlterConfigs, &resource)?;
            configs::check_change(&resource, &ops)?;
            if validate_only {
                return Ok(());
            }
            backend.alter_configs(resource, ops, replace).await
        }
        .await;
        let (code, message) = match outcome {
            Ok(()) => (0, None),
            Err(e) => (e.code(), Some(text(e.detail()))),
        };
        outcomes.push((kind, name, code, message));
    }
    outcomes
}

/// AlterConfigs: each resource's overrides become exactly those given.
pub async fn alter_configs<B: Backend>(
    backend: &B,
    request: AlterConfigsRequest,
) -> AlterConfigsResponse {
    let changes = request
        .resources
        .into_iter()
        .map(|r| {
            let ops = r
                .configs
                .iter()
                .map(|c| {
                    let name = c.name.as_str().to_owned();
                    match &c.value {
                        Some(v) => ConfigOp::Set(name, v.as_str().to_owned()),
                        None => ConfigOp::Delete(name),
                    }
                })
                .collect();
            (r.resource_type, r.resource_name, Ok(ops))
        })
        .collect();
    let outcomes = alter_each(backend, changes, true, request.validate_only).await;
    AlterConfigsResponse::default().with_responses(
        outcomes
            .into_iter()
            .map(|(kind, name, code, message)| {
                AlterConfigsResourceResponse::default()
                    .with_resource_type(kind)
                    .with_resource_name(name)
                    .with_error_code(code)
                    .with_error_message(message)
            })
            .collect(),
    )
}

/// IncrementalAlterConfigs: SET and DELETE each name; APPEND and SUBTRACT add values to or
/// remove them from a list config's current value (its override, else its default), as
/// Kafka's controller does, and are refused for other configs.
pub async fn incremental_alter_configs<B: Backend>(
    backend: &B,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    // The current values, for APPEND and SUBTRACT (read once; the change itself is then a SET).
    let cluster = backend.metadata().await;
    let changes = request
        .resources
        .into_iter()
        .map(|r| {
            let current = |name: &str| -> Result<Described, BackendError> {
                let cluster = cluster.as_ref().map_err(Clone::clone)?;
                let broker = BrokerConfigs {
                    id: cluster.this_broker,
                    settings: backend.settings(),
                    dynamic: &cluster.broker_configs,
                };
                let resource = resource(r.resource_type, r.resource_name.as_str())?;
                describe(&resource, cluster, &broker)?
                    .into_iter()
                    .find(|d| d.name == name)
                    .ok_or_else(|| BackendError::InvalidConfig(format!("unknown config {name}")))
            };
            let ops = r
                .configs
                .iter()
                .map(|c| {
                    let name = c.name.as_str().to_owned();
                    match (c.config_operation, &c.value) {
                        (SET, Some(v)) => Ok(ConfigOp::Set(name, v.as_str().to_owned())),
                        (DELETE, _) => Ok(ConfigOp::Delete(name)),
                        (op @ (SET | APPEND | SUBTRACT), None) => Err(BackendError::InvalidConfig(
                            format!("{name}: operation {op} needs a value"),
                        )),
                        (op @ (APPEND | SUBTRACT), Some(v)) => {
                            let value = list_change(&current(&name)?, op == APPEND, v.as_str())?;
                            Ok(ConfigOp::Set(name, value))
                        }
                        (op, _) => Err(BackendError::InvalidConfig(format!(
                            "{name}: operation {op} is not one of 0 SET, 1 DELETE, 2 APPEND, \
                             3 SUBTRACT"
                        ))),
                    }
                })
                .collect();
            (r.resource_type, r.resource_name, ops)
        })
        .collect();
    let outcomes = alter_each(backend, changes, false, request.validate_only).await;
    IncrementalAlterConfigsResponse::default().with_responses(
        outcomes
            .into_iter()
            .map(|(kind, name, code, message)| {
                IncrementalResourceResponse::default()
                    .with_resource_type(kind)
                    .with_resource_name(name)
                    .with_error_code(code)
                    .with_error_message(message)
            })
            .collect(),
    )
}
