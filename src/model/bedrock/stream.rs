//! Bedrock `ConverseStream` normalisation: a pure step over the SDK's stream events.

use std::collections::HashMap;

use aws_sdk_bedrockruntime::types::{
    ContentBlockDelta, ContentBlockStart, ConverseStreamOutput, ReasoningContentBlockDelta,
    StopReason as BStop,
};
use base64::Engine;

use crate::model::{ModelError, ModelEvent, StopReason, Usage};

#[derive(Debug, Clone, PartialEq)]
enum Block {
    Tool(String),
    Reasoning,
}

/// The normaliser's state for one model call.
#[derive(Debug, Default)]
pub struct StreamState {
    blocks: HashMap<i32, Block>,
    stopped: bool,
}

fn map_stop(reason: &BStop) -> StopReason {
    match reason {
        BStop::EndTurn => StopReason::EndTurn,
        BStop::ToolUse => StopReason::ToolUse,
        BStop::MaxTokens => StopReason::MaxTokens,
        BStop::StopSequence => StopReason::StopSequence,
        BStop::ContentFiltered => StopReason::ContentFiltered,
        BStop::GuardrailIntervened => StopReason::Other("guardrail_intervened".into()),
        other => StopReason::Other(other.as_str().to_string()),
    }
}

impl StreamState {
    /// Consumes one stream event.
    pub fn step(&mut self, event: ConverseStreamOutput) -> Result<Vec<ModelEvent>, ModelError> {
        let mut out = Vec::new();
        match event {
            ConverseStreamOutput::ContentBlockStart(e) => {
                if let Some(ContentBlockStart::ToolUse(t)) = e.start {
                    out.push(ModelEvent::ToolCallStart {
                        id: t.tool_use_id.clone(),
                        name: t.name,
                    });
                    self.blocks
                        .insert(e.content_block_index, Block::Tool(t.tool_use_id));
                }
            }
            ConverseStreamOutput::ContentBlockDelta(e) => {
                let index = e.content_block_index;
                match e.delta {
                    Some(ContentBlockDelta::Text(t)) if !t.is_empty() => {
                        out.push(ModelEvent::TextDelta(t))
                    }
                    Some(ContentBlockDelta::ToolUse(t)) => {
                        let Some(Block::Tool(id)) = self.blocks.get(&index) else {
                            return Err(ModelError::Protocol(format!(
                                "tool input for block {index} without a toolUse start"
                            )));
                        };
                        if !t.input.is_empty() {
                            out.push(ModelEvent::ToolCallDelta {
                                id: id.clone(),
                                delta: t.input,
                            });
                        }
                    }
                    Some(ContentBlockDelta::ReasoningContent(r)) => {
                        self.blocks.entry(index).or_insert(Block::Reasoning);
                        match r {
                            ReasoningContentBlockDelta::Text(t) if !t.is_empty() => {
                                out.push(ModelEvent::ReasoningDelta(t))
                            }
                            ReasoningContentBlockDelta::Signature(s) => {
                                out.push(ModelEvent::ReasoningSignature(s))
                            }
                            ReasoningContentBlockDelta::RedactedContent(b) => {
                                out.push(ModelEvent::RedactedReasoning(
                                    base64::engine::general_purpose::STANDARD.encode(b.as_ref()),
                                ))
                            }
                            _ => {}
                        }
                    }
                    _ => {}
                }
            }
            ConverseStreamOutput::ContentBlockStop(e) => {
                match self.blocks.remove(&e.content_block_index) {
                    Some(Block::Tool(id)) => out.push(ModelEvent::ToolCallEnd { id }),
                    Some(Block::Reasoning) => out.push(ModelEvent::ReasoningEnd),
                    None => {}
                }
            }
            ConverseStreamOutput::MessageStop(e) => {
                self.stopped = true;
                let mut open: Vec<(i32, Block)> = self.blocks.drain().collect();
                open.sort_by_key(|(i, _)| *i);
                for (_, b) in open {
                    if let Block::Tool(id) = b {
                        out.push(ModelEvent::ToolCallEnd { id });
                    }
                }
                out.push(ModelEvent::Stop(map_stop(&e.stop_reason)));
            }
            ConverseStreamOutput::Metadata(e) => {
                if let Some(u) = e.usage {
                    // Bedrock's inputTokens excludes cache reads and writes; AG-UI's is the total.
                    let read = u.cache_read_input_tokens.unwrap_or(0).max(0) as u64;
                    let write = u.cache_write_input_tokens.unwrap_or(0).max(0) as u64;
                    out.push(ModelEvent::Usage(Usage {
                        input_tokens: u.input_tokens.max(0) as u64 + read + write,
                        output_tokens: u.output_tokens.max(0) as u64,
                        reasoning_tokens: None,
                        cached_input_tokens: u.cache_read_input_tokens.map(|v| v.max(0) as u64),
                        cache_write_input_tokens: u
                            .cache_write_input_tokens
                            .map(|v| v.max(0) as u64),
                    }));
                }
            }
            ConverseStreamOutput::MessageStart(_) => {}
            _ => {}
        }
        Ok(out)
    }

    /// The event stream ended: fine after `messageStop`, a cut otherwise.
    pub fn eof(&self) -> Result<(), ModelError> {
        if self.stopped {
            Ok(())
        } else {
            Err(ModelError::Interrupted(
                "the event stream ended before messageStop".into(),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_bedrockruntime::primitives::Blob;
    use aws_sdk_bedrockruntime::types::{
        ContentBlockDeltaEvent, ContentBlockStartEvent, ContentBlockStopEvent,
        ConverseStreamMetadataEvent, MessageStopEvent, TokenUsage, ToolUseBlockDelta,
        ToolUseBlockStart,
    };

    fn start_tool(index: i32, id: &str, name: &str) -> ConverseStreamOutput {
        ConverseStreamOutput::ContentBlockStart(
            ContentBlockStartEvent::builder()
                .content_block_index(index)
                .start(ContentBlockStart::ToolUse(
                    ToolUseBlockStart::builder()
                        .tool_use_id(id)
                        .name(name)
                        .build()
                        .unwrap(),
                ))
                .build()
                .unwrap(),
        )
    }
    fn delta(index: i32, d: ContentBlockDelta) -> ConverseStreamOutput {
        ConverseStreamOutput::ContentBlockDelta(
            ContentBlockDeltaEvent::builder()
                .content_block_index(index)
                .delta(d)
                .build()
                .unwrap(),
        )
    }
    fn tool_input(s: &str) -> ContentBlockDelta {
        ContentBlockDelta::ToolUse(ToolUseBlockDelta::builder().input(s).build().unwrap())
    }
    fn stop_block(index: i32) -> ConverseStreamOutput {
        ConverseStreamOutput::ContentBlockStop(
            ContentBlockStopEvent::builder()
                .content_block_index(index)
                .build()
                .unwrap(),
        )
    }

    #[test]
    fn reasoning_text_parallel_tools_stop_and_usage() {
        let mut s = StreamState::default();
        let mut out = Vec::new();
        for e in [
            delta(
                0,
                ContentBlockDelta::ReasoningContent(ReasoningContentBlockDelta::Text("hmm".into())),
            ),
            delta(
                0,
                ContentBlockDelta::ReasoningContent(ReasoningContentBlockDelta::Signature(
                    "sig".into(),
                )),
            ),
            stop_block(0),
            delta(
                1,
                ContentBlockDelta::ReasoningContent(ReasoningContentBlockDelta::RedactedContent(
                    Blob::new(vec![1, 2, 3]),
                )),
            ),
            stop_block(1),
            delta(2, ContentBlockDelta::Text("Two calls.".into())),
            stop_block(2),
            start_tool(3, "a", "f"),
            start_tool(4, "b", "g"),
            delta(4, tool_input("{\"y\":")),
            delta(3, tool_input("{}")),
            delta(4, tool_input("2}")),
            stop_block(3),
            ConverseStreamOutput::MessageStop(
                MessageStopEvent::builder()
                    .stop_reason(BStop::ToolUse)
                    .build()
                    .unwrap(),
            ),
            ConverseStreamOutput::Metadata(
                ConverseStreamMetadataEvent::builder()
                    .usage(
                        TokenUsage::builder()
                            .input_tokens(10)
                            .output_tokens(5)
                            .total_tokens(20)
                            .cache_read_input_tokens(5)
                            .build()
                            .unwrap(),
                    )
                    .build(),
            ),
        ] {
            out.extend(s.step(e).unwrap());
        }
        assert_eq!(
            out,
            vec![
                ModelEvent::ReasoningDelta("hmm".into()),
                ModelEvent::ReasoningSignature("sig".into()),
                ModelEvent::ReasoningEnd,
                ModelEvent::RedactedReasoning("AQID".into()),
                ModelEvent::ReasoningEnd,
                ModelEvent::TextDelta("Two calls.".into()),
                ModelEvent::ToolCallStart {
                    id: "a".into(),
                    name: "f".into()
                },
                ModelEvent::ToolCallStart {
                    id: "b".into(),
                    name: "g".into()
                },
                ModelEvent::ToolCallDelta {
                    id: "b".into(),
                    delta: "{\"y\":".into()
                },
                ModelEvent::ToolCallDelta {
                    id: "a".into(),
                    delta: "{}".into()
                },
                ModelEvent::ToolCallDelta {
                    id: "b".into(),
                    delta: "2}".into()
                },
                ModelEvent::ToolCallEnd { id: "a".into() },
                ModelEvent::ToolCallEnd { id: "b".into() },
                ModelEvent::Stop(StopReason::ToolUse),
                ModelEvent::Usage(Usage {
                    input_tokens: 15,
                    output_tokens: 5,
                    reasoning_tokens: None,
                    cached_input_tokens: Some(5),
                    cache_write_input_tokens: None
                }),
            ]
        );
        assert!(s.eof().is_ok());
    }

    #[test]
    fn guardrails_and_cuts() {
        assert_eq!(
            map_stop(&BStop::GuardrailIntervened),
            StopReason::Other("guardrail_intervened".into())
        );
        assert_eq!(
            map_stop(&BStop::ModelContextWindowExceeded),
            StopReason::Other("model_context_window_exceeded".into())
        );
        let mut s = StreamState::default();
        assert!(
            s.step(delta(0, tool_input("{"))).is_err(),
            "input without a start"
        );
        assert!(matches!(s.eof(), Err(ModelError::Interrupted(_))));
    }
}
