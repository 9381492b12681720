//! The leader's side of a replica: producer writes, answering followers, the high watermark and
//! the ISR.

use super::{ParkedFetch, PendingWrite, Replica, Role};
use crate::config::Config;
use crate::error::{AlterPartitionError, EpochError, ReadError, WriteError};
use crate::log::{first_boundary, Entry, Log};
use crate::message::{
    AlterPartitionRequest, AlterPartitionResponse, Effect, Effects, Envelope, FetchRequest,
    FetchResponse, FetchedRecords, Message, OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse, ProduceId, ReadAnswer, ReadId,
};
use crate::producers::{Admission, ProducerBatch};
use crate::types::{Acks, BrokerEpoch, BrokerId, LeaderEpoch, Node, Offset, Tick};
use std::collections::{BTreeMap, BTreeSet};

impl<L: Log> Replica<L> {
    /// `LeaderWrite`: appends a producer's records under the leader's epoch (rules 1, 2).
    ///
    /// An acks=all write is refused while the ISR is below `min.insync.replicas` (rule 9) and is
    /// acknowledged once the high watermark passes it; acks=0/1 once the leader holds it, durably
    /// under `flush=always` (rule 10). An idempotent producer's batch is first admitted by the
    /// log's producer state (rule 14): the retry of a batch the log holds is answered as that
    /// write and appends nothing, so it is stored once whichever leader took it first.
    pub(super) fn write(
        &mut self,
        cfg: &Config,
        id: ProduceId,
        records: Vec<L::Record>,
        acks: Acks,
        producer: Option<ProducerBatch>,
        effects: &mut Effects<L::Record>,
    ) {
        let admitted = self.check_writable(acks).and_then(|()| match producer {
            None => Ok(Admission::Append),
            Some(_) if records.len() != 1 => Err(WriteError::NotOneBatch {
                count: records.len(),
            }),
            Some(batch) => self.producers.admit(&batch),
        });
        let (base_offset, end_offset) = match admitted {
            Err(error) => {
                effects.push(self.fail(id, error));
                return;
            }
            Ok(Admission::Duplicate {
                base_offset,
                end_offset,
            }) => (base_offset, end_offset),
            Ok(Admission::Append) => {
                let epoch = self.leader_epoch;
                let base_offset = self.log.log_end_offset();
                let entries: Vec<_> = records
                    .into_iter()
                    .map(|record| Entry {
                        epoch,
                        record,
                        producer,
                    })
                    .collect();
                if !self.append(cfg, &entries, effects) && cfg.rules.append_check {
                    effects.push(self.fail(id, WriteError::LogFailed));
                    return;
                }
                (base_offset, self.log.log_end_offset())
            }
        };
        self.answer_when_committed(cfg, id, base_offset, end_offset, acks, effects);
        self.answer_parked(cfg, effects);
    }

    fn fail(&self, id: ProduceId, error: WriteError) -> Effect<L::Record> {
        Effect::FailWrite {
            partition: self.partition,
            id,
            error,
        }
    }

    /// Answers a write at `base_offset..end_offset` as `acks` asks: acks=all once the high
    /// watermark passes it (rule 9; at once if it has), acks=0/1 once the leader holds it.
    fn answer_when_committed(
        &mut self,
        cfg: &Config,
        id: ProduceId,
        base_offset: Offset,
        end_offset: Offset,
        acks: Acks,
        effects: &mut Effects<L::Record>,
    ) {
        let answer = Effect::Acknowledge {
            partition: self.partition,
            id,
            base_offset,
        };
        if acks != Acks::All {
            self.when_durable(cfg, end_offset, answer, effects);
            return;
        }
        if end_offset <= self.high_watermark {
            effects.push(answer);
            return;
        }
        if let Role::Leader(l) = &mut self.role {
            l.pending_writes.push(PendingWrite {
                id,
                base_offset,
                end_offset,
            });
        }
        // LeaderIncHighWatermark: a single-member ISR, or a leader that has not written in its
        // epoch yet, may commit at once.
        self.maybe_advance_high_watermark(cfg, effects);
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
    /// the high watermark (rule 5), then replies with records and the high watermark. A Fetch
    /// that finds nothing new is held for `fetch_max_wait` (until data comes), so that idle
    /// followers do not spin; its progress counts at once. One whose follower has yet to hear
    /// the high watermark or log start is held only `high_watermark_wait`: a fetch that proves
    /// the last record replicated moves the high watermark, and with nothing else to come its
    /// follower would hear it only when the long wait ran out.
    pub(super) fn on_fetch(
        &mut self,
        cfg: &Config,
        req: FetchRequest,
        effects: &mut Effects<L::Record>,
    ) {
        let counted = self.count_fetch(cfg, &req);
        if counted.is_ok() {
            self.maybe_expand_isr(cfg, [req.replica], effects);
            self.maybe_advance_high_watermark(cfg, effects);
        }
        let result = counted.map(|()| self.fetched(cfg, &req));
        let nothing_new = result.as_ref().is_ok_and(|f| f.entries.is_empty());
        let wait = self.held_wait(cfg, self.has_news_for(&req));
        if let (true, Role::Leader(l)) = (nothing_new && wait > 0, &mut self.role) {
            l.parked.insert(
                req.replica,
                ParkedFetch {
                    request: req,
                    until: Tick(self.now.0.saturating_add(wait)),
                },
            );
            return;
        }
        effects.push(self.fetch_response(&req, result));
    }

    /// Whether an answer to `req` would tell its follower something: a high watermark or log
    /// start above the ones it has.
    fn has_news_for(&self, req: &FetchRequest) -> bool {
        req.high_watermark < self.high_watermark
            || req.log_start_offset < self.log.log_start_offset()
    }

    /// How long this partition's leader holds a Fetch that found nothing: `fetch_max_wait`, or
    /// `high_watermark_wait` if its answer would be news to its follower, less up to half of
    /// it by partition id. The fetches of many partitions are parked together (they were
    /// created together, or data answered them together); held equally long, they would all
    /// be answered and asked again at once, wait after wait, a burst of round trips that can
    /// keep a busy follower from its next Fetch past `replica_lag_max`. Spread by partition —
    /// deterministically, as everything in the core — they come evenly. Zero: not held.
    fn held_wait(&self, cfg: &Config, news: bool) -> u64 {
        let wait = match news {
            true => cfg.high_watermark_wait.0.min(cfg.fetch_max_wait.0),
            false => cfg.fetch_max_wait.0,
        };
        wait - u64::from(self.partition.0) % (wait / 2 + 1)
    }

    /// The high watermark moved: the held fetches are news to their followers now, so each is
    /// held at most `high_watermark_wait` more (answered at once if that is zero).
    fn hold_news_briefly(&mut self, cfg: &Config, effects: &mut Effects<L::Record>) {
        let wait = self.held_wait(cfg, true);
        let until = Tick(self.now.0.saturating_add(wait));
        let Role::Leader(l) = &mut self.role else {
            return;
        };
        if l.parked.is_empty() {
            return;
        }
        if wait == 0 {
            return self.answer_parked(cfg, effects);
        }
        for parked in l.parked.values_mut() {
            parked.until = parked.until.min(until);
        }
    }

    fn fetch_response(
        &self,
        req: &FetchRequest,
        result: Result<FetchedRecords<L::Record>, EpochError>,
    ) -> Effect<L::Record> {
        let response = FetchResponse {
            partition: self.partition,
            leader_epoch: self.leader_epoch,
            fetch_offset: req.fetch_offset,
            result,
            log_start_offset: self.log.log_start_offset(),
            first_boundary: first_boundary(&self.log),
        };
        self.reply(req.replica, Message::FetchResponse(response))
    }

    /// Answers the held fetches with what they find now: new records, or nothing once they
    /// waited long enough. Serving one again is a redelivery of the same request. They are
    /// counted together, then answered: followers caught up at once join the ISR in one
    /// proposal, where answering them one by one would propose whichever comes first, and so
    /// let broker names decide (nothing may: the model checker's symmetry reduction relies on
    /// it).
    pub(super) fn answer_parked(&mut self, cfg: &Config, effects: &mut Effects<L::Record>) {
        let Role::Leader(l) = &mut self.role else {
            return;
        };
        let parked = std::mem::take(&mut l.parked);
        // Each was caught up until now: it reached the LEO, and the LEO moved at most in this
        // step (an append answers them at once).
        let now = self.now;
        for follower in parked.keys() {
            if let Some(progress) = l.followers.get_mut(follower) {
                progress.last_caught_up = now;
            }
        }
        let counted: Vec<_> = parked
            .into_values()
            .map(|p| {
                let counted = self.count_fetch(cfg, &p.request);
                (p.request, counted)
            })
            .collect();
        let caught_up = counted
            .iter()
            .filter(|(_, counted)| counted.is_ok())
            .map(|(req, _)| req.replica);
        self.maybe_expand_isr(cfg, caught_up.collect::<Vec<_>>(), effects);
        self.maybe_advance_high_watermark(cfg, effects);
        for (req, counted) in counted {
            let result = counted.map(|()| self.fetched(cfg, &req));
            effects.push(self.fetch_response(&req, result));
        }
    }

    /// Checks a Fetch and records the follower's progress it proves (rule 5: only a fetch in this
    /// leader's epoch counts), or says why it is refused.
    fn count_fetch(&mut self, cfg: &Config, req: &FetchRequest) -> Result<(), EpochError> {
        self.check_epoch(cfg, req.current_leader_epoch)?;
        let (start, leo) = (self.log.log_start_offset(), self.log.log_end_offset());
        let now = self.now;
        let Role::Leader(l) = &mut self.role else {
            return Err(EpochError::NotLeader);
        };
        let Some(progress) = l.followers.get_mut(&req.replica) else {
            return Err(EpochError::NotLeader);
        };
        // A Fetch the follower's previous incarnation sent before it crashed can arrive after
        // the new one's (two connections, no order between them). Counting its offset would
        // credit the restarted replica with records it lost.
        if req.broker_epoch < progress.broker_epoch {
            return Err(EpochError::StaleBrokerEpoch);
        }
        // After the incarnation check: a stale incarnation's Fetch is refused with an error its
        // follower ignores, wherever it asks from (the model's reduction counts on it).
        if req.fetch_offset > leo || req.fetch_offset < start {
            return Err(EpochError::OffsetOutOfRange);
        }
        progress.log_end_offset = Some(req.fetch_offset);
        progress.broker_epoch = req.broker_epoch;
        progress.count_catch_up(cfg, req.fetch_offset, leo, now);
        Ok(())
    }

    /// What a counted Fetch gets: the records from its offset, and the high watermark.
    fn fetched(&self, cfg: &Config, req: &FetchRequest) -> FetchedRecords<L::Record> {
        FetchedRecords {
            entries: self.log.read_within(
                req.fetch_offset,
                self.log.log_end_offset(),
                cfg.fetch_max_entries,
                cfg.fetch_max_bytes,
            ),
            high_watermark: self.high_watermark,
        }
    }

    /// Rule 6: a follower outside the ISR joins once its LEO has reached the high watermark and,
    /// under the KAFKA-7128 fix, the start of this leader's epoch: a new leader's high watermark
    /// may lag the committed records, but its epoch starts above all of them. (Checking the
    /// leader's HW against the epoch start instead would be as safe but could deadlock: HW is
    /// frozen while the ISR is below `min.insync.replicas`, so the ISR could never grow back.)
    /// Every one of `followers` that may join does, in one proposal, unless one is pending.
    fn maybe_expand_isr(
        &mut self,
        cfg: &Config,
        followers: impl IntoIterator<Item = BrokerId>,
        effects: &mut Effects<L::Record>,
    ) {
        let hw = self.high_watermark;
        let Role::Leader(l) = &self.role else { return };
        if l.proposed_isr.is_some() {
            return;
        }
        let joining: BTreeMap<BrokerId, BrokerEpoch> = followers
            .into_iter()
            .filter(|f| !l.isr.contains(f))
            .filter_map(|f| l.followers.get(&f).map(|progress| (f, progress)))
            .filter(|(_, progress)| {
                let leo = progress.log_end_offset;
                let caught_up = leo >= Some(hw);
                let epoch_reached =
                    !cfg.rules.expansion_epoch_check || leo >= Some(l.epoch_start_offset);
                caught_up && epoch_reached
            })
            .map(|(f, progress)| (f, progress.broker_epoch))
            .collect();
        if joining.is_empty() {
            return;
        }
        let isr = l.isr.iter().chain(joining.keys()).copied().collect();
        self.propose_isr(isr, joining, effects);
    }

    /// `LeaderShrinkIsr`: proposes to drop `follower` from the ISR (the lag timer fired: it has
    /// not caught up for longer than `replica_lag_max`; a model fires it at any moment, since
    /// any amount of time may pass). Nothing happens unless this replica leads with no change
    /// pending and `follower` is another member of its ISR.
    pub(super) fn shrink_isr(
        &mut self,
        cfg: &Config,
        follower: BrokerId,
        effects: &mut Effects<L::Record>,
    ) {
        let Role::Leader(l) = &self.role else {
            return;
        };
        if l.proposed_isr.is_some() || follower == self.id || !l.isr.contains(&follower) {
            return;
        }
        let mut isr = l.isr.clone();
        isr.remove(&follower);
        self.propose_isr(isr, BTreeMap::new(), effects);
        self.maybe_advance_high_watermark(cfg, effects);
    }

    /// Sends an AlterPartition for `isr` and remembers it as pending (rule 7).
    fn propose_isr(
        &mut self,
        isr: BTreeSet<BrokerId>,
        broker_epochs: BTreeMap<BrokerId, BrokerEpoch>,
        effects: &mut Effects<L::Record>,
    ) {
        let now = self.now;
        let Role::Leader(l) = &mut self.role else {
            return;
        };
        l.proposed_isr = Some(isr);
        l.proposed_broker_epochs = broker_epochs;
        l.proposal_sent = Some(now);
        effects.extend(self.proposal());
    }

    /// The AlterPartition of the pending proposal, if there is one.
    fn proposal(&self) -> Option<Effect<L::Record>> {
        let l = self.leader_state()?;
        let request = AlterPartitionRequest {
            partition: self.partition,
            leader: self.id,
            leader_epoch: self.leader_epoch,
            partition_epoch: self.partition_epoch,
            new_isr: l.proposed_isr.clone()?,
            broker_epochs: l.proposed_broker_epochs.clone(),
            controller_epoch: self.controller_epoch,
        };
        Some(Effect::Send(Envelope {
            from: Node::Broker(self.id),
            to: Node::Controller,
            message: Message::AlterPartition(request),
        }))
    }

    /// The pending proposal went unanswered (the request or its answer was lost, or went to a
    /// controller that lost its role): send it again, to the controller there is now.
    pub(super) fn resend_proposal(&mut self, effects: &mut Effects<L::Record>) {
        let now = self.now;
        if let Role::Leader(l) = &mut self.role {
            l.proposal_sent = Some(now);
        }
        effects.extend(self.proposal());
    }

    /// The controller's answer to AlterPartition: adopt the confirmed ISR, or forget a refused
    /// proposal. A version conflict keeps the proposal pending until the LeaderAndIsr that
    /// comes with it. With controller fencing an answer from a controller older than one this
    /// replica has heard from is ignored (rule 11): a deposed controller's view must not cancel
    /// a proposal, which stays pending for the current one. That includes the NOT_CONTROLLER a
    /// deposed controller answers to a leader that heard its successor (rule 12).
    pub(super) fn on_alter_partition_response(
        &mut self,
        cfg: &Config,
        resp: &AlterPartitionResponse,
        effects: &mut Effects<L::Record>,
    ) {
        if !self.is_leader() || !self.hears_controller(cfg, resp.controller_epoch) {
            return;
        }
        let (epoch, version) = (self.leader_epoch, self.partition_epoch);
        let Role::Leader(l) = &mut self.role else {
            return;
        };
        if l.proposed_isr.as_ref() != Some(&resp.requested_isr)
            || l.proposed_broker_epochs != resp.requested_broker_epochs
            || resp.request_partition_epoch != version
            || resp.partition != self.partition
        {
            return;
        }
        match &resp.result {
            Ok(state) if state.leader_epoch == epoch && state.partition_epoch > version => {
                l.isr = state.isr.clone();
                l.clear_proposal();
                self.partition_epoch = state.partition_epoch;
            }
            Ok(_) => return,
            Err(AlterPartitionError::IneligibleReplicas(_)) => {
                // Checked against the very version it was built on, so not applied. A joining
                // follower has re-registered since the fetch that proved it caught up. Only a
                // fetch of its new incarnation can prove it now: the held fetches are answered
                // (as when their wait ends), so that the next one is sent, rather than after
                // `fetch_max_wait` with nothing else to prompt it.
                l.clear_proposal();
                self.answer_parked(cfg, effects);
            }
            // Every other refusal is of a controller that moved on: a version conflict, another
            // leader or epoch (this leader was fenced), a deleted partition. A duplicate of an
            // accepted proposal comes back refused that way too, so the controller's state may
            // hold the proposed ISR: HW stays over the maximal ISR until the LeaderAndIsr that
            // follows says which. (Forgetting the proposal on NOT_LEADER let a fenced leader
            // commit alone on its old ISR while the controller elected the follower it had
            // proposed, which lacked the record: found by the safe protocol's property test.)
            Err(_) => {
                l.proposal_sent = None;
                return;
            }
        }
        // Followers whose Fetch is held here are caught up now; one that joined while the
        // proposal was out could not be proposed then (one proposal at a time), and its next
        // Fetch comes only once this one is answered, up to `fetch_max_wait` later. Propose it
        // now. (Only on that fresh evidence: a follower just shrunk for lagging is judged by its
        // next Fetch, as Kafka judges every expansion.)
        let parked: Vec<BrokerId> = self
            .leader_state()
            .map(|l| l.parked.keys().copied().collect())
            .unwrap_or_default();
        self.maybe_expand_isr(cfg, parked, effects);
        self.maybe_advance_high_watermark(cfg, effects);
    }

    /// Rule 5: raise the high watermark to the minimum progress over the ISR it is computed over
    /// (rule 7), counting only followers that fetched in this epoch, the leader's own log only as
    /// far as it is durable under `flush=always` (rule 10), and — under strict min ISR — only
    /// while the confirmed ISR has `min.insync.replicas` members. Then acknowledge the acks=all
    /// writes it passed (rule 9).
    pub(super) fn maybe_advance_high_watermark(
        &mut self,
        cfg: &Config,
        effects: &mut Effects<L::Record>,
    ) {
        let own = self.own_progress(cfg);
        let Role::Leader(l) = &self.role else { return };
        if cfg.rules.strict_min_isr && l.isr.len() < l.min_insync_replicas {
            return;
        }
        let mut new_hw = own;
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
        self.set_high_watermark(new_hw, effects);
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
        self.hold_news_briefly(cfg, effects);
    }

    /// Answers OffsetForLeaderEpoch (rule 3): the largest epoch not above the requested one, and
    /// the offset where it ends in this leader's log. The leader's own current epoch ends at its
    /// LEO even before it holds records.
    pub(super) fn on_offset_for_leader_epoch(
        &self,
        cfg: &Config,
        req: &OffsetForLeaderEpochRequest,
        effects: &mut Effects<L::Record>,
    ) {
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
        effects.push(self.reply(req.replica, Message::OffsetForLeaderEpochResponse(response)));
    }

    /// A consumer's read: committed records from the one holding `from`, up to the high
    /// watermark, at most `max_entries` entries and about `max_bytes` bytes (one at least).
    pub(super) fn read(
        &self,
        id: ReadId,
        from: Offset,
        max_entries: usize,
        max_bytes: usize,
    ) -> Effect<L::Record> {
        let result = if !self.is_leader() {
            Err(ReadError::NotLeader)
        } else if from < self.log.log_start_offset() || from > self.high_watermark {
            Err(ReadError::OffsetOutOfRange)
        } else {
            Ok(ReadAnswer {
                entries: self
                    .log
                    .read_within(from, self.high_watermark, max_entries, max_bytes),
                high_watermark: self.high_watermark,
                log_start_offset: self.log.log_start_offset(),
            })
        };
        Effect::Read {
            partition: self.partition,
            id,
            result,
        }
    }
}
