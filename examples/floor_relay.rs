//! The floor of the paced bench: the least an AG-UI relay built on the gateway's own libraries
//! can do per token. Per request it opens the upstream chat completion (reqwest), reads its SSE
//! frames (eventsource-stream), parses each one's delta (serde_json) and writes one
//! `TEXT_MESSAGE_CONTENT` frame (axum on hyper), polled straight from the response body: no
//! run task, no verifier, no transcript, no event log, no store. What the gateway spends beyond
//! this per token is its own.
//!
//! It takes the gateway's command line, so the bench can measure it in the gateway's place:
//! `cargo build --release --example floor_relay`, then
//! `agui-gateway bench --only paced --gateway target/release/examples/floor_relay`; and
//! `scripts/compare.sh` prints it as a row of its own.

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
struct Chunk {
    choices: Vec<Choice>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    delta: Delta,
}

#[derive(Deserialize, Default)]
struct Delta {
    content: Option<String>,
}

#[derive(Clone)]
struct Relay {
    http: reqwest::Client,
    upstream: String,
}

fn frame(event: serde_json::Value) -> Bytes {
    Bytes::from(format!("data: {event}\n\n"))
}

async fn agui(State(relay): State<Relay>, input: Bytes) -> Response {
    let input: serde_json::Value = serde_json::from_slice(&input).unwrap_or_default();
    let thread = input["threadId"].clone();
    let run = input["runId"].clone();
    let body =
        json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "go"}]});
    let upstream = match relay.http.post(&relay.upstream).json(&body).send().await {
        Ok(r) => r,
        Err(e) => return (axum::http::StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let head = futures::stream::iter([
        frame(json!({"type": "RUN_STARTED", "threadId": thread, "runId": run})),
        frame(json!({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"})),
    ]);
    let deltas = upstream
        .bytes_stream()
        .eventsource()
        .filter_map(|ev| async move {
            let ev = ev.ok()?;
            let chunk: Chunk = serde_json::from_str(&ev.data).ok()?;
            let delta = chunk.choices.into_iter().next()?.delta.content?;
            Some(frame(
                json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": delta}),
            ))
        });
    let tail = futures::stream::iter([
        frame(json!({"type": "TEXT_MESSAGE_END", "messageId": "m"})),
        frame(json!({"type": "RUN_FINISHED", "threadId": thread, "runId": run})),
    ]);
    let stream = head.chain(deltas).chain(tail).map(Ok::<_, Infallible>);
    let mut resp = Body::from_stream(stream).into_response();
    resp.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("text/event-stream"),
    );
    resp
}

/// Where to listen and the upstream's base URL: from the gateway's config (`serve --config
/// FILE`, as `bench --gateway` starts it) or from `PORT` and `AGUI_BENCH_UPSTREAM` (as `bench
/// compare` starts a server).
fn settings() -> anyhow::Result<(String, String)> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(config) = args
        .iter()
        .position(|a| a == "--config")
        .and_then(|i| args.get(i + 1))
    {
        let config: toml::Table = toml::from_str(&std::fs::read_to_string(config)?)?;
        let listen = config["listen"].as_str().unwrap_or("127.0.0.1:8080");
        let base = config["agents"][0]["model"]["base_url"]
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("no agents[0].model.base_url"))?;
        return Ok((listen.to_string(), base.to_string()));
    }
    match (std::env::var("PORT"), std::env::var("AGUI_BENCH_UPSTREAM")) {
        (Ok(port), Ok(base)) => Ok((format!("127.0.0.1:{port}"), base)),
        _ => anyhow::bail!(
            "usage: floor_relay serve --config <gateway toml>, or PORT and AGUI_BENCH_UPSTREAM set"
        ),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let (listen, base) = settings()?;
    let relay = Relay {
        http: reqwest::Client::new(),
        upstream: format!("{}/chat/completions", base.trim_end_matches('/')),
    };
    let app = axum::Router::new()
        .route("/healthz", axum::routing::get(|| async { "{}" }))
        .route("/agents/{id}/agui", axum::routing::post(agui))
        .route("/", axum::routing::post(agui))
        .with_state(relay);
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    axum::serve(listener, app).await?;
    Ok(())
}
