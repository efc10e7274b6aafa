//! The transport shared by SSE-speaking providers (OpenAI-compatible, Anthropic): send the
//! request, turn a failed status into [`ModelError::Http`], then feed each SSE event to the
//! provider's pure normaliser under an idle limit.

use super::{ModelError, ModelEvent};
#[cfg(feature = "server")]
use {
    super::{ModelStream, error_message_from_body, scrub},
    eventsource_stream::Eventsource,
    futures::StreamExt,
    std::time::Duration,
};

#[cfg(feature = "server")]
/// Upstream error bodies are read up to this many bytes.
const MAX_ERROR_BODY: usize = 16 * 1024;

/// A provider's stream normaliser: pure functions of its own state and one SSE event.
pub trait SseNormaliser: Send + 'static {
    /// Consumes one event (`event:` name, possibly empty, and `data:`). Returns the model
    /// events and whether the stream is complete after it.
    fn event(&mut self, name: &str, data: &str) -> Result<(Vec<ModelEvent>, bool), ModelError>;
    /// The connection ended without a terminal event.
    fn eof(&mut self) -> Result<Vec<ModelEvent>, ModelError>;
}

#[cfg(feature = "server")]
/// Sends `request` and streams what `normaliser` makes of the answer. Known secrets are
/// scrubbed from every error message (see [`crate::redact`]).
pub fn stream(
    request: reqwest::RequestBuilder,
    idle: Duration,
    mut normaliser: impl SseNormaliser,
) -> ModelStream {
    async_stream::stream! {
        let request = crate::telemetry::with_traceparent(request);
        let resp = match request.send().await {
            Ok(r) => r,
            Err(e) => {
                yield Err(ModelError::Connect(scrub(&error_chain(&e), 500)));
                return;
            }
        };
        let status = resp.status();
        if !status.is_success() {
            let body = read_capped(resp, MAX_ERROR_BODY).await;
            let message = scrub(&error_message_from_body(&body), 1000);
            yield Err(ModelError::Http { status: status.as_u16(), message });
            return;
        }
        let mut events = resp.bytes_stream().eventsource();
        // One idle timer for the stream, moved on only when it fires: a timeout per event
        // cost a timer-wheel insert and removal per token.
        let mut quiet = std::pin::pin!(tokio::time::sleep(idle));
        let mut last = tokio::time::Instant::now();
        loop {
            let next = tokio::select! {
                biased;
                next = events.next() => next,
                () = &mut quiet => {
                    let due = last + idle;
                    if tokio::time::Instant::now() < due {
                        quiet.as_mut().reset(due);
                        continue;
                    }
                    yield Err(ModelError::Idle(idle.as_secs()));
                    return;
                }
            };
            last = tokio::time::Instant::now();
            let (step, terminal) = match next {
                None => (normaliser.eof(), true),
                Some(Err(e)) => (Err(ModelError::Interrupted(scrub(&e.to_string(), 500))), true),
                Some(Ok(ev)) => {
                    let data = ev.data.trim();
                    if data.is_empty() {
                        continue;
                    }
                    match normaliser.event(&ev.event, data) {
                        Ok((events, done)) => (Ok(events), done),
                        Err(e) => (Err(e), true),
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

/// An error with its causes, which reqwest keeps in `source()`.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

#[cfg(feature = "server")]
/// Reads at most `cap` bytes of a body, lossily as text.
pub async fn read_capped(resp: reqwest::Response, cap: usize) -> String {
    match crate::outbound::read_capped(resp, cap).await {
        Ok((body, _)) => String::from_utf8_lossy(&body).into_owned(),
        Err(_) => String::new(),
    }
}
