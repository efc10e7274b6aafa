/// `AGUI_LOG_FORMAT=json`: the running binary logs one JSON object per line; a run's records
/// carry its agent, thread and run ids from the enclosing spans, and never the model API key
/// or the user's message text.
mod common;

use common::*;
use serde_json::{Value, json};

#[tokio::test]
async fn json_logs_carry_run_ids_and_no_secrets_or_bodies() {
    let up = FakeOpenAi::start(vec![Reply::Status(
        400,
        r#"{"error":{"message":"bad request"}}"#.into(),
    )])
    .await;
    let secret = "sk-test-SECRET-0123456789";
    let path = up.config_file("logs", "AGUI_TEST_LOG_KEY");
    let gw = GatewayProcess::spawn(
        &path,
        &[
            ("AGUI_LOG_FORMAT", "json"),
            ("RUST_LOG", "info"),
            ("AGUI_TEST_LOG_KEY", secret),
        ],
        true,
    )
    .await;
    let body = run_input(
        "t-logs",
        json!([{"id": "u1", "role": "user", "content": "my private question"}]),
    );
    let resp = reqwest::Client::new()
        .post(gw.url("/agents/a/agui"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let events = read_events(resp, false).await;
    assert_eq!(events.last().unwrap()["type"], "RUN_ERROR");
    let run_id = body["runId"].as_str().unwrap().to_string();
    let text = gw.kill_and_read_stdout();
    assert!(!text.contains(secret), "the API key leaked into the logs");
    assert!(
        !text.contains("my private question"),
        "a message body leaked into the logs"
    );
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("not JSON: {l}")))
        .collect();
    let failed = records
        .iter()
        .find(|r| r["fields"]["message"] == "model call failed")
        .unwrap_or_else(|| panic!("no model failure record in {records:?}"));
    assert_eq!(failed["level"], "WARN");
    let spans = failed["spans"].as_array().unwrap();
    let run_span = spans
        .iter()
        .find(|s| s["name"] == "invoke_agent")
        .expect("the run's span");
    assert_eq!(run_span["run_id"], run_id.as_str());
    assert_eq!(run_span["thread_id"], "t-logs");
    assert_eq!(run_span["gen_ai.agent.id"], "a");
}

/// Text logs: identifiers chosen by the client are written with their control characters
/// escaped, so a thread id cannot forge a log line or colour the terminal.
#[tokio::test]
async fn text_logs_escape_control_characters_in_client_ids() {
    let up = FakeOpenAi::start(vec![Reply::Status(
        400,
        r#"{"error":{"message":"bad request"}}"#.into(),
    )])
    .await;
    let path = up.config_file("logs-text", "AGUI_TEST_LOG_KEY2");
    let gw = GatewayProcess::spawn(
        &path,
        &[
            ("RUST_LOG", "info"),
            ("AGUI_TEST_LOG_KEY2", "sk-unused-0123456789"),
        ],
        true,
    )
    .await;
    let thread = "t-\u{1b}[31mred\nFORGED level=ERROR";
    let body = run_input(
        thread,
        json!([{"id": "u1", "role": "user", "content": "hello"}]),
    );
    let resp = reqwest::Client::new()
        .post(gw.url("/agents/a/agui"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let events = read_events(resp, false).await;
    assert_eq!(events.last().unwrap()["type"], "RUN_ERROR");
    let text = gw.kill_and_read_stdout();
    assert!(
        text.contains(r"t-\u{1b}[31mred\nFORGED"),
        "the thread id, escaped, is in the logs: {text}"
    );
    assert!(
        !text.contains("\u{1b}[31mred"),
        "a raw escape sequence from the client reached the logs"
    );
    assert!(
        !text.lines().any(|l| l.starts_with("FORGED")),
        "a client id started a log line of its own"
    );
}
