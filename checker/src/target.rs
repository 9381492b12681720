//! What a command checks: a preset, possibly changed on the command line, and how it is
//! described in reports.

use clap::Args;
use isr::sim::Bounds;
use isr::{Acks, Config, Property};
use isr_models::presets::{atomic, clocked, fetch_max_wait, Outcome, Preset};
use isr_models::{Check, IsrModel};
use serde_json::{json, Value};
use std::collections::BTreeSet;

#[derive(Args, Default)]
pub struct Overrides {
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=5))]
    pub replicas: Option<u32>,
    /// Partitions, each replicated on every broker: with two or more, fencing a broker, its
    /// registration or its controlled shutdown changes them all in one controller step.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4))]
    pub partitions: Option<u32>,
    /// Records the producer writes in all (0: no producer, as in the group presets whose
    /// consumers commit positions without reading).
    #[arg(long, value_name = "N")]
    pub records: Option<u8>,
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_epoch: Option<u32>,
    /// Clean shutdowns in all.
    #[arg(long, value_name = "N")]
    pub crashes: Option<u8>,
    #[arg(long, value_name = "N")]
    pub unclean_crashes: Option<u8>,
    /// Changes of the controller's partition state other than elections.
    #[arg(long, value_name = "N")]
    pub isr_changes: Option<u32>,
    /// Messages the network may lose.
    #[arg(long, value_name = "N")]
    pub drops: Option<u8>,
    /// Messages the network may deliver twice.
    #[arg(long, value_name = "N")]
    pub duplicates: Option<u8>,
    /// Times the controller may fence a running broker (a zombie until it registers again).
    #[arg(long, value_name = "N")]
    pub session_expiries: Option<u8>,
    /// Times the controller role may move to a new controller while the old one runs on as a
    /// zombie.
    #[arg(long, value_name = "N")]
    pub controller_failovers: Option<u8>,
    /// Times a leader's disk may fill up under a write (the broker then stops).
    #[arg(long, value_name = "N")]
    pub disk_failures: Option<u8>,
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub min_isr: Option<u32>,
    /// The most entries one Fetch answer carries (1: followers catch up a record at a time).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub fetch_max: Option<u32>,
    /// Whether a leader holds a Fetch that finds nothing new until data arrives or its wait
    /// expires (`fetch.max.wait.ms` > 0): on or off.
    #[arg(long, value_name = "on|off")]
    pub fetch_wait: Option<String>,
    /// Producer acks: 0, 1 or all.
    #[arg(long, value_name = "X")]
    pub acks: Option<String>,
    /// Whether a consumer reads: on or off.
    #[arg(long, value_name = "on|off")]
    pub consumer: Option<String>,
    /// Whether the producer is idempotent (its records are batches stamped with sequence
    /// numbers, admitted by the leader's producer state): on or off.
    #[arg(long, value_name = "on|off")]
    pub idempotent: Option<String>,
    /// Times the producer may send a record again to the partition's leader of the moment (a
    /// timed-out request, a lost answer); makes the producer idempotent.
    #[arg(long, value_name = "N")]
    pub producer_retries: Option<u8>,
    /// DeleteRecords a client may send in all: each asks a leader of a data partition to move
    /// its log start to an offset up to its LEO (one beyond its HW is refused, rule 17).
    #[arg(long, value_name = "N")]
    pub deletes: Option<u8>,
    /// Compaction passes that remove a record, in all: any running replica of a data
    /// partition may clean its log up to its HW (rule 18); records 2k-1 and 2k share key k.
    #[arg(long, value_name = "N")]
    pub compactions: Option<u8>,
    /// Consumers in a group that reads the first partition and commits its position to an
    /// offsets partition replicated on every broker (0: no group).
    #[arg(long, value_name = "N")]
    pub consumers: Option<u8>,
    /// Offset commits the group's consumers make in all.
    #[arg(long, value_name = "N")]
    pub commits: Option<u8>,
    /// Times a consumer may crash (and start again as a new member) or pause past its session
    /// timeout, in all.
    #[arg(long, value_name = "N")]
    pub consumer_failures: Option<u8>,
    /// No rebalance of the group beyond this generation.
    #[arg(long, value_name = "N")]
    pub max_generation: Option<u8>,
    /// Run the replicas' clocks up to this tick: timers fire only when due and every message
    /// arrives within a tick (0: no clock, timers fire at any moment). Sets the clocked
    /// timings (`replica_lag_max` and the fetch waits in ticks, spec/checker.md).
    #[arg(long, value_name = "TICKS")]
    pub clock: Option<u8>,
    /// Which model: `full` (the default: every message, flush, held request and retry a step
    /// of its own) or `atomic` (each step runs to quiescence, as the TLA+ anchor's actions do:
    /// only requests wait, followers' Fetches and the controller's LeaderAndIsr;
    /// spec/checker.md).
    #[arg(long, value_name = "full|atomic")]
    pub model: Option<String>,
    /// A rule switch, as NAME=VALUE (repeatable).
    #[arg(long = "rule", value_name = "NAME=VALUE")]
    pub rules: Vec<String>,
    /// Keep the messages their receiver will ignore forever in flight instead of discarding
    /// them (the dead-message reduction off): verdicts must not change, only the state count.
    #[arg(long)]
    pub no_reduction: bool,
    /// Check every message the dead-message reduction discards against the core's own receipt
    /// checks: delivered there and then, it must change nothing and send only dead messages
    /// (a panic names it otherwise). On in `suite`; slower, never changes a count.
    #[arg(long)]
    pub audit_reduction: bool,
    /// What to expect instead of the preset's verdicts (repeatable, applied in order):
    /// `all-hold` (every property holds, every guard is reached), `none` (assert nothing), or
    /// `CHECK=holds|fails` for one property or guard. By default a preset keeps its expected
    /// verdicts under other bounds; other rules or min ISR make it `all-hold`.
    #[arg(long = "expect", value_name = "EXPECTATION")]
    pub expect: Vec<String>,
}

/// A bad argument: printed on one line, exit status 2.
pub struct Usage(pub String);

/// What is checked: a preset, possibly changed on the command line.
pub struct Target {
    pub preset: &'static Preset,
    pub cfg: Config,
    pub bounds: Bounds,
    pub isr_changes: u32,
    /// Changed from the preset (rules, min ISR or bounds).
    pub adhoc: bool,
    /// Where the expected verdicts come from.
    pub expectations: Expectations,
    /// Per check, an expectation given with `--expect CHECK=...`.
    overrides: Vec<(Check, Option<Outcome>)>,
}

/// Where a target's expected verdicts come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expectations {
    /// The preset's (its bounds may differ: a protocol's verdicts do not depend on them).
    Preset,
    /// Every property holds and every guard is reached: the default once rules or min ISR
    /// differ from the preset's (another protocol), and `--expect all-hold`.
    AllHold,
    /// Nothing is asserted (`--expect none`).
    Nothing,
}

impl Expectations {
    pub fn name(self) -> &'static str {
        match self {
            Expectations::Preset => "preset",
            Expectations::AllHold => "all-hold",
            Expectations::Nothing => "none",
        }
    }
}

impl Target {
    pub fn new(name: &str, o: &Overrides) -> Result<Target, Usage> {
        let preset = Preset::find(name).ok_or_else(|| {
            Usage(format!(
                "unknown preset `{name}`: expected one of {}",
                Preset::names()
            ))
        })?;
        let mut cfg = preset.config();
        let mut b = preset.bounds.clone();
        if let Some(n) = o.replicas {
            b.replicas = n;
        }
        if let Some(n) = o.partitions {
            b.partitions = n;
        }
        if let Some(n) = o.records {
            b.records = n;
        }
        if let Some(n) = o.max_epoch {
            b.max_leader_epoch = n;
        }
        if let Some(n) = o.crashes {
            b.clean_crashes = n;
        }
        if let Some(n) = o.unclean_crashes {
            b.unclean_crashes = n;
        }
        if let Some(n) = o.drops {
            b.drops = n;
        }
        if let Some(n) = o.duplicates {
            b.duplicates = n;
        }
        if let Some(n) = o.session_expiries {
            b.session_expiries = n;
        }
        if let Some(n) = o.controller_failovers {
            b.controller_failovers = n;
        }
        if let Some(n) = o.disk_failures {
            b.disk_failures = n;
        }
        if let Some(a) = &o.acks {
            b.acks = a.parse::<Acks>().map_err(|e| Usage(e.to_string()))?;
        }
        if let Some(c) = &o.consumer {
            b.consumer = on_off("consumer", c)?;
        }
        if let Some(i) = &o.idempotent {
            b.idempotent = on_off("idempotent", i)?;
        }
        if let Some(n) = o.producer_retries {
            b.producer_retries = n;
            if n > 0 && o.idempotent.is_none() {
                b.idempotent = true;
            }
        }
        if let Some(n) = o.consumers {
            b.consumers = n;
        }
        if let Some(n) = o.commits {
            b.commits = n;
        }
        if let Some(n) = o.deletes {
            b.deletes = n;
        }
        if let Some(n) = o.compactions {
            b.compactions = n;
        }
        if let Some(n) = o.consumer_failures {
            b.consumer_failures = n;
        }
        if let Some(n) = o.max_generation {
            b.max_generation = n;
        }
        if let Some(n) = o.clock {
            b.clock = n;
        }
        if b.records == 0 && b.consumers == 0 {
            return Err(Usage(
                "invalid --records 0 without --consumers: with neither a producer nor a \
                 consumer group the model checks nothing"
                    .into(),
            ));
        }
        if b.consumers > 4 {
            return Err(Usage(format!(
                "invalid --consumers {}: the model checks groups of up to 4",
                b.consumers
            )));
        }
        if b.producer_retries > 0 && !b.idempotent {
            return Err(Usage(
                "invalid --producer-retries with --idempotent off: a plain producer's retry \
                 is stored twice by design (at-least-once)"
                    .into(),
            ));
        }
        b.keep_dead = o.no_reduction;
        b.audit_dead = o.audit_reduction;
        let isr_changes = o.isr_changes.unwrap_or(preset.isr_changes);
        if let Some(m) = o.min_isr {
            cfg.min_insync_replicas = m as usize;
        }
        if let Some(n) = o.fetch_max {
            cfg.fetch_max_entries = n as usize;
        }
        if let Some(w) = &o.fetch_wait {
            cfg.fetch_max_wait = fetch_max_wait(on_off("fetch wait", w)?);
            cfg.high_watermark_wait = cfg.fetch_max_wait;
        }
        if b.clock > 0 {
            clocked(&mut cfg);
        }
        if let Some(m) = &o.model {
            b.atomic = match m.as_str() {
                "full" => false,
                "atomic" => true,
                other => {
                    return Err(Usage(format!(
                        "invalid --model `{other}`: expected one of full, atomic"
                    )))
                }
            };
        }
        if b.atomic {
            atomic(&mut cfg);
        }
        if cfg.min_insync_replicas > b.replicas as usize {
            return Err(Usage(format!(
                "invalid --min-isr {}: expected 1 to the replica count {}",
                cfg.min_insync_replicas, b.replicas
            )));
        }
        for rule in &o.rules {
            let (name, value) = rule.split_once('=').ok_or_else(|| {
                Usage(format!(
                    "invalid --rule `{rule}`: expected NAME=VALUE with NAME one of {}",
                    isr::Rules::NAMES
                ))
            })?;
            cfg.rules
                .set(name, value)
                .map_err(|e| Usage(e.to_string()))?;
        }
        // The fetch limit is a bound of the model, like the others; rules and min ISR are
        // the protocol.
        let preset_cfg = preset.config();
        let protocol_changed = cfg.rules != preset_cfg.rules
            || cfg.min_insync_replicas != preset_cfg.min_insync_replicas;
        let adhoc = cfg != preset_cfg || b != preset.bounds || isr_changes != preset.isr_changes;
        let mut expectations = if protocol_changed {
            Expectations::AllHold
        } else {
            Expectations::Preset
        };
        let mut overrides = Vec::new();
        for e in &o.expect {
            match e.as_str() {
                "all-hold" => {
                    expectations = Expectations::AllHold;
                    overrides.clear();
                }
                "none" => {
                    expectations = Expectations::Nothing;
                    overrides.clear();
                }
                _ => overrides.push(parse_expectation(e)?),
            }
        }
        Ok(Target {
            preset,
            cfg,
            bounds: b,
            isr_changes,
            adhoc,
            expectations,
            overrides,
        })
    }

    pub fn model(&self) -> IsrModel {
        IsrModel::new(self.cfg, self.bounds.clone(), self.isr_changes)
    }

    /// The expected verdict of a check: an `--expect CHECK=...` override, else as
    /// [`Target::expectations`] says.
    pub fn expected(&self, check: Check) -> Option<Outcome> {
        if let Some(&(_, o)) = self.overrides.iter().rev().find(|(c, _)| *c == check) {
            return o;
        }
        match self.expectations {
            Expectations::Preset => self.preset.expected_in(check, self.bounds.atomic),
            Expectations::AllHold => Some(Outcome::Holds),
            Expectations::Nothing => None,
        }
    }

    /// Why the atomic-step model, when it is the one checked, cannot show `property` failing
    /// as the preset's bug does.
    pub fn atomic_gap(&self, property: Property) -> Option<&'static str> {
        self.bounds
            .atomic
            .then(|| self.preset.atomic_gap(property))
            .flatten()
    }

    /// Where the search may stop: at the preset's expected failures when its expectations
    /// stand (a bug preset), else nowhere (the search is exhaustive).
    pub fn stop_at(&self) -> Option<BTreeSet<&'static str>> {
        if self.expectations == Expectations::Preset && self.overrides.is_empty() {
            self.preset.stop_at_in(self.bounds.atomic)
        } else {
            None
        }
    }

    /// How the report names where the expectations come from.
    pub fn describe_expectations(&self) -> &'static str {
        match (self.expectations, self.adhoc, self.overrides.is_empty()) {
            (Expectations::Preset, false, true) => "",
            (Expectations::Preset, true, true) => {
                " (ad hoc bounds: the preset's expected verdicts)"
            }
            (Expectations::AllHold, _, true) => " (ad hoc: every property expected to hold)",
            (Expectations::Nothing, _, true) => " (ad hoc: nothing asserted)",
            (_, _, false) => " (ad hoc: expectations given with --expect)",
        }
    }
}

/// `CHECK=holds|fails` (or `CHECK=any`: not asserted).
fn parse_expectation(e: &str) -> Result<(Check, Option<Outcome>), Usage> {
    let usage = || {
        let names: Vec<&str> = Check::all().into_iter().map(Check::name).collect();
        Usage(format!(
            "invalid --expect `{e}`: expected all-hold, none, or CHECK=holds|fails|any with CHECK one of {}",
            names.join(", ")
        ))
    };
    let (name, value) = e.split_once('=').ok_or_else(usage)?;
    let check = Check::from_name(name).ok_or_else(usage)?;
    let outcome = match value {
        "holds" => Some(Outcome::Holds),
        "fails" => Some(Outcome::Fails),
        "any" => None,
        _ => return Err(usage()),
    };
    Ok((check, outcome))
}

pub fn describe_bounds(b: &Bounds) -> String {
    format!(
        "{} replicas{}, {} records, max leader epoch {}, {} clean + {} unclean crashes, \
         {} session expiries, {} controller failovers, {} drops, {} duplicates, acks={}, \
         consumer {}",
        b.replicas,
        if b.partitions > 1 {
            format!(" of each of {} partitions", b.partitions)
        } else {
            String::new()
        },
        b.records,
        b.max_leader_epoch,
        b.clean_crashes,
        b.unclean_crashes,
        b.session_expiries,
        b.controller_failovers,
        b.drops,
        b.duplicates,
        b.acks,
        if b.consumer { "on" } else { "off" }
    ) + &if b.disk_failures > 0 {
        format!(", {} disk failures", b.disk_failures)
    } else {
        String::new()
    } + &if b.idempotent {
        format!(", idempotent producer, {} retries", b.producer_retries)
    } else {
        String::new()
    } + &if b.deletes > 0 {
        format!(", {} DeleteRecords", b.deletes)
    } else {
        String::new()
    } + &if b.compactions > 0 {
        format!(", {} compactions", b.compactions)
    } else {
        String::new()
    } + &if b.clock > 0 {
        format!(", clock to tick {}", b.clock)
    } else {
        String::new()
    } + if b.atomic { ", atomic steps" } else { "" }
        + &if b.consumers > 0 {
            format!(
                ", a group of {} consumers, {} commits, {} consumer failures, max generation {}",
                b.consumers, b.commits, b.consumer_failures, b.max_generation
            )
        } else {
            String::new()
        }
        + if b.keep_dead {
            ", dead messages kept (no reduction)"
        } else if b.audit_dead {
            ", reduction audited"
        } else {
            ""
        }
}

/// A flag's `on` or `off`.
fn on_off(what: &str, value: &str) -> Result<bool, Usage> {
    match value {
        "on" => Ok(true),
        "off" => Ok(false),
        other => Err(Usage(format!(
            "invalid {what} `{other}`: expected one of on, off"
        ))),
    }
}

pub fn describe_rules(cfg: &Config) -> String {
    let switches = cfg.rules.unsafe_switches();
    let rules = if switches.is_empty() {
        "safe protocol".to_string()
    } else {
        switches.join(" ")
    };
    let mut fetch = if cfg.fetch_max_entries < 1000 {
        format!("; fetch.max={} entries", cfg.fetch_max_entries)
    } else {
        String::new()
    };
    if cfg.fetch_max_wait.0 > 0 {
        fetch.push_str("; fetch waits");
    }
    format!(
        "{rules}; min.insync.replicas={}{fetch}",
        cfg.min_insync_replicas
    )
}

pub fn bounds_json(b: &Bounds) -> Value {
    json!({
        "replicas": b.replicas, "partitions": b.partitions, "records": b.records, "max_leader_epoch": b.max_leader_epoch,
        "clean_crashes": b.clean_crashes, "unclean_crashes": b.unclean_crashes,
        "drops": b.drops, "duplicates": b.duplicates, "session_expiries": b.session_expiries,
        "controller_failovers": b.controller_failovers,
        "disk_failures": b.disk_failures,
        "acks": b.acks.to_string(), "consumer": b.consumer,
        "idempotent": b.idempotent, "producer_retries": b.producer_retries,
        "consumers": b.consumers, "commits": b.commits, "consumer_failures": b.consumer_failures, "max_generation": b.max_generation,
        "deletes": b.deletes,
        "compactions": b.compactions,
        "clock": b.clock,
        "model": if b.atomic { "atomic" } else { "full" },
        "dead_messages_kept": b.keep_dead,
        "reduction_audited": b.audit_dead,
    })
}
