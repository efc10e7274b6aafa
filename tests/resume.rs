/// Runs are resumable: every event carries a sequence number (SSE `id:`), the frames are kept
/// after the run, `GET .../runs/{runId}/events` with `Last-Event-ID` replays what was missed and
/// follows a live run to its end; with `detach_on_disconnect` a run outlives its client and
/// `DELETE .../runs/{runId}` stops it; with a shared PostgreSQL store a second gateway sees the
/// thread busy and can replay the run.
mod common;

use std::time::Duration;

use common::*;
use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{Value, json};

fn config(extra_server: &str, extra_top: &str, delay_ms: u64, dir: &std::path::Path) -> String {
    let fixture = dir.join("slow.json");
    std::fs::write(
        &fixture,
        format!(r#"{{"chunk_chars": 4, "delay_ms": {delay_ms}, "default": {{"text": "One two three four five six seven eight nine ten eleven twelve."}}}}"#),
    )
    .unwrap();
    format!(
        r#"
{extra_top}
[server]
keepalive_secs = 1
{extra_server}
[[agents]]
id = "s"
[agents.model]
provider = "scripted"
fixture = "{}"
"#,
        fixture.display()
    )
}

/// Reads `(id, event)` pairs from an SSE response until it ends or `stop_after` events.
async fn read_with_ids(resp: reqwest::Response, stop_after: Option<usize>) -> Vec<(u64, Value)> {
    let mut out = Vec::new();
    let mut s = resp.bytes_stream().eventsource();
    while let Some(Ok(ev)) = s.next().await {
        out.push((
            ev.id.parse().unwrap(),
            serde_json::from_str(&ev.data).unwrap(),
        ));
        if stop_after.is_some_and(|n| out.len() >= n) {
            break;
        }
    }
    out
}

async fn replay(gw: &Gateway, run: &str, last: u64) -> reqwest::Response {
    reqwest::Client::new()
        .get(gw.url(&format!("/agents/s/agui/runs/{run}/events")))
        .header("last-event-id", last.to_string())
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_finished_run_replays_after_last_event_id() {
    let dir = temp_dir("resume");
    let gw = Gateway::start(&config("", "", 0, &dir)).await;
    let body = json!({"threadId": "rs-1", "runId": "run-rs-1", "messages": [{"id": "u", "role": "user", "content": "go"}]});
    let all = read_with_ids(gw.post("s", &body).await, None).await;
    let ids: Vec<u64> = all.iter().map(|(i, _)| *i).collect();
    assert_eq!(
        ids,
        (1..=all.len() as u64).collect::<Vec<_>>(),
        "ids count up from 1"
    );
    // The writer may still be flushing; the replay follows until the run is marked finished.
    let replayed = read_with_ids(replay(&gw, "run-rs-1", 3).await, None).await;
    assert_eq!(replayed, all[3..].to_vec());
    let resp = replay(&gw, "no-such-run", 0).await;
    assert_eq!(resp.status(), 404);
    let resp = reqwest::Client::new()
        .get(gw.url("/agents/s/agui/runs/run-rs-1/events"))
        .header("last-event-id", "abc")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
}

#[tokio::test]
async fn a_detached_run_goes_on_and_can_be_followed_to_its_end() {
    let dir = temp_dir("detach");
    let gw = Gateway::start(&config("detach_on_disconnect = true", "", 40, &dir)).await;
    let body = json!({"threadId": "rs-2", "runId": "run-rs-2", "messages": [{"id": "u", "role": "user", "content": "go"}]});
    let first = read_with_ids(gw.post("s", &body).await, Some(3)).await;
    // The client is gone (response dropped); the run keeps going.
    let rest = read_with_ids(replay(&gw, "run-rs-2", first.last().unwrap().0).await, None).await;
    let last = &rest.last().unwrap().1;
    assert_eq!(last["type"], "RUN_FINISHED", "{rest:?}");
    let text: String = first
        .iter()
        .chain(rest.iter())
        .filter(|(_, e)| e["type"] == "TEXT_MESSAGE_CONTENT")
        .map(|(_, e)| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(
        text,
        "One two three four five six seven eight nine ten eleven twelve."
    );
    // The finished answer was stored for the thread.
    for _ in 0..50 {
        if gw.state.runs.active_count() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(gw.state.runs.detached_count(), 0);
    let events = gw
        .run(
            "s",
            &json!({"threadId": "rs-2", "runId": "r-reload", "messages": []}),
        )
        .await;
    let stored = events[1]["messages"].as_array().unwrap().clone();
    assert_eq!(
        stored[1]["content"],
        "One two three four five six seven eight nine ten eleven twelve."
    );
}

#[tokio::test]
async fn two_gateways_on_one_postgres_store_share_threads_and_runs() {
    let Some(url) = test_pg("two gateways on one store") else {
        return;
    };
    let (dir_a, dir_b) = (temp_dir("pg-a"), temp_dir("pg-b"));
    let store = format!("[store]\nurl = \"{url}\"");
    // A's run lasts a few seconds, longer than B waits for a thread that may be closing.
    let a = Gateway::start(&config("detach_on_disconnect = true", &store, 200, &dir_a)).await;
    let b = Gateway::start(&config("", &store, 0, &dir_b)).await;
    let thread = format!("pg-{}", uuid::Uuid::new_v4().simple());
    let run_id = format!("run-{}", uuid::Uuid::new_v4().simple());
    let body = json!({"threadId": thread, "runId": run_id, "messages": [{"id": "u", "role": "user", "content": "go"}]});
    let first = read_with_ids(a.post("s", &body).await, Some(2)).await;
    // While A's run goes on (detached), B refuses a second run on the thread...
    let busy = b
        .run("s", &json!({"threadId": thread, "runId": "other", "messages": [{"id": "u2", "role": "user", "content": "hi"}]}))
        .await;
    assert_eq!(busy[0]["code"], "THREAD_BUSY", "{busy:?}");
    // ...and replays A's run from where the client left, to its end.
    let rest = read_with_ids(replay(&b, &run_id, first.last().unwrap().0).await, None).await;
    assert_eq!(rest.last().unwrap().1["type"], "RUN_FINISHED");
    assert_eq!(rest.first().unwrap().0, first.last().unwrap().0 + 1);
    // Then the thread is free, and B sees what A stored.
    let mut stored = Vec::new();
    for _ in 0..50 {
        let events = b.run("s", &json!({"threadId": thread, "runId": format!("reload-{}", uuid::Uuid::new_v4()), "messages": []})).await;
        if events[1]["type"] == "MESSAGES_SNAPSHOT"
            && events[1]["messages"].as_array().unwrap().len() == 2
        {
            stored = events[1]["messages"].as_array().unwrap().clone();
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(stored.len(), 2, "A's run was stored and B reads it");
}

#[tokio::test]
async fn a_detached_run_is_cancelled_after_its_time_limit() {
    let dir = temp_dir("detach-limit");
    let gw = Gateway::start(&config(
        "detach_on_disconnect = true\nmax_detached_secs = 1",
        "",
        300,
        &dir,
    ))
    .await;
    let body = json!({"threadId": "rs-3", "runId": "run-rs-3", "messages": [{"id": "u", "role": "user", "content": "go"}]});
    let first = read_with_ids(gw.post("s", &body).await, Some(2)).await;
    let rest = read_with_ids(replay(&gw, "run-rs-3", first.last().unwrap().0).await, None).await;
    let last = &rest.last().unwrap().1;
    assert_eq!(
        (last["type"].as_str(), last["code"].as_str()),
        (Some("RUN_ERROR"), Some("CANCELLED")),
        "{rest:?}"
    );
}

async fn stop(gw: &Gateway, agent: &str, run: &str) -> reqwest::StatusCode {
    reqwest::Client::new()
        .delete(gw.url(&format!("/agents/{agent}/agui/runs/{run}")))
        .send()
        .await
        .unwrap()
        .status()
}

/// What a reconnecting client relies on: a detached run's replay after `Last-Event-ID: k` starts
/// at `k + 1` with no gap; `DELETE .../runs/{runId}` stops it (the replay ends with `CANCELLED`)
/// and answers once the thread is free for the next run; a replay after the last id is empty.
#[tokio::test]
async fn a_detached_run_is_stopped_by_delete_and_its_thread_is_free_at_once() {
    let dir = temp_dir("stop");
    let gw = Gateway::start(&config("detach_on_disconnect = true", "", 100, &dir)).await;
    let body = json!({"threadId": "rs-4", "runId": "run-rs-4", "messages": [{"id": "u", "role": "user", "content": "go"}]});
    let first = read_with_ids(gw.post("s", &body).await, Some(3)).await;
    let k = first.last().unwrap().0;
    // The client left; a reconnect reads on from k.
    let mut follow = replay(&gw, "run-rs-4", k)
        .await
        .bytes_stream()
        .eventsource();
    let next = follow.next().await.unwrap().unwrap();
    assert_eq!(next.id, (k + 1).to_string());
    assert_eq!(stop(&gw, "other-agent", "run-rs-4").await, 404);
    assert_eq!(stop(&gw, "s", "run-rs-4").await, 204);
    assert!(
        !gw.state.runs.thread_busy("rs-4"),
        "answered before the run ended"
    );
    let mut ids = vec![k + 1];
    let mut last = Value::Null;
    while let Some(Ok(ev)) = follow.next().await {
        ids.push(ev.id.parse().unwrap());
        last = serde_json::from_str(&ev.data).unwrap();
    }
    assert_eq!(ids, (k + 1..=k + ids.len() as u64).collect::<Vec<_>>());
    assert_eq!(last["code"], "CANCELLED", "{last}");
    // Nothing after the last event; the run is over, so nothing to stop.
    let end = *ids.last().unwrap();
    assert!(
        read_with_ids(replay(&gw, "run-rs-4", end).await, None)
            .await
            .is_empty()
    );
    assert_eq!(stop(&gw, "s", "run-rs-4").await, 404);
    assert_eq!(stop(&gw, "s", "no-such-run").await, 404);
    let events = gw
        .run("s", &json!({"threadId": "rs-4", "runId": "run-rs-4b", "messages": [{"id": "u2", "role": "user", "content": "again"}]}))
        .await;
    assert_eq!(events[0]["type"], "RUN_STARTED", "{events:?}");
}
