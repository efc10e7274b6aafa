//! OpenAI-compatible chat completions (OpenAI, vLLM, Ollama, llama.cpp, ...): a thin transport
//! over [`convert`] (request) and [`stream`] (normalisation).

pub mod convert;
pub mod stream;
pub mod wire;

use std::time::Duration;

use eventsource_stream::Eventsource;
use futures::StreamExt;

use super::{ModelError, ModelRequest, ModelStream, Provider, error_message_from_body, scrub};
use crate::config::Secret;

/// Upstream error bodies are read up to this many bytes.
const MAX_ERROR_BODY: usize = 16 * 1024;

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

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let body = match convert::request_body(&self.settings.model_id, &request) {
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
        let secret = self.settings.api_key.clone();
        let idle = self.settings.idle_timeout;
        async_stream::stream! {
            let secret = secret.as_ref().map(|s| s.expose());
            let resp = match builder.send().await {
                Ok(r) => r,
                Err(e) => {
                    yield Err(ModelError::Connect(scrub(&error_chain(&e), secret, 500)));
                    return;
                }
            };
            let status = resp.status();
            if !status.is_success() {
                let body = read_capped(resp, MAX_ERROR_BODY).await;
                let message = scrub(&error_message_from_body(&body), secret, 1000);
                yield Err(ModelError::Http { status: status.as_u16(), message });
                return;
            }
            let mut events = resp.bytes_stream().eventsource();
            let mut state = stream::StreamState::default();
            loop {
                let next = match tokio::time::timeout(idle, events.next()).await {
                    Ok(n) => n,
                    Err(_) => {
                        yield Err(ModelError::Idle(idle.as_secs()));
                        return;
                    }
                };
                // `terminal`: after this step the stream is over whatever it yielded.
                let (step, terminal) = match next {
                    None => (state.eof(), true),
                    Some(Err(e)) => (Err(ModelError::Interrupted(scrub(&e.to_string(), secret, 500))), true),
                    Some(Ok(ev)) => {
                        let data = ev.data.trim();
                        if data.is_empty() {
                            continue;
                        }
                        if data == "[DONE]" {
                            (state.done(), true)
                        } else {
                            match serde_json::from_str::<wire::Chunk>(data) {
                                Ok(chunk) => (state.step(chunk), false),
                                Err(e) => (Err(ModelError::Protocol(format!("unreadable chunk: {e}"))), true),
                            }
                        }
                    }
                };
                match step {
                    Ok(events) => {
                        for e in events {
                            yield Ok(e);
                        }
                    }
                    Err(e) => {
                        yield Err(e);
                        return;
                    }
                }
                if terminal {
                    return;
                }
            }
        }
        .boxed()
    }
}

/// An error with its causes, which reqwest keeps in `source()`.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

async fn read_capped(resp: reqwest::Response, cap: usize) -> String {
    let mut body = Vec::new();
    let mut stream = resp.bytes_stream();
    while let Some(Ok(chunk)) = stream.next().await {
        body.extend_from_slice(&chunk);
        if body.len() >= cap {
            body.truncate(cap);
            break;
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}
