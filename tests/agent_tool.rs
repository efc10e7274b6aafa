/// `AgentTool` runs another registered agent (flow or conversational) with the call's question
/// and returns its answer; its target must exist at registration, chains are bounded, and
/// cancelling the outer run cancels the inner one.
mod common;

use std::time::Duration;

use common::{
    FakeOpenAi, Gateway, Reply, call_args, call_start, finish, read_until, run_input, text_chunks,
    tool_call_turn,
};
use serde_json::{Value, json};

const MINIMAL: &str = "[[agents]]\nid = \"cfg\"\n[agents.model]\nprovider = \"scripted\"\n";

async fn post(gw: &Gateway, path: &str, body: Value) -> (u16, Value) {
    common::send_json("POST", gw.url(path), Some(&body)).await
}

async fn register(gw: &Gateway, body: Value) -> String {
    let (status, reg) = post(gw, "/_plugins/_ml/agents/_register", body).await;
    assert_eq!(status, 200, "{reg}");
    reg["agent_id"].as_str().unwrap().to_string()
}

/// Executes `agent` on `question`, which must answer 200.
async fn ask(gw: &Gateway, agent: &str, question: &str) -> Value {
    let path = format!("/_plugins/_ml/agents/{agent}/_execute");
    let (status, resp) = post(gw, &path, json!({"parameters": {"question": question}})).await;
    assert_eq!(status, 200, "{resp}");
    resp
}

fn model(up: &FakeOpenAi) -> Value {
    json!({"model_id": "gpt-test", "model_provider": "openai/v1/chat/completions",
           "credential": {"openAI_key": "sk-x"}, "model_parameters": {"base_url": up.base_url()}})
}

/// A flow agent whose one step asks the fake weather service about the question's city.
async fn weather_flow(gw: &Gateway, up: &FakeOpenAi) -> String {
    register(
        gw,
        json!({
            "name": "weather flow", "type": "flow",
            "tools": [{ "type": "http", "name": "weather", "description": "Weather for a city",
                        "url": format!("http://{}/weather", up.addr),
                        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
                        "input": { "city": "${parameters.question}" } }]
        }),
    )
    .await
}

fn answer(resp: &Value) -> String {
    resp["inference_results"][0]["output"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "response")
        .and_then(|o| o["result"].as_str())
        .unwrap_or_else(|| panic!("no response in {resp}"))
        .to_string()
}

#[tokio::test]
async fn a_conversational_agent_calls_a_flow_agent_through_agent_tool() {
    let up = FakeOpenAi::start(vec![
        Reply::Sse(tool_call_turn(
            "c1",
            "weather_agent",
            r#"{"question":"Paris"}"#,
        )),
        Reply::Sse(text_chunks("Sunny in Paris.")),
    ])
    .await;
    let gw = Gateway::start(MINIMAL).await;
    let inner = weather_flow(&gw, &up).await;
    let outer = register(
        &gw,
        json!({
            "name": "outer", "type": "conversational", "model": model(&up),
            "tools": [{"type": "AgentTool", "name": "weather_agent",
                       "description": "Knows the weather", "parameters": {"agent_id": inner}}]
        }),
    )
    .await;
    let resp = ask(&gw, &outer, "Weather in Paris?").await;
    assert_eq!(answer(&resp), "Sunny in Paris.");
    // The inner flow ran with the call's question; its answer was the tool result.
    assert_eq!(up.upstream.tool_calls.lock().unwrap()[0]["city"], "Paris");
    let reqs = up.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0]["tools"][0]["function"]["name"], "weather_agent");
    assert_eq!(
        reqs[0]["tools"][0]["function"]["parameters"]["required"],
        json!(["question"])
    );
    let result = reqs[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()["content"]
        .to_string();
    assert!(
        result.contains("sunny") && result.contains("temperature_c"),
        "{result}"
    );
}

#[tokio::test]
async fn a_conversational_agent_calls_a_conversational_agent() {
    let up = FakeOpenAi::start(vec![
        Reply::Sse(tool_call_turn(
            "c1",
            "expert",
            r#"{"question":"What is 2+2?"}"#,
        )),
        Reply::Sse(text_chunks("The expert says 4.")),
        Reply::Sse(text_chunks("The answer is 4.")),
    ])
    .await;
    let gw = Gateway::start(MINIMAL).await;
    let inner = register(
        &gw,
        json!({"name": "expert", "type": "conversational", "model": model(&up),
               "parameters": {"system_prompt": "You are the expert."}}),
    )
    .await;
    let outer = register(
        &gw,
        json!({"name": "asker", "type": "conversational", "model": model(&up),
               "tools": [{"type": "AgentTool", "name": "expert", "parameters": {"agent_id": inner}}]}),
    )
    .await;
    let resp = ask(&gw, &outer, "Ask the expert what 2+2 is").await;
    assert_eq!(answer(&resp), "The answer is 4.");
    let reqs = up.requests();
    assert_eq!(reqs.len(), 3, "{reqs:#?}");
    // The inner agent: its own system prompt and the call's question, nothing of the outer.
    assert_eq!(reqs[1]["messages"][0]["content"], "You are the expert.");
    assert_eq!(reqs[1]["messages"][1]["content"], "What is 2+2?");
    assert!(!reqs[1].to_string().contains("Ask the expert"));
    assert!(reqs[2].to_string().contains("The expert says 4."));
}

#[tokio::test]
async fn targets_must_exist_and_chains_are_bounded() {
    let up = FakeOpenAi::start(vec![]).await;
    let gw = Gateway::start(MINIMAL).await;
    let (status, resp) = post(
        &gw,
        "/_plugins/_ml/agents/_register",
        json!({"name": "x", "type": "flow",
               "tools": [{"type": "AgentTool", "parameters": {"agent_id": "nope"}}]}),
    )
    .await;
    assert_eq!(status, 400, "{resp}");
    assert_eq!(
        resp["error"]["details"]["field"],
        "tools[0].parameters.agent_id"
    );
    assert!(resp.to_string().contains("no agent \\\"nope\\\""), "{resp}");
    let (status, resp) = post(
        &gw,
        "/_plugins/_ml/agents/_register",
        json!({"name": "x", "type": "flow", "tools": [{"type": "AgentTool"}]}),
    )
    .await;
    assert_eq!(status, 400, "{resp}");
    assert_eq!(
        resp["error"]["details"]["field"],
        "tools[0].parameters.agent_id"
    );

    // Flows calling flows: five levels above the weather flow run; a sixth is refused.
    let mut id = weather_flow(&gw, &up).await;
    for level in 1..=5 {
        id = register(
            &gw,
            json!({"name": format!("level {level}"), "type": "flow",
                   "tools": [{"type": "AgentTool", "name": "down", "parameters": {"agent_id": id}}]}),
        )
        .await;
    }
    let resp = ask(&gw, &id, "Oslo").await;
    let out = resp.to_string();
    assert!(out.contains("Oslo") && out.contains("sunny"), "{out}");
    let (status, resp) = post(
        &gw,
        "/_plugins/_ml/agents/_register",
        json!({"name": "too deep", "type": "flow",
               "tools": [{"type": "AgentTool", "name": "down", "parameters": {"agent_id": id}}]}),
    )
    .await;
    assert_eq!(status, 400, "{resp}");
    assert_eq!(
        resp["error"]["details"]["field"],
        "tools[0].parameters.agent_id"
    );
}

/// An asker agent whose `expert` agent tool (asked at once) starts answering and then never
/// finishes; with the fake upstream and the gateway, and the asker's id.
async fn asker_and_thinking_expert() -> (FakeOpenAi, Gateway, String) {
    let up = FakeOpenAi::start(vec![
        Reply::Sse(tool_call_turn(
            "c1",
            "expert",
            r#"{"question":"Think hard"}"#,
        )),
        Reply::Stall(vec![
            json!({"choices": [{"index": 0, "delta": {"content": "Thinking..."}}]}),
        ]),
    ])
    .await;
    let gw = Gateway::start(MINIMAL).await;
    let inner = register(
        &gw,
        json!({"name": "expert", "type": "conversational", "model": model(&up)}),
    )
    .await;
    let outer = register(
        &gw,
        json!({"name": "asker", "type": "conversational", "model": model(&up),
               "tools": [{"type": "AgentTool", "name": "expert", "parameters": {"agent_id": inner}}]}),
    )
    .await;
    (up, gw, outer)
}

#[tokio::test]
async fn cancelling_the_outer_run_cancels_the_inner_one() {
    let (up, gw, outer) = asker_and_thinking_expert().await;
    let mut resp = gw
        .post(
            &outer,
            &run_input(
                "t-agent-tool",
                json!([{"id": "u", "role": "user", "content": "go"}]),
            ),
        )
        .await;
    read_until(&mut resp, "TOOL_CALL_END").await;
    // Wait until the inner agent's model call is under way.
    for _ in 0..200 {
        if up.requests().len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(up.requests().len(), 2);
    drop(resp);
    tokio::time::timeout(Duration::from_secs(10), up.upstream.dropped.notified())
        .await
        .expect("the inner agent's upstream request was not dropped with the outer run");
}

/// Streams a run of `agent` through `/agents/{id}/agui` (as a 1.0 client when `v1`), verified.
async fn stream(gw: &Gateway, agent: &str, thread: &str, text: &str, v1: bool) -> Vec<Value> {
    let mut body = run_input(
        thread,
        json!([{"id": "u1", "role": "user", "content": text}]),
    );
    if v1 {
        body["protocolVersion"] = json!("1.0");
    }
    gw.run(agent, &body).await
}

/// Three agents deep (asker → expert → calc, each call numbered `c1` by the provider): the
/// nested runs stream as attributed subagents to a 1.0 client, and fold into the tool results
/// for an older one.
#[tokio::test]
async fn nested_agents_stream_as_subagents() {
    let turns = || {
        vec![
            Reply::Sse(tool_call_turn("c1", "expert", r#"{"question":"2+2?"}"#)),
            Reply::Sse(tool_call_turn("c1", "calc", r#"{"question":"2+2"}"#)),
            Reply::Sse(tool_call_turn(
                "c1",
                "calculator",
                r#"{"expression":"2+2"}"#,
            )),
            Reply::Sse(text_chunks("calc says 4")),
            Reply::Sse(text_chunks("The expert says 4.")),
            Reply::Sse(text_chunks("The answer is 4.")),
        ]
    };
    let mut script = turns();
    script.extend(turns());
    let up = FakeOpenAi::start(script).await;
    let gw = Gateway::start(MINIMAL).await;
    let calc = register(
        &gw,
        json!({"name": "calc", "type": "conversational", "model": model(&up),
               "tools": [{"type": "builtin", "name": "calculator"}]}),
    )
    .await;
    let expert = register(
        &gw,
        json!({"name": "expert", "description": "Knows arithmetic", "type": "conversational", "model": model(&up),
               "tools": [{"type": "AgentTool", "name": "calc", "parameters": {"agent_id": calc}}]}),
    )
    .await;
    let asker = register(
        &gw,
        json!({"name": "asker", "type": "conversational", "model": model(&up),
               "tools": [{"type": "AgentTool", "name": "expert", "parameters": {"agent_id": expert}}]}),
    )
    .await;

    let events = stream(&gw, &asker, "t-sub-1", "What is 2+2?", true).await;
    let of = |t: &str| -> Vec<&Value> { events.iter().filter(|e| e["type"] == t).collect() };
    let started = of("SUBAGENT_STARTED");
    assert_eq!(started.len(), 2, "{events:#?}");
    let (s1, s2) = (&started[0], &started[1]);
    assert_eq!(s1["name"], "expert");
    assert_eq!(s1["description"], "Knows arithmetic");
    assert!(s1.get("parentSubagentRunId").is_none());
    let outer_call = of("TOOL_CALL_START")[0];
    assert!(outer_call.get("subagentRunId").is_none());
    assert_eq!(s1["parentToolCallId"], outer_call["toolCallId"]);
    assert_eq!(s2["name"], "calc");
    assert_eq!(s2["parentSubagentRunId"], s1["subagentRunId"]);
    // Every call id is unique on the wire although the provider said `c1` three times.
    let calls: Vec<&Value> = of("TOOL_CALL_START");
    assert_eq!(calls.len(), 3);
    let ids: std::collections::HashSet<&str> = calls
        .iter()
        .map(|c| c["toolCallId"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 3, "{calls:#?}");
    assert_eq!(calls[1]["subagentRunId"], s1["subagentRunId"]);
    assert_eq!(s2["parentToolCallId"], calls[1]["toolCallId"]);
    assert_eq!(calls[2]["toolCallName"], "calculator");
    assert_eq!(calls[2]["subagentRunId"], s2["subagentRunId"]);
    // The inner answers are attributed text; each subagent finishes before its call's result.
    let texts = of("TEXT_MESSAGE_START");
    assert_eq!(texts[0]["subagentRunId"], s2["subagentRunId"]);
    assert_eq!(texts[1]["subagentRunId"], s1["subagentRunId"]);
    assert!(texts[2].get("subagentRunId").is_none());
    let pos = |pred: &dyn Fn(&Value) -> bool| events.iter().position(pred).unwrap();
    let fin2 =
        pos(&|e| e["type"] == "SUBAGENT_FINISHED" && e["subagentRunId"] == s2["subagentRunId"]);
    let res2 =
        pos(&|e| e["type"] == "TOOL_CALL_RESULT" && e["toolCallId"] == calls[1]["toolCallId"]);
    let fin1 =
        pos(&|e| e["type"] == "SUBAGENT_FINISHED" && e["subagentRunId"] == s1["subagentRunId"]);
    let res1 =
        pos(&|e| e["type"] == "TOOL_CALL_RESULT" && e["toolCallId"] == outer_call["toolCallId"]);
    assert!(fin2 < res2 && res2 < fin1 && fin1 < res1, "{events:#?}");
    assert_eq!(events[res2]["content"], "calc says 4");
    assert_eq!(events[res2]["subagentRunId"], s1["subagentRunId"]);
    assert_eq!(events[res1]["content"], "The expert says 4.");
    assert!(events[res1].get("subagentRunId").is_none());

    // An older client: no subagent events, no attribution, the inner work folded into the
    // outer call's result.
    let events = stream(&gw, &asker, "t-sub-0", "What is 2+2?", false).await;
    let text = serde_json::to_string(&events).unwrap();
    assert!(
        !text.contains("SUBAGENT") && !text.contains("subagentRunId"),
        "{events:#?}"
    );
    assert!(
        !text.contains("calc says 4\""),
        "inner text leaked: {events:#?}"
    );
    let result = events
        .iter()
        .find(|e| e["type"] == "TOOL_CALL_RESULT")
        .unwrap();
    assert_eq!(result["content"], "The expert says 4.");
    assert_eq!(
        events
            .iter()
            .filter(|e| e["type"] == "TOOL_CALL_START")
            .count(),
        1
    );

    // The stored thread keeps the subagents' messages (attributed) but the model never sees
    // them in a later turn.
    let reqs = up.requests();
    assert_eq!(reqs.len(), 12);
    assert!(reqs[5].to_string().contains("The expert says 4."));
    assert!(
        !reqs[5].to_string().contains("calc says 4"),
        "{:#}",
        reqs[5]
    );
}

/// Stopping the outer run (`DELETE .../runs/{runId}`) while its subagent streams ends the
/// subagent with `SUBAGENT_ERROR` before the run's `RUN_ERROR`, and the inner upstream call
/// is dropped.
#[tokio::test]
async fn stopping_the_outer_run_ends_its_subagent_first() {
    let (up, gw, outer) = asker_and_thinking_expert().await;
    let mut body = run_input(
        "t-sub-stop",
        json!([{"id": "u", "role": "user", "content": "go"}]),
    );
    body["protocolVersion"] = json!("1.0");
    let run_id = body["runId"].as_str().unwrap().to_string();
    let mut resp = gw.post(&outer, &body).await;
    let seen = read_until(&mut resp, "Thinking...").await;
    let (status, _) = common::send_json(
        "DELETE",
        gw.url(&format!("/agents/{outer}/agui/runs/{run_id}")),
        None,
    )
    .await;
    assert_eq!(status, 204);
    let events = common::read_events_after(seen, resp, true).await;
    let sub = events
        .iter()
        .find(|e| e["type"] == "SUBAGENT_STARTED")
        .expect("subagent started");
    let err = events
        .iter()
        .position(|e| e["type"] == "SUBAGENT_ERROR" && e["subagentRunId"] == sub["subagentRunId"])
        .expect("the subagent ends with SUBAGENT_ERROR");
    let last = events.last().unwrap();
    assert_eq!(last["type"], "RUN_ERROR", "{events:#?}");
    assert_eq!(last["code"], "CANCELLED");
    assert!(err < events.len() - 1);
    tokio::time::timeout(Duration::from_secs(10), up.upstream.dropped.notified())
        .await
        .expect("the inner agent's upstream request was not dropped");
}

/// Two agent tools called in one turn run together: both subagents are under way at once,
/// their events carry their own attribution, and each outer call's result is its own
/// subagent's answer.
#[tokio::test]
async fn parallel_agent_tools_stream_as_concurrent_subagents() {
    let up = FakeOpenAi::start(vec![
        Reply::Sse(vec![
            call_start(0, "c1", "expert"),
            call_args(0, r#"{"question":"first"}"#),
            call_start(1, "c2", "expert"),
            call_args(1, r#"{"question":"second"}"#),
            finish("tool_calls"),
        ]),
        Reply::Sse(text_chunks("answer A")),
        Reply::Sse(text_chunks("answer B")),
        Reply::Sse(text_chunks("Both answered.")),
    ])
    .await;
    let gw = Gateway::start(MINIMAL).await;
    let inner = register(
        &gw,
        json!({"name": "expert", "type": "conversational", "model": model(&up)}),
    )
    .await;
    let outer = register(
        &gw,
        json!({"name": "asker", "type": "conversational", "model": model(&up),
               "tools": [{"type": "AgentTool", "name": "expert", "parameters": {"agent_id": inner}}]}),
    )
    .await;
    let events = stream(&gw, &outer, "t-sub-par", "ask twice", true).await;
    let started: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "SUBAGENT_STARTED")
        .collect();
    assert_eq!(started.len(), 2, "{events:#?}");
    assert_ne!(started[0]["subagentRunId"], started[1]["subagentRunId"]);
    let first_finished = events
        .iter()
        .position(|e| e["type"] == "SUBAGENT_FINISHED")
        .unwrap();
    let second_started = events.iter().position(|e| *e == *started[1]).unwrap();
    assert!(
        second_started < first_finished,
        "the subagents ran one after the other: {events:#?}"
    );
    for s in started {
        let sub = &s["subagentRunId"];
        // The subagent's own answer, from its attributed text.
        let said: String = events
            .iter()
            .filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT" && e["subagentRunId"] == *sub)
            .map(|e| e["delta"].as_str().unwrap())
            .collect();
        assert!(said == "answer A" || said == "answer B", "{said:?}");
        let result = events
            .iter()
            .find(|e| e["type"] == "TOOL_CALL_RESULT" && e["toolCallId"] == s["parentToolCallId"])
            .expect("the spawning call's result");
        assert_eq!(result["content"], said.as_str());
        assert!(result.get("subagentRunId").is_none());
    }
}
