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

/// The wall clock in milliseconds since the Unix epoch, as Kafka's record timestamps count:
/// what retention compares segments' timestamps with, and what LogAppendTime stamps.
pub fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
/// How often a broker heartbeats (`HEARTBEAT_TICKS`), and how often it asks the controllers
/// again while it looks for the active one.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(200);
const HEARTBEAT_TICKS: Tick = Tick(2);
const SESSION_TIMEOUT: Tick = Tick(10);
/// `SESSION_TIMEOUT` as a duration.
pub const SESSION: Duration = Duration::from_secs(1);
/// How long a broker waits for a controller's welcome after dialing it. Longer than any step
/// of the controller's (opening a session for a broker of 100,000 partitions, or fencing one,
/// takes a second or more on a small machine), since a broker that gives up dials again and
/// puts its opening behind the others; shorter waits made such brokers dial over and over.
/// Controllers are dialed at once, so a paused one delays nobody.
pub const WELCOME_WAIT: Duration = Duration::from_secs(5);
/// A follower that has not caught up for 3 s leaves the ISR (Kafka: 30 s).
const REPLICA_LAG_MAX: Tick = Tick(30);
/// High watermark checkpoints are written at most once a second (Kafka: every 5 s), and at once
/// when a truncation lowers them: each costs an fsync, and a stale (lower) one is always safe.
const HW_CHECKPOINT_INTERVAL: Tick = Tick(10);
/// How long a leader holds a Fetch that found nothing new before answering it empty (5 min,
/// less up to half of it by partition: the core spreads the waits of fetches parked together):
/// data arriving answers it at once, and a follower whose Fetch is held counts as caught up
/// while it is held, so the wait costs neither latency nor ISR membership. What it saves is
/// the idle round trip of every followed partition: at 200 ms, 30,000 idle partitions were
/// 300,000 round trips a second; at 30 s about 2,700, 11 % of a core; at 60 s, 100,000
/// partitions (200,000 followers) made about 4,400 a second, 13-14 % of a core; at 5 min,
/// about 900. (Kafka holds one Fetch per broker pair for 500 ms, and its incremental fetch
/// sessions, KIP-227, leave idle partitions out of it: an idle partition costs it nothing
/// either.) The wait only bounds how long a request lost without a sign goes unnoticed, and
/// none is: a connection delivers in order or closes, one lost with its connection is asked
/// again when the connection closes or reopens (`Command::PeerLink`), one for a partition its
/// leader does not host yet waits there for it, and a leader that stops leading drops what it
/// held while the controller tells its followers whom to ask instead.
const FETCH_MAX_WAIT: Tick = Tick(3000);
/// How long, at most, a leader holds a Fetch whose follower has not heard its high watermark
/// or log start (500 ms, Kafka's replica.fetch.wait.max.ms): without it, the follower whose
/// Fetch proved the last record replicated would hear of the high watermark that Fetch moved
/// only with the next record or when `FETCH_MAX_WAIT` ran out, minutes later; and so would a
/// follower restarted from an older checkpoint. It costs an idle partition one more round trip
/// per follower after its last record, and none while records come at least this often.
const HIGH_WATERMARK_WAIT: Tick = Tick(5);
/// A follower resends its request when no answer came within this long (1 s; a Fetch, which the
/// leader may hold, `FETCH_MAX_WAIT` longer); after an error answer the follower asks again a
/// tick later.
const REQUEST_TIMEOUT: Tick = Tick(10);
/// A leader resends its AlterPartition when no answer came within this long (30 s, Kafka's
/// request timeout), and at once when its broker opens a session with a controller (a request
/// lost with a connection is only lost then: `Command::ControllerLink`). Resent every second, as
/// fetches are, proposals made a storm at 100,000 partitions: answers queued behind a burst of
/// ISR changes came later than a second, every resend was refused as stale (50,000-70,000 a
/// second) and answered with a LeaderAndIsr, and the queues grew past gigabytes.
const ALTER_PARTITION_TIMEOUT: Tick = Tick(300);
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
        heartbeat_interval: HEARTBEAT_TICKS,
        replica_lag_max: REPLICA_LAG_MAX,
        hw_checkpoint_interval: HW_CHECKPOINT_INTERVAL,
        fetch_max_wait: FETCH_MAX_WAIT,
        high_watermark_wait: HIGH_WATERMARK_WAIT,
        request_timeout: REQUEST_TIMEOUT,
        alter_partition_timeout: ALTER_PARTITION_TIMEOUT,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The runtime's timeouts are constants: a change that makes one meaningless (a zero
    /// backoff, a session shorter than a tick) fails here, not in a cluster.
    #[test]
    fn every_process_runs_a_valid_configuration() {
        for flush in [FlushPolicy::Always, FlushPolicy::PageCache] {
            assert_eq!(config(flush).validate(), Ok(()));
        }
    }
}
