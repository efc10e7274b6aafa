/// Faults end in a valid stream or a clean error, and leave nothing behind: garbage from the
/// upstream, an upstream that keeps answering 429, and a thousand clients leaving at once.
/// (Stalls, early closes, silence and slow readers are in `upstream_failures` and
/// `cancellation`.)
mod common;

use common::*;
use serde_json::json;

#[tokio::test]
async fn garbage_from_the_upstream_ends_the_run_with_a_protocol_error() {
    let up = FakeOpenAi::start(vec![Reply::Sse(vec![
        json!({"choices": [{"index": 0, "delta": {"content": "Hel"}}]}),
        json!("this is not a chat completion chunk"),
        json!({"choices": [{"index": 0, "delta": {"content": "lo"}}]}),
    ])])
    .await;
    let gw = Gateway::start(&up.config("")).await;
    // read_events verifies the stream as @ag-ui/client would.
    let events = gw.run("a", &user_says_hi("t-garbage")).await;
    let last = events.last().unwrap();
    assert_eq!(last["type"], "RUN_ERROR", "{events:?}");
    assert_eq!(last["code"], "UPSTREAM_PROTOCOL_ERROR");
    // What had streamed was closed before the error.
    assert!(events.iter().any(|e| e["type"] == "TEXT_MESSAGE_END"));
    wait_no_runs(&gw).await;
}

#[tokio::test]
async fn an_upstream_that_keeps_throttling_is_retried_a_bounded_number_of_times() {
    let throttled = || Reply::Status(429, r#"{"error":{"message":"slow down"}}"#.into());
    let up = FakeOpenAi::start(vec![throttled(), throttled(), throttled(), throttled()]).await;
    let gw = Gateway::start(&up.config("")).await;
    let events = gw.run("a", &user_says_hi("t-429s")).await;
    let last = events.last().unwrap();
    assert_eq!(last["type"], "RUN_ERROR");
    assert_eq!(last["code"], "UPSTREAM_RATE_LIMITED");
    assert!(last["message"].as_str().unwrap().contains("slow down"));
    // The first attempt and max_retries (2) more, no further.
    assert_eq!(up.requests().len(), 3);
    wait_no_runs(&gw).await;
}

#[tokio::test]
async fn a_thousand_clients_leaving_at_once_leave_no_run_behind() {
    const N: usize = 1000;
    let stalled = || {
        Reply::Stall(vec![
            json!({"choices": [{"index": 0, "delta": {"content": "Thinking"}}]}),
        ])
    };
    let up = FakeOpenAi::start((0..N).map(|_| stalled()).collect()).await;
    let gw = Gateway::start(&up.config("")).await;
    let http = reqwest::Client::new();
    let mut streams = Vec::with_capacity(N);
    for chunk in (0..N).collect::<Vec<_>>().chunks(100) {
        let opened = futures::future::join_all(chunk.iter().map(|i| {
            let http = http.clone();
            let url = gw.url("/agents/a/agui");
            let body = user_says_hi(&format!("t-many-{i}"));
            async move {
                let mut r = http.post(url).json(&body).send().await.unwrap();
                assert_eq!(r.status(), 200);
                read_until(&mut r, "Thinking").await;
                r
            }
        }))
        .await;
        streams.extend(opened);
    }
    assert_eq!(gw.state.runs.active_count(), N);
    // Every client goes at once: every run is cancelled, its upstream request dropped and its
    // place given back.
    drop(streams);
    wait_no_runs(&gw).await;
    let metrics = reqwest::get(gw.url("/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("agui_runs_active 0"), "{metrics}");
}
