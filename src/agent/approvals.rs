//! Human approval of backend tool calls. A tool marked `requires_approval` is not run when the
//! model calls it: the run pauses (1.0 clients: `outcome: interrupt` with one interrupt per call;
//! 0.0.x clients: the call is left pending, like a frontend tool). The answer comes back in the
//! next request, as `resume[]` entries (1.0) or as the call's `tool` message holding
//! `{"approved": bool, "arguments"?: {...}}` (0.0.x); the gateway then runs (or refuses) the
//! call and streams its `TOOL_CALL_RESULT` under the original call id.

use serde_json::{Value, json};

use crate::conversation::{ContentBlock, Message, ToolResultBlock};
use crate::protocol::events::Interrupt;
use crate::protocol::input::{ResumeEntry, ResumeStatus};
use crate::tools::ToolOutput;

/// Interrupt ids are this prefix and the call id, so a resume needs no server-side state.
pub const INTERRUPT_PREFIX: &str = "approval:";

/// The result the model gets for a refused call.
pub const DENIED: &str = "The user denied this tool call; it was not run.";

/// A person's answer about one call.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The call.
    pub call_id: String,
    /// Whether it may run.
    pub approved: bool,
    /// Edited arguments, if the person changed them.
    pub arguments: Option<Value>,
}

fn decision_from_payload(call_id: &str, payload: Option<&Value>, default: bool) -> Decision {
    let approved = payload
        .and_then(|p| p.get("approved"))
        .and_then(Value::as_bool)
        .unwrap_or(default);
    let arguments = payload
        .and_then(|p| p.get("arguments"))
        .filter(|a| a.is_object())
        .cloned();
    Decision {
        call_id: call_id.to_string(),
        approved,
        arguments,
    }
}

/// Decisions from 1.0 `resume[]` entries: `resolved` approves unless the payload says
/// `approved: false`; `cancelled` refuses. Entries for other interrupts are reported.
pub fn from_resume(entries: &[ResumeEntry]) -> (Vec<Decision>, Vec<String>) {
    let mut out = Vec::new();
    let mut unknown = Vec::new();
    for e in entries {
        match e.interrupt_id.strip_prefix(INTERRUPT_PREFIX) {
            Some(call) => out.push(match e.status {
                ResumeStatus::Resolved => decision_from_payload(call, e.payload.as_ref(), true),
                ResumeStatus::Cancelled => Decision {
                    call_id: call.to_string(),
                    approved: false,
                    arguments: None,
                },
            }),
            None => unknown.push(format!(
                "resume entry for unknown interrupt {:?} ignored",
                e.interrupt_id
            )),
        }
    }
    (out, unknown)
}

/// Decisions sent as `tool` messages by clients without interrupts: the latest result of a call
/// to an approval-gated tool that is `{"approved": bool, ...}`.
pub fn from_tool_messages(messages: &[Message], gated: impl Fn(&str) -> bool) -> Vec<Decision> {
    let mut names = std::collections::HashMap::new();
    let mut out = Vec::new();
    for m in messages {
        for b in &m.content {
            match b {
                ContentBlock::ToolUse { id, name, .. } => {
                    names.insert(id.clone(), name.clone());
                }
                ContentBlock::ToolResult {
                    tool_use_id,
                    content,
                    ..
                } => {
                    let Some(name) = names.get(tool_use_id) else {
                        continue;
                    };
                    if !gated(name) {
                        continue;
                    }
                    let text = ToolResultBlock::joined_text(content);
                    if let Ok(v) = serde_json::from_str::<Value>(&text)
                        && v.get("approved").is_some_and(Value::is_boolean)
                    {
                        out.push(decision_from_payload(tool_use_id, Some(&v), false));
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// The tool name and arguments of call `id` in the history.
pub fn find_call(messages: &[Message], id: &str) -> Option<(String, Value)> {
    messages
        .iter()
        .flat_map(|m| m.content.iter())
        .find_map(|b| match b {
            ContentBlock::ToolUse {
                id: i, name, input, ..
            } if i == id => Some((name.clone(), input.clone())),
            _ => None,
        })
}

/// Puts the real result of call `id` where the history has its placeholder (or decision).
pub fn set_result(messages: &mut [Message], id: &str, out: &ToolOutput) -> bool {
    for m in messages.iter_mut() {
        for b in m.content.iter_mut() {
            if let ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
            } = b
                && tool_use_id == id
            {
                *content = vec![ToolResultBlock::Text {
                    text: out.text.clone(),
                }];
                *is_error = out.is_error;
                return true;
            }
        }
    }
    false
}

/// The interrupt asking for approval of one call.
pub fn interrupt(call_id: &str, tool: &str, arguments: &str) -> Interrupt {
    Interrupt {
        id: format!("{INTERRUPT_PREFIX}{call_id}"),
        reason: "tool_call".into(),
        message: Some(format!(
            "The assistant wants to run {tool} with {arguments}. Approve?"
        )),
        tool_call_id: Some(call_id.to_string()),
        response_schema: Some(json!({
            "type": "object",
            "properties": {
                "approved": {"type": "boolean", "description": "Whether the call may run"},
                "arguments": {"type": "object", "description": "Edited arguments (optional)"}
            },
            "required": ["approved"]
        })),
        expires_at: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::Role;

    #[test]
    fn resume_entries_and_tool_message_decisions() {
        let entries: Vec<ResumeEntry> = serde_json::from_value(json!([
            {"interruptId": "approval:c1", "status": "resolved", "payload": {"approved": true, "arguments": {"x": 1}}},
            {"interruptId": "approval:c2", "status": "resolved", "payload": {"approved": false}},
            {"interruptId": "approval:c3", "status": "cancelled"},
            {"interruptId": "other", "status": "resolved"}
        ]))
        .unwrap();
        let (d, unknown) = from_resume(&entries);
        assert_eq!(
            d[0],
            Decision {
                call_id: "c1".into(),
                approved: true,
                arguments: Some(json!({"x": 1}))
            }
        );
        assert!(!d[1].approved && !d[2].approved);
        assert_eq!(unknown.len(), 1);

        let messages = vec![
            Message {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::ToolUse {
                        id: "a".into(),
                        name: "gated".into(),
                        input: json!({}),
                        signature: None,
                    },
                    ContentBlock::ToolUse {
                        id: "b".into(),
                        name: "free".into(),
                        input: json!({}),
                        signature: None,
                    },
                ],
            },
            Message {
                role: Role::User,
                content: vec![
                    ContentBlock::ToolResult {
                        tool_use_id: "a".into(),
                        content: vec![ToolResultBlock::Text {
                            text: r#"{"approved": true}"#.into(),
                        }],
                        is_error: false,
                    },
                    ContentBlock::ToolResult {
                        tool_use_id: "b".into(),
                        content: vec![ToolResultBlock::Text {
                            text: r#"{"approved": true}"#.into(),
                        }],
                        is_error: false,
                    },
                ],
            },
        ];
        let d = from_tool_messages(&messages, |n| n == "gated");
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].call_id, "a");
        let mut messages = messages;
        assert!(set_result(&mut messages, "a", &ToolOutput::ok("done")));
        assert!(
            from_tool_messages(&messages, |n| n == "gated").is_empty(),
            "a real result is no decision"
        );
        assert_eq!(find_call(&messages, "b").unwrap().0, "free");
        assert_eq!(interrupt("a", "gated", "{}").id, "approval:a");
    }
}
