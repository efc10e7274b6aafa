//! `RunAgentInput` parsing: any bytes give a parsed input or an error naming a field, never a
//! panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = agui_gateway::protocol::input::parse(data) {
        // Every refusal says what is wrong.
        assert!(!e.message.is_empty());
    }
});
