//! Configuration: a TOML file (or the embedded default) read strictly, then resolved (env vars,
//! fixture files, URLs) so that every problem stops start-up with the file, the key and the
//! problem named.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use crate::model::scripted::Fixture;

/// The configuration used when no file is given: a demo agent on the scripted model.
pub const DEFAULT_CONFIG: &str = include_str!("../config/default.toml");
/// The scripted demo model's fixture, used when a scripted agent names none.
pub const DEMO_FIXTURE: &str = include_str!("../fixtures/demo.json");
const EMBEDDED: &str = "<embedded default config>";

/// A secret value: never printed by `Debug` or `Display`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Arc<str>);

impl Secret {
    /// Wraps a secret.
    pub fn new(s: impl Into<Arc<str>>) -> Self {
        Self(s.into())
    }

    /// The secret itself, for the one place that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[REDACTED]")
    }
}

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
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoreFile {
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    url_env: Option<String>,
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

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentFile {
    id: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    system_prompt: Option<String>,
    #[serde(default)]
    max_iterations: Option<u32>,
    model: ModelFile,
    #[serde(default)]
    tools: Vec<toml::Table>,
    #[serde(default)]
    memory: MemoryFile,
}

/// How an agent keeps its threads.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct MemoryFile {
    #[serde(default)]
    store: Option<bool>,
    #[serde(default)]
    history: Option<String>,
    #[serde(default)]
    message_history_limit: Option<usize>,
    #[serde(default)]
    snapshot_on_finish: Option<bool>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    memory_container_id: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelFile {
    provider: String,
    #[serde(default)]
    model_id: Option<String>,
    #[serde(default)]
    base_url: Option<String>,
    #[serde(default)]
    api_key_env: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    temperature: Option<f32>,
    #[serde(default)]
    top_p: Option<f32>,
    #[serde(default)]
    max_tokens: Option<u32>,
    #[serde(default)]
    stop: Vec<String>,
    #[serde(default)]
    reasoning_effort: Option<String>,
    #[serde(default)]
    additional_model_request_fields: Option<toml::Table>,
    #[serde(default)]
    anthropic_version: Option<String>,
    #[serde(default)]
    region: Option<String>,
    #[serde(default)]
    endpoint_url: Option<String>,
    #[serde(default)]
    credential: Option<CredentialFile>,
    #[serde(default)]
    fixture: Option<PathBuf>,
    #[serde(default)]
    idle_timeout_secs: Option<u64>,
    #[serde(default)]
    max_retries: Option<u32>,
    #[serde(default)]
    retry_initial_backoff_ms: Option<u64>,
}

/// Explicit AWS credentials, the seeds' `credential` block; each value literal or from an env var.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CredentialFile {
    #[serde(default)]
    access_key: Option<String>,
    #[serde(default)]
    secret_key: Option<String>,
    #[serde(default)]
    session_token: Option<String>,
    #[serde(default)]
    access_key_env: Option<String>,
    #[serde(default)]
    secret_key_env: Option<String>,
    #[serde(default)]
    session_token_env: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpFile {
    name: String,
    #[serde(default)]
    description: Option<String>,
    url: String,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    headers_env: BTreeMap<String, String>,
    #[serde(default)]
    parameters: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BuiltinFile {
    name: String,
    #[serde(default)]
    kind: Option<String>,
}

/// What every tool entry may set besides its own keys.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolOptionsFile {
    #[serde(default)]
    timeout_secs: Option<u64>,
    #[serde(default)]
    max_output_bytes: Option<usize>,
    #[serde(default)]
    requires_approval: Option<ApprovalFile>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ApprovalFile {
    All(bool),
    Names(Vec<String>),
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
    /// Allowed CORS origins (`*` for any).
    pub cors_origins: Vec<String>,
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
}

impl Default for ServerSettings {
    fn default() -> Self {
        Self {
            keepalive_secs: 15,
            channel_capacity: 64,
            max_body_bytes: 32 * 1024 * 1024,
            model_idle_timeout_secs: 300,
            cors_origins: vec!["*".into()],
            run_events_keep_secs: 600,
            lease_secs: 30,
            detach_on_disconnect: false,
            max_detached_runs: 100,
            max_detached_secs: 600,
        }
    }
}

/// Which provider an agent uses, with its resolved settings.
#[derive(Debug, Clone)]
pub enum ProviderConfig {
    /// OpenAI-compatible chat completions.
    OpenAi {
        /// Base URL (`.../v1`).
        base_url: String,
        /// The key, if any.
        api_key: Option<Secret>,
        /// Extra headers.
        headers: Vec<(String, Secret)>,
        /// Merged into every request body.
        extra: serde_json::Map<String, Value>,
    },
    /// Anthropic Messages.
    Anthropic {
        /// Base URL (`https://api.anthropic.com`).
        base_url: String,
        /// Sent as `x-api-key`.
        api_key: Option<Secret>,
        /// `anthropic-version`.
        version: String,
        /// Extra headers (e.g. `anthropic-beta`).
        headers: Vec<(String, Secret)>,
        /// Merged into every request body (e.g. `thinking`).
        extra: serde_json::Map<String, Value>,
    },
    /// Bedrock ConverseStream through the AWS SDK.
    Bedrock {
        /// AWS region; the SDK's default chain when `None`.
        region: Option<String>,
        /// Endpoint override (VPC endpoints, tests).
        endpoint_url: Option<String>,
        /// Explicit credentials; the standard chain when `None`.
        credentials: Option<AwsCredentials>,
        /// A Bedrock API key, sent as a bearer token.
        bearer_token: Option<Secret>,
        /// `additionalModelRequestFields` (e.g. Claude's thinking budget).
        extra: serde_json::Map<String, Value>,
    },
    /// The fixture-driven model.
    Scripted {
        /// The parsed fixture.
        fixture: Fixture,
    },
}

/// Static AWS credentials.
#[derive(Debug, Clone)]
pub struct AwsCredentials {
    /// Access key id.
    pub access_key: Secret,
    /// Secret access key.
    pub secret_key: Secret,
    /// Session token for temporary credentials.
    pub session_token: Option<Secret>,
}

/// How model calls that fail before their first token are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 disables).
    pub max_retries: u32,
    /// Backoff before the first retry; doubled each time, with jitter.
    pub initial_backoff_ms: u64,
    /// Cap of one backoff.
    pub max_backoff_ms: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 2,
            initial_backoff_ms: 500,
            max_backoff_ms: 8_000,
        }
    }
}

/// An agent's model.
#[derive(Debug, Clone)]
pub struct ModelConfig {
    /// Provider and its settings.
    pub provider: ProviderConfig,
    /// Model id.
    pub model_id: String,
    /// Sampling defaults.
    pub params: crate::model::InferenceParams,
    /// Stream idle limit in seconds.
    pub idle_timeout_secs: u64,
    /// Retries before the first token.
    pub retry: RetryPolicy,
}

/// A backend tool entry's configuration: what it is, and the limits and approval policy its
/// calls run under.
#[derive(Debug, Clone)]
pub struct ToolConfig {
    /// What kind of tool (or tool source) this is.
    pub kind: ToolKind,
    /// Time limit, output cap, approvals.
    pub options: crate::tools::ToolOptions,
}

/// The kinds of tool entries.
#[derive(Debug, Clone)]
pub enum ToolKind {
    /// An HTTP tool.
    Http {
        /// Name, description, schema.
        spec: crate::conversation::ToolSpec,
        /// Endpoint.
        url: String,
        /// `GET` or `POST`.
        method: crate::tools::http::Method,
        /// Headers, secrets included.
        headers: Vec<(String, Secret)>,
    },
    /// A built-in tool.
    Builtin {
        /// The name the model sees.
        name: String,
        /// Which built-in.
        kind: String,
    },
    /// The tools of an MCP server.
    Mcp(crate::tools::mcp::McpConfig),
    /// The operations of an OpenAPI document.
    OpenApi(crate::tools::openapi::OpenApiConfig),
    /// Knowledge-base search tools.
    Search(crate::tools::search::SearchConfig),
}

impl ToolConfig {
    /// The tool name of a single-tool entry (sources name their tools at run time).
    pub fn name(&self) -> Option<&str> {
        match &self.kind {
            ToolKind::Http { spec, .. } => Some(&spec.name),
            ToolKind::Builtin { name, .. } => Some(name),
            _ => None,
        }
    }
}

/// One agent.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// URL-safe id.
    pub id: String,
    /// Display name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Its system prompt.
    pub system_prompt: Option<String>,
    /// Bound on model calls per run.
    pub max_iterations: u32,
    /// Its model.
    pub model: ModelConfig,
    /// Its backend tools.
    pub tools: Vec<ToolConfig>,
    /// How it keeps its threads.
    pub memory: MemoryConfig,
}

/// Which side's history is the truth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistorySource {
    /// The client's `messages` (saved, deduplicated by id).
    Client,
    /// The stored thread; only new messages are taken from the client.
    Server,
}

/// How an agent keeps its threads.
#[derive(Debug, Clone)]
pub struct MemoryConfig {
    /// Whether threads are stored at all.
    pub store: bool,
    /// Which history is the truth.
    pub history: HistorySource,
    /// At most this many messages go to the model (never cutting a call from its result).
    pub message_history_limit: Option<usize>,
    /// End every run with a `MESSAGES_SNAPSHOT` of the whole thread.
    pub snapshot_on_finish: bool,
    /// Keep threads in this agentic-memory container (one session per thread) instead of the
    /// thread tables.
    pub memory_container_id: Option<String>,
}

/// The resolved configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where to listen.
    pub listen: SocketAddr,
    /// Where embedded stores (search indexes, the SQLite store) keep their files.
    pub data_dir: PathBuf,
    /// PostgreSQL URL of a shared store; the embedded SQLite store when `None`.
    pub store_url: Option<Secret>,
    /// Server-wide settings.
    pub server: ServerSettings,
    /// Where media URLs may be fetched from.
    pub media: crate::model::media::MediaPolicy,
    /// The agents.
    pub agents: Vec<AgentConfig>,
}

const BUILTINS: &[&str] = &["calculator", "publish"];

impl Config {
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
        let d = ServerSettings::default();
        let s = raw.server;
        let server = ServerSettings {
            keepalive_secs: s.keepalive_secs.unwrap_or(d.keepalive_secs).max(1),
            channel_capacity: s.channel_capacity.unwrap_or(d.channel_capacity).max(1),
            max_body_bytes: s.max_body_bytes.unwrap_or(d.max_body_bytes),
            model_idle_timeout_secs: s
                .model_idle_timeout_secs
                .unwrap_or(d.model_idle_timeout_secs)
                .max(1),
            cors_origins: s.cors_origins.unwrap_or(d.cors_origins),
            run_events_keep_secs: s.run_events_keep_secs.unwrap_or(d.run_events_keep_secs),
            lease_secs: s.lease_secs.unwrap_or(d.lease_secs).max(2),
            detach_on_disconnect: s.detach_on_disconnect.unwrap_or(d.detach_on_disconnect),
            max_detached_runs: s.max_detached_runs.unwrap_or(d.max_detached_runs),
            max_detached_secs: s.max_detached_secs.unwrap_or(d.max_detached_secs).max(1),
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
        let mut agents = Vec::new();
        let mut ids = std::collections::HashSet::new();
        for (i, a) in raw.agents.into_iter().enumerate() {
            let key = |k: &str| format!("agents[{i}].{k}");
            if !valid_name(&a.id) {
                return Err(err(
                    key("id"),
                    format!("{:?} must be 1-64 letters, digits, '-' or '_'", a.id),
                ));
            }
            if !ids.insert(a.id.clone()) {
                return Err(err(key("id"), format!("duplicate agent id {:?}", a.id)));
            }
            let max_iterations = a.max_iterations.unwrap_or(10);
            if !(1..=100).contains(&max_iterations) {
                return Err(err(
                    key("max_iterations"),
                    "must be between 1 and 100".into(),
                ));
            }
            let model = resolve_model(a.model, server.model_idle_timeout_secs, dir, env)
                .map_err(|(k, p)| err(key(&format!("model.{k}")), p))?;
            let mut tools: Vec<ToolConfig> = Vec::new();
            for (j, t) in a.tools.into_iter().enumerate() {
                let tkey = |k: &str| key(&format!("tools[{j}].{k}"));
                let tool = resolve_tool(t, env, dir).map_err(|(k, p)| err(tkey(&k), p))?;
                if let Some(name) = tool.name()
                    && tools.iter().any(|x| x.name() == Some(name))
                {
                    return Err(err(tkey("name"), format!("duplicate tool name {name:?}")));
                }
                tools.push(tool);
            }
            let memory = MemoryConfig {
                store: a.memory.store.unwrap_or(true),
                history: match a.memory.history.as_deref() {
                    None | Some("client") => HistorySource::Client,
                    Some("server") => HistorySource::Server,
                    Some(other) => {
                        return Err(err(
                            key("memory.history"),
                            format!("{other:?} must be \"client\" or \"server\""),
                        ));
                    }
                },
                message_history_limit: a.memory.message_history_limit,
                snapshot_on_finish: a.memory.snapshot_on_finish.unwrap_or(false),
                memory_container_id: match (a.memory.kind.as_deref(), a.memory.memory_container_id)
                {
                    (None | Some("thread"), None) => None,
                    (Some("agentic_memory"), Some(id)) if !id.is_empty() => Some(id),
                    (Some("agentic_memory"), _) => {
                        return Err(err(
                            key("memory.memory_container_id"),
                            "required with type = \"agentic_memory\"".into(),
                        ));
                    }
                    (None | Some("thread"), Some(_)) => {
                        return Err(err(
                            key("memory.type"),
                            "set type = \"agentic_memory\" to use a memory container".into(),
                        ));
                    }
                    (Some(other), _) => {
                        return Err(err(
                            key("memory.type"),
                            format!("{other:?} must be \"thread\" or \"agentic_memory\""),
                        ));
                    }
                },
            };
            agents.push(AgentConfig {
                memory,
                name: a.name.unwrap_or_else(|| a.id.clone()),
                description: a.description.unwrap_or_default(),
                id: a.id,
                system_prompt: a.system_prompt.filter(|s| !s.trim().is_empty()),
                max_iterations,
                model,
                tools,
            });
        }
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
        Ok(Config {
            listen,
            data_dir,
            store_url,
            server,
            media,
            agents,
        })
    }
}

/// Names the model and URLs see: the OpenAI function-name rule.
pub fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn check_url(u: &str) -> Result<String, String> {
    let parsed = url::Url::parse(u).map_err(|e| format!("{u:?} is not a valid URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("{u:?} must be an http or https URL"));
    }
    Ok(u.to_string())
}

fn env_secret(var: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Secret, String> {
    match env(var) {
        Some(v) if !v.is_empty() => Ok(Secret::new(v)),
        _ => Err(format!("environment variable {var} is not set")),
    }
}

type Fail = (String, String);

fn resolve_model(
    m: ModelFile,
    idle_default: u64,
    dir: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ModelConfig, Fail> {
    let fail = |k: &str, p: String| (k.to_string(), p);
    let params = crate::model::InferenceParams {
        max_tokens: m.max_tokens,
        temperature: m.temperature,
        top_p: m.top_p,
        stop: m.stop.clone(),
        reasoning_effort: m.reasoning_effort.clone(),
    };
    let idle_timeout_secs = m.idle_timeout_secs.unwrap_or(idle_default).max(1);
    let d = RetryPolicy::default();
    let retry = RetryPolicy {
        max_retries: m.max_retries.unwrap_or(d.max_retries).min(10),
        initial_backoff_ms: m.retry_initial_backoff_ms.unwrap_or(d.initial_backoff_ms),
        max_backoff_ms: d.max_backoff_ms,
    };
    let extra = match &m.additional_model_request_fields {
        None => serde_json::Map::new(),
        Some(t) => match serde_json::to_value(t) {
            Ok(Value::Object(o)) => o,
            _ => {
                return Err(fail(
                    "additional_model_request_fields",
                    "must be a table".into(),
                ));
            }
        },
    };
    let api_key = match &m.api_key_env {
        Some(var) => Some(env_secret(var, env).map_err(|p| fail("api_key_env", p))?),
        None => None,
    };
    let headers: Vec<(String, Secret)> = m
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), Secret::new(v.as_str())))
        .collect();
    let require_model_id = || {
        if m.model_id.as_deref().is_none_or(str::is_empty) {
            Err(fail("model_id", "required for this provider".into()))
        } else {
            Ok(())
        }
    };
    let provider = match m.provider.as_str() {
        "openai/v1/chat/completions" | "openai" => {
            require_model_id()?;
            let base_url = check_url(m.base_url.as_deref().unwrap_or("https://api.openai.com/v1"))
                .map_err(|p| fail("base_url", p))?;
            ProviderConfig::OpenAi {
                base_url,
                api_key,
                headers,
                extra,
            }
        }
        "anthropic/v1/messages" | "anthropic" => {
            require_model_id()?;
            let base_url = check_url(m.base_url.as_deref().unwrap_or("https://api.anthropic.com"))
                .map_err(|p| fail("base_url", p))?;
            let version = m
                .anthropic_version
                .clone()
                .unwrap_or_else(|| crate::model::anthropic::DEFAULT_VERSION.into());
            ProviderConfig::Anthropic {
                base_url,
                api_key,
                version,
                headers,
                extra,
            }
        }
        "bedrock/converse" | "bedrock" => {
            require_model_id()?;
            let endpoint_url = match &m.endpoint_url {
                Some(u) => Some(check_url(u).map_err(|p| fail("endpoint_url", p))?),
                None => None,
            };
            let credentials = match &m.credential {
                None => None,
                Some(c) => Some(
                    resolve_credential(c, env).map_err(|(k, p)| (format!("credential.{k}"), p))?,
                ),
            };
            ProviderConfig::Bedrock {
                region: m.region.clone(),
                endpoint_url,
                credentials,
                bearer_token: api_key,
                extra,
            }
        }
        "scripted" => {
            let text = match &m.fixture {
                None => DEMO_FIXTURE.to_string(),
                Some(p) => {
                    let full = match dir {
                        Some(d) if p.is_relative() => d.join(p),
                        _ => p.clone(),
                    };
                    std::fs::read_to_string(&full).map_err(|e| {
                        fail("fixture", format!("cannot read {}: {e}", full.display()))
                    })?
                }
            };
            let fixture =
                Fixture::parse(&text).map_err(|p| fail("fixture", format!("bad fixture: {p}")))?;
            ProviderConfig::Scripted { fixture }
        }
        other => {
            return Err(fail(
                "provider",
                format!(
                    "unknown provider {other:?}; expected \"openai/v1/chat/completions\" (alias \"openai\"), \"anthropic/v1/messages\" (alias \"anthropic\"), \"bedrock/converse\" (alias \"bedrock\") or \"scripted\""
                ),
            ));
        }
    };
    let model_id = m.model_id.unwrap_or_else(|| "scripted".into());
    Ok(ModelConfig {
        provider,
        model_id,
        params,
        idle_timeout_secs,
        retry,
    })
}

fn resolve_credential(
    c: &CredentialFile,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<AwsCredentials, Fail> {
    let pick =
        |lit: &Option<String>, var: &Option<String>, key: &str| -> Result<Option<Secret>, Fail> {
            match (lit, var) {
                (Some(_), Some(_)) => {
                    Err((key.to_string(), format!("set {key} or {key}_env, not both")))
                }
                (Some(v), None) => Ok(Some(Secret::new(v.as_str()))),
                (None, Some(var)) => env_secret(var, env)
                    .map(Some)
                    .map_err(|p| (format!("{key}_env"), p)),
                (None, None) => Ok(None),
            }
        };
    let access_key = pick(&c.access_key, &c.access_key_env, "access_key")?.ok_or_else(|| {
        (
            "access_key".to_string(),
            "required in a credential block".to_string(),
        )
    })?;
    let secret_key = pick(&c.secret_key, &c.secret_key_env, "secret_key")?.ok_or_else(|| {
        (
            "secret_key".to_string(),
            "required in a credential block".to_string(),
        )
    })?;
    let session_token = pick(&c.session_token, &c.session_token_env, "session_token")?;
    Ok(AwsCredentials {
        access_key,
        secret_key,
        session_token,
    })
}

/// Reads a table into `T`, naming the key of any problem.
pub fn from_table<T: serde::de::DeserializeOwned>(
    table: toml::Table,
) -> Result<T, (String, String)> {
    serde_path_to_error::deserialize(toml::Value::Table(table))
        .map_err(|e| (e.path().to_string(), e.inner().to_string()))
}

fn resolve_tool(
    mut t: toml::Table,
    env: &dyn Fn(&str) -> Option<String>,
    dir: Option<&Path>,
) -> Result<ToolConfig, Fail> {
    let kind = match t.remove("type") {
        Some(toml::Value::String(k)) => k,
        Some(_) => return Err(("type".into(), "must be a string".into())),
        None => {
            return Err((
                "type".into(),
                "missing; one of http, builtin, mcp, openapi, search".into(),
            ));
        }
    };
    let mut opts = toml::Table::new();
    for k in ["timeout_secs", "max_output_bytes", "requires_approval"] {
        if let Some(v) = t.remove(k) {
            opts.insert(k.to_string(), v);
        }
    }
    let o: ToolOptionsFile = from_table(opts)?;
    let d = crate::tools::ToolOptions::default();
    let options = crate::tools::ToolOptions {
        timeout: o
            .timeout_secs
            .map(|s| std::time::Duration::from_secs(s.max(1)))
            .unwrap_or(d.timeout),
        max_output_bytes: o.max_output_bytes.unwrap_or(d.max_output_bytes).max(1),
        approval: match o.requires_approval {
            None | Some(ApprovalFile::All(false)) => crate::tools::Approval::Never,
            Some(ApprovalFile::All(true)) => crate::tools::Approval::Always,
            Some(ApprovalFile::Names(n)) => crate::tools::Approval::Only(n),
        },
    };
    let kind = match kind.as_str() {
        "http" => resolve_http(from_table(t)?, env)?,
        "builtin" => {
            let BuiltinFile { name, kind } = from_table(t)?;
            let kind = kind.unwrap_or_else(|| name.clone());
            if !BUILTINS.contains(&kind.as_str()) {
                return Err((
                    "kind".into(),
                    format!("unknown built-in {kind:?}; expected one of {BUILTINS:?}"),
                ));
            }
            if !valid_name(&name) {
                return Err((
                    "name".into(),
                    format!("{name:?} must be 1-64 letters, digits, '-' or '_'"),
                ));
            }
            ToolKind::Builtin { name, kind }
        }
        "mcp" => ToolKind::Mcp(crate::tools::mcp::parse(t, env, dir)?),
        "openapi" => ToolKind::OpenApi(crate::tools::openapi::parse(t, env, dir)?),
        "search" => ToolKind::Search(crate::tools::search::parse(t, env, dir)?),
        other => {
            return Err((
                "type".into(),
                format!(
                    "unknown tool type {other:?}; expected http, builtin, mcp, openapi or search"
                ),
            ));
        }
    };
    Ok(ToolConfig { kind, options })
}

fn resolve_http(f: HttpFile, env: &dyn Fn(&str) -> Option<String>) -> Result<ToolKind, Fail> {
    let HttpFile {
        name,
        description,
        url,
        method,
        headers,
        headers_env,
        parameters,
    } = f;
    if !valid_name(&name) {
        return Err((
            "name".into(),
            format!("{name:?} must be 1-64 letters, digits, '-' or '_'"),
        ));
    }
    let url = check_url(&url).map_err(|p| ("url".to_string(), p))?;
    let method = match method.as_deref().map(str::to_ascii_uppercase).as_deref() {
        None | Some("POST") => crate::tools::http::Method::Post,
        Some("GET") => crate::tools::http::Method::Get,
        Some(other) => return Err(("method".into(), format!("{other:?} must be GET or POST"))),
    };
    let input_schema = match parameters {
        None => serde_json::json!({"type": "object", "properties": {}}),
        Some(v) if v.is_object() => v,
        Some(_) => return Err(("parameters".into(), "must be a JSON Schema object".into())),
    };
    let mut hs: Vec<(String, Secret)> = headers
        .into_iter()
        .map(|(k, v)| (k, Secret::new(v)))
        .collect();
    for (h, var) in headers_env {
        let v = env_secret(&var, env).map_err(|p| (format!("headers_env.{h}"), p))?;
        hs.push((h, v));
    }
    Ok(ToolKind::Http {
        spec: crate::conversation::ToolSpec {
            name,
            description: description.unwrap_or_default(),
            input_schema,
        },
        url,
        method,
        headers: hs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"
listen = "127.0.0.1:8080"
[[agents]]
id = "assistant"
system_prompt = "You are a helpful assistant."
max_iterations = 8
[agents.model]
provider = "openai/v1/chat/completions"
model_id = "gpt-4o-mini"
base_url = "http://127.0.0.1:9400/v1"
api_key_env = "OPENAI_API_KEY"
[[agents.tools]]
type = "http"
name = "get_weather"
description = "Current weather for a city"
url = "http://127.0.0.1:9400/weather"
parameters = { type = "object", properties = { city = { type = "string" } }, required = ["city"] }
"#;

    fn env_with_key(k: &str) -> Option<String> {
        (k == "OPENAI_API_KEY").then(|| "sk-test".to_string())
    }

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse_with_env(text, "gw.toml", None, &env_with_key)
    }

    #[test]
    fn the_documented_shape_is_accepted() {
        let c = parse(SAMPLE).unwrap();
        assert_eq!(c.agents[0].max_iterations, 8);
        let ProviderConfig::OpenAi {
            api_key: Some(k), ..
        } = &c.agents[0].model.provider
        else {
            panic!()
        };
        assert_eq!(k.expose(), "sk-test");
        assert_eq!(format!("{k:?}"), "[REDACTED]");
        assert_eq!(c.agents[0].tools[0].name(), Some("get_weather"));
    }

    #[test]
    fn the_embedded_default_loads() {
        let c = Config::load(None).unwrap();
        assert_eq!(c.listen.to_string(), "127.0.0.1:8080");
        assert!(matches!(
            c.agents[0].model.provider,
            ProviderConfig::Scripted { .. }
        ));
    }

    #[test]
    fn errors_name_file_key_and_problem() {
        let e = parse(&SAMPLE.replace("openai/v1/chat/completions", "wat")).unwrap_err();
        assert_eq!(e.key, "agents[0].model.provider");
        assert!(
            e.to_string()
                .starts_with("config error in gw.toml: agents[0].model.provider: unknown provider")
        );
        let e = Config::parse_with_env(SAMPLE, "gw.toml", None, &|_| None).unwrap_err();
        assert_eq!(e.key, "agents[0].model.api_key_env");
        assert!(e.problem.contains("OPENAI_API_KEY"));
        let e = parse(&SAMPLE.replace("http://127.0.0.1:9400/weather", "not a url")).unwrap_err();
        assert_eq!(e.key, "agents[0].tools[0].url");
        let twice = format!(
            "{SAMPLE}\n{}",
            &SAMPLE[SAMPLE.find("[[agents]]").unwrap()..]
        );
        let e = parse(&twice).unwrap_err();
        assert_eq!(
            (e.key.as_str(), e.problem.contains("duplicate")),
            ("agents[1].id", true)
        );
        let e = parse(&SAMPLE.replace("max_iterations = 8", "max_iterations = \"8\"")).unwrap_err();
        assert_eq!(e.key, "agents[0].max_iterations");
        let e = parse(&SAMPLE.replace("system_prompt", "sytem_prompt")).unwrap_err();
        assert!(e.problem.contains("sytem_prompt"), "{e}");
        let e = parse("listen = [").unwrap_err();
        assert!(e.problem.starts_with("invalid TOML"));
    }
}
