//! The presets: the safe protocol in its two forms, and one weakened variant per historical bug
//! of the reference's bug table, each with its rule switches, bounds and expected verdict.
//!
//! A bug preset turns exactly the rule switches of its row off (or back to their historical
//! value) and is explored exhaustively at the smallest bounds that show the bug: the checker
//! finds the failure from the switch, no scenario is scripted.

use crate::{Check, Guard, IsrModel};
use isr::sim::Bounds;
use isr::{Acks, Config, Property, Rules, Tick};
use serde::Serialize;
use std::collections::BTreeSet;
use std::fmt;

/// What a check is expected to (or did) come to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// An `always` property held in every state / a `sometimes` guard was reached.
    Holds,
    /// An `always` property was violated / a `sometimes` guard was never reached.
    Fails,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Outcome::Holds => "holds",
            Outcome::Fails => "fails",
        })
    }
}

/// A named configuration with its expected verdict.
#[derive(Clone, Debug)]
pub struct Preset {
    pub name: &'static str,
    /// What the preset shows, and how.
    pub about: &'static str,
    /// Rule switches that differ from the safe protocol, as for [`Rules::set`].
    pub rules: &'static [(&'static str, &'static str)],
    pub min_insync_replicas: usize,
    /// The most entries a Fetch answer carries ([`Config::fetch_max_entries`]): one makes a
    /// follower catch up a record at a time, holding partial fetches.
    pub fetch_max_entries: usize,
    /// Whether a leader holds a Fetch that finds nothing new until data arrives or
    /// `FetchWaitExpired` ([`fetch_max_wait`]).
    pub fetch_wait: bool,
    pub bounds: Bounds,
    /// Changes of the controller's partition state other than elections.
    pub isr_changes: u32,
    /// The `always` properties expected to fail; every other one must hold.
    pub fails: &'static [Property],
    /// The shortest counterexample of each expected failure, one per [`Preset::fails`] in its
    /// order, in each model: the BFS finds the shortest, so these are pinned by the tests and
    /// printed by `isr-check list`.
    pub steps: &'static [Steps],
    /// The guards expected to stay unreached at these bounds; every other one must be reached.
    pub unreached: &'static [Guard],
    /// Explored to the end, every verdict asserted. Otherwise (the bug presets) the search stops
    /// once every expected failure is found, and only those are asserted: showing a bug needs
    /// one counterexample, not the whole state space.
    pub exhaustive: bool,
}

/// How long the shortest counterexample of one of a bug preset's failures is, in each model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Steps {
    /// In the full model (the default).
    pub full: u32,
    /// In the atomic-step model (`--model atomic`), or why that model cannot show the bug:
    /// each such bug needs a message in flight while another step happens, which the atomic
    /// model delivers within the step that sends it.
    pub atomic: Result<u32, &'static str>,
}

/// A bug the atomic-step model shows too, in `full` and `atomic` steps.
const fn both(full: u32, atomic: u32) -> Steps {
    Steps {
        full,
        atomic: Ok(atomic),
    }
}

/// A fetch limit larger than any log of the presets: a Fetch answer carries every entry.
const UNLIMITED: usize = 1000;

/// Bounds shared by the presets; each preset overrides what it needs.
const BASE: Bounds = Bounds {
    replicas: 2,
    partitions: 1,
    records: 1,
    max_leader_epoch: 2,
    clean_crashes: 0,
    unclean_crashes: 0,
    drops: 0,
    duplicates: 0,
    session_expiries: 0,
    acks: Acks::All,
    consumer: true,
    background_flush: false,
    keep_dead: false,
    audit_dead: false,
    controller_failovers: 0,
    disk_failures: 0,
    idempotent: false,
    producer_retries: 0,
    consumers: 0,
    commits: 0,
    consumer_failures: 0,
    max_generation: 3,
    deletes: 0,
    compactions: 0,
    clock: 0,
    atomic: false,
};

/// The two-broker safe presets' bounds (`safe-records`, `safe-divergence`): two records, the
/// consumer, three elections, a clean crash.
const TWO_RECORDS: Bounds = Bounds {
    records: 2,
    max_leader_epoch: 3,
    clean_crashes: 1,
    ..BASE
};

use Property::*;

/// The models' [`Config::fetch_max_wait`] (and [`Config::high_watermark_wait`]), with fetch
/// waits or without. The models' clock stands still, so a held Fetch is answered by new data
/// or by `FetchWaitExpired`, which any wait may reach: only whether leaders wait matters, not
/// for how long.
pub fn fetch_max_wait(on: bool) -> Tick {
    Tick(u64::from(on))
}

pub use isr::sim::{atomic, clocked, CLOCKED_LAG_MAX, CLOCKED_TIMEOUT};

pub const PRESETS: &[Preset] = &[
    Preset {
        name: "safe",
        about: "every rule on, followers acknowledge flushed data, leaders hold Fetches that \
                find nothing new: holds through a crash, a failover and a rejoin (CI bounds; \
                larger bounds on the command line)",
        rules: &[],
        min_insync_replicas: 2,
        fetch_max_entries: UNLIMITED,
        fetch_wait: true,
        bounds: Bounds {
            replicas: 3,
            clean_crashes: 1,
            consumer: false,
            ..BASE
        },
        isr_changes: 2,
        fails: &[],
        steps: &[],
        unreached: &[],
        exhaustive: true,
    },
    Preset {
        name: "controller-failover",
        about: "every rule on, through a controller failover: the old controller runs on as a \
                zombie beside its successor with its in-memory state and its messages in \
                flight, and the store refuses its steps (rule 11); the new controller fences a \
                crashed leader and elects. Holds exhaustively (two brokers keep the suite fast; \
                `check safe --controller-failovers 1` runs three)",
        rules: &[],
        min_insync_replicas: 2,
        fetch_max_entries: UNLIMITED,
        fetch_wait: false,
        bounds: Bounds {
            clean_crashes: 1,
            controller_failovers: 1,
            ..BASE
        },
        isr_changes: 2,
        fails: &[],
        steps: &[],
        unreached: &[],
        exhaustive: true,
    },
    Preset {
        name: "kip966",
        about: "every rule on with page-cache acknowledgement, ELR and strict min ISR, fewer \
                unclean crashes than min.insync.replicas. WeakIsr is expected to fail: a \
                leader's cached ISR still lists a replica that restarted empty after an unclean \
                crash until the controller's LeaderAndIsr reaches the leader; StrongIsr (against \
                the controller's ISR) and the headline property hold. Four ISR changes reach \
                the ELR scenarios: fencing below min ISR puts a broker in the ELR, its unclean \
                restart takes it out, a rejoin empties it",
        rules: &[("flush", "page-cache")],
        min_insync_replicas: 2,
        fetch_max_entries: UNLIMITED,
        fetch_wait: false,
        bounds: Bounds {
            replicas: 3,
            unclean_crashes: 1,
            consumer: false,
            ..BASE
        },
        isr_changes: 4,
        fails: &[WeakIsr],
        steps: &[both(9, 6)],
        unreached: &[],
        exhaustive: true,
    },
    Preset {
        name: "hw-truncation",
        about: "rule 3 off (KIP-101): a follower restarts and truncates to its own high \
                watermark, which lags the leader's by a fetch round trip, dropping a committed \
                record; the leader dies and the truncated follower (in the ELR) is elected",
        rules: &[("truncation", "high-watermark")],
        min_insync_replicas: 2,
        fetch_max_entries: UNLIMITED,
        fetch_wait: false,
        bounds: Bounds {
            clean_crashes: 2,
            ..BASE
        },
        isr_changes: 2,
        fails: &[CommittedRecordsSurviveLeaderFailure],
        steps: &[both(11, 9)],
        unreached: &[],
        exhaustive: false,
    },
    Preset {
        name: "kip101",
        about: "rule 3 weakened (KAFKA-6361): one OffsetForLeaderEpoch lookup whose answer \
                carries no epoch. After quick successive elections the leader has no entry for \
                the follower's epoch and answers with the start of its next epoch; the follower \
                keeps a record the leader does not have and the logs diverge below the HW",
        rules: &[("truncation", "kip101")],
        min_insync_replicas: 2,
        fetch_max_entries: UNLIMITED,
        fetch_wait: false,
        bounds: Bounds {
            records: 2,
            max_leader_epoch: 3,
            clean_crashes: 2,
            acks: Acks::Leader,
            consumer: false,
            ..BASE
        },
        isr_changes: 3,
        fails: &[StrongIsr],
        steps: &[both(14, 11)],
        unreached: &[],
        exhaustive: false,
    },
    Preset {
        name: "kip279",
        about: "rule 4 off (fixed by KIP-320): answers are not fenced by epoch. A FetchResponse \
                the first leader sent in epoch 1 reaches its follower two elections later; the \
                follower appends it on top of a log the new leader has since rewritten, and the \
                two logs differ below both high watermarks (two session expiries move \
                leadership: no crash is needed, and without one the search is half as large; \
                with no crash, when a log is flushed decides nothing, so Kafka's page-cache \
                policy leaves out flush steps that only multiply the interleavings)",
        rules: &[("epoch-fencing", "off"), ("flush", "page-cache")],
        min_insync_replicas: 1,
        fetch_max_entries: UNLIMITED,
        fetch_wait: false,
        bounds: Bounds {
            records: 2,
            max_leader_epoch: 3,
            session_expiries: 2,
            consumer: false,
            ..BASE
        },
        isr_changes: 3,
        fails: &[LogMatching],
        steps: &[Steps {
            full: 18,
            atomic: Err(
                "the first leader's FetchResponse reaches its follower two elections \
                         later; an atomic step acts on an answer in the step that sends it",
            ),
        }],
        unreached: &[],
        exhaustive: false,
    },
    Preset {
        name: "kafka-7128",
        about: "rule 6 off: a new leader whose high watermark lags (frozen below min ISR) \
                admits a replica that restarted empty after an unclean crash, since its LEO 0 \
                reaches that HW; the leader dies and the empty replica, now in the ISR, is \
                elected. The same bounds without the switch are the kip966 rules, which hold",
        rules: &[("expansion-epoch-check", "off"), ("flush", "page-cache")],
        min_insync_replicas: 2,
        fetch_max_entries: UNLIMITED,
        fetch_wait: false,
        bounds: Bounds {
            max_leader_epoch: 3,
            clean_crashes: 1,
            unclean_crashes: 1,
            consumer: false,
            ..BASE
        },
        isr_changes: 4,
        fails: &[CommittedRecordsSurviveLeaderFailure],
        steps: &[Steps {
            full: 13,
            atomic: Err(
                "the new leader's AlterPartition reaches the controller after the \
                         leader shut down; an atomic step delivers it in the step that sends \
                         it",
            ),
        }],
        unreached: &[],
        exhaustive: false,
    },
    Preset {
        name: "confirmed-isr-hw",
        about: "rule 7 off (AsyncIsr): the leader computes the high watermark over the minimal \
                ISR, counting a shrink before the controller confirms it; the controller refuses \
                the shrink, and an ISR member that lacks the committed record is elected",
        rules: &[("maximal-isr-hw", "off")],
        min_insync_replicas: 1,
        fetch_max_entries: UNLIMITED,
        fetch_wait: false,
        bounds: Bounds {
            replicas: 3,
            clean_crashes: 1,
            consumer: false,
            ..BASE
        },
        isr_changes: 2,
        fails: &[CommittedRecordsSurviveLeaderFailure],
        steps: &[Steps {
            full: 9,
            atomic: Err(
                "the controller refuses a shrink for what changed while the proposal \
                         was in flight; an atomic step delivers it in the step that sends it, \
                         and the controller confirms it",
            ),
        }],
        unreached: &[],
        exhaustive: false,
    },
    Preset {
        name: "unclean-election",
        about: "rule 8 off: with the ISR gone, a stale replica is elected and the others \
                truncate to it (ELR off, so it cannot rescue the partition)",
        rules: &[("unclean-election", "on"), ("elr", "off")],
        min_insync_replicas: 1,
        fetch_max_entries: UNLIMITED,
        fetch_wait: false,
        bounds: Bounds {
            clean_crashes: 1,
            ..BASE
        },
        isr_changes: 2,
        fails: &[CommittedRecordsSurviveLeaderFailure],
        steps: &[both(9, 6)],
        unreached: &[],
        exhaustive: false,
    },
    Preset {
        name: "jepsen-2013",
        about: "Kafka 0.8 defaults: min.insync.replicas=1 and unclean election, no ELR. The \
                followers drop out of the ISR, the leader alone acknowledges an acks=all write, \
                then dies; the replica elected lacks it",
        rules: &[("unclean-election", "on"), ("elr", "off")],
        min_insync_replicas: 1,
        fetch_max_entries: UNLIMITED,
        fetch_wait: false,
        bounds: Bounds {
            replicas: 3,
            clean_crashes: 1,
            consumer: false,
            ..BASE
        },
        isr_changes: 3,
        fails: &[CommittedRecordsSurviveLeaderFailure],
        steps: &[both(12, 7)],
        unreached: &[],
        exhaustive: false,
    },
    Preset {
        name: "last-replica-standing",
        about: "ELR off with page-cache acknowledgement (KIP-966): the ISR shrinks to one \
                replica, it crashes uncleanly losing committed records, and is re-elected",
        rules: &[("flush", "page-cache"), ("elr", "off")],
        min_insync_replicas: 2,
        fetch_max_entries: UNLIMITED,
        fetch_wait: false,
        bounds: Bounds {
            replicas: 3,
            unclean_crashes: 1,
            consumer: false,
            ..BASE
        },
        isr_changes: 3,
        fails: &[CommittedRecordsSurviveLeaderFailure],
        steps: &[both(12, 8)],
        unreached: &[],
        exhaustive: false,
    },
    Preset {
        name: "kafka-6082",
        about: "rule 11 off (KAFKA-6082): controller writes are unconditional and brokers accept \
                any controller epoch. A controller loses the role without noticing and runs on \
                as a zombie beside its successor; its orders, made on a stale view, still reach \
                brokers: it elects a replica that lacks a committed record, a follower truncates \
                to it, and the successor later elects that follower (no crash: the page-cache \
                policy, since flush timing decides nothing here)",
        rules: &[("controller-fencing", "off"), ("flush", "page-cache")],
        min_insync_replicas: 2,
        fetch_max_entries: UNLIMITED,
        fetch_wait: false,
        bounds: Bounds {
            replicas: 3,
            controller_failovers: 1,
            consumer: false,
            ..BASE
        },
        isr_changes: 1,
        fails: &[CommittedRecordsSurviveLeaderFailure],
        steps: &[both(9, 8)],
        unreached: &[],
        exhaustive: false,
    },
    Preset {
        name: "disk-full",
        about: "rule 13 off: the leader reads a write's end offset from its log after appending. \
                Its disk fills up under a write: the log takes nothing, the high watermark is \
                already at the log end, so the write is acknowledged at an offset no log holds \
                (found on real processes by isr-faults' disk-full-leader): acknowledged on no \
                copy at all, then lost",
        rules: &[("append-check", "off")],
        min_insync_replicas: 2,
        fetch_max_entries: UNLIMITED,
        fetch_wait: false,
        bounds: Bounds {
            disk_failures: 1,
            ..BASE
        },
        isr_changes: 1,
        fails: &[CommittedRecordsSurviveLeaderFailure, AcknowledgedOnMinIsr],
        steps: &[both(4, 4), both(1, 1)],
        unreached: &[],
        exhaustive: false,
    },
    Preset {
        name: "safe-records",
        about: "every rule on, with what the other safe presets leave out: two records, a \
                consumer, a fetch limit of one record (a follower catches up a record at a \
                time), a clean and an unclean crash, three elections and three ISR changes. \
                Two brokers keep it small (safe-fetch-limit has the third broker a follower's \
                HW cap needs)",
        rules: &[],
        min_insync_replicas: 2,
        fetch_max_entries: 1,
        fetch_wait: false,
        bounds: Bounds {
            unclean_crashes: 1,
            ..TWO_RECORDS
        },
        isr_changes: 3,
        fails: &[],
        steps: &[],
        unreached: &[],
        exhaustive: true,
    },
    Preset {
        name: "safe-atomic",
        about: "every rule on, in the atomic-step model (--model atomic: each step runs until \
                only requests wait, as the TLA+ anchor's actions do) at the anchor's bounds: \
                three brokers, two records, three leader epochs, a clean and an unclean crash. \
                The full model holds 519 M states there; this one 1.3 M",
        rules: &[],
        min_insync_replicas: 2,
        fetch_max_entries: UNLIMITED,
        fetch_wait: false,
        bounds: Bounds {
            replicas: 3,
            records: 2,
            max_leader_epoch: 3,
            clean_crashes: 1,
            unclean_crashes: 1,
            consumer: false,
            atomic: true,
            ..BASE
        },
        isr_changes: 2,
        fails: &[],
        steps: &[],
        unreached: &[],
        exhaustive: true,
    },
    Preset {
        name: "safe-atomic-epochs",
        about: "every rule on, in the atomic-step model, with logs that hold three leader \
                epochs: two brokers, three records, four leader epochs through two clean \
                crashes and a session expiry (a zombie leader), so reconciliation and the \
                epoch cache meet epochs that ended before the last",
        rules: &[],
        min_insync_replicas: 2,
        fetch_max_entries: UNLIMITED,
        fetch_wait: false,
        bounds: Bounds {
            records: 3,
            max_leader_epoch: 4,
            clean_crashes: 2,
            session_expiries: 1,
            consumer: false,
            atomic: true,
            ..BASE
        },
        isr_changes: 2,
        fails: &[],
        steps: &[],
        unreached: &[],
        exhaustive: true,
    },
    Preset {
        name: "safe-clock",
        about: "every rule on, with the replicas' clocks running: timers fire only when due, \
                every message arrives within a tick, and the producer writes under steady \
                load. No follower ever leaves the ISR (FollowersFetchingEveryRoundStayInIsr), \
                and what the lag, fetch-wait and checkpoint timers do at their deadlines is \
                checked against every property. No crash: the failover guards are unreached",
        rules: &[],
        min_insync_replicas: 2,
        fetch_max_entries: UNLIMITED,
        fetch_wait: true,
        bounds: CLOCK,
        isr_changes: 2,
        fails: &[],
        steps: &[],
        unreached: &[Guard::FailoverCommits, Guard::RestartedReplicaRejoins],
        exhaustive: true,
    },
    Preset {
        name: "kafka-4485",
        about: "KAFKA-4485: a leader counts a follower caught up only when a Fetch reaches its \
                log end of the moment (rule 19 off). Under steady writes the log end moves \
                while each Fetch travels, so a follower that fetches every round, one round \
                trip behind, leaves the ISR once replica_lag_max passes",
        rules: &[("caught-up", "off")],
        min_insync_replicas: 2,
        fetch_max_entries: UNLIMITED,
        fetch_wait: true,
        bounds: CLOCK,
        isr_changes: 2,
        fails: &[FollowersFetchingEveryRoundStayInIsr],
        steps: &[both(16, 14)],
        unreached: &[],
        exhaustive: false,
    },
    Preset {
        name: "safe-fetch-limit",
        about: "every rule on, three brokers, two records and a fetch limit of one record, no \
                crash: with min ISR 2 the HW moves on with two replicas while the third \
                catches up a record at a time, so a Fetch answer carries a HW above that \
                follower's LEO and the follower caps its own HW there (Kafka's \
                `updateHighWatermark`). With two brokers (safe-records) the cap never bites: \
                the HW waits for both. The crash guards are unreached",
        rules: &[],
        min_insync_replicas: 2,
        fetch_max_entries: 1,
        fetch_wait: true,
        bounds: Bounds {
            replicas: 3,
            records: 2,
            consumer: false,
            ..BASE
        },
        isr_changes: 2,
        fails: &[],
        steps: &[],
        unreached: &[Guard::FailoverCommits, Guard::RestartedReplicaRejoins],
        exhaustive: true,
    },
    Preset {
        name: "safe-divergence",
        about: "every rule on, with min ISR 1, so that logs diverge: a leader's record that no \
                follower fetched is overwritten at the same offset by its successor's, and the \
                old leader must reconcile (OffsetForLeaderEpoch on its epoch cache) before it \
                fetches; a fetch of two records carries two epochs. No other safe preset has \
                a replica holding a record the leader does not, so without this one a fault \
                in reconciliation or in the epoch cache failed no preset",
        rules: &[],
        min_insync_replicas: 1,
        fetch_max_entries: 2,
        fetch_wait: false,
        bounds: TWO_RECORDS,
        isr_changes: 3,
        fails: &[],
        steps: &[],
        unreached: &[],
        exhaustive: true,
    },
    Preset {
        name: "partitions",
        about: "every rule on, two partitions on two brokers, both led by broker 0: its crash \
                and fencing move both partitions in one step of the controller (the core's \
                broker-wide steps: fencing, registration, elections), and its registration on \
                restart brings it back into both ISRs. Holds exhaustively (`--partitions N` \
                sets the partitions of any preset)",
        rules: &[],
        min_insync_replicas: 2,
        fetch_max_entries: UNLIMITED,
        fetch_wait: false,
        bounds: Bounds {
            partitions: 2,
            clean_crashes: 1,
            ..BASE
        },
        isr_changes: 2,
        fails: &[],
        steps: &[],
        unreached: &[],
        exhaustive: true,
    },
    Preset {
        name: "idempotent",
        about: "every rule on, an idempotent producer that retries: each record is a batch \
                stamped with its sequence number, and a retry may go to whichever replica \
                leads after a clean failover. Every replica keeps its log's producer state \
                (rule 14), so a retry of a batch the old leader appended is answered with its \
                first offsets and stored once. Holds exhaustively",
        rules: &[],
        min_insync_replicas: 1,
        fetch_max_entries: UNLIMITED,
        fetch_wait: false,
        bounds: Bounds {
            records: 2,
            clean_crashes: 1,
            idempotent: true,
            producer_retries: 1,
            ..BASE
        },
        isr_changes: 2,
        fails: &[],
        steps: &[],
        unreached: &[],
        exhaustive: true,
    },
    Preset {
        name: "producer-state-leader-only",
        about: "rule 14 off: a replica knows only the batches it appended as leader. The \
                leader appends a batch, its follower replicates it, a clean shutdown makes the \
                follower leader, and the producer's retry of the unanswered batch is appended \
                a second time: IdempotentWritesStoredOnce fails (librdkafka#4953 reports \
                duplicates across a leader change; no Kafka JIRA found for this cause)",
        rules: &[("producer-state", "off")],
        min_insync_replicas: 1,
        fetch_max_entries: UNLIMITED,
        fetch_wait: false,
        bounds: Bounds {
            clean_crashes: 1,
            idempotent: true,
            producer_retries: 1,
            ..BASE
        },
        isr_changes: 2,
        fails: &[IdempotentWritesStoredOnce],
        steps: &[both(8, 6)],
        unreached: &[],
        exhaustive: false,
    },
    Preset {
        name: "consumer-group",
        about: "every rule on, a consumer group on one broker: two consumers join, the \
                group's leader assigns the partition, its owner reads, processes and commits \
                its position through the coordinator (the core's group, storing the \
                generation and the commits in the group's offsets partition), and one \
                consumer crashes or pauses past its session while the other takes over. \
                ConsumerResumesWithoutLoss, AcknowledgedCommitsSurvive and \
                FencedMembersCannotCommit hold exhaustively (one broker: no failover, see \
                coordinator-failover)",
        rules: &[("flush", "page-cache")],
        min_insync_replicas: 1,
        fetch_max_entries: UNLIMITED,
        fetch_wait: false,
        bounds: CONSUMER_GROUP,
        isr_changes: 2,
        fails: &[],
        steps: &[],
        unreached: &[Guard::FailoverCommits, Guard::RestartedReplicaRejoins],
        exhaustive: true,
    },
    Preset {
        name: "group-deletes",
        about: "consumer-group's bounds with one DeleteRecords at any offset up to the leader's \
                HW (rule 17): a member whose position was deleted resumes at the log start, as \
                auto.offset.reset=earliest does, and ConsumerResumesWithoutLoss speaks of the \
                records above it (a deleted record is not the group's to lose). Holds \
                exhaustively",
        rules: &[("flush", "page-cache")],
        min_insync_replicas: 1,
        fetch_max_entries: UNLIMITED,
        fetch_wait: false,
        bounds: Bounds {
            deletes: 1,
            ..CONSUMER_GROUP
        },
        isr_changes: 2,
        fails: &[],
        steps: &[],
        unreached: &[Guard::FailoverCommits, Guard::RestartedReplicaRejoins],
        exhaustive: true,
    },
    Preset {
        name: "coordinator-failover",
        about: "every rule on, a consumer's group coordinated by the leader of its offsets \
                partition on two brokers: the consumer joins and commits, and the \
                coordinator's broker shuts down, so the next leader becomes the coordinator \
                and loads the group once its HW has reached its epoch (rule 15). \
                AcknowledgedCommitsSurvive and FencedMembersCannotCommit hold exhaustively",
        rules: &[("flush", "page-cache")],
        min_insync_replicas: 1,
        fetch_max_entries: UNLIMITED,
        fetch_wait: false,
        bounds: FAILOVER,
        isr_changes: 1,
        fails: &[],
        steps: &[],
        unreached: &[Guard::RestartedReplicaRejoins],
        exhaustive: true,
    },
    Preset {
        name: "coordinator-load",
        about: "rule 15 off: a new coordinator loads the group as soon as it leads, up to its \
                HW of the moment. The coordinator's follower holds the acknowledged commit but \
                has not heard the HW pass it when the coordinator shuts down; elected, it \
                loads the group's position from before the commit: AcknowledgedCommitsSurvive \
                fails (no Kafka JIRA found for this cause: Kafka's coordinator loads once its \
                HW reached its epoch)",
        rules: &[("flush", "page-cache"), ("coordinator-load", "off")],
        min_insync_replicas: 2,
        fetch_max_entries: UNLIMITED,
        fetch_wait: false,
        bounds: FAILOVER,
        isr_changes: 1,
        fails: &[AcknowledgedCommitsSurvive],
        steps: &[Steps {
            full: 16,
            atomic: Err(
                "the answer that would raise the new coordinator's high watermark is \
                         still in flight when the old one stops; an atomic step acts on an \
                         answer in the step that sends it",
            ),
        }],
        unreached: &[],
        exhaustive: false,
    },
    Preset {
        name: "generation-check",
        about: "rule 16 off: the coordinator accepts any offset commit, as OffsetCommit v0, \
                which carried no generation, did. A member pauses past its session, the group \
                moves to a new generation without it, and the paused member's commit is \
                stored after the new generation: FencedMembersCannotCommit fails (the check \
                came with Kafka 0.9's group coordinator; no JIRA found for a release without \
                it)",
        rules: &[("flush", "page-cache"), ("generation-check", "off")],
        min_insync_replicas: 1,
        fetch_max_entries: UNLIMITED,
        fetch_wait: false,
        bounds: Bounds {
            replicas: 1,
            commits: 1,
            ..GROUP
        },
        isr_changes: 2,
        fails: &[FencedMembersCannotCommit],
        steps: &[both(8, 8)],
        unreached: &[],
        exhaustive: false,
    },
    Preset {
        name: "delete-records",
        about: "every rule on, a client's DeleteRecords at any offset up to a leader's LEO: the \
                log start moves only up to the HW (rule 17), followers follow it from Fetch \
                answers, one left below it starts afresh there, and the consumer resets to it. \
                Every committed record above the log start survives the crash and the failover. \
                Holds exhaustively",
        rules: &[],
        min_insync_replicas: 1,
        fetch_max_entries: UNLIMITED,
        fetch_wait: false,
        bounds: Bounds {
            records: 2,
            clean_crashes: 1,
            deletes: 1,
            ..BASE
        },
        isr_changes: 2,
        fails: &[],
        steps: &[],
        unreached: &[],
        exhaustive: true,
    },
    Preset {
        name: "log-start-hw",
        about: "rule 17 off: DeleteRecords may move a leader's log start up to its LEO, past its \
                HW, deleting a record before any follower holds it: LogStartWithinHighWatermark \
                fails (KIP-107 answers OFFSET_OUT_OF_RANGE beyond the HW)",
        rules: &[("log-start-hw", "off")],
        min_insync_replicas: 1,
        fetch_max_entries: UNLIMITED,
        fetch_wait: false,
        bounds: Bounds { deletes: 1, ..BASE },
        isr_changes: 2,
        fails: &[LogStartWithinHighWatermark],
        steps: &[both(2, 2)],
        unreached: &[],
        exhaustive: false,
    },
    Preset {
        name: "compaction",
        about: "every rule on, two records of one key, and the log cleaner on any running \
                replica up to its HW (rule 18): the second record supersedes the first, \
                followers copy the gap it leaves and the consumer skips it, through a clean \
                crash and a failover. The key's latest committed value survives; holds \
                exhaustively",
        rules: &[],
        min_insync_replicas: 1,
        fetch_max_entries: UNLIMITED,
        fetch_wait: false,
        bounds: Bounds {
            records: 2,
            clean_crashes: 1,
            compactions: 2,
            ..BASE
        },
        isr_changes: 2,
        fails: &[],
        steps: &[],
        unreached: &[],
        exhaustive: true,
    },
    Preset {
        name: "compact-hw",
        about: "rule 18 off: the log cleaner runs up to a replica's LEO, so it removes a \
                committed record that an uncommitted one supersedes; a failover then truncates \
                the newer record and the key's committed value is gone from that log: \
                CleanedRecordsAreSuperseded fails (Kafka's cleaner stops at the last stable \
                offset, below the HW)",
        rules: &[("compact-hw", "off")],
        min_insync_replicas: 1,
        fetch_max_entries: UNLIMITED,
        fetch_wait: false,
        bounds: Bounds {
            records: 2,
            clean_crashes: 1,
            compactions: 1,
            ..BASE
        },
        isr_changes: 2,
        fails: &[CleanedRecordsAreSuperseded],
        steps: &[both(11, 9)],
        unreached: &[],
        exhaustive: false,
    },
];

/// The clocked presets' bounds: two brokers, no crash, records enough to keep a follower's
/// fetches behind the log end for longer than [`CLOCKED_LAG_MAX`], and the clock a little
/// further.
const CLOCK: Bounds = Bounds {
    records: 4,
    max_leader_epoch: 1,
    consumer: false,
    clock: 10,
    ..BASE
};

/// The consumer-group presets' bounds: one record, two consumers that may fail once and
/// commit twice, up to generation 3; no broker stops.
const GROUP: Bounds = Bounds {
    consumer: false,
    consumers: 2,
    commits: 2,
    consumer_failures: 1,
    ..BASE
};

/// `consumer-group`'s bounds (and `group-deletes`'s, with a DeleteRecords): the group on one
/// broker, two records to read.
const CONSUMER_GROUP: Bounds = Bounds {
    replicas: 1,
    records: 2,
    ..GROUP
};

/// The coordinator failover presets' bounds: two brokers, one consumer that commits once
/// without reading (no producer), a clean shutdown.
const FAILOVER: Bounds = Bounds {
    records: 0,
    clean_crashes: 1,
    consumers: 1,
    commits: 1,
    consumer_failures: 0,
    ..GROUP
};

impl Preset {
    /// The preset called `name`.
    pub fn find(name: &str) -> Option<&'static Preset> {
        PRESETS.iter().find(|p| p.name == name)
    }

    /// Every preset name, comma-separated, for error messages.
    pub fn names() -> String {
        PRESETS
            .iter()
            .map(|p| p.name)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The rules of this preset.
    pub fn rules(&self) -> Rules {
        let mut rules = Rules::default();
        for (name, value) in self.rules {
            rules
                .set(name, value)
                .expect("preset rule switches are valid (tested)");
        }
        rules
    }

    /// The configuration of this preset.
    pub fn config(&self) -> Config {
        let mut cfg = Config {
            rules: self.rules(),
            min_insync_replicas: self.min_insync_replicas,
            fetch_max_entries: self.fetch_max_entries,
            fetch_max_wait: fetch_max_wait(self.fetch_wait),
            high_watermark_wait: fetch_max_wait(self.fetch_wait),
            ..Config::default()
        };
        if self.bounds.clock > 0 {
            clocked(&mut cfg);
        }
        if self.bounds.atomic {
            atomic(&mut cfg);
        }
        cfg
    }

    pub fn model(&self) -> IsrModel {
        IsrModel::new(self.config(), self.bounds.clone(), self.isr_changes)
    }

    /// The preset as the atomic-step model (`--model atomic`, [`Bounds::atomic`]).
    pub fn atomic_model(&self) -> IsrModel {
        let mut cfg = self.config();
        atomic(&mut cfg);
        let bounds = Bounds {
            atomic: true,
            ..self.bounds.clone()
        };
        IsrModel::new(cfg, bounds, self.isr_changes)
    }

    /// The expected outcome of a check; `None` when it is not asserted.
    pub fn expected(&self, check: Check) -> Option<Outcome> {
        self.expected_in(check, false)
    }

    /// The expected outcome of a check in the full model or, with `atomic`, the atomic-step
    /// one, where a bug only the full model shows ([`Preset::atomic_gap`]) is expected to hold.
    pub fn expected_in(&self, check: Check, atomic: bool) -> Option<Outcome> {
        if let Check::Always(p) = check {
            if atomic && self.atomic_gap(p).is_some() {
                return Some(Outcome::Holds);
            }
        }
        let fails = match check {
            Check::Always(p) => self.fails.contains(&p),
            Check::Sometimes(g) => self.unreached.contains(&g),
        };
        if fails {
            Some(Outcome::Fails)
        } else if self.exhaustive {
            Some(Outcome::Holds)
        } else {
            None
        }
    }

    /// Why the atomic-step model cannot show `property` failing here, if it is one of the
    /// expected failures that model cannot show ([`Steps::atomic`]).
    pub fn atomic_gap(&self, property: Property) -> Option<&'static str> {
        let at = self.fails.iter().position(|&p| p == property)?;
        self.steps.get(at)?.atomic.err()
    }

    /// Where the search may stop: once these properties have failed (bug presets only).
    pub fn stop_at(&self) -> Option<BTreeSet<&'static str>> {
        self.stop_at_in(false)
    }

    /// Where the search may stop in the full model or, with `atomic`, the atomic-step one:
    /// nowhere there when the preset's bug is one only the full model shows, since only a
    /// whole search says a property holds.
    pub fn stop_at_in(&self, atomic: bool) -> Option<BTreeSet<&'static str>> {
        let gap = atomic && self.fails.iter().any(|&p| self.atomic_gap(p).is_some());
        (!self.exhaustive && !gap).then(|| self.fails.iter().map(|p| p.name()).collect())
    }
}
