//! The follower's side of a replica: reconcile with the leader (rule 3), then fetch.

use super::{FollowerState, Replica, Role};
use crate::config::{Config, TruncationRule};
use crate::error::EpochError;
use crate::log::{first_boundary, Log};
use crate::message::{
    Effect, Effects, Envelope, FetchRequest, FetchResponse, Message, OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
};
use crate::types::{BrokerId, LeaderEpoch, Node, Tick};
use serde::{Deserialize, Serialize};

/// Where a follower stands with its leader.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FollowerPhase {
    /// Asking the leader where epoch `requested` ends, to find where the logs agree.
    Reconciling {
        /// The epoch asked about: at first the follower's latest, then (under KIP-279) the
        /// latest left after each truncation.
        requested: LeaderEpoch,
    },
    /// The logs agree up to the LEO: pulling records.
    Fetching,
}

impl<L: Log> Replica<L> {
    /// `FollowerFetch`: the request a follower sends its leader next — OffsetForLeaderEpoch
    /// while reconciling, Fetch once the logs agree — or `None` without a leader. The replica
    /// sends it itself (after each answer, when it starts following, when its request timer
    /// fires); this only says what it would be.
    pub fn next_request(&self) -> Option<Envelope<L::Record>> {
        let Role::Follower(FollowerState {
            leader: Some(leader),
            phase,
            ..
        }) = &self.role
        else {
            return None;
        };
        let message = match *phase {
            FollowerPhase::Reconciling { requested } => {
                Message::OffsetForLeaderEpoch(OffsetForLeaderEpochRequest {
                    partition: self.partition,
                    replica: self.id,
                    current_leader_epoch: self.leader_epoch,
                    requested_epoch: requested,
                })
            }
            FollowerPhase::Fetching => Message::Fetch(FetchRequest {
                partition: self.partition,
                replica: self.id,
                broker_epoch: self.broker_epoch,
                current_leader_epoch: self.leader_epoch,
                fetch_offset: self.log.log_end_offset(),
                high_watermark: self.high_watermark,
                log_start_offset: self.log.log_start_offset(),
            }),
        };
        Some(Envelope {
            from: Node::Broker(self.id),
            to: Node::Broker(*leader),
            message,
        })
    }

    /// Sends the next request to the leader, and restarts the request timer. A Fetch reports the
    /// follower's log end offset, which the leader counts as replicated (rule 5): under
    /// `flush=always` it waits until the log is durable that far (rule 10), replacing any
    /// request that was still waiting.
    pub(super) fn send_request(&mut self, cfg: &Config, effects: &mut Effects<L::Record>) {
        let Some(request) = self.next_request() else {
            return;
        };
        let (now, epoch) = (self.now, self.leader_epoch);
        if let Role::Follower(f) = &mut self.role {
            f.last_request = now;
            f.request_out = Some(epoch);
        }
        self.drop_held_requests();
        let until = match request.message {
            Message::Fetch(ref fetch) => fetch.fetch_offset,
            _ => self.log.log_start_offset(),
        };
        self.when_durable(cfg, until, Effect::Send(request), effects);
    }

    /// After an error answer from the leader (it may not have heard of the epoch yet: in any
    /// epoch, errors are acted on by retrying only), the request timer fires `retry_backoff`
    /// from now rather than a whole request wait after the request.
    fn retry_soon(&mut self, cfg: &Config, from: BrokerId) {
        let early = Tick(
            self.now
                .0
                .saturating_add(cfg.retry_backoff.0)
                .saturating_sub(self.request_wait(cfg).0),
        );
        if let Role::Follower(f) = &mut self.role {
            if f.leader == Some(from) {
                f.last_request = f.last_request.min(early);
            }
        }
    }

    /// Whether an answer from `from`, sent in `epoch`, is one this follower may act on: it must
    /// come from the leader it follows and — with epoch fencing (rule 4) — in its own epoch.
    fn accepts_answer(
        &self,
        cfg: &Config,
        from: BrokerId,
        epoch: LeaderEpoch,
    ) -> Option<FollowerPhase> {
        match &self.role {
            Role::Follower(FollowerState {
                leader: Some(leader),
                phase,
                ..
            }) if *leader == from && (!cfg.rules.epoch_fencing || epoch == self.leader_epoch) => {
                Some(*phase)
            }
            _ => None,
        }
    }

    /// An answer, sent in leader `epoch`, from the leader this follower follows that it cannot
    /// use: to a request of an earlier epoch or phase (sent before the order that changed them),
    /// or a duplicate. It may be the answer to the request that was out, so the next goes now;
    /// one from an older epoch than that request, or from another broker, says nothing about
    /// it (a request sent to this leader in an earlier term, before the follower followed
    /// another: it sent afresh when it came back).
    fn answered_unusably(
        &mut self,
        cfg: &Config,
        from: BrokerId,
        epoch: LeaderEpoch,
        effects: &mut Effects<L::Record>,
    ) {
        if matches!(&self.role, Role::Follower(f)
            if f.leader == Some(from) && f.request_out.is_some_and(|out| epoch >= out))
        {
            self.send_request(cfg, effects);
        }
    }

    /// Whether an answer from `from`, sent in leader `epoch`, is one this running replica will
    /// neither use nor take for the answer to its request out, now or later (with epoch fencing
    /// it uses only answers of its own epoch from the leader it follows): one older than its
    /// epoch and than its request out (both only grow, and any request it sends later is of its
    /// epoch then); or, with controller fencing too, one of its own epoch while it leads or
    /// follows another broker in it (an epoch has one leader, so it can follow `from` only in a
    /// later epoch, where it starts with a request of its own). A replica that follows nobody
    /// may have restarted, and its registration may make it follow `from` in this very epoch.
    #[cfg(feature = "sim")]
    pub(super) fn outlived(&self, cfg: &Config, from: BrokerId, epoch: LeaderEpoch) -> bool {
        let (request_out, follows_another) = match &self.role {
            Role::Follower(f) => (f.request_out, f.leader.is_some_and(|l| l != from)),
            Role::Leader(_) => (None, true),
            Role::Offline => (None, false),
        };
        cfg.rules.epoch_fencing
            && (epoch < self.leader_epoch && request_out.is_none_or(|out| epoch < out)
                || cfg.rules.controller_fencing && epoch == self.leader_epoch && follows_another)
    }

    fn set_phase(&mut self, phase: FollowerPhase) {
        if let Role::Follower(f) = &mut self.role {
            f.phase = phase;
        }
    }

    /// `BecomeFollowerAndTruncateTo`: acts on the leader's OffsetForLeaderEpoch answer.
    ///
    /// KIP-279: truncate to the smaller of the two ends of the largest common epoch, and ask
    /// again until the answer is about the follower's own latest epoch. KIP-101: one lookup,
    /// trusting its end offset, falling back to the high watermark when there is no answer.
    pub(super) fn on_offset_for_leader_epoch_response(
        &mut self,
        cfg: &Config,
        from: BrokerId,
        resp: &OffsetForLeaderEpochResponse,
        effects: &mut Effects<L::Record>,
    ) {
        if resp.result.is_err() {
            self.retry_soon(cfg, from);
            return;
        }
        let Some(FollowerPhase::Reconciling { requested }) =
            self.accepts_answer(cfg, from, resp.leader_epoch)
        else {
            return self.answered_unusably(cfg, from, resp.leader_epoch, effects);
        };
        let Ok(answer) = resp.result else {
            return;
        };
        if resp.requested_epoch != requested {
            return self.answered_unusably(cfg, from, resp.leader_epoch, effects);
        }
        let leo = self.log.log_end_offset();
        let target = match (cfg.rules.truncation, answer) {
            // KIP-101's answer carried no epoch: the follower trusted the end offset even when
            // it belonged to an older epoch than the one asked about (KAFKA-6361), and fell back
            // to its high watermark when the leader had no answer at all.
            (TruncationRule::Kip101, Some((_, end))) => end.min(leo),
            (TruncationRule::Kip101, None) => self.high_watermark,
            (_, None) => self.log.log_start_offset(),
            (_, Some((epoch, end))) if epoch == requested => end.min(leo),
            (_, Some((epoch, end))) => {
                let own_end = self
                    .epoch_cache
                    .end_offset_for(epoch, leo)
                    .map_or(self.log.log_start_offset(), |(_, own)| own);
                end.min(own_end)
            }
        };
        self.truncate_to(cfg, target, effects);
        let done = answer.is_none_or(|(epoch, _)| epoch == requested)
            || cfg.rules.truncation != TruncationRule::Kip279;
        let phase = match self.epoch_cache.latest_epoch() {
            Some(latest) if !done => FollowerPhase::Reconciling { requested: latest },
            _ => FollowerPhase::Fetching,
        };
        self.set_phase(phase);
        self.send_request(cfg, effects);
    }

    /// `FollowerReplicate`: appends the records of a Fetch answer, takes the leader's high
    /// watermark (capped by the own LEO, never below the own log start) and its log start
    /// (KIP-107), and fetches on. An out-of-range answer below the leader's log start starts
    /// the log afresh there; another out-of-range answer starts reconciliation anew; another
    /// error, a retry after `retry_backoff`.
    pub(super) fn on_fetch_response(
        &mut self,
        cfg: &Config,
        from: BrokerId,
        resp: &FetchResponse<L::Record>,
        effects: &mut Effects<L::Record>,
    ) {
        if matches!(&resp.result, Err(e) if *e != EpochError::OffsetOutOfRange) {
            self.retry_soon(cfg, from);
            return;
        }
        if self.accepts_answer(cfg, from, resp.leader_epoch) != Some(FollowerPhase::Fetching)
            || resp.fetch_offset != self.log.log_end_offset()
        {
            return self.answered_unusably(cfg, from, resp.leader_epoch, effects);
        }
        match &resp.result {
            Ok(fetched) => {
                // A log that failed took less than fetched: the LEO says how much, and the
                // driver stops the replica.
                self.append(cfg, &fetched.entries, effects);
                // Never below the log start (Kafka's `updateHighWatermark`): an answer may
                // carry a HW older than the log start this follower took from a later one
                // (a held Fetch answered after a newer), and what lies below was committed.
                let hw = fetched
                    .high_watermark
                    .min(self.log.log_end_offset())
                    .max(first_boundary(&self.log));
                self.set_high_watermark(hw, effects);
                self.follow_log_start(cfg, resp.log_start_offset, effects);
                self.send_request(cfg, effects);
            }
            // KIP-107: the leader deleted every record this follower lacks. What lies below
            // its log start is committed (rule 17), so the follower starts afresh there, or at
            // the end of the entry holding it, where the leader's entries begin.
            Err(_) if resp.fresh_start() > self.log.log_end_offset() => {
                self.advance_log_start(cfg, resp.fresh_start(), effects);
                self.send_request(cfg, effects);
            }
            Err(_) => {
                let leader = self.leader();
                self.become_follower(cfg, leader, effects);
            }
        }
    }
}
