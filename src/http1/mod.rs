//! HTTP/1.x: what clients send, parsed ([`parse`]), and connections served by the gateway
//! itself (`conn`, with the `server` feature).

#[cfg(feature = "server")]
mod conn;
pub mod parse;

#[cfg(feature = "server")]
pub(crate) use conn::serve;
