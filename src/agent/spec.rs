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

/// The model providers of the unified `model` block.
pub const PROVIDERS: &[&str] = &[
    "bedrock/converse",
    "openai/v1/chat/completions",
    "anthropic/v1/messages",
    "scripted",
];

pub use crate::connector::models::{ModelLookup, ResolvedModel};

fn str_field<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    obj.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
}

fn credential_str(cred: &Map<String, Value>, keys: &[&str]) -> Option<Secret> {
    keys.iter()
        .find_map(|k| cred.get(*k).and_then(Value::as_str))
        .filter(|s| !s.is_empty())
        .map(Secret::new)
}

/// Sampling settings out of `model_parameters` / `llm.parameters` (unknown keys are ignored).
pub fn inference_params(p: &Map<String, Value>) -> InferenceParams {
    let num = |k: &str| {
        p.get(k)
            .and_then(|v| v.as_f64().or_else(|| v.as_str()?.parse().ok()))
    };
    InferenceParams {
        max_tokens: num("max_tokens").map(|n| n as u32),
        temperature: num("temperature").map(|n| n as f32),
        top_p: num("top_p").map(|n| n as f32),
        stop: p
            .get("stop_sequences")
            .or_else(|| p.get("stop"))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default(),
        reasoning_effort: p
            .get("reasoning_effort")
            .and_then(Value::as_str)
            .map(str::to_string),
    }
}

/// The connector a unified `model` block stands for (ml-commons creates one too), with its
/// credential; `_predict` on the created model uses it.
pub fn connector_for_model_block(
    agent_name: &str,
    block: &Value,
) -> Result<(Value, Map<String, Value>), Invalid> {
    let Some(b) = block.as_object() else {
        return Err(invalid("model", "must be an object"));
    };
    let model_id = str_field(b, "model_id")
        .ok_or_else(|| invalid("model.model_id", "required: the provider's model id"))?;
    let provider = str_field(b, "model_provider").ok_or_else(|| {
        invalid(
            "model.model_provider",
            format!("required: one of {PROVIDERS:?}"),
        )
    })?;
    let params = match b.get("model_parameters") {
        None => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err(invalid("model.model_parameters", "must be an object")),
    };
    let cred = match b.get("credential") {
        None => Map::new(),
        Some(Value::Object(m)) if m.values().all(Value::is_string) => m.clone(),
        Some(_) => return Err(invalid("model.credential", "must be an object of strings")),
    };
    let need = |keys: &[&str]| -> Result<(), Invalid> {
        if keys.iter().any(|k| {
            cred.get(*k)
                .and_then(Value::as_str)
                .is_some_and(|s| !s.is_empty())
        }) {
            Ok(())
        } else {
            Err(invalid(
                format!("model.credential.{}", keys[0]),
                format!("required for model_provider {provider:?}"),
            ))
        }
    };
    let base = |default: &str| -> Result<String, Invalid> {
        let u = str_field(&params, "base_url").unwrap_or(default);
        check_url(u)
            .map(|u| u.trim_end_matches('/').to_string())
            .map_err(|p| invalid("model.model_parameters.base_url", p))
    };
    let mut parameters = params.clone();
    parameters.insert("model".into(), json!(model_id));
    let (protocol, url, headers, body, filter) = match provider {
        "bedrock/converse" => {
            if !cred.contains_key("bearer_token") {
                need(&["access_key"])?;
                need(&["secret_key"])?;
            }
            let region = str_field(&params, "region")
                .or_else(|| str_field(&cred, "region"))
                .unwrap_or("us-east-1")
                .to_string();
            parameters.insert("region".into(), json!(region));
            parameters.insert("service_name".into(), json!("bedrock"));
            let host = match str_field(&params, "endpoint_url") {
                Some(u) => check_url(u)
                    .map(|u| u.trim_end_matches('/').to_string())
                    .map_err(|p| invalid("model.model_parameters.endpoint_url", p))?,
                None => "https://bedrock-runtime.${parameters.region}.amazonaws.com".into(),
            };
            (
                if cred.contains_key("bearer_token") {
                    "http"
                } else {
                    "aws_sigv4"
                },
                format!("{host}/model/${{parameters.model}}/converse"),
                json!({"content-type": "application/json"}),
                r#"{"messages":[{"role":"user","content":[{"text":"${parameters.prompt}"}]}]}"#,
                "$.output.message.content[0].text",
            )
        }
        "openai/v1/chat/completions" => {
            need(&["openAI_key", "api_key"])?;
            let key = if cred.contains_key("openAI_key") {
                "openAI_key"
            } else {
                "api_key"
            };
            (
                "http",
                format!("{}/chat/completions", base("https://api.openai.com/v1")?),
                json!({"content-type": "application/json", "Authorization": format!("Bearer ${{credential.{key}}}")}),
                r#"{"model":"${parameters.model}","messages":[{"role":"user","content":"${parameters.prompt}"}]}"#,
                "$.choices[0].message.content",
            )
        }
        "anthropic/v1/messages" => {
            need(&["anthropic_key", "api_key"])?;
            let key = if cred.contains_key("anthropic_key") {
                "anthropic_key"
            } else {
                "api_key"
            };
            let base = base("https://api.anthropic.com")?;
            let url = if base.ends_with("/v1") {
                format!("{base}/messages")
            } else {
                format!("{base}/v1/messages")
            };
            (
                "http",
                url,
                json!({"content-type": "application/json", "x-api-key": format!("${{credential.{key}}}"),
                       "anthropic-version": crate::model::anthropic::DEFAULT_VERSION}),
                r#"{"model":"${parameters.model}","max_tokens":${parameters.max_tokens:-1024},"messages":[{"role":"user","content":"${parameters.prompt}"}]}"#,
                "$.content[0].text",
            )
        }
        "scripted" => {
            if let Some(f) = params.get("fixture") {
                let text = match f {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                Fixture::parse(&text).map_err(|p| {
                    invalid(
                        "model.model_parameters.fixture",
                        format!("bad fixture: {p}"),
                    )
                })?;
            }
            // The same connector embeds offline (`_predict` with `text_docs`).
            crate::connector::hashed::dimension(&params)
                .map_err(|p| invalid("model.model_parameters.dimension", p))?;
            ("scripted", String::new(), json!({}), "", "")
        }
        other => {
            return Err(invalid(
                "model.model_provider",
                format!("{other:?} is not supported; expected one of {PROVIDERS:?}"),
            ));
        }
    };
    let mut connector = json!({
        "name": format!("{agent_name} connector"),
        "description": format!("Created for the model block of agent {agent_name:?}"),
        "version": 1,
        "protocol": protocol,
        "model_provider": provider,
        "parameters": parameters,
        "actions": [],
    });
    if protocol != "scripted" {
        connector["actions"] = json!([{
            "action_type": "predict",
            "method": "POST",
            "url": url,
            "headers": headers,
            "request_body": body,
            "response_filter": filter,
        }]);
    }
    Ok((connector, cred))
}

/// How an agent talks to the model behind a connector: the connector's `model_provider`
/// (unified registrations), else `_llm_interface`, else what its predict URL shows.
pub fn model_config(
    m: &ResolvedModel,
    interface: Option<&str>,
    field: &str,
    params: &Map<String, Value>,
    idle_timeout_secs: u64,
) -> Result<ModelConfig, Invalid> {
    let c = m.connector.as_object().cloned().unwrap_or_default();
    let cp = c
        .get("parameters")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let action = c
        .get("actions")
        .and_then(Value::as_array)
        .and_then(|a| {
            a.iter().find(|x| {
                x.get("action_type")
                    .and_then(Value::as_str)
                    .is_some_and(|t| t.eq_ignore_ascii_case("predict"))
            })
        })
        .cloned()
        .unwrap_or(Value::Null);
    let url = action
        .get("url")
        .and_then(Value::as_str)
        .map(|u| render(u, &cp, &m.credential, Escape::Raw))
        .transpose()
        .map_err(|e| invalid(field, format!("its connector's url: {e}")))?
        .unwrap_or_default();
    if let Some(interface) = crate::connector::llm::select(&m.connector, interface, &url)? {
        return Ok(ModelConfig {
            provider: ProviderConfig::Connector(Box::new(crate::connector::llm::ConnectorModel {
                connector: m.connector.clone(),
                credential: crate::connector::llm::Credential(m.credential.clone()),
                interface,
                parameters: params.clone(),
                prompt_only: false,
            })),
            model_id: cp
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or(&m.model_id)
                .to_string(),
            params: inference_params(&cp.clone().into_iter().chain(params.clone()).collect()),
            idle_timeout_secs,
            retry: RetryPolicy::default(),
            http2_prior_knowledge: false,
        });
    }
    let kind = match str_field(&c, "model_provider").or(interface) {
        Some(i) if i.starts_with("bedrock/converse") => "bedrock",
        Some("openai/v1/chat/completions") => "openai",
        Some("anthropic/v1/messages") => "anthropic",
        Some("scripted") => "scripted",
        Some(other) => {
            return Err(invalid(
                "parameters._llm_interface",
                format!(
                    "{other:?} is not supported; expected bedrock/converse/claude, openai/v1/chat/completions or anthropic/v1/messages"
                ),
            ));
        }
        None if str_field(&c, "protocol") == Some("scripted") => "scripted",
        None if url.contains("/converse") => "bedrock",
        None if url.ends_with("/chat/completions") => "openai",
        None if url.ends_with("/v1/messages") => "anthropic",
        None => {
            return Err(invalid(
                "parameters._llm_interface",
                "required: the model's connector does not show which API it speaks",
            ));
        }
    };
    let headers = |skip: &[&str]| -> Result<Vec<(String, Secret)>, Invalid> {
        let mut out = Vec::new();
        if let Some(h) = action.get("headers").and_then(Value::as_object) {
            for (k, v) in h {
                if skip.iter().any(|s| k.eq_ignore_ascii_case(s)) {
                    continue;
                }
                let v = render(v.as_str().unwrap_or(""), &cp, &m.credential, Escape::Raw)
                    .map_err(|e| invalid(field, format!("its connector's headers: {e}")))?;
                out.push((k.clone(), Secret::header(k, v)));
            }
        }
        Ok(out)
    };
    let model_name = cp.get("model").and_then(Value::as_str).map(str::to_string);
    let (provider, model_id) = match kind {
        "bedrock" => {
            let region = cp.get("region").and_then(Value::as_str).map(str::to_string);
            let model = model_name
                .or_else(|| {
                    let after = url.split("/model/").nth(1)?;
                    let id = after.split('/').next()?;
                    Some(percent_decode(id))
                })
                .ok_or_else(|| invalid(field, "its connector names no model (parameters.model)"))?;
            let endpoint_url = match url::Url::parse(&url) {
                Ok(u) if !u.host_str().is_some_and(|h| h.ends_with(".amazonaws.com")) => {
                    Some(u.origin().ascii_serialization())
                }
                _ => cp
                    .get("endpoint_url")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            };
            let credentials = match (
                credential_str(&m.credential, &["access_key"]),
                credential_str(&m.credential, &["secret_key"]),
            ) {
                (Some(access_key), Some(secret_key)) => Some(AwsCredentials {
                    access_key,
                    secret_key,
                    session_token: credential_str(&m.credential, &["session_token"]),
                }),
                _ => None,
            };
            (
                ProviderConfig::Bedrock {
                    region,
                    endpoint_url,
                    credentials,
                    bearer_token: credential_str(&m.credential, &["bearer_token"]),
                    extra: Map::new(),
                },
                model,
            )
        }
        "openai" => (
            ProviderConfig::OpenAi {
                base_url: url.trim_end_matches("/chat/completions").to_string(),
                api_key: None,
                headers: headers(&["content-type"])?,
                extra: Map::new(),
            },
            model_name
                .ok_or_else(|| invalid(field, "its connector names no model (parameters.model)"))?,
        ),
        "anthropic" => (
            ProviderConfig::Anthropic {
                base_url: url.trim_end_matches("/messages").to_string(),
                api_key: None,
                version: crate::model::anthropic::DEFAULT_VERSION.into(),
                headers: headers(&["content-type"])?,
                extra: Map::new(),
            },
            model_name
                .ok_or_else(|| invalid(field, "its connector names no model (parameters.model)"))?,
        ),
        _ => {
            let text = match cp.get("fixture") {
                None => crate::config::DEMO_FIXTURE.to_string(),
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
            };
            let fixture = Fixture::parse(&text)
                .map_err(|p| invalid(field, format!("bad scripted fixture: {p}")))?;
            (
                ProviderConfig::Scripted { fixture },
                model_name.unwrap_or_else(|| "scripted".into()),
            )
        }
    };
    // Connector parameters are the defaults; the agent's own override them.
    let mut sampling = cp.clone();
    sampling.extend(params.clone());
    Ok(ModelConfig {
        provider,
        model_id,
        params: inference_params(&sampling),
        idle_timeout_secs,
        retry: RetryPolicy::default(),
        http2_prior_knowledge: false,
    })
}

fn percent_decode(s: &str) -> String {
    url::form_urlencoded::parse(format!("x={s}").as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| s.to_string())
}

/// Checks every URL a compiled registration will reach against the outbound URL policy
/// (`net`), naming the registration's field: literal refused addresses and `localhost` fail
/// here, names that resolve inside fail when the request goes out.
pub fn check_outbound(
    body: &Value,
    cfg: &AgentConfig,
    net: &crate::outbound::Net,
) -> Result<(), Invalid> {
    let check =
        |field: String, url: &str| net.check(url).map_err(|e| invalid(field, e.to_string()));
    let model_url = |m: &ModelConfig| match &m.provider {
        ProviderConfig::OpenAi { base_url, .. } | ProviderConfig::Anthropic { base_url, .. } => {
            Some(("base_url", base_url.clone()))
        }
        ProviderConfig::Bedrock { endpoint_url, .. } => {
            endpoint_url.clone().map(|u| ("endpoint_url", u))
        }
        ProviderConfig::Scripted { .. } => None,
        ProviderConfig::Connector(c) => c.url().map(|u| ("url", u)),
    };
    if let Some((key, url)) = model_url(&cfg.model) {
        let field = match body.get("model") {
            Some(_) => format!("model.model_parameters.{key}"),
            None => "llm.model_id".to_string(),
        };
        check(field, &url)?;
    }
    for (i, t) in cfg.tools.iter().enumerate() {
        let f = |k: &str| format!("tools[{i}].{k}");
        match &t.kind {
            ToolKind::Http { url, .. } => check(f("url"), url)?,
            ToolKind::Model { model, .. } => {
                if let Some((_, url)) = model_url(model) {
                    check(f("parameters.model_id"), &url)?;
                }
            }
            ToolKind::Mcp(c) => {
                if let crate::tools::mcp::McpTransport::Http { url, .. } = &c.transport {
                    check(f("url"), url.as_str())?;
                }
            }
            ToolKind::OpenApi(c) => {
                match &c.spec {
                    crate::tools::openapi::SpecSource::Url(u) => check(f("spec_url"), u)?,
                    crate::tools::openapi::SpecSource::File(_) => {
                        return Err(invalid(
                            f("spec"),
                            "OpenAPI documents read from files can only be configured in the config file; give spec_url",
                        ));
                    }
                }
                if let Some(u) = &c.base_url {
                    check(f("base_url"), u)?;
                }
            }
            ToolKind::Search(c) => {
                if let crate::tools::search::Backend::OpenSearch { url, .. } = &c.backend {
                    check(f("url"), url.as_str())?;
                }
            }
            // The `[opensearch]` cluster is the operator's; these tools name no URL.
            ToolKind::State { .. }
            | ToolKind::Builtin { .. }
            | ToolKind::Agent { .. }
            | ToolKind::MlCommons(_) => {}
        }
    }
    Ok(())
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

/// The MCP servers of `parameters.mcp_connectors`: `[{"mcp_connector_id", "tool_filters"}]`
/// (ml-commons also takes the list as JSON text).
async fn mcp_connectors(
    list: &Value,
    models: &dyn ModelLookup,
) -> Result<Vec<ToolConfig>, Invalid> {
    let field = "parameters.mcp_connectors";
    let parsed;
    let list = match list {
        Value::String(s) => {
            parsed = serde_json::from_str::<Value>(s)
                .map_err(|e| invalid(field, format!("not a JSON list: {e}")))?;
            &parsed
        }
        other => other,
    };
    let Some(entries) = list.as_array() else {
        return Err(invalid(
            field,
            "must be a list of {\"mcp_connector_id\": ...}",
        ));
    };
    let mut out = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let f = format!("{field}[{i}]");
        let id = e
            .get("mcp_connector_id")
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
            .ok_or_else(|| invalid(format!("{f}.mcp_connector_id"), "required, a connector id"))?;
        let filters: Vec<String> = match e.get("tool_filters") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) if a.iter().all(Value::is_string) => a
                .iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect(),
            Some(_) => {
                return Err(invalid(
                    format!("{f}.tool_filters"),
                    "must be a list of regular expressions",
                ));
            }
        };
        let (doc, credential) = models
            .connector(id)
            .await
            .map_err(|e| invalid(format!("{f}.mcp_connector_id"), e))?
            .ok_or_else(|| {
                invalid(
                    format!("{f}.mcp_connector_id"),
                    format!("no connector {id:?}"),
                )
            })?;
        let protocol = doc.get("protocol").and_then(Value::as_str).unwrap_or("");
        if !crate::connector::mcp::MCP_PROTOCOLS.contains(&protocol) {
            return Err(invalid(
                format!("{f}.mcp_connector_id"),
                format!("connector {id:?} is not an MCP connector (protocol {protocol:?})"),
            ));
        }
        let cfg = crate::tools::mcp::from_connector(id, &doc, &credential, &filters, &f)
            .map_err(|e| invalid(e.field, e.problem))?;
        out.push(ToolConfig {
            kind: ToolKind::Mcp(cfg),
            options: crate::tools::ToolOptions::default(),
        });
    }
    Ok(out)
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

async fn compile_tools(
    v: Option<&Value>,
    kind: AgentKind,
    models: &dyn ModelLookup,
    idle_timeout_secs: u64,
) -> Result<(Vec<ToolConfig>, Vec<FlowStep>), Invalid> {
    let entries = match v {
        None => return Ok((Vec::new(), Vec::new())),
        Some(Value::Array(a)) => a,
        Some(_) => return Err(invalid("tools", "must be an array")),
    };
    let mut tools: Vec<ToolConfig> = Vec::new();
    let mut flow = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let f = |k: &str| format!("tools[{i}].{k}");
        let Some(o) = e.as_object() else {
            return Err(invalid(format!("tools[{i}]"), "must be an object"));
        };
        let ty = str_field(o, "type").ok_or_else(|| {
            invalid(
                f("type"),
                "required: MLModelTool, AgentTool, SearchIndexTool, VectorDBTool, ListIndexTool, IndexMappingTool, CatIndexTool, http, builtin, mcp, openapi or search",
            )
        })?;
        let include_output = o
            .get("include_output_in_agent_response")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let (tool, step_params) = if ty == "MLModelTool" {
            let p = o
                .get("parameters")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            let mid = str_field(&p, "model_id")
                .ok_or_else(|| invalid(f("parameters.model_id"), "required: a registered model"))?;
            let m = models
                .model(mid)
                .await
                .map_err(|e| invalid(f("parameters.model_id"), e))?
                .ok_or_else(|| {
                    invalid(
                        f("parameters.model_id"),
                        format!("no model {mid:?} is registered"),
                    )
                })?;
            let mut model =
                model_config(&m, None, &f("parameters.model_id"), &p, idle_timeout_secs)?;
            // ml-commons sends an MLModelTool's rendered prompt as it is.
            if let ProviderConfig::Connector(c) = &mut model.provider {
                c.prompt_only = true;
            }
            let name = str_field(o, "name").unwrap_or("MLModelTool").to_string();
            let spec = crate::conversation::ToolSpec {
                name,
                description: str_field(o, "description")
                    .unwrap_or("A general tool to answer any question")
                    .to_string(),
                input_schema: ModelTool::default_schema(),
                strict: None,
            };
            let tool = ToolConfig {
                kind: ToolKind::Model {
                    spec,
                    model: Box::new(model),
                    prompt: str_field(&p, "prompt")
                        .unwrap_or("${parameters.question}")
                        .to_string(),
                    system_prompt: str_field(&p, "system_prompt").map(str::to_string),
                },
                options: crate::tools::ToolOptions::default(),
            };
            (tool, p)
        } else if let Some(ml) = crate::tools::search::ml::MlToolType::parse(ty) {
            compile_ml_tool(ml, o, &f, models).await?
        } else if ty == "AgentTool" {
            let p = o
                .get("parameters")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            let agent_id = str_field(&p, "agent_id").ok_or_else(|| {
                invalid(
                    f("parameters.agent_id"),
                    "required: a registered agent's id",
                )
            })?;
            let spec = crate::conversation::ToolSpec {
                name: str_field(o, "name").unwrap_or("AgentTool").to_string(),
                description: str_field(o, "description")
                    .unwrap_or("Runs another agent on a question and returns its answer")
                    .to_string(),
                input_schema: crate::tools::agent_tool_schema(),
                strict: None,
            };
            let tool = ToolConfig {
                kind: ToolKind::Agent {
                    spec,
                    agent_id: agent_id.to_string(),
                },
                options: crate::tools::ToolOptions::default(),
            };
            let mut step = p.clone();
            step.remove("agent_id");
            (tool, step)
        } else {
            let mut table = o.clone();
            let input = table.remove("input");
            for k in ["include_output_in_agent_response", "attributes", "config"] {
                table.remove(k);
            }
            let tool = tool_from_json(&Value::Object(table)).map_err(|(k, p)| {
                invalid(
                    if k.is_empty() {
                        format!("tools[{i}]")
                    } else {
                        f(&k)
                    },
                    p,
                )
            })?;
            let step = match input {
                None => Map::new(),
                Some(Value::Object(m)) => m,
                Some(other) => Map::from_iter([("input".to_string(), other)]),
            };
            (tool, step)
        };
        let mut tool = tool;
        apply_attributes(&mut tool, o.get("attributes"), &f)?;
        let Some(name) = tool.name().map(str::to_string) else {
            if kind.is_flow() {
                return Err(invalid(
                    f("type"),
                    "a flow step must be a single tool (MLModelTool, http or builtin)",
                ));
            }
            tools.push(tool);
            continue;
        };
        if tools.iter().any(|t| t.name() == Some(name.as_str())) {
            return Err(invalid(f("name"), format!("duplicate tool name {name:?}")));
        }
        flow.push(FlowStep {
            tool: name,
            parameters: step_params,
            include_output,
        });
        tools.push(tool);
    }
    if !kind.is_flow() {
        flow.clear();
    }
    Ok((tools, flow))
}

/// Compiles a registration's tool entry of an ml-commons type: the tool, and the parameters a
/// flow step fills for it. A `VectorDBTool`'s model must be registered.
async fn compile_ml_tool(
    ty: crate::tools::search::ml::MlToolType,
    entry: &Map<String, Value>,
    f: &(dyn Fn(&str) -> String + Sync),
    models: &dyn ModelLookup,
) -> Result<(ToolConfig, Map<String, Value>), Invalid> {
    let cfg = crate::tools::search::ml::from_registration(ty, entry, f)?;
    if ty == crate::tools::search::ml::MlToolType::VectorDb {
        let mid = cfg
            .params
            .get("model_id")
            .and_then(Value::as_str)
            .unwrap_or("");
        models
            .model(mid)
            .await
            .map_err(|e| invalid(f("parameters.model_id"), e))?
            .ok_or_else(|| {
                invalid(
                    f("parameters.model_id"),
                    format!("no model {mid:?} is registered"),
                )
            })?;
    }
    // A flow fills a retriever's `input` with the execution's parameters (earlier steps'
    // outputs included); the other tools fill their own templates per call.
    let step = match (ty, cfg.params.get("input")) {
        (crate::tools::search::ml::MlToolType::VectorDb, Some(input)) => {
            Map::from_iter([("input".to_string(), input.clone())])
        }
        _ => Map::new(),
    };
    Ok((
        ToolConfig {
            kind: ToolKind::MlCommons(cfg),
            options: crate::tools::ToolOptions::default(),
        },
        step,
    ))
}
