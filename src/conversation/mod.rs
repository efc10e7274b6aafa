//! The provider-neutral conversation: messages made of Bedrock-Converse-shaped content blocks.
//! Every provider adapts this model; AG-UI (and later the execute API) convert into it.

pub mod from_agui;
pub mod standard;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who said a message. System prompts travel beside the messages, never as one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The person, and tool results sent back to the model.
    User,
    /// The model.
    Assistant,
}

/// One turn of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who said it.
    pub role: Role,
    /// What was said, in order.
    pub content: Vec<ContentBlock>,
}

impl Message {
    /// A user message holding one text block.
    pub fn user_text(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: vec![ContentBlock::Text { text: text.into() }],
        }
    }

    /// The text blocks of this message joined.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for b in &self.content {
            if let ContentBlock::Text { text } = b {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(text);
            }
        }
        out
    }
}

/// One block of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// An image, audio clip, video or document.
    Media(Media),
    /// The model asked for a tool call.
    ToolUse {
        /// The call's id, unique in the conversation.
        id: String,
        /// The tool's name.
        name: String,
        /// The arguments, a JSON object.
        input: Value,
        /// A provider signature for the call, when it came with one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// What a tool call returned.
    ToolResult {
        /// The call this answers.
        tool_use_id: String,
        /// The result's content.
        content: Vec<ToolResultBlock>,
        /// Whether the tool failed.
        #[serde(default)]
        is_error: bool,
    },
    /// The model's reasoning, with the provider's signature over it.
    Reasoning {
        /// The reasoning text.
        text: String,
        /// The provider's signature over the text (Anthropic and Bedrock Claude require it
        /// back on tool-use turns).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// Reasoning the provider encrypted: an opaque payload to hand back unchanged.
    RedactedReasoning {
        /// The provider's opaque data.
        data: String,
    },
}

/// How reasoning secrets travel in AG-UI `encryptedValue`s: a signature as it is, a redacted
/// block's payload behind this prefix (signatures are base64 and never contain a colon).
pub const REDACTED_PREFIX: &str = "redacted:";

/// The `encryptedValue` for a redacted reasoning payload.
pub fn redacted_value(data: &str) -> String {
    format!("{REDACTED_PREFIX}{data}")
}

/// The reasoning block a client-returned reasoning message stands for.
pub fn reasoning_block(text: String, encrypted_value: Option<&str>) -> ContentBlock {
    match encrypted_value {
        Some(v) if v.starts_with(REDACTED_PREFIX) => ContentBlock::RedactedReasoning {
            data: v[REDACTED_PREFIX.len()..].to_string(),
        },
        other => ContentBlock::Reasoning {
            text,
            signature: other.map(str::to_string),
        },
    }
}

/// The content of a tool result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolResultBlock {
    /// Text (JSON results are kept as their text).
    Text {
        /// The text.
        text: String,
    },
    /// Media a tool returned.
    Media(Media),
}

impl ToolResultBlock {
    /// All text blocks of a result joined.
    pub fn joined_text(blocks: &[ToolResultBlock]) -> String {
        blocks
            .iter()
            .filter_map(|b| match b {
                ToolResultBlock::Text { text } => Some(text.as_str()),
                ToolResultBlock::Media(_) => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// What kind of media a block carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum MediaKind {
    Image,
    Audio,
    Video,
    Document,
}

impl MediaKind {
    /// Guesses the kind from a media type such as `image/png`.
    pub fn from_mime(mime: &str) -> Self {
        match mime.split('/').next().unwrap_or("") {
            "image" => MediaKind::Image,
            "audio" => MediaKind::Audio,
            "video" => MediaKind::Video,
            _ => MediaKind::Document,
        }
    }

    /// The lowercase name, as in AG-UI part types.
    pub fn as_str(self) -> &'static str {
        match self {
            MediaKind::Image => "image",
            MediaKind::Audio => "audio",
            MediaKind::Video => "video",
            MediaKind::Document => "document",
        }
    }
}

/// A media block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Media {
    /// Image, audio, video or document.
    pub kind: MediaKind,
    /// The media type, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Where the bytes are.
    pub source: MediaSource,
    /// A file name, when the client gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
}

/// Where a media block's bytes are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum MediaSource {
    /// Inline base64.
    Base64 {
        /// The base64 text.
        data: String,
    },
    /// Behind a URL.
    Url {
        /// The URL.
        url: String,
    },
    /// A handle issued by a provider.
    File {
        /// The handle.
        id: String,
        /// Who issued it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider: Option<String>,
    },
}

/// Text of the user turn put before a history that opens with the assistant (a greeting the
/// page showed), for providers that require the first turn to be the user's.
pub const CONVERSATION_START: &str = "(conversation start)";

/// The turns as providers that require a user turn first want them: a history opening with
/// the assistant gets a placeholder user turn before it.
pub fn user_first(messages: &[Message]) -> std::borrow::Cow<'_, [Message]> {
    match messages.first() {
        Some(m) if m.role == Role::Assistant => {
            let mut v = Vec::with_capacity(messages.len() + 1);
            v.push(Message::user_text(CONVERSATION_START));
            v.extend_from_slice(messages);
            std::borrow::Cow::Owned(v)
        }
        _ => std::borrow::Cow::Borrowed(messages),
    }
}

impl MediaSource {
    /// `data`, `url` or `file`, as AG-UI names the source kinds (for messages about them).
    pub fn kind_name(&self) -> &'static str {
        match self {
            MediaSource::Base64 { .. } => "data",
            MediaSource::Url { .. } => "url",
            MediaSource::File { .. } => "file",
        }
    }
}

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The name the model calls.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of the arguments (an object schema).
    pub input_schema: Value,
    /// Whether the model must follow the schema exactly (OpenAI's `strict` function
    /// calling); a registration's `attributes.strict`. Unset: the provider's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

/// A conversation ready for a model: system prompts and alternating turns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Conversation {
    /// System instructions, in order (agent prompt, then client system/developer messages).
    pub system: Vec<String>,
    /// The turns.
    pub messages: Vec<Message>,
}
