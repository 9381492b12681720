//! A broker's connections: its session with the active controller, one connection per peer
//! broker, and the listener that tells Kafka clients from internal peers.
//!
//! Of two brokers, the one with the smaller id dials the other, so each pair shares exactly one
//! connection, which carries the replication of all their partitions in both directions.
//!
//! With a cluster certificate every one of these links is mutual TLS, and each side checks the
//! role the other's certificate names: the controller must be a controller, a peer the broker
//! it was dialed as, and one that dials us the broker it says it is. Kafka clients come through
//! the listeners, each with its security protocol.
//!
//! The broker keeps the cluster metadata the active controller pushes (a [`ClusterView`]): a
//! whole view when its session opens, then one delta per committed change, each stamped with
//! the metadata offset it brings the view to. It learns its peers' addresses from it, and
//! answers Kafka clients' Metadata from it, so current leaders stay reachable while no
//! controller is.

use super::backend::BrokerBackend;
use super::host::Command;
use super::outbox::Outbox;
use super::policy_changes::PolicyChanges;
use crate::controller::records::Record;
use crate::security::listeners::{self, Accepted, Listener};
use crate::security::{self, certificate_refusal, ClusterTls, Role};
use crate::timing;
use crate::wire::admin::{AdminError, ClusterView, ControllerInfo, Request, Response};
use crate::wire::codec::FrameError;
use crate::wire::link::{self, Conn, Link, Opening, Reader};
use crate::wire::rpc::{Rpc, RpcError};
use crate::wire::{codec, BrokerAddress, Frame, Peer};
use bytes::Bytes;
use isr::broker::{Effect as SessionEffect, Input as SessionInput};
use isr::{BrokerId, BrokerSession, Config, Envelope, Message, Node, Tick};
use isr_kafka::auth::throttle::LoginThrottle;
use isr_kafka::auth::{SecurityProtocol, SecurityState};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

pub struct Net {
    pub me: BrokerId,
    /// Where peers and clients reach this broker, as told to the controller: where it listens,
    /// or the address given with `--advertise`.
    pub address: BrokerAddress,
    /// The controllers to look for the active one among, in order.
    pub controllers: Vec<String>,
    pub host: mpsc::UnboundedSender<Command>,
    pub outbox: Outbox,
    /// Requests to the controller (metadata, topics, group offsets).
    pub rpc: Rpc,
    book: Mutex<BTreeMap<BrokerId, String>>,
    /// The metadata the active controller last pushed. Shared, not copied: a request reads it
    /// at no cost, and a delta changes it in place unless a request still holds it.
    metadata: Mutex<Option<Arc<ClusterView>>>,
    /// The topics whose log policies changed since the retention pass last looked.
    pub policy_changes: PolicyChanges,
    /// Deltas ignored: older than the view, or after a gap, or about a partition the view does
    /// not have (the last two ask for a whole view).
    pub stale_deltas: std::sync::atomic::AtomicU64,
    /// Set while a whole view is being asked for after a gap: one request at a time.
    catching_up: Arc<AtomicBool>,
    dialing: Mutex<BTreeSet<BrokerId>>,
    /// The session with the controller as the core keeps it: what to register with, when to
    /// heartbeat, which Reregister to obey, when to give a silent controller up, and the
    /// controlled shutdown that stops it all. This file only carries its messages.
    session: Mutex<BrokerSession>,
    /// The core configuration (the session's heartbeat interval and timeout).
    cfg: Config,
    /// Tick 0 of the session's clock.
    started: Instant,
    /// The cluster certificate: links are mutual TLS with it.
    tls: Option<Arc<ClusterTls>>,
    /// Users and ACLs as the controller last pushed them.
    security: Mutex<Arc<SecurityState>>,
    /// Failed SASL logins by address, over every listener.
    pub logins: Arc<LoginThrottle>,
    /// Told why, if the controllers refuse this broker's certificate before it ever joined.
    refused: Mutex<Option<oneshot::Sender<String>>>,
}

impl Net {
    /// The network side of the broker whose session is `session`.
    pub fn new(
        address: BrokerAddress,
        controllers: Vec<String>,
        host: mpsc::UnboundedSender<Command>,
        tls: Option<Arc<ClusterTls>>,
        refused: oneshot::Sender<String>,
        session: BrokerSession,
        cfg: Config,
    ) -> Net {
        Net {
            me: session.broker(),
            address,
            controllers,
            host,
            outbox: Outbox::default(),
            rpc: Rpc::default(),
            book: Mutex::default(),
            metadata: Mutex::default(),
            policy_changes: PolicyChanges::default(),
            stale_deltas: Default::default(),
            catching_up: Arc::default(),
            dialing: Mutex::default(),
            session: Mutex::new(session),
            cfg,
            started: Instant::now(),
            tls,
            security: Mutex::default(),
            logins: Arc::default(),
            refused: Mutex::new(Some(refused)),
        }
    }

    /// Whom this broker's certificate names, if it has one.
    pub fn tls_role(&self) -> Option<String> {
        self.tls.as_ref().map(|t| t.role.to_string())
    }

    /// Users and ACLs as the controller last pushed them.
    pub fn security(&self) -> Arc<SecurityState> {
        self.security
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn stopping(&self) -> bool {
        self.lock_session().is_stopping()
    }

    fn lock_session(&self) -> std::sync::MutexGuard<'_, BrokerSession> {
        self.session.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The session's clock: ticks since this process started.
    fn now(&self) -> Tick {
        Tick((self.started.elapsed().as_millis() / timing::TICK.as_millis()) as u64)
    }

    /// When tick `t` of the session's clock comes.
    fn instant_of(&self, t: Tick) -> tokio::time::Instant {
        let after = timing::TICK.saturating_mul(u32::try_from(t.0).unwrap_or(u32::MAX));
        tokio::time::Instant::from_std(self.started + after)
    }

    /// Steps the session with `input`, now.
    fn session_step(&self, input: SessionInput) -> Vec<SessionEffect<Bytes>> {
        let now = self.now();
        self.lock_session().step(&self.cfg, now, input)
    }

    /// Sends what the session says on `link`; whether the session was lost.
    fn carry_out(&self, effects: Vec<SessionEffect<Bytes>>, link: &Link) -> bool {
        let mut lost = false;
        for effect in effects {
            match effect {
                SessionEffect::Send(envelope) => {
                    if let Message::BrokerRegistration { clean_shutdown, .. } = envelope.message {
                        info!(clean_shutdown, "registering");
                    }
                    link.send(Frame::Envelope(envelope));
                }
                SessionEffect::SessionLost => lost = true,
            }
        }
        lost
    }

    /// Kafka's controlled shutdown: asks the controller, on this broker's session, to fence it
    /// now so that the partitions it leads get new leaders at once rather than after the
    /// session timeout. Stops heartbeats and registrations first, so nothing undoes the fence.
    pub async fn controlled_shutdown(&self) -> Result<(), String> {
        self.session_step(SessionInput::ControlledShutdown);
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

    /// Keeps a session with the active controller: find it, open the session, and on loss
    /// start over. What goes on the session (a registration on the first one, saying how the
    /// last run ended; heartbeats; a registration again after a Reregister) is the core's
    /// [`BrokerSession`]'s to say. The core hands a new incarnation's broker epoch to the
    /// replicas in the LeaderAndIsr that follows its registration.
    pub async fn controller_session(self: Arc<Self>) {
        let mut joined = false;
        while !self.stopping() {
            let found = match self.find_controller().await {
                Found::Active(session) => Some(session),
                // A broker that never joined and whose certificate every controller refuses
                // (or whose controllers' it refuses) stops with the reason: no retry helps.
                Found::Refused(why) if !joined => {
                    let told = self
                        .refused
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .take();
                    if let Some(tell) = told {
                        let _ = tell.send(why);
                        return;
                    }
                    None
                }
                Found::Refused(why) => {
                    warn!(%why, "the controllers refuse this broker's certificate");
                    None
                }
                Found::Nothing => None,
            };
            if let Some((reader, link, active)) = found {
                info!(controller = active.id, address = %active.address, epoch = %active.epoch,
                    "session with the active controller");
                self.outbox.set_controller(Some(link.clone()));
                joined = true;
                // A resumed session's first heartbeat (its heartbeat connection's first) says
                // whether the controller still knows this incarnation.
                self.carry_out(self.session_step(SessionInput::SessionOpened), &link);
                let _ = self.host.send(Command::ControllerLink);
                let why = tokio::select! {
                    why = self.read_controller(reader, &link) => why,
                    why = self.heartbeat_connection(&active) => why,
                };
                self.session_step(SessionInput::SessionClosed);
                self.outbox.set_controller(None);
                warn!(%why, "lost the session with the controller; looking for the active one");
            }
            tokio::time::sleep(timing::HEARTBEAT_INTERVAL).await;
        }
    }

    /// Dials every controller at once and takes the first that welcomes this broker as the
    /// active controller; a standby's answer names the active one, which is dialed too. At
    /// once, because a paused controller accepts connections and then says nothing: trying the
    /// controllers in turn would spend the session waiting on it. A busy active controller may
    /// take seconds to welcome (`WELCOME_WAIT`); meanwhile the others are asked again every
    /// heartbeat interval, since a standby takes over when the active one is paused or gone.
    async fn find_controller(&self) -> Found {
        let deadline = Instant::now() + timing::WELCOME_WAIT;
        let me = self.me_as_peer();
        let tls = self.tls.clone();
        let dial = |address: String, after: Duration| {
            let (me, tls) = (me.clone(), tls.clone());
            async move {
                tokio::time::sleep(after).await;
                (address.clone(), hello(address, me, tls).await)
            }
        };
        let mut dials = JoinSet::new();
        let mut tried = BTreeSet::new();
        for address in &self.controllers {
            if tried.insert(address.clone()) {
                dials.spawn(dial(address.clone(), Duration::ZERO));
            }
        }
        let mut refusals = Vec::new();
        let mut others = false;
        while let Some(answer) = dials.join_next().await {
            let Ok((address, answer)) = answer else {
                others = true;
                continue;
            };
            let ask_again = match answer {
                Answer::Welcome(session) => return Found::Active(session),
                Answer::Refused(why) => {
                    refusals.push(why);
                    false
                }
                Answer::Standby(active) => {
                    if let Some(active) = active.filter(|a| tried.insert(a.address.clone())) {
                        dials.spawn(dial(active.address, Duration::ZERO));
                    }
                    true
                }
                Answer::Nothing => true,
            };
            if ask_again {
                others = true;
                if Instant::now() + timing::HEARTBEAT_INTERVAL < deadline {
                    dials.spawn(dial(address, timing::HEARTBEAT_INTERVAL));
                }
            }
        }
        if !refusals.is_empty() && !others {
            return Found::Refused(refusals.join("; "));
        }
        Found::Nothing
    }

    /// Follows the controller's session until it ends, and says why. How long the controller
    /// may stay silent here is the heartbeat connection's business
    /// ([`Net::heartbeat_connection`]): this one may carry nothing for long, or a large view
    /// that takes a while.
    async fn read_controller(self: &Arc<Self>, mut reader: Reader, link: &Link) -> String {
        loop {
            let frame = match codec::read(&mut reader).await {
                Ok(Some(frame)) => frame,
                Ok(None) => return "the controller closed the session".into(),
                Err(e) => return format!("a bad frame from the controller: {e}"),
            };
            match frame {
                Frame::Envelope(env) => {
                    self.deliver(self.addressed_to_me(Node::Controller, vec![env]));
                }
                Frame::Envelopes(envs) => {
                    self.deliver(self.addressed_to_me(Node::Controller, envs));
                }
                Frame::Metadata(view) => self.on_metadata(view),
                Frame::MetadataDelta { offset, records } => self.on_delta(offset, &records),
                Frame::Response { id, result } => self.rpc.complete(id, result),
                Frame::HeartbeatAck => {}
                // The controller lost its role: find the next one.
                Frame::NotActive(_) => return "the controller is no longer active".into(),
                // Whether to obey it (it may answer a heartbeat sent before the registration
                // was dealt with) is the session's to say.
                Frame::Reregister => {
                    self.carry_out(self.session_step(SessionInput::MustRegister), link);
                }
                Frame::Registered => {
                    self.session_step(SessionInput::RegistrationAnswered);
                }
                other => debug!(frame = ?other, "ignoring frame from the controller"),
            }
        }
    }

    /// Asks the controller for its whole view after a delta that could not apply at `offset`,
    /// unless a request for one is already out.
    fn catch_up(self: &Arc<Self>, offset: u64) {
        if self.catching_up.swap(true, Ordering::Relaxed) {
            return;
        }
        debug!(
            offset,
            "metadata deltas that do not apply: asking for the whole view"
        );
        let net = self.clone();
        tokio::spawn(async move {
            if let Err(e) = net.ask_metadata().await {
                warn!(error = %e, "could not catch up with the controller's metadata");
            }
            net.catching_up.store(false, Ordering::Relaxed);
        });
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

    /// Keeps `view` as this broker's metadata (and its users and ACLs for the authorizer), and
    /// has the replica thread drop the partitions it says were deleted; unless the metadata kept
    /// is already ahead of it ([`ClusterView::is_ahead_of`]), which is then kept and returned.
    /// Taking an answer that crossed deltas went back to before them, and stayed there until
    /// the next delta (a deleted topic listed on, a partition count fallen back).
    fn keep(&self, view: ClusterView) -> Arc<ClusterView> {
        let mut kept = self.metadata.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(ahead) = kept.as_ref().filter(|k| k.is_ahead_of(&view)) {
            return ahead.clone();
        }
        self.retire(&view);
        self.keep_security(&view);
        let view = Arc::new(view);
        let old = kept.replace(view.clone());
        drop(kept);
        self.policy_changes.note_view(old.as_deref(), &view);
        view
    }

    /// Has the replica thread drop the partitions `view` says were deleted.
    fn retire(&self, view: &ClusterView) {
        let _ = self.host.send(Command::Retire {
            next_partition: view.next_partition,
            live: view.partitions.keys().copied().collect(),
        });
    }

    /// Takes `view`'s users and ACLs for the authorizer, if they changed.
    fn keep_security(&self, view: &ClusterView) {
        let mut security = self.security.lock().unwrap_or_else(|p| p.into_inner());
        if **security != *view.security {
            *security = Arc::new((*view.security).clone());
        }
    }

    /// A delta of the metadata: applied if it is the next one, ignored if the view already has
    /// it; after a gap (a delta lost, or none kept yet), or for a delta about a partition the
    /// view does not have, the whole view is asked for, and the deltas that follow it apply.
    /// Its cost is that of the records, except where they delete a partition, add a broker or
    /// change the users: those look at the whole view, as rarely.
    fn on_delta(self: &Arc<Self>, offset: u64, records: &[Record]) {
        let mut guard = self.metadata.lock().unwrap_or_else(|p| p.into_inner());
        let unknown = guard.as_ref().and_then(|v| v.unknown_partition(records));
        let Some(view) = guard
            .as_mut()
            .filter(|v| offset == v.offset + 1 && unknown.is_none())
        else {
            self.stale_deltas.fetch_add(1, Ordering::Relaxed);
            let behind = guard.as_ref().is_none_or(|v| offset > v.offset);
            drop(guard);
            if let Some(partition) = unknown.filter(|_| behind) {
                warn!(offset, %partition, "a metadata delta about a partition this broker's view does not have: not applied");
            }
            if behind {
                self.catch_up(offset);
            }
            return;
        };
        let view = Arc::make_mut(view);
        for record in records {
            view.apply(record);
        }
        view.offset = offset;
        self.policy_changes.note(records);
        let deleted = records.iter().any(|r| {
            matches!(
                r,
                Record::Core(isr::MetadataRecord::Partition { state: None, .. })
            )
        });
        if deleted {
            self.retire(view);
        }
        if records.iter().any(|r| matches!(r, Record::Security(_))) {
            self.keep_security(view);
        }
        let book = records
            .iter()
            .any(|r| matches!(r, Record::Address { .. }))
            .then(|| {
                view.brokers
                    .iter()
                    .map(|(&id, b)| (id, b.address.clone()))
                    .collect()
            });
        drop(guard);
        if let Some(book) = book {
            self.on_address_book(book);
        }
    }

    /// The cluster's metadata as this broker knows it: the controller's last push, or, before
    /// the first one, asked of the controller.
    pub async fn cluster_view(&self) -> Result<Arc<ClusterView>, AdminError> {
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
    pub async fn ask_metadata(&self) -> Result<Arc<ClusterView>, AdminError> {
        match self.controller_metadata().await? {
            Response::Metadata(view) => Ok(self.keep(view)),
            other => Err(AdminError::Unavailable(format!(
                "unexpected answer from the controller: {other:?}"
            ))),
        }
    }

    /// Hands one frame's messages to the replica thread, as one command.
    fn deliver(&self, envelopes: Vec<Envelope<Bytes>>) {
        if !envelopes.is_empty() {
            let _ = self.host.send(Command::Inbound(envelopes));
        }
    }

    /// The messages of a frame from `sender` that it may send and that are meant for us; the
    /// rest are dropped, with a note.
    fn addressed_to_me(
        &self,
        sender: Node,
        mut envelopes: Vec<Envelope<Bytes>>,
    ) -> Vec<Envelope<Bytes>> {
        let before = envelopes.len();
        envelopes.retain(|e| e.from == sender && e.to == Node::Broker(self.me));
        if envelopes.len() < before {
            debug!(%sender, dropped = before - envelopes.len(), "ignoring misaddressed messages");
        }
        envelopes
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
                let tls = self.tls.as_deref();
                match link::dial(&address, self.me_as_peer(), tls).await {
                    Ok((_, _, role)) if tls.is_some() && role != Some(Role::Broker(peer)) => {
                        warn!(%peer, %address, ?role, "the peer's certificate is not broker {peer}'s; not replicating with it");
                    }
                    Ok((reader, link, _)) => {
                        debug!(%peer, %address, "connected to peer");
                        self.serve_peer(peer, reader, link).await;
                    }
                    Err(e) => match refusal(&e) {
                        Some(why) => warn!(%peer, %address, %why, "TLS with the peer refused"),
                        None => debug!(%peer, %address, error = %e, "peer unreachable"),
                    },
                }
            }
            tokio::time::sleep(timing::HEARTBEAT_INTERVAL).await;
        }
    }

    /// Carries a peer connection until it closes: its envelopes go to the replicas, provided
    /// they come from that peer and are meant for us.
    async fn serve_peer(&self, peer: BrokerId, mut reader: Reader, link: Link) {
        self.outbox.add_peer(peer, link.clone());
        let _ = self.host.send(Command::PeerLink(peer));
        loop {
            match codec::read(&mut reader).await {
                Ok(Some(Frame::Envelope(env))) => {
                    self.deliver(self.addressed_to_me(Node::Broker(peer), vec![env]))
                }
                Ok(Some(Frame::Envelopes(envs))) => {
                    self.deliver(self.addressed_to_me(Node::Broker(peer), envs))
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
        let _ = self.host.send(Command::PeerLink(peer));
    }

    /// Accepts connections on one listener, each served by its own task.
    pub async fn accept_loop(self: Arc<Self>, listener: Listener, backend: Arc<BrokerBackend>) {
        loop {
            match listener.tcp.accept().await {
                Ok((stream, peer)) => {
                    let acceptor = listener.acceptor.clone();
                    let protocol = listener.protocol;
                    tokio::spawn(self.clone().serve(
                        stream,
                        peer,
                        protocol,
                        acceptor,
                        backend.clone(),
                    ));
                }
                Err(e) => {
                    warn!(error = %e, "accept failed");
                    tokio::time::sleep(timing::TICK).await;
                }
            }
        }
    }

    /// One accepted connection: its TLS handshake if the listener has TLS, then a Kafka client
    /// or an internal peer, told apart by its first bytes.
    async fn serve(
        self: Arc<Self>,
        stream: TcpStream,
        peer: SocketAddr,
        protocol: SecurityProtocol,
        acceptor: Option<tokio_rustls::TlsAcceptor>,
        backend: Arc<BrokerBackend>,
    ) {
        let Accepted {
            conn: mut stream,
            role,
        } = match listeners::handshake(acceptor, stream, peer).await {
            Some(accepted) => accepted,
            None => return,
        };
        match link::classify(&mut stream).await {
            Ok(Opening::Kafka(prefix)) => {
                let info = isr_kafka::ConnectionInfo {
                    protocol,
                    peer,
                    // Only an SSL listener takes its principal from the certificate.
                    tls_principal: role
                        .filter(|_| protocol == SecurityProtocol::Ssl)
                        .map(|r| r.principal()),
                    logins: self.logins.clone(),
                };
                match isr_kafka::serve_connection(stream, prefix, backend, info).await {
                    Err(e @ isr_kafka::KafkaError::AuthenticationFailed { .. }) => {
                        info!(error = %e, "failed login")
                    }
                    Err(e) => debug!(error = %e, "Kafka connection closed"),
                    Ok(()) => {}
                }
            }
            Ok(Opening::TlsHello) => {
                info!(%peer, %protocol, "a TLS client reached a listener without TLS; closing")
            }
            Ok(Opening::Internal) => self.serve_internal(stream, role).await,
            Err(e) => debug!(error = %e, "connection closed before it said what it is"),
        }
    }

    /// An internal connection: a peer broker with a smaller id, or an admin client. In a
    /// secured cluster, only with a certificate that names what it says it is.
    async fn serve_internal(&self, stream: Conn, role: Option<Role>) {
        let (mut reader, link) = link::split(stream);
        let secured = self.tls.is_some();
        match codec::read(&mut reader).await {
            Ok(Some(Frame::Hello(peer))) => {
                if let Err(why) = security::admits(secured, role.as_ref(), &peer) {
                    warn!(?peer, %why, "refused");
                    return;
                }
                match peer {
                    Peer::Broker { id, .. } if id < self.me => {
                        self.serve_peer(id, reader, link).await
                    }
                    Peer::Client => self.serve_client(reader, link).await,
                    other => warn!(peer = ?other, "unexpected peer; closing"),
                }
            }
            Ok(Some(other)) => warn!(frame = ?other, "unexpected first frame; closing"),
            Ok(None) => {}
            Err(e) => warn!(error = %e, "bad first frame; closing"),
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
    /// metadata on the client's behalf (without users' credentials).
    async fn serve_client(&self, mut reader: Reader, link: Link) {
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
                        Request::MetadataOffset => self
                            .metadata
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .as_ref()
                            .map(|view| Response::MetadataOffset {
                                offset: view.offset,
                                stale_deltas: self.stale_deltas.load(Ordering::Relaxed),
                            })
                            .ok_or_else(|| {
                                AdminError::Unavailable("no metadata from a controller yet".into())
                            }),
                        Request::Metadata => self
                            .cluster_view()
                            .await
                            .map(|view| Response::Metadata((*view).clone().without_credentials())),
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

/// A session with the active controller: its connection and who it is.
type Session = (Reader, Link, ControllerInfo);

/// What looking for the active controller found.
enum Found {
    Active(Session),
    /// Every controller reached refused this broker's certificate, or presented one this
    /// broker refuses: why.
    Refused(String),
    Nothing,
}

/// What dialing a controller found.
enum Answer {
    Welcome(Session),
    /// A standby, naming the active controller if it knows it.
    Standby(Option<ControllerInfo>),
    /// TLS failed over a certificate (ours, or the controller's).
    Refused(String),
    Nothing,
}

/// Why a dial failed over a certificate, if it did.
fn refusal(e: &FrameError) -> Option<String> {
    match e {
        FrameError::Io(io) => certificate_refusal(io),
        _ => None,
    }
}

/// Dials one controller and reads its first word.
async fn hello(address: String, me: Peer, tls: Option<Arc<ClusterTls>>) -> Answer {
    let refused = |why: String| {
        warn!(%address, %why, "TLS with the controller refused");
        Answer::Refused(format!("controller {address}: {why}"))
    };
    let (mut reader, link, role) = match link::dial(&address, me, tls.as_deref()).await {
        Ok(dialed) => dialed,
        Err(e) => {
            return match refusal(&e) {
                Some(why) => refused(why),
                None => {
                    debug!(%address, error = %e, "controller unreachable");
                    Answer::Nothing
                }
            }
        }
    };
    if tls.is_some() && !matches!(role, Some(Role::Controller(_))) {
        return refused(format!("its certificate names {role:?}, not a controller"));
    }
    match tokio::time::timeout(timing::WELCOME_WAIT, codec::read(&mut reader)).await {
        Ok(Ok(Some(Frame::Welcome(active)))) => Answer::Welcome((reader, link, active)),
        Ok(Ok(Some(Frame::NotActive(active)))) => Answer::Standby(active),
        // Under TLS 1.3 the controller judges our certificate after our side of the handshake
        // is done: its refusal arrives as the first read.
        Ok(Err(e)) => match refusal(&e) {
            Some(why) => refused(why),
            None => {
                debug!(%address, error = %e, "no welcome from a controller");
                Answer::Nothing
            }
        },
        _ => {
            debug!(%address, "no welcome from a controller");
            Answer::Nothing
        }
    }
}

impl Net {
    /// Opens this session's heartbeat connection to the active controller and carries the
    /// session's heartbeats on it, when the core's session says, until the session is lost (a
    /// session's length without an answer: the controller is paused, gone, or lost its role),
    /// and says why. The controller answers each heartbeat at once on this connection,
    /// whatever its event loop is doing, and nothing else travels here, so the answers time the
    /// controller alone.
    async fn heartbeat_connection(self: &Arc<Self>, active: &ControllerInfo) -> String {
        let me = Peer::Heartbeats { id: self.me };
        let (mut reader, link, role) =
            match link::dial(&active.address, me, self.tls.as_deref()).await {
                Ok(dialed) => dialed,
                Err(e) => return format!("cannot open a heartbeat connection: {e}"),
            };
        if self.tls.is_some() && !matches!(role, Some(Role::Controller(_))) {
            return format!("the heartbeat connection's certificate names {role:?}");
        }
        // Frames are read by a task of their own (a read cut short by a timer would lose its
        // place in the stream); it stops with this function, as dropping the set aborts it.
        let (frames, mut answers) = mpsc::channel(16);
        let mut reading = JoinSet::new();
        reading.spawn(async move {
            loop {
                let frame = codec::read(&mut reader).await;
                let end = !matches!(frame, Ok(Some(_)));
                if frames.send(frame).await.is_err() || end {
                    return;
                }
            }
        });
        loop {
            let due = self.lock_session().next_timeout(&self.cfg);
            let wake = due.map(|t| self.instant_of(t));
            let timer = async {
                match wake {
                    Some(wake) => tokio::time::sleep_until(wake).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                frame = answers.recv() => match frame {
                    Some(Ok(Some(Frame::HeartbeatAck))) => {
                        self.session_step(SessionInput::HeartbeatAnswered);
                    }
                    Some(Ok(Some(Frame::NotActive(_)))) => {
                        return "the controller is no longer active".into()
                    }
                    Some(Ok(Some(other))) => debug!(frame = ?other, "ignoring frame on heartbeats"),
                    Some(Ok(None)) | None => {
                        return "the controller closed the heartbeat connection".into()
                    }
                    Some(Err(e)) => return format!("a bad frame on the heartbeat connection: {e}"),
                },
                () = timer => {
                    // After a stall (a paused process, an overloaded machine) the session sends
                    // one heartbeat, not a burst; say so, since a stall this long may cost it.
                    let late = wake.map_or(Duration::ZERO, |w| w.elapsed());
                    if late >= timing::SESSION / 2 {
                        warn!(
                            late_ms = late.as_millis() as u64,
                            "heartbeat late: this process was not scheduled in time (overloaded?)"
                        );
                    }
                    if self.carry_out(self.session_step(SessionInput::Tick), &link) {
                        return "the controller answers no heartbeat".into();
                    }
                }
            }
        }
    }
}
