//! A broker's session with the controller: registration with how the last run ended,
//! heartbeats, registering again once fenced, and the controlled shutdown that stops both.
//!
//! The session is what makes a broker part of the cluster: the controller counts a broker alive
//! while its heartbeats arrive within `session_timeout` (rule 12, its side in
//! [`crate::Controller`]), fences it otherwise, and answers a fenced incarnation's heartbeat
//! with [`crate::ControllerEffect::MustRegister`]. This node is the broker's side, as a pure state
//! machine like the others: the driver says when a session with the active controller opened
//! or closed and what the controller answered, passes time in, and carries out the
//! [`Effect`]s. It decides what a driver would otherwise decide ad hoc, and what the model
//! checks through it (the sim registers brokers through this node):
//! - the first registration of an incarnation says whether its last run stopped cleanly
//!   (KIP-966: a broker that crashed may have lost what it had not flushed), and every later one
//!   says clean, since the process, and its page cache, lived on;
//! - a MustRegister that answers a heartbeat sent before this broker's registration was dealt
//!   with is stale, and ignored: obeying each one would register the broker once per heartbeat
//!   in flight, and every registration is a step over all its partitions;
//! - a controller that answers no heartbeat for a whole session is given up, so the driver looks
//!   for the active one;
//! - once a controlled shutdown began, the broker neither heartbeats nor registers, since either
//!   would have the controller take it back before it stops.
//!
//! Its replicas are stepped on their own ([`super::Replicas`], or together with the session in
//! a [`super::Broker`]); the registration's outcome reaches them as the controller's
//! LeaderAndIsr.

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;

use crate::config::Config;
use crate::message::{Envelope, Message};
use crate::types::{BrokerId, Node, Tick};
use serde::{Deserialize, Serialize};

/// What happened to a broker's session, as its driver saw it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Input {
    /// A session with the active controller opened (the driver found it and was welcomed).
    SessionOpened,
    /// The session ended: its connection closed, or the controller said it is no longer the
    /// active one.
    SessionClosed,
    /// The controller answered a heartbeat: it is there.
    HeartbeatAnswered,
    /// The controller dealt with this broker's registration, whether its store took it or not
    /// (if not, the broker is still fenced and the next heartbeat says so).
    RegistrationAnswered,
    /// The controller answered a heartbeat with [`crate::ControllerEffect::MustRegister`]: it has fenced
    /// this broker.
    MustRegister,
    /// Time passed: timers due at or before `now` fire.
    Tick,
    /// A controlled shutdown began: from now on the broker neither heartbeats nor registers.
    ControlledShutdown,
}

/// What the session asks its driver to do.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Effect<R> {
    /// Send this to the controller: a registration on the session, or a heartbeat (which a
    /// driver may carry on a connection of its own, so that nothing queues in front of it).
    Send(Envelope<R>),
    /// The controller answered no heartbeat for a whole session: give this session up and look
    /// for the active controller (then step [`Input::SessionOpened`]).
    SessionLost,
}

/// The session's state while it is open.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct Open {
    /// A registration was sent on this session and is not answered yet: a MustRegister before
    /// its answer is stale.
    registering: bool,
    /// When the next heartbeat is due.
    next_heartbeat: Tick,
    /// When the controller last answered (or the session opened).
    answered: Tick,
}

/// One broker's side of its session with the controller.
///
/// ```
/// use isr::broker::{Effect, Input, Session};
/// use isr::{BrokerId, Config, Message, Tick};
///
/// let cfg = Config::default();
/// // This incarnation's last run crashed: its first registration says so.
/// let mut session = Session::new(BrokerId(1), false);
/// let opened: Vec<Effect<()>> = session.step(&cfg, Tick(0), Input::SessionOpened);
/// assert!(matches!(&opened[..], [Effect::Send(e)]
///     if e.message == Message::BrokerRegistration { broker: BrokerId(1), clean_shutdown: false }));
/// // Heartbeats are due at once and then every `heartbeat_interval`.
/// assert_eq!(session.next_timeout(&cfg), Some(Tick(0)));
/// let beat: Vec<Effect<()>> = session.step(&cfg, Tick(0), Input::Tick);
/// assert!(matches!(&beat[..], [Effect::Send(e)] if e.message == Message::BrokerHeartbeat { broker: BrokerId(1) }));
/// assert_eq!(session.next_timeout(&cfg), Some(cfg.heartbeat_interval));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Session {
    broker: BrokerId,
    /// What the next registration says: how the last run ended for this incarnation's first,
    /// clean for every later one.
    clean_shutdown: bool,
    /// Whether this incarnation registered (on any session): a later session resumes with
    /// heartbeats, the controller still knowing the incarnation unless it fenced it.
    registered: bool,
    open: Option<Open>,
    stopping: bool,
}

impl Session {
    /// A broker process that starts, and whether its last run stopped cleanly (a driver keeps
    /// that durably: a marker written by a clean shutdown and removed at start).
    pub fn new(broker: BrokerId, clean_shutdown: bool) -> Self {
        Session {
            broker,
            clean_shutdown,
            registered: false,
            open: None,
            stopping: false,
        }
    }

    /// The broker this is the session of.
    pub fn broker(&self) -> BrokerId {
        self.broker
    }

    /// Whether a session with the active controller is open.
    pub fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// Whether a controlled shutdown began.
    pub fn is_stopping(&self) -> bool {
        self.stopping
    }

    /// Takes one input, which happened at `now`; the effects, in order.
    pub fn step<R>(&mut self, cfg: &Config, now: Tick, input: Input) -> Vec<Effect<R>> {
        match input {
            Input::SessionOpened => {
                let registering = !self.registered && !self.stopping;
                self.open = Some(Open {
                    registering,
                    next_heartbeat: now,
                    answered: now,
                });
                if registering {
                    self.register()
                } else {
                    Vec::new()
                }
            }
            Input::SessionClosed => {
                self.open = None;
                Vec::new()
            }
            Input::HeartbeatAnswered => {
                if let Some(open) = &mut self.open {
                    open.answered = now;
                }
                Vec::new()
            }
            Input::RegistrationAnswered => {
                if let Some(open) = &mut self.open {
                    open.registering = false;
                    open.answered = now;
                }
                Vec::new()
            }
            Input::MustRegister => match &mut self.open {
                Some(open) if !open.registering && !self.stopping => {
                    open.registering = true;
                    self.register()
                }
                _ => Vec::new(),
            },
            Input::Tick => self.on_tick(cfg, now),
            Input::ControlledShutdown => {
                self.stopping = true;
                Vec::new()
            }
        }
    }

    /// When the next timer is due (a heartbeat, or the end of a silent session), if a session
    /// is open: the driver steps [`Input::Tick`] then, or earlier.
    pub fn next_timeout(&self, cfg: &Config) -> Option<Tick> {
        let open = self.open.as_ref()?;
        if self.stopping {
            return None;
        }
        Some(open.next_heartbeat.min(lost_at(cfg, open)))
    }

    fn on_tick<R>(&mut self, cfg: &Config, now: Tick) -> Vec<Effect<R>> {
        let Some(open) = &mut self.open else {
            return Vec::new();
        };
        // While stopping, the controller is asked to fence this broker: a silent controller is
        // no reason to look for another, and no heartbeat goes out.
        if self.stopping {
            return Vec::new();
        }
        if now >= lost_at(cfg, open) {
            self.open = None;
            return vec![Effect::SessionLost];
        }
        if now < open.next_heartbeat {
            return Vec::new();
        }
        // After a stall (a paused process), one heartbeat, not one per interval missed.
        open.next_heartbeat = Tick(now.0 + cfg.heartbeat_interval.0);
        vec![Effect::Send(self.to_controller(Message::BrokerHeartbeat {
            broker: self.broker,
        }))]
    }

    fn register<R>(&mut self) -> Vec<Effect<R>> {
        let message = Message::BrokerRegistration {
            broker: self.broker,
            clean_shutdown: self.clean_shutdown,
        };
        self.registered = true;
        self.clean_shutdown = true;
        vec![Effect::Send(self.to_controller(message))]
    }

    fn to_controller<R>(&self, message: Message<R>) -> Envelope<R> {
        Envelope {
            from: Node::Broker(self.broker),
            to: Node::Controller,
            message,
        }
    }
}

/// When a session whose controller has been silent since `open.answered` is lost: a whole
/// session later, as the controller would have fenced this broker by then anyway.
fn lost_at(cfg: &Config, open: &Open) -> Tick {
    Tick(open.answered.0 + cfg.session_timeout.0)
}
