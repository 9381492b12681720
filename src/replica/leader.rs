//! The leader's side of a replica: producer writes, answering followers, the high watermark and
//! the ISR.

use super::{PendingWrite, Replica, Role};
use crate::config::Config;
use crate::error::{AlterPartitionError, EpochError, IsrChangeError, ReadError, WriteError};
use crate::log::{Entry, Log};
use crate::message::{
    AlterPartitionRequest, AlterPartitionResponse, Effect, Effects, Envelope, FetchRequest,
    FetchResponse, FetchedRecords, Message, OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse, ProduceId,
};
use crate::types::{Acks, BrokerEpoch, BrokerId, LeaderEpoch, Node, Offset, Tick};
use std::collections::{BTreeMap, BTreeSet};

impl<L: Log> Replica<L> {
    /// `LeaderWrite`: appends a producer's records under the leader's epoch (rules 1, 2).
    ///
    /// Returns the offset of the first record. An acks=all write is refused while the ISR is
    /// below `min.insync.replicas` (rule 9) and is acknowledged later, by an
    /// [`Effect::Acknowledge`] carrying `id`, once the high watermark passes it.
    pub fn leader_write(
        &mut self,
        cfg: &Config,
        records: Vec<L::Record>,
        acks: Acks,
        id: ProduceId,
    ) -> Result<(Offset, Effects<L::Record>), WriteError> {
        self.check_writable(acks)?;
        let epoch = self.leader_epoch;
        let base_offset = self.log.log_end_offset();
        let entries: Vec<_> = records
            .into_iter()
            .map(|record| Entry { epoch, record })
            .collect();
        self.append(cfg, &entries);
        let pending = (acks == Acks::All).then(|| PendingWrite {
            id,
            base_offset,
            end_offset: self.log.log_end_offset(),
        });
        Ok((base_offset, self.commit_later(cfg, pending)))
    }

    /// `LeaderWrite` of records the log already holds: a producer's retry of a write whose first
    /// attempt was appended (here, or by an earlier leader that replicated it here) but never
    /// acknowledged. The driver recognises the retry (Kafka's idempotent producers number their
    /// batches); nothing is appended, so the records are not stored twice, and the write is
    /// acknowledged as [`Replica::leader_write`] would acknowledge it: acks=0/1 at once (the
    /// leader holds it), acks=all by an [`Effect::Acknowledge`] carrying `id` once the high
    /// watermark passes `end_offset` (rule 9), at once if it already has. Refused like
    /// `leader_write` when not leading or, for acks=all, below `min.insync.replicas`, and with
    /// [`WriteError::NotInLog`] unless `base_offset..end_offset` lies within the log.
    pub fn leader_retry(
        &mut self,
        cfg: &Config,
        base_offset: Offset,
        end_offset: Offset,
        acks: Acks,
        id: ProduceId,
    ) -> Result<Effects<L::Record>, WriteError> {
        self.check_writable(acks)?;
        if base_offset >= end_offset
            || base_offset < self.log.log_start_offset()
            || end_offset > self.log.log_end_offset()
        {
            return Err(WriteError::NotInLog {
                base_offset,
                end_offset,
            });
        }
        if acks != Acks::All {
            return Ok(Vec::new());
        }
        if end_offset <= self.high_watermark {
            return Ok(vec![Effect::Acknowledge {
                partition: self.partition,
                id,
                base_offset,
            }]);
        }
        let pending = PendingWrite {
            id,
            base_offset,
            end_offset,
        };
        Ok(self.commit_later(cfg, Some(pending)))
    }

    /// Whether this replica may take a write: it leads, and for acks=all the ISR is at least
    /// `min.insync.replicas` (rule 9).
    fn check_writable(&self, acks: Acks) -> Result<(), WriteError> {
        let Role::Leader(l) = &self.role else {
            return Err(WriteError::NotLeader);
        };
        if acks == Acks::All && l.isr.len() < l.min_insync_replicas {
            return Err(WriteError::NotEnoughReplicas {
                isr: l.isr.len(),
                min: l.min_insync_replicas,
            });
        }
        Ok(())
    }

    /// Records an acks=all write to acknowledge once committed, then runs
    /// LeaderIncHighWatermark: the high watermark may move at once (a single-member ISR, or a
    /// leader that has not written in its epoch yet), which acknowledges it.
    fn commit_later(&mut self, cfg: &Config, pending: Option<PendingWrite>) -> Effects<L::Record> {
        if let (Some(w), Role::Leader(l)) = (pending, &mut self.role) {
            l.pending_writes.push(w);
        }
        let mut effects = Vec::new();
        self.maybe_advance_high_watermark(cfg, &mut effects);
        effects
    }

    /// Checks a request's leader epoch against this leader's (rule 4). Without epoch fencing
    /// only leadership itself is checked, as before KIP-320.
    fn check_epoch(&self, cfg: &Config, request_epoch: LeaderEpoch) -> Result<(), EpochError> {
        if !self.is_leader() {
            return Err(EpochError::NotLeader);
        }
        if cfg.rules.epoch_fencing {
            if request_epoch < self.leader_epoch {
                return Err(EpochError::FencedLeaderEpoch);
            }
            if request_epoch > self.leader_epoch {
                return Err(EpochError::UnknownLeaderEpoch);
            }
        }
        Ok(())
    }

    fn reply(&self, to: BrokerId, message: Message<L::Record>) -> Effect<L::Record> {
        Effect::Send(Envelope {
            from: Node::Broker(self.id),
            to: Node::Broker(to),
            message,
        })
    }

    /// Answers a follower's Fetch: records its progress, may expand the ISR (rule 6) and advance
    /// the high watermark (rule 5), then replies with records and the high watermark.
    pub fn on_fetch(&mut self, cfg: &Config, now: Tick, req: &FetchRequest) -> Effects<L::Record> {
        let mut effects = Vec::new();
        let result = self.serve_fetch(cfg, now, req, &mut effects);
        let response = FetchResponse {
            partition: self.partition,
            leader_epoch: self.leader_epoch,
            fetch_offset: req.fetch_offset,
            result,
        };
        effects.push(self.reply(req.replica, Message::FetchResponse(response)));
        effects
    }

    fn serve_fetch(
        &mut self,
        cfg: &Config,
        now: Tick,
        req: &FetchRequest,
        effects: &mut Effects<L::Record>,
    ) -> Result<FetchedRecords<L::Record>, EpochError> {
        self.check_epoch(cfg, req.current_leader_epoch)?;
        let leo = self.log.log_end_offset();
        if req.fetch_offset > leo || req.fetch_offset < self.log.log_start_offset() {
            return Err(EpochError::OffsetOutOfRange);
        }
        let Role::Leader(l) = &mut self.role else {
            return Err(EpochError::NotLeader);
        };
        let Some(progress) = l.followers.get_mut(&req.replica) else {
            return Err(EpochError::NotLeader);
        };
        progress.log_end_offset = Some(req.fetch_offset);
        progress.broker_epoch = req.broker_epoch;
        if req.fetch_offset >= leo {
            progress.last_caught_up = now;
        }
        self.maybe_expand_isr(cfg, req.replica, effects);
        self.maybe_advance_high_watermark(cfg, effects);
        Ok(FetchedRecords {
            entries: self.log.read(req.fetch_offset, leo, cfg.fetch_max_entries),
            high_watermark: self.high_watermark,
        })
    }

    /// Rule 6: a follower outside the ISR joins once its LEO has reached the high watermark and,
    /// under the KAFKA-7128 fix, the start of this leader's epoch: a new leader's high watermark
    /// may lag the committed records, but its epoch starts above all of them. (Checking the
    /// leader's HW against the epoch start instead would be as safe but could deadlock: HW is
    /// frozen while the ISR is below `min.insync.replicas`, so the ISR could never grow back.)
    fn maybe_expand_isr(
        &mut self,
        cfg: &Config,
        follower: BrokerId,
        effects: &mut Effects<L::Record>,
    ) {
        let hw = self.high_watermark;
        let Role::Leader(l) = &self.role else { return };
        let Some(progress) = l.followers.get(&follower) else {
            return;
        };
        let leo = progress.log_end_offset;
        let caught_up = leo >= Some(hw);
        let epoch_reached = !cfg.rules.expansion_epoch_check || leo >= Some(l.epoch_start_offset);
        if l.proposed_isr.is_none() && !l.isr.contains(&follower) && caught_up && epoch_reached {
            let mut isr = l.isr.clone();
            isr.insert(follower);
            let epochs = BTreeMap::from([(follower, progress.broker_epoch)]);
            self.propose_isr(isr, epochs, effects);
        }
    }

    /// `LeaderShrinkIsr`: proposes to drop `follower` from the ISR. The driver decides when a
    /// follower lags (the runtime by ticks in [`Replica::on_tick`], a model at any moment, since
    /// any amount of time may pass).
    pub fn shrink_isr(
        &mut self,
        cfg: &Config,
        follower: BrokerId,
    ) -> Result<Effects<L::Record>, IsrChangeError> {
        let Role::Leader(l) = &self.role else {
            return Err(IsrChangeError::NotLeader);
        };
        if l.proposed_isr.is_some() {
            return Err(IsrChangeError::ChangePending);
        }
        if follower == self.id || !l.isr.contains(&follower) {
            return Err(IsrChangeError::NotAFollowerInIsr(follower));
        }
        let mut isr = l.isr.clone();
        isr.remove(&follower);
        let mut effects = Vec::new();
        self.propose_isr(isr, BTreeMap::new(), &mut effects);
        self.maybe_advance_high_watermark(cfg, &mut effects);
        Ok(effects)
    }

    /// The followers that may leave the ISR now: those in it that have not caught up for longer
    /// than `replica_lag_max`.
    pub fn lagging_followers(&self, cfg: &Config, now: Tick) -> Vec<BrokerId> {
        let Role::Leader(l) = &self.role else {
            return Vec::new();
        };
        l.isr
            .iter()
            .filter(|&&b| b != self.id)
            .filter(|b| {
                l.followers.get(b).is_some_and(|p| {
                    now.0.saturating_sub(p.last_caught_up.0) > cfg.replica_lag_max.0
                })
            })
            .copied()
            .collect()
    }

    /// Time passes: a leader proposes to drop the first lagging follower from the ISR.
    pub fn on_tick(&mut self, cfg: &Config, now: Tick) -> Effects<L::Record> {
        match self.lagging_followers(cfg, now).first() {
            Some(&follower) => self.shrink_isr(cfg, follower).unwrap_or_default(),
            None => Vec::new(),
        }
    }

    /// Sends an AlterPartition for `isr` and remembers it as pending (rule 7).
    fn propose_isr(
        &mut self,
        isr: BTreeSet<BrokerId>,
        broker_epochs: BTreeMap<BrokerId, BrokerEpoch>,
        effects: &mut Effects<L::Record>,
    ) {
        let Role::Leader(l) = &mut self.role else {
            return;
        };
        l.proposed_isr = Some(isr.clone());
        l.proposed_broker_epochs = broker_epochs.clone();
        effects.push(Effect::Send(Envelope {
            from: Node::Broker(self.id),
            to: Node::Controller,
            message: Message::AlterPartition(AlterPartitionRequest {
                partition: self.partition,
                leader: self.id,
                leader_epoch: self.leader_epoch,
                partition_epoch: self.partition_epoch,
                new_isr: isr,
                broker_epochs,
                controller_epoch: self.controller_epoch,
            }),
        }));
    }

    /// The controller's answer to AlterPartition: adopt the confirmed ISR, or forget a refused
    /// proposal. A version conflict keeps the proposal pending until the LeaderAndIsr that
    /// comes with it. With controller fencing an answer from a controller older than one this
    /// replica has heard from is ignored (rule 11): a deposed controller's view must not cancel
    /// a proposal, which stays pending for the current one. That includes the NOT_CONTROLLER a
    /// deposed controller answers to a leader that heard its successor (rule 12).
    pub fn on_alter_partition_response(
        &mut self,
        cfg: &Config,
        resp: &AlterPartitionResponse,
    ) -> Effects<L::Record> {
        let mut effects = Vec::new();
        if !self.is_leader() || !self.hears_controller(cfg, resp.controller_epoch) {
            return effects;
        }
        let (epoch, version) = (self.leader_epoch, self.partition_epoch);
        let Role::Leader(l) = &mut self.role else {
            return effects;
        };
        if l.proposed_isr.as_ref() != Some(&resp.requested_isr)
            || l.proposed_broker_epochs != resp.requested_broker_epochs
            || resp.request_partition_epoch != version
            || resp.partition != self.partition
        {
            return effects;
        }
        match &resp.result {
            Ok(state) if state.leader_epoch == epoch && state.partition_epoch > version => {
                l.isr = state.isr.clone();
                l.clear_proposal();
                self.partition_epoch = state.partition_epoch;
            }
            Ok(_) => return effects,
            // The controller moved on without this proposal, or a duplicate of an accepted one
            // came back refused: either way the controller's state may hold the proposed ISR,
            // so HW stays over the maximal ISR until the LeaderAndIsr that the controller sends
            // with the refusal says which.
            Err(AlterPartitionError::InvalidUpdateVersion { .. }) => return effects,
            Err(_) => l.clear_proposal(),
        }
        self.maybe_advance_high_watermark(cfg, &mut effects);
        effects
    }

    /// Rule 5: raise the high watermark to the minimum LEO over the ISR it is computed over
    /// (rule 7), counting only followers that fetched in this epoch, and — under strict min ISR —
    /// only while the confirmed ISR has `min.insync.replicas` members. Then acknowledge the
    /// acks=all writes it passed (rule 9).
    pub(super) fn maybe_advance_high_watermark(
        &mut self,
        cfg: &Config,
        effects: &mut Effects<L::Record>,
    ) {
        let Role::Leader(l) = &self.role else { return };
        if cfg.rules.strict_min_isr && l.isr.len() < l.min_insync_replicas {
            return;
        }
        let mut new_hw = self.log.log_end_offset();
        for member in l.high_watermark_isr(cfg.rules.maximal_isr_hw) {
            if member == self.id {
                continue;
            }
            match l.followers.get(&member).and_then(|p| p.log_end_offset) {
                Some(leo) => new_hw = new_hw.min(leo),
                None => return,
            }
        }
        if new_hw <= self.high_watermark {
            return;
        }
        self.set_high_watermark(cfg, new_hw, effects);
        let partition = self.partition;
        if let Role::Leader(l) = &mut self.role {
            l.pending_writes.retain(|w| {
                let done = w.end_offset <= new_hw;
                if done {
                    effects.push(Effect::Acknowledge {
                        partition,
                        id: w.id,
                        base_offset: w.base_offset,
                    });
                }
                !done
            });
        }
    }

    /// Answers OffsetForLeaderEpoch (rule 3): the largest epoch not above the requested one, and
    /// the offset where it ends in this leader's log. The leader's own current epoch ends at its
    /// LEO even before it holds records.
    pub fn on_offset_for_leader_epoch(
        &self,
        cfg: &Config,
        req: &OffsetForLeaderEpochRequest,
    ) -> Effects<L::Record> {
        let leo = self.log.log_end_offset();
        let result = self.check_epoch(cfg, req.current_leader_epoch).map(|()| {
            if req.requested_epoch >= self.leader_epoch {
                Some((self.leader_epoch, leo))
            } else {
                self.epoch_cache.end_offset_for(req.requested_epoch, leo)
            }
        });
        let response = OffsetForLeaderEpochResponse {
            partition: self.partition,
            leader_epoch: self.leader_epoch,
            requested_epoch: req.requested_epoch,
            result,
        };
        vec![self.reply(req.replica, Message::OffsetForLeaderEpochResponse(response))]
    }

    /// A consumer's read: at most `max` entries of committed records, from the one holding `from`
    /// up to the high watermark.
    pub fn read_committed(
        &self,
        from: Offset,
        max: usize,
    ) -> Result<Vec<Entry<L::Record>>, ReadError> {
        if !self.is_leader() {
            return Err(ReadError::NotLeader);
        }
        if from < self.log.log_start_offset() || from > self.high_watermark {
            return Err(ReadError::OffsetOutOfRange);
        }
        Ok(self.log.read(from, self.high_watermark, max))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::MemLog;
    use crate::message::{LeaderAndIsr, PartitionState};
    use crate::types::{ControllerEpoch, PartitionEpoch, PartitionId};

    fn acknowledged(effects: &Effects<u64>) -> Vec<ProduceId> {
        effects
            .iter()
            .filter_map(|e| match e {
                Effect::Acknowledge { id, .. } => Some(*id),
                _ => None,
            })
            .collect()
    }

    /// Broker 1 leading partition 0 with broker 2 in the ISR, min ISR 1.
    fn leader(cfg: &Config) -> Replica<MemLog<u64>> {
        let mut r = Replica::new(BrokerId(1), PartitionId(0), MemLog::default());
        let order = LeaderAndIsr {
            partition: PartitionId(0),
            state: PartitionState {
                assigned: vec![BrokerId(1), BrokerId(2)],
                leader: Some(BrokerId(1)),
                leader_epoch: LeaderEpoch(1),
                isr: [BrokerId(1), BrokerId(2)].into(),
                elr: Default::default(),
                partition_epoch: PartitionEpoch(1),
                min_insync_replicas: 1,
            },
            broker_epoch: BrokerEpoch(1),
            controller_epoch: ControllerEpoch(1),
        };
        r.on_leader_and_isr(cfg, Tick(0), &order);
        r
    }

    fn fetch(offset: u64) -> FetchRequest {
        FetchRequest {
            partition: PartitionId(0),
            replica: BrokerId(2),
            broker_epoch: BrokerEpoch(2),
            current_leader_epoch: LeaderEpoch(1),
            fetch_offset: Offset(offset),
        }
    }

    #[test]
    fn a_retry_of_held_records_is_acknowledged_with_them_and_appends_nothing() {
        let cfg = Config::default();
        let mut r = leader(&cfg);
        let (base, effects) = r
            .leader_write(&cfg, vec![7, 8], Acks::All, 1)
            .expect("write");
        assert_eq!(base, Offset(0));
        assert!(acknowledged(&effects).is_empty());

        // The producer, never answered, retries the same two records.
        let effects = r
            .leader_retry(&cfg, Offset(0), Offset(2), Acks::All, 2)
            .expect("retry");
        assert!(effects.is_empty(), "not committed yet");
        assert_eq!(r.log_end_offset(), Offset(2), "nothing appended");

        let effects = r.on_fetch(&cfg, Tick(1), &fetch(2));
        assert_eq!(acknowledged(&effects), vec![1, 2]);

        // Once committed, a later retry is answered at once.
        let effects = r
            .leader_retry(&cfg, Offset(0), Offset(2), Acks::All, 3)
            .expect("retry");
        assert_eq!(acknowledged(&effects), vec![3]);
    }

    #[test]
    fn a_retry_must_name_records_in_the_log_of_a_leader() {
        let cfg = Config::default();
        let mut r = leader(&cfg);
        r.leader_write(&cfg, vec![7], Acks::All, 1).expect("write");
        for (base, end) in [(0, 2), (1, 1), (3, 4)] {
            assert_eq!(
                r.leader_retry(&cfg, Offset(base), Offset(end), Acks::All, 2),
                Err(WriteError::NotInLog {
                    base_offset: Offset(base),
                    end_offset: Offset(end)
                })
            );
        }
        let mut follower = Replica::new(BrokerId(2), PartitionId(0), MemLog::<u64>::default());
        assert_eq!(
            follower.leader_retry(&cfg, Offset(0), Offset(1), Acks::Leader, 1),
            Err(WriteError::NotLeader)
        );
    }

    /// An order for [`leader`]'s partition from controller `controller`: b1 leads epoch 1 with
    /// ISR `isr`, at partition epoch `version`.
    fn order(controller: u32, version: u32, isr: &[u32]) -> LeaderAndIsr {
        LeaderAndIsr {
            partition: PartitionId(0),
            state: PartitionState {
                assigned: vec![BrokerId(1), BrokerId(2)],
                leader: Some(BrokerId(1)),
                leader_epoch: LeaderEpoch(1),
                isr: isr.iter().map(|&b| BrokerId(b)).collect(),
                elr: Default::default(),
                partition_epoch: PartitionEpoch(version),
                min_insync_replicas: 1,
            },
            broker_epoch: BrokerEpoch(1),
            controller_epoch: ControllerEpoch(controller),
        }
    }

    fn cached_isr(r: &Replica<MemLog<u64>>) -> Vec<BrokerId> {
        r.leader_state()
            .expect("leads")
            .isr
            .iter()
            .copied()
            .collect()
    }

    #[test]
    fn an_order_from_a_deposed_controller_is_ignored_once_its_successor_was_heard() {
        let unfenced = Config {
            rules: crate::config::Rules {
                controller_fencing: false,
                ..Default::default()
            },
            ..Config::default()
        };
        for cfg in [Config::default(), unfenced] {
            let mut r = leader(&cfg);
            // The successor's announcement: the same state, in controller epoch 2.
            r.on_leader_and_isr(&cfg, Tick(1), &order(2, 1, &[1, 2]));
            assert_eq!(r.controller_epoch(), ControllerEpoch(2));
            // The zombie's order drops b2 from the ISR at a newer partition epoch.
            r.on_leader_and_isr(&cfg, Tick(2), &order(1, 2, &[1]));
            let expected = if cfg.rules.controller_fencing {
                vec![BrokerId(1), BrokerId(2)]
            } else {
                vec![BrokerId(1)]
            };
            assert_eq!(
                cached_isr(&r),
                expected,
                "{:?}",
                cfg.rules.unsafe_switches()
            );
        }
    }

    #[test]
    fn a_proposal_survives_a_deposed_controllers_answers() {
        let cfg = Config::default();
        let mut r = leader(&cfg);
        r.on_leader_and_isr(&cfg, Tick(1), &order(2, 1, &[1, 2]));
        let effects = r.shrink_isr(&cfg, BrokerId(2)).expect("proposed");
        let Some(Effect::Send(Envelope {
            message: Message::AlterPartition(req),
            ..
        })) = effects.first()
        else {
            panic!("an AlterPartition: {effects:?}");
        };
        assert_eq!(req.controller_epoch, ControllerEpoch(2));
        let refusal = |controller: u32, error| AlterPartitionResponse {
            partition: PartitionId(0),
            request_partition_epoch: req.partition_epoch,
            requested_isr: req.new_isr.clone(),
            requested_broker_epochs: req.broker_epochs.clone(),
            controller_epoch: ControllerEpoch(controller),
            result: Err(error),
        };
        let pending =
            |r: &Replica<MemLog<u64>>| r.leader_state().expect("leads").proposed_isr.clone();
        // The zombie (controller 1) refuses; the leader heard controller 2, so it ignores it,
        // whether the zombie judged on its stale view or saw it is deposed (NOT_CONTROLLER).
        let not_controller = AlterPartitionError::NotController {
            request: ControllerEpoch(2),
            current: ControllerEpoch(1),
        };
        for error in [AlterPartitionError::NotLeader, not_controller] {
            r.on_alter_partition_response(&cfg, &refusal(1, error));
            assert_eq!(pending(&r), Some(req.new_isr.clone()));
        }
        // The current controller's refusal is final.
        r.on_alter_partition_response(&cfg, &refusal(2, AlterPartitionError::NotLeader));
        assert_eq!(pending(&r), None);
    }
}
