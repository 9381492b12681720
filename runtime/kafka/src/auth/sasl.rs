//! The server side of a SASL login, whatever carries its tokens: PLAIN (RFC 4616) and SCRAM,
//! judged against the users' SCRAM credentials.

use super::scram::{self, Mechanism, ScramCredential, ServerFirst};
use super::{AuthError, SecurityProtocol, SecurityState};
use sha2::{Digest, Sha256};
use std::sync::OnceLock;

pub const PLAIN: &str = "PLAIN";

/// A SASL mechanism a broker offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaslMechanism {
    Plain,
    Scram(Mechanism),
}

impl SaslMechanism {
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => PLAIN,
            SaslMechanism::Scram(m) => m.name(),
        }
    }

    pub fn from_name(name: &str) -> Option<SaslMechanism> {
        if name.eq_ignore_ascii_case(PLAIN) {
            return Some(SaslMechanism::Plain);
        }
        Mechanism::from_name(name).map(SaslMechanism::Scram)
    }

    /// The mechanisms a listener offers: SCRAM everywhere SASL is; PLAIN only under TLS, since
    /// it sends the password itself.
    pub fn offered(protocol: SecurityProtocol) -> Vec<SaslMechanism> {
        let mut offered: Vec<SaslMechanism> = Mechanism::ALL
            .into_iter()
            .map(SaslMechanism::Scram)
            .collect();
        if protocol.tls() {
            offered.push(SaslMechanism::Plain);
        }
        offered
    }
}

/// What a step of the login produced.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Send this to the client and wait for its next token.
    Challenge(Vec<u8>),
    /// The client is `user`; send the last token.
    Authenticated { user: String, last: Vec<u8> },
}

/// One login in progress.
pub struct SaslServer {
    state: State,
}

enum State {
    Start(SaslMechanism),
    ScramFinal(Box<ServerFirst>),
    Over,
}

impl SaslServer {
    pub fn new(mechanism: SaslMechanism) -> SaslServer {
        SaslServer {
            state: State::Start(mechanism),
        }
    }

    /// The user `token` will be judged as, if this step checks a password (PLAIN's only
    /// token, SCRAM's final one): what a login waits its turn under (see
    /// [`super::throttle`]).
    pub fn judged_user(&self, token: &[u8]) -> Option<String> {
        match &self.state {
            State::Start(SaslMechanism::Plain) => plain_parts(token).ok().map(|(u, _)| u.into()),
            State::ScramFinal(first) => Some(first.user().to_owned()),
            _ => None,
        }
    }

    /// Takes the client's next token. Any error ends the login.
    pub fn step(&mut self, token: &[u8], users: &SecurityState) -> Result<Step, AuthError> {
        match std::mem::replace(&mut self.state, State::Over) {
            State::Start(SaslMechanism::Plain) => {
                let user = plain(token, users)?;
                Ok(Step::Authenticated {
                    user,
                    last: Vec::new(),
                })
            }
            State::Start(SaslMechanism::Scram(m)) => {
                let (first, message) = scram::server_first(
                    m,
                    token,
                    |user| users.users.get(user)?.get(&m).cloned(),
                    decoy_salt,
                )?;
                self.state = State::ScramFinal(Box::new(first));
                Ok(Step::Challenge(message))
            }
            State::ScramFinal(first) => {
                let (user, last) = first.finish(token)?;
                Ok(Step::Authenticated { user, last })
            }
            State::Over => Err(AuthError::Malformed("the login is over".into())),
        }
    }
}

/// The user and password of a PLAIN token (`authzid NUL authcid NUL password`).
fn plain_parts(token: &[u8]) -> Result<(&str, &str), AuthError> {
    let text = std::str::from_utf8(token)
        .map_err(|_| AuthError::Malformed("PLAIN token is not UTF-8".into()))?;
    let mut parts = text.split('\0');
    let (Some(authzid), Some(user), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(AuthError::Malformed(
            "PLAIN token is not authzid NUL user NUL password".into(),
        ));
    };
    if user.is_empty() || (!authzid.is_empty() && authzid != user) {
        return Err(AuthError::Malformed(
            "PLAIN authorization id differs from the user name".into(),
        ));
    }
    Ok((user, password))
}

/// Checks a PLAIN token against the user's SCRAM credential. An unknown user costs the same
/// key derivation as a known one.
fn plain(token: &[u8], users: &SecurityState) -> Result<String, AuthError> {
    let (user, password) = plain_parts(token)?;
    let stored = users.users.get(user).and_then(|credentials| {
        [Mechanism::Sha512, Mechanism::Sha256]
            .into_iter()
            .find_map(|m| Some((m, credentials.get(&m)?.clone())))
    });
    match stored {
        Some((m, credential)) if credential.verify_password(m, password) => Ok(user.to_owned()),
        Some(_) => Err(AuthError::BadCredentials),
        None => {
            let decoy = ScramCredential::from_salted_password(
                Mechanism::Sha512,
                &[0; 64],
                decoy_salt(user),
                scram::DEFAULT_ITERATIONS,
            );
            let _ = decoy.verify_password(Mechanism::Sha512, password);
            Err(AuthError::BadCredentials)
        }
    }
}

/// The salt shown for a user who has no credential: derived from the name and a secret of
/// this process, so it looks like any salt and is the same on every try.
fn decoy_salt(user: &str) -> Vec<u8> {
    static SECRET: OnceLock<Vec<u8>> = OnceLock::new();
    let secret = SECRET.get_or_init(|| {
        super::random_bytes(32).unwrap_or_else(|_| b"isr decoy salt without randomness".to_vec())
    });
    let mut hasher = Sha256::new();
    hasher.update(secret);
    hasher.update(user.as_bytes());
    hasher.finalize()[..24].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::scram::ScramClient;

    fn users() -> SecurityState {
        let mut state = SecurityState::default();
        let credential =
            ScramCredential::from_password(Mechanism::Sha512, "pw", 4096).expect("credential");
        state
            .users
            .entry("alice".into())
            .or_default()
            .insert(Mechanism::Sha512, credential);
        state
    }

    #[test]
    fn plain_and_scram_log_in_and_refuse_alike() {
        let users = users();
        let mut plain = SaslServer::new(SaslMechanism::Plain);
        assert_eq!(
            plain.step(b"\0alice\0pw", &users),
            Ok(Step::Authenticated {
                user: "alice".into(),
                last: vec![]
            })
        );
        for bad in [&b"\0alice\0nope"[..], b"\0bob\0pw"] {
            let mut plain = SaslServer::new(SaslMechanism::Plain);
            assert_eq!(plain.step(bad, &users), Err(AuthError::BadCredentials));
        }
        let mut plain = SaslServer::new(SaslMechanism::Plain);
        assert!(matches!(
            plain.step(b"alice", &users),
            Err(AuthError::Malformed(_))
        ));

        let m = Mechanism::Sha512;
        let (client, first) = ScramClient::start(m, "alice", "pw").expect("start");
        let mut server = SaslServer::new(SaslMechanism::Scram(m));
        let Ok(Step::Challenge(challenge)) = server.step(&first, &users) else {
            panic!("challenge");
        };
        let (_, last) = client.respond(&challenge).expect("respond");
        assert!(matches!(
            server.step(&last, &users),
            Ok(Step::Authenticated { user, .. }) if user == "alice"
        ));
        assert!(server.step(b"more", &users).is_err(), "a login ends once");
        assert_eq!(decoy_salt("bob"), decoy_salt("bob"));
        assert_ne!(decoy_salt("bob"), decoy_salt("carol"));
    }

    #[test]
    fn plain_is_offered_under_tls_only() {
        assert!(!SaslMechanism::offered(SecurityProtocol::SaslPlaintext)
            .contains(&SaslMechanism::Plain));
        assert!(SaslMechanism::offered(SecurityProtocol::SaslSsl).contains(&SaslMechanism::Plain));
        assert_eq!(
            SaslMechanism::from_name("scram-sha-512"),
            Some(SaslMechanism::Scram(Mechanism::Sha512))
        );
    }
}
