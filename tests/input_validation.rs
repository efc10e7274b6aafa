/// Bad requests are refused with a 4xx JSON body naming the field, before any streaming.
mod common;

use common::*;
use serde_json::{Value, json};

async fn refuse(gw: &Gateway, agent: &str, body: &str) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .post(gw.url(&format!("/agents/{agent}/agui")))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    (status, resp.json().await.unwrap())
}

#[tokio::test]
async fn malformed_and_incomplete_inputs_are_named() {
    let up = FakeOpenAi::start(vec![]).await;
    let gw = Gateway::start(&up.config("")).await;
    let (s, e) = refuse(&gw, "nope", "{}").await;
    assert_eq!((s, e["error"]["type"].as_str()), (404, Some("not_found")));
    let (s, e) = refuse(&gw, "a", "{not json").await;
    assert_eq!(s, 400);
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("malformed JSON")
    );
    let (s, e) = refuse(&gw, "a", r#"{"runId":"r","messages":[]}"#).await;
    assert_eq!((s, e["error"]["field"].as_str()), (400, Some("threadId")));
    let (_, e) = refuse(&gw, "a", r#"{"threadId":"t","runId":"r"}"#).await;
    assert_eq!(e["error"]["field"], "messages");
    let (_, e) = refuse(&gw, "a", r#"{"threadId":"t","runId":1,"messages":[]}"#).await;
    assert_eq!(e["error"]["field"], "runId");
    let (_, e) = refuse(
        &gw,
        "a",
        r#"{"threadId":"t","runId":"r","messages":[{"id":"x","role":"user","content":{"a":1}}]}"#,
    )
    .await;
    assert_eq!(e["error"]["field"], "messages[0].content");
    let (_, e) = refuse(&gw, "a", r#"{"threadId":"t","runId":"r","messages":[{"id":"x","role":"user","content":[{"type":"image","source":{"type":"data"}}]}]}"#).await;
    assert_eq!(e["error"]["field"], "messages[0].content");
    assert!(
        e["error"]["message"].as_str().unwrap().contains("part 0"),
        "{e}"
    );
    let (_, e) = refuse(
        &gw,
        "a",
        r#"{"threadId":"t","runId":"r","messages":[],"tools":[{"description":"no name"}]}"#,
    )
    .await;
    assert_eq!(e["error"]["field"], "tools[0].name");
    assert!(up.requests().is_empty(), "nothing reached the model");
}

#[tokio::test]
async fn an_oversized_body_is_refused() {
    let up = FakeOpenAi::start(vec![]).await;
    let config = up.config("").replace(
        "keepalive_secs = 1",
        "keepalive_secs = 1\nmax_body_bytes = 1024",
    );
    let gw = Gateway::start(&config).await;
    let big = "x".repeat(4096);
    let body = json!({"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user", "content": big}]});
    let (s, e) = refuse(&gw, "a", &body.to_string()).await;
    assert_eq!(
        (s, e["error"]["type"].as_str()),
        (413, Some("payload_too_large"))
    );
}

#[tokio::test]
async fn every_optional_field_may_be_missing_or_null() {
    let up = FakeOpenAi::start(vec![Reply::Sse(text_chunks("ok"))]).await;
    let gw = Gateway::start(&up.config("")).await;
    let body = json!({"threadId": "t-min", "runId": "r", "messages": [{"role": "user", "content": "hi"}],
                      "tools": null, "context": null, "state": null, "forwardedProps": null});
    let events = gw.run("a", &body).await;
    assert_eq!(text(&events), "ok");
    // An empty history is a valid (empty) run, not an upstream call.
    let events = gw
        .run(
            "a",
            &json!({"threadId": "t-none", "runId": "r2", "messages": []}),
        )
        .await;
    assert_eq!(types(&events), ["RUN_STARTED", "RUN_FINISHED"]);
    assert_eq!(up.requests().len(), 1);
}

#[tokio::test]
async fn health_and_agent_listing() {
    let up = FakeOpenAi::start(vec![]).await;
    let gw = Gateway::start(&up.config("")).await;
    let h: Value = reqwest::get(gw.url("/healthz"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(h["status"], "ok");
    assert_eq!(
        (
            h["activeRuns"].as_u64(),
            h["detachedRuns"].as_u64(),
            h["oldestRunSecs"].as_u64()
        ),
        (Some(0), Some(0), Some(0))
    );
    let a: Value = reqwest::get(gw.url("/agents"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(a["agents"][0]["id"], "a");
    assert_eq!(a["agents"][0]["endpoint"], "/agents/a/agui");
}

#[tokio::test]
async fn nul_ids_and_broken_inline_media_are_refused_before_streaming() {
    let up = FakeOpenAi::start(vec![]).await;
    let gw = Gateway::start(&up.config("")).await;
    let (s, e) = refuse(
        &gw,
        "a",
        r#"{"threadId":"t\u0000x","runId":"r","messages":[]}"#,
    )
    .await;
    assert_eq!((s, e["error"]["field"].as_str()), (400, Some("threadId")));
    let (s, e) = refuse(
        &gw,
        "a",
        r#"{"threadId":"t","runId":"r","messages":[{"id":"x","role":"user","content":[{"type":"image","source":{"type":"data","value":"@@not-base64@@","mimeType":"image/png"}}]}]}"#,
    )
    .await;
    assert_eq!(
        (s, e["error"]["field"].as_str()),
        (400, Some("messages[0].content[0].source.value"))
    );
    let (s, e) = refuse(
        &gw,
        "a",
        r#"{"threadId":"t","runId":"r","messages":[{"id":"x","role":"user","content":[{"type":"image","source":{"type":"data","value":"AAAA","mimeType":"text/html"}}]}]}"#,
    )
    .await;
    assert_eq!(
        (s, e["error"]["field"].as_str()),
        (400, Some("messages[0].content[0].source.mimeType"))
    );
    assert_eq!(up.requests().len(), 0, "nothing reached the model");
}

#[tokio::test]
async fn unknown_routes_wrong_methods_and_bad_queries_answer_json() {
    let up = FakeOpenAi::start(vec![]).await;
    let gw = Gateway::start(&up.config("")).await;
    let client = reqwest::Client::new();
    let cases = [
        (client.get(gw.url("/no/such/route")), 404, "not_found"),
        (client.delete(gw.url("/healthz")), 405, "method_not_allowed"),
        (
            client.get(gw.url("/_plugins/_ml/tasks/t%00x")),
            400,
            "invalid_request",
        ),
        (
            client.get(gw.url("/agents/a/agui/runs/r1/events?after=-5")),
            400,
            "invalid_request",
        ),
    ];
    for (req, status, kind) in cases {
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), status);
        assert!(
            resp.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("application/json")
        );
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["type"], kind, "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
    }
}
