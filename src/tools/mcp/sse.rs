//! MCP's HTTP+SSE transport (protocol 2024-11-05, what ml-commons' `mcp_sse` connectors speak),
//! which rmcp no longer ships: a `GET` opens an event stream whose first `endpoint` event names
//! the URL to `POST` JSON-RPC messages to; the server's messages come back as `message` events.
//! Only the transport is here: the session, its JSON-RPC and the MCP types stay rmcp's, and the
//! event stream is parsed by `eventsource-stream`.

use std::borrow::Cow;

use eventsource_stream::Eventsource;
use futures::StreamExt;
use futures::stream::BoxStream;
use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

/// How long the server may take to name its message endpoint.
const ENDPOINT_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// Why the SSE transport failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SseError {
    /// The stream could not be opened, or a message not delivered.
    #[error("{0}")]
    Http(String),
    /// The server named a message endpoint on another origin, or none.
    #[error("{0}")]
    Endpoint(String),
}

/// A connected HTTP+SSE session's transport.
pub struct SseTransport {
    client: reqwest::Client,
    headers: reqwest::header::HeaderMap,
    /// Where messages are posted (the `endpoint` event's URL, on the stream's origin).
    post_url: url::Url,
    events: BoxStream<'static, Result<eventsource_stream::Event, String>>,
}

impl SseTransport {
    /// Opens the event stream at `sse_url` and waits for the message endpoint.
    pub async fn connect(
        client: reqwest::Client,
        sse_url: url::Url,
        headers: reqwest::header::HeaderMap,
    ) -> Result<Self, SseError> {
        let resp = client
            .get(sse_url.clone())
            .headers(headers.clone())
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .send()
            .await
            .map_err(|e| SseError::Http(format!("GET {sse_url}: {}", without_url(&e))))?;
        if !resp.status().is_success() {
            return Err(SseError::Http(format!(
                "GET {sse_url} answered {}",
                resp.status()
            )));
        }
        let mut events = resp
            .bytes_stream()
            .eventsource()
            .map(|r| r.map_err(|e| e.to_string()))
            .boxed();
        let first = tokio::time::timeout(ENDPOINT_WAIT, async {
            while let Some(e) = events.next().await {
                match e {
                    Ok(e) if e.event == "endpoint" => return Ok(e.data),
                    Ok(_) => continue,
                    Err(e) => return Err(SseError::Http(e)),
                }
            }
            Err(SseError::Endpoint(
                "the event stream ended before naming the message endpoint".into(),
            ))
        })
        .await
        .map_err(|_| {
            SseError::Endpoint(format!(
                "no endpoint event within {} s",
                ENDPOINT_WAIT.as_secs()
            ))
        })??;
        let post_url = sse_url
            .join(first.trim())
            .map_err(|e| SseError::Endpoint(format!("endpoint {first:?}: {e}")))?;
        // Messages carry the connector's credentials: they go nowhere but the stream's origin.
        if post_url.origin() != sse_url.origin() {
            return Err(SseError::Endpoint(format!(
                "the server named a message endpoint on another origin ({}); refused",
                post_url.origin().ascii_serialization()
            )));
        }
        Ok(Self {
            client,
            headers,
            post_url,
            events,
        })
    }
}

/// A reqwest error's text without its URL (which the caller names already).
fn without_url(e: &reqwest::Error) -> String {
    let mut s = e.to_string();
    if let Some(u) = e.url() {
        s = s.replace(u.as_str(), "");
    }
    s
}

impl Transport<RoleClient> for SseTransport {
    type Error = SseError;

    fn name() -> Cow<'static, str> {
        "sse".into()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let req = self
            .client
            .post(self.post_url.clone())
            .headers(self.headers.clone())
            .json(&item);
        async move {
            let resp = req
                .send()
                .await
                .map_err(|e| SseError::Http(format!("POST message: {}", without_url(&e))))?;
            // 202 Accepted is the rule; any success will do.
            if resp.status().is_success() {
                Ok(())
            } else {
                Err(SseError::Http(format!(
                    "POST message answered {}",
                    resp.status()
                )))
            }
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            match self.events.next().await? {
                Ok(e) if e.event == "message" || e.event.is_empty() => {
                    match serde_json::from_str(&e.data) {
                        Ok(m) => return Some(m),
                        Err(err) => {
                            tracing::warn!(error = %err, "MCP SSE: a message that is not JSON-RPC skipped");
                        }
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::info!(error = %e, "MCP SSE: the event stream broke");
                    return None;
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.events = futures::stream::empty().boxed();
        Ok(())
    }
}
