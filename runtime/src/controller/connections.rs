//! The controller's connections: one accept loop, one reader task per connection, all feeding
//! one event channel, so that every transition runs alone and in arrival order — whether this
//! process is active or standing by.

use crate::timing;
use crate::wire::link::{self, Link, Opening};
use crate::wire::{codec, Frame, Peer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tracing::{debug, warn};

pub enum Event {
    Connected { conn: u64, peer: Peer, link: Link },
    Frame { conn: u64, frame: Frame },
    Closed { conn: u64 },
}

pub async fn accept_loop(listener: TcpListener, events: mpsc::UnboundedSender<Event>) {
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
