//! A registration's model: the unified `model` block, or the legacy `llm.model_id` with its
//! registered connector and `_llm_interface`; and the outbound policy every URL it names passes.

use super::*;

/// The model providers of the unified `model` block.
pub const PROVIDERS: &[&str] = &[
    "bedrock/converse",
    "openai/v1/chat/completions",
    "anthropic/v1/messages",
    "scripted",
];

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

pub(super) fn percent_decode(s: &str) -> String {
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
