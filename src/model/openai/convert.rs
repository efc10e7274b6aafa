//! Unified request -> OpenAI chat-completions request body.

use serde_json::{Map, Value, json};

use crate::conversation::{ContentBlock, Media, MediaKind, MediaSource, Role, ToolResultBlock};
use crate::model::media::MediaSupport;
use crate::model::{ModelError, ModelRequest};

/// Builds the JSON body of a streaming chat-completions request.
pub fn request_body(model: &str, req: &ModelRequest) -> Result<Value, ModelError> {
    let mut messages = Vec::new();
    let system = req
        .system
        .iter()
        .filter(|s| !s.is_empty())
        .cloned()
        .collect::<Vec<_>>();
    if !system.is_empty() {
        messages.push(json!({"role": "system", "content": system.join("\n\n")}));
    }
    for msg in &req.messages {
        match msg.role {
            Role::User => user_turn(&msg.content, &mut messages)?,
            Role::Assistant => messages.push(assistant_turn(&msg.content)),
        }
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), Value::Array(messages));
    body.insert("stream".into(), json!(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                let mut f = json!({
                    "name": t.name, "description": t.description, "parameters": t.input_schema});
                if let Some(strict) = t.strict {
                    f["strict"] = json!(strict);
                }
                json!({"type": "function", "function": f})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    let p = &req.params;
    if let Some(m) = p.max_tokens {
        body.insert("max_tokens".into(), json!(m));
    }
    if let Some(t) = p.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(t) = p.top_p {
        body.insert("top_p".into(), json!(t));
    }
    if !p.stop.is_empty() {
        body.insert("stop".into(), json!(p.stop));
    }
    if let Some(e) = &p.reasoning_effort {
        body.insert("reasoning_effort".into(), json!(e));
    }
    Ok(Value::Object(body))
}

fn user_turn(blocks: &[ContentBlock], out: &mut Vec<Value>) -> Result<(), ModelError> {
    // Tool results are separate `tool` messages and must come right after the assistant turn.
    let mut parts = Vec::new();
    let mut only_text = true;
    for b in blocks {
        match b {
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => {
                let mut text = ToolResultBlock::joined_text(content);
                if *is_error && !text.starts_with("Error") {
                    text = format!("Error: {text}");
                }
                if content
                    .iter()
                    .any(|c| matches!(c, ToolResultBlock::Media(_)))
                {
                    text.push_str("\n[the tool also returned media this model API cannot take in a tool result]");
                }
                out.push(json!({"role": "tool", "tool_call_id": tool_use_id, "content": text}));
            }
            ContentBlock::Text { text } => parts.push(json!({"type": "text", "text": text})),
            ContentBlock::Media(m) => {
                only_text = false;
                parts.push(media_part(m)?);
            }
            ContentBlock::ToolUse { .. }
            | ContentBlock::Reasoning { .. }
            | ContentBlock::RedactedReasoning { .. } => {}
        }
    }
    if parts.is_empty() {
        return Ok(());
    }
    let content = if only_text {
        Value::String(
            parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
        )
    } else {
        Value::Array(parts)
    };
    out.push(json!({"role": "user", "content": content}));
    Ok(())
}

fn assistant_turn(blocks: &[ContentBlock]) -> Value {
    let mut text = String::new();
    let mut calls = Vec::new();
    for b in blocks {
        match b {
            ContentBlock::Text { text: t } => text.push_str(t),
            ContentBlock::ToolUse {
                id, name, input, ..
            } => calls.push(json!({
                "id": id, "type": "function",
                "function": {"name": name, "arguments": input.to_string()}})),
            _ => {}
        }
    }
    let mut m = Map::new();
    m.insert("role".into(), json!("assistant"));
    m.insert(
        "content".into(),
        if text.is_empty() {
            Value::Null
        } else {
            json!(text)
        },
    );
    if !calls.is_empty() {
        m.insert("tool_calls".into(), Value::Array(calls));
    }
    Value::Object(m)
}

/// Which media the chat-completions API takes: images (data or URL), wav/mp3 audio and PDF
/// documents as bytes, provider file ids; no video.
pub fn media_support(m: &Media) -> MediaSupport {
    match (m.kind, &m.source) {
        (MediaKind::Video, _) => {
            MediaSupport::Unsupported("OpenAI-compatible chat APIs take no video".into())
        }
        (MediaKind::Image, _) | (_, MediaSource::File { .. }) => MediaSupport::Native,
        (MediaKind::Audio, MediaSource::Base64 { .. }) => match m.mime_type.as_deref() {
            Some("audio/mpeg" | "audio/mp3" | "audio/wav" | "audio/x-wav" | "audio/wave") => {
                MediaSupport::Native
            }
            other => MediaSupport::Unsupported(format!(
                "audio of type {:?}: OpenAI-compatible APIs take wav or mp3",
                other.unwrap_or("unknown")
            )),
        },
        (MediaKind::Document, MediaSource::Base64 { .. }) => MediaSupport::Native,
        (MediaKind::Audio | MediaKind::Document, MediaSource::Url { .. }) => {
            MediaSupport::NeedsBytes
        }
    }
}

fn data_url(mime: Option<&str>, data: &str, fallback: &str) -> String {
    format!("data:{};base64,{data}", mime.unwrap_or(fallback))
}

fn media_part(m: &Media) -> Result<Value, ModelError> {
    let mime = m.mime_type.as_deref();
    match (m.kind, &m.source) {
        (MediaKind::Image, MediaSource::Base64 { data }) => Ok(
            json!({"type": "image_url", "image_url": {"url": data_url(mime, data, "image/png")}}),
        ),
        (MediaKind::Image, MediaSource::Url { url }) => {
            Ok(json!({"type": "image_url", "image_url": {"url": url}}))
        }
        (MediaKind::Audio, MediaSource::Base64 { data }) => {
            let format = match mime.unwrap_or("") {
                "audio/mpeg" | "audio/mp3" => "mp3",
                "audio/wav" | "audio/x-wav" | "audio/wave" => "wav",
                other => {
                    return Err(ModelError::Unsupported(format!(
                        "audio of type {other:?}: OpenAI-compatible APIs take wav or mp3"
                    )));
                }
            };
            Ok(json!({"type": "input_audio", "input_audio": {"data": data, "format": format}}))
        }
        (MediaKind::Document, MediaSource::Base64 { data }) => {
            let mut file = Map::new();
            file.insert(
                "file_data".into(),
                json!(data_url(mime, data, "application/pdf")),
            );
            file.insert(
                "filename".into(),
                json!(m.filename.clone().unwrap_or_else(|| "document.pdf".into())),
            );
            Ok(json!({"type": "file", "file": Value::Object(file)}))
        }
        (
            MediaKind::Document | MediaKind::Audio | MediaKind::Image,
            MediaSource::File { id, .. },
        ) => Ok(json!({"type": "file", "file": {"file_id": id}})),
        (kind, source) => Err(ModelError::Unsupported(format!(
            "{} from a {} source is not accepted by the OpenAI-compatible chat API",
            kind.as_str(),
            source.kind_name()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::{Message, ToolSpec};

    #[test]
    fn tool_turns_images_and_tools_are_mapped() {
        let req = ModelRequest {
            system: vec!["sys".into(), "ctx".into()],
            messages: vec![
                Message {
                    role: Role::User,
                    content: vec![
                        ContentBlock::Text { text: "see".into() },
                        ContentBlock::Media(Media {
                            kind: MediaKind::Image,
                            mime_type: Some("image/jpeg".into()),
                            source: MediaSource::Base64 {
                                data: "QUJD".into(),
                            },
                            filename: None,
                        }),
                    ],
                },
                Message {
                    role: Role::Assistant,
                    content: vec![ContentBlock::ToolUse {
                        id: "c1".into(),
                        name: "f".into(),
                        input: json!({"a": 1}),
                        signature: None,
                    }],
                },
                Message {
                    role: Role::User,
                    content: vec![
                        ContentBlock::ToolResult {
                            tool_use_id: "c1".into(),
                            content: vec![ToolResultBlock::Text {
                                text: "boom".into(),
                            }],
                            is_error: true,
                        },
                        ContentBlock::Text {
                            text: "and?".into(),
                        },
                    ],
                },
            ],
            tools: vec![ToolSpec {
                name: "f".into(),
                description: "d".into(),
                input_schema: json!({"type": "object"}),
                strict: None,
            }],
            params: crate::model::InferenceParams {
                max_tokens: Some(300),
                temperature: Some(0.5),
                top_p: None,
                stop: vec!["END".into()],
                reasoning_effort: Some("low".into()),
            },
        };
        let body = request_body("m", &req).unwrap();
        let msgs = body["messages"].as_array().unwrap();
        assert_eq!(msgs[0], json!({"role": "system", "content": "sys\n\nctx"}));
        assert_eq!(
            msgs[1]["content"][1]["image_url"]["url"],
            "data:image/jpeg;base64,QUJD"
        );
        assert_eq!(
            msgs[2]["tool_calls"][0]["function"]["arguments"],
            "{\"a\":1}"
        );
        assert_eq!(msgs[2]["content"], Value::Null);
        assert_eq!(
            msgs[3],
            json!({"role": "tool", "tool_call_id": "c1", "content": "Error: boom"})
        );
        assert_eq!(msgs[4], json!({"role": "user", "content": "and?"}));
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert_eq!(body["tools"][0]["function"]["name"], "f");
        assert_eq!(body["max_tokens"], 300);
        assert_eq!(body["stop"], json!(["END"]));
        assert_eq!(body["reasoning_effort"], "low");
    }

    #[test]
    fn video_is_refused_clearly() {
        let req = ModelRequest {
            messages: vec![Message {
                role: Role::User,
                content: vec![ContentBlock::Media(Media {
                    kind: MediaKind::Video,
                    mime_type: Some("video/mp4".into()),
                    source: MediaSource::Url {
                        url: "https://x/v.mp4".into(),
                    },
                    filename: None,
                })],
            }],
            ..Default::default()
        };
        let err = request_body("m", &req).unwrap_err();
        assert_eq!(err.code(), "UNSUPPORTED_CONTENT");
    }
}
