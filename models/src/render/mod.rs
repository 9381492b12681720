//! Readable states and traces, for the command line and the Explorer alike: a compact table per
//! state with changes marked ([`table`]), the whole state with what it violates ([`state`]), a
//! Mermaid sequence diagram ([`mermaid`]) and an SVG one for the Explorer's dark page ([`svg`]).
//!
//! Everything here reads the core's public state and names actions by their `Display`, so a new
//! [`Action`](isr::sim::Action) renders without a change here.

mod diagram;
mod svg;
mod table;

pub use diagram::{mermaid, Section};
pub use svg::svg;
pub use table::{columns, state, table, trace_text, violated_here, violations};
