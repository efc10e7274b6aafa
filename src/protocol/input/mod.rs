//! `RunAgentInput` and the AG-UI message and content-part shapes, read leniently: unknown keys and
//! missing optional fields are fine, required fields and wrong types are errors that name the field.

use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// The body of `POST /agents/{id}/agui`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunAgentInput {
    /// The conversation this run belongs to.
    pub thread_id: String,
    /// This run's id, chosen by the client.
    pub run_id: String,
    /// The whole history, re-sent on every run.
    pub messages: Vec<InputMessage>,
    /// Frontend tools: the ones the application runs.
    #[serde(default, deserialize_with = "null_as_default")]
    pub tools: Vec<InputTool>,
    /// Ambient information for this run, not part of the history.
    #[serde(default, deserialize_with = "null_as_default")]
    pub context: Vec<ContextItem>,
    /// Shared application state.
    #[serde(default)]
    pub state: Option<Value>,
    /// Opaque properties passed through by the client.
    #[serde(default)]
    pub forwarded_props: Option<Value>,
    /// The run this one was started from, if any.
    #[serde(default)]
    pub parent_run_id: Option<String>,
    /// `"1.0"` from 1.0 clients; decides whether 1.0-only shapes may be sent.
    #[serde(default)]
    pub protocol_version: Option<String>,
    /// Answers to the interrupts of the previous run.
    #[serde(default, deserialize_with = "null_as_default")]
    pub resume: Vec<ResumeEntry>,
    /// The messages exactly as sent, for the thread store (the standard message, whole).
    #[serde(skip)]
    pub raw_messages: Vec<Value>,
}

impl RunAgentInput {
    /// Whether the client speaks AG-UI 1.x and so accepts 1.0-only shapes.
    pub fn is_v1(&self) -> bool {
        self.protocol_version
            .as_deref()
            .is_some_and(|v| v == "1" || v.starts_with("1."))
    }
}

impl RunAgentInput {
    /// The first message part larger than `max` bytes, as its field path and size: a text, an
    /// inline media payload, a tool call's arguments, or a tool result. (The body limit bounds
    /// the request; this bounds what one part can make a provider request carry.)
    pub fn part_over(&self, max: usize) -> Option<(String, usize)> {
        for (i, m) in self.messages.iter().enumerate() {
            let (content, calls) = match m {
                InputMessage::Developer { content, .. }
                | InputMessage::System { content, .. }
                | InputMessage::User { content, .. }
                | InputMessage::Tool { content, .. }
                | InputMessage::Reasoning { content, .. } => (content, &[][..]),
                InputMessage::Assistant {
                    content,
                    tool_calls,
                    ..
                } => (content, &tool_calls[..]),
                InputMessage::Display => continue,
            };
            if let Some((path, n)) = content.part_over(max) {
                return Some((format!("messages[{i}].content{path}"), n));
            }
            for (j, c) in calls.iter().enumerate() {
                let n = c.function.arguments.len();
                if n > max {
                    return Some((
                        format!("messages[{i}].toolCalls[{j}].function.arguments"),
                        n,
                    ));
                }
            }
        }
        self.context.iter().enumerate().find_map(|(i, c)| {
            (c.value.len() > max).then(|| (format!("context[{i}].value"), c.value.len()))
        })
    }
}

fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// A frontend tool declared by the client.
#[derive(Debug, Clone, Deserialize)]
pub struct InputTool {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    #[serde(default, deserialize_with = "null_as_default")]
    pub description: String,
    /// JSON Schema of its arguments.
    #[serde(default)]
    pub parameters: Option<Value>,
}

/// One `context` entry.
#[derive(Debug, Clone, Deserialize)]
pub struct ContextItem {
    /// What the value is.
    #[serde(default, deserialize_with = "null_as_default")]
    pub description: String,
    /// The value; non-string JSON is kept as its JSON text.
    #[serde(deserialize_with = "string_or_json")]
    pub value: String,
}

fn string_or_json<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) => s,
        other => other.to_string(),
    })
}

/// An answer to one interrupt.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResumeEntry {
    /// The interrupt answered.
    pub interrupt_id: String,
    /// `resolved` or `cancelled`.
    pub status: ResumeStatus,
    /// What the user answered.
    #[serde(default)]
    pub payload: Option<Value>,
}

/// How an interrupt was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum ResumeStatus {
    Resolved,
    Cancelled,
}

/// One message of the history, tagged by `role`.
#[derive(Debug, Clone)]
#[allow(missing_docs)]
pub enum InputMessage {
    Developer {
        id: Option<String>,
        content: Content,
    },
    System {
        id: Option<String>,
        content: Content,
    },
    User {
        id: Option<String>,
        content: Content,
    },
    Assistant {
        id: Option<String>,
        content: Content,
        tool_calls: Vec<InputToolCall>,
    },
    Tool {
        id: Option<String>,
        content: Content,
        tool_call_id: String,
        error: Option<String>,
    },
    Reasoning {
        id: Option<String>,
        content: Content,
        encrypted_value: Option<String>,
    },
    /// Messages for display only, never sent to a model: activities (progress) and whatever a
    /// subagent produced (a message with a `subagentRunId` is the subagent's, not this
    /// conversation's).
    Display,
}

/// Marks the inner path inside a message error, so [`parse`] can name the exact field even
/// though a message is read in two steps (role first, then the role's fields).
const PATH_MARK: char = '\u{1f}';

#[derive(Deserialize)]
struct PlainFields {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    content: Content,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AssistantFields {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    content: Content,
    #[serde(default, deserialize_with = "null_as_default")]
    tool_calls: Vec<InputToolCall>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolFields {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    content: Content,
    tool_call_id: String,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReasoningFields {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    content: Content,
    #[serde(default)]
    encrypted_value: Option<String>,
}

fn fields<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, String> {
    serde_path_to_error::deserialize::<_, T>(v).map_err(|e| {
        let path = e.path().to_string();
        format!("{PATH_MARK}{path}{PATH_MARK}{}", e.inner())
    })
}

impl<'de> Deserialize<'de> for InputMessage {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut map = serde_json::Map::deserialize(d)?;
        let role = match map.remove("role") {
            Some(Value::String(r)) => r,
            Some(other) => {
                return Err(serde::de::Error::custom(format!(
                    "{PATH_MARK}role{PATH_MARK}must be a string, got {}",
                    json_kind(&other)
                )));
            }
            None => return Err(serde::de::Error::missing_field("role")),
        };
        if matches!(map.get("subagentRunId"), Some(Value::String(_))) {
            return Ok(InputMessage::Display);
        }
        let v = Value::Object(map);
        let msg = match role.as_str() {
            "developer" | "system" | "user" => {
                let f: PlainFields = fields(v).map_err(serde::de::Error::custom)?;
                match role.as_str() {
                    "developer" => InputMessage::Developer {
                        id: f.id,
                        content: f.content,
                    },
                    "system" => InputMessage::System {
                        id: f.id,
                        content: f.content,
                    },
                    _ => InputMessage::User {
                        id: f.id,
                        content: f.content,
                    },
                }
            }
            "assistant" => {
                let f: AssistantFields = fields(v).map_err(serde::de::Error::custom)?;
                InputMessage::Assistant {
                    id: f.id,
                    content: f.content,
                    tool_calls: f.tool_calls,
                }
            }
            "tool" => {
                let f: ToolFields = fields(v).map_err(serde::de::Error::custom)?;
                InputMessage::Tool {
                    id: f.id,
                    content: f.content,
                    tool_call_id: f.tool_call_id,
                    error: f.error,
                }
            }
            "reasoning" => {
                let f: ReasoningFields = fields(v).map_err(serde::de::Error::custom)?;
                InputMessage::Reasoning {
                    id: f.id,
                    content: f.content,
                    encrypted_value: f.encrypted_value,
                }
            }
            "activity" => InputMessage::Display,
            other => {
                return Err(serde::de::Error::custom(format!(
                    "{PATH_MARK}role{PATH_MARK}unknown role {other:?}; expected developer, system, user, assistant, tool, reasoning or activity"
                )));
            }
        };
        Ok(msg)
    }
}

/// A tool call recorded on an assistant message.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InputToolCall {
    /// The call's id.
    pub id: String,
    /// The function called.
    pub function: InputFunctionCall,
    /// Provider signature for the call, when one was sent.
    #[serde(default)]
    pub encrypted_value: Option<String>,
}

/// Name and JSON-string arguments of a call.
#[derive(Debug, Clone, Deserialize)]
pub struct InputFunctionCall {
    /// The tool's name.
    pub name: String,
    /// The arguments as a JSON string (an object is accepted too).
    #[serde(default, deserialize_with = "string_or_json")]
    pub arguments: String,
}

/// Message content: a plain string or a list of parts. Absent or `null` is empty.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Content {
    /// No content.
    #[default]
    Empty,
    /// A plain string.
    Text(String),
    /// Content parts.
    Parts(Vec<Part>),
}

impl Content {
    /// All text of the content joined, ignoring media.
    pub fn text(&self) -> String {
        match self {
            Content::Empty => String::new(),
            Content::Text(t) => t.clone(),
            Content::Parts(parts) => parts
                .iter()
                .filter_map(|p| match p {
                    Part::Text { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

impl Content {
    /// The first part larger than `max` bytes: its path under `content` and its size.
    fn part_over(&self, max: usize) -> Option<(String, usize)> {
        match self {
            Content::Empty => None,
            Content::Text(t) => (t.len() > max).then(|| (String::new(), t.len())),
            Content::Parts(parts) => parts.iter().enumerate().find_map(|(i, p)| {
                let (field, n) = match p {
                    Part::Text { text } => ("text", text.len()),
                    Part::Image { source }
                    | Part::Audio { source }
                    | Part::Video { source }
                    | Part::Document { source } => ("source.value", source.value().len()),
                    Part::Binary { data, url, .. } => match (data, url) {
                        (Some(d), _) => ("data", d.len()),
                        (None, Some(u)) => ("url", u.len()),
                        (None, None) => return None,
                    },
                    Part::Unknown => return None,
                };
                (n > max).then(|| (format!("[{i}].{field}"), n))
            }),
        }
    }
}

impl Part {
    /// Checks an inline media part as the agent API does: its bytes are base64 and its
    /// `mimeType` is a media type of the part's kind. A refusal names the field and the fault.
    fn check_media(&self) -> Result<(), (&'static str, String)> {
        const FIELD: &str = "source.mimeType";
        let (kind, source) = match self {
            Part::Image { source } => ("image", source),
            Part::Audio { source } => ("audio", source),
            Part::Video { source } => ("video", source),
            Part::Document { source } => ("", source),
            Part::Binary {
                mime_type, data, ..
            } => {
                if let Some(d) = data {
                    let Some(m) = mime_type else {
                        return Err(("mimeType", "required with inline data".into()));
                    };
                    check_base64(d).map_err(|e| ("data", e))?;
                    check_mime(m, "").map_err(|e| ("mimeType", e))?;
                } else if let Some(m) = mime_type {
                    check_mime(m, "").map_err(|e| ("mimeType", e))?;
                }
                return Ok(());
            }
            Part::Text { .. } | Part::Unknown => return Ok(()),
        };
        match source {
            Source::Data { value, mime_type } => {
                check_base64(value).map_err(|e| ("source.value", e))?;
                check_mime(mime_type, kind).map_err(|e| (FIELD, e))
            }
            Source::Url { mime_type, .. } | Source::File { mime_type, .. } => match mime_type {
                Some(m) => check_mime(m, kind).map_err(|e| (FIELD, e)),
                None => Ok(()),
            },
        }
    }
}

/// Standard base64 (padding optional, line breaks ignored), as browsers' `btoa` and most
/// encoders write it.
fn check_base64(data: &str) -> Result<(), String> {
    use base64::Engine;
    let compact: String = data.split_ascii_whitespace().collect();
    if compact.is_empty() {
        return Err("is empty".into());
    }
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    engine
        .decode(compact.as_bytes())
        .map(drop)
        .map_err(|e| format!("is not valid base64: {e}"))
}

/// A `type/subtype` media type (RFC 6838 names, parameters allowed), of the top-level type
/// `kind` when one is given.
fn check_mime(mime: &str, kind: &str) -> Result<(), String> {
    let essence = mime.split(';').next().unwrap_or("").trim();
    let name_ok = |s: &str| {
        !s.is_empty()
            && s.len() <= 127
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    match essence.split_once('/') {
        Some((top, sub)) if name_ok(top) && name_ok(sub) => {
            if !kind.is_empty() && !top.eq_ignore_ascii_case(kind) {
                return Err(format!("{mime:?} is not a {kind}/* media type"));
            }
            Ok(())
        }
        _ => Err(format!("{mime:?} is not a media type (type/subtype)")),
    }
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Option::<Value>::deserialize(d)?;
        let Some(raw) = raw else {
            return Ok(Content::Empty);
        };
        match raw {
            Value::String(s) => Ok(Content::Text(s)),
            Value::Array(items) => {
                let mut parts = Vec::with_capacity(items.len());
                for (i, item) in items.into_iter().enumerate() {
                    let part = serde_path_to_error::deserialize::<_, Part>(item).map_err(|e| {
                        serde::de::Error::custom(format!("part {i}: {}: {}", e.path(), e.inner()))
                    })?;
                    parts.push(part);
                }
                Ok(Content::Parts(parts))
            }
            other => Err(serde::de::Error::custom(format!(
                "content must be a string or an array of parts, got {}",
                json_kind(&other)
            ))),
        }
    }
}

/// The JSON type name of a value, for error messages.
pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// One content part.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum Part {
    Text {
        #[serde(default, deserialize_with = "null_as_default")]
        text: String,
    },
    Image {
        source: Source,
    },
    Audio {
        source: Source,
    },
    Video {
        source: Source,
    },
    Document {
        source: Source,
    },
    /// The pre-1.0 media part.
    #[serde(rename_all = "camelCase")]
    Binary {
        #[serde(default)]
        mime_type: Option<String>,
        #[serde(default)]
        data: Option<String>,
        #[serde(default)]
        url: Option<String>,
        #[serde(default)]
        id: Option<String>,
        #[serde(default)]
        filename: Option<String>,
    },
    /// A part type this gateway does not know; dropped with a warning.
    #[serde(other)]
    Unknown,
}

/// Where a media part's bytes are.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Source {
    /// Inline base64 bytes.
    #[serde(rename_all = "camelCase")]
    Data {
        /// Base64 text.
        value: String,
        /// The media type, e.g. `image/png`.
        mime_type: String,
    },
    /// Bytes behind a URL.
    #[serde(rename_all = "camelCase")]
    Url {
        /// The URL.
        value: String,
        /// The media type if known.
        #[serde(default)]
        mime_type: Option<String>,
    },
    /// A provider-issued file handle.
    #[serde(rename_all = "camelCase")]
    File {
        /// The handle.
        value: String,
        /// The provider that issued it.
        #[serde(default)]
        provider: Option<String>,
        /// The media type if known.
        #[serde(default)]
        mime_type: Option<String>,
    },
}

impl Source {
    /// The source's value: base64 bytes, a URL or a file handle.
    pub fn value(&self) -> &str {
        match self {
            Source::Data { value, .. } | Source::Url { value, .. } | Source::File { value, .. } => {
                value
            }
        }
    }
}

/// Why a request body was refused, naming the field at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    /// The path of the offending field (`messages[2].content`), or `""` for the whole body.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

/// Parses a request body, reporting the exact field that is missing or of the wrong type.
pub fn parse(body: &[u8]) -> Result<RunAgentInput, InputError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let input: RunAgentInput = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let mut field = if path == "." { String::new() } else { path };
        let mut message = if inner.is_syntax() || inner.is_eof() {
            format!("malformed JSON: {inner}")
        } else {
            strip_position(&inner.to_string())
        };
        if let Some(rest) = message.strip_prefix(PATH_MARK)
            && let Some((inner_path, msg)) = rest.split_once(PATH_MARK)
        {
            if inner_path != "." && !inner_path.is_empty() {
                field = format!("{field}.{inner_path}");
            }
            message = msg.to_string();
        }
        // serde reports a missing field at its parent's path; name the field itself.
        let field = match missing_field(&message) {
            Some(name) if field.is_empty() => name.to_string(),
            Some(name) => format!("{field}.{name}"),
            None => field,
        };
        InputError { field, message }
    })?;
    de.end().map_err(|e| InputError {
        field: String::new(),
        message: format!("malformed JSON: {e}"),
    })?;
    validate(&input)?;
    #[derive(Deserialize)]
    struct Raw {
        messages: Vec<Value>,
    }
    let mut input = input;
    // Cannot fail: the same bytes just parsed with a stricter shape.
    input.raw_messages = serde_json::from_slice::<Raw>(body)
        .map(|r| r.messages)
        .unwrap_or_default();
    Ok(input)
}

fn missing_field(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("missing field `")?;
    rest.split('`').next()
}

fn strip_position(msg: &str) -> String {
    match msg.find(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

fn validate(input: &RunAgentInput) -> Result<(), InputError> {
    let fail = |field: String, message: &str| {
        Err(InputError {
            field,
            message: message.to_string(),
        })
    };
    if input.thread_id.trim().is_empty() {
        return fail("threadId".into(), "must not be empty");
    }
    if input.run_id.trim().is_empty() {
        return fail("runId".into(), "must not be empty");
    }
    // Identifiers become keys in the store, where PostgreSQL refuses a NUL in text.
    let ids = [
        ("threadId".to_string(), Some(&input.thread_id)),
        ("runId".to_string(), Some(&input.run_id)),
        ("parentRunId".to_string(), input.parent_run_id.as_ref()),
    ];
    let message_ids = input.messages.iter().enumerate().flat_map(|(i, m)| {
        let (id, calls, call_id) = match m {
            InputMessage::Developer { id, .. }
            | InputMessage::System { id, .. }
            | InputMessage::User { id, .. }
            | InputMessage::Reasoning { id, .. } => (id, &[][..], None),
            InputMessage::Assistant { id, tool_calls, .. } => (id, &tool_calls[..], None),
            InputMessage::Tool {
                id, tool_call_id, ..
            } => (id, &[][..], Some(tool_call_id)),
            InputMessage::Display => (&None, &[][..], None),
        };
        std::iter::once((format!("messages[{i}].id"), id.as_ref()))
            .chain(call_id.map(|c| (format!("messages[{i}].toolCallId"), Some(c))))
            .chain(
                calls
                    .iter()
                    .enumerate()
                    .map(move |(j, c)| (format!("messages[{i}].toolCalls[{j}].id"), Some(&c.id))),
            )
    });
    for (field, id) in ids.into_iter().chain(message_ids) {
        if id.is_some_and(|id| id.contains('\0')) {
            return fail(field, "must not contain a NUL character");
        }
    }
    for (i, m) in input.messages.iter().enumerate() {
        if let InputMessage::User {
            content: Content::Parts(parts),
            ..
        }
        | InputMessage::Tool {
            content: Content::Parts(parts),
            ..
        } = m
        {
            for (j, part) in parts.iter().enumerate() {
                if let Err((field, message)) = part.check_media() {
                    return fail(format!("messages[{i}].content[{j}].{field}"), &message);
                }
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    for (i, tool) in input.tools.iter().enumerate() {
        if tool.name.trim().is_empty() {
            return fail(format!("tools[{i}].name"), "must not be empty");
        }
        if !seen.insert(tool.name.as_str()) {
            return fail(format!("tools[{i}].name"), "duplicate frontend tool name");
        }
        if let Some(p) = &tool.parameters
            && !p.is_object()
            && !p.is_null()
        {
            return fail(
                format!("tools[{i}].parameters"),
                "must be a JSON Schema object",
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
