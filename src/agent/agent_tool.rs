//! ml-commons' `AgentTool`: another registered agent run as a tool. The call's `question` (and
//! any other argument, as the inner run's parameters) go to the inner agent; its answer is the
//! tool result. The inner run is cancelled with the outer one, keeps no memory of its own, and
//! agents calling agents nest at most [`MAX_DEPTH`] deep.

use std::sync::{Arc, OnceLock, Weak};

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::registry::Agents;
use crate::connector::{Invalid, invalid};
use crate::conversation::ToolSpec;
use crate::runs::Emitter;
use crate::runs::nested::{SIDE_CAPACITY, SideEvent, Subagent};
use crate::tools::{Tool, ToolContext, ToolOutput};

/// How deep agents may call agents (an agent reaching itself stops here at the latest).
pub const MAX_DEPTH: u32 = 5;

tokio::task_local! {
    /// How many agent tools the current run is nested in (a run and its tools share a task).
    static DEPTH: u32;
}

/// The agent registry as tools reach it: set once the registry exists (it owns the agents
/// whose tools hold this, hence weak).
pub type AgentLink = Arc<OnceLock<Weak<Agents>>>;

/// Another agent as a tool.
pub struct AgentTool {
    spec: ToolSpec,
    agent_id: String,
    agents: AgentLink,
}

impl AgentTool {
    /// A tool named by `spec` running agent `agent_id` of the registry behind `agents`.
    pub fn new(spec: ToolSpec, agent_id: String, agents: AgentLink) -> Self {
        Self {
            spec,
            agent_id,
            agents,
        }
    }

    async fn run(&self, args: Value, ctx: ToolContext) -> ToolOutput {
        let depth = DEPTH.try_with(|d| *d).unwrap_or(0);
        if depth >= MAX_DEPTH {
            return ToolOutput::error(format!(
                "agent {:?} was not run: agents calling agents nest at most {MAX_DEPTH} deep",
                self.agent_id
            ));
        }
        let Some(agents) = self.agents.get().and_then(Weak::upgrade) else {
            return ToolOutput::error("agents are not available (the gateway is shutting down)");
        };
        let agent = match agents.get(&self.agent_id).await {
            Ok(Some(a)) => a,
            Ok(None) => {
                return ToolOutput::error(format!("no agent {:?} is registered", self.agent_id));
            }
            Err(e) => {
                tracing::warn!(agent = %self.agent_id, error = %e, "agent tool could not load its agent");
                return ToolOutput::error(format!("agent {:?} is unavailable", self.agent_id));
            }
        };
        let mut params: Map<String, Value> = match args {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        params.remove("agent_id");
        let question = params
            .get("question")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let run = json!({
            "threadId": crate::agent::registry::new_doc_id(),
            "runId": crate::protocol::new_id("run"),
            "parentRunId": ctx.run_id,
            "messages": [{ "id": crate::protocol::new_id("msg"), "role": "user", "content": question }],
            "tools": [],
            "context": [],
            "state": {},
            "forwardedProps": { "parameters": params },
            "protocolVersion": "1.0",
        });
        let input = match crate::protocol::input::parse(run.to_string().as_bytes()) {
            Ok(i) => i,
            Err(e) => return ToolOutput::error(format!("{}: {}", e.field, e.message)),
        };
        let cancel = ctx.cancel.child_token();
        // The inner run streams as a subagent of the calling run; where the caller streams
        // nothing (a flow step, a decided approval), its events are dropped unencoded.
        let (side, mut dropped) = match ctx.side {
            Some(side) => (side, None),
            None => {
                let (tx, rx) = mpsc::channel(SIDE_CAPACITY);
                (tx, Some(rx))
            }
        };
        let accounts = dropped.is_none().then(|| side.clone());
        let sub = Subagent {
            description: Some(agent.description.clone()).filter(|d| !d.is_empty()),
            parent_tool_call_id: Some(ctx.tool_call_id.clone()),
            ..Subagent::new(agent.name.clone())
        };
        // The emitter ends with the inner run, so a local drain sees its channel close.
        let inner = DEPTH.scope(depth + 1, async move {
            let mut emitter = Emitter::nested(side, Arc::new(sub));
            crate::agent::drive(&agent, &input, &mut emitter, cancel, None).await
        });
        let drain = async {
            if let Some(rx) = &mut dropped {
                while rx.recv().await.is_some() {}
            }
        };
        let (mut report, ()) = tokio::join!(inner, drain);
        // Its model calls are the calling run's to report.
        let usage = std::mem::take(&mut report.usage);
        if let Some(accounts) = accounts
            && !usage.is_empty()
        {
            let _ = accounts.send(SideEvent::Usage(usage)).await;
        }
        if let Some((code, message)) = report.error {
            return ToolOutput::error(format!(
                "agent {:?} failed ({code}): {message}",
                self.agent_id
            ));
        }
        let answer = crate::runs::nested::answer(&report.messages);
        ToolOutput::ok(answer)
    }
}

impl Tool for AgentTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call(&self, args: Value, ctx: ToolContext) -> BoxFuture<'_, ToolOutput> {
        Box::pin(self.run(args, ctx))
    }
}

/// The agents an agent registration's `AgentTool` entries name, with their fields.
fn targets(body: &Value) -> Vec<(String, String)> {
    let Some(tools) = body.get("tools").and_then(Value::as_array) else {
        return Vec::new();
    };
    tools
        .iter()
        .enumerate()
        .filter(|(_, t)| t.get("type").and_then(Value::as_str) == Some("AgentTool"))
        .filter_map(|(i, t)| {
            let id = t.pointer("/parameters/agent_id")?.as_str()?;
            Some((format!("tools[{i}].parameters.agent_id"), id.to_string()))
        })
        .collect()
}

/// At registration: every agent an `AgentTool` names exists, and the chain of agents it
/// reaches nests no deeper than [`MAX_DEPTH`] (so never reaches back to itself).
pub async fn check_targets(body: &Value, agents: &Agents) -> Result<(), Invalid> {
    for (field, id) in targets(body) {
        let found = agents
            .get(&id)
            .await
            .map_err(|e| invalid(field.clone(), format!("agent {id:?}: {e}")))?;
        if found.is_none() {
            return Err(invalid(field, format!("no agent {id:?} is registered")));
        }
        // Walk what it reaches, one level at a time (a chain reaching back to an agent in it
        // never ends, so it fails the depth bound too).
        let mut level = vec![id.clone()];
        for depth in 1..=MAX_DEPTH {
            let mut next: Vec<String> = Vec::new();
            for a in &level {
                let Some(doc) = agents.stored_body(a).await else {
                    continue;
                };
                for (_, t) in targets(&doc) {
                    if !next.contains(&t) {
                        next.push(t);
                    }
                }
            }
            if next.is_empty() {
                break;
            }
            if depth == MAX_DEPTH {
                return Err(invalid(
                    field,
                    format!(
                        "agent {id:?} calls agents nested {MAX_DEPTH} or more deep (or calls itself); agents calling agents nest at most {MAX_DEPTH} deep"
                    ),
                ));
            }
            level = next;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_call_nested_too_deep_is_refused_before_anything_runs() {
        let tool = AgentTool::new(
            ToolSpec {
                name: "down".into(),
                description: String::new(),
                input_schema: crate::tools::agent_tool_schema(),
                strict: None,
            },
            "inner".into(),
            AgentLink::default(),
        );
        let ctx = ToolContext {
            thread_id: "t".into(),
            run_id: "r".into(),
            tool_call_id: "c".into(),
            cancel: tokio_util::sync::CancellationToken::new(),
            state: Arc::new(Value::Null),
            side: None,
        };
        let out = DEPTH
            .scope(MAX_DEPTH, tool.call(json!({"question": "q"}), ctx.clone()))
            .await;
        assert!(out.is_error);
        assert!(out.text.contains("nest at most"), "{}", out.text);
        // One level less gets as far as looking the agent up (no registry here).
        let out = DEPTH
            .scope(MAX_DEPTH - 1, tool.call(json!({"question": "q"}), ctx))
            .await;
        assert!(out.is_error);
        assert!(!out.text.contains("nest at most"), "{}", out.text);
    }
}
