//! Role changes: the controller's LeaderAndIsr makes a replica lead, follow, or take note of a
//! new ISR.

use super::{FollowerPhase, FollowerProgress, FollowerState, LeaderState, Replica, Role};
use crate::config::{Config, TruncationRule};
use crate::error::WriteError;
use crate::log::Log;
use crate::message::{Effect, Effects, LeaderAndIsr, PartitionState};
use crate::types::{BrokerEpoch, BrokerId, ControllerEpoch};
use std::collections::BTreeMap;

impl<L: Log> Replica<L> {
    /// Applies the controller's LeaderAndIsr: become leader, become follower, or take note of an
    /// ISR change. Stale orders (older leader epoch, or same epoch and no newer partition epoch)
    /// are ignored, whatever the rules: Kafka always did that much. With controller fencing
    /// (rule 11), so is an order from a controller older than one this replica has heard from.
    pub(super) fn on_leader_and_isr(
        &mut self,
        cfg: &Config,
        msg: &LeaderAndIsr,
        effects: &mut Effects<L::Record>,
    ) {
        let state = &msg.state;
        if msg.partition != self.partition || !self.hears_controller(cfg, msg.controller_epoch) {
            return;
        }
        // Broker epochs only grow, so the newest is right even on an otherwise stale order: a
        // broker that re-registered without a partition change must still fetch as its new
        // incarnation, or it could never rejoin the ISR.
        self.broker_epoch = self.broker_epoch.max(msg.broker_epoch);
        if (state.leader_epoch, state.partition_epoch) <= (self.leader_epoch, self.partition_epoch)
            || self.isr_change_of_followed_term(cfg, state)
        {
            return;
        }
        let new_epoch = state.leader_epoch != self.leader_epoch;
        let was_following = self.leader();
        self.leader_epoch = state.leader_epoch;
        self.partition_epoch = state.partition_epoch;
        if state.leader == Some(self.id) {
            match &mut self.role {
                Role::Leader(l) if !new_epoch => {
                    // Same term, new ISR from the controller: it supersedes any pending change.
                    l.isr = state.isr.clone();
                    l.clear_proposal();
                    l.assigned = state.assigned.clone();
                    l.min_insync_replicas = state.min_insync_replicas;
                    self.maybe_advance_high_watermark(cfg, effects);
                }
                _ => self.become_leader(msg, effects),
            }
        } else {
            self.fail_pending_writes(effects);
            if new_epoch || was_following != state.leader || self.is_leader() {
                self.become_follower(cfg, state.leader, effects);
            }
        }
    }

    /// Whether an order only changes the ISR of the term this replica follows in: the same
    /// leader epoch and the same leader, not this replica. A follower keeps no ISR, so there is
    /// nothing for it to do, not even to note the partition epoch: with controller fencing a
    /// leader epoch names one leader, so no later order of the term can name another, and an
    /// order of a later term is newer by its leader epoch alone. (Without fencing a zombie
    /// controller may name another leader in the same epoch, and only the partition epoch tells
    /// which order is newer.) Skipping these orders spares a model checker the states that
    /// differ only in whether a follower has heard of an ISR change.
    pub(super) fn isr_change_of_followed_term(&self, cfg: &Config, state: &PartitionState) -> bool {
        cfg.rules.controller_fencing
            && matches!(&self.role, Role::Follower(f) if f.leader == state.leader)
            && state.leader != Some(self.id)
            && state.leader_epoch == self.leader_epoch
    }

    /// Rule 11: whether an order or answer from the controller of `epoch` may be acted on: with
    /// controller fencing only if no newer controller has been heard from. Notes the epoch.
    pub(super) fn hears_controller(&mut self, cfg: &Config, epoch: ControllerEpoch) -> bool {
        if cfg.rules.controller_fencing && epoch < self.controller_epoch {
            return false;
        }
        self.controller_epoch = self.controller_epoch.max(epoch);
        true
    }

    fn become_leader(&mut self, msg: &LeaderAndIsr, effects: &mut Effects<L::Record>) {
        self.fail_pending_writes(effects);
        let state = &msg.state;
        let followers = state
            .assigned
            .iter()
            .filter(|&&b| b != self.id)
            .map(|&b| {
                let progress = FollowerProgress {
                    log_end_offset: None,
                    broker_epoch: BrokerEpoch(0),
                    last_caught_up: self.now,
                    previous_fetch: None,
                };
                (b, progress)
            })
            .collect();
        self.drop_held_requests();
        self.role = Role::Leader(LeaderState {
            assigned: state.assigned.clone(),
            isr: state.isr.clone(),
            proposed_isr: None,
            proposed_broker_epochs: BTreeMap::new(),
            epoch_start_offset: self.log.log_end_offset(),
            min_insync_replicas: state.min_insync_replicas,
            followers,
            pending_writes: Vec::new(),
            proposal_sent: None,
            parked: BTreeMap::new(),
        });
    }

    /// Follows `leader` (nobody, if `None`): reconcile first where the rules ask for it, and
    /// send the first request at once — unless a request to that same leader is out: its
    /// answer, which the follower can no longer use, sends the next one (one request out at a
    /// time).
    pub(super) fn become_follower(
        &mut self,
        cfg: &Config,
        leader: Option<BrokerId>,
        effects: &mut Effects<L::Record>,
    ) {
        if cfg.rules.truncation == TruncationRule::HighWatermark && leader.is_some() {
            // The seeds' rule (pre-KIP-101): drop everything above the own high watermark.
            self.truncate_to(cfg, self.high_watermark, effects);
        }
        let phase = match (cfg.rules.truncation, self.epoch_cache.latest_epoch()) {
            (TruncationRule::HighWatermark, _) | (_, None) => FollowerPhase::Fetching,
            (_, Some(latest)) => FollowerPhase::Reconciling { requested: latest },
        };
        let out = match &self.role {
            Role::Follower(f) if f.leader == leader && !self.holds_request() => {
                f.request_out.map(|epoch| (f.last_request, epoch))
            }
            _ => None,
        };
        self.drop_held_requests();
        self.role = Role::Follower(FollowerState {
            leader,
            phase,
            last_request: out.map_or(self.now, |(sent, _)| sent),
            request_out: out.map(|(_, epoch)| epoch),
        });
        if out.is_none() {
            self.send_request(cfg, effects);
        }
    }

    /// Answers every pending acks=all write with NOT_LEADER, and every fetch it held: this
    /// replica will not commit them, nor serve fetches, any more.
    pub(super) fn fail_pending_writes(&mut self, effects: &mut Effects<L::Record>) {
        if let Role::Leader(l) = &mut self.role {
            for w in l.pending_writes.drain(..) {
                effects.push(Effect::FailWrite {
                    partition: self.partition,
                    id: w.id,
                    error: WriteError::NotLeader,
                });
            }
            l.parked.clear();
        }
    }
}
