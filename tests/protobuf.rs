/// A client asking for `application/vnd.ag-ui.event+proto` gets the AG-UI protobuf encoding
/// (length-prefixed `ag_ui.Event` messages, no keep-alive bytes between them, even over quiet
/// stretches) carrying the same events as the SSE stream, on a run and on its replay; SSE stays
/// the answer to every other `Accept` (pre-1.0 clients included), and only a header refusing
/// both encodings gets a 406.
mod common;

use agui_gateway::protocol::proto::wire;
use agui_gateway::protocol::proto::wire::event::Event as Arm;
use common::*;
use prost::Message as _;
use serde_json::{Value, json};

const PROTO: &str = "application/vnd.ag-ui.event+proto";

fn config(dir: &std::path::Path, delay_ms: u64) -> String {
    let fixture = dir.join("slow.json");
    std::fs::write(
        &fixture,
        format!(r#"{{"chunk_chars": 16, "delay_ms": {delay_ms}, "default": {{"text": "One two three four five six seven eight nine ten."}}}}"#),
    )
    .unwrap();
    format!(
        r#"
[server]
keepalive_secs = 1
[[agents]]
id = "s"
[agents.model]
provider = "scripted"
fixture = "{}"
"#,
        fixture.display()
    )
}

fn input(thread: &str, run: &str) -> Value {
    json!({"threadId": thread, "runId": run, "protocolVersion": "1.0",
           "messages": [{"id": "u", "role": "user", "content": "go"}]})
}

async fn post(gw: &Gateway, path: &str, accept: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(gw.url(path))
        .header("accept", accept)
        .json(body)
        .send()
        .await
        .unwrap()
}

/// Splits a body into its frames and decodes each; every byte must belong to a frame.
fn frames(body: &[u8]) -> Vec<wire::Event> {
    let mut out = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        assert!(
            rest.len() >= 4,
            "{} stray bytes after the frames",
            rest.len()
        );
        let len = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
        assert!(
            len <= 10 * 1024 * 1024 && rest.len() >= 4 + len,
            "a cut frame"
        );
        out.push(wire::Event::decode(&rest[4..4 + len]).expect("an ag_ui.Event"));
        rest = &rest[4 + len..];
    }
    out
}

/// The event's type name (checked against its arm) and, for text deltas, the delta.
fn summary(e: &wire::Event) -> (String, Option<String>) {
    let (base, delta) = match e.event.as_ref().expect("one arm set") {
        Arm::RunStarted(x) => (&x.base_event, None),
        Arm::RunFinished(x) => (&x.base_event, None),
        Arm::TextMessageStart(x) => (&x.base_event, None),
        Arm::TextMessageContent(x) => (&x.base_event, Some(x.delta.clone())),
        Arm::TextMessageEnd(x) => (&x.base_event, None),
        Arm::StepStarted(x) => (&x.base_event, None),
        Arm::StepFinished(x) => (&x.base_event, None),
        Arm::Custom(x) => (&x.base_event, None),
        other => panic!("unexpected event {other:?}"),
    };
    let base = base.as_ref().expect("base_event");
    assert!(base.timestamp.is_some_and(|t| t > 0), "timestamped");
    let name = wire::EventType::try_from(base.r#type)
        .expect("a known type")
        .as_str_name()
        .to_string();
    (name, delta)
}

/// Consecutive text deltas joined (how the text was split is a matter of timing).
fn joined(events: impl IntoIterator<Item = (String, Option<String>)>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (t, d) in events {
        match out.last_mut() {
            Some((lt, ld)) if *lt == t && t == "TEXT_MESSAGE_CONTENT" => {
                ld.push_str(&d.unwrap_or_default())
            }
            _ => out.push((t, d.unwrap_or_default())),
        }
    }
    out
}

#[tokio::test]
async fn a_protobuf_run_carries_the_sse_events_and_replays_as_protobuf() {
    let dir = temp_dir("proto");
    // Quiet stretches longer than the keep-alive interval: SSE would send comments there.
    let gw = Gateway::start(&config(&dir, 1200)).await;

    let resp = post(&gw, "/agents/s/agui", PROTO, &input("pb-1", "run-pb-1")).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], PROTO);
    let body = resp.bytes().await.unwrap();
    let proto = frames(&body);
    let sse = read_events(
        post(
            &gw,
            "/agents/s/agui",
            "text/event-stream",
            &input("pb-2", "run-pb-2"),
        )
        .await,
        true,
    )
    .await;

    let from_proto = joined(proto.iter().map(summary));
    let from_sse = joined(sse.iter().map(|e| {
        (
            e["type"].as_str().unwrap().to_string(),
            e["delta"].as_str().map(str::to_string),
        )
    }));
    assert_eq!(from_proto, from_sse);
    let Some(Arm::RunStarted(started)) = &proto[0].event else {
        panic!("starts with RUN_STARTED");
    };
    assert_eq!(
        (started.thread_id.as_str(), started.run_id.as_str()),
        ("pb-1", "run-pb-1")
    );
    assert!(
        from_proto
            .iter()
            .any(|(t, d)| t == "TEXT_MESSAGE_CONTENT" && d.contains("nine ten."))
    );

    // The replay after event 3, asked for in protobuf, is the rest of the same stream.
    let replay = reqwest::Client::new()
        .get(gw.url("/agents/s/agui/runs/run-pb-1/events"))
        .header("last-event-id", "3")
        .header("accept", PROTO)
        .send()
        .await
        .unwrap();
    assert_eq!(replay.status(), 200);
    assert_eq!(replay.headers()["content-type"], PROTO);
    let replayed = frames(&replay.bytes().await.unwrap());
    assert_eq!(replayed, proto[3..].to_vec());
    // And in SSE by default.
    let replay = reqwest::Client::new()
        .get(gw.url("/agents/s/agui/runs/run-pb-1/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(replay.headers()["content-type"], "text/event-stream");
}

#[tokio::test]
async fn the_agent_api_stream_answers_protobuf_too() {
    let dir = temp_dir("proto-ml");
    let gw = Gateway::start(&config(&dir, 0)).await;
    let resp = post(
        &gw,
        "/_plugins/_ml/agents/s/_execute/stream",
        &format!("text/event-stream;q=0.5, {PROTO}"),
        &input("pb-ml", "run-pb-ml"),
    )
    .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], PROTO);
    let events = frames(&resp.bytes().await.unwrap());
    let types: Vec<String> = events.iter().map(|e| summary(e).0).collect();
    assert_eq!(types.first().map(String::as_str), Some("RUN_STARTED"));
    assert_eq!(types.last().map(String::as_str), Some("RUN_FINISHED"));
}

#[tokio::test]
async fn other_accept_values_get_sse_and_only_refusing_both_gets_406() {
    let dir = temp_dir("proto-accept");
    let gw = Gateway::start(&config(&dir, 0)).await;
    for (i, accept) in [
        "application/json",
        "*/*",
        "nonsense",
        "text/event-stream, application/vnd.ag-ui.event+proto;q=0.1",
    ]
    .into_iter()
    .enumerate()
    {
        let resp = post(
            &gw,
            "/agents/s/agui",
            accept,
            &input(&format!("a{i}"), &format!("ra{i}")),
        )
        .await;
        assert_eq!(resp.status(), 200, "{accept}");
        read_events(resp, true).await;
    }
    // A client before 1.0 (no protocolVersion) cannot read every 1.0 event in protobuf.
    let old = json!({"threadId": "old", "runId": "r-old",
                     "messages": [{"id": "u", "role": "user", "content": "go"}]});
    let resp = post(&gw, "/agents/s/agui", PROTO, &old).await;
    read_events(resp, false).await;

    for path in ["/agents/s/agui", "/_plugins/_ml/agents/s/_execute/stream"] {
        let resp = post(&gw, path, "text/event-stream;q=0", &input("n406", "r406")).await;
        assert_eq!(resp.status(), 406, "{path}");
        let body: Value = resp.json().await.unwrap();
        assert!(body["error"]["type"] == "not_acceptable", "{body}");
    }
    let resp = reqwest::Client::new()
        .get(gw.url("/agents/s/agui/runs/ra0/events"))
        .header("accept", "*/*;q=0")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 406);
    // Refused before anything ran: the thread is free.
    wait_no_runs(&gw).await;
}

/// A quiet stretch longer than `write_timeout_secs` moves the run's loop off the response
/// body to a task of its own; the protobuf body, which has no keep-alive timer to wake it,
/// must still be woken for the rest of the run.
#[tokio::test]
async fn a_protobuf_stream_outlives_a_quiet_stretch_longer_than_the_write_timeout() {
    let dir = temp_dir("pb-quiet");
    let toml = config(&dir, 2200).replace("[server]\n", "[server]\nwrite_timeout_secs = 1\n");
    let gw = Gateway::start(&toml).await;
    let resp = post(&gw, "/agents/s/agui", PROTO, &input("t-quiet", "r-quiet")).await;
    assert_eq!(resp.headers()["content-type"], PROTO);
    let body = tokio::time::timeout(std::time::Duration::from_secs(40), resp.bytes())
        .await
        .expect("the stream never ended")
        .unwrap();
    let events = frames(&body);
    assert!(
        matches!(
            events.last().and_then(|e| e.event.as_ref()),
            Some(Arm::RunFinished(_))
        ),
        "{events:?}"
    );
}
