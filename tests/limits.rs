/// Limits: concurrent runs per gateway (503 + Retry-After) and per API key (429 +
/// Retry-After), messages per request and bytes per part (400 naming the field), backend tool
/// calls executing at once in a run, and the run wall-clock limit (RUN_ERROR RUN_TIMEOUT in a
/// stream the client accepts). Places are given back when runs end.
mod common;

use std::time::Duration;

use common::*;
use serde_json::json;

fn stalled() -> Reply {
    Reply::Stall(vec![
        json!({"choices": [{"index": 0, "delta": {"content": "Thinking"}}]}),
    ])
}

#[tokio::test]
async fn a_full_gateway_answers_503_with_retry_after_until_a_run_ends() {
    let up = FakeOpenAi::start(vec![stalled(), Reply::Sse(text_chunks("Hi."))]).await;
    let toml = up
        .config("")
        .replace("[server]\n", "[server]\nmax_concurrent_runs = 1\n");
    let gw = Gateway::start(&toml).await;
    let mut first = gw.post("a", &user_says_hi("t-1")).await;
    assert_eq!(first.status(), 200);
    // The run is under way (it reached the model) before the next one is tried.
    read_until(&mut first, "Thinking").await;
    let second = gw.post("a", &user_says_hi("t-2")).await;
    assert_eq!(second.status(), 503);
    assert!(second.headers().contains_key("retry-after"));
    let v: serde_json::Value = second.json().await.unwrap();
    assert_eq!(v["error"]["type"], "overloaded");
    // The first client leaves: its run is cancelled and its place is free again.
    drop(first);
    wait_no_runs(&gw).await;
    let events = gw.run("a", &user_says_hi("t-3")).await;
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED");
    wait_no_runs(&gw).await;
}

#[tokio::test]
async fn a_key_past_its_own_limit_gets_429_while_other_keys_run() {
    let up = FakeOpenAi::start(vec![stalled(), Reply::Sse(text_chunks("Hi."))]).await;
    let limited = agui_gateway::config::auth::hex(&agui_gateway::config::auth::hash_key(
        "limited-key-0123456789",
    ));
    let other = agui_gateway::config::auth::hex(&agui_gateway::config::auth::hash_key(
        "other-key-0123456789ab",
    ));
    let toml = format!(
        "[[auth.keys]]\nname = \"limited\"\nsha256 = \"{limited}\"\nmax_concurrent_runs = 1\n\
         [[auth.keys]]\nname = \"other\"\nsha256 = \"{other}\"\n{}",
        up.config("")
    );
    let gw = Gateway::start(&toml).await;
    let http = reqwest::Client::new();
    let post = |key: &'static str, thread: &str| {
        http.post(gw.url("/agents/a/agui"))
            .bearer_auth(key)
            .json(&user_says_hi(thread))
            .send()
    };
    let mut first = post("limited-key-0123456789", "t-k1").await.unwrap();
    assert_eq!(first.status(), 200);
    read_until(&mut first, "Thinking").await;
    let again = post("limited-key-0123456789", "t-k2").await.unwrap();
    assert_eq!(again.status(), 429);
    assert!(again.headers().contains_key("retry-after"));
    let v: serde_json::Value = again.json().await.unwrap();
    assert_eq!(v["error"]["type"], "too_many_runs");
    let fine = post("other-key-0123456789ab", "t-k3").await.unwrap();
    assert_eq!(fine.status(), 200);
    let events = read_events(fine, false).await;
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED");
    drop(first);
    wait_no_runs(&gw).await;
}

#[tokio::test]
async fn too_many_messages_are_refused_before_streaming() {
    let up = FakeOpenAi::start(vec![]).await;
    let toml = up
        .config("")
        .replace("[server]\n", "[server]\nmax_messages = 2\n");
    let gw = Gateway::start(&toml).await;
    let body = run_input(
        "t-many",
        json!([
            {"id": "u1", "role": "user", "content": "a"},
            {"id": "a1", "role": "assistant", "content": "b"},
            {"id": "u2", "role": "user", "content": "c"}
        ]),
    );
    let r = gw.post("a", &body).await;
    assert_eq!(r.status(), 400);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["error"]["field"], "messages");
    assert!(up.requests().is_empty(), "nothing may reach the model");
    assert_eq!(gw.state.limiter.active(), 0);
}

#[tokio::test]
async fn a_run_past_its_wall_clock_limit_ends_with_run_timeout() {
    let up = FakeOpenAi::start(vec![stalled()]).await;
    let toml = up
        .config("")
        .replace("[server]\n", "[server]\nmax_run_secs = 1\n");
    let gw = Gateway::start(&toml).await;
    let events = tokio::time::timeout(
        Duration::from_secs(10),
        gw.run("a", &user_says_hi("t-slow")),
    )
    .await
    .expect("the limit must end the run");
    let last = events.last().unwrap();
    assert_eq!(last["type"], "RUN_ERROR", "{events:?}");
    assert_eq!(last["code"], "RUN_TIMEOUT");
    // The partial message was closed first (read_events verified the whole stream).
    assert!(events.iter().any(|e| e["type"] == "TEXT_MESSAGE_END"));
    up.upstream.dropped.notified().await;
    wait_no_runs(&gw).await;
    // Metrics count the code the client saw, not the cancellation behind it.
    let metrics = gw.get_text("/metrics").await;
    assert!(
        metrics.contains(r#"agui_runs_failed_total{agent="a",code="RUN_TIMEOUT"} 1"#),
        "{metrics}"
    );
}

#[tokio::test]
async fn an_oversized_part_is_refused_before_streaming_naming_it() {
    let up = FakeOpenAi::start(vec![Reply::Sse(text_chunks("A picture."))]).await;
    let toml = up
        .config("")
        .replace("[server]\n", "[server]\nmax_part_bytes = 1000\n");
    let gw = Gateway::start(&toml).await;
    let image = "A".repeat(1500);
    let cases = [
        (
            json!([{"id": "u1", "role": "user", "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image", "source": {"type": "data", "value": image, "mimeType": "image/png"}}
            ]}]),
            "messages[0].content[1].source.value",
        ),
        (
            json!([{"id": "u1", "role": "user", "content": "x".repeat(1001)}]),
            "messages[0].content",
        ),
        (
            json!([
                {"id": "u1", "role": "user", "content": "hi"},
                {"id": "a1", "role": "assistant", "toolCalls": [{"id": "c1", "type": "function",
                    "function": {"name": "get_weather", "arguments": format!("{{\"city\":\"{}\"}}", "R".repeat(1000))}}]}
            ]),
            "messages[1].toolCalls[0].function.arguments",
        ),
    ];
    for (messages, field) in cases {
        let r = gw.post("a", &run_input("t-part", messages)).await;
        assert_eq!(r.status(), 400);
        let v: serde_json::Value = r.json().await.unwrap();
        assert_eq!(v["error"]["field"], field, "{v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains("1000"),
            "{v}"
        );
    }
    // A context value is a part too.
    let mut body = user_says_hi("t-part-ctx");
    body["context"] = json!([{"description": "notes", "value": "n".repeat(1001)}]);
    let r = gw.post("a", &body).await;
    assert_eq!(r.status(), 400);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["error"]["field"], "context[0].value", "{v}");
    // The agent API refuses it too, before running anything.
    let r = reqwest::Client::new()
        .post(gw.url("/_plugins/_ml/agents/a/_execute"))
        .json(&json!({"input": [
            {"type": "text", "text": "What is this?"},
            {"type": "image", "source": {"type": "base64", "format": "png", "data": "A".repeat(1500)}}
        ]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400, "{}", r.text().await.unwrap());
    // Within the limit, the same image goes through.
    let events = gw
        .run(
            "a",
            &run_input(
                "t-part-ok",
                json!([{"id": "u1", "role": "user", "content": [
                    {"type": "image", "source": {"type": "data", "value": "A".repeat(900), "mimeType": "image/png"}}
                ]}]),
            ),
        )
        .await;
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED", "{events:?}");
    assert_eq!(
        up.requests().len(),
        1,
        "only the run within the limit reached the model"
    );
}

#[tokio::test]
async fn backend_tool_calls_of_a_run_execute_at_most_max_tool_concurrency_at_once() {
    let cities = ["Slow1", "Slow2", "Slow3", "Slow4", "Slow5"];
    let mut turn: Vec<serde_json::Value> = Vec::new();
    for (i, city) in cities.iter().enumerate() {
        turn.push(call_start(i as u32, &format!("call_{i}"), "get_weather"));
        turn.push(call_args(i as u32, &format!("{{\"city\":\"{city}\"}}")));
    }
    turn.push(finish("tool_calls"));
    let up = FakeOpenAi::start(vec![
        Reply::Sse(turn),
        Reply::Sse(text_chunks("All five are sunny.")),
    ])
    .await;
    let toml = up
        .config("")
        .replace("[server]\n", "[server]\nmax_tool_concurrency = 2\n");
    let gw = Gateway::start(&toml).await;
    let events = gw.run("a", &user_says_hi("t-tools")).await;
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED", "{events:?}");
    assert_eq!(of_type(&events, "TOOL_CALL_RESULT").len(), 5);
    let most = up
        .upstream
        .tools_in_flight_max
        .load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(most, 2, "at most two calls may run at once, and two did");
    // Every result reaches the model, in call order.
    let msgs = up.requests()[1]["messages"].as_array().unwrap().clone();
    let ids: Vec<_> = msgs
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, ["call_0", "call_1", "call_2", "call_3", "call_4"]);
    wait_no_runs(&gw).await;
}
