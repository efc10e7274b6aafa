//! Amazon Bedrock `ConverseStream` through the official AWS SDK: region, the standard credential
//! chain or explicit credentials, Bedrock API keys (bearer), endpoint override. The SDK's own
//! retries and stalled-stream protection are off: the gateway's retry policy and idle limit
//! govern every provider alike, and slow reasoning models are not cut off.

#[cfg(feature = "server")]
pub mod convert;
#[cfg(feature = "server")]
mod provider;
pub mod stream;
#[cfg(feature = "server")]
pub use provider::*;
