//! MCP servers as tool sources, through the official `rmcp` client: one session per server
//! (streamable HTTP or a stdio child process), shared by every run.
//!
//! A background task per server owns the session: it connects, lists the tools (all pages),
//! re-lists them on `notifications/tools/list_changed` or on the configured interval, checks
//! the session with `ping`, and reconnects with backoff when it drops. Everything the rest of
//! the gateway sees (`tools()`, `health()`, the peer calls go through) is a snapshot behind a
//! short-lived lock, so nothing ever waits on the network to read it.
//!
//! Map:
//! - this file: [`McpSource`] (the [`ToolSource`]), [`start`], the shared state the other
//!   parts hold.
//! - `config.rs`: the `type = "mcp"` table, [`parse`]d into an [`McpConfig`].
//! - `session.rs`: the background task: connect, list, watch, ping, reconnect with backoff.
//! - `tool.rs`: one MCP tool as a gateway [`Tool`](super::Tool), and call-result conversion.
//! - `progress.rs`: the server's progress notifications as the call's `progress` activity.
//! - `errors.rs`: transport errors as operator-readable messages, URL credentials redacted.

mod config;
mod errors;
mod progress;
mod session;
mod sse;
mod tool;

use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use futures::future::BoxFuture;
use rmcp::{Peer, RoleClient};
use serde_json::{Value, json};
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

pub use config::{McpConfig, McpTransport, check_header, from_connector, parse};

use super::{SourceTool, ToolSource};
use errors::Redactor;
use session::supervise;

/// How long `start` waits for the first connection, so a healthy server's tools are there for
/// the first run without a dead one holding up start-up.
const STARTUP_WAIT: Duration = Duration::from_secs(3);
/// Bound on tearing a session down (a child gets its stdin closed, then SIGTERM, then a kill).
const CLOSE_TIMEOUT: Duration = Duration::from_secs(8);

/// What tools need to reach the server; kept apart from [`Inner`] so the tool list (which
/// holds the tools) and the tools (which hold this) do not form a cycle.
struct Link {
    server: String,
    /// The live session, `None` while disconnected.
    peer: RwLock<Option<Peer<RoleClient>>>,
    /// A call failed: the supervisor checks the session at once instead of at the next ping.
    poke: Notify,
    redactor: Redactor,
    /// Where the progress of calls under way goes, by the token each call was sent with.
    progress: progress::Routes,
}

enum Status {
    Connecting,
    Up {
        server: Option<String>,
        protocol: String,
    },
    Down {
        error: String,
    },
    Closed,
}

struct Inner {
    cfg: McpConfig,
    /// The HTTP client of a streamable-HTTP server; `None`: rmcp's default.
    client: Option<reqwest::Client>,
    link: Arc<Link>,
    tools: RwLock<Arc<Vec<SourceTool>>>,
    status: RwLock<Status>,
    /// Set by the client handler on `notifications/tools/list_changed`.
    list_changed: Arc<Notify>,
    /// Ends the supervisor and, through child tokens, the session.
    shutdown: CancellationToken,
}

/// The tools of one MCP server.
pub struct McpSource {
    inner: Arc<Inner>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(PoisonError::into_inner)
}

/// Starts the source; never fails (a server that is down has no tools until it comes up).
/// Waits a few seconds at most for the first connection; the rest happens in the background.
pub async fn start(cfg: McpConfig) -> Arc<dyn ToolSource> {
    start_with(cfg, None).await
}

/// [`start`] with the HTTP client of a streamable-HTTP server (the outbound policy's guarded
/// client for servers registered through the API); `None`: rmcp's own.
pub async fn start_with(cfg: McpConfig, client: Option<reqwest::Client>) -> Arc<dyn ToolSource> {
    let redactor = Redactor::new(&cfg.transport);
    let inner = Arc::new(Inner {
        link: Arc::new(Link {
            server: cfg.name.clone(),
            peer: RwLock::new(None),
            poke: Notify::new(),
            redactor,
            progress: progress::Routes::default(),
        }),
        cfg,
        client,
        tools: RwLock::new(Arc::new(Vec::new())),
        status: RwLock::new(Status::Connecting),
        list_changed: Arc::new(Notify::new()),
        shutdown: CancellationToken::new(),
    });
    let (ready_tx, ready_rx) = oneshot::channel();
    let task = tokio::spawn(supervise(Arc::clone(&inner), ready_tx));
    let _ = tokio::time::timeout(STARTUP_WAIT, ready_rx).await;
    Arc::new(McpSource {
        inner,
        task: Mutex::new(Some(task)),
    })
}

impl ToolSource for McpSource {
    fn name(&self) -> &str {
        &self.inner.cfg.name
    }

    fn tools(&self) -> Vec<SourceTool> {
        let tools = Arc::clone(&read(&self.inner.tools));
        tools.as_ref().clone()
    }

    fn health(&self) -> Value {
        let transport = match &self.inner.cfg.transport {
            McpTransport::Http { sse: true, .. } => "sse",
            McpTransport::Http { .. } => "http",
            McpTransport::Stdio { .. } => "stdio",
        };
        let tools = read(&self.inner.tools).len();
        match &*read(&self.inner.status) {
            Status::Up { server, protocol } => {
                let mut h = json!({"status": "ok", "transport": transport, "tools": tools, "protocolVersion": protocol});
                if let Some(s) = server {
                    h["server"] = json!(s);
                }
                h
            }
            Status::Connecting => {
                json!({"status": "down", "transport": transport, "error": "connecting"})
            }
            Status::Down { error } => {
                json!({"status": "down", "transport": transport, "error": error})
            }
            Status::Closed => json!({"status": "down", "transport": transport, "error": "closed"}),
        }
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.inner.shutdown.cancel();
            let task = self
                .task
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            if let Some(task) = task
                && tokio::time::timeout(CLOSE_TIMEOUT + Duration::from_secs(1), task)
                    .await
                    .is_err()
            {
                tracing::warn!(server = %self.inner.cfg.name, "MCP session did not close in time");
            }
        })
    }
}

impl Drop for McpSource {
    /// Dropping without `close` still ends the session, asynchronously: the supervisor sees the
    /// token and tears the session (and any child process) down.
    fn drop(&mut self) {
        self.inner.shutdown.cancel();
    }
}
