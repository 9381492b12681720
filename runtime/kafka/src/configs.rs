//! Topic and broker configs: the names isr knows, their defaults, how values are checked, and
//! the values a broker enforces. CreateTopics, DescribeConfigs, AlterConfigs and
//! IncrementalAlterConfigs all go through here, so a name or value is judged alike everywhere.
//!
//! What takes effect: `max.message.bytes` (and the broker's `message.max.bytes`) bound every
//! produced batch; `min.insync.replicas` is the partition's floor in the core; `retention.ms`,
//! `retention.bytes`, `segment.bytes` and `segment.ms` are each broker's retention policy, and
//! `cleanup.policy`, `delete.retention.ms`, `min.cleanable.dirty.ratio`,
//! `min.compaction.lag.ms` and `max.compaction.lag.ms` its compaction
//! ([`log_retention`]; a compacted topic refuses keyless records, [`compacted`]).
//! `message.timestamp.type=LogAppendTime` has the leader stamp each batch
//! ([`log_append_time`]); `compression.type` has it recompress a batch in another codec
//! ([`compression`]). Settings isr cannot honour are refused rather than silently ignored:
//! per-topic unclean election.

use crate::backend::{BackendError, BrokerSettings};
use crate::compression::Codec;
use isr::BrokerId;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Kafka's default `message.max.bytes`: 1 MiB plus the record batch overhead.
pub const MESSAGE_MAX_BYTES: u32 = 1_048_588;
/// Seven days, Kafka's default `log.retention.ms` and `log.roll.ms`.
const WEEK_MS: &str = "604800000";

/// What a config change applies to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ConfigResource {
    Topic(String),
    /// A broker's dynamic configs: `""` is the cluster-wide default, a broker id one broker.
    Broker(String),
}

/// One change to a resource's config overrides.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConfigOp {
    Set(String, String),
    /// Back to the default.
    Delete(String),
}

/// A config's type, with Kafka's DescribeConfigs code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Boolean = 1,
    String = 2,
    Int = 3,
    Long = 5,
    Double = 6,
    List = 7,
}

/// Where a described value comes from: Kafka's ConfigSource codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Topic = 1,
    DynamicBroker = 2,
    DynamicDefaultBroker = 3,
    StaticBroker = 4,
    Default = 5,
}

impl Source {
    /// The source of a DescribeConfigs code.
    pub fn from_code(code: i8) -> Option<Source> {
        [
            Source::Topic,
            Source::DynamicBroker,
            Source::DynamicDefaultBroker,
            Source::StaticBroker,
            Source::Default,
        ]
        .into_iter()
        .find(|s| *s as i8 == code)
    }

    /// A short name for command-line output.
    pub fn name(self) -> &'static str {
        match self {
            Source::Topic => "topic",
            Source::DynamicBroker => "broker",
            Source::DynamicDefaultBroker => "cluster",
            Source::StaticBroker => "static",
            Source::Default => "default",
        }
    }
}

/// One config as DescribeConfigs reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Described {
    pub name: &'static str,
    pub value: String,
    pub source: Source,
    pub read_only: bool,
    pub kind: Kind,
    pub doc: &'static str,
    /// Where the value could come from, most specific first (Kafka's synonyms).
    pub synonyms: Vec<(&'static str, String, Source)>,
}

/// A topic config and the broker config that supplies its default.
struct TopicDef {
    name: &'static str,
    broker: &'static str,
    kind: Kind,
    doc: &'static str,
    check: fn(&str) -> Result<(), String>,
}

/// The topic configs isr knows, by name.
const TOPIC: &[TopicDef] = &[
    TopicDef {
        name: "cleanup.policy",
        broker: "log.cleanup.policy",
        kind: Kind::List,
        doc: "delete: old segments are deleted by retention.ms and retention.bytes; compact: \
              the cleaner keeps the latest record of each key below the high watermark \
              (records need keys); compact,delete: both.",
        check: cleanup_policy,
    },
    TopicDef {
        name: "compression.type",
        broker: "compression.type",
        kind: Kind::String,
        doc: "producer: batches are stored as the producer compressed them; uncompressed, \
              gzip, snappy, lz4 or zstd: a batch in another codec is recompressed with this one.",
        check: |v| Codec::parse(v).map(|_| ()),
    },
    TopicDef {
        name: "delete.retention.ms",
        broker: "log.cleaner.delete.retention.ms",
        kind: Kind::Long,
        doc: "How long a tombstone (a record with a null value) stays in a compacted topic \
              after it was written, so consumers see the delete.",
        check: |v| int_in(v, 0, i64::MAX),
    },
    TopicDef {
        name: "file.delete.delay.ms",
        broker: "log.segment.delete.delay.ms",
        kind: Kind::Long,
        doc: "Accepted; a segment retention or a cleaning removes is unlinked at once: a read \
              in flight keeps it through its open handle, which is what Kafka's delay is for.",
        check: |v| int_in(v, 0, i64::MAX),
    },
    TopicDef {
        name: "flush.ms",
        broker: "log.flush.interval.ms",
        kind: Kind::Long,
        doc: "A log with records not yet fsynced is fsynced once its last flush is this old, \
              checked at each retention pass (every log.cleaner.backoff.ms); the default, \
              never: Kafka's, which leaves durability to replication.",
        check: |v| int_in(v, 0, i64::MAX),
    },
    TopicDef {
        name: "max.compaction.lag.ms",
        broker: "log.cleaner.max.compaction.lag.ms",
        kind: Kind::Long,
        doc: "A compacted log whose oldest uncleaned record is older than this is cleaned \
              whatever its dirty ratio, and its active segment rolls at least this often.",
        check: |v| int_in(v, 1, i64::MAX),
    },
    TopicDef {
        name: "max.message.bytes",
        broker: "message.max.bytes",
        kind: Kind::Int,
        doc: "The largest record batch a producer may write (MESSAGE_TOO_LARGE above).",
        check: |v| int_in(v, 0, crate::batch::MAX_BATCH as i64),
    },
    TopicDef {
        name: "message.format.version",
        broker: "log.message.format.version",
        kind: Kind::String,
        doc: "Accepted and ignored, as Kafka 3.x does: records are stored as the producer \
              wrote them, in the v2 format.",
        check: format_version,
    },
    TopicDef {
        name: "message.timestamp.type",
        broker: "log.message.timestamp.type",
        kind: Kind::String,
        doc: "CreateTime: records keep the producer's timestamps; LogAppendTime: the leader \
              stamps each batch with its own time.",
        check: |v| match v {
            "CreateTime" | "LogAppendTime" => Ok(()),
            _ => Err("must be CreateTime or LogAppendTime".into()),
        },
    },
    TopicDef {
        name: "min.cleanable.dirty.ratio",
        broker: "log.cleaner.min.cleanable.ratio",
        kind: Kind::Double,
        doc: "The cleaner cleans a compacted log once this share of its closed segments' \
              bytes below the high watermark is not cleaned yet.",
        check: |v| match v.trim().parse::<f64>() {
            Ok(r) if (0.0..=1.0).contains(&r) => Ok(()),
            _ => Err("must be a number from 0 to 1".into()),
        },
    },
    TopicDef {
        name: "min.compaction.lag.ms",
        broker: "log.cleaner.min.compaction.lag.ms",
        kind: Kind::Long,
        doc: "A record stays uncompacted at least this long: segments holding a newer one \
              are not cleaned.",
        check: |v| int_in(v, 0, i64::MAX),
    },
    TopicDef {
        name: "min.insync.replicas",
        broker: "min.insync.replicas",
        kind: Kind::Int,
        doc:
            "Writes with acks=all need this many in-sync replicas; at most the replication factor.",
        check: |v| int_in(v, 1, i64::from(i16::MAX)),
    },
    TopicDef {
        name: "retention.bytes",
        broker: "log.retention.bytes",
        kind: Kind::Long,
        doc: "The oldest segments are deleted while the log without them stays at least this \
              large; -1: never by size.",
        check: |v| int_in(v, -1, i64::MAX),
    },
    TopicDef {
        name: "retention.ms",
        broker: "log.retention.ms",
        kind: Kind::Long,
        doc: "Segments whose newest record is older than this are deleted; -1: never by time.",
        check: |v| int_in(v, -1, i64::MAX),
    },
    TopicDef {
        name: "segment.bytes",
        broker: "log.segment.bytes",
        kind: Kind::Int,
        doc: "The active segment rolls once it is this large.",
        check: |v| int_in(v, 14, i64::from(i32::MAX)),
    },
    TopicDef {
        name: "segment.ms",
        broker: "log.roll.ms",
        kind: Kind::Long,
        doc: "The active segment rolls once a record is this much newer than its first.",
        check: |v| int_in(v, 1, i64::MAX),
    },
    TopicDef {
        name: "unclean.leader.election.enable",
        broker: "unclean.leader.election.enable",
        kind: Kind::Boolean,
        doc: "false: only replicas holding every committed record are elected.",
        check: |v| {
            only(
                v,
                "false",
                "unclean election is not a per-topic setting in isr",
            )
        },
    },
];

/// Broker configs that may be changed at run time (cluster-wide or per broker).
const DYNAMIC_BROKER: &[&str] = &["message.max.bytes", KERBEROS_RELOGIN];

/// A SASL/GSSAPI (Kerberos) setting Kafka lets an admin change at run time, and librdkafka's
/// admin tests change. Accepted, checked and described; it has no effect, since isr offers no
/// GSSAPI, as on a Kafka broker without GSSAPI enabled.
const KERBEROS_RELOGIN: &str = "sasl.kerberos.min.time.before.relogin";

/// `cleanup.policy`: `delete`, `compact`, or both, comma-separated, as Kafka takes it.
fn cleanup_policy(value: &str) -> Result<(), String> {
    let known = value
        .split(',')
        .map(str::trim)
        .all(|p| p.eq_ignore_ascii_case("delete") || p.eq_ignore_ascii_case("compact"));
    if known && !value.trim().is_empty() {
        Ok(())
    } else {
        Err("must be delete, compact, or compact,delete".into())
    }
}

fn only(value: &str, allowed: &str, why: &str) -> Result<(), String> {
    if value.eq_ignore_ascii_case(allowed) {
        Ok(())
    } else {
        Err(format!("only {allowed} is supported: {why}"))
    }
}

/// A Kafka version as `message.format.version` takes it (`0.10.2`, `2.8`, `3.0-IV1`): Kafka
/// 3.x accepts and ignores it, and so does isr; anything else is refused as Kafka refuses it.
fn format_version(value: &str) -> Result<(), String> {
    let (version, iv) = match value.split_once("-IV") {
        Some((v, iv)) => (v, Some(iv)),
        None => (value, None),
    };
    let parts: Vec<&str> = version.split('.').collect();
    let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if (2..=4).contains(&parts.len()) && parts.iter().all(|p| numeric(p)) && iv.is_none_or(numeric)
    {
        Ok(())
    } else {
        Err("must be a Kafka version, such as 2.8 or 3.0-IV1".into())
    }
}

fn int_in(value: &str, lo: i64, hi: i64) -> Result<(), String> {
    match value.trim().parse::<i64>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(()),
        _ => Err(format!("must be an integer from {lo} to {hi}")),
    }
}

fn topic_def(name: &str) -> Option<&'static TopicDef> {
    TOPIC.iter().find(|d| d.name == name)
}

fn invalid(name: &str, value: &str, why: &str) -> BackendError {
    BackendError::InvalidConfig(format!("{name}={value}: {why}"))
}

/// The names of the topic configs isr knows.
pub fn topic_config_names() -> Vec<&'static str> {
    TOPIC.iter().map(|d| d.name).collect()
}

/// The names of the topic configs isr knows, for error messages.
fn known_topic_configs() -> String {
    topic_config_names().join(", ")
}

/// Checks a topic config override (CreateTopics, AlterConfigs).
pub fn check_topic_config(name: &str, value: &str) -> Result<(), BackendError> {
    let def = topic_def(name).ok_or_else(|| {
        BackendError::InvalidConfig(format!(
            "unknown topic config {name}; known: {}",
            known_topic_configs()
        ))
    })?;
    (def.check)(value).map_err(|why| invalid(name, value, &why))
}

/// Checks a change to a broker's dynamic configs.
pub fn check_broker_config(name: &str, value: &str) -> Result<(), BackendError> {
    if !DYNAMIC_BROKER.contains(&name) {
        return Err(BackendError::InvalidConfig(format!(
            "{name} cannot be changed at run time; dynamic broker configs: {}",
            DYNAMIC_BROKER.join(", ")
        )));
    }
    let check = match TOPIC.iter().find(|d| d.broker == name) {
        Some(def) => def.check,
        None => |v: &str| int_in(v, 0, i64::MAX),
    };
    check(value).map_err(|why| invalid(name, value, &why))
}

/// Checks a change to a resource: its name, then every operation.
pub fn check_change(resource: &ConfigResource, ops: &[ConfigOp]) -> Result<(), BackendError> {
    match resource {
        ConfigResource::Topic(name) => crate::names::check_topic(name)?,
        ConfigResource::Broker(id) if id.is_empty() || id.parse::<u32>().is_ok() => {}
        ConfigResource::Broker(id) => {
            return Err(BackendError::InvalidRequest(format!(
                "broker resource {id:?}: a broker id, or empty for the cluster default"
            )))
        }
    }
    for op in ops {
        match (resource, op) {
            (ConfigResource::Topic(_), ConfigOp::Set(k, v)) => check_topic_config(k, v)?,
            (ConfigResource::Topic(_), ConfigOp::Delete(k)) => topic_def(k)
                .map(|_| ())
                .ok_or_else(|| BackendError::InvalidConfig(format!("unknown topic config {k}")))?,
            (ConfigResource::Broker(_), ConfigOp::Set(k, v)) => check_broker_config(k, v)?,
            (ConfigResource::Broker(_), ConfigOp::Delete(k)) => check_broker_config_name(k)?,
        }
    }
    Ok(())
}

fn check_broker_config_name(name: &str) -> Result<(), BackendError> {
    if DYNAMIC_BROKER.contains(&name) {
        Ok(())
    } else {
        Err(BackendError::InvalidConfig(format!(
            "{name} is not a dynamic broker config"
        )))
    }
}

/// Applies `ops` to `overrides` (for AlterConfigs, `replace` starts from none).
pub fn apply(overrides: &mut BTreeMap<String, String>, ops: &[ConfigOp], replace: bool) {
    if replace {
        overrides.clear();
    }
    for op in ops {
        match op {
            ConfigOp::Set(k, v) => {
                overrides.insert(k.clone(), v.trim().to_owned());
            }
            ConfigOp::Delete(k) => {
                overrides.remove(k);
            }
        }
    }
}

/// A broker's configs: its static settings under the cluster's dynamic overrides.
#[derive(Clone, Copy, Debug)]
pub struct BrokerConfigs<'a> {
    pub id: BrokerId,
    pub settings: &'a BrokerSettings,
    /// Dynamic overrides by resource name (see `ClusterMetadata::broker_configs`).
    pub dynamic: &'a BTreeMap<String, BTreeMap<String, String>>,
}

impl BrokerConfigs<'_> {
    /// A static setting's value, if `name` is one isr has.
    fn static_value(&self, name: &str) -> Option<String> {
        let s = self.settings;
        Some(match name {
            "broker.id" => self.id.0.to_string(),
            "auto.create.topics.enable" => s.auto_create_topics.to_string(),
            "num.partitions" => s.num_partitions.to_string(),
            "offsets.topic.num.partitions" => s.offsets_topic_partitions.to_string(),
            "group.initial.rebalance.delay.ms" => s.group_initial_rebalance_delay_ms.to_string(),
            "default.replication.factor" => s.default_replication_factor.to_string(),
            "min.insync.replicas" => s.min_insync_replicas.to_string(),
            "message.max.bytes" => s.message_max_bytes.to_string(),
            "log.segment.bytes" => s.segment_bytes.to_string(),
            "log.cleanup.policy" => "delete".into(),
            "log.cleaner.delete.retention.ms" => "86400000".into(),
            "log.cleaner.min.cleanable.ratio" => "0.5".into(),
            "log.cleaner.min.compaction.lag.ms" => "0".into(),
            "log.cleaner.max.compaction.lag.ms" => i64::MAX.to_string(),
            "log.segment.delete.delay.ms" => "60000".into(),
            "log.flush.interval.ms" => i64::MAX.to_string(),
            KERBEROS_RELOGIN => "60000".into(),
            "compression.type" => "producer".into(),
            "log.message.timestamp.type" => "CreateTime".into(),
            "log.message.format.version" => "3.0-IV1".into(),
            "log.retention.bytes" => "-1".into(),
            "log.retention.ms" | "log.roll.ms" => WEEK_MS.into(),
            "unclean.leader.election.enable" => "false".into(),
            _ => return None,
        })
    }

    /// Whether the static value is Kafka's default or was set for this broker.
    fn static_source(&self, name: &str) -> Source {
        let d = BrokerSettings::default();
        let s = self.settings;
        let set = match name {
            "broker.id" => true,
            "auto.create.topics.enable" => s.auto_create_topics != d.auto_create_topics,
            "num.partitions" => s.num_partitions != d.num_partitions,
            "offsets.topic.num.partitions" => {
                s.offsets_topic_partitions != d.offsets_topic_partitions
            }
            "group.initial.rebalance.delay.ms" => {
                s.group_initial_rebalance_delay_ms != d.group_initial_rebalance_delay_ms
            }
            "default.replication.factor" => {
                s.default_replication_factor != d.default_replication_factor
            }
            "min.insync.replicas" => s.min_insync_replicas != d.min_insync_replicas,
            "message.max.bytes" => s.message_max_bytes != d.message_max_bytes,
            "log.segment.bytes" => s.segment_bytes != d.segment_bytes,
            _ => false,
        };
        if set {
            Source::StaticBroker
        } else {
            Source::Default
        }
    }

    /// Every layer that sets a broker config, most specific first: this broker's dynamic
    /// override, the cluster-wide one, then the static value.
    fn layers(&self, name: &'static str) -> Vec<(&'static str, String, Source)> {
        let mut layers = Vec::new();
        let id = self.id.0.to_string();
        let dynamic = |resource: &str| self.dynamic.get(resource).and_then(|c| c.get(name));
        if let Some(v) = dynamic(&id) {
            layers.push((name, v.clone(), Source::DynamicBroker));
        }
        if let Some(v) = dynamic("") {
            layers.push((name, v.clone(), Source::DynamicDefaultBroker));
        }
        if let Some(v) = self.static_value(name) {
            layers.push((name, v, self.static_source(name)));
        }
        layers
    }

    /// A broker config's value on this broker.
    pub fn value(&self, name: &'static str) -> Option<String> {
        self.layers(name).into_iter().next().map(|(_, v, _)| v)
    }

    /// DescribeConfigs of this broker: every broker config isr has.
    pub fn describe(&self) -> Vec<Described> {
        let mut names: Vec<&'static str> = vec![
            "auto.create.topics.enable",
            "broker.id",
            "default.replication.factor",
            "group.initial.rebalance.delay.ms",
            "num.partitions",
            "offsets.topic.num.partitions",
            KERBEROS_RELOGIN,
        ];
        names.extend(TOPIC.iter().map(|d| d.broker));
        names.sort_unstable();
        names
            .into_iter()
            .filter_map(|name| {
                let layers = self.layers(name);
                let (_, value, source) = layers.first()?.clone();
                let kind = TOPIC
                    .iter()
                    .find(|d| d.broker == name)
                    .map_or(Kind::Int, |d| d.kind);
                Some(Described {
                    name,
                    value,
                    source,
                    read_only: !DYNAMIC_BROKER.contains(&name),
                    kind: if name == "auto.create.topics.enable" {
                        Kind::Boolean
                    } else {
                        kind
                    },
                    doc: TOPIC
                        .iter()
                        .find(|d| d.broker == name)
                        .map_or("", |d| d.doc),
                    synonyms: layers,
                })
            })
            .collect()
    }
}

/// DescribeConfigs of a topic: every topic config, its override or the broker's value.
/// `min_insync_replicas` is the partitions' actual floor (the broker default is capped at the
/// replication factor when a topic is created).
pub fn describe_topic(
    overrides: &BTreeMap<String, String>,
    min_insync_replicas: usize,
    broker: &BrokerConfigs<'_>,
) -> Vec<Described> {
    TOPIC
        .iter()
        .map(|def| {
            let mut synonyms = Vec::new();
            if let Some(v) = overrides.get(def.name) {
                synonyms.push((def.name, v.clone(), Source::Topic));
            }
            synonyms.extend(broker.layers(def.broker));
            let (_, mut value, source) =
                synonyms
                    .first()
                    .cloned()
                    .unwrap_or((def.name, String::new(), Source::Default));
            if def.name == "min.insync.replicas" {
                value = min_insync_replicas.to_string();
            }
            Described {
                name: def.name,
                value,
                source,
                read_only: false,
                kind: def.kind,
                doc: def.doc,
                synonyms,
            }
        })
        .collect()
}

/// A topic's `min.insync.replicas`: its override, else the broker's, at most the replication
/// factor (what the controller applies when it creates the topic).
pub fn min_insync_replicas(
    overrides: &BTreeMap<String, String>,
    broker: &BrokerConfigs<'_>,
    replication_factor: u16,
) -> usize {
    match overrides
        .get("min.insync.replicas")
        .and_then(|v| v.parse().ok())
    {
        Some(n) => n,
        None => usize::from(broker.settings.min_insync_replicas.min(replication_factor)),
    }
}

/// How a topic's log is rolled, deleted and compacted: its `retention.ms`, `retention.bytes`,
/// `segment.bytes`, `segment.ms`, `cleanup.policy`, `delete.retention.ms`,
/// `min.cleanable.dirty.ratio`, `min.compaction.lag.ms` and `max.compaction.lag.ms`, each its
/// override, else the broker's value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LogRetention {
    /// Segments whose newest record is older than this are deleted; -1: never by time.
    pub retention_ms: i64,
    /// Oldest segments are deleted while the log stays at least this large without them; -1:
    /// never by size.
    pub retention_bytes: i64,
    /// The active segment rolls once it is this large.
    pub segment_bytes: u64,
    /// The active segment rolls once a record is this much newer than its first (for a
    /// compacted log, at most `max.compaction.lag.ms`, as in Kafka, so that its records
    /// become cleanable within it).
    pub segment_ms: i64,
    /// `cleanup.policy` has `delete`: retention deletes segments.
    pub delete: bool,
    /// `cleanup.policy` has `compact`: the cleaner keeps the latest record of each key.
    pub compact: bool,
    /// How long a tombstone stays after its batch was written.
    pub delete_retention_ms: i64,
    /// The share of not-yet-cleaned bytes that starts a cleaning.
    pub min_cleanable_dirty_ratio: f64,
    /// Segments holding a record newer than this are not cleaned yet.
    pub min_compaction_lag_ms: i64,
    /// A log whose oldest uncleaned record is older than this is cleaned whatever its ratio.
    pub max_compaction_lag_ms: i64,
    /// A log with unflushed records is flushed once its last flush is this old.
    pub flush_ms: i64,
}

/// A topic config's value on this broker: the topic's override, else the broker config that
/// supplies its default (whose static values are Kafka's defaults); `None` for a name isr
/// does not know.
fn effective(
    overrides: &BTreeMap<String, String>,
    broker: &BrokerConfigs<'_>,
    name: &str,
) -> Option<String> {
    let def = topic_def(name)?;
    overrides
        .get(name)
        .cloned()
        .or_else(|| broker.value(def.broker))
}

/// [`effective`], parsed; `default` when it does not parse (the config checks refuse such a
/// value before it is stored).
fn effective_or<T: std::str::FromStr>(
    overrides: &BTreeMap<String, String>,
    broker: &BrokerConfigs<'_>,
    name: &str,
    default: T,
) -> T {
    effective(overrides, broker, name)
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// A topic's [`LogRetention`].
pub fn log_retention(
    overrides: &BTreeMap<String, String>,
    broker: &BrokerConfigs<'_>,
) -> LogRetention {
    let never = -1;
    let compact = has_policy(overrides, broker, "compact");
    let max_compaction_lag_ms = effective_or(overrides, broker, "max.compaction.lag.ms", i64::MAX);
    let segment_ms = effective_or(overrides, broker, "segment.ms", never);
    LogRetention {
        retention_ms: effective_or(overrides, broker, "retention.ms", never),
        retention_bytes: effective_or(overrides, broker, "retention.bytes", never),
        segment_bytes: effective_or(
            overrides,
            broker,
            "segment.bytes",
            broker.settings.segment_bytes,
        ),
        segment_ms: if compact && (segment_ms < 0 || segment_ms > max_compaction_lag_ms) {
            max_compaction_lag_ms
        } else {
            segment_ms
        },
        delete: has_policy(overrides, broker, "delete"),
        compact,
        delete_retention_ms: effective_or(overrides, broker, "delete.retention.ms", DAY_MS),
        min_cleanable_dirty_ratio: effective_or(
            overrides,
            broker,
            "min.cleanable.dirty.ratio",
            0.5,
        ),
        min_compaction_lag_ms: effective_or(overrides, broker, "min.compaction.lag.ms", 0),
        max_compaction_lag_ms,
        flush_ms: effective_or(overrides, broker, "flush.ms", i64::MAX),
    }
}

/// One day, Kafka's default `delete.retention.ms`.
const DAY_MS: i64 = 86_400_000;

/// Whether a topic's `cleanup.policy` names `policy`.
fn has_policy(
    overrides: &BTreeMap<String, String>,
    broker: &BrokerConfigs<'_>,
    policy: &str,
) -> bool {
    effective(overrides, broker, "cleanup.policy")
        .is_some_and(|v| v.split(',').any(|p| p.trim().eq_ignore_ascii_case(policy)))
}

/// Whether a topic is compacted (`cleanup.policy` has `compact`): its records need keys, and
/// Kafka refuses a batch with a keyless one (INVALID_RECORD).
pub fn compacted(overrides: &BTreeMap<String, String>, broker: &BrokerConfigs<'_>) -> bool {
    has_policy(overrides, broker, "compact")
}

/// The compaction policy of `__consumer_offsets` (Kafka compacts it and never deletes by
/// time): compact only, Kafka's defaults.
pub fn offsets_topic_retention(segment_bytes: u64) -> LogRetention {
    LogRetention {
        retention_ms: -1,
        retention_bytes: -1,
        segment_bytes,
        segment_ms: -1,
        delete: false,
        compact: true,
        delete_retention_ms: DAY_MS,
        min_cleanable_dirty_ratio: 0.5,
        min_compaction_lag_ms: 0,
        max_compaction_lag_ms: i64::MAX,
        flush_ms: i64::MAX,
    }
}

/// Whether the leader stamps a topic's batches with its own time: its
/// `message.timestamp.type` (else the broker's `log.message.timestamp.type`) is LogAppendTime.
pub fn log_append_time(overrides: &BTreeMap<String, String>, broker: &BrokerConfigs<'_>) -> bool {
    effective(overrides, broker, "message.timestamp.type").is_some_and(|v| v == "LogAppendTime")
}

/// The codec a topic's batches are stored in: its `compression.type` (else the broker's);
/// `None` for `producer`, the default: as each producer compressed its batch.
pub fn compression(
    overrides: &BTreeMap<String, String>,
    broker: &BrokerConfigs<'_>,
) -> Option<Codec> {
    effective(overrides, broker, "compression.type").and_then(|v| Codec::parse(&v).ok().flatten())
}

/// The largest batch a producer may write to a topic: its `max.message.bytes`, else the
/// broker's `message.max.bytes`.
pub fn max_message_bytes(
    overrides: &BTreeMap<String, String>,
    broker: &BrokerConfigs<'_>,
) -> usize {
    effective_or(
        overrides,
        broker,
        "max.message.bytes",
        MESSAGE_MAX_BYTES as usize,
    )
}

/// Refuses a batch longer than the topic's limit (see [`max_message_bytes`]) with
/// MESSAGE_TOO_LARGE, which producers do not retry.
pub fn check_batch_size(
    len: usize,
    topic: &str,
    overrides: &BTreeMap<String, String>,
    broker: &BrokerConfigs<'_>,
) -> Result<(), BackendError> {
    let limit = max_message_bytes(overrides, broker);
    if len > limit {
        return Err(BackendError::MessageTooLarge(format!(
            "a batch of {len} bytes exceeds max.message.bytes {limit} of topic {topic}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overrides(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn values_are_checked_and_unknown_names_are_refused() {
        assert!(check_topic_config("retention.ms", "86400000").is_ok());
        assert!(check_topic_config("retention.ms", "-1").is_ok());
        assert!(check_topic_config("retention.ms", "soon").is_err());
        let below = check_topic_config("retention.ms", "-2").expect_err("below -1");
        assert!(below.to_string().contains("retention.ms"), "{below}");
        for version in ["0.10.2", "2.8", "3.0-IV1", "0.8.2.1"] {
            assert!(check_topic_config("message.format.version", version).is_ok());
        }
        for bad in ["", "3", "three", "3.0-IV", "3..0"] {
            assert!(
                check_topic_config("message.format.version", bad).is_err(),
                "{bad}"
            );
        }
        assert!(check_topic_config("max.message.bytes", "2000000").is_ok());
        assert!(check_topic_config("max.message.bytes", "99999999999").is_err());
        for policy in ["delete", "compact", "compact,delete", "delete, compact"] {
            assert!(
                check_topic_config("cleanup.policy", policy).is_ok(),
                "{policy}"
            );
        }
        for bad in ["", "compress", "compact,"] {
            assert!(
                check_topic_config("cleanup.policy", bad).is_err(),
                "{bad:?}"
            );
        }
        assert!(check_topic_config("min.cleanable.dirty.ratio", "0.1").is_ok());
        assert!(check_topic_config("min.cleanable.dirty.ratio", "2").is_err());
        assert!(check_topic_config("delete.retention.ms", "-5").is_err());
        assert!(check_topic_config("min.insync.replicas", "0").is_err());
        let e = check_topic_config("retention.hours", "1").expect_err("unknown");
        assert_eq!(e.code(), 40);
        assert!(
            e.to_string().contains("retention.ms"),
            "names valid choices: {e}"
        );
        assert!(check_broker_config("message.max.bytes", "500").is_ok());
        assert!(check_broker_config(KERBEROS_RELOGIN, "58000").is_ok());
        assert!(check_broker_config(KERBEROS_RELOGIN, "soon").is_err());
        assert!(check_topic_config("flush.ms", "12345678").is_ok());
        assert!(check_topic_config("flush.ms", "-1").is_err());
        assert!(check_broker_config("num.partitions", "3").is_err());
        let topic = ConfigResource::Topic("bad/name".into());
        assert_eq!(check_change(&topic, &[]).map_err(|e| e.code()), Err(17));
    }

    #[test]
    fn retention_and_timestamps_are_the_topics_overrides_else_the_brokers_defaults() {
        let settings = BrokerSettings::default();
        let dynamic = BTreeMap::new();
        let broker = BrokerConfigs {
            id: BrokerId(1),
            settings: &settings,
            dynamic: &dynamic,
        };
        let week = 604_800_000;
        assert_eq!(
            log_retention(&BTreeMap::new(), &broker),
            LogRetention {
                retention_ms: week,
                retention_bytes: -1,
                segment_bytes: settings.segment_bytes,
                segment_ms: week,
                delete: true,
                compact: false,
                delete_retention_ms: 86_400_000,
                min_cleanable_dirty_ratio: 0.5,
                min_compaction_lag_ms: 0,
                max_compaction_lag_ms: i64::MAX,
                flush_ms: i64::MAX,
            }
        );
        let compacted = overrides(&[
            ("cleanup.policy", "compact,delete"),
            ("delete.retention.ms", "100"),
            ("min.cleanable.dirty.ratio", "0.1"),
        ]);
        let policy = log_retention(&compacted, &broker);
        assert!(policy.delete && policy.compact);
        assert_eq!(
            policy.segment_ms, week,
            "no max.compaction.lag.ms: segment.ms"
        );
        assert_eq!(policy.delete_retention_ms, 100);
        assert_eq!(policy.min_cleanable_dirty_ratio, 0.1);
        assert!(self::compacted(&compacted, &broker));
        assert!(!self::compacted(&BTreeMap::new(), &broker));
        let only = log_retention(&overrides(&[("cleanup.policy", "compact")]), &broker);
        assert!(only.compact && !only.delete);
        // librdkafka's test 0077 asks these: a compacted log rolls and is cleaned within
        // max.compaction.lag.ms; min.compaction.lag.ms holds young records back.
        let lagged = [
            ("cleanup.policy", "compact"),
            ("segment.ms", "500"),
            ("max.compaction.lag.ms", "100"),
            ("min.compaction.lag.ms", "20"),
            ("file.delete.delay.ms", "10000"),
        ];
        for (name, value) in lagged {
            assert!(check_topic_config(name, value).is_ok(), "{name}={value}");
        }
        let policy = log_retention(&overrides(&lagged), &broker);
        assert_eq!(
            (
                policy.segment_ms,
                policy.min_compaction_lag_ms,
                policy.max_compaction_lag_ms
            ),
            (100, 20, 100)
        );
        let deleted = log_retention(&overrides(&[("max.compaction.lag.ms", "100")]), &broker);
        assert_eq!(
            deleted.segment_ms, week,
            "a log not compacted rolls by segment.ms"
        );
        assert!(check_topic_config("max.compaction.lag.ms", "0").is_err());
        assert!(check_topic_config("min.compaction.lag.ms", "-1").is_err());
        let topic = overrides(&[
            ("retention.ms", "5000"),
            ("segment.ms", "1000"),
            ("message.timestamp.type", "LogAppendTime"),
        ]);
        let policy = log_retention(&topic, &broker);
        assert_eq!((policy.retention_ms, policy.segment_ms), (5000, 1000));
        assert!(log_append_time(&topic, &broker));
        assert!(!log_append_time(&BTreeMap::new(), &broker));
    }

    #[test]
    fn the_topic_override_wins_then_the_broker_then_the_cluster_default() {
        let settings = BrokerSettings::default();
        let mut dynamic = BTreeMap::new();
        let at = |dynamic: &BTreeMap<String, BTreeMap<String, String>>| {
            max_message_bytes(
                &BTreeMap::new(),
                &BrokerConfigs {
                    id: BrokerId(2),
                    settings: &settings,
                    dynamic,
                },
            )
        };
        assert_eq!(at(&dynamic), 1_048_588);
        dynamic.insert("".into(), overrides(&[("message.max.bytes", "3000")]));
        assert_eq!(at(&dynamic), 3000);
        dynamic.insert("1".into(), overrides(&[("message.max.bytes", "1000")]));
        assert_eq!(at(&dynamic), 3000, "another broker's override");
        dynamic.insert("2".into(), overrides(&[("message.max.bytes", "2000")]));
        assert_eq!(at(&dynamic), 2000);
        let broker = BrokerConfigs {
            id: BrokerId(2),
            settings: &settings,
            dynamic: &dynamic,
        };
        let topic = overrides(&[("max.message.bytes", "100")]);
        assert_eq!(max_message_bytes(&topic, &broker), 100);

        let described = describe_topic(&topic, 2, &broker);
        let max = described
            .iter()
            .find(|d| d.name == "max.message.bytes")
            .expect("described");
        assert_eq!((max.value.as_str(), max.source), ("100", Source::Topic));
        let sources: Vec<Source> = max.synonyms.iter().map(|s| s.2).collect();
        assert_eq!(
            sources,
            [
                Source::Topic,
                Source::DynamicBroker,
                Source::DynamicDefaultBroker,
                Source::Default
            ]
        );
        let min_isr = described
            .iter()
            .find(|d| d.name == "min.insync.replicas")
            .expect("described");
        assert_eq!(min_isr.value, "2");
        let b = broker.describe();
        let m = b.iter().find(|d| d.name == "message.max.bytes").expect("m");
        assert_eq!((m.value.as_str(), m.read_only), ("2000", false));
        let n = b.iter().find(|d| d.name == "num.partitions").expect("n");
        assert_eq!(
            (n.value.as_str(), n.read_only, n.source),
            ("1", true, Source::Default)
        );
    }

    #[test]
    fn apply_sets_deletes_and_replaces() {
        let mut o = overrides(&[("retention.ms", "1"), ("segment.ms", "2")]);
        apply(
            &mut o,
            &[
                ConfigOp::Set("retention.ms".into(), " 5 ".into()),
                ConfigOp::Delete("segment.ms".into()),
            ],
            false,
        );
        assert_eq!(o, overrides(&[("retention.ms", "5")]));
        apply(
            &mut o,
            &[ConfigOp::Set("max.message.bytes".into(), "9".into())],
            true,
        );
        assert_eq!(o, overrides(&[("max.message.bytes", "9")]));
    }
}
