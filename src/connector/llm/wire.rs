//! The wire JSON of each interface: messages and tool specs going into a connector's
//! `request_body`, and answers read back into [`ModelEvent`]s.

use serde_json::{Value, json};

use super::Interface;
use crate::conversation::{ContentBlock, Message, Role, ToolResultBlock, ToolSpec};
use crate::model::{ModelError, ModelEvent, StopReason, Usage};

pub(super) fn text_of_message(m: &Message) -> String {
    m.content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

pub(super) fn tool_json(interface: Interface, t: &ToolSpec) -> Value {
    match interface {
        Interface::BedrockConverse | Interface::BedrockConverseDeepseekR1 => json!({"toolSpec": {
            "name": t.name, "description": t.description, "inputSchema": {"json": t.input_schema}
        }}),
        Interface::GeminiGenerateContent => super::gemini::tool_json(t),
        _ => json!({"type": "function", "function": {
            "name": t.name, "description": t.description, "parameters": t.input_schema,
            "strict": t.strict.unwrap_or(false)
        }}),
    }
}

fn result_text(content: &[ToolResultBlock]) -> String {
    ToolResultBlock::joined_text(content)
}

pub(super) fn converse_message(m: &Message) -> Value {
    let role = match m.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    let content: Vec<Value> = m
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } if !text.is_empty() => Some(json!({"text": text})),
            ContentBlock::ToolUse {
                id, name, input, ..
            } => Some(json!({"toolUse": {"toolUseId": id, "name": name, "input": input}})),
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => {
                let mut r =
                    json!({"toolUseId": tool_use_id, "content": [{"text": result_text(content)}]});
                if *is_error {
                    r["status"] = json!("error");
                }
                Some(json!({ "toolResult": r }))
            }
            _ => None,
        })
        .collect();
    json!({"role": role, "content": content})
}

/// A message for DeepSeek R1: tool calls as the JSON the model wrote them in, tool results
/// as JSON text, since the model has no tool-use blocks.
pub(super) fn deepseek_message(m: &Message) -> Value {
    let text = text_of_message(m);
    let calls: Vec<Value> = m
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolUse {
                id, name, input, ..
            } => Some(json!({"id": id, "tool_name": name, "input": input})),
            _ => None,
        })
        .collect();
    let results: Vec<Value> = m
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                ..
            } => Some(json!({"text": json!({"tool_call_id": tool_use_id,
                "tool_result": {"text": result_text(content)}}).to_string()})),
            _ => None,
        })
        .collect();
    let (role, content) = match m.role {
        Role::Assistant if !calls.is_empty() => (
            "assistant",
            vec![
                json!({"text": json!({"stop_reason": "tool_use", "tool_calls": calls}).to_string()}),
            ],
        ),
        Role::Assistant => ("assistant", vec![json!({ "text": text })]),
        Role::User => {
            let mut c = results;
            if !text.is_empty() {
                c.push(json!({ "text": text }));
            }
            ("user", c)
        }
    };
    json!({"role": role, "content": content})
}

/// The text blocks of a Converse answer, joined.
pub(super) fn converse_text(doc: &Value) -> String {
    doc.pointer("/output/message/content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("")
}

/// DeepSeek R1's answer: tool calls when its JSON says `tool_use`, else its `response` (or
/// the text itself when it is not that JSON).
pub fn read_deepseek(text: &str, usage: Option<&Value>) -> Vec<ModelEvent> {
    let json = match (text.find('{'), text.rfind('}')) {
        (Some(a), Some(b)) if a < b => serde_json::from_str::<Value>(&text[a..=b]).ok(),
        _ => None,
    };
    let mut out = Vec::new();
    let mut calls = 0;
    if let Some(j) = &json
        && j.get("stop_reason").and_then(Value::as_str) == Some("tool_use")
    {
        calls = listed_calls(&mut out, j.get("tool_calls"), "/tool_name", "/input");
    }
    if calls == 0 {
        let answer = json
            .as_ref()
            .and_then(|j| j.get("response"))
            .map(crate::connector::template::text_of)
            .unwrap_or_else(|| text.to_string());
        out.push(ModelEvent::TextDelta(answer));
    }
    if let Some(u) = usage {
        out.push(ModelEvent::Usage(Usage {
            input_tokens: u.get("inputTokens").and_then(Value::as_u64).unwrap_or(0),
            output_tokens: u.get("outputTokens").and_then(Value::as_u64).unwrap_or(0),
            ..Usage::default()
        }));
    }
    out.push(ModelEvent::Stop(if calls > 0 {
        StopReason::ToolUse
    } else {
        StopReason::EndTurn
    }));
    out
}

pub(super) fn openai_messages(m: &Message) -> Vec<Value> {
    match m.role {
        Role::Assistant => {
            let text = text_of_message(m);
            let calls: Vec<Value> = m
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::ToolUse {
                        id, name, input, ..
                    } => Some(json!({"id": id, "type": "function",
                        "function": {"name": name, "arguments": input.to_string()}})),
                    _ => None,
                })
                .collect();
            let mut msg = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { Value::String(text) }});
            if !calls.is_empty() {
                msg["tool_calls"] = Value::Array(calls);
            }
            vec![msg]
        }
        Role::User => {
            let mut out: Vec<Value> = m
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::ToolResult {
                        tool_use_id,
                        content,
                        ..
                    } => Some(json!({"role": "tool", "tool_call_id": tool_use_id,
                        "content": result_text(content)})),
                    _ => None,
                })
                .collect();
            let text = text_of_message(m);
            if !text.is_empty() {
                out.push(json!({"role": "user", "content": text}));
            }
            out
        }
    }
}

fn stop_reason(s: &str) -> StopReason {
    match s {
        "end_turn" | "stop" => StopReason::EndTurn,
        "tool_use" | "tool_calls" => StopReason::ToolUse,
        "max_tokens" | "length" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "content_filtered" | "content_filter" | "guardrail_intervened" => {
            StopReason::ContentFiltered
        }
        other => StopReason::Other(other.to_string()),
    }
}

/// The calls of a `tool_calls` list, each with an `id` (else `call_<n>`), its name and its
/// arguments (JSON text, or JSON) at these pointers; answers how many there were.
fn listed_calls(
    out: &mut Vec<ModelEvent>,
    list: Option<&Value>,
    name_at: &str,
    args_at: &str,
) -> usize {
    let mut calls = 0;
    for c in list.and_then(Value::as_array).into_iter().flatten() {
        calls += 1;
        let id = c
            .get("id")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| format!("call_{calls}"));
        let name = c
            .pointer(name_at)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let args = match c.pointer(args_at) {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => "{}".into(),
        };
        call_events(out, id, name, args);
    }
    calls
}

fn call_events(out: &mut Vec<ModelEvent>, id: String, name: String, args: String) {
    out.push(ModelEvent::ToolCallStart {
        id: id.clone(),
        name,
    });
    out.push(ModelEvent::ToolCallDelta {
        id: id.clone(),
        delta: args,
    });
    out.push(ModelEvent::ToolCallEnd { id });
}

/// A Converse answer (`output.message.content`, `stopReason`, `usage`) as events.
pub fn read_converse(doc: &Value) -> Vec<ModelEvent> {
    let mut out = Vec::new();
    let blocks = doc
        .pointer("/output/message/content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut calls = 0;
    for b in blocks {
        if let Some(t) = b.get("text").and_then(Value::as_str) {
            out.push(ModelEvent::TextDelta(t.to_string()));
        } else if let Some(r) = b.pointer("/reasoningContent/reasoningText") {
            if let Some(t) = r.get("text").and_then(Value::as_str) {
                out.push(ModelEvent::ReasoningDelta(t.to_string()));
            }
            if let Some(s) = r.get("signature").and_then(Value::as_str) {
                out.push(ModelEvent::ReasoningSignature(s.to_string()));
            }
            out.push(ModelEvent::ReasoningEnd);
        } else if let Some(u) = b.get("toolUse") {
            calls += 1;
            let id = u
                .get("toolUseId")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| format!("tooluse_{calls}"));
            let name = u
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let args = u.get("input").cloned().unwrap_or(json!({})).to_string();
            call_events(&mut out, id, name, args);
        }
    }
    if let Some(u) = doc.get("usage") {
        out.push(ModelEvent::Usage(Usage {
            input_tokens: u.get("inputTokens").and_then(Value::as_u64).unwrap_or(0),
            output_tokens: u.get("outputTokens").and_then(Value::as_u64).unwrap_or(0),
            ..Usage::default()
        }));
    }
    let reason = match doc.get("stopReason").and_then(Value::as_str) {
        Some(s) => stop_reason(s),
        None if calls > 0 => StopReason::ToolUse,
        None => StopReason::EndTurn,
    };
    out.push(ModelEvent::Stop(reason));
    out
}

/// A non-streaming chat completion (`choices[0].message`, `finish_reason`, `usage`) as events.
pub fn read_openai(doc: &Value) -> Result<Vec<ModelEvent>, ModelError> {
    let choice = doc
        .pointer("/choices/0")
        .ok_or_else(|| ModelError::Protocol("the chat completion has no choices".into()))?;
    let msg = choice.get("message").cloned().unwrap_or(Value::Null);
    let mut out = Vec::new();
    if let Some(r) = msg
        .get("reasoning_content")
        .and_then(Value::as_str)
        .filter(|r| !r.is_empty())
    {
        out.push(ModelEvent::ReasoningDelta(r.to_string()));
        out.push(ModelEvent::ReasoningEnd);
    }
    if let Some(t) = msg
        .get("content")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    {
        out.push(ModelEvent::TextDelta(t.to_string()));
    }
    let calls = listed_calls(
        &mut out,
        msg.get("tool_calls"),
        "/function/name",
        "/function/arguments",
    );
    if let Some(u) = doc.get("usage") {
        out.push(ModelEvent::Usage(Usage {
            input_tokens: u.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0),
            output_tokens: u
                .get("completion_tokens")
                .and_then(Value::as_u64)
                .unwrap_or(0),
            ..Usage::default()
        }));
    }
    let reason = match choice.get("finish_reason").and_then(Value::as_str) {
        Some(s) => stop_reason(s),
        None if calls > 0 => StopReason::ToolUse,
        None => StopReason::EndTurn,
    };
    out.push(ModelEvent::Stop(reason));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_per_interface() {
        let ev = read_converse(&json!({
            "output": {"message": {"role": "assistant", "content": [
                {"text": "Let me look."},
                {"toolUse": {"toolUseId": "tu1", "name": "lookup", "input": {"q": "x"}}}
            ]}},
            "stopReason": "tool_use",
            "usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15}
        }));
        assert_eq!(ev[0], ModelEvent::TextDelta("Let me look.".into()));
        assert!(ev.contains(&ModelEvent::ToolCallDelta {
            id: "tu1".into(),
            delta: "{\"q\":\"x\"}".into()
        }));
        assert_eq!(ev.last(), Some(&ModelEvent::Stop(StopReason::ToolUse)));
        let ev = read_openai(&json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": null,
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\":\"y\"}"}}]},
                "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 4}
        }))
        .unwrap();
        assert_eq!(
            ev[0],
            ModelEvent::ToolCallStart {
                id: "c1".into(),
                name: "lookup".into()
            }
        );
        assert!(read_openai(&json!({"error": "x"})).is_err());
        let ev = read_deepseek(
            r#"{"stop_reason": "tool_use", "tool_calls": [{"id": "d1", "tool_name": "lookup", "input": {"q": "z"}}]}"#,
            None,
        );
        assert_eq!(
            ev[1],
            ModelEvent::ToolCallDelta {
                id: "d1".into(),
                delta: "{\"q\":\"z\"}".into()
            }
        );
        let ev = read_deepseek(r#"{"stop_reason": "end_turn", "response": "Done."}"#, None);
        assert_eq!(ev[0], ModelEvent::TextDelta("Done.".into()));
        assert_eq!(
            read_deepseek("plain", None)[0],
            ModelEvent::TextDelta("plain".into())
        );
    }
}
