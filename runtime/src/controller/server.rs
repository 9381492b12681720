//! The controller's event loop and connections.

use super::metadata::{Metadata, Store};
use crate::storage::checkpoint::CheckpointError;
use crate::timing;
use crate::wire::admin::{AdminError, Request, Response};
use crate::wire::link::{self, Link, Opening};
use crate::wire::{codec, Frame, Peer};
use bytes::Bytes;
use isr::{BrokerId, Config, Effect, Effects, FlushPolicy, Message, Node, Tick};
use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

#[derive(clap::Args, Debug)]
pub struct ControllerArgs {
    /// Address to listen on for brokers and admin clients.
    #[arg(long, default_value = "127.0.0.1:9090")]
    pub listen: String,
    /// Directory for the cluster metadata.
    #[arg(long)]
    pub dir: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error("cannot listen on {address}: {source}")]
    Listen { address: String, source: io::Error },
    #[error("cannot use metadata directory: {0}")]
    Dir(io::Error),
    #[error(transparent)]
    Metadata(#[from] CheckpointError),
}

enum Event {
    Connected { conn: u64, peer: Peer, link: Link },
    Frame { conn: u64, frame: Frame },
    Closed { conn: u64 },
}

struct State {
    cfg: Config,
    store: Store,
    meta: Metadata,
    /// The connection each broker last introduced itself on.
    brokers: BTreeMap<BrokerId, (u64, Link)>,
    /// Every open connection, for answering requests.
    links: BTreeMap<u64, Link>,
}

pub async fn run(args: ControllerArgs) -> Result<(), ControllerError> {
    std::fs::create_dir_all(&args.dir).map_err(ControllerError::Dir)?;
    let store = Store::new(&args.dir);
    let meta = store.load()?;
    let listener =
        TcpListener::bind(&args.listen)
            .await
            .map_err(|source| ControllerError::Listen {
                address: args.listen.clone(),
                source,
            })?;
    let address = listener
        .local_addr()
        .map_or(args.listen.clone(), |a| a.to_string());
    crate::broker::announce(&format!("isr controller listening on {address}"));
    info!(%address, topics = meta.topics.len(), "controller started");
    let (tx, mut rx) = mpsc::unbounded_channel();
    tokio::spawn(accept_loop(listener, tx));
    let mut state = State {
        cfg: timing::config(FlushPolicy::Always),
        store,
        meta,
        brokers: BTreeMap::new(),
        links: BTreeMap::new(),
    };
    let mut ticks = tokio::time::interval(timing::TICK);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => state.on_tick(),
            Some(event) = rx.recv() => state.on_event(event),
        }
    }
}

async fn accept_loop(listener: TcpListener, events: mpsc::UnboundedSender<Event>) {
    let mut next_conn = 0u64;
    loop {
        match listener.accept().await {
            Ok((stream, from)) => {
                next_conn += 1;
                debug!(%from, conn = next_conn, "accepted");
                tokio::spawn(serve(stream, next_conn, events.clone()));
            }
            Err(e) => {
                warn!(error = %e, "accept failed");
                tokio::time::sleep(timing::TICK).await;
            }
        }
    }
}

/// Reads one connection's frames into the event loop until it closes or misbehaves.
async fn serve(mut stream: TcpStream, conn: u64, events: mpsc::UnboundedSender<Event>) {
    match link::classify(&mut stream).await {
        Ok(Opening::Internal) => {}
        Ok(Opening::Kafka(_)) => {
            warn!(
                conn,
                "a Kafka client reached the controller; point it at a broker"
            );
            return;
        }
        Err(e) => {
            debug!(conn, error = %e, "connection closed before it said what it is");
            return;
        }
    }
    let (mut reader, link) = link::split(stream);
    let mut introduced = false;
    loop {
        match codec::read(&mut reader).await {
            Ok(Some(Frame::Hello(peer))) if !introduced => {
                introduced = true;
                let _ = events.send(Event::Connected {
                    conn,
                    peer,
                    link: link.clone(),
                });
            }
            Ok(Some(frame)) if introduced => {
                let _ = events.send(Event::Frame { conn, frame });
            }
            Ok(Some(_)) => {
                warn!(conn, "protocol error: the first frame must be Hello");
                break;
            }
            Ok(None) => break,
            Err(e) => {
                warn!(conn, error = %e, "closing connection");
                break;
            }
        }
    }
    let _ = events.send(Event::Closed { conn });
}

impl State {
    fn on_tick(&mut self) {
        self.meta.now = Tick(self.meta.now.0 + 1);
        let effects = self.meta.controller.on_tick(&self.cfg, self.meta.now);
        if !effects.is_empty() {
            self.commit(effects);
        }
    }

    fn on_event(&mut self, event: Event) {
        match event {
            Event::Connected { conn, peer, link } => {
                if let Peer::Broker { id, address } = peer {
                    debug!(broker = %id, %address, conn, "broker connected");
                    self.meta.addresses.insert(id, address);
                    self.brokers.insert(id, (conn, link.clone()));
                }
                self.links.insert(conn, link);
            }
            Event::Frame { conn, frame } => self.on_frame(conn, frame),
            Event::Closed { conn } => {
                self.links.remove(&conn);
                self.brokers.retain(|_, (c, _)| *c != conn);
            }
        }
    }

    fn on_frame(&mut self, conn: u64, frame: Frame) {
        match frame {
            Frame::Envelope(envelope) => self.on_message(conn, envelope.from, envelope.message),
            Frame::Request { id, request } => {
                let result = self.on_request(conn, request);
                if let Some(link) = self.links.get(&conn) {
                    link.send(Frame::Response { id, result });
                }
            }
            other => debug!(conn, frame = ?other, "ignoring frame"),
        }
    }

    /// Whether `from` is the broker that introduced itself on `conn`: a broker speaks only for
    /// itself.
    fn speaks_for(&self, conn: u64, from: Node, broker: BrokerId) -> bool {
        from == Node::Broker(broker) && self.brokers.get(&broker).is_some_and(|(c, _)| *c == conn)
    }

    fn on_message(&mut self, conn: u64, from: Node, message: Message<Bytes>) {
        let now = self.meta.now;
        match message {
            Message::BrokerRegistration {
                broker,
                clean_shutdown,
            } if self.speaks_for(conn, from, broker) => {
                info!(%broker, clean_shutdown, "broker registered");
                let effects = self.meta.controller.on_broker_registration(
                    &self.cfg,
                    now,
                    broker,
                    clean_shutdown,
                );
                self.commit(effects);
                self.publish_addresses();
            }
            Message::BrokerHeartbeat { broker } if self.speaks_for(conn, from, broker) => {
                if self.meta.controller.is_alive(broker) {
                    self.meta.controller.on_heartbeat(broker, now);
                } else if let Some((_, link)) = self.brokers.get(&broker) {
                    info!(%broker, "heartbeat from a fenced broker: asking it to register");
                    link.send(Frame::Reregister);
                }
            }
            Message::AlterPartition(req) if self.speaks_for(conn, from, req.leader) => {
                let effects = self.meta.controller.on_alter_partition(&self.cfg, &req);
                self.commit(effects);
            }
            other => debug!(conn, %from, kind = other.kind(), "ignoring message"),
        }
    }

    fn on_request(&mut self, conn: u64, request: Request) -> Result<Response, AdminError> {
        match request {
            Request::ControlledShutdown { broker } => {
                if !self.speaks_for(conn, Node::Broker(broker), broker) {
                    return Err(AdminError::NotYours(format!(
                        "controlled shutdown of {broker}"
                    )));
                }
                info!(%broker, "controlled shutdown");
                let effects = self
                    .meta
                    .controller
                    .on_controlled_shutdown(&self.cfg, broker);
                self.commit(effects);
                Ok(Response::Done)
            }
            Request::Metadata => Ok(Response::Metadata(self.meta.view())),
            Request::CreateTopic(spec) => {
                let effects = self.meta.create_topic(&self.cfg, &spec)?;
                info!(topic = %spec.name, partitions = spec.partitions, "topic created");
                self.commit(effects);
                Ok(Response::Done)
            }
            Request::DeleteTopic(topic) => {
                self.meta.delete_topic(&topic)?;
                info!(%topic, "topic deleted");
                self.save()?;
                Ok(Response::Done)
            }
            Request::CreatePartitions { topic, total } => {
                let effects = self.meta.create_partitions(&topic, total)?;
                info!(%topic, total, "partitions added");
                self.commit(effects);
                Ok(Response::Done)
            }
            Request::AlterConfigs {
                resource,
                ops,
                replace,
            } => {
                let effects = self
                    .meta
                    .alter_configs(&self.cfg, &resource, &ops, replace)?;
                info!(?resource, ?ops, replace, "configs changed");
                self.commit(effects);
                Ok(Response::Done)
            }
            Request::CommitOffset {
                group,
                topic,
                partition,
                offset,
                metadata,
            } => {
                self.meta
                    .commit_offset(&group, &topic, partition, offset, metadata)?;
                self.save()?;
                Ok(Response::Done)
            }
            Request::FetchOffset {
                group,
                topic,
                partition,
            } => Ok(Response::Offset(
                self.meta.committed(&group, &topic, partition)?,
            )),
            Request::GroupOffsets { group } => {
                Ok(Response::GroupOffsets(self.meta.group_offsets(&group)))
            }
            Request::OffsetGroups => Ok(Response::Groups(
                self.meta.controller.offset_groups().into_iter().collect(),
            )),
            Request::DeleteOffsets { group, partitions } => {
                self.meta.delete_offsets(&group, partitions.as_deref());
                self.save()?;
                Ok(Response::Done)
            }
            Request::AllocateProducerId => {
                let id = self.meta.next_producer_id;
                self.meta.next_producer_id += 1;
                self.save()?;
                Ok(Response::ProducerId(id))
            }
            Request::Replicas => Err(AdminError::Unsupported("Replicas".into())),
        }
    }

    fn save(&self) -> Result<(), AdminError> {
        self.store.save(&self.meta).map_err(|e| {
            warn!(error = %e, "cannot persist metadata");
            AdminError::Storage(e.to_string())
        })
    }

    /// Persists the state a transition produced, then carries out its effects: nothing is told
    /// to a broker that a controller restart could forget.
    fn commit(&mut self, effects: Effects<Bytes>) {
        if self.save().is_err() {
            // Unpersisted decisions must not leave: a restarted controller would contradict
            // them. Stop, and let an operator (or a restart) take over.
            std::process::exit(1);
        }
        for effect in effects {
            match effect {
                Effect::Send(envelope) => match envelope.to {
                    Node::Broker(b) => match self.brokers.get(&b) {
                        Some((_, link)) => {
                            link.send(Frame::Envelope(envelope));
                        }
                        None => debug!(broker = %b, "not connected; message dropped"),
                    },
                    Node::Controller => {}
                },
                other => debug!(effect = ?other, "controller effect without a driver action"),
            }
        }
    }

    fn publish_addresses(&self) {
        let book = self.meta.addresses.clone();
        for (_, link) in self.brokers.values() {
            link.send(Frame::Brokers(book.clone()));
        }
    }
}
