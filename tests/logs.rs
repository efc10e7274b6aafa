/// `AGUI_LOG_FORMAT=json`: the running binary logs one JSON object per line; a run's records
/// carry its agent, thread and run ids from the enclosing spans, and never the model API key
/// or the user's message text.
mod common;

use std::process::Stdio;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};

#[tokio::test]
async fn json_logs_carry_run_ids_and_no_secrets_or_bodies() {
    let up = FakeOpenAi::start(vec![Reply::Status(
        400,
        r#"{"error":{"message":"bad request"}}"#.into(),
    )])
    .await;
    let dir = temp_dir("logs");
    let secret = "sk-test-SECRET-0123456789";
    let toml = up
        .config("")
        .replace(
            "retry_initial_backoff_ms = 5\n",
            "retry_initial_backoff_ms = 5\napi_key_env = \"AGUI_TEST_LOG_KEY\"\n",
        )
        .replace(
            "[server]\n",
            &format!("data_dir = \"{}\"\n[server]\n", dir.display()),
        );
    let path = dir.join("gw.toml");
    std::fs::write(&path, toml).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_agui-gateway"))
        .args(["serve", "--config"])
        .arg(&path)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .env("AGUI_LOG_FORMAT", "json")
        .env("RUST_LOG", "info")
        .env("AGUI_TEST_LOG_KEY", secret)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let mut up_ok = false;
    for _ in 0..200 {
        if reqwest::get(format!("{base}/healthz")).await.is_ok() {
            up_ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(up_ok, "the gateway did not start");
    let body = run_input(
        "t-logs",
        json!([{"id": "u1", "role": "user", "content": "my private question"}]),
    );
    let resp = reqwest::Client::new()
        .post(format!("{base}/agents/a/agui"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let events = read_events(resp, false).await;
    assert_eq!(events.last().unwrap()["type"], "RUN_ERROR");
    let run_id = body["runId"].as_str().unwrap().to_string();
    child.start_kill().unwrap();
    let out = child.wait_with_output().await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
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
