//! A connection's sending half as a cheap handle, and how connections are opened and told apart.
//!
//! Each connection gets one writer task fed by an unbounded channel, so a protocol step never
//! waits on a socket: it queues its frames and moves on. The writer batches whatever is queued
//! into one flush. A dead connection drops its channel, and `send` reports it.

use super::codec::{self, FrameError};
use super::{Frame, Peer, MAGIC};
use std::io;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tracing::debug;

#[derive(Clone, Debug)]
pub struct Link {
    tx: mpsc::UnboundedSender<Frame>,
}

impl Link {
    /// Queues a frame; false when the connection is gone.
    pub fn send(&self, frame: Frame) -> bool {
        self.tx.send(frame).is_ok()
    }

    /// Whether two handles drive the same connection.
    pub fn same(&self, other: &Link) -> bool {
        self.tx.same_channel(&other.tx)
    }
}

/// Splits an internal connection (magic already exchanged) into its reading half and a [`Link`].
pub fn split(stream: TcpStream) -> (OwnedReadHalf, Link) {
    let _ = stream.set_nodelay(true);
    let (reader, writer) = stream.into_split();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(write_loop(writer, rx));
    (reader, Link { tx })
}

async fn write_loop(writer: OwnedWriteHalf, mut rx: mpsc::UnboundedReceiver<Frame>) {
    let mut writer = BufWriter::with_capacity(256 << 10, writer);
    while let Some(frame) = rx.recv().await {
        let mut result = codec::write(&mut writer, &frame).await;
        while let (Ok(()), Ok(frame)) = (&result, rx.try_recv()) {
            result = codec::write(&mut writer, &frame).await;
        }
        if let Err(e) = result {
            debug!(error = %e, "closing connection");
            // A frame we cannot encode is our bug, not the peer's; the connection is dropped
            // either way, and the protocol's timeouts resend.
            return;
        }
        if writer.flush().await.is_err() {
            return;
        }
    }
}

/// What the first bytes of an accepted connection say it is.
pub enum Opening {
    Internal,
    /// A Kafka client, with the bytes already read from it (the start of its first request).
    Kafka(bytes::Bytes),
}

/// Tells an internal connection from a Kafka one by its first four bytes.
pub async fn classify(stream: &mut TcpStream) -> io::Result<Opening> {
    let mut head = [0u8; MAGIC.len()];
    tokio::time::timeout(Duration::from_secs(10), stream.read_exact(&mut head))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "nothing said within 10 s"))??;
    Ok(if head == MAGIC {
        Opening::Internal
    } else {
        Opening::Kafka(bytes::Bytes::copy_from_slice(&head))
    })
}

/// Listens on `address` (port 0: any free port); the listener and the address it got.
pub async fn listen(address: &str) -> io::Result<(TcpListener, String)> {
    let listener = TcpListener::bind(address).await?;
    let bound = listener
        .local_addr()
        .map_or(address.to_string(), |a| a.to_string());
    Ok((listener, bound))
}

/// Opens an internal connection to `address` and introduces ourselves.
pub async fn dial(address: &str, me: Peer) -> Result<(OwnedReadHalf, Link), FrameError> {
    let mut stream = tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(address))
        .await
        .map_err(|_| {
            io::Error::new(io::ErrorKind::TimedOut, format!("connecting to {address}"))
        })??;
    stream.write_all(&MAGIC).await?;
    let (reader, link) = split(stream);
    link.send(Frame::Hello(me));
    Ok((reader, link))
}
