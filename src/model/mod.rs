//! The provider boundary: one object-safe [`Provider`] trait streaming provider-neutral
//! [`ModelEvent`]s. Wire types stay inside each provider's module.

pub mod anthropic;
pub mod bedrock;
#[cfg(feature = "server")]
pub mod coalesce;
#[cfg(feature = "server")]
pub mod media;
pub mod openai;
#[cfg(feature = "server")]
pub mod retry;
#[cfg(feature = "server")]
pub mod scripted;
pub mod sse;

use futures::stream::BoxStream;
use serde_json::Value;

use crate::conversation::{Message, ToolSpec};

/// Sampling settings a request may carry; `None` leaves the provider's default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InferenceParams {
    /// Upper bound of generated tokens.
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Nucleus sampling.
    pub top_p: Option<f32>,
    /// Stop sequences.
    pub stop: Vec<String>,
    /// Reasoning effort for models that take one (`low`, `medium`, `high`).
    pub reasoning_effort: Option<String>,
}

/// One model call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelRequest {
    /// System instructions in order.
    pub system: Vec<String>,
    /// Alternating turns, starting with a user turn.
    pub messages: Vec<Message>,
    /// Tools the model may call (backend and frontend alike).
    pub tools: Vec<ToolSpec>,
    /// Sampling settings.
    pub params: InferenceParams,
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// A natural end of turn.
    EndTurn,
    /// It asked for tool calls.
    ToolUse,
    /// It ran out of its token budget.
    MaxTokens,
    /// A stop sequence matched.
    StopSequence,
    /// A content filter or guardrail stopped it.
    ContentFiltered,
    /// Anything else the provider said.
    Other(String),
}

/// Token counts of one model call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Prompt tokens, cached ones included.
    pub input_tokens: u64,
    /// Generated tokens, reasoning included.
    pub output_tokens: u64,
    /// The part of the output that was reasoning.
    pub reasoning_tokens: Option<u64>,
    /// The part of the input read from a prompt cache.
    pub cached_input_tokens: Option<u64>,
    /// The part of the input written to a prompt cache.
    pub cache_write_input_tokens: Option<u64>,
}

impl Usage {
    /// Adds another call's counts to this one.
    pub fn add(&mut self, other: &Usage) {
        fn add_opt(a: &mut Option<u64>, b: Option<u64>) {
            if let Some(b) = b {
                *a = Some(a.unwrap_or(0) + b);
            }
        }
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        add_opt(&mut self.reasoning_tokens, other.reasoning_tokens);
        add_opt(&mut self.cached_input_tokens, other.cached_input_tokens);
        add_opt(
            &mut self.cache_write_input_tokens,
            other.cache_write_input_tokens,
        );
    }
}

/// What a model stream yields, provider-neutral. Tool calls are identified by their id; the
/// calls of one turn may interleave.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    /// A fragment of the answer's text.
    TextDelta(String),
    /// A fragment of the model's reasoning.
    ReasoningDelta(String),
    /// The signature closing the current reasoning block.
    ReasoningSignature(String),
    /// A reasoning block the provider redacted, as its opaque payload.
    RedactedReasoning(String),
    /// The current reasoning block is complete (the next reasoning starts a new block).
    ReasoningEnd,
    /// A tool call begins.
    ToolCallStart {
        /// The call's id.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// A fragment of a call's JSON arguments.
    ToolCallDelta {
        /// The call's id.
        id: String,
        /// The fragment.
        delta: String,
    },
    /// A call's arguments are complete.
    ToolCallEnd {
        /// The call's id.
        id: String,
    },
    /// Token counts (may arrive after `Stop`).
    Usage(Usage),
    /// The turn ended.
    Stop(StopReason),
}

/// Why a model call failed. The codes end up in `RUN_ERROR.code`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The upstream answered with a non-success status.
    #[error("model upstream returned HTTP {status}: {message}")]
    Http {
        /// The HTTP status.
        status: u16,
        /// The upstream's error message (secrets removed, truncated).
        message: String,
    },
    /// The upstream could not be reached.
    #[error("model upstream unreachable: {0}")]
    Connect(String),
    /// The stream broke off before the turn ended.
    #[error("model stream interrupted: {0}")]
    Interrupted(String),
    /// The upstream reported an error inside the stream.
    #[error("model upstream error: {message}")]
    Upstream {
        /// The upstream's message.
        message: String,
        /// The upstream's code, if any.
        code: Option<String>,
    },
    /// No data arrived within the idle limit.
    #[error("model upstream sent nothing for {0} s")]
    Idle(u64),
    /// The request holds something this provider cannot take.
    #[error("unsupported input: {0}")]
    Unsupported(String),
    /// The upstream sent something that is not its wire format.
    #[error("malformed model response: {0}")]
    Protocol(String),
}

impl ModelError {
    /// The `RUN_ERROR.code` for this failure.
    pub fn code(&self) -> &'static str {
        match self {
            ModelError::Http {
                status: 401 | 403, ..
            } => "UPSTREAM_AUTH_ERROR",
            ModelError::Http { status: 429, .. } => "UPSTREAM_RATE_LIMITED",
            ModelError::Http { status, .. } if *status < 500 => "UPSTREAM_BAD_REQUEST",
            ModelError::Http { .. } => "UPSTREAM_HTTP_ERROR",
            ModelError::Connect(_) => "UPSTREAM_UNAVAILABLE",
            ModelError::Interrupted(_) => "UPSTREAM_STREAM_INTERRUPTED",
            ModelError::Upstream { .. } => "UPSTREAM_ERROR",
            ModelError::Idle(_) => "UPSTREAM_TIMEOUT",
            ModelError::Unsupported(_) => "UNSUPPORTED_CONTENT",
            ModelError::Protocol(_) => "UPSTREAM_PROTOCOL_ERROR",
        }
    }
}

/// A stream of model events.
pub type ModelStream = BoxStream<'static, Result<ModelEvent, ModelError>>;

#[cfg(feature = "server")]
/// An LLM backend. Object-safe: agents hold `Arc<dyn Provider>` chosen from config at run time.
/// Dropping the returned stream must abort the upstream request.
pub trait Provider: Send + Sync + 'static {
    /// A short provider name for usage reports, e.g. `openai`.
    fn name(&self) -> &str;
    /// The model id sent upstream.
    fn model_id(&self) -> &str;
    /// Starts one streaming model call.
    fn stream(&self, request: ModelRequest) -> ModelStream;
    /// How this provider takes a media block (by default: as it is).
    fn media_support(&self, _media: &crate::conversation::Media) -> media::MediaSupport {
        media::MediaSupport::Native
    }
    /// Whether deltas already waiting may be joined into one event (see [`coalesce`]).
    fn coalesce_deltas(&self) -> bool {
        true
    }
}

/// Removes every known secret from `text` (see [`crate::redact`]) and caps its length, for
/// error messages that quote upstreams.
pub fn scrub(text: &str, max: usize) -> String {
    let mut s = crate::redact::redact(text).into_owned();
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    s
}

/// Pulls a human-readable message out of a JSON error body (`{"error":{"message":..}}`,
/// `{"message":..}`, `{"error":"..."}`), or returns the body as is.
pub fn error_message_from_body(body: &str) -> String {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        let pick = |v: &Value| v.as_str().map(str::to_string);
        if let Some(m) = v.pointer("/error/message").and_then(pick) {
            return m;
        }
        if let Some(m) = v.get("message").and_then(pick) {
            return m;
        }
        if let Some(m) = v.get("error").and_then(pick) {
            return m;
        }
    }
    body.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrub_removes_the_secret_and_truncates_on_char_boundaries() {
        crate::redact::register("sk-scrub-12345");
        assert_eq!(scrub("bad key sk-scrub-12345", 100), "bad key [REDACTED]");
        assert_eq!(scrub("ééé", 3), "é…");
    }

    #[test]
    fn error_messages_are_extracted_from_common_shapes() {
        assert_eq!(
            error_message_from_body(r#"{"error":{"message":"nope"}}"#),
            "nope"
        );
        assert_eq!(error_message_from_body(r#"{"error":"nope"}"#), "nope");
        assert_eq!(error_message_from_body("plain"), "plain");
    }

    #[test]
    fn codes_follow_the_status() {
        let http = |status| ModelError::Http {
            status,
            message: String::new(),
        };
        assert_eq!(http(401).code(), "UPSTREAM_AUTH_ERROR");
        assert_eq!(http(429).code(), "UPSTREAM_RATE_LIMITED");
        assert_eq!(http(400).code(), "UPSTREAM_BAD_REQUEST");
        assert_eq!(http(503).code(), "UPSTREAM_HTTP_ERROR");
    }
}
