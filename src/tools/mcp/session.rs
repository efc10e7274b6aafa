//! The background task that owns one server's session: connects (HTTP handshake or child
//! process), lists the tools, watches the session (pings, `list_changed`, refresh interval)
//! and reconnects with backoff when it drops.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    ClientCapabilities, ClientConfig, ClientRequest, Implementation, PaginatedRequestParams,
    PingRequest, ProtocolVersion,
};
use rmcp::service::{NotificationContext, QuitReason, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, Peer, RoleClient, ServiceError, ServiceExt};
use serde_json::Value;
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

use super::errors::describe;
use super::progress::Tapped;
use super::tool::McpTool;
use super::{CLOSE_TIMEOUT, Inner, McpTransport, Status, read, write};
use crate::conversation::ToolSpec;
use crate::settings::valid_name;
use crate::tools::SourceTool;

/// Bound on one connection attempt (spawn or HTTP handshake); `npx`-style servers can be slow.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on listing all tools.
const LIST_TIMEOUT: Duration = Duration::from_secs(30);
/// How often an idle session is checked; a streamable HTTP session does not notice on its own
/// that the server went away.
const PING_EVERY: Duration = Duration::from_secs(15);
const PING_TIMEOUT: Duration = Duration::from_secs(5);
const BACKOFF_START: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// A server whose cursor never ends must not keep the listing going forever.
const MAX_PAGES: usize = 100;
/// The only variables a child process inherits (plus its own `env`): the gateway's provider
/// keys must not leak into third-party servers. The same list the official TypeScript SDK uses.
const INHERITED_ENV: &[&str] = &[
    "HOME",
    "LOGNAME",
    "PATH",
    "SHELL",
    "TERM",
    "USER",
    "LANG",
    "TMPDIR",
    "SYSTEMROOT",
    "APPDATA",
    "USERPROFILE",
];

/// Why a session ended.
enum End {
    Shutdown,
    Dropped(String),
}

/// Owns the connection: connect, list, watch, reconnect with backoff, until shutdown.
pub(super) async fn supervise(inner: Arc<Inner>, ready: oneshot::Sender<()>) {
    let name = inner.cfg.name.clone();
    let mut ready = Some(ready);
    let mut backoff = BACKOFF_START;
    loop {
        let ct = inner.shutdown.child_token();
        let attempt = tokio::select! {
            _ = inner.shutdown.cancelled() => break,
            r = tokio::time::timeout(CONNECT_TIMEOUT, connect(&inner, ct.clone())) => match r {
                Ok(r) => r,
                Err(_) => Err(format!("no answer within {} s", CONNECT_TIMEOUT.as_secs())),
            },
        };
        let attempt = match attempt {
            Ok(running) => {
                let listed = tokio::select! {
                    _ = inner.shutdown.cancelled() => Err(String::from("closed")),
                    r = list_all(running.peer()) => r,
                };
                match listed {
                    Ok(tools) => Ok((running, tools)),
                    Err(e) => {
                        ct.cancel();
                        let _ = tokio::time::timeout(CLOSE_TIMEOUT, running.waiting()).await;
                        Err(format!("listing tools failed: {e}"))
                    }
                }
            }
            Err(e) => Err(e),
        };
        match attempt {
            Ok((running, tools)) => {
                backoff = BACKOFF_START;
                publish(&inner, tools);
                let info = running.peer().peer_info();
                *write(&inner.status) = Status::Up {
                    server: info.as_ref().and_then(|i| {
                        i.server_info
                            .as_ref()
                            .map(|s| format!("{} {}", s.name, s.version))
                    }),
                    protocol: info
                        .as_ref()
                        .map(|i| i.protocol_version.to_string())
                        .unwrap_or_default(),
                };
                *write(&inner.link.peer) = Some(running.peer().clone());
                tracing::info!(server = %name, tools = read(&inner.tools).len(), "MCP server connected");
                if let Some(r) = ready.take() {
                    let _ = r.send(());
                }
                match watch(&inner, running, ct).await {
                    End::Shutdown => break,
                    End::Dropped(e) => {
                        let e = inner.link.redactor.clean(&e);
                        tracing::warn!(server = %name, error = %e, "MCP session dropped; reconnecting");
                        *write(&inner.status) = Status::Down { error: e };
                    }
                }
            }
            Err(e) => {
                let e = inner.link.redactor.clean(&e);
                tracing::warn!(server = %name, error = %e, retry_in_ms = backoff.as_millis() as u64, "MCP server unavailable");
                *write(&inner.status) = Status::Down { error: e };
                if let Some(r) = ready.take() {
                    let _ = r.send(());
                }
            }
        }
        tokio::select! {
            _ = inner.shutdown.cancelled() => break,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
    *write(&inner.link.peer) = None;
    *write(&inner.status) = Status::Closed;
    tracing::debug!(server = %name, "MCP source closed");
}

/// Watches a live session until it drops or the source shuts down, then tears it down.
async fn watch(
    inner: &Inner,
    running: RunningService<RoleClient, Handler>,
    ct: CancellationToken,
) -> End {
    let peer = running.peer().clone();
    let waiting = running.waiting();
    tokio::pin!(waiting);
    let mut finished = false;
    let start = tokio::time::Instant::now();
    let mut ping = tokio::time::interval_at(start + PING_EVERY, PING_EVERY);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let every = inner.cfg.refresh.unwrap_or(Duration::from_secs(86_400));
    let mut refresh = tokio::time::interval_at(start + every, every);
    refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let end = loop {
        // Each arm yields whether the session should be checked (and the tools re-listed).
        let relist = tokio::select! {
            _ = inner.shutdown.cancelled() => break End::Shutdown,
            r = &mut waiting => {
                finished = true;
                break End::Dropped(match r {
                    Ok(QuitReason::Closed) => "the server closed the connection".into(),
                    Ok(other) => format!("session ended ({other:?})"),
                    Err(e) => format!("session task failed: {e}"),
                });
            }
            _ = ping.tick() => false,
            _ = inner.link.poke.notified() => false,
            _ = inner.list_changed.notified() => true,
            _ = refresh.tick(), if inner.cfg.refresh.is_some() => true,
        };
        let checked = tokio::select! {
            _ = inner.shutdown.cancelled() => break End::Shutdown,
            r = check(&peer, relist) => r,
        };
        match checked {
            Ok(Some(tools)) => publish(inner, tools),
            Ok(None) => {}
            Err(e) => break End::Dropped(e),
        }
    };
    // Calls must stop using the session before it goes away.
    *write(&inner.link.peer) = None;
    ct.cancel();
    if !finished {
        let _ = tokio::time::timeout(CLOSE_TIMEOUT, &mut waiting).await;
    }
    end
}

/// Re-lists the tools (when `relist`) or pings. A failed listing is only fatal when a ping
/// fails too: a server may refuse one listing and still be healthy.
async fn check(
    peer: &Peer<RoleClient>,
    relist: bool,
) -> Result<Option<Vec<rmcp::model::Tool>>, String> {
    if relist {
        match list_all(peer).await {
            Ok(tools) => return Ok(Some(tools)),
            Err(e) => tracing::warn!(error = %e, "re-listing MCP tools failed"),
        }
    }
    let ping = peer.send_request(ClientRequest::PingRequest(PingRequest::default()));
    match tokio::time::timeout(PING_TIMEOUT, ping).await {
        Ok(Ok(_)) => Ok(None),
        // It answered, if only to refuse: the session is alive.
        Ok(Err(ServiceError::McpError(_))) => Ok(None),
        Ok(Err(e)) => Err(format!("ping failed: {}", describe(&e))),
        Err(_) => Err(format!(
            "no answer to ping within {} s",
            PING_TIMEOUT.as_secs()
        )),
    }
}

/// All tools, following `nextCursor` to the last page.
async fn list_all(peer: &Peer<RoleClient>) -> Result<Vec<rmcp::model::Tool>, String> {
    let listing = async {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen = HashSet::new();
        for _ in 0..MAX_PAGES {
            let page = peer
                .list_tools(Some(
                    PaginatedRequestParams::default().with_cursor(cursor.clone()),
                ))
                .await
                .map_err(|e| describe(&e))?;
            tools.extend(page.tools);
            match page.next_cursor {
                None => return Ok(tools),
                Some(c) if !seen.insert(c.clone()) => {
                    return Err(format!("the server repeated the cursor {c:?}"));
                }
                Some(c) => cursor = Some(c),
            }
        }
        Err(format!("tools/list did not end after {MAX_PAGES} pages"))
    };
    tokio::time::timeout(LIST_TIMEOUT, listing)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {} s", LIST_TIMEOUT.as_secs())))
}

/// Turns the server's tools into gateway tools (filtered, prefixed, names checked) and makes
/// them the current list.
fn publish(inner: &Inner, listed: Vec<rmcp::model::Tool>) {
    let cfg = &inner.cfg;
    let mut names = HashSet::new();
    let mut tools = Vec::new();
    for t in listed {
        let original = t.name.to_string();
        if cfg.allow.as_ref().is_some_and(|a| !a.contains(&original))
            || cfg.deny.contains(&original)
            || (!cfg.filters.is_empty() && !cfg.filters.iter().any(|f| f.is_match(&original)))
        {
            continue;
        }
        let name = format!("{}{original}", cfg.prefix);
        if !valid_name(&name) {
            tracing::warn!(server = %cfg.name, tool = %name, "MCP tool skipped: its name must be 1-64 letters, digits, '-' or '_'");
            continue;
        }
        if !names.insert(name.clone()) {
            tracing::warn!(server = %cfg.name, tool = %name, "MCP tool skipped: listed twice");
            continue;
        }
        let mut schema = t.input_schema.as_ref().clone();
        // Some servers send `{}` for "no arguments"; providers want an object schema.
        schema
            .entry("type")
            .or_insert_with(|| Value::String("object".into()));
        let description = t
            .description
            .as_deref()
            .or(t.title.as_deref())
            .unwrap_or_default()
            .to_string();
        let spec = ToolSpec {
            name,
            description,
            input_schema: Value::Object(schema),
            strict: None,
        };
        tools.push(SourceTool::new(Arc::new(McpTool {
            spec,
            original,
            link: Arc::clone(&inner.link),
        })));
    }
    let before: Vec<String> = read(&inner.tools)
        .iter()
        .map(|t| t.tool.spec().name.clone())
        .collect();
    let after: Vec<String> = tools.iter().map(|t| t.tool.spec().name.clone()).collect();
    if before != after {
        tracing::info!(server = %cfg.name, tools = ?after, "MCP tools listed");
    }
    *write(&inner.tools) = Arc::new(tools);
}

/// Opens a session: spawns the child or performs the HTTP handshake.
async fn connect(
    inner: &Inner,
    ct: CancellationToken,
) -> Result<RunningService<RoleClient, Handler>, String> {
    let handler = Handler {
        list_changed: Arc::clone(&inner.list_changed),
    };
    // Every transport is tapped for the progress of calls under way.
    let link = Arc::clone(&inner.link);
    match &inner.cfg.transport {
        McpTransport::Http {
            url,
            headers,
            bearer_token,
            sse,
        } => {
            let mut custom = HashMap::new();
            for (k, v) in headers {
                // Checked by `parse`; a failure here would be a bug, so skip rather than panic.
                let (Ok(name), Ok(mut value)) = (
                    http::HeaderName::from_bytes(k.as_bytes()),
                    http::HeaderValue::from_str(v.expose()),
                ) else {
                    continue;
                };
                value.set_sensitive(true);
                custom.insert(name, value);
            }
            if *sse {
                let mut map = reqwest::header::HeaderMap::new();
                for (k, v) in custom {
                    map.insert(k, v);
                }
                if let Some(token) = bearer_token
                    && let Ok(mut v) =
                        http::HeaderValue::from_str(&format!("Bearer {}", token.expose()))
                {
                    v.set_sensitive(true);
                    map.insert(http::header::AUTHORIZATION, v);
                }
                let sse_url = url::Url::parse(url).map_err(|e| format!("{url}: {e}"))?;
                let client = inner.client.clone().unwrap_or_default();
                let transport = super::sse::SseTransport::connect(client, sse_url, map)
                    .await
                    .map_err(|e| e.to_string())?;
                return handler
                    .serve_with_ct(Tapped::new(transport, link), ct)
                    .await
                    .map_err(|e| describe(&e));
            }
            // The gateway owns reconnection, so a restarted server gets a fresh session and a
            // fresh tool listing instead of rmcp's silent re-initialisation.
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                .custom_headers(custom)
                .reinit_on_expired_session(false);
            if let Some(token) = bearer_token {
                config = config.auth_header(token.expose());
            }
            let transport = match &inner.client {
                Some(c) => StreamableHttpClientTransport::with_client(c.clone(), config),
                None => StreamableHttpClientTransport::from_config(config),
            };
            handler
                .serve_with_ct(Tapped::new(transport, link), ct)
                .await
                .map_err(|e| describe(&e))
        }
        McpTransport::Stdio { command, args, env } => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args).env_clear().kill_on_drop(true);
            for k in INHERITED_ENV {
                if let Some(v) = std::env::var_os(k) {
                    cmd.env(k, v);
                }
            }
            for (k, v) in env {
                cmd.env(k, v.expose());
            }
            let (transport, stderr) = TokioChildProcess::builder(cmd)
                .stderr(std::process::Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot start {}: {e}", command.display()))?;
            if let Some(stderr) = stderr {
                tokio::spawn(forward_stderr(inner.cfg.name.clone(), stderr));
            }
            handler
                .serve_with_ct(Tapped::new(transport, link), ct)
                .await
                .map_err(|e| describe(&e))
        }
    }
}

/// A child's stderr goes to the gateway's log, line by line, so it neither interleaves with
/// the log's own lines nor blocks the child when nobody reads it.
async fn forward_stderr(server: String, stderr: tokio::process::ChildStderr) {
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let line: String = line.chars().take(1000).collect();
        tracing::info!(server = %server, "mcp server stderr: {line}");
    }
}

/// The client side of the session: announces the gateway and reports tool-list changes.
struct Handler {
    list_changed: Arc<Notify>,
}

impl ClientHandler for Handler {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.list_changed.notify_one();
        std::future::ready(())
    }

    fn get_info(&self) -> ClientConfig {
        // Pinned to the newest version with a session handshake: list_changed notifications
        // then arrive unprompted on the session, which is what the supervisor listens for.
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("agui-gateway", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}
