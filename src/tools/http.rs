//! HTTP tools: the call's JSON arguments are POSTed to a URL (or sent as the query of a GET);
//! the response body is the result. Non-2xx answers are error results the model can read.

use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;

use super::{Tool, ToolContext, ToolOutput};
use crate::conversation::ToolSpec;
use crate::redact::Secret;

/// Responses are cut at this size so a huge body cannot flood the model context or memory.
const MAX_RESPONSE: usize = 1024 * 1024;

/// How the arguments travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// JSON body.
    Post,
    /// Query string built from top-level scalar arguments.
    Get,
}

/// One HTTP tool.
pub struct HttpTool {
    spec: ToolSpec,
    client: reqwest::Client,
    url: String,
    method: Method,
    headers: Vec<(String, Secret)>,
    timeout: Duration,
}

impl HttpTool {
    /// An HTTP tool sharing `client`'s connection pool.
    pub fn new(
        spec: ToolSpec,
        client: reqwest::Client,
        url: String,
        method: Method,
        headers: Vec<(String, Secret)>,
        timeout: Duration,
    ) -> Self {
        Self {
            spec,
            client,
            url,
            method,
            headers,
            timeout,
        }
    }

    async fn run(&self, args: Value, ctx: ToolContext) -> ToolOutput {
        let mut req = match self.method {
            Method::Post => self.client.post(&self.url).json(&args),
            Method::Get => {
                let query: Vec<(String, String)> = args
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| {
                        (
                            k.clone(),
                            v.as_str()
                                .map(str::to_string)
                                .unwrap_or_else(|| v.to_string()),
                        )
                    })
                    .collect();
                self.client.get(&self.url).query(&query)
            }
        };
        req = req
            .timeout(self.timeout)
            .header("x-agui-thread-id", &ctx.thread_id)
            .header("x-agui-run-id", &ctx.run_id)
            .header("x-agui-tool-call-id", &ctx.tool_call_id);
        for (k, v) in &self.headers {
            req = req.header(k.as_str(), v.expose());
        }
        let req = crate::telemetry::with_traceparent(req);
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) if e.is_timeout() => {
                return ToolOutput::error(format!(
                    "Tool {} timed out after {} s.",
                    self.spec.name,
                    self.timeout.as_secs()
                ));
            }
            Err(e) => {
                tracing::warn!(tool = %self.spec.name, error = %e, "http tool request failed");
                return ToolOutput::error(format!("Tool {} could not be reached.", self.spec.name));
            }
        };
        super::http_output(resp, MAX_RESPONSE, &format!("Tool {}", self.spec.name)).await
    }
}

impl Tool for HttpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call(&self, args: Value, ctx: ToolContext) -> BoxFuture<'_, ToolOutput> {
        Box::pin(self.run(args, ctx))
    }
}
