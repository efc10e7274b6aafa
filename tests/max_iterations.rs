/// `max_iterations` bounds the loop: a model that keeps calling tools gets a clear final
/// message and a finished run, not a hang.
mod common;

use common::*;
use serde_json::json;

#[tokio::test]
async fn the_loop_stops_at_max_iterations_with_a_message() {
    let replies = (0..4)
        .map(|i| {
            Reply::Sse(tool_call_turn(
                &format!("call_{i}"),
                "get_weather",
                r#"{"city":"Loop"}"#,
            ))
        })
        .collect();
    let up = FakeOpenAi::start(replies).await; // the agent allows 4 iterations
    let gw = Gateway::start(&up.config("")).await;
    let events = gw
        .run(
            "a",
            &run_input(
                "t-loop",
                json!([{"id": "u", "role": "user", "content": "forever"}]),
            ),
        )
        .await;
    assert_eq!(up.requests().len(), 4);
    assert_eq!(of_type(&events, "TOOL_CALL_RESULT").len(), 4);
    let custom = of_type(&events, "CUSTOM");
    assert_eq!(custom[0]["name"], "max_iterations_reached");
    assert!(text(&events).contains("limit of 4 model calls"));
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED");
}
