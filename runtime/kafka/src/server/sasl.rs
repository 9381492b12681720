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
    /// Whether this attempt has waited its turn (see the throttle).
    waited: bool,
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
            authorizer,
        })
    }

    pub fn handshake(&mut self, request: SaslHandshakeRequest) -> SaslHandshakeResponse {
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
                    waited: false,
                });
                answer.with_mechanisms(names)
            }
            None => answer
                .with_error_code(UNSUPPORTED_SASL_MECHANISM)
                .with_mechanisms(names),
        }
    }

    /// Takes one SaslAuthenticate token. A failure is answered and then closes the connection.
    pub async fn authenticate(
        &mut self,
        request: SaslAuthenticateRequest,
        users: &SecurityState,
    ) -> SaslAuthenticateResponse {
        let answer = SaslAuthenticateResponse::default();
        let Some(login) = self.login.as_mut() else {
            let message = "SaslAuthenticate without a SaslHandshake choosing a mechanism";
            self.closing = Some(KafkaError::Unauthenticated(message.into()));
            return answer
                .with_error_code(ILLEGAL_SASL_STATE)
                .with_error_message(Some(StrBytes::from_static_str(message)));
        };
        if !login.waited {
            login.waited = true;
            let delay = self.info.logins.delay(self.info.peer.ip());
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
        }
        let mechanism = login.mechanism.name();
        match login.server.step(&request.auth_bytes, users) {
            Ok(Step::Challenge(token)) => answer.with_auth_bytes(Bytes::from(token)),
            Ok(Step::Authenticated { user, last }) => {
                self.login = None;
                self.principal = Some(user_principal(&user));
                answer.with_auth_bytes(Bytes::from(last))
            }
            Err(e) => {
                self.login = None;
                self.info.logins.failed(self.info.peer.ip());
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
                answer
                    .with_error_code(SASL_AUTHENTICATION_FAILED)
                    .with_error_message(Some(StrBytes::from_string(message)))
            }
        }
    }
}
