//! The OpenAI-compatible stream normaliser: each input line is one SSE `data:` payload; any
//! sequence gives model events or an error, never a panic.
#![no_main]

use agui_gateway::model::openai::stream::StreamState;
use agui_gateway::model::sse::SseNormaliser;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut state = StreamState::default();
    for line in text.lines() {
        match state.event("", line) {
            Ok((_, true)) | Err(_) => return,
            Ok(_) => {}
        }
    }
    let _ = state.eof();
});
