//! Kafka wire protocol for isr brokers.
//!
//! Real Kafka clients (kcat, kafka-python, confluent-kafka) and the `isr` client commands talk
//! to isr brokers through this crate. The runtime implements [`Backend`] over its replicas and
//! hands accepted connections to [`serve_connection`]; this crate owns everything about the
//! wire: framing, version negotiation, request decoding, batch validation, and responses.
//!
//! Wiring, as the runtime does it:
//!
//! ```no_run
//! use isr_kafka::{client, serve_connection, Backend, ConnectionInfo};
//! use std::sync::Arc;
//!
//! /// Serves Kafka clients on an accepted connection whose first 4 bytes were already read
//! /// (to tell Kafka traffic from the broker's own protocol).
//! async fn hand_over<B: Backend>(stream: tokio::net::TcpStream, peeked: [u8; 4], backend: Arc<B>) {
//!     let prefix = bytes::Bytes::copy_from_slice(&peeked);
//!     let Ok(peer) = stream.peer_addr() else { return };
//!     // A PLAINTEXT listener; a secured one says its protocol and the client's certificate.
//!     let info = ConnectionInfo::plaintext(peer);
//!     tokio::spawn(async move {
//!         if let Err(e) = serve_connection(stream, prefix, backend, info).await {
//!             eprintln!("kafka connection closed: {e}");
//!         }
//!     });
//! }
//!
//! /// The client subcommands, each a clap `Args` with an async `run`.
//! #[derive(clap::Subcommand)]
//! enum Command {
//!     Topic(client::topic::TopicArgs),
//!     Group(client::group::GroupArgs),
//!     Produce(client::produce::ProduceArgs),
//!     Consume(client::consume::ConsumeArgs),
//!     Perf(client::perf::PerfArgs),
//! }
//!
//! async fn run(command: Command) -> std::process::ExitCode {
//!     let result = match command {
//!         Command::Topic(a) => client::topic::run(a).await,
//!         Command::Group(a) => client::group::run(a).await,
//!         Command::Produce(a) => client::produce::run(a).await,
//!         Command::Consume(a) => client::consume::run(a).await,
//!         Command::Perf(a) => client::perf::run(a).await,
//!     };
//!     match result {
//!         Ok(()) => std::process::ExitCode::SUCCESS,
//!         Err(e) => {
//!             eprintln!("isr: {e}");
//!             std::process::ExitCode::FAILURE
//!         }
//!     }
//! }
//! ```

pub mod auth;
pub mod backend;
pub mod batch;
pub mod client;
pub mod compression;
pub mod configs;
pub mod consumer_protocol;
pub mod coordinator;
pub mod error;
mod guard;
pub mod names;
pub mod offsets_topic;
mod server;
pub mod topic_id;
pub mod versions;

pub use backend::{
    Appended, Backend, BackendError, BrokerInfo, BrokerSettings, ClusterMetadata, CommittedOffset,
    FetchedData, GroupCoordinator, GroupOffset, ListedOffset, NewTopic, OffsetSpec, PartitionInfo,
    TopicInfo, POLL_INTERVAL,
};
pub use coordinator::{Coordinator, StoredGroup};
pub use error::KafkaError;
pub use server::{serve_connection, ConnectionInfo, MAX_FRAME_BYTES, SASL_AUTHENTICATION_FAILED};
pub use topic_id::{TopicId, TopicIds};

/// A byte stream a connection runs over: TCP, or TLS over TCP.
pub trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> Stream for T {}

/// A type's name without its path (`ProduceRequest`), for error messages.
fn short_type_name<T>() -> &'static str {
    let full = std::any::type_name::<T>();
    full.rsplit("::").next().unwrap_or(full)
}
