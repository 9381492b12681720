//! Mutual TLS inside the cluster, and TLS and SASL on Kafka listeners.
//!
//! Every process of a secured cluster holds a certificate signed by the cluster CA, whose
//! subject CN says what it is: `broker-<id>`, `controller-<id>`, or any other name for an
//! admin client (`isr status`, `isr cluster` itself). Links between brokers, from brokers to
//! controllers and from admin clients are mutual TLS: each side proves its certificate, and
//! the role it names is checked against what it claims (a broker registers, fetches and sends
//! AlterPartition only as the id its certificate names). Kafka listeners ([`listeners`]) are
//! PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL each; their TLS uses the same certificate.
//! [`certs`] makes a throwaway CA and certificates for `isr cluster --security`.

pub mod certs;
pub mod listeners;

use isr::BrokerId;
use isr_kafka::auth::tls::{self, ClientAuth, Identity, TlsError};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::{CertificateDer, UnixTime};
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

/// The cluster certificate of a broker, controller or admin client.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct TlsArgs {
    /// This process's certificate (PEM), signed by the cluster CA; its subject CN names the
    /// role: broker-<id>, controller-<id>, or another name for an admin client. With it, links
    /// inside the cluster are mutual TLS.
    #[arg(long, value_name = "FILE", requires_all = ["tls_key", "tls_ca"])]
    pub tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires_all = ["tls_cert", "tls_ca"])]
    pub tls_key: Option<PathBuf>,
    /// The cluster CA's certificate (PEM): peers must present a certificate it signed.
    #[arg(long, value_name = "FILE", requires_all = ["tls_cert", "tls_key"])]
    pub tls_ca: Option<PathBuf>,
}

impl TlsArgs {
    /// The flags as arguments (for `isr cluster`).
    pub fn to_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        for (flag, value) in [
            ("--tls-cert", &self.tls_cert),
            ("--tls-key", &self.tls_key),
            ("--tls-ca", &self.tls_ca),
        ] {
            if let Some(path) = value {
                args.push(flag.to_string());
                args.push(path.to_string_lossy().into_owned());
            }
        }
        args
    }

    /// Loads the certificate, if given, and checks it: signed by the CA, valid now, and (when
    /// `expected` is given) naming that role. `None` without the flags.
    pub fn load(&self, expected: Option<&Role>) -> Result<Option<ClusterTls>, SecurityError> {
        let (Some(cert), Some(key), Some(ca)) = (&self.tls_cert, &self.tls_key, &self.tls_ca)
        else {
            return Ok(None);
        };
        let identity = Identity::load(cert, key)?;
        let roots = tls::roots(ca)?;
        let own = identity
            .chain
            .first()
            .ok_or_else(|| SecurityError::Certificate {
                path: cert.clone(),
                reason: "holds no certificate".into(),
            })?;
        let role = Role::of(own).map_err(|reason| SecurityError::Certificate {
            path: cert.clone(),
            reason,
        })?;
        if let Some(expected) = expected {
            if &role != expected {
                return Err(SecurityError::Certificate {
                    path: cert.clone(),
                    reason: format!("it names {role}, but this process is {expected}"),
                });
            }
        }
        check_own(&identity.chain, &roots).map_err(|reason| SecurityError::Certificate {
            path: cert.clone(),
            reason: format!("{reason} (CA: {})", ca.display()),
        })?;
        Ok(Some(ClusterTls::new(role, identity, roots)?))
    }
}

/// Whether our own chain verifies against the CA now: what every peer will check, so that a
/// certificate from another CA, or an expired one, stops the process at start with a reason.
fn check_own(chain: &[CertificateDer<'static>], roots: &Arc<RootCertStore>) -> Result<(), String> {
    let verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), tls::provider())
        .build()
        .map_err(|e| e.to_string())?;
    let (leaf, intermediates) = chain.split_first().ok_or("no certificate")?;
    verifier
        .verify_client_cert(leaf, intermediates, UnixTime::now())
        .map(|_| ())
        .map_err(|e| match e {
            rustls::Error::InvalidCertificate(c) => format!("it is {}", unacceptable(&c)),
            other => other.to_string(),
        })
}

/// Why a certificate is not accepted, in words.
fn unacceptable(e: &rustls::CertificateError) -> String {
    use rustls::CertificateError as E;
    match e {
        E::UnknownIssuer | E::BadSignature => "not signed by the cluster CA".into(),
        E::Expired | E::ExpiredContext { .. } => format!("expired ({e:?})"),
        E::NotValidYet | E::NotValidYetContext { .. } => format!("not valid yet ({e:?})"),
        E::NotValidForName | E::NotValidForNameContext { .. } => {
            format!("not valid for the address dialed ({e:?})")
        }
        other => format!("not acceptable ({other:?})"),
    }
}

/// What a cluster certificate says its holder is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    Broker(BrokerId),
    Controller(u32),
    /// An admin client (`isr status`, `isr cluster`), by its certificate's name.
    Operator(String),
}

impl Role {
    /// The role a certificate's subject CN names.
    pub fn of(cert: &CertificateDer<'_>) -> Result<Role, String> {
        let (_, parsed) = x509_parser::parse_x509_certificate(cert)
            .map_err(|e| format!("not an X.509 certificate: {e}"))?;
        let cn = parsed
            .subject()
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())
            .ok_or("its subject has no common name (CN)")?;
        let numbered = |prefix: &str| cn.strip_prefix(prefix).and_then(|n| n.parse::<u32>().ok());
        Ok(if let Some(id) = numbered("broker-") {
            Role::Broker(BrokerId(id))
        } else if let Some(id) = numbered("controller-") {
            Role::Controller(id)
        } else {
            Role::Operator(cn.to_string())
        })
    }

    /// The certificate name of this role.
    pub fn common_name(&self) -> String {
        match self {
            Role::Broker(id) => format!("broker-{}", id.0),
            Role::Controller(id) => format!("controller-{id}"),
            Role::Operator(name) => name.clone(),
        }
    }

    /// The Kafka principal of a client presenting this certificate on an SSL listener.
    pub fn principal(&self) -> String {
        isr_kafka::auth::user_principal(&self.common_name())
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Role::Broker(id) => write!(f, "broker {} (CN broker-{})", id.0, id.0),
            Role::Controller(id) => write!(f, "controller {id} (CN controller-{id})"),
            Role::Operator(name) => write!(f, "admin client {name}"),
        }
    }
}

/// Whether a connection whose certificate proved `role` (`None`: no TLS, or no certificate)
/// may introduce itself as `peer`. Without cluster TLS (`secured` false) everyone may, as
/// before; with it, a broker only as the id its certificate names, and an admin client only
/// with a cluster certificate.
pub fn admits(secured: bool, role: Option<&Role>, peer: &crate::wire::Peer) -> Result<(), String> {
    use crate::wire::Peer;
    if !secured {
        return Ok(());
    }
    match (peer, role) {
        (_, None) => Err("it has no certificate signed by the cluster CA".into()),
        (Peer::Broker { id, .. } | Peer::Heartbeats { id }, Some(Role::Broker(proven)))
            if proven == id =>
        {
            Ok(())
        }
        (Peer::Broker { id, .. } | Peer::Heartbeats { id }, Some(other)) => Err(format!(
            "it says it is broker {}, but its certificate names {other}",
            id.0
        )),
        (Peer::Client, Some(_)) => Ok(()),
    }
}

/// The role of the peer of a TLS connection, from the certificate it proved.
pub fn peer_role(peer_certificates: Option<&[CertificateDer<'_>]>) -> Option<Role> {
    Role::of(peer_certificates?.first()?).ok()
}

/// A loaded cluster certificate and the TLS configurations made of it.
pub struct ClusterTls {
    pub role: Role,
    /// Dialing a peer: presents our certificate, trusts the CA.
    pub client: Arc<ClientConfig>,
    /// A Kafka listener: asks clients for a certificate (peers must present one; Kafka
    /// clients need not).
    pub listener: Arc<ServerConfig>,
    /// A controller: every peer must present a certificate.
    pub required: Arc<ServerConfig>,
}

impl ClusterTls {
    fn new(
        role: Role,
        identity: Identity,
        roots: Arc<RootCertStore>,
    ) -> Result<ClusterTls, SecurityError> {
        Ok(ClusterTls {
            role,
            client: Arc::new(tls::client_config(roots.clone(), Some(identity.clone()))?),
            listener: Arc::new(tls::server_config(
                identity.clone(),
                &ClientAuth::Optional(roots.clone()),
            )?),
            required: Arc::new(tls::server_config(identity, &ClientAuth::Required(roots))?),
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SecurityError {
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("certificate {path}: {reason}")]
    Certificate { path: PathBuf, reason: String },
    #[error("{0}")]
    Config(String),
}

/// Whether an i/o error is a TLS refusal of a certificate (ours by the peer, or the peer's by
/// us), and if so, what it says: such a failure will not go away by trying again.
pub fn certificate_refusal(e: &io::Error) -> Option<String> {
    use rustls::AlertDescription as A;
    let inner = e.get_ref()?.downcast_ref::<rustls::Error>()?;
    match inner {
        rustls::Error::InvalidCertificate(c) => {
            Some(format!("its certificate is {}", unacceptable(c)))
        }
        rustls::Error::NoCertificatesPresented => Some("it presented no certificate".into()),
        rustls::Error::AlertReceived(
            alert @ (A::BadCertificate
            | A::UnknownCA
            | A::CertificateExpired
            | A::CertificateRevoked
            | A::CertificateUnknown
            | A::UnsupportedCertificate
            | A::CertificateRequired
            | A::AccessDenied),
        ) => Some(format!("it refused our certificate ({alert:?})")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{BrokerAddress, Peer};

    #[test]
    fn a_broker_is_admitted_only_as_the_id_its_certificate_names() {
        let broker = |id| Peer::Broker {
            id: BrokerId(id),
            address: BrokerAddress::default(),
        };
        let two = Role::Broker(BrokerId(2));
        assert!(admits(true, Some(&two), &broker(2)).is_ok());
        let err = admits(true, Some(&two), &broker(3)).expect_err("impostor");
        assert!(err.contains("broker 2"), "{err}");
        assert!(admits(true, None, &broker(2)).is_err(), "no certificate");
        assert!(admits(true, None, &Peer::Client).is_err());
        let admin = Role::Operator("admin".into());
        assert!(admits(true, Some(&admin), &Peer::Client).is_ok());
        assert!(admits(true, Some(&admin), &broker(1)).is_err());
        assert!(admits(true, Some(&Role::Controller(1)), &broker(1)).is_err());
        // A broker's heartbeat connection, likewise.
        let heartbeats = |id| Peer::Heartbeats { id: BrokerId(id) };
        assert!(admits(true, Some(&two), &heartbeats(2)).is_ok());
        assert!(admits(true, Some(&two), &heartbeats(3)).is_err());
        assert!(admits(true, Some(&admin), &heartbeats(2)).is_err());
        assert!(
            admits(false, None, &broker(7)).is_ok(),
            "no cluster TLS: as before"
        );
        assert_eq!(two.principal(), "User:broker-2");
    }
}
