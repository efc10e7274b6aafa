/// A plain chat turn against a real OpenAI-compatible SSE upstream streams as one verified
/// text message, and the upstream receives the system prompt, context and history it needs.
mod common;

use common::*;
use serde_json::json;

#[tokio::test]
async fn chat_streams_text_and_sends_a_complete_request_upstream() {
    let up = FakeOpenAi::start(vec![Reply::Sse(text_chunks("Hello there, friend."))]).await;
    let gw = Gateway::start(&up.config("")).await;
    let mut body = run_input(
        "t-chat",
        json!([
            {"id": "s1", "role": "system", "content": "Answer in English."},
            {"id": "u1", "role": "user", "content": "Hi!"}
        ]),
    );
    body["context"] = json!([{"description": "user name", "value": "Ada"}]);
    body["protocolVersion"] = json!("1.0");
    body["state"] = json!({"x": 1});
    body["someFutureField"] = json!(true);
    let events = gw.run("a", &body).await;

    assert_eq!(
        types(&events),
        [
            "RUN_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "CUSTOM",
            "RUN_FINISHED"
        ]
    );
    assert_eq!(text(&events), "Hello there, friend.");
    let report = &of_type(&events, "CUSTOM")[0];
    assert_eq!(report["name"], "token_usage");
    assert_eq!(report["value"]["per_turn_usage"][0]["input_tokens"], 11);
    assert_eq!(report["value"]["per_model_usage"][0]["call_count"], 1);
    assert_eq!(events[0]["threadId"], "t-chat");
    assert_eq!(events[0]["runId"], body["runId"]);
    assert_eq!(events[1]["role"], "assistant");
    // 1.0 client: usage of the run rides on RUN_FINISHED.
    let usage = &events.last().unwrap()["usage"][0];
    assert_eq!(usage["inputTokens"], 11);
    assert_eq!(usage["outputTokens"], 7);
    assert_eq!(usage["totalTokens"], 18);
    assert_eq!(usage["model"], "gpt-test");

    let req = &up.requests()[0];
    assert_eq!(req["model"], "gpt-test");
    assert_eq!(req["stream"], true);
    assert_eq!(req["stream_options"]["include_usage"], true);
    let system = req["messages"][0]["content"].as_str().unwrap();
    assert_eq!(req["messages"][0]["role"], "system");
    assert!(system.starts_with("You are a test agent."), "{system}");
    assert!(system.contains("Answer in English."));
    assert!(
        system.contains("user name: Ada"),
        "context reaches the model: {system}"
    );
    assert_eq!(
        req["messages"][1],
        json!({"role": "user", "content": "Hi!"})
    );
    assert_eq!(req["tools"][0]["function"]["name"], "get_weather");
}

#[tokio::test]
async fn old_clients_get_no_usage_and_images_reach_the_model() {
    let up = FakeOpenAi::start(vec![Reply::Sse(text_chunks("A cat."))]).await;
    let gw = Gateway::start(&up.config("")).await;
    let body = run_input(
        "t-img",
        json!([{"id": "u1", "role": "user", "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image", "source": {"type": "data", "value": "iVBORw0KGgo=", "mimeType": "image/png"}},
            {"type": "binary", "mimeType": "image/jpeg", "url": "https://example.com/cat.jpg"}
        ]}]),
    );
    let events = gw.run("a", &body).await;
    assert!(events.last().unwrap().get("usage").is_none());
    let content = &up.requests()[0]["messages"][1]["content"];
    assert_eq!(content[0], json!({"type": "text", "text": "What is this?"}));
    assert_eq!(
        content[1]["image_url"]["url"],
        "data:image/png;base64,iVBORw0KGgo="
    );
    assert_eq!(
        content[2]["image_url"]["url"],
        "https://example.com/cat.jpg"
    );
}

#[tokio::test]
async fn the_api_key_is_sent_upstream_and_never_listed() {
    // SAFETY: single-threaded setup before the gateway reads the variable.
    unsafe { std::env::set_var("AGUI_TEST_KEY_CHAT", "sk-very-secret-123") };
    let up = FakeOpenAi::start(vec![Reply::Status(
        401,
        r#"{"error":{"message":"Incorrect API key provided: sk-very-secret-123"}}"#.into(),
    )])
    .await;
    let config = up.config("").replace(
        "model_id = \"gpt-test\"",
        "model_id = \"gpt-test\"\napi_key_env = \"AGUI_TEST_KEY_CHAT\"",
    );
    let gw = Gateway::start(&config).await;
    let events = gw
        .run(
            "a",
            &run_input(
                "t-key",
                json!([{"id": "u", "role": "user", "content": "hi"}]),
            ),
        )
        .await;
    assert_eq!(
        up.upstream.auth.lock().unwrap()[0],
        "authorization: Bearer sk-very-secret-123"
    );
    let err = events.last().unwrap();
    assert_eq!(err["code"], "UPSTREAM_AUTH_ERROR");
    assert!(
        !err["message"]
            .as_str()
            .unwrap()
            .contains("sk-very-secret-123"),
        "{err}"
    );
    assert!(err["message"].as_str().unwrap().contains("[REDACTED]"));
    let listing = gw.get_text("/agents").await;
    assert!(!listing.contains("sk-very"), "{listing}");
    assert!(listing.contains("get_weather"));
}
