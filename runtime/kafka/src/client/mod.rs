//! The isr client commands: topic and group admin, produce, consume and perf, over the Kafka
//! protocol.
//!
//! Each command is a clap `Args` struct plus an async `run` that the runtime's `isr` binary
//! wires as a subcommand; `run_with` variants take explicit input and output so tests can
//! drive them. Every command starts from `--bootstrap HOST:PORT[,HOST:PORT...]`.

mod args;
mod cluster;
mod connection;
mod error;
pub mod records;
pub mod security;

pub mod acl;
pub mod consume;
pub mod group;
pub mod perf;
pub mod produce;
pub mod topic;
pub mod user;

pub use cluster::{
    coordinator_address, find_coordinator_request, Cluster, PartitionView, Route, TopicView,
};
pub use connection::Connection;
pub use error::{code_name, ClientError};
