//! Configuration, and the rule switches that reproduce the historical bugs.
//!
//! Every rule of the safe protocol whose absence once lost data in Kafka is a field of [`Rules`],
//! and [`Rules::default`] is the safe protocol. Turning one switch back to its historical value
//! lets the model checker show the bug that the rule fixed.

use crate::error::{ConfigError, ParseError};
use crate::types::Tick;
use serde::{Deserialize, Serialize};
use std::fmt;

/// How a follower finds the point where its log and the leader's agree (rule 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TruncationRule {
    /// Before KIP-101: truncate to the follower's own high watermark. Loses committed records
    /// because a follower's HW lags the leader's by a fetch round trip.
    HighWatermark,
    /// KIP-101: one OffsetForLeaderEpoch lookup for the follower's latest epoch, falling back to
    /// the high watermark when the leader has no entry for it (KAFKA-6361).
    Kip101,
    /// KIP-279: repeat OffsetForLeaderEpoch with the largest epoch both sides know until the logs
    /// agree. Never consults the high watermark.
    Kip279,
}

/// When data reaches durable storage (rule 10).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FlushPolicy {
    /// Every append is flushed before anything is reported or acknowledged.
    Always,
    /// Kafka's default: acknowledge what sits in the page cache; flush only on clean shutdown.
    PageCache,
}

/// The rule switches. `Rules::default()` is the safe protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Rules {
    /// Rule 3: how followers truncate.
    pub truncation: TruncationRule,
    /// Rule 4 (KIP-320): Fetch and OffsetForLeaderEpoch carry the sender's leader epoch and are
    /// answered with an error unless it equals the receiver's.
    pub epoch_fencing: bool,
    /// Rule 6 (KAFKA-7128): a follower joins the ISR only once the leader's HW has reached the
    /// start of the leader's current epoch.
    pub expansion_epoch_check: bool,
    /// Rule 7 (AsyncIsr): while an AlterPartition is pending, the leader computes HW over the
    /// maximal ISR (current ∪ proposed). Off: over the minimal one (current ∩ proposed), which
    /// counts a shrink before the controller confirms it and ignores a pending addition.
    pub maximal_isr_hw: bool,
    /// Rule 5 (KIP-966): HW advances only while the ISR has at least `min.insync.replicas`.
    pub strict_min_isr: bool,
    /// Rule 8/10 (KIP-966): Eligible Leader Replicas, and a replica that crashed uncleanly is not
    /// electable until it has rejoined the ISR.
    pub eligible_leader_replicas: bool,
    /// Rule 8: elect a replica outside the ISR (and ELR) when nothing else is alive.
    pub unclean_leader_election: bool,
    /// Rule 10: what followers acknowledge.
    pub flush: FlushPolicy,
    /// Rules 11 and 12 (KAFKA-6082, KAFKA-14154): a controller's writes to the store are
    /// conditional on it still holding the controller role, and nothing it decides leaves it
    /// unless the store confirms that; brokers ignore orders and answers from a controller
    /// epoch older than one they have seen, and a controller refuses an AlterPartition from a
    /// broker that has seen a newer controller. Off: writes are unconditional and brokers
    /// accept any controller epoch, so a deposed controller (a zombie) keeps steering.
    pub controller_fencing: bool,
    /// A leader refuses a write its log did not take in full (a failed disk), with
    /// KAFKA_STORAGE_ERROR. Off: it reads the write's end offset from the log after appending,
    /// as isr did before 2026-12-01, so on a full disk a write the log never held is
    /// acknowledged at once when the high watermark had reached the log end (found by the
    /// fault suite's `disk-full-leader`). On when a serialized config (a trace's) predates it.
    #[serde(default = "on")]
    pub append_check: bool,
    /// Rule 14 (KIP-98): every replica keeps its idempotent producers' latest batches from its
    /// own log — the ones it appends as leader, the ones it replicates as follower, all of them
    /// again on restart and after a truncation — so whichever replica leads recognises the
    /// retry of a batch its log holds and stores it once. Off: a replica knows only the
    /// batches it took as leader, in memory, so after a failover the new leader stores a
    /// retried batch a second time. On when a serialized config predates it.
    #[serde(default = "on")]
    pub producer_state: bool,
    /// Rule 15: a group's coordinator loads the group (its membership and committed offsets)
    /// from its offsets partition only once its high watermark has reached its current leader
    /// epoch ([`crate::group::load_point`]), and answers nothing for the group before. Off: it
    /// loads as soon as it leads, up to whatever its HW is then, which may lag a commit its
    /// predecessor acknowledged: the group's offset moves back. On when a serialized config
    /// predates it.
    #[serde(default = "on")]
    pub coordinator_load: bool,
    /// Rule 16: an OffsetCommit from a member is accepted only in the group's current
    /// generation ([`crate::group::Group::may_commit`]). Off: any commit is accepted, as
    /// OffsetCommit v0 (which carried no generation) was, so a member the group has dropped
    /// commits over its successor. On when a serialized config predates it.
    #[serde(default = "on")]
    pub generation_check: bool,
    /// Rule 17 (KIP-107): the log start offset never passes the high watermark. A leader
    /// refuses DeleteRecords beyond its HW (OFFSET_OUT_OF_RANGE), a follower takes its
    /// leader's log start from a Fetch answer only up to its own HW, and retention deletes
    /// only below the HW. Off: DeleteRecords may delete up to the LEO, records no consumer may
    /// read yet and no other replica may hold yet. On when a serialized config predates it.
    #[serde(default = "on")]
    pub log_start_within_hw: bool,
    /// Rule 18: compaction (Kafka's log cleaner) removes a record only when a later record of
    /// the same key below the replica's high watermark supersedes it, so the record that
    /// supersedes it is committed and every replica that leads later holds it. Off: a replica
    /// cleans up to its LEO, so an uncommitted record may supersede a committed one, and when a
    /// failover truncates it the key's committed value is gone. On when a serialized config
    /// predates it.
    #[serde(default = "on")]
    pub compact_within_hw: bool,
    /// Rule 19 (KAFKA-4485): a leader counts a follower caught up as of its previous Fetch when
    /// this one reaches the log end the leader had then, as well as when it reaches the log end
    /// of the moment. Off: only the second, as Kafka before 0.10.2 and isr before 2026-12-03
    /// did, so under steady writes a follower one round trip behind, fetching every round, is
    /// never seen caught up and leaves the ISR once `replica_lag_max` passes. No record is lost
    /// (the ISR only shrinks), so only the clocked model sees it. On when a serialized config
    /// predates it.
    #[serde(default = "on")]
    pub caught_up_previous_fetch: bool,
}

fn on() -> bool {
    true
}

impl Default for Rules {
    fn default() -> Self {
        Rules {
            truncation: TruncationRule::Kip279,
            epoch_fencing: true,
            expansion_epoch_check: true,
            maximal_isr_hw: true,
            strict_min_isr: true,
            eligible_leader_replicas: true,
            unclean_leader_election: false,
            flush: FlushPolicy::Always,
            controller_fencing: true,
            append_check: true,
            producer_state: true,
            coordinator_load: true,
            generation_check: true,
            log_start_within_hw: true,
            compact_within_hw: true,
            caught_up_previous_fetch: true,
        }
    }
}

/// One row of [`Rules::describe`]: a switch's name, current value, safe value and choices.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RuleInfo {
    /// The switch's name, as [`Rules::set`] takes it (`epoch-fencing`, `elr`, ...).
    pub name: &'static str,
    /// Its value in these rules, spelled as [`Rules::set`] takes it (`on`, `kip101`, ...).
    pub value: String,
    /// Its value in the safe protocol, [`Rules::default`].
    pub safe: String,
    /// The values it accepts, comma-separated.
    pub choices: &'static str,
    /// The rule of spec/protocol.md it switches, with its number and the KIP or JIRA that
    /// introduced it.
    pub rule: &'static str,
}

impl Rules {
    /// The names accepted by [`Rules::set`].
    pub const NAMES: &'static str = "truncation, epoch-fencing, expansion-epoch-check, \
         maximal-isr-hw, strict-min-isr, elr, unclean-election, flush, controller-fencing, \
         append-check, producer-state, coordinator-load, generation-check, \
         log-start-hw, compact-hw, caught-up";

    /// Sets a switch from its textual name and value, as given on a command line.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), ParseError> {
        fn flag(name: &'static str, value: &str) -> Result<bool, ParseError> {
            match value {
                "on" | "true" => Ok(true),
                "off" | "false" => Ok(false),
                other => Err(ParseError::new(name, other, "on, off")),
            }
        }
        match name {
            "truncation" => {
                self.truncation = match value {
                    "high-watermark" | "hw" => TruncationRule::HighWatermark,
                    "kip101" => TruncationRule::Kip101,
                    "kip279" => TruncationRule::Kip279,
                    other => {
                        return Err(ParseError::new(
                            "truncation",
                            other,
                            "high-watermark, kip101, kip279",
                        ))
                    }
                }
            }
            "epoch-fencing" => self.epoch_fencing = flag("epoch-fencing", value)?,
            "expansion-epoch-check" => {
                self.expansion_epoch_check = flag("expansion-epoch-check", value)?
            }
            "maximal-isr-hw" => self.maximal_isr_hw = flag("maximal-isr-hw", value)?,
            "strict-min-isr" => self.strict_min_isr = flag("strict-min-isr", value)?,
            "elr" => self.eligible_leader_replicas = flag("elr", value)?,
            "unclean-election" => self.unclean_leader_election = flag("unclean-election", value)?,
            "flush" => {
                self.flush = match value {
                    "always" => FlushPolicy::Always,
                    "page-cache" => FlushPolicy::PageCache,
                    other => return Err(ParseError::new("flush", other, "always, page-cache")),
                }
            }
            "controller-fencing" => self.controller_fencing = flag("controller-fencing", value)?,
            "append-check" => self.append_check = flag("append-check", value)?,
            "producer-state" => self.producer_state = flag("producer-state", value)?,
            "coordinator-load" => self.coordinator_load = flag("coordinator-load", value)?,
            "generation-check" => self.generation_check = flag("generation-check", value)?,
            "log-start-hw" => self.log_start_within_hw = flag("log-start-hw", value)?,
            "compact-hw" => self.compact_within_hw = flag("compact-hw", value)?,
            "caught-up" => self.caught_up_previous_fetch = flag("caught-up", value)?,
            other => return Err(ParseError::new("rule", other, Rules::NAMES)),
        }
        Ok(())
    }

    /// Every switch with its current and safe value, for listings.
    pub fn describe(&self) -> Vec<RuleInfo> {
        let safe = Rules::default();
        let on = |b: bool| if b { "on" } else { "off" }.to_string();
        let row = |name, value: String, safe: String, choices, rule| RuleInfo {
            name,
            value,
            safe,
            choices,
            rule,
        };
        vec![
            row(
                "truncation",
                self.truncation.to_string(),
                safe.truncation.to_string(),
                "high-watermark, kip101, kip279",
                "3: reconcile by OffsetForLeaderEpoch (KIP-101, KIP-279)",
            ),
            row(
                "epoch-fencing",
                on(self.epoch_fencing),
                on(safe.epoch_fencing),
                "on, off",
                "4: fence Fetch and truncation by epoch (KIP-320)",
            ),
            row(
                "expansion-epoch-check",
                on(self.expansion_epoch_check),
                on(safe.expansion_epoch_check),
                "on, off",
                "6: ISR expansion needs HW at the epoch start (KAFKA-7128)",
            ),
            row(
                "maximal-isr-hw",
                on(self.maximal_isr_hw),
                on(safe.maximal_isr_hw),
                "on, off",
                "7: HW over the maximal ISR while AlterPartition is pending",
            ),
            row(
                "strict-min-isr",
                on(self.strict_min_isr),
                on(safe.strict_min_isr),
                "on, off",
                "5: HW advances only with min.insync.replicas in the ISR (KIP-966)",
            ),
            row(
                "elr",
                on(self.eligible_leader_replicas),
                on(safe.eligible_leader_replicas),
                "on, off",
                "8/10: Eligible Leader Replicas, unclean restarts ineligible (KIP-966)",
            ),
            row(
                "unclean-election",
                on(self.unclean_leader_election),
                on(safe.unclean_leader_election),
                "on, off",
                "8: elect outside the ISR when nothing else is alive",
            ),
            row(
                "flush",
                self.flush.to_string(),
                safe.flush.to_string(),
                "always, page-cache",
                "10: followers acknowledge flushed data",
            ),
            row(
                "controller-fencing",
                on(self.controller_fencing),
                on(safe.controller_fencing),
                "on, off",
                "11/12: the controller epoch fences a deposed controller (KAFKA-6082, KAFKA-14154)",
            ),
            row(
                "append-check",
                on(self.append_check),
                on(safe.append_check),
                "on, off",
                "13: a write the log did not take is refused, never acknowledged",
            ),
            row(
                "producer-state",
                on(self.producer_state),
                on(safe.producer_state),
                "on, off",
                "14: every replica keeps its log's idempotent producer state (KIP-98)",
            ),
            row(
                "coordinator-load",
                on(self.coordinator_load),
                on(safe.coordinator_load),
                "on, off",
                "15: a coordinator loads its group once its HW reached its epoch",
            ),
            row(
                "generation-check",
                on(self.generation_check),
                on(safe.generation_check),
                "on, off",
                "16: an offset commit is accepted only in the group's generation",
            ),
            row(
                "log-start-hw",
                on(self.log_start_within_hw),
                on(safe.log_start_within_hw),
                "on, off",
                "17: the log start offset never passes the high watermark (KIP-107)",
            ),
            row(
                "compact-hw",
                on(self.compact_within_hw),
                on(safe.compact_within_hw),
                "on, off",
                "18: compaction removes only records a committed record supersedes",
            ),
            row(
                "caught-up",
                on(self.caught_up_previous_fetch),
                on(safe.caught_up_previous_fetch),
                "on, off",
                "19: a fetch reaching the log end as of the previous one is caught up (KAFKA-4485)",
            ),
        ]
    }

    /// The switches that differ from the safe protocol, as `name=value`.
    pub fn unsafe_switches(&self) -> Vec<String> {
        let safe = Rules::default().describe();
        self.describe()
            .into_iter()
            .zip(safe)
            .filter(|(mine, safe)| mine.value != safe.value)
            .map(|(mine, _)| format!("{}={}", mine.name, mine.value))
            .collect()
    }
}

impl fmt::Display for TruncationRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TruncationRule::HighWatermark => "high-watermark",
            TruncationRule::Kip101 => "kip101",
            TruncationRule::Kip279 => "kip279",
        })
    }
}

impl fmt::Display for FlushPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FlushPolicy::Always => "always",
            FlushPolicy::PageCache => "page-cache",
        })
    }
}

/// Everything a replica or the controller needs to know besides its state. Times are in ticks,
/// the only time the core knows: the driver says how long a tick is, and passes them in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Config {
    /// The rule switches: the safe protocol, or one with a historical fix turned off.
    pub rules: Rules,
    /// The default `min.insync.replicas` of new partitions.
    pub min_insync_replicas: usize,
    /// A follower that has not caught up to the leader's LEO for this long leaves the ISR.
    pub replica_lag_max: Tick,
    /// A broker whose last heartbeat is older than this is fenced by the controller; a broker
    /// whose controller answered no heartbeat for this long looks for the active one.
    pub session_timeout: Tick,
    /// A broker heartbeats this often ([`crate::broker::Session`]): several times per session,
    /// so that one late heartbeat does not fence it (Kafka: every 2 s, sessions of 9 s).
    pub heartbeat_interval: Tick,
    /// The most log entries one Fetch answer or consumer read carries.
    pub fetch_max_entries: usize,
    /// The most bytes of records one Fetch answer carries (Kafka's replica.fetch.max.bytes),
    /// except that one entry always goes: a frame limit is the core's to respect, not the
    /// driver's to enforce by cutting what the core decided to send.
    pub fetch_max_bytes: usize,
    /// A follower's request unanswered for this long is sent again.
    pub request_timeout: Tick,
    /// A leader's AlterPartition unanswered for this long is sent again. A resend helps only
    /// when the request or its answer was lost; sent while the answer is merely late (a
    /// controller working through a burst of ISR changes, or a broker behind on what the
    /// controller sent it), it is refused as stale and answered with a LeaderAndIsr, which
    /// adds to the backlog that made it late. Kafka's leaders resend only after their
    /// request times out (30 s); a driver that knows when a request was lost with its
    /// connection fires the timer itself then.
    #[serde(default = "default_alter_partition_timeout")]
    pub alter_partition_timeout: Tick,
    /// After an error answer, a follower asks again this much later (not at once: the leader may
    /// not have heard of its new epoch yet, and asking at network speed would only spin).
    pub retry_backoff: Tick,
    /// How long a leader holds a Fetch that found nothing new before answering it empty
    /// (Kafka's replica.fetch.wait.max.ms), so that idle followers do not spin. Zero: never held.
    pub fetch_max_wait: Tick,
    /// How long, at most, a leader holds a Fetch that found nothing new while its follower has
    /// not heard the leader's high watermark or log start: how stale a follower's high
    /// watermark gets on a partition no record comes to (Kafka bounds it by
    /// replica.fetch.wait.max.ms). Capped at `fetch_max_wait`; zero: such a Fetch is answered
    /// at once.
    pub high_watermark_wait: Tick,
    /// The high watermark checkpoint is written at most this often (each costs an fsync); a
    /// lower one is always safe, and a truncation lowers it at once.
    pub hw_checkpoint_interval: Tick,
}

impl Config {
    /// Checks that every setting can be run: each is at least the least value that keeps the
    /// protocol live. A driver checks its configuration once, before the first step; the core
    /// does not check it on every step. Zero is allowed where it means "off": `fetch_max_wait`
    /// (never hold a Fetch), `high_watermark_wait` (never hold one whose follower lags the
    /// leader's high watermark) and `hw_checkpoint_interval` (checkpoint with every change).
    ///
    /// ```
    /// use isr::{Config, ConfigError};
    ///
    /// assert_eq!(Config::default().validate(), Ok(()));
    /// let none_in_sync = Config { min_insync_replicas: 0, ..Config::default() };
    /// assert!(matches!(
    ///     none_in_sync.validate(),
    ///     Err(ConfigError::TooSmall { setting: "min_insync_replicas", .. })
    /// ));
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        let at_least = |setting, value: u64, least, why| {
            if value < least {
                Err(ConfigError::TooSmall {
                    setting,
                    value,
                    least,
                    why,
                })
            } else {
                Ok(())
            }
        };
        at_least(
            "min_insync_replicas",
            self.min_insync_replicas as u64,
            1,
            "the leader is always in sync with itself",
        )?;
        at_least(
            "fetch_max_entries",
            self.fetch_max_entries as u64,
            1,
            "a Fetch answer that carries nothing never lets a follower catch up",
        )?;
        at_least(
            "replica_lag_max",
            self.replica_lag_max.0,
            1,
            "a follower must have some time to catch up",
        )?;
        at_least(
            "session_timeout",
            self.session_timeout.0,
            1,
            "a session must outlast the tick its heartbeat came in",
        )?;
        at_least(
            "heartbeat_interval",
            self.heartbeat_interval.0,
            1,
            "a broker heartbeating with every tick still waits for the next one",
        )?;
        if self.heartbeat_interval >= self.session_timeout {
            return Err(ConfigError::TooSmall {
                setting: "session_timeout",
                value: self.session_timeout.0,
                least: self.heartbeat_interval.0 + 1,
                why: "a session must last longer than the time between two heartbeats",
            });
        }
        at_least(
            "request_timeout",
            self.request_timeout.0,
            1,
            "a request needs time to be answered before it is sent again",
        )?;
        at_least(
            "alter_partition_timeout",
            self.alter_partition_timeout.0,
            1,
            "a request needs time to be answered before it is sent again",
        )?;
        at_least(
            "retry_backoff",
            self.retry_backoff.0,
            1,
            "asking again at once after an error only spins",
        )
    }
}

/// [`Config::alter_partition_timeout`] by default, and in configurations written before it:
/// the default request timeout.
fn default_alter_partition_timeout() -> Tick {
    Tick(10)
}

impl Default for Config {
    fn default() -> Self {
        Config {
            rules: Rules::default(),
            min_insync_replicas: 2,
            replica_lag_max: Tick(30),
            session_timeout: Tick(18),
            heartbeat_interval: Tick(4),
            fetch_max_entries: 1000,
            fetch_max_bytes: usize::MAX,
            request_timeout: Tick(10),
            alter_partition_timeout: default_alter_partition_timeout(),
            retry_backoff: Tick(1),
            fetch_max_wait: Tick(0),
            high_watermark_wait: Tick(0),
            hw_checkpoint_interval: Tick(0),
        }
    }
}
