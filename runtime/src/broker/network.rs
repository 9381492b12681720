//! A broker's connections: its session with the active controller, one connection per peer
//! broker, and the listener that tells Kafka clients from internal peers.
//!
//! Of two brokers, the one with the smaller id dials the other, so each pair shares exactly one
//! connection, which carries the replication of all their partitions in both directions.
//!
//! The broker keeps the cluster metadata the active controller pushes (a [`ClusterView`]): it
//! learns its peers' addresses from it, and answers Kafka clients' Metadata from it, so current
//! leaders stay reachable while no controller is.

use super::backend::BrokerBackend;
use super::host::Command;
use super::outbox::Outbox;
use crate::timing;
use crate::wire::admin::{AdminError, ClusterView, ControllerInfo, Request, Response};
use crate::wire::link::{self, Link, Opening};
use crate::wire::rpc::{Rpc, RpcError};
use crate::wire::{codec, Frame, Peer};
use bytes::Bytes;
use isr::{BrokerId, Envelope, Message, Node};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

pub struct Net {
    pub me: BrokerId,
    /// Where this broker listens, as told to the controller.
    pub address: String,
    /// The controllers to look for the active one among, in order.
    pub controllers: Vec<String>,
    pub host: mpsc::UnboundedSender<Command>,
    pub outbox: Outbox,
    /// Requests to the controller (metadata, topics, group offsets).
    pub rpc: Rpc,
    book: Mutex<BTreeMap<BrokerId, String>>,
    /// The metadata the active controller last pushed.
    metadata: Mutex<Option<ClusterView>>,
    dialing: Mutex<BTreeSet<BrokerId>>,
    /// Set by a controlled shutdown: from then on this broker neither heartbeats nor registers,
    /// since that would make the controller take it back before it stops.
    stopping: AtomicBool,
}

impl Net {
    pub fn new(
        me: BrokerId,
        address: String,
        controllers: Vec<String>,
        host: mpsc::UnboundedSender<Command>,
    ) -> Net {
        Net {
            me,
            address,
            controllers,
            host,
            outbox: Outbox::default(),
            rpc: Rpc::default(),
            book: Mutex::default(),
            metadata: Mutex::default(),
            dialing: Mutex::default(),
            stopping: AtomicBool::new(false),
        }
    }

    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }

    /// Kafka's controlled shutdown: asks the controller, on this broker's session, to fence it
    /// now so that the partitions it leads get new leaders at once rather than after the
    /// session timeout. Stops heartbeats and registrations first, so nothing undoes the fence.
    pub async fn controlled_shutdown(&self) -> Result<(), String> {
        self.stopping.store(true, Ordering::Relaxed);
        let link = self
            .outbox
            .controller()
            .ok_or("no session with the controller")?;
        let request = Request::ControlledShutdown { broker: self.me };
        match self.rpc.call(&link, request, timing::ADMIN_TIMEOUT).await {
            Ok(Response::Done) => Ok(()),
            Ok(other) => Err(format!("unexpected answer {other:?}")),
            Err(e) => Err(e.to_string()),
        }
    }

    fn me_as_peer(&self) -> Peer {
        Peer::Broker {
            id: self.me,
            address: self.address.clone(),
        }
    }

    /// Keeps a session with the active controller: find it, open the session, heartbeat, and
    /// on loss start over. The process registers once, in its first session, saying how its last
    /// run ended; later sessions (after a controller failover, or a broken connection) resume
    /// with a heartbeat, since the broker is still the incarnation the controllers know, and
    /// register again only when the controller answers Reregister (it fenced this broker). The
    /// core hands a new incarnation's broker epoch to the replicas in the LeaderAndIsr that
    /// follows its registration.
    pub async fn controller_session(self: Arc<Self>, clean_shutdown: bool) {
        let mut clean = clean_shutdown;
        let mut registered = false;
        while !self.stopping() {
            if let Some((reader, link, active)) = self.find_controller().await {
                info!(controller = active.id, address = %active.address, epoch = %active.epoch,
                    "session with the active controller");
                self.outbox.set_controller(Some(link.clone()));
                let registered_at = if registered {
                    self.heartbeat(&link);
                    None
                } else {
                    self.register(&link, clean);
                    registered = true;
                    clean = true;
                    Some(Instant::now())
                };
                tokio::spawn(self.clone().heartbeats(link.clone()));
                self.read_controller(reader, &link, registered_at).await;
                self.outbox.set_controller(None);
                warn!("lost the session with the controller; looking for the active one");
            }
            tokio::time::sleep(timing::HEARTBEAT_INTERVAL).await;
        }
    }

    /// Dials every controller at once and takes the first that welcomes this broker as the
    /// active controller; a standby's answer names the active one, which is dialed too. At
    /// once, because a paused controller accepts connections and then says nothing: trying the
    /// controllers in turn would spend the session waiting on it.
    async fn find_controller(&self) -> Option<(OwnedReadHalf, Link, ControllerInfo)> {
        let mut dials = JoinSet::new();
        let mut tried = BTreeSet::new();
        let me = self.me_as_peer();
        for address in &self.controllers {
            if tried.insert(address.clone()) {
                dials.spawn(hello(address.clone(), me.clone()));
            }
        }
        while let Some(answer) = dials.join_next().await {
            match answer {
                Ok(Answer::Welcome(session)) => return Some(session),
                Ok(Answer::Standby(Some(active))) if tried.insert(active.address.clone()) => {
                    dials.spawn(hello(active.address, me.clone()));
                }
                _ => {}
            }
        }
        None
    }

    fn register(&self, link: &Link, clean_shutdown: bool) {
        info!(clean_shutdown, "registering");
        link.send(Frame::Envelope(Envelope {
            from: Node::Broker(self.me),
            to: Node::Controller,
            message: Message::BrokerRegistration {
                broker: self.me,
                clean_shutdown,
            },
        }));
    }

    /// Follows the controller's session until it ends. `registered_at`: when this session
    /// registered, if it did.
    async fn read_controller(
        self: &Arc<Self>,
        mut reader: OwnedReadHalf,
        link: &Link,
        mut registered_at: Option<Instant>,
    ) {
        loop {
            let frame = match tokio::time::timeout(timing::SESSION, codec::read(&mut reader)).await
            {
                Ok(Ok(Some(frame))) => frame,
                Ok(Ok(None)) => return,
                Ok(Err(e)) => {
                    warn!(error = %e, "bad frame from the controller");
                    return;
                }
                Err(_) => {
                    warn!("the controller answers no heartbeat");
                    return;
                }
            };
            match frame {
                Frame::Envelope(env) if env.from == Node::Controller => self.deliver(env),
                Frame::Metadata(view) => self.on_metadata(view),
                Frame::Response { id, result } => self.rpc.complete(id, result),
                Frame::HeartbeatAck => {}
                // The controller lost its role: find the next one.
                Frame::NotActive(_) => return,
                // Heartbeats sent before our registration reached the controller are answered
                // with Reregister too; only one per session is genuine.
                Frame::Reregister
                    if registered_at.is_none_or(|at| at.elapsed() >= timing::SESSION)
                        && !self.stopping() =>
                {
                    self.register(link, true);
                    registered_at = Some(Instant::now());
                }
                other => debug!(frame = ?other, "ignoring frame from the controller"),
            }
        }
    }

    /// The metadata the active controller pushed: kept for clients, and the address book.
    fn on_metadata(self: &Arc<Self>, view: ClusterView) {
        let book = view
            .brokers
            .iter()
            .map(|(&id, b)| (id, b.address.clone()))
            .collect();
        self.keep(view);
        self.on_address_book(book);
    }

    /// Keeps `view` as this broker's metadata, and has the replica thread drop the partitions
    /// it says were deleted.
    fn keep(&self, view: ClusterView) {
        let _ = self.host.send(Command::Retire {
            next_partition: view.next_partition,
            live: view.partitions.keys().copied().collect(),
        });
        *self.metadata.lock().unwrap_or_else(|p| p.into_inner()) = Some(view);
    }

    /// The cluster's metadata as this broker knows it: the controller's last push, or, before
    /// the first one, asked of the controller.
    pub async fn cluster_view(&self) -> Result<ClusterView, AdminError> {
        let cached = self
            .metadata
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        match cached {
            Some(view) => Ok(view),
            None => self.ask_metadata().await,
        }
    }

    /// The controller's current metadata, asked over this broker's session (fresher than the
    /// last push when a topic was just created); it replaces the cached copy.
    pub async fn ask_metadata(&self) -> Result<ClusterView, AdminError> {
        match self.controller_metadata().await? {
            Response::Metadata(view) => {
                self.keep(view.clone());
                Ok(view)
            }
            other => Err(AdminError::Unavailable(format!(
                "unexpected answer from the controller: {other:?}"
            ))),
        }
    }

    fn deliver(&self, envelope: Envelope<Bytes>) {
        let _ = self.host.send(Command::Inbound(envelope));
    }

    /// Learns where the other brokers listen and dials those it is responsible for.
    fn on_address_book(self: &Arc<Self>, book: BTreeMap<BrokerId, String>) {
        let peers: Vec<BrokerId> = book.keys().copied().filter(|&b| b > self.me).collect();
        *self.book.lock().unwrap_or_else(|p| p.into_inner()) = book;
        for peer in peers {
            let new = self
                .dialing
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(peer);
            if new {
                tokio::spawn(self.clone().dial_peer(peer));
            }
        }
    }

    /// Keeps the connection to a peer with a larger id open, redialing its latest address.
    async fn dial_peer(self: Arc<Self>, peer: BrokerId) {
        loop {
            let address = self
                .book
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&peer)
                .cloned();
            if let Some(address) = address {
                match link::dial(&address, self.me_as_peer()).await {
                    Ok((reader, link)) => {
                        debug!(%peer, %address, "connected to peer");
                        self.serve_peer(peer, reader, link).await;
                    }
                    Err(e) => debug!(%peer, %address, error = %e, "peer unreachable"),
                }
            }
            tokio::time::sleep(timing::HEARTBEAT_INTERVAL).await;
        }
    }

    /// Carries a peer connection until it closes: its envelopes go to the replicas, provided
    /// they come from that peer and are meant for us.
    async fn serve_peer(&self, peer: BrokerId, mut reader: OwnedReadHalf, link: Link) {
        self.outbox.add_peer(peer, link.clone());
        loop {
            match codec::read(&mut reader).await {
                Ok(Some(Frame::Envelope(env)))
                    if env.from == Node::Broker(peer) && env.to == Node::Broker(self.me) =>
                {
                    self.deliver(env)
                }
                Ok(Some(other)) => debug!(%peer, frame = ?other, "ignoring frame"),
                Ok(None) => break,
                Err(e) => {
                    warn!(%peer, error = %e, "closing peer connection");
                    break;
                }
            }
        }
        self.outbox.remove_peer(peer, &link);
    }

    pub async fn accept_loop(self: Arc<Self>, listener: TcpListener, backend: Arc<BrokerBackend>) {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    tokio::spawn(self.clone().serve(stream, backend.clone()));
                }
                Err(e) => {
                    warn!(error = %e, "accept failed");
                    tokio::time::sleep(timing::TICK).await;
                }
            }
        }
    }

    async fn serve(self: Arc<Self>, mut stream: TcpStream, backend: Arc<BrokerBackend>) {
        match link::classify(&mut stream).await {
            Ok(Opening::Kafka(prefix)) => {
                let _ = stream.set_nodelay(true);
                if let Err(e) = isr_kafka::serve_connection(stream, prefix, backend).await {
                    debug!(error = %e, "Kafka connection closed");
                }
            }
            Ok(Opening::Internal) => {
                let (mut reader, link) = link::split(stream);
                match codec::read(&mut reader).await {
                    Ok(Some(Frame::Hello(Peer::Broker { id, .. }))) if id < self.me => {
                        self.serve_peer(id, reader, link).await
                    }
                    Ok(Some(Frame::Hello(Peer::Client))) => self.serve_client(reader, link).await,
                    Ok(Some(other)) => warn!(frame = ?other, "unexpected first frame; closing"),
                    Ok(None) => {}
                    Err(e) => warn!(error = %e, "bad first frame; closing"),
                }
            }
            Err(e) => debug!(error = %e, "connection closed before it said what it is"),
        }
    }

    /// The controller's metadata, asked over this broker's session, so `isr status` needs only
    /// a broker's address (`--bootstrap`), like every other client command.
    async fn controller_metadata(&self) -> Result<Response, AdminError> {
        let link = self
            .outbox
            .controller()
            .ok_or_else(|| AdminError::Unavailable("no session with the controller".into()))?;
        match self
            .rpc
            .call(&link, Request::Metadata, timing::ADMIN_TIMEOUT)
            .await
        {
            Ok(answer @ Response::Metadata(_)) => Ok(answer),
            Ok(other) => Err(AdminError::Unavailable(format!(
                "unexpected answer from the controller: {other:?}"
            ))),
            Err(RpcError::Refused(e)) => Err(e),
            Err(e) => Err(AdminError::Unavailable(format!("controller: {e}"))),
        }
    }

    /// Answers an admin client (`isr status`): this broker's replicas, and the controller's
    /// metadata on the client's behalf.
    async fn serve_client(&self, mut reader: OwnedReadHalf, link: Link) {
        loop {
            match codec::read(&mut reader).await {
                Ok(Some(Frame::Request { id, request })) => {
                    let result = match request {
                        Request::Replicas => {
                            let (tx, rx) = oneshot::channel();
                            let _ = self.host.send(Command::Status(tx));
                            rx.await.map(Response::Replicas).map_err(|_| {
                                AdminError::Unsupported("status while stopping".into())
                            })
                        }
                        Request::Metadata => self.cluster_view().await.map(Response::Metadata),
                        other => Err(AdminError::Unsupported(format!("{other:?}"))),
                    };
                    link.send(Frame::Response { id, result });
                }
                Ok(Some(other)) => debug!(frame = ?other, "ignoring client frame"),
                Ok(None) => return,
                Err(e) => {
                    warn!(error = %e, "closing client connection");
                    return;
                }
            }
        }
    }
}

/// What dialing a controller found.
enum Answer {
    Welcome((OwnedReadHalf, Link, ControllerInfo)),
    /// A standby, naming the active controller if it knows it.
    Standby(Option<ControllerInfo>),
    Nothing,
}

/// Dials one controller and reads its first word.
async fn hello(address: String, me: Peer) -> Answer {
    let Ok((mut reader, link)) = link::dial(&address, me).await else {
        debug!(%address, "controller unreachable");
        return Answer::Nothing;
    };
    match tokio::time::timeout(timing::SESSION, codec::read(&mut reader)).await {
        Ok(Ok(Some(Frame::Welcome(active)))) => Answer::Welcome((reader, link, active)),
        Ok(Ok(Some(Frame::NotActive(active)))) => Answer::Standby(active),
        _ => {
            debug!(%address, "no welcome from a controller");
            Answer::Nothing
        }
    }
}

impl Net {
    fn heartbeat(&self, link: &Link) -> bool {
        link.send(Frame::Envelope(Envelope {
            from: Node::Broker(self.me),
            to: Node::Controller,
            message: Message::BrokerHeartbeat { broker: self.me },
        }))
    }

    async fn heartbeats(self: Arc<Self>, link: Link) {
        let mut interval = tokio::time::interval(timing::HEARTBEAT_INTERVAL);
        // After a stall (a paused process, an overloaded machine) send one heartbeat, not a
        // burst.
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            interval.tick().await;
            // A session that ended (the controller lost its role, or a newer session replaced
            // it) gets no more heartbeats; its connection closes with the last handle.
            let current = self.outbox.controller().is_some_and(|l| l.same(&link));
            if self.stopping() || !current || !self.heartbeat(&link) {
                return;
            }
        }
    }
}
