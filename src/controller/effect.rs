//! What a controller step asks its driver to do: its own effect type, since a controller sends
//! messages and answers fenced brokers' heartbeats, and does nothing a replica does (append,
//! acknowledge, flush).

use crate::message::Envelope;
use crate::types::BrokerId;
use serde::{Deserialize, Serialize};

/// One thing a controller step asks its driver to do, after the step's records are durable
/// ([`crate::Ready`]).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Effect<R> {
    /// Send a message to a broker.
    Send(Envelope<R>),
    /// The controller heard a heartbeat from a broker it has fenced: the broker must register
    /// again, as a new incarnation, to be part of the cluster.
    MustRegister {
        /// The fenced broker, to whom the driver passes this as the heartbeat's answer.
        broker: BrokerId,
    },
}

impl<R> Effect<R> {
    /// The message this effect sends, if it is a [`Effect::Send`].
    pub fn sent(&self) -> Option<&Envelope<R>> {
        match self {
            Effect::Send(envelope) => Some(envelope),
            Effect::MustRegister { .. } => None,
        }
    }

    /// The message this effect sends, taken, if it is a [`Effect::Send`].
    pub fn into_sent(self) -> Option<Envelope<R>> {
        match self {
            Effect::Send(envelope) => Some(envelope),
            Effect::MustRegister { .. } => None,
        }
    }
}

/// The effects of one controller step, in order.
pub type Effects<R> = Vec<Effect<R>>;
