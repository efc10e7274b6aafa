/// MCP servers are tool sources: their tools (every page, prefixed, filtered) reach the model,
/// calls carry results, structure and `isError` back, and a server that is down (at start-up or
/// later) degrades health and yields error results instead of failing the gateway.
mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agui_gateway::tools::mcp_demo::DemoServer;
use agui_gateway::tools::{ToolContext, mcp};
use common::*;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// The demo tools served page by page, with a switch that adds a tool and announces it.
#[derive(Clone)]
struct Paged {
    demo: DemoServer,
    page: usize,
    extra: Arc<AtomicBool>,
    peers: Arc<Mutex<Vec<Peer<RoleServer>>>>,
}

impl ServerHandler for Paged {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut all = self.demo.list_tools(None, context).await?.tools;
        all.sort_by(|a, b| a.name.cmp(&b.name));
        if self.extra.load(Ordering::SeqCst) {
            let mut shout = all[0].clone();
            shout.name = "shout".into();
            all.push(shout);
        }
        let start: usize = request
            .and_then(|r| r.cursor)
            .map(|c| c.parse().expect("cursor"))
            .unwrap_or(0);
        let end = (start + self.page).min(all.len());
        Ok(ListToolsResult {
            tools: all[start..end].to_vec(),
            next_cursor: (end < all.len()).then(|| end.to_string()),
            ..Default::default()
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.demo.call_tool(request, context).await
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.peers.lock().unwrap().push(context.peer);
    }
}

/// An rmcp streamable HTTP server in-process at `http://{addr}/mcp`.
struct McpHttp {
    addr: SocketAddr,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl McpHttp {
    async fn start<S: ServerHandler + Clone>(addr: &str, handler: S) -> McpHttp {
        // A restarted server takes over its predecessor's port, which may take a moment to free.
        let mut tries = 0;
        let listener = loop {
            match tokio::net::TcpListener::bind(addr).await {
                Ok(l) => break l,
                Err(e) if tries < 50 => {
                    tries += 1;
                    eprintln!("bind {addr}: {e}; retrying");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("bind {addr}: {e}"),
            }
        };
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
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move { ct.cancelled_owned().await })
                .await;
        });
        McpHttp { addr, stop, task }
    }

    fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    async fn stop(self) {
        self.stop.cancel();
        let abort = self.task.abort_handle();
        if tokio::time::timeout(Duration::from_secs(5), self.task)
            .await
            .is_err()
        {
            abort.abort();
        }
    }
}

fn mcp_entry(extra: &str) -> String {
    format!("[[agents.tools]]\ntype = \"mcp\"\nname = \"demo\"\n{extra}\n")
}

async fn health(gw: &Gateway) -> Value {
    reqwest::get(gw.url("/healthz"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Polls the first tool source's health until its status is `status`; bounded.
async fn wait_for(gw: &Gateway, status: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let h = health(gw).await["toolSources"][0].clone();
        if h["status"] == status {
            return h;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "source never became {status}: {h}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn tool_names(gw: &Gateway) -> Vec<String> {
    let agents: Value = reqwest::get(gw.url("/agents"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut names: Vec<String> = agents["agents"][0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .filter(|n| n != "get_weather")
        .collect();
    names.sort();
    names
}

/// Runs one model turn that calls `tool`, then a text turn; returns the call's result event.
async fn call(gw: &Gateway, thread: &str) -> Value {
    let events = gw
        .run(
            "a",
            &run_input(
                thread,
                json!([{"id": "u1", "role": "user", "content": "Use the tool."}]),
            ),
        )
        .await;
    assert_eq!(
        events.last().unwrap()["type"],
        "RUN_FINISHED",
        "{events:#?}"
    );
    of_type(&events, "TOOL_CALL_RESULT")[0].clone()
}

fn call_then_text(id: &str, tool: &str, args: &str) -> Vec<Reply> {
    vec![
        Reply::Sse(tool_call_turn(id, tool, args)),
        Reply::Sse(text_chunks("Done.")),
    ]
}

/// The last tool message the model was sent.
fn last_tool_message(up: &FakeOpenAi) -> String {
    let reqs = up.requests();
    let msgs = reqs.last().unwrap()["messages"].as_array().unwrap().clone();
    msgs.iter().rev().find(|m| m["role"] == "tool").unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn http_server_tools_are_listed_called_and_errors_reach_the_model() {
    let server = McpHttp::start("127.0.0.1:0", DemoServer::new()).await;
    let mut replies = call_then_text("call_add", "demo_add", r#"{"a": 2, "b": 3.5}"#);
    replies.extend(call_then_text("call_fail", "demo_fail", "{}"));
    let up = FakeOpenAi::start(replies).await;
    let gw = Gateway::start(&up.config(&mcp_entry(&format!(
        "url = \"{}\"\nprefix = \"demo_\"",
        server.url()
    ))))
    .await;
    let h = wait_for(&gw, "ok").await;
    assert_eq!(
        tool_names(&gw).await,
        ["demo_add", "demo_echo", "demo_fail", "demo_slow_count"]
    );
    assert_eq!(
        (h["name"].as_str(), h["tools"].as_u64()),
        (Some("demo"), Some(4))
    );

    let result = call(&gw, "t-mcp-add").await;
    assert_eq!(result["toolCallId"], "call_add");
    assert!(
        result["content"].as_str().unwrap().contains("5.5"),
        "{result}"
    );
    // The model saw the MCP tool's own description and schema under the prefixed name.
    let tools = up.requests()[0]["tools"].as_array().unwrap().clone();
    let add = tools
        .iter()
        .find(|t| t["function"]["name"] == "demo_add")
        .expect("demo_add offered to the model");
    assert!(
        add["function"]["description"]
            .as_str()
            .unwrap()
            .contains("sum")
    );
    assert!(add["function"]["parameters"]["properties"]["a"].is_object());

    let result = call(&gw, "t-mcp-fail").await;
    assert!(
        result["content"].as_str().unwrap().contains("always fails"),
        "{result}"
    );
    let sent = last_tool_message(&up);
    assert!(
        sent.starts_with("Error") && sent.contains("always fails"),
        "{sent}"
    );
    server.stop().await;
}

#[tokio::test]
async fn every_page_is_listed_filters_apply_and_list_changed_refreshes() {
    let extra = Arc::new(AtomicBool::new(false));
    let peers = Arc::new(Mutex::new(Vec::new()));
    let server = McpHttp::start(
        "127.0.0.1:0",
        Paged {
            demo: DemoServer::new(),
            page: 1,
            extra: Arc::clone(&extra),
            peers: Arc::clone(&peers),
        },
    )
    .await;
    let up = FakeOpenAi::start(call_then_text("call_e", "m-add", r#"{"a": 1, "b": 1}"#)).await;
    let gw = Gateway::start(&up.config(&mcp_entry(&format!(
        "url = \"{}\"\nprefix = \"m-\"\ndeny = [\"echo\"]",
        server.url()
    ))))
    .await;
    // Four pages of one tool each; `echo` is denied.
    wait_for(&gw, "ok").await;
    assert_eq!(tool_names(&gw).await, ["m-add", "m-fail", "m-slow_count"]);
    let result = call(&gw, "t-paged").await;
    assert!(
        result["content"].as_str().unwrap().contains('2'),
        "{result}"
    );

    extra.store(true, Ordering::SeqCst);
    let peer = peers.lock().unwrap().last().cloned().expect("a session");
    peer.notify_tool_list_changed().await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while tool_names(&gw).await != ["m-add", "m-fail", "m-shout", "m-slow_count"] {
        assert!(
            tokio::time::Instant::now() < deadline,
            "list_changed was not followed: {:?}",
            tool_names(&gw).await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.stop().await;
}

#[tokio::test]
async fn one_session_serves_many_concurrent_calls() {
    let server = McpHttp::start("127.0.0.1:0", DemoServer::new()).await;
    let entries = [
        format!("name = \"h\"\nurl = \"{}\"", server.url()),
        format!(
            "name = \"s\"\ncommand = \"{}\"\nargs = [\"mcp-demo-server\"]",
            env!("CARGO_BIN_EXE_agui-gateway")
        ),
    ];
    for entry in entries {
        let cfg = mcp::parse(toml::from_str(&entry).unwrap(), &|_| None, None).unwrap();
        let source = mcp::start(cfg).await;
        // `start` waits only a few seconds; a loaded machine may need longer.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while source.health()["status"] != "ok" {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{}",
                source.health()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let add = source
            .tools()
            .into_iter()
            .find(|t| t.tool.spec().name == "add")
            .expect("add listed");
        let calls = (0..20).map(|i| {
            let add = add.clone();
            async move {
                let ctx = ToolContext {
                    thread_id: "t".into(),
                    run_id: format!("r{i}"),
                    tool_call_id: format!("c{i}"),
                    cancel: CancellationToken::new(),
                    state: Default::default(),
                    side: None,
                };
                add.tool.call(json!({"a": i, "b": 0.5}), ctx).await
            }
        });
        let outs = futures::future::join_all(calls).await;
        for (i, out) in outs.into_iter().enumerate() {
            assert!(!out.is_error, "{out:?}");
            assert_eq!(out.structured, Some(json!({"sum": i as f64 + 0.5})));
        }
        source.close().await;
        assert_eq!(source.health()["error"], "closed");
    }
    server.stop().await;
}

#[tokio::test]
async fn a_stdio_server_runs_as_a_child_process() {
    let up = FakeOpenAi::start(call_then_text(
        "call_echo",
        "echo",
        r#"{"text": "hello over stdio"}"#,
    ))
    .await;
    let gw = Gateway::start(&up.config(&mcp_entry(&format!(
        "command = \"{}\"\nargs = [\"mcp-demo-server\"]\nallow = [\"echo\", \"add\"]",
        env!("CARGO_BIN_EXE_agui-gateway")
    ))))
    .await;
    let h = wait_for(&gw, "ok").await;
    assert_eq!(h["transport"], "stdio");
    assert_eq!(tool_names(&gw).await, ["add", "echo"]);
    let result = call(&gw, "t-stdio").await;
    assert_eq!(result["content"], "hello over stdio");

    // Closing ends the session (and the child) and says so.
    for agent in gw.state.agents.loaded() {
        agent.tools.close().await;
    }
    assert_eq!(health(&gw).await["toolSources"][0]["error"], "closed");
}

#[tokio::test]
async fn a_restarted_server_is_reconnected_and_calls_meanwhile_fail_cleanly() {
    let server = McpHttp::start("127.0.0.1:0", DemoServer::new()).await;
    let addr = server.addr;
    let url = server.url();
    let mut replies = call_then_text("call_1", "add", r#"{"a": 1, "b": 2}"#);
    replies.extend(call_then_text("call_2", "add", r#"{"a": 3, "b": 4}"#));
    let up = FakeOpenAi::start(replies).await;
    let gw = Gateway::start(&up.config(&mcp_entry(&format!("url = \"{url}\"")))).await;
    wait_for(&gw, "ok").await;

    server.stop().await;
    let result = call(&gw, "t-restart-1").await;
    let text = result["content"].as_str().unwrap();
    assert!(text.contains("unavailable"), "{result}");
    assert!(last_tool_message(&up).starts_with("Error"));
    let down = wait_for(&gw, "down").await;
    assert!(down["error"].is_string(), "{down}");
    assert_eq!(health(&gw).await["status"], "degraded");

    let server = McpHttp::start(&addr.to_string(), DemoServer::new()).await;
    wait_for(&gw, "ok").await;
    let result = call(&gw, "t-restart-2").await;
    assert!(
        result["content"].as_str().unwrap().contains('7'),
        "{result}"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_server_down_at_start_up_leaves_the_gateway_up_and_reports_it() {
    // A port with nothing behind it.
    let free = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let up = FakeOpenAi::start(vec![]).await;
    let config = up.config(&format!(
        "{}{}",
        mcp_entry(&format!(
            "url = \"http://{free}/mcp?token=hunter2\"\nheaders = {{ X-Secret = \"swordfish\" }}"
        )),
        "[[agents.tools]]\ntype = \"mcp\"\nname = \"missing\"\ncommand = \"./no/such/server\"\n"
    ));
    let gw = Gateway::start(&config).await;
    let h = health(&gw).await;
    assert_eq!(h["status"], "degraded");
    let sources = h["toolSources"].as_array().unwrap();
    assert_eq!(sources.len(), 2);
    for s in sources {
        assert_eq!(s["status"], "down", "{s}");
        assert!(s["error"].as_str().is_some_and(|e| !e.is_empty()), "{s}");
        assert_eq!(s["tools"], 0);
    }
    let text = h.to_string();
    assert!(
        !text.contains("hunter2") && !text.contains("swordfish"),
        "{text}"
    );
    assert_eq!(tool_names(&gw).await, Vec::<String>::new());
}

/// The demo tools, except that `add` never answers.
#[derive(Clone)]
struct Hangs(DemoServer);

impl ServerHandler for Hangs {
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
        if request.name == "add" {
            std::future::pending::<()>().await;
        }
        self.0.call_tool(request, context).await
    }
}

#[tokio::test]
async fn a_hung_call_times_out_into_an_error_result_and_the_run_goes_on() {
    let server = McpHttp::start("127.0.0.1:0", Hangs(DemoServer::new())).await;
    let mut replies = call_then_text("call_1", "add", r#"{"a": 1, "b": 2}"#);
    replies.extend(call_then_text("call_2", "add", r#"{"a": 3, "b": 4}"#));
    let up = FakeOpenAi::start(replies).await;
    let entry = mcp_entry(&format!("url = \"{}\"\ntimeout_secs = 1", server.url()));
    let gw = Gateway::start(&up.config(&entry)).await;
    wait_for(&gw, "ok").await;
    for thread in ["t-hung-1", "t-hung-2"] {
        let result = call(&gw, thread).await;
        let text = result["content"].as_str().unwrap();
        assert!(text.contains("timed out"), "{result}");
        assert!(last_tool_message(&up).starts_with("Error"));
    }
    // The session survived the abandoned calls and the runs are gone.
    assert_eq!(
        wait_for(&gw, "ok").await["tools"],
        json!(tool_names(&gw).await.len())
    );
    wait_no_runs(&gw).await;
    server.stop().await;
}

#[tokio::test]
async fn a_server_that_accepts_and_never_answers_does_not_hold_up_the_gateway() {
    // Takes connections and reads nothing, answers nothing.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = silent.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut conns = Vec::new();
        while let Ok((c, _)) = silent.accept().await {
            conns.push(c);
        }
    });
    let up = FakeOpenAi::start(vec![Reply::Sse(text_chunks("Still here."))]).await;
    let started = tokio::time::Instant::now();
    let gw = Gateway::start(&up.config(&mcp_entry(&format!("url = \"http://{addr}/mcp\"")))).await;
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "start-up waited on the silent server"
    );
    let h = health(&gw).await;
    assert_eq!(h["status"], "degraded", "{h}");
    assert_ne!(h["toolSources"][0]["status"], "ok", "{h}");
    let events = gw.run("a", &user_says_hi("t-silent")).await;
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED");
    wait_no_runs(&gw).await;
    held.abort();
}
