//! The `isr` runtime as a library: what the `isr` binary runs (brokers, controllers, local
//! clusters, status), plus what test tools outside this crate need to read the runtime's own
//! bytes: the internal wire format (the fault proxy of `isr-faults` reads a connection's first
//! frame to tell which broker opened it) and the decoders of every file and frame a process
//! reads from outside ([`decode`], which `isr-fuzz` drives).
//!
//! The binary (`src/main.rs`) is the command line over this library and nothing else.

pub mod broker;
pub mod cluster;
pub mod controller;
pub mod decode;
pub mod security;
pub mod status;
pub mod storage;
pub mod timing;
pub mod trace;
pub mod wire;
