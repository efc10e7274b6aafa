//! Tool entries of the configuration: the kinds, their options and approval policies.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::{Fail, Secret, check_url, env_secret, from_table, valid_name};

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

/// `type = "agent"`: another agent of the gateway as a tool (what ml-commons calls
/// `AgentTool`); its runs stream as subagents.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentFile {
    name: String,
    #[serde(default)]
    description: Option<String>,
    agent_id: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BuiltinFile {
    name: String,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    state_key: Option<String>,
    #[serde(default)]
    schema: Option<Value>,
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
    /// A tool that changes the run's shared state.
    State {
        /// The name the model sees.
        name: String,
        /// What it is for (a default explains the arguments).
        description: Option<String>,
        /// Confine it to this top-level key.
        state_key: Option<String>,
        /// JSON Schema of the key's value.
        schema: Option<Value>,
    },
    /// An ml-commons index tool (`SearchIndexTool`, `VectorDBTool`, `ListIndexTool`,
    /// `IndexMappingTool`, `CatIndexTool`): on the `[opensearch]` cluster, else on the
    /// embedded indexes.
    MlCommons(crate::tools::search::ml::MlToolConfig),
    /// Another registered agent run as a tool (ml-commons' `AgentTool`).
    Agent {
        /// Name, description, schema.
        spec: crate::conversation::ToolSpec,
        /// The agent it runs.
        agent_id: String,
    },
    /// A model called with a templated prompt (ml-commons' `MLModelTool`).
    Model {
        /// Name, description, schema.
        spec: crate::conversation::ToolSpec,
        /// The model.
        model: Box<super::ModelConfig>,
        /// The prompt template (`${parameters.question}` by default).
        prompt: String,
        /// Its own system prompt.
        system_prompt: Option<String>,
    },
}

impl ToolConfig {
    /// The tool name of a single-tool entry (sources name their tools at run time).
    pub fn name(&self) -> Option<&str> {
        match &self.kind {
            ToolKind::Http { spec, .. } => Some(&spec.name),
            ToolKind::Builtin { name, .. } | ToolKind::State { name, .. } => Some(name),
            ToolKind::Model { spec, .. } | ToolKind::Agent { spec, .. } => Some(&spec.name),
            ToolKind::MlCommons(c) => Some(&c.spec.name),
            _ => None,
        }
    }
}

pub(super) const BUILTINS: &[&str] = &["calculator", "publish", "state"];

/// A tool entry of the agent API (the config file's shape, as JSON). It reads no environment
/// variables and starts no local processes: those belong to whoever writes the config file.
pub fn tool_from_json(v: &Value) -> Result<ToolConfig, (String, String)> {
    let table: toml::Table = match toml::Value::try_from(v) {
        Ok(toml::Value::Table(t)) => t,
        _ => {
            return Err((String::new(), "must be an object without nulls".into()));
        }
    };
    if table.get("type").and_then(toml::Value::as_str) == Some("mcp")
        && table.contains_key("command")
    {
        return Err((
            "command".into(),
            "MCP servers started as local processes can only be configured in the config file; give a url".into(),
        ));
    }
    resolve_tool(table, &|_| None, None)
}

pub(super) fn resolve_tool(
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
                "missing; one of http, builtin, agent, mcp, openapi, search".into(),
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
            let BuiltinFile {
                name,
                kind,
                description,
                state_key,
                schema,
            } = from_table(t)?;
            let kind = kind.unwrap_or_else(|| name.clone());
            if kind != "state" && (state_key.is_some() || schema.is_some() || description.is_some())
            {
                return Err((
                    "state_key".into(),
                    "description, state_key and schema belong to kind = \"state\" tools".into(),
                ));
            }
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
            if kind == "state" {
                if state_key.as_deref().is_some_and(str::is_empty) {
                    return Err(("state_key".into(), "must not be empty".into()));
                }
                if schema.as_ref().is_some_and(|s| !s.is_object()) {
                    return Err(("schema".into(), "must be a JSON Schema object".into()));
                }
                ToolKind::State {
                    name,
                    description,
                    state_key,
                    schema,
                }
            } else {
                ToolKind::Builtin { name, kind }
            }
        }
        "agent" => {
            let AgentFile {
                name,
                description,
                agent_id,
            } = from_table(t)?;
            if !valid_name(&name) {
                return Err((
                    "name".into(),
                    format!("{name:?} must be 1-64 letters, digits, '-' or '_'"),
                ));
            }
            if agent_id.is_empty() || agent_id.contains('\0') {
                return Err(("agent_id".into(), "must name an agent".into()));
            }
            ToolKind::Agent {
                spec: crate::conversation::ToolSpec {
                    description: description
                        .unwrap_or_else(|| format!("Ask the {agent_id} agent a question")),
                    name,
                    input_schema: crate::tools::agent_tool_schema(),
                    strict: None,
                },
                agent_id,
            }
        }
        "mcp" => ToolKind::Mcp(crate::tools::mcp::parse(t, env, dir)?),
        "openapi" => ToolKind::OpenApi(crate::tools::openapi::parse(t, env, dir)?),
        "search" => ToolKind::Search(crate::tools::search::parse(t, env, dir)?),
        other => {
            return Err((
                "type".into(),
                format!(
                    "unknown tool type {other:?}; expected http, builtin, agent, mcp, openapi or search"
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
        .map(|(k, v)| {
            let v = Secret::header(&k, v);
            (k, v)
        })
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
            strict: None,
        },
        url,
        method,
        headers: hs,
    })
}
