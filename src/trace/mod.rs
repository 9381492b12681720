//! Traces of the core's inputs and effects, and their replay: the check that what a real
//! deployment did is a behaviour of the protocol the model checker explores.
//!
//! A driver that records a trace writes one [`Event`] per line: who it is ([`Event::Process`]),
//! each replica it recovered from disk ([`Event::Open`]), every input it stepped a replica or
//! the controller with, together with the effects that came back ([`Event::Replica`],
//! [`Event::Controller`]), and the controller's state wherever it changed outside a step
//! ([`Event::ControllerState`]: taking over, an admin operation). A broker's coordinator adds
//! its consumer groups' changes ([`Event::Group`]) and the load points the core gave it
//! ([`Event::LoadPoint`]), and a broker each cleaning its log cleaner installed
//! ([`Event::Cleaned`]). Records travel as [`Digest`]s. The runtime writes traces with `--trace FILE` or `ISR_TRACE=DIR`.
//!
//! [`Replayer`] merges the traces of every process of one run into one order consistent with
//! causality, and re-executes it on the core ([`replay`]).

mod cleanings;
mod digest;
pub mod records;
mod replay;

pub use digest::{BasedEntry, Digest, DigestLog};
pub use replay::{replay, Accepted, Applied, Divergence, Replayer, Trace};

use crate::config::Config;
use crate::controller::{Controller, Effects as ControllerEffects, Input as ControllerInput};
use crate::group::Change as GroupChange;
use crate::log::Entry;
use crate::message::Effects;
use crate::replica::Input as ReplicaInput;
use crate::types::{Node, Offset, PartitionId, Tick};
use serde::{Deserialize, Serialize};

/// One line of a process's trace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Event {
    /// The first line: the node the process is, the configuration its core runs with, and when
    /// it started (any clock, in nanoseconds: it orders the incarnations of one broker, each of
    /// which starts on what the one before left on disk).
    Process {
        /// The node the process is: a broker, or a controller.
        node: Node,
        /// The configuration its core runs with; a replay runs the core with it.
        config: Config,
        /// When it started, in nanoseconds of any clock that orders a broker's incarnations.
        started: u64,
    },
    /// A replica recovered from disk: its log's entries and its high watermark checkpoint
    /// (`Replica::recover`).
    Open {
        /// The partition whose replica was recovered.
        partition: PartitionId,
        /// The high watermark checkpoint it was recovered with.
        hw_checkpoint: Offset,
        /// The entries of its recovered log, from its log start, in order.
        entries: Vec<Entry<Digest>>,
        /// Its recovered log start offset (zero in traces written before logs had one).
        #[serde(default)]
        log_start: Offset,
        /// The first offset of its first entry, when that lies below the log start
        /// (DeleteRecords inside a record batch); absent otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        first_offset: Option<Offset>,
    },
    /// A replica stepped at `now` with `input`, and the effects it returned, in order.
    /// `log_end` is recorded when the log's storage failed during the step (a full disk): the
    /// log took what it holds below that offset and nothing after it.
    Replica {
        /// The partition of the replica stepped.
        partition: PartitionId,
        /// The time the step was given, in ticks.
        now: Tick,
        /// The input, its records as digests.
        input: ReplicaInput<Digest>,
        /// The effects the step returned, in order.
        effects: Effects<Digest>,
        /// The log end offset after a step in which the log's storage failed; `None` otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        log_end: Option<Offset>,
    },
    /// The controller stepped at `now` with `input` (and the step committed to its store),
    /// and the effects it returned.
    Controller {
        /// The time the step was given, in ticks.
        now: Tick,
        /// The input.
        input: ControllerInput<Digest>,
        /// The effects the step returned, in order.
        effects: ControllerEffects<Digest>,
    },
    /// A consumer group at the process's coordinator: created, loaded, stepped or forgotten
    /// at `now` (the coordinator's clock, in its ticks).
    Group {
        /// The group's id.
        group: String,
        /// The time the change was given, in the coordinator's ticks.
        now: Tick,
        /// What happened to the group.
        change: GroupChange,
    },
    /// How far the process's coordinator was told it may load the groups of an offsets
    /// partition it leads ([`crate::group::load_point`]; `None`: not yet).
    LoadPoint {
        /// The offsets partition.
        partition: PartitionId,
        /// The answer the core gave.
        load_point: Option<Offset>,
    },
    /// A cleaning installed in a replica's log outside any step (the runtime's cleaner, below
    /// the bound the core let it go to: rule 18): from `from`, the log holds `entries` where
    /// it held others over the same offsets — batches with superseded records taken out, and
    /// runs of emptied ones merged into one.
    Cleaned {
        /// The partition whose replica was cleaned.
        partition: PartitionId,
        /// The first offset of the first entry.
        from: Offset,
        /// The entries the cleaning left, in order.
        entries: Vec<Entry<Digest>>,
    },
    /// The controller's state as committed outside a step — on taking the role, and after an
    /// administrative change (topics, partitions), which are not protocol — and what it sent.
    ControllerState {
        /// The whole state, as committed to the store.
        state: Controller,
        /// What the controller sent with it (the LeaderAndIsr of taking office or of the
        /// change), in order.
        effects: ControllerEffects<Digest>,
    },
}

impl Event {
    /// A short name for tables: the input's kind, or the event's.
    pub fn label(&self) -> String {
        match self {
            Event::Process { node, .. } => format!("Process({node})"),
            Event::Open {
                partition, entries, ..
            } => format!("Open({partition}, {} entries)", entries.len()),
            Event::Replica { input, .. } => replica_input_label(input),
            Event::Controller { input, .. } => match input {
                ControllerInput::Message { from, message } => {
                    format!("{}({from})", message.kind())
                }
                ControllerInput::Tick => "Tick".into(),
                other => format!("{other:?}"),
            },
            Event::ControllerState { state, .. } => {
                format!("ControllerState(epoch {})", state.epoch().0)
            }
            Event::Group { group, change, .. } => match change {
                GroupChange::Created { .. } => format!("GroupCreated({group})"),
                GroupChange::Loaded { stored, .. } => {
                    format!("GroupLoaded({group}, generation {})", stored.generation)
                }
                GroupChange::Stepped { input, .. } => format!("Group({group}, {})", input.kind()),
                GroupChange::Forgotten => format!("GroupForgotten({group})"),
            },
            Event::Cleaned {
                partition,
                from,
                entries,
            } => format!(
                "Cleaned({partition}, from {from}, {} entries)",
                entries.len()
            ),
            Event::LoadPoint {
                partition,
                load_point,
            } => match load_point {
                Some(o) => format!("LoadPoint({partition}, {o})"),
                None => format!("LoadPoint({partition}, not yet)"),
            },
        }
    }
}

fn replica_input_label(input: &ReplicaInput<Digest>) -> String {
    match input {
        ReplicaInput::Message { from, message } => format!("{}({from})", message.kind()),
        ReplicaInput::Write {
            id,
            records,
            acks,
            producer,
        } => {
            let stamp = producer.map_or(String::new(), |b| {
                format!(", producer {} seq {}", b.producer_id, b.first_sequence)
            });
            format!("Write(#{id}, {} records, {acks:?}{stamp})", records.len())
        }
        ReplicaInput::Read { id, from, .. } => format!("Read(#{id}, from {from})"),
        ReplicaInput::Flushed(offset) => format!("Flushed({offset})"),
        other => format!("{other:?}"),
    }
}
