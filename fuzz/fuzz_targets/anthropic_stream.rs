//! The Anthropic Messages stream normaliser: each input line is `<event name> <data>`; any
//! sequence gives model events or an error, never a panic.
#![no_main]

use agui_gateway::model::anthropic::stream::StreamState;
use agui_gateway::model::sse::SseNormaliser;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut state = StreamState::default();
    for line in text.lines() {
        let (name, payload) = line.split_once(' ').unwrap_or(("", line));
        match state.event(name, payload) {
            Ok((_, true)) | Err(_) => return,
            Ok(_) => {}
        }
    }
    let _ = state.eof();
});
