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
use isr::{BrokerId, Envelope, FetchResponse, Message};
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

/// The most record bytes one [`Frame::Envelopes`] carries: a leader answering many partitions
/// for one follower must stay well under the frame limit ([`codec::MAX_FRAME`]). A single
/// message above it travels alone, as it always could.
pub const MAX_BATCH_BYTES: usize = 8 << 20;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Frame {
    /// The first frame on every connection.
    Hello(Peer),
    /// A message of the replication protocol.
    Envelope(Envelope<Bytes>),
    /// Messages of the replication protocol for one receiver, made by one pass of their
    /// sender: every Fetch a follower's replicas send one leader, every answer a leader has
    /// for one follower, every order a controller step gives one broker. One frame, one decode
    /// and one wake-up at the receiver, however many partitions they are about (Kafka's one
    /// fetcher per broker pair and one LeaderAndIsr per broker). See [`Frame::batches`].
    Envelopes(Vec<Envelope<Bytes>>),
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

impl Frame {
    /// `envelopes`, all for one receiver and in the order they were made, as the fewest frames
    /// that keep each under [`MAX_BATCH_BYTES`] of records: one frame in all but a leader's
    /// answers carrying megabytes. A lone message stays a [`Frame::Envelope`].
    pub fn batches(envelopes: Vec<Envelope<Bytes>>) -> Vec<Frame> {
        let mut frames = Vec::new();
        let mut batch = Vec::new();
        let mut bytes = 0;
        for envelope in envelopes {
            let size = record_bytes(&envelope);
            if !batch.is_empty() && bytes + size > MAX_BATCH_BYTES {
                frames.push(Frame::batch(std::mem::take(&mut batch)));
                bytes = 0;
            }
            bytes += size;
            batch.push(envelope);
        }
        if !batch.is_empty() {
            frames.push(Frame::batch(batch));
        }
        frames
    }

    fn batch(envelopes: Vec<Envelope<Bytes>>) -> Frame {
        match <[_; 1]>::try_from(envelopes) {
            Ok([one]) => Frame::Envelope(one),
            Err(many) => Frame::Envelopes(many),
        }
    }
}

/// The record bytes a message carries (a Fetch answer's batches); the rest is small.
fn record_bytes(envelope: &Envelope<Bytes>) -> usize {
    match &envelope.message {
        Message::FetchResponse(FetchResponse {
            result: Ok(fetched),
            ..
        }) => fetched.entries.iter().map(|e| e.record.len()).sum(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use isr::{Entry, FetchedRecords, LeaderEpoch, Node, Offset, PartitionId};

    /// A leader's answer to broker 2 for `partition`, carrying `mib` MiB of records.
    fn answer(partition: u32, mib: usize) -> Envelope<Bytes> {
        Envelope {
            from: Node::Broker(BrokerId(1)),
            to: Node::Broker(BrokerId(2)),
            message: Message::FetchResponse(FetchResponse {
                partition: PartitionId(partition),
                leader_epoch: LeaderEpoch(1),
                fetch_offset: Offset(0),
                result: Ok(FetchedRecords {
                    entries: vec![Entry::new(LeaderEpoch(1), Bytes::from(vec![0; mib << 20]))],
                    high_watermark: Offset(1),
                }),
                log_start_offset: Offset(0),
                first_boundary: Offset(0),
            }),
        }
    }

    fn partitions(frame: &Frame) -> Vec<u32> {
        let one = |e: &Envelope<Bytes>| e.message.partition().map_or(u32::MAX, |p| p.0);
        match frame {
            Frame::Envelope(e) => vec![one(e)],
            Frame::Envelopes(es) => es.iter().map(one).collect(),
            _ => Vec::new(),
        }
    }

    #[test]
    fn batches_keep_order_and_stay_under_the_byte_cap_and_a_lone_message_travels_alone() {
        let frames = Frame::batches((0..5).map(|p| answer(p, 3)).collect());
        let parts: Vec<Vec<u32>> = frames.iter().map(partitions).collect();
        assert_eq!(parts, [vec![0, 1], vec![2, 3], vec![4]]);
        assert!(matches!(frames[2], Frame::Envelope(_)));
        // Every frame encodes: none passes the frame limit.
        for frame in &frames {
            codec::encode(frame).expect("encodes");
        }
        // A message over the cap still goes, alone.
        let big = Frame::batches(vec![answer(0, 1), answer(1, 9), answer(2, 1)]);
        let parts: Vec<Vec<u32>> = big.iter().map(partitions).collect();
        assert_eq!(parts, [vec![0], vec![1], vec![2]]);
        assert!(Frame::batches(Vec::new()).is_empty());
    }
}
