/// Embedding models registered from ml-commons' blueprints answer `_predict` with `text_docs`
/// in ml-commons' shape: their pre-process function builds the request (one per doc for
/// Bedrock Titan, SigV4-signed), their post-process function reads the vectors back; the
/// offline (`scripted`) model embeds with no network; unknown functions are refused.
mod common;

use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::routing::post;
use axum::{Json, Router};
use common::Gateway;
use serde_json::{Value, json};

const MINIMAL: &str = "[[agents]]\nid = \"cfg\"\n[agents.model]\nprovider = \"scripted\"\n";

#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<(String, HeaderMap, Value)>>>);

/// A vector standing for `text`: its length and its word count.
fn fake_vector(text: &str) -> Value {
    json!([
        text.len() as f64,
        text.split_whitespace().count() as f64,
        0.5
    ])
}

/// OpenAI's `/v1/embeddings` and Bedrock's `/model/{id}/invoke` (Titan and Cohere bodies).
async fn stand_in() -> (String, Seen) {
    async fn openai(
        State(seen): State<Seen>,
        headers: HeaderMap,
        Json(body): Json<Value>,
    ) -> Json<Value> {
        seen.0
            .lock()
            .unwrap()
            .push(("/v1/embeddings".into(), headers, body.clone()));
        let data: Vec<Value> = body["input"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": fake_vector(t.as_str().unwrap())}))
            .collect();
        Json(json!({
            "object": "list", "data": data, "model": body["model"],
            "usage": {"prompt_tokens": 8, "total_tokens": 8}
        }))
    }
    async fn invoke(
        State(seen): State<Seen>,
        Path(model): Path<String>,
        headers: HeaderMap,
        Json(body): Json<Value>,
    ) -> Json<Value> {
        seen.0
            .lock()
            .unwrap()
            .push((format!("/model/{model}/invoke"), headers, body.clone()));
        if let Some(texts) = body["texts"].as_array() {
            let e: Vec<Value> = texts
                .iter()
                .map(|t| fake_vector(t.as_str().unwrap()))
                .collect();
            return Json(
                json!({"embeddings": e, "id": "x", "response_type": "embeddings_floats", "texts": texts}),
            );
        }
        Json(json!({
            "embedding": fake_vector(body["inputText"].as_str().unwrap()),
            "inputTextTokenCount": 3
        }))
    }
    async fn rerank(
        State(seen): State<Seen>,
        headers: HeaderMap,
        Json(body): Json<Value>,
    ) -> Json<Value> {
        seen.0
            .lock()
            .unwrap()
            .push(("/v1/rerank".into(), headers, body.clone()));
        // Cohere answers the best first; the score here is the doc's length.
        let mut results: Vec<Value> = body["documents"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, d)| json!({"index": i, "relevance_score": d.as_str().unwrap().len() as f64 / 100.0}))
            .collect();
        results.reverse();
        Json(json!({"id": "r1", "results": results, "meta": {"api_version": {"version": "1"}}}))
    }
    let seen = Seen::default();
    let app = Router::new()
        .route("/v1/rerank", post(rerank))
        .route("/v1/embeddings", post(openai))
        .route("/model/{model}/invoke", post(invoke))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), seen)
}

async fn post_json(gw: &Gateway, path: &str, body: Value) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .post(gw.url(path))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

async fn register(gw: &Gateway, connector: Value) -> String {
    let (s, c) = post_json(gw, "/_plugins/_ml/connectors/_create", connector).await;
    assert_eq!(s, 200, "{c}");
    let (s, m) = post_json(
        gw,
        "/_plugins/_ml/models/_register",
        json!({"name": "embedder", "function_name": "remote", "connector_id": c["connector_id"]}),
    )
    .await;
    assert_eq!(s, 200, "{m}");
    m["model_id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn openai_blueprint_embeds_text_docs_in_one_request() {
    let (base, seen) = stand_in().await;
    let gw = Gateway::start(MINIMAL).await;
    // ml-commons' OpenAI embedding blueprint as written, the URL pointed at the stand-in.
    let id = register(
        &gw,
        json!({
            "name": "OpenAI embedding", "description": "ada", "version": "1",
            "protocol": "http",
            "parameters": {"model": "text-embedding-ada-002"},
            "credential": {"openAI_key": "sk-embed-secret"},
            "actions": [{
                "action_type": "predict", "method": "POST",
                "url": format!("{base}/v1/embeddings"),
                "headers": {"Authorization": "Bearer ${credential.openAI_key}"},
                "request_body": "{ \"input\": ${parameters.input}, \"model\": \"${parameters.model}\" }",
                "pre_process_function": "connector.pre_process.openai.embedding",
                "post_process_function": "connector.post_process.openai.embedding"
            }]
        }),
    )
    .await;
    let (s, out) = post_json(
        &gw,
        &format!("/_plugins/_ml/models/{id}/_predict"),
        json!({"text_docs": ["What is the meaning of life?", "a \"quoted\"\nline"]}),
    )
    .await;
    assert_eq!(s, 200, "{out}");
    let results = out["inference_results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "one request, one result: {out}");
    let outputs = results[0]["output"].as_array().unwrap();
    assert_eq!(outputs.len(), 2);
    assert_eq!(
        outputs[0],
        json!({"name": "sentence_embedding", "data_type": "FLOAT32", "shape": [3], "data": [28.0, 6.0, 0.5]})
    );
    assert_eq!(outputs[1]["data"][0], 15.0);
    assert_eq!(results[0]["status_code"], 200);
    let seen = seen.0.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].2,
        json!({"input": ["What is the meaning of life?", "a \"quoted\"\nline"], "model": "text-embedding-ada-002"})
    );
    assert_eq!(seen[0].1["authorization"], "Bearer sk-embed-secret");

    // The blueprint's own test: `parameters.input` is post-processed the same way.
    let (s, out) = post_json(
        &gw,
        &format!("/_plugins/_ml/models/{id}/_predict"),
        json!({"parameters": {"input": ["What is the meaning of life?"]}}),
    )
    .await;
    assert_eq!(s, 200, "{out}");
    assert_eq!(
        out["inference_results"][0]["output"][0]["name"],
        "sentence_embedding"
    );
    assert_eq!(
        out["inference_results"][0]["output"][0]["shape"],
        json!([3])
    );
}

#[tokio::test]
async fn bedrock_titan_embeds_one_doc_per_signed_request() {
    let (base, seen) = stand_in().await;
    let gw = Gateway::start(MINIMAL).await;
    let id = register(
        &gw,
        json!({
            "name": "Amazon Bedrock Connector: embedding", "description": "titan", "version": 1,
            "protocol": "aws_sigv4",
            "parameters": {"region": "us-east-1", "service_name": "bedrock"},
            "credential": {"access_key": "AKIDEXAMPLE", "secret_key": "titan-secret"},
            "actions": [{
                "action_type": "predict", "method": "POST",
                "url": format!("{base}/model/amazon.titan-embed-text-v1/invoke"),
                "headers": {"content-type": "application/json", "x-amz-content-sha256": "required"},
                "request_body": "{ \"inputText\": \"${parameters.inputText}\" }",
                "pre_process_function": "connector.pre_process.bedrock.embedding",
                "post_process_function": "connector.post_process.bedrock.embedding"
            }]
        }),
    )
    .await;
    let (s, out) = post_json(
        &gw,
        &format!("/_plugins/_ml/models/{id}/_predict"),
        json!({"text_docs": ["hello world", "say \"hi\""]}),
    )
    .await;
    assert_eq!(s, 200, "{out}");
    let results = out["inference_results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "one request and result per doc: {out}");
    assert_eq!(results[0]["output"][0]["data"], json!([11.0, 2.0, 0.5]));
    assert_eq!(results[1]["output"][0]["data"], json!([8.0, 2.0, 0.5]));
    let seen = seen.0.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].0, "/model/amazon.titan-embed-text-v1/invoke");
    assert_eq!(seen[1].2, json!({"inputText": "say \"hi\""}));
    for (_, h, _) in &seen {
        let auth = h["authorization"].to_str().unwrap();
        assert!(
            auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
                && auth.contains("/us-east-1/bedrock/aws4_request"),
            "{auth}"
        );
        assert!(h.contains_key("x-amz-date"));
        assert_ne!(h["x-amz-content-sha256"], "required");
    }
}

#[tokio::test]
async fn cohere_on_bedrock_embeds_texts_in_one_request() {
    let (base, seen) = stand_in().await;
    let gw = Gateway::start(MINIMAL).await;
    let id = register(
        &gw,
        json!({
            "name": "Amazon Bedrock Connector: Cohere embed-english-v3", "protocol": "aws_sigv4",
            "parameters": {"region": "us-east-1", "service_name": "bedrock", "truncate": "END", "input_type": "search_document"},
            "credential": {"access_key": "AK", "secret_key": "SK"},
            "actions": [{
                "action_type": "predict", "method": "POST",
                "url": format!("{base}/model/cohere.embed-english-v3/invoke"),
                "headers": {"content-type": "application/json", "x-amz-content-sha256": "required"},
                "request_body": "{ \"texts\": ${parameters.texts}, \"truncate\": \"${parameters.truncate}\", \"input_type\": \"${parameters.input_type}\" }",
                "pre_process_function": "connector.pre_process.cohere.embedding",
                "post_process_function": "connector.post_process.cohere.embedding"
            }]
        }),
    )
    .await;
    let (s, out) = post_json(
        &gw,
        &format!("/_plugins/_ml/models/{id}/_predict"),
        json!({"text_docs": ["one", "two words"]}),
    )
    .await;
    assert_eq!(s, 200, "{out}");
    assert_eq!(
        out["inference_results"][0]["output"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let seen = seen.0.lock().unwrap().clone();
    assert_eq!(
        seen[0].2,
        json!({"texts": ["one", "two words"], "truncate": "END", "input_type": "search_document"})
    );
}

fn cos(a: &Value, b: &Value) -> f64 {
    let a = a.as_array().unwrap();
    let b = b.as_array().unwrap();
    a.iter()
        .zip(b)
        .map(|(x, y)| x.as_f64().unwrap() * y.as_f64().unwrap())
        .sum()
}

#[tokio::test]
async fn the_offline_model_embeds_similar_texts_closer() {
    let gw = Gateway::start(MINIMAL).await;
    let (s, m) = post_json(
        &gw,
        "/_plugins/_ml/models/_register",
        json!({
            "name": "offline embedder", "function_name": "remote",
            "connector": {"name": "offline", "protocol": "scripted", "parameters": {"dimension": 256}}
        }),
    )
    .await;
    assert_eq!(s, 200, "{m}");
    let id = m["model_id"].as_str().unwrap();
    let (s, out) = post_json(
        &gw,
        &format!("/_plugins/_ml/models/{id}/_predict"),
        json!({"text_docs": [
            "What is the population of Seattle?",
            "Seattle's population grew to 750,000",
            "Chocolate cake recipes with berries"
        ]}),
    )
    .await;
    assert_eq!(s, 200, "{out}");
    let o = out["inference_results"][0]["output"].as_array().unwrap();
    assert_eq!(o.len(), 3);
    assert_eq!(o[0]["shape"], json!([256]));
    assert_eq!(o[0]["name"], "sentence_embedding");
    assert!(cos(&o[0]["data"], &o[1]["data"]) > cos(&o[0]["data"], &o[2]["data"]));

    let (s, bad) = post_json(
        &gw,
        "/_plugins/_ml/connectors/_create",
        json!({"name": "x", "protocol": "scripted", "parameters": {"dimension": 3}}),
    )
    .await;
    assert_eq!(s, 400, "{bad}");
    assert!(bad.to_string().contains("parameters.dimension"), "{bad}");
}

#[tokio::test]
async fn unknown_functions_and_painless_scripts_are_refused_at_creation() {
    let gw = Gateway::start(MINIMAL).await;
    let connector = |pre: &str| {
        json!({
            "name": "c", "protocol": "http",
            "actions": [{
                "action_type": "predict", "method": "POST", "url": "https://api.openai.com/v1/embeddings",
                "request_body": "{}", "pre_process_function": pre
            }]
        })
    };
    let (s, e) = post_json(
        &gw,
        "/_plugins/_ml/connectors/_create",
        connector("connector.pre_process.nope.embedding"),
    )
    .await;
    assert_eq!(s, 400, "{e}");
    assert!(
        e.to_string().contains("actions[0].pre_process_function"),
        "{e}"
    );
    let (s, e) = post_json(
        &gw,
        "/_plugins/_ml/connectors/_create",
        connector("\n    StringBuilder builder = new StringBuilder();\n    return builder;"),
    )
    .await;
    assert_eq!(s, 400, "{e}");
    assert!(e.to_string().contains("painless"), "{e}");
}

#[tokio::test]
async fn cohere_rerank_scores_each_doc_in_order() {
    let (base, seen) = stand_in().await;
    let gw = Gateway::start(MINIMAL).await;
    let id = register(
        &gw,
        json!({
            "name": "cohere rerank", "protocol": "http",
            "parameters": {"model": "rerank-english-v2.0", "return_documents": true},
            "credential": {"api_key": "co-secret"},
            "actions": [{
                "action_type": "predict", "method": "POST",
                "url": format!("{base}/v1/rerank"),
                "headers": {"Authorization": "Bearer ${credential.api_key}"},
                "request_body": "{ \"model\": \"${parameters.model}\", \"query\" : \"${parameters.query}\", \"documents\" : ${parameters.documents}, \"top_n\" : ${parameters.top_n}, \"return_documents\" : ${parameters.return_documents} }",
                "pre_process_function": "connector.pre_process.cohere.rerank",
                "post_process_function": "connector.post_process.cohere.rerank"
            }]
        }),
    )
    .await;
    let (s, out) = post_json(
        &gw,
        &format!("/_plugins/_ml/models/{id}/_predict"),
        json!({"query_text": "capital \"US\"?", "text_docs": ["abc", "abcdefghij"]}),
    )
    .await;
    assert_eq!(s, 200, "{out}");
    let o = out["inference_results"][0]["output"].as_array().unwrap();
    assert_eq!(
        o,
        &vec![
            json!({"name": "similarity", "data_type": "FLOAT32", "shape": [1], "data": [0.03]}),
            json!({"name": "similarity", "data_type": "FLOAT32", "shape": [1], "data": [0.1]}),
        ]
    );
    let seen = seen.0.lock().unwrap().clone();
    assert_eq!(
        seen[0].2,
        json!({"model": "rerank-english-v2.0", "query": "capital \"US\"?", "documents": ["abc", "abcdefghij"], "top_n": 2, "return_documents": true})
    );
}
