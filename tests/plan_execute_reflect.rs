/// A `plan_execute_and_reflect` agent plans with one model call, runs each step through a ReAct
/// executor with the agent's tools, reflects on the completed steps until the planner gives a
/// result or `max_steps` is reached; it answers in ml-commons' shape (sync, async, streamed).
mod common;

use std::time::Duration;

use agui_gateway::tools::mcp_demo::DemoServer;
use common::bedrock_fake::{BedrockReply, FakeBedrock, text_events, tool_use_events};
use common::{
    FakeOpenAi, Gateway, Reply, of_type, read_events, read_until, text_chunks, tool_call_turn,
};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};

const MINIMAL: &str = "[[agents]]\nid = \"cfg\"\n[agents.model]\nprovider = \"scripted\"\n";
const QUESTION: &str = "Should I take an umbrella in Paris?";
const STEP_1: &str = "Get the current weather in Paris";
const STEP_2: &str = "Decide whether an umbrella is needed";
const FINAL: &str = "Paris is sunny at 21C: no umbrella needed.";

async fn call(gw: &Gateway, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    common::send_json(method, gw.url(path), body.as_ref()).await
}

fn output<'a>(resp: &'a Value, name: &str) -> &'a Value {
    common::ml_output(resp, name)
}

/// Planner, executor (a tool call, then its result), reflect (one more step), executor (text),
/// reflect (the result).
fn two_step_script() -> Vec<Reply> {
    vec![
        Reply::Sse(text_chunks(
            &json!({"steps": [STEP_1, STEP_2], "result": ""}).to_string(),
        )),
        Reply::Sse(tool_call_turn(
            "call_w",
            "get_weather",
            r#"{"city":"Paris"}"#,
        )),
        Reply::Sse(text_chunks("Paris is sunny, 21C.")),
        // Fenced, with words around it: still a plan.
        Reply::Sse(text_chunks(&format!(
            "Updated plan:\n```json\n{}\n```",
            json!({"steps": [STEP_2], "result": ""})
        ))),
        Reply::Sse(text_chunks("No umbrella is needed.")),
        Reply::Sse(text_chunks(
            &json!({"steps": [], "result": FINAL}).to_string(),
        )),
    ]
}

async fn register(gw: &Gateway, up: &FakeOpenAi, parameters: Value) -> String {
    let (status, reg) = call(
        gw,
        "POST",
        "/_plugins/_ml/agents/_register",
        Some(json!({
            "name": "per", "type": "plan_execute_and_reflect",
            "model": {"model_id": "gpt-test", "model_provider": "openai/v1/chat/completions",
                      "credential": {"openAI_key": "sk-x"}, "model_parameters": {"base_url": up.base_url()}},
            "memory": {"type": "conversation_index"},
            "parameters": parameters,
            "tools": [{"type": "http", "name": "get_weather", "description": "Current weather for a city",
                       "url": format!("http://{}/weather", up.addr),
                       "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
        })),
    )
    .await;
    assert_eq!(status, 200, "{reg}");
    reg["agent_id"].as_str().unwrap().to_string()
}

fn user_text(req: &Value) -> String {
    req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn plans_executes_each_step_with_tools_reflects_and_answers_in_ml_commons_shape() {
    let up = FakeOpenAi::start(two_step_script()).await;
    let gw = Gateway::start(MINIMAL).await;
    let id = register(
        &gw,
        &up,
        json!({"executor_system_prompt": "You are the executor."}),
    )
    .await;
    let (status, resp) = call(
        &gw,
        "POST",
        &format!("/_plugins/_ml/agents/{id}/_execute"),
        Some(json!({"parameters": {"question": QUESTION}})),
    )
    .await;
    assert_eq!(status, 200, "{resp}");
    assert_eq!(output(&resp, "response")["dataAsMap"]["response"], FINAL);
    let memory_id = output(&resp, "memory_id")["result"].as_str().unwrap();
    let executor_memory = output(&resp, "executor_agent_memory_id")["result"]
        .as_str()
        .unwrap();
    assert_ne!(memory_id, executor_memory);
    assert!(output(&resp, "parent_interaction_id")["result"].is_string());
    assert!(output(&resp, "parent_message_id")["result"].is_string());
    assert!(output(&resp, "executor_agent_parent_interaction_id")["result"].is_string());

    let reqs = up.requests();
    assert_eq!(reqs.len(), 6, "{reqs:#?}");
    // The planner: the objective and the tools, offered as text (it calls none itself).
    let planner = user_text(&reqs[0]);
    assert!(
        planner.contains(&format!("Objective: {QUESTION}")),
        "{planner}"
    );
    assert!(planner.contains("get_weather"), "{planner}");
    assert!(
        reqs[0]
            .get("tools")
            .is_none_or(|t| t.as_array().unwrap().is_empty())
    );
    // The executor: its own system prompt, the step as its question, the tools to call.
    assert_eq!(reqs[1]["messages"][0]["content"], "You are the executor.");
    assert!(user_text(&reqs[1]).contains(STEP_1));
    assert!(!user_text(&reqs[1]).contains(QUESTION));
    assert_eq!(reqs[1]["tools"][0]["function"]["name"], "get_weather");
    assert_eq!(up.upstream.tool_calls.lock().unwrap()[0]["city"], "Paris");
    assert!(
        reqs[2].to_string().contains("sunny"),
        "the tool result reached the executor"
    );
    // Reflect: the plan and the completed step with its result.
    let reflect = user_text(&reqs[3]);
    assert!(reflect.contains(&format!("Step 1: {STEP_1}")), "{reflect}");
    assert!(
        reflect.contains("Step 1 Result: Paris is sunny, 21C."),
        "{reflect}"
    );
    // The second step's executor remembers the first step.
    let second = user_text(&reqs[4]);
    assert!(
        second.contains(STEP_1) && second.contains(STEP_2),
        "{second}"
    );
    let reflect2 = user_text(&reqs[5]);
    assert!(
        reflect2.contains(&format!("Step 2: {STEP_2}")),
        "{reflect2}"
    );

    // The outer memory keeps the question and the answer; the executor's has the steps.
    let outer = common::get_ok(gw.url(&format!("/_plugins/_ml/memory/{memory_id}/messages"))).await;
    let outer = outer["messages"].as_array().unwrap();
    assert_eq!(outer.len(), 1, "{outer:?}");
    assert_eq!(outer[0]["input"], QUESTION);
    assert_eq!(outer[0]["response"], FINAL);
    let inner =
        common::get_ok(gw.url(&format!("/_plugins/_ml/memory/{executor_memory}/messages"))).await;
    let inner = inner["messages"].as_array().unwrap();
    assert_eq!(inner.len(), 2, "{inner:?}");
    assert_eq!(inner[0]["input"], STEP_1);
    assert_eq!(inner[1]["response"], "No umbrella is needed.");
    // The executor's parent interaction is its last step, readable as a message.
    let last_step = output(&resp, "executor_agent_parent_interaction_id")["result"]
        .as_str()
        .unwrap();
    let message =
        common::get_ok(gw.url(&format!("/_plugins/_ml/memory/message/{last_step}"))).await;
    assert_eq!(message["input"], STEP_2, "{message}");
}

#[tokio::test]
async fn streams_each_step_with_its_tool_calls_and_the_answer_last() {
    let up = FakeOpenAi::start(two_step_script()).await;
    let gw = Gateway::start(MINIMAL).await;
    let id = register(&gw, &up, json!({})).await;
    let resp = reqwest::Client::new()
        .post(gw.url(&format!("/_plugins/_ml/agents/{id}/_execute/stream")))
        .json(&json!({"parameters": {"question": QUESTION}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let events = read_events(resp, true).await;
    let steps: Vec<(String, String)> = events
        .iter()
        .filter(|e| e["type"] == "STEP_STARTED" || e["type"] == "STEP_FINISHED")
        .map(|e| {
            (
                e["type"].as_str().unwrap().to_string(),
                e["stepName"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let pair = |name: &str| {
        [
            ("STEP_STARTED".to_string(), name.to_string()),
            ("STEP_FINISHED".to_string(), name.to_string()),
        ]
    };
    let mut want = pair(STEP_1).to_vec();
    want.extend(pair(STEP_2));
    assert_eq!(steps, want);
    // The tool call streams inside the first step, with its result.
    let pos = |pred: &dyn Fn(&Value) -> bool| events.iter().position(pred).unwrap();
    let call = pos(&|e| e["type"] == "TOOL_CALL_START" && e["toolCallName"] == "get_weather");
    let result = pos(&|e| e["type"] == "TOOL_CALL_RESULT");
    let first_end = pos(&|e| e["type"] == "STEP_FINISHED");
    assert!(call < result && result < first_end);
    assert!(
        events[result]["content"]
            .as_str()
            .unwrap()
            .contains("sunny")
    );
    // Each plan is told; the answer is the last text message; one lifecycle.
    assert_eq!(
        of_type(&events, "CUSTOM")
            .iter()
            .filter(|e| e["name"] == "plan")
            .count(),
        3
    );
    let last_text = of_type(&events, "TEXT_MESSAGE_CONTENT").last().unwrap()["delta"].clone();
    assert_eq!(last_text, FINAL);
    assert_eq!(of_type(&events, "RUN_STARTED").len(), 1);
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED");
    // Each step's executor run is a subagent; the tool call is its own.
    let subs = of_type(&events, "SUBAGENT_STARTED");
    assert_eq!(subs.len(), 2, "{events:#?}");
    assert_eq!(subs[0]["name"], "executor");
    assert_eq!(subs[0]["description"], STEP_1);
    assert_eq!(subs[1]["description"], STEP_2);
    assert_eq!(events[call]["subagentRunId"], subs[0]["subagentRunId"]);
    assert_eq!(of_type(&events, "SUBAGENT_FINISHED").len(), 2);
    // The plan as an activity: one snapshot, then each step's status as it starts and ends.
    let snapshots = of_type(&events, "ACTIVITY_SNAPSHOT");
    assert_eq!(snapshots.len(), 1, "{snapshots:#?}");
    assert_eq!(snapshots[0]["activityType"], "plan");
    assert_eq!(
        snapshots[0]["content"],
        json!({"steps": [{"description": STEP_1, "status": "pending"},
                         {"description": STEP_2, "status": "pending"}]})
    );
    let deltas: Vec<Value> = of_type(&events, "ACTIVITY_DELTA")
        .iter()
        .map(|d| {
            assert_eq!(d["messageId"], snapshots[0]["messageId"]);
            d["patch"][0].clone()
        })
        .collect();
    let status = |i: usize, s: &str| json!({"op": "replace", "path": format!("/steps/{i}/status"), "value": s});
    assert_eq!(
        deltas,
        [
            status(0, "in_progress"),
            status(0, "completed"),
            status(1, "in_progress"),
            status(1, "completed")
        ]
    );
    let started = pos(&|e| e["type"] == "STEP_STARTED");
    let first_delta = pos(&|e| e["type"] == "ACTIVITY_DELTA");
    assert!(first_delta < started);
}

#[tokio::test]
async fn runs_asynchronously_as_a_task() {
    let up = FakeOpenAi::start(two_step_script()).await;
    let gw = Gateway::start(MINIMAL).await;
    let id = register(&gw, &up, json!({})).await;
    let (status, task) = call(
        &gw,
        "POST",
        &format!("/_plugins/_ml/agents/{id}/_execute?async=true"),
        Some(json!({"parameters": {"question": QUESTION}})),
    )
    .await;
    assert_eq!(status, 200, "{task}");
    assert!(task["response"]["memory_id"].is_string(), "{task}");
    assert!(
        task["response"]["parent_interaction_id"].is_string(),
        "{task}"
    );
    // The executor's memory is named at once, so it can be followed while the task runs.
    let executor = task["response"]["executor_agent_memory_id"].clone();
    assert!(executor.is_string(), "{task}");
    let task_id = task["task_id"].as_str().unwrap();
    let mut done = Value::Null;
    for _ in 0..200 {
        let (_, t) = call(&gw, "GET", &format!("/_plugins/_ml/tasks/{task_id}"), None).await;
        if t["state"] != "RUNNING" {
            done = t;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(done["state"], "COMPLETED", "{done}");
    let response = &done["response"];
    assert_eq!(output(response, "response")["dataAsMap"]["response"], FINAL);
    assert_eq!(response["memory_id"], task["response"]["memory_id"]);
    assert_eq!(response["executor_agent_memory_id"], executor, "{response}");
    assert_eq!(
        output(response, "executor_agent_memory_id")["result"],
        executor
    );
}

#[tokio::test]
async fn a_malformed_plan_is_asked_again_and_max_steps_ends_the_run() {
    let up = FakeOpenAi::start(vec![
        Reply::Sse(text_chunks("I would first look at the weather.")),
        Reply::Sse(text_chunks(&json!({"steps": [STEP_1]}).to_string())),
        Reply::Sse(text_chunks("Paris is sunny, 21C.")),
        Reply::Sse(text_chunks(
            &json!({"steps": [STEP_2], "result": ""}).to_string(),
        )),
    ])
    .await;
    let gw = Gateway::start(MINIMAL).await;
    let id = register(&gw, &up, json!({"max_steps": 1})).await;
    let (status, resp) = call(
        &gw,
        "POST",
        &format!("/_plugins/_ml/agents/{id}/_execute"),
        Some(json!({"parameters": {"question": QUESTION}})),
    )
    .await;
    assert_eq!(status, 200, "{resp}");
    let answer = output(&resp, "response")["dataAsMap"]["response"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(answer.contains("Max steps limit (1)"), "{answer}");
    assert!(answer.contains("Paris is sunny, 21C."), "{answer}");
    let reqs = up.requests();
    // The bad answer and a request for JSON went back to the planner; no fifth call.
    assert_eq!(reqs.len(), 4, "{reqs:#?}");
    let repair = reqs[1]["messages"].to_string();
    assert!(
        repair.contains("I would first look at the weather.") && repair.contains("JSON"),
        "{repair}"
    );
}

#[tokio::test]
async fn a_planner_that_never_answers_a_plan_fails_clearly_and_bad_bounds_are_refused() {
    let up = FakeOpenAi::start(vec![
        Reply::Sse(text_chunks("no plan")),
        Reply::Sse(text_chunks("still no plan")),
    ])
    .await;
    let gw = Gateway::start(MINIMAL).await;
    let id = register(&gw, &up, json!({})).await;
    let (status, resp) = call(
        &gw,
        "POST",
        &format!("/_plugins/_ml/agents/{id}/_execute"),
        Some(json!({"parameters": {"question": QUESTION}})),
    )
    .await;
    assert!(status >= 500, "{status} {resp}");
    assert!(resp.to_string().contains("JSON plan"), "{resp}");

    let (status, resp) = call(
        &gw,
        "POST",
        "/_plugins/_ml/agents/_register",
        Some(json!({
            "name": "bad", "type": "plan_execute_and_reflect",
            "model": {"model_id": "gpt-test", "model_provider": "openai/v1/chat/completions",
                      "credential": {"openAI_key": "sk-x"}, "model_parameters": {"base_url": up.base_url()}},
            "parameters": {"max_steps": "many"}
        })),
    )
    .await;
    assert_eq!(status, 400, "{resp}");
    assert_eq!(
        resp["error"]["details"]["field"], "parameters.max_steps",
        "{resp}"
    );
}

/// rmcp's streamable HTTP demo server (`echo`, `add`, `fail`) at `/mcp`.
async fn start_mcp() -> String {
    let service: StreamableHttpService<DemoServer, LocalSessionManager> =
        StreamableHttpService::new(
            || Ok(DemoServer::new()),
            Default::default(),
            StreamableHttpServerConfig::default().with_sse_keep_alive(None),
        );
    let app = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

/// Seed 000 §3.2.3 as written: `llm.model_id` (a Bedrock Converse connector),
/// `_llm_interface: bedrock/converse/claude`, `parameters.mcp_connectors`, conversation_index.
#[tokio::test]
async fn the_seed_registration_runs_on_bedrock_with_mcp_connector_tools() {
    let mcp = start_mcp().await;
    let plan = json!({"steps": ["Add 6 and 7 with the add tool"], "result": ""}).to_string();
    let done = json!({"steps": [], "result": "6 + 7 = 13."}).to_string();
    let fake = FakeBedrock::start(vec![
        BedrockReply::Events(text_events(&plan)),
        BedrockReply::Events(tool_use_events("tu1", "add", r#"{"a":6,"b":7}"#)),
        BedrockReply::Events(text_events("The sum is 13.")),
        BedrockReply::Events(text_events(&done)),
    ])
    .await;
    let gw = Gateway::start(MINIMAL).await;
    let (status, c) = call(
        &gw,
        "POST",
        "/_plugins/_ml/connectors/_create",
        Some(json!({
            "name": "Amazon Bedrock Claude", "protocol": "aws_sigv4", "version": 1,
            "parameters": { "region": "us-east-1", "service_name": "bedrock",
                            "model": "us.anthropic.claude-3-7-sonnet-20250219-v1:0" },
            "credential": { "access_key": "AKIDPER", "secret_key": "per-secret" },
            "actions": [{ "action_type": "predict", "method": "POST",
                "url": format!("{}/model/${{parameters.model}}/converse", fake.endpoint()),
                "headers": { "content-type": "application/json" },
                "request_body": "{ \"system\": [{\"text\": \"${parameters.system_prompt}\"}], \"messages\": [${parameters._chat_history:-}{\"role\":\"user\",\"content\":[{\"text\":\"${parameters.prompt}\"}]}${parameters._interactions:-}]${parameters.tool_configs:-} }" }]
        })),
    )
    .await;
    assert_eq!(status, 200, "{c}");
    let (status, m) = call(
        &gw,
        "POST",
        "/_plugins/_ml/models/_register",
        Some(
            json!({"name": "claude", "function_name": "remote", "connector_id": c["connector_id"]}),
        ),
    )
    .await;
    assert_eq!(status, 200, "{m}");
    let (status, mc) = call(
        &gw,
        "POST",
        "/_plugins/_ml/connectors/_create",
        Some(
            json!({"name": "My MCP Connector", "version": 1, "protocol": "mcp_streamable_http",
                    "url": mcp}),
        ),
    )
    .await;
    assert_eq!(status, 200, "{mc}");
    let (status, reg) = call(
        &gw,
        "POST",
        "/_plugins/_ml/agents/_register",
        Some(json!({
          "name": "PER Claude 3.7 (SearchIndex)",
          "type": "plan_execute_and_reflect",
          "description": "this is a test agent",
          "llm": {
            "model_id": m["model_id"],
            "parameters": {
              "prompt": "${parameters.question}"
          }},
          "memory": {
            "type": "conversation_index"
          },
          "parameters": {
            "_llm_interface": "bedrock/converse/claude",
                "mcp_connectors": [
              {
                "mcp_connector_id": mc["connector_id"]
              }
            ]
          },
          "app_type": "os_chat"
        })),
    )
    .await;
    assert_eq!(status, 200, "{reg}");
    let id = reg["agent_id"].as_str().unwrap();
    let (status, resp) = call(
        &gw,
        "POST",
        &format!("/_plugins/_ml/agents/{id}/_execute"),
        Some(json!({"parameters": {"question": "What is 6 plus 7?"}})),
    )
    .await;
    assert_eq!(status, 200, "{resp}");
    assert_eq!(
        output(&resp, "response")["dataAsMap"]["response"],
        "6 + 7 = 13."
    );
    assert!(output(&resp, "executor_agent_memory_id")["result"].is_string());
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 4);
    // The planner knows the MCP server's tools; the executor called one and saw its result.
    assert!(reqs[0].body.to_string().contains("add"), "{}", reqs[0].body);
    assert!(
        reqs[1]
            .body
            .to_string()
            .contains("Add 6 and 7 with the add tool"),
        "{}",
        reqs[1].body
    );
    assert!(
        reqs[2].body.to_string().contains("6 + 7 = 13"),
        "{}",
        reqs[2].body
    );
    assert!(
        reqs[3]
            .body
            .to_string()
            .contains("Step 1 Result: The sum is 13."),
        "{}",
        reqs[3].body
    );
    for r in &reqs {
        let auth = r.headers["authorization"].to_str().unwrap();
        assert!(auth.contains("AKIDPER/"), "{auth}");
    }
}

/// A continued conversation (`memory_id`) shows the planner the earlier questions and answers;
/// a question the planner can answer at once runs no step.
#[tokio::test]
async fn a_continued_conversation_gives_the_planner_the_earlier_interactions() {
    let up = FakeOpenAi::start(vec![
        Reply::Sse(text_chunks(
            &json!({"steps": [], "result": "Paris is the capital of France."}).to_string(),
        )),
        Reply::Sse(text_chunks(
            &json!({"steps": [], "result": "About 2.1 million people."}).to_string(),
        )),
    ])
    .await;
    let gw = Gateway::start(MINIMAL).await;
    let id = register(&gw, &up, json!({})).await;
    let path = format!("/_plugins/_ml/agents/{id}/_execute");
    let (status, first) = call(
        &gw,
        "POST",
        &path,
        Some(json!({"parameters": {"question": "What is the capital of France?"}})),
    )
    .await;
    assert_eq!(status, 200, "{first}");
    let memory_id = output(&first, "memory_id")["result"].as_str().unwrap();
    let (status, second) = call(
        &gw,
        "POST",
        &path,
        Some(json!({"parameters": {"question": "How many people live there?", "memory_id": memory_id}})),
    )
    .await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(
        output(&second, "response")["dataAsMap"]["response"],
        "About 2.1 million people."
    );
    let reqs = up.requests();
    assert_eq!(reqs.len(), 2);
    let planner = user_text(&reqs[1]);
    assert!(
        planner.contains("Question: What is the capital of France?")
            && planner.contains("Response: Paris is the capital of France."),
        "{planner}"
    );
    assert!(planner.contains("Objective: How many people live there?"));
    assert!(!user_text(&reqs[0]).contains("Question:"));
}

/// A client that goes away during a step cancels the executor's model call.
#[tokio::test]
async fn a_gone_client_cancels_the_step_under_way() {
    let up = FakeOpenAi::start(vec![
        Reply::Sse(text_chunks(
            &json!({"steps": [STEP_1], "result": ""}).to_string(),
        )),
        Reply::Stall(vec![
            json!({"choices": [{"index": 0, "delta": {"content": "Looking..."}}]}),
        ]),
    ])
    .await;
    let gw = Gateway::start(MINIMAL).await;
    let id = register(&gw, &up, json!({})).await;
    let mut resp = reqwest::Client::new()
        .post(gw.url(&format!("/_plugins/_ml/agents/{id}/_execute/stream")))
        .json(&json!({"parameters": {"question": QUESTION}}))
        .send()
        .await
        .unwrap();
    read_until(&mut resp, "Looking...").await;
    drop(resp);
    tokio::time::timeout(Duration::from_secs(10), up.upstream.dropped.notified())
        .await
        .expect("the executor's upstream request was not dropped after the client left");
    assert_eq!(
        up.requests().len(),
        2,
        "no reflect call after the client left"
    );
}
