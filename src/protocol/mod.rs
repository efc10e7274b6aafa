//! The AG-UI wire format and nothing else: events, the request body, framing and the verifier.
//! Lenient in, strict out.

pub mod encode;
pub mod events;
pub mod input;
pub mod verify;

pub use events::{Envelope, Event, Outcome, TokenUsage, ToolResultContent};
pub use input::RunAgentInput;
