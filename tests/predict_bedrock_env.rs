/// `_predict` on the model a unified Bedrock `model` block created goes where the agent's AWS
/// SDK goes: `AWS_ENDPOINT_URL_BEDROCK_RUNTIME` in the gateway's environment, signed with the
/// block's credential.
mod common;

use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::routing::post;
use axum::{Json, Router};
use common::{GatewayProcess, TRUST_LOOPBACK, temp_dir};
use serde_json::{Value, json};

type Seen = Arc<Mutex<Vec<(String, HeaderMap, Value)>>>;

async fn converse(
    State(seen): State<Seen>,
    Path(model): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Json<Value> {
    seen.lock().unwrap().push((model, headers, body));
    Json(json!({
        "output": {"message": {"role": "assistant", "content": [{"text": "Hi from the stand-in."}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 2, "outputTokens": 5, "totalTokens": 7}
    }))
}

async fn post_json(gw: &GatewayProcess, path: &str, body: Value) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .post(gw.url(path))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn predict_on_a_model_block_honours_the_bedrock_endpoint_variable() {
    let seen: Seen = Arc::default();
    let app = Router::new()
        .route("/model/{model}/converse", post(converse))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let dir = temp_dir("predict-env");
    let config = dir.join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "data_dir = \"{}\"\n{TRUST_LOOPBACK}",
            dir.join("data").display()
        ),
    )
    .unwrap();
    let gw = GatewayProcess::spawn(
        &config,
        &[
            ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", endpoint.as_str()),
            ("AWS_EC2_METADATA_DISABLED", "true"),
        ],
        false,
    )
    .await;
    let (s, reg) = post_json(
        &gw,
        "/_plugins/_ml/agents/_register",
        json!({
            "name": "Claude 3.7", "type": "conversational",
            "model": {
                "model_id": "us.anthropic.claude-3-7-sonnet-20250219-v1:0",
                "model_provider": "bedrock/converse",
                "credential": {"access_key": "AKIDBLOCK", "secret_key": "block-secret"}
            }
        }),
    )
    .await;
    assert_eq!(s, 200, "{reg}");
    let agent: Value = reqwest::get(gw.url(&format!(
        "/_plugins/_ml/agents/{}",
        reg["agent_id"].as_str().unwrap()
    )))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let model_id = agent["llm"]["model_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{agent}"));
    let (s, out) = post_json(
        &gw,
        &format!("/_plugins/_ml/models/{model_id}/_predict"),
        json!({"parameters": {"prompt": "hello"}}),
    )
    .await;
    assert_eq!(s, 200, "{out}");
    assert_eq!(
        out["inference_results"][0]["output"][0]["dataAsMap"]["response"],
        "Hi from the stand-in."
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].0, "us.anthropic.claude-3-7-sonnet-20250219-v1:0");
    assert_eq!(
        seen[0].2,
        json!({"messages": [{"role": "user", "content": [{"text": "hello"}]}]})
    );
    let auth = seen[0].1["authorization"].to_str().unwrap();
    assert!(
        auth.contains("Credential=AKIDBLOCK/") && auth.contains("/us-east-1/bedrock/aws4_request"),
        "{auth}"
    );
}
