//! The active controller: the core [`isr::Controller`] driven by connections and a clock, each
//! step committed to the store before anything it decided leaves.
//!
//! A step changes the metadata in place and yields its records ([`super::records::Change`]):
//! the new values of what it changed, never the whole metadata. The records are committed
//! (written if there are any, else only the role confirmed), and only then do the step's
//! messages go out and the records go to every broker as a delta, stamped with this session's
//! metadata offset. If the store refuses the step (the role was lost: rule 11) the controller
//! stops acting; if the store is unreachable the step is undone, as if it never ran, and
//! whoever asked gets an error: a decision no later controller could know of must not leave.

use super::connections::{Event, Inbox};
use super::isr_changes::IsrChanges;
use super::metadata::Metadata;
use super::records::{Change, Record};
use super::store::{Store, StoreError, Won};
use crate::timing;
use crate::trace::Tracer;
use crate::wire::admin::{AdminError, ClusterView, ControllerInfo, Request, Response};
use crate::wire::link::Link;
use crate::wire::{BrokerAddress, Frame, Peer};
use bytes::Bytes;
use isr::{
    BrokerId, Config, ControllerEffect as Effect, ControllerEffects as Effects, ControllerInput,
    Envelope, Message, MetadataRecord, Node, Rules, Tick,
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
    /// Brokers' heartbeat connections ([`Peer::Heartbeats`]), by connection.
    heartbeaters: BTreeMap<u64, BrokerId>,
    /// Every open connection, for answering requests.
    links: &'a mut BTreeMap<u64, Link>,
    /// The metadata offset of this controller's session: how many changes it has sent brokers
    /// since it took office. A broker's full view carries the offset it is at; each delta, the
    /// offset it brings the broker to.
    offset: u64,
    /// Where committed steps are recorded, when tracing.
    tracer: &'a mut Option<Tracer>,
    /// What is being committed, for the trace.
    stepped: Option<Committing>,
    /// The AlterPartition answers of the current log window.
    isr_changes: IsrChanges,
}

/// What a commit records in the trace, besides an admin operation's change of state.
enum Committing {
    /// A step with this input.
    Step(ControllerInput<Bytes>),
    /// The state on taking office.
    TakeOver,
    /// Several steps committed together, each with its input and its effects.
    Steps(Vec<(ControllerInput<Bytes>, Effects<Bytes>)>),
}

/// At most this many AlterPartition requests are decided in one change (one store write, one
/// delta per broker).
const MAX_BATCH: usize = 1000;

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
    inbox: &mut Inbox,
    links: &mut BTreeMap<u64, Link>,
    stop: &mut watch::Receiver<bool>,
    tracer: &mut Option<Tracer>,
) -> Ended {
    let mut lost = store.lost_signal();
    let mut stored = won.metadata.unwrap_or_default();
    stored.begin();
    let announce = stored.controller.take_office(won.epoch, Tick(0));
    let taken = stored.finish(announce);
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
        heartbeaters: BTreeMap::new(),
        links,
        offset: 0,
        tracer,
        stepped: None,
        isr_changes: IsrChanges::default(),
    };
    info!(epoch = %won.epoch, topics = active.meta.topics.len(), "taking over");
    active.stepped = Some(Committing::TakeOver);
    if let Err(e) = active.commit(taken).await {
        return active.end(e);
    }
    let mut ticks = tokio::time::interval(timing::TICK);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // An event taken from the queue while gathering a batch, which ends the batch.
    let mut pending: Option<Event> = None;
    loop {
        // Sessions first (KRaft orders its event queue the same way): a broker's heartbeat or
        // registration is never kept waiting behind metadata work, nor a tick that would expire
        // its session while its heartbeat waits; then time; then everything else.
        let input = tokio::select! {
            biased;
            _ = lost.wait_for(|&lost| lost) => Input::Lost,
            _ = stop.wait_for(|&stop| stop) => Input::Stop,
            Some(event) = inbox.sessions.recv() => Input::Event(Box::new(event)),
            _ = ticks.tick() => Input::Tick,
            Some(event) = next(&mut pending, &mut inbox.others) => Input::Event(Box::new(event)),
        };
        let started = std::time::Instant::now();
        let what = input.describe();
        let step = match input {
            // AlterPartition requests queue up when many leaders change their ISR at once (a
            // broker slow to start, or gone): decided together, they are one store write and
            // one delta per broker instead of one each.
            Input::Event(event) if alter_partition(&event).is_some() => {
                let mut batch = vec![*event];
                while batch.len() < MAX_BATCH {
                    match inbox.others.try_recv() {
                        Ok(event) if alter_partition(&event).is_some() => batch.push(event),
                        Ok(event) => {
                            pending = Some(event);
                            break;
                        }
                        Err(_) => break,
                    }
                }
                active.on_alter_partitions(batch).await
            }
            Input::Lost => Err(StepError::Lost),
            Input::Stop => {
                active.store.resign().await;
                active.tell_brokers_it_is_over();
                return Ended::Stopped;
            }
            Input::Tick => active.on_tick().await,
            Input::Event(event) => active.on_event(*event).await,
        };
        // Nothing else is answered meanwhile, heartbeats included: a step this long is what
        // brokers see as a controller that answers no heartbeat.
        let took = started.elapsed();
        if took >= timing::SESSION / 4 {
            warn!(took_ms = took.as_millis() as u64, step = %what, "a slow controller step");
        }
        if let Err(StepError::Lost) = step {
            return active.end(StepError::Lost);
        }
    }
}

/// The event a batch left over, or else the next one queued.
async fn next(
    pending: &mut Option<Event>,
    others: &mut mpsc::UnboundedReceiver<Event>,
) -> Option<Event> {
    match pending.take() {
        Some(event) => Some(event),
        None => others.recv().await,
    }
}

/// The connection, sender and message of an event that is an AlterPartition request.
fn alter_partition(event: &Event) -> Option<(u64, Node, &Message<Bytes>)> {
    match event {
        Event::Frame {
            conn,
            frame: Frame::Envelope(envelope),
        } if matches!(envelope.message, Message::AlterPartition(_)) => {
            Some((*conn, envelope.from, &envelope.message))
        }
        _ => None,
    }
}

/// What wakes the active controller. An event is boxed: a frame can carry a whole cluster
/// view, and the other inputs carry nothing.
enum Input {
    Lost,
    Stop,
    Tick,
    Event(Box<Event>),
}

impl Input {
    /// What it is, for a log line.
    fn describe(&self) -> &'static str {
        match self {
            Input::Lost => "role lost",
            Input::Stop => "stop",
            Input::Tick => "tick",
            Input::Event(event) => match &**event {
                Event::Connected { .. } => "connection opened",
                Event::Closed { .. } => "connection closed",
                Event::Frame { frame, .. } => match frame {
                    Frame::Envelope(e) => e.message.kind(),
                    Frame::Request { .. } => "admin request",
                    _ => "frame",
                },
            },
        }
    }
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

    /// Commits `change`'s records (or confirms the role when it has none), then carries out its
    /// effects and sends brokers its records. A change the store could not take is undone.
    async fn commit(&mut self, change: Change) -> Result<(), StepError> {
        let stepped = self.stepped.take();
        match self.store.commit(&change.records, &self.meta).await {
            Ok(()) => {}
            // The metadata in memory is ahead of the store now; it is read again from the store
            // if this controller ever wins the role back.
            Err(StoreError::Fenced(_)) => return Err(StepError::Lost),
            Err(e) => {
                warn!(error = %e, "step dropped: it could not be committed");
                self.meta.undo(change);
                return Err(StepError::Unavailable(e.to_string()));
            }
        }
        if let Some(tracer) = self.tracer.as_mut() {
            let core_changed = change.records.iter().any(|r| matches!(r, Record::Core(_)));
            match &stepped {
                Some(Committing::Step(input)) => {
                    tracer.controller(self.now, input, &change.effects)
                }
                Some(Committing::TakeOver) => {
                    tracer.controller_state(&self.meta.controller, &change.effects)
                }
                Some(Committing::Steps(steps)) => {
                    for (input, effects) in steps {
                        tracer.controller(self.now, input, effects);
                    }
                }
                // An admin operation; a step in place was recorded when taken.
                None if core_changed => {
                    tracer.controller_state(&self.meta.controller, &change.effects)
                }
                None => {}
            }
        }
        self.send(change.effects);
        self.push_records(change.records);
        Ok(())
    }

    /// Carries out a committed step's effects. Its messages go to each broker as one frame
    /// ([`Frame::batches`]): fencing a broker that led 30,000 partitions is one LeaderAndIsr
    /// frame to each survivor, not 30,000 (Kafka's one LeaderAndIsr request per broker).
    fn send(&self, effects: Effects<Bytes>) {
        let mut orders: BTreeMap<BrokerId, Vec<Envelope<Bytes>>> = BTreeMap::new();
        for effect in effects {
            match effect {
                Effect::Send(envelope) => match envelope.to {
                    Node::Broker(b) => orders.entry(b).or_default().push(envelope),
                    Node::Controller => {}
                },
                // A fenced broker heartbeated: it must register again, as a new incarnation.
                // What the step told it before goes first.
                Effect::MustRegister { broker } => {
                    info!(%broker, "heartbeat from a fenced broker: asking it to register");
                    self.send_orders(broker, orders.remove(&broker).unwrap_or_default());
                    if let Some((_, link)) = self.brokers.get(&broker) {
                        link.send(Frame::Reregister);
                    }
                }
            }
        }
        for (broker, envelopes) in orders {
            self.send_orders(broker, envelopes);
        }
    }

    fn send_orders(&self, broker: BrokerId, envelopes: Vec<Envelope<Bytes>>) {
        if envelopes.is_empty() {
            return;
        }
        match self.brokers.get(&broker) {
            Some((_, link)) => link.send_envelopes(envelopes),
            // It learns the current state when it opens its next session.
            None => debug!(%broker, "not connected; messages dropped"),
        }
    }

    fn view(&self) -> ClusterView {
        let mut view = self.meta.view(Some(self.me.clone()));
        view.offset = self.offset;
        view
    }

    /// Sends every broker the records of a committed change that a broker's view holds: one
    /// delta per change, whatever it touched. Producer ids stay here.
    fn push_records(&mut self, records: Vec<Record>) {
        let delta: Vec<Record> = records
            .into_iter()
            .filter(|r| !matches!(r, Record::NextProducerId(_)))
            .collect();
        if delta.is_empty() {
            return;
        }
        self.offset += 1;
        for (_, link) in self.brokers.values() {
            link.send(Frame::MetadataDelta {
                offset: self.offset,
                records: delta.clone(),
            });
        }
    }

    /// Steps the core controller and commits what it changed.
    async fn step(&mut self, input: ControllerInput<Bytes>) -> Result<(), StepError> {
        if self.tracer.is_some() {
            self.stepped = Some(Committing::Step(input.clone()));
        }
        self.meta.begin();
        let effects = self.meta.controller.step(&self.cfg, self.now, input);
        let change = self.meta.finish(effects);
        self.commit(change).await
    }

    /// Confirms the role, then carries out `effects`: a decision that changed nothing durable.
    async fn confirm(&mut self, effects: Effects<Bytes>) -> Result<(), StepError> {
        self.meta.begin();
        let change = self.meta.finish(effects);
        self.commit(change).await
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
        self.isr_changes.log_if_due();
        self.meta.begin();
        let effects = self
            .meta
            .controller
            .step(&self.cfg, self.now, ControllerInput::Tick);
        let change = self.meta.finish(effects);
        if change.records.is_empty() && change.effects.is_empty() {
            return Ok(());
        }
        // A tick changes a broker only to fence it: its session expired.
        for record in &change.records {
            if let Record::Core(MetadataRecord::Broker {
                id,
                state: Some(state),
            }) = record
            {
                if !state.alive {
                    warn!(broker = %id, last_heartbeat = %state.last_heartbeat, now = %self.now,
                        "session expired: broker fenced");
                }
            }
        }
        if self.tracer.is_some() {
            self.stepped = Some(Committing::Step(ControllerInput::Tick));
        }
        self.commit(change).await
    }

    async fn on_event(&mut self, event: Event) -> Result<(), StepError> {
        match event {
            Event::Connected { conn, closed, .. } if closed.is_set() => {
                debug!(conn, "connection closed before it was served");
                Ok(())
            }
            Event::Connected {
                conn, peer, link, ..
            } => {
                self.links.insert(conn, link.clone());
                match peer {
                    Peer::Broker { id, address } => {
                        self.on_broker_session(conn, id, address, link).await
                    }
                    Peer::Heartbeats { id } => {
                        self.heartbeaters.insert(conn, id);
                        Ok(())
                    }
                    Peer::Client => Ok(()),
                }
            }
            Event::Frame { conn, frame } => self.on_frame(conn, frame).await,
            Event::Closed { conn } => {
                self.links.remove(&conn);
                self.heartbeaters.remove(&conn);
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
        self.meta.begin();
        self.meta.set(Record::Address {
            broker: id,
            address: Some(address),
        });
        let change = self.meta.finish(Vec::new());
        self.commit(change).await?;
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

    /// Whether a heartbeat on `conn` is `broker`'s: sent on its session's connection or its
    /// heartbeat connection, while its session is open.
    fn heartbeats_for(&self, conn: u64, from: Node, broker: BrokerId) -> bool {
        self.speaks_for(conn, from, broker)
            || (from == Node::Broker(broker)
                && self.brokers.contains_key(&broker)
                && self.heartbeaters.get(&conn) == Some(&broker))
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
                let broker = *broker;
                let stepped = self.step(ControllerInput::Message { from, message }).await;
                // Taken or not (the store may have refused it), the registration is dealt
                // with: a Reregister after this one is an answer to a later heartbeat.
                if let Some((_, link)) = self.brokers.get(&broker) {
                    link.send(Frame::Registered);
                }
                stepped
            }
            Message::BrokerHeartbeat { broker } if self.heartbeats_for(conn, from, *broker) => {
                // A live broker's heartbeat only refreshes its session, which is not worth a
                // store write: a new controller gives every live broker a fresh session anyway.
                // (Its connection has answered it already: `connections::serve`.)
                let effects = self.step_in_place(ControllerInput::Message { from, message });
                if effects.is_empty() {
                    return Ok(());
                }
                // Asking a broker to register again is a decision: the role is confirmed first.
                self.confirm(effects).await
            }
            // AlterPartition requests are decided in batches: `on_alter_partitions`.
            other => {
                debug!(conn, %from, kind = other.kind(), "ignoring message");
                Ok(())
            }
        }
    }

    /// Decides AlterPartition requests in one change, each as its own step (from a leader that
    /// speaks for itself), and commits them together.
    async fn on_alter_partitions(&mut self, batch: Vec<Event>) -> Result<(), StepError> {
        self.meta.begin();
        let mut effects = Vec::new();
        let mut traced = self.tracer.is_some().then(Vec::new);
        for event in &batch {
            let Some((conn, from, message)) = alter_partition(event) else {
                continue;
            };
            let Message::AlterPartition(req) = message else {
                continue;
            };
            if !self.speaks_for(conn, from, req.leader) {
                debug!(conn, %from, "ignoring an AlterPartition not from its leader");
                continue;
            }
            let input = ControllerInput::Message {
                from,
                message: message.clone(),
            };
            let (cfg, now) = (&self.cfg, self.now);
            match traced.as_mut() {
                Some(traced) => {
                    let stepped = self.meta.controller.step(cfg, now, input.clone());
                    effects.extend(stepped.iter().cloned());
                    traced.push((input, stepped));
                }
                None => effects.extend(self.meta.controller.step(cfg, now, input)),
            }
        }
        self.isr_changes.count(&effects);
        let change = self.meta.finish(effects);
        self.stepped = traced.map(Committing::Steps);
        self.commit(change).await
    }

    /// Answers a request. One that changes the metadata is one change: committed whole, or,
    /// refused, undone whole.
    async fn on_request(&mut self, conn: u64, request: Request) -> Result<Response, RequestError> {
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
            Request::Replicas => Err(AdminError::Unsupported("Replicas".into()).into()),
            Request::MetadataOffset => Ok(Response::MetadataOffset {
                offset: self.offset,
                stale_deltas: 0,
            }),
            change => {
                self.meta.begin();
                match self.change(change) {
                    Ok((response, effects)) => {
                        let change = self.meta.finish(effects);
                        self.commit(change).await?;
                        Ok(response)
                    }
                    Err(e) => {
                        let change = self.meta.finish(Vec::new());
                        self.meta.undo(change);
                        Err(e.into())
                    }
                }
            }
        }
    }

    /// Makes the change a request asks for, in the metadata (a change is under way): the answer
    /// and the effects to carry out once it is committed.
    fn change(&mut self, request: Request) -> Result<(Response, Effects<Bytes>), AdminError> {
        let done = |effects| Ok((Response::Done, effects));
        match request {
            Request::CreateTopic(spec) => {
                let effects = self.meta.create_topic(&self.cfg, &spec)?;
                info!(topic = %spec.name, partitions = spec.partitions, "topic created");
                done(effects)
            }
            Request::DeleteTopic(topic) => {
                self.meta.delete_topic(&topic)?;
                info!(%topic, "topic deleted");
                done(Vec::new())
            }
            Request::CreatePartitions {
                topic,
                total,
                assignment,
            } => {
                let effects = self.meta.create_partitions(&topic, total, &assignment)?;
                info!(%topic, total, "partitions added");
                done(effects)
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
                done(effects)
            }
            Request::AllocateProducerId => {
                let id = self.meta.next_producer_id;
                self.meta.set(Record::NextProducerId(id + 1));
                Ok((Response::ProducerId(id), Vec::new()))
            }
            Request::Security(change) => {
                let mut security = self.meta.security.clone();
                let answer = security.apply(change);
                self.meta.set(Record::Security(security));
                info!("users or ACLs changed");
                Ok((Response::Security(answer), Vec::new()))
            }
            other => Err(AdminError::Unsupported(format!("{other:?}"))),
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
