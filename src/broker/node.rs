//! A broker as one node: its session and its replicas behind one `step` and one
//! `next_timeout`, as every other node of the core is.

#[cfg(test)]
#[path = "node_tests.rs"]
mod tests;

use super::replicas::Replicas;
use super::session::{Effect as SessionEffect, Input as SessionInput, Session};
use crate::config::Config;
use crate::log::Log;
use crate::message::Effect as ReplicaEffect;
use crate::replica::Input as ReplicaInput;
use crate::types::{BrokerId, PartitionId, Tick};
use serde::{Deserialize, Serialize};

/// One input to a broker: what happened to its session, or to one of its replicas, or that
/// time passed.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BrokerInput<R> {
    /// Something happened to the session with the controller (it opened, the controller
    /// answered, a controlled shutdown began, ...).
    Session(SessionInput),
    /// Something happened to the replica of `partition`: a message about the partition, a
    /// producer's write, a consumer's read, a completed flush, a stop, ... Nothing happens if
    /// the broker does not host the partition: the driver hosts a partition first
    /// ([`Replicas::insert`]), since only it has a log to give the replica.
    Replica {
        /// The partition whose replica it is for.
        partition: PartitionId,
        /// What happened to it.
        input: ReplicaInput<R>,
    },
    /// Time passed: the session's timers and those of every replica that are due by `now`
    /// fire, and no replica without a timer due is stepped.
    Tick,
}

/// What a broker asks its driver to do, in order: its session's effects and its replicas'.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BrokerEffect<R> {
    /// What the session asks: a registration or heartbeat to send, or a session given up.
    Session(SessionEffect<R>),
    /// What a replica asks: a message to send, a producer or consumer to answer, a flush, a
    /// checkpoint, ... Each names its partition (a [`ReplicaEffect::Send`] in its message).
    Replica(ReplicaEffect<R>),
}

/// One broker: its session with the controller and the replicas it hosts, with their timers,
/// stepped through one entry point, so that a simple driver runs a broker with one loop.
///
/// A driver that runs the two halves on different threads takes them apart with
/// [`Broker::into_parts`] and steps each on its own ([`Session::step`], [`Replicas::step`] and
/// [`Replicas::due`]). The runtime does: its session stays on its network thread and its
/// replicas have a thread of their own, because a heartbeat must never queue behind replica
/// steps. At 100,000 partitions one LeaderAndIsr batch from the controller is about a second
/// of replica steps, and heartbeats held behind it reach the controller late enough for it to
/// fence a broker that is running — which moves every leadership the broker had, and brings
/// another batch when it registers again.
///
/// The driver loop: step what arrives, carry out the effects in order (flushing when asked,
/// then stepping `Flushed`), sleep until [`Broker::next_timeout`] or until something arrives,
/// and step [`BrokerInput::Tick`]. Here one broker leads a partition alone and writes a record
/// with acks=all, while its session heartbeats (the controller's side is played by hand):
///
/// ```
/// use isr::broker::{Effect as SessionEffect, Input as SessionInput};
/// use isr::*;
/// use std::collections::{BTreeSet, VecDeque};
///
/// let cfg = Config { min_insync_replicas: 1, ..Config::default() };
/// let (me, partition) = (BrokerId(1), PartitionId(0));
/// let mut broker: Broker<MemLog<String>> = Broker::new(me, true);
/// broker.replicas_mut().insert(&cfg, Replica::new(me, partition, MemLog::new()), ());
/// // The controller's order: lead the partition alone.
/// let state = PartitionState {
///     leader: Some(me),
///     isr: [me].into(),
///     min_insync_replicas: 1,
///     assigned: vec![me],
///     leader_epoch: LeaderEpoch(1),
///     elr: Default::default(),
///     partition_epoch: PartitionEpoch(1),
/// };
/// let order = Message::LeaderAndIsr(LeaderAndIsr {
///     partition, state, broker_epoch: BrokerEpoch(1), controller_epoch: ControllerEpoch(1),
/// });
/// let replica = |input| BrokerInput::Replica { partition, input };
/// let write = ReplicaInput::Write { id: 7, records: vec!["a".into()], acks: Acks::All, producer: None };
/// let mut inputs = VecDeque::from([
///     BrokerInput::Session(SessionInput::SessionOpened),
///     replica(ReplicaInput::Message { from: Node::Controller, message: order }),
///     replica(write),
/// ]);
/// let (mut now, mut heartbeats, mut acked) = (Tick(0), 0, Vec::new());
/// while now <= Tick(20) {
///     while let Some(input) = inputs.pop_front() {
///         let mut flush = BTreeSet::new();
///         for effect in broker.step(&cfg, now, input) {
///             match effect {
///                 // To the controller, which answers at once here.
///                 BrokerEffect::Session(SessionEffect::Send(envelope)) => {
///                     let answer = match envelope.message {
///                         Message::BrokerHeartbeat { .. } => { heartbeats += 1; SessionInput::HeartbeatAnswered }
///                         _ => SessionInput::RegistrationAnswered,
///                     };
///                     inputs.push_back(BrokerInput::Session(answer));
///                 }
///                 BrokerEffect::Session(SessionEffect::SessionLost) => {
///                     inputs.push_back(BrokerInput::Session(SessionInput::SessionOpened))
///                 }
///                 BrokerEffect::Replica(Effect::Send(_)) => {} // to a peer: none here
///                 BrokerEffect::Replica(Effect::Acknowledge { id, .. }) => acked.push(id),
///                 BrokerEffect::Replica(Effect::Flush { partition, .. }) => { flush.insert(partition); }
///                 BrokerEffect::Replica(_) => {} // checkpoints, HW moves: nothing in memory
///             }
///         }
///         // One flush per log that asked, through `update` (it may start a timer), then the
///         // replica learns how far its log is durable.
///         for partition in flush {
///             let durable = broker.replicas_mut().update(&cfg, partition, |replica, ()| {
///                 replica.log_mut().flush();
///                 replica.log().flushed_offset()
///             });
///             inputs.extend(durable.map(|offset| replica(ReplicaInput::Flushed(offset))));
///         }
///     }
///     // Sleep until the next timer (a real driver also wakes for what arrives), then tick.
///     now = broker.next_timeout(&cfg).expect("an open session heartbeats");
///     inputs.push_back(BrokerInput::Tick);
/// }
/// assert_eq!(acked, [7]);
/// assert_eq!(heartbeats, 1 + 20 / cfg.heartbeat_interval.0); // at 0, 4, 8, 12, 16 and 20
/// assert!(broker.session().is_open());
/// ```
#[derive(Clone, Debug)]
pub struct Broker<L: Log, X = ()> {
    session: Session,
    replicas: Replicas<L, X>,
}

impl<L: Log, X> Broker<L, X> {
    /// A broker process that starts, hosting nothing yet, and whether its last run stopped
    /// cleanly ([`Session::new`]); its recovered replicas go in with
    /// [`Replicas::insert`] (through [`Broker::replicas_mut`]).
    pub fn new(broker: BrokerId, clean_shutdown: bool) -> Self {
        Broker::from_parts(Session::new(broker, clean_shutdown), Replicas::new())
    }

    /// A broker of this session and these replicas: the two halves put back together.
    pub fn from_parts(session: Session, replicas: Replicas<L, X>) -> Self {
        Broker { session, replicas }
    }

    /// The session and the replicas, apart, for a driver that runs them on different threads
    /// (see the type's documentation for why the runtime does).
    pub fn into_parts(self) -> (Session, Replicas<L, X>) {
        (self.session, self.replicas)
    }

    /// The session with the controller, to read.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The hosted replicas, to read.
    pub fn replicas(&self) -> &Replicas<L, X> {
        &self.replicas
    }

    /// The hosted replicas, to host or remove one, or to change one outside a step
    /// ([`Replicas::update`]): every change reschedules what it touches.
    pub fn replicas_mut(&mut self) -> &mut Replicas<L, X> {
        &mut self.replicas
    }

    /// Takes one input, which happened at `now`; the effects, in the order to carry them out.
    /// On a tick, the session's come first (a heartbeat goes before replica work), then each
    /// due replica's, earliest deadline first.
    pub fn step(
        &mut self,
        cfg: &Config,
        now: Tick,
        input: BrokerInput<L::Record>,
    ) -> Vec<BrokerEffect<L::Record>> {
        match input {
            BrokerInput::Session(input) => self.session_step(cfg, now, input),
            BrokerInput::Replica { partition, input } => self
                .replicas
                .step(cfg, now, partition, input)
                .unwrap_or_default()
                .into_iter()
                .map(BrokerEffect::Replica)
                .collect(),
            BrokerInput::Tick => {
                let mut effects = self.session_step(cfg, now, SessionInput::Tick);
                for (_, replica) in self.replicas.tick(cfg, now) {
                    effects.extend(replica.into_iter().map(BrokerEffect::Replica));
                }
                effects
            }
        }
    }

    /// When the broker must be ticked next: the earlier of its session's next timer and its
    /// replicas' ([`Session::next_timeout`], [`Replicas::next_timeout`]); `None` while neither
    /// has one.
    pub fn next_timeout(&self, cfg: &Config) -> Option<Tick> {
        let session = self.session.next_timeout(cfg);
        let replicas = self.replicas.next_timeout();
        session.into_iter().chain(replicas).min()
    }

    fn session_step(
        &mut self,
        cfg: &Config,
        now: Tick,
        input: SessionInput,
    ) -> Vec<BrokerEffect<L::Record>> {
        self.session
            .step(cfg, now, input)
            .into_iter()
            .map(BrokerEffect::Session)
            .collect()
    }
}
