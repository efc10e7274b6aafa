//! The agent API's registrations compiled into agent configs: the unified `model` block, the
//! legacy `llm.model_id` (a registered model, its connector and `_llm_interface`), tools,
//! memory and parameters. Every problem names the field it is in.

use serde_json::{Map, Value, json};

use crate::config::{
    AgentConfig, AgentKind, AwsCredentials, FlowStep, HistorySource, MemoryConfig, ModelConfig,
    ProviderConfig, RetryPolicy, Secret, ToolConfig, ToolKind, check_url, tool_from_json,
};
use crate::connector::template::{Escape, render};
use crate::model::InferenceParams;
use crate::model::scripted::Fixture;
use crate::tools::model_tool::ModelTool;

pub use crate::connector::Invalid;
use crate::connector::invalid;

mod model;
mod tools;

pub use model::{
    PROVIDERS, check_outbound, connector_for_model_block, inference_params, model_config,
};
use tools::{compile_tools, mcp_connectors};

pub use crate::connector::models::{ModelLookup, ResolvedModel};

fn str_field<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    obj.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
}

/// What a registration compiles to.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// The agent config.
    pub config: AgentConfig,
    /// The gateway id of the agent's model, if it has one (token usage names it).
    pub model_id: Option<String>,
}

/// Compiles a stored registration (one whose `model` block already became `llm.model_id`).
pub async fn compile(
    id: &str,
    body: &Value,
    models: &dyn ModelLookup,
    idle_timeout_secs: u64,
) -> Result<Compiled, Invalid> {
    let Some(b) = body.as_object() else {
        return Err(invalid("", "the body must be a JSON object"));
    };
    let name =
        str_field(b, "name").ok_or_else(|| invalid("name", "required, a non-empty string"))?;
    let kind_text = b
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("type", format!("required: one of {:?}", AgentKind::ALL)))?;
    let kind = AgentKind::parse(kind_text).ok_or_else(|| {
        invalid(
            "type",
            format!(
                "{kind_text:?} is not an agent type; expected one of {:?}",
                AgentKind::ALL
            ),
        )
    })?;
    let mut parameters = match b.get("parameters") {
        None => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err(invalid("parameters", "must be an object")),
    };
    if kind == AgentKind::PlanExecuteReflect {
        check_per_parameters(&parameters)?;
    }
    let interface = parameters
        .remove("_llm_interface")
        .and_then(|v| v.as_str().map(str::to_string));
    let llm = match b.get("llm") {
        None => None,
        Some(Value::Object(m)) => Some(m),
        Some(_) => return Err(invalid("llm", "must be an object")),
    };
    let llm_params = llm
        .and_then(|l| l.get("parameters"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut model_ref = None;
    let model = match llm.and_then(|l| l.get("model_id")) {
        Some(Value::String(mid)) => {
            let m = models
                .model(mid)
                .await
                .map_err(|e| invalid("llm.model_id", e))?
                .ok_or_else(|| {
                    invalid("llm.model_id", format!("no model {mid:?} is registered"))
                })?;
            model_ref = Some(mid.clone());
            Some(model_config(
                &m,
                interface.as_deref(),
                "llm.model_id",
                &llm_params,
                idle_timeout_secs,
            )?)
        }
        Some(_) => return Err(invalid("llm.model_id", "must be a string")),
        None => None,
    };
    let model = match model {
        Some(mut m) => {
            // An agent's own `tool_configs` is honoured, as its `llm.parameters` are.
            if let (ProviderConfig::Connector(c), Some(tc)) =
                (&mut m.provider, parameters.get("tool_configs"))
            {
                c.parameters
                    .entry("tool_configs")
                    .or_insert_with(|| tc.clone());
            }
            m
        }
        None if kind.is_flow() => ModelConfig {
            provider: ProviderConfig::Scripted {
                fixture: Fixture::parse(r#"{"rules":[]}"#).map_err(|p| invalid("", p))?,
            },
            model_id: "none".into(),
            params: InferenceParams::default(),
            idle_timeout_secs,
            retry: RetryPolicy::default(),
            http2_prior_knowledge: false,
        },
        None => {
            return Err(invalid(
                "model",
                format!(
                    "required for a {} agent: a model block, or llm.model_id",
                    kind.as_str()
                ),
            ));
        }
    };
    let max_iterations = match llm_params
        .get("max_iteration")
        .or_else(|| b.get("max_iteration"))
    {
        None => 10,
        Some(v) => match v.as_u64().or_else(|| v.as_str()?.parse().ok()) {
            Some(n) if (1..=100).contains(&n) => n as u32,
            _ => {
                return Err(invalid(
                    "llm.parameters.max_iteration",
                    "must be between 1 and 100",
                ));
            }
        },
    };
    let system_prompt = llm_params
        .get("system_prompt")
        .or_else(|| parameters.get("system_prompt"))
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .map(str::to_string);
    // ml-commons hands the llm's parameters (`prompt` above all) to the run like its own.
    for (k, v) in &llm_params {
        if !matches!(k.as_str(), "max_iteration" | "system_prompt") && !parameters.contains_key(k) {
            parameters.insert(k.clone(), v.clone());
        }
    }
    let memory = memory_config(b.get("memory"))?;
    let (mut tools, flow) = compile_tools(b.get("tools"), kind, models, idle_timeout_secs).await?;
    if let Some(list) = parameters.remove("mcp_connectors") {
        tools.extend(mcp_connectors(&list, models).await?);
    }
    if kind.is_flow() && flow.is_empty() {
        return Err(invalid("tools", "a flow agent needs at least one tool"));
    }
    Ok(Compiled {
        config: AgentConfig {
            id: id.to_string(),
            name: name.to_string(),
            description: b
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            system_prompt,
            max_iterations,
            model,
            tools,
            memory,
            kind,
            parameters,
            flow,
            predict_state: Vec::new(),
        },
        model_id: model_ref,
    })
}

/// A plan-execute-reflect agent's bounds must be numbers ml-commons would take.
fn check_per_parameters(p: &Map<String, Value>) -> Result<(), Invalid> {
    for key in [
        "max_steps",
        "executor_max_iterations",
        "message_history_limit",
        "executor_message_history_limit",
    ] {
        let Some(v) = p.get(key) else { continue };
        let n = v.as_u64().or_else(|| v.as_str()?.trim().parse().ok());
        let low = if key.ends_with("history_limit") { 0 } else { 1 };
        if !n.is_some_and(|n| (low..=100).contains(&n)) {
            return Err(invalid(
                format!("parameters.{key}"),
                format!("must be a whole number from {low} to 100"),
            ));
        }
    }
    Ok(())
}

/// A registration's `attributes`: `input_schema` (a JSON Schema object, or its JSON text as
/// ml-commons also takes it) becomes what the model is offered for the tool; `strict` must be a
/// boolean. A multi-tool entry (MCP, OpenAPI, search) has its schemas from its source.
fn apply_attributes(
    tool: &mut ToolConfig,
    attributes: Option<&Value>,
    f: &dyn Fn(&str) -> String,
) -> Result<(), Invalid> {
    let Some(attrs) = attributes else {
        return Ok(());
    };
    let Some(attrs) = attrs.as_object() else {
        return Err(invalid(f("attributes"), "must be an object"));
    };
    let strict = match attrs.get("strict") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(Value::String(s)) if s == "true" || s == "false" => Some(s == "true"),
        Some(_) => return Err(invalid(f("attributes.strict"), "must be true or false")),
    };
    let spec = match &mut tool.kind {
        ToolKind::Http { spec, .. }
        | ToolKind::Model { spec, .. }
        | ToolKind::Agent { spec, .. } => Some(spec),
        ToolKind::MlCommons(c) => Some(&mut c.spec),
        _ => None,
    };
    if let (Some(spec), Some(strict)) = (spec, strict) {
        spec.strict = Some(strict);
    }
    let Some(schema) = attrs.get("input_schema") else {
        return Ok(());
    };
    let schema = match schema {
        Value::String(text) => serde_json::from_str::<Value>(text).map_err(|e| {
            invalid(
                f("attributes.input_schema"),
                format!("not a JSON Schema: {e}"),
            )
        })?,
        other => other.clone(),
    };
    if !schema.is_object() {
        return Err(invalid(
            f("attributes.input_schema"),
            "must be a JSON Schema object",
        ));
    }
    jsonschema::validator_for(&schema).map_err(|e| {
        invalid(
            f("attributes.input_schema"),
            format!("not a valid JSON Schema: {e}"),
        )
    })?;
    match &mut tool.kind {
        ToolKind::Http { spec, .. }
        | ToolKind::Model { spec, .. }
        | ToolKind::Agent { spec, .. } => {
            spec.input_schema = schema;
            Ok(())
        }
        ToolKind::MlCommons(c) => {
            c.spec.input_schema = schema;
            Ok(())
        }
        _ => Err(invalid(
            f("attributes.input_schema"),
            "only for single tools (http, MLModelTool); this entry's tools bring their own schemas",
        )),
    }
}

fn memory_config(v: Option<&Value>) -> Result<MemoryConfig, Invalid> {
    let mut m = MemoryConfig {
        store: false,
        history: HistorySource::Server,
        message_history_limit: None,
        snapshot_on_finish: false,
        memory_container_id: None,
        agentic: false,
    };
    let Some(v) = v else { return Ok(m) };
    let Some(o) = v.as_object() else {
        return Err(invalid("memory", "must be an object"));
    };
    match o.get("type").and_then(Value::as_str) {
        Some("conversation_index") | Some("thread") => m.store = true,
        Some("agentic_memory") => {
            m.store = true;
            m.agentic = true;
            // Named here, or by each execution (`parameters.memory_container_id`).
            m.memory_container_id = match o.get("memory_container_id") {
                None => None,
                Some(Value::String(c)) if !c.trim().is_empty() => Some(c.clone()),
                Some(_) => {
                    return Err(invalid(
                        "memory.memory_container_id",
                        "must be a non-empty string (or left out and given per execution)",
                    ));
                }
            };
        }
        Some(other) => {
            return Err(invalid(
                "memory.type",
                format!(
                    "{other:?} is not supported; expected conversation_index or agentic_memory"
                ),
            ));
        }
        None => {
            return Err(invalid(
                "memory.type",
                "required: conversation_index or agentic_memory",
            ));
        }
    }
    if let Some(n) = o.get("message_history_limit") {
        m.message_history_limit =
            Some(n.as_u64().ok_or_else(|| {
                invalid("memory.message_history_limit", "must be a positive number")
            })? as usize);
    }
    Ok(m)
}
