//! `[[agents]]`: an agent of the config file (its model, tools, memory, type and parameters),
//! as the file says it and resolved.

use std::path::Path;

use serde::Deserialize;

use super::model::{ModelFile, resolve_model};
use super::tools::resolve_tool;
use super::{Fail, ModelConfig, ToolConfig, ToolKind, valid_name};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AgentFile {
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
    #[serde(default)]
    predict_state: Vec<PredictStateFile>,
    /// `ag_ui` (the default) or `plan_execute_and_reflect`.
    #[serde(default, rename = "type")]
    kind: Option<String>,
    /// Parameters every execution starts from (as the agent API's `parameters`).
    #[serde(default)]
    parameters: toml::Table,
}

/// A tool whose streaming arguments the client shows as state (`CUSTOM PredictState`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PredictStateFile {
    tool: String,
    state_key: String,
    #[serde(default)]
    tool_argument: Option<String>,
}

/// How an agent keeps its threads.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MemoryFile {
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
    /// Which loop runs it.
    pub kind: AgentKind,
    /// Parameters every execution starts from (the agent API's registered `parameters`).
    pub parameters: serde_json::Map<String, serde_json::Value>,
    /// The steps of a flow agent, in order.
    pub flow: Vec<FlowStep>,
    /// Tools whose streaming arguments clients show as state.
    pub predict_state: Vec<PredictState>,
}

/// One `PredictState` entry: while `tool`'s arguments stream, the client shows
/// `tool_argument` as the state's `state_key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PredictState {
    /// The tool (backend or frontend).
    pub tool: String,
    /// The state key it fills.
    pub state_key: String,
    /// The argument that holds the value.
    pub tool_argument: String,
}

/// The agent types of the agent API (config-file agents are `ag_ui`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentKind {
    /// Tools run in order, each output feeding the next.
    Flow,
    /// A flow with conversation memory.
    ConversationalFlow,
    /// The ReAct loop on text input.
    Conversational,
    /// The ReAct loop on text, content blocks or messages, with multimodal memory.
    ConversationalV2,
    /// The AG-UI loop (hybrid backend and frontend tools).
    AgUi,
    /// A planner call, the ReAct executor per step, a reflect call.
    PlanExecuteReflect,
}

impl AgentKind {
    /// Every type, as registered.
    pub const ALL: &'static [&'static str] = &[
        "flow",
        "conversational_flow",
        "conversational",
        "conversational_v2",
        "ag_ui",
        "plan_execute_and_reflect",
    ];

    /// The type of a registration's `type` (`conversational/v2` is accepted for `conversational_v2`).
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s.to_ascii_lowercase().as_str() {
            "flow" => Self::Flow,
            "conversational_flow" => Self::ConversationalFlow,
            "conversational" => Self::Conversational,
            "conversational_v2" | "conversational/v2" => Self::ConversationalV2,
            "ag_ui" | "agui" => Self::AgUi,
            "plan_execute_and_reflect" => Self::PlanExecuteReflect,
            _ => return None,
        })
    }

    /// The registered name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Flow => "flow",
            Self::ConversationalFlow => "conversational_flow",
            Self::Conversational => "conversational",
            Self::ConversationalV2 => "conversational_v2",
            Self::AgUi => "ag_ui",
            Self::PlanExecuteReflect => "plan_execute_and_reflect",
        }
    }

    /// Whether it runs tools in a fixed order rather than letting a model choose.
    pub fn is_flow(self) -> bool {
        matches!(self, Self::Flow | Self::ConversationalFlow)
    }

    /// Whether the standard `input` may hold content blocks and messages (not only text).
    pub fn takes_rich_input(self) -> bool {
        matches!(self, Self::ConversationalV2 | Self::AgUi)
    }
}

/// One step of a flow agent: a tool and the templated input it is called with.
#[derive(Debug, Clone)]
pub struct FlowStep {
    /// The tool's name in the agent's registry.
    pub tool: String,
    /// Its parameters, with `${parameters.*}` placeholders filled per run.
    pub parameters: serde_json::Map<String, serde_json::Value>,
    /// Whether its output is part of the response even when it is not the last step.
    pub include_output: bool,
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
    /// Threads live in agentic memory: in `memory_container_id`, or in the container each
    /// execution names (`parameters.memory_container_id`), one of the two being required.
    pub agentic: bool,
}

/// The `[[agents]]` entries, resolved and checked (`Err` names the key and the problem).
pub(super) fn resolve(
    raw: Vec<AgentFile>,
    model_idle_timeout_secs: u64,
    dir: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<AgentConfig>, Fail> {
    let mut agents = Vec::new();
    let mut ids = std::collections::HashSet::new();
    let all_ids: std::collections::HashSet<String> = raw.iter().map(|a| a.id.clone()).collect();
    for (i, a) in raw.into_iter().enumerate() {
        let key = |k: &str| format!("agents[{i}].{k}");
        if !valid_name(&a.id) {
            return Err((
                key("id"),
                format!("{:?} must be 1-64 letters, digits, '-' or '_'", a.id),
            ));
        }
        if !ids.insert(a.id.clone()) {
            return Err((key("id"), format!("duplicate agent id {:?}", a.id)));
        }
        let kind = match a.kind.as_deref().map(AgentKind::parse) {
            None => AgentKind::AgUi,
            Some(Some(k @ (AgentKind::AgUi | AgentKind::PlanExecuteReflect))) => k,
            Some(_) => {
                return Err((
                    key("type"),
                    "must be \"ag_ui\" or \"plan_execute_and_reflect\" (other types are registered through the agent API)".into(),
                ));
            }
        };
        let parameters = match serde_json::to_value(&a.parameters) {
            Ok(serde_json::Value::Object(m)) => m,
            _ => return Err((key("parameters"), "must be a table".into())),
        };
        let max_iterations = a.max_iterations.unwrap_or(10);
        if !(1..=100).contains(&max_iterations) {
            return Err((key("max_iterations"), "must be between 1 and 100".into()));
        }
        let model = resolve_model(a.model, model_idle_timeout_secs, dir, env)
            .map_err(|(k, p)| (key(&format!("model.{k}")), p))?;
        let mut tools: Vec<ToolConfig> = Vec::new();
        for (j, t) in a.tools.into_iter().enumerate() {
            let tkey = |k: &str| key(&format!("tools[{j}].{k}"));
            let tool = resolve_tool(t, env, dir).map_err(|(k, p)| (tkey(&k), p))?;
            if let ToolKind::Agent { agent_id, .. } = &tool.kind
                && !all_ids.contains(agent_id)
            {
                return Err((
                    tkey("agent_id"),
                    format!("no agent {agent_id:?} in this file"),
                ));
            }
            if let Some(name) = tool.name()
                && tools.iter().any(|x| x.name() == Some(name))
            {
                return Err((tkey("name"), format!("duplicate tool name {name:?}")));
            }
            tools.push(tool);
        }
        let mut memory = MemoryConfig {
            store: a.memory.store.unwrap_or(true),
            history: match a.memory.history.as_deref() {
                None | Some("client") => HistorySource::Client,
                Some("server") => HistorySource::Server,
                Some(other) => {
                    return Err((
                        key("memory.history"),
                        format!("{other:?} must be \"client\" or \"server\""),
                    ));
                }
            },
            message_history_limit: a.memory.message_history_limit,
            snapshot_on_finish: a.memory.snapshot_on_finish.unwrap_or(false),
            memory_container_id: match (a.memory.kind.as_deref(), a.memory.memory_container_id) {
                (None | Some("thread"), None) => None,
                (Some("agentic_memory"), Some(id)) if !id.is_empty() => Some(id),
                (Some("agentic_memory"), _) => {
                    return Err((
                        key("memory.memory_container_id"),
                        "required with type = \"agentic_memory\"".into(),
                    ));
                }
                (None | Some("thread"), Some(_)) => {
                    return Err((
                        key("memory.type"),
                        "set type = \"agentic_memory\" to use a memory container".into(),
                    ));
                }
                (Some(other), _) => {
                    return Err((
                        key("memory.type"),
                        format!("{other:?} must be \"thread\" or \"agentic_memory\""),
                    ));
                }
            },
            agentic: false,
        };
        memory.agentic = memory.memory_container_id.is_some();
        agents.push(AgentConfig {
            memory,
            name: a.name.unwrap_or_else(|| a.id.clone()),
            description: a.description.unwrap_or_default(),
            id: a.id,
            system_prompt: a.system_prompt.filter(|s| !s.trim().is_empty()),
            max_iterations,
            model,
            tools,
            kind,
            parameters,
            flow: Vec::new(),
            predict_state: a
                .predict_state
                .into_iter()
                .map(|p| PredictState {
                    tool_argument: p.tool_argument.unwrap_or_else(|| p.state_key.clone()),
                    tool: p.tool,
                    state_key: p.state_key,
                })
                .collect(),
        });
    }
    Ok(agents)
}
