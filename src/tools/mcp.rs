//! MCP servers as tool sources, through the official `rmcp` client: one session per server
//! (streamable HTTP or a stdio child process), shared by every run.
//!
//! A background task per server owns the session: it connects, lists the tools (all pages),
//! re-lists them on `notifications/tools/list_changed` or on the configured interval, checks
//! the session with `ping`, and reconnects with backoff when it drops. Everything the rest of
//! the gateway sees (`tools()`, `health()`, the peer calls go through) is a snapshot behind a
//! short-lived lock, so nothing ever waits on the network to read it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::error::Error as StdError;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use futures::future::BoxFuture;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    ClientRequest, ContentBlock, Implementation, PaginatedRequestParams, PingRequest,
    ProtocolVersion, ResourceContents,
};
use rmcp::service::{ClientInitializeError, NotificationContext, QuitReason, RunningService};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransportConfig, StreamableHttpError,
};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, Peer, RoleClient, ServiceError, ServiceExt};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

use super::{SourceTool, Tool, ToolContext, ToolOutput, ToolSource};
use crate::config::{Secret, valid_name};
use crate::conversation::ToolSpec;

/// How long `start` waits for the first connection, so a healthy server's tools are there for
/// the first run without a dead one holding up start-up.
const STARTUP_WAIT: Duration = Duration::from_secs(3);
/// Bound on one connection attempt (spawn or HTTP handshake); `npx`-style servers can be slow.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on listing all tools.
const LIST_TIMEOUT: Duration = Duration::from_secs(30);
/// How often an idle session is checked; a streamable HTTP session does not notice on its own
/// that the server went away.
const PING_EVERY: Duration = Duration::from_secs(15);
const PING_TIMEOUT: Duration = Duration::from_secs(5);
/// Bound on tearing a session down (a child gets its stdin closed, then SIGTERM, then a kill).
const CLOSE_TIMEOUT: Duration = Duration::from_secs(8);
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
/// Headers the streamable HTTP transport sets itself and refuses from configuration.
const RESERVED_HEADERS: &[&str] = &[
    "accept",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

// ---------------------------------------------------------------- configuration

/// How the gateway reaches an MCP server.
#[derive(Debug, Clone)]
pub enum McpTransport {
    /// A streamable HTTP endpoint.
    Http {
        /// The endpoint.
        url: String,
        /// Extra headers on every request, values secret.
        headers: Vec<(String, Secret)>,
        /// Sent as `Authorization: Bearer ...`.
        bearer_token: Option<Secret>,
    },
    /// A child process speaking MCP on stdin/stdout.
    Stdio {
        /// The program (relative paths already resolved against the config's directory).
        command: PathBuf,
        /// Its arguments.
        args: Vec<String>,
        /// Variables set for it, on top of a minimal inherited set.
        env: Vec<(String, Secret)>,
    },
}

/// A resolved `type = "mcp"` entry.
#[derive(Debug, Clone)]
pub struct McpConfig {
    /// The server's name, for health output and logs.
    pub name: String,
    /// How to reach it.
    pub transport: McpTransport,
    /// Put before every tool name the model sees.
    pub prefix: String,
    /// Only these tools (original names), when set.
    pub allow: Option<Vec<String>>,
    /// Never these tools (original names).
    pub deny: Vec<String>,
    /// Re-list the tools this often, besides on `list_changed` notifications.
    pub refresh: Option<Duration>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct McpFile {
    name: String,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    headers_env: BTreeMap<String, String>,
    #[serde(default)]
    bearer_token_env: Option<String>,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    prefix: Option<String>,
    #[serde(default)]
    allow: Option<Vec<String>>,
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default)]
    refresh_secs: Option<u64>,
}

type Fail = (String, String);

fn fail(key: impl Into<String>, problem: impl Into<String>) -> Fail {
    (key.into(), problem.into())
}

/// Reads a `type = "mcp"` table (without `type` and the common option keys).
pub fn parse(
    table: toml::Table,
    env: &dyn Fn(&str) -> Option<String>,
    dir: Option<&Path>,
) -> Result<McpConfig, (String, String)> {
    let f: McpFile = crate::config::from_table(table).map_err(|(key, problem)| {
        // A missing key is reported at the table itself ("."); name the key instead.
        let missing = problem
            .strip_prefix("missing field `")
            .and_then(|rest| rest.split('`').next())
            .filter(|_| key == "." || key.is_empty());
        match missing {
            Some(field) => (field.to_string(), problem.clone()),
            None => (key, problem),
        }
    })?;
    if f.name.trim().is_empty() {
        return Err(fail("name", "must not be empty"));
    }
    let prefix = f.prefix.unwrap_or_default();
    if !prefix.is_empty() && (prefix.len() > 63 || !valid_name(&prefix)) {
        return Err(fail(
            "prefix",
            format!("{prefix:?} must be at most 63 letters, digits, '-' or '_'"),
        ));
    }
    if f.refresh_secs == Some(0) {
        return Err(fail("refresh_secs", "must be at least 1"));
    }
    let lookup = |var: &str, key: String| -> Result<Secret, Fail> {
        match env(var) {
            Some(v) if !v.is_empty() => Ok(Secret::new(v)),
            _ => Err(fail(key, format!("environment variable {var} is not set"))),
        }
    };
    let transport = match (f.url, f.command) {
        (Some(_), Some(_)) => {
            return Err(fail(
                "command",
                "set url (HTTP) or command (stdio), not both",
            ));
        }
        (None, None) => {
            return Err(fail(
                "url",
                "missing; set url (streamable HTTP) or command (stdio)",
            ));
        }
        (Some(url), None) => {
            if !f.args.is_empty() {
                return Err(fail("args", "only for command (stdio) servers"));
            }
            if !f.env.is_empty() {
                return Err(fail("env", "only for command (stdio) servers"));
            }
            let parsed =
                url::Url::parse(&url).map_err(|e| fail("url", format!("not a valid URL: {e}")))?;
            if !matches!(parsed.scheme(), "http" | "https") {
                return Err(fail("url", "must be an http or https URL"));
            }
            let mut headers = Vec::new();
            let mut seen = HashSet::new();
            let literal = f.headers.into_iter().map(|(k, v)| {
                let key = format!("headers.{k}");
                (k, Ok(Secret::new(v)), key)
            });
            let from_env = f.headers_env.into_iter().map(|(k, var)| {
                let key = format!("headers_env.{k}");
                let v = lookup(&var, key.clone());
                (k, v, key)
            });
            for (name, value, key) in literal.chain(from_env) {
                let value = value?;
                check_header(&name, &value).map_err(|p| fail(key.clone(), p))?;
                if !seen.insert(name.to_ascii_lowercase()) {
                    return Err(fail(key, "header set twice"));
                }
                headers.push((name, value));
            }
            let bearer_token = match f.bearer_token_env {
                Some(var) => {
                    if seen.contains("authorization") {
                        return Err(fail(
                            "bearer_token_env",
                            "an Authorization header is already set",
                        ));
                    }
                    Some(lookup(&var, "bearer_token_env".into())?)
                }
                None => None,
            };
            McpTransport::Http {
                url,
                headers,
                bearer_token,
            }
        }
        (None, Some(command)) => {
            for (key, set) in [
                ("headers", !f.headers.is_empty()),
                ("headers_env", !f.headers_env.is_empty()),
                ("bearer_token_env", f.bearer_token_env.is_some()),
            ] {
                if set {
                    return Err(fail(key, "only for url (HTTP) servers"));
                }
            }
            if command.trim().is_empty() {
                return Err(fail("command", "must not be empty"));
            }
            let path = PathBuf::from(&command);
            // A bare program name ("npx") is looked up on PATH; only paths with a directory
            // part are taken relative to the config file.
            let command = match dir {
                Some(d) if path.is_relative() && path.components().count() > 1 => d.join(path),
                _ => path,
            };
            let mut vars = Vec::new();
            for (k, v) in f.env {
                if k.is_empty() || k.contains('=') || k.contains('\0') {
                    return Err(fail(format!("env.{k}"), "not a valid variable name"));
                }
                vars.push((k, Secret::new(v)));
            }
            McpTransport::Stdio {
                command,
                args: f.args,
                env: vars,
            }
        }
    };
    Ok(McpConfig {
        name: f.name,
        transport,
        prefix,
        allow: f.allow,
        deny: f.deny,
        refresh: f.refresh_secs.map(Duration::from_secs),
    })
}

fn check_header(name: &str, value: &Secret) -> Result<(), String> {
    if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
        return Err("not a valid header name".into());
    }
    if RESERVED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
        return Err("set by the MCP transport itself".into());
    }
    if http::HeaderValue::from_str(value.expose()).is_err() {
        return Err("not a valid header value".into());
    }
    Ok(())
}

// ---------------------------------------------------------------- the source

/// What tools need to reach the server; kept apart from [`Inner`] so the tool list (which
/// holds the tools) and the tools (which hold this) do not form a cycle.
struct Link {
    server: String,
    /// The live session, `None` while disconnected.
    peer: RwLock<Option<Peer<RoleClient>>>,
    /// A call failed: the supervisor checks the session at once instead of at the next ping.
    poke: Notify,
    redactor: Redactor,
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
    let redactor = Redactor::new(&cfg.transport);
    let inner = Arc::new(Inner {
        link: Arc::new(Link {
            server: cfg.name.clone(),
            peer: RwLock::new(None),
            poke: Notify::new(),
            redactor,
        }),
        cfg,
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

/// Why a session ended.
enum End {
    Shutdown,
    Dropped(String),
}

/// Owns the connection: connect, list, watch, reconnect with backoff, until shutdown.
async fn supervise(inner: Arc<Inner>, ready: oneshot::Sender<()>) {
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
    match &inner.cfg.transport {
        McpTransport::Http {
            url,
            headers,
            bearer_token,
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
            // The gateway owns reconnection, so a restarted server gets a fresh session and a
            // fresh tool listing instead of rmcp's silent re-initialisation.
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                .custom_headers(custom)
                .reinit_on_expired_session(false);
            if let Some(token) = bearer_token {
                config = config.auth_header(token.expose());
            }
            let transport = StreamableHttpClientTransport::from_config(config);
            handler
                .serve_with_ct(transport, ct)
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
                .serve_with_ct(transport, ct)
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

/// A transport error as "what failed: the root cause". rmcp's wrappers keep the transport's
/// own error out of `source()`, so they are unwrapped by hand; the root cause (e.g.
/// "Connection refused") is what an operator needs and the top-level message leaves it out.
fn describe(e: &(dyn StdError + 'static)) -> String {
    let mut e = e;
    loop {
        if let Some(ServiceError::TransportSend(t)) = e.downcast_ref::<ServiceError>() {
            e = t.error.as_ref();
        } else if let Some(ClientInitializeError::TransportError { error, .. }) =
            e.downcast_ref::<ClientInitializeError>()
        {
            e = error.error.as_ref();
        } else if let Some(StreamableHttpError::Client(c)) =
            e.downcast_ref::<StreamableHttpError<reqwest::Error>>()
        {
            e = c;
        } else {
            break;
        }
    }
    let top = e.to_string();
    let mut root = None;
    let mut next = e.source();
    while let Some(s) = next {
        root = Some(s);
        next = s.source();
    }
    match root.map(|r| r.to_string()) {
        Some(r) if !top.contains(&r) => format!("{top}: {r}"),
        _ => top,
    }
}

/// Keeps URLs' credentials (user info, query) out of health output, logs and tool results.
struct Redactor {
    replace: Vec<(String, String)>,
}

impl Redactor {
    fn new(t: &McpTransport) -> Self {
        let mut replace = Vec::new();
        if let McpTransport::Http { url, .. } = t
            && let Ok(parsed) = url::Url::parse(url)
        {
            let mut safe = parsed.clone();
            let _ = safe.set_username("");
            let _ = safe.set_password(None);
            safe.set_query(None);
            safe.set_fragment(None);
            replace.push((parsed.to_string(), safe.to_string()));
            replace.push((url.clone(), safe.to_string()));
        }
        Self { replace }
    }

    fn clean(&self, s: &str) -> String {
        let mut out = s.to_string();
        for (from, to) in &self.replace {
            if from != to {
                out = out.replace(from.as_str(), to);
            }
        }
        const MAX: usize = 400;
        if out.len() > MAX {
            let mut cut = MAX;
            while !out.is_char_boundary(cut) {
                cut -= 1;
            }
            out.truncate(cut);
            out.push('…');
        }
        out
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

// ---------------------------------------------------------------- one tool

/// One tool of an MCP server.
struct McpTool {
    spec: ToolSpec,
    /// The server's name for it (without the prefix).
    original: String,
    link: Arc<Link>,
}

impl McpTool {
    async fn run(&self, args: Value, ctx: ToolContext) -> ToolOutput {
        let server = &self.link.server;
        let peer = read(&self.link.peer).clone();
        let Some(peer) = peer else {
            return ToolOutput::error(format!(
                "Tool {} is unavailable: MCP server {server} is not connected right now. Try again later.",
                self.spec.name
            ));
        };
        let mut params = CallToolRequestParams::new(self.original.clone());
        if let Value::Object(map) = args {
            params = params.with_arguments(map);
        }
        // Dropping the request on cancellation sends notifications/cancelled to the server.
        let result = tokio::select! {
            r = peer.call_tool_once(params) => r,
            _ = ctx.cancel.cancelled() => return ToolOutput::error("Tool call cancelled."),
        };
        match result {
            Ok(CallToolResponse::Complete(r)) => to_output(r),
            Ok(_) => ToolOutput::error(format!(
                "Tool {} asked for interactive input or a background task, which this gateway does not support.",
                self.spec.name
            )),
            Err(ServiceError::McpError(e)) => {
                // The server answered; still let the supervisor look, in case it is going away.
                self.link.poke.notify_one();
                ToolOutput::error(format!(
                    "MCP server {server} refused the call: {}",
                    e.message
                ))
            }
            Err(e) => {
                self.link.poke.notify_one();
                let why = self.link.redactor.clean(&describe(&e));
                tracing::warn!(server = %server, tool = %self.spec.name, error = %why, "MCP call failed");
                // The details (addresses, transport errors) stay in the log: results reach
                // the model and the client.
                ToolOutput::error(format!(
                    "Tool {} failed: MCP server {server} is unavailable right now. Try again later.",
                    self.spec.name
                ))
            }
        }
    }
}

impl Tool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call(&self, args: Value, ctx: ToolContext) -> BoxFuture<'_, ToolOutput> {
        Box::pin(self.run(args, ctx))
    }
}

/// Text contents joined; other content as short placeholders; the structured content kept,
/// and used as the text when there is no text.
fn to_output(r: CallToolResult) -> ToolOutput {
    let parts: Vec<String> = r
        .content
        .iter()
        .map(|c| match c {
            ContentBlock::Text(t) => t.text.clone(),
            ContentBlock::Image(i) => format!("[image: {}]", i.mime_type),
            ContentBlock::Audio(a) => format!("[audio: {}]", a.mime_type),
            ContentBlock::Resource(e) => match &e.resource {
                ResourceContents::TextResourceContents { text, .. } => text.clone(),
                ResourceContents::BlobResourceContents { uri, mime_type, .. } => format!(
                    "[resource {uri}: {}]",
                    mime_type.as_deref().unwrap_or("binary")
                ),
                _ => "[resource]".to_string(),
            },
            ContentBlock::ResourceLink(l) => format!("[resource link: {} ({})]", l.name, l.uri),
            _ => "[unsupported content]".to_string(),
        })
        .collect();
    let text = if parts.is_empty() {
        r.structured_content
            .as_ref()
            .map(Value::to_string)
            .unwrap_or_default()
    } else {
        parts.join("\n")
    };
    ToolOutput {
        text,
        is_error: r.is_error.unwrap_or(false),
        structured: r.structured_content,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(s: &str) -> Result<McpConfig, Fail> {
        let env = |k: &str| match k {
            "TOKEN" => Some("s3cret".to_string()),
            "API_KEY" => Some("k3y".to_string()),
            _ => None,
        };
        parse(toml::from_str(s).unwrap(), &env, Some(Path::new("/etc/gw")))
    }

    fn key(s: &str) -> String {
        parse_str(s).unwrap_err().0
    }

    #[test]
    fn http_entries_resolve_headers_and_tokens() {
        let c = parse_str(
            r#"
name = "docs"
url = "https://mcp.example.com/mcp"
headers = { X-Team = "blue" }
headers_env = { X-Api-Key = "API_KEY" }
bearer_token_env = "TOKEN"
prefix = "docs_"
allow = ["search"]
refresh_secs = 60
"#,
        )
        .unwrap();
        assert_eq!(c.prefix, "docs_");
        assert_eq!(c.refresh, Some(Duration::from_secs(60)));
        let McpTransport::Http {
            headers,
            bearer_token,
            ..
        } = &c.transport
        else {
            panic!("{c:?}")
        };
        assert_eq!(headers.len(), 2);
        assert_eq!(bearer_token.as_ref().unwrap().expose(), "s3cret");
        let debug = format!("{c:?}");
        assert!(!debug.contains("s3cret") && !debug.contains("k3y") && !debug.contains("blue"));
    }

    #[test]
    fn stdio_commands_resolve_against_the_config_dir() {
        let c = parse_str(
            r#"name = "x"
command = "bin/server"
args = ["--fast"]
env = { LEVEL = "debug" }"#,
        )
        .unwrap();
        let McpTransport::Stdio { command, args, env } = &c.transport else {
            panic!()
        };
        assert_eq!(command, Path::new("/etc/gw/bin/server"));
        assert_eq!(args, &["--fast"]);
        assert_eq!(env[0].0, "LEVEL");
        let c = parse_str("name = \"x\"\ncommand = \"npx\"").unwrap();
        let McpTransport::Stdio { command, .. } = &c.transport else {
            panic!()
        };
        assert_eq!(command, Path::new("npx"), "bare names stay on PATH");
    }

    #[test]
    fn errors_name_the_key() {
        assert_eq!(key("url = \"http://x\""), "name");
        assert_eq!(key("name = \"x\""), "url");
        assert_eq!(
            key("name = \"x\"\nurl = \"http://x\"\ncommand = \"y\""),
            "command"
        );
        assert_eq!(key("name = \"x\"\nurl = \"ftp://x\""), "url");
        assert_eq!(key("name = \"x\"\nurl = \"not a url\""), "url");
        assert_eq!(
            key("name = \"x\"\nurl = \"http://x\"\nheaders_env = { A = \"NOPE\" }"),
            "headers_env.A"
        );
        assert_eq!(
            key("name = \"x\"\nurl = \"http://x\"\nheaders = { \"Bad Name\" = \"v\" }"),
            "headers.Bad Name"
        );
        assert_eq!(
            key("name = \"x\"\nurl = \"http://x\"\nheaders = { Accept = \"v\" }"),
            "headers.Accept"
        );
        assert_eq!(
            key("name = \"x\"\nurl = \"http://x\"\nbearer_token_env = \"NOPE\""),
            "bearer_token_env"
        );
        assert_eq!(
            key(
                "name = \"x\"\nurl = \"http://x\"\nheaders = { Authorization = \"a\" }\nbearer_token_env = \"TOKEN\""
            ),
            "bearer_token_env"
        );
        assert_eq!(
            key("name = \"x\"\nurl = \"http://x\"\nargs = [\"a\"]"),
            "args"
        );
        assert_eq!(
            key("name = \"x\"\ncommand = \"y\"\nheaders = { A = \"b\" }"),
            "headers"
        );
        assert_eq!(
            key("name = \"x\"\nurl = \"http://x\"\nprefix = \"a b\""),
            "prefix"
        );
        assert_eq!(
            key("name = \"x\"\nurl = \"http://x\"\nrefresh_secs = 0"),
            "refresh_secs"
        );
        assert_eq!(
            key("name = \"x\"\nurl = \"http://x\"\nrefresh_secs = \"5\""),
            "refresh_secs"
        );
        assert_eq!(
            key("name = \"x\"\nurl = \"http://x\"\nallow = \"a\""),
            "allow"
        );
        let (k, p) = parse_str("name = \"x\"\nurl = \"http://x\"\nbogus = 1").unwrap_err();
        assert!(p.contains("bogus"), "{k}: {p}");
        let (_, p) = parse_str("name = \"x\"\nurl = \"http://x\"\nheaders_env = { A = \"NOPE\" }")
            .unwrap_err();
        assert!(p.contains("NOPE"), "{p}");
    }

    #[test]
    fn results_keep_text_structure_and_errors() {
        let mut r = CallToolResult::success(vec![
            ContentBlock::text("a"),
            ContentBlock::image("AAAA", "image/png"),
            ContentBlock::text("b"),
        ]);
        r.structured_content = Some(json!({"sum": 3}));
        let out = to_output(r);
        assert_eq!(out.text, "a\n[image: image/png]\nb");
        assert_eq!(out.structured, Some(json!({"sum": 3})));
        assert!(!out.is_error);
        let mut r = CallToolResult::error(vec![]);
        r.structured_content = Some(json!({"code": 7}));
        let out = to_output(r);
        assert_eq!((out.text.as_str(), out.is_error), ("{\"code\":7}", true));
    }

    #[test]
    fn urls_lose_their_credentials_in_messages() {
        let r = Redactor::new(&McpTransport::Http {
            url: "https://u:p@mcp.example.com/mcp?key=abc".into(),
            headers: vec![],
            bearer_token: None,
        });
        let s = r.clean("error sending request for url (https://u:p@mcp.example.com/mcp?key=abc)");
        assert_eq!(
            s,
            "error sending request for url (https://mcp.example.com/mcp)"
        );
    }
}
