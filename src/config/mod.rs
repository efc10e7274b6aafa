//! Configuration: a TOML file (or the embedded default) read strictly, then resolved (env vars,
//! fixture files, URLs) so that every problem stops start-up with the file, the key and the
//! problem named.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

mod agents;
pub mod auth;
mod model;
mod tools;

pub use crate::model::bedrock::AwsCredentials;
pub use crate::model::retry::RetryPolicy;
use agents::AgentFile;
pub use agents::{AgentConfig, AgentKind, FlowStep, HistorySource, MemoryConfig, PredictState};
pub use model::{ModelConfig, ProviderConfig};
pub use tools::{ToolConfig, ToolKind, tool_from_json};

/// The configuration used when no file is given: a demo agent on the scripted model.
pub const DEFAULT_CONFIG: &str = include_str!("../../config/default.toml");
/// The scripted demo model's fixture, used when a scripted agent names none.
pub const DEMO_FIXTURE: &str = include_str!("../../fixtures/demo.json");
const EMBEDDED: &str = "<embedded default config>";

pub use crate::redact::Secret;
pub use crate::settings::{check_url, from_table, valid_name};

/// A configuration problem, naming where it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("config error in {file}: {key}: {problem}")]
pub struct ConfigError {
    /// The file (or `<embedded default config>`).
    pub file: String,
    /// The key path, e.g. `agents[0].model.provider`.
    pub key: String,
    /// What is wrong.
    pub problem: String,
}

// ---------------------------------------------------------------- file shape

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    #[serde(default)]
    listen: Option<String>,
    #[serde(default)]
    data_dir: Option<PathBuf>,
    #[serde(default)]
    store: StoreFile,
    #[serde(default)]
    server: ServerFile,
    #[serde(default)]
    media: MediaFile,
    #[serde(default)]
    agents: Vec<AgentFile>,
    #[serde(default)]
    secrets: SecretsFile,
    #[serde(default)]
    auth: auth::AuthFile,
    #[serde(default)]
    outbound: OutboundFile,
    #[serde(default)]
    opensearch: Option<toml::Table>,
}

/// `[outbound]`: what URLs registered through the API may reach beyond public addresses.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct OutboundFile {
    #[serde(default)]
    trusted_endpoints: Vec<String>,
    #[serde(default)]
    allowed_cidrs: Vec<String>,
}

/// Where the master key that seals stored credentials comes from.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SecretsFile {
    #[serde(default)]
    key_file: Option<PathBuf>,
    #[serde(default)]
    key_env: Option<String>,
}

/// The master key (AES-256-GCM) that seals credentials stored by the agent API.
#[derive(Debug, Clone)]
pub enum MasterKey {
    /// Base64 key text from an environment variable.
    Env(Secret),
    /// A key file, generated on first start when missing.
    File(PathBuf),
    /// `master.key` in the data directory (as it is when the server starts), generated on
    /// first start when missing.
    InDataDir,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerFile {
    keepalive_secs: Option<u64>,
    run_events_keep_secs: Option<u64>,
    lease_secs: Option<u64>,
    detach_on_disconnect: Option<bool>,
    max_detached_runs: Option<usize>,
    max_detached_secs: Option<u64>,
    channel_capacity: Option<usize>,
    max_body_bytes: Option<usize>,
    model_idle_timeout_secs: Option<u64>,
    #[serde(default)]
    cors_origins: Option<Vec<String>>,
    #[serde(default)]
    allowed_hosts: Option<Vec<String>>,
    max_concurrent_runs: Option<usize>,
    max_messages: Option<usize>,
    max_part_bytes: Option<usize>,
    max_tool_concurrency: Option<usize>,
    max_run_secs: Option<u64>,
    shutdown_grace_secs: Option<u64>,
    max_connections: Option<usize>,
    header_read_timeout_secs: Option<u64>,
    idle_timeout_secs: Option<u64>,
    body_timeout_secs: Option<u64>,
    write_timeout_secs: Option<u64>,
    http2_keepalive_secs: Option<u64>,
    http2_max_streams: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoreFile {
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    url_env: Option<String>,
    /// How long one store operation may take before it fails (the run with it).
    #[serde(default)]
    op_timeout_secs: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct MediaFile {
    allow_schemes: Option<Vec<String>>,
    allow_hosts: Option<Vec<String>>,
    allow_private: Option<bool>,
    max_bytes: Option<usize>,
    timeout_secs: Option<u64>,
}

// ---------------------------------------------------------------- resolved

/// Server-wide settings.
#[derive(Debug, Clone)]
pub struct ServerSettings {
    /// Seconds of silence after which an SSE keep-alive comment is sent.
    pub keepalive_secs: u64,
    /// Events buffered between a run and its HTTP body (backpressure beyond this).
    pub channel_capacity: usize,
    /// The largest accepted request body.
    pub max_body_bytes: usize,
    /// The longest silence tolerated from a model stream.
    pub model_idle_timeout_secs: u64,
    /// Allowed CORS origins (`*` for any); empty: pages served from loopback hosts only.
    pub cors_origins: Vec<String>,
    /// Which `Host` headers are answered (against DNS rebinding).
    pub allowed_hosts: HostCheck,
    /// How long a finished run's events stay replayable.
    pub run_events_keep_secs: u64,
    /// The lease that holds a thread for a run across gateways (renewed while it runs).
    pub lease_secs: u64,
    /// Keep runs going when their client disconnects (they can be followed again).
    pub detach_on_disconnect: bool,
    /// At most this many detached runs at once; beyond it a disconnect cancels.
    pub max_detached_runs: usize,
    /// A detached run is cancelled after this long without its client.
    pub max_detached_secs: u64,
    /// On shutdown, how long active runs may go on before they end with `SHUTDOWN`.
    pub shutdown_grace_secs: u64,
    /// API keys (hashes); none: no authentication.
    pub api_keys: Vec<auth::ApiKey>,
    /// At most this many runs at once on this gateway (beyond: 503 with Retry-After).
    pub max_concurrent_runs: usize,
    /// At most this many messages in one request.
    pub max_messages: usize,
    /// The largest text, tool-call arguments or inline media of one message part (bytes).
    pub max_part_bytes: usize,
    /// At most this many backend tool calls of one run execute at once (the rest wait).
    pub max_tool_concurrency: usize,
    /// A run's wall-clock limit; past it the run ends with `RUN_ERROR` code `RUN_TIMEOUT`.
    pub max_run_secs: u64,
    /// At most this many client connections at once (lowered further to fit the open-file
    /// limit); connections beyond it are closed as soon as they are accepted.
    pub max_connections: usize,
    /// How long a client may take to send a request head (HTTP/1.x) or the HTTP/2 preface.
    pub header_read_timeout_secs: u64,
    /// A connection with no request in flight is closed after this long.
    pub idle_timeout_secs: u64,
    /// The whole request body must arrive within this long of its head (else 408).
    pub body_timeout_secs: u64,
    /// A response write that makes no progress for this long ends the connection.
    pub write_timeout_secs: u64,
    /// HTTP/2: a PING after this long without frames; no answer within as long closes.
    pub http2_keepalive_secs: u64,
    /// HTTP/2: at most this many streams (requests) open at once per connection.
    pub http2_max_streams: u32,
}

impl Default for ServerSettings {
    fn default() -> Self {
        Self {
            keepalive_secs: 15,
            channel_capacity: 64,
            max_body_bytes: 32 * 1024 * 1024,
            model_idle_timeout_secs: 300,
            cors_origins: Vec::new(),
            allowed_hosts: HostCheck::Loopback,
            run_events_keep_secs: 600,
            lease_secs: 30,
            detach_on_disconnect: false,
            max_detached_runs: 100,
            max_detached_secs: 600,
            shutdown_grace_secs: 30,
            api_keys: Vec::new(),
            max_concurrent_runs: 10_000,
            max_messages: 10_000,
            max_part_bytes: 8 * 1024 * 1024,
            max_tool_concurrency: 8,
            max_run_secs: 3_600,
            max_connections: 20_000,
            header_read_timeout_secs: 30,
            idle_timeout_secs: 60,
            body_timeout_secs: 60,
            write_timeout_secs: 30,
            http2_keepalive_secs: 20,
            http2_max_streams: 100,
        }
    }
}

/// Which `Host` headers the server answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostCheck {
    /// Any (`allowed_hosts = ["*"]`, or the default when listening on a non-loopback address).
    Any,
    /// Loopback names only (`localhost`, `127.0.0.1`, `[::1]`, any port): the default when
    /// listening on a loopback address.
    Loopback,
    /// These host names (any port, case-insensitive).
    List(Vec<String>),
}

impl HostCheck {
    /// The default for a listen address: loopback names on a loopback address, else any.
    pub fn for_listen(addr: SocketAddr) -> Self {
        match addr.ip().is_loopback() {
            true => HostCheck::Loopback,
            false => HostCheck::Any,
        }
    }

    /// Whether a request with this `Host` value (or `:authority`) is answered.
    pub fn allows(&self, authority: &str) -> bool {
        match self {
            HostCheck::Any => true,
            HostCheck::Loopback => crate::outbound::is_loopback_host(authority),
            HostCheck::List(names) => {
                let host = match authority.strip_prefix('[') {
                    Some(rest) => rest.split(']').next().map(|h| format!("[{h}]")),
                    None => authority.rsplit_once(':').map(|(h, _)| h.to_string()),
                }
                .unwrap_or_else(|| authority.to_string());
                let host = host.trim_end_matches('.');
                names.iter().any(|n| n.eq_ignore_ascii_case(host))
            }
        }
    }
}

/// `[outbound]`: what URLs registered through the API may reach beyond public addresses.
#[derive(Debug, Clone, Default)]
pub struct OutboundSettings {
    /// Regexes over whole URLs that are trusted as they are.
    pub trusted_endpoints: Vec<String>,
    /// Address ranges that may be reached although not public.
    pub allowed_cidrs: Vec<String>,
}

impl OutboundSettings {
    /// The policy these settings describe.
    pub fn policy(&self) -> Result<crate::outbound::Policy, crate::outbound::PolicyError> {
        crate::outbound::Policy::new(&self.trusted_endpoints, &self.allowed_cidrs)
    }
}

/// The resolved configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where to listen (change it with [`Config::set_listen`]: the `Host` check follows it).
    pub listen: SocketAddr,
    /// Whether `[server] allowed_hosts` was given (else it follows `listen`).
    pub hosts_configured: bool,
    /// Where embedded stores (search indexes, the SQLite store) keep their files.
    pub data_dir: PathBuf,
    /// PostgreSQL URL of a shared store; the embedded SQLite store when `None`.
    pub store_url: Option<Secret>,
    /// How long one store operation may take before it fails (`STORE_UNAVAILABLE`).
    pub store_op_timeout: std::time::Duration,
    /// Server-wide settings.
    pub server: ServerSettings,
    /// Where media URLs may be fetched from.
    pub media: crate::model::media::MediaPolicy,
    /// Where URLs registered through the API may lead.
    pub outbound: OutboundSettings,
    /// The agents.
    pub agents: Vec<AgentConfig>,
    /// The key that seals stored credentials.
    pub master_key: MasterKey,
    /// `[opensearch]`: the cluster every ml-commons tool uses (the embedded indexes when
    /// `None`).
    pub opensearch: Option<crate::tools::search::cluster::ClusterSettings>,
}

impl Config {
    /// Listens on `addr` instead; the default `Host` check follows (loopback names on a
    /// loopback address, none elsewhere) unless `allowed_hosts` was configured.
    pub fn set_listen(&mut self, addr: SocketAddr) {
        self.listen = addr;
        if !self.hosts_configured {
            self.server.allowed_hosts = HostCheck::for_listen(addr);
        }
    }

    /// Loads `path`, or the embedded default when `None`.
    pub fn load(path: Option<&Path>) -> Result<Self, ConfigError> {
        match path {
            None => Self::parse(DEFAULT_CONFIG, EMBEDDED, None),
            Some(p) => {
                let label = p.display().to_string();
                let text = std::fs::read_to_string(p).map_err(|e| ConfigError {
                    file: label.clone(),
                    key: String::new(),
                    problem: format!("cannot read the file: {e}"),
                })?;
                Self::parse(&text, &label, p.parent())
            }
        }
    }

    /// Parses and resolves config text; `file` labels errors, `dir` anchors relative paths.
    pub fn parse(text: &str, file: &str, dir: Option<&Path>) -> Result<Self, ConfigError> {
        Self::parse_with_env(text, file, dir, &|k| std::env::var(k).ok())
    }

    /// [`Config::parse`] with an explicit environment, for tests.
    pub fn parse_with_env(
        text: &str,
        file: &str,
        dir: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let err = |key: String, problem: String| ConfigError {
            file: file.to_string(),
            key,
            problem,
        };
        let table: toml::Table = toml::from_str(text).map_err(|e| {
            err(
                String::new(),
                format!("invalid TOML: {}", e.to_string().trim()),
            )
        })?;
        let raw: FileConfig = serde_path_to_error::deserialize(toml::Value::Table(table))
            .map_err(|e| err(e.path().to_string(), e.inner().to_string()))?;

        let listen = raw.listen.as_deref().unwrap_or("127.0.0.1:8080");
        let listen: SocketAddr = listen.parse().map_err(|_| {
            err(
                "listen".into(),
                format!("{listen:?} is not an address like 127.0.0.1:8080"),
            )
        })?;
        let data_dir = match raw.data_dir {
            Some(p) if p.is_relative() => dir.map(|d| d.join(&p)).unwrap_or(p),
            Some(p) => p,
            None => PathBuf::from("agui-data"),
        };
        let key_env = raw
            .secrets
            .key_env
            .clone()
            .unwrap_or_else(|| "AGUI_MASTER_KEY".into());
        let master_key = match env(&key_env).filter(|v| !v.is_empty()) {
            Some(v) => MasterKey::Env(Secret::new(v)),
            None => match raw.secrets.key_file.clone() {
                Some(p) if p.is_relative() => MasterKey::File(dir.map(|d| d.join(&p)).unwrap_or(p)),
                Some(p) => MasterKey::File(p),
                None => MasterKey::InDataDir,
            },
        };
        let d = ServerSettings::default();
        let s = raw.server;
        let s_allowed_hosts_configured = s.allowed_hosts.is_some();
        let server = ServerSettings {
            keepalive_secs: s.keepalive_secs.unwrap_or(d.keepalive_secs).max(1),
            channel_capacity: s.channel_capacity.unwrap_or(d.channel_capacity).max(1),
            max_body_bytes: s.max_body_bytes.unwrap_or(d.max_body_bytes),
            model_idle_timeout_secs: s
                .model_idle_timeout_secs
                .unwrap_or(d.model_idle_timeout_secs)
                .max(1),
            cors_origins: s.cors_origins.unwrap_or(d.cors_origins),
            allowed_hosts: match &s.allowed_hosts {
                Some(h) if h.iter().any(|n| n == "*") => HostCheck::Any,
                Some(h) => HostCheck::List(h.clone()),
                None => HostCheck::for_listen(listen),
            },
            run_events_keep_secs: s.run_events_keep_secs.unwrap_or(d.run_events_keep_secs),
            lease_secs: s.lease_secs.unwrap_or(d.lease_secs).max(2),
            detach_on_disconnect: s.detach_on_disconnect.unwrap_or(d.detach_on_disconnect),
            max_detached_runs: s.max_detached_runs.unwrap_or(d.max_detached_runs),
            max_detached_secs: s.max_detached_secs.unwrap_or(d.max_detached_secs).max(1),
            shutdown_grace_secs: s.shutdown_grace_secs.unwrap_or(d.shutdown_grace_secs),
            api_keys: auth::resolve(raw.auth, env).map_err(|(k, p)| err(k, p))?,
            max_concurrent_runs: s
                .max_concurrent_runs
                .unwrap_or(d.max_concurrent_runs)
                .max(1),
            max_messages: s.max_messages.unwrap_or(d.max_messages).max(1),
            max_part_bytes: s.max_part_bytes.unwrap_or(d.max_part_bytes).max(1),
            max_tool_concurrency: s
                .max_tool_concurrency
                .unwrap_or(d.max_tool_concurrency)
                .max(1),
            max_run_secs: s.max_run_secs.unwrap_or(d.max_run_secs).max(1),
            max_connections: s.max_connections.unwrap_or(d.max_connections).max(1),
            header_read_timeout_secs: s
                .header_read_timeout_secs
                .unwrap_or(d.header_read_timeout_secs)
                .max(1),
            idle_timeout_secs: s.idle_timeout_secs.unwrap_or(d.idle_timeout_secs).max(1),
            body_timeout_secs: s.body_timeout_secs.unwrap_or(d.body_timeout_secs).max(1),
            write_timeout_secs: s.write_timeout_secs.unwrap_or(d.write_timeout_secs).max(1),
            http2_keepalive_secs: s
                .http2_keepalive_secs
                .unwrap_or(d.http2_keepalive_secs)
                .max(1),
            http2_max_streams: s.http2_max_streams.unwrap_or(d.http2_max_streams).max(1),
        };

        let md = crate::model::media::MediaPolicy::default();
        let mf = raw.media;
        let media = crate::model::media::MediaPolicy {
            allow_schemes: mf.allow_schemes.unwrap_or(md.allow_schemes),
            allow_hosts: mf.allow_hosts.unwrap_or(md.allow_hosts),
            allow_private: mf.allow_private.unwrap_or(md.allow_private),
            max_bytes: mf.max_bytes.unwrap_or(md.max_bytes),
            timeout: mf
                .timeout_secs
                .map(std::time::Duration::from_secs)
                .unwrap_or(md.timeout),
        };
        for (i, scheme) in media.allow_schemes.iter().enumerate() {
            if !matches!(scheme.as_str(), "http" | "https") {
                return Err(err(
                    format!("media.allow_schemes[{i}]"),
                    format!("{scheme:?}: only http and https can be fetched"),
                ));
            }
        }
        let outbound = OutboundSettings {
            trusted_endpoints: raw.outbound.trusted_endpoints,
            allowed_cidrs: raw.outbound.allowed_cidrs,
        };
        outbound.policy().map_err(|e| {
            let key = match e {
                crate::outbound::PolicyError::Regex(_) => "outbound.trusted_endpoints",
                _ => "outbound.allowed_cidrs",
            };
            err(key.into(), e.to_string())
        })?;
        let opensearch = match raw.opensearch {
            None => None,
            Some(t) => Some(
                crate::tools::search::cluster::parse_section(t, env)
                    .map_err(|(k, p)| err(format!("opensearch.{k}"), p))?,
            ),
        };
        let agents = agents::resolve(raw.agents, server.model_idle_timeout_secs, dir, env)
            .map_err(|(k, p)| err(k, p))?;
        let store_url = match (raw.store.url, raw.store.url_env) {
            (Some(_), Some(_)) => {
                return Err(err(
                    "store.url".into(),
                    "set url or url_env, not both".into(),
                ));
            }
            (Some(u), None) => Some(Secret::new(u)),
            (None, Some(var)) => {
                Some(env_secret(&var, env).map_err(|p| err("store.url_env".into(), p))?)
            }
            (None, None) => None,
        };
        if let Some(u) = &store_url
            && !(u.expose().starts_with("postgres://") || u.expose().starts_with("postgresql://"))
        {
            return Err(err(
                "store.url".into(),
                "must be a postgres:// URL (the embedded SQLite store needs no URL)".into(),
            ));
        }
        // A driver error may quote the password alone.
        if let Some(u) = &store_url
            && let Ok(parsed) = url::Url::parse(u.expose())
        {
            crate::redact::register_url(&parsed);
        }
        let store_op_timeout = match raw.store.op_timeout_secs {
            None => crate::store::sql::DEFAULT_OP_TIMEOUT,
            Some(s) if s.is_finite() && (0.05..=3600.0).contains(&s) => {
                std::time::Duration::from_secs_f64(s)
            }
            Some(_) => {
                return Err(err(
                    "store.op_timeout_secs".into(),
                    "must be between 0.05 and 3600".into(),
                ));
            }
        };
        Ok(Config {
            listen,
            hosts_configured: s_allowed_hosts_configured,
            data_dir,
            store_url,
            store_op_timeout,
            server,
            media,
            outbound,
            agents,
            master_key,
            opensearch,
        })
    }
}

pub(super) fn env_secret(
    var: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Secret, String> {
    match env(var) {
        Some(v) if !v.is_empty() => Ok(Secret::new(v)),
        _ => Err(format!("environment variable {var} is not set")),
    }
}

pub(super) type Fail = (String, String);

#[cfg(test)]
mod tests;
