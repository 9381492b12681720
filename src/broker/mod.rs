//! A broker as a node of the core: its session with the controller.

mod session;

pub use session::{Effect, Input, Session};
