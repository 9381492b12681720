//! A broker as a node of the core: its session with the controller and the replicas it hosts,
//! with their timers.
//!
//! Every other node of the protocol is one value with `step` and `next_timeout`. A broker is
//! many: one session ([`Session`]) and one replica per partition it hosts ([`crate::Replica`]),
//! each with timers of its own. Which of them a tick must step, and when the broker must wake
//! next, is timer logic, so it is decided here, once, rather than by every driver: [`Replicas`]
//! keeps a broker's replicas with a deadline queue that steps only the replicas whose timers
//! are due (a broker may host 100,000 partitions, nearly all idle), and [`Broker`] steps the
//! session and the replicas as one node, for a driver with one loop. A driver that runs the
//! two on different threads (the runtime does, so that heartbeats never wait behind replica
//! steps) takes them apart with [`Broker::into_parts`].
//!
//! - `session.rs`: [`Session`], registration, heartbeats, controlled shutdown;
//! - `replicas.rs`: [`Replicas`], the hosted replicas and their deadline queue;
//! - `node.rs`: [`Broker`], the two as one node.

mod node;
mod replicas;
mod session;

pub use node::{Broker, BrokerEffect, BrokerInput};
pub use replicas::Replicas;
pub use session::{Effect, Input, Session};
