/// Backend tools run inside the run: their results stream as TOOL_CALL_RESULT, go back to the
/// model in one tool-result turn, and a failing tool becomes an error result, not a failed run.
mod common;

use common::*;
use serde_json::json;

#[tokio::test]
async fn a_backend_call_runs_and_the_loop_continues_in_the_same_run() {
    let up = FakeOpenAi::start(vec![
        Reply::Sse(tool_call_turn(
            "call_w1",
            "get_weather",
            r#"{"city":"Paris"}"#,
        )),
        Reply::Sse(text_chunks("It is sunny in Paris.")),
    ])
    .await;
    let gw = Gateway::start(&up.config("")).await;
    let events = gw
        .run(
            "a",
            &run_input(
                "t-backend",
                json!([{"id": "u1", "role": "user", "content": "Weather in Paris?"}]),
            ),
        )
        .await;
    assert_eq!(
        types(&events),
        [
            "RUN_STARTED",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "TOOL_CALL_RESULT",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "CUSTOM",
            "RUN_FINISHED"
        ]
    );
    assert_eq!(args_of(&events, "call_w1"), r#"{"city":"Paris"}"#);
    // Two model calls, each reported.
    let report = &of_type(&events, "CUSTOM")[0]["value"];
    assert_eq!(
        report["per_turn_usage"].as_array().unwrap().len(),
        1,
        "the tool turn's stream had no usage chunk"
    );
    assert_eq!(report["per_turn_usage"][0]["turn"], 1);
    let result = of_type(&events, "TOOL_CALL_RESULT")[0];
    assert_eq!(result["toolCallId"], "call_w1");
    assert_eq!(result["role"], "tool");
    let content: serde_json::Value =
        serde_json::from_str(result["content"].as_str().unwrap()).unwrap();
    assert_eq!(content["sky"], "sunny");
    assert_eq!(
        up.upstream.tool_calls.lock().unwrap()[0],
        json!({"city": "Paris"})
    );

    // The second model call sees the call and its result.
    let second = &up.requests()[1]["messages"];
    let msgs = second.as_array().unwrap();
    let n = msgs.len();
    assert_eq!(msgs[n - 2]["role"], "assistant");
    assert_eq!(msgs[n - 2]["tool_calls"][0]["id"], "call_w1");
    assert_eq!(msgs[n - 1]["role"], "tool");
    assert_eq!(msgs[n - 1]["tool_call_id"], "call_w1");
    assert!(msgs[n - 1]["content"].as_str().unwrap().contains("sunny"));
}

#[tokio::test]
async fn parallel_backend_calls_and_a_failing_tool() {
    // Two interleaved calls in one turn; one city makes the tool answer 404.
    let turn = vec![
        call_start(0, "call_a", "get_weather"),
        call_start(1, "call_b", "get_weather"),
        call_args(1, r#"{"city":"#),
        call_args(0, r#"{"city":"Rome"}"#),
        call_args(1, r#""Atlantis"}"#),
        finish("tool_calls"),
    ];
    let up = FakeOpenAi::start(vec![
        Reply::Sse(turn),
        Reply::Sse(text_chunks("Rome is sunny; Atlantis is unknown.")),
    ])
    .await;
    let gw = Gateway::start(&up.config("")).await;
    let events = gw
        .run(
            "a",
            &run_input(
                "t-par",
                json!([{"id": "u1", "role": "user", "content": "Rome and Atlantis?"}]),
            ),
        )
        .await;
    assert_eq!(args_of(&events, "call_a"), r#"{"city":"Rome"}"#);
    assert_eq!(args_of(&events, "call_b"), r#"{"city":"Atlantis"}"#);
    let results = of_type(&events, "TOOL_CALL_RESULT");
    assert_eq!(results.len(), 2);
    let failed = results
        .iter()
        .find(|r| r["toolCallId"] == "call_b")
        .unwrap();
    assert!(
        failed["content"].as_str().unwrap().starts_with("HTTP 404"),
        "{failed}"
    );
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED");
    // Both results return in one turn, in call order, the failure marked for the model.
    let msgs = up.requests()[1]["messages"].as_array().unwrap().clone();
    let tools: Vec<_> = msgs.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tools.len(), 2);
    assert_eq!(tools[0]["tool_call_id"], "call_a");
    assert_eq!(tools[1]["tool_call_id"], "call_b");
    assert!(
        tools[1]["content"]
            .as_str()
            .unwrap()
            .starts_with("Error: HTTP 404")
    );
    // The calls of one turn share the turn's parent message.
    let starts = of_type(&events, "TOOL_CALL_START");
    assert_eq!(starts[0]["parentMessageId"], starts[1]["parentMessageId"]);
}

#[tokio::test]
async fn an_unknown_tool_and_invalid_arguments_become_error_results() {
    let up = FakeOpenAi::start(vec![
        Reply::Sse(vec![
            call_start(0, "call_x", "launch_rockets"),
            call_args(0, "{}"),
            call_start(1, "call_y", "get_weather"),
            call_args(1, "{not json"),
            finish("tool_calls"),
        ]),
        Reply::Sse(text_chunks("Sorry.")),
    ])
    .await;
    let gw = Gateway::start(&up.config("")).await;
    let events = gw
        .run(
            "a",
            &run_input(
                "t-bad",
                json!([{"id": "u", "role": "user", "content": "go"}]),
            ),
        )
        .await;
    let results = of_type(&events, "TOOL_CALL_RESULT");
    let by_id = |id: &str| {
        results.iter().find(|r| r["toolCallId"] == id).unwrap()["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(by_id("call_x").contains("Unknown tool"));
    assert!(by_id("call_y").contains("not valid JSON"));
    assert!(
        up.upstream.tool_calls.lock().unwrap().is_empty(),
        "the tool was not called with bad arguments"
    );
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED");
}

#[tokio::test]
async fn a_text_turn_with_tool_calls_shares_one_parent_message() {
    let mut turn = vec![json!({"choices": [{"index": 0, "delta": {"content": "Let me check."}}]})];
    turn.extend(tool_call_turn(
        "call_p",
        "get_weather",
        r#"{"city":"Oslo"}"#,
    ));
    let up = FakeOpenAi::start(vec![Reply::Sse(turn), Reply::Sse(text_chunks("Done."))]).await;
    let gw = Gateway::start(&up.config("")).await;
    let events = gw
        .run(
            "a",
            &run_input(
                "t-parent",
                json!([{"id": "u", "role": "user", "content": "Oslo?"}]),
            ),
        )
        .await;
    let text_start = of_type(&events, "TEXT_MESSAGE_START")[0];
    let call_start = of_type(&events, "TOOL_CALL_START")[0];
    assert_eq!(call_start["parentMessageId"], text_start["messageId"]);
    // The history sent back keeps text and call in one assistant message.
    let msgs = up.requests()[1]["messages"].as_array().unwrap().clone();
    let assistant = msgs.iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(assistant["content"], "Let me check.");
    assert_eq!(assistant["tool_calls"][0]["id"], "call_p");
}
