//! The AG-UI messages a run's events create, built the way `@ag-ui/client` builds them, so the
//! stored thread is exactly what the browser holds: assistant messages (text and tool calls
//! attached by `parentMessageId`), `tool` messages from results, `reasoning` messages with their
//! encrypted values.

use serde_json::{Map, Value, json};

use crate::protocol::events::{EncryptedSubtype, Event, ToolResultContent};

/// Messages in creation order, with what each holds so far.
#[derive(Debug, Default)]
pub struct Transcript {
    messages: Vec<Map<String, Value>>,
    /// Messages finished (END seen, or not streamed): the ones safe to store after a failure.
    complete: Vec<bool>,
}

/// Appends to a string field in place: deltas arrive per token, so nothing that came before
/// is copied again.
fn append(m: &mut Map<String, Value>, key: &str, delta: &str) {
    match m.get_mut(key) {
        Some(Value::String(s)) => s.push_str(delta),
        _ => {
            m.insert(key.into(), Value::String(delta.to_string()));
        }
    }
}

impl Transcript {
    /// The message with `id`, searched from the end: the one being streamed is usually last.
    fn find(&self, id: &str) -> Option<usize> {
        self.messages
            .iter()
            .rposition(|m| m.get("id").and_then(Value::as_str) == Some(id))
    }

    fn push(&mut self, m: Value, complete: bool) -> usize {
        if let Value::Object(o) = m {
            self.messages.push(o);
            self.complete.push(complete);
        }
        self.messages.len() - 1
    }

    fn call_owner(&mut self, call_id: &str) -> Option<(usize, usize)> {
        self.messages.iter().enumerate().find_map(|(i, m)| {
            let calls = m.get("toolCalls")?.as_array()?;
            let k = calls
                .iter()
                .position(|c| c.get("id").and_then(Value::as_str) == Some(call_id))?;
            Some((i, k))
        })
    }

    /// Applies one outgoing event of the run's own agent.
    pub fn apply(&mut self, event: &Event) {
        self.apply_as(event, None);
    }

    /// Applies one outgoing event attributed to subagent `by` (`None`: the run's own agent).
    pub fn apply_as(&mut self, event: &Event, by: Option<&str>) {
        let before = self.messages.len();
        self.apply_event(event);
        // The messages a subagent's event creates say whose they are.
        if let Some(by) = by {
            for m in &mut self.messages[before..] {
                m.insert("subagentRunId".into(), Value::String(by.to_string()));
            }
        }
    }

    fn apply_event(&mut self, event: &Event) {
        match event {
            Event::TextMessageStart {
                message_id, role, ..
            } if self.find(message_id).is_none() => {
                let role = role.clone().unwrap_or_else(|| "assistant".into());
                self.push(
                    json!({"id": message_id, "role": role, "content": ""}),
                    false,
                );
            }
            Event::TextMessageContent { message_id, delta } => {
                if let Some(i) = self.find(message_id) {
                    append(&mut self.messages[i], "content", delta);
                }
            }
            Event::TextMessageEnd { message_id } | Event::ReasoningMessageEnd { message_id } => {
                if let Some(i) = self.find(message_id) {
                    self.complete[i] = true;
                }
            }
            Event::ToolCallStart {
                tool_call_id,
                tool_call_name,
                parent_message_id,
            } => {
                let owner = match parent_message_id.as_deref().and_then(|p| self.find(p)) {
                    Some(i)
                        if self.messages[i].get("role").and_then(Value::as_str)
                            == Some("assistant") =>
                    {
                        i
                    }
                    _ => {
                        let id = parent_message_id
                            .clone()
                            .unwrap_or_else(|| tool_call_id.clone());
                        self.push(json!({"id": id, "role": "assistant"}), true)
                    }
                };
                let call = json!({"id": tool_call_id, "type": "function", "function": {"name": tool_call_name, "arguments": ""}});
                let calls = self.messages[owner]
                    .entry("toolCalls")
                    .or_insert_with(|| json!([]));
                if let Some(a) = calls.as_array_mut() {
                    a.push(call);
                }
                // The owner is incomplete until its calls end.
                self.complete[owner] = false;
            }
            Event::ToolCallArgs {
                tool_call_id,
                delta,
            } => {
                if let Some((i, k)) = self.call_owner(tool_call_id)
                    && let Some(f) = self.messages[i]["toolCalls"][k]["function"].as_object_mut()
                {
                    append(f, "arguments", delta);
                }
            }
            Event::ToolCallEnd { tool_call_id } => {
                if let Some((i, _)) = self.call_owner(tool_call_id) {
                    let all_args_json = self.messages[i]["toolCalls"]
                        .as_array()
                        .map(|calls| {
                            calls.iter().all(|c| {
                                c["function"]["arguments"]
                                    .as_str()
                                    .is_some_and(|a| serde_json::from_str::<Value>(a).is_ok())
                            })
                        })
                        .unwrap_or(false);
                    self.complete[i] = all_args_json;
                }
            }
            Event::ToolCallResult {
                message_id,
                tool_call_id,
                content,
                ..
            } => {
                let content = match content {
                    ToolResultContent::Text(t) => json!(t),
                    ToolResultContent::Parts(p) => json!(p),
                };
                self.push(json!({"id": message_id, "role": "tool", "toolCallId": tool_call_id, "content": content}), true);
            }
            Event::ReasoningMessageStart { message_id, .. } if self.find(message_id).is_none() => {
                self.push(
                    json!({"id": message_id, "role": "reasoning", "content": ""}),
                    false,
                );
            }
            Event::ReasoningMessageContent { message_id, delta } => {
                if let Some(i) = self.find(message_id) {
                    append(&mut self.messages[i], "content", delta);
                }
            }
            Event::ReasoningEncryptedValue {
                subtype,
                entity_id,
                encrypted_value,
            } => {
                let target = match subtype {
                    EncryptedSubtype::Message => self.find(entity_id).map(|i| (i, None)),
                    EncryptedSubtype::ToolCall => {
                        self.call_owner(entity_id).map(|(i, k)| (i, Some(k)))
                    }
                };
                match target {
                    Some((i, None)) => {
                        self.messages[i].insert("encryptedValue".into(), json!(encrypted_value));
                    }
                    Some((i, Some(k))) => {
                        if let Some(c) = self.messages[i]["toolCalls"]
                            .get_mut(k)
                            .and_then(Value::as_object_mut)
                        {
                            c.insert("encryptedValue".into(), json!(encrypted_value));
                        }
                    }
                    None => {}
                }
            }
            Event::ActivitySnapshot {
                message_id,
                activity_type,
                content,
                replace,
            } => match self.find(message_id) {
                None => {
                    self.push(
                        json!({"id": message_id, "role": "activity", "activityType": activity_type, "content": content}),
                        true,
                    );
                }
                Some(i) if *replace != Some(false) => {
                    let m = &mut self.messages[i];
                    m.insert("activityType".into(), json!(activity_type));
                    m.insert("content".into(), content.clone());
                }
                Some(_) => {}
            },
            Event::ActivityDelta {
                message_id, patch, ..
            } => {
                if let Some(i) = self.find(message_id)
                    && let Some(content) = self.messages[i].get_mut("content")
                {
                    match super::patch::apply_ops(content, patch) {
                        Ok(next) => *content = next,
                        Err(e) => {
                            tracing::warn!(activity = %message_id, error = %e, "activity patch did not apply")
                        }
                    }
                }
            }
            _ => {}
        }
    }

    /// Every message, complete or not.
    pub fn messages(&self) -> Vec<Value> {
        self.messages.iter().cloned().map(Value::Object).collect()
    }

    /// The messages of the run's own agent: not its subagents', not activities (what a
    /// synchronous answer and a nesting run read the answer from).
    pub fn own_messages(&self) -> Vec<Value> {
        self.messages
            .iter()
            .filter(|m| {
                !m.contains_key("subagentRunId")
                    && m.get("role").and_then(Value::as_str) != Some("activity")
            })
            .cloned()
            .map(Value::Object)
            .collect()
    }

    /// The messages that completed (what survives a failed run).
    pub fn complete_messages(&self) -> Vec<Value> {
        self.messages
            .iter()
            .zip(&self.complete)
            .filter(|(_, c)| **c)
            .map(|(m, _)| Value::Object(m.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_the_messages_a_client_builds() {
        let mut t = Transcript::default();
        for e in [
            Event::ReasoningStart {
                message_id: "span".into(),
            },
            Event::ReasoningMessageStart {
                message_id: "r".into(),
                role: "reasoning".into(),
            },
            Event::ReasoningMessageContent {
                message_id: "r".into(),
                delta: "hm".into(),
            },
            Event::ReasoningMessageEnd {
                message_id: "r".into(),
            },
            Event::ReasoningEncryptedValue {
                subtype: EncryptedSubtype::Message,
                entity_id: "r".into(),
                encrypted_value: "sig".into(),
            },
            Event::TextMessageStart {
                message_id: "m".into(),
                role: Some("assistant".into()),
                name: None,
            },
            Event::TextMessageContent {
                message_id: "m".into(),
                delta: "Let me ".into(),
            },
            Event::TextMessageContent {
                message_id: "m".into(),
                delta: "check.".into(),
            },
            Event::TextMessageEnd {
                message_id: "m".into(),
            },
            Event::ToolCallStart {
                tool_call_id: "c".into(),
                tool_call_name: "f".into(),
                parent_message_id: Some("m".into()),
            },
            Event::ToolCallArgs {
                tool_call_id: "c".into(),
                delta: "{\"a\":".into(),
            },
            Event::ToolCallArgs {
                tool_call_id: "c".into(),
                delta: "1}".into(),
            },
            Event::ToolCallEnd {
                tool_call_id: "c".into(),
            },
            Event::ToolCallResult {
                message_id: "t".into(),
                tool_call_id: "c".into(),
                content: ToolResultContent::Text("ok".into()),
                role: Some("tool".into()),
            },
            Event::TextMessageStart {
                message_id: "m2".into(),
                role: None,
                name: None,
            },
            Event::TextMessageContent {
                message_id: "m2".into(),
                delta: "cut".into(),
            },
        ] {
            t.apply(&e);
        }
        let all = t.messages();
        assert_eq!(
            all[0],
            json!({"id": "r", "role": "reasoning", "content": "hm", "encryptedValue": "sig"})
        );
        assert_eq!(all[1]["content"], "Let me check.");
        assert_eq!(
            all[1]["toolCalls"][0]["function"],
            json!({"name": "f", "arguments": "{\"a\":1}"})
        );
        assert_eq!(
            all[2],
            json!({"id": "t", "role": "tool", "toolCallId": "c", "content": "ok"})
        );
        assert_eq!(all.len(), 4);
        // The unfinished last message is not among the complete ones.
        assert_eq!(t.complete_messages().len(), 3);
    }

    #[test]
    fn a_call_without_parent_creates_its_own_assistant_message() {
        let mut t = Transcript::default();
        t.apply(&Event::ToolCallStart {
            tool_call_id: "c".into(),
            tool_call_name: "f".into(),
            parent_message_id: Some("p".into()),
        });
        t.apply(&Event::ToolCallArgs {
            tool_call_id: "c".into(),
            delta: "{}".into(),
        });
        t.apply(&Event::ToolCallEnd {
            tool_call_id: "c".into(),
        });
        assert_eq!(t.complete_messages()[0]["id"], "p");
    }
}
