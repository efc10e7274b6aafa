//! OpenAI-compatible chat completions (OpenAI, vLLM, Ollama, llama.cpp, ...): a thin transport
//! over [`convert`] (request) and [`stream`] (normalisation).

pub mod convert;
pub mod stream;
pub mod wire;

use std::time::Duration;

use futures::StreamExt;

use super::media::MediaSupport;
use super::sse::{self, SseNormaliser};
use super::{ModelError, ModelEvent, ModelRequest, ModelStream, Provider};
use crate::config::Secret;
use crate::conversation::Media;

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
            self.settings.api_key.clone(),
            self.settings.idle_timeout,
            stream::StreamState::default(),
        )
    }
}

impl SseNormaliser for stream::StreamState {
    fn event(&mut self, _name: &str, data: &str) -> Result<(Vec<ModelEvent>, bool), ModelError> {
        if data == "[DONE]" {
            return Ok((self.done()?, true));
        }
        let chunk = serde_json::from_str::<wire::Chunk>(data)
            .map_err(|e| ModelError::Protocol(format!("unreadable chunk: {e}")))?;
        Ok((self.step(chunk)?, false))
    }

    fn eof(&mut self) -> Result<Vec<ModelEvent>, ModelError> {
        stream::StreamState::eof(self)
    }
}
