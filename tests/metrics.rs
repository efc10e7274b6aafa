/// `GET /metrics` speaks the Prometheus text format and counts what runs did: runs by outcome
/// and failure code, model calls and their latency, tool calls and their latency, tokens.
mod common;

use common::*;
use serde_json::json;

fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series).map(|v| v.trim()))
        .unwrap_or_else(|| panic!("no series {series} in:\n{text}"))
        .parse()
        .unwrap()
}

#[tokio::test]
async fn metrics_count_runs_model_calls_tools_and_tokens() {
    let up = FakeOpenAi::start(vec![
        Reply::Sse(tool_call_turn(
            "call_m1",
            "get_weather",
            r#"{"city":"Oslo"}"#,
        )),
        Reply::Sse(text_chunks("Cold.")),
        Reply::Status(400, r#"{"error":{"message":"bad"}}"#.into()),
    ])
    .await;
    let gw = Gateway::start(&up.config("")).await;
    let ok = gw
        .run(
            "a",
            &run_input(
                "t-m1",
                json!([{"id": "u1", "role": "user", "content": "Weather?"}]),
            ),
        )
        .await;
    assert_eq!(ok.last().unwrap()["type"], "RUN_FINISHED");
    let failed = gw
        .run(
            "a",
            &run_input(
                "t-m2",
                json!([{"id": "u1", "role": "user", "content": "Again"}]),
            ),
        )
        .await;
    assert_eq!(failed.last().unwrap()["type"], "RUN_ERROR");
    let code = failed.last().unwrap()["code"].as_str().unwrap().to_string();

    let resp = reqwest::get(gw.url("/metrics")).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    let text = resp.text().await.unwrap();
    // Every sample line is `name{labels} number`; every family has HELP and TYPE.
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (series, v) = line.rsplit_once(' ').unwrap();
        assert!(v.parse::<f64>().is_ok(), "{line}");
        let name = series.split('{').next().unwrap();
        assert!(
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "{line}"
        );
    }
    assert_eq!(value(&text, "agui_runs_active "), 0.0);
    assert_eq!(
        value(&text, r#"agui_runs_total{agent="a",outcome="finished"}"#),
        1.0
    );
    assert_eq!(
        value(&text, r#"agui_runs_total{agent="a",outcome="error"}"#),
        1.0
    );
    assert_eq!(
        value(
            &text,
            &format!(r#"agui_runs_failed_total{{agent="a",code="{code}"}}"#)
        ),
        1.0
    );
    assert_eq!(
        value(
            &text,
            r#"agui_tool_calls_total{tool="get_weather",outcome="ok"}"#
        ),
        1.0
    );
    assert_eq!(
        value(&text, r#"agui_tool_call_seconds_count{tool="get_weather"}"#),
        1.0
    );
    assert_eq!(
        value(
            &text,
            r#"agui_tool_call_seconds_bucket{tool="get_weather",le="+Inf"}"#
        ),
        1.0
    );
    assert_eq!(
        value(
            &text,
            r#"agui_model_calls_total{provider="openai",outcome="ok"}"#
        ),
        2.0
    );
    assert_eq!(
        value(
            &text,
            r#"agui_model_calls_total{provider="openai",outcome="error"}"#
        ),
        1.0
    );
    assert_eq!(
        value(
            &text,
            r#"agui_model_first_event_seconds_count{provider="openai"}"#
        ),
        2.0
    );
    assert!(
        value(
            &text,
            r#"agui_tokens_total{provider="openai",model="gpt-test",direction="output"}"#
        ) > 0.0
    );
}
