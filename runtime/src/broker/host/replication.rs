//! The replication side of the replica thread: protocol messages from the controller and from
//! peer brokers, handed to the replica they are about.

use super::Host;
use crate::broker::hosted::Hosted;
use crate::storage::batch::{self, BatchError};
use bytes::Bytes;
use isr::{Envelope, FetchResponse, Message, Node, ReplicaInput};
use tracing::{debug, warn};

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
            // The controller's order is how a broker comes to host a partition.
            Message::LeaderAndIsr(_) if !self.partitions.contains_key(&partition) => {
                match Hosted::open(&self.dir, self.me, partition, self.tracer.as_mut()) {
                    Ok(hosted) => {
                        self.partitions.insert(partition, hosted);
                    }
                    Err(e) => {
                        warn!(%partition, error = %e, "cannot host partition");
                        return;
                    }
                }
            }
            Message::FetchResponse(resp) => {
                if let Some(e) = corrupt_entry(resp) {
                    // Never let a damaged batch into the log; the request times out and the
                    // follower asks again.
                    warn!(%partition, %from, error = %e, "ignoring a Fetch answer with a bad batch");
                    return;
                }
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
        .find_map(|e| batch::validate(&e.record).err())
}
