//! Why a client connection ended abnormally.
//!
//! These end one connection only: the broker logs them and goes on serving the others. Errors
//! about a request's content that Kafka can express (unknown topic, corrupt batch, ...) are not
//! here: they are answered in the response with a Kafka error code.

/// Why `serve_connection` closed a connection.
#[derive(Debug, thiserror::Error)]
pub enum KafkaError {
    #[error("connection i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("frame length {0} is outside 0..={max} bytes", max = crate::server::MAX_FRAME_BYTES)]
    FrameSize(i64),
    #[error("request of {0} bytes is too short for a request header")]
    ShortRequest(usize),
    #[error("API key {key} version {version} is not supported")]
    Unsupported { key: i16, version: i16 },
    #[error("cannot decode {what} v{version}: {reason}")]
    Decode {
        what: &'static str,
        version: i16,
        reason: String,
    },
    /// A request other than ApiVersions, SaslHandshake or SaslAuthenticate on a SASL listener
    /// before the client logged in, or a SASL request out of turn.
    #[error("unauthenticated: {0}")]
    Unauthenticated(String),
    /// A failed login, answered SASL_AUTHENTICATION_FAILED before the connection closed.
    #[error("failed {mechanism} login from {peer}: {reason}")]
    AuthenticationFailed {
        peer: std::net::SocketAddr,
        mechanism: &'static str,
        reason: String,
    },
    #[error("cannot encode {what} v{version}: {reason}")]
    Encode {
        what: &'static str,
        version: i16,
        reason: String,
    },
}
