//! The replication side of the replica thread: protocol messages from the controller and from
//! peer brokers, handed to the replica they are about.

use super::Host;
use crate::broker::beside::Beside;
use crate::storage::batch::{self, BatchError};
use bytes::Bytes;
use isr::{Envelope, FetchResponse, Message, Node, PartitionId, ReplicaInput, Timer};
use std::collections::BTreeMap;
use tracing::{debug, warn};

/// At most this many early requests wait for their partition ([`Early`]); beyond, they are
/// refused. Bounded so that a peer asking about partitions that never come costs little.
const MAX_EARLY: usize = 100_000;

/// Followers' requests for partitions this broker does not host yet, kept until the controller's
/// order creates the replica. The controller tells every replica of a partition at once and
/// brokers work through their orders at their own pace, so while thousands of partitions are
/// created, followers ask leaders that have not opened them yet. Refused, each would ask again
/// after a backoff, a storm of refusals that slows the leader further; dropped, each would wait
/// out its request timer. Kept, each is delivered once the replica exists: to the network's
/// delay the protocol allows, not a decision of the broker's. One per partition and sender,
/// the latest (a follower's newer request supersedes its older one).
#[derive(Default)]
pub(super) struct Early {
    requests: BTreeMap<PartitionId, BTreeMap<Node, Message<Bytes>>>,
    len: usize,
}

impl Early {
    /// Keeps `message` from `from` for `partition`; false when full.
    fn keep(&mut self, partition: PartitionId, from: Node, message: Message<Bytes>) -> bool {
        let waiting = self.requests.entry(partition).or_default();
        if !waiting.contains_key(&from) {
            if self.len >= MAX_EARLY {
                return false;
            }
            self.len += 1;
        }
        waiting.insert(from, message);
        true
    }

    /// The requests kept for `partition`, taken.
    fn take(&mut self, partition: PartitionId) -> BTreeMap<Node, Message<Bytes>> {
        let taken = self.requests.remove(&partition).unwrap_or_default();
        self.len -= taken.len();
        taken
    }

    /// Forgets the requests for partitions that `gone` says were deleted.
    pub(super) fn forget(&mut self, gone: impl Fn(PartitionId) -> bool) {
        let deleted: Vec<PartitionId> =
            self.requests.keys().copied().filter(|&p| gone(p)).collect();
        for partition in deleted {
            self.take(partition);
        }
    }
}

impl Host {
    pub(super) fn on_message(&mut self, envelope: Envelope<Bytes>) {
        if envelope.to != Node::Broker(self.me) {
            return;
        }
        let Envelope { from, message, .. } = envelope;
        let Some(partition) = message.partition() else {
            debug!(kind = message.kind(), %from, "ignoring message");
            return;
        };
        match &message {
            // The controller's order is how a broker comes to host a partition; what its
            // followers asked meanwhile comes after it.
            Message::LeaderAndIsr(_) if self.replicas.get(partition).is_none() => {
                match Beside::open(&self.dir, self.me, partition, self.tracer.as_mut()) {
                    Ok((mut replica, beside)) => {
                        if let Some((bytes, ms)) = self.rolling_ahead.remove(&partition) {
                            replica.log_mut().set_rolling(bytes, ms);
                        }
                        self.replicas.insert(&self.cfg, replica, beside);
                    }
                    Err(e) => {
                        warn!(%partition, error = %e, "cannot host partition");
                        return;
                    }
                }
                self.step(partition, ReplicaInput::Message { from, message });
                for (from, message) in self.early.take(partition) {
                    self.step(partition, ReplicaInput::Message { from, message });
                }
                return;
            }
            Message::FetchResponse(resp) => {
                if let Some(e) = corrupt_entry(resp) {
                    // Never let a damaged batch into the log: the answer is lost, so the
                    // follower asks again now, as for a request lost with its connection.
                    warn!(%partition, %from, error = %e, "ignoring a Fetch answer with a bad batch");
                    self.step(partition, ReplicaInput::Timeout(Timer::Request));
                    return;
                }
            }
            _ if self.replicas.get(partition).is_none() => {
                let request = Envelope {
                    from,
                    to: Node::Broker(self.me),
                    message,
                };
                // Only a follower's request has an answer to wait for.
                if let Some(refusal) = request.refused_without_replica(self.me) {
                    if !self.early.keep(partition, from, request.message) {
                        debug!(%partition, %from, "too many early requests: refused");
                        self.outgoing.push(refusal);
                    }
                }
                return;
            }
            _ => {}
        }
        self.step(partition, ReplicaInput::Message { from, message });
    }
}

/// The first batch of a Fetch answer that fails its checks (length, magic, CRC-32C, count), if
/// any: the leader's log is the source, but the bytes crossed a network.
fn corrupt_entry(resp: &FetchResponse<Bytes>) -> Option<BatchError> {
    let entries = resp.result.as_ref().ok()?;
    entries
        .entries
        .iter()
        .find_map(|e| batch::validate_stored(&e.record).err())
}
