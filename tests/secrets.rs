/// A key that reaches an upstream never comes back out: for every provider and every way a key
/// is given (config `api_key_env`, the agent API's `model` block, a connector header with
/// `${credential.*}`, an MCP bearer token), an upstream that quotes the key it received in a
/// 401 or in a mid-stream error leaves no trace of it in the HTTP answers, the SSE stream, the
/// async task, the replayed run events, the store files on disk or the logs.
mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use common::bedrock_fake::{BedrockReply, FakeBedrock, text_events};
use common::*;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Provider {
    OpenAi,
    Anthropic,
    Bedrock,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Way {
    /// `api_key_env` in the config file.
    Config,
    /// The agent API's unified `model` block.
    ModelBlock,
    /// A registered model whose connector puts `${credential.*}` in a header.
    ConnectorHeader,
    /// An MCP server's `bearer_token_env` (the model is a plain OpenAI-compatible one).
    McpToken,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Echo {
    /// The upstream refuses with 401 and quotes the key.
    Unauthorized,
    /// The upstream starts answering, then fails quoting the key (for MCP: the tool's result
    /// quotes it).
    MidStream,
}

// ------------------------------------------------------------------ upstreams that echo

/// The key a request carried, as an upstream sees it.
fn key_of(headers: &HeaderMap) -> String {
    let h = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    h("x-api-key")
        .or_else(|| h("authorization").map(|a| a.trim_start_matches("Bearer ").to_string()))
        .unwrap_or_default()
}

fn sse(frames: Vec<String>) -> Response {
    let chunks: Vec<Result<Bytes, std::io::Error>> =
        frames.into_iter().map(|f| Ok(Bytes::from(f))).collect();
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(futures::stream::iter(chunks)))
        .unwrap()
}

async fn openai_echo(
    axum::extract::State(mode): axum::extract::State<Echo>,
    headers: HeaderMap,
) -> Response {
    let key = key_of(&headers);
    match mode {
        Echo::Unauthorized => (
            StatusCode::UNAUTHORIZED,
            axum::Json(json!({"error": {
                "message": format!("Incorrect API key provided: {key}. You can find your API key at https://platform.openai.com/account/api-keys."),
                "type": "invalid_request_error", "code": "invalid_api_key"}})),
        )
            .into_response(),
        Echo::MidStream => sse(vec![
            format!("data: {}\n\n", json!({"choices": [{"index": 0, "delta": {"content": "Hello "}, "finish_reason": null}]})),
            format!("data: {}\n\n", json!({"error": {"message": format!("key {key} was revoked"), "code": "server_error"}})),
        ]),
    }
}

async fn anthropic_echo(
    axum::extract::State(mode): axum::extract::State<Echo>,
    headers: HeaderMap,
) -> Response {
    let key = key_of(&headers);
    let named = |v: Value| format!("event: {}\ndata: {v}\n\n", v["type"].as_str().unwrap());
    match mode {
        Echo::Unauthorized => (
            StatusCode::UNAUTHORIZED,
            axum::Json(
                json!({"type": "error", "error": {"type": "authentication_error",
                "message": format!("invalid x-api-key: {key}")}}),
            ),
        )
            .into_response(),
        Echo::MidStream => sse(vec![
            named(
                json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
                "content": [], "model": "claude-test", "usage": {"input_tokens": 3, "output_tokens": 0}}}),
            ),
            named(
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ),
            named(
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello "}}),
            ),
            named(
                json!({"type": "error", "error": {"type": "overloaded_error", "message": format!("key {key} is over its quota")}}),
            ),
        ]),
    }
}

/// An OpenAI- and Anthropic-compatible upstream quoting whatever key it is sent.
async fn echo_upstream(mode: Echo) -> SocketAddr {
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(openai_echo))
        .route("/v1/messages", axum::routing::post(anthropic_echo))
        .with_state(mode);
    serve(app).await
}

async fn serve(app: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    addr
}

/// Bedrock's fake speaks the binary event stream and replies as scripted: the script quotes
/// the key (a SigV4 secret never travels, so there is nothing to echo but what it knows).
async fn bedrock_upstream(mode: Echo, key: &str) -> FakeBedrock {
    let reply = match mode {
        Echo::Unauthorized => BedrockReply::Error(
            403,
            "UnrecognizedClientException",
            format!("The security token included in the request is invalid: {key}"),
        ),
        Echo::MidStream => BedrockReply::EventsThenException(
            text_events("Hello ")[..2].to_vec(),
            "modelStreamErrorException",
            format!("credential {key} expired"),
        ),
    };
    FakeBedrock::start(vec![reply; 8]).await
}

/// MCP's demo tools, whose results quote the bearer token the call came with.
#[derive(Clone)]
struct EchoToken(agui_gateway::tools::mcp_demo::DemoServer);

impl ServerHandler for EchoToken {
    fn get_info(&self) -> ServerConfig {
        self.0.get_info()
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.0.list_tools(request, context).await
    }

    async fn call_tool(
        &self,
        _request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let parts = context.extensions.get::<axum::http::request::Parts>();
        let key = parts.map(|p| key_of(&p.headers)).unwrap_or_default();
        Ok(CallToolResult::error(vec![ContentBlock::text(format!(
            "token {key} lacks the scope"
        ))])
        .into())
    }
}

/// An MCP server at `/mcp`: refusing every request with a 401 quoting the token, or serving
/// [`EchoToken`].
async fn mcp_upstream(mode: Echo) -> SocketAddr {
    let service: StreamableHttpService<EchoToken, LocalSessionManager> = StreamableHttpService::new(
        || Ok(EchoToken(agui_gateway::tools::mcp_demo::DemoServer::new())),
        Default::default(),
        StreamableHttpServerConfig::default().with_sse_keep_alive(None),
    );
    let app = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| async move {
                if mode == Echo::Unauthorized {
                    let key = key_of(req.headers());
                    return (
                        StatusCode::UNAUTHORIZED,
                        format!("invalid bearer token {key}"),
                    )
                        .into_response();
                }
                next.run(req).await
            },
        ));
    serve(app).await
}

// ------------------------------------------------------------------ the gateway

const KEY_VAR: &str = "AGUI_SECRETS_TEST_KEY";

fn model_toml(provider: Provider, upstream: &str) -> String {
    match provider {
        Provider::OpenAi => format!(
            "provider = \"openai\"\nmodel_id = \"gpt-test\"\nbase_url = \"http://{upstream}/v1\""
        ),
        Provider::Anthropic => format!(
            "provider = \"anthropic/v1/messages\"\nmodel_id = \"claude-test\"\nbase_url = \"http://{upstream}\""
        ),
        Provider::Bedrock => format!(
            "provider = \"bedrock/converse\"\nmodel_id = \"anthropic.claude-test\"\nregion = \"us-east-1\"\nendpoint_url = \"{upstream}\""
        ),
    }
}

/// The unified `model` block of the agent API for `provider`.
fn model_block(provider: Provider, upstream: &str, key: &str) -> Value {
    match provider {
        Provider::OpenAi => {
            json!({"model_id": "gpt-test", "model_provider": "openai/v1/chat/completions",
            "credential": {"openAI_key": key}, "model_parameters": {"base_url": format!("http://{upstream}/v1")}})
        }
        Provider::Anthropic => {
            json!({"model_id": "claude-test", "model_provider": "anthropic/v1/messages",
            "credential": {"anthropic_key": key}, "model_parameters": {"base_url": format!("http://{upstream}")}})
        }
        Provider::Bedrock => {
            json!({"model_id": "anthropic.claude-test", "model_provider": "bedrock/converse",
            "credential": {"access_key": "AKIDSECRETSTEST", "secret_key": key},
            "model_parameters": {"region": "us-east-1", "endpoint_url": upstream}})
        }
    }
}

/// A legacy model registration whose connector sends the key from its credential.
fn connector_model(provider: Provider, upstream: &str, key: &str) -> (Value, &'static str) {
    match provider {
        Provider::OpenAi => (
            json!({"name": "m", "function_name": "remote", "connector": {
                "name": "openai", "protocol": "http", "parameters": {"model": "gpt-test"},
                "credential": {"openAI_key": key},
                "actions": [{"action_type": "predict", "method": "POST",
                    "url": format!("http://{upstream}/v1/chat/completions"),
                    "headers": {"Authorization": "Bearer ${credential.openAI_key}"},
                    "request_body": "{\"model\":\"${parameters.model}\",\"messages\":${parameters.messages}}"}]}}),
            "openai/v1/chat/completions",
        ),
        Provider::Anthropic => (
            json!({"name": "m", "function_name": "remote", "connector": {
                "name": "anthropic", "protocol": "http", "parameters": {"model": "claude-test"},
                "credential": {"anthropic_key": key},
                "actions": [{"action_type": "predict", "method": "POST",
                    "url": format!("http://{upstream}/v1/messages"),
                    "headers": {"x-api-key": "${credential.anthropic_key}", "anthropic-version": "2023-06-01"},
                    "request_body": "{\"model\":\"${parameters.model}\",\"messages\":${parameters.messages}}"}]}}),
            "anthropic/v1/messages",
        ),
        Provider::Bedrock => unreachable!("Bedrock connectors sign with SigV4, not a header"),
    }
}

async fn post(gw: &GatewayProcess, path: &str, body: &Value) -> (u16, String) {
    let resp = reqwest::Client::new()
        .post(gw.url(path))
        .json(body)
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

async fn get(gw: &GatewayProcess, path: &str) -> String {
    reqwest::get(gw.url(path))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// Every file under `dir`, as bytes.
fn files_under(dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            files_under(&p, out);
        } else if let Ok(bytes) = std::fs::read(&p) {
            out.push((p.display().to_string(), bytes));
        }
    }
}

/// Runs one case end to end and asserts the key is nowhere.
async fn case(provider: Provider, way: Way, mode: Echo) {
    let key = format!("sk-test-ECHO-{}", uuid::Uuid::new_v4().simple());
    let what = format!("{provider:?} / {way:?} / {mode:?}");
    let dir = temp_dir("secrets");
    // Upstreams: the model's, and the MCP server's for the MCP case.
    let mut bedrock = None;
    let mut fake_model = None;
    let mut mcp = None;
    let upstream = match (way, provider) {
        (Way::McpToken, _) => {
            mcp = Some(mcp_upstream(mode).await);
            let replies = vec![
                Reply::Sse(tool_call_turn("call_1", "demo_echo", r#"{"text": "hi"}"#)),
                Reply::Sse(text_chunks("Done.")),
            ];
            let f = FakeOpenAi::start([replies.clone(), replies.clone(), replies].concat()).await;
            let a = f.addr.to_string();
            fake_model = Some(f);
            a
        }
        (_, Provider::Bedrock) => {
            let b = bedrock_upstream(mode, &key).await;
            let e = b.endpoint();
            bedrock = Some(b);
            e
        }
        _ => echo_upstream(mode).await.to_string(),
    };
    let mut toml = format!(
        "data_dir = \"{}\"\n[server]\nkeepalive_secs = 1\n[[agents]]\nid = \"cfg\"\n[agents.model]\nprovider = \"scripted\"\n",
        dir.display()
    );
    if matches!(way, Way::Config | Way::McpToken) {
        let key_line = if way == Way::Config {
            format!("api_key_env = \"{KEY_VAR}\"\n")
        } else {
            String::new()
        };
        toml.push_str(&format!(
            "[[agents]]\nid = \"a\"\nmax_iterations = 3\n[agents.model]\n{}\n{key_line}retry_initial_backoff_ms = 5\n",
            model_toml(provider, &upstream)
        ));
        if let Some(m) = mcp {
            toml.push_str(&format!(
                "[[agents.tools]]\ntype = \"mcp\"\nname = \"demo\"\nurl = \"http://{m}/mcp\"\nprefix = \"demo_\"\nbearer_token_env = \"{KEY_VAR}\"\n"
            ));
        }
    }
    // The fake upstreams are on loopback, which registered URLs may reach only when trusted.
    toml.push_str(TRUST_LOOPBACK);
    let config = dir.join("gw.toml");
    std::fs::write(&config, toml).unwrap();
    let gw = GatewayProcess::spawn(
        &config,
        &[
            (KEY_VAR, key.as_str()),
            ("RUST_LOG", "info,agui_gateway=debug"),
        ],
        true,
    )
    .await;

    let agent = match way {
        Way::Config | Way::McpToken => "a".to_string(),
        Way::ModelBlock => {
            let (s, r) = post(
                &gw,
                "/_plugins/_ml/agents/_register",
                &json!({
                "name": "echo", "type": "conversational",
                "model": model_block(provider, &upstream, &key)}),
            )
            .await;
            assert_eq!(s, 200, "{what}: {r}");
            serde_json::from_str::<Value>(&r).unwrap()["agent_id"]
                .as_str()
                .unwrap()
                .to_string()
        }
        Way::ConnectorHeader => {
            let (body, interface) = connector_model(provider, &upstream, &key);
            let (s, r) = post(&gw, "/_plugins/_ml/models/_register", &body).await;
            assert_eq!(s, 200, "{what}: {r}");
            let model: Value = serde_json::from_str(&r).unwrap();
            let (s, r) = post(
                &gw,
                "/_plugins/_ml/agents/_register",
                &json!({
                "name": "echo", "type": "conversational",
                "llm": {"model_id": model["model_id"], "parameters": {"max_iteration": 3}},
                "parameters": {"_llm_interface": interface}}),
            )
            .await;
            assert_eq!(s, 200, "{what}: {r}");
            serde_json::from_str::<Value>(&r).unwrap()["agent_id"]
                .as_str()
                .unwrap()
                .to_string()
        }
    };
    if way == Way::McpToken && mode == Echo::MidStream {
        // The tools must be listed before the run, or the model's call names nothing.
        for _ in 0..100 {
            if get(&gw, "/healthz").await.contains("\"ok\"") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    let mut seen: Vec<(String, String)> = Vec::new();
    // The AG-UI stream, then the same run's replayed events.
    let input = run_input(
        "t-secrets",
        json!([{"id": "u1", "role": "user", "content": "hello?"}]),
    );
    let (status, stream) = post(&gw, &format!("/agents/{agent}/agui"), &input).await;
    assert_eq!(status, 200, "{what}: {stream}");
    let run_id = input["runId"].as_str().unwrap();
    let replay = get(&gw, &format!("/agents/{agent}/agui/runs/{run_id}/events")).await;
    // The run must have met the echo: an error for a model, a tool result for MCP.
    let met = if way == Way::McpToken {
        "TOOL_CALL_RESULT"
    } else {
        "RUN_ERROR"
    };
    assert!(
        stream.contains(met),
        "{what}: the run never met the upstream: {stream}"
    );
    seen.push(("the SSE stream".into(), stream));
    seen.push(("the replayed run events".into(), replay));
    // `_execute`, synchronous and as a task.
    let execute = format!("/_plugins/_ml/agents/{agent}/_execute");
    let question = json!({"parameters": {"question": "hello?"}});
    let (_, sync) = post(&gw, &execute, &question).await;
    seen.push(("the _execute answer".into(), sync));
    let (status, started) = post(&gw, &format!("{execute}?async=true"), &question).await;
    assert_eq!(status, 200, "{what}: {started}");
    let task_id = serde_json::from_str::<Value>(&started).unwrap()["task_id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut task = String::new();
    for _ in 0..200 {
        task = get(&gw, &format!("/_plugins/_ml/tasks/{task_id}")).await;
        if !task.contains("RUNNING") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        !task.contains("RUNNING"),
        "{what}: the task never ended: {task}"
    );
    seen.push(("the task document".into(), task));
    seen.push(("the health answer".into(), get(&gw, "/healthz").await));

    let logs = gw.kill_and_read_stdout();
    assert!(!logs.is_empty(), "{what}: no logs captured");
    seen.push(("the logs".into(), logs));
    for (name, text) in &seen {
        assert!(
            !text.contains(&key),
            "{what}: the key leaked into {name}:\n{text}"
        );
    }
    // The upstream did quote the key, and it came back redacted.
    let quoted: &[&str] = if (way, mode) == (Way::McpToken, Echo::Unauthorized) {
        // The server is down for the gateway: its refusal shows in health and the logs.
        &["the health answer", "the logs"]
    } else if way == Way::McpToken {
        // A tool result is not logged.
        &["the SSE stream", "the replayed run events"]
    } else {
        &["the SSE stream", "the replayed run events", "the logs"]
    };
    for &name in quoted {
        let (_, text) = seen.iter().find(|(n, _)| n == name).unwrap();
        assert!(
            text.contains("[REDACTED]"),
            "{what}: no redacted quote in {name}:\n{text}"
        );
    }
    let mut files = Vec::new();
    files_under(&dir, &mut files);
    assert!(
        files
            .iter()
            .any(|(p, _)| p.contains("sqlite") || p.ends_with(".db")),
        "{what}: no store files in {files:?}",
        files = files.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    for (path, bytes) in &files {
        assert!(
            !bytes.windows(key.len()).any(|w| w == key.as_bytes()),
            "{what}: the key is stored in plain text in {path}"
        );
    }
    drop((bedrock, fake_model));
}

/// Every provider and way, each against an upstream quoting the key in a 401 and mid-stream.
async fn table(cases: &[(Provider, Way)]) {
    for &(provider, way) in cases {
        for mode in [Echo::Unauthorized, Echo::MidStream] {
            case(provider, way, mode).await;
        }
    }
}

#[tokio::test]
async fn config_keys_never_come_back_out() {
    table(&[
        (Provider::OpenAi, Way::Config),
        (Provider::Anthropic, Way::Config),
        (Provider::Bedrock, Way::Config),
    ])
    .await;
}

#[tokio::test]
async fn model_block_keys_never_come_back_out() {
    table(&[
        (Provider::OpenAi, Way::ModelBlock),
        (Provider::Anthropic, Way::ModelBlock),
        (Provider::Bedrock, Way::ModelBlock),
    ])
    .await;
}

#[tokio::test]
async fn connector_header_keys_never_come_back_out() {
    table(&[
        (Provider::OpenAi, Way::ConnectorHeader),
        (Provider::Anthropic, Way::ConnectorHeader),
    ])
    .await;
}

#[tokio::test]
async fn mcp_bearer_tokens_never_come_back_out() {
    table(&[(Provider::OpenAi, Way::McpToken)]).await;
}
