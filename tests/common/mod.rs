//! Test support: the gateway on `127.0.0.1:0`, a fake OpenAI-compatible upstream speaking real
//! SSE over HTTP, and an SSE reader that checks every stream with the gateway's own verifier.
#![allow(dead_code)]

pub mod bedrock_fake;

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agui_gateway::protocol::events::Envelope;
use agui_gateway::protocol::verify::Verifier;
use agui_gateway::{AppState, config::Config};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::{Notify, oneshot};

/// A fresh directory under the system temp dir.
pub fn temp_dir(prefix: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "agui-test-{prefix}-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The `[outbound]` table that lets registered connectors, models and tools reach the fake
/// upstreams on 127.0.0.1 (added by [`Gateway::start`] to configs without an `[outbound]`).
pub const TRUST_LOOPBACK: &str = "[outbound]\nallowed_cidrs = [\"127.0.0.0/8\"]\n";

/// A running gateway.
pub struct Gateway {
    pub addr: SocketAddr,
    pub state: AppState,
    _stop: oneshot::Sender<()>,
}

impl Gateway {
    pub async fn start(config_toml: &str) -> Gateway {
        // Logs show up for failing tests only (the test writer is captured).
        let _ = tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| "warn".into()),
            )
            .with_test_writer()
            .try_init();
        // Fake upstreams listen on 127.0.0.1, which the outbound URL policy refuses to what is
        // registered through the API unless trusted: suites that register them say so here.
        let config_toml = &if config_toml.contains("[outbound]") {
            config_toml.to_string()
        } else {
            format!("{config_toml}\n{TRUST_LOOPBACK}")
        };
        let mut config = Config::parse(config_toml, "test.toml", None).expect("test config");
        if !config_toml.contains("data_dir") {
            config.data_dir = temp_dir("gw");
        }
        Gateway::from_config(config).await
    }

    /// Starts a gateway on an already resolved config.
    pub async fn from_config(config: Config) -> Gateway {
        let state = AppState::from_config(&config).await.expect("state");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        let s = state.clone();
        tokio::spawn(async move {
            agui_gateway::serve(listener, s, async {
                let _ = rx.await;
            })
            .await
            .unwrap();
        });
        Gateway {
            addr,
            state,
            _stop: tx,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// The text of a GET of `path` (e.g. `/metrics`).
    pub async fn get_text(&self, path: &str) -> String {
        reqwest::get(self.url(path))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// POSTs a run and reads the whole event stream, verifying it.
    pub async fn run(&self, agent: &str, body: &Value) -> Vec<Value> {
        let resp = self.post(agent, body).await;
        assert_eq!(resp.status(), 200, "run refused: {:?}", resp.text().await);
        read_events(resp, body.get("protocolVersion").is_some()).await
    }

    pub async fn post(&self, agent: &str, body: &Value) -> reqwest::Response {
        reqwest::Client::new()
            .post(self.url(&format!("/agents/{agent}/agui")))
            .header("accept", "text/event-stream")
            .json(body)
            .send()
            .await
            .unwrap()
    }
}

/// The gateway binary serving `config` on a free loopback port with extra environment
/// variables; killed (and reaped) when dropped.
pub struct GatewayProcess {
    child: std::process::Child,
    pub base: String,
}

impl GatewayProcess {
    /// Starts it and waits for `/healthz`; `capture` keeps stdout (the logs) for
    /// [`GatewayProcess::kill_and_read_stdout`].
    pub async fn spawn(config: &std::path::Path, env: &[(&str, &str)], capture: bool) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_agui-gateway"))
            .args(["serve", "--config"])
            .arg(config)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .envs(env.iter().copied())
            .stdout(if capture {
                std::process::Stdio::piped()
            } else {
                std::process::Stdio::null()
            })
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Owned by the guard before anything can fail, so the process is always reaped.
        let process = GatewayProcess {
            child,
            base: format!("http://127.0.0.1:{port}"),
        };
        for _ in 0..200 {
            if reqwest::get(process.url("/healthz")).await.is_ok() {
                return process;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the gateway did not start");
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// SIGTERM: the gateway shuts down gracefully (and flushes what it exports).
    pub fn terminate(&self) {
        let pid = libc::pid_t::try_from(self.child.id()).unwrap();
        // SAFETY: signalling a child process this guard owns and has not reaped.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    }

    /// Waits (up to 20 s) for the process to exit on its own and returns its status.
    pub async fn wait_exit(&mut self) -> std::process::ExitStatus {
        for _ in 0..400 {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the gateway did not exit");
    }

    /// SIGKILL, then everything the gateway wrote to stdout.
    pub fn kill_and_read_stdout(mut self) -> String {
        use std::io::Read;
        let _ = self.child.kill();
        let mut out = String::new();
        if let Some(mut stdout) = self.child.stdout.take() {
            stdout.read_to_string(&mut out).unwrap();
        }
        out
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads an SSE response to its end; every event must pass the verifier.
pub async fn read_events(resp: reqwest::Response, v1: bool) -> Vec<Value> {
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    verify_sse(resp.bytes_stream(), v1).await
}

/// Like [`read_events`] for a response whose start (`seen`, e.g. from [`read_until`]) was
/// already read.
pub async fn read_events_after(seen: String, resp: reqwest::Response, v1: bool) -> Vec<Value> {
    let head = futures::stream::iter([Ok(Bytes::from(seen))]);
    verify_sse(head.chain(resp.bytes_stream()), v1).await
}

async fn verify_sse(
    bytes: impl futures::Stream<Item = reqwest::Result<Bytes>> + Unpin,
    v1: bool,
) -> Vec<Value> {
    let mut verifier = Verifier::new(v1);
    let mut out = Vec::new();
    let mut stream = bytes.eventsource();
    while let Some(ev) = stream.next().await {
        let ev = ev.expect("sse");
        let value: Value = serde_json::from_str(&ev.data).expect("event json");
        assert_no_nulls(&value);
        assert!(
            value["timestamp"].is_i64(),
            "timestamp must be an integer: {value}"
        );
        let env: Envelope = serde_json::from_value(value.clone()).expect("known event");
        // The run answering earlier tool calls may name them; the verifier learns them here.
        if let Some(id) = value.get("toolCallId").and_then(Value::as_str)
            && value["type"] == "TOOL_CALL_RESULT"
            && !out
                .iter()
                .any(|e: &Value| e["type"] == "TOOL_CALL_END" && e["toolCallId"] == id)
        {
            verifier.know_tool_calls([id.to_string()]);
        }
        verifier
            .check_as(&env.event, env.subagent.as_deref())
            .unwrap_or_else(|e| panic!("invalid stream: {e}\n{out:#?}"));
        out.push(value);
    }
    assert!(
        verifier.is_closed(),
        "stream ended without RUN_FINISHED/RUN_ERROR: {out:#?}"
    );
    out
}

fn assert_no_nulls(v: &Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if k == "value" || k == "snapshot" {
                    continue;
                }
                assert!(!x.is_null(), "null field {k} in {v}");
                assert_no_nulls(x);
            }
        }
        Value::Array(a) => a.iter().for_each(assert_no_nulls),
        _ => {}
    }
}

/// Waits until no run is active or admitted on `gw` (cancelled runs wind down in the
/// background); panics naming what is left after 10 s.
pub async fn wait_no_runs(gw: &Gateway) {
    for _ in 0..500 {
        if gw.state.runs.active_count() == 0 && gw.state.limiter.active() == 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!(
        "runs left behind: {} active, {} admitted",
        gw.state.runs.active_count(),
        gw.state.limiter.active()
    );
}

/// The PostgreSQL database of the suite (`AGUI_TEST_PG`, which CI sets). Unset outside CI,
/// `what` is said to be untested and `None` comes back; unset in CI is a failure.
pub fn test_pg(what: &str) -> Option<String> {
    // Set but empty counts as unset.
    match std::env::var("AGUI_TEST_PG")
        .ok()
        .filter(|url| !url.is_empty())
    {
        Some(url) => Some(url),
        None if std::env::var_os("CI").is_some() => {
            panic!("CI must set AGUI_TEST_PG: PostgreSQL is part of the suite")
        }
        None => {
            eprintln!("\n*** AGUI_TEST_PG is unset: {what} is NOT tested in this run ***\n");
            None
        }
    }
}

/// Reads raw SSE text until `needle` has been seen; returns what was read.
pub async fn read_until(resp: &mut reqwest::Response, needle: &str) -> String {
    let mut seen = String::new();
    while !seen.contains(needle) {
        let chunk = resp.chunk().await.unwrap().expect("stream ended early");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    seen
}

/// The event types in order, with a run of content or argument events of one message or call
/// counted once: the gateway joins deltas that are already waiting, so how many events a
/// burst of upstream chunks becomes depends on timing (`text` and `args_of` check contents).
/// Sends `method url` with an optional JSON body; answers the status and the body as JSON (a
/// JSON string when it is not JSON).
pub async fn send_json(method: &str, url: String, body: Option<&Value>) -> (u16, Value) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("an HTTP method");
    let mut req = reqwest::Client::new().request(method, url);
    if let Some(b) = body {
        req = req.json(b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// `GET url`, which must answer 200; its JSON body.
pub async fn get_ok(url: String) -> Value {
    let (status, body) = send_json("GET", url.clone(), None).await;
    assert_eq!(status, 200, "GET {url}: {body}");
    body
}

/// The output named `name` of an ml-commons answer (`inference_results[0].output[]`).
pub fn ml_output<'a>(resp: &'a Value, name: &str) -> &'a Value {
    resp["inference_results"][0]["output"]
        .as_array()
        .unwrap_or_else(|| panic!("no output in {resp}"))
        .iter()
        .find(|o| o["name"] == name)
        .unwrap_or_else(|| panic!("no output {name:?} in {resp}"))
}

pub fn types(events: &[Value]) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    let mut last_target: Option<&Value> = None;
    for e in events {
        let t = e["type"].as_str().unwrap();
        let target = match t {
            "TEXT_MESSAGE_CONTENT" | "REASONING_MESSAGE_CONTENT" => Some(&e["messageId"]),
            "TOOL_CALL_ARGS" => Some(&e["toolCallId"]),
            _ => None,
        };
        if target.is_some() && out.last() == Some(&t) && last_target == target {
            continue;
        }
        last_target = target;
        out.push(t);
    }
    out
}

pub fn of_type<'a>(events: &'a [Value], t: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == t).collect()
}

pub fn text(events: &[Value]) -> String {
    of_type(events, "TEXT_MESSAGE_CONTENT")
        .iter()
        .map(|e| e["delta"].as_str().unwrap())
        .collect()
}

pub fn args_of(events: &[Value], call_id: &str) -> String {
    events
        .iter()
        .filter(|e| e["type"] == "TOOL_CALL_ARGS" && e["toolCallId"] == call_id)
        .map(|e| e["delta"].as_str().unwrap())
        .collect()
}

/// A run on `thread` whose one message is a user saying "hi".
pub fn user_says_hi(thread: &str) -> Value {
    run_input(
        thread,
        serde_json::json!([{"id": "u1", "role": "user", "content": "hi"}]),
    )
}

pub fn run_input(thread: &str, messages: Value) -> Value {
    json!({"threadId": thread, "runId": uuid::Uuid::new_v4().to_string(), "messages": messages})
}

// ------------------------------------------------------------------ fake OpenAI upstream

/// One scripted answer of the fake upstream.
#[derive(Clone)]
pub enum Reply {
    /// A complete stream: these `data:` payloads, then `[DONE]`.
    Sse(Vec<Value>),
    /// These payloads, then the connection is cut.
    Cut(Vec<Value>),
    /// These payloads, then silence until the client goes away.
    Stall(Vec<Value>),
    /// These payloads, then the body ends cleanly without `[DONE]`.
    Unfinished(Vec<Value>),
    /// A non-200 answer.
    Status(u16, String),
    /// Anthropic-style SSE: each payload as `event: <its type>` + `data:`, no `[DONE]`.
    Named(Vec<Value>),
    /// The first payloads, then a wait until the test opens the gate, then the rest and `[DONE]`.
    Gated(Vec<Value>, Arc<Notify>, Vec<Value>),
}

#[derive(Default)]
pub struct Upstream {
    replies: Mutex<VecDeque<Reply>>,
    /// Bodies of chat requests, in order.
    pub requests: Mutex<Vec<Value>>,
    /// Authorization headers seen.
    pub auth: Mutex<Vec<String>>,
    /// `traceparent` headers seen, with the endpoint (`chat` or `weather`).
    pub traceparents: Mutex<Vec<(&'static str, String)>>,
    /// Notified when a stalled response body is dropped (the gateway hung up).
    pub dropped: Notify,
    /// Weather tool calls received.
    pub tool_calls: Mutex<Vec<Value>>,
    /// Weather calls being answered now, and the most there ever were at once.
    pub tools_in_flight: std::sync::atomic::AtomicUsize,
    pub tools_in_flight_max: std::sync::atomic::AtomicUsize,
}

pub struct FakeOpenAi {
    pub addr: SocketAddr,
    pub upstream: Arc<Upstream>,
}

impl Upstream {
    fn saw_traceparent(&self, endpoint: &'static str, headers: &axum::http::HeaderMap) {
        if let Some(tp) = headers.get("traceparent").and_then(|v| v.to_str().ok()) {
            self.traceparents
                .lock()
                .unwrap()
                .push((endpoint, tp.to_string()));
        }
    }
}

struct DropSignal(Arc<Upstream>);
impl Drop for DropSignal {
    fn drop(&mut self) {
        self.0.dropped.notify_one();
    }
}

fn frame(v: &Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}

async fn chat(
    State(up): State<Arc<Upstream>>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    up.requests.lock().unwrap().push(body);
    up.saw_traceparent("chat", &headers);
    for h in ["authorization", "x-api-key", "anthropic-version"] {
        if let Some(a) = headers.get(h) {
            up.auth
                .lock()
                .unwrap()
                .push(format!("{h}: {}", a.to_str().unwrap_or("")));
        }
    }
    let reply = up
        .replies
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or(Reply::Status(500, "no scripted reply left".into()));
    let sse = |s: futures::stream::BoxStream<'static, Result<Bytes, std::io::Error>>| {
        Response::builder()
            .header("content-type", "text/event-stream")
            .body(Body::from_stream(s))
            .unwrap()
    };
    match reply {
        Reply::Status(code, text) => (StatusCode::from_u16(code).unwrap(), text).into_response(),
        Reply::Named(events) => {
            let frames: Vec<Result<Bytes, std::io::Error>> = events
                .iter()
                .map(|e| {
                    Ok(Bytes::from(format!(
                        "event: {}\ndata: {e}\n\n",
                        e["type"].as_str().unwrap_or("")
                    )))
                })
                .collect();
            sse(futures::stream::iter(frames).boxed())
        }
        Reply::Sse(chunks) => {
            let mut frames: Vec<Result<Bytes, std::io::Error>> =
                chunks.iter().map(|c| Ok(frame(c))).collect();
            frames.push(Ok(Bytes::from_static(b"data: [DONE]\n\n")));
            sse(futures::stream::iter(frames).boxed())
        }
        Reply::Unfinished(chunks) => {
            let frames: Vec<Result<Bytes, std::io::Error>> =
                chunks.iter().map(|c| Ok(frame(c))).collect();
            sse(futures::stream::iter(frames).boxed())
        }
        Reply::Cut(chunks) => {
            let frames: Vec<Result<Bytes, std::io::Error>> =
                chunks.iter().map(|c| Ok(frame(c))).collect();
            // Let the frames reach the gateway before the connection is torn down.
            let cut = futures::stream::once(async {
                tokio::time::sleep(Duration::from_millis(200)).await;
                Err(std::io::Error::other("cut"))
            });
            sse(futures::stream::iter(frames).chain(cut).boxed())
        }
        Reply::Gated(first, gate, rest) => {
            let head: Vec<Result<Bytes, std::io::Error>> =
                first.iter().map(|c| Ok(frame(c))).collect();
            let mut tail: Vec<Result<Bytes, std::io::Error>> =
                rest.iter().map(|c| Ok(frame(c))).collect();
            tail.push(Ok(Bytes::from_static(b"data: [DONE]\n\n")));
            let opened = futures::stream::once(async move {
                gate.notified().await;
                futures::stream::iter(tail)
            })
            .flatten();
            sse(futures::stream::iter(head).chain(opened).boxed())
        }
        Reply::Stall(chunks) => {
            let guard = DropSignal(Arc::clone(&up));
            let frames: Vec<Result<Bytes, std::io::Error>> =
                chunks.iter().map(|c| Ok(frame(c))).collect();
            let s = futures::stream::iter(frames).chain(futures::stream::once(async move {
                let _g = guard;
                std::future::pending::<()>().await;
                Ok(Bytes::new())
            }));
            sse(s.boxed())
        }
    }
}

async fn weather(
    State(up): State<Arc<Upstream>>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    up.saw_traceparent("weather", &headers);
    let args: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    up.tool_calls.lock().unwrap().push(args.clone());
    // Cities named "Slow..." take a while to answer, so concurrent calls overlap.
    if args["city"].as_str().is_some_and(|c| c.starts_with("Slow")) {
        use std::sync::atomic::Ordering::SeqCst;
        let now = up.tools_in_flight.fetch_add(1, SeqCst) + 1;
        up.tools_in_flight_max.fetch_max(now, SeqCst);
        tokio::time::sleep(Duration::from_millis(300)).await;
        up.tools_in_flight.fetch_sub(1, SeqCst);
    }
    match args["city"].as_str() {
        Some("Atlantis") => (StatusCode::NOT_FOUND, "unknown city Atlantis").into_response(),
        Some(city) => {
            axum::Json(json!({"city": city, "temperature_c": 21, "sky": "sunny"})).into_response()
        }
        None => (StatusCode::BAD_REQUEST, "city required").into_response(),
    }
}

/// Serves small media files for URL-source tests.
async fn media_file(axum::extract::Path(name): axum::extract::Path<String>) -> Response {
    match name.as_str() {
        "pixel.png" => (
            [("content-type", "image/png")],
            vec![0x89u8, b'P', b'N', b'G', 13, 10, 26, 10],
        )
            .into_response(),
        "notes.pdf" => (
            [("content-type", "application/pdf")],
            b"%PDF-1.4 tiny".to_vec(),
        )
            .into_response(),
        "big.bin" => ([("content-type", "image/png")], vec![0u8; 2 * 1024 * 1024]).into_response(),
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn slow(body: Bytes) -> Result<Bytes, Infallible> {
    tokio::time::sleep(Duration::from_millis(300)).await;
    Ok(body)
}

impl FakeOpenAi {
    pub async fn start(replies: Vec<Reply>) -> FakeOpenAi {
        let upstream = Arc::new(Upstream::default());
        upstream.replies.lock().unwrap().extend(replies);
        let app = axum::Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/v1/messages", post(chat))
            .route("/media/{name}", axum::routing::get(media_file))
            .route("/weather", post(weather))
            .route("/slow", post(slow))
            .with_state(Arc::clone(&upstream));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeOpenAi { addr, upstream }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn requests(&self) -> Vec<Value> {
        self.upstream.requests.lock().unwrap().clone()
    }

    /// A gateway config with one agent `a` on this upstream plus the given extra TOML.
    /// [`FakeOpenAi::config`] in a file of a fresh data directory, for the gateway binary, with
    /// the model's API key read from the environment variable `key_env`.
    pub fn config_file(&self, prefix: &str, key_env: &str) -> std::path::PathBuf {
        let dir = temp_dir(prefix);
        let toml = self
            .config("")
            .replace(
                "retry_initial_backoff_ms = 5\n",
                &format!("retry_initial_backoff_ms = 5\napi_key_env = \"{key_env}\"\n"),
            )
            .replace(
                "[server]\n",
                &format!("data_dir = \"{}\"\n[server]\n", dir.display()),
            );
        let path = dir.join("gw.toml");
        std::fs::write(&path, toml).unwrap();
        path
    }

    pub fn config(&self, extra_agent_toml: &str) -> String {
        format!(
            r#"
[server]
keepalive_secs = 1
[[agents]]
id = "a"
system_prompt = "You are a test agent."
max_iterations = 4
{extra_agent_toml}
[agents.model]
provider = "openai"
model_id = "gpt-test"
base_url = "{base}"
retry_initial_backoff_ms = 5
[[agents.tools]]
type = "http"
name = "get_weather"
description = "Current weather for a city"
url = "http://{addr}/weather"
parameters = {{ type = "object", properties = {{ city = {{ type = "string" }} }}, required = ["city"] }}
"#,
            base = self.base_url(),
            addr = self.addr
        )
    }
}

// ------------------------------------------------------------------ chunk builders

pub fn text_chunks(text: &str) -> Vec<Value> {
    let mut out: Vec<Value> = text
        .split_inclusive(' ')
        .map(|piece| json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": null}]}))
        .collect();
    out.push(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}));
    out.push(json!({"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}}));
    out
}

pub fn call_start(index: u32, id: &str, name: &str) -> Value {
    json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}}]})
}

pub fn call_args(index: u32, fragment: &str) -> Value {
    json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}}]})
}

pub fn finish(reason: &str) -> Value {
    json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
}

/// A turn with one tool call whose arguments arrive in two fragments.
pub fn tool_call_turn(id: &str, name: &str, args: &str) -> Vec<Value> {
    let mid = args.len() / 2;
    vec![
        call_start(0, id, name),
        call_args(0, &args[..mid]),
        call_args(0, &args[mid..]),
        finish("tool_calls"),
    ]
}
