//! The replication side of the replica thread: protocol messages in, the follower's requests
//! out, and the leader's held fetches.

use super::Host;
use crate::broker::hosted::Hosted;
use crate::storage::batch::{self, BatchError};
use bytes::Bytes;
use isr::{Effect, Effects, Envelope, FetchRequest, FetchResponse, Message, Node, PartitionId};
use std::time::Instant;
use tracing::{debug, warn};

impl Host {
    pub(super) fn on_message(&mut self, envelope: Envelope<Bytes>) {
        let Node::Broker(me) = envelope.to else {
            return;
        };
        if me != self.me {
            return;
        }
        let from = envelope.from;
        let (cfg, now) = (self.cfg, self.now);
        match envelope.message {
            Message::LeaderAndIsr(order) => {
                let partition = order.partition;
                if !self.partitions.contains_key(&partition) {
                    match Hosted::open(&self.dir, self.me, partition) {
                        Ok(hosted) => {
                            self.partitions.insert(partition, hosted);
                        }
                        Err(e) => {
                            warn!(%partition, error = %e, "cannot host partition");
                            return;
                        }
                    }
                }
                let Ok(h) = self.hosted(partition) else {
                    return;
                };
                let effects = h.replica.on_leader_and_isr(&cfg, now, &order);
                if !h.replica.is_leader() {
                    h.parked.clear();
                }
                self.after(partition, effects);
                // A new leader or epoch: reconcile or fetch right away.
                self.request_from_leader(partition);
            }
            Message::Fetch(req) => {
                let partition = req.partition;
                if let Ok(h) = self.hosted(partition) {
                    let effects = h.replica.on_fetch(&cfg, now, &req);
                    self.answer_fetch(partition, req, effects);
                }
            }
            Message::FetchResponse(resp) => {
                let Node::Broker(leader) = from else { return };
                let partition = resp.partition;
                if let Some(e) = corrupt_entry(&resp) {
                    // Never let a damaged batch into the log; the request times out and the
                    // follower asks again.
                    warn!(%partition, %leader, error = %e, "ignoring a Fetch answer with a bad batch");
                    return;
                }
                let Ok(h) = self.hosted(partition) else {
                    return;
                };
                let effects = h.replica.on_fetch_response(&cfg, leader, &resp);
                self.after_answer(partition, resp.result.is_ok(), effects);
            }
            Message::OffsetForLeaderEpoch(req) => {
                let partition = req.partition;
                if let Ok(h) = self.hosted(partition) {
                    let effects = h.replica.on_offset_for_leader_epoch(&cfg, &req);
                    self.after(partition, effects);
                }
            }
            Message::OffsetForLeaderEpochResponse(resp) => {
                let Node::Broker(leader) = from else { return };
                let partition = resp.partition;
                let Ok(h) = self.hosted(partition) else {
                    return;
                };
                let effects = h
                    .replica
                    .on_offset_for_leader_epoch_response(&cfg, leader, &resp);
                self.after_answer(partition, resp.result.is_ok(), effects);
            }
            Message::AlterPartitionResponse(resp) => {
                let partition = resp.partition;
                let Ok(h) = self.hosted(partition) else {
                    return;
                };
                h.alter_sent = None;
                let effects = h.replica.on_alter_partition_response(&cfg, &resp);
                self.after(partition, effects);
                self.to_wake.insert(partition);
            }
            other => debug!(kind = other.kind(), %from, "ignoring message"),
        }
    }

    /// Answers a Fetch, unless it found nothing new: then the leader holds the answer (Kafka's
    /// fetch.max.wait) so that idle followers do not spin. The core has already recorded the
    /// follower's progress; asking it again later is a redelivery of the same request.
    pub(super) fn answer_fetch(
        &mut self,
        partition: PartitionId,
        req: FetchRequest,
        mut effects: Effects<Bytes>,
    ) {
        let empty = matches!(effects.last(), Some(Effect::Send(Envelope {
            message: Message::FetchResponse(r), ..
        })) if r.result.as_ref().is_ok_and(|f| f.entries.is_empty()));
        if empty {
            effects.pop();
            if let Ok(h) = self.hosted(partition) {
                h.parked.retain(|(r, _)| r.replica != req.replica);
                h.parked.push((req, Instant::now()));
            }
        }
        self.after(partition, effects);
    }

    /// Answers the held fetches of every partition marked since the last time.
    pub(super) fn wake_due(&mut self) {
        for partition in std::mem::take(&mut self.to_wake) {
            self.wake_parked(partition);
        }
    }

    /// Answers the held fetches of a partition with whatever they find now.
    pub(super) fn wake_parked(&mut self, partition: PartitionId) {
        let (cfg, now) = (self.cfg, self.now);
        let Ok(h) = self.hosted(partition) else {
            return;
        };
        let parked = std::mem::take(&mut h.parked);
        let mut effects = Vec::new();
        for (req, _) in parked {
            effects.extend(h.replica.on_fetch(&cfg, now, &req));
        }
        self.after(partition, effects);
    }

    /// After a follower acted on its leader's answer: ask again at once if the answer was data
    /// or a truncation point; after an error wait for the next tick (the leader may not have
    /// learned of its new epoch yet, and asking at network speed would only spin).
    pub(super) fn after_answer(
        &mut self,
        partition: PartitionId,
        ok: bool,
        effects: Effects<Bytes>,
    ) {
        self.after(partition, effects);
        if let Ok(h) = self.hosted(partition) {
            h.in_flight = None;
        }
        if ok {
            self.request_from_leader(partition);
        }
    }

    /// Sends the follower's next request (OffsetForLeaderEpoch or Fetch), as the core says. A
    /// Fetch reports the follower's log end offset, which the leader counts as replicated: while
    /// the log owes a sync the request waits for [`Host::release_all`], like every other effect.
    pub(super) fn request_from_leader(&mut self, partition: PartitionId) {
        let Ok(h) = self.hosted(partition) else {
            return;
        };
        h.in_flight = None;
        if h.replica.log().sync_owed() || !h.held.is_empty() {
            self.requests_due.insert(partition);
            return;
        }
        if let Some(request) = h.replica.next_request() {
            if self.outbox.send(request) {
                if let Ok(h) = self.hosted(partition) {
                    h.in_flight = Some(Instant::now());
                }
            }
        }
    }

    /// Resends an unanswered AlterPartition while the replica still has that exact proposal
    /// pending: a lost request would otherwise block ISR changes forever.
    pub(super) fn resend_alter_partition(
        &mut self,
        partition: PartitionId,
        envelope: Envelope<Bytes>,
    ) {
        let Ok(h) = self.hosted(partition) else {
            return;
        };
        let pending = h
            .replica
            .leader_state()
            .and_then(|l| l.proposed_isr.as_ref());
        let still = matches!(&envelope.message, Message::AlterPartition(req) if Some(&req.new_isr) == pending);
        if still {
            h.alter_sent = Some((envelope.clone(), Instant::now()));
            self.outbox.send(envelope);
        } else {
            h.alter_sent = None;
        }
    }
}

/// The first batch of a Fetch answer that fails its checks (length, magic, CRC-32C, count), if
/// any: the leader's log is the source, but the bytes crossed a network.
fn corrupt_entry(resp: &FetchResponse<Bytes>) -> Option<BatchError> {
    let entries = resp.result.as_ref().ok()?;
    entries
        .entries
        .iter()
        .find_map(|e| batch::validate(&e.record).err())
}
