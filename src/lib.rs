//! agui-gateway: an AG-UI streaming gateway. A browser (or any `@ag-ui/client` `HttpAgent`)
//! POSTs a `RunAgentInput`; the gateway converts it to provider-neutral messages, runs a hybrid
//! ReAct loop against an LLM provider, executes backend tools in-process, pauses on frontend
//! tools, and streams verified AG-UI events back over SSE.
//!
//! Map of the modules, in the order a request meets them:
//! - `listen`: the accept loop; hyper serves HTTP/1.x and HTTP/2 (told apart by a peek), with
//!   the connection cap and every connection's timeouts.
//! - [`api`]: axum handlers (`/agents/{id}/agui`, `/healthz`, `/agents`) and [`api::ApiError`].
//! - [`protocol`]: the AG-UI wire format: events, input, SSE and protobuf framing, the verifier.
//! - [`runs`]: the registry of active runs (one per thread) and the [`runs::Emitter`] every
//!   event leaves through.
//! - [`conversation`]: the unified message model and the conversion from AG-UI.
//! - [`agent`]: agents built from config and the hybrid ReAct loop ([`agent::react`]).
//! - [`model`]: the object-safe [`model::Provider`] trait and its providers.
//! - [`tools`]: the [`tools::Tool`] trait, the per-agent registry, HTTP and built-in tools.
//! - [`config`]: TOML configuration, resolved and validated at start-up.
//! - [`redact`]: the one redactor every secret is known to and every output passes.
//! - [`bench`]: `agui-gateway bench`, the figures of what the gateway adds on the token path.
//!
//! Everything but [`protocol`], [`conversation`], [`redact`] and the providers' stream normalisers in
//! [`model`] needs the default feature `server`; without it the crate builds in a third of the
//! dependencies, as the fuzz targets use it.

#[cfg(feature = "server")]
pub mod agent;
#[cfg(feature = "server")]
pub mod api;
#[cfg(feature = "server")]
pub mod bench;
#[cfg(feature = "server")]
pub mod config;
#[cfg(feature = "server")]
pub mod connector;
pub mod conversation;
#[cfg(feature = "server")]
pub mod metrics;
pub mod model;
#[cfg(feature = "server")]
pub mod outbound;
pub mod protocol;
pub mod redact;
#[cfg(feature = "server")]
pub mod runs;
#[cfg(feature = "server")]
pub mod settings;
#[cfg(feature = "server")]
pub mod store;
#[cfg(feature = "server")]
pub mod telemetry;
#[cfg(feature = "server")]
pub mod tools;

#[cfg(feature = "server")]
mod app;
#[cfg(feature = "server")]
mod listen;
#[cfg(feature = "server")]
pub use app::*;
