//! AG-UI history -> unified conversation. The client re-sends the whole history each run; this
//! turns it into strictly alternating turns every provider accepts: consecutive `tool` messages
//! become one tool-result turn, reasoning rides on the assistant turn that follows it, and a
//! tool call left without a result gets an explicit "not executed" result.

use std::collections::HashSet;

use serde_json::Value;

use super::{
    ContentBlock, Conversation, Media, MediaKind, MediaSource, Message, Role, ToolResultBlock,
    reasoning_block,
};
use crate::protocol::input::{Content, ContextItem, InputMessage, Part, Source};

/// The result given to the model for a call that never got one.
pub const NOT_EXECUTED: &str = "Tool call was not executed: no result was received for it (the user may have left or cancelled).";

/// A converted history and what the conversion had to drop or repair.
#[derive(Debug, Default)]
pub struct Converted {
    /// The conversation to send to a model (without the agent's own system prompt).
    pub conversation: Conversation,
    /// Human-readable notes about dropped or repaired content.
    pub notices: Vec<String>,
    /// Every tool-call id in the history (a resumed run may answer them).
    pub tool_call_ids: Vec<String>,
    /// Calls that had no result and were given a "not executed" one.
    pub unanswered: Vec<String>,
}

/// Converts AG-UI messages to the unified model.
pub fn convert(messages: &[InputMessage]) -> Converted {
    let mut out = Converted::default();
    let mut turns: Vec<Message> = Vec::new();
    let mut pending_reasoning: Vec<ContentBlock> = Vec::new();
    for msg in messages {
        match msg {
            InputMessage::System { content, .. } | InputMessage::Developer { content, .. } => {
                let text = content.text();
                if !text.trim().is_empty() {
                    out.conversation.system.push(text);
                }
            }
            InputMessage::User { content, .. } => {
                let blocks = content_blocks(content, &mut out.notices);
                push_turn(&mut turns, Role::User, blocks);
            }
            InputMessage::Assistant {
                content,
                tool_calls,
                ..
            } => {
                let mut blocks = std::mem::take(&mut pending_reasoning);
                let text = content.text();
                if !text.is_empty() {
                    blocks.push(ContentBlock::Text { text });
                }
                for call in tool_calls {
                    out.tool_call_ids.push(call.id.clone());
                    blocks.push(ContentBlock::ToolUse {
                        id: call.id.clone(),
                        name: call.function.name.clone(),
                        input: parse_arguments(
                            &call.function.arguments,
                            &call.id,
                            &mut out.notices,
                        ),
                        signature: call.encrypted_value.clone(),
                    });
                }
                push_turn(&mut turns, Role::Assistant, blocks);
            }
            InputMessage::Tool {
                content,
                tool_call_id,
                error,
                ..
            } => {
                let mut result = result_blocks(content, &mut out.notices);
                if let Some(err) = error
                    && result.is_empty()
                {
                    result.push(ToolResultBlock::Text { text: err.clone() });
                }
                let block = ContentBlock::ToolResult {
                    tool_use_id: tool_call_id.clone(),
                    content: result,
                    is_error: error.is_some(),
                };
                push_turn(&mut turns, Role::User, vec![block]);
            }
            InputMessage::Reasoning {
                content,
                encrypted_value,
                ..
            } => {
                pending_reasoning.push(reasoning_block(content.text(), encrypted_value.as_deref()));
            }
            InputMessage::Display => {}
        }
    }
    if !pending_reasoning.is_empty() {
        out.notices
            .push("dropped reasoning that no assistant message followed".into());
    }
    repair_tool_pairs(&mut turns, &mut out.notices, &mut out.unanswered);
    out.conversation.messages = turns;
    out
}

/// Renders `context` entries as one system block for the model request (never stored).
pub fn context_prompt(items: &[ContextItem]) -> Option<String> {
    if items.is_empty() {
        return None;
    }
    let mut s = String::from("Context provided by the application:");
    for item in items {
        s.push_str("\n- ");
        if !item.description.is_empty() {
            s.push_str(&item.description);
            s.push_str(": ");
        }
        s.push_str(&item.value);
    }
    Some(s)
}

fn push_turn(turns: &mut Vec<Message>, role: Role, blocks: Vec<ContentBlock>) {
    if blocks.is_empty() {
        return;
    }
    match turns.last_mut() {
        Some(last) if last.role == role => last.content.extend(blocks),
        _ => turns.push(Message {
            role,
            content: blocks,
        }),
    }
}

fn parse_arguments(args: &str, id: &str, notices: &mut Vec<String>) -> Value {
    if args.trim().is_empty() {
        return Value::Object(Default::default());
    }
    match serde_json::from_str::<Value>(args) {
        Ok(v @ Value::Object(_)) => v,
        Ok(other) => {
            notices.push(format!(
                "arguments of tool call {id} are not a JSON object; wrapped"
            ));
            serde_json::json!({ "value": other })
        }
        Err(_) => {
            notices.push(format!(
                "arguments of tool call {id} are not valid JSON; kept as text"
            ));
            serde_json::json!({ "raw_arguments": args })
        }
    }
}

fn media_from_part(part: &Part, notices: &mut Vec<String>) -> Option<Media> {
    let (kind, source) = match part {
        Part::Image { source } => (MediaKind::Image, source),
        Part::Audio { source } => (MediaKind::Audio, source),
        Part::Video { source } => (MediaKind::Video, source),
        Part::Document { source } => (MediaKind::Document, source),
        Part::Binary {
            mime_type,
            data,
            url,
            id,
            filename,
        } => {
            let mime = mime_type.clone();
            let kind = MediaKind::from_mime(mime.as_deref().unwrap_or(""));
            let source = if let Some(d) = data {
                MediaSource::Base64 { data: d.clone() }
            } else if let Some(u) = url {
                MediaSource::Url { url: u.clone() }
            } else if let Some(i) = id {
                MediaSource::File {
                    id: i.clone(),
                    provider: None,
                }
            } else {
                notices.push("dropped a binary part with neither data, url nor id".into());
                return None;
            };
            return Some(Media {
                kind,
                mime_type: mime,
                source,
                filename: filename.clone(),
            });
        }
        Part::Text { .. } => return None,
        Part::Unknown => {
            notices.push("dropped a content part of an unknown type".into());
            return None;
        }
    };
    let (source, mime_type) = match source {
        Source::Data { value, mime_type } => (
            MediaSource::Base64 {
                data: value.clone(),
            },
            Some(mime_type.clone()),
        ),
        Source::Url { value, mime_type } => {
            (MediaSource::Url { url: value.clone() }, mime_type.clone())
        }
        Source::File {
            value,
            provider,
            mime_type,
        } => (
            MediaSource::File {
                id: value.clone(),
                provider: provider.clone(),
            },
            mime_type.clone(),
        ),
    };
    Some(Media {
        kind,
        mime_type,
        source,
        filename: None,
    })
}

fn content_blocks(content: &Content, notices: &mut Vec<String>) -> Vec<ContentBlock> {
    match content {
        Content::Empty => Vec::new(),
        Content::Text(t) if t.is_empty() => Vec::new(),
        Content::Text(t) => vec![ContentBlock::Text { text: t.clone() }],
        Content::Parts(parts) => parts
            .iter()
            .filter_map(|p| match p {
                Part::Text { text } if text.is_empty() => None,
                Part::Text { text } => Some(ContentBlock::Text { text: text.clone() }),
                other => media_from_part(other, notices).map(ContentBlock::Media),
            })
            .collect(),
    }
}

fn result_blocks(content: &Content, notices: &mut Vec<String>) -> Vec<ToolResultBlock> {
    content_blocks(content, notices)
        .into_iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(ToolResultBlock::Text { text }),
            ContentBlock::Media(m) => Some(ToolResultBlock::Media(m)),
            _ => None,
        })
        .collect()
}

/// Makes every tool use answered by exactly one result in the next turn, results first in
/// that turn, and turns results that answer nothing into text so no content is lost.
fn repair_tool_pairs(
    turns: &mut Vec<Message>,
    notices: &mut Vec<String>,
    unanswered: &mut Vec<String>,
) {
    let mut i = 0;
    while i < turns.len() {
        if turns[i].role == Role::User {
            // A user turn not preceded by an assistant tool-use turn: any results are orphans.
            let expected: HashSet<String> = HashSet::new();
            let prev_is_tool_turn = i > 0 && has_tool_use(&turns[i - 1]);
            if !prev_is_tool_turn {
                orphan_results_to_text(&mut turns[i], &expected, notices);
            }
            i += 1;
            continue;
        }
        let uses: Vec<String> = turns[i]
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::ToolUse { id, .. } => Some(id.clone()),
                _ => None,
            })
            .collect();
        if uses.is_empty() {
            i += 1;
            continue;
        }
        if turns.get(i + 1).is_none_or(|m| m.role != Role::User) {
            turns.insert(
                i + 1,
                Message {
                    role: Role::User,
                    content: Vec::new(),
                },
            );
        }
        let next = &mut turns[i + 1];
        let expected: HashSet<String> = uses.iter().cloned().collect();
        orphan_results_to_text(next, &expected, notices);
        // Results in the order of the uses, then the rest of the turn.
        let mut results = Vec::with_capacity(uses.len());
        let mut rest = Vec::new();
        let mut found: Vec<Option<ContentBlock>> = vec![None; uses.len()];
        for b in next.content.drain(..) {
            match &b {
                ContentBlock::ToolResult { tool_use_id, .. } => {
                    // The latest result of a call wins: an approval decision is followed by
                    // the result of the approved run.
                    if let Some(k) = uses.iter().position(|u| u == tool_use_id)
                        && found[k].replace(b).is_some()
                    {
                        tracing::debug!(call = %uses[k], "kept the latest of several results for a tool call");
                    }
                }
                _ => rest.push(b),
            }
        }
        for (k, f) in found.into_iter().enumerate() {
            results.push(f.unwrap_or_else(|| {
                unanswered.push(uses[k].clone());
                ContentBlock::ToolResult {
                    tool_use_id: uses[k].clone(),
                    content: vec![ToolResultBlock::Text {
                        text: NOT_EXECUTED.into(),
                    }],
                    is_error: true,
                }
            }));
        }
        results.extend(rest);
        next.content = results;
        i += 2;
    }
}

fn has_tool_use(m: &Message) -> bool {
    m.role == Role::Assistant
        && m.content
            .iter()
            .any(|b| matches!(b, ContentBlock::ToolUse { .. }))
}

fn orphan_results_to_text(
    turn: &mut Message,
    expected: &HashSet<String>,
    notices: &mut Vec<String>,
) {
    for b in turn.content.iter_mut() {
        if let ContentBlock::ToolResult {
            tool_use_id,
            content,
            ..
        } = b
            && !expected.contains(tool_use_id)
        {
            notices.push(format!(
                "result for unknown tool call {tool_use_id} kept as text"
            ));
            let text = format!(
                "[Result of tool call {tool_use_id}]\n{}",
                ToolResultBlock::joined_text(content)
            );
            *b = ContentBlock::Text { text };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::input::parse;

    fn conv(messages: &str) -> Converted {
        let body = format!(r#"{{"threadId":"t","runId":"r","messages":{messages}}}"#);
        convert(&parse(body.as_bytes()).unwrap().messages)
    }

    #[test]
    fn tool_calls_and_consecutive_results_become_one_turn_each() {
        let c = conv(
            r#"[{"id":"s","role":"system","content":"be brief"},
                {"id":"1","role":"user","content":"hi"},
                {"id":"2","role":"assistant","content":"let me see","toolCalls":[
                   {"id":"a","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}},
                   {"id":"b","type":"function","function":{"name":"g","arguments":""}}]},
                {"id":"3","role":"tool","toolCallId":"b","content":"B"},
                {"id":"4","role":"tool","toolCallId":"a","content":"A","error":"boom"},
                {"id":"5","role":"assistant","content":"done"}]"#,
        );
        let m = &c.conversation.messages;
        assert_eq!(c.conversation.system, vec!["be brief"]);
        assert_eq!(m.len(), 4);
        assert_eq!(m[1].role, Role::Assistant);
        assert!(
            matches!(&m[1].content[1], ContentBlock::ToolUse { id, input, .. } if id == "a" && input["x"] == 1)
        );
        assert!(
            matches!(&m[1].content[2], ContentBlock::ToolUse { input, .. } if input == &serde_json::json!({}))
        );
        // Results follow the order of the calls, in one user turn.
        assert_eq!(m[2].role, Role::User);
        assert_eq!(m[2].content.len(), 2);
        assert!(
            matches!(&m[2].content[0], ContentBlock::ToolResult { tool_use_id, is_error: true, .. } if tool_use_id == "a")
        );
        assert!(
            matches!(&m[2].content[1], ContentBlock::ToolResult { tool_use_id, is_error: false, .. } if tool_use_id == "b")
        );
        assert_eq!(c.tool_call_ids, vec!["a", "b"]);
        assert!(c.notices.is_empty(), "{:?}", c.notices);
    }

    #[test]
    fn a_call_without_result_is_answered_as_not_executed() {
        let c = conv(
            r#"[{"id":"1","role":"user","content":"hi"},
                {"id":"2","role":"assistant","toolCalls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]},
                {"id":"3","role":"user","content":"never mind"}]"#,
        );
        let m = &c.conversation.messages;
        assert_eq!(m.len(), 3);
        assert!(
            matches!(&m[2].content[0], ContentBlock::ToolResult { tool_use_id, is_error: true, content }
            if tool_use_id == "a" && ToolResultBlock::joined_text(content) == NOT_EXECUTED)
        );
        assert_eq!(m[2].text(), "never mind");
        // And at the very end of the history too.
        let c = conv(
            r#"[{"id":"1","role":"user","content":"hi"},
                {"id":"2","role":"assistant","toolCalls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]}]"#,
        );
        assert_eq!(c.conversation.messages.len(), 3);
    }

    #[test]
    fn orphan_results_become_text_and_reasoning_rides_on_the_next_assistant_turn() {
        let c = conv(
            r#"[{"id":"1","role":"user","content":"hi"},
                {"id":"2","role":"tool","toolCallId":"zzz","content":"lost"},
                {"id":"3","role":"reasoning","content":"thinking","encryptedValue":"sig"},
                {"id":"3b","role":"reasoning","content":"","encryptedValue":"redacted:QUJD"},
                {"id":"4","role":"assistant","content":"hello"},
                {"id":"5","role":"activity","activityType":"x","content":{}}]"#,
        );
        let m = &c.conversation.messages;
        assert_eq!(m.len(), 2);
        assert!(m[0].text().contains("lost"));
        assert!(
            matches!(&m[1].content[0], ContentBlock::Reasoning { text, signature: Some(s) } if text == "thinking" && s == "sig")
        );
        assert_eq!(
            m[1].content[1],
            ContentBlock::RedactedReasoning {
                data: "QUJD".into()
            }
        );
    }

    #[test]
    fn media_parts_and_legacy_binary_become_media_blocks() {
        let c = conv(
            r#"[{"id":"1","role":"user","content":[
                 {"type":"text","text":"what is this"},
                 {"type":"image","source":{"type":"data","value":"QUJD","mimeType":"image/png"}},
                 {"type":"binary","mimeType":"application/pdf","id":"file-9","filename":"a.pdf"},
                 {"type":"mystery"}]}]"#,
        );
        let m = &c.conversation.messages[0];
        assert_eq!(m.content.len(), 3);
        assert!(
            matches!(&m.content[1], ContentBlock::Media(Media { kind: MediaKind::Image, source: MediaSource::Base64 { data }, .. }) if data == "QUJD")
        );
        assert!(
            matches!(&m.content[2], ContentBlock::Media(Media { kind: MediaKind::Document, source: MediaSource::File { id, .. }, filename: Some(f), .. }) if id == "file-9" && f == "a.pdf")
        );
        assert_eq!(c.notices.len(), 1);
    }

    #[test]
    fn context_is_rendered_for_the_model() {
        let items = vec![ContextItem {
            description: "user name".into(),
            value: "Ada".into(),
        }];
        assert_eq!(
            context_prompt(&items).unwrap(),
            "Context provided by the application:\n- user name: Ada"
        );
        assert!(context_prompt(&[]).is_none());
    }
}
