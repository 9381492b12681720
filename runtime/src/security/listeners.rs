//! Listeners with a security protocol each: `[PROTOCOL://]HOST:PORT` on the command line
//! (PLAINTEXT without a prefix), bound, and their connections accepted with TLS where the
//! protocol says so.

use super::{certificate_refusal, peer_role, ClusterTls, Role, SecurityError};
use crate::wire::link::Conn;
use isr_kafka::auth::SecurityProtocol;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::str::FromStr;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tracing::{debug, warn};

/// How long a client may take over its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A listener as given: its protocol and address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenerSpec {
    pub protocol: SecurityProtocol,
    pub address: String,
}

impl FromStr for ListenerSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<ListenerSpec, String> {
        let (protocol, address) = match s.split_once("://") {
            Some((p, a)) => (
                SecurityProtocol::from_name(p).ok_or_else(|| {
                    format!(
                        "{p}: a listener is PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL \
                         (PROTOCOL://HOST:PORT)"
                    )
                })?,
                a,
            ),
            None => (SecurityProtocol::Plaintext, s),
        };
        let valid = address
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !valid {
            return Err(format!("{s}: expected [PROTOCOL://]HOST:PORT"));
        }
        Ok(ListenerSpec {
            protocol,
            address: address.to_string(),
        })
    }
}

impl fmt::Display for ListenerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.protocol, self.address)
    }
}

/// A bound listener.
pub struct Listener {
    pub protocol: SecurityProtocol,
    pub tcp: TcpListener,
    /// The address it got (port 0 resolved).
    pub address: String,
    pub acceptor: Option<TlsAcceptor>,
}

impl Listener {
    /// Binds `spec`; a TLS protocol serves `tls`'s certificate, asking clients for theirs
    /// (Kafka clients may have none; brokers and admin clients must present one).
    pub async fn bind(
        spec: &ListenerSpec,
        tls: Option<&ClusterTls>,
    ) -> Result<Listener, SecurityError> {
        let acceptor = match (spec.protocol.tls(), tls) {
            (false, _) => None,
            (true, Some(tls)) => Some(TlsAcceptor::from(tls.listener.clone())),
            (true, None) => {
                return Err(SecurityError::Config(format!(
                    "listener {spec} needs a certificate: --tls-cert, --tls-key and --tls-ca"
                )))
            }
        };
        let (tcp, address) = crate::wire::link::listen(&spec.address)
            .await
            .map_err(|e| SecurityError::Config(format!("cannot listen on {spec}: {e}")))?;
        Ok(Listener {
            protocol: spec.protocol,
            tcp,
            address,
            acceptor,
        })
    }
}

/// A connection after its TLS handshake (if the listener has one), with the role its
/// certificate proves, if it presented one.
pub struct Accepted {
    pub conn: Conn,
    pub role: Option<Role>,
}

/// Completes an accepted connection: the TLS handshake under `acceptor`, or nothing. A failed
/// handshake is logged here (a refused certificate as a warning) and ends the connection.
pub async fn handshake(
    acceptor: Option<TlsAcceptor>,
    tcp: TcpStream,
    peer: SocketAddr,
) -> Option<Accepted> {
    match tls_handshake(acceptor, tcp, peer).await {
        Ok(accepted) => Some(accepted),
        Err(e) => {
            match certificate_refusal(&e) {
                Some(why) => warn!(%peer, %why, "TLS refused"),
                None => debug!(%peer, error = %e, "TLS handshake failed"),
            }
            None
        }
    }
}

async fn tls_handshake(
    acceptor: Option<TlsAcceptor>,
    tcp: TcpStream,
    peer: SocketAddr,
) -> io::Result<Accepted> {
    let _ = tcp.set_nodelay(true);
    let Some(acceptor) = acceptor else {
        return Ok(Accepted {
            conn: Conn::Plain(tcp),
            role: None,
        });
    };
    let tls = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp))
        .await
        .map_err(|_| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no TLS handshake from {peer} within 10 s"),
            )
        })??;
    let role = peer_role(tls.get_ref().1.peer_certificates());
    Ok(Accepted {
        conn: Conn::Tls(Box::new(tls.into())),
        role,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listener_specs_name_a_protocol_or_default_to_plaintext() {
        let spec: ListenerSpec = "SASL_SSL://127.0.0.1:9093".parse().expect("spec");
        assert_eq!(spec.protocol, SecurityProtocol::SaslSsl);
        assert_eq!(spec.address, "127.0.0.1:9093");
        assert_eq!(spec.to_string(), "SASL_SSL://127.0.0.1:9093");
        let plain: ListenerSpec = "127.0.0.1:0".parse().expect("plain");
        assert_eq!(plain.protocol, SecurityProtocol::Plaintext);
        for bad in ["TLS://h:1", "SSL://h", "SSL://:1", "h:port"] {
            assert!(bad.parse::<ListenerSpec>().is_err(), "{bad}");
        }
    }
}
