//! One connection to one broker: TLS and SASL as configured ([`super::security`]), version
//! negotiation, and request/response exchange.

use super::error::ClientError;
use super::security::{self, ClientSecurity, SaslLogin};
use crate::auth::sasl::SaslMechanism;
use crate::auth::scram::ScramClient;
use crate::versions::SUPPORTED;
use crate::Stream;
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, RequestHeader, ResponseHeader, SaslAuthenticateRequest,
    SaslHandshakeRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use std::collections::HashMap;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Client id sent in request headers; brokers only log it.
const CLIENT_ID: &str = "isr";
/// How long to wait for a broker to accept a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long to wait for an answer: beyond the longest a broker may take by request
/// (produce timeout 30 s), so a silent broker counts as gone and the request is rerouted.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(45);
/// Largest response accepted: a bigger length prefix means a broken stream.
const MAX_RESPONSE_BYTES: usize = 256 * 1024 * 1024;
/// The newest Fetch the client sends: it names the topics it fetches
/// ([`super::consume::fetch_request`]), as Fetch does up to v12. From v13 a topic is named by its
/// id, which a topic created before isr kept ids does not have.
const FETCH_BY_NAME: i16 = 12;

/// A negotiated connection. Requests are sent one at a time; perf runs use several
/// connections for concurrency.
pub struct Connection {
    addr: String,
    stream: BufReader<Box<dyn Stream>>,
    next_correlation: i32,
    /// Version to use per API: the highest both isr and the broker speak.
    versions: HashMap<i16, i16>,
}

impl Connection {
    /// Connects as this process is configured to ([`security::configure`]).
    pub async fn open(addr: &str) -> Result<Connection, ClientError> {
        Connection::open_with(addr, &security::current()).await
    }

    /// Connects (with TLS if `security` says so), negotiates versions with ApiVersions v0,
    /// which every broker answers, and logs in if `security` has a SASL login.
    pub async fn open_with(
        addr: &str,
        security: &ClientSecurity,
    ) -> Result<Connection, ClientError> {
        let connect = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await;
        let stream = connect
            .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
            .map_err(|source| ClientError::Connect {
                addr: addr.to_owned(),
                source,
            })?;
        // Requests are small and latency matters (acks=all round trips).
        stream
            .set_nodelay(true)
            .map_err(|source| ClientError::Connect {
                addr: addr.to_owned(),
                source,
            })?;
        let stream: Box<dyn Stream> = match &security.tls {
            Some(config) => {
                let tls_error = |reason: String| ClientError::Tls {
                    addr: addr.to_owned(),
                    reason,
                };
                let name =
                    crate::auth::tls::server_name(addr).map_err(|e| tls_error(e.to_string()))?;
                let connector = tokio_rustls::TlsConnector::from(config.clone());
                let handshake = connector.connect(name, stream);
                match tokio::time::timeout(CONNECT_TIMEOUT, handshake).await {
                    Ok(Ok(tls)) => Box::new(tls),
                    Ok(Err(e)) => return Err(tls_error(e.to_string())),
                    Err(_) => return Err(tls_error("no TLS handshake within 5 s".into())),
                }
            }
            None => Box::new(stream),
        };
        let mut conn = Connection {
            addr: addr.to_owned(),
            stream: BufReader::new(stream),
            next_correlation: 0,
            versions: HashMap::new(),
        };
        let offered = conn.exchange(&ApiVersionsRequest::default(), 0).await?;
        if let Some(e) = ClientError::from_code(offered.error_code, None) {
            return Err(e);
        }
        for &(api, lo, hi) in SUPPORTED {
            let hi = match api {
                ApiKey::Fetch => hi.min(FETCH_BY_NAME),
                _ => hi,
            };
            if let Some(k) = offered.api_keys.iter().find(|k| k.api_key == api as i16) {
                let best = hi.min(k.max_version);
                if best >= lo.max(k.min_version) {
                    conn.versions.insert(api as i16, best);
                }
            }
        }
        if let Some(login) = &security.sasl {
            conn.log_in(login).await?;
        }
        Ok(conn)
    }

    /// SaslHandshake, then SaslAuthenticate until the mechanism is done. A SCRAM server must
    /// prove it holds the user's credential too.
    async fn log_in(&mut self, login: &SaslLogin) -> Result<(), ClientError> {
        let mechanism = login.mechanism;
        let request = SaslHandshakeRequest::default()
            .with_mechanism(StrBytes::from_static_str(mechanism.name()));
        let answer = self.send(&request).await?;
        if answer.error_code != 0 {
            let offered: Vec<&str> = answer.mechanisms.iter().map(|m| m.as_str()).collect();
            return Err(ClientError::Kafka {
                code: answer.error_code,
                message: format!(
                    "{} refused {}; it offers {}",
                    self.addr,
                    mechanism.name(),
                    offered.join(", ")
                ),
            });
        }
        let addr = self.addr.clone();
        let scram_error = move |e: crate::auth::AuthError| ClientError::Protocol {
            addr: addr.clone(),
            reason: e.to_string(),
        };
        match mechanism {
            SaslMechanism::Plain => {
                let token = format!("\0{}\0{}", login.user, login.password);
                self.authenticate(token.into_bytes()).await?;
            }
            SaslMechanism::Scram(m) => {
                let (client, first) =
                    ScramClient::start(m, &login.user, &login.password).map_err(&scram_error)?;
                let challenge = self.authenticate(first).await?;
                let (expect, last) = client.respond(&challenge).map_err(&scram_error)?;
                let proof = self.authenticate(last).await?;
                expect.verify(&proof).map_err(&scram_error)?;
            }
        }
        Ok(())
    }

    /// One SaslAuthenticate round: the broker's token, or its refusal.
    async fn authenticate(&mut self, token: Vec<u8>) -> Result<Bytes, ClientError> {
        let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token));
        let answer = self.send(&request).await?;
        match ClientError::from_code(
            answer.error_code,
            answer.error_message.as_ref().map(|m| m.as_str()),
        ) {
            Some(e) => Err(e),
            None => Ok(answer.auth_bytes),
        }
    }

    /// Sends `request` at the negotiated version and returns the broker's answer.
    pub async fn send<R: Request>(&mut self, request: &R) -> Result<R::Response, ClientError> {
        let version = self.version_of::<R>()?;
        self.exchange(request, version).await
    }

    /// Sends `request` without waiting for an answer (produce with acks=0).
    pub async fn send_only<R: Request>(&mut self, request: &R) -> Result<(), ClientError> {
        let version = self.version_of::<R>()?;
        self.write_request(request, version).await.map(|_| ())
    }

    /// The version `R` is sent at on this connection.
    pub fn version_of<R: Request>(&self) -> Result<i16, ClientError> {
        self.versions
            .get(&R::KEY)
            .copied()
            .ok_or_else(|| ClientError::Version {
                addr: self.addr.clone(),
                api: crate::short_type_name::<R>(),
            })
    }

    /// Sends `request` at an explicit `version` (tests sweep every advertised version).
    pub async fn exchange<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<R::Response, ClientError> {
        let correlation_id = self.write_request(request, version).await?;
        match tokio::time::timeout(
            RESPONSE_TIMEOUT,
            self.read_response::<R>(version, correlation_id),
        )
        .await
        {
            Ok(answer) => answer,
            Err(_) => Err(self.io(std::io::ErrorKind::TimedOut.into())),
        }
    }

    async fn read_response<R: Request>(
        &mut self,
        version: i16,
        correlation_id: i32,
    ) -> Result<R::Response, ClientError> {
        let mut len = [0u8; 4];
        self.stream
            .read_exact(&mut len)
            .await
            .map_err(|e| self.io(e))?;
        let size = usize::try_from(i32::from_be_bytes(len))
            .ok()
            .filter(|&n| n <= MAX_RESPONSE_BYTES)
            .ok_or_else(|| self.protocol(format!("response length {len:?}")))?;
        // Grow with the bytes that arrive rather than trusting the announced length.
        let mut buf = Vec::new();
        let read = (&mut self.stream)
            .take(size as u64)
            .read_to_end(&mut buf)
            .await;
        read.map_err(|e| self.io(e))?;
        if buf.len() < size {
            return Err(self.io(std::io::ErrorKind::UnexpectedEof.into()));
        }
        let mut body = Bytes::from(buf);
        let header = ResponseHeader::decode(&mut body, R::Response::header_version(version))
            .map_err(|e| self.protocol(format!("response header: {e}")))?;
        if header.correlation_id != correlation_id {
            return Err(self.protocol(format!(
                "correlation id {} answers request {correlation_id}",
                header.correlation_id
            )));
        }
        let api =
            ApiKey::try_from(R::KEY).map_err(|_| self.protocol(format!("API key {}", R::KEY)))?;
        crate::guard::check_response(api, version, &body).map_err(|e| {
            self.protocol(format!("{} v{version}: {e}", crate::short_type_name::<R>()))
        })?;
        R::Response::decode(&mut body, version).map_err(|e| {
            self.protocol(format!("{} v{version}: {e}", crate::short_type_name::<R>()))
        })
    }

    async fn write_request<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<i32, ClientError> {
        let correlation_id = self.next_correlation;
        self.next_correlation = self.next_correlation.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_static_str(CLIENT_ID)));
        let mut buf = BytesMut::new();
        buf.put_i32(0);
        header
            .encode(&mut buf, R::header_version(version))
            .and_then(|_| request.encode(&mut buf, version))
            .map_err(|e| {
                self.protocol(format!(
                    "cannot encode {} v{version}: {e}",
                    crate::short_type_name::<R>()
                ))
            })?;
        let len = i32::try_from(buf.len() - 4)
            .map_err(|_| self.protocol("request exceeds 2 GiB".into()))?;
        buf[..4].copy_from_slice(&len.to_be_bytes());
        let stream = self.stream.get_mut();
        stream.write_all(&buf).await.map_err(|e| self.io(e))?;
        Ok(correlation_id)
    }

    fn io(&self, source: std::io::Error) -> ClientError {
        ClientError::Io {
            addr: self.addr.clone(),
            source,
        }
    }

    fn protocol(&self, reason: String) -> ClientError {
        ClientError::Protocol {
            addr: self.addr.clone(),
            reason,
        }
    }
}
