//! The AG-UI wire format and nothing else: events, the request body, framing (SSE and
//! protobuf) and the verifier.
//! Lenient in, strict out.

pub mod encode;
pub mod events;
pub mod input;
pub mod proto;
pub mod verify;

pub use events::{Envelope, Event, Outcome, TokenUsage, ToolResultContent};
pub use input::RunAgentInput;

/// A fresh id for messages (and other objects) the gateway creates, e.g. `msg_3f2a...`.
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::new_v4().simple())
}
