//! Agents: a model, a system prompt and backend tools, built from config; and the loops that
//! run them.

pub mod react;
pub mod usage;

use std::sync::Arc;
use std::time::Duration;

use crate::config::{AgentConfig, ProviderConfig, RetryPolicy, ToolConfig};
use crate::model::anthropic::{AnthropicProvider, AnthropicSettings};
use crate::model::bedrock::{BedrockProvider, BedrockSettings};
use crate::model::media::MediaPolicy;
use crate::model::openai::{OpenAiProvider, OpenAiSettings};
use crate::model::scripted::ScriptedProvider;
use crate::model::{InferenceParams, Provider};
use crate::tools::builtin::Calculator;
use crate::tools::http::HttpTool;
use crate::tools::{Registry, Tool};

/// A runnable agent.
pub struct Agent {
    /// URL-safe id.
    pub id: String,
    /// Display name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Its own system prompt, sent before anything the client adds.
    pub system_prompt: Option<String>,
    /// Bound on model calls per run.
    pub max_iterations: u32,
    /// The model.
    pub provider: Arc<dyn Provider>,
    /// Sampling defaults for every call.
    pub params: InferenceParams,
    /// Backend tools.
    pub tools: Registry,
    /// How model calls that fail before streaming are retried.
    pub retry: RetryPolicy,
    /// Where media URLs may be fetched from.
    pub media: Arc<MediaPolicy>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("id", &self.id)
            .field("provider", &self.provider.name())
            .field("model", &self.provider.model_id())
            .field("tools", &self.tools)
            .finish()
    }
}

impl Agent {
    /// Builds an agent from resolved config, sharing `client` for all HTTP traffic.
    pub fn build(
        cfg: &AgentConfig,
        client: &reqwest::Client,
        media: Arc<MediaPolicy>,
    ) -> Result<Self, String> {
        let idle_timeout = Duration::from_secs(cfg.model.idle_timeout_secs);
        let model_id = cfg.model.model_id.clone();
        let provider: Arc<dyn Provider> = match &cfg.model.provider {
            ProviderConfig::OpenAi {
                base_url,
                api_key,
                headers,
                extra,
            } => Arc::new(OpenAiProvider::new(
                client.clone(),
                OpenAiSettings {
                    base_url: base_url.clone(),
                    model_id,
                    api_key: api_key.clone(),
                    headers: headers.clone(),
                    extra: extra.clone(),
                    idle_timeout,
                },
            )),
            ProviderConfig::Anthropic {
                base_url,
                api_key,
                version,
                headers,
                extra,
            } => Arc::new(AnthropicProvider::new(
                client.clone(),
                AnthropicSettings {
                    base_url: base_url.clone(),
                    model_id,
                    api_key: api_key.clone(),
                    version: version.clone(),
                    headers: headers.clone(),
                    extra: extra.clone(),
                    idle_timeout,
                },
            )),
            ProviderConfig::Bedrock {
                region,
                endpoint_url,
                credentials,
                bearer_token,
                extra,
            } => Arc::new(BedrockProvider::new(BedrockSettings {
                model_id,
                region: region.clone(),
                endpoint_url: endpoint_url.clone(),
                credentials: credentials.clone(),
                bearer_token: bearer_token.clone(),
                extra: extra.clone(),
                idle_timeout,
            })),
            ProviderConfig::Scripted { fixture } => {
                Arc::new(ScriptedProvider::new(fixture.clone(), model_id))
            }
        };
        let mut tools = Registry::default();
        for t in &cfg.tools {
            let tool: Arc<dyn Tool> = match t {
                ToolConfig::Http {
                    spec,
                    url,
                    method,
                    headers,
                    timeout_secs,
                } => Arc::new(HttpTool::new(
                    spec.clone(),
                    client.clone(),
                    url.clone(),
                    *method,
                    headers.clone(),
                    Duration::from_secs(*timeout_secs),
                )),
                ToolConfig::Builtin { name, kind } => match kind.as_str() {
                    "calculator" => Arc::new(Calculator::new(name)),
                    other => return Err(format!("unknown built-in tool {other:?}")),
                },
            };
            tools.insert(tool)?;
        }
        Ok(Self {
            id: cfg.id.clone(),
            name: cfg.name.clone(),
            description: cfg.description.clone(),
            system_prompt: cfg.system_prompt.clone(),
            max_iterations: cfg.max_iterations,
            provider,
            params: cfg.model.params.clone(),
            tools,
            retry: cfg.model.retry,
            media,
        })
    }
}
