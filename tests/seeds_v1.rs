/// Seed 000's V1 walk-through as written (ids filled in, the Bedrock host pointed at a local
/// stand-in speaking Bedrock's `InvokeModel` JSON with SigV4 checked): the Claude instant
/// connector and model, `_predict`, a Titan embedding model feeding an embedded vector index,
/// the `conversational_flow` population agent (`VectorDBTool` + `MLModelTool`), a new
/// conversation, its continuation with an execution `prompt`, `next_action` and
/// `message_history_limit`, and `selected_tools`.
mod common;

use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::{Json, Router};
use common::Gateway;
use serde_json::{Value, json};

const MINIMAL: &str = "[[agents]]\nid = \"cfg\"\n[agents.model]\nprovider = \"scripted\"\n";

const DOCS: &[(&str, &str)] = &[
    (
        "sea-2021",
        "The metro area population of Seattle in 2021 was 3,461,000.",
    ),
    (
        "sea-2023",
        "The current metro area population of Seattle in 2023 is 3,519,000.",
    ),
    (
        "nyc-2021",
        "The metro area population of New York City in 2021 was 18,823,000.",
    ),
    (
        "nyc-2023",
        "The current metro area population of New York City in 2023 is 18,937,000.",
    ),
    (
        "bread",
        "Sourdough bakers knead the dough and bake the loaves at dawn.",
    ),
];

/// What the Bedrock stand-in saw: (model, headers, body).
type Seen = Arc<Mutex<Vec<(String, HeaderMap, Value)>>>;

/// A bag-of-words vector: texts sharing words are near.
fn embed(text: &str) -> Vec<f32> {
    let mut v = vec![0.01f32; 64];
    for w in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 2)
    {
        let h = w
            .to_lowercase()
            .bytes()
            .fold(7u32, |a, b| a.wrapping_mul(31).wrapping_add(b as u32));
        v[(h % 64) as usize] += 1.0;
    }
    v
}

/// Bedrock runtime's `InvokeModel` for Claude instant (text completion, numbered answers) and
/// Titan text embeddings; every request must be SigV4-signed.
async fn bedrock() -> (String, Seen) {
    async fn invoke(
        State(seen): State<Seen>,
        Path(model): Path<String>,
        headers: HeaderMap,
        Json(body): Json<Value>,
    ) -> Result<Json<Value>, axum::http::StatusCode> {
        let signed = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|a| a.starts_with("AWS4-HMAC-SHA256 Credential=AKIDSEED/"));
        if !signed {
            return Err(axum::http::StatusCode::FORBIDDEN);
        }
        let mut seen = seen.lock().unwrap();
        seen.push((model.clone(), headers, body.clone()));
        if model.starts_with("amazon.titan-embed") {
            let text = body["inputText"].as_str().unwrap_or("");
            return Ok(Json(
                json!({"embedding": embed(text), "inputTextTokenCount": 7}),
            ));
        }
        let n = seen.iter().filter(|(m, _, _)| m == &model).count();
        Ok(Json(
            json!({"completion": format!(" Answer {n}."), "stop_reason": "stop_sequence"}),
        ))
    }
    let seen: Seen = Arc::default();
    let app = Router::new()
        .route("/model/{model}/invoke", axum::routing::post(invoke))
        .with_state(Arc::clone(&seen));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), seen)
}

async fn send(gw: &Gateway, method: &str, path: &str, body: Value) -> (u16, Value) {
    common::send_json(method, gw.url(path), Some(&body)).await
}

fn names(resp: &Value) -> Vec<&str> {
    resp["inference_results"][0]["output"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect()
}

fn result<'a>(resp: &'a Value, name: &str) -> &'a str {
    common::ml_output(resp, name)["result"]
        .as_str()
        .unwrap_or_else(|| panic!("output {name:?} has no result in {resp}"))
}

/// The prompts Claude instant was sent, in order.
fn prompts(seen: &Seen) -> Vec<String> {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|(m, _, _)| m == "anthropic.claude-instant-v1")
        .map(|(_, _, b)| b["prompt"].as_str().unwrap().to_string())
        .collect()
}

fn embeddings(seen: &Seen) -> usize {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|(m, _, _)| m.starts_with("amazon.titan-embed"))
        .count()
}

#[tokio::test]
async fn the_v1_population_agent_runs_as_the_seed_writes_it() {
    let (host, seen) = bedrock().await;
    let gw = Gateway::start(MINIMAL).await;
    let credential = json!({"access_key": "AKIDSEED", "secret_key": "seed-secret",
                            "session_token": "seed-token"});

    // 1. The connector, as written (the host aside).
    let (status, c) = send(&gw, "POST", "/_plugins/_ml/connectors/_create", json!({
      "name": "BedRock Claude instant-v1 Connector ",
      "description": "The connector to BedRock service for claude model",
      "version": 1,
      "protocol": "aws_sigv4",
      "parameters": {
        "region": "us-east-1",
        "service_name": "bedrock",
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens_to_sample": 8000,
        "temperature": 0.0001,
        "response_filter": "$.completion"
      },
      "credential": credential,
      "actions": [
        {
          "action_type": "predict",
          "method": "POST",
          "url": format!("{host}/model/anthropic.claude-instant-v1/invoke"),
          "headers": {
            "content-type": "application/json",
            "x-amz-content-sha256": "required"
          },
          "request_body": "{\"prompt\":\"${parameters.prompt}\", \"max_tokens_to_sample\":${parameters.max_tokens_to_sample}, \"temperature\":${parameters.temperature},  \"anthropic_version\":\"${parameters.anthropic_version}\" }"
        }
      ]
    })).await;
    assert_eq!(status, 200, "{c}");

    // 2. The model, and _predict.
    let (status, m) = send(
        &gw,
        "POST",
        "/_plugins/_ml/models/_register",
        json!({
            "name": "Bedrock Claude Instant model",
            "function_name": "remote",
            "description": "Bedrock Claude instant-v1 model",
            "connector_id": c["connector_id"]
        }),
    )
    .await;
    assert_eq!(status, 200, "{m}");
    let llm = m["model_id"].as_str().unwrap().to_string();
    let (status, p) = send(
        &gw,
        "POST",
        &format!("/_plugins/_ml/models/{llm}/_predict"),
        json!({
          "parameters": {
            "prompt": "\n\nHuman: how are you? \n\nAssistant:"
          }
        }),
    )
    .await;
    assert_eq!(status, 200, "{p}");
    assert_eq!(
        p["inference_results"][0]["output"][0]["dataAsMap"]["response"],
        " Answer 1."
    );
    assert_eq!(prompts(&seen), ["\n\nHuman: how are you? \n\nAssistant:"]);
    let first = seen.lock().unwrap()[0].2.clone();
    assert_eq!(first["max_tokens_to_sample"], 8000);
    assert_eq!(first["anthropic_version"], "bedrock-2023-05-31");

    // The text embedding model the agent names: ml-commons' Bedrock Titan blueprint.
    let (status, e) = send(&gw, "POST", "/_plugins/_ml/models/_register", json!({
        "name": "Bedrock Titan embedding", "function_name": "remote",
        "connector": {
            "name": "Amazon Bedrock Connector: embedding", "version": 1, "protocol": "aws_sigv4",
            "parameters": {"region": "us-east-1", "service_name": "bedrock",
                           "model": "amazon.titan-embed-text-v1"},
            "credential": credential,
            "actions": [{
                "action_type": "predict", "method": "POST",
                "url": format!("{host}/model/${{parameters.model}}/invoke"),
                "headers": {"content-type": "application/json", "x-amz-content-sha256": "required"},
                "request_body": "{ \"inputText\": \"${parameters.inputText}\" }",
                "pre_process_function": "connector.pre_process.bedrock.embedding",
                "post_process_function": "connector.post_process.bedrock.embedding"
            }]
        }
    })).await;
    assert_eq!(status, 200, "{e}");
    let embedder = e["model_id"].as_str().unwrap().to_string();

    // The population data, embedded at ingestion through that model.
    let (status, body) = send(
        &gw,
        "PUT",
        "/indices/test_population_data",
        json!({
            "embedding": {"model_id": embedder, "field": "population_description"}
        }),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let docs: Vec<Value> = DOCS
        .iter()
        .map(|(id, text)| json!({"id": id, "fields": {"population_description": text}}))
        .collect();
    let (status, body) = send(
        &gw,
        "POST",
        "/indices/test_population_data/documents/_bulk",
        json!({ "documents": docs }),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(embeddings(&seen), DOCS.len());

    // 3. The agent, as written.
    let (status, a) = send(&gw, "POST", "/_plugins/_ml/agents/_register", json!({
        "name": "population data analysis agent",
        "type": "conversational_flow",
        "description": "This is a demo agent for population data analysis",
        "app_type": "rag",
        "memory": {
            "type": "conversation_index"
        },
        "tools": [
            {
                "type": "VectorDBTool",
                "name": "population_knowledge_base",
                "parameters": {
                    "model_id": embedder,
                    "index": "test_population_data",
                    "embedding_field": "population_description_embedding",
                    "source_field": [
                        "population_description"
                    ],
                    "input": "${parameters.question}"
                }
            },
            {
                "type": "MLModelTool",
                "name": "bedrock_claude_model",
                "description": "A general tool to answer any question",
                "parameters": {
                    "model_id": llm,
                    "prompt": "\n\nHuman:You are a professional data analysist. You will always answer question based on the given context first. If the answer is not directly shown in the context, you will analyze the data and find the answer. If you don't know the answer, just say don't know. \n\nContext:\n${parameters.population_knowledge_base.output:-}\n\n${parameters.chat_history:-}\n\nHuman:${parameters.question}\n\nAssistant:"
                }
            }
        ]
    })).await;
    assert_eq!(status, 200, "{a}");
    let agent = a["agent_id"].as_str().unwrap().to_string();
    let execute = format!("/_plugins/_ml/agents/{agent}/_execute");

    // 4. A new conversation.
    let (status, r1) = send(
        &gw,
        "POST",
        &execute,
        json!({
          "parameters": {
            "question": "what's the population increase of Seattle from 2021 to 2023?"
          }
        }),
    )
    .await;
    assert_eq!(status, 200, "{r1}");
    let got = names(&r1);
    assert_eq!(got[0], "memory_id", "{r1}");
    assert!(got.contains(&"parent_message_id"), "{r1}");
    assert_eq!(*got.last().unwrap(), "bedrock_claude_model", "{r1}");
    assert_eq!(result(&r1, "bedrock_claude_model"), " Answer 2.");
    let memory = result(&r1, "memory_id").to_string();
    let prompt = prompts(&seen)[1].clone();
    assert!(
        prompt.starts_with("\n\nHuman:You are a professional data analysist."),
        "{prompt}"
    );
    // The k-NN context is Seattle's, the question ends the prompt, no history yet.
    let context = prompt
        .split("Context:\n")
        .nth(1)
        .unwrap()
        .split("\n\nHuman:")
        .next()
        .unwrap();
    assert!(
        context.contains("Seattle in 2021") && context.contains("Seattle in 2023"),
        "{context}"
    );
    assert!(!context.contains("Sourdough"), "{context}");
    assert!(
        prompt.ends_with(
            "\n\nHuman:what's the population increase of Seattle from 2021 to 2023?\n\nAssistant:"
        ),
        "{prompt}"
    );
    assert!(!prompt.contains("Chat History"), "{prompt}");

    // 5. The conversation goes on with the execution's own prompt.
    let (status, r2) = send(&gw, "POST", &execute, json!({
      "parameters": {
        "question": "What's the population of New York City in 2023?",
        "next_action": "then compare with Seattle population of 2023",
        "memory_id": memory,
        "message_history_limit": 5,
        "prompt": "\n\nHuman:You are a professional data analysist. You will always answer question based on the given context first. If the answer is not directly shown in the context, you will analyze the data and find the answer. If you don't know the answer, just say don't know. \n\nContext:\n${parameters.population_knowledge_base.output:-}\n\n${parameters.chat_history:-}\n\nHuman:always learn useful information from chat history\nHuman:${parameters.question}, ${parameters.next_action}\n\nAssistant:"
      }
    })).await;
    assert_eq!(status, 200, "{r2}");
    assert_eq!(result(&r2, "memory_id"), memory);
    assert_ne!(
        result(&r2, "parent_message_id"),
        result(&r1, "parent_message_id")
    );
    let prompt = prompts(&seen)[2].clone();
    assert!(prompt.contains("New York City in 2023"), "{prompt}");
    assert!(
        prompt.contains("Below is Chat History between Human and AI which sorted by time with asc order:\nHuman:what's the population increase of Seattle from 2021 to 2023?\nAssistant: Answer 2.\n"),
        "{prompt}"
    );
    assert!(
        prompt.ends_with("Human:always learn useful information from chat history\nHuman:What's the population of New York City in 2023?, then compare with Seattle population of 2023\n\nAssistant:"),
        "{prompt}"
    );
    // The prompt's newlines and the history went into the JSON body escaped once (the
    // stand-in parsed it and read the prompt back as the text above); the connector's own
    // parameters filled the rest of the body.
    let body = seen.lock().unwrap().last().unwrap().2.clone();
    assert_eq!(body["temperature"], 0.0001);
    assert_eq!(body["max_tokens_to_sample"], 8000);

    // selected_tools: the model alone, no retrieval (the context placeholder's default).
    let before = embeddings(&seen);
    let (status, r3) = send(
        &gw,
        "POST",
        &execute,
        json!({
          "parameters": {
            "question": "Translate last answer into Chinese?",
            "selected_tools": ["bedrock_claude_model"]
          }
        }),
    )
    .await;
    assert_eq!(status, 200, "{r3}");
    assert_eq!(result(&r3, "bedrock_claude_model"), " Answer 4.");
    assert_eq!(embeddings(&seen), before, "the knowledge base must not run");
    let prompt = prompts(&seen)[3].clone();
    assert!(prompt.contains("\n\nContext:\n\n\n"), "{prompt}");
    assert!(
        prompt.ends_with("Human:Translate last answer into Chinese?\n\nAssistant:"),
        "{prompt}"
    );
}
