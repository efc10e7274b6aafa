/// Upstream failures end the run with RUN_ERROR and a code, after closing whatever was open;
/// the stream stays valid for the client.
mod common;

use common::*;
use serde_json::json;

#[tokio::test]
async fn upstream_500_is_retried_then_becomes_run_error_with_the_upstream_message() {
    let failure = Reply::Status(500, r#"{"error":{"message":"model overloaded"}}"#.into());
    let up = FakeOpenAi::start(vec![failure.clone(), failure.clone(), failure]).await;
    let gw = Gateway::start(&up.config("")).await;
    let events = gw.run("a", &user_says_hi("t-500")).await;
    assert_eq!(up.requests().len(), 3, "first attempt and two retries");
    assert_eq!(types(&events), ["RUN_STARTED", "RUN_ERROR"]);
    let err = &events[1];
    assert_eq!(err["code"], "UPSTREAM_HTTP_ERROR");
    assert!(err["message"].as_str().unwrap().contains("HTTP 500"));
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("model overloaded")
    );
}

#[tokio::test]
async fn throttling_before_the_first_token_is_retried_transparently() {
    let up = FakeOpenAi::start(vec![
        Reply::Status(429, r#"{"error":{"message":"rate limited"}}"#.into()),
        Reply::Sse(text_chunks("Made it.")),
    ])
    .await;
    let gw = Gateway::start(&up.config("")).await;
    let events = gw.run("a", &user_says_hi("t-429")).await;
    assert_eq!(text(&events), "Made it.");
    assert_eq!(up.requests().len(), 2);
    // A client error is not retried.
    let up = FakeOpenAi::start(vec![Reply::Status(
        400,
        r#"{"error":{"message":"bad tools"}}"#.into(),
    )])
    .await;
    let gw = Gateway::start(&up.config("")).await;
    let events = gw.run("a", &user_says_hi("t-400")).await;
    assert_eq!(events.last().unwrap()["code"], "UPSTREAM_BAD_REQUEST");
    assert_eq!(up.requests().len(), 1);
}

#[tokio::test]
async fn a_stream_cut_mid_message_closes_the_message_then_errors() {
    let partial = vec![
        json!({"choices": [{"index": 0, "delta": {"content": "Half a sen"}}]}),
        call_start(0, "call_cut", "get_weather"),
        call_args(0, r#"{"ci"#),
    ];
    let up = FakeOpenAi::start(vec![Reply::Cut(partial)]).await;
    let gw = Gateway::start(&up.config("")).await;
    let events = gw.run("a", &user_says_hi("t-cut")).await;
    assert_eq!(
        types(&events),
        [
            "RUN_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "RUN_ERROR"
        ]
    );
    assert_eq!(
        events.last().unwrap()["code"],
        "UPSTREAM_STREAM_INTERRUPTED"
    );
    assert!(
        up.upstream.tool_calls.lock().unwrap().is_empty(),
        "an incomplete call is never executed"
    );
}

#[tokio::test]
async fn done_alone_is_an_empty_turn_but_a_body_that_ends_unfinished_is_an_interruption() {
    let up = FakeOpenAi::start(vec![
        // `[DONE]` with nothing before it: a valid (empty) turn.
        Reply::Sse(vec![]),
        // The body closes cleanly, but neither a finish_reason nor `[DONE]` came.
        Reply::Unfinished(vec![
            json!({"choices": [{"index": 0, "delta": {"content": "Half"}}]}),
        ]),
    ])
    .await;
    let config = up.config("").replace(
        "retry_initial_backoff_ms = 5",
        "retry_initial_backoff_ms = 5\nmax_retries = 0",
    );
    let gw = Gateway::start(&config).await;
    let events = gw.run("a", &user_says_hi("t-empty")).await;
    assert_eq!(types(&events), ["RUN_STARTED", "RUN_FINISHED"]);
    let events = gw.run("a", &user_says_hi("t-unfinished")).await;
    let last = events.last().unwrap();
    assert_eq!(
        (last["type"].as_str(), last["code"].as_str()),
        (Some("RUN_ERROR"), Some("UPSTREAM_STREAM_INTERRUPTED"))
    );
    assert_eq!(events[events.len() - 2]["type"], "TEXT_MESSAGE_END");
}

#[tokio::test]
async fn a_silent_upstream_hits_the_idle_limit() {
    let up = FakeOpenAi::start(vec![Reply::Stall(vec![
        json!({"choices": [{"index": 0, "delta": {"content": "Hm"}}]}),
    ])])
    .await;
    let config = up.config("").replace(
        "retry_initial_backoff_ms = 5",
        "retry_initial_backoff_ms = 5\nidle_timeout_secs = 1",
    );
    let gw = Gateway::start(&config).await;
    let events = gw.run("a", &user_says_hi("t-idle")).await;
    assert_eq!(events.last().unwrap()["code"], "UPSTREAM_TIMEOUT");
    // The stalled upstream request was dropped.
    up.upstream.dropped.notified().await;
}

#[tokio::test]
async fn an_error_chunk_inside_the_stream_is_reported() {
    let up = FakeOpenAi::start(vec![Reply::Sse(vec![
        json!({"choices": [{"index": 0, "delta": {"content": "Start"}}]}),
        json!({"error": {"message": "context length exceeded", "code": "context_length_exceeded"}}),
    ])])
    .await;
    let gw = Gateway::start(&up.config("")).await;
    let events = gw.run("a", &user_says_hi("t-errchunk")).await;
    let last = events.last().unwrap();
    assert_eq!(last["type"], "RUN_ERROR");
    assert_eq!(last["code"], "UPSTREAM_ERROR");
    assert!(
        last["message"]
            .as_str()
            .unwrap()
            .contains("context length exceeded")
    );
    assert_eq!(events[events.len() - 2]["type"], "TEXT_MESSAGE_END");
}

#[tokio::test]
async fn an_unreachable_upstream_is_reported() {
    // Bind and drop a listener to get a port nothing listens on.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let up = FakeOpenAi::start(vec![]).await;
    let config = up
        .config("")
        .replace(&up.base_url(), &format!("http://127.0.0.1:{port}/v1"));
    let gw = Gateway::start(&config).await;
    let events = gw.run("a", &user_says_hi("t-down")).await;
    assert_eq!(events.last().unwrap()["code"], "UPSTREAM_UNAVAILABLE");
}
