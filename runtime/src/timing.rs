//! Time in the runtime: how long a tick lasts and the protocol timeouts in ticks.
//!
//! Chosen so that a leader killed with SIGKILL is replaced within about 2 s: its session expires
//! after `SESSION_TIMEOUT` ticks without a heartbeat (1 s), the controller elects on the next
//! tick, and followers learn of it at once. Heartbeats go out five times per session so that a
//! slow scheduler on a loaded machine does not fence a healthy broker.

use isr::{Config, FlushPolicy, Rules, Tick};
use std::time::Duration;

pub const TICK: Duration = Duration::from_millis(100);
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(200);
const SESSION_TIMEOUT: Tick = Tick(10);
/// `SESSION_TIMEOUT` as a duration.
pub const SESSION: Duration = Duration::from_secs(1);
/// A follower that has not caught up for 3 s leaves the ISR (Kafka: 30 s).
const REPLICA_LAG_MAX: Tick = Tick(30);
/// High watermark checkpoints are written once a second (Kafka: every 5 s), and at once when a
/// truncation lowers them: each costs two fsyncs, and a stale (lower) one is always safe.
pub const CHECKPOINT_TICKS: u64 = 10;
/// How long a leader holds a Fetch that found nothing new before answering it empty.
pub const FETCH_MAX_WAIT: Duration = Duration::from_millis(200);
/// A follower resends its request when no answer came within this long.
pub const REQUEST_TIMEOUT: Duration = Duration::from_millis(1000);
/// An acks=all write not committed within this long is answered REQUEST_TIMED_OUT.
pub const PRODUCE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long admin requests (metadata, topic creation) wait for the controller.
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(5);

/// The core configuration every process of a cluster runs with.
pub fn config(flush: FlushPolicy) -> Config {
    Config {
        rules: Rules {
            flush,
            ..Rules::default()
        },
        session_timeout: SESSION_TIMEOUT,
        replica_lag_max: REPLICA_LAG_MAX,
        ..Config::default()
    }
}
