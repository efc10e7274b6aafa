//! Anthropic Messages stream normalisation: a pure step over the documented SSE events
//! (`message_start`, `content_block_start/delta/stop`, `message_delta`, `message_stop`, `ping`,
//! `error`).

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value;

use crate::model::sse::SseNormaliser;
use crate::model::{ModelError, ModelEvent, StopReason, Usage};

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireEvent {
    MessageStart {
        message: WireMessage,
    },
    ContentBlockStart {
        index: u32,
        content_block: WireBlock,
    },
    ContentBlockDelta {
        index: u32,
        delta: WireDelta,
    },
    ContentBlockStop {
        index: u32,
    },
    MessageDelta {
        #[serde(default)]
        delta: MessageDeltaBody,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    MessageStop,
    Ping,
    Error {
        error: Value,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Default, Deserialize)]
struct WireMessage {
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Debug, Default, Deserialize)]
struct MessageDeltaBody {
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
    },
    RedactedThinking {
        data: String,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    ThinkingDelta {
        thinking: String,
    },
    SignatureDelta {
        signature: String,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Clone, PartialEq)]
enum Block {
    Text,
    Tool(String),
    Thinking,
    Other,
}

/// The normaliser's state for one model call.
#[derive(Debug, Default)]
pub struct StreamState {
    blocks: HashMap<u32, Block>,
    /// Input-side counts from `message_start`; Anthropic's `input_tokens` excludes cache reads
    /// and writes, AG-UI's `inputTokens` is the total.
    input: Usage,
    output_tokens: u64,
    stopped: bool,
}

fn map_stop(reason: &str) -> StopReason {
    match reason {
        "end_turn" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "refusal" => StopReason::ContentFiltered,
        other => StopReason::Other(other.to_string()),
    }
}

impl StreamState {
    /// Consumes one SSE event's data. Returns the model events and whether the message ended.
    pub fn step(&mut self, data: &str) -> Result<(Vec<ModelEvent>, bool), ModelError> {
        let event: WireEvent = serde_json::from_str(data)
            .map_err(|e| ModelError::Protocol(format!("unreadable Anthropic event: {e}")))?;
        let mut out = Vec::new();
        match event {
            WireEvent::MessageStart { message } => {
                if let Some(u) = message.usage {
                    let read = u.cache_read_input_tokens.unwrap_or(0);
                    let write = u.cache_creation_input_tokens.unwrap_or(0);
                    self.input = Usage {
                        input_tokens: u.input_tokens.unwrap_or(0) + read + write,
                        output_tokens: 0,
                        reasoning_tokens: None,
                        cached_input_tokens: u.cache_read_input_tokens,
                        cache_write_input_tokens: u.cache_creation_input_tokens,
                    };
                    self.output_tokens = u.output_tokens.unwrap_or(0);
                }
            }
            WireEvent::ContentBlockStart {
                index,
                content_block,
            } => {
                let block = match content_block {
                    WireBlock::Text { text } => {
                        if !text.is_empty() {
                            out.push(ModelEvent::TextDelta(text));
                        }
                        Block::Text
                    }
                    WireBlock::ToolUse { id, name } => {
                        out.push(ModelEvent::ToolCallStart {
                            id: id.clone(),
                            name,
                        });
                        Block::Tool(id)
                    }
                    WireBlock::Thinking { thinking } => {
                        if !thinking.is_empty() {
                            out.push(ModelEvent::ReasoningDelta(thinking));
                        }
                        Block::Thinking
                    }
                    WireBlock::RedactedThinking { data } => {
                        out.push(ModelEvent::RedactedReasoning(data));
                        Block::Other
                    }
                    WireBlock::Unknown => Block::Other,
                };
                self.blocks.insert(index, block);
            }
            WireEvent::ContentBlockDelta { index, delta } => {
                let block = self.blocks.get(&index).cloned().unwrap_or(Block::Other);
                match (delta, block) {
                    (WireDelta::TextDelta { text }, _) if !text.is_empty() => {
                        out.push(ModelEvent::TextDelta(text))
                    }
                    (WireDelta::InputJsonDelta { partial_json }, Block::Tool(id))
                        if !partial_json.is_empty() =>
                    {
                        out.push(ModelEvent::ToolCallDelta {
                            id,
                            delta: partial_json,
                        })
                    }
                    (WireDelta::InputJsonDelta { .. }, Block::Tool(_)) => {}
                    (WireDelta::InputJsonDelta { .. }, _) => {
                        return Err(ModelError::Protocol(format!(
                            "tool input for block {index}, which is no tool_use"
                        )));
                    }
                    (WireDelta::ThinkingDelta { thinking }, _) if !thinking.is_empty() => {
                        out.push(ModelEvent::ReasoningDelta(thinking))
                    }
                    (WireDelta::SignatureDelta { signature }, _) => {
                        out.push(ModelEvent::ReasoningSignature(signature))
                    }
                    _ => {}
                }
            }
            WireEvent::ContentBlockStop { index } => match self.blocks.remove(&index) {
                Some(Block::Tool(id)) => out.push(ModelEvent::ToolCallEnd { id }),
                Some(Block::Thinking) => out.push(ModelEvent::ReasoningEnd),
                _ => {}
            },
            WireEvent::MessageDelta { delta, usage } => {
                if let Some(o) = usage.and_then(|u| u.output_tokens) {
                    self.output_tokens = o;
                }
                if let Some(reason) = delta.stop_reason {
                    out.push(ModelEvent::Stop(map_stop(&reason)));
                }
            }
            WireEvent::MessageStop => {
                self.stopped = true;
                out.extend(self.close_open());
                out.push(ModelEvent::Usage(Usage {
                    output_tokens: self.output_tokens,
                    ..self.input
                }));
                return Ok((out, true));
            }
            WireEvent::Ping | WireEvent::Unknown => {}
            WireEvent::Error { error } => {
                let message = error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown error")
                    .to_string();
                let code = error
                    .get("type")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                return Err(ModelError::Upstream { message, code });
            }
        }
        Ok((out, false))
    }

    fn close_open(&mut self) -> Vec<ModelEvent> {
        let mut open: Vec<(u32, Block)> = self.blocks.drain().collect();
        open.sort_by_key(|(i, _)| *i);
        open.into_iter()
            .filter_map(|(_, b)| match b {
                Block::Tool(id) => Some(ModelEvent::ToolCallEnd { id }),
                _ => None,
            })
            .collect()
    }

    /// The connection ended: fine only after `message_stop`.
    pub fn eof(&mut self) -> Result<Vec<ModelEvent>, ModelError> {
        if self.stopped {
            return Ok(Vec::new());
        }
        Err(ModelError::Interrupted(
            "the connection closed before message_stop".into(),
        ))
    }
}

impl SseNormaliser for StreamState {
    fn event(&mut self, _name: &str, data: &str) -> Result<(Vec<ModelEvent>, bool), ModelError> {
        self.step(data)
    }

    fn eof(&mut self) -> Result<Vec<ModelEvent>, ModelError> {
        StreamState::eof(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(events: &[Value]) -> (Vec<ModelEvent>, StreamState) {
        let mut s = StreamState::default();
        let mut out = Vec::new();
        for e in events {
            let (evs, _) = s.step(&e.to_string()).unwrap();
            out.extend(evs);
        }
        (out, s)
    }

    #[test]
    fn thinking_text_and_interleaved_tool_input() {
        let (out, _) = run(&[
            json!({"type":"message_start","message":{"id":"m","usage":{"input_tokens":10,"cache_read_input_tokens":90,"cache_creation_input_tokens":5,"output_tokens":1}}}),
            json!({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me think"}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCg=="}}),
            json!({"type":"content_block_stop","index":0}),
            json!({"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}),
            json!({"type":"ping"}),
            json!({"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Checking."}}),
            json!({"type":"content_block_stop","index":1}),
            json!({"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}),
            json!({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}),
            json!({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}),
            json!({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"Paris\"}"}}),
            json!({"type":"content_block_stop","index":2}),
            json!({"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":42}}),
            json!({"type":"message_stop"}),
        ]);
        assert_eq!(
            out,
            vec![
                ModelEvent::ReasoningDelta("Let me think".into()),
                ModelEvent::ReasoningSignature("EqQBCg==".into()),
                ModelEvent::ReasoningEnd,
                ModelEvent::TextDelta("Checking.".into()),
                ModelEvent::ToolCallStart {
                    id: "toolu_1".into(),
                    name: "get_weather".into()
                },
                ModelEvent::ToolCallDelta {
                    id: "toolu_1".into(),
                    delta: "{\"city\":".into()
                },
                ModelEvent::ToolCallDelta {
                    id: "toolu_1".into(),
                    delta: "\"Paris\"}".into()
                },
                ModelEvent::ToolCallEnd {
                    id: "toolu_1".into()
                },
                ModelEvent::Stop(StopReason::ToolUse),
                ModelEvent::Usage(Usage {
                    input_tokens: 105,
                    output_tokens: 42,
                    reasoning_tokens: None,
                    cached_input_tokens: Some(90),
                    cache_write_input_tokens: Some(5)
                }),
            ]
        );
    }

    #[test]
    fn redacted_thinking_errors_and_cuts() {
        let (out, _) = run(&[
            json!({"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"EmwKAhgB"}}),
            json!({"type":"content_block_stop","index":0}),
        ]);
        assert_eq!(out, vec![ModelEvent::RedactedReasoning("EmwKAhgB".into())]);
        let mut s = StreamState::default();
        let e = s
            .step(
                &json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})
                    .to_string(),
            )
            .unwrap_err();
        assert_eq!(
            e,
            ModelError::Upstream {
                message: "Overloaded".into(),
                code: Some("overloaded_error".into())
            }
        );
        assert!(matches!(s.eof(), Err(ModelError::Interrupted(_))));
        let mut s = StreamState::default();
        assert!(s.step(r#"{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{"}}"#).is_err());
        assert!(s.step("not json").is_err());
    }
}
