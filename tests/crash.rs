/// A gateway killed with SIGKILL mid-run loses at most the turn in flight: after a restart the
/// thread holds everything that completed, is not left busy, and the killed run's replay ends.
mod common;

use std::time::Duration;

use common::{GatewayProcess, temp_dir};
use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{Value, json};

async fn start(config: &std::path::Path) -> GatewayProcess {
    GatewayProcess::spawn(config, &[], false).await
}

async fn events(base: &str, body: &Value, stop_after: Option<usize>) -> Vec<Value> {
    let resp = reqwest::Client::new()
        .post(format!("{base}/agents/k/agui"))
        .json(body)
        .send()
        .await
        .unwrap();
    let mut s = resp.bytes_stream().eventsource();
    let mut out = Vec::new();
    while let Some(Ok(ev)) = s.next().await {
        out.push(serde_json::from_str(&ev.data).unwrap());
        if stop_after.is_some_and(|n| out.len() >= n) {
            break;
        }
    }
    out
}

#[tokio::test]
async fn a_sigkill_mid_run_leaves_a_consistent_thread() {
    let dir = temp_dir("crash");
    std::fs::write(
        dir.join("slow.json"),
        r#"{"chunk_chars": 3, "delay_ms": 60, "default": {"text": "A long answer that streams slowly, word by word."}}"#,
    )
    .unwrap();
    let config = dir.join("gw.toml");
    std::fs::write(
        &config,
        "data_dir = \"data\"\n[[agents]]\nid = \"k\"\n[agents.model]\nprovider = \"scripted\"\nfixture = \"slow.json\"\n",
    )
    .unwrap();

    let server = start(&config).await;
    let first = json!({"threadId": "kt", "runId": "run-1", "messages": [{"id": "u1", "role": "user", "content": "one"}]});
    let done = events(&server.base, &first, None).await;
    assert_eq!(done.last().unwrap()["type"], "RUN_FINISHED");
    let mut history = vec![json!({"id": "u1", "role": "user", "content": "one"})];
    let answer_id = done
        .iter()
        .find(|e| e["type"] == "TEXT_MESSAGE_START")
        .unwrap()["messageId"]
        .clone();
    history.push(json!({"id": answer_id, "role": "assistant", "content": "A long answer that streams slowly, word by word."}));
    history.push(json!({"id": "u2", "role": "user", "content": "two"}));
    let second = json!({"threadId": "kt", "runId": "run-2", "messages": history});
    let partial = events(&server.base, &second, Some(4)).await;
    assert_eq!(partial[1]["type"], "TEXT_MESSAGE_START");
    drop(server); // SIGKILL mid-stream.

    let server = start(&config).await;
    let reload = events(
        &server.base,
        &json!({"threadId": "kt", "runId": "run-3", "messages": []}),
        None,
    )
    .await;
    assert_eq!(reload[1]["type"], "MESSAGES_SNAPSHOT", "{reload:?}");
    let ids: Vec<&str> = reload[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["u1", answer_id.as_str().unwrap(), "u2"],
        "the completed turn and the new question; nothing half-written"
    );
    // The thread is not left busy, and the killed run's replay ends instead of waiting forever.
    let next = events(&server.base, &json!({"threadId": "kt", "runId": "run-4", "messages": [{"id": "u3", "role": "user", "content": "three"}]}), None).await;
    assert_eq!(next.last().unwrap()["type"], "RUN_FINISHED", "{next:?}");
    let replay = reqwest::Client::new()
        .get(format!("{}/agents/k/agui/runs/run-2/events", server.base))
        .header("last-event-id", "0")
        .send()
        .await
        .unwrap();
    let body = tokio::time::timeout(Duration::from_secs(10), replay.text())
        .await
        .expect("the replay ended")
        .unwrap();
    assert!(body.contains("RUN_STARTED"), "{body}");
}
