//! The hybrid ReAct loop. Frontend tools are the request's `tools`; backend tools are the
//! agent's. Each model turn streams as AG-UI events; backend calls of a turn run concurrently
//! and the loop continues; any frontend call ends the run, leaving that call for the browser,
//! whose next run on the thread carries the result.
//!
//! Here: the loop and how a run ends. `turn`: one model turn streamed as events.
//! `dispatch`: running the turn's backend calls, approvals.

use std::collections::HashSet;
use std::sync::Arc;

use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::approvals;
use super::history::{ThreadStore, limit_history, parse_messages};
use super::usage::Ledger;
use super::{Agent, Overrides, Report};
use crate::conversation::from_agui::{self, context_prompt};
use crate::conversation::{ContentBlock, Message, Role, ToolResultBlock, ToolSpec, redacted_value};
use crate::model::{ModelError, ModelEvent, ModelRequest, StopReason, Usage, media, retry};
use crate::protocol::events::{EncryptedSubtype, Event, Outcome, ToolResultContent};
use crate::protocol::input::RunAgentInput;
use crate::protocol::verify::Violation;
use crate::runs::nested::{SIDE_CAPACITY, SideEvent};
use crate::runs::patch::apply_ops;
use crate::runs::{EmitError, Emitter};
use crate::store::{Store, StoreError};
use crate::tools::{StateUpdate, ToolContext, ToolOutput};

mod dispatch;
mod turn;

use dispatch::args_value;

/// Why a run stopped early.
#[derive(Debug)]
enum Halt {
    Disconnected,
    Cancelled,
    Model(ModelError),
    Violation(Violation),
    Store(StoreError),
    /// The execution's parameters do not fill the agent's templates.
    Invalid(String),
}

impl From<EmitError> for Halt {
    fn from(e: EmitError) -> Self {
        match e {
            EmitError::Disconnected => Halt::Disconnected,
            EmitError::Violation(v) => Halt::Violation(v),
        }
    }
}

pub use crate::protocol::new_id;

/// Runs `agent` on `input`, streaming through `emitter` until the run ends one way or another.
/// Every path ends the stream with `RUN_FINISHED` or `RUN_ERROR` (unless the client is gone).
pub async fn run(
    agent: &Agent,
    input: &RunAgentInput,
    emitter: &mut Emitter,
    cancel: CancellationToken,
    store: Option<Arc<dyn Store>>,
) -> Report {
    let overrides = Overrides::of(input);
    let thread_store = agent.thread_store(store, &input.thread_id, &overrides);
    let mut run = Run {
        agent,
        input,
        emitter,
        cancel,
        used_call_ids: HashSet::new(),
        usage: Ledger::default(),
        notices: Vec::new(),
        thread_store,
        saved: false,
        stop: "end_turn",
        overrides,
        state: Arc::new(match &input.state {
            Some(v @ Value::Object(_)) => v.clone(),
            _ => json!({}),
        }),
    };
    let outcome = run.drive().await;
    // Persist what the run produced before anything else can fail: a failed run keeps the
    // messages that completed.
    if let Some(ts) = &run.thread_store
        && !run.saved
    {
        let produced = match &outcome {
            Ok(()) => run.emitter.transcript().messages(),
            Err(_) => run.emitter.transcript().complete_messages(),
        };
        if let Err(e) = ts.save(produced).await {
            tracing::error!(thread = %input.thread_id, error = %e, "could not save the run's messages");
        }
    }
    let mut report = Report {
        stop_reason: run.stop,
        error: None,
        ..Report::default()
    };
    match outcome {
        Ok(()) => {}
        Err(Halt::Disconnected) => {
            report.error = Some(("DISCONNECTED".into(), "The client disconnected.".into()));
            tracing::info!(thread = %input.thread_id, run = %input.run_id, "client disconnected")
        }
        Err(Halt::Cancelled) => {
            tracing::info!(thread = %input.thread_id, run = %input.run_id, "run cancelled");
            report.error = Some(("CANCELLED".into(), "The run was cancelled.".into()));
            run.emitter
                .fail("CANCELLED", "The run was cancelled.")
                .await;
        }
        Err(Halt::Model(e)) => {
            tracing::warn!(thread = %input.thread_id, run = %input.run_id, error = %e, "model call failed");
            let usage = run.usage.ag_ui();
            report.error = Some((e.code().to_string(), e.to_string()));
            run.emitter
                .fail_with_usage(e.code(), e.to_string(), usage)
                .await;
        }
        Err(Halt::Store(e)) => {
            tracing::error!(thread = %input.thread_id, run = %input.run_id, error = %e, "store failed");
            report.error = Some((
                "STORE_UNAVAILABLE".into(),
                "The conversation store is unavailable; try again shortly.".into(),
            ));
            run.emitter
                .fail(
                    "STORE_UNAVAILABLE",
                    "The conversation store is unavailable; try again shortly.",
                )
                .await;
        }
        Err(Halt::Invalid(message)) => {
            report.error = Some(("INVALID_PARAMETERS".into(), message.clone()));
            run.emitter.fail("INVALID_PARAMETERS", message).await;
        }
        Err(Halt::Violation(v)) => {
            tracing::error!(thread = %input.thread_id, run = %input.run_id, violation = %v, "run stopped by the verifier");
            report.error = Some((
                "INTERNAL_ERROR".into(),
                "The gateway produced an invalid event sequence and stopped the run.".into(),
            ));
            run.emitter
                .fail(
                    "INTERNAL_ERROR",
                    "The gateway produced an invalid event sequence and stopped the run.",
                )
                .await;
        }
    }
    report.messages = run.emitter.transcript().own_messages();
    report.usage = std::mem::take(&mut run.usage);
    report.notices = std::mem::take(&mut run.notices);
    report
}

struct Run<'a> {
    agent: &'a Agent,
    input: &'a RunAgentInput,
    emitter: &'a mut Emitter,
    cancel: CancellationToken,
    /// Tool-call ids already used in this thread: a provider that repeats ids (`call_0` every
    /// turn) would otherwise make the client attach new calls to old messages.
    used_call_ids: HashSet<String>,
    /// Token counts of every model call of the run.
    usage: Ledger,
    /// Notices told the client (see [`Report::notices`]).
    notices: Vec<(String, Value)>,
    /// Where the thread is kept, unless the agent opted out.
    thread_store: Option<ThreadStore>,
    /// Whether the run's messages were already saved (before a final snapshot).
    saved: bool,
    /// Why the run stopped: `end_turn`, `max_iterations` or `tool_use` (waiting on the client).
    stop: &'static str,
    /// What the execution's parameters change for this run.
    overrides: Overrides,
    /// The shared application state, as the client sent it and tools changed it since.
    state: Arc<Value>,
}

/// What the model is asked about, turn after turn.
struct Conversation {
    system: Vec<String>,
    messages: Vec<Message>,
    /// Backend and frontend tools, as the model sees them.
    tools: Vec<ToolSpec>,
    /// The client's tools: a call to one ends the run.
    frontend: Vec<ToolSpec>,
}

/// One tool call of a model turn.
#[derive(Debug)]
struct Call {
    /// The id the provider used (its deltas refer to it).
    provider_id: String,
    /// The id on the wire and in history (unique in the thread).
    id: String,
    name: String,
    args: String,
    ended: bool,
}

/// What one model turn produced.
#[derive(Debug)]
struct Turn {
    blocks: Vec<ContentBlock>,
    calls: Vec<Call>,
    stop: Option<StopReason>,
}

impl Run<'_> {
    /// The run: its start, the conversation as the model will see it, then model turns until
    /// one needs nothing more, a call waits for the client or a person, or the limit is hit.
    async fn drive(&mut self) -> Result<(), Halt> {
        self.emitter
            .emit(super::history::run_started(
                self.input,
                self.emitter.is_v1(),
            ))
            .await?;
        let Some(mut conv) = self.prepare().await? else {
            return Ok(());
        };
        let max_iterations = self
            .overrides
            .max_iterations
            .unwrap_or(self.agent.max_iterations);
        for _ in 0..max_iterations {
            if self.step(&mut conv).await? {
                return Ok(());
            }
        }
        let limit = max_iterations;
        self.stop = "max_iterations";
        self.emitter
            .emit(Event::Custom {
                name: "max_iterations_reached".into(),
                value: json!({ "maxIterations": limit }),
            })
            .await?;
        let id = new_id("msg");
        self.say(
            &id,
            &format!(
                "I stopped here: this run reached its limit of {limit} model calls (max_iterations) before I could finish. Ask me to continue if you need more."
            ),
        )
        .await?;
        self.finish(Vec::new()).await
    }

    /// The conversation the model is asked about: the history (stored or the client's),
    /// decided approvals carried out, media the model cannot take dropped, prompts and tools.
    /// `None` when the run already ended (a reload answered with the stored thread, or nothing
    /// to answer).
    async fn prepare(&mut self) -> Result<Option<Conversation>, Halt> {
        let input = self.input;
        let history = match &self.thread_store {
            None => None,
            Some(ts) if input.raw_messages.is_empty() => {
                // A page reload asks with no messages: give it the stored thread.
                let stored = ts.load().await.map_err(Halt::Store)?;
                if !stored.is_empty() {
                    self.emitter
                        .emit(Event::MessagesSnapshot { messages: stored })
                        .await?;
                }
                self.end(None).await?;
                return Ok(None);
            }
            Some(ts) => Some(parse_messages(
                &ts.prepare(&input.raw_messages).await.map_err(Halt::Store)?,
            )),
        };
        let converted = from_agui::convert(history.as_deref().unwrap_or(&input.messages));
        self.used_call_ids
            .extend(converted.tool_call_ids.iter().cloned());
        self.emitter
            .know_tool_calls(converted.tool_call_ids.iter().cloned());
        let mut notices = converted.notices;
        let (mut decisions, unknown) = approvals::from_resume(&input.resume);
        notices.extend(unknown);
        let mut messages = converted.conversation.messages;
        if let Some(limit) = self
            .overrides
            .message_history_limit
            .or(self.agent.memory.message_history_limit)
        {
            limit_history(&mut messages, limit);
        }
        let dropped = tokio::select! {
            biased;
            _ = self.cancel.cancelled() => return Err(Halt::Cancelled),
            d = media::prepare(&mut messages, &*self.agent.provider, &self.agent.media) => d,
        };
        if !dropped.is_empty() {
            tracing::info!(count = dropped.len(), "dropped media the model cannot take");
            self.notify("content_dropped", json!(dropped)).await?;
        }
        let tools = &self.agent.tools;
        for d in approvals::from_tool_messages(&messages, |n| tools.requires_approval(n)) {
            if !decisions.iter().any(|x| x.call_id == d.call_id) {
                decisions.push(d);
            }
        }
        for call in &converted.unanswered {
            if !decisions.iter().any(|d| &d.call_id == call) {
                notices.push(format!(
                    "tool call {call} had no result; told the model it was not executed"
                ));
            }
        }
        if !notices.is_empty() {
            self.notify("input_notices", json!(notices)).await?;
        }
        self.apply_decisions(&mut messages, decisions).await?;
        if messages.is_empty() {
            // Nothing to answer (a client fetching initial state): an empty, successful run.
            self.finish(Vec::new()).await?;
            return Ok(None);
        }
        let mut own_system = self
            .overrides
            .system_prompt
            .clone()
            .or_else(|| self.agent.system_prompt.clone());
        super::prompt::apply(
            &mut messages,
            own_system.as_mut(),
            &self.agent.parameters,
            &self.overrides.parameters,
        )
        .map_err(Halt::Invalid)?;
        let mut system = Vec::new();
        system.extend(own_system);
        system.extend(converted.conversation.system);
        system.extend(context_prompt(&input.context));
        let frontend: Vec<ToolSpec> = input
            .tools
            .iter()
            .map(|t| ToolSpec {
                name: t.name.clone(),
                description: t.description.clone(),
                input_schema: t
                    .parameters
                    .clone()
                    .filter(Value::is_object)
                    .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
                strict: None,
            })
            .collect();
        let mut tools = self.agent.tools.specs();
        if let Some(selected) = &self.overrides.selected_tools {
            tools.retain(|t| selected.contains(&t.name));
        }
        tools.extend(frontend.iter().cloned());

        Ok(Some(Conversation {
            system,
            messages,
            tools,
            frontend,
        }))
    }

    /// One model turn and its calls; `true` when it ended the run.
    async fn step(&mut self, conv: &mut Conversation) -> Result<bool, Halt> {
        let mut system = conv.system.clone();
        system.extend(state_prompt(&self.state));
        let request = ModelRequest {
            system,
            messages: conv.messages.clone(),
            tools: conv.tools.clone(),
            params: self.agent.params.clone(),
        };
        let turn = self.model_turn(request).await?;
        if !matches!(
            turn.stop,
            None | Some(StopReason::EndTurn | StopReason::ToolUse | StopReason::StopSequence)
        ) {
            let reason = stop_reason_name(turn.stop.as_ref());
            self.emitter
                .emit(Event::Custom {
                    name: "model_stop".into(),
                    value: json!({ "reason": reason }),
                })
                .await?;
        }
        let mut blocks = turn.blocks;
        for c in &turn.calls {
            blocks.push(ContentBlock::ToolUse {
                id: c.id.clone(),
                name: c.name.clone(),
                input: args_value(&c.args),
                signature: None,
            });
        }
        if !blocks.is_empty() {
            conv.messages.push(Message {
                role: Role::Assistant,
                content: blocks,
            });
        }
        if turn.calls.is_empty() {
            self.finish(Vec::new()).await?;
            return Ok(true);
        }
        let (backend, frontend_calls): (Vec<&Call>, Vec<&Call>) = turn
            .calls
            .iter()
            .partition(|c| !conv.frontend.iter().any(|f| f.name == c.name));
        let (gated, backend): (Vec<&Call>, Vec<&Call>) = backend
            .into_iter()
            .partition(|c| self.agent.tools.requires_approval(&c.name));
        let results = self.run_backend(&backend).await?;
        if !results.is_empty() {
            conv.messages.push(Message {
                role: Role::User,
                content: results,
            });
        }
        if !gated.is_empty() {
            self.stop = "tool_use";
            self.pause_for_approval(&gated, &frontend_calls).await?;
            return Ok(true);
        }
        if !frontend_calls.is_empty() {
            self.stop = "tool_use";
            self.finish(frontend_calls.iter().map(|c| c.id.clone()).collect())
                .await?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Streams a whole assistant text message written by the gateway itself.
    async fn say(&mut self, id: &str, text: &str) -> Result<(), Halt> {
        self.emitter
            .emit(Event::TextMessageStart {
                message_id: id.to_string(),
                role: Some("assistant".into()),
                name: None,
            })
            .await?;
        self.emitter
            .emit(Event::TextMessageContent {
                message_id: id.to_string(),
                delta: text.to_string(),
            })
            .await?;
        self.emitter
            .emit(Event::TextMessageEnd {
                message_id: id.to_string(),
            })
            .await?;
        Ok(())
    }

    async fn finish(&mut self, pending: Vec<String>) -> Result<(), Halt> {
        let v1 = self.emitter.is_v1();
        let outcome = (v1 && !pending.is_empty()).then_some(Outcome::Success {
            pending_tool_call_ids: Some(pending),
        });
        self.end(outcome).await
    }

    /// Tells the client something besides the answer (a `CUSTOM` event), and keeps it for a
    /// synchronous answer.
    async fn notify(&mut self, name: &str, value: Value) -> Result<(), Halt> {
        self.notices.push((name.to_string(), value.clone()));
        self.emitter
            .emit(Event::Custom {
                name: name.into(),
                value,
            })
            .await?;
        Ok(())
    }

    async fn end(&mut self, outcome: Option<Outcome>) -> Result<(), Halt> {
        let v1 = self.emitter.is_v1();
        // Stored before RUN_FINISHED: a client told the run finished may count on its
        // messages being there (a store failure ends the run with STORE_UNAVAILABLE instead).
        if let Some(ts) = &self.thread_store {
            ts.save(self.emitter.transcript().messages())
                .await
                .map_err(Halt::Store)?;
            self.saved = true;
            if ts.config.snapshot_on_finish {
                let messages = ts.load().await.map_err(Halt::Store)?;
                self.emitter
                    .emit(Event::MessagesSnapshot { messages })
                    .await?;
            }
        }
        if !self.usage.is_empty() {
            self.emitter
                .emit(Event::Custom {
                    name: "token_usage".into(),
                    value: self.usage.report(),
                })
                .await?;
        }
        let usage = (v1 && !self.usage.is_empty()).then(|| self.usage.ag_ui());
        self.emitter
            .emit(Event::RunFinished {
                thread_id: self.input.thread_id.clone(),
                run_id: self.input.run_id.clone(),
                result: None,
                outcome,
                usage,
            })
            .await?;
        Ok(())
    }
}

/// The shared state as the model sees it, when there is any.
fn state_prompt(state: &Value) -> Option<String> {
    match state {
        Value::Object(o) if !o.is_empty() => Some(format!(
            "The application's shared state (JSON; the user sees it and may edit it; change it only through your state tools):\n{state}"
        )),
        _ => None,
    }
}

/// The snake_case name of a stop reason, as reported to clients.
fn stop_reason_name(stop: Option<&StopReason>) -> String {
    match stop {
        None => "unknown".into(),
        Some(StopReason::EndTurn) => "end_turn".into(),
        Some(StopReason::ToolUse) => "tool_use".into(),
        Some(StopReason::MaxTokens) => "max_tokens".into(),
        Some(StopReason::StopSequence) => "stop_sequence".into(),
        Some(StopReason::ContentFiltered) => "content_filtered".into(),
        Some(StopReason::Other(o)) => o.clone(),
    }
}
