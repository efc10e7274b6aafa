/// Backend tools that require approval pause the run (an interrupt for 1.0 clients, a pending
/// call for 0.0.x clients); the answer runs or refuses the call under its original id, with
/// edited arguments validated like any call.
mod common;

use common::*;
use serde_json::{Value, json};

async fn setup(replies: Vec<Reply>) -> (FakeOpenAi, Gateway) {
    let up = FakeOpenAi::start(replies).await;
    let config = up.config("").replace(
        "parameters = { type = \"object\", properties = { city = { type = \"string\" } }, required = [\"city\"] }",
        "parameters = { type = \"object\", properties = { city = { type = \"string\" } }, required = [\"city\"] }\nrequires_approval = true",
    );
    assert!(config.contains("requires_approval"));
    let gw = Gateway::start(&config).await;
    (up, gw)
}

fn history_with_call(args: &str) -> Vec<Value> {
    vec![
        json!({"id": "u1", "role": "user", "content": "Weather in Paris?"}),
        json!({"id": "a1", "role": "assistant", "toolCalls": [{"id": "call_w", "type": "function",
            "function": {"name": "get_weather", "arguments": args}}]}),
    ]
}

#[tokio::test]
async fn a_v1_client_gets_an_interrupt_and_an_approval_runs_the_call_with_edited_arguments() {
    let (up, gw) = setup(vec![
        Reply::Sse(tool_call_turn(
            "call_w",
            "get_weather",
            r#"{"city":"Paris"}"#,
        )),
        Reply::Sse(text_chunks("Lima is sunny.")),
    ])
    .await;
    let mut body = run_input(
        "ap-1",
        json!([{"id": "u1", "role": "user", "content": "Weather in Paris?"}]),
    );
    body["protocolVersion"] = json!("1.0");
    let events = gw.run("a", &body).await;
    assert!(
        of_type(&events, "TOOL_CALL_RESULT").is_empty(),
        "the call did not run"
    );
    assert!(up.upstream.tool_calls.lock().unwrap().is_empty());
    let finished = events.last().unwrap();
    let interrupt = &finished["outcome"]["interrupts"][0];
    assert_eq!(finished["outcome"]["type"], "interrupt");
    assert_eq!(interrupt["id"], "approval:call_w");
    assert_eq!(interrupt["reason"], "tool_call");
    assert_eq!(interrupt["toolCallId"], "call_w");
    assert_eq!(interrupt["responseSchema"]["required"], json!(["approved"]));
    let custom = of_type(&events, "CUSTOM")
        .into_iter()
        .find(|e| e["name"] == "approval_required")
        .unwrap();
    assert_eq!(custom["value"][0]["arguments"], json!({"city": "Paris"}));

    // The person approves with a different city.
    let mut body = run_input(
        "ap-1",
        Value::Array(history_with_call(r#"{"city":"Paris"}"#)),
    );
    body["protocolVersion"] = json!("1.0");
    body["resume"] = json!([{"interruptId": "approval:call_w", "status": "resolved",
                              "payload": {"approved": true, "arguments": {"city": "Lima"}}}]);
    let events = gw.run("a", &body).await;
    let t = types(&events);
    assert_eq!(
        t[1], "TOOL_CALL_RESULT",
        "the result comes first, without a second START: {t:?}"
    );
    assert!(!t.contains(&"TOOL_CALL_START"));
    assert_eq!(events[1]["toolCallId"], "call_w");
    assert_eq!(
        up.upstream.tool_calls.lock().unwrap()[0],
        json!({"city": "Lima"})
    );
    assert_eq!(text(&events), "Lima is sunny.");
    let msgs = up.requests()[1]["messages"].as_array().unwrap().clone();
    let tool = msgs.iter().find(|m| m["role"] == "tool").unwrap();
    assert!(
        tool["content"].as_str().unwrap().contains("Lima"),
        "the model sees the real result: {tool}"
    );
}

#[tokio::test]
async fn a_rejection_tells_the_model_and_invalid_edits_are_refused() {
    let (up, gw) = setup(vec![
        Reply::Sse(text_chunks("Understood.")),
        Reply::Sse(text_chunks("Fixing.")),
    ])
    .await;
    let mut body = run_input(
        "ap-2",
        Value::Array(history_with_call(r#"{"city":"Paris"}"#)),
    );
    body["protocolVersion"] = json!("1.0");
    body["resume"] = json!([{"interruptId": "approval:call_w", "status": "cancelled"}]);
    let events = gw.run("a", &body).await;
    assert!(events[1]["content"].as_str().unwrap().contains("denied"));
    assert!(up.upstream.tool_calls.lock().unwrap().is_empty());
    let msgs = up.requests()[0]["messages"].as_array().unwrap().clone();
    assert!(
        msgs.iter()
            .any(|m| m["role"] == "tool" && m["content"].as_str().unwrap().contains("denied"))
    );

    let mut body = run_input(
        "ap-3",
        Value::Array(history_with_call(r#"{"city":"Paris"}"#)),
    );
    body["protocolVersion"] = json!("1.0");
    body["resume"] = json!([{"interruptId": "approval:call_w", "status": "resolved",
                              "payload": {"approved": true, "arguments": {"city": 42}}}]);
    let events = gw.run("a", &body).await;
    let content = events[1]["content"].as_str().unwrap();
    assert!(
        content.contains("Invalid arguments") && content.contains("/city"),
        "{content}"
    );
    assert!(up.upstream.tool_calls.lock().unwrap().is_empty());
}

#[tokio::test]
async fn an_old_client_gets_a_pending_call_and_answers_with_a_tool_message() {
    let (up, gw) = setup(vec![
        Reply::Sse(tool_call_turn(
            "call_w",
            "get_weather",
            r#"{"city":"Paris"}"#,
        )),
        Reply::Sse(text_chunks("Paris is sunny.")),
        Reply::Sse(text_chunks("Anything else?")),
    ])
    .await;
    let events = gw
        .run(
            "a",
            &run_input(
                "ap-4",
                json!([{"id": "u1", "role": "user", "content": "Weather in Paris?"}]),
            ),
        )
        .await;
    assert!(events.last().unwrap().get("outcome").is_none());
    assert!(up.upstream.tool_calls.lock().unwrap().is_empty());

    let mut history = history_with_call(r#"{"city":"Paris"}"#);
    history.push(json!({"id": "d1", "role": "tool", "toolCallId": "call_w", "content": "{\"approved\": true}"}));
    let events = gw
        .run("a", &run_input("ap-4", Value::Array(history.clone())))
        .await;
    let result = of_type(&events, "TOOL_CALL_RESULT")[0].clone();
    assert_eq!(result["toolCallId"], "call_w");
    assert!(result["content"].as_str().unwrap().contains("sunny"));
    assert_eq!(up.upstream.tool_calls.lock().unwrap().len(), 1);

    // The client stores the result after the decision; later runs do not run the call again.
    history.push(json!({"id": result["messageId"], "role": "tool", "toolCallId": "call_w", "content": result["content"]}));
    history.push(json!({"id": "a2", "role": "assistant", "content": "Paris is sunny."}));
    history.push(json!({"id": "u2", "role": "user", "content": "Thanks"}));
    let events = gw.run("a", &run_input("ap-4", Value::Array(history))).await;
    assert!(of_type(&events, "TOOL_CALL_RESULT").is_empty());
    assert_eq!(up.upstream.tool_calls.lock().unwrap().len(), 1);
}
