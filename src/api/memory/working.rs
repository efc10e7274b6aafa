//! Adding working memory: `POST /{id}/memories`, with the message checks, the payload type
//! and the input type recorded in `metadata`.

use axum::Json;
use axum::extract::{Path, State};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::Memory;
use super::request::{bad, check_namespace, internal, no_container, parse_body};
use crate::api::ApiError;
use crate::store::memory::{Namespace, NewWorkingMemory, WorkingMemory};

const INPUT_TYPES: [&str; 3] = ["text", "content_blocks", "messages"];

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum PayloadType {
    Conversational,
    Data,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddMemoryRequest {
    #[serde(default)]
    messages: Option<Vec<Value>>,
    #[serde(default)]
    structured_data: Option<Map<String, Value>>,
    #[serde(default)]
    structured_data_blob: Option<Map<String, Value>>,
    #[serde(default)]
    binary_data: Option<String>,
    #[serde(default)]
    payload_type: Option<PayloadType>,
    #[serde(default)]
    namespace: Option<Namespace>,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    #[serde(default)]
    tags: Option<Map<String, Value>>,
    #[serde(default)]
    infer: Option<bool>,
}

const BLOCK_EXAMPLE: &str = "[{\"type\": \"text\", \"text\": \"...\"}]";

/// Messages must be structured: objects with an optional string `role` and `content`, an array
/// of content blocks each naming its `type`. Everything else in them is kept as sent.
fn check_messages(messages: &[Value]) -> Result<(), ApiError> {
    if messages.is_empty() {
        return Err(bad("messages", "must hold at least one message"));
    }
    for (i, m) in messages.iter().enumerate() {
        let field = format!("messages[{i}]");
        let Some(m) = m.as_object() else {
            return Err(bad(
                field,
                "a message must be an object with `role` and `content`",
            ));
        };
        if let Some(role) = m.get("role")
            && role.as_str().is_none_or(str::is_empty)
        {
            return Err(bad(
                format!("{field}.role"),
                "must be a string such as \"user\" or \"assistant\"",
            ));
        }
        let content_field = format!("{field}.content");
        let blocks = match m.get("content") {
            None => {
                return Err(bad(
                    content_field,
                    format!("is required: an array of content blocks such as {BLOCK_EXAMPLE}"),
                ));
            }
            Some(Value::Array(blocks)) => blocks,
            Some(_) => {
                return Err(bad(
                    content_field,
                    format!("must be an array of content blocks such as {BLOCK_EXAMPLE}"),
                ));
            }
        };
        if blocks.is_empty() {
            return Err(bad(content_field, "must hold at least one content block"));
        }
        for (j, b) in blocks.iter().enumerate() {
            if b.get("type")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                return Err(bad(
                    format!("{content_field}[{j}]"),
                    "a content block must be an object with a string `type` (\"text\", \"image\", ...)",
                ));
            }
        }
    }
    Ok(())
}

/// The input type the seeds ask to record in `metadata`.
fn input_type(
    messages: Option<&Vec<Value>>,
    blob: Option<&Map<String, Value>>,
) -> Option<&'static str> {
    if messages.is_some() {
        return Some("messages");
    }
    match blob?.get("input")? {
        Value::String(_) => Some("text"),
        Value::Array(items)
            if !items.is_empty() && items.iter().all(|i| i.get("role").is_some()) =>
        {
            Some("messages")
        }
        Value::Array(_) => Some("content_blocks"),
        _ => None,
    }
}

pub(super) async fn add_memory(
    State(Memory(store)): State<Memory>,
    Path(container): Path<String>,
    caller: Option<axum::Extension<crate::api::auth::Caller>>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let req: AddMemoryRequest = parse_body(&body)?.ok_or_else(|| {
        bad(
            "",
            "a JSON body is required, e.g. {\"messages\": [...], \"namespace\": {\"session_id\": \"...\"}}",
        )
    })?;
    if req.infer == Some(true) {
        return Err(bad(
            "infer",
            "inference (fact extraction into long-term memory) is not supported here; send \"infer\": false or leave it out",
        ));
    }
    if let Some(messages) = &req.messages {
        check_messages(messages)?;
    }
    let payload_type = req.payload_type.unwrap_or(
        if req.messages.is_none() && (req.structured_data.is_some() || req.binary_data.is_some()) {
            PayloadType::Data
        } else {
            PayloadType::Conversational
        },
    );
    match payload_type {
        PayloadType::Conversational
            if req.messages.is_none() && req.structured_data_blob.is_none() =>
        {
            return Err(bad(
                "messages",
                "is required for a conversational memory (or give structured_data_blob)",
            ));
        }
        PayloadType::Data
            if req.structured_data.is_none()
                && req.structured_data_blob.is_none()
                && req.binary_data.is_none() =>
        {
            return Err(bad(
                "structured_data",
                "is required for a data memory (or give structured_data_blob or binary_data)",
            ));
        }
        _ => {}
    }
    let namespace = req.namespace.unwrap_or_default();
    check_namespace("namespace", &namespace)?;
    let mut metadata = req.metadata.unwrap_or_default();
    match metadata.get("input_type") {
        Some(Value::String(t)) if INPUT_TYPES.contains(&t.as_str()) => {}
        Some(_) => {
            return Err(bad(
                "metadata.input_type",
                "must be \"text\", \"content_blocks\" or \"messages\"",
            ));
        }
        None => {
            if let Some(t) = input_type(req.messages.as_ref(), req.structured_data_blob.as_ref()) {
                metadata.insert("input_type".into(), json!(t));
            }
        }
    }

    let mut stored = Map::new();
    if let Some(m) = req.messages {
        stored.insert("messages".into(), Value::Array(m));
    }
    if let Some(d) = req.structured_data {
        stored.insert("structured_data".into(), Value::Object(d));
    }
    if let Some(d) = req.structured_data_blob {
        stored.insert("structured_data_blob".into(), Value::Object(d));
    }
    if let Some(d) = req.binary_data {
        stored.insert("binary_data".into(), Value::String(d));
    }
    stored.insert("metadata".into(), Value::Object(metadata));
    stored.insert("tags".into(), Value::Object(req.tags.unwrap_or_default()));
    stored.insert("infer".into(), Value::Bool(false));

    let memory = store
        .add_working_memory(
            &container,
            NewWorkingMemory {
                payload_type: match payload_type {
                    PayloadType::Conversational => "conversational",
                    PayloadType::Data => "data",
                }
                .to_string(),
                namespace,
                body: stored,
                owner: super::owner_name(caller.as_deref()),
            },
        )
        .await
        .map_err(internal)?
        .ok_or_else(|| no_container(&container))?;
    let mut answer = json!({ "working_memory_id": memory.memory_id });
    if let Some(s) = memory.session_id {
        answer["session_id"] = json!(s);
    }
    Ok(Json(answer))
}

pub(super) fn working_source(m: &WorkingMemory) -> Value {
    let mut source = m.body.clone();
    source.insert("memory_container_id".into(), json!(m.container_id));
    source.insert("payload_type".into(), json!(m.payload_type));
    if let Some(id) = m.message_id {
        source.insert("message_id".into(), json!(id));
    }
    source.insert("namespace".into(), json!(m.namespace));
    source.insert("namespace_size".into(), json!(m.namespace.len()));
    source.insert("created_time".into(), json!(m.created_time));
    source.insert("last_updated_time".into(), json!(m.last_updated_time));
    Value::Object(source)
}
