//! How the isr client commands reach a secured listener: a properties file in librdkafka's
//! format (`security.protocol`, `sasl.mechanism`, `sasl.username`, `sasl.password`,
//! `ssl.ca.location`, and optionally `ssl.certificate.location` with `ssl.key.location`), as
//! `isr cluster --security` writes it and kcat reads it (`kcat -F`). Given once per process
//! (`isr --command-config FILE ...`); without it, connections are PLAINTEXT.

use super::error::ClientError;
use crate::auth::sasl::SaslMechanism;
use crate::auth::tls::{self, Identity};
use crate::auth::SecurityProtocol;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// A SASL login: mechanism, user name and password.
#[derive(Clone)]
pub struct SaslLogin {
    pub mechanism: SaslMechanism,
    pub user: String,
    pub password: String,
}

/// How to connect: the listener's protocol, whom to trust under TLS, and who to log in as.
#[derive(Clone)]
pub struct ClientSecurity {
    pub protocol: SecurityProtocol,
    pub tls: Option<Arc<rustls::ClientConfig>>,
    pub sasl: Option<SaslLogin>,
}

impl Default for ClientSecurity {
    fn default() -> ClientSecurity {
        ClientSecurity {
            protocol: SecurityProtocol::Plaintext,
            tls: None,
            sasl: None,
        }
    }
}

/// The keys read; any other key under `security.`, `sasl.` or `ssl.` is refused (a typo there
/// would silently weaken or break the connection), and keys of other areas (`client.id`,
/// `bootstrap.servers`, ...) are left to the tools that use them.
const KEYS: &[&str] = &[
    "security.protocol",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
];

impl ClientSecurity {
    /// Reads a properties file; relative paths in it are taken from the file's directory.
    pub fn from_file(path: &Path) -> Result<ClientSecurity, ClientError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ClientError::Usage(format!("--command-config {}: {e}", path.display())))?;
        let base = path.parent().unwrap_or(Path::new("."));
        ClientSecurity::from_properties(&text, base)
            .map_err(|e| ClientError::Usage(format!("--command-config {}: {e}", path.display())))
    }

    fn from_properties(text: &str, base: &Path) -> Result<ClientSecurity, String> {
        let mut values = std::collections::BTreeMap::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
                continue;
            }
            let (key, value) = line
                .split_once('=')
                .ok_or_else(|| format!("line {}: expected key=value", n + 1))?;
            let key = key.trim();
            let scoped = ["security.", "sasl.", "ssl."]
                .iter()
                .any(|p| key.starts_with(p));
            if scoped && !KEYS.contains(&key) {
                return Err(format!(
                    "line {}: unknown key {key}; known: {}",
                    n + 1,
                    KEYS.join(", ")
                ));
            }
            values.insert(key.to_owned(), value.trim().to_owned());
        }
        let get = |k: &str| values.get(k).map(String::as_str).filter(|v| !v.is_empty());
        let protocol = match get("security.protocol") {
            None => SecurityProtocol::Plaintext,
            Some(p) => SecurityProtocol::from_name(p).ok_or_else(|| {
                format!("security.protocol={p}: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
            })?,
        };
        let path = |k: &str| get(k).map(|p| base.join(p));
        let tls = if protocol.tls() {
            let ca: PathBuf = path("ssl.ca.location")
                .ok_or_else(|| format!("security.protocol={protocol} needs ssl.ca.location"))?;
            let identity = match (path("ssl.certificate.location"), path("ssl.key.location")) {
                (Some(cert), Some(key)) => {
                    Some(Identity::load(&cert, &key).map_err(|e| e.to_string())?)
                }
                (None, None) => None,
                _ => return Err("ssl.certificate.location and ssl.key.location go together".into()),
            };
            let roots = tls::roots(&ca).map_err(|e| e.to_string())?;
            Some(Arc::new(
                tls::client_config(roots, identity).map_err(|e| e.to_string())?,
            ))
        } else {
            None
        };
        let sasl = if protocol.sasl() {
            let mechanism = get("sasl.mechanism")
                .or(get("sasl.mechanisms"))
                .ok_or_else(|| format!("security.protocol={protocol} needs sasl.mechanism"))?;
            let mechanism = SaslMechanism::from_name(mechanism).ok_or_else(|| {
                format!("sasl.mechanism={mechanism}: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
            })?;
            let user = get("sasl.username").ok_or("SASL needs sasl.username")?;
            let password = values
                .get("sasl.password")
                .ok_or("SASL needs sasl.password")?;
            Some(SaslLogin {
                mechanism,
                user: user.to_owned(),
                password: password.clone(),
            })
        } else {
            None
        };
        Ok(ClientSecurity {
            protocol,
            tls,
            sasl,
        })
    }
}

static CONFIGURED: OnceLock<ClientSecurity> = OnceLock::new();

/// Sets how this process's client commands connect; the first call wins.
pub fn configure(security: ClientSecurity) {
    let _ = CONFIGURED.set(security);
}

/// How connections are made: as configured, else PLAINTEXT.
pub fn current() -> ClientSecurity {
    CONFIGURED.get().cloned().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_say_what_is_missing_or_misspelt() {
        let base = Path::new("/nonexistent");
        let plain = ClientSecurity::from_properties("# none\nclient.id=x\n", base).expect("ok");
        assert_eq!(plain.protocol, SecurityProtocol::Plaintext);
        let sasl = ClientSecurity::from_properties(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n\
             sasl.username=alice\nsasl.password=p=w\n",
            base,
        )
        .expect("sasl");
        let login = sasl.sasl.expect("login");
        assert_eq!(login.password, "p=w", "values may hold =");
        for (text, wanted) in [
            ("security.protocol=TLS", "SASL_SSL"),
            ("sasl.pasword=x", "unknown key"),
            ("security.protocol=SASL_SSL", "ssl.ca.location"),
            ("security.protocol=SASL_PLAINTEXT", "sasl.mechanism"),
            (
                "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI",
                "SCRAM-SHA-512",
            ),
            (
                "security.protocol=SSL\nssl.ca.location=ca.pem",
                "/nonexistent/ca.pem",
            ),
            ("no equals sign", "line 1"),
        ] {
            let err = ClientSecurity::from_properties(text, base)
                .err()
                .expect(text);
            assert!(err.contains(wanted), "{text}: {err}");
        }
    }
}
