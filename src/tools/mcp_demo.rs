//! A tiny MCP server with four tools (`echo`, `add`, `fail`, and `slow_count`, which reports
//! its progress), so there is always a server to try MCP tools against: `agui-gateway mcp-demo-server` serves it over stdio, and tests mount
//! [`DemoServer`] in-process behind rmcp's streamable HTTP service.

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use std::time::Duration;

use rmcp::model::{
    CallToolResult, ContentBlock, Implementation, ProgressNotificationParam, RequestMetaObject,
    ServerCapabilities, ServerConfig,
};
use rmcp::{
    Peer, RoleServer, ServerHandler, ServiceExt, schemars, tool, tool_handler, tool_router,
};
use serde::Deserialize;
use serde_json::json;

/// Arguments of `echo`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct EchoArgs {
    /// The text to send back.
    pub text: String,
}

/// Arguments of `add`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct AddArgs {
    /// The first number.
    pub a: f64,
    /// The second number.
    pub b: f64,
}

/// Arguments of `slow_count`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SlowCountArgs {
    /// The number to count to (1-20, default 5).
    #[serde(default)]
    pub to: Option<u32>,
    /// Milliseconds between two numbers (at most 2000, default 300).
    #[serde(default)]
    pub delay_ms: Option<u64>,
}

/// The demo server's handler; cheap to clone, one per session.
#[derive(Debug, Clone)]
pub struct DemoServer {
    tool_router: ToolRouter<Self>,
}

impl Default for DemoServer {
    fn default() -> Self {
        Self::new()
    }
}

#[tool_router]
impl DemoServer {
    /// A server with the demo tools.
    pub fn new() -> Self {
        Self {
            tool_router: Self::tool_router(),
        }
    }

    /// Sends the text back.
    #[tool(description = "Echo the given text back unchanged.")]
    fn echo(&self, Parameters(EchoArgs { text }): Parameters<EchoArgs>) -> String {
        text
    }

    /// Adds two numbers; the sum comes as text and as structured content.
    #[tool(description = "Add two numbers; returns their sum.")]
    fn add(&self, Parameters(AddArgs { a, b }): Parameters<AddArgs>) -> CallToolResult {
        let sum = a + b;
        let mut result =
            CallToolResult::success(vec![ContentBlock::text(format!("{a} + {b} = {sum}"))]);
        result.structured_content = Some(json!({ "sum": sum }));
        result
    }

    /// Always fails, as a tool-level error (`isError`), not a protocol error.
    #[tool(description = "Always fails; for trying out error handling.")]
    fn fail(&self) -> CallToolResult {
        CallToolResult::error(vec![ContentBlock::text("the fail tool always fails")])
    }

    /// Counts slowly, reporting each number as progress when the client asked for progress
    /// (sent a progress token).
    #[tool(
        description = "Count slowly from 1 to `to` (default 5), pausing `delay_ms` (default 300) between numbers and reporting progress; for trying out long-running tools."
    )]
    async fn slow_count(
        &self,
        Parameters(SlowCountArgs { to, delay_ms }): Parameters<SlowCountArgs>,
        meta: RequestMetaObject,
        client: Peer<RoleServer>,
    ) -> String {
        let to = to.unwrap_or(5).clamp(1, 20);
        let delay = Duration::from_millis(delay_ms.unwrap_or(300).min(2000));
        let token = meta.get_progress_token();
        for i in 1..=to {
            tokio::time::sleep(delay).await;
            if let Some(token) = &token {
                let note = ProgressNotificationParam::new(token.clone(), f64::from(i))
                    .with_total(f64::from(to))
                    .with_message(format!("Counted {i} of {to}"));
                let _ = client.notify_progress(note).await;
            }
        }
        format!("Counted to {to}.")
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for DemoServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "agui-gateway-mcp-demo",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions("Demo tools: echo, add, fail, slow_count.")
    }
}

/// Serves the demo tools on stdin/stdout until the client hangs up. Logs must go to stderr:
/// stdout carries the protocol.
pub async fn serve_stdio() -> std::io::Result<()> {
    let running = DemoServer::new()
        .serve(rmcp::transport::stdio())
        .await
        .map_err(std::io::Error::other)?;
    running.waiting().await.map_err(std::io::Error::other)?;
    Ok(())
}
