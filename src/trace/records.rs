//! The core's inputs and effects with their records replaced (by [`super::Digest`]s, for a
//! trace), everything else kept.

use crate::controller::{Effect as ControllerEffect, Input as ControllerInput};
use crate::log::Entry;
use crate::message::{Effect, Envelope, FetchResponse, FetchedRecords, Message, ReadAnswer};
use crate::replica::Input as ReplicaInput;

/// `entries` with each record `r` replaced by `f(r)`.
pub fn entries<R, S>(entries: &[Entry<R>], f: &impl Fn(&R) -> S) -> Vec<Entry<S>> {
    entries
        .iter()
        .map(|e| Entry {
            epoch: e.epoch,
            record: f(&e.record),
            producer: e.producer,
        })
        .collect()
}

/// `message` with each record `r` replaced by `f(r)`.
pub fn message<R, S>(message: &Message<R>, f: &impl Fn(&R) -> S) -> Message<S> {
    match message {
        Message::FetchResponse(r) => Message::FetchResponse(FetchResponse {
            partition: r.partition,
            leader_epoch: r.leader_epoch,
            fetch_offset: r.fetch_offset,
            result: r
                .result
                .as_ref()
                .map_err(|e| *e)
                .map(|fetched| FetchedRecords {
                    entries: entries(&fetched.entries, f),
                    high_watermark: fetched.high_watermark,
                }),
            log_start_offset: r.log_start_offset,
            first_boundary: r.first_boundary,
        }),
        Message::Fetch(r) => Message::Fetch(r.clone()),
        Message::OffsetForLeaderEpoch(r) => Message::OffsetForLeaderEpoch(r.clone()),
        Message::OffsetForLeaderEpochResponse(r) => {
            Message::OffsetForLeaderEpochResponse(r.clone())
        }
        Message::AlterPartition(r) => Message::AlterPartition(r.clone()),
        Message::AlterPartitionResponse(r) => Message::AlterPartitionResponse(r.clone()),
        Message::LeaderAndIsr(r) => Message::LeaderAndIsr(r.clone()),
        Message::BrokerRegistration {
            broker,
            clean_shutdown,
        } => Message::BrokerRegistration {
            broker: *broker,
            clean_shutdown: *clean_shutdown,
        },
        Message::BrokerHeartbeat { broker } => Message::BrokerHeartbeat { broker: *broker },
    }
}

/// `e` with each record `r` of its message replaced by `f(r)`.
fn envelope<R, S>(e: &Envelope<R>, f: &impl Fn(&R) -> S) -> Envelope<S> {
    Envelope {
        from: e.from,
        to: e.to,
        message: message(&e.message, f),
    }
}

/// `effect` with each record `r` replaced by `f(r)`.
pub fn effect<R, S>(effect: &Effect<R>, f: &impl Fn(&R) -> S) -> Effect<S> {
    match effect {
        Effect::Send(e) => Effect::Send(envelope(e, f)),
        Effect::Read {
            partition,
            id,
            result,
        } => Effect::Read {
            partition: *partition,
            id: *id,
            result: result.as_ref().map_err(|e| *e).map(|a| ReadAnswer {
                entries: entries(&a.entries, f),
                high_watermark: a.high_watermark,
                log_start_offset: a.log_start_offset,
            }),
        },
        Effect::Acknowledge {
            partition,
            id,
            base_offset,
        } => Effect::Acknowledge {
            partition: *partition,
            id: *id,
            base_offset: *base_offset,
        },
        Effect::FailWrite {
            partition,
            id,
            error,
        } => Effect::FailWrite {
            partition: *partition,
            id: *id,
            error: *error,
        },
        Effect::Truncated {
            partition,
            from,
            to,
        } => Effect::Truncated {
            partition: *partition,
            from: *from,
            to: *to,
        },
        Effect::HighWatermark { partition, offset } => Effect::HighWatermark {
            partition: *partition,
            offset: *offset,
        },
        Effect::Flush { partition, up_to } => Effect::Flush {
            partition: *partition,
            up_to: *up_to,
        },
        Effect::CheckpointHighWatermark { partition, offset } => Effect::CheckpointHighWatermark {
            partition: *partition,
            offset: *offset,
        },
        Effect::RecordsDeleted {
            partition,
            id,
            result,
        } => Effect::RecordsDeleted {
            partition: *partition,
            id: *id,
            result: *result,
        },
    }
}

/// A controller's `effect` with each record `r` replaced by `f(r)`.
pub fn controller_effect<R, S>(
    effect: &ControllerEffect<R>,
    f: &impl Fn(&R) -> S,
) -> ControllerEffect<S> {
    match effect {
        ControllerEffect::Send(e) => ControllerEffect::Send(envelope(e, f)),
        ControllerEffect::MustRegister { broker } => {
            ControllerEffect::MustRegister { broker: *broker }
        }
    }
}

/// `input` with each record `r` replaced by `f(r)`.
pub fn replica_input<R, S>(input: &ReplicaInput<R>, f: &impl Fn(&R) -> S) -> ReplicaInput<S> {
    match input {
        ReplicaInput::Message { from, message: m } => ReplicaInput::Message {
            from: *from,
            message: message(m, f),
        },
        ReplicaInput::Write {
            id,
            records,
            acks,
            producer,
        } => ReplicaInput::Write {
            id: *id,
            records: records.iter().map(f).collect(),
            acks: *acks,
            producer: *producer,
        },
        ReplicaInput::DeleteRecords { id, before } => ReplicaInput::DeleteRecords {
            id: *id,
            before: *before,
        },
        ReplicaInput::Retain { before } => ReplicaInput::Retain { before: *before },
        ReplicaInput::Compact => ReplicaInput::Compact,
        ReplicaInput::Read {
            id,
            from,
            max_entries,
            max_bytes,
        } => ReplicaInput::Read {
            id: *id,
            from: *from,
            max_entries: *max_entries,
            max_bytes: *max_bytes,
        },
        ReplicaInput::Tick => ReplicaInput::Tick,
        ReplicaInput::Timeout(t) => ReplicaInput::Timeout(*t),
        ReplicaInput::Flushed(o) => ReplicaInput::Flushed(*o),
        ReplicaInput::Stop { clean } => ReplicaInput::Stop { clean: *clean },
        ReplicaInput::Restart => ReplicaInput::Restart,
    }
}

/// `input` with each record `r` replaced by `f(r)`.
pub fn controller_input<R, S>(
    input: &ControllerInput<R>,
    f: &impl Fn(&R) -> S,
) -> ControllerInput<S> {
    match input {
        ControllerInput::Message { from, message: m } => ControllerInput::Message {
            from: *from,
            message: message(m, f),
        },
        ControllerInput::Tick => ControllerInput::Tick,
        #[cfg(feature = "sim")]
        ControllerInput::Expire(b) => ControllerInput::Expire(*b),
        #[cfg(feature = "sim")]
        ControllerInput::Elect { partition, leader } => ControllerInput::Elect {
            partition: *partition,
            leader: *leader,
        },
        ControllerInput::Register {
            broker,
            clean_shutdown,
            elects,
        } => ControllerInput::Register {
            broker: *broker,
            clean_shutdown: *clean_shutdown,
            elects: elects.clone(),
        },
        ControllerInput::ControlledShutdown(b) => ControllerInput::ControlledShutdown(*b),
        ControllerInput::SessionOpened(b) => ControllerInput::SessionOpened(*b),
    }
}
