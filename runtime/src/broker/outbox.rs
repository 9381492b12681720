//! Where a broker's outgoing protocol messages go: the controller connection or the one
//! connection to each peer broker. Shared by the replica thread (which sends) and the network
//! tasks (which open and lose connections).

use crate::wire::link::Link;
use crate::wire::Frame;
use bytes::Bytes;
use isr::{BrokerId, Envelope, Node};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

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

    /// Queues a message on the connection to its receiver; false when there is none (the
    /// protocol's timeouts resend).
    pub fn send(&self, envelope: Envelope<Bytes>) -> bool {
        let links = self.lock();
        let link = match envelope.to {
            Node::Controller => links.controller.as_ref(),
            Node::Broker(b) => links.peers.get(&b),
        };
        link.is_some_and(|l| l.send(Frame::Envelope(envelope)))
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
