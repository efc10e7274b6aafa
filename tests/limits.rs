/// Limits: concurrent runs per gateway (503 + Retry-After) and per API key (429 +
/// Retry-After), messages per request (400 naming the field), and the run wall-clock limit
/// (RUN_ERROR RUN_TIMEOUT in a stream the client accepts). Places are given back when runs end.
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
    let metrics = reqwest::get(gw.url("/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(r#"agui_runs_failed_total{agent="a",code="RUN_TIMEOUT"} 1"#),
        "{metrics}"
    );
}
