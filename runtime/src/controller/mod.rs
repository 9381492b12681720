//! `isr controller`: the cluster's single controller process.
//!
//! It wraps [`isr::Controller`] (every decision: fencing, elections, ISR changes) with durable
//! metadata, a clock and connections to brokers. One task owns the state; connection tasks feed
//! it events, so every transition runs alone and in arrival order.

mod metadata;
mod server;

pub use server::{run, ControllerArgs};
