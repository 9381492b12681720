//! The active controller: the core [`isr::Controller`] driven by connections and a clock, each
//! step committed to the store before anything it decided leaves.
//!
//! A step runs on a copy of the metadata. The copy is committed (written if the step changed
//! it, else only the role confirmed), and only then does it replace the current metadata and do
//! the step's messages go out. If the store refuses the step (the role was lost: rule 11) the
//! controller stops acting; if the store is unreachable the step is dropped, as if it never ran,
//! and whoever asked gets an error: a decision no later controller could know of must not leave.

use super::connections::Event;
use super::metadata::Metadata;
use super::store::{Store, StoreError, Won};
use crate::timing;
use crate::trace::Tracer;
use crate::wire::admin::{AdminError, ClusterView, ControllerInfo, Request, Response};
use crate::wire::link::Link;
use crate::wire::{BrokerAddress, Frame, Peer};
use bytes::Bytes;
use isr::{
    BrokerId, Config, Controller, ControllerInput, Effect, Effects, Message, Node, Rules, Tick,
};
use std::collections::BTreeMap;
use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};

/// Why an active controller stopped acting.
pub enum Ended {
    /// The role is gone: its lease expired, or the store refused a write.
    Lost,
    /// Asked to stop (SIGTERM); the role was given up.
    Stopped,
}

/// Why a step did not take effect.
enum StepError {
    /// The store refused it: this controller no longer holds the role.
    Lost,
    /// The store could not be reached; the step was dropped.
    Unavailable(String),
}

struct Active<'a> {
    cfg: Config,
    store: &'a mut Store,
    meta: Metadata,
    me: ControllerInfo,
    now: Tick,
    /// The connection each broker last introduced itself on.
    brokers: BTreeMap<BrokerId, (u64, Link)>,
    /// Every open connection, for answering requests.
    links: &'a mut BTreeMap<u64, Link>,
    /// The view brokers were last sent.
    pushed: Option<ClusterView>,
    /// Where committed steps are recorded, when tracing.
    tracer: &'a mut Option<Tracer>,
    /// What is being committed, for the trace.
    stepped: Option<Committing>,
}

/// What a commit records in the trace, besides an admin operation's change of state.
enum Committing {
    /// A step with this input.
    Step(ControllerInput<Bytes>),
    /// The state on taking office.
    TakeOver,
}

/// Who acts: this controller's id, the address brokers are told, and the rules it runs.
pub struct Actor {
    pub id: u32,
    pub address: String,
    pub rules: Rules,
}

/// Acts as the controller elected in `won.epoch` until the role is lost or `stop` says so.
pub async fn act(
    store: &mut Store,
    won: Won,
    actor: &Actor,
    events: &mut mpsc::UnboundedReceiver<Event>,
    links: &mut BTreeMap<u64, Link>,
    stop: &mut watch::Receiver<bool>,
    tracer: &mut Option<Tracer>,
) -> Ended {
    let mut lost = store.lost_signal();
    let stored = won.metadata.unwrap_or_default();
    let (controller, announce) = Controller::take_over(&stored.controller, won.epoch, Tick(0));
    let taken = Metadata {
        controller,
        ..stored.clone()
    };
    let mut active = Active {
        cfg: timing::config_with(actor.rules),
        store,
        meta: stored,
        me: ControllerInfo {
            id: actor.id,
            address: actor.address.clone(),
            epoch: won.epoch,
        },
        now: Tick(0),
        brokers: BTreeMap::new(),
        links,
        pushed: None,
        tracer,
        stepped: None,
    };
    info!(epoch = %won.epoch, topics = active.meta.topics.len(), "taking over");
    active.stepped = Some(Committing::TakeOver);
    if let Err(e) = active.commit(taken, announce).await {
        return active.end(e);
    }
    let mut ticks = tokio::time::interval(timing::TICK);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let input = tokio::select! {
            _ = lost.wait_for(|&lost| lost) => Input::Lost,
            _ = stop.wait_for(|&stop| stop) => Input::Stop,
            _ = ticks.tick() => Input::Tick,
            Some(event) = events.recv() => Input::Event(event),
        };
        let step = match input {
            Input::Lost => Err(StepError::Lost),
            Input::Stop => {
                active.store.resign().await;
                active.tell_brokers_it_is_over();
                return Ended::Stopped;
            }
            Input::Tick => active.on_tick().await,
            Input::Event(event) => active.on_event(event).await,
        };
        if let Err(StepError::Lost) = step {
            return active.end(StepError::Lost);
        }
    }
}

/// What wakes the active controller.
enum Input {
    Lost,
    Stop,
    Tick,
    Event(Event),
}

impl Active<'_> {
    /// Stops acting after `e`; only a lost role ends the active period.
    fn end(&mut self, e: StepError) -> Ended {
        match e {
            StepError::Lost => {
                warn!(epoch = %self.me.epoch, "lost the controller role; standing by")
            }
            StepError::Unavailable(why) => {
                warn!(%why, "cannot take office without the store; standing by")
            }
        }
        self.tell_brokers_it_is_over();
        Ended::Lost
    }

    /// Tells every broker this controller no longer acts, so that it looks for the next one.
    fn tell_brokers_it_is_over(&self) {
        for (_, link) in self.brokers.values() {
            link.send(Frame::NotActive(None));
        }
    }

    /// Commits `next` (or confirms the role when it equals the current metadata), then makes it
    /// current and carries out `effects`.
    async fn commit(&mut self, next: Metadata, effects: Effects<Bytes>) -> Result<(), StepError> {
        let changed = next != self.meta;
        let stepped = self.stepped.take();
        match self.store.commit(changed.then_some(&next)).await {
            Ok(()) => {}
            Err(StoreError::Fenced(_)) => return Err(StepError::Lost),
            Err(e) => {
                warn!(error = %e, "step dropped: it could not be committed");
                return Err(StepError::Unavailable(e.to_string()));
            }
        }
        if let Some(tracer) = self.tracer.as_mut() {
            match &stepped {
                Some(Committing::Step(input)) => tracer.controller(self.now, input, &effects),
                Some(Committing::TakeOver) => tracer.controller_state(&next.controller, &effects),
                // An admin operation; a step in place was recorded when taken.
                None if next.controller != self.meta.controller => {
                    tracer.controller_state(&next.controller, &effects)
                }
                None => {}
            }
        }
        if changed {
            self.meta = next;
        }
        self.send(effects);
        self.push_metadata();
        Ok(())
    }

    fn send(&self, effects: Effects<Bytes>) {
        for effect in effects {
            match effect {
                Effect::Send(envelope) => match envelope.to {
                    Node::Broker(b) => match self.brokers.get(&b) {
                        Some((_, link)) => {
                            link.send(Frame::Envelope(envelope));
                        }
                        // It learns the current state when it opens its next session.
                        None => debug!(broker = %b, "not connected; message dropped"),
                    },
                    Node::Controller => {}
                },
                // A fenced broker heartbeated: it must register again, as a new incarnation.
                Effect::MustRegister { broker } => {
                    info!(%broker, "heartbeat from a fenced broker: asking it to register");
                    if let Some((_, link)) = self.brokers.get(&broker) {
                        link.send(Frame::Reregister);
                    }
                }
                other => debug!(effect = ?other, "controller effect without a driver action"),
            }
        }
    }

    fn view(&self) -> ClusterView {
        self.meta.view(Some(self.me.clone()))
    }

    /// Sends brokers the metadata if it changed since they were last sent it.
    fn push_metadata(&mut self) {
        let view = self.view();
        if self.pushed.as_ref() == Some(&view) {
            return;
        }
        for (_, link) in self.brokers.values() {
            link.send(Frame::Metadata(view.clone()));
        }
        self.pushed = Some(view);
    }

    /// Steps the core controller on a copy of the metadata and commits the result.
    async fn step(&mut self, input: ControllerInput<Bytes>) -> Result<(), StepError> {
        let mut next = self.meta.clone();
        if self.tracer.is_some() {
            self.stepped = Some(Committing::Step(input.clone()));
        }
        let effects = next.controller.step(&self.cfg, self.now, input);
        self.commit(next, effects).await
    }

    /// Steps the current metadata's controller in place (a step with nothing to commit), and
    /// records it.
    fn step_in_place(&mut self, input: ControllerInput<Bytes>) -> Effects<Bytes> {
        let effects = self
            .meta
            .controller
            .step(&self.cfg, self.now, input.clone());
        if let Some(tracer) = self.tracer.as_mut() {
            tracer.controller(self.now, &input, &effects);
        }
        effects
    }

    async fn on_tick(&mut self) -> Result<(), StepError> {
        self.now = Tick(self.now.0 + 1);
        let mut next = self.meta.clone();
        let effects = next
            .controller
            .step(&self.cfg, self.now, ControllerInput::Tick);
        if next == self.meta && effects.is_empty() {
            return Ok(());
        }
        if self.tracer.is_some() {
            self.stepped = Some(Committing::Step(ControllerInput::Tick));
        }
        self.commit(next, effects).await
    }

    async fn on_event(&mut self, event: Event) -> Result<(), StepError> {
        match event {
            Event::Connected { conn, peer, link } => {
                self.links.insert(conn, link.clone());
                if let Peer::Broker { id, address } = peer {
                    return self.on_broker_session(conn, id, address, link).await;
                }
                Ok(())
            }
            Event::Frame { conn, frame } => self.on_frame(conn, frame).await,
            Event::Closed { conn } => {
                self.links.remove(&conn);
                self.brokers.retain(|_, (c, _)| *c != conn);
                Ok(())
            }
        }
    }

    /// A broker opened a session: after confirming the role (a zombie must not collect
    /// brokers), welcome it, send it the metadata and the state of its partitions.
    async fn on_broker_session(
        &mut self,
        conn: u64,
        id: BrokerId,
        address: BrokerAddress,
        link: Link,
    ) -> Result<(), StepError> {
        debug!(broker = %id, %address, conn, "broker connected");
        let mut next = self.meta.clone();
        next.addresses.insert(id, address);
        self.commit(next, Vec::new()).await?;
        self.brokers.insert(id, (conn, link.clone()));
        link.send(Frame::Welcome(self.me.clone()));
        link.send(Frame::Metadata(self.view()));
        let announce = self.step_in_place(ControllerInput::SessionOpened(id));
        self.send(announce);
        Ok(())
    }

    async fn on_frame(&mut self, conn: u64, frame: Frame) -> Result<(), StepError> {
        match frame {
            Frame::Envelope(envelope) => {
                self.on_message(conn, envelope.from, envelope.message).await
            }
            Frame::Request { id, request } => {
                let result = match self.on_request(conn, request).await {
                    Err(RequestError::Step(StepError::Lost)) => return Err(StepError::Lost),
                    Err(RequestError::Step(StepError::Unavailable(why))) => {
                        Err(AdminError::Unavailable(why))
                    }
                    Err(RequestError::Refused(e)) => Err(e),
                    Ok(response) => Ok(response),
                };
                if let Some(link) = self.links.get(&conn) {
                    link.send(Frame::Response { id, result });
                }
                Ok(())
            }
            other => {
                debug!(conn, frame = ?other, "ignoring frame");
                Ok(())
            }
        }
    }

    /// Whether `from` is the broker that introduced itself on `conn`: a broker speaks only for
    /// itself.
    fn speaks_for(&self, conn: u64, from: Node, broker: BrokerId) -> bool {
        from == Node::Broker(broker) && self.brokers.get(&broker).is_some_and(|(c, _)| *c == conn)
    }

    async fn on_message(
        &mut self,
        conn: u64,
        from: Node,
        message: Message<Bytes>,
    ) -> Result<(), StepError> {
        match &message {
            Message::BrokerRegistration {
                broker,
                clean_shutdown,
            } if self.speaks_for(conn, from, *broker) => {
                info!(%broker, clean_shutdown, "broker registered");
                self.step(ControllerInput::Message { from, message }).await
            }
            Message::BrokerHeartbeat { broker } if self.speaks_for(conn, from, *broker) => {
                let broker = *broker;
                // A live broker's heartbeat only refreshes its session, which is not worth a
                // store write: a new controller gives every live broker a fresh session anyway.
                let effects = self.step_in_place(ControllerInput::Message { from, message });
                if effects.is_empty() {
                    if let Some((_, link)) = self.brokers.get(&broker) {
                        link.send(Frame::HeartbeatAck);
                    }
                    return Ok(());
                }
                // Asking a broker to register again is a decision: the role is confirmed first.
                self.commit(self.meta.clone(), effects).await
            }
            Message::AlterPartition(req) if self.speaks_for(conn, from, req.leader) => {
                self.step(ControllerInput::Message { from, message }).await
            }
            other => {
                debug!(conn, %from, kind = other.kind(), "ignoring message");
                Ok(())
            }
        }
    }

    async fn on_request(&mut self, conn: u64, request: Request) -> Result<Response, RequestError> {
        let mut next = self.meta.clone();
        match request {
            Request::ControlledShutdown { broker } => {
                if !self.speaks_for(conn, Node::Broker(broker), broker) {
                    return Err(RequestError::Refused(AdminError::NotYours(format!(
                        "controlled shutdown of {broker}"
                    ))));
                }
                info!(%broker, "controlled shutdown");
                self.step(ControllerInput::ControlledShutdown(broker))
                    .await?;
                Ok(Response::Done)
            }
            Request::Metadata => Ok(Response::Metadata(self.view())),
            Request::CreateTopic(spec) => {
                let effects = next.create_topic(&self.cfg, &spec)?;
                self.commit(next, effects).await?;
                info!(topic = %spec.name, partitions = spec.partitions, "topic created");
                Ok(Response::Done)
            }
            Request::DeleteTopic(topic) => {
                next.delete_topic(&topic)?;
                self.commit(next, Vec::new()).await?;
                info!(%topic, "topic deleted");
                Ok(Response::Done)
            }
            Request::CreatePartitions { topic, total } => {
                let effects = next.create_partitions(&topic, total)?;
                self.commit(next, effects).await?;
                info!(%topic, total, "partitions added");
                Ok(Response::Done)
            }
            Request::AlterConfigs {
                resource,
                ops,
                replace,
            } => {
                let effects = next.alter_configs(&self.cfg, &resource, &ops, replace)?;
                self.commit(next, effects).await?;
                info!(?resource, ?ops, replace, "configs changed");
                Ok(Response::Done)
            }
            Request::CommitOffset {
                group,
                topic,
                partition,
                offset,
                metadata,
            } => {
                next.commit_offset(&group, &topic, partition, offset, metadata)?;
                self.commit(next, Vec::new()).await?;
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
                self.meta.offset_groups().into_iter().collect(),
            )),
            Request::DeleteOffsets { group, partitions } => {
                next.delete_offsets(&group, partitions.as_deref());
                self.commit(next, Vec::new()).await?;
                Ok(Response::Done)
            }
            Request::AllocateProducerId => {
                let id = next.next_producer_id;
                next.next_producer_id += 1;
                self.commit(next, Vec::new()).await?;
                Ok(Response::ProducerId(id))
            }
            Request::Replicas => Err(AdminError::Unsupported("Replicas".into()).into()),
            Request::Security(change) => {
                let answer = next.security.apply(change);
                self.commit(next, Vec::new()).await?;
                info!("users or ACLs changed");
                Ok(Response::Security(answer))
            }
        }
    }
}

/// Why a request was not answered with data.
enum RequestError {
    Step(StepError),
    Refused(AdminError),
}

impl From<StepError> for RequestError {
    fn from(e: StepError) -> Self {
        RequestError::Step(e)
    }
}

impl From<AdminError> for RequestError {
    fn from(e: AdminError) -> Self {
        RequestError::Refused(e)
    }
}
