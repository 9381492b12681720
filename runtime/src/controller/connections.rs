//! The controller's connections: one accept loop, one reader task per connection, all feeding
//! one inbox, so that every transition runs alone — whether this process is active or standing
//! by. The inbox has two lanes: brokers' sessions (a connection's opening, heartbeats and
//! registrations) and everything else. The active controller serves sessions first, so a
//! controller busy with a large change never lets a healthy broker's session expire (a broker
//! fenced for want of an answer would re-register, adding work: a metastable collapse). Within a
//! lane events keep their arrival order; a connection's opening is in the sessions lane, so it
//! is always served before that connection's frames.
//!
//! With a cluster certificate every connection is mutual TLS, and its Hello must match the
//! certificate ([`crate::security::admits`]): only a CA-signed broker registers, heartbeats,
//! sends AlterPartition or hears LeaderAndIsr, and only as the id its certificate names.

use crate::security;
use crate::security::listeners::{self, Accepted};
use crate::timing;
use crate::wire::admin::Response;
use crate::wire::link::{self, Link, Opening};
use crate::wire::{codec, Frame, Peer};
use isr::{Envelope, Message};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, warn};

pub enum Event {
    Connected {
        conn: u64,
        peer: Peer,
        link: Link,
        /// Set once the connection has closed, possibly before this event is served.
        closed: Closed,
    },
    Frame {
        conn: u64,
        frame: Frame,
    },
    Closed {
        conn: u64,
    },
}

/// Whether a connection has closed, as its reader saw it. Opening a broker's session costs the
/// controller work in proportion to the broker's partitions (its metadata, the state of each
/// partition), so the opening of a connection that is already gone is skipped: a broker that
/// gave up waiting for its welcome and dialed again must not queue that work twice.
#[derive(Clone, Debug, Default)]
pub struct Closed(Arc<AtomicBool>);

impl Closed {
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    fn set(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Where the connections' events wait: brokers' sessions, and the rest.
pub struct Inbox {
    pub sessions: mpsc::UnboundedReceiver<Event>,
    pub others: mpsc::UnboundedReceiver<Event>,
}

impl Inbox {
    /// The next event, sessions first.
    pub async fn recv(&mut self) -> Option<Event> {
        tokio::select! {
            biased;
            Some(event) = self.sessions.recv() => Some(event),
            Some(event) = self.others.recv() => Some(event),
            else => None,
        }
    }
}

/// The sending side of an [`Inbox`]: each connection's reader task holds a copy.
#[derive(Clone)]
pub struct Outlet {
    sessions: mpsc::UnboundedSender<Event>,
    others: mpsc::UnboundedSender<Event>,
}

impl Outlet {
    fn send(&self, event: Event) {
        let session = match &event {
            Event::Connected { .. } => true,
            Event::Frame {
                frame: Frame::Envelope(envelope),
                ..
            } => matches!(
                envelope.message,
                Message::BrokerHeartbeat { .. } | Message::BrokerRegistration { .. }
            ),
            _ => false,
        };
        let lane = if session {
            &self.sessions
        } else {
            &self.others
        };
        let _ = lane.send(event);
    }
}

/// A new inbox and its outlet.
pub fn inbox() -> (Outlet, Inbox) {
    let (sessions, sessions_rx) = mpsc::unbounded_channel();
    let (others, others_rx) = mpsc::unbounded_channel();
    (
        Outlet { sessions, others },
        Inbox {
            sessions: sessions_rx,
            others: others_rx,
        },
    )
}

/// Accepts connections; with `tls`, each must complete mutual TLS first.
pub async fn accept_loop(listener: TcpListener, tls: Option<TlsAcceptor>, events: Outlet) {
    let mut next_conn = 0u64;
    loop {
        match listener.accept().await {
            Ok((stream, from)) => {
                next_conn += 1;
                debug!(%from, conn = next_conn, "accepted");
                tokio::spawn(serve(stream, from, tls.clone(), next_conn, events.clone()));
            }
            Err(e) => {
                warn!(error = %e, "accept failed");
                tokio::time::sleep(timing::TICK).await;
            }
        }
    }
}

/// Reads one connection's frames into the event loop until it closes or misbehaves.
async fn serve(
    stream: TcpStream,
    from: SocketAddr,
    tls: Option<TlsAcceptor>,
    conn: u64,
    events: Outlet,
) {
    let secured = tls.is_some();
    let Accepted {
        conn: mut stream,
        role,
    } = match listeners::handshake(tls, stream, from).await {
        Some(accepted) => accepted,
        None => return,
    };
    match link::classify(&mut stream).await {
        Ok(Opening::Internal) => {}
        Ok(Opening::TlsHello) => {
            warn!(conn, %from, "a TLS client reached a controller without TLS");
            return;
        }
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
    let closed = Closed::default();
    let mut introduced = false;
    loop {
        match codec::read(&mut reader).await {
            Ok(Some(Frame::Hello(peer))) if !introduced => {
                if let Err(why) = security::admits(secured, role.as_ref(), &peer) {
                    warn!(conn, %from, ?peer, %why, "refused");
                    break;
                }
                introduced = true;
                let link = match peer {
                    Peer::Client => link.clone().mapped(for_admin_client),
                    Peer::Broker { .. } | Peer::Heartbeats { .. } => link.clone(),
                };
                events.send(Event::Connected {
                    conn,
                    peer,
                    link,
                    closed: closed.clone(),
                });
            }
            // A broker's pass may send several messages at once; the event loop takes each on
            // its own lane (heartbeats ahead of the rest) and batches AlterPartition itself.
            Ok(Some(Frame::Envelopes(envelopes))) if introduced => {
                for envelope in envelopes {
                    events.send(Event::Frame {
                        conn,
                        frame: Frame::Envelope(envelope),
                    });
                }
            }
            Ok(Some(frame)) if introduced => {
                // A heartbeat is answered here, by the connection, so that a broker hears its
                // controller even while the event loop works through a long step (fencing a
                // broker that led 60,000 partitions takes seconds): the broker gives up a
                // controller that says nothing for a session. Whether the heartbeat keeps the
                // broker's session is the loop's decision, on the sessions lane; one it refuses
                // is answered with Reregister.
                if let Frame::Envelope(Envelope {
                    message: Message::BrokerHeartbeat { .. },
                    ..
                }) = &frame
                {
                    link.send(Frame::HeartbeatAck);
                }
                events.send(Event::Frame { conn, frame });
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
    closed.set();
    events.send(Event::Closed { conn });
}

/// What an admin client is told: the cluster view without users' credentials (salted and
/// iterated, but still what an offline guess at a password starts from); brokers need them to
/// check logins.
fn for_admin_client(frame: Frame) -> Frame {
    match frame {
        Frame::Response {
            id,
            result: Ok(Response::Metadata(view)),
        } => Frame::Response {
            id,
            result: Ok(Response::Metadata(view.without_credentials())),
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::admin::ClusterView;
    use isr_kafka::auth::scram::{Mechanism, ScramCredential, MIN_ITERATIONS};

    #[test]
    fn admin_clients_get_the_view_without_credentials() {
        let mut view = ClusterView::default();
        let credential = ScramCredential::from_password(Mechanism::Sha512, "pw", MIN_ITERATIONS)
            .expect("credential");
        view.security
            .users
            .insert("alice".into(), [(Mechanism::Sha512, credential)].into());
        let answer = |view| Frame::Response {
            id: 7,
            result: Ok(Response::Metadata(view)),
        };
        match for_admin_client(answer(view.clone())) {
            Frame::Response {
                id: 7,
                result: Ok(Response::Metadata(shown)),
            } => assert!(shown.security.users.is_empty() && !view.security.users.is_empty()),
            other => panic!("{other:?}"),
        }
        let other = Frame::Response {
            id: 8,
            result: Ok(Response::Done),
        };
        assert_eq!(for_admin_client(other.clone()), other);
    }
}
