//! A throwaway cluster CA and its certificates (rcgen), for `isr cluster --security`: a demo
//! on one machine, not a PKI. Every certificate names its role in its subject CN (see
//! [`super::Role`]), is valid for 127.0.0.1 and localhost, and serves both TLS ends.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long the demo's certificates are valid.
const VALIDITY: Duration = Duration::from_secs(365 * 24 * 3600);

#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("making a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A CA that signs the cluster's certificates.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    /// Where its certificate was written.
    pub cert: PathBuf,
}

/// Where a certificate and its key were written.
pub struct Issued {
    pub cert: PathBuf,
    pub key: PathBuf,
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> CertError + '_ {
    move |source| CertError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Writes `text` to `path`, readable by its owner only when it is `secret`.
fn write(path: &Path, text: &str, secret: bool) -> Result<(), CertError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    if secret {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path).map_err(io_error(path))?;
    file.write_all(text.as_bytes()).map_err(io_error(path))?;
    if secret {
        // An existing file keeps its mode when rewritten: set it.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(io_error(path))?;
    }
    Ok(())
}

/// Valid from a day ago (clocks differ a little) for [`VALIDITY`].
fn validity(params: &mut CertificateParams) {
    let now = rcgen::date_time_ymd(1970, 1, 1)
        + SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
    params.not_before = now - Duration::from_secs(24 * 3600);
    params.not_after = now + VALIDITY;
}

impl Ca {
    /// A new CA, its certificate written to `dir/ca.pem` (its key stays in memory: nothing
    /// else can ever be signed by it).
    pub fn create(dir: &Path) -> Result<Ca, CertError> {
        std::fs::create_dir_all(dir).map_err(io_error(dir))?;
        let mut params = CertificateParams::default();
        // A name of its own: certificates name their issuer, and two throwaway CAs of one name
        // would be told apart only by a failed signature.
        let tag = isr_kafka::auth::random_password(6).unwrap_or_default();
        params
            .distinguished_name
            .push(DnType::CommonName, format!("isr cluster CA {tag}"));
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        validity(&mut params);
        let key = KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        let path = dir.join("ca.pem");
        write(&path, &cert.pem(), false)?;
        Ok(Ca {
            issuer: Issuer::new(params, key),
            cert: path,
        })
    }

    /// A certificate for `name` (the CN: `broker-1`, `controller-1`, `admin`), written with
    /// its key to `dir/NAME.pem` and `dir/NAME.key` (mode 0600).
    pub fn issue(&self, name: &str, dir: &Path) -> Result<Issued, CertError> {
        let mut params = CertificateParams::new(vec!["localhost".to_string()])?;
        params
            .subject_alt_names
            .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        validity(&mut params);
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        let issued = Issued {
            cert: dir.join(format!("{name}.pem")),
            key: dir.join(format!("{name}.key")),
        };
        write(&issued.cert, &cert.pem(), false)?;
        write(&issued.key, &key.serialize_pem(), true)?;
        Ok(issued)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::{Role, TlsArgs};

    #[test]
    fn issued_certificates_load_with_their_roles_and_refuse_another_ca() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ca = Ca::create(&dir.path().join("a")).expect("ca");
        let broker = ca.issue("broker-3", &dir.path().join("a")).expect("broker");
        let args = |issued: &Issued, ca: &Path| TlsArgs {
            tls_cert: Some(issued.cert.clone()),
            tls_key: Some(issued.key.clone()),
            tls_ca: Some(ca.to_owned()),
        };
        let loaded = args(&broker, &ca.cert)
            .load(Some(&Role::Broker(isr::BrokerId(3))))
            .expect("loads")
            .expect("configured");
        assert_eq!(loaded.role, Role::Broker(isr::BrokerId(3)));
        let wrong_id = args(&broker, &ca.cert).load(Some(&Role::Broker(isr::BrokerId(4))));
        assert!(
            wrong_id
                .err()
                .is_some_and(|e| e.to_string().contains("names broker 3")),
            "a broker must run with its own id"
        );
        let other = Ca::create(&dir.path().join("b")).expect("other ca");
        let foreign = args(&broker, &other.cert).load(None);
        let err = foreign.err().expect("refused").to_string();
        assert!(err.contains("not signed by the cluster CA"), "{err}");
        let mode = std::fs::metadata(&broker.key).expect("key").permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
            0o600
        );
        assert!(TlsArgs::default().load(None).expect("none").is_none());
    }
}
