/// What an ml-commons user migrating to the gateway hits first: `?async=` takes only booleans,
/// every agent API error (a wrong method included) has ml-commons' envelope, `parent_message_id`
/// beside `parent_interaction_id`, the same `token_usage.model_id` in synchronous and streamed
/// answers, and media the model cannot take reported in the synchronous answer.
mod common;

use common::{FakeOpenAi, Gateway, Reply, text_chunks};
use serde_json::{Value, json};

const MINIMAL: &str = "[[agents]]\nid = \"cfg\"\n[agents.model]\nprovider = \"scripted\"\n";

async fn send(
    gw: &Gateway,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    common::send_json(method.as_str(), gw.url(path), body.as_ref()).await
}

async fn post(gw: &Gateway, path: &str, body: Value) -> (u16, Value) {
    send(gw, reqwest::Method::POST, path, Some(body)).await
}

fn output<'a>(resp: &'a Value, name: &str) -> &'a Value {
    common::ml_output(resp, name)
}

fn assert_ml_error(status: u16, body: &Value, want: u16) {
    assert_eq!(status, want, "{body}");
    assert_eq!(body["status"], want, "{body}");
    assert!(body["error"]["type"].is_string(), "{body}");
    assert!(body["error"]["reason"].is_string(), "{body}");
}

/// A model registered the ml-commons way (connector + model) in front of `up`.
async fn register_model(gw: &Gateway, up: &FakeOpenAi) -> String {
    let (status, m) = post(
        gw,
        "/_plugins/_ml/models/_register",
        json!({
            "name": "gpt", "function_name": "remote",
            "connector": {
                "name": "openai", "protocol": "http",
                "parameters": { "model": "gpt-upstream-name" },
                "credential": { "openAI_key": "sk-compat" },
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
    assert_eq!(status, 200, "{m}");
    m["model_id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn async_takes_only_booleans_and_wrong_methods_answer_in_the_ml_envelope() {
    let up = FakeOpenAi::start(vec![Reply::Sse(text_chunks("Fine."))]).await;
    let gw = Gateway::start(MINIMAL).await;
    let model_id = register_model(&gw, &up).await;
    let (status, reg) = post(
        &gw,
        "/_plugins/_ml/agents/_register",
        json!({"name": "a", "type": "conversational", "llm": {"model_id": model_id},
               "parameters": {"_llm_interface": "openai/v1/chat/completions"}}),
    )
    .await;
    assert_eq!(status, 200, "{reg}");
    let id = reg["agent_id"].as_str().unwrap();
    for bad in ["maybe", "1", "yes", "tru"] {
        let (status, body) = post(
            &gw,
            &format!("/_plugins/_ml/agents/{id}/_execute?async={bad}"),
            json!({"parameters": {"question": "hi"}}),
        )
        .await;
        assert_ml_error(status, &body, 400);
        assert_eq!(body["error"]["details"]["field"], "async", "{body}");
    }
    // Nothing ran for the refusals: the one reply is still there for a synchronous call.
    let (status, body) = post(
        &gw,
        &format!("/_plugins/_ml/agents/{id}/_execute?async=FALSE"),
        json!({"parameters": {"question": "hi"}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(output(&body, "response")["result"], "Fine.");
    assert_eq!(up.requests().len(), 1);

    for (method, path) in [
        (
            reqwest::Method::GET,
            "/_plugins/_ml/agents/_register".to_string(),
        ),
        (
            reqwest::Method::PUT,
            format!("/_plugins/_ml/agents/{id}/_execute"),
        ),
        (
            reqwest::Method::PATCH,
            "/_plugins/_ml/memory_containers/_create".to_string(),
        ),
    ] {
        let (status, body) = send(&gw, method.clone(), &path, None).await;
        assert_ml_error(status, &body, 405);
    }
}

#[tokio::test]
async fn sync_and_streamed_answers_name_the_same_model_and_the_parent_message() {
    let up = FakeOpenAi::start(vec![
        Reply::Sse(text_chunks("One.")),
        Reply::Sse(text_chunks("Two.")),
    ])
    .await;
    let gw = Gateway::start(MINIMAL).await;
    let model_id = register_model(&gw, &up).await;
    let (_, reg) = post(
        &gw,
        "/_plugins/_ml/agents/_register",
        json!({"name": "a", "type": "conversational", "llm": {"model_id": model_id},
               "memory": {"type": "conversation_index"},
               "parameters": {"_llm_interface": "openai/v1/chat/completions"}}),
    )
    .await;
    let id = reg["agent_id"].as_str().unwrap();
    let (status, sync) = post(
        &gw,
        &format!("/_plugins/_ml/agents/{id}/_execute"),
        json!({"parameters": {"question": "hi", "include_token_usage": true}}),
    )
    .await;
    assert_eq!(status, 200, "{sync}");
    let parent = output(&sync, "parent_message_id")["result"].clone();
    assert!(parent.as_str().is_some_and(|p| !p.is_empty()), "{sync}");
    assert_eq!(output(&sync, "parent_interaction_id")["result"], parent);
    let usage = &output(&sync, "token_usage")["dataAsMap"];
    assert_eq!(
        usage["per_turn_usage"][0]["model_id"],
        model_id.as_str(),
        "{usage}"
    );
    assert_eq!(
        usage["per_model_usage"][0]["model_id"],
        model_id.as_str(),
        "{usage}"
    );
    assert_eq!(
        usage["per_model_usage"][0]["model_name"], "gpt-upstream-name",
        "{usage}"
    );

    let resp = reqwest::Client::new()
        .post(gw.url(&format!("/_plugins/_ml/agents/{id}/_execute/stream")))
        .json(&json!({"parameters": {"question": "again", "include_token_usage": true}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let events = common::read_events(resp, true).await;
    let custom = events
        .iter()
        .find(|e| e["type"] == "CUSTOM" && e["name"] == "token_usage")
        .unwrap_or_else(|| panic!("no token_usage in {events:?}"));
    assert_eq!(
        custom["value"]["per_turn_usage"][0]["model_id"],
        model_id.as_str()
    );
    assert_eq!(
        custom["value"]["per_model_usage"][0]["model_id"],
        model_id.as_str()
    );
}

#[tokio::test]
async fn media_the_model_cannot_take_is_reported_in_the_synchronous_answer() {
    let up = FakeOpenAi::start(vec![Reply::Sse(text_chunks("I read the text."))]).await;
    let gw = Gateway::start(MINIMAL).await;
    let (status, reg) = post(
        &gw,
        "/_plugins/_ml/agents/_register",
        json!({"name": "v2", "type": "conversational_v2",
               "model": {"model_id": "gpt-test", "model_provider": "openai/v1/chat/completions",
                         "credential": {"openAI_key": "sk-x"},
                         "model_parameters": {"base_url": up.base_url()}}}),
    )
    .await;
    assert_eq!(status, 200, "{reg}");
    let id = reg["agent_id"].as_str().unwrap();
    let (status, body) = post(
        &gw,
        &format!("/_plugins/_ml/agents/{id}/_execute"),
        json!({"input": [
            {"type": "text", "text": "What is in this clip?"},
            {"type": "video", "source": {"type": "base64", "format": "mp4", "data": "AAAAGGZ0eXBtcDQy"}}
        ]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let data = &output(&body, "response")["dataAsMap"];
    assert_eq!(data["message"]["content"][0]["text"], "I read the text.");
    let dropped = data["content_dropped"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"));
    assert_eq!(dropped.len(), 1, "{body}");
    // The model was asked with the text only.
    let sent = up.requests()[0]["messages"].to_string();
    assert!(
        sent.contains("What is in this clip?") && !sent.contains("AAAAGGZ0eXBtcDQy"),
        "{sent}"
    );
}

#[tokio::test]
async fn agentic_memory_takes_its_container_per_request_and_an_unknown_one_is_a_404() {
    let gw = Gateway::start(MINIMAL).await;
    // Seed 000's conversational/v2 registration: agentic memory with no container named.
    let (status, reg) = post(
        &gw,
        "/_plugins/_ml/agents/_register",
        json!({
            "name": "Claude 3.7 Agent",
            "type": "conversational/v2",
            "description": "Agent with full multi-modal support",
            "model": {"model_id": "s", "model_provider": "scripted"},
            "tools": [],
            "memory": {"type": "agentic_memory"}
        }),
    )
    .await;
    assert_eq!(status, 200, "{reg}");
    let id = reg["agent_id"].as_str().unwrap();
    let exec = format!("/_plugins/_ml/agents/{id}/_execute");
    let (status, body) = post(&gw, &exec, json!({"input": "hi"})).await;
    assert_ml_error(status, &body, 400);
    assert_eq!(
        body["error"]["details"]["field"],
        "parameters.memory_container_id"
    );
    let (status, body) = post(
        &gw,
        &exec,
        json!({"input": "hi", "parameters": {"memory_container_id": "no-such-container"}}),
    )
    .await;
    assert_ml_error(status, &body, 404);

    let (status, created) = post(
        &gw,
        "/_plugins/_ml/memory_containers/_create",
        json!({"name": "agentic memory test", "description": "Store conversations with semantic search and summarization"}),
    )
    .await;
    assert_eq!(status, 200, "{created}");
    let container = created["memory_container_id"].as_str().unwrap();
    let (status, first) = post(
        &gw,
        &exec,
        json!({"input": "hi", "parameters": {"memory_container_id": container}}),
    )
    .await;
    assert_eq!(status, 200, "{first}");
    let memory_id = output(&first, "response")["dataAsMap"]["memory_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{first}"))
        .to_string();
    let (status, second) = post(
        &gw,
        &exec,
        json!({"input": "again", "parameters": {"memory_container_id": container, "memory_id": memory_id}}),
    )
    .await;
    assert_eq!(status, 200, "{second}");
    // The session lives in the container: its working memories hold both turns.
    let (status, found) = post(
        &gw,
        &format!("/_plugins/_ml/memory_containers/{container}/memories/working/_search"),
        json!({"query": {"match_all": {}}}),
    )
    .await;
    assert_eq!(status, 200, "{found}");
    let text = found.to_string();
    assert!(text.contains("hi") && text.contains("again"), "{found}");
}

#[tokio::test]
async fn cluster_settings_of_ml_commons_are_acknowledged_and_read_back() {
    let gw = Gateway::start(MINIMAL).await;
    // Seed 000, 3.2.1, as written (the MCP server's URL filled in).
    let (status, body) = send(
        &gw,
        reqwest::Method::PUT,
        "/_cluster/settings/",
        Some(json!({
          "persistent": {
            "plugins.ml_commons.trusted_connector_endpoints_regex": [
              "^http://127\\.0\\.0\\.1:\\d+/.*$"
            ],
            "plugins.ml_commons.mcp_connector_enabled": "true"
          }
        })),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["acknowledged"], true);
    assert_eq!(
        body["persistent"]["plugins"]["ml_commons"]["mcp_connector_enabled"],
        "true"
    );
    let (status, got) = send(&gw, reqwest::Method::GET, "/_cluster/settings", None).await;
    assert_eq!(status, 200, "{got}");
    assert_eq!(
        got["persistent"]["plugins"]["ml_commons"]["trusted_connector_endpoints_regex"][0],
        "^http://127\\.0\\.0\\.1:\\d+/.*$"
    );
    let (_, flat) = send(
        &gw,
        reqwest::Method::GET,
        "/_cluster/settings?flat_settings=true",
        None,
    )
    .await;
    assert_eq!(
        flat["persistent"]["plugins.ml_commons.mcp_connector_enabled"], "true",
        "{flat}"
    );
    let (status, body) = send(
        &gw,
        reqwest::Method::PUT,
        "/_cluster/settings",
        Some(json!({"persistent": {"cluster.routing.allocation.enable": "none"}})),
    )
    .await;
    assert_ml_error(status, &body, 400);
    // A null removes a setting.
    let (status, _) = send(
        &gw,
        reqwest::Method::PUT,
        "/_cluster/settings",
        Some(json!({"persistent": {"plugins.ml_commons.mcp_connector_enabled": null}})),
    )
    .await;
    assert_eq!(status, 200);
    let (_, flat) = send(
        &gw,
        reqwest::Method::GET,
        "/_cluster/settings?flat_settings=true",
        None,
    )
    .await;
    assert!(
        flat["persistent"]
            .get("plugins.ml_commons.mcp_connector_enabled")
            .is_none(),
        "{flat}"
    );
}

#[tokio::test]
async fn attributes_input_schema_is_what_the_model_is_offered() {
    let up = FakeOpenAi::start(vec![Reply::Sse(text_chunks("Done."))]).await;
    let gw = Gateway::start(MINIMAL).await;
    let schema = json!({
        "type": "object",
        "properties": { "question": { "type": "string", "description": "Natural language question" } },
        "required": [ "question" ],
        "additionalProperties": false
    });
    let model = json!({"model_id": "gpt-test", "model_provider": "openai/v1/chat/completions",
                       "credential": {"openAI_key": "sk-x"}, "model_parameters": {"base_url": up.base_url()}});
    let (status, reg) = post(
        &gw,
        "/_plugins/_ml/agents/_register",
        json!({"name": "a", "type": "conversational", "model": model,
               "tools": [{"type": "http", "name": "retrieve", "url": format!("http://{}/weather", up.addr),
                          "description": "Retrieves.",
                          "attributes": {"input_schema": schema, "strict": true}},
                         {"type": "ListIndexTool", "attributes": {"strict": "false"}}]}),
    )
    .await;
    assert_eq!(status, 200, "{reg}");
    let id = reg["agent_id"].as_str().unwrap();
    let (status, out) = post(
        &gw,
        &format!("/_plugins/_ml/agents/{id}/_execute"),
        json!({"parameters": {"question": "hi"}}),
    )
    .await;
    assert_eq!(status, 200, "{out}");
    let tools = &up.requests()[0]["tools"];
    assert_eq!(tools[0]["function"]["parameters"], schema);
    // strict is what the model is offered too (OpenAI's strict function calling).
    assert_eq!(tools[0]["function"]["strict"], true, "{tools}");
    assert_eq!(tools[1]["function"]["name"], "ListIndexTool", "{tools}");
    assert_eq!(tools[1]["function"]["strict"], false, "{tools}");

    for (attributes, field) in [
        (
            json!({"input_schema": "{not json"}),
            "tools[0].attributes.input_schema",
        ),
        (
            json!({"input_schema": {"type": 7}}),
            "tools[0].attributes.input_schema",
        ),
        (json!({"strict": "sometimes"}), "tools[0].attributes.strict"),
    ] {
        let (status, body) = post(
            &gw,
            "/_plugins/_ml/agents/_register",
            json!({"name": "b", "type": "conversational", "model": model,
                   "tools": [{"type": "http", "name": "r", "url": format!("http://{}/weather", up.addr),
                              "attributes": attributes}]}),
        )
        .await;
        assert_ml_error(status, &body, 400);
        assert_eq!(body["error"]["details"]["field"], field, "{body}");
    }
}
