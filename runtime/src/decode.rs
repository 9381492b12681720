//! Every decoder of bytes that a broker or controller takes from outside itself, as one entry
//! point each: internal frames from peers, segment files, checkpoint files, the controller's
//! metadata file, and a whole partition directory at recovery. They are the very functions the
//! processes run, exposed so that `isr-fuzz` can drive them with millions of generated inputs
//! (Kafka request frames are `isr_kafka::serve_connection`, already public).
//!
//! Bad input is an error, never a panic. Where a decoder accepts its input, the entry point
//! also checks that encoding the value and decoding it again gives the same value, and panics
//! if not: for a fuzzer, that is a bug like any other. [`examples`] gives valid inputs made by
//! the runtime's own types, for a fuzzer to start from.

use crate::broker::beside::Beside;
use crate::controller::metadata::Metadata;
use crate::controller::store::format;
use crate::storage::{batch, checkpoint, segment};
use crate::timing;
use crate::wire::admin::{ControllerInfo, Request, Response, TopicSpec};
use crate::wire::codec::{self, FrameError};
use crate::wire::{BrokerAddress, Frame, Peer};
use bytes::Bytes;
use isr::{
    AlterPartitionRequest, BrokerEpoch, BrokerId, ControllerEffect, ControllerEpoch,
    ControllerInput, Entry, Envelope, EpochCache, FetchRequest, FetchResponse, FetchedRecords,
    FlushPolicy, LeaderEpoch, Log, Message, Node, Offset, OffsetForLeaderEpochRequest,
    PartitionEpoch, PartitionId, Tick,
};
use std::path::Path;

/// Reads internal frames from `bytes` as a connection's reader does, until the first error or
/// the end: how many frames were read, and the error if one stopped it.
pub async fn internal_frames(mut bytes: &[u8]) -> (usize, Option<FrameError>) {
    let mut frames = 0;
    loop {
        match codec::read(&mut bytes).await {
            Ok(Some(frame)) => {
                let again = codec::encode(&frame)
                    .ok()
                    .and_then(|b| codec::decode(&b[4..]).ok());
                assert_eq!(
                    again.as_ref(),
                    Some(&frame),
                    "a frame that does not round-trip"
                );
                frames += 1;
            }
            Ok(None) => return (frames, None),
            Err(e) => return (frames, Some(e)),
        }
    }
}

/// What a recovery scan found in a segment file.
#[derive(Debug, PartialEq, Eq)]
pub struct SegmentScan {
    pub batches: usize,
    /// The length of the valid prefix: where recovery would cut the file.
    pub valid_bytes: u64,
    /// Why the scan stopped before the end, if it did.
    pub torn: Option<String>,
}

/// The recovery scan of a segment file holding `bytes`, whose first batch is at `base`.
pub fn segment(bytes: &[u8], base: u64) -> SegmentScan {
    let scan = segment::scan(bytes, bytes.len() as u64, base);
    let valid_bytes = scan
        .batches
        .last()
        .map_or(0, |b| b.position + u64::from(b.len));
    SegmentScan {
        batches: scan.batches.len(),
        valid_bytes: scan.torn.as_ref().map_or(valid_bytes, |(at, _)| *at),
        torn: scan.torn.map(|(_, why)| why),
    }
}

/// A high watermark checkpoint file (`high-watermark.json`).
pub fn high_watermark(bytes: &[u8]) -> Result<Offset, String> {
    checkpoint_round_trip(bytes)
}

/// A leader epoch checkpoint file (`leader-epochs.json`).
pub fn leader_epochs(bytes: &[u8]) -> Result<EpochCache, String> {
    checkpoint_round_trip(bytes)
}

/// The clean shutdown marker file (`clean-shutdown`).
pub fn clean_shutdown_marker(bytes: &[u8]) -> Result<bool, String> {
    checkpoint_round_trip(bytes)
}

fn checkpoint_round_trip<T>(bytes: &[u8]) -> Result<T, String>
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let place = Path::new("input");
    let value: T = checkpoint::decode(bytes, place).map_err(|e| e.to_string())?;
    let again = serde_json::to_vec(&value)
        .ok()
        .and_then(|b| checkpoint::decode::<T>(&b, place).ok());
    assert_eq!(
        again.as_ref(),
        Some(&value),
        "a checkpoint that does not round-trip"
    );
    Ok(value)
}

/// The controller's metadata, as the file store (`metadata.bin`) and etcd hold it.
pub fn controller_metadata(bytes: &[u8]) -> Result<(), String> {
    let metadata = format::decode(bytes, "input").map_err(|e| e.to_string())?;
    let again = format::decode(&format::encode(&metadata), "again").ok();
    assert!(
        again.as_ref() == Some(&metadata),
        "controller metadata that does not round-trip"
    );
    Ok(())
}

/// Recovers partition `partition` from `broker_dir` as a broker does at start (segments, high
/// watermark and leader epoch checkpoints): the replica's log end offset and high watermark.
pub fn partition_directory(
    broker_dir: &Path,
    partition: PartitionId,
) -> Result<(Offset, Offset), String> {
    let (replica, _) =
        Beside::open(broker_dir, BrokerId(1), partition, None).map_err(|e| e.to_string())?;
    if let Err(broken) = replica.check_local() {
        panic!("a recovered replica breaks an invariant: {broken:?}");
    }
    Ok((replica.log().log_end_offset(), replica.high_watermark()))
}

/// Valid inputs, made by the runtime's own code, for a fuzzer to start from.
pub struct Examples {
    /// Internal frames, each with its length prefix, as a connection carries them.
    pub frames: Vec<Vec<u8>>,
    /// Controller metadata as a store holds it.
    pub metadata: Vec<u8>,
}

/// A controller's state after three brokers registered, a topic of three partitions was
/// created and a group committed an offset; the frames it would send (the LeaderAndIsr orders,
/// the metadata push) and the frames brokers exchange (Hello, Fetch and its answer with a
/// record batch, OffsetForLeaderEpoch, AlterPartition, heartbeats, admin requests).
pub fn examples(batch_bytes: Bytes) -> Examples {
    let cfg = timing::config(FlushPolicy::Always);
    let mut metadata = Metadata::default();
    let mut effects = Vec::new();
    for b in 1..=3 {
        let id = BrokerId(b);
        let register = ControllerInput::Register {
            broker: id,
            clean_shutdown: b == 1,
            elects: Vec::new(),
        };
        effects.extend(metadata.controller.step::<Bytes>(&cfg, Tick(0), register));
        metadata
            .addresses
            .insert(id, BrokerAddress::plaintext(format!("127.0.0.1:909{b}")));
    }
    let spec = TopicSpec {
        name: "orders".into(),
        partitions: 3,
        replication_factor: 3,
        configs: [("min.insync.replicas".to_string(), "2".to_string())].into(),
        assignment: Vec::new(),
    };
    if let Ok(more) = metadata.create_topic(&cfg, &spec) {
        effects.extend(more);
    }
    let p = PartitionId(0);
    let (b1, b2) = (Node::Broker(BrokerId(1)), Node::Broker(BrokerId(2)));
    let envelope = |from, to, message| Frame::Envelope(Envelope { from, to, message });
    let stamped = batch::stamp(&batch_bytes, Offset(0), LeaderEpoch(1));
    // A controller step's orders, in one frame as a step sends them.
    let orders: Vec<Envelope<Bytes>> = effects
        .into_iter()
        .filter_map(ControllerEffect::into_sent)
        .collect();
    let mut frames = Frame::batches(orders);
    frames.extend([
        Frame::Hello(Peer::Broker {
            id: BrokerId(1),
            address: BrokerAddress::plaintext("127.0.0.1:9091".into()),
        }),
        Frame::Hello(Peer::Client),
        Frame::Welcome(ControllerInfo {
            id: 1,
            address: "127.0.0.1:9090".into(),
            epoch: ControllerEpoch(2),
        }),
        Frame::NotActive(None),
        Frame::Reregister,
        Frame::Registered,
        Frame::HeartbeatAck,
        Frame::Hello(Peer::Heartbeats { id: BrokerId(2) }),
        Frame::Metadata(metadata.view(None)),
        Frame::Request {
            id: 3,
            request: Request::CreateTopic(spec),
        },
        Frame::Response {
            id: 3,
            result: Ok(Response::ProducerId(9)),
        },
        envelope(
            b2,
            b1,
            Message::Fetch(FetchRequest {
                partition: p,
                replica: BrokerId(2),
                broker_epoch: BrokerEpoch(1),
                current_leader_epoch: LeaderEpoch(1),
                fetch_offset: Offset(0),
                high_watermark: Offset(0),
                log_start_offset: Offset(0),
            }),
        ),
        envelope(
            b1,
            b2,
            Message::FetchResponse(FetchResponse {
                partition: p,
                leader_epoch: LeaderEpoch(1),
                fetch_offset: Offset(0),
                result: Ok(FetchedRecords {
                    entries: vec![Entry::new(LeaderEpoch(1), stamped)],
                    high_watermark: Offset(0),
                }),
                log_start_offset: Offset(0),
                first_boundary: Offset(0),
            }),
        ),
        envelope(
            b2,
            b1,
            Message::OffsetForLeaderEpoch(OffsetForLeaderEpochRequest {
                partition: p,
                replica: BrokerId(2),
                current_leader_epoch: LeaderEpoch(2),
                requested_epoch: LeaderEpoch(1),
            }),
        ),
        envelope(
            b1,
            Node::Controller,
            Message::AlterPartition(AlterPartitionRequest {
                partition: p,
                leader: BrokerId(1),
                leader_epoch: LeaderEpoch(1),
                partition_epoch: PartitionEpoch(1),
                new_isr: [BrokerId(1), BrokerId(2)].into(),
                broker_epochs: [(BrokerId(2), BrokerEpoch(1))].into(),
                controller_epoch: ControllerEpoch(1),
            }),
        ),
        envelope(
            b1,
            Node::Controller,
            Message::BrokerHeartbeat {
                broker: BrokerId(1),
            },
        ),
    ]);
    Examples {
        frames: frames
            .iter()
            .filter_map(|f| codec::encode(f).ok())
            .collect(),
        metadata: format::encode(&metadata),
    }
}
