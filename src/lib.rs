//! agui-gateway: an AG-UI streaming gateway. A browser (or any `@ag-ui/client` `HttpAgent`)
//! POSTs a `RunAgentInput`; the gateway converts it to provider-neutral messages, runs a hybrid
//! ReAct loop against an LLM provider, executes backend tools in-process, pauses on frontend
//! tools, and streams verified AG-UI events back over SSE.
//!
//! Map of the modules, in the order a request meets them:
//! - `app`: the server's shared state (built from the config), its router and accept loop.
//! - `listen`: the accept loop; hyper serves HTTP/1.x and HTTP/2 (told apart by a peek), with
//!   the connection cap and every connection's timeouts.
//! - [`api`]: axum handlers (`/agents/{id}/agui`, the replay and stop endpoints, the agent API
//!   under `/_plugins/_ml`, search, memory, `/healthz`) and [`api::ApiError`]; who may call
//!   what, and who owns a thread, run or task.
//! - [`protocol`]: the AG-UI wire format: events, input, SSE and protobuf framing, the verifier.
//! - [`runs`]: the registry of active runs (one per thread), the [`runs::Emitter`] every event
//!   leaves through, runs nested in runs (subagents), the replay log, token accounting.
//! - [`agent`]: agents built from config or registrations, and the loops that run them (ReAct,
//!   flows, plan-execute-reflect); another agent as a tool.
//! - [`config`]: TOML configuration, resolved and validated at start-up.
//! - [`tools`]: the [`tools::Tool`] trait, the per-agent registry, and the tool kinds: HTTP,
//!   built-ins, MCP, OpenAPI, search (each owns the parsing of its own entries).
//! - [`connector`]: ml-commons connectors (templates, `response_filter`, processing functions),
//!   registered models as they are looked up, embeddings, models driven through a connector.
//! - [`model`]: the object-safe [`model::Provider`] trait and its providers.
//! - [`conversation`]: the unified message model and the conversion from AG-UI.
//! - [`store`]: threads, runs, event logs, documents and memories (SQLite embedded, PostgreSQL
//!   shared).
//! - [`settings`]: the primitives every settings parser shares (names, URLs, TOML tables).
//! - [`outbound`]: the one address policy every outbound URL passes, and its HTTP clients.
//! - [`redact`]: the one redactor every secret is known to and every output passes.
//! - [`metrics`]: the Prometheus counters and histograms of `/metrics`.
//! - [`telemetry`]: logs and OpenTelemetry traces.
//! - [`bench`]: `agui-gateway bench`, the figures of what the gateway adds on the token path.
//!
//! Imports point one way, down these layers: `app` → `listen` → `api` → `agent` → `config` →
//! `tools` → `connector` → `runs` → `model` → `conversation`, `store` → `protocol` → `redact`;
//! `settings`, `outbound`, `metrics` and `telemetry` are leaves anyone may use.
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
