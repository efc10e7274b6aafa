//! A tiny MCP server with three tools (`echo`, `add`, `fail`), so there is always a server to
//! try MCP tools against: `agui-gateway mcp-demo-server` serves it over stdio, and tests mount
//! [`DemoServer`] in-process behind rmcp's streamable HTTP service.

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ServerHandler, ServiceExt, schemars, tool, tool_handler, tool_router};
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
    /// A server with the three demo tools.
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
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for DemoServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "agui-gateway-mcp-demo",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions("Demo tools: echo, add, fail.")
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
