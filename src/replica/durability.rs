//! What must be durable before what may leave (rule 10), and what survives a stop.
//!
//! The core never makes the log durable itself: it asks the driver to ([`Effect::Flush`]) and
//! learns of it ([`super::Input::Flushed`]). Under `flush=always`, an effect that reports or
//! acknowledges data — a follower's next Fetch (its offset is progress the leader will count),
//! an acks=0/1 answer — is held here until the log is durable that far; a leader counts only its
//! durable log towards the high watermark, so an acks=all acknowledgement, which waits for the
//! high watermark, never needs holding. Under `flush=page-cache` nothing waits (Kafka's default:
//! acknowledge what sits in the page cache), and the driver flushes when it likes, as the OS
//! would.

use super::{FollowerPhase, FollowerState, Replica, Role};
use crate::config::{Config, FlushPolicy};
use crate::epoch_cache::EpochCache;
use crate::log::{first_boundary, Entry, Log};
use crate::message::{Effect, Effects, Message};
use crate::producers::Producers;
use crate::types::{BrokerEpoch, ControllerEpoch, Offset, PartitionEpoch};

impl<L: Log> Replica<L> {
    /// Appends entries at the log end, keeping the epoch cache and the producer state in step
    /// (rule 14: a follower's too, unless `producer-state` is off), and asks for them to be
    /// made durable under `flush=always`.
    ///
    /// Returns whether the log took them all. [`Log::append`] cannot fail, but a log on a disk
    /// that failed (full, or refusing writes) takes nothing more and goes offline, and its
    /// driver stops the replica once the step is over. Until then, what the log did not take
    /// must not be answered as written: the caller refuses it instead.
    pub(super) fn append(
        &mut self,
        cfg: &Config,
        entries: &[Entry<L::Record>],
        effects: &mut Effects<L::Record>,
    ) -> bool {
        let first = self.log.log_end_offset();
        self.log.append(entries);
        let end = self.log.log_end_offset();
        let keeps_producers = cfg.rules.producer_state || self.is_leader();
        let (mut offset, mut taken) = (first, 0);
        for e in entries {
            if offset >= end {
                break;
            }
            let next = Offset(offset.0 + L::width(&e.record));
            if let (true, Some(batch)) = (keeps_producers, e.producer) {
                self.producers.appended(batch, offset, next);
            }
            offset = next;
            taken += 1;
        }
        self.epoch_cache.record_all::<L>(first, &entries[..taken]);
        if cfg.rules.flush == FlushPolicy::Always && end > first {
            effects.push(Effect::Flush {
                partition: self.partition,
                up_to: end,
            });
        }
        taken == entries.len() && offset == end
    }

    /// Truncates the log (and what depends on it) to `offset`. A high watermark checkpoint above
    /// the new end would outlive the records it counted: it is lowered, and written, at once.
    /// The producer state is rebuilt from what is left (rule 14): a producer's batches below
    /// the cut that had been pushed out of its latest five are its latest again.
    pub(super) fn truncate_to(
        &mut self,
        cfg: &Config,
        offset: Offset,
        effects: &mut Effects<L::Record>,
    ) {
        let from = self.log.log_end_offset();
        // What lies below the log start is gone already, and was committed (rule 17), as is
        // the whole entry holding it.
        let offset = offset.max(first_boundary(&self.log));
        if offset >= from {
            return;
        }
        self.log.truncate_to(offset);
        self.epoch_cache.truncate_to(offset);
        if !cfg.rules.producer_state {
            self.producers.truncate_to(offset);
        } else if !self.producers.is_empty() {
            self.producers = Producers::from_log(&self.log);
        }
        self.high_watermark = self.high_watermark.min(offset);
        effects.push(Effect::Truncated {
            partition: self.partition,
            from,
            to: offset,
        });
        if self.hw_checkpoint > offset {
            self.hw_checkpoint = offset;
            self.checkpointed_at = self.now;
            effects.push(Effect::CheckpointHighWatermark {
                partition: self.partition,
                offset,
            });
        }
    }

    pub(super) fn set_high_watermark(&mut self, hw: Offset, effects: &mut Effects<L::Record>) {
        if hw != self.high_watermark {
            self.high_watermark = hw;
            effects.push(Effect::HighWatermark {
                partition: self.partition,
                offset: hw,
            });
        }
    }

    /// [`Replica::replicated_offset`] under the configured flush policy.
    pub(super) fn own_progress(&self, cfg: &Config) -> Offset {
        self.replicated_offset(cfg.rules.flush)
    }

    /// How far this replica's own log counts as replicated under `flush` (rule 10): only what is
    /// durable under `flush=always`, everything appended under `flush=page-cache`. What a leader
    /// counts of its own log towards the high watermark (the progress properties ask it too).
    pub fn replicated_offset(&self, flush: FlushPolicy) -> Offset {
        match flush {
            FlushPolicy::Always => self.log.flushed_offset(),
            FlushPolicy::PageCache => self.log.log_end_offset(),
        }
    }

    /// Carries out `effect` once the log is durable up to `until`: now under `flush=page-cache`
    /// or if it already is, else when the driver says so.
    pub(super) fn when_durable(
        &mut self,
        cfg: &Config,
        until: Offset,
        effect: Effect<L::Record>,
        effects: &mut Effects<L::Record>,
    ) {
        if cfg.rules.flush == FlushPolicy::Always && self.log.flushed_offset() < until {
            self.held.push((until, effect));
        } else {
            effects.push(effect);
        }
    }

    /// Forgets a held request to the leader: a newer one replaces it, or the leader changed.
    pub(super) fn drop_held_requests(&mut self) {
        self.held.retain(|(_, e)| !is_request(e));
    }

    /// Whether a request to the leader waits here for the log to be durable (a model checker
    /// asks it too: the request timer cannot fire while the request is only held).
    pub fn holds_request(&self) -> bool {
        self.held.iter().any(|(_, e)| is_request(e))
    }

    /// The driver made the log durable (up to its `flushed_offset`): what waited for that goes,
    /// a leader's high watermark may move, and the checkpoint may follow.
    pub(super) fn on_flushed(&mut self, cfg: &Config, effects: &mut Effects<L::Record>) {
        let durable = self.log.flushed_offset();
        let (ready, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|(until, _)| *until <= durable);
        self.held = waiting;
        effects.extend(ready.into_iter().map(|(_, e)| e));
        self.maybe_advance_high_watermark(cfg, effects);
        self.checkpoint_if_due(cfg, effects);
    }

    /// Checkpoints the high watermark if it moved since the last checkpoint and the interval
    /// has passed.
    pub(super) fn checkpoint_if_due(&mut self, cfg: &Config, effects: &mut Effects<L::Record>) {
        if self.now.0 >= self.checkpointed_at.0 + cfg.hw_checkpoint_interval.0 {
            self.checkpoint(effects);
        }
    }

    /// Checkpoints the high watermark if it moved since the last checkpoint. What is
    /// checkpointed never exceeds the durable log: the checkpoint is what a restart after an
    /// unclean crash starts from.
    pub(super) fn checkpoint(&mut self, effects: &mut Effects<L::Record>) {
        let target = self.high_watermark.min(self.log.flushed_offset());
        if target != self.hw_checkpoint {
            self.hw_checkpoint = target;
            self.checkpointed_at = self.now;
            effects.push(Effect::CheckpointHighWatermark {
                partition: self.partition,
                offset: target,
            });
        }
    }

    /// The broker stops. Clean: the driver has flushed the log (what was held for it is
    /// released first), pending writes are failed. Unclean (power loss): everything above the
    /// flushed offset is lost, the high watermark falls back to its last checkpoint, held
    /// effects are gone, and nothing is answered: the process is gone.
    pub(super) fn stop(&mut self, cfg: &Config, clean: bool, effects: &mut Effects<L::Record>) {
        if clean {
            self.on_flushed(cfg, effects);
            self.fail_pending_writes(effects);
            self.checkpoint(effects);
        } else {
            self.log.lose_unflushed();
            self.epoch_cache = EpochCache::from_log(&self.log);
            self.producers = Producers::from_log(&self.log);
            self.high_watermark = self.recovered_high_watermark();
            self.hw_checkpoint = self.high_watermark;
        }
        self.role = Role::Offline;
        self.forget_volatile();
    }

    /// Restart after a stop: recover from what is durable and wait, as a follower of nobody,
    /// for the controller's LeaderAndIsr. The driver registers the broker.
    ///
    /// Only what is durable survives: the log, its epochs and producers (rebuilt from it) and
    /// the checkpointed high watermark. The current leader epoch is taken from the log, and any partition epoch
    /// is accepted from the controller again.
    pub(super) fn restart(&mut self) {
        self.forget_volatile();
        self.role = Role::Follower(FollowerState {
            leader: None,
            phase: FollowerPhase::Fetching,
            last_request: self.now,
            request_out: None,
        });
    }
}

impl<L: Log> Replica<L> {
    /// Keeps only what is durable, and what is derived from it: the log, its epochs and
    /// producers, the checkpointed high watermark, the log's latest leader epoch. A stopped
    /// replica forgets the rest at once rather than at its restart, so that two stopped
    /// replicas that will restart alike are equal: no model state is told apart by memory that
    /// is gone (and `isr-check refines` compares states exactly).
    fn forget_volatile(&mut self) {
        self.epoch_cache = EpochCache::from_log(&self.log);
        self.producers = Producers::from_log(&self.log);
        self.high_watermark = self.recovered_high_watermark();
        self.hw_checkpoint = self.high_watermark;
        self.leader_epoch = self.epoch_cache.latest_epoch().unwrap_or_default();
        self.partition_epoch = PartitionEpoch(0);
        self.broker_epoch = BrokerEpoch(0);
        self.controller_epoch = ControllerEpoch(0);
        self.held.clear();
    }

    /// The high watermark a replica starts from after a crash: its checkpoint, within its
    /// log. Never below the log start (Kafka's recovery takes the larger of the two): what
    /// was deleted was committed (rule 17), and the checkpoint may predate the deletion.
    fn recovered_high_watermark(&self) -> Offset {
        self.hw_checkpoint
            .min(self.log.log_end_offset())
            .max(first_boundary(&self.log))
    }
}

/// Whether `effect` sends a follower's request to its leader.
fn is_request<R>(effect: &Effect<R>) -> bool {
    matches!(
        effect,
        Effect::Send(env) if matches!(env.message, Message::Fetch(_) | Message::OffsetForLeaderEpoch(_))
    )
}
