//! Where a broker's outgoing protocol messages go: the controller connection or the one
//! connection to each peer broker. Shared by the replica thread (which sends) and the network
//! tasks (which open and lose connections).
//!
//! The replica thread gathers what one pass of it sends ([`Outgoing`]) and hands it over at the
//! end of the pass, so each receiver gets one frame for all the partitions the pass was about:
//! a follower's Fetch requests for every partition it follows from one leader travel together,
//! and so do a leader's answers to one follower.

use crate::wire::link::Link;
use bytes::Bytes;
use isr::{BrokerId, Envelope, Node};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Messages made but not yet sent, by receiver, each receiver's in the order they were made.
#[derive(Default)]
pub struct Outgoing {
    by_receiver: BTreeMap<Node, Vec<Envelope<Bytes>>>,
}

impl Outgoing {
    pub fn push(&mut self, envelope: Envelope<Bytes>) {
        self.by_receiver
            .entry(envelope.to)
            .or_default()
            .push(envelope);
    }

    pub fn is_empty(&self) -> bool {
        self.by_receiver.is_empty()
    }
}

#[derive(Default)]
struct Links {
    controller: Option<Link>,
    peers: BTreeMap<BrokerId, Link>,
}

#[derive(Clone, Default)]
pub struct Outbox {
    links: Arc<Mutex<Links>>,
}

impl Outbox {
    fn lock(&self) -> MutexGuard<'_, Links> {
        // Nothing held under this lock can be left half-updated by a panic.
        self.links.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues everything `outgoing` gathered on the connections to its receivers, one frame per
    /// receiver, and empties it. What has no connection is dropped: the protocol's timeouts
    /// resend.
    pub fn send(&self, outgoing: &mut Outgoing) {
        let links = self.lock();
        for (to, envelopes) in std::mem::take(&mut outgoing.by_receiver) {
            let link = match to {
                Node::Controller => links.controller.as_ref(),
                Node::Broker(b) => links.peers.get(&b),
            };
            if let Some(link) = link {
                link.send_envelopes(envelopes);
            }
        }
    }

    pub fn controller(&self) -> Option<Link> {
        self.lock().controller.clone()
    }

    pub fn set_controller(&self, link: Option<Link>) {
        self.lock().controller = link;
    }

    pub fn add_peer(&self, peer: BrokerId, link: Link) {
        self.lock().peers.insert(peer, link);
    }

    /// Forgets a peer's connection, unless a newer one already replaced it.
    pub fn remove_peer(&self, peer: BrokerId, link: &Link) {
        let mut links = self.lock();
        if links.peers.get(&peer).is_some_and(|l| l.same(link)) {
            links.peers.remove(&peer);
        }
    }
}
