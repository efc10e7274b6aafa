//! Model sections of the configuration: providers, credentials, sampling and retries.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::{AwsCredentials, DEMO_FIXTURE, Fail, RetryPolicy, Secret, check_url, env_secret};
use crate::model::scripted::Fixture;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ModelFile {
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
    #[serde(default)]
    http2_prior_knowledge: bool,
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
    /// A registered model's user-written connector, called through its own `request_body`
    /// as ml-commons does (only registrations make these).
    Connector(Box<crate::connector::llm::ConnectorModel>),
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
    /// Speak HTTP/2 without negotiation to a plain-`http` upstream (h2c), so runs share one
    /// connection (HTTPS upstreams negotiate HTTP/2 on their own).
    pub http2_prior_knowledge: bool,
}

pub(super) fn resolve_model(
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
        .map(|(k, v)| (k.clone(), Secret::header(k, v.as_str())))
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
        http2_prior_knowledge: m.http2_prior_knowledge,
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
