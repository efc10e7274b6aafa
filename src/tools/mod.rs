//! Backend tools: one erased [`Tool`] trait, a [`Registry`] per agent, one file per kind.

pub mod builtin;
pub mod http;

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::conversation::ToolSpec;

/// What a tool call produced. Failures are results too: the model reads them and may retry.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// The result as text (JSON results stay JSON text).
    pub text: String,
    /// Whether the call failed.
    pub is_error: bool,
}

impl ToolOutput {
    /// A successful result.
    pub fn ok(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: false,
        }
    }

    /// A failed call, explained for the model.
    pub fn error(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: true,
        }
    }
}

/// What a tool call may know about the run it serves.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The thread.
    pub thread_id: String,
    /// The run.
    pub run_id: String,
    /// The call's id.
    pub tool_call_id: String,
    /// Cancelled when the run is.
    pub cancel: CancellationToken,
}

/// A backend tool the gateway runs in-process.
pub trait Tool: Send + Sync + 'static {
    /// Name, description and argument schema, as the model sees them.
    fn spec(&self) -> &ToolSpec;
    /// Runs one call. `args` is the parsed JSON object the model produced.
    fn call(&self, args: Value, ctx: ToolContext) -> BoxFuture<'_, ToolOutput>;
}

/// The backend tools of one agent, by name.
#[derive(Clone, Default)]
pub struct Registry {
    tools: HashMap<String, Arc<dyn Tool>>,
    /// Names in declaration order, so model requests are stable.
    order: Vec<String>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("tools", &self.order)
            .finish()
    }
}

impl Registry {
    /// Adds a tool; a second tool with the same name is refused.
    pub fn insert(&mut self, tool: Arc<dyn Tool>) -> Result<(), String> {
        let name = tool.spec().name.clone();
        if self.tools.contains_key(&name) {
            return Err(format!("duplicate tool name {name:?}"));
        }
        self.order.push(name.clone());
        self.tools.insert(name, tool);
        Ok(())
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }

    /// Whether a tool called `name` exists.
    pub fn contains(&self, name: &str) -> bool {
        self.tools.contains_key(name)
    }

    /// The specs of all tools, in declaration order.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.order
            .iter()
            .filter_map(|n| self.tools.get(n))
            .map(|t| t.spec().clone())
            .collect()
    }

    /// How many tools there are.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Runs one call: parses the arguments, refuses non-objects, and turns a cancelled run
    /// into an error result instead of waiting.
    pub async fn call(&self, name: &str, raw_args: &str, ctx: ToolContext) -> ToolOutput {
        let Some(tool) = self.get(name) else {
            return ToolOutput::error(format!(
                "Unknown tool {name:?}. Available tools: {}",
                self.order.join(", ")
            ));
        };
        let args = if raw_args.trim().is_empty() {
            Value::Object(Default::default())
        } else {
            match serde_json::from_str::<Value>(raw_args) {
                Ok(v @ Value::Object(_)) => v,
                Ok(_) => return ToolOutput::error("Invalid arguments: expected a JSON object."),
                Err(e) => {
                    return ToolOutput::error(format!("Invalid arguments: not valid JSON ({e})."));
                }
            }
        };
        let cancel = ctx.cancel.clone();
        tokio::select! {
            out = tool.call(args, ctx) => out,
            _ = cancel.cancelled() => ToolOutput::error("Tool call cancelled."),
        }
    }
}
