/// A client that goes away cancels its run and the upstream request with it; a thread runs one
/// run at a time; quiet streams carry keep-alive comments.
mod common;

use std::time::{Duration, Instant};

use common::*;
use futures::StreamExt;
use serde_json::json;

fn stall() -> Reply {
    Reply::Stall(vec![
        json!({"choices": [{"index": 0, "delta": {"content": "Thinking..."}}]}),
    ])
}

/// Reads raw body bytes until `needle` shows up.
#[tokio::test]
async fn a_client_disconnect_cancels_the_upstream_request() {
    let up = FakeOpenAi::start(vec![stall()]).await;
    let gw = Gateway::start(&up.config("")).await;
    let mut resp = gw
        .post(
            "a",
            &run_input(
                "t-gone",
                json!([{"id": "u", "role": "user", "content": "hi"}]),
            ),
        )
        .await;
    read_until(&mut resp, "Thinking...").await;
    assert_eq!(gw.state.runs.active_count(), 1);
    let t0 = Instant::now();
    drop(resp);
    tokio::time::timeout(Duration::from_secs(10), up.upstream.dropped.notified())
        .await
        .expect("the upstream request was not dropped after the client left");
    // Reported, not asserted: timing on shared machines is noisy (see the bench harness).
    eprintln!(
        "upstream dropped {:?} after the client disconnected",
        t0.elapsed()
    );
    for _ in 0..100 {
        if gw.state.runs.active_count() == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the run stayed registered after its client left");
}

#[tokio::test]
async fn a_second_run_on_a_busy_thread_gets_thread_busy() {
    let up = FakeOpenAi::start(vec![stall(), Reply::Sse(text_chunks("Free again."))]).await;
    let gw = Gateway::start(&up.config("")).await;
    let body = run_input(
        "t-busy",
        json!([{"id": "u", "role": "user", "content": "hi"}]),
    );
    let mut first = gw.post("a", &body).await;
    read_until(&mut first, "Thinking...").await;

    let second = gw
        .run(
            "a",
            &run_input(
                "t-busy",
                json!([{"id": "u", "role": "user", "content": "again"}]),
            ),
        )
        .await;
    assert_eq!(types(&second), ["RUN_ERROR"]);
    assert_eq!(second[0]["code"], "THREAD_BUSY");
    // Other threads are unaffected.
    assert_eq!(gw.state.runs.active_count(), 1);

    drop(first);
    up.upstream.dropped.notified().await;
    let mut third = None;
    for _ in 0..100 {
        if gw.state.runs.active_count() == 0 {
            third = Some(
                gw.run(
                    "a",
                    &run_input(
                        "t-busy",
                        json!([{"id": "u", "role": "user", "content": "now"}]),
                    ),
                )
                .await,
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(text(&third.expect("thread never freed")), "Free again.");
}

#[tokio::test]
async fn a_quiet_stream_carries_keep_alive_comments() {
    let up = FakeOpenAi::start(vec![stall()]).await;
    let gw = Gateway::start(&up.config("")).await; // keepalive_secs = 1
    let mut resp = gw
        .post(
            "a",
            &run_input(
                "t-ka",
                json!([{"id": "u", "role": "user", "content": "hi"}]),
            ),
        )
        .await;
    let seen = read_until(&mut resp, ": keep-alive\n\n").await;
    assert!(
        seen.starts_with("id: 1\ndata: {\"type\":\"RUN_STARTED\""),
        "{seen}"
    );
    assert!(!seen.contains('\r'));
}

#[tokio::test]
async fn a_slow_reader_still_gets_every_event_in_order() {
    // 5000 text chunks through a channel of 64 events: the run must wait for the reader (the
    // gateway may join chunks that are already waiting; every word arrives once, in order).
    let chunks: Vec<_> = (0..5000)
        .map(|i| json!({"choices": [{"index": 0, "delta": {"content": format!("w{i} ")}}]}))
        .collect();
    let mut all = chunks;
    all.push(finish("stop"));
    let up = FakeOpenAi::start(vec![Reply::Sse(all)]).await;
    let gw = Gateway::start(&up.config("")).await;
    let resp = gw
        .post(
            "a",
            &run_input(
                "t-slow",
                json!([{"id": "u", "role": "user", "content": "long"}]),
            ),
        )
        .await;
    let mut stream = resp.bytes_stream();
    // Read a little, pause, and check the whole answer still arrives intact.
    let mut body = Vec::new();
    if let Some(Ok(c)) = stream.next().await {
        body.extend_from_slice(&c);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    while let Some(Ok(c)) = stream.next().await {
        body.extend_from_slice(&c);
    }
    let text = String::from_utf8(body).unwrap();
    let events: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let said: String = events
        .iter()
        .filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    let expected: String = (0..5000).map(|i| format!("w{i} ")).collect();
    assert!(said == expected, "the text arrived changed or out of order");
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED");
}
