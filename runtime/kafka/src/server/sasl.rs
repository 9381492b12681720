//! A connection's session: which listener it came through, who it is, and its SASL login
//! (SaslHandshake, then SaslAuthenticate until the mechanism is done).
//!
//! On a SASL listener nothing but ApiVersions, SaslHandshake and SaslAuthenticate is served
//! before the login succeeds; a failed login is answered SASL_AUTHENTICATION_FAILED at once
//! and the connection closed; repeated failures from one address wait (see
//! [`crate::auth::throttle`]).

use super::access::Access;
use crate::auth::acl::Authorizer;
use crate::auth::sasl::{SaslMechanism, SaslServer, Step};
use crate::auth::throttle::LoginThrottle;
use crate::auth::{user_principal, AuthError, SecurityProtocol, SecurityState, ANONYMOUS};
use crate::error::KafkaError;
use bytes::Bytes;
use kafka_protocol::messages::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use std::net::SocketAddr;
use std::sync::Arc;

/// ILLEGAL_SASL_STATE: a SASL request out of turn (or on a listener without SASL).
const ILLEGAL_SASL_STATE: i16 = 34;
/// UNSUPPORTED_SASL_MECHANISM: a mechanism this listener does not offer.
const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
/// SASL_AUTHENTICATION_FAILED.
pub const SASL_AUTHENTICATION_FAILED: i16 = 58;

/// Where a connection came from, as the runtime accepted it.
#[derive(Clone, Debug)]
pub struct ConnectionInfo {
    /// The security protocol of the listener it reached (after any TLS handshake).
    pub protocol: SecurityProtocol,
    pub peer: SocketAddr,
    /// `User:NAME` of a verified TLS client certificate, on SSL listeners.
    pub tls_principal: Option<String>,
    /// Failed logins of the whole broker, by address.
    pub logins: Arc<LoginThrottle>,
}

impl ConnectionInfo {
    /// A PLAINTEXT connection from `peer` (tests, and brokers without security).
    pub fn plaintext(peer: SocketAddr) -> ConnectionInfo {
        ConnectionInfo {
            protocol: SecurityProtocol::Plaintext,
            peer,
            tls_principal: None,
            logins: Arc::default(),
        }
    }
}

pub(super) struct Session {
    info: ConnectionInfo,
    /// `None` until a SASL login succeeds.
    principal: Option<String>,
    login: Option<Login>,
    /// Set when the connection must close once the current answer is sent.
    pub closing: Option<KafkaError>,
}

struct Login {
    mechanism: SaslMechanism,
    server: SaslServer,
    /// Tokens come bare, without SaslAuthenticate (a v0 handshake).
    raw: bool,
}

impl Session {
    pub fn new(info: ConnectionInfo) -> Session {
        let principal = match info.protocol {
            SecurityProtocol::Plaintext => Some(ANONYMOUS.to_owned()),
            SecurityProtocol::Ssl => Some(
                info.tls_principal
                    .clone()
                    .unwrap_or_else(|| ANONYMOUS.to_owned()),
            ),
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl => None,
        };
        Session {
            info,
            principal,
            login: None,
            closing: None,
        }
    }

    pub fn authenticated(&self) -> bool {
        self.principal.is_some()
    }

    /// Who this request comes from, for the authorizer; `None` before authentication.
    pub fn access(&self, authorizer: Authorizer) -> Option<Access> {
        Some(Access {
            principal: self.principal.clone()?,
            host: self.info.peer.ip().to_string(),
            listener: self.info.protocol,
            authorizer,
        })
    }

    /// SaslHandshake: v1 and later carry the tokens in SaslAuthenticate requests; after a v0
    /// handshake they come as bare length-prefixed frames ([`Session::raw_token`]).
    pub fn handshake(
        &mut self,
        request: SaslHandshakeRequest,
        version: i16,
    ) -> SaslHandshakeResponse {
        let offered = SaslMechanism::offered(self.info.protocol);
        let names = offered
            .iter()
            .map(|m| StrBytes::from_static_str(m.name()))
            .collect();
        let answer = SaslHandshakeResponse::default();
        if !self.info.protocol.sasl() || self.authenticated() {
            return answer.with_error_code(ILLEGAL_SASL_STATE);
        }
        match SaslMechanism::from_name(request.mechanism.as_str()).filter(|m| offered.contains(m)) {
            Some(mechanism) => {
                self.login = Some(Login {
                    mechanism,
                    server: SaslServer::new(mechanism),
                    raw: version == 0,
                });
                answer.with_mechanisms(names)
            }
            None => answer
                .with_error_code(UNSUPPORTED_SASL_MECHANISM)
                .with_mechanisms(names),
        }
    }

    /// Whether the next frame is a bare SASL token (after a v0 handshake).
    pub fn expects_raw_token(&self) -> bool {
        self.login.as_ref().is_some_and(|l| l.raw)
    }

    /// A bare token after a v0 handshake: the bare answer, framed. A failure has no answer in
    /// this version: the connection closes.
    pub async fn raw_token(&mut self, token: &[u8], users: &SecurityState) -> Option<Bytes> {
        let reply = self.take_token(token, users).await.ok()?;
        let mut framed = Vec::with_capacity(reply.len() + 4);
        framed.extend_from_slice(&u32::try_from(reply.len()).ok()?.to_be_bytes());
        framed.extend_from_slice(&reply);
        Some(Bytes::from(framed))
    }

    /// Takes one SaslAuthenticate token. A failure is answered and then closes the connection.
    pub async fn authenticate(
        &mut self,
        request: SaslAuthenticateRequest,
        users: &SecurityState,
    ) -> SaslAuthenticateResponse {
        let answer = SaslAuthenticateResponse::default();
        if self.login.is_none() {
            let message = "SaslAuthenticate without a SaslHandshake choosing a mechanism";
            self.closing = Some(KafkaError::Unauthenticated(message.into()));
            return answer
                .with_error_code(ILLEGAL_SASL_STATE)
                .with_error_message(Some(StrBytes::from_static_str(message)));
        }
        match self.take_token(&request.auth_bytes, users).await {
            Ok(token) => answer.with_auth_bytes(Bytes::from(token)),
            Err(message) => answer
                .with_error_code(SASL_AUTHENTICATION_FAILED)
                .with_error_message(Some(StrBytes::from_string(message))),
        }
    }

    /// One step of the login in progress: the token to send back, or why it failed (the
    /// connection is then marked to close, and the failure counted against the address).
    async fn take_token(&mut self, token: &[u8], users: &SecurityState) -> Result<Vec<u8>, String> {
        let Some(login) = self.login.as_mut() else {
            self.closing = Some(KafkaError::Unauthenticated(
                "a SASL token out of turn".into(),
            ));
            return Err("no login in progress".into());
        };
        // The step that checks a password waits its turn first (failed logins slow down).
        let judged = login.server.judged_user(token);
        if let Some(user) = &judged {
            let delay = self.info.logins.delay(self.info.peer.ip(), user);
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
        }
        let mechanism = login.mechanism.name();
        match login.server.step(token, users) {
            Ok(Step::Challenge(token)) => Ok(token),
            Ok(Step::Authenticated { user, last }) => {
                self.login = None;
                self.principal = Some(user_principal(&user));
                Ok(last)
            }
            Err(e) => {
                self.login = None;
                let user = judged.unwrap_or_default();
                self.info.logins.failed(self.info.peer.ip(), &user);
                let message = match &e {
                    AuthError::BadCredentials => format!(
                        "Authentication failed during authentication due to invalid \
                         credentials with SASL mechanism {mechanism}"
                    ),
                    other => format!("Authentication failed: {other}"),
                };
                self.closing = Some(KafkaError::AuthenticationFailed {
                    peer: self.info.peer,
                    mechanism,
                    reason: e.to_string(),
                });
                Err(message)
            }
        }
    }
}
