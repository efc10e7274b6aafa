//! Gemini's `generateContent` JSON (`gemini/v1beta/generatecontent`): `contents` of `user` /
//! `model` turns made of `parts` (`text`, `functionCall`, `functionResponse`), tools as
//! `functionDeclarations`. Gemini calls carry no ids: a function response names the function,
//! so the ids the gateway gives calls are mapped back to names.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::conversation::{ContentBlock, Message, Role, ToolResultBlock, ToolSpec};
use crate::model::{ModelEvent, StopReason, Usage};

/// The JSON Schema keys Gemini's function declarations refuse.
const REFUSED_KEYS: &[&str] = &["$schema", "$id", "additionalProperties", "strict"];

/// `schema` without the keys Gemini refuses, at any depth (ml-commons cleans it too).
pub(super) fn clean_schema(schema: &Value) -> Value {
    match schema {
        Value::Object(o) => Value::Object(
            o.iter()
                .filter(|(k, _)| !REFUSED_KEYS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), clean_schema(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(clean_schema).collect()),
        other => other.clone(),
    }
}

/// A function declaration for `t`.
pub(super) fn tool_json(t: &ToolSpec) -> Value {
    json!({"name": t.name, "description": t.description, "parameters": clean_schema(&t.input_schema)})
}

/// The names of the calls in `messages`, by the ids the gateway gave them.
pub(super) fn call_names(messages: &[Message]) -> HashMap<String, String> {
    messages
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            ContentBlock::ToolUse { id, name, .. } => Some((id.clone(), name.clone())),
            _ => None,
        })
        .collect()
}

/// One turn as a Gemini content.
pub(super) fn message(m: &Message, names: &HashMap<String, String>) -> Value {
    let parts: Vec<Value> = m
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } if !text.is_empty() => Some(json!({ "text": text })),
            ContentBlock::ToolUse { name, input, .. } => {
                Some(json!({"functionCall": {"name": name, "args": input}}))
            }
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                ..
            } => {
                let name = names.get(tool_use_id).unwrap_or(tool_use_id);
                Some(json!({"functionResponse": {"name": name,
                    "response": {"text": ToolResultBlock::joined_text(content)}}}))
            }
            _ => None,
        })
        .collect();
    let role = match m.role {
        Role::User => "user",
        Role::Assistant => "model",
    };
    json!({"role": role, "parts": parts})
}

/// A `generateContent` answer as events; calls get ids of their own.
pub fn read(doc: &Value) -> Vec<ModelEvent> {
    let mut out = Vec::new();
    let mut calls = 0;
    for p in doc
        .pointer("/candidates/0/content/parts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(t) = p.get("text").and_then(Value::as_str) {
            if p.get("thought").and_then(Value::as_bool) == Some(true) {
                out.push(ModelEvent::ReasoningDelta(t.to_string()));
                out.push(ModelEvent::ReasoningEnd);
            } else {
                out.push(ModelEvent::TextDelta(t.to_string()));
            }
        } else if let Some(c) = p.get("functionCall") {
            calls += 1;
            let name = c.get("name").and_then(Value::as_str).unwrap_or("");
            let id = format!("{name}_{}", uuid::Uuid::new_v4().simple());
            out.push(ModelEvent::ToolCallStart {
                id: id.clone(),
                name: name.to_string(),
            });
            out.push(ModelEvent::ToolCallDelta {
                id: id.clone(),
                delta: c.get("args").cloned().unwrap_or(json!({})).to_string(),
            });
            out.push(ModelEvent::ToolCallEnd { id });
        }
    }
    if let Some(u) = doc.get("usageMetadata") {
        out.push(ModelEvent::Usage(Usage {
            input_tokens: u
                .get("promptTokenCount")
                .and_then(Value::as_u64)
                .unwrap_or(0),
            output_tokens: u
                .get("candidatesTokenCount")
                .and_then(Value::as_u64)
                .unwrap_or(0),
            ..Usage::default()
        }));
    }
    // Gemini says STOP for calls and answers alike.
    let reason = match doc
        .pointer("/candidates/0/finishReason")
        .and_then(Value::as_str)
    {
        _ if calls > 0 => StopReason::ToolUse,
        Some("MAX_TOKENS") => StopReason::MaxTokens,
        Some("SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT") => {
            StopReason::ContentFiltered
        }
        _ => StopReason::EndTurn,
    };
    out.push(ModelEvent::Stop(reason));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_and_results_round_trip_by_name() {
        let ev = read(&json!({
            "candidates": [{"content": {"role": "model", "parts": [
                {"functionCall": {"name": "weather", "args": {"city": "Lima"}}}
            ]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 3}
        }));
        let ModelEvent::ToolCallStart { id, name } = &ev[0] else {
            panic!("{ev:?}")
        };
        assert_eq!(name, "weather");
        assert_eq!(ev.last(), Some(&ModelEvent::Stop(StopReason::ToolUse)));
        let msgs = vec![
            Message {
                role: Role::Assistant,
                content: vec![ContentBlock::ToolUse {
                    id: id.clone(),
                    name: "weather".into(),
                    input: json!({"city": "Lima"}),
                    signature: None,
                }],
            },
            Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult {
                    tool_use_id: id.clone(),
                    content: vec![ToolResultBlock::Text {
                        text: "warm".into(),
                    }],
                    is_error: false,
                }],
            },
        ];
        let names = call_names(&msgs);
        assert_eq!(
            message(&msgs[1], &names),
            json!({"role": "user", "parts": [{"functionResponse": {"name": "weather", "response": {"text": "warm"}}}]})
        );
        assert_eq!(
            clean_schema(&json!({"type": "object", "additionalProperties": false,
                "properties": {"a": {"type": "object", "additionalProperties": true}}})),
            json!({"type": "object", "properties": {"a": {"type": "object"}}})
        );
    }
}
