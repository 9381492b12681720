//! The fault proxy: every process of a scenario is reached through one, so the harness decides
//! what each link carries. A link is one direction between two nodes (broker, controller, or the
//! workload's Kafka clients taken together); it can be cut, or delayed, and healed.
//!
//! Each node gets a proxy listener, and that is the address the node advertises: its peers, the
//! brokers (for a controller) and the Kafka clients all dial the proxy, which dials the node.
//! The proxy tells who opened a connection from its first bytes: an internal connection opens
//! with the runtime's magic and a Hello naming the broker; anything else is a Kafka client. An
//! admin connection (`Hello(Client)`, as `isr status` and the harness's own observations open)
//! is never faulted: the harness watches the cluster through it.
//!
//! A cut stops the bytes of that direction at the proxy without closing anything, as a network
//! that drops packets does: the sender's writes pile up, the receiver hears nothing, and each
//! side's own timeouts decide what happens. Healing delivers what was held, in order, as TCP's
//! retransmissions would after a short partition. A delay holds each chunk for that long.
//!
//! The proxy accepts a connection at once, even across a cut, where a real network would leave
//! its SYN unanswered. So a connection that delivered nothing before its sender closed it is
//! dropped with what it held, as one that was never established: otherwise the Hellos of every
//! connection a broker gave up on during a partition would reach the controller at the heal,
//! each opening a session the broker no longer listens on.

use bytes::Bytes;
use isr_runtime::wire::{codec, Frame, Peer, MAGIC};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// One end of a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Node {
    Broker(u32),
    Controller(u32),
    /// The workload's Kafka clients (producers and consumers), together.
    Client,
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Node::Broker(b) => write!(f, "b{b}"),
            Node::Controller(c) => write!(f, "c{c}"),
            Node::Client => f.write_str("clients"),
        }
    }
}

/// What one direction of a link does to its bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Link {
    cut: bool,
    delay: Duration,
}

/// The state of every link: shared by the proxies and the scenario that changes it.
#[derive(Default)]
pub struct Faults {
    links: Mutex<BTreeMap<(Node, Node), Link>>,
    /// Bumped on every change, so held bytes move on at a heal.
    changed: watch::Sender<u64>,
}

impl Faults {
    fn update(&self, change: impl FnOnce(&mut BTreeMap<(Node, Node), Link>)) {
        change(&mut self.links.lock().unwrap_or_else(|p| p.into_inner()));
        self.changed.send_modify(|n| *n += 1);
    }

    fn link(&self, from: Node, to: Node) -> Link {
        self.links
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(from, to))
            .copied()
            .unwrap_or_default()
    }

    /// Cuts the direction `from` → `to`.
    pub fn cut(&self, from: Node, to: Node) {
        self.update(|links| links.entry((from, to)).or_default().cut = true);
    }

    /// Cuts both directions between `a` and `b`.
    pub fn cut_both(&self, a: Node, b: Node) {
        self.cut(a, b);
        self.cut(b, a);
    }

    /// Cuts every link between a node of `one` and a node of `other`, both ways.
    pub fn partition(&self, one: &[Node], other: &[Node]) {
        for &a in one {
            for &b in other {
                self.cut_both(a, b);
            }
        }
    }

    /// Holds every chunk from `from` to `to` for `delay`.
    pub fn delay(&self, from: Node, to: Node, delay: Duration) {
        self.update(|links| links.entry((from, to)).or_default().delay = delay);
    }

    /// Restores every link.
    pub fn heal(&self) {
        self.update(BTreeMap::clear);
    }

    /// The links currently faulted, for the schedule's log: `b1->b2 cut, b3->b1 +200ms`.
    pub fn describe(&self) -> String {
        let links = self.links.lock().unwrap_or_else(|p| p.into_inner());
        let faulted: Vec<String> = links
            .iter()
            .filter(|(_, l)| **l != Link::default())
            .map(|((from, to), l)| match (l.cut, l.delay) {
                (true, _) => format!("{from}->{to} cut"),
                (false, d) => format!("{from}->{to} +{}ms", d.as_millis()),
            })
            .collect();
        if faulted.is_empty() {
            "none".into()
        } else {
            faulted.join(", ")
        }
    }

    /// Waits until the direction `from` → `to` is not cut.
    async fn open(&self, from: Node, to: Node) {
        let mut changed = self.changed.subscribe();
        while self.link(from, to).cut {
            if changed.changed().await.is_err() {
                return;
            }
        }
    }
}

/// A proxy listener standing in front of one node.
pub struct Proxy {
    /// Where the proxy listens: the node's advertised address.
    pub address: String,
    /// Where the node itself listens now (it moves when the node restarts).
    upstream: Arc<Mutex<Option<String>>>,
    task: JoinHandle<()>,
}

impl Proxy {
    /// Listens on a free port of 127.0.0.1 for `node`, whose own address is set later.
    pub async fn start(node: Node, faults: Arc<Faults>) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?.to_string();
        let upstream = Arc::new(Mutex::new(None));
        let task = tokio::spawn(accept(listener, node, upstream.clone(), faults));
        Ok(Proxy {
            address,
            upstream,
            task,
        })
    }

    /// The node now listens at `address` (`None`: it is down, connections are refused).
    pub fn set_upstream(&self, address: Option<String>) {
        *self.upstream.lock().unwrap_or_else(|p| p.into_inner()) = address;
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept(
    listener: TcpListener,
    node: Node,
    upstream: Arc<Mutex<Option<String>>>,
    faults: Arc<Faults>,
) {
    let mut connections = tokio::task::JoinSet::new();
    while let Ok((stream, _)) = listener.accept().await {
        let target = upstream.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(target) = target {
            connections.spawn(carry(stream, node, target, faults.clone()));
        }
        // Reap finished connections as we go; dropping the set aborts the rest.
        while connections.try_join_next().is_some() {}
    }
}

/// Who opened a connection, from its first bytes, and those bytes (to be passed on).
/// `Ok(None)`: an admin connection, never faulted.
async fn identify(stream: &mut TcpStream) -> std::io::Result<(Option<Node>, Vec<u8>)> {
    let mut head = [0u8; 4];
    stream.read_exact(&mut head).await?;
    if head != MAGIC {
        return Ok((Some(Node::Client), head.to_vec()));
    }
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).await?;
    let size = u32::from_be_bytes(len) as usize;
    if size > codec::MAX_FRAME {
        return Err(std::io::ErrorKind::InvalidData.into());
    }
    let mut body = vec![0u8; size];
    stream.read_exact(&mut body).await?;
    let source = match codec::decode(&body) {
        Ok(Frame::Hello(Peer::Broker { id, .. } | Peer::Heartbeats { id })) => {
            Some(Node::Broker(id.0))
        }
        _ => None,
    };
    let mut prefix = head.to_vec();
    prefix.extend_from_slice(&len);
    prefix.extend_from_slice(&body);
    Ok((source, prefix))
}

/// Carries one connection to `target`, both directions through their links' faults.
async fn carry(mut inbound: TcpStream, node: Node, target: String, faults: Arc<Faults>) {
    let identified = tokio::time::timeout(Duration::from_secs(10), identify(&mut inbound)).await;
    let Ok(Ok((source, prefix))) = identified else {
        return;
    };
    let connect = tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(&target));
    let Ok(Ok(outbound)) = connect.await else {
        return;
    };
    let _ = inbound.set_nodelay(true);
    let _ = outbound.set_nodelay(true);
    let (in_read, in_write) = inbound.into_split();
    let (out_read, out_write) = outbound.into_split();
    let forward = source.map(|s| (s, node));
    let backward = source.map(|s| (node, s));
    tokio::select! {
        _ = direction(in_read, out_write, forward, faults.clone(), prefix) => {}
        _ = direction(out_read, in_write, backward, faults, Vec::new()) => {}
    }
}

/// Moves bytes one way until the sender closes or the receiver is gone: each chunk waits out
/// the link's delay as it was when the chunk arrived, and any cut.
async fn direction(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    link: Option<(Node, Node)>,
    faults: Arc<Faults>,
    first: Vec<u8>,
) {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Bytes)>();
    // Set when the sender closes across a cut before anything was delivered (see the module's
    // doc).
    let delivered = AtomicBool::new(false);
    let abandoned = AtomicBool::new(false);
    let due = |faults: &Faults| {
        Instant::now() + link.map_or(Duration::ZERO, |(a, b)| faults.link(a, b).delay)
    };
    if !first.is_empty() {
        let _ = tx.send((due(&faults), Bytes::from(first)));
    }
    let read = async {
        let mut buf = vec![0u8; 64 << 10];
        loop {
            match from.read(&mut buf).await {
                Ok(0) | Err(_) => {
                    let cut = link.is_some_and(|(a, b)| faults.link(a, b).cut);
                    if cut && !delivered.load(Ordering::SeqCst) {
                        abandoned.store(true, Ordering::SeqCst);
                    }
                    break;
                }
                Ok(n) => {
                    let chunk = Bytes::copy_from_slice(&buf[..n]);
                    if tx.send((due(&faults), chunk)).is_err() {
                        break;
                    }
                }
            }
        }
        drop(tx);
    };
    let write = async {
        while let Some((due, chunk)) = rx.recv().await {
            if let Some((a, b)) = link {
                faults.open(a, b).await;
                tokio::time::sleep_until(due).await;
                // A cut that came while the chunk waited holds it too.
                faults.open(a, b).await;
            }
            if abandoned.load(Ordering::SeqCst) {
                return;
            }
            delivered.store(true, Ordering::SeqCst);
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(read, write);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server; its address.
    async fn echo() -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("addr").to_string();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        address
    }

    /// A proxy standing for `node` in front of `upstream`, and the faults it obeys.
    async fn proxy_to(node: Node, upstream: String) -> (Arc<Faults>, Proxy) {
        let faults = Arc::new(Faults::default());
        let proxy = Proxy::start(node, faults.clone()).await.expect("proxy");
        proxy.set_upstream(Some(upstream));
        (faults, proxy)
    }

    async fn round_trip(stream: &mut TcpStream, within: Duration) -> Option<Duration> {
        let start = Instant::now();
        stream.write_all(b"ping").await.ok()?;
        let mut answer = [0u8; 4];
        tokio::time::timeout(within, stream.read_exact(&mut answer))
            .await
            .ok()?
            .ok()?;
        assert_eq!(&answer, b"ping");
        Some(start.elapsed())
    }

    #[tokio::test]
    async fn a_cut_holds_bytes_until_the_heal_and_a_delay_holds_them_that_long() {
        let (faults, proxy) = proxy_to(Node::Broker(1), echo().await).await;
        let mut client = TcpStream::connect(&proxy.address).await.expect("connect");
        let fast = round_trip(&mut client, Duration::from_secs(2)).await;
        assert!(
            fast.is_some_and(|t| t < Duration::from_millis(500)),
            "{fast:?}"
        );

        // One way is enough to stop a round trip; the other way still flows.
        faults.cut(Node::Broker(1), Node::Client);
        assert_eq!(faults.describe(), "b1->clients cut");
        assert!(round_trip(&mut client, Duration::from_millis(300))
            .await
            .is_none());
        faults.heal();
        // The held answer arrives at the heal, then the next round trip is prompt.
        let mut held = [0u8; 4];
        client.read_exact(&mut held).await.expect("held bytes");
        assert_eq!(&held, b"ping");
        assert!(round_trip(&mut client, Duration::from_secs(2))
            .await
            .is_some());

        faults.delay(Node::Client, Node::Broker(1), Duration::from_millis(150));
        faults.delay(Node::Broker(1), Node::Client, Duration::from_millis(150));
        let slow = round_trip(&mut client, Duration::from_secs(2)).await;
        assert!(
            slow.is_some_and(|t| t >= Duration::from_millis(300)),
            "{slow:?}"
        );
    }

    #[tokio::test]
    async fn a_connection_given_up_during_a_cut_delivers_nothing_at_the_heal() {
        // Upstream: counts the bytes each connection brings.
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let upstream = listener.local_addr().expect("addr").to_string();
        let (got, mut received) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let got = got.clone();
                tokio::spawn(async move {
                    let mut bytes = Vec::new();
                    let _ = s.read_to_end(&mut bytes).await;
                    let _ = got.send(bytes);
                });
            }
        });
        let (faults, proxy) = proxy_to(Node::Broker(1), upstream).await;
        faults.cut(Node::Client, Node::Broker(1));

        // Opened across the cut and closed before the heal: never established.
        let mut abandoned = TcpStream::connect(&proxy.address).await.expect("connect");
        abandoned.write_all(b"stale").await.expect("write");
        drop(abandoned);
        // Still open at the heal: what it sent arrives, as a retransmitted SYN would. And a
        // connection closed right after writing, on a link that is not cut, delivers it all.
        let mut waiting = TcpStream::connect(&proxy.address).await.expect("connect");
        waiting.write_all(b"fresh").await.expect("write");
        tokio::time::sleep(Duration::from_millis(200)).await;
        faults.heal();
        tokio::time::sleep(Duration::from_millis(200)).await;
        drop(waiting);

        let mut quick = TcpStream::connect(&proxy.address).await.expect("connect");
        quick.write_all(b"quick").await.expect("write");
        drop(quick);

        let mut all = Vec::new();
        for _ in 0..3 {
            let bytes = tokio::time::timeout(Duration::from_secs(2), received.recv())
                .await
                .expect("both connections end")
                .expect("a connection");
            all.push(bytes);
        }
        all.sort();
        assert_eq!(all, [b"".to_vec(), b"fresh".to_vec(), b"quick".to_vec()]);
    }

    #[tokio::test]
    async fn admin_connections_are_never_faulted_and_brokers_are_told_apart() {
        let (faults, proxy) = proxy_to(Node::Controller(1), echo().await).await;
        faults.cut_both(Node::Broker(2), Node::Controller(1));
        faults.cut_both(Node::Client, Node::Controller(1));

        let hello = |peer: Peer| {
            let mut bytes = MAGIC.to_vec();
            bytes.extend(codec::encode(&Frame::Hello(peer)).expect("encode"));
            bytes
        };
        let mut admin = TcpStream::connect(&proxy.address).await.expect("connect");
        let greeting = hello(Peer::Client);
        admin.write_all(&greeting).await.expect("hello");
        let mut echoed = vec![0u8; greeting.len()];
        tokio::time::timeout(Duration::from_secs(2), admin.read_exact(&mut echoed))
            .await
            .expect("admin connections pass")
            .expect("read");

        let mut broker = TcpStream::connect(&proxy.address).await.expect("connect");
        let id = isr::BrokerId(2);
        let greeting = hello(Peer::Broker {
            id,
            address: isr_runtime::wire::BrokerAddress::plaintext("x".into()),
        });
        broker.write_all(&greeting).await.expect("hello");
        let mut echoed = vec![0u8; greeting.len()];
        let blocked =
            tokio::time::timeout(Duration::from_millis(300), broker.read_exact(&mut echoed)).await;
        assert!(blocked.is_err(), "broker 2 is cut from the controller");

        // Its heartbeat connection too: a cut that spared it would keep its session alive.
        let mut heartbeats = TcpStream::connect(&proxy.address).await.expect("connect");
        let greeting = hello(Peer::Heartbeats { id });
        heartbeats.write_all(&greeting).await.expect("hello");
        let mut echoed = vec![0u8; greeting.len()];
        let blocked = tokio::time::timeout(
            Duration::from_millis(300),
            heartbeats.read_exact(&mut echoed),
        )
        .await;
        assert!(blocked.is_err(), "broker 2's heartbeats are cut too");
    }
}
