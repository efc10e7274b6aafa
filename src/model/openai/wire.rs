//! OpenAI chat-completions streaming chunks, read leniently: every field may be missing or
//! `null`, since vLLM, Ollama, llama.cpp and friends each leave out different ones.

use serde::Deserialize;
use serde_json::Value;

/// One `data:` payload of the stream.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Chunk {
    /// Choices; only index 0 is used.
    #[serde(default)]
    pub choices: Option<Vec<Choice>>,
    /// Token counts, on the last chunk when `stream_options.include_usage` is set.
    #[serde(default)]
    pub usage: Option<WireUsage>,
    /// An error reported inside the stream.
    #[serde(default)]
    pub error: Option<Value>,
}

/// One choice of a chunk.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Choice {
    /// The choice's index.
    #[serde(default)]
    pub index: Option<u32>,
    /// What this chunk adds.
    #[serde(default)]
    pub delta: Option<Delta>,
    /// Set on the choice's last chunk.
    #[serde(default)]
    pub finish_reason: Option<String>,
}

/// The incremental part of a choice.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Delta {
    /// Answer text.
    #[serde(default)]
    pub content: Option<String>,
    /// Reasoning text (vLLM, DeepSeek).
    #[serde(default)]
    pub reasoning_content: Option<String>,
    /// Reasoning text (Ollama, OpenRouter).
    #[serde(default)]
    pub reasoning: Option<String>,
    /// A refusal, shown as text.
    #[serde(default)]
    pub refusal: Option<String>,
    /// Tool-call fragments.
    #[serde(default)]
    pub tool_calls: Option<Vec<ToolCallDelta>>,
}

/// A fragment of one tool call.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ToolCallDelta {
    /// Which call of the turn this fragment belongs to.
    #[serde(default)]
    pub index: Option<u32>,
    /// The call's id (first fragment only, usually).
    #[serde(default)]
    pub id: Option<String>,
    /// Name and argument fragments.
    #[serde(default)]
    pub function: Option<FunctionDelta>,
}

/// Name and argument fragments.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct FunctionDelta {
    /// The tool name.
    #[serde(default)]
    pub name: Option<String>,
    /// A fragment of the JSON arguments.
    #[serde(default)]
    pub arguments: Option<String>,
}

/// Token counts.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct WireUsage {
    /// Prompt tokens.
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    /// Generated tokens.
    #[serde(default)]
    pub completion_tokens: Option<u64>,
    /// Prompt details.
    #[serde(default)]
    pub prompt_tokens_details: Option<PromptDetails>,
    /// Completion details.
    #[serde(default)]
    pub completion_tokens_details: Option<CompletionDetails>,
}

/// Prompt token details.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PromptDetails {
    /// Tokens read from the prompt cache.
    #[serde(default)]
    pub cached_tokens: Option<u64>,
}

/// Completion token details.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct CompletionDetails {
    /// Reasoning tokens.
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
}
