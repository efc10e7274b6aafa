/// ml-commons' MCP connectors (`mcp_sse` and `mcp_streamable_http`, seed 000 §3.2.2) registered
/// through the agent API and named in an agent's `parameters.mcp_connectors` with tool filters:
/// their tools reach the model and their calls the servers, headers filled from the connector's
/// credential, over the legacy HTTP+SSE transport and streamable HTTP alike.
mod common;

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use agui_gateway::tools::mcp_demo::DemoServer;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use common::*;
use futures::StreamExt;
use rmcp::ServiceExt;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};

const KEY: &str = "THE_MCP_SERVER_API_KEY";

/// One MCP session of the SSE stand-in: where POSTed client messages go.
type Sessions =
    Arc<Mutex<HashMap<String, tokio::sync::mpsc::UnboundedSender<ClientJsonRpcMessage>>>>;

#[derive(Clone, Default)]
struct SseServer {
    sessions: Sessions,
    /// Authorization headers seen on the stream and on messages.
    auth: Arc<Mutex<Vec<String>>>,
}

fn authorized(s: &SseServer, headers: &HeaderMap) -> bool {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    s.auth.lock().unwrap().push(auth.clone());
    auth == format!("Bearer {KEY}")
}

/// `GET /sse`: the HTTP+SSE transport of MCP 2024-11-05, in front of rmcp's demo server.
async fn open(State(s): State<SseServer>, headers: HeaderMap) -> Response {
    if !authorized(&s, &headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let id = uuid::Uuid::new_v4().to_string();
    let (to_server, from_client) = tokio::sync::mpsc::unbounded_channel::<ClientJsonRpcMessage>();
    let (to_client, from_server) = futures::channel::mpsc::channel::<ServerJsonRpcMessage>(16);
    s.sessions.lock().unwrap().insert(id.clone(), to_server);
    tokio::spawn(async move {
        let incoming = tokio_stream::wrappers::UnboundedReceiverStream::new(from_client);
        if let Ok(running) = DemoServer::new().serve((to_client, incoming)).await {
            let _ = running.waiting().await;
        }
    });
    let first = futures::stream::once(async move {
        Ok::<_, Infallible>(
            Event::default()
                .event("endpoint")
                .data(format!("/messages?sessionId={id}")),
        )
    });
    let rest = from_server.map(|m| {
        Ok::<_, Infallible>(
            Event::default()
                .event("message")
                .data(serde_json::to_string(&m).unwrap()),
        )
    });
    Sse::new(first.chain(rest)).into_response()
}

/// `POST /messages?sessionId=...`: a client message for its session.
async fn message(
    State(s): State<SseServer>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> StatusCode {
    if !authorized(&s, &headers) {
        return StatusCode::UNAUTHORIZED;
    }
    let Some(tx) = q
        .get("sessionId")
        .and_then(|id| s.sessions.lock().unwrap().get(id).cloned())
    else {
        return StatusCode::NOT_FOUND;
    };
    match serde_json::from_slice::<ClientJsonRpcMessage>(&body) {
        Ok(m) => match tx.send(m) {
            Ok(()) => StatusCode::ACCEPTED,
            Err(_) => StatusCode::GONE,
        },
        Err(_) => StatusCode::BAD_REQUEST,
    }
}

async fn start_sse() -> (String, SseServer) {
    let state = SseServer::default();
    let app = axum::Router::new()
        .route("/sse", axum::routing::get(open))
        .route("/messages", axum::routing::post(message))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), state)
}

/// rmcp's streamable HTTP server at `/mcp`, requiring the bearer key.
async fn start_streamable() -> String {
    let service: StreamableHttpService<DemoServer, LocalSessionManager> =
        StreamableHttpService::new(
            || Ok(DemoServer::new()),
            Default::default(),
            StreamableHttpServerConfig::default().with_sse_keep_alive(None),
        );
    let guard = axum::middleware::from_fn(
        |req: axum::extract::Request, next: axum::middleware::Next| async move {
            let ok = req.headers().get("x-api-key").and_then(|v| v.to_str().ok()) == Some(KEY);
            if ok {
                next.run(req).await
            } else {
                StatusCode::UNAUTHORIZED.into_response()
            }
        },
    );
    let app = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(guard);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

async fn post(gw: &Gateway, path: &str, body: Value) -> (u16, Value) {
    send_json("POST", gw.url(path), Some(&body)).await
}

#[tokio::test]
async fn agents_use_the_tools_of_their_mcp_connectors_over_sse_and_streamable_http() {
    let (sse_base, sse) = start_sse().await;
    let http_base = start_streamable().await;
    let up = FakeOpenAi::start(vec![
        Reply::Sse(vec![
            call_start(0, "call_e", "echo"),
            call_args(0, r#"{"text":"over sse"}"#),
            call_start(1, "call_a", "add"),
            call_args(1, r#"{"a":2,"b":3}"#),
            finish("tool_calls"),
        ]),
        Reply::Sse(text_chunks("Both tools answered.")),
    ])
    .await;
    let gw =
        Gateway::start("[[agents]]\nid = \"cfg\"\n[agents.model]\nprovider = \"scripted\"\n").await;
    // Seed 000 §3.2.2 as written, the server's URL pointed at the stand-in.
    let (status, c1) = post(
        &gw,
        "/_plugins/_ml/connectors/_create",
        json!({
          "name":        "My MCP Connector",
          "description": "Connects to the external MCP server for weather tools",
          "version":     1,
          "protocol":    "mcp_sse",
          "url":         sse_base,
          "credential": {
            "mcp_server_key": KEY
          },
          "parameters":{
            "sse_endpoint": "/sse"
          },
          "headers": {
            "Authorization": "Bearer ${credential.mcp_server_key}"
          }
        }),
    )
    .await;
    assert_eq!(status, 200, "{c1}");
    let (status, c2) = post(
        &gw,
        "/_plugins/_ml/connectors/_create",
        json!({
          "name": "streamable", "version": 1, "protocol": "mcp_streamable_http",
          "url": http_base,
          "credential": {"key": KEY},
          "headers": {"x-api-key": "${credential.key}"}
        }),
    )
    .await;
    assert_eq!(status, 200, "{c2}");
    let (c1, c2) = (
        c1["connector_id"].as_str().unwrap(),
        c2["connector_id"].as_str().unwrap(),
    );
    // The credential is never shown.
    let got = gw.get_text(&format!("/_plugins/_ml/connectors/{c1}")).await;
    assert!(!got.contains(KEY), "{got}");

    let (status, reg) = post(
        &gw,
        "/_plugins/_ml/agents/_register",
        json!({
            "name": "mcp user", "type": "conversational",
            "model": {"model_id": "gpt-test", "model_provider": "openai/v1/chat/completions",
                      "credential": {"openAI_key": "sk-x"}, "model_parameters": {"base_url": up.base_url()}},
            "parameters": {"mcp_connectors": [
                {"mcp_connector_id": c1, "tool_filters": ["ech.*"]},
                {"mcp_connector_id": c2, "tool_filters": ["add"]}
            ]}
        }),
    )
    .await;
    assert_eq!(status, 200, "{reg}");
    let id = reg["agent_id"].as_str().unwrap();
    let (status, out) = post(
        &gw,
        &format!("/_plugins/_ml/agents/{id}/_execute"),
        json!({"parameters": {"question": "use the tools", "verbose": true}}),
    )
    .await;
    assert_eq!(status, 200, "{out}");
    let reqs = up.requests();
    let mut offered: Vec<&str> = reqs[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    offered.sort();
    assert_eq!(
        offered,
        ["add", "echo"],
        "the filters keep one tool of each server"
    );
    let results: Vec<String> = reqs[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].to_string())
        .collect();
    assert!(
        results.iter().any(|r| r.contains("over sse")),
        "{results:?}"
    );
    assert!(
        results.iter().any(|r| r.contains("2 + 3 = 5")),
        "{results:?}"
    );
    assert!(
        sse.auth
            .lock()
            .unwrap()
            .iter()
            .all(|a| a == &format!("Bearer {KEY}"))
    );

    // A connector that is not MCP, or none at all, is refused at registration.
    let (status, body) = post(
        &gw,
        "/_plugins/_ml/agents/_register",
        json!({"name": "x", "type": "conversational",
               "model": {"model_id": "s", "model_provider": "scripted"},
               "parameters": {"mcp_connectors": [{"mcp_connector_id": "nope"}]}}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        body["error"]["details"]["field"],
        "parameters.mcp_connectors[0].mcp_connector_id"
    );
    let (status, body) = post(
        &gw,
        "/_plugins/_ml/connectors/_create",
        json!({"name": "bad", "protocol": "mcp_sse", "url": "ftp://x"}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
}
