/// The ml-commons-shaped agent API through HTTP against the real server: unified and legacy
/// registration, execute with memory, token usage, async tasks, delete; connectors with
/// templates, `_predict` and SigV4; credentials sealed at rest and never shown.
mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agui_gateway::store::docs::DocKind;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use common::bedrock_fake::{BedrockReply, FakeBedrock, text_events};
use common::{FakeOpenAi, Gateway, Reply, text_chunks};
use serde_json::{Value, json};

const MINIMAL: &str = "[[agents]]\nid = \"cfg\"\n[agents.model]\nprovider = \"scripted\"\n";

async fn call(gw: &Gateway, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    common::send_json(method, gw.url(path), body.as_ref()).await
}

async fn post(gw: &Gateway, path: &str, body: Value) -> (u16, Value) {
    call(gw, "POST", path, Some(body)).await
}

/// The `result` of the output named `name`.
fn output<'a>(resp: &'a Value, name: &str) -> &'a Value {
    common::ml_output(resp, name)
}

fn assert_error(status: u16, body: &Value, want: u16, field: &str) {
    assert_eq!(status, want, "{body}");
    assert_eq!(body["status"], want, "{body}");
    assert!(body["error"]["type"].is_string(), "{body}");
    assert!(body["error"]["reason"].is_string(), "{body}");
    assert!(body["error"]["details"].is_object(), "{body}");
    if !field.is_empty() {
        assert_eq!(body["error"]["details"]["field"], field, "{body}");
    }
}

/// Bytes of the SQLite store files (database and write-ahead log).
fn store_bytes(gw: &Gateway) -> Vec<u8> {
    let dir = &gw.state.data_dir;
    let mut out = Vec::new();
    for f in ["agui.db", "agui.db-wal"] {
        if let Ok(b) = std::fs::read(dir.join(f)) {
            out.extend(b);
        }
    }
    out
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[tokio::test]
async fn unified_registration_executes_remembers_reports_usage_runs_async_and_deletes() {
    let up = FakeOpenAi::start(vec![
        Reply::Sse(text_chunks("Hello Ann.")),
        Reply::Sse(text_chunks("Your name is Ann.")),
        Reply::Sse(text_chunks("Still Ann.")),
    ])
    .await;
    let gw = Gateway::start(MINIMAL).await;
    let secret = "sk-unified-secret-1234";
    let (status, reg) = post(
        &gw,
        "/_plugins/_ml/agents/_register",
        json!({
            "name": "unified",
            "type": "conversational",
            "model": {
                "model_id": "gpt-test",
                "model_provider": "openai/v1/chat/completions",
                "credential": { "openAI_key": secret },
                "model_parameters": { "base_url": up.base_url(), "temperature": 0.25 }
            },
            "parameters": { "system_prompt": "Be brief." },
            "memory": { "type": "conversation_index" }
        }),
    )
    .await;
    assert_eq!(status, 200, "{reg}");
    let id = reg["agent_id"].as_str().unwrap().to_string();

    let (status, first) = post(
        &gw,
        &format!("/_plugins/_ml/agents/{id}/_execute"),
        json!({ "input": "My name is Ann" }),
    )
    .await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(output(&first, "response")["result"], "Hello Ann.");
    let memory_id = output(&first, "memory_id")["result"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(output(&first, "parent_interaction_id")["result"].is_string());

    let (status, second) = post(
        &gw,
        &format!("/_plugins/_ml/agents/{id}/_execute"),
        json!({ "parameters": {
            "question": "What is my name?",
            "memory_id": memory_id,
            "include_token_usage": true
        }}),
    )
    .await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(output(&second, "memory_id")["result"], memory_id.as_str());
    assert_eq!(output(&second, "response")["result"], "Your name is Ann.");
    // The second call carried the first exchange: memory continued.
    let reqs = up.requests();
    let sent = reqs[1]["messages"].to_string();
    assert!(
        sent.contains("My name is Ann") && sent.contains("Hello Ann."),
        "{sent}"
    );
    assert_eq!(reqs[1]["messages"][0]["content"], "Be brief.");
    assert_eq!(reqs[1]["temperature"], 0.25);
    assert_eq!(
        up.upstream.auth.lock().unwrap()[0],
        format!("authorization: Bearer {secret}")
    );
    // Token usage names the registered model.
    let (_, agent_doc) = call(&gw, "GET", &format!("/_plugins/_ml/agents/{id}"), None).await;
    let model_id = agent_doc["llm"]["model_id"].as_str().unwrap().to_string();
    let usage = &output(&second, "token_usage")["dataAsMap"];
    assert_eq!(usage["per_turn_usage"][0]["turn"], 1);
    assert_eq!(usage["per_turn_usage"][0]["input_tokens"], 11);
    assert_eq!(usage["per_turn_usage"][0]["model_id"], model_id.as_str());
    assert_eq!(usage["per_model_usage"][0]["call_count"], 1);
    assert_eq!(usage["per_model_usage"][0]["total_tokens"], 18);

    // Asynchronous execution: a task that ends with the same response format.
    let (status, task) = post(
        &gw,
        &format!("/_plugins/_ml/agents/{id}/_execute?async=true"),
        json!({ "input": "And now?", "parameters": { "memory_id": memory_id, "message_history_limit": 1 } }),
    )
    .await;
    assert_eq!(status, 200, "{task}");
    assert_eq!(task["status"], "RUNNING");
    assert_eq!(task["response"]["memory_id"], memory_id.as_str());
    let task_id = task["task_id"].as_str().unwrap();
    let mut done = Value::Null;
    for _ in 0..100 {
        let (_, t) = call(&gw, "GET", &format!("/_plugins/_ml/tasks/{task_id}"), None).await;
        if t["state"] != "RUNNING" {
            done = t;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(done["state"], "COMPLETED", "{done}");
    assert_eq!(
        output(&done["response"], "response")["result"],
        "Still Ann."
    );
    // message_history_limit counts interactions, as ml-commons does: the system prompt, the
    // one interaction before, and the question.
    let third = &up.requests()[2]["messages"];
    assert_eq!(third.as_array().unwrap().len(), 4, "{third}");
    assert_eq!(third[1]["content"], "What is my name?");
    assert_eq!(third[3]["content"], "And now?");

    // The secret is sealed at rest and shown nowhere.
    for path in [
        format!("/_plugins/_ml/agents/{id}"),
        format!("/_plugins/_ml/models/{model_id}"),
    ] {
        let (status, doc) = call(&gw, "GET", &path, None).await;
        assert_eq!(status, 200);
        assert!(!doc.to_string().contains(secret), "{path}: {doc}");
    }
    let (_, found) = post(
        &gw,
        "/_plugins/_ml/agents/_search",
        json!({"query": {"match": {"name": "unified"}}}),
    )
    .await;
    assert_eq!(found["hits"]["total"]["value"], 1, "{found}");
    assert!(!found.to_string().contains(secret));
    let model = gw
        .state
        .store
        .doc(DocKind::Model, &model_id)
        .await
        .unwrap()
        .unwrap();
    let sealed = model
        .sealed
        .clone()
        .expect("the credential is stored sealed");
    assert!(!sealed.contains(secret) && !model.body.to_string().contains(secret));
    assert!(
        !contains(&store_bytes(&gw), secret),
        "the secret is in the store files in plaintext"
    );

    // Delete: the agent and the model its block created are gone.
    let (status, del) = call(&gw, "DELETE", &format!("/_plugins/_ml/agents/{id}"), None).await;
    assert_eq!((status, del["result"].clone()), (200, json!("deleted")));
    let (status, body) = call(&gw, "GET", &format!("/_plugins/_ml/agents/{id}"), None).await;
    assert_error(status, &body, 404, "");
    let (status, body) = post(
        &gw,
        &format!("/_plugins/_ml/agents/{id}/_execute"),
        json!({"input": "hi"}),
    )
    .await;
    assert_error(status, &body, 404, "");
    let (status, _) = call(
        &gw,
        "GET",
        &format!("/_plugins/_ml/models/{model_id}"),
        None,
    )
    .await;
    assert_eq!(status, 404);
}

/// A plain JSON upstream for `_predict`: records each request, answers a chat completion.
#[derive(Default)]
struct Recorded {
    requests: Mutex<Vec<(HeaderMap, Value, Bytes)>>,
}

async fn predict_upstream() -> (String, Arc<Recorded>) {
    async fn answer(
        State(r): State<Arc<Recorded>>,
        headers: HeaderMap,
        body: Bytes,
    ) -> axum::Json<Value> {
        let v = serde_json::from_slice(&body).unwrap_or(Value::Null);
        r.requests.lock().unwrap().push((headers, v, body));
        axum::Json(
            json!({"choices": [{"message": {"role": "assistant", "content": "pong"}}], "usage": {"total_tokens": 3}}),
        )
    }
    let rec = Arc::new(Recorded::default());
    let app = axum::Router::new()
        .route("/predict", axum::routing::post(answer))
        .with_state(Arc::clone(&rec));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), rec)
}

#[tokio::test]
async fn connectors_fill_templates_filter_responses_and_sign_for_aws() {
    let (base, rec) = predict_upstream().await;
    let gw = Gateway::start(MINIMAL).await;
    let key = "sk-legacy-secret-5678";
    let (status, c) = post(
        &gw,
        "/_plugins/_ml/connectors/_create",
        json!({
            "name": "chat connector",
            "description": "OpenAI-compatible",
            "version": 1,
            "protocol": "http",
            "parameters": { "model": "m1", "temperature": 0.5, "response_filter": "$.choices[0].message.content" },
            "credential": { "openAI_key": key },
            "actions": [{
                "action_type": "predict",
                "method": "POST",
                "url": format!("{base}/predict"),
                "headers": { "Authorization": "Bearer ${credential.openAI_key}", "content-type": "application/json" },
                "request_body": "{\"model\":\"${parameters.model}\",\"messages\":[{\"role\":\"user\",\"content\":\"${parameters.prompt}\"}],\"temperature\":${parameters.temperature},\"max_tokens\":${parameters.max_tokens:-64}}"
            }]
        }),
    )
    .await;
    assert_eq!(status, 200, "{c}");
    let connector_id = c["connector_id"].as_str().unwrap().to_string();
    let (_, got) = call(
        &gw,
        "GET",
        &format!("/_plugins/_ml/connectors/{connector_id}"),
        None,
    )
    .await;
    assert_eq!(got["name"], "chat connector");
    assert!(
        got.get("credential").is_none() && !got.to_string().contains(key),
        "{got}"
    );

    let (status, m) = post(
        &gw,
        "/_plugins/_ml/models/_register",
        json!({"name": "chat", "function_name": "remote", "connector_id": connector_id}),
    )
    .await;
    assert_eq!(status, 200, "{m}");
    let model_id = m["model_id"].as_str().unwrap().to_string();
    let (_, model) = call(
        &gw,
        "GET",
        &format!("/_plugins/_ml/models/{model_id}"),
        None,
    )
    .await;
    assert_eq!(model["model_state"], "DEPLOYED");

    let (status, p) = post(
        &gw,
        &format!("/_plugins/_ml/models/{model_id}/_predict"),
        json!({"parameters": {"prompt": "say \"hi\"\nplease", "temperature": 0.9}}),
    )
    .await;
    assert_eq!(status, 200, "{p}");
    assert_eq!(
        p["inference_results"][0]["output"][0]["dataAsMap"]["response"],
        "pong"
    );
    let (headers, body, _) = rec.requests.lock().unwrap()[0].clone();
    assert_eq!(
        body,
        json!({"model": "m1", "messages": [{"role": "user", "content": "say \"hi\"\nplease"}], "temperature": 0.9, "max_tokens": 64})
    );
    assert_eq!(headers["authorization"], format!("Bearer {key}").as_str());

    // A placeholder without value or default is the caller's fault, named.
    let (status, body) = post(
        &gw,
        &format!("/_plugins/_ml/models/{model_id}/_predict"),
        json!({"parameters": {}}),
    )
    .await;
    assert_error(status, &body, 400, "parameters");
    assert!(
        body["error"]["reason"]
            .as_str()
            .unwrap()
            .contains("parameters.prompt"),
        "{body}"
    );
    // The connector is in use.
    let (status, body) = call(
        &gw,
        "DELETE",
        &format!("/_plugins/_ml/connectors/{connector_id}"),
        None,
    )
    .await;
    assert_error(status, &body, 409, "");

    // An aws_sigv4 connector's requests are signed.
    let (status, m) = post(
        &gw,
        "/_plugins/_ml/models/_register",
        json!({
            "name": "signed", "function_name": "remote",
            "connector": {
                "name": "bedrock invoke", "protocol": "aws_sigv4",
                "parameters": { "region": "us-west-2", "service_name": "bedrock", "response_filter": "$.choices[0].message.content" },
                "credential": { "access_key": "AKIDEXAMPLETEST", "secret_key": "wJalrSECRETKEYEXAMPLE", "session_token": "tok-session" },
                "actions": [{
                    "action_type": "predict", "method": "POST", "url": format!("{base}/predict"),
                    "headers": { "content-type": "application/json", "x-amz-content-sha256": "required" },
                    "request_body": "{\"prompt\":\"${parameters.prompt}\"}"
                }]
            }
        }),
    )
    .await;
    assert_eq!(status, 200, "{m}");
    let signed = m["model_id"].as_str().unwrap();
    let (status, p) = post(
        &gw,
        &format!("/_plugins/_ml/models/{signed}/_predict"),
        json!({"parameters": {"prompt": "hi"}}),
    )
    .await;
    assert_eq!(status, 200, "{p}");
    let (headers, _, raw) = rec.requests.lock().unwrap()[1].clone();
    let auth = headers["authorization"].to_str().unwrap();
    assert!(
        auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLETEST/"),
        "{auth}"
    );
    assert!(auth.contains("/us-west-2/bedrock/aws4_request"), "{auth}");
    assert!(
        auth.contains("SignedHeaders=") && auth.contains("Signature="),
        "{auth}"
    );
    assert!(headers.contains_key("x-amz-date"));
    assert_eq!(headers["x-amz-security-token"], "tok-session");
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &raw);
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(headers["x-amz-content-sha256"], hex.as_str());
    let (_, model) = call(&gw, "GET", &format!("/_plugins/_ml/models/{signed}"), None).await;
    assert!(
        !model.to_string().contains("wJalrSECRETKEYEXAMPLE")
            && !model.to_string().contains("AKIDEXAMPLETEST"),
        "{model}"
    );
    assert!(!contains(&store_bytes(&gw), "wJalrSECRETKEYEXAMPLE"));
    assert!(!contains(&store_bytes(&gw), key));

    // Connector definitions are checked field by field.
    let (status, body) = post(
        &gw,
        "/_plugins/_ml/connectors/_create",
        json!({"name": "x", "protocol": "aws_sigv4", "parameters": {"region": "us-east-1", "service_name": "bedrock"},
               "credential": {"access_key": "a"}, "actions": [{"action_type": "predict", "method": "POST", "url": "https://x"}]}),
    )
    .await;
    assert_error(status, &body, 400, "credential.secret_key");
}

#[tokio::test]
async fn a_legacy_agent_uses_its_model_connector_and_llm_interface() {
    let up = FakeOpenAi::start(vec![
        Reply::Sse(text_chunks("Legacy answer.")),
        Reply::Sse(text_chunks("Overridden.")),
    ])
    .await;
    let gw = Gateway::start(MINIMAL).await;
    let (_, m) = post(
        &gw,
        "/_plugins/_ml/models/_register",
        json!({
            "name": "legacy model", "function_name": "remote",
            "connector": {
                "name": "openai", "protocol": "http",
                "parameters": { "model": "m-legacy" },
                "credential": { "openAI_key": "sk-legacy-agent" },
                "actions": [{
                    "action_type": "predict", "method": "POST",
                    "url": format!("{}/chat/completions", up.base_url()),
                    "headers": { "Authorization": "Bearer ${credential.openAI_key}" },
                    "request_body": "{\"model\":\"${parameters.model}\",\"messages\":${parameters.messages}}"
                }]
            }
        }),
    )
    .await;
    let model_id = m["model_id"].as_str().unwrap();
    let (status, reg) = post(
        &gw,
        "/_plugins/_ml/agents/_register",
        json!({
            "name": "legacy", "type": "conversational",
            "llm": { "model_id": model_id, "parameters": { "max_iteration": 3, "system_prompt": "Legacy system prompt.", "prompt": "${parameters.question}" } },
            "parameters": { "_llm_interface": "openai/v1/chat/completions" },
            "memory": { "type": "conversation_index" }
        }),
    )
    .await;
    assert_eq!(status, 200, "{reg}");
    let id = reg["agent_id"].as_str().unwrap();
    let (status, out) = post(
        &gw,
        &format!("/_plugins/_ml/agents/{id}/_execute"),
        json!({"parameters": {"question": "hello?"}}),
    )
    .await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(output(&out, "response")["result"], "Legacy answer.");
    let req = &up.requests()[0];
    assert_eq!(req["model"], "m-legacy");
    assert_eq!(req["messages"][0]["content"], "Legacy system prompt.");
    assert_eq!(
        up.upstream.auth.lock().unwrap()[0],
        "authorization: Bearer sk-legacy-agent"
    );
    // Execution parameters override the registered ones.
    let (status, out) = post(
        &gw,
        &format!("/_plugins/_ml/agents/{id}/_execute"),
        json!({"parameters": {"question": "again?", "system_prompt": "Override prompt."}}),
    )
    .await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(
        up.requests()[1]["messages"][0]["content"],
        "Override prompt."
    );
    // A model still used by an agent cannot be deleted.
    let (status, body) = call(
        &gw,
        "DELETE",
        &format!("/_plugins/_ml/models/{model_id}"),
        None,
    )
    .await;
    assert_error(status, &body, 409, "");

    let (status, body) = post(
        &gw,
        "/_plugins/_ml/agents/_register",
        json!({"name": "x", "type": "conversational", "llm": {"model_id": model_id},
               "parameters": {"_llm_interface": "gemini/v1beta/generatecontent"}}),
    )
    .await;
    assert_error(status, &body, 400, "parameters._llm_interface");
}

#[tokio::test]
async fn bedrock_agents_unified_and_legacy_stream_through_converse() {
    let fake = FakeBedrock::start(vec![
        BedrockReply::Events(text_events("Unified bedrock.")),
        BedrockReply::Events(text_events("Legacy bedrock.")),
    ])
    .await;
    let gw = Gateway::start(MINIMAL).await;
    let (status, reg) = post(
        &gw,
        "/_plugins/_ml/agents/_register",
        json!({
            "name": "bedrock unified", "type": "conversational_v2",
            "model": {
                "model_id": "us.anthropic.claude-3-7-sonnet-20250219-v1:0",
                "model_provider": "bedrock/converse",
                "credential": { "access_key": "AKIDUNIFIED", "secret_key": "secret-unified" },
                "model_parameters": { "region": "us-west-2", "endpoint_url": fake.endpoint(), "max_tokens": 300 }
            },
            "memory": { "type": "conversation_index" }
        }),
    )
    .await;
    assert_eq!(status, 200, "{reg}");
    let id = reg["agent_id"].as_str().unwrap();
    let (status, out) = post(
        &gw,
        &format!("/_plugins/_ml/agents/{id}/_execute"),
        json!({"input": [{"type": "text", "text": "hi"}]}),
    )
    .await;
    assert_eq!(status, 200, "{out}");
    let data = &out["inference_results"][0]["output"][0]["dataAsMap"];
    assert_eq!(data["stop_reason"], "end_turn");
    assert_eq!(data["message"]["role"], "assistant");
    assert_eq!(data["message"]["content"][0]["text"], "Unified bedrock.");
    assert_eq!(
        data["metrics"]["total_usage"],
        json!({"inputTokens": 10, "outputTokens": 5, "totalTokens": 15})
    );
    assert!(data["memory_id"].is_string());
    let r = &fake.requests()[0];
    assert_eq!(
        r.path,
        "/model/us.anthropic.claude-3-7-sonnet-20250219-v1:0/converse-stream"
    );
    let auth = r.headers["authorization"].to_str().unwrap();
    assert!(
        auth.contains("AKIDUNIFIED/") && auth.contains("/us-west-2/bedrock/"),
        "{auth}"
    );
    assert_eq!(r.body["inferenceConfig"]["maxTokens"], 300);

    // Legacy: a SigV4 connector whose URL names the model, and `_llm_interface`.
    let (_, c) = post(
        &gw,
        "/_plugins/_ml/connectors/_create",
        json!({
            "name": "bedrock", "protocol": "aws_sigv4",
            "parameters": { "region": "eu-west-1", "service_name": "bedrock", "model": "anthropic.claude-3-haiku-20240307-v1:0" },
            "credential": { "access_key": "AKIDLEGACY", "secret_key": "secret-legacy" },
            "actions": [{ "action_type": "predict", "method": "POST",
                "url": format!("{}/model/${{parameters.model}}/converse", fake.endpoint()),
                "headers": { "content-type": "application/json" },
                "request_body": "{\"messages\":[{\"role\":\"user\",\"content\":[{\"text\":\"${parameters.prompt}\"}]}]}" }]
        }),
    )
    .await;
    let (_, m) = post(
        &gw,
        "/_plugins/_ml/models/_register",
        json!({"name": "b", "connector_id": c["connector_id"]}),
    )
    .await;
    let (status, reg) = post(
        &gw,
        "/_plugins/_ml/agents/_register",
        json!({"name": "bedrock legacy", "type": "conversational", "llm": {"model_id": m["model_id"]},
               "parameters": {"_llm_interface": "bedrock/converse/claude"}}),
    )
    .await;
    assert_eq!(status, 200, "{reg}");
    let id = reg["agent_id"].as_str().unwrap();
    let (status, out) = post(
        &gw,
        &format!("/_plugins/_ml/agents/{id}/_execute"),
        json!({"input": "hello"}),
    )
    .await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(output(&out, "response")["result"], "Legacy bedrock.");
    let r = &fake.requests()[1];
    assert_eq!(
        r.path,
        "/model/anthropic.claude-3-haiku-20240307-v1:0/converse-stream"
    );
    assert!(
        r.headers["authorization"]
            .to_str()
            .unwrap()
            .contains("AKIDLEGACY/")
    );
    // No memory configured: no memory_id in the answer.
    assert!(
        out["inference_results"][0]["output"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| o["name"] != "memory_id")
    );
}

#[tokio::test]
async fn flow_agents_run_tools_in_order_with_templated_parameters() {
    let up = FakeOpenAi::start(vec![
        Reply::Sse(text_chunks("Sunny in Paris.")),
        Reply::Sse(text_chunks("No data.")),
        Reply::Sse(text_chunks("First answer.")),
        Reply::Sse(text_chunks("Second answer.")),
    ])
    .await;
    let gw = Gateway::start(MINIMAL).await;
    let (_, m) = post(
        &gw,
        "/_plugins/_ml/models/_register",
        json!({"name": "summarizer model", "connector": {
            "name": "c", "protocol": "http", "parameters": {"model": "m-flow"},
            "credential": {"openAI_key": "k"},
            "actions": [{"action_type": "predict", "method": "POST", "url": format!("{}/chat/completions", up.base_url()),
                         "headers": {"Authorization": "Bearer ${credential.openAI_key}"}, "request_body": "{}"}]}}),
    )
    .await;
    let model_id = m["model_id"].as_str().unwrap().to_string();
    let (status, reg) = post(
        &gw,
        "/_plugins/_ml/agents/_register",
        json!({
            "name": "weather flow", "type": "flow",
            "tools": [
                { "type": "http", "name": "weather", "description": "Weather for a city",
                  "url": format!("http://{}/weather", up.addr),
                  "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
                  "input": { "city": "${parameters.question}" },
                  "include_output_in_agent_response": true },
                { "type": "MLModelTool", "name": "summarizer",
                  "parameters": { "model_id": model_id,
                                  "prompt": "Weather data: ${parameters.weather.output:-none}. Question: ${parameters.question}" } }
            ]
        }),
    )
    .await;
    assert_eq!(status, 200, "{reg}");
    let id = reg["agent_id"].as_str().unwrap();
    let (status, out) = post(
        &gw,
        &format!("/_plugins/_ml/agents/{id}/_execute"),
        json!({"parameters": {"question": "Paris"}}),
    )
    .await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(output(&out, "summarizer")["result"], "Sunny in Paris.");
    assert!(
        output(&out, "weather")["result"]
            .as_str()
            .unwrap()
            .contains("sunny")
    );
    assert_eq!(
        up.upstream.tool_calls.lock().unwrap()[0],
        json!({"city": "Paris"})
    );
    let prompt = up.requests()[0]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        prompt.starts_with("Weather data: {") && prompt.contains("\"temperature_c\":21"),
        "{prompt}"
    );
    assert!(prompt.ends_with(". Question: Paris"), "{prompt}");
    assert_eq!(up.requests()[0]["model"], "m-flow");

    // selected_tools: only the summarizer, so the weather output falls back to its default.
    let (status, out) = post(
        &gw,
        &format!("/_plugins/_ml/agents/{id}/_execute"),
        json!({"parameters": {"question": "Rome", "selected_tools": ["summarizer"]}}),
    )
    .await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(output(&out, "summarizer")["result"], "No data.");
    assert_eq!(
        up.upstream.tool_calls.lock().unwrap().len(),
        1,
        "weather must not run"
    );
    assert_eq!(
        up.requests()[1]["messages"][0]["content"],
        "Weather data: none. Question: Rome"
    );
    // An unknown selected tool is the caller's fault.
    let (status, body) = post(
        &gw,
        &format!("/_plugins/_ml/agents/{id}/_execute"),
        json!({"parameters": {"question": "x", "selected_tools": ["nope"]}}),
    )
    .await;
    assert_error(status, &body, 400, "parameters");

    // A conversational flow remembers: the second prompt holds the first exchange.
    let (status, reg) = post(
        &gw,
        "/_plugins/_ml/agents/_register",
        json!({
            "name": "chat flow", "type": "conversational_flow",
            "memory": { "type": "conversation_index" },
            "tools": [{ "type": "MLModelTool", "name": "chat",
                        "parameters": { "model_id": model_id, "prompt": "${parameters.chat_history:-}\nHuman: ${parameters.question}" } }]
        }),
    )
    .await;
    assert_eq!(status, 200, "{reg}");
    let id = reg["agent_id"].as_str().unwrap();
    let (_, first) = post(
        &gw,
        &format!("/_plugins/_ml/agents/{id}/_execute"),
        json!({"parameters": {"question": "one"}}),
    )
    .await;
    let memory_id = output(&first, "memory_id")["result"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(output(&first, "chat")["result"], "First answer.");
    let (status, second) = post(
        &gw,
        &format!("/_plugins/_ml/agents/{id}/_execute"),
        json!({"parameters": {"question": "two", "memory_id": memory_id}}),
    )
    .await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(
        up.requests()[3]["messages"][0]["content"],
        "Below is Chat History between Human and AI which sorted by time with asc order:\nHuman:one\nAssistant:First answer.\n\nHuman: two"
    );
}

#[tokio::test]
async fn every_malformed_request_is_a_400_naming_its_field() {
    let gw = Gateway::start(MINIMAL).await;
    let reg = |body: Value| post(&gw, "/_plugins/_ml/agents/_register", body);
    let scripted = json!({"model_id": "s", "model_provider": "scripted"});
    let cases: Vec<(Value, &str)> = vec![
        (json!({"type": "conversational", "model": scripted}), "name"),
        (json!({"name": "a", "model": scripted}), "type"),
        (
            json!({"name": "a", "type": "chatty", "model": scripted}),
            "type",
        ),
        (json!({"name": "a", "type": "conversational"}), "model"),
        (
            json!({"name": "a", "type": "conversational", "model": {"model_id": "x", "model_provider": "gemini"}}),
            "model.model_provider",
        ),
        (
            json!({"name": "a", "type": "conversational", "model": {"model_provider": "scripted"}}),
            "model.model_id",
        ),
        (
            json!({"name": "a", "type": "conversational", "model": {"model_id": "x", "model_provider": "openai/v1/chat/completions"}}),
            "model.credential.openAI_key",
        ),
        (
            json!({"name": "a", "type": "conversational", "model": {"model_id": "x", "model_provider": "anthropic/v1/messages", "credential": {}}}),
            "model.credential.anthropic_key",
        ),
        (
            json!({"name": "a", "type": "conversational", "model": {"model_id": "x", "model_provider": "bedrock/converse", "credential": {"access_key": "a"}}}),
            "model.credential.secret_key",
        ),
        (
            json!({"name": "a", "type": "conversational", "model": scripted, "llm": {"model_id": "m"}}),
            "model",
        ),
        (
            json!({"name": "a", "type": "conversational", "llm": {"model_id": "missing"}}),
            "llm.model_id",
        ),
        (json!({"name": "a", "type": "flow"}), "tools"),
        (
            json!({"name": "a", "type": "conversational", "model": scripted, "memory": {"type": "agentic_memory", "memory_container_id": ""}}),
            "memory.memory_container_id",
        ),
        (
            json!({"name": "a", "type": "conversational", "model": scripted, "tools": [{"name": "t"}]}),
            "tools[0].type",
        ),
        (
            json!({"name": "a", "type": "conversational", "model": scripted, "tools": [{"type": "mcp", "name": "m", "command": "sh"}]}),
            "tools[0].command",
        ),
    ];
    for (body, field) in cases {
        let (status, resp) = reg(body.clone()).await;
        assert_error(status, &resp, 400, field);
    }
    // Nothing was left behind by the refused registrations.
    let (_, found) = post(
        &gw,
        "/_plugins/_ml/agents/_search",
        json!({"query": {"match_all": {}}}),
    )
    .await;
    assert_eq!(
        found["hits"]["total"]["value"], 1,
        "only the config agent: {found}"
    );
    let (_, models) = post(&gw, "/_plugins/_ml/models/_search", json!({})).await;
    assert_eq!(models["hits"]["total"]["value"], 0, "{models}");

    let (_, r) = reg(json!({"name": "plain", "type": "conversational", "model": scripted, "memory": {"type": "conversation_index"}})).await;
    let plain = r["agent_id"].as_str().unwrap().to_string();
    let (_, r) = reg(json!({"name": "v2", "type": "conversational_v2", "model": scripted})).await;
    let v2 = r["agent_id"].as_str().unwrap().to_string();
    // A conversational agent of the regular registration (llm.model_id) takes text only; one
    // with a model block takes content blocks (seed 000's RFC).
    let (_, doc) = call(&gw, "GET", &format!("/_plugins/_ml/agents/{plain}"), None).await;
    let (_, r) = reg(json!({"name": "legacy", "type": "conversational", "llm": {"model_id": doc["llm"]["model_id"]}})).await;
    let legacy = r["agent_id"].as_str().unwrap().to_string();
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";
    let exec: Vec<(&str, Value, &str)> = vec![
        (&plain, json!({}), "parameters.question"),
        (
            &plain,
            json!({"parameters": {"question": 7}}),
            "parameters.question",
        ),
        (&plain, json!({"parameters": []}), "parameters"),
        (&v2, json!({"input": {"text": "x"}}), "input"),
        (&v2, json!({"input": 12}), "input"),
        (&v2, json!({"input": ""}), "input"),
        (&v2, json!({"input": []}), "input"),
        (&v2, json!({"input": [{"text": "x"}]}), "input[0]"),
        (
            &v2,
            json!({"input": [{"type": "hologram"}]}),
            "input[0].type",
        ),
        (&v2, json!({"input": [{"type": "text"}]}), "input[0].text"),
        (
            &v2,
            json!({"input": [{"type": "image", "source": {"type": "base64", "format": "tiff", "data": png}}]}),
            "input[0].source.format",
        ),
        (
            &v2,
            json!({"input": [{"type": "image", "source": {"type": "base64", "format": "png", "data": "not base64!"}}]}),
            "input[0].source.data",
        ),
        (
            &v2,
            json!({"input": [{"type": "video", "source": {"type": "s3", "format": "mp4", "data": "x"}}]}),
            "input[0].source.type",
        ),
        (
            &v2,
            json!({"input": [{"type": "document"}]}),
            "input[0].source",
        ),
        (
            &v2,
            json!({"input": [{"role": "user"}]}),
            "input[0].content",
        ),
        (
            &v2,
            json!({"input": [{"role": "tool", "content": [{"type": "text", "text": "x"}]}]}),
            "input[0].role",
        ),
        (
            &v2,
            json!({"input": [{"role": "user", "content": "x"}]}),
            "input[0].content",
        ),
        (
            &legacy,
            json!({"input": [{"type": "text", "text": "x"}]}),
            "input",
        ),
    ];
    for (agent, body, field) in exec {
        let (status, resp) = post(
            &gw,
            &format!("/_plugins/_ml/agents/{agent}/_execute"),
            body.clone(),
        )
        .await;
        assert_error(status, &resp, 400, field);
    }
    let (status, resp) = post(
        &gw,
        &format!("/_plugins/_ml/agents/{plain}/_execute"),
        json!({"input": "hi", "parameters": {"memory_id": "nope"}}),
    )
    .await;
    assert_error(status, &resp, 404, "");
    let raw = reqwest::Client::new()
        .post(gw.url(&format!("/_plugins/_ml/agents/{plain}/_execute")))
        .header("content-type", "application/json")
        .body("{\"input\": ")
        .send()
        .await
        .unwrap();
    let status = raw.status().as_u16();
    assert_error(status, &raw.json().await.unwrap(), 400, "");
    // The same validation guards the streaming endpoint, before any event.
    let (status, resp) = post(
        &gw,
        &format!("/_plugins/_ml/agents/{v2}/_execute/stream"),
        json!({"input": [{"type": "text"}]}),
    )
    .await;
    assert_error(status, &resp, 400, "input[0].text");
    let (status, resp) = call(&gw, "GET", "/_plugins/_ml/no/such/endpoint", None).await;
    assert_error(status, &resp, 404, "");
    // Config-file agents are in the registry but not deletable through the API.
    let (status, resp) = call(&gw, "DELETE", "/_plugins/_ml/agents/cfg", None).await;
    assert_error(status, &resp, 409, "");
    let (status, cfg) = call(&gw, "GET", "/_plugins/_ml/agents/cfg", None).await;
    assert_eq!((status, cfg["type"].clone()), (200, json!("ag_ui")));
}

#[tokio::test]
async fn registered_agents_survive_a_restart_and_serve_agui() {
    let dir = common::temp_dir("restart");
    let toml = format!("data_dir = \"{}\"\n{MINIMAL}", dir.display());
    let (base, rec) = predict_upstream().await;
    let tool_secret = "Bearer tool-secret-999";
    let flow_id = {
        let gw = Gateway::start(&toml).await;
        let (status, r) = post(
            &gw,
            "/_plugins/_ml/agents/_register",
            json!({"name": "with a secret header", "type": "flow",
                   "tools": [{"type": "http", "name": "echo", "url": format!("{base}/predict"),
                              "headers": {"Authorization": tool_secret},
                              "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
                              "input": {"q": "${parameters.question}"}}]}),
        )
        .await;
        assert_eq!(status, 200, "{r}");
        let id = r["agent_id"].as_str().unwrap().to_string();
        let (_, doc) = call(&gw, "GET", &format!("/_plugins/_ml/agents/{id}"), None).await;
        assert_eq!(
            doc["tools"][0]["headers"]["Authorization"], "[REDACTED]",
            "{doc}"
        );
        assert!(!contains(&store_bytes(&gw), "tool-secret-999"));
        id
    };
    let id = {
        let gw = Gateway::start(&toml).await;
        let (status, r) = post(
            &gw,
            "/_plugins/_ml/agents/_register",
            json!({"name": "persistent", "type": "ag_ui",
                   "model": {"model_id": "s", "model_provider": "scripted"},
                   "tools": [{"type": "builtin", "name": "calculator"}]}),
        )
        .await;
        assert_eq!(status, 200, "{r}");
        r["agent_id"].as_str().unwrap().to_string()
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let gw = Gateway::start(&toml).await;
    let (status, doc) = call(&gw, "GET", &format!("/_plugins/_ml/agents/{id}"), None).await;
    assert_eq!((status, doc["name"].clone()), (200, json!("persistent")));
    // The AG-UI endpoint serves registered agents too.
    let events = gw
        .run(
            &id,
            &common::run_input(
                "t1",
                json!([{"id": "u1", "role": "user", "content": "please calculate 6*7"}]),
            ),
        )
        .await;
    assert!(common::text(&events).contains("42"), "{events:?}");
    // The sealed header came back with the agent.
    let (status, out) = post(
        &gw,
        &format!("/_plugins/_ml/agents/{flow_id}/_execute"),
        json!({"parameters": {"question": "ping"}}),
    )
    .await;
    assert_eq!(status, 200, "{out}");
    let (headers, body, _) = rec.requests.lock().unwrap()[0].clone();
    assert_eq!(headers["authorization"], tool_secret);
    assert_eq!(body, json!({"q": "ping"}));
    // Both kinds of agent are listed for AG-UI clients.
    let (_, listed) = call(&gw, "GET", "/agents", None).await;
    let ids: Vec<&str> = listed["agents"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["id"].as_str())
        .collect();
    assert!(
        ids.contains(&"cfg") && ids.contains(&id.as_str()) && ids.contains(&flow_id.as_str()),
        "{listed}"
    );
}
