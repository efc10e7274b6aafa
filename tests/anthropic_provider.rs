/// Anthropic Messages against a local SSE server with the documented event sequence: text,
/// thinking with signatures (returned on later turns), redacted thinking, interleaved tool
/// input, cache-token usage, overload retries, in-stream errors, images and PDFs (bytes and URLs
/// fetched under the media policy).
mod common;

use common::*;
use serde_json::{Value, json};

fn config(up: &FakeOpenAi, extra_model: &str, extra_top: &str) -> String {
    // SAFETY: set before the gateway reads it; only this test binary uses the variable.
    unsafe { std::env::set_var("AGUI_TEST_ANTHROPIC_KEY", "sk-ant-test-key") };
    format!(
        r#"
{extra_top}
[[agents]]
id = "c"
system_prompt = "You are Claude via the gateway."
[agents.model]
provider = "anthropic/v1/messages"
model_id = "claude-sonnet-4-5"
base_url = "http://{addr}"
api_key_env = "AGUI_TEST_ANTHROPIC_KEY"
max_tokens = 2048
retry_initial_backoff_ms = 5
additional_model_request_fields = {{ thinking = {{ type = "enabled", budget_tokens = 1024 }} }}
{extra_model}
[[agents.tools]]
type = "http"
name = "get_weather"
description = "Current weather for a city"
url = "http://{addr}/weather"
parameters = {{ type = "object", properties = {{ city = {{ type = "string" }} }} }}
"#,
        addr = up.addr
    )
}

fn start(usage_in: u64) -> Value {
    json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
        "model": "claude-sonnet-4-5", "stop_reason": null,
        "usage": {"input_tokens": usage_in, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 20, "output_tokens": 1}}})
}

fn text_message(text: &str) -> Vec<Value> {
    vec![
        start(10),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "ping"}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 12}}),
        json!({"type": "message_stop"}),
    ]
}

fn v1(thread: &str, messages: Value) -> Value {
    let mut b = run_input(thread, messages);
    b["protocolVersion"] = json!("1.0");
    b
}

#[tokio::test]
async fn thinking_then_tool_use_then_text_with_signatures_kept() {
    let tool_turn = vec![
        start(50),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "I should look up the weather."}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQBCgIYAhIM"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking", "data": "EmwKAhgBEgy3"}}),
        json!({"type": "content_block_stop", "index": 1}),
        json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {}}}),
        json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": ""}}),
        json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"city\": \"Pa"}}),
        json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "ris\"}"}}),
        json!({"type": "content_block_stop", "index": 2}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 80}}),
        json!({"type": "message_stop"}),
    ];
    let up = FakeOpenAi::start(vec![
        Reply::Named(tool_turn),
        Reply::Named(text_message("Paris is sunny.")),
    ])
    .await;
    let gw = Gateway::start(&config(&up, "", "")).await;
    let events = gw
        .run(
            "c",
            &v1(
                "an-tools",
                json!([{"id": "u", "role": "user", "content": "Weather in Paris?"}]),
            ),
        )
        .await;
    assert_eq!(args_of(&events, "toolu_01"), r#"{"city": "Paris"}"#);
    assert_eq!(text(&events), "Paris is sunny.");
    let secrets: Vec<&str> = of_type(&events, "REASONING_ENCRYPTED_VALUE")
        .iter()
        .map(|e| e["encryptedValue"].as_str().unwrap())
        .collect();
    assert_eq!(secrets, ["EqQBCgIYAhIM", "redacted:EmwKAhgBEgy3"]);
    let auth = up.upstream.auth.lock().unwrap().clone();
    assert!(auth.contains(&"x-api-key: sk-ant-test-key".to_string()));
    assert!(auth.contains(&"anthropic-version: 2023-06-01".to_string()));

    let reqs = up.requests();
    assert_eq!(reqs[0]["model"], "claude-sonnet-4-5");
    assert_eq!(reqs[0]["max_tokens"], 2048);
    assert_eq!(reqs[0]["stream"], true);
    assert_eq!(reqs[0]["thinking"]["budget_tokens"], 1024);
    assert_eq!(
        reqs[0]["system"][0]["text"],
        "You are Claude via the gateway."
    );
    assert_eq!(reqs[0]["tools"][0]["input_schema"]["type"], "object");
    // The tool-use turn goes back with its thinking blocks and signatures, then the result.
    let msgs = reqs[1]["messages"].as_array().unwrap();
    assert_eq!(msgs[1]["role"], "assistant");
    assert_eq!(
        msgs[1]["content"][0],
        json!({"type": "thinking", "thinking": "I should look up the weather.", "signature": "EqQBCgIYAhIM"})
    );
    assert_eq!(
        msgs[1]["content"][1],
        json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3"})
    );
    assert_eq!(msgs[1]["content"][2]["type"], "tool_use");
    assert_eq!(msgs[1]["content"][2]["input"], json!({"city": "Paris"}));
    assert_eq!(msgs[2]["content"][0]["type"], "tool_result");
    assert_eq!(msgs[2]["content"][0]["tool_use_id"], "toolu_01");
    // Cache tokens are parts of the input total.
    let usage = &events.last().unwrap()["usage"][0];
    assert_eq!(usage["inputTokens"], (50 + 120) + (10 + 120));
    assert_eq!(usage["cachedInputTokens"], 200);
    assert_eq!(usage["cacheWriteInputTokens"], 40);
    assert_eq!(usage["outputTokens"], 92);
}

#[tokio::test]
async fn overload_is_retried_and_an_in_stream_error_ends_the_run() {
    let failing = vec![
        start(10),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Half"}}),
        json!({"type": "error", "error": {"type": "api_error", "message": "Internal server error"}}),
    ];
    let up = FakeOpenAi::start(vec![
        Reply::Status(
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#.into(),
        ),
        Reply::Named(text_message("Back.")),
        Reply::Named(failing),
    ])
    .await;
    let gw = Gateway::start(&config(&up, "", "")).await;
    let events = gw
        .run(
            "c",
            &v1(
                "an-529",
                json!([{"id": "u", "role": "user", "content": "hi"}]),
            ),
        )
        .await;
    assert_eq!(text(&events), "Back.");
    let events = gw
        .run(
            "c",
            &v1(
                "an-err",
                json!([{"id": "u", "role": "user", "content": "hi"}]),
            ),
        )
        .await;
    let last = events.last().unwrap();
    assert_eq!(
        (last["type"].as_str(), last["code"].as_str()),
        (Some("RUN_ERROR"), Some("UPSTREAM_ERROR"))
    );
    assert!(
        last["message"]
            .as_str()
            .unwrap()
            .contains("Internal server error")
    );
    assert_eq!(events[events.len() - 2]["type"], "TEXT_MESSAGE_END");
    assert_eq!(
        up.requests().len(),
        3,
        "an error after output is not retried"
    );
}

#[tokio::test]
async fn images_and_pdfs_as_bytes_and_urls_and_audio_dropped() {
    let up = FakeOpenAi::start(vec![Reply::Named(text_message("Seen."))]).await;
    let gw = Gateway::start(&config(&up, "", "")).await;
    let body = v1(
        "an-media",
        json!([{"id": "u", "role": "user", "content": [
            {"type": "text", "text": "Compare"},
            {"type": "image", "source": {"type": "data", "value": "iVBORw0KGgo=", "mimeType": "image/png"}},
            {"type": "image", "source": {"type": "url", "value": "https://example.com/cat.jpg"}},
            {"type": "document", "source": {"type": "data", "value": "JVBERi0xLjQ=", "mimeType": "application/pdf"}},
            {"type": "audio", "source": {"type": "data", "value": "UklGRg==", "mimeType": "audio/wav"}}
        ]}]),
    );
    let events = gw.run("c", &body).await;
    let dropped = of_type(&events, "CUSTOM")
        .into_iter()
        .find(|e| e["name"] == "content_dropped")
        .unwrap();
    assert_eq!(dropped["value"][0]["kind"], "audio");
    let content = &up.requests()[0]["messages"][0]["content"];
    assert_eq!(content.as_array().unwrap().len(), 4);
    assert_eq!(
        content[1]["source"],
        json!({"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="})
    );
    assert_eq!(
        content[2]["source"],
        json!({"type": "url", "url": "https://example.com/cat.jpg"}),
        "Anthropic fetches URLs itself"
    );
    assert_eq!(content[3]["source"]["media_type"], "application/pdf");
}
