//! One tool of an MCP server as a gateway [`Tool`]: calls go through the shared session,
//! and results become [`ToolOutput`]s.

use std::sync::Arc;

use futures::future::BoxFuture;
use rmcp::ServiceError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, RequestParamsMeta,
    ResourceContents,
};
use serde_json::Value;

use super::errors::describe;
use super::progress::{Board, watch};
use super::{Link, read};
use crate::conversation::ToolSpec;
use crate::tools::{Tool, ToolContext, ToolOutput};

/// One tool of an MCP server.
pub(super) struct McpTool {
    pub(super) spec: ToolSpec,
    /// The server's name for it (without the prefix).
    pub(super) original: String,
    pub(super) link: Arc<Link>,
}

impl McpTool {
    async fn run(&self, args: Value, ctx: ToolContext) -> ToolOutput {
        let server = &self.link.server;
        let peer = read(&self.link.peer).clone();
        let Some(peer) = peer else {
            return ToolOutput::error(format!(
                "Tool {} is unavailable: MCP server {server} is not connected right now. Try again later.",
                self.spec.name
            ));
        };
        let mut params = CallToolRequestParams::new(self.original.clone());
        if let Value::Object(map) = args {
            params = params.with_arguments(map);
        }
        // Dropping the request on cancellation sends notifications/cancelled to the server.
        let result = match &ctx.side {
            // The run streams what the call sends: the server's progress becomes an activity.
            Some(_) => {
                let route = self.link.progress.open();
                params.set_progress_token(route.token());
                let mut board = Board::new(&ctx.tool_call_id, &self.spec.name);
                let call = peer.call_tool_once(params);
                match watch(call, &route, &mut board, &ctx).await {
                    Some(r) => r,
                    None => return ToolOutput::error("Tool call cancelled."),
                }
            }
            None => tokio::select! {
                r = peer.call_tool_once(params) => r,
                _ = ctx.cancel.cancelled() => return ToolOutput::error("Tool call cancelled."),
            },
        };
        match result {
            Ok(CallToolResponse::Complete(r)) => to_output(r),
            Ok(_) => ToolOutput::error(format!(
                "Tool {} asked for interactive input or a background task, which this gateway does not support.",
                self.spec.name
            )),
            Err(ServiceError::McpError(e)) => {
                // The server answered; still let the supervisor look, in case it is going away.
                self.link.poke.notify_one();
                ToolOutput::error(format!(
                    "MCP server {server} refused the call: {}",
                    e.message
                ))
            }
            Err(e) => {
                self.link.poke.notify_one();
                let why = self.link.redactor.clean(&describe(&e));
                tracing::warn!(server = %server, tool = %self.spec.name, error = %why, "MCP call failed");
                // The details (addresses, transport errors) stay in the log: results reach
                // the model and the client.
                ToolOutput::error(format!(
                    "Tool {} failed: MCP server {server} is unavailable right now. Try again later.",
                    self.spec.name
                ))
            }
        }
    }
}

impl Tool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call(&self, args: Value, ctx: ToolContext) -> BoxFuture<'_, ToolOutput> {
        Box::pin(self.run(args, ctx))
    }
}

/// Text contents joined; other content as short placeholders; the structured content kept,
/// and used as the text when there is no text.
fn to_output(r: CallToolResult) -> ToolOutput {
    let parts: Vec<String> = r
        .content
        .iter()
        .map(|c| match c {
            ContentBlock::Text(t) => t.text.clone(),
            ContentBlock::Image(i) => format!("[image: {}]", i.mime_type),
            ContentBlock::Audio(a) => format!("[audio: {}]", a.mime_type),
            ContentBlock::Resource(e) => match &e.resource {
                ResourceContents::TextResourceContents { text, .. } => text.clone(),
                ResourceContents::BlobResourceContents { uri, mime_type, .. } => format!(
                    "[resource {uri}: {}]",
                    mime_type.as_deref().unwrap_or("binary")
                ),
                _ => "[resource]".to_string(),
            },
            ContentBlock::ResourceLink(l) => format!("[resource link: {} ({})]", l.name, l.uri),
            _ => "[unsupported content]".to_string(),
        })
        .collect();
    let text = if parts.is_empty() {
        r.structured_content
            .as_ref()
            .map(Value::to_string)
            .unwrap_or_default()
    } else {
        parts.join("\n")
    };
    ToolOutput {
        text,
        is_error: r.is_error.unwrap_or(false),
        structured: r.structured_content,
        state: None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn results_keep_text_structure_and_errors() {
        let mut r = CallToolResult::success(vec![
            ContentBlock::text("a"),
            ContentBlock::image("AAAA", "image/png"),
            ContentBlock::text("b"),
        ]);
        r.structured_content = Some(json!({"sum": 3}));
        let out = to_output(r);
        assert_eq!(out.text, "a\n[image: image/png]\nb");
        assert_eq!(out.structured, Some(json!({"sum": 3})));
        assert!(!out.is_error);
        let mut r = CallToolResult::error(vec![]);
        r.structured_content = Some(json!({"code": 7}));
        let out = to_output(r);
        assert_eq!((out.text.as_str(), out.is_error), ("{\"code\":7}", true));
    }
}
