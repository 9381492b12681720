//! Why a client command failed: each variant prints as one clear line.

use kafka_protocol::error::ResponseError;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        addr: String,
        source: std::io::Error,
    },
    #[error("connection to {addr} failed: {source}")]
    Io {
        addr: String,
        source: std::io::Error,
    },
    #[error("TLS with {addr} failed: {reason}")]
    Tls { addr: String, reason: String },
    #[error("broker {addr} sent a malformed answer: {reason}")]
    Protocol { addr: String, reason: String },
    #[error("broker {addr} speaks no version of {api} that isr speaks")]
    Version { addr: String, api: &'static str },
    /// The broker refused with a Kafka error code; prints as e.g. `NOT_ENOUGH_REPLICAS: ...`.
    #[error("{}{}", code_name(*.code), detail(.message))]
    Kafka { code: i16, message: String },
    #[error("topic {topic} has no partition {partition}")]
    NoSuchPartition { topic: String, partition: u32 },
    #[error("no broker answered (tried {0})")]
    NoBroker(String),
    #[error("{0}")]
    Usage(String),
    #[error("reading input: {0}")]
    Input(std::io::Error),
    #[error("writing output: {0}")]
    Output(std::io::Error),
    #[error("cannot decode records of {topic}/{partition} at offset {offset}: {reason}")]
    Records {
        topic: String,
        partition: u32,
        offset: i64,
        reason: String,
    },
}

fn detail(message: &str) -> String {
    if message.is_empty() {
        String::new()
    } else {
        format!(": {message}")
    }
}

/// Kafka's name for an error code, as its documentation spells it (`NOT_ENOUGH_REPLICAS`).
pub fn code_name(code: i16) -> String {
    match ResponseError::try_from_code(code) {
        None => "NONE".into(),
        Some(ResponseError::Unknown(c)) => format!("UNKNOWN_ERROR_CODE_{c}"),
        Some(e) => {
            let camel = e.to_string();
            let mut out = String::with_capacity(camel.len() + 8);
            for (i, c) in camel.chars().enumerate() {
                if c.is_ascii_uppercase() && i > 0 {
                    out.push('_');
                }
                out.push(c.to_ascii_uppercase());
            }
            out
        }
    }
}

/// A broker's answer that lacks what the request asked about.
pub fn malformed(addr: &str, reason: &str) -> ClientError {
    ClientError::Protocol {
        addr: addr.to_owned(),
        reason: reason.to_owned(),
    }
}

impl ClientError {
    /// A Kafka error from a response's code and optional message; `None` when the code is 0.
    pub fn from_code(code: i16, message: Option<&str>) -> Option<ClientError> {
        (code != 0).then(|| ClientError::Kafka {
            code,
            message: message.unwrap_or("").to_owned(),
        })
    }

    /// Whether retrying after refreshing metadata may succeed: the leader moved, is being
    /// elected, the topic is still being created, or the broker went away.
    pub fn is_stale_route(&self) -> bool {
        match self {
            ClientError::Kafka { code, .. } => matches!(
                ResponseError::try_from_code(*code),
                Some(
                    ResponseError::NotLeaderOrFollower
                        | ResponseError::LeaderNotAvailable
                        | ResponseError::UnknownTopicOrPartition
                        | ResponseError::FencedLeaderEpoch
                        | ResponseError::NotCoordinator
                        | ResponseError::CoordinatorNotAvailable
                        | ResponseError::CoordinatorLoadInProgress
                )
            ),
            ClientError::Connect { .. } | ClientError::Io { .. } => true,
            _ => false,
        }
    }

    /// Whether a fetch asked outside the log (OFFSET_OUT_OF_RANGE): below its log start
    /// (deleted by retention or DeleteRecords) or past its high watermark.
    pub fn is_offset_out_of_range(&self) -> bool {
        matches!(self, ClientError::Kafka { code, .. }
            if ResponseError::try_from_code(*code) == Some(ResponseError::OffsetOutOfRange))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_codes_as_kafka_does() {
        assert_eq!(code_name(19), "NOT_ENOUGH_REPLICAS");
        assert_eq!(code_name(6), "NOT_LEADER_OR_FOLLOWER");
        assert_eq!(code_name(3), "UNKNOWN_TOPIC_OR_PARTITION");
        let e = ClientError::from_code(19, None).map(|e| e.to_string());
        assert_eq!(e.as_deref(), Some("NOT_ENOUGH_REPLICAS"));
    }
}
