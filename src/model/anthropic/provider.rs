//! The anthropic provider itself (server builds).

use super::{convert, stream};
use std::time::Duration;

use serde_json::{Map, Value};

use crate::conversation::Media;
use crate::model::media::MediaSupport;
use crate::model::sse;
use crate::model::{ModelRequest, ModelStream, Provider};
use crate::redact::Secret;

/// The API version header sent when the config names none.
pub const DEFAULT_VERSION: &str = "2023-06-01";

/// Settings of one Anthropic model.
#[derive(Debug, Clone)]
pub struct AnthropicSettings {
    /// e.g. `https://api.anthropic.com`; `/v1/messages` is appended.
    pub base_url: String,
    /// The model id.
    pub model_id: String,
    /// Sent as `x-api-key`.
    pub api_key: Option<Secret>,
    /// `anthropic-version`.
    pub version: String,
    /// Extra request headers (e.g. `anthropic-beta`).
    pub headers: Vec<(String, Secret)>,
    /// Merged into every request body (e.g. `thinking`).
    pub extra: Map<String, Value>,
    /// The longest silence tolerated between two stream events.
    pub idle_timeout: Duration,
}

/// A provider speaking the Anthropic Messages streaming protocol.
pub struct AnthropicProvider {
    client: reqwest::Client,
    settings: AnthropicSettings,
    url: String,
}

impl AnthropicProvider {
    /// A provider sharing `client`'s connection pool.
    pub fn new(client: reqwest::Client, settings: AnthropicSettings) -> Self {
        let base = settings.base_url.trim_end_matches('/');
        let url = if base.ends_with("/v1") {
            format!("{base}/messages")
        } else {
            format!("{base}/v1/messages")
        };
        Self {
            client,
            settings,
            url,
        }
    }
}

impl Provider for AnthropicProvider {
    fn name(&self) -> &str {
        "anthropic"
    }

    fn model_id(&self) -> &str {
        &self.settings.model_id
    }

    fn media_support(&self, media: &Media) -> MediaSupport {
        convert::media_support(media)
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let body =
            match convert::request_body(&self.settings.model_id, &request, &self.settings.extra) {
                Ok(b) => b,
                Err(e) => return Box::pin(futures::stream::once(async move { Err(e) })),
            };
        let mut builder = self
            .client
            .post(&self.url)
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .header("anthropic-version", &self.settings.version)
            .json(&body);
        if let Some(key) = &self.settings.api_key {
            builder = builder.header("x-api-key", key.expose());
        }
        for (name, value) in &self.settings.headers {
            builder = builder.header(name.as_str(), value.expose());
        }
        sse::stream(
            builder,
            self.settings.idle_timeout,
            stream::StreamState::default(),
        )
    }
}
