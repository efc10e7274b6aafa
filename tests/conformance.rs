/// The real `@ag-ui/client` packages (1.0.0 and 0.0.58, from npm) accept every stream the
/// gateway sends: chat, reasoning, frontend-tool round trip and backend tool, on the embedded
/// default demo agent, through `/agents/{id}/agui` and the agent API's `_execute/stream`, and on
/// an `ag_ui` agent registered through the agent API; and a `plan_execute_and_reflect` agent's
/// steps with their tool calls. Every scenario runs over SSE and again asking for the AG-UI
/// protobuf encoding: the 1.0.0 client decodes the protobuf frames and delivers the same events
/// as over SSE; the 0.0.58 client, whose protobuf schema predates events the gateway sends, is
/// answered with SSE.
use std::path::Path;
use std::process::Stdio;

use agui_gateway::{AppState, config::Config};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_ag_ui_clients_accept_the_gateway_streams() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance");
    assert!(
        dir.join("node_modules/@ag-ui/client").exists() && dir.join("node_modules/agui0").exists(),
        "conformance/node_modules is missing: run `npm ci --prefix conformance` (scripts/test.sh does)"
    );
    let mut config = Config::load(None).unwrap();
    config.data_dir = std::env::temp_dir().join(format!("agui-conformance-{}", std::process::id()));
    let state = AppState::from_config(&config).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(agui_gateway::serve(listener, state, std::future::pending()));
    let registered: serde_json::Value = reqwest::Client::new()
        .post(format!("http://{addr}/_plugins/_ml/agents/_register"))
        .json(&serde_json::json!({
            "name": "registered demo",
            "type": "ag_ui",
            "model": { "model_id": "scripted-demo", "model_provider": "scripted" },
            "parameters": { "system_prompt": "You are a helpful assistant." },
            "tools": [
                { "type": "builtin", "name": "calculator" },
                { "type": "builtin", "name": "publish_message", "kind": "publish", "requires_approval": true }
            ]
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = registered["agent_id"]
        .as_str()
        .expect("registered")
        .to_string();

    let per: serde_json::Value = reqwest::Client::new()
        .post(format!("http://{addr}/_plugins/_ml/agents/_register"))
        .json(&serde_json::json!({
            "name": "per demo",
            "type": "plan_execute_and_reflect",
            "model": { "model_id": "scripted-per", "model_provider": "scripted",
                       "model_parameters": { "fixture": PER_FIXTURE } },
            "tools": [{ "type": "builtin", "name": "calculator" }]
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let per = per["agent_id"].as_str().expect("registered").to_string();

    let out = tokio::process::Command::new("node")
        .arg(dir.join("run.mjs"))
        .arg(format!("http://{addr}"))
        .arg("/agents/demo/agui")
        .arg("/_plugins/_ml/agents/demo/_execute/stream")
        .arg(format!("/_plugins/_ml/agents/{id}/_execute/stream"))
        .arg(format!("per:/_plugins/_ml/agents/{per}/_execute/stream"))
        .arg(format!("per:/agents/{per}/agui"))
        .current_dir(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .await
        .expect("node must be installed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stdout}\n{stderr}");
    assert!(
        out.status.success(),
        "conformance failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("94 passed, 0 failed"), "{stdout}");
}

/// The planner answers one calculator step, then (seeing it completed) the result; the
/// executor calls the calculator and reports.
const PER_FIXTURE: &str = r#"{"rules": [
  {"when": {"user_contains": "Steps completed so far"},
   "reply": {"text": "{\"steps\": [], \"result\": \"The answer is 42.\"}"}},
  {"when": {"user_contains": "Objective:"},
   "reply": {"text": "{\"steps\": [\"Compute 6*7 with the calculator\"], \"result\": \"\"}"}},
  {"when": {"user_contains": "Compute 6*7"},
   "reply": {"tool_calls": [{"name": "calculator", "arguments": {"expression": "6*7"}}]}},
  {"when": {"after_tool": "calculator"}, "reply": {"text": "6*7 = {tool_result}"}}
]}"#;
