/// Tools report what is not conversation content as AG-UI activities, streamed before their
/// result and stored with the thread: an MCP server's progress notifications become a
/// `progress` activity (a snapshot, then patches; forged tokens are ignored), and the knowledge
/// base's hits become a `citations` activity matching the tool's result, for the embedded
/// `search` tool and for ml-commons' `SearchIndexTool` on an agent registered through the API.
mod common;
#[path = "common/ml_fakes.rs"]
mod ml_fakes;

use std::net::SocketAddr;
use std::time::Duration;

use agui_gateway::runs::patch::apply_ops;
use agui_gateway::tools::mcp_demo::DemoServer;
use common::*;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ListToolsResult, NumberOrString,
    PaginatedRequestParams, ProgressNotificationParam, ProgressToken, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// The demo tools, except that every call first reports progress under tokens the gateway
/// never issued (another call's, as a guess, and a number).
#[derive(Clone)]
struct Forger(DemoServer);

impl ServerHandler for Forger {
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
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        for token in [
            NumberOrString::Number(0),
            NumberOrString::Number(1),
            NumberOrString::String("agui-progress_0".into()),
        ] {
            let note =
                ProgressNotificationParam::new(ProgressToken(token), 99.0).with_message("forged");
            let _ = context.peer.notify_progress(note).await;
        }
        self.0.call_tool(request, context).await
    }
}

/// An rmcp streamable HTTP server in-process at `http://{addr}/mcp`.
async fn serve_http<S: ServerHandler + Clone>(handler: S) -> (SocketAddr, CancellationToken) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let service: StreamableHttpService<S, LocalSessionManager> = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Default::default(),
        StreamableHttpServerConfig::default()
            .with_sse_keep_alive(None)
            .with_cancellation_token(stop.child_token()),
    );
    let app = axum::Router::new().nest_service("/mcp", service);
    let ct = stop.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move { ct.cancelled_owned().await })
            .await;
    });
    (addr, stop)
}

/// Waits until the first tool source is up.
async fn wait_up(gw: &Gateway) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let h: Value = reqwest::get(gw.url("/healthz"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if h["toolSources"][0]["status"] == "ok" {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "never up: {h}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn position(events: &[Value], pred: impl Fn(&Value) -> bool) -> usize {
    events.iter().position(pred).expect("event present")
}

/// The stored thread, as a reload (a run with no messages) gets it.
async fn stored(gw: &Gateway, agent: &str, thread: &str) -> Vec<Value> {
    let events = gw
        .run(
            agent,
            &json!({"threadId": thread, "runId": "r-reload", "messages": [], "protocolVersion": "1.0"}),
        )
        .await;
    of_type(&events, "MESSAGES_SNAPSHOT")[0]["messages"]
        .as_array()
        .unwrap()
        .clone()
}

/// Checks the progress activity of call `call` in `events`; answers its id and final content.
fn progress_activity(events: &[Value], call: &str) -> (Value, Value) {
    let snapshots = of_type(events, "ACTIVITY_SNAPSHOT");
    assert_eq!(
        snapshots.len(),
        1,
        "one snapshot, forged tokens ignored: {events:#?}"
    );
    let snap = snapshots[0];
    assert_eq!(snap["activityType"], "progress");
    let id = snap["messageId"].clone();
    let mut content = snap["content"].clone();
    assert_eq!(content["toolCallId"], call);
    assert_eq!(content["tool"], "slow_count");
    assert_eq!(content["total"], 3);
    let deltas = of_type(events, "ACTIVITY_DELTA");
    assert!(
        !deltas.is_empty(),
        "progress went on after the snapshot: {events:#?}"
    );
    for d in &deltas {
        assert_eq!(d["messageId"], id);
        assert_eq!(d["activityType"], "progress");
        content = apply_ops(&content, d["patch"].as_array().unwrap()).expect("patch applies");
    }
    assert_eq!(
        content,
        json!({"toolCallId": call, "tool": "slow_count", "progress": 3, "total": 3,
               "message": "Counted 3 of 3"})
    );
    // All of it before the call's result.
    let result = position(events, |e| e["type"] == "TOOL_CALL_RESULT");
    let snap_at = position(events, |e| e["type"] == "ACTIVITY_SNAPSHOT");
    let last_delta = events
        .iter()
        .rposition(|e| e["type"] == "ACTIVITY_DELTA")
        .unwrap();
    assert!(snap_at < last_delta && last_delta < result, "{events:#?}");
    assert_eq!(events[result]["content"], "Counted to 3.");
    (id, content)
}

fn count_turns(call: &str) -> Vec<Reply> {
    vec![
        Reply::Sse(tool_call_turn(
            call,
            "slow_count",
            r#"{"to": 3, "delay_ms": 150}"#,
        )),
        Reply::Sse(text_chunks("Counted.")),
    ]
}

#[tokio::test]
async fn mcp_progress_streams_as_an_activity_and_is_stored_with_the_thread() {
    let (addr, stop) = serve_http(Forger(DemoServer::new())).await;
    let mut replies = count_turns("call_http");
    replies.extend(count_turns("call_stdio"));
    let up = FakeOpenAi::start(replies).await;
    // The same demo server over streamable HTTP (agent "a") and as a child process ("s").
    let config = up.config(&format!(
        "[[agents.tools]]\ntype = \"mcp\"\nname = \"demo\"\nurl = \"http://{addr}/mcp\"\n"
    ));
    let gw = Gateway::start(&config).await;
    wait_up(&gw).await;
    let input = run_input(
        "t-progress",
        json!([{"id": "u1", "role": "user", "content": "Count to three."}]),
    );
    let events = gw.run("a", &input).await;
    assert_eq!(
        events.last().unwrap()["type"],
        "RUN_FINISHED",
        "{events:#?}"
    );
    let (id, content) = progress_activity(&events, "call_http");

    let thread = stored(&gw, "a", "t-progress").await;
    let activity = thread
        .iter()
        .find(|m| m["role"] == "activity")
        .expect("the activity is stored");
    assert_eq!(activity["id"], id);
    assert_eq!(activity["activityType"], "progress");
    assert_eq!(activity["content"], content);
    // It stays out of what the model is sent.
    for req in up.requests() {
        assert!(!req.to_string().contains("Counted 3 of 3"), "{req}");
    }
    stop.cancel();

    let stdio = up.config(&format!(
        "[[agents.tools]]\ntype = \"mcp\"\nname = \"demo\"\ncommand = \"{}\"\nargs = [\"mcp-demo-server\"]\n",
        env!("CARGO_BIN_EXE_agui-gateway")
    ));
    let gw = Gateway::start(&stdio).await;
    wait_up(&gw).await;
    let mut input = run_input(
        "t-progress-stdio",
        json!([{"id": "u1", "role": "user", "content": "Count to three."}]),
    );
    input["protocolVersion"] = json!("1.0");
    let events = gw.run("a", &input).await;
    assert_eq!(
        events.last().unwrap()["type"],
        "RUN_FINISHED",
        "{events:#?}"
    );
    let (id, content) = progress_activity(&events, "call_stdio");
    let thread = stored(&gw, "a", "t-progress-stdio").await;
    let activity = thread.iter().find(|m| m["id"] == id).expect("stored");
    assert_eq!(activity["content"], content);
}

#[tokio::test]
async fn knowledge_base_hits_are_shown_as_citations_and_stored() {
    let up = FakeOpenAi::start(vec![
        Reply::Sse(tool_call_turn(
            "call_kb",
            "search",
            r#"{"query":"Seattle population","top_k":3}"#,
        )),
        Reply::Sse(text_chunks("Seattle is growing [seattle-2023].")),
    ])
    .await;
    let config = up.config("[[agents.tools]]\ntype = \"search\"\nindex = \"demo\"\n");
    let gw = Gateway::start(&config).await;
    let mut input = run_input(
        "t-cite",
        json!([{"id": "u1", "role": "user", "content": "How many people live in Seattle?"}]),
    );
    input["protocolVersion"] = json!("1.0");
    let events = gw.run("a", &input).await;
    assert_eq!(
        events.last().unwrap()["type"],
        "RUN_FINISHED",
        "{events:#?}"
    );

    let result_at = position(&events, |e| e["type"] == "TOOL_CALL_RESULT");
    let hits: Value = serde_json::from_str(events[result_at]["content"].as_str().unwrap()).unwrap();
    let hits = hits.as_array().unwrap();
    assert_eq!(hits.len(), 3);
    let snapshots = of_type(&events, "ACTIVITY_SNAPSHOT");
    assert_eq!(snapshots.len(), 1, "{events:#?}");
    let snap = snapshots[0];
    assert!(position(&events, |e| e["type"] == "ACTIVITY_SNAPSHOT") < result_at);
    assert_eq!(snap["activityType"], "citations");
    let content = &snap["content"];
    assert_eq!(content["toolCallId"], "call_kb");
    assert_eq!(content["query"], "Seattle population");
    let results = content["results"].as_array().unwrap();
    assert_eq!(results.len(), hits.len());
    for (c, h) in results.iter().zip(hits) {
        assert_eq!(c["id"], h["id"]);
        assert_eq!(c["index"], "demo");
        assert_eq!(c["title"], h.get("title").unwrap_or(&h["id"]).clone());
        assert_eq!(c["score"], h["score"]);
        assert_eq!(c["snippet"], h["snippet"]);
    }

    let thread = stored(&gw, "a", "t-cite").await;
    let roles: Vec<&str> = thread.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert!(roles.contains(&"activity"), "{roles:?}");
    let activity = thread.iter().find(|m| m["role"] == "activity").unwrap();
    assert_eq!(activity["id"], snap["messageId"]);
    assert_eq!(activity["activityType"], "citations");
    assert_eq!(&activity["content"], content);
    // The model got the hits as the result, not the activity.
    let second = &up.requests()[1];
    assert!(!second.to_string().contains("\"citations\""), "{second}");
}

#[tokio::test]
async fn an_ml_commons_search_index_tool_shows_its_documents_as_citations() {
    let up = FakeOpenAi::start(vec![
        Reply::Sse(tool_call_turn(
            "call_si",
            "SearchIndexTool",
            r#"{"index":"demo","query":{"query":{"match":{"text":"Seattle population"}},"size":2}}"#,
        )),
        Reply::Sse(text_chunks("About 3.5 million.")),
    ])
    .await;
    let gw =
        Gateway::start("[[agents]]\nid = \"cfg\"\n[agents.model]\nprovider = \"scripted\"\n").await;
    let base = gw.url("").trim_end_matches('/').to_string();
    let llm = ml_fakes::register_model(&base, ml_fakes::chat_connector(&up.base_url())).await;
    let (status, reg) = ml_fakes::post(
        &base,
        "/_plugins/_ml/agents/_register",
        json!({
            "name": "RAG", "type": "conversational",
            "llm": {"model_id": llm, "parameters": {"max_iteration": 3}},
            "parameters": {"_llm_interface": "openai/v1/chat/completions"},
            "memory": {"type": "conversation_index"},
            "tools": [{"type": "SearchIndexTool"}]
        }),
    )
    .await;
    assert_eq!(status, 200, "{reg}");
    let id = reg["agent_id"].as_str().unwrap();
    let mut input = run_input(
        "t-ml-cite",
        json!([{"id": "u1", "role": "user", "content": "How many people live in Seattle?"}]),
    );
    input["protocolVersion"] = json!("1.0");
    let events = gw.run(id, &input).await;
    assert_eq!(
        events.last().unwrap()["type"],
        "RUN_FINISHED",
        "{events:#?}"
    );

    let result_at = position(&events, |e| e["type"] == "TOOL_CALL_RESULT");
    let lines: Vec<Value> = events[result_at]["content"]
        .as_str()
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{lines:#?}");
    let snap = of_type(&events, "ACTIVITY_SNAPSHOT")[0];
    assert!(position(&events, |e| e["type"] == "ACTIVITY_SNAPSHOT") < result_at);
    assert_eq!(snap["activityType"], "citations");
    assert_eq!(snap["content"]["toolCallId"], "call_si");
    let results = snap["content"]["results"].as_array().unwrap();
    assert_eq!(results.len(), lines.len());
    for (c, l) in results.iter().zip(&lines) {
        assert_eq!(c["id"], l["_id"]);
        assert_eq!(c["index"], "demo");
        assert_eq!(c["score"], l["_score"]);
        assert_eq!(c["title"], l["_source"]["title"]);
        assert_eq!(c["snippet"], l["_source"]["text"]);
    }
    let thread = stored(&gw, id, "t-ml-cite").await;
    let activity = thread
        .iter()
        .find(|m| m["role"] == "activity")
        .expect("stored");
    assert_eq!(activity["content"], snap["content"]);
}
