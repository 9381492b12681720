//! A real broker process under a scripted controller: deltas older than its view, after a gap,
//! or about a partition its view does not have are ignored and counted, never applied; after
//! the last two it asks for the whole view and carries on from it. The controller here is the
//! test itself, speaking the internal protocol, since a real one never sends such deltas.

mod common;

use common::Proc;
use isr::{BrokerId, ControllerEpoch, LeaderEpoch, MetadataRecord, PartitionEpoch};
use isr::{Message, PartitionId, PartitionState};
use isr_runtime::controller::records::Record;
use isr_runtime::wire::admin::{ClusterView, ControllerInfo, Request, Response};
use isr_runtime::wire::link::{self, Conn, Link, Opening};
use isr_runtime::wire::{codec, Frame, Peer};
use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

/// Partition `id`, led by broker 1 alone.
fn partition(id: u32) -> Record {
    Record::Core(MetadataRecord::Partition {
        id: PartitionId(id),
        state: Some(PartitionState {
            assigned: vec![BrokerId(1)],
            leader: Some(BrokerId(1)),
            leader_epoch: LeaderEpoch(1),
            isr: [BrokerId(1)].into(),
            elr: Default::default(),
            partition_epoch: PartitionEpoch(1),
            min_insync_replicas: 1,
        }),
    })
}

fn topic(name: &str, partitions: &[u32]) -> Record {
    Record::Topic {
        name: name.into(),
        partitions: Some(partitions.iter().copied().map(PartitionId).collect()),
    }
}

/// The scripted controller's whole view at `offset`: `records` applied to an empty one.
fn view(offset: u64, records: &[Record]) -> ClusterView {
    let mut view = ClusterView::default();
    for record in records {
        view.apply(record);
    }
    view.offset = offset;
    view
}

/// Serves the broker's connections: its session (welcomed; frames from `script` go out on it,
/// and a request for the whole view is answered with `truth`'s), its heartbeats (acknowledged),
/// anything else (ignored).
async fn scripted_controller(
    listener: TcpListener,
    address: String,
    script: mpsc::UnboundedReceiver<Frame>,
    truth: watch::Receiver<ClusterView>,
) {
    let mut script = Some(script);
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            return;
        };
        let Ok(Opening::Internal) = link::classify(&mut stream).await else {
            continue;
        };
        let (mut reader, link) = link::split(Conn::Plain(stream));
        let Ok(Some(Frame::Hello(peer))) = codec::read(&mut reader).await else {
            continue;
        };
        match peer {
            Peer::Broker { .. } => {
                link.send(Frame::Welcome(ControllerInfo {
                    id: 1,
                    address: address.clone(),
                    epoch: ControllerEpoch(1),
                }));
                if let Some(mut script) = script.take() {
                    let out = link.clone();
                    tokio::spawn(async move {
                        while let Some(frame) = script.recv().await {
                            out.send(frame);
                        }
                    });
                }
                tokio::spawn(answer_requests(reader, link, truth.clone()));
            }
            Peer::Heartbeats { .. } => {
                tokio::spawn(async move {
                    while let Ok(Some(frame)) = codec::read(&mut reader).await {
                        if let Frame::Envelope(e) = frame {
                            if matches!(e.message, Message::BrokerHeartbeat { .. }) {
                                link.send(Frame::HeartbeatAck);
                            }
                        }
                    }
                });
            }
            Peer::Client => {}
        }
    }
}

async fn answer_requests(
    mut reader: link::Reader,
    link: Link,
    truth: watch::Receiver<ClusterView>,
) {
    while let Ok(Some(frame)) = codec::read(&mut reader).await {
        match frame {
            Frame::Request {
                id,
                request: Request::Metadata,
            } => {
                let view = truth.borrow().clone();
                link.send(Frame::Response {
                    id,
                    result: Ok(Response::Metadata(view)),
                });
            }
            Frame::Envelope(e) if matches!(e.message, Message::BrokerRegistration { .. }) => {
                link.send(Frame::Registered);
            }
            _ => {}
        }
    }
}

/// Asks the broker, as `isr status` does, for `request`'s answer.
async fn ask(broker: &str, request: Request) -> Option<Response> {
    let (mut reader, link, _) = link::dial(broker, Peer::Client, None).await.ok()?;
    link.send(Frame::Request { id: 1, request });
    match tokio::time::timeout(Duration::from_secs(5), codec::read(&mut reader)).await {
        Ok(Ok(Some(Frame::Response { result, .. }))) => result.ok(),
        _ => None,
    }
}

/// Waits for the broker's metadata offset and ignored deltas to be `offset` and `stale`; on
/// failure, shows its log.
async fn wait_for_offset(broker: &str, log: &Path, offset: u64, stale: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = None;
    while Instant::now() < deadline {
        last = ask(broker, Request::MetadataOffset).await;
        if let Some(Response::MetadataOffset {
            offset: o,
            stale_deltas: s,
        }) = last
        {
            if (o, s) == (offset, stale) {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let log = std::fs::read_to_string(log).unwrap_or_default();
    panic!("the broker never reached offset {offset} with {stale} deltas ignored: {last:?}\n{log}");
}

/// The topics in the broker's view.
async fn topics(broker: &str) -> BTreeSet<String> {
    match ask(broker, Request::Metadata).await {
        Some(Response::Metadata(view)) => view.topics.into_keys().collect(),
        other => panic!("no view from the broker: {other:?}"),
    }
}

fn names(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_ignores_and_counts_stale_gapped_and_unknown_partition_deltas() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (listener, controller) = link::listen("127.0.0.1:0").await.expect("listen");
    let (script, frames) = mpsc::unbounded_channel();
    let base = [topic("base", &[0]), Record::NextPartition(1), partition(0)];
    let (truth, truth_rx) = watch::channel(view(5, &base));
    let at_controller = controller.clone();
    tokio::spawn(scripted_controller(
        listener,
        at_controller,
        frames,
        truth_rx,
    ));

    let (data, log) = (dir.path().join("broker-1"), dir.path().join("broker-1.log"));
    let broker_log = log.clone();
    let broker = tokio::task::spawn_blocking(move || {
        let data = data.to_string_lossy().into_owned();
        let args = ["broker", "--id", "1", "--listen", "127.0.0.1:0"];
        let args = [&args[..], &["--controller", &controller, "--dir", &data]].concat();
        Proc::start(&args, &log)
    })
    .await
    .expect("broker started");
    let at = broker.address.clone();

    // The session's whole view, at offset 5.
    script
        .send(Frame::Metadata(view(5, &base)))
        .expect("script");
    wait_for_offset(&at, &broker_log, 5, 0).await;

    // A delta older than the view: ignored and counted.
    let stale = vec![topic("stale", &[0])];
    script
        .send(Frame::MetadataDelta {
            offset: 3,
            records: stale,
        })
        .expect("script");
    wait_for_offset(&at, &broker_log, 5, 1).await;

    // The next delta, creating a topic: applied.
    let fresh = vec![topic("fresh", &[1]), Record::NextPartition(2), partition(1)];
    script
        .send(Frame::MetadataDelta {
            offset: 6,
            records: fresh.clone(),
        })
        .expect("script");
    wait_for_offset(&at, &broker_log, 6, 1).await;
    assert_eq!(topics(&at).await, names(&["base", "fresh"]));

    // The next offset, but about a partition the view does not have and the delta does not
    // create: not applied; the broker asks for the whole view, and takes the controller's.
    let at_7 = [&base[..], &fresh, &[topic("recovered", &[0])]].concat();
    truth.send_replace(view(7, &at_7));
    script
        .send(Frame::MetadataDelta {
            offset: 7,
            records: vec![topic("bogus", &[40]), partition(40)],
        })
        .expect("script");
    wait_for_offset(&at, &broker_log, 7, 2).await;
    assert_eq!(topics(&at).await, names(&["base", "fresh", "recovered"]));

    // A gap (offset 9 after 7): not applied; the whole view again, then deltas go on from it.
    let at_9 = [&at_7[..], &[topic("final", &[1])]].concat();
    truth.send_replace(view(9, &at_9));
    script
        .send(Frame::MetadataDelta {
            offset: 9,
            records: vec![topic("skipped", &[0])],
        })
        .expect("script");
    wait_for_offset(&at, &broker_log, 9, 3).await;
    script
        .send(Frame::MetadataDelta {
            offset: 10,
            records: vec![topic("after", &[0])],
        })
        .expect("script");
    wait_for_offset(&at, &broker_log, 10, 3).await;
    assert_eq!(
        topics(&at).await,
        names(&["base", "fresh", "recovered", "final", "after"])
    );
    drop(broker);
}
