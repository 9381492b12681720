//! The controller's connections: one accept loop, one reader task per connection, all feeding
//! one event channel, so that every transition runs alone and in arrival order — whether this
//! process is active or standing by.
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
use std::net::SocketAddr;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, warn};

pub enum Event {
    Connected { conn: u64, peer: Peer, link: Link },
    Frame { conn: u64, frame: Frame },
    Closed { conn: u64 },
}

/// Accepts connections; with `tls`, each must complete mutual TLS first.
pub async fn accept_loop(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    events: mpsc::UnboundedSender<Event>,
) {
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
    events: mpsc::UnboundedSender<Event>,
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
                    Peer::Broker { .. } => link.clone(),
                };
                let _ = events.send(Event::Connected { conn, peer, link });
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
