//! Unified request -> Bedrock `ConverseStream` input, as SDK types.

use std::collections::HashMap;

use aws_sdk_bedrockruntime::primitives::Blob;
use aws_sdk_bedrockruntime::types::{
    AudioBlock, AudioFormat, AudioSource, ContentBlock as BContent, ConversationRole,
    DocumentBlock, DocumentFormat, DocumentSource, ImageBlock, ImageFormat, ImageSource,
    InferenceConfiguration, Message as BMessage, ReasoningContentBlock, ReasoningTextBlock,
    S3Location, SystemContentBlock, Tool, ToolConfiguration, ToolInputSchema,
    ToolResultBlock as BToolResult, ToolResultContentBlock, ToolResultStatus, ToolSpecification,
    ToolUseBlock, VideoBlock, VideoFormat, VideoSource,
};
use aws_smithy_types::{Document, Number};
use base64::Engine;
use serde_json::Value;

use crate::conversation::{
    ContentBlock, Media, MediaKind, MediaSource, Role, ToolResultBlock, user_first,
};
use crate::model::media::MediaSupport;
use crate::model::{ModelError, ModelRequest};

/// Everything a `ConverseStream` call carries besides the model id.
#[derive(Debug, Default)]
pub struct ConverseInput {
    /// System blocks.
    pub system: Vec<SystemContentBlock>,
    /// The turns.
    pub messages: Vec<BMessage>,
    /// Tools, if any.
    pub tool_config: Option<ToolConfiguration>,
    /// Sampling settings.
    pub inference: Option<InferenceConfiguration>,
}

fn built<T>(r: Result<T, aws_smithy_types::error::operation::BuildError>) -> Result<T, ModelError> {
    r.map_err(|e| ModelError::Unsupported(format!("cannot build the Bedrock request: {e}")))
}

/// JSON -> Smithy document.
pub fn to_document(v: &Value) -> Document {
    match v {
        Value::Null => Document::Null,
        Value::Bool(b) => Document::Bool(*b),
        Value::Number(n) => Document::Number(if let Some(u) = n.as_u64() {
            Number::PosInt(u)
        } else if let Some(i) = n.as_i64() {
            Number::NegInt(i)
        } else {
            Number::Float(n.as_f64().unwrap_or(0.0))
        }),
        Value::String(s) => Document::String(s.clone()),
        Value::Array(a) => Document::Array(a.iter().map(to_document).collect()),
        Value::Object(o) => Document::Object(
            o.iter()
                .map(|(k, v)| (k.clone(), to_document(v)))
                .collect::<HashMap<_, _>>(),
        ),
    }
}

/// Builds the converse input.
pub fn converse_input(req: &ModelRequest) -> Result<ConverseInput, ModelError> {
    let system = req
        .system
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| SystemContentBlock::Text(s.clone()))
        .collect();
    let mut messages = Vec::new();
    for m in user_first(&req.messages).iter() {
        let mut content = Vec::new();
        for b in &m.content {
            if let Some(c) = block(b)? {
                content.push(c);
            }
        }
        if content.is_empty() {
            continue;
        }
        let role = match m.role {
            Role::User => ConversationRole::User,
            Role::Assistant => ConversationRole::Assistant,
        };
        messages.push(built(
            BMessage::builder()
                .role(role)
                .set_content(Some(content))
                .build(),
        )?);
    }
    let tool_config = if req.tools.is_empty() {
        None
    } else {
        let mut tools = Vec::new();
        for t in &req.tools {
            let spec = ToolSpecification::builder()
                .name(&t.name)
                .description(if t.description.is_empty() {
                    t.name.clone()
                } else {
                    t.description.clone()
                })
                .input_schema(ToolInputSchema::Json(to_document(&t.input_schema)))
                .build();
            tools.push(Tool::ToolSpec(built(spec)?));
        }
        Some(built(
            ToolConfiguration::builder().set_tools(Some(tools)).build(),
        )?)
    };
    let p = &req.params;
    let inference = if p.max_tokens.is_some()
        || p.temperature.is_some()
        || p.top_p.is_some()
        || !p.stop.is_empty()
    {
        let mut b = InferenceConfiguration::builder();
        if let Some(m) = p.max_tokens {
            b = b.max_tokens(m.min(i32::MAX as u32) as i32);
        }
        // Bedrock Claude rejects temperature and top_p together; temperature wins.
        if let Some(t) = p.temperature {
            b = b.temperature(t);
        } else if let Some(t) = p.top_p {
            b = b.top_p(t);
        }
        if !p.stop.is_empty() {
            b = b.set_stop_sequences(Some(p.stop.clone()));
        }
        Some(b.build())
    } else {
        None
    };
    Ok(ConverseInput {
        system,
        messages,
        tool_config,
        inference,
    })
}

fn block(b: &ContentBlock) -> Result<Option<BContent>, ModelError> {
    Ok(Some(match b {
        ContentBlock::Text { text } if text.is_empty() => return Ok(None),
        ContentBlock::Text { text } => BContent::Text(text.clone()),
        ContentBlock::Media(m) => media(m)?,
        ContentBlock::ToolUse {
            id, name, input, ..
        } => BContent::ToolUse(built(
            ToolUseBlock::builder()
                .tool_use_id(id)
                .name(name)
                .input(to_document(input))
                .build(),
        )?),
        ContentBlock::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => {
            let mut parts = Vec::new();
            for c in content {
                match c {
                    ToolResultBlock::Text { text } => {
                        parts.push(ToolResultContentBlock::Text(text.clone()))
                    }
                    ToolResultBlock::Media(m) => match media(m)? {
                        BContent::Image(i) => parts.push(ToolResultContentBlock::Image(i)),
                        BContent::Document(d) => parts.push(ToolResultContentBlock::Document(d)),
                        BContent::Video(v) => parts.push(ToolResultContentBlock::Video(v)),
                        _ => parts.push(ToolResultContentBlock::Text("[media omitted]".into())),
                    },
                }
            }
            if parts.is_empty() {
                parts.push(ToolResultContentBlock::Text("(no output)".into()));
            }
            let mut r = BToolResult::builder()
                .tool_use_id(tool_use_id)
                .set_content(Some(parts));
            if *is_error {
                r = r.status(ToolResultStatus::Error);
            }
            BContent::ToolResult(built(r.build())?)
        }
        // Claude rejects a thinking block that lost its signature; it is dropped.
        ContentBlock::Reasoning {
            signature: None, ..
        } => return Ok(None),
        ContentBlock::Reasoning {
            text,
            signature: Some(sig),
        } => BContent::ReasoningContent(ReasoningContentBlock::ReasoningText(built(
            ReasoningTextBlock::builder()
                .text(text)
                .signature(sig)
                .build(),
        )?)),
        ContentBlock::RedactedReasoning { data } => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(data)
                .map_err(|_| {
                    ModelError::Unsupported("redacted reasoning that is not base64".into())
                })?;
            BContent::ReasoningContent(ReasoningContentBlock::RedactedContent(Blob::new(bytes)))
        }
    }))
}

fn decode(data: &str) -> Result<Blob, ModelError> {
    base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map(Blob::new)
        .map_err(|_| ModelError::Unsupported("media data that is not valid base64".into()))
}

/// The extension-like subtype of a media type (`image/png` -> `png`) or of a file name.
fn subtype(m: &Media) -> String {
    let from_mime = m
        .mime_type
        .as_deref()
        .and_then(|t| t.split('/').nth(1))
        .map(str::to_ascii_lowercase);
    let from_name = m
        .filename
        .as_deref()
        .and_then(|f| f.rsplit('.').next())
        .map(str::to_ascii_lowercase);
    from_mime.or(from_name).unwrap_or_default()
}

/// Bedrock document names allow letters, digits, single spaces, hyphens, parentheses, brackets.
fn document_name(m: &Media) -> String {
    let base = m
        .filename
        .as_deref()
        .map(|f| f.rsplit_once('.').map(|(b, _)| b).unwrap_or(f))
        .unwrap_or("document");
    let mut out = String::new();
    for c in base.chars() {
        let c = if c.is_ascii_alphanumeric() || "-()[]".contains(c) {
            c
        } else {
            ' '
        };
        if !(c == ' ' && (out.is_empty() || out.ends_with(' '))) {
            out.push(c);
        }
    }
    let out = out.trim().to_string();
    if out.is_empty() {
        "document".into()
    } else {
        out.chars().take(200).collect()
    }
}

/// Whether Bedrock can take this media at all, given bytes or an S3 location.
pub fn format_supported(m: &Media) -> Result<(), String> {
    let sub = subtype(m);
    let ok = match m.kind {
        MediaKind::Image => image_format(&sub).is_some(),
        MediaKind::Document => document_format(&sub).is_some(),
        MediaKind::Video => video_format(&sub).is_some(),
        MediaKind::Audio => audio_format(&sub).is_some(),
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{} of type {:?} is not a format Bedrock Converse takes",
            m.kind.as_str(),
            m.mime_type.as_deref().unwrap_or(&sub)
        ))
    }
}

/// Which media Converse takes: images, documents, video and audio as bytes (of the formats it
/// knows), images and video from `s3://` locations; other URLs need downloading first.
pub fn media_support(m: &Media) -> MediaSupport {
    match &m.source {
        MediaSource::File { .. } => MediaSupport::Unsupported(
            "Bedrock takes no provider file handles; send bytes or an s3:// URL".into(),
        ),
        MediaSource::Url { url } if url.starts_with("s3://") => match m.kind {
            MediaKind::Image | MediaKind::Video => match format_supported(m) {
                Ok(()) => MediaSupport::Native,
                Err(e) => MediaSupport::Unsupported(e),
            },
            _ => MediaSupport::Unsupported(format!(
                "{} from s3:// (Bedrock takes it only as bytes)",
                m.kind.as_str()
            )),
        },
        MediaSource::Url { .. } => MediaSupport::NeedsBytes,
        MediaSource::Base64 { .. } => match format_supported(m) {
            Ok(()) => MediaSupport::Native,
            Err(e) => MediaSupport::Unsupported(e),
        },
    }
}

fn image_format(sub: &str) -> Option<ImageFormat> {
    Some(match sub {
        "png" => ImageFormat::Png,
        "jpeg" | "jpg" => ImageFormat::Jpeg,
        "gif" => ImageFormat::Gif,
        "webp" => ImageFormat::Webp,
        _ => return None,
    })
}

fn document_format(sub: &str) -> Option<DocumentFormat> {
    Some(match sub {
        "pdf" => DocumentFormat::Pdf,
        "csv" => DocumentFormat::Csv,
        "msword" | "doc" => DocumentFormat::Doc,
        "vnd.openxmlformats-officedocument.wordprocessingml.document" | "docx" => {
            DocumentFormat::Docx
        }
        "vnd.ms-excel" | "xls" => DocumentFormat::Xls,
        "vnd.openxmlformats-officedocument.spreadsheetml.sheet" | "xlsx" => DocumentFormat::Xlsx,
        "html" => DocumentFormat::Html,
        "plain" | "txt" => DocumentFormat::Txt,
        "markdown" | "md" => DocumentFormat::Md,
        _ => return None,
    })
}

fn video_format(sub: &str) -> Option<VideoFormat> {
    Some(match sub {
        "mp4" => VideoFormat::Mp4,
        "quicktime" | "mov" => VideoFormat::Mov,
        "x-matroska" | "mkv" => VideoFormat::Mkv,
        "webm" => VideoFormat::Webm,
        "x-flv" | "flv" => VideoFormat::Flv,
        "mpeg" => VideoFormat::Mpeg,
        "mpg" => VideoFormat::Mpg,
        "x-ms-wmv" | "wmv" => VideoFormat::Wmv,
        "3gpp" | "3gp" => VideoFormat::ThreeGp,
        _ => return None,
    })
}

fn audio_format(sub: &str) -> Option<AudioFormat> {
    Some(match sub {
        "mpeg" | "mp3" => AudioFormat::Mp3,
        "wav" | "x-wav" | "wave" => AudioFormat::Wav,
        "ogg" => AudioFormat::Ogg,
        "flac" => AudioFormat::Flac,
        "aac" => AudioFormat::Aac,
        "opus" => AudioFormat::Opus,
        "webm" => AudioFormat::Webm,
        _ => return None,
    })
}

fn media(m: &Media) -> Result<BContent, ModelError> {
    format_supported(m).map_err(ModelError::Unsupported)?;
    let sub = subtype(m);
    let s3 = |url: &str| built(S3Location::builder().uri(url).build());
    Ok(match (m.kind, &m.source) {
        (MediaKind::Image, MediaSource::Base64 { data }) => BContent::Image(built(
            ImageBlock::builder()
                .set_format(image_format(&sub))
                .source(ImageSource::Bytes(decode(data)?))
                .build(),
        )?),
        (MediaKind::Image, MediaSource::Url { url }) if url.starts_with("s3://") => {
            BContent::Image(built(
                ImageBlock::builder()
                    .set_format(image_format(&sub))
                    .source(ImageSource::S3Location(s3(url)?))
                    .build(),
            )?)
        }
        (MediaKind::Document, MediaSource::Base64 { data }) => BContent::Document(built(
            DocumentBlock::builder()
                .set_format(document_format(&sub))
                .name(document_name(m))
                .source(DocumentSource::Bytes(decode(data)?))
                .build(),
        )?),
        (MediaKind::Video, MediaSource::Base64 { data }) => BContent::Video(built(
            VideoBlock::builder()
                .set_format(video_format(&sub))
                .source(VideoSource::Bytes(decode(data)?))
                .build(),
        )?),
        (MediaKind::Video, MediaSource::Url { url }) if url.starts_with("s3://") => {
            BContent::Video(built(
                VideoBlock::builder()
                    .set_format(video_format(&sub))
                    .source(VideoSource::S3Location(s3(url)?))
                    .build(),
            )?)
        }
        (MediaKind::Audio, MediaSource::Base64 { data }) => BContent::Audio(built(
            AudioBlock::builder()
                .set_format(audio_format(&sub))
                .source(AudioSource::Bytes(decode(data)?))
                .build(),
        )?),
        (kind, source) => {
            return Err(ModelError::Unsupported(format!(
                "{} from a {} source (Bedrock takes bytes, or s3:// locations for images and video)",
                kind.as_str(),
                source.kind_name()
            )));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::{Message, ToolSpec};
    use crate::model::InferenceParams;
    use serde_json::json;

    #[test]
    fn turns_tools_reasoning_and_media_become_sdk_types() {
        let req = ModelRequest {
            system: vec!["sys".into()],
            messages: vec![
                Message {
                    role: Role::User,
                    content: vec![
                        ContentBlock::Text {
                            text: "look".into(),
                        },
                        ContentBlock::Media(Media {
                            kind: MediaKind::Image,
                            mime_type: Some("image/png".into()),
                            source: MediaSource::Base64 {
                                data: "iVBORw==".into(),
                            },
                            filename: None,
                        }),
                        ContentBlock::Media(Media {
                            kind: MediaKind::Document,
                            mime_type: Some("application/pdf".into()),
                            source: MediaSource::Base64 {
                                data: "JVBERi0=".into(),
                            },
                            filename: Some("Q3 report (final).v2.pdf".into()),
                        }),
                    ],
                },
                Message {
                    role: Role::Assistant,
                    content: vec![
                        ContentBlock::Reasoning {
                            text: "think".into(),
                            signature: Some("sig".into()),
                        },
                        ContentBlock::ToolUse {
                            id: "t1".into(),
                            name: "f".into(),
                            input: json!({"n": -2, "x": [1.5]}),
                            signature: None,
                        },
                    ],
                },
                Message {
                    role: Role::User,
                    content: vec![ContentBlock::ToolResult {
                        tool_use_id: "t1".into(),
                        content: vec![ToolResultBlock::Text { text: "bad".into() }],
                        is_error: true,
                    }],
                },
            ],
            tools: vec![ToolSpec {
                name: "f".into(),
                description: String::new(),
                input_schema: json!({"type": "object"}),
                strict: None,
            }],
            params: InferenceParams {
                max_tokens: Some(100),
                temperature: Some(0.1),
                top_p: Some(0.5),
                ..Default::default()
            },
        };
        let input = converse_input(&req).unwrap();
        assert_eq!(input.system, vec![SystemContentBlock::Text("sys".into())]);
        let user = input.messages[0].content();
        assert_eq!(user[1].as_image().unwrap().format(), &ImageFormat::Png);
        let doc = user[2].as_document().unwrap();
        assert_eq!(doc.name(), "Q3 report (final) v2");
        assert_eq!(doc.format(), &DocumentFormat::Pdf);
        let asst = input.messages[1].content();
        let r = asst[0]
            .as_reasoning_content()
            .unwrap()
            .as_reasoning_text()
            .unwrap();
        assert_eq!(r.signature(), Some("sig"));
        let tu = asst[1].as_tool_use().unwrap();
        assert_eq!(
            tu.input().as_object().unwrap()["n"],
            Document::Number(Number::NegInt(-2))
        );
        let tr = input.messages[2].content()[0].as_tool_result().unwrap();
        assert_eq!(tr.status(), Some(&ToolResultStatus::Error));
        let inf = input.inference.unwrap();
        assert_eq!(
            (inf.max_tokens(), inf.temperature(), inf.top_p()),
            (Some(100), Some(0.1), None)
        );
        assert_eq!(input.tool_config.unwrap().tools().len(), 1);
    }

    #[test]
    fn unsupported_media_is_refused_with_a_reason() {
        let m = Media {
            kind: MediaKind::Image,
            mime_type: Some("image/tiff".into()),
            source: MediaSource::Base64 {
                data: "AA==".into(),
            },
            filename: None,
        };
        assert!(format_supported(&m).unwrap_err().contains("image/tiff"));
        let m = Media {
            kind: MediaKind::Image,
            mime_type: Some("image/png".into()),
            source: MediaSource::Url {
                url: "https://x/y.png".into(),
            },
            filename: None,
        };
        assert_eq!(media(&m).unwrap_err().code(), "UNSUPPORTED_CONTENT");
    }
}
