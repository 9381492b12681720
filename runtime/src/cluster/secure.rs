//! `isr cluster --security ssl|sasl-ssl`: a throwaway CA and a certificate for every process,
//! mutual TLS inside the cluster, TLS listeners with ACLs for Kafka clients, an admin user,
//! and a `client.properties` that kcat (`-F`), confluent-kafka and the isr commands
//! (`--command-config`) read.

use crate::broker::AccessArgs;
use crate::security::certs::{Ca, CertError, Issued};
use crate::security::{ClusterTls, SecurityError, TlsArgs};
use crate::wire::admin::{Request, Response};
use isr_kafka::auth::scram::{Mechanism, ScramCredential, DEFAULT_ITERATIONS};
use isr_kafka::auth::{SecurityAnswer, SecurityChange, SecurityProtocol};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The super user `isr cluster --security` makes.
pub const ADMIN: &str = "admin";

/// How the cluster's Kafka listeners are secured.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Security {
    /// No TLS, no authentication (the default).
    #[default]
    Plaintext,
    /// TLS listeners; clients are who their certificate names (the admin's is written).
    Ssl,
    /// TLS listeners and SASL (SCRAM-SHA-512 for the admin user).
    SaslSsl,
}

impl Security {
    pub fn protocol(self) -> SecurityProtocol {
        match self {
            Security::Plaintext => SecurityProtocol::Plaintext,
            Security::Ssl => SecurityProtocol::Ssl,
            Security::SaslSsl => SecurityProtocol::SaslSsl,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SecureError {
    #[error(transparent)]
    Cert(#[from] CertError),
    #[error(transparent)]
    Security(#[from] SecurityError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("creating the admin user: {0}")]
    Admin(String),
}

/// The certificates of a secured cluster, written under `dir/tls`.
pub struct Pki {
    ca: Ca,
    dir: PathBuf,
    /// The admin's certificate, which `isr cluster` itself and the admin's clients use.
    pub admin: Issued,
}

impl Pki {
    pub fn create(dir: &Path) -> Result<Pki, SecureError> {
        let dir = std::path::absolute(dir.join("tls")).map_err(|source| SecureError::Io {
            what: format!("resolving {}", dir.display()),
            source,
        })?;
        let ca = Ca::create(&dir)?;
        let admin = ca.issue(ADMIN, &dir)?;
        Ok(Pki { ca, dir, admin })
    }

    pub fn ca(&self) -> &Path {
        &self.ca.cert
    }

    /// The flags of a process whose certificate names `name` (`broker-1`, `controller-1`).
    pub fn flags_for(&self, name: &str) -> Result<TlsArgs, SecureError> {
        let issued = self.ca.issue(name, &self.dir)?;
        Ok(self.args(&issued))
    }

    fn args(&self, issued: &Issued) -> TlsArgs {
        TlsArgs {
            tls_cert: Some(issued.cert.clone()),
            tls_key: Some(issued.key.clone()),
            tls_ca: Some(self.ca.cert.clone()),
        }
    }

    /// `isr cluster`'s own TLS identity: the admin's.
    pub fn admin_tls(&self) -> Result<ClusterTls, SecureError> {
        self.args(&self.admin)
            .load(None)?
            .ok_or_else(|| SecureError::Admin("no admin certificate".into()))
    }
}

/// The brokers' authorizer: ACLs on, the admin a super user.
pub fn access() -> AccessArgs {
    AccessArgs {
        acls: true,
        super_users: vec![isr_kafka::auth::user_principal(ADMIN)],
    }
}

/// Gives the admin user SCRAM-SHA-256 and SCRAM-SHA-512 credentials for a new random password,
/// through the active controller (as the admin's certificate); returns the password.
pub async fn create_admin(controllers: &str, tls: &ClusterTls) -> Result<String, SecureError> {
    let password =
        isr_kafka::auth::random_password(18).map_err(|e| SecureError::Admin(e.to_string()))?;
    let mut upserts = Vec::new();
    for m in Mechanism::ALL {
        let credential = ScramCredential::from_password(m, &password, DEFAULT_ITERATIONS)
            .map_err(|e| SecureError::Admin(e.to_string()))?;
        upserts.push((ADMIN.to_string(), m, credential));
    }
    let change = SecurityChange::AlterScram {
        upserts,
        deletions: Vec::new(),
    };
    let answer = crate::status::ask_active(controllers, Request::Security(change), Some(tls))
        .await
        .map_err(|e| SecureError::Admin(e.to_string()))?;
    match answer {
        Response::Security(SecurityAnswer::Scram(results))
            if results.iter().all(|(_, r)| r.is_ok()) =>
        {
            Ok(password)
        }
        other => Err(SecureError::Admin(format!("unexpected answer {other:?}"))),
    }
}

/// Writes `dir/client.properties` (mode 0600: it holds the password) in librdkafka's format.
pub fn write_client_config(
    dir: &Path,
    security: Security,
    bootstrap: &str,
    pki: &Pki,
    password: Option<&str>,
) -> Result<PathBuf, SecureError> {
    let path =
        std::path::absolute(dir.join("client.properties")).map_err(|source| SecureError::Io {
            what: format!("resolving {}", dir.display()),
            source,
        })?;
    let mut text = format!(
        "# Written by isr cluster --security: kcat -F {path}, or --command-config for isr.\n\
         bootstrap.servers={bootstrap}\n\
         security.protocol={}\n\
         ssl.ca.location={}\n",
        security.protocol(),
        pki.ca().display(),
        path = path.display(),
    );
    match password {
        Some(password) => text.push_str(&format!(
            "sasl.mechanism={}\nsasl.username={ADMIN}\nsasl.password={password}\n",
            Mechanism::Sha512.name()
        )),
        None => text.push_str(&format!(
            "ssl.certificate.location={}\nssl.key.location={}\n",
            pki.admin.cert.display(),
            pki.admin.key.display()
        )),
    }
    let io = |source| SecureError::Io {
        what: format!("writing {}", path.display()),
        source,
    };
    let mut file = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)
            .map_err(io)?
    };
    file.write_all(text.as_bytes()).map_err(io)?;
    // An existing file keeps its mode when rewritten: set it.
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .map_err(io)?;
    Ok(path)
}
