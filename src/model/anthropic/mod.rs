//! Anthropic Messages API (`POST {base_url}/v1/messages`, streaming): a thin transport over
//! [`convert`] and [`stream`].

#[cfg(feature = "server")]
pub mod convert;
#[cfg(feature = "server")]
mod provider;
pub mod stream;
#[cfg(feature = "server")]
pub use provider::*;
