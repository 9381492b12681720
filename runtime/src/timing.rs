//! Time in the runtime: how long a tick lasts and the protocol timeouts in ticks.
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
/// How long a leader holds a Fetch that found nothing new before answering it empty (200 ms).
const FETCH_MAX_WAIT: Tick = Tick(2);
/// A follower resends its request, and a leader its AlterPartition, when no answer came within
/// this long (1 s); after an error answer the follower asks again a tick later.
const REQUEST_TIMEOUT: Tick = Tick(10);
const RETRY_BACKOFF: Tick = Tick(1);
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
