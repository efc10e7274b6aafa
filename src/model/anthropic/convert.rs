//! Unified request -> Anthropic Messages request body.

use base64::Engine;
use serde_json::{Map, Value, json};

use crate::conversation::{
    ContentBlock, Media, MediaKind, MediaSource, Role, ToolResultBlock, user_first,
};
use crate::model::media::MediaSupport;
use crate::model::{ModelError, ModelRequest};

/// Anthropic requires `max_tokens`; this is used when the agent sets none.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// Builds the JSON body of a streaming Messages request. `extra` (the agent's
/// `additional_model_request_fields`, e.g. `thinking`) is merged in last.
pub fn request_body(
    model: &str,
    req: &ModelRequest,
    extra: &Map<String, Value>,
) -> Result<Value, ModelError> {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert(
        "max_tokens".into(),
        json!(req.params.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
    );
    let system: Vec<Value> = req
        .system
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| json!({"type": "text", "text": s}))
        .collect();
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }
    let mut messages = Vec::new();
    for m in user_first(&req.messages).iter() {
        let content = m.content.iter().map(block).collect::<Result<Vec<_>, _>>()?;
        let content: Vec<Value> = content.into_iter().flatten().collect();
        if content.is_empty() {
            continue;
        }
        let role = match m.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        messages.push(json!({"role": role, "content": content}));
    }
    body.insert("messages".into(), Value::Array(messages));
    if !req.tools.is_empty() {
        let tools = req
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    let p = &req.params;
    // Claude rejects temperature and top_p together; temperature wins.
    if let Some(t) = p.temperature {
        body.insert("temperature".into(), json!(t));
    } else if let Some(t) = p.top_p {
        body.insert("top_p".into(), json!(t));
    }
    if !p.stop.is_empty() {
        body.insert("stop_sequences".into(), json!(p.stop));
    }
    body.insert("stream".into(), json!(true));
    for (k, v) in extra {
        body.insert(k.clone(), v.clone());
    }
    Ok(Value::Object(body))
}

fn block(b: &ContentBlock) -> Result<Option<Value>, ModelError> {
    Ok(Some(match b {
        ContentBlock::Text { text } if text.is_empty() => return Ok(None),
        ContentBlock::Text { text } => json!({"type": "text", "text": text}),
        ContentBlock::Media(m) => media(m)?,
        ContentBlock::ToolUse {
            id, name, input, ..
        } => {
            let input = if input.is_object() {
                input.clone()
            } else {
                json!({})
            };
            json!({"type": "tool_use", "id": id, "name": name, "input": input})
        }
        ContentBlock::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => {
            let mut parts = Vec::new();
            for c in content {
                match c {
                    ToolResultBlock::Text { text } if !text.is_empty() => {
                        parts.push(json!({"type": "text", "text": text}))
                    }
                    ToolResultBlock::Text { .. } => {}
                    ToolResultBlock::Media(m) => parts.push(media(m)?),
                }
            }
            if parts.is_empty() {
                parts.push(json!({"type": "text", "text": "(no output)"}));
            }
            json!({"type": "tool_result", "tool_use_id": tool_use_id, "content": parts, "is_error": is_error})
        }
        // A thinking block without its signature is rejected by the API; it is dropped.
        ContentBlock::Reasoning {
            signature: None, ..
        } => return Ok(None),
        ContentBlock::Reasoning {
            text,
            signature: Some(sig),
        } => {
            json!({"type": "thinking", "thinking": text, "signature": sig})
        }
        ContentBlock::RedactedReasoning { data } => {
            json!({"type": "redacted_thinking", "data": data})
        }
    }))
}

/// Media types Anthropic accepts as images.
pub const IMAGE_TYPES: &[&str] = &["image/jpeg", "image/png", "image/gif", "image/webp"];

/// Which media the Messages API takes: images (jpeg, png, gif, webp) and PDF or text documents,
/// as bytes, URLs or Anthropic file ids; no audio or video.
pub fn media_support(m: &Media) -> MediaSupport {
    match (m.kind, &m.source) {
        (MediaKind::Audio | MediaKind::Video, _) => MediaSupport::Unsupported(format!(
            "Anthropic models take no {} input",
            m.kind.as_str()
        )),
        (
            _,
            MediaSource::File {
                provider: Some(p), ..
            },
        ) if p != "anthropic" => {
            MediaSupport::Unsupported(format!("a file handle issued by {p:?}, not by Anthropic"))
        }
        (_, MediaSource::Base64 { .. }) => match media(m) {
            Ok(_) => MediaSupport::Native,
            Err(e) => MediaSupport::Unsupported(e.to_string()),
        },
        _ => MediaSupport::Native,
    }
}

fn media(m: &Media) -> Result<Value, ModelError> {
    let mime = m.mime_type.as_deref();
    let unsupported = |why: String| Err(ModelError::Unsupported(why));
    match (m.kind, &m.source) {
        (MediaKind::Image, MediaSource::Base64 { data }) => {
            let mt = mime.unwrap_or("image/png");
            if !IMAGE_TYPES.contains(&mt) {
                return unsupported(format!(
                    "image type {mt} (Anthropic takes jpeg, png, gif, webp)"
                ));
            }
            Ok(
                json!({"type": "image", "source": {"type": "base64", "media_type": mt, "data": data}}),
            )
        }
        (MediaKind::Image, MediaSource::Url { url }) => {
            Ok(json!({"type": "image", "source": {"type": "url", "url": url}}))
        }
        (MediaKind::Document, MediaSource::Base64 { data }) => {
            match mime.unwrap_or("application/pdf") {
                "application/pdf" => Ok(json!({"type": "document",
                "source": {"type": "base64", "media_type": "application/pdf", "data": data}})),
                t if t.starts_with("text/") => {
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(data)
                        .map_err(|_| {
                            ModelError::Unsupported(
                                "a text document whose data is not valid base64".into(),
                            )
                        })?;
                    Ok(json!({"type": "document",
                    "source": {"type": "text", "media_type": "text/plain", "data": String::from_utf8_lossy(&bytes)}}))
                }
                other => unsupported(format!(
                    "document type {other} (Anthropic takes PDF and plain text)"
                )),
            }
        }
        (MediaKind::Document, MediaSource::Url { url }) => {
            Ok(json!({"type": "document", "source": {"type": "url", "url": url}}))
        }
        (MediaKind::Image | MediaKind::Document, MediaSource::File { id, .. }) => {
            Ok(json!({"type": m.kind.as_str(), "source": {"type": "file", "file_id": id}}))
        }
        (kind, _) => unsupported(format!(
            "{} input (Anthropic takes images and documents)",
            kind.as_str()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::{Message, ToolSpec};
    use crate::model::InferenceParams;

    #[test]
    fn thinking_tool_turns_and_media_map_to_messages_blocks() {
        let req = ModelRequest {
            system: vec!["sys".into()],
            messages: vec![
                Message {
                    role: Role::User,
                    content: vec![
                        ContentBlock::Text { text: "see".into() },
                        ContentBlock::Media(Media {
                            kind: MediaKind::Document,
                            mime_type: Some("application/pdf".into()),
                            source: MediaSource::Base64 {
                                data: "JVBERi0=".into(),
                            },
                            filename: Some("a.pdf".into()),
                        }),
                    ],
                },
                Message {
                    role: Role::Assistant,
                    content: vec![
                        ContentBlock::Reasoning {
                            text: "hmm".into(),
                            signature: Some("sig".into()),
                        },
                        ContentBlock::RedactedReasoning { data: "xyz".into() },
                        ContentBlock::Reasoning {
                            text: "unsigned".into(),
                            signature: None,
                        },
                        ContentBlock::ToolUse {
                            id: "t1".into(),
                            name: "f".into(),
                            input: json!({"a": 1}),
                            signature: None,
                        },
                    ],
                },
                Message {
                    role: Role::User,
                    content: vec![ContentBlock::ToolResult {
                        tool_use_id: "t1".into(),
                        content: vec![ToolResultBlock::Text { text: "ok".into() }],
                        is_error: false,
                    }],
                },
            ],
            tools: vec![ToolSpec {
                name: "f".into(),
                description: "d".into(),
                input_schema: json!({"type": "object"}),
                strict: None,
            }],
            params: InferenceParams {
                temperature: Some(0.5),
                top_p: Some(0.9),
                ..Default::default()
            },
        };
        let mut extra = Map::new();
        extra.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": 1024}),
        );
        let body = request_body("claude", &req, &extra).unwrap();
        assert_eq!(body["max_tokens"], 4096);
        assert_eq!(body["system"][0]["text"], "sys");
        assert_eq!(
            body["messages"][0]["content"][1]["source"]["media_type"],
            "application/pdf"
        );
        let a = &body["messages"][1]["content"];
        assert_eq!(
            a[0],
            json!({"type": "thinking", "thinking": "hmm", "signature": "sig"})
        );
        assert_eq!(a[1], json!({"type": "redacted_thinking", "data": "xyz"}));
        assert_eq!(a[2]["type"], "tool_use");
        assert_eq!(body["messages"][2]["content"][0]["tool_use_id"], "t1");
        assert_eq!(body["temperature"], 0.5);
        assert!(body.get("top_p").is_none(), "never both");
        assert_eq!(body["thinking"]["budget_tokens"], 1024);
        assert_eq!(body["tools"][0]["input_schema"]["type"], "object");
    }

    #[test]
    fn a_history_opening_with_the_assistant_gets_a_user_turn_first() {
        let req = ModelRequest {
            messages: vec![
                Message {
                    role: Role::Assistant,
                    content: vec![ContentBlock::Text {
                        text: "Hi, how can I help?".into(),
                    }],
                },
                Message::user_text("hello"),
            ],
            ..Default::default()
        };
        let body = request_body("claude", &req, &Map::new()).unwrap();
        assert_eq!(body["messages"][0]["role"], "user");
        assert_eq!(body["messages"][1]["role"], "assistant");
        assert_eq!(body["messages"][2]["content"][0]["text"], "hello");
    }

    #[test]
    fn audio_is_refused() {
        let m = Media {
            kind: MediaKind::Audio,
            mime_type: Some("audio/wav".into()),
            source: MediaSource::Base64 {
                data: "AA==".into(),
            },
            filename: None,
        };
        assert_eq!(media(&m).unwrap_err().code(), "UNSUPPORTED_CONTENT");
    }
}
