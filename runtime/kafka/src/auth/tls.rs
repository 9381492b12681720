//! TLS configurations (rustls, with ring as its crypto provider) from PEM files: what a Kafka
//! listener serves, what brokers and controllers present to each other, and what a client
//! trusts. Every failure names the file and says what is wrong with it.

use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why a TLS configuration could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{path}: {reason}")]
    File { path: PathBuf, reason: String },
    #[error("TLS configuration: {0}")]
    Config(String),
    #[error("{0:?} is not a host name or address to verify a certificate against")]
    ServerName(String),
}

fn file_error(path: &Path, reason: impl std::fmt::Display) -> TlsError {
    TlsError::File {
        path: path.to_owned(),
        reason: reason.to_string(),
    }
}

/// The crypto provider every configuration uses.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Every certificate in a PEM file, leaf first.
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_error(path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error(path, e))?;
    if certs.is_empty() {
        return Err(file_error(path, "holds no PEM certificate"));
    }
    Ok(certs)
}

/// The private key in a PEM file (PKCS#8, PKCS#1 or SEC1).
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| file_error(path, e))
}

/// The certificates a CA file holds, as trust anchors.
pub fn roots(ca: &Path) -> Result<Arc<RootCertStore>, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in load_certs(ca)? {
        roots
            .add(cert)
            .map_err(|e| file_error(ca, format!("not a usable CA certificate: {e}")))?;
    }
    Ok(Arc::new(roots))
}

/// A certificate chain and its key, loaded.
pub struct Identity {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

impl Clone for Identity {
    fn clone(&self) -> Identity {
        Identity {
            chain: self.chain.clone(),
            key: self.key.clone_key(),
        }
    }
}

impl Identity {
    pub fn load(cert: &Path, key: &Path) -> Result<Identity, TlsError> {
        Ok(Identity {
            chain: load_certs(cert)?,
            key: load_key(key)?,
        })
    }
}

/// Whether a server asks its clients for certificates.
pub enum ClientAuth {
    /// Never (a plain TLS server).
    None,
    /// Asks; a client may present none, but one it presents must chain to these roots.
    Optional(Arc<RootCertStore>),
    /// A certificate chaining to these roots is required.
    Required(Arc<RootCertStore>),
}

/// A server configuration presenting `identity`.
pub fn server_config(identity: Identity, clients: &ClientAuth) -> Result<ServerConfig, TlsError> {
    let provider = provider();
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let builder = match clients {
        ClientAuth::None => builder.with_no_client_auth(),
        ClientAuth::Optional(roots) | ClientAuth::Required(roots) => {
            let optional = matches!(clients, ClientAuth::Optional(_));
            let roots = roots.clone();
            let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider);
            let verifier = if optional {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier
                .build()
                .map_err(|e| TlsError::Config(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    builder
        .with_single_cert(identity.chain, identity.key)
        .map_err(|e| TlsError::Config(format!("certificate and key do not go together: {e}")))
}

/// A client configuration trusting `roots`, presenting `identity` if given.
pub fn client_config(
    roots: Arc<RootCertStore>,
    identity: Option<Identity>,
) -> Result<ClientConfig, TlsError> {
    let provider = provider();
    let verifier = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
        .build()
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_webpki_verifier(verifier);
    match identity {
        Some(id) => builder
            .with_client_auth_cert(id.chain, id.key)
            .map_err(|e| TlsError::Config(format!("certificate and key do not go together: {e}"))),
        None => Ok(builder.with_no_client_auth()),
    }
}

/// The name a server at `address` (`host:port`, `[v6]:port`) must prove in its certificate.
pub fn server_name(address: &str) -> Result<ServerName<'static>, TlsError> {
    let host = match address.rsplit_once(':') {
        Some((host, port)) if port.parse::<u16>().is_ok() => host,
        _ => address,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_owned()).map_err(|_| TlsError::ServerName(address.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_come_from_the_host_part() {
        assert!(matches!(
            server_name("127.0.0.1:9092"),
            Ok(ServerName::IpAddress(_))
        ));
        assert!(matches!(
            server_name("[::1]:9092"),
            Ok(ServerName::IpAddress(_))
        ));
        assert!(matches!(
            server_name("broker-1.example:9093"),
            Ok(ServerName::DnsName(_))
        ));
        assert!(server_name("bad host:1").is_err());
    }

    #[test]
    fn missing_and_empty_files_are_named() {
        let dir = std::env::temp_dir().join(format!("isr-tls-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "").expect("write");
        let err = load_certs(&empty).expect_err("empty");
        assert!(err.to_string().contains("empty.pem"), "{err}");
        let err = load_key(&dir.join("missing.key")).expect_err("missing");
        assert!(err.to_string().contains("missing.key"), "{err}");
        let _ = std::fs::remove_dir_all(dir);
    }
}
