//! The Bedrock ConverseStream normaliser: the input picks a sequence of SDK stream events
//! (block starts, text / tool-input / reasoning deltas, block stops, message stop, metadata,
//! with small block indexes so they collide); any sequence gives model events or an error,
//! never a panic.
#![no_main]

use agui_gateway::model::bedrock::stream::StreamState;
use aws_sdk_bedrockruntime::primitives::Blob;
use aws_sdk_bedrockruntime::types::{
    ContentBlockDelta, ContentBlockDeltaEvent, ContentBlockStart, ContentBlockStartEvent,
    ContentBlockStopEvent, ConverseStreamMetadataEvent, ConverseStreamOutput, MessageStartEvent,
    MessageStopEvent, ReasoningContentBlockDelta, StopReason, TokenUsage, ToolUseBlockDelta,
    ToolUseBlockStart,
};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

fn text(u: &mut Unstructured) -> Result<String> {
    let n = u.int_in_range(0..=12)?;
    let bytes = u.bytes(n)?;
    Ok(String::from_utf8_lossy(bytes).into_owned())
}

fn event(u: &mut Unstructured) -> Result<ConverseStreamOutput> {
    let index = u.int_in_range(-1..=4)?;
    Ok(match u.int_in_range(0..=9)? {
        0 => ConverseStreamOutput::MessageStart(
            MessageStartEvent::builder()
                .role(aws_sdk_bedrockruntime::types::ConversationRole::Assistant)
                .build()
                .unwrap(),
        ),
        1 => ConverseStreamOutput::ContentBlockStart(
            ContentBlockStartEvent::builder()
                .content_block_index(index)
                .start(ContentBlockStart::ToolUse(
                    ToolUseBlockStart::builder()
                        .tool_use_id(text(u)?)
                        .name(text(u)?)
                        .build()
                        .unwrap(),
                ))
                .build()
                .unwrap(),
        ),
        2..=5 => {
            let delta = match u.int_in_range(0..=4)? {
                0 => ContentBlockDelta::Text(text(u)?),
                1 => ContentBlockDelta::ToolUse(
                    ToolUseBlockDelta::builder().input(text(u)?).build().unwrap(),
                ),
                2 => ContentBlockDelta::ReasoningContent(ReasoningContentBlockDelta::Text(text(u)?)),
                3 => ContentBlockDelta::ReasoningContent(ReasoningContentBlockDelta::Signature(
                    text(u)?,
                )),
                _ => ContentBlockDelta::ReasoningContent(
                    ReasoningContentBlockDelta::RedactedContent(Blob::new(text(u)?.into_bytes())),
                ),
            };
            ConverseStreamOutput::ContentBlockDelta(
                ContentBlockDeltaEvent::builder()
                    .content_block_index(index)
                    .delta(delta)
                    .build()
                    .unwrap(),
            )
        }
        6 | 7 => ConverseStreamOutput::ContentBlockStop(
            ContentBlockStopEvent::builder()
                .content_block_index(index)
                .build()
                .unwrap(),
        ),
        8 => ConverseStreamOutput::MessageStop(
            MessageStopEvent::builder()
                .stop_reason(match u.int_in_range(0..=6)? {
                    0 => StopReason::EndTurn,
                    1 => StopReason::ToolUse,
                    2 => StopReason::MaxTokens,
                    3 => StopReason::StopSequence,
                    4 => StopReason::ContentFiltered,
                    5 => StopReason::GuardrailIntervened,
                    _ => StopReason::from(text(u)?.as_str()),
                })
                .build()
                .unwrap(),
        ),
        _ => {
            let mut usage = TokenUsage::builder()
                .input_tokens(u.arbitrary()?)
                .output_tokens(u.arbitrary()?)
                .total_tokens(u.arbitrary()?);
            if u.arbitrary()? {
                usage = usage.cache_read_input_tokens(u.arbitrary()?);
            }
            if u.arbitrary()? {
                usage = usage.cache_write_input_tokens(u.arbitrary()?);
            }
            ConverseStreamOutput::Metadata(
                ConverseStreamMetadataEvent::builder()
                    .usage(usage.build().unwrap())
                    .build(),
            )
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let mut state = StreamState::default();
    while !u.is_empty() {
        let Ok(e) = event(&mut u) else { break };
        if state.step(e).is_err() {
            return;
        }
    }
    let _ = state.eof();
});
