/// Bedrock through the real AWS SDK against a local server speaking AWS event-stream frames:
/// text, parallel tool use with results bundled in one turn, reasoning signatures returned on
/// the next run, throttling then success, mid-stream exceptions, images as bytes, guardrails,
/// and both SigV4 credentials and Bedrock API keys.
mod common;

use common::bedrock_fake::{
    BedrockReply, FakeBedrock, metadata_event, text_events, tool_use_events,
};
use common::*;
use serde_json::{Value, json};

const MODEL: &str = "us.anthropic.claude-3-7-sonnet-20250219-v1:0";

fn config(bedrock: &FakeBedrock, tools: &FakeOpenAi, auth: &str) -> String {
    format!(
        r#"
[[agents]]
id = "b"
system_prompt = "You are on Bedrock."
[agents.model]
provider = "bedrock/converse"
model_id = "{MODEL}"
region = "us-east-1"
endpoint_url = "{endpoint}"
temperature = 0.3
top_p = 0.9
max_tokens = 500
retry_initial_backoff_ms = 5
additional_model_request_fields = {{ thinking = {{ type = "enabled", budget_tokens = 1024 }} }}
{auth}
[[agents.tools]]
type = "http"
name = "get_weather"
description = "Current weather for a city"
url = "http://{tools}/weather"
parameters = {{ type = "object", properties = {{ city = {{ type = "string" }} }} }}
"#,
        endpoint = bedrock.endpoint(),
        tools = tools.addr,
    )
}

const STATIC_CREDS: &str = "[agents.model.credential]\naccess_key = \"AKIDEXAMPLE\"\nsecret_key = \"wJalrXUtnFEMI-secret\"";

async fn setup(replies: Vec<BedrockReply>) -> (FakeBedrock, FakeOpenAi, Gateway) {
    let bedrock = FakeBedrock::start(replies).await;
    let tools = FakeOpenAi::start(vec![]).await;
    let gw = Gateway::start(&config(&bedrock, &tools, STATIC_CREDS)).await;
    (bedrock, tools, gw)
}

fn v1(thread: &str, messages: Value) -> Value {
    let mut b = run_input(thread, messages);
    b["protocolVersion"] = json!("1.0");
    b
}

#[tokio::test]
async fn text_streams_and_the_request_carries_system_inference_and_extra_fields() {
    let (bedrock, _t, gw) = setup(vec![BedrockReply::Events(text_events(
        "Hello from Bedrock",
    ))])
    .await;
    let events = gw
        .run(
            "b",
            &v1(
                "bt-text",
                json!([{"id": "u", "role": "user", "content": "hi"}]),
            ),
        )
        .await;
    assert_eq!(text(&events), "Hello from Bedrock");
    let usage = &events.last().unwrap()["usage"][0];
    assert_eq!(
        (usage["provider"].as_str(), usage["inputTokens"].as_u64()),
        (Some("bedrock"), Some(10))
    );
    let req = &bedrock.requests()[0];
    assert!(
        req.path.contains(MODEL) && req.path.ends_with("/converse-stream"),
        "{}",
        req.path
    );
    assert!(
        req.headers["authorization"]
            .to_str()
            .unwrap()
            .starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    );
    let body = &req.body;
    assert_eq!(body["system"][0]["text"], "You are on Bedrock.");
    assert_eq!(
        body["messages"][0],
        json!({"role": "user", "content": [{"text": "hi"}]})
    );
    assert_eq!(body["inferenceConfig"]["maxTokens"], 500);
    assert!((body["inferenceConfig"]["temperature"].as_f64().unwrap() - 0.3).abs() < 1e-6);
    assert!(
        body["inferenceConfig"].get("topP").is_none(),
        "Claude rejects temperature and top_p together"
    );
    assert_eq!(
        body["additionalModelRequestFields"]["thinking"]["budget_tokens"],
        1024
    );
    assert_eq!(
        body["toolConfig"]["tools"][0]["toolSpec"]["name"],
        "get_weather"
    );
    assert_eq!(
        body["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"]["type"],
        "object"
    );
}

#[tokio::test]
async fn parallel_tool_use_results_return_in_one_user_turn() {
    let turn = vec![
        ("messageStart", json!({"role": "assistant"})),
        (
            "contentBlockStart",
            json!({"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "tu_a", "name": "get_weather"}}}),
        ),
        (
            "contentBlockStart",
            json!({"contentBlockIndex": 1, "start": {"toolUse": {"toolUseId": "tu_b", "name": "get_weather"}}}),
        ),
        (
            "contentBlockDelta",
            json!({"contentBlockIndex": 1, "delta": {"toolUse": {"input": "{\"city\":"}}}),
        ),
        (
            "contentBlockDelta",
            json!({"contentBlockIndex": 0, "delta": {"toolUse": {"input": "{\"city\":\"Oslo\"}"}}}),
        ),
        (
            "contentBlockDelta",
            json!({"contentBlockIndex": 1, "delta": {"toolUse": {"input": "\"Atlantis\"}"}}}),
        ),
        ("contentBlockStop", json!({"contentBlockIndex": 0})),
        ("contentBlockStop", json!({"contentBlockIndex": 1})),
        ("messageStop", json!({"stopReason": "tool_use"})),
        metadata_event(20, 8),
    ];
    let (bedrock, tools, gw) = setup(vec![
        BedrockReply::Events(turn),
        BedrockReply::Events(text_events("Oslo is sunny.")),
    ])
    .await;
    let events = gw
        .run(
            "b",
            &v1(
                "bt-tools",
                json!([{"id": "u", "role": "user", "content": "Oslo and Atlantis?"}]),
            ),
        )
        .await;
    assert_eq!(args_of(&events, "tu_a"), r#"{"city":"Oslo"}"#);
    assert_eq!(args_of(&events, "tu_b"), r#"{"city":"Atlantis"}"#);
    assert_eq!(of_type(&events, "TOOL_CALL_RESULT").len(), 2);
    assert_eq!(tools.upstream.tool_calls.lock().unwrap().len(), 2);
    let second = &bedrock.requests()[1].body["messages"];
    let n = second.as_array().unwrap().len();
    let assistant = &second[n - 2];
    assert_eq!(assistant["content"][0]["toolUse"]["toolUseId"], "tu_a");
    assert_eq!(
        assistant["content"][0]["toolUse"]["input"],
        json!({"city": "Oslo"})
    );
    let results = second[n - 1]["content"].as_array().unwrap();
    assert_eq!(results.len(), 2, "both results in one user turn");
    assert_eq!(results[0]["toolResult"]["toolUseId"], "tu_a");
    assert_eq!(results[1]["toolResult"]["toolUseId"], "tu_b");
    assert_eq!(results[1]["toolResult"]["status"], "error");
    // Usage of both calls is summed.
    assert_eq!(events.last().unwrap()["usage"][0]["inputTokens"], 30);
}

#[tokio::test]
async fn reasoning_streams_and_its_signature_goes_back_on_the_next_run() {
    let turn = vec![
        ("messageStart", json!({"role": "assistant"})),
        (
            "contentBlockDelta",
            json!({"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "The user greets me."}}}),
        ),
        (
            "contentBlockDelta",
            json!({"contentBlockIndex": 0, "delta": {"reasoningContent": {"signature": "c2lnbmF0dXJl"}}}),
        ),
        ("contentBlockStop", json!({"contentBlockIndex": 0})),
        (
            "contentBlockDelta",
            json!({"contentBlockIndex": 1, "delta": {"reasoningContent": {"redactedContent": "AQID"}}}),
        ),
        ("contentBlockStop", json!({"contentBlockIndex": 1})),
        (
            "contentBlockStart",
            json!({"contentBlockIndex": 2, "start": {"toolUse": {"toolUseId": "tu_r", "name": "get_weather"}}}),
        ),
        (
            "contentBlockDelta",
            json!({"contentBlockIndex": 2, "delta": {"toolUse": {"input": "{\"city\":\"Rome\"}"}}}),
        ),
        ("contentBlockStop", json!({"contentBlockIndex": 2})),
        ("messageStop", json!({"stopReason": "tool_use"})),
        metadata_event(10, 5),
    ];
    let (bedrock, _t, gw) = setup(vec![
        BedrockReply::Events(turn),
        BedrockReply::Events(text_events("Sunny in Rome.")),
        BedrockReply::Events(text_events("You are welcome.")),
    ])
    .await;
    let history = json!([{"id": "u1", "role": "user", "content": "Weather in Rome?"}]);
    let events = gw.run("b", &v1("bt-think", history.clone())).await;
    let t = types(&events);
    assert_eq!(
        &t[1..5],
        [
            "REASONING_START",
            "REASONING_MESSAGE_START",
            "REASONING_MESSAGE_CONTENT",
            "REASONING_MESSAGE_END"
        ]
    );
    let secrets = of_type(&events, "REASONING_ENCRYPTED_VALUE");
    assert_eq!(secrets.len(), 2);
    assert_eq!(secrets[0]["encryptedValue"], "c2lnbmF0dXJl");
    assert_eq!(secrets[0]["subtype"], "message");
    assert_eq!(secrets[1]["encryptedValue"], "redacted:AQID");
    // Within the run, the tool-use turn went back with its thinking blocks intact.
    let second = &bedrock.requests()[1].body["messages"];
    assert_eq!(
        second[1]["content"][0]["reasoningContent"]["reasoningText"]["signature"],
        "c2lnbmF0dXJl"
    );
    assert_eq!(
        second[1]["content"][1]["reasoningContent"]["redactedContent"],
        "AQID"
    );
    assert_eq!(second[1]["content"][2]["toolUse"]["toolUseId"], "tu_r");

    // Next run: the client sends the reasoning messages back as it stored them.
    let rid = |i: usize| secrets[i]["entityId"].clone();
    let parent = of_type(&events, "TOOL_CALL_START")[0]["parentMessageId"].clone();
    let result = of_type(&events, "TOOL_CALL_RESULT")[0];
    let mut next = history.as_array().unwrap().clone();
    next.push(json!({"id": rid(0), "role": "reasoning", "content": "The user greets me.", "encryptedValue": "c2lnbmF0dXJl"}));
    next.push(json!({"id": rid(1), "role": "reasoning", "content": "", "encryptedValue": "redacted:AQID"}));
    next.push(json!({"id": parent, "role": "assistant", "toolCalls": [{"id": "tu_r", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Rome\"}"}}]}));
    next.push(json!({"id": result["messageId"], "role": "tool", "toolCallId": "tu_r", "content": result["content"]}));
    next.push(json!({"id": "a2", "role": "assistant", "content": "Sunny in Rome."}));
    next.push(json!({"id": "u2", "role": "user", "content": "Thanks!"}));
    gw.run("b", &v1("bt-think", Value::Array(next))).await;
    let third = &bedrock.requests()[2].body["messages"];
    assert_eq!(
        third[1]["content"][0]["reasoningContent"]["reasoningText"]["text"],
        "The user greets me."
    );
    assert_eq!(
        third[1]["content"][0]["reasoningContent"]["reasoningText"]["signature"],
        "c2lnbmF0dXJl"
    );
    assert_eq!(
        third[1]["content"][1]["reasoningContent"]["redactedContent"],
        "AQID"
    );
    assert_eq!(third[1]["content"][2]["toolUse"]["toolUseId"], "tu_r");
}

#[tokio::test]
async fn throttling_is_retried_and_a_mid_stream_exception_ends_the_run() {
    let partial = vec![
        ("messageStart", json!({"role": "assistant"})),
        (
            "contentBlockDelta",
            json!({"contentBlockIndex": 0, "delta": {"text": "Partial"}}),
        ),
    ];
    let (bedrock, _t, gw) = setup(vec![
        BedrockReply::Error(429, "ThrottlingException", "Too many requests".into()),
        BedrockReply::Events(text_events("After throttling")),
        BedrockReply::EventsThenException(
            partial,
            "modelStreamErrorException",
            "the model broke".into(),
        ),
    ])
    .await;
    let events = gw
        .run(
            "b",
            &v1(
                "bt-429",
                json!([{"id": "u", "role": "user", "content": "hi"}]),
            ),
        )
        .await;
    assert_eq!(text(&events), "After throttling");
    assert_eq!(bedrock.requests().len(), 2);
    let events = gw
        .run(
            "b",
            &v1(
                "bt-exc",
                json!([{"id": "u", "role": "user", "content": "hi"}]),
            ),
        )
        .await;
    let t = types(&events);
    assert_eq!(&t[t.len() - 2..], ["TEXT_MESSAGE_END", "RUN_ERROR"]);
    let err = events.last().unwrap();
    assert_eq!(err["code"], "UPSTREAM_ERROR");
    assert!(
        err["message"].as_str().unwrap().contains("the model broke"),
        "{err}"
    );
    assert!(
        !err["message"].as_str().unwrap().contains("wJalrXUtnFEMI"),
        "no secrets in errors"
    );
}

#[tokio::test]
async fn images_go_as_bytes_unsupported_media_is_dropped_and_guardrails_are_reported() {
    let guarded = vec![
        ("messageStart", json!({"role": "assistant"})),
        ("messageStop", json!({"stopReason": "guardrail_intervened"})),
        metadata_event(3, 0),
    ];
    let (bedrock, _t, gw) = setup(vec![BedrockReply::Events(guarded)]).await;
    let body = v1(
        "bt-media",
        json!([{"id": "u", "role": "user", "content": [
            {"type": "text", "text": "what is this"},
            {"type": "image", "source": {"type": "data", "value": "iVBORw0KGgo=", "mimeType": "image/png"}},
            {"type": "image", "source": {"type": "data", "value": "AAAA", "mimeType": "image/tiff"}},
            {"type": "document", "source": {"type": "file", "value": "file-123", "provider": "openai"}}
        ]}]),
    );
    let events = gw.run("b", &body).await;
    let dropped = of_type(&events, "CUSTOM")
        .into_iter()
        .find(|e| e["name"] == "content_dropped")
        .unwrap();
    assert_eq!(dropped["value"].as_array().unwrap().len(), 2, "{dropped}");
    let content = &bedrock.requests()[0].body["messages"][0]["content"];
    assert_eq!(content.as_array().unwrap().len(), 2);
    assert_eq!(content[1]["image"]["format"], "png");
    assert_eq!(content[1]["image"]["source"]["bytes"], "iVBORw0KGgo=");
    let stop = of_type(&events, "CUSTOM")
        .into_iter()
        .find(|e| e["name"] == "model_stop")
        .unwrap();
    assert_eq!(stop["value"]["reason"], "guardrail_intervened");
    assert!(text(&events).contains("guardrail_intervened"));
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED");
}

#[tokio::test]
async fn a_bedrock_api_key_is_sent_as_a_bearer_token() {
    // SAFETY: set before the gateway reads it; no other test reads this variable.
    unsafe { std::env::set_var("AGUI_TEST_BEDROCK_KEY", "bedrock-api-key-xyz") };
    let bedrock = FakeBedrock::start(vec![BedrockReply::Events(text_events("ok"))]).await;
    let tools = FakeOpenAi::start(vec![]).await;
    let gw = Gateway::start(&config(
        &bedrock,
        &tools,
        "api_key_env = \"AGUI_TEST_BEDROCK_KEY\"",
    ))
    .await;
    let events = gw
        .run(
            "b",
            &v1(
                "bt-bearer",
                json!([{"id": "u", "role": "user", "content": "hi"}]),
            ),
        )
        .await;
    assert_eq!(text(&events), "ok");
    assert_eq!(
        bedrock.requests()[0].headers["authorization"],
        "Bearer bedrock-api-key-xyz"
    );
}

#[tokio::test]
async fn a_single_tool_call_helper_round_trip() {
    let (_b, _t, gw) = setup(vec![
        BedrockReply::Events(tool_use_events("tu_1", "get_weather", r#"{"city":"Lima"}"#)),
        BedrockReply::Events(text_events("Done.")),
    ])
    .await;
    let events = gw
        .run(
            "b",
            &run_input(
                "bt-one",
                json!([{"id": "u", "role": "user", "content": "Lima?"}]),
            ),
        )
        .await;
    assert_eq!(args_of(&events, "tu_1"), r#"{"city":"Lima"}"#);
    assert_eq!(text(&events), "Done.");
    assert!(
        events.last().unwrap().get("usage").is_none(),
        "old clients get no usage field"
    );
    let report = of_type(&events, "CUSTOM")
        .into_iter()
        .find(|e| e["name"] == "token_usage")
        .unwrap();
    assert_eq!(report["value"]["per_model_usage"][0]["call_count"], 2);
}
