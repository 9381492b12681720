//! The internal protocol between brokers, the controller and admin clients.
//!
//! A broker listens on one address for Kafka clients and for its peers. An internal connection
//! opens with [`MAGIC`]; a Kafka request opens with its big-endian length, whose first byte is 0
//! for any size a broker accepts, so the first four bytes tell the two apart. After the magic
//! come versioned, length-prefixed frames (see [`codec`]) carrying [`Frame`]s: the core's
//! envelopes, unchanged, plus the few admin messages the core has no opinion on.

pub mod admin;
pub mod codec;
pub mod link;
pub mod rpc;

use admin::{AdminError, ClusterView, ControllerInfo, Request, Response};
use bytes::Bytes;
use isr::{BrokerId, Envelope};
use isr_kafka::auth::SecurityProtocol;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The first bytes of every internal connection; the last byte is the protocol generation.
pub const MAGIC: [u8; 4] = *b"ISR\x01";

/// Where a broker listens: the address other brokers and admin clients dial (its first
/// listener), and each Kafka listener by security protocol (what Metadata tells a client that
/// came through a listener of that protocol).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerAddress {
    pub internal: String,
    pub listeners: BTreeMap<SecurityProtocol, String>,
}

impl BrokerAddress {
    /// A broker with one PLAINTEXT listener at `address`, which also carries internal links.
    pub fn plaintext(address: String) -> BrokerAddress {
        BrokerAddress {
            listeners: [(SecurityProtocol::Plaintext, address.clone())].into(),
            internal: address,
        }
    }
}

impl std::fmt::Display for BrokerAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.internal)?;
        for (protocol, address) in &self.listeners {
            if *address != self.internal {
                write!(f, " {protocol}://{address}")?;
            }
        }
        Ok(())
    }
}

/// Who opened a connection, said in its first frame.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Peer {
    /// A broker, with where it listens (for the controller's address book).
    Broker {
        id: BrokerId,
        address: BrokerAddress,
    },
    /// A broker's second connection to the active controller, for its heartbeats alone, opened
    /// once its session is: on the session's connection they would queue behind its
    /// AlterPartition requests one way and the metadata the other, and a busy cluster's broker
    /// would lose its session to its own traffic. (Kafka's brokers keep their heartbeats and
    /// their AlterPartition requests on separate channels too.)
    Heartbeats { id: BrokerId },
    /// An admin client (`isr status`) or a broker asking the controller on a client's behalf.
    Client,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Frame {
    /// The first frame on every connection.
    Hello(Peer),
    /// A message of the replication protocol.
    Envelope(Envelope<Bytes>),
    /// The active controller's answer to a broker's Hello: the session is open.
    Welcome(ControllerInfo),
    /// A standby controller's answer to anyone: it does not act; here is the active one, if
    /// it knows it.
    NotActive(Option<ControllerInfo>),
    /// The cluster's metadata, pushed by the active controller to every broker when it changes:
    /// where each broker listens, the topics, each partition's state.
    Metadata(ClusterView),
    /// What one committed change of the metadata changed, sent by the active controller to
    /// every broker: the records that bring a broker's view from metadata offset `offset - 1`
    /// to `offset` ([`ClusterView::apply`]). A broker that sees a gap asks for a whole view.
    MetadataDelta {
        offset: u64,
        records: Vec<crate::controller::records::Record>,
    },
    /// The controller fenced the broker (its session expired) while it still runs: the broker
    /// must register again to be part of the cluster.
    Reregister,
    /// The active controller dealt with the broker's registration (took it, or failed to store
    /// it). Reregister answers that arrive before it were to heartbeats the controller took
    /// before the registration: the broker registers again only on one after it.
    Registered,
    /// The active controller's answer to a heartbeat it took: a broker that hears nothing from
    /// its controller for a session's length looks for the active one again (a paused
    /// controller's connection stays open, and silent).
    HeartbeatAck,
    Request {
        id: u64,
        request: Request,
    },
    Response {
        id: u64,
        result: Result<Response, AdminError>,
    },
}
