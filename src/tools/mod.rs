//! Backend tools: one erased [`Tool`] trait, dynamic [`ToolSource`]s (MCP servers, OpenAPI
//! documents, search backends) whose tool lists may change, and a per-agent [`Registry`] that
//! validates arguments against each tool's JSON schema and enforces time and output limits.

pub mod builtin;
pub mod http;
pub mod mcp;
pub mod mcp_demo;
pub mod model_tool;
pub mod openapi;
pub mod search;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::conversation::ToolSpec;

/// What a tool call produced. Failures are results too: the model reads them and may retry.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// The result as text (JSON results stay JSON text).
    pub text: String,
    /// Whether the call failed.
    pub is_error: bool,
    /// Structured content, when the tool returned some (MCP `structuredContent`).
    pub structured: Option<Value>,
    /// A change to the run's shared state (`STATE_SNAPSHOT` / `STATE_DELTA`).
    pub state: Option<StateUpdate>,
}

/// A change a tool makes to the run's shared state.
#[derive(Debug, Clone, PartialEq)]
pub enum StateUpdate {
    /// The whole new state (sent as `STATE_SNAPSHOT`).
    Snapshot(Value),
    /// RFC 6902 operations (sent as `STATE_DELTA`).
    Delta(Vec<Value>),
}

impl ToolOutput {
    /// A successful result.
    pub fn ok(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: false,
            structured: None,
            state: None,
        }
    }

    /// A failed call, explained for the model.
    pub fn error(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: true,
            structured: None,
            state: None,
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
    /// The run's shared state when the call started (`Null` when there is none).
    pub state: Arc<Value>,
    /// Where the call may send events while it works (a nested agent's, progress), when the
    /// run streams them.
    pub side: Option<crate::runs::nested::SideTx>,
}

impl ToolContext {
    /// Sends `event` into the run on the call's behalf (an activity: progress, citations);
    /// false when the run streams nothing of its tools, is gone, or the call was cancelled.
    pub async fn emit(&self, event: crate::protocol::events::Event) -> bool {
        let Some(side) = &self.side else {
            return false;
        };
        tokio::select! {
            biased;
            _ = self.cancel.cancelled() => false,
            sent = side.send(crate::runs::nested::SideEvent::Emit(event)) => sent.is_ok(),
        }
    }
}

/// A backend tool the gateway runs in-process.
pub trait Tool: Send + Sync + 'static {
    /// Name, description and argument schema, as the model sees them.
    fn spec(&self) -> &ToolSpec;
    /// Runs one call. `args` is the parsed JSON object the model produced, already validated
    /// against the schema.
    fn call(&self, args: Value, ctx: ToolContext) -> BoxFuture<'_, ToolOutput>;
}

/// A tool with its compiled argument validator.
#[derive(Clone)]
pub struct SourceTool {
    /// The tool.
    pub tool: Arc<dyn Tool>,
    /// Its schema, compiled; `None` when the schema could not be compiled (calls go unchecked).
    pub validator: Option<Arc<jsonschema::Validator>>,
}

impl SourceTool {
    /// Wraps a tool, compiling its schema.
    pub fn new(tool: Arc<dyn Tool>) -> Self {
        let validator = compile_schema(&tool.spec().name, &tool.spec().input_schema);
        Self { tool, validator }
    }
}

/// Compiles an argument schema. Remote `$ref`s are never fetched (the crate is built without
/// resolvers); a schema that does not compile is logged and its tool's calls go unchecked.
pub fn compile_schema(tool: &str, schema: &Value) -> Option<Arc<jsonschema::Validator>> {
    match jsonschema::validator_for(schema) {
        Ok(v) => Some(Arc::new(v)),
        Err(e) => {
            tracing::warn!(tool, error = %e, "tool schema does not compile; its arguments are not validated");
            None
        }
    }
}

/// A provider of tools whose list may change at run time (an MCP server that reconnects, a
/// search backend). Every method returns at once; work happens in the source's own tasks.
pub trait ToolSource: Send + Sync + 'static {
    /// The source's name, for health output.
    fn name(&self) -> &str;
    /// The tools available right now.
    fn tools(&self) -> Vec<SourceTool>;
    /// Health as JSON: at least `{"status": "ok" | "degraded" | "down"}`.
    fn health(&self) -> Value;
    /// Closes connections and child processes.
    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// A source with no tools (placeholder for kinds not built in).
pub struct EmptySource(pub String);

impl ToolSource for EmptySource {
    fn name(&self) -> &str {
        &self.0
    }
    fn tools(&self) -> Vec<SourceTool> {
        Vec::new()
    }
    fn health(&self) -> Value {
        json!({"status": "down", "error": "not available in this build"})
    }
}

/// Which tools of an entry need a person's approval before they run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Approval {
    /// None.
    #[default]
    Never,
    /// All of them.
    Always,
    /// These names.
    Only(Vec<String>),
}

impl Approval {
    fn covers(&self, name: &str) -> bool {
        match self {
            Approval::Never => false,
            Approval::Always => true,
            Approval::Only(names) => names.iter().any(|n| n == name),
        }
    }
}

/// Limits and policies of a configured tool entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOptions {
    /// Longest a call may take before it becomes an error result.
    pub timeout: Duration,
    /// Results are cut at this many bytes.
    pub max_output_bytes: usize,
    /// Calls that wait for a person's approval.
    pub approval: Approval,
}

impl Default for ToolOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(60),
            max_output_bytes: 256 * 1024,
            approval: Approval::Never,
        }
    }
}

enum Entry {
    Static {
        tool: SourceTool,
        options: ToolOptions,
    },
    Source {
        source: Arc<dyn ToolSource>,
        options: ToolOptions,
    },
}

/// A tool found by name, with what governs its calls.
#[derive(Clone)]
pub struct Resolved {
    /// The tool and its validator.
    pub tool: SourceTool,
    /// Its limits and approval policy.
    pub options: ToolOptions,
}

/// The backend tools of one agent.
#[derive(Clone, Default)]
pub struct Registry {
    entries: Arc<Vec<Entry>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field(
                "tools",
                &self.specs().into_iter().map(|s| s.name).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Builds a [`Registry`].
#[derive(Default)]
pub struct RegistryBuilder {
    entries: Vec<Entry>,
    names: HashSet<String>,
}

impl RegistryBuilder {
    /// Adds a fixed tool; a second tool with the same name is refused.
    pub fn tool(&mut self, tool: Arc<dyn Tool>, options: ToolOptions) -> Result<(), String> {
        let name = tool.spec().name.clone();
        if !self.names.insert(name.clone()) {
            return Err(format!("duplicate tool name {name:?}"));
        }
        self.entries.push(Entry::Static {
            tool: SourceTool::new(tool),
            options,
        });
        Ok(())
    }

    /// Adds a dynamic source.
    pub fn source(&mut self, source: Arc<dyn ToolSource>, options: ToolOptions) {
        self.entries.push(Entry::Source { source, options });
    }

    /// The registry.
    pub fn build(self) -> Registry {
        Registry {
            entries: Arc::new(self.entries),
        }
    }
}

impl Registry {
    /// Every tool available now, first of a name wins (fixed tools come first).
    fn all(&self) -> Vec<Resolved> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for e in self.entries.iter() {
            let (tools, options) = match e {
                Entry::Static { tool, options } => (vec![tool.clone()], options),
                Entry::Source { source, options } => (source.tools(), options),
            };
            for t in tools {
                if seen.insert(t.tool.spec().name.clone()) {
                    out.push(Resolved {
                        tool: t,
                        options: options.clone(),
                    });
                }
            }
        }
        out
    }

    /// The tool called `name`.
    pub fn resolve(&self, name: &str) -> Option<Resolved> {
        self.all()
            .into_iter()
            .find(|r| r.tool.tool.spec().name == name)
    }

    /// Whether a tool called `name` exists now.
    pub fn contains(&self, name: &str) -> bool {
        self.resolve(name).is_some()
    }

    /// Whether calls of `name` wait for approval.
    pub fn requires_approval(&self, name: &str) -> bool {
        self.resolve(name)
            .is_some_and(|r| r.options.approval.covers(name))
    }

    /// The specs of all tools available now.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.all()
            .into_iter()
            .map(|r| r.tool.tool.spec().clone())
            .collect()
    }

    /// Health of every dynamic source.
    pub fn health(&self) -> Vec<Value> {
        self.entries
            .iter()
            .filter_map(|e| match e {
                Entry::Source { source, .. } => {
                    let mut h = source.health();
                    if let Value::Object(m) = &mut h {
                        m.entry("name").or_insert_with(|| json!(source.name()));
                        m.insert("tools".into(), json!(source.tools().len()));
                    }
                    Some(h)
                }
                Entry::Static { .. } => None,
            })
            .collect()
    }

    /// Closes every source.
    pub async fn close(&self) {
        for e in self.entries.iter() {
            if let Entry::Source { source, .. } = e {
                source.close().await;
            }
        }
    }

    /// Runs one call: parses and validates the arguments (errors go back to the model so it
    /// can repair them), applies the time limit and the output cap, and turns a cancelled run
    /// into an error result instead of waiting.
    pub async fn call(&self, name: &str, raw_args: &str, ctx: ToolContext) -> ToolOutput {
        let Some(Resolved { tool, options }) = self.resolve(name) else {
            let names: Vec<String> = self.specs().into_iter().map(|s| s.name).collect();
            return ToolOutput::error(format!(
                "Unknown tool {name:?}. Available tools: {}",
                names.join(", ")
            ));
        };
        let args = match parse_args(raw_args) {
            Ok(a) => a,
            Err(e) => return ToolOutput::error(e),
        };
        if let Some(problems) = validate(&tool, &args) {
            return ToolOutput::error(problems);
        }
        let cancel = ctx.cancel.clone();
        let out = tokio::select! {
            r = tokio::time::timeout(options.timeout, tool.tool.call(args, ctx)) => match r {
                Ok(out) => out,
                Err(_) => ToolOutput::error(format!("Tool {name} timed out after {} s.", options.timeout.as_secs_f32())),
            },
            _ = cancel.cancelled() => ToolOutput::error("Tool call cancelled."),
        };
        cap_output(out, options.max_output_bytes)
    }
}

/// A tool result from an HTTP answer: the body (cut at `max`, and marked so) as text, an error
/// result naming the status for a non-2xx answer (`{what} HTTP 404: ...`).
pub async fn http_output(resp: reqwest::Response, max: usize, what: &str) -> ToolOutput {
    let status = resp.status();
    let (body, truncated) = match crate::outbound::read_capped(resp, max).await {
        Ok(b) => b,
        Err(_) => return ToolOutput::error(format!("{what}: the response broke off.")),
    };
    let mut text = String::from_utf8_lossy(&body).into_owned();
    if truncated {
        text.push_str("\n[response truncated]");
    }
    if status.is_success() {
        ToolOutput::ok(text)
    } else {
        ToolOutput::error(format!("HTTP {}: {text}", status.as_u16()))
    }
}

/// Parses a model's argument text: empty is `{}`; anything but an object is refused.
pub fn parse_args(raw: &str) -> Result<Value, String> {
    if raw.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err("Invalid arguments: expected a JSON object.".into()),
        Err(e) => Err(format!("Invalid arguments: not valid JSON ({e}).")),
    }
}

/// Checks arguments against a tool's schema; `Some(explanation)` lists every problem.
pub fn validate(tool: &SourceTool, args: &Value) -> Option<String> {
    let v = tool.validator.as_ref()?;
    let problems: Vec<String> = v
        .iter_errors(args)
        .take(10)
        .map(|e| {
            let path = e.instance_path().to_string();
            if path.is_empty() {
                e.to_string()
            } else {
                format!("{path}: {e}")
            }
        })
        .collect();
    if problems.is_empty() {
        return None;
    }
    Some(format!(
        "Invalid arguments for {}: {}. Fix them and call the tool again.",
        tool.tool.spec().name,
        problems.join("; ")
    ))
}

fn cap_output(mut out: ToolOutput, max: usize) -> ToolOutput {
    if out.text.len() > max {
        let mut cut = max;
        while !out.text.is_char_boundary(cut) {
            cut -= 1;
        }
        out.text.truncate(cut);
        out.text.push_str("\n[output truncated]");
    }
    out
}

/// The argument schema of an agent run as a tool (ml-commons' `AgentTool`): one `question`
/// (other arguments pass as the inner run's parameters).
pub fn agent_tool_schema() -> Value {
    serde_json::json!({
        "type": "object",
        "properties": { "question": { "type": "string", "description": "What to ask the agent" } },
        "required": ["question"]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Echo(ToolSpec, Duration);
    impl Tool for Echo {
        fn spec(&self) -> &ToolSpec {
            &self.0
        }
        fn call(&self, args: Value, _ctx: ToolContext) -> BoxFuture<'_, ToolOutput> {
            let pause = self.1;
            Box::pin(async move {
                tokio::time::sleep(pause).await;
                ToolOutput::ok(args.to_string())
            })
        }
    }

    fn ctx() -> ToolContext {
        ToolContext {
            thread_id: "t".into(),
            run_id: "r".into(),
            tool_call_id: "c".into(),
            cancel: CancellationToken::new(),
            state: Default::default(),
            side: None,
        }
    }

    fn registry(pause: Duration, options: ToolOptions) -> Registry {
        let spec = ToolSpec {
            name: "echo".into(),
            description: String::new(),
            input_schema: json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}, "s": {"type": "string"}}, "required": ["n"]}),
            strict: None,
        };
        let mut b = RegistryBuilder::default();
        b.tool(Arc::new(Echo(spec.clone(), pause)), options.clone())
            .unwrap();
        assert!(
            b.tool(Arc::new(Echo(spec, pause)), options).is_err(),
            "duplicate names refused"
        );
        b.build()
    }

    #[tokio::test]
    async fn arguments_are_validated_against_the_schema() {
        let r = registry(Duration::ZERO, ToolOptions::default());
        assert_eq!(
            r.call("echo", r#"{"n": 2}"#, ctx()).await,
            ToolOutput::ok(r#"{"n":2}"#)
        );
        let bad = r.call("echo", r#"{"n": 0, "s": 5}"#, ctx()).await;
        assert!(bad.is_error);
        assert!(
            bad.text.contains("/n") && bad.text.contains("/s"),
            "{}",
            bad.text
        );
        assert!(
            r.call("echo", r#"{}"#, ctx())
                .await
                .text
                .contains("\"n\" is a required property")
        );
        assert!(
            r.call("echo", "[1]", ctx())
                .await
                .text
                .contains("expected a JSON object")
        );
        assert!(
            r.call("nope", "{}", ctx())
                .await
                .text
                .contains("Available tools: echo")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn slow_calls_time_out_and_big_outputs_are_cut() {
        let r = registry(
            Duration::from_secs(5),
            ToolOptions {
                timeout: Duration::from_secs(1),
                ..Default::default()
            },
        );
        let out = r.call("echo", r#"{"n": 1}"#, ctx()).await;
        assert!(out.is_error && out.text.contains("timed out"), "{out:?}");
        let r = registry(
            Duration::ZERO,
            ToolOptions {
                max_output_bytes: 4,
                ..Default::default()
            },
        );
        assert_eq!(
            r.call("echo", r#"{"n": 1}"#, ctx()).await.text,
            "{\"n\"\n[output truncated]"
        );
    }

    #[test]
    fn approval_policies() {
        assert!(Approval::Always.covers("x"));
        assert!(Approval::Only(vec!["x".into()]).covers("x"));
        assert!(!Approval::Only(vec!["x".into()]).covers("y"));
        let r = registry(
            Duration::ZERO,
            ToolOptions {
                approval: Approval::Always,
                ..Default::default()
            },
        );
        assert!(r.requires_approval("echo"));
    }
}
