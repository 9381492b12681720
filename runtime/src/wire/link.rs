//! A connection's sending half as a cheap handle, and how connections are opened and told apart.
//!
//! Each connection gets one writer task fed by an unbounded channel, so a protocol step never
//! waits on a socket: it queues its frames and moves on. The writer batches whatever is queued
//! into one flush. A dead connection drops its channel, and `send` reports it. A connection is
//! plain TCP or TLS over TCP ([`Conn`]); in a secured cluster every internal one is mutual TLS.

use super::codec::{self, FrameError};
use super::{Frame, Peer, MAGIC};
use crate::security::{peer_role, ClusterTls, Role};
use bytes::Bytes;
use isr::Envelope;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter, ReadBuf};
use tokio::io::{ReadHalf, WriteHalf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsStream;
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

    /// Queues messages for this connection's peer, in order, as the fewest frames
    /// ([`Frame::batches`]): what one step of the sender made for one receiver.
    pub fn send_envelopes(&self, envelopes: Vec<Envelope<Bytes>>) {
        for frame in Frame::batches(envelopes) {
            if !self.send(frame) {
                return;
            }
        }
    }

    /// Whether two handles drive the same connection.
    pub fn same(&self, other: &Link) -> bool {
        self.tx.same_channel(&other.tx)
    }

    /// A link with no connection behind it, and the frames sent on it: for tests of what is
    /// sent.
    #[cfg(test)]
    pub fn detached() -> (Link, mpsc::UnboundedReceiver<Frame>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Link { tx }, rx)
    }

    /// A link to the same connection whose frames pass through `map` first (on a task of
    /// their own, in order): what one kind of peer may not see is removed in one place.
    pub fn mapped(self, map: impl Fn(Frame) -> Frame + Send + 'static) -> Link {
        let (tx, mut rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Some(frame) = rx.recv().await {
                if !self.send(map(frame)) {
                    break;
                }
            }
        });
        Link { tx }
    }
}

/// Plain TCP, or TLS over it: a whole connection, or one of its halves.
pub enum Stream<P, T> {
    Plain(P),
    Tls(T),
}

/// A connection: plain TCP, or TLS over it.
pub type Conn = Stream<TcpStream, Box<TlsStream<TcpStream>>>;
/// The reading half of an internal connection. Plain TCP splits without a lock.
pub type Reader = Stream<OwnedReadHalf, ReadHalf<Box<TlsStream<TcpStream>>>>;
type Writer = Stream<OwnedWriteHalf, WriteHalf<Box<TlsStream<TcpStream>>>>;

/// Delegates to whichever stream a [`Stream`] holds.
macro_rules! either {
    ($self:ident, $s:ident => $e:expr) => {
        match $self.get_mut() {
            Stream::Plain($s) => $e,
            Stream::Tls($s) => $e,
        }
    };
}

impl<P: AsyncRead + Unpin, T: AsyncRead + Unpin> AsyncRead for Stream<P, T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        either!(self, s => Pin::new(s).poll_read(cx, buf))
    }
}

impl<P: AsyncWrite + Unpin, T: AsyncWrite + Unpin> AsyncWrite for Stream<P, T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        either!(self, s => Pin::new(s).poll_write(cx, buf))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        either!(self, s => Pin::new(s).poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        either!(self, s => Pin::new(s).poll_shutdown(cx))
    }
}

/// Splits an internal connection (magic already exchanged) into its reading half and a [`Link`].
pub fn split(conn: Conn) -> (Reader, Link) {
    let (reader, writer) = match conn {
        Conn::Plain(stream) => {
            let _ = stream.set_nodelay(true);
            let (r, w) = stream.into_split();
            (Reader::Plain(r), Writer::Plain(w))
        }
        Conn::Tls(stream) => {
            let _ = stream.get_ref().0.set_nodelay(true);
            let (r, w) = tokio::io::split(stream);
            (Reader::Tls(r), Writer::Tls(w))
        }
    };
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(write_loop(writer, rx));
    (reader, Link { tx })
}

async fn write_loop(writer: Writer, mut rx: mpsc::UnboundedReceiver<Frame>) {
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
    /// A TLS handshake on a listener without TLS: a client configured for SSL or SASL_SSL.
    TlsHello,
}

/// Tells an internal connection from a Kafka one by its first four bytes.
pub async fn classify<S: AsyncRead + Unpin>(stream: &mut S) -> io::Result<Opening> {
    let mut head = [0u8; MAGIC.len()];
    tokio::time::timeout(Duration::from_secs(10), stream.read_exact(&mut head))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "nothing said within 10 s"))??;
    Ok(if head == MAGIC {
        Opening::Internal
    } else if head[0] == 0x16 && head[1] == 0x03 {
        // A TLS record header (handshake, version 3.x); as a Kafka length it would be over
        // 300 MiB, which no request is.
        Opening::TlsHello
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

/// Opens an internal connection to `address` (mutual TLS when `tls` is given) and introduces
/// ourselves; with TLS, also the role the peer's certificate proves.
pub async fn dial(
    address: &str,
    me: Peer,
    tls: Option<&ClusterTls>,
) -> Result<(Reader, Link, Option<Role>), FrameError> {
    let timed_out =
        |what: &str| io::Error::new(io::ErrorKind::TimedOut, format!("{what} {address}"));
    let stream = tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(address))
        .await
        .map_err(|_| timed_out("connecting to"))??;
    let (mut conn, role) = match tls {
        None => (Conn::Plain(stream), None),
        Some(tls) => {
            let name = isr_kafka::auth::tls::server_name(address)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            let connector = tokio_rustls::TlsConnector::from(tls.client.clone());
            let stream =
                tokio::time::timeout(Duration::from_secs(5), connector.connect(name, stream))
                    .await
                    .map_err(|_| timed_out("TLS handshake with"))??;
            let role = peer_role(stream.get_ref().1.peer_certificates());
            (Conn::Tls(Box::new(stream.into())), role)
        }
    };
    conn.write_all(&MAGIC).await?;
    let (reader, link) = split(conn);
    link.send(Frame::Hello(me));
    Ok((reader, link, role))
}
