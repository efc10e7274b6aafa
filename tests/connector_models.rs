/// Models behind user-written connectors run as ml-commons runs them: a V1 text-completion
/// connector (Claude instant `/invoke`, `response_filter`) answers an `MLModelTool` flow step
/// with its rendered prompt escaped into the signed request body, and a function-calling
/// connector's own `request_body` carries system prompt, history, tools (`tool_configs`) and
/// the tool-use / tool-result pair per its `_llm_interface` (Bedrock Converse, OpenAI chat).
mod common;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::routing::post;
use axum::{Json, Router};
use common::Gateway;
use serde_json::{Value, json};

const MINIMAL: &str = "[[agents]]\nid = \"cfg\"\n[agents.model]\nprovider = \"scripted\"\n";

#[derive(Clone, Default)]
struct Up {
    seen: Arc<Mutex<Vec<(String, HeaderMap, Value)>>>,
    replies: Arc<Mutex<VecDeque<Value>>>,
}

impl Up {
    fn record(&self, path: String, headers: HeaderMap, body: Value) -> Value {
        self.seen.lock().unwrap().push((path, headers, body));
        self.replies
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| json!({"error": "no reply left"}))
    }
    fn requests(&self, prefix: &str) -> Vec<(HeaderMap, Value)> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, _, _)| p.starts_with(prefix))
            .map(|(_, h, b)| (h.clone(), b.clone()))
            .collect()
    }
}

/// Bedrock runtime (`/invoke`, `/converse`), OpenAI chat completions and a weather tool.
async fn stand_in(replies: Vec<Value>) -> (String, Up) {
    async fn model(
        State(up): State<Up>,
        Path((model, op)): Path<(String, String)>,
        headers: HeaderMap,
        Json(body): Json<Value>,
    ) -> Json<Value> {
        Json(up.record(format!("/model/{model}/{op}"), headers, body))
    }
    async fn chat(
        State(up): State<Up>,
        headers: HeaderMap,
        Json(body): Json<Value>,
    ) -> Json<Value> {
        Json(up.record("/v1/chat/completions".into(), headers, body))
    }
    async fn gemini(
        State(up): State<Up>,
        Path(model): Path<String>,
        headers: HeaderMap,
        Json(body): Json<Value>,
    ) -> Json<Value> {
        Json(up.record(format!("/v1beta/models/{model}"), headers, body))
    }
    async fn weather(
        State(up): State<Up>,
        headers: HeaderMap,
        Json(body): Json<Value>,
    ) -> Json<Value> {
        up.seen
            .lock()
            .unwrap()
            .push(("/weather".into(), headers, body));
        Json(json!({"temperature_c": 21, "sky": "sunny"}))
    }
    let up = Up {
        replies: Arc::new(Mutex::new(replies.into())),
        ..Up::default()
    };
    let app = Router::new()
        .route("/model/{model}/{op}", post(model))
        .route("/v1/chat/completions", post(chat))
        .route("/v1beta/models/{model}", post(gemini))
        .route("/weather", post(weather))
        .with_state(up.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), up)
}

async fn post_json(gw: &Gateway, path: &str, body: Value) -> (u16, Value) {
    common::send_json("POST", gw.url(path), Some(&body)).await
}

fn output<'a>(resp: &'a Value, name: &str) -> &'a Value {
    common::ml_output(resp, name)
}

fn assert_signed(h: &HeaderMap, region: &str) {
    let auth = h["authorization"].to_str().unwrap();
    assert!(
        auth.starts_with("AWS4-HMAC-SHA256 Credential=")
            && auth.contains(&format!("/{region}/bedrock/aws4_request")),
        "{auth}"
    );
    assert!(h.contains_key("x-amz-date"));
}

/// Seed 000, steps 1 and 2, as written (the host pointed at the stand-in): the model's id.
async fn v1_model(gw: &Gateway, base: &str) -> String {
    let (s, c) = post_json(
        gw,
        "/_plugins/_ml/connectors/_create",
        json!({
            "name": "BedRock Claude instant-v1 Connector ",
            "description": "The connector to BedRock service for claude model",
            "version": 1,
            "protocol": "aws_sigv4",
            "parameters": {
                "region": "us-east-1", "service_name": "bedrock",
                "anthropic_version": "bedrock-2023-05-31", "max_tokens_to_sample": 8000,
                "temperature": 0.0001, "response_filter": "$.completion"
            },
            "credential": {"access_key": "AKIDV1", "secret_key": "v1-secret", "session_token": "v1-token"},
            "actions": [{
                "action_type": "predict", "method": "POST",
                "url": format!("{base}/model/anthropic.claude-instant-v1/invoke"),
                "headers": {"content-type": "application/json", "x-amz-content-sha256": "required"},
                "request_body": "{\"prompt\":\"${parameters.prompt}\", \"max_tokens_to_sample\":${parameters.max_tokens_to_sample}, \"temperature\":${parameters.temperature},  \"anthropic_version\":\"${parameters.anthropic_version}\" }"
            }]
        }),
    )
    .await;
    assert_eq!(s, 200, "{c}");
    let (s, m) = post_json(
        gw,
        "/_plugins/_ml/models/_register",
        json!({"name": "Bedrock Claude Instant model", "function_name": "remote",
               "description": "Bedrock Claude instant-v1 model", "connector_id": c["connector_id"]}),
    )
    .await;
    assert_eq!(s, 200, "{m}");
    m["model_id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_v1_completion_connector_answers_an_ml_model_tool_flow_step() {
    let (base, up) = stand_in(vec![
        json!({"completion": " Bonjour \"ami\"", "stop_reason": "stop_sequence"}),
    ])
    .await;
    let gw = Gateway::start(MINIMAL).await;
    let model_id = &v1_model(&gw, &base).await;
    let (s, reg) = post_json(
        &gw,
        "/_plugins/_ml/agents/_register",
        json!({
            "name": "translate", "type": "flow",
            "tools": [{"type": "MLModelTool", "name": "bedrock_claude_model",
                       "parameters": {"model_id": model_id,
                                      "prompt": "\n\nHuman: ${parameters.question}\n\nAssistant:"}}]
        }),
    )
    .await;
    assert_eq!(s, 200, "{reg}");
    let id = reg["agent_id"].as_str().unwrap();
    let (s, out) = post_json(
        &gw,
        &format!("/_plugins/_ml/agents/{id}/_execute"),
        json!({"parameters": {"question": "Translate \"hello friend\" into French"}}),
    )
    .await;
    assert_eq!(s, 200, "{out}");
    assert_eq!(
        output(&out, "bedrock_claude_model")["result"],
        " Bonjour \"ami\""
    );
    let reqs = up.requests("/model/anthropic.claude-instant-v1/invoke");
    assert_eq!(reqs.len(), 1);
    let (h, body) = &reqs[0];
    assert_eq!(
        body,
        &json!({
            "prompt": "\n\nHuman: Translate \"hello friend\" into French\n\nAssistant:",
            "max_tokens_to_sample": 8000, "temperature": 0.0001,
            "anthropic_version": "bedrock-2023-05-31"
        })
    );
    assert_signed(h, "us-east-1");
    assert_eq!(h["x-amz-security-token"], "v1-token");
}

/// Seed 000's V2 Bedrock Claude 3.7 model: an inline connector with the seed's request body.
fn seed_v2_model(base: &str) -> Value {
    json!({
        "name": "Bedrock Claude 3.7 model", "function_name": "remote", "description": "test model",
        "connector": {
            "name": "Bedrock Claude3.7 connector", "description": "test connector", "version": 1,
            "protocol": "aws_sigv4",
            "parameters": {"region": "us-west-2", "service_name": "bedrock",
                           "model": "us.anthropic.claude-3-7-sonnet-20250219-v1:0"},
            "credential": {"access_key": "AKIDV2", "secret_key": "v2-secret"},
            "actions": [{
                "action_type": "predict", "method": "POST",
                "url": format!("{base}/model/${{parameters.model}}/converse"),
                "headers": {"content-type": "application/json"},
                "request_body": "{ \"system\": [{\"text\": \"${parameters.system_prompt}\"}], \"messages\": [${parameters._chat_history:-}{\"role\":\"user\",\"content\":[{\"text\":\"${parameters.prompt}\"}]}${parameters._interactions:-}]${parameters.tool_configs:-} }"
            }]
        }
    })
}

fn weather_tool(base: &str) -> Value {
    json!({
        "type": "http", "name": "weather", "description": "Weather for a city",
        "url": format!("{base}/weather"),
        "attributes": {"input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city"}},
            "required": ["city"]
        }, "strict": false}
    })
}

#[tokio::test]
async fn bedrock_converse_claude_drives_a_conversational_agent_through_the_seed_request_body() {
    let converse = |content: Value, stop: &str| {
        json!({
            "output": {"message": {"role": "assistant", "content": content}},
            "stopReason": stop,
            "usage": {"inputTokens": 20, "outputTokens": 7, "totalTokens": 27},
            "metrics": {"latencyMs": 10}
        })
    };
    let (base, up) = stand_in(vec![
        converse(
            json!([{"text": "Checking."}, {"toolUse": {"toolUseId": "tooluse_1", "name": "weather", "input": {"city": "Paris"}}}]),
            "tool_use",
        ),
        converse(json!([{"text": "It is sunny in Paris."}]), "end_turn"),
        converse(json!([{"text": "Still sunny."}]), "end_turn"),
    ])
    .await;
    let gw = Gateway::start(MINIMAL).await;
    let (s, m) = post_json(&gw, "/_plugins/_ml/models/_register", seed_v2_model(&base)).await;
    assert_eq!(s, 200, "{m}");
    let (s, reg) = post_json(
        &gw,
        "/_plugins/_ml/agents/_register",
        json!({
            "name": "RAG Agent", "type": "conversational", "description": "this is a test agent",
            "app_type": "rag",
            "llm": {"model_id": m["model_id"], "parameters": {
                "max_iteration": 10,
                "system_prompt": "You are a helpful assistant.\nAnswer \"briefly\".",
                "prompt": "${parameters.question}"
            }},
            "memory": {"type": "conversation_index"},
            "parameters": {"_llm_interface": "bedrock/converse/claude"},
            "tools": [weather_tool(&base)]
        }),
    )
    .await;
    assert_eq!(s, 200, "{reg}");
    let id = reg["agent_id"].as_str().unwrap();
    let (s, out) = post_json(
        &gw,
        &format!("/_plugins/_ml/agents/{id}/_execute"),
        json!({"parameters": {"question": "Weather in \"Paris\"?"}}),
    )
    .await;
    assert_eq!(s, 200, "{out}");
    assert_eq!(output(&out, "response")["result"], "It is sunny in Paris.");
    let reqs = up.requests("/model/us.anthropic.claude-3-7-sonnet-20250219-v1:0/converse");
    assert_eq!(reqs.len(), 2);
    let (h, first) = &reqs[0];
    assert_signed(h, "us-west-2");
    assert_eq!(
        first["system"],
        json!([{"text": "You are a helpful assistant.\nAnswer \"briefly\"."}])
    );
    assert_eq!(
        first["messages"],
        json!([{"role": "user", "content": [{"text": "Weather in \"Paris\"?"}]}])
    );
    assert_eq!(
        first["toolConfig"]["tools"][0]["toolSpec"],
        json!({"name": "weather", "description": "Weather for a city", "inputSchema": {"json": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city"}},
            "required": ["city"]
        }}})
    );
    let second = &reqs[1].1;
    let msgs = second["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 3, "{second}");
    assert_eq!(msgs[0]["content"][0]["text"], "Weather in \"Paris\"?");
    assert_eq!(msgs[1]["role"], "assistant");
    let tool_use = msgs[1]["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b.get("toolUse").is_some())
        .unwrap();
    assert_eq!(
        tool_use["toolUse"],
        json!({"toolUseId": "tooluse_1", "name": "weather", "input": {"city": "Paris"}})
    );
    assert_eq!(msgs[2]["role"], "user");
    assert_eq!(
        msgs[2]["content"][0]["toolResult"]["toolUseId"],
        "tooluse_1"
    );
    assert!(
        msgs[2]["content"][0]["toolResult"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("sunny")
    );
    assert_eq!(up.requests("/weather")[0].1, json!({"city": "Paris"}));

    // The next question in the same memory: the earlier exchange is `_chat_history`.
    let memory_id = output(&out, "memory_id")["result"].as_str().unwrap();
    let (s, out) = post_json(
        &gw,
        &format!("/_plugins/_ml/agents/{id}/_execute"),
        json!({"parameters": {"question": "And tomorrow?", "memory_id": memory_id}}),
    )
    .await;
    assert_eq!(s, 200, "{out}");
    let third = &up.requests("/model/")[2].1;
    let msgs = third["messages"].as_array().unwrap();
    assert_eq!(
        msgs.first().unwrap()["content"][0]["text"],
        "Weather in \"Paris\"?"
    );
    assert_eq!(msgs.last().unwrap()["content"][0]["text"], "And tomorrow?");
    assert!(
        third.to_string().contains("It is sunny in Paris."),
        "{third}"
    );
}

#[tokio::test]
async fn openai_chat_completions_drives_a_conversational_agent_through_the_connector_body() {
    let (base, up) = stand_in(vec![
        json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null,
                "tool_calls": [{"id": "call_1", "type": "function",
                                "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}}]
            }}],
            "usage": {"prompt_tokens": 30, "completion_tokens": 9, "total_tokens": 39}
        }),
        json!({
            "id": "chatcmpl-2", "object": "chat.completion", "created": 2, "model": "gpt-4o",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "Sunny in Oslo."}}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 4, "total_tokens": 44}
        }),
    ])
    .await;
    let gw = Gateway::start(MINIMAL).await;
    let (s, m) = post_json(
        &gw,
        "/_plugins/_ml/models/_register",
        json!({
            "name": "OpenAI chat model", "function_name": "remote",
            "connector": {
                "name": "OpenAI Chat Connector", "version": 1, "protocol": "http",
                "parameters": {"endpoint": "api.openai.com", "model": "gpt-4o"},
                "credential": {"openAI_key": "sk-chat-secret"},
                "actions": [{
                    "action_type": "predict", "method": "POST",
                    "url": format!("{base}/v1/chat/completions"),
                    "headers": {"Authorization": "Bearer ${credential.openAI_key}"},
                    "request_body": "{ \"model\": \"${parameters.model}\", \"messages\": [{\"role\":\"system\",\"content\":\"${parameters.system_prompt}\"},${parameters._chat_history:-}{\"role\":\"user\",\"content\":\"${parameters.prompt}\"}${parameters._interactions:-}]${parameters.tool_configs:-} }"
                }]
            }
        }),
    )
    .await;
    assert_eq!(s, 200, "{m}");
    // attributes.strict goes to the connector's body as OpenAI's per-function strict.
    let mut strict = weather_tool(&base);
    strict["attributes"]["strict"] = json!(true);
    let (s, reg) = post_json(
        &gw,
        "/_plugins/_ml/agents/_register",
        json!({
            "name": "chat", "type": "conversational",
            "llm": {"model_id": m["model_id"], "parameters": {
                "system_prompt": "Be brief.", "prompt": "${parameters.question}"
            }},
            "parameters": {"_llm_interface": "openai/v1/chat/completions"},
            "tools": [strict]
        }),
    )
    .await;
    assert_eq!(s, 200, "{reg}");
    let id = reg["agent_id"].as_str().unwrap();
    let (s, out) = post_json(
        &gw,
        &format!("/_plugins/_ml/agents/{id}/_execute"),
        json!({"parameters": {"question": "Oslo weather?"}}),
    )
    .await;
    assert_eq!(s, 200, "{out}");
    assert_eq!(output(&out, "response")["result"], "Sunny in Oslo.");
    let reqs = up.requests("/v1/chat/completions");
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].0["authorization"], "Bearer sk-chat-secret");
    let first = &reqs[0].1;
    assert_eq!(
        first["messages"],
        json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Oslo weather?"}])
    );
    assert_eq!(first["model"], "gpt-4o");
    assert_eq!(first["tools"][0]["type"], "function");
    assert_eq!(first["tools"][0]["function"]["name"], "weather");
    assert_eq!(first["tools"][0]["function"]["strict"], true);
    assert_eq!(
        first["tools"][0]["function"]["parameters"]["required"],
        json!(["city"])
    );
    let msgs = reqs[1].1["messages"].as_array().unwrap().clone();
    assert_eq!(msgs.len(), 4, "{msgs:?}");
    assert_eq!(msgs[2]["role"], "assistant");
    assert_eq!(msgs[2]["tool_calls"][0]["id"], "call_1");
    assert_eq!(
        msgs[2]["tool_calls"][0]["function"]["arguments"],
        "{\"city\":\"Oslo\"}"
    );
    assert_eq!(msgs[3]["role"], "tool");
    assert_eq!(msgs[3]["tool_call_id"], "call_1");
    assert!(msgs[3]["content"].as_str().unwrap().contains("sunny"));
}

#[tokio::test]
async fn predict_on_the_seed_v2_model_fills_its_request_body_with_defaults() {
    let (base, up) = stand_in(vec![json!({
        "output": {"message": {"role": "assistant", "content": [{"text": "Hello!"}]}},
        "stopReason": "end_turn", "usage": {"inputTokens": 3, "outputTokens": 2, "totalTokens": 5}
    })])
    .await;
    let gw = Gateway::start(MINIMAL).await;
    let (_, m) = post_json(&gw, "/_plugins/_ml/models/_register", seed_v2_model(&base)).await;
    let id = m["model_id"].as_str().unwrap();
    let (s, out) = post_json(
        &gw,
        &format!("/_plugins/_ml/models/{id}/_predict"),
        json!({"parameters": {"system_prompt": "You are a helpful assistant.", "prompt": "hello"}}),
    )
    .await;
    assert_eq!(s, 200, "{out}");
    let data = &out["inference_results"][0]["output"][0]["dataAsMap"];
    assert_eq!(data["output"]["message"]["content"][0]["text"], "Hello!");
    assert_eq!(
        up.requests("/model/")[0].1,
        json!({"system": [{"text": "You are a helpful assistant."}],
               "messages": [{"role": "user", "content": [{"text": "hello"}]}]})
    );
}

#[tokio::test]
async fn a_v1_completion_model_calls_tools_through_json_answers() {
    let (base, up) = stand_in(vec![
        json!({"completion": " ```json\n{\"thought\": \"I need the weather\", \"action\": \"weather\", \"action_input\": \"Paris\"}\n```"}),
        json!({"completion": " {\"thought\": \"Now I know the final answer\", \"final_answer\": \"It is sunny in Paris.\"}"}),
    ])
    .await;
    let gw = Gateway::start(MINIMAL).await;
    let model_id = v1_model(&gw, &base).await;
    let (s, reg) = post_json(
        &gw,
        "/_plugins/_ml/agents/_register",
        json!({
            "name": "v1 chat", "type": "conversational",
            "llm": {"model_id": model_id, "parameters": {"max_iteration": 3}},
            "memory": {"type": "conversation_index"},
            "tools": [weather_tool(&base)]
        }),
    )
    .await;
    assert_eq!(s, 200, "{reg}");
    let id = reg["agent_id"].as_str().unwrap();
    let (s, out) = post_json(
        &gw,
        &format!("/_plugins/_ml/agents/{id}/_execute"),
        json!({"parameters": {"question": "Weather in Paris?"}}),
    )
    .await;
    assert_eq!(s, 200, "{out}");
    assert_eq!(output(&out, "response")["result"], "It is sunny in Paris.");
    assert_eq!(up.requests("/weather")[0].1, json!({"city": "Paris"}));
    let reqs = up.requests("/model/anthropic.claude-instant-v1/invoke");
    assert_eq!(reqs.len(), 2);
    let first = reqs[0].1["prompt"].as_str().unwrap();
    assert!(
        first.starts_with("\n\nHuman: ") && first.ends_with("\n\nAssistant:"),
        "{first}"
    );
    assert!(first.contains("weather: Weather for a city"), "{first}");
    assert!(first.contains("Weather in Paris?"), "{first}");
    let second = reqs[1].1["prompt"].as_str().unwrap();
    assert!(
        second.contains("TOOL RESPONSE") && second.contains("sunny"),
        "{second}"
    );
    assert_eq!(reqs[1].1["max_tokens_to_sample"], 8000);
}

#[tokio::test]
async fn a_connector_agent_streams_its_tool_call_and_answer_over_agui() {
    let converse = |content: Value, stop: &str| {
        json!({"output": {"message": {"role": "assistant", "content": content}}, "stopReason": stop,
               "usage": {"inputTokens": 4, "outputTokens": 2, "totalTokens": 6}})
    };
    let (base, _up) = stand_in(vec![
        converse(
            json!([{"toolUse": {"toolUseId": "tu_stream", "name": "weather", "input": {"city": "Rome"}}}]),
            "tool_use",
        ),
        converse(json!([{"text": "Sunny in Rome."}]), "end_turn"),
    ])
    .await;
    let gw = Gateway::start(MINIMAL).await;
    let (_, m) = post_json(&gw, "/_plugins/_ml/models/_register", seed_v2_model(&base)).await;
    let (s, reg) = post_json(
        &gw,
        "/_plugins/_ml/agents/_register",
        json!({
            "name": "streamer", "type": "conversational",
            "llm": {"model_id": m["model_id"], "parameters": {"prompt": "${parameters.question}"}},
            "parameters": {"_llm_interface": "bedrock/converse/claude"},
            "tools": [weather_tool(&base)]
        }),
    )
    .await;
    assert_eq!(s, 200, "{reg}");
    let resp = reqwest::Client::new()
        .post(gw.url(&format!(
            "/_plugins/_ml/agents/{}/_execute/stream",
            reg["agent_id"].as_str().unwrap()
        )))
        .json(&json!({"parameters": {"question": "Rome?"}}))
        .send()
        .await
        .unwrap();
    let events = common::read_events(resp, false).await;
    let types = common::types(&events);
    assert!(types.contains(&"TOOL_CALL_START"), "{types:?}");
    assert_eq!(common::args_of(&events, "tu_stream"), "{\"city\":\"Rome\"}");
    assert!(types.contains(&"TOOL_CALL_RESULT"), "{types:?}");
    assert_eq!(common::text(&events), "Sunny in Rome.");
    assert_eq!(types.last(), Some(&"RUN_FINISHED"));
}

#[tokio::test]
async fn a_v1_completion_model_chats_with_its_history_framed_as_claude_takes_it() {
    let (base, up) = stand_in(vec![
        json!({"completion": " Hello Ana."}),
        json!({"completion": " Your name is Ana."}),
    ])
    .await;
    let gw = Gateway::start(MINIMAL).await;
    let model_id = v1_model(&gw, &base).await;
    let (s, reg) = post_json(
        &gw,
        "/_plugins/_ml/agents/_register",
        json!({
            "name": "v1 chat", "type": "conversational",
            "llm": {"model_id": model_id, "parameters": {"system_prompt": "Be kind."}},
            "memory": {"type": "conversation_index"}
        }),
    )
    .await;
    assert_eq!(s, 200, "{reg}");
    let exec = format!(
        "/_plugins/_ml/agents/{}/_execute",
        reg["agent_id"].as_str().unwrap()
    );
    let (s, out) = post_json(&gw, &exec, json!({"parameters": {"question": "I am Ana."}})).await;
    assert_eq!(s, 200, "{out}");
    let memory_id = output(&out, "memory_id")["result"].as_str().unwrap();
    let (s, out) = post_json(
        &gw,
        &exec,
        json!({"parameters": {"question": "My name?", "memory_id": memory_id}}),
    )
    .await;
    assert_eq!(s, 200, "{out}");
    assert_eq!(output(&out, "response")["result"], " Your name is Ana.");
    let reqs = up.requests("/model/");
    assert_eq!(
        reqs[0].1["prompt"],
        "\n\nHuman: Be kind.\n\nI am Ana.\n\nAssistant:"
    );
    assert_eq!(
        reqs[1].1["prompt"],
        "\n\nHuman: Be kind.\n\nI am Ana.\n\nAssistant: Hello Ana.\n\nHuman: My name?\n\nAssistant:"
    );
}

#[tokio::test]
async fn gemini_generate_content_drives_a_conversational_agent_through_the_connector_body() {
    let (base, up) = stand_in(vec![
        json!({"candidates": [{"content": {"role": "model", "parts": [
                  {"functionCall": {"name": "weather", "args": {"city": "Lima"}}}]},
               "finishReason": "STOP"}],
               "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 4, "totalTokenCount": 16}}),
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "Warm in Lima."}]},
               "finishReason": "STOP"}]}),
    ])
    .await;
    let gw = Gateway::start(MINIMAL).await;
    let (s, m) = post_json(
        &gw,
        "/_plugins/_ml/models/_register",
        json!({
            "name": "Gemini", "function_name": "remote",
            "connector": {
                "name": "Gemini connector", "protocol": "http",
                "parameters": {"model": "gemini-2.0-flash"},
                "credential": {"gemini_api_key": "g-secret"},
                "actions": [{
                    "action_type": "predict", "method": "POST",
                    "url": format!("{base}/v1beta/models/${{parameters.model}}:generateContent"),
                    "headers": {"x-goog-api-key": "${credential.gemini_api_key}"},
                    "request_body": "{\"systemInstruction\": {\"parts\": [{\"text\": \"${parameters.system_prompt}\"}]}, \"contents\": [${parameters._chat_history:-}{\"role\":\"user\",\"parts\":[{\"text\":\"${parameters.prompt}\"}]}${parameters._interactions:-}]${parameters.tool_configs:-} }"
                }]
            }
        }),
    )
    .await;
    assert_eq!(s, 200, "{m}");
    let mut tool = weather_tool(&base);
    tool["attributes"]["input_schema"]["additionalProperties"] = json!(false);
    let (s, reg) = post_json(
        &gw,
        "/_plugins/_ml/agents/_register",
        json!({
            "name": "gemini", "type": "conversational",
            "llm": {"model_id": m["model_id"], "parameters": {"system_prompt": "Be brief.", "prompt": "${parameters.question}"}},
            "parameters": {"_llm_interface": "gemini/v1beta/generatecontent"},
            "tools": [tool]
        }),
    )
    .await;
    assert_eq!(s, 200, "{reg}");
    let (s, out) = post_json(
        &gw,
        &format!(
            "/_plugins/_ml/agents/{}/_execute",
            reg["agent_id"].as_str().unwrap()
        ),
        json!({"parameters": {"question": "Lima?"}}),
    )
    .await;
    assert_eq!(s, 200, "{out}");
    assert_eq!(output(&out, "response")["result"], "Warm in Lima.");
    let reqs = up.requests("/v1beta/models/gemini-2.0-flash:generateContent");
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].0["x-goog-api-key"], "g-secret");
    let first = &reqs[0].1;
    assert_eq!(first["systemInstruction"]["parts"][0]["text"], "Be brief.");
    let decl = &first["tools"][0]["functionDeclarations"][0];
    assert_eq!(decl["name"], "weather");
    assert!(
        decl["parameters"].get("additionalProperties").is_none(),
        "{decl}"
    );
    assert_eq!(first["toolConfig"]["functionCallingConfig"]["mode"], "AUTO");
    let contents = reqs[1].1["contents"].as_array().unwrap().clone();
    assert_eq!(contents.len(), 3, "{contents:?}");
    assert_eq!(
        contents[1],
        json!({"role": "model", "parts": [{"functionCall": {"name": "weather", "args": {"city": "Lima"}}}]})
    );
    assert_eq!(
        contents[2]["parts"][0]["functionResponse"]["name"],
        "weather"
    );
    assert!(
        contents[2]["parts"][0]["functionResponse"]["response"]["text"]
            .as_str()
            .unwrap()
            .contains("sunny")
    );
}
