//! The agent API's execute `input` (text, content blocks or messages): any JSON gives a
//! parsed input or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) {
        let _ = agui_gateway::conversation::standard::parse(&v);
        if let Some(input) = v.get("input") {
            let _ = agui_gateway::conversation::standard::parse(input);
        }
    }
});
