//! Stand-ins for what ml-commons tools reach: an OpenAI embeddings endpoint (real wire format,
//! bag-of-words vectors so texts sharing words are near) and an OpenSearch cluster speaking its
//! REST API (recording every request). Included with `#[path = "common/ml_fakes.rs"] mod ml_fakes;`.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// Dimensions of the fake embeddings.
pub const DIMS: usize = 64;

/// The vector the fake embeddings endpoint gives `text`.
pub fn embed(text: &str) -> Vec<f32> {
    let mut v = vec![0.01f32; DIMS];
    for w in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 2)
    {
        let w = w.to_lowercase();
        let h = w
            .bytes()
            .fold(7u32, |a, b| a.wrapping_mul(31).wrapping_add(b as u32));
        v[(h % DIMS as u32) as usize] += 1.0;
    }
    v
}

async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    format!("http://{addr}")
}

/// An OpenAI-compatible `POST /v1/embeddings`.
pub struct Embeddings {
    pub base: String,
    /// Every `input` list received.
    pub inputs: Arc<Mutex<Vec<Vec<String>>>>,
}

impl Embeddings {
    pub async fn start() -> Embeddings {
        let inputs: Arc<Mutex<Vec<Vec<String>>>> = Arc::default();
        let seen = Arc::clone(&inputs);
        let app = axum::Router::new().route(
            "/v1/embeddings",
            axum::routing::post(move |headers: HeaderMap, body: axum::Json<Value>| {
                let seen = Arc::clone(&seen);
                async move {
                    if headers.get("authorization").and_then(|v| v.to_str().ok())
                        != Some("Bearer sk-embed")
                    {
                        return (StatusCode::UNAUTHORIZED, "no key").into_response();
                    }
                    let texts: Vec<String> = match &body["input"] {
                        Value::String(s) => vec![s.clone()],
                        Value::Array(a) => a
                            .iter()
                            .filter_map(|x| x.as_str().map(str::to_string))
                            .collect(),
                        _ => return (StatusCode::BAD_REQUEST, "input").into_response(),
                    };
                    seen.lock().unwrap().push(texts.clone());
                    let data: Vec<Value> = texts
                        .iter()
                        .enumerate()
                        .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": embed(t)}))
                        .collect();
                    axum::Json(json!({"object": "list", "data": data, "model": body["model"],
                        "usage": {"prompt_tokens": 3, "total_tokens": 3}}))
                    .into_response()
                }
            }),
        );
        Embeddings {
            base: serve(app).await,
            inputs,
        }
    }

    /// The connector of ml-commons' OpenAI embedding blueprint, pointed here.
    pub fn connector(&self) -> Value {
        json!({
            "name": "OpenAI embedding", "description": "text-embedding-ada-002",
            "version": 1, "protocol": "http",
            "parameters": {"model": "text-embedding-ada-002"},
            "credential": {"openAI_key": "sk-embed"},
            "actions": [{
                "action_type": "predict", "method": "POST",
                "url": format!("{}/v1/embeddings", self.base),
                "headers": {"Authorization": "Bearer ${credential.openAI_key}"},
                "request_body": "{ \"input\": ${parameters.input}, \"model\": \"${parameters.model}\" }",
                "pre_process_function": "connector.pre_process.openai.embedding",
                "post_process_function": "connector.post_process.openai.embedding"
            }]
        })
    }
}

/// One request the cluster received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path_and_query: String,
    pub headers: HeaderMap,
    pub body: Option<Value>,
}

/// An OpenSearch cluster with one index, `test_population_data`.
pub struct OpenSearchFake {
    pub base: String,
    pub seen: Arc<Mutex<Vec<Seen>>>,
}

pub const POPULATION_HIT: &str = "The current metro area population of Seattle in 2023 is 3,519,000, a 0.86% increase from 2022.";

async fn cluster(
    State(seen): State<Arc<Mutex<Vec<Seen>>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    seen.lock().unwrap().push(Seen {
        method: method.to_string(),
        path_and_query: uri
            .path_and_query()
            .map(|p| p.to_string())
            .unwrap_or_default(),
        headers: headers.clone(),
        body: serde_json::from_slice(&body).ok(),
    });
    let ok = |v: Value| axum::Json(v).into_response();
    match (method.as_str(), uri.path()) {
        ("GET", "/_cat/indices" | "/_cat/indices/test_population_data") => ok(json!([{
            "health": "green", "status": "open", "index": "test_population_data",
            "uuid": "b7T3", "pri": "1", "rep": "1", "docs.count": "6", "docs.deleted": "0",
            "store.size": "18.2kb", "pri.store.size": "9.1kb"
        }])),
        ("GET", "/test_population_data") => ok(json!({"test_population_data": {
            "aliases": {},
            "mappings": {"properties": {
                "population_description": {"type": "text"},
                "population_description_embedding": {"type": "knn_vector", "dimension": 64}
            }},
            "settings": {"index": {"knn": "true", "number_of_shards": "1"}}
        }})),
        ("POST", "/test_population_data/_search") => ok(json!({
            "took": 3, "timed_out": false,
            "hits": {"total": {"value": 1, "relation": "eq"}, "max_score": 0.91, "hits": [{
                "_index": "test_population_data", "_id": "sea-2023", "_score": 0.91,
                "_source": {"population_description": POPULATION_HIT}
            }]}
        })),
        _ => (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"error": {"type": "index_not_found_exception"}, "status": 404})),
        )
            .into_response(),
    }
}

impl OpenSearchFake {
    pub async fn start() -> OpenSearchFake {
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let app = axum::Router::new()
            .fallback(cluster)
            .with_state(Arc::clone(&seen));
        OpenSearchFake {
            base: serve(app).await,
            seen,
        }
    }

    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// POSTs `body` to the gateway at `base`, answering status and JSON.
pub async fn post(base: &str, path: &str, body: Value) -> (u16, Value) {
    crate::common::send_json("POST", format!("{base}{path}"), Some(&body)).await
}

/// Registers a model with this connector, answering its id.
pub async fn register_model(base: &str, connector: Value) -> String {
    let (status, m) = post(
        base,
        "/_plugins/_ml/models/_register",
        json!({"name": "m", "function_name": "remote", "connector": connector}),
    )
    .await;
    assert_eq!(status, 200, "{m}");
    m["model_id"].as_str().unwrap().to_string()
}

/// A chat model in front of an OpenAI-compatible server at `base_url` (`.../v1`).
pub fn chat_connector(base_url: &str) -> Value {
    json!({
        "name": "openai", "protocol": "http",
        "parameters": {"model": "gpt-upstream"},
        "credential": {"openAI_key": "sk-chat"},
        "actions": [{
            "action_type": "predict", "method": "POST",
            "url": format!("{base_url}/chat/completions"),
            "headers": {"Authorization": "Bearer ${credential.openAI_key}"},
            "request_body": "{\"model\":\"${parameters.model}\",\"messages\":${parameters.messages}}"
        }]
    })
}

/// Seed 000's V2 `SearchIndexTool`, as written: an `input` template over its `index` and a
/// `neural` query on `field`, and `attributes.input_schema` taking a `question`.
pub fn seed_search_tool(name: &str, index: &str, field: &str, source: &str) -> Value {
    json!({
      "type": "SearchIndexTool",
      "name": name,
      "description": "This tool provides recent tech news.",
      "parameters": {
        "input": "{\"index\": \"${parameters.index}\", \"query\": ${parameters.query} }",
        "index": index,
        "query": {
          "query": {
            "neural": {
              field: {
                "query_text": "${parameters.question}",
                "model_id": "w0T3NJwBZFG13462QeiT"
              }
            }
          },
          "size": 2,
          "_source": source
        }
      },
      "attributes": {
        "input_schema": {
          "type": "object",
          "properties": {
            "question": {
              "type": "string",
              "description": "Natural language question"
            }
          },
          "required": [ "question" ],
          "additionalProperties": false
        },
        "strict": false
      }
    })
}
