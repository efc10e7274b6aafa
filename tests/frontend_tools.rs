/// Frontend tools pause the run: the call streams without a result, the run finishes, and the
/// next run (history ending in the browser's tool message) continues the conversation. Mixed
/// batches run their backend part first.
mod common;

use common::*;
use serde_json::{Value, json};

fn change_background() -> Value {
    json!([{"name": "change_background", "description": "Change the page background",
            "parameters": {"type": "object", "properties": {"background": {"type": "string"}}}}])
}

#[tokio::test]
async fn a_frontend_call_ends_the_run_and_the_next_run_resumes() {
    let up = FakeOpenAi::start(vec![
        Reply::Sse(tool_call_turn(
            "call_bg",
            "change_background",
            r#"{"background":"blue"}"#,
        )),
        Reply::Sse(text_chunks("The background is blue now.")),
    ])
    .await;
    let gw = Gateway::start(&up.config("")).await;
    let history = json!([{"id": "u1", "role": "user", "content": "Make it blue"}]);
    let mut body = run_input("t-front", history.clone());
    body["tools"] = change_background();
    body["protocolVersion"] = json!("1.0");
    let events = gw.run("a", &body).await;
    assert_eq!(
        types(&events),
        [
            "RUN_STARTED",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "RUN_FINISHED"
        ]
    );
    let finished = events.last().unwrap();
    assert_eq!(
        finished["outcome"],
        json!({"type": "success", "pendingToolCallIds": ["call_bg"]})
    );
    // The frontend tool was offered to the model next to the backend one.
    let requests = up.requests();
    let names: Vec<&str> = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["get_weather", "change_background"]);
    assert_eq!(
        up.requests().len(),
        1,
        "no second model call before the browser answers"
    );

    // The browser ran the tool; the client re-sends history with the result.
    let parent = of_type(&events, "TOOL_CALL_START")[0]["parentMessageId"].clone();
    let mut resumed = history.as_array().unwrap().clone();
    resumed.push(json!({"id": parent, "role": "assistant", "toolCalls": [
        {"id": "call_bg", "type": "function", "function": {"name": "change_background", "arguments": "{\"background\":\"blue\"}"}}]}));
    resumed.push(json!({"id": "t1", "role": "tool", "toolCallId": "call_bg", "content": "background changed"}));
    let mut body = run_input("t-front", Value::Array(resumed));
    body["tools"] = change_background();
    body["protocolVersion"] = json!("1.0");
    let events = gw.run("a", &body).await;
    assert_eq!(text(&events), "The background is blue now.");
    assert!(events.last().unwrap().get("outcome").is_none());
    let msgs = up.requests()[1]["messages"].as_array().unwrap().clone();
    let n = msgs.len();
    assert_eq!(
        msgs[n - 1],
        json!({"role": "tool", "tool_call_id": "call_bg", "content": "background changed"})
    );
    assert_eq!(msgs[n - 2]["tool_calls"][0]["id"], "call_bg");
}

#[tokio::test]
async fn a_mixed_parallel_batch_runs_backend_calls_and_leaves_frontend_calls_pending() {
    let turn = vec![
        call_start(0, "call_front", "change_background"),
        call_start(1, "call_back", "get_weather"),
        call_args(0, r#"{"backgr"#),
        call_args(1, r#"{"city":"Lima"}"#),
        call_args(0, r#"ound":"red"}"#),
        finish("tool_calls"),
    ];
    let up = FakeOpenAi::start(vec![
        Reply::Sse(turn),
        Reply::Sse(text_chunks("Red it is, and Lima is sunny.")),
    ])
    .await;
    let gw = Gateway::start(&up.config("")).await;
    let history =
        json!([{"id": "u1", "role": "user", "content": "Red background, and weather in Lima"}]);
    let mut body = run_input("t-mixed", history.clone());
    body["tools"] = change_background();
    // An old (0.0.x) client: no protocolVersion, so no outcome.
    let events = gw.run("a", &body).await;
    let results = of_type(&events, "TOOL_CALL_RESULT");
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["toolCallId"], "call_back");
    assert_eq!(args_of(&events, "call_front"), r#"{"background":"red"}"#);
    let finished = events.last().unwrap();
    assert_eq!(finished["type"], "RUN_FINISHED");
    assert!(
        finished.get("outcome").is_none(),
        "0.0.x clients reject pendingToolCallIds"
    );
    assert_eq!(up.requests().len(), 1);

    // Next run: the client's history holds the backend result (from TOOL_CALL_RESULT) and
    // appends the frontend result after it.
    let parent = of_type(&events, "TOOL_CALL_START")[0]["parentMessageId"].clone();
    let mut resumed = history.as_array().unwrap().clone();
    resumed.push(json!({"id": parent, "role": "assistant", "toolCalls": [
        {"id": "call_front", "type": "function", "function": {"name": "change_background", "arguments": "{\"background\":\"red\"}"}},
        {"id": "call_back", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Lima\"}"}}]}));
    resumed.push(json!({"id": results[0]["messageId"], "role": "tool", "toolCallId": "call_back", "content": results[0]["content"]}));
    resumed
        .push(json!({"id": "tf", "role": "tool", "toolCallId": "call_front", "content": "done"}));
    let mut body = run_input("t-mixed", Value::Array(resumed));
    body["tools"] = change_background();
    let events = gw.run("a", &body).await;
    assert_eq!(text(&events), "Red it is, and Lima is sunny.");
    // Both results go back in one turn, right after the assistant turn, in call order.
    let msgs = up.requests()[1]["messages"].as_array().unwrap().clone();
    let n = msgs.len();
    assert_eq!(msgs[n - 3]["role"], "assistant");
    assert_eq!(msgs[n - 2]["tool_call_id"], "call_front");
    assert_eq!(msgs[n - 1]["tool_call_id"], "call_back");
}

#[tokio::test]
async fn an_abandoned_frontend_call_is_answered_as_not_executed() {
    let up = FakeOpenAi::start(vec![Reply::Sse(text_chunks("Okay, never mind."))]).await;
    let gw = Gateway::start(&up.config("")).await;
    let body = run_input(
        "t-abandon",
        json!([
            {"id": "u1", "role": "user", "content": "Make it blue"},
            {"id": "a1", "role": "assistant", "toolCalls": [{"id": "call_old", "type": "function",
                "function": {"name": "change_background", "arguments": "{\"background\":\"blue\"}"}}]},
            {"id": "u2", "role": "user", "content": "Actually, forget it"}
        ]),
    );
    let events = gw.run("a", &body).await;
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED");
    let notices = of_type(&events, "CUSTOM");
    assert_eq!(notices[0]["name"], "input_notices");
    let msgs = up.requests()[0]["messages"].as_array().unwrap().clone();
    let tool = msgs.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(tool["tool_call_id"], "call_old");
    assert!(tool["content"].as_str().unwrap().contains("not executed"));
    assert_eq!(msgs.last().unwrap()["content"], "Actually, forget it");
}

#[tokio::test]
async fn a_frontend_tool_named_like_a_backend_tool_is_refused_before_streaming() {
    let up = FakeOpenAi::start(vec![]).await;
    let gw = Gateway::start(&up.config("")).await;
    let mut body = run_input(
        "t-clash",
        json!([{"id": "u", "role": "user", "content": "hi"}]),
    );
    body["tools"] = json!([{"name": "get_weather", "description": "frontend weather"}]);
    let resp = gw.post("a", &body).await;
    assert_eq!(resp.status(), 400);
    let err: Value = resp.json().await.unwrap();
    assert_eq!(err["error"]["field"], "tools[0].name");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("clashes")
    );
    assert!(up.requests().is_empty());
}

#[tokio::test]
async fn repeated_provider_call_ids_are_made_unique_in_the_thread() {
    // Some servers number calls call_0, call_1 ... afresh every turn.
    let up = FakeOpenAi::start(vec![
        Reply::Sse(tool_call_turn(
            "call_0",
            "get_weather",
            r#"{"city":"Bern"}"#,
        )),
        Reply::Sse(tool_call_turn(
            "call_0",
            "get_weather",
            r#"{"city":"Graz"}"#,
        )),
        Reply::Sse(text_chunks("Both sunny.")),
    ])
    .await;
    let gw = Gateway::start(&up.config("")).await;
    let events = gw
        .run(
            "a",
            &run_input(
                "t-ids",
                json!([{"id": "u", "role": "user", "content": "Bern then Graz"}]),
            ),
        )
        .await;
    let ids: Vec<&str> = of_type(&events, "TOOL_CALL_START")
        .iter()
        .map(|e| e["toolCallId"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1]);
    assert_eq!(args_of(&events, ids[1]), r#"{"city":"Graz"}"#);
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED");
}
