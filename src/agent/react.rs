//! The hybrid ReAct loop. Frontend tools are the request's `tools`; backend tools are the
//! agent's. Each model turn streams as AG-UI events; backend calls of a turn run concurrently
//! and the loop continues; any frontend call ends the run, leaving that call for the browser,
//! whose next run on the thread carries the result.

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

struct OpenReasoning {
    span_id: String,
    message_id: String,
    text: String,
    signature: Option<String>,
    /// Set when this message stands for a redacted block.
    redacted: Option<String>,
}

impl Run<'_> {
    async fn drive(&mut self) -> Result<(), Halt> {
        let input = self.input;
        self.emitter
            .emit(super::history::run_started(input, self.emitter.is_v1()))
            .await?;
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
                return self.end(None).await;
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
            return self.finish(Vec::new()).await;
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

        let max_iterations = self
            .overrides
            .max_iterations
            .unwrap_or(self.agent.max_iterations);
        for _ in 0..max_iterations {
            let mut system = system.clone();
            system.extend(state_prompt(&self.state));
            let request = ModelRequest {
                system,
                messages: messages.clone(),
                tools: tools.clone(),
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
                messages.push(Message {
                    role: Role::Assistant,
                    content: blocks,
                });
            }
            if turn.calls.is_empty() {
                return self.finish(Vec::new()).await;
            }
            let (backend, frontend_calls): (Vec<&Call>, Vec<&Call>) = turn
                .calls
                .iter()
                .partition(|c| !frontend.iter().any(|f| f.name == c.name));
            let (gated, backend): (Vec<&Call>, Vec<&Call>) = backend
                .into_iter()
                .partition(|c| self.agent.tools.requires_approval(&c.name));
            let results = self.run_backend(&backend).await?;
            if !results.is_empty() {
                messages.push(Message {
                    role: Role::User,
                    content: results,
                });
            }
            if !gated.is_empty() {
                self.stop = "tool_use";
                return self.pause_for_approval(&gated, &frontend_calls).await;
            }
            if !frontend_calls.is_empty() {
                self.stop = "tool_use";
                return self
                    .finish(frontend_calls.iter().map(|c| c.id.clone()).collect())
                    .await;
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

    /// What a tool call of this run may know about it.
    fn tool_context(&self, tool_call_id: &str) -> ToolContext {
        ToolContext {
            thread_id: self.input.thread_id.clone(),
            run_id: self.input.run_id.clone(),
            tool_call_id: tool_call_id.to_string(),
            cancel: self.cancel.clone(),
            state: Arc::clone(&self.state),
            side: None,
        }
    }

    /// Applies a call's change to the shared state (`STATE_SNAPSHOT` / `STATE_DELTA`), then
    /// streams its result as a new `tool` message. A change that no longer applies (another
    /// call changed the state first) turns the result into an error the model can act on.
    async fn emit_result(
        &mut self,
        tool_call_id: &str,
        out: ToolOutput,
    ) -> Result<ToolOutput, Halt> {
        let mut out = out;
        match out.state.take() {
            None => {}
            Some(StateUpdate::Snapshot(next)) => {
                self.state = Arc::new(next.clone());
                self.emitter
                    .emit(Event::StateSnapshot { snapshot: next })
                    .await?;
            }
            Some(StateUpdate::Delta(ops)) => match apply_ops(&self.state, &ops) {
                Ok(next) => {
                    self.state = Arc::new(next);
                    self.emitter.emit(Event::StateDelta { delta: ops }).await?;
                }
                Err(e) => out = ToolOutput::error(e),
            },
        }
        self.emitter
            .emit(Event::ToolCallResult {
                message_id: new_id("msg"),
                tool_call_id: tool_call_id.to_string(),
                content: ToolResultContent::Text(out.text.clone()),
                role: Some("tool".into()),
            })
            .await?;
        Ok(out)
    }

    /// Runs (or refuses) the calls people decided about, streaming each result under the
    /// original call id and putting it into the history in place of its placeholder.
    async fn apply_decisions(
        &mut self,
        messages: &mut [Message],
        decisions: Vec<approvals::Decision>,
    ) -> Result<(), Halt> {
        for d in decisions {
            let Some((name, input)) = approvals::find_call(messages, &d.call_id) else {
                tracing::info!(call = %d.call_id, "approval for a call that is not in the history; ignored");
                continue;
            };
            let out = if d.approved {
                let args = d.arguments.unwrap_or(input).to_string();
                self.agent
                    .tools
                    .call(&name, &args, self.tool_context(&d.call_id))
                    .await
            } else {
                ToolOutput::error(approvals::DENIED)
            };
            let out = self.emit_result(&d.call_id, out).await?;
            approvals::set_result(messages, &d.call_id, &out);
        }
        Ok(())
    }

    /// Ends the run waiting for a person to approve `gated` calls: an interrupt for 1.0 clients,
    /// pending calls (like frontend tools) for older ones.
    async fn pause_for_approval(
        &mut self,
        gated: &[&Call],
        frontend: &[&Call],
    ) -> Result<(), Halt> {
        let requests: Vec<Value> = gated
            .iter()
            .map(|c| json!({"toolCallId": c.id, "toolName": c.name, "arguments": args_value(&c.args)}))
            .collect();
        self.emitter
            .emit(Event::Custom {
                name: "approval_required".into(),
                value: json!(requests),
            })
            .await?;
        if self.emitter.is_v1() {
            let interrupts = gated
                .iter()
                .map(|c| approvals::interrupt(&c.id, &c.name, &c.args))
                .collect();
            return self.end(Some(Outcome::Interrupt { interrupts })).await;
        }
        let pending = gated
            .iter()
            .chain(frontend.iter())
            .map(|c| c.id.clone())
            .collect();
        self.finish(pending).await
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

    fn assign_call_id(&mut self, provider_id: &str) -> String {
        let mut id = provider_id.to_string();
        let mut n = 1;
        while id.is_empty() || self.used_call_ids.contains(&id) {
            n += 1;
            id = format!("{provider_id}_{n}");
        }
        self.used_call_ids.insert(id.clone());
        id
    }

    /// Streams one model call as AG-UI events and collects what it said.
    async fn model_turn(&mut self, request: ModelRequest) -> Result<Turn, Halt> {
        let started = std::time::Instant::now();
        let mut first_event = None;
        let model = self.agent.provider.model_id();
        let span = tracing::info_span!(
            "chat",
            otel.name = format!("chat {model}"),
            otel.kind = "client",
            gen_ai.operation.name = "chat",
            gen_ai.system = self.agent.provider.name(),
            gen_ai.request.model = model,
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.output_tokens = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        let turn = tracing::Instrument::instrument(
            self.model_turn_streamed(request, started, &mut first_event),
            span.clone(),
        )
        .await;
        if let Err(Halt::Model(e)) = &turn {
            super::failed_span(&span, e.code());
        }
        // A cancelled call says nothing about the upstream.
        if !matches!(turn, Err(Halt::Cancelled)) {
            crate::metrics::model_call(
                self.agent.provider.name(),
                turn.is_ok(),
                first_event,
                started.elapsed(),
            );
        }
        turn
    }

    async fn model_turn_streamed(
        &mut self,
        request: ModelRequest,
        started: std::time::Instant,
        first_event: &mut Option<std::time::Duration>,
    ) -> Result<Turn, Halt> {
        let mut call_usage: Option<Usage> = None;
        let message_id = new_id("msg");
        let mut text = String::new();
        let mut text_open = false;
        let mut text_id = message_id.clone();
        let mut text_segments = 0u32;
        let mut reasoning: Option<OpenReasoning> = None;
        let mut blocks = Vec::new();
        let mut calls: Vec<Call> = Vec::new();
        let mut stop = None;
        let mut stream =
            retry::stream_with_retries(Arc::clone(&self.agent.provider), request, self.agent.retry);
        if self.agent.provider.coalesce_deltas() {
            stream = crate::model::coalesce::coalesce(stream);
        }
        // One wait for cancellation for the whole turn: a new one per event registered and
        // removed a waiter on the token (two lock round trips) per streamed token.
        let mut cancelled = std::pin::pin!(self.cancel.clone().cancelled_owned());
        loop {
            let next = tokio::select! {
                biased;
                _ = &mut cancelled => return Err(Halt::Cancelled),
                n = stream.next() => n,
            };
            let Some(item) = next else { break };
            if first_event.is_none() && item.is_ok() {
                *first_event = Some(started.elapsed());
            }
            match item.map_err(Halt::Model)? {
                ModelEvent::ReasoningDelta(delta) => {
                    if delta.is_empty() {
                        continue;
                    }
                    let r = self.open_reasoning(&mut reasoning).await?;
                    r.text.push_str(&delta);
                    let message_id = r.message_id.clone();
                    self.emitter
                        .emit(Event::ReasoningMessageContent { message_id, delta })
                        .await?;
                }
                ModelEvent::ReasoningSignature(sig) => {
                    self.open_reasoning(&mut reasoning).await?.signature = Some(sig);
                }
                ModelEvent::RedactedReasoning(data) => {
                    // A redacted block is its own reasoning message carrying only the payload.
                    self.close_reasoning(&mut reasoning, &mut blocks).await?;
                    self.open_reasoning(&mut reasoning).await?.redacted = Some(data);
                    self.close_reasoning(&mut reasoning, &mut blocks).await?;
                }
                ModelEvent::TextDelta(delta) => {
                    if delta.is_empty() {
                        continue;
                    }
                    self.close_reasoning(&mut reasoning, &mut blocks).await?;
                    if !text_open {
                        text_open = true;
                        // The turn's first text message carries the turn's id (tool calls name
                        // it as parent); text resuming after a tool call gets a new one.
                        if text_segments > 0 {
                            text_id = new_id("msg");
                        }
                        text_segments += 1;
                        self.emitter
                            .emit(Event::TextMessageStart {
                                message_id: text_id.clone(),
                                role: Some("assistant".into()),
                                name: None,
                            })
                            .await?;
                    }
                    text.push_str(&delta);
                    self.emitter
                        .emit(Event::TextMessageContent {
                            message_id: text_id.clone(),
                            delta,
                        })
                        .await?;
                }
                ModelEvent::ToolCallStart { id, name } => {
                    self.close_reasoning(&mut reasoning, &mut blocks).await?;
                    // Text is closed before a call streams, as clients render them in turn.
                    if text_open {
                        text_open = false;
                        self.emitter
                            .emit(Event::TextMessageEnd {
                                message_id: text_id.clone(),
                            })
                            .await?;
                    }
                    let wire_id = self.assign_call_id(&id);
                    let predictions: Vec<Value> = self
                        .agent
                        .predict_state
                        .iter()
                        .filter(|p| p.tool == name)
                        .map(|p| json!({"state_key": p.state_key, "tool": p.tool, "tool_argument": p.tool_argument}))
                        .collect();
                    if !predictions.is_empty() {
                        // Tells the client to show the call's streaming arguments as state.
                        self.emitter
                            .emit(Event::Custom {
                                name: "PredictState".into(),
                                value: Value::Array(predictions),
                            })
                            .await?;
                    }
                    self.emitter
                        .emit(Event::ToolCallStart {
                            tool_call_id: wire_id.clone(),
                            tool_call_name: name.clone(),
                            parent_message_id: Some(message_id.clone()),
                        })
                        .await?;
                    calls.push(Call {
                        provider_id: id,
                        id: wire_id,
                        name,
                        args: String::new(),
                        ended: false,
                    });
                }
                ModelEvent::ToolCallDelta { id, delta } => {
                    let Some(call) = calls.iter_mut().find(|c| c.provider_id == id && !c.ended)
                    else {
                        return Err(Halt::Model(ModelError::Protocol(format!(
                            "arguments for unknown tool call {id}"
                        ))));
                    };
                    if delta.is_empty() {
                        continue;
                    }
                    call.args.push_str(&delta);
                    let tool_call_id = call.id.clone();
                    self.emitter
                        .emit(Event::ToolCallArgs {
                            tool_call_id,
                            delta,
                        })
                        .await?;
                }
                ModelEvent::ToolCallEnd { id } => {
                    if let Some(i) = calls.iter().position(|c| c.provider_id == id && !c.ended) {
                        self.end_call(&mut calls[i]).await?;
                    }
                }
                ModelEvent::ReasoningEnd => {
                    self.close_reasoning(&mut reasoning, &mut blocks).await?;
                }
                ModelEvent::Usage(u) => call_usage.get_or_insert_with(Usage::default).add(&u),
                ModelEvent::Stop(reason) => stop = Some(reason),
            }
        }
        self.close_reasoning(&mut reasoning, &mut blocks).await?;
        if text_open {
            self.emitter
                .emit(Event::TextMessageEnd {
                    message_id: text_id,
                })
                .await?;
        }
        for call in calls.iter_mut() {
            self.end_call(call).await?;
        }
        if let Some(u) = call_usage {
            let span = tracing::Span::current();
            // As i64: OpenTelemetry takes a u64 field as a string.
            let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
            span.record("gen_ai.usage.input_tokens", count(u.input_tokens));
            span.record("gen_ai.usage.output_tokens", count(u.output_tokens));
            self.usage.record(
                self.agent.provider.name(),
                self.agent.provider.model_id(),
                self.agent.model_ref.as_deref(),
                u,
            );
        }
        let produced_text = !text.is_empty();
        if produced_text {
            blocks.push(ContentBlock::Text { text });
        }
        if matches!(
            stop,
            Some(StopReason::ContentFiltered | StopReason::Other(_))
        ) && !produced_text
            && calls.is_empty()
        {
            // A turn stopped by a filter or guardrail with nothing to show: say so in the chat.
            let reason = stop_reason_name(stop.as_ref());
            let id = new_id("msg");
            self.say(
                &id,
                &format!("The model stopped without an answer ({reason})."),
            )
            .await?;
        }
        Ok(Turn {
            blocks,
            calls,
            stop,
        })
    }

    async fn end_call(&mut self, call: &mut Call) -> Result<(), Halt> {
        if call.ended {
            return Ok(());
        }
        call.ended = true;
        if call.args.trim().is_empty() {
            // Validators require arguments that parse as JSON; an argument-less call is `{}`.
            call.args = "{}".into();
            self.emitter
                .emit(Event::ToolCallArgs {
                    tool_call_id: call.id.clone(),
                    delta: call.args.clone(),
                })
                .await?;
        }
        self.emitter
            .emit(Event::ToolCallEnd {
                tool_call_id: call.id.clone(),
            })
            .await?;
        Ok(())
    }

    async fn open_reasoning<'r>(
        &mut self,
        slot: &'r mut Option<OpenReasoning>,
    ) -> Result<&'r mut OpenReasoning, Halt> {
        let open = match slot.take() {
            Some(open) => open,
            None => {
                let span_id = new_id("rsn");
                let message_id = new_id("msg");
                self.emitter
                    .emit(Event::ReasoningStart {
                        message_id: span_id.clone(),
                    })
                    .await?;
                self.emitter
                    .emit(Event::ReasoningMessageStart {
                        message_id: message_id.clone(),
                        role: "reasoning".into(),
                    })
                    .await?;
                OpenReasoning {
                    span_id,
                    message_id,
                    text: String::new(),
                    signature: None,
                    redacted: None,
                }
            }
        };
        Ok(slot.insert(open))
    }

    async fn close_reasoning(
        &mut self,
        slot: &mut Option<OpenReasoning>,
        blocks: &mut Vec<ContentBlock>,
    ) -> Result<(), Halt> {
        let Some(r) = slot.take() else { return Ok(()) };
        self.emitter
            .emit(Event::ReasoningMessageEnd {
                message_id: r.message_id.clone(),
            })
            .await?;
        let secret = match (&r.redacted, &r.signature) {
            (Some(data), _) => Some(redacted_value(data)),
            (None, Some(sig)) => Some(sig.clone()),
            (None, None) => None,
        };
        if let Some(encrypted_value) = secret {
            self.emitter
                .emit(Event::ReasoningEncryptedValue {
                    subtype: EncryptedSubtype::Message,
                    entity_id: r.message_id.clone(),
                    encrypted_value,
                })
                .await?;
        }
        self.emitter
            .emit(Event::ReasoningEnd {
                message_id: r.span_id,
            })
            .await?;
        blocks.push(match r.redacted {
            Some(data) => ContentBlock::RedactedReasoning { data },
            None => ContentBlock::Reasoning {
                text: r.text,
                signature: r.signature,
            },
        });
        Ok(())
    }

    /// What a tool sent while it worked: events to stream, a nested run's model calls to count.
    async fn take_side(&mut self, side: SideEvent) -> Result<(), Halt> {
        match side {
            SideEvent::Usage(ledger) => self.usage.absorb(ledger),
            other => self.emitter.side(other).await?,
        }
        Ok(())
    }

    /// Runs a turn's backend calls concurrently, streaming each result as it completes, and
    /// returns the result blocks in call order.
    async fn run_backend(&mut self, calls: &[&Call]) -> Result<Vec<ContentBlock>, Halt> {
        let agent: &Agent = self.agent;
        let tools = &agent.tools;
        // Parallel calls run together, at most `tool_concurrency` at a time; results are
        // streamed as they complete and kept in call order for the model. (The futures are
        // collected first: a lazy `map` inside the stream trips the run task's Send check.)
        // What the calls send while they work (a nested agent's events, progress) streams
        // as it comes; whatever a call sent before it returned goes out before its result.
        let (side_tx, mut side_rx) = mpsc::channel(SIDE_CAPACITY);
        let jobs: Vec<_> = calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let mut ctx = self.tool_context(&c.id);
                ctx.side = Some(side_tx.clone());
                async move {
                    let out = super::execute_tool(tools, &c.name, &c.id, &c.args, ctx).await;
                    (i, out)
                }
            })
            .collect();
        drop(side_tx);
        let mut pending = futures::stream::iter(jobs).buffer_unordered(agent.tool_concurrency);
        let mut outputs: Vec<Option<ToolOutput>> = vec![None; calls.len()];
        loop {
            let next = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => return Err(Halt::Cancelled),
                Some(side) = side_rx.recv() => Err(side),
                n = pending.next() => Ok(n),
            };
            let (i, out) = match next {
                Err(side) => {
                    self.take_side(side).await?;
                    continue;
                }
                Ok(None) => break,
                Ok(Some(done)) => done,
            };
            while let Ok(side) = side_rx.try_recv() {
                self.take_side(side).await?;
            }
            if out.is_error {
                tracing::info!(tool = %calls[i].name, "backend tool returned an error result");
            }
            let out = self.emit_result(&calls[i].id, out).await?;
            outputs[i] = Some(out);
        }
        Ok(calls
            .iter()
            .zip(outputs)
            .map(|(c, out)| {
                let out = out.unwrap_or_else(|| ToolOutput::error("Tool call did not complete."));
                ContentBlock::ToolResult {
                    tool_use_id: c.id.clone(),
                    content: vec![ToolResultBlock::Text { text: out.text }],
                    is_error: out.is_error,
                }
            })
            .collect())
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

/// The arguments as the model will see them in history: the JSON object, or the raw text
/// wrapped so nothing is lost when the model produced invalid JSON.
fn args_value(args: &str) -> Value {
    match serde_json::from_str::<Value>(args) {
        Ok(v @ Value::Object(_)) => v,
        Ok(other) => json!({ "value": other }),
        Err(_) => json!({ "raw_arguments": args }),
    }
}
