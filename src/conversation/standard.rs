//! The execute API's standard `input`: plain text, content blocks, or messages (the unified
//! agent interface). Validation names the exact field and what was expected; valid input becomes
//! AG-UI messages, so every agent type runs it through the same loop and memory.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

/// A malformed `input`, naming the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct InputError {
    /// The field path, e.g. `input[1].source.format`.
    pub field: String,
    /// What is wrong.
    pub reason: String,
    /// Extra facts for the client (expected shapes, what was received).
    pub details: Value,
}

fn err(field: impl Into<String>, reason: impl Into<String>, details: Value) -> InputError {
    InputError {
        field: field.into(),
        reason: reason.into(),
        details,
    }
}

/// Which of the three shapes the input had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputType {
    /// A string.
    Text,
    /// Content blocks (one user turn).
    ContentBlocks,
    /// Role-based messages.
    Messages,
}

/// Valid standard input, as AG-UI messages (fresh ids).
#[derive(Debug, Clone)]
pub struct StandardInput {
    /// Its shape.
    pub kind: InputType,
    /// The messages, in order.
    pub messages: Vec<Value>,
    /// The text of the last user turn (the legacy `question`).
    pub question: String,
}

const IMAGE: &[&str] = &["jpeg", "jpg", "png", "gif", "webp"];
const VIDEO: &[&str] = &[
    "mp4", "mov", "avi", "mkv", "webm", "flv", "mpeg", "mpg", "wmv", "3gp",
];
const DOCUMENT: &[&str] = &[
    "pdf", "csv", "doc", "docx", "xls", "xlsx", "html", "txt", "md",
];
const BLOCK_TYPES: &[&str] = &["text", "image", "video", "document"];

fn kind_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn mime(kind: &str, format: &str) -> String {
    match (kind, format) {
        ("image", "jpg") => "image/jpeg".into(),
        ("video", "mov") => "video/quicktime".into(),
        ("video", "mkv") => "video/x-matroska".into(),
        ("video", "avi") => "video/x-msvideo".into(),
        ("document", "pdf") => "application/pdf".into(),
        ("document", "txt") => "text/plain".into(),
        ("document", "md") => "text/markdown".into(),
        ("document", "html") => "text/html".into(),
        ("document", "csv") => "text/csv".into(),
        ("document", "doc") => "application/msword".into(),
        ("document", "docx") => {
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document".into()
        }
        ("document", "xls") => "application/vnd.ms-excel".into(),
        ("document", "xlsx") => {
            "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet".into()
        }
        (k, f) => format!("{k}/{f}"),
    }
}

/// Checks one content block and gives its AG-UI part.
fn block(v: &Value, at: &str) -> Result<Value, InputError> {
    let Some(o) = v.as_object() else {
        return Err(err(
            at,
            "a content block must be an object",
            json!({"received": kind_name(v)}),
        ));
    };
    let ty = match o.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(other) => {
            return Err(err(
                format!("{at}.type"),
                "must be a string",
                json!({"received": kind_name(other)}),
            ));
        }
        None => {
            return Err(err(
                format!("{at}.type"),
                "content block must have a type",
                json!({"expected": BLOCK_TYPES}),
            ));
        }
    };
    let formats = match ty {
        "text" => {
            return match o.get("text") {
                Some(Value::String(t)) => Ok(json!({"type": "text", "text": t})),
                _ => Err(err(
                    format!("{at}.text"),
                    "a text block must have a text string",
                    json!({}),
                )),
            };
        }
        "image" => IMAGE,
        "video" => VIDEO,
        "document" => DOCUMENT,
        other => {
            return Err(err(
                format!("{at}.type"),
                format!("unsupported content block type {other:?}"),
                json!({"expected": BLOCK_TYPES}),
            ));
        }
    };
    // The API reference nests the source under `source`; the design document under the
    // block's type (`image: {...}`). Both are read.
    let (key, src) = match (o.get("source"), o.get(ty)) {
        (Some(s), _) => ("source", s),
        (None, Some(s)) => (ty, s),
        (None, None) => {
            return Err(err(
                format!("{at}.source"),
                format!("an {ty} block must have a source {{type, format, data}}"),
                json!({}),
            ));
        }
    };
    let sf = |k: &str| format!("{at}.{key}.{k}");
    let Some(src) = src.as_object() else {
        return Err(err(
            format!("{at}.{key}"),
            "must be an object {type, format, data}",
            json!({}),
        ));
    };
    let source_type = src.get("type").and_then(Value::as_str).unwrap_or("");
    if !matches!(source_type, "base64" | "url") {
        return Err(err(
            sf("type"),
            "must be \"base64\" or \"url\"",
            json!({"expected": ["base64", "url"]}),
        ));
    }
    let format = match src.get("format").and_then(Value::as_str) {
        Some(f) if formats.contains(&f.to_ascii_lowercase().as_str()) => f.to_ascii_lowercase(),
        Some(f) => {
            return Err(err(
                sf("format"),
                format!("unsupported {ty} format {f:?}"),
                json!({"expected": formats}),
            ));
        }
        None => return Err(err(sf("format"), "required", json!({"expected": formats}))),
    };
    let Some(data) = src
        .get("data")
        .and_then(Value::as_str)
        .filter(|d| !d.is_empty())
    else {
        return Err(err(sf("data"), "required, a non-empty string", json!({})));
    };
    let source = if source_type == "base64" {
        if STANDARD.decode(data.trim()).is_err() {
            return Err(err(sf("data"), "is not valid base64", json!({})));
        }
        json!({"type": "data", "value": data.trim(), "mimeType": mime(ty, &format)})
    } else {
        match url::Url::parse(data) {
            Ok(u) if matches!(u.scheme(), "http" | "https") => {}
            _ => {
                return Err(err(
                    sf("data"),
                    "must be an http(s) URL for source type url",
                    json!({}),
                ));
            }
        }
        json!({"type": "url", "value": data, "mimeType": mime(ty, &format)})
    };
    Ok(json!({"type": ty, "source": source}))
}

fn text_of_parts(parts: &[Value]) -> String {
    parts
        .iter()
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join(" ")
}

fn user_message(parts: Vec<Value>) -> Value {
    let id = crate::protocol::new_id("msg");
    // One text part stays a plain string: every client and model reads that.
    match parts.as_slice() {
        [p] if p["type"] == "text" => json!({"id": id, "role": "user", "content": p["text"]}),
        _ => json!({"id": id, "role": "user", "content": parts}),
    }
}

/// Validates `input` and converts it.
pub fn parse(input: &Value) -> Result<StandardInput, InputError> {
    let expected = "a string, an array of content blocks, or an array of messages";
    match input {
        Value::String(s) if s.trim().is_empty() => Err(err(
            "input",
            "must not be empty",
            json!({"expected": expected}),
        )),
        Value::String(s) => Ok(StandardInput {
            kind: InputType::Text,
            messages: vec![user_message(vec![json!({"type": "text", "text": s})])],
            question: s.clone(),
        }),
        Value::Array(items) if items.is_empty() => Err(err(
            "input",
            "must not be an empty array",
            json!({"expected": expected}),
        )),
        Value::Array(items) => {
            let is_message = items[0].get("role").is_some();
            if !is_message && items[0].get("type").is_none() {
                return Err(err(
                    "input[0]",
                    "is neither a content block (with type) nor a message (with role)",
                    json!({"expected": expected}),
                ));
            }
            if !is_message {
                let parts = items
                    .iter()
                    .enumerate()
                    .map(|(i, b)| block(b, &format!("input[{i}]")))
                    .collect::<Result<Vec<_>, _>>()?;
                let question = text_of_parts(&parts);
                return Ok(StandardInput {
                    kind: InputType::ContentBlocks,
                    messages: vec![user_message(parts)],
                    question,
                });
            }
            let mut messages = Vec::new();
            let mut question = String::new();
            for (i, m) in items.iter().enumerate() {
                let at = format!("input[{i}]");
                let Some(o) = m.as_object() else {
                    return Err(err(
                        at,
                        "a message must be an object",
                        json!({"received": kind_name(m)}),
                    ));
                };
                let role = match o.get("role").and_then(Value::as_str) {
                    Some(r @ ("user" | "assistant")) => r,
                    Some(r) => {
                        return Err(err(
                            format!("{at}.role"),
                            format!("unsupported role {r:?}"),
                            json!({"expected": ["user", "assistant"]}),
                        ));
                    }
                    None => {
                        return Err(err(
                            format!("{at}.role"),
                            "message must have role and content",
                            json!({"expected": ["user", "assistant"]}),
                        ));
                    }
                };
                let content = match o.get("content") {
                    Some(Value::Array(c)) if !c.is_empty() => c,
                    Some(Value::Array(_)) => {
                        return Err(err(format!("{at}.content"), "must not be empty", json!({})));
                    }
                    Some(other) => {
                        return Err(err(
                            format!("{at}.content"),
                            "must be an array of content blocks",
                            json!({"received": kind_name(other)}),
                        ));
                    }
                    None => {
                        return Err(err(
                            format!("{at}.content"),
                            "message must have role and content",
                            json!({}),
                        ));
                    }
                };
                let parts = content
                    .iter()
                    .enumerate()
                    .map(|(j, b)| block(b, &format!("{at}.content[{j}]")))
                    .collect::<Result<Vec<_>, _>>()?;
                if role == "user" {
                    question = text_of_parts(&parts);
                    messages.push(user_message(parts));
                } else {
                    if parts.iter().any(|p| p["type"] != "text") {
                        return Err(err(
                            format!("{at}.content"),
                            "assistant messages can only hold text blocks",
                            json!({}),
                        ));
                    }
                    messages.push(json!({
                        "id": crate::protocol::new_id("msg"),
                        "role": "assistant",
                        "content": text_of_parts(&parts),
                    }));
                }
            }
            if messages
                .last()
                .and_then(|m| m.get("role"))
                .and_then(Value::as_str)
                != Some("user")
            {
                return Err(err(
                    format!("input[{}].role", items.len() - 1),
                    "the last message must be the user's",
                    json!({"expected": "user"}),
                ));
            }
            Ok(StandardInput {
                kind: InputType::Messages,
                messages,
                question,
            })
        }
        other => Err(err(
            "input",
            "Invalid input format",
            json!({"field": "input", "expected": expected, "received": kind_name(other)}),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

    #[test]
    fn the_three_shapes_become_agui_messages() {
        let t = parse(&json!("hi")).unwrap();
        assert_eq!(
            (t.kind, t.messages[0]["content"].clone()),
            (InputType::Text, json!("hi"))
        );
        let b = parse(&json!([
            {"type": "text", "text": "what is this?"},
            {"type": "image", "source": {"type": "base64", "format": "png", "data": PNG}},
            {"type": "document", "document": {"type": "url", "format": "pdf", "data": "https://x/a.pdf"}}
        ]))
        .unwrap();
        assert_eq!(b.kind, InputType::ContentBlocks);
        assert_eq!(
            b.messages[0]["content"][1]["source"]["mimeType"],
            "image/png"
        );
        assert_eq!(b.messages[0]["content"][2]["source"]["type"], "url");
        assert_eq!(b.question, "what is this?");
        let m = parse(&json!([
            {"role": "user", "content": [{"type": "text", "text": "I like red"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Noted."}]},
            {"role": "user", "content": [{"type": "text", "text": "What colour?"}]}
        ]))
        .unwrap();
        assert_eq!(m.messages.len(), 3);
        assert_eq!(m.messages[1]["content"], "Noted.");
        assert_eq!(m.question, "What colour?");
    }

    #[test]
    fn each_malformed_case_names_its_field() {
        let field = |v: Value| parse(&v).unwrap_err().field;
        assert_eq!(field(json!({"a": 1})), "input");
        assert_eq!(field(json!(42)), "input");
        assert_eq!(field(json!("")), "input");
        assert_eq!(field(json!([])), "input");
        assert_eq!(field(json!([{"foo": 1}])), "input[0]");
        assert_eq!(field(json!([{"type": "audio"}])), "input[0].type");
        assert_eq!(field(json!([{"type": "text"}])), "input[0].text");
        assert_eq!(field(json!([{"type": "image"}])), "input[0].source");
        assert_eq!(
            field(
                json!([{"type": "image", "source": {"type": "base64", "format": "bmp", "data": PNG}}])
            ),
            "input[0].source.format"
        );
        assert_eq!(
            field(
                json!([{"type": "image", "source": {"type": "base64", "format": "png", "data": "%%%"}}])
            ),
            "input[0].source.data"
        );
        assert_eq!(
            field(
                json!([{"type": "image", "source": {"type": "file", "format": "png", "data": "x"}}])
            ),
            "input[0].source.type"
        );
        assert_eq!(field(json!([{"role": "user"}])), "input[0].content");
        assert_eq!(
            field(json!([{"role": "system", "content": [{"type": "text", "text": "x"}]}])),
            "input[0].role"
        );
        assert_eq!(
            field(
                json!([{"role": "user", "content": [{"type": "text", "text": "x"}]},
                         {"role": "assistant", "content": [{"type": "text", "text": "y"}]}])
            ),
            "input[1].role"
        );
        assert_eq!(
            field(
                json!([{"role": "user", "content": [{"type": "text", "text": "x"}, {"type": "video"}]}])
            ),
            "input[0].content[1].source"
        );
    }
}
