//! Flow agents: their tools run in a fixed order (or the order of `selected_tools`), each one's
//! templated parameters filled from the execution's parameters and the outputs before it
//! (`${parameters.<tool>.output}`). A conversational flow also keeps the exchange in memory and
//! offers the earlier turns as `${parameters.chat_history}`. Every step streams as a backend
//! tool call, and the last output as the answer.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::history::{ThreadStore, last_user_text, message_text};
use super::react::new_id;
use super::{Agent, Overrides, Report};
use crate::config::FlowStep;
use crate::connector::template::{Escape, render, render_value};
use crate::protocol::events::{Event, ToolResultContent};
use crate::protocol::input::RunAgentInput;
use crate::runs::Emitter;
use crate::store::Store;
use crate::tools::ToolContext;

/// Why a flow stopped early: a code and a message for `RUN_ERROR`.
type Stop = (String, String);

/// Runs a flow agent on `input`.
pub async fn run(
    agent: &Agent,
    input: &RunAgentInput,
    emitter: &mut Emitter,
    cancel: CancellationToken,
    store: Option<Arc<dyn Store>>,
) -> Report {
    let overrides = Overrides::of(input);
    let thread_store = agent.thread_store(store, &input.thread_id, &overrides);
    let mut report = Report {
        stop_reason: "end_turn",
        ..Report::default()
    };
    let outcome = drive(
        agent,
        input,
        emitter,
        &cancel,
        thread_store.as_ref(),
        &mut report,
    )
    .await;
    // A failed flow keeps the messages that completed (a finished one saved them already).
    if outcome.is_err()
        && let Some(ts) = &thread_store
        && let Err(e) = ts.save(emitter.transcript().complete_messages()).await
    {
        tracing::error!(thread = %input.thread_id, error = %e, "could not save the flow's messages");
    }
    if let Err((code, message)) = outcome {
        emitter.fail(&code, message.clone()).await;
        report.error = Some((code, message));
    }
    report.messages = emitter.transcript().own_messages();
    report
}

/// How many earlier interactions `${parameters.chat_history}` holds unless
/// `message_history_limit` says otherwise (ml-commons' default).
const DEFAULT_HISTORY_INTERACTIONS: usize = 10;

/// The earlier interactions of the thread (a question and the answer it got) as ml-commons'
/// conversational flow writes them into `${parameters.chat_history}`: a heading, then
/// `Human:<question>` / `Assistant:<answer>` lines, the last `limit` interactions. Questions
/// still without an answer are left out; no interaction gives no history (the placeholder's
/// default applies).
fn chat_history(stored: &[Value], current: &[Value], limit: usize) -> Option<String> {
    let current_ids: Vec<&str> = current
        .iter()
        .filter_map(|m| m.get("id").and_then(Value::as_str))
        .collect();
    let mut pairs: Vec<(String, String)> = Vec::new();
    let mut question: Option<String> = None;
    let mut answer = String::new();
    let close = |q: &mut Option<String>, a: &mut String, pairs: &mut Vec<(String, String)>| {
        if let Some(q) = q.take()
            && !a.is_empty()
        {
            pairs.push((q, std::mem::take(a)));
        }
        a.clear();
    };
    for m in stored.iter().filter(|m| {
        !m.get("id")
            .and_then(Value::as_str)
            .is_some_and(|id| current_ids.contains(&id))
    }) {
        match m.get("role").and_then(Value::as_str) {
            Some("user") => {
                close(&mut question, &mut answer, &mut pairs);
                question = Some(message_text(m, " "));
            }
            Some("assistant") if m.get("content").is_some_and(|c| !c.is_null()) => {
                let text = message_text(m, " ");
                if !text.is_empty() {
                    answer = text;
                }
            }
            _ => {}
        }
    }
    close(&mut question, &mut answer, &mut pairs);
    let skip = pairs.len().saturating_sub(limit);
    let pairs = &pairs[skip..];
    if pairs.is_empty() {
        return None;
    }
    let mut out = String::from(
        "Below is Chat History between Human and AI which sorted by time with asc order:\n",
    );
    for (q, a) in pairs {
        out.push_str(&format!("Human:{q}\nAssistant:{a}\n"));
    }
    Some(out)
}

fn steps<'a>(agent: &'a Agent, overrides: &Overrides) -> Result<Vec<&'a FlowStep>, Stop> {
    let Some(selected) = &overrides.selected_tools else {
        return Ok(agent.flow.iter().collect());
    };
    selected
        .iter()
        .map(|name| {
            agent.flow.iter().find(|s| &s.tool == name).ok_or_else(|| {
                let names: Vec<&str> = agent.flow.iter().map(|s| s.tool.as_str()).collect();
                (
                    "INVALID_PARAMETERS".to_string(),
                    format!("selected_tools names {name:?}, which is not a tool of this agent ({names:?})"),
                )
            })
        })
        .collect()
}

/// The parameters of one step as ml-commons builds them: the registered ones, each replaced by
/// an execution parameter of the same name (a `prompt` given at execution replaces the
/// registered template), then `<tool name>.<key>` execution parameters for this step alone.
fn step_parameters(step: &FlowStep, execution: &Map<String, Value>) -> Map<String, Value> {
    let mut out = step.parameters.clone();
    for (k, v) in out.iter_mut() {
        if let Some(given) = execution.get(k) {
            *v = given.clone();
        }
    }
    let prefix = format!("{}.", step.tool);
    for (k, v) in execution {
        if let Some(key) = k.strip_prefix(&prefix)
            && key != "output"
            && key != "description"
        {
            out.insert(key.to_string(), v.clone());
        }
    }
    out
}

/// The arguments of one step: its parameters (see [`step_parameters`]) with placeholders
/// filled; an `input` that holds a JSON object (ml-commons' `"input": "{\"index\": ...}"`)
/// gives the arguments itself.
fn step_args(
    step: &FlowStep,
    params: &Map<String, Value>,
    execution: &Map<String, Value>,
    schema: &Value,
) -> Result<Map<String, Value>, Stop> {
    let bad = |e: String| {
        (
            "INVALID_PARAMETERS".to_string(),
            format!("tool {}: {e}", step.tool),
        )
    };
    let mut own = step_parameters(step, execution);
    let input = own.remove("input");
    let mut args = match render_value(&Value::Object(own), params, Escape::Raw)
        .map_err(|e| bad(e.to_string()))?
    {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    // `input` may name the step's own parameters (`${parameters.query}`) besides the flow's.
    let mut scope = params.clone();
    scope.extend(args.clone());
    match input {
        // A JSON template: strings land inside JSON strings, objects as JSON text.
        Some(Value::String(t)) if t.trim_start().starts_with('{') => {
            let text =
                render(&t, &scope, &Map::new(), Escape::Json).map_err(|e| bad(e.to_string()))?;
            match serde_json::from_str::<Value>(&text) {
                Ok(Value::Object(inner)) => args.extend(inner),
                _ => return Err(bad("its input is not a JSON object once filled".into())),
            }
        }
        Some(other) => {
            let v = render_value(&other, &scope, Escape::Raw).map_err(|e| bad(e.to_string()))?;
            args.insert("input".into(), v);
        }
        None => {}
    }
    // Configuration keys of the step are not arguments.
    args.remove("model_id");
    let properties = schema.get("properties").and_then(Value::as_object);
    if let Some(props) = properties {
        for key in props.keys() {
            if !args.contains_key(key)
                && let Some(v) = params.get(key)
            {
                args.insert(key.clone(), v.clone());
            }
        }
        // Only what the schema knows (the registry validates strictly), except a prompt.
        if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
            args.retain(|k, _| props.contains_key(k));
        }
    }
    Ok(args)
}

async fn drive(
    agent: &Agent,
    input: &RunAgentInput,
    emitter: &mut Emitter,
    cancel: &CancellationToken,
    thread_store: Option<&ThreadStore>,
    report: &mut Report,
) -> Result<(), Stop> {
    let halted = |e: crate::runs::EmitError| ("INTERNAL_ERROR".to_string(), e.to_string());
    emitter
        .emit(super::history::run_started(input, emitter.is_v1()))
        .await
        .map_err(halted)?;
    let overrides = Overrides::of(input);
    let mut params = agent.parameters.clone();
    params.extend(overrides.parameters.clone());
    if !params.contains_key("question")
        && let Some(q) = last_user_text(&input.raw_messages)
    {
        params.insert("question".into(), json!(q));
    }
    let unavailable = |e: crate::store::StoreError| {
        tracing::error!(error = %e, "store failed");
        (
            "STORE_UNAVAILABLE".to_string(),
            "The conversation store is unavailable; try again shortly.".to_string(),
        )
    };
    if let Some(ts) = thread_store {
        let stored = ts.prepare(&input.raw_messages).await.map_err(unavailable)?;
        let limit = overrides
            .message_history_limit
            .or(agent.memory.message_history_limit);
        if let Some(h) = chat_history(
            &stored,
            &input.raw_messages,
            limit.unwrap_or(DEFAULT_HISTORY_INTERACTIONS),
        ) {
            params.insert("chat_history".into(), json!(h));
        }
    }
    let steps = steps(agent, &overrides)?;
    let message_id = new_id("msg");
    let mut last = String::new();
    for step in steps {
        if cancel.is_cancelled() {
            return Err(("CANCELLED".into(), "The run was cancelled.".into()));
        }
        let schema = agent
            .tools
            .specs()
            .into_iter()
            .find(|s| s.name == step.tool)
            .map(|s| s.input_schema)
            .unwrap_or(Value::Null);
        let args =
            Value::Object(step_args(step, &params, &overrides.parameters, &schema)?).to_string();
        let call_id = new_id("call");
        for event in [
            Event::StepStarted {
                step_name: step.tool.clone(),
            },
            Event::ToolCallStart {
                tool_call_id: call_id.clone(),
                tool_call_name: step.tool.clone(),
                parent_message_id: Some(message_id.clone()),
            },
            Event::ToolCallArgs {
                tool_call_id: call_id.clone(),
                delta: args.clone(),
            },
            Event::ToolCallEnd {
                tool_call_id: call_id.clone(),
            },
        ] {
            emitter.emit(event).await.map_err(halted)?;
        }
        let ctx = ToolContext {
            thread_id: input.thread_id.clone(),
            run_id: input.run_id.clone(),
            tool_call_id: call_id.clone(),
            cancel: cancel.clone(),
            state: Arc::new(input.state.clone().unwrap_or_default()),
            side: None,
        };
        let out = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(("CANCELLED".into(), "The run was cancelled.".into())),
            out = super::execute_tool(&agent.tools, &step.tool, &call_id, &args, ctx) => out,
        };
        emitter
            .emit(Event::ToolCallResult {
                message_id: new_id("msg"),
                tool_call_id: call_id.clone(),
                content: ToolResultContent::Text(out.text.clone()),
                role: Some("tool".into()),
            })
            .await
            .map_err(halted)?;
        emitter
            .emit(Event::StepFinished {
                step_name: step.tool.clone(),
            })
            .await
            .map_err(halted)?;
        if out.is_error {
            return Err((
                "TOOL_FAILED".into(),
                format!("tool {} failed: {}", step.tool, out.text),
            ));
        }
        params.insert(format!("{}.output", step.tool), json!(out.text));
        if step.include_output {
            report.outputs.push((step.tool.clone(), out.text.clone()));
        }
        last = out.text;
        report.last_tool = Some(step.tool.clone());
    }
    if !last.is_empty() {
        let answer = new_id("msg");
        for event in [
            Event::TextMessageStart {
                message_id: answer.clone(),
                role: Some("assistant".into()),
                name: None,
            },
            Event::TextMessageContent {
                message_id: answer.clone(),
                delta: last,
            },
            Event::TextMessageEnd { message_id: answer },
        ] {
            emitter.emit(event).await.map_err(halted)?;
        }
    }
    // Stored before RUN_FINISHED: a client told the run finished may count on its messages.
    if let Some(ts) = thread_store {
        ts.save(emitter.transcript().messages())
            .await
            .map_err(unavailable)?;
    }
    emitter
        .emit(Event::RunFinished {
            thread_id: input.thread_id.clone(),
            run_id: input.run_id.clone(),
            result: None,
            outcome: None,
            usage: None,
        })
        .await
        .map_err(halted)?;
    Ok(())
}
