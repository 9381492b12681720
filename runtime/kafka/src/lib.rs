//! Kafka wire protocol for isr brokers.
//!
//! Real Kafka clients (kcat, kafka-python, confluent-kafka) and the `isr` client commands talk
//! to isr brokers through this crate. The runtime implements [`Backend`] over its replicas and
//! hands accepted connections to [`serve_connection`]; this crate owns everything about the
//! wire: framing, version negotiation, request decoding, batch validation, and responses.

pub mod backend;
pub mod batch;

pub use backend::{
    Backend, BackendError, BrokerInfo, ClusterMetadata, CommittedOffset, FetchedData, NewTopic,
    OffsetSpec, PartitionInfo, TopicInfo,
};
pub mod error;
mod server;
pub mod versions;

pub use error::KafkaError;
pub use server::{serve_connection, MAX_FRAME_BYTES};

/// A type's name without its path (`ProduceRequest`), for error messages.
fn short_type_name<T>() -> &'static str {
    let full = std::any::type_name::<T>();
    full.rsplit("::").next().unwrap_or(full)
}
pub mod client;
