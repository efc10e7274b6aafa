//! The openai provider itself (server builds).

use super::{convert, stream};
use std::time::Duration;

use futures::StreamExt;

use crate::conversation::Media;
use crate::model::media::MediaSupport;
use crate::model::sse;
use crate::model::{ModelRequest, ModelStream, Provider};
use crate::redact::Secret;

/// Settings of one OpenAI-compatible model.
#[derive(Debug, Clone)]
pub struct OpenAiSettings {
    /// e.g. `https://api.openai.com/v1`; `/chat/completions` is appended.
    pub base_url: String,
    /// The model id.
    pub model_id: String,
    /// Bearer token, if the server wants one.
    pub api_key: Option<Secret>,
    /// Extra request headers.
    pub headers: Vec<(String, Secret)>,
    /// Merged into every request body (server-specific options).
    pub extra: serde_json::Map<String, serde_json::Value>,
    /// The longest silence tolerated between two stream chunks.
    pub idle_timeout: Duration,
}

/// A provider speaking the chat-completions streaming protocol.
pub struct OpenAiProvider {
    client: reqwest::Client,
    settings: OpenAiSettings,
    url: String,
}

impl OpenAiProvider {
    /// A provider sharing `client`'s connection pool.
    pub fn new(client: reqwest::Client, settings: OpenAiSettings) -> Self {
        let url = format!(
            "{}/chat/completions",
            settings.base_url.trim_end_matches('/')
        );
        Self {
            client,
            settings,
            url,
        }
    }
}

impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        "openai"
    }

    fn model_id(&self) -> &str {
        &self.settings.model_id
    }

    fn media_support(&self, media: &Media) -> MediaSupport {
        convert::media_support(media)
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let body = match convert::request_body(&self.settings.model_id, &request) {
            Ok(serde_json::Value::Object(mut b)) => {
                for (k, v) in &self.settings.extra {
                    b.insert(k.clone(), v.clone());
                }
                serde_json::Value::Object(b)
            }
            Ok(b) => b,
            Err(e) => return futures::stream::once(async move { Err(e) }).boxed(),
        };
        let mut builder = self
            .client
            .post(&self.url)
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .json(&body);
        if let Some(key) = &self.settings.api_key {
            builder = builder.bearer_auth(key.expose());
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
