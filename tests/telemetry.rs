/// Traces over OTLP/HTTP: with `OTEL_EXPORTER_OTLP_ENDPOINT` set, the running binary exports a
/// server span per request (continuing the caller's `traceparent`), `invoke_agent` per run,
/// `chat` per model call and `execute_tool` per backend call, to a collector on loopback that
/// decodes the OTLP JSON; a graceful shutdown flushes them. Model and tool calls carry their
/// span's `traceparent` upstream. No message text, no key.
mod common;

use std::sync::{Arc, Mutex};

use axum::routing::post;
use common::*;
use serde_json::{Value, json};

/// A collector accepting OTLP/HTTP JSON trace exports.
async fn collector() -> (String, Arc<Mutex<Vec<Value>>>) {
    let got: Arc<Mutex<Vec<Value>>> = Arc::default();
    let sink = Arc::clone(&got);
    let app = axum::Router::new().route(
        "/v1/traces",
        post(
            move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let sink = Arc::clone(&sink);
                async move {
                    assert_eq!(headers["content-type"], "application/json");
                    let export: Value = serde_json::from_slice(&body).expect("OTLP JSON");
                    sink.lock().unwrap().push(export);
                    axum::Json(json!({}))
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), got)
}

/// Every span of every export, with its resource's attributes.
fn spans(exports: &[Value]) -> Vec<(Value, Value)> {
    let mut out = Vec::new();
    for export in exports {
        for rs in export["resourceSpans"].as_array().unwrap() {
            for ss in rs["scopeSpans"].as_array().unwrap() {
                for span in ss["spans"].as_array().unwrap() {
                    out.push((rs["resource"].clone(), span.clone()));
                }
            }
        }
    }
    out
}

/// An attribute's value (`{"stringValue": ..}`, `{"intValue": ..}`) as plain JSON.
fn attr(span: &Value, key: &str) -> Value {
    let Some(kv) = span["attributes"]
        .as_array()
        .and_then(|a| a.iter().find(|kv| kv["key"] == key))
    else {
        return Value::Null;
    };
    let v = &kv["value"];
    for k in ["stringValue", "intValue", "boolValue", "doubleValue"] {
        if let Some(x) = v.get(k) {
            return x.clone();
        }
    }
    v.clone()
}

/// An integer attribute (OTLP JSON writes int64 as a string or a number).
fn int_attr(span: &Value, key: &str) -> Option<i64> {
    let kv = span["attributes"]
        .as_array()?
        .iter()
        .find(|kv| kv["key"] == key)?;
    let v = kv["value"].get("intValue")?;
    v.as_i64().or_else(|| v.as_str()?.parse().ok())
}

fn named<'a>(spans: &'a [(Value, Value)], name: &str) -> Vec<&'a Value> {
    spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s["name"] == name)
        .collect()
}

/// An OTLP status code is 2 (or "STATUS_CODE_ERROR") for an error.
fn is_error(span: &Value) -> bool {
    let code = &span["status"]["code"];
    code == 2 || code == "STATUS_CODE_ERROR"
}

#[tokio::test]
async fn runs_export_linked_spans_without_message_text() {
    let up = FakeOpenAi::start(vec![
        Reply::Sse(tool_call_turn(
            "call_w1",
            "get_weather",
            r#"{"city":"Paris"}"#,
        )),
        Reply::Sse(text_chunks("It is sunny in Paris.")),
        Reply::Status(400, r#"{"error":{"message":"bad request"}}"#.into()),
    ])
    .await;
    let (endpoint, exports) = collector().await;
    let secret = "sk-test-OTEL-SECRET-0123456789";
    let path = up.config_file("otel", "AGUI_TEST_OTEL_KEY");
    let mut gw = GatewayProcess::spawn(
        &path,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("AGUI_TEST_OTEL_KEY", secret),
        ],
        false,
    )
    .await;

    // The caller's trace: the gateway's spans join it.
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller_span = "00f067aa0ba902b7";
    let client = reqwest::Client::new();
    let ok = run_input(
        "t-otel",
        json!([{"id": "u1", "role": "user", "content": "my private question"}]),
    );
    let resp = client
        .post(gw.url("/agents/a/agui"))
        .header("traceparent", format!("00-{trace_id}-{caller_span}-01"))
        .json(&ok)
        .send()
        .await
        .unwrap();
    let events = read_events(resp, false).await;
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED");
    // A run the model refuses: its spans say so.
    let bad = run_input(
        "t-otel-2",
        json!([{"id": "u1", "role": "user", "content": "another question"}]),
    );
    let resp = client
        .post(gw.url("/agents/a/agui"))
        .json(&bad)
        .send()
        .await
        .unwrap();
    let events = read_events(resp, false).await;
    assert_eq!(events.last().unwrap()["type"], "RUN_ERROR");

    // The batch exporter's default delay is 5 s; a graceful stop sends what is queued.
    gw.terminate();
    assert!(gw.wait_exit().await.success());
    let exports = exports.lock().unwrap().clone();
    let raw = serde_json::to_string(&exports).unwrap();
    assert!(
        !raw.contains("my private question"),
        "message text in a span"
    );
    assert!(!raw.contains(secret), "the API key in a span");
    let all = spans(&exports);
    let (resource, _) = &all[0];
    assert_eq!(attr(resource, "service.name"), "agui-gateway");

    let servers = named(&all, "POST /agents/{id}/agui");
    let server = servers
        .iter()
        .find(|s| s["traceId"] == trace_id)
        .expect("the first request's server span, in the caller's trace");
    assert_eq!(server["parentSpanId"], caller_span);
    assert_eq!(int_attr(server, "http.response.status_code"), Some(200));
    assert!(
        named(&all, "GET /healthz").is_empty(),
        "health probes are not traced"
    );

    let runs = named(&all, "invoke_agent a");
    let run = runs
        .iter()
        .find(|s| attr(s, "run_id") == ok["runId"])
        .expect("the first run's span");
    assert_eq!(run["traceId"], trace_id);
    assert_eq!(run["parentSpanId"], server["spanId"]);
    assert_eq!(attr(run, "gen_ai.agent.id"), "a");
    assert_eq!(attr(run, "gen_ai.conversation.id"), "t-otel");
    assert!(!is_error(run));

    let chats: Vec<_> = named(&all, "chat gpt-test")
        .into_iter()
        .filter(|s| s["parentSpanId"] == run["spanId"])
        .collect();
    assert_eq!(chats.len(), 2, "two model calls in the first run");
    for chat in &chats {
        assert_eq!(chat["traceId"], trace_id);
        assert_eq!(attr(chat, "gen_ai.request.model"), "gpt-test");
        assert_eq!(attr(chat, "gen_ai.operation.name"), "chat");
        assert!(!is_error(chat));
    }
    assert!(
        chats
            .iter()
            .any(|c| int_attr(c, "gen_ai.usage.output_tokens").is_some_and(|n| n > 0)),
        "no model call recorded its usage: {chats:#?}"
    );

    let tools = named(&all, "execute_tool get_weather");
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0]["parentSpanId"], run["spanId"]);
    assert_eq!(attr(tools[0], "gen_ai.tool.call.id"), "call_w1");

    // The model and the tool service were called inside those spans, and told so.
    let seen = up.upstream.traceparents.lock().unwrap().clone();
    let parent_of = |endpoint: &str| -> std::collections::BTreeSet<String> {
        seen.iter()
            .filter(|(e, tp)| *e == endpoint && tp.contains(trace_id))
            .map(|(_, tp)| tp.split('-').nth(2).unwrap().to_string())
            .collect()
    };
    let chat_ids: std::collections::BTreeSet<String> = chats
        .iter()
        .map(|c| c["spanId"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(parent_of("chat"), chat_ids, "{seen:?}");
    assert_eq!(
        parent_of("weather"),
        [tools[0]["spanId"].as_str().unwrap().to_string()].into(),
        "{seen:?}"
    );

    // The refused run: its own trace (no traceparent), marked failed at run and model call.
    let failed = runs
        .iter()
        .find(|s| attr(s, "run_id") == bad["runId"])
        .expect("the second run's span");
    assert_ne!(failed["traceId"], trace_id);
    assert!(is_error(failed), "{failed:#}");
    assert_eq!(attr(failed, "error.type"), "UPSTREAM_BAD_REQUEST");
    let failed_chat = named(&all, "chat gpt-test")
        .into_iter()
        .find(|s| s["parentSpanId"] == failed["spanId"])
        .expect("the second run's model call");
    assert!(is_error(failed_chat));
}
