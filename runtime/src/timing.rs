//! Time in the runtime: how long a tick lasts and the protocol timeouts in ticks; and the core
//! configuration every process runs with.
//!
//! Chosen so that a leader killed with SIGKILL is replaced within about 2 s: its session expires
//! after `SESSION_TIMEOUT` ticks without a heartbeat (1 s), the controller elects on the next
//! tick, and followers learn of it at once. Heartbeats go out five times per session so that a
//! slow scheduler on a loaded machine does not fence a healthy broker.

use crate::storage::batch::MAX_BATCH;
use isr::{Config, FlushPolicy, Rules, Tick};
use std::time::Duration;

pub const TICK: Duration = Duration::from_millis(100);
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(200);
const SESSION_TIMEOUT: Tick = Tick(10);
/// `SESSION_TIMEOUT` as a duration.
pub const SESSION: Duration = Duration::from_secs(1);
/// A follower that has not caught up for 3 s leaves the ISR (Kafka: 30 s).
const REPLICA_LAG_MAX: Tick = Tick(30);
/// High watermark checkpoints are written at most once a second (Kafka: every 5 s), and at once
/// when a truncation lowers them: each costs an fsync, and a stale (lower) one is always safe.
const HW_CHECKPOINT_INTERVAL: Tick = Tick(10);
/// How long a leader holds a Fetch that found nothing new before answering it empty (10 s):
/// data arriving answers it at once, and a follower whose Fetch is held counts as caught up
/// while it is held, so the wait costs neither latency nor ISR membership. What it saves is
/// the idle round trip of every followed partition (Kafka: 500 ms, one Fetch per broker pair):
/// at 200 ms, 30,000 idle partitions were 300,000 round trips a second. A lost request is
/// asked again when its connection closes or reopens (`Command::PeerLink`), not after the wait.
const FETCH_MAX_WAIT: Tick = Tick(100);
/// A follower resends its request, and a leader its AlterPartition, when no answer came within
/// this long (1 s; a Fetch, which the leader may hold, `FETCH_MAX_WAIT` longer); after an error
/// answer the follower asks again a tick later.
const REQUEST_TIMEOUT: Tick = Tick(10);
const RETRY_BACKOFF: Tick = Tick(1);
/// An acks=all write not committed within this long is answered REQUEST_TIMED_OUT.
pub const PRODUCE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long admin requests (metadata, topic creation) wait for the controller.
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(5);

/// The core configuration every process of a cluster runs with: the safe rules, flushing as
/// `flush` says.
pub fn config(flush: FlushPolicy) -> Config {
    config_with(Rules {
        flush,
        ..Rules::default()
    })
}

/// The core configuration with `rules`: the safe protocol unless a process was started with
/// `--rule` switches (see [`RuleSwitch`]).
pub fn config_with(rules: Rules) -> Config {
    Config {
        rules,
        session_timeout: SESSION_TIMEOUT,
        replica_lag_max: REPLICA_LAG_MAX,
        hw_checkpoint_interval: HW_CHECKPOINT_INTERVAL,
        fetch_max_wait: FETCH_MAX_WAIT,
        request_timeout: REQUEST_TIMEOUT,
        retry_backoff: RETRY_BACKOFF,
        // Kafka's replica.fetch.max.bytes: an answer carries batches up to this many bytes (and
        // always one), so that it fits one internal frame whatever the batch sizes.
        fetch_max_bytes: MAX_BATCH,
        ..Config::default()
    }
}

/// One `--rule NAME=VALUE` of `isr controller` and `isr broker`: a core rule switched away
/// from the safe protocol, exactly as `isr-check --rule` switches it in the model, so that a
/// historical bug the model checker reproduces can be reproduced on real processes too (the
/// `jepsen-2013` and `last-replica-standing` scenarios of `isr-faults`). Never for production.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleSwitch {
    pub name: String,
    pub value: String,
}

impl std::str::FromStr for RuleSwitch {
    type Err = String;

    /// Checked against [`Rules::set`], so a bad name or value is refused at the command line.
    fn from_str(text: &str) -> Result<RuleSwitch, String> {
        let (name, value) = text
            .split_once('=')
            .ok_or_else(|| format!("expected NAME=VALUE with NAME one of {}", Rules::NAMES))?;
        Rules::default()
            .set(name, value)
            .map_err(|e| e.to_string())?;
        Ok(RuleSwitch {
            name: name.to_string(),
            value: value.to_string(),
        })
    }
}

/// The safe rules with `switches` applied in order.
pub fn rules(switches: &[RuleSwitch]) -> Rules {
    let mut rules = Rules::default();
    for s in switches {
        // Each was checked when parsed.
        let _ = rules.set(&s.name, &s.value);
    }
    rules
}
