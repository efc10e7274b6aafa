//! `plan_execute_and_reflect` agents, as ml-commons runs them: a planner model call answers a
//! JSON plan (`{"steps": [...], "result": "..."}`); the first step goes to an executor (the
//! ReAct loop of [`super::react`] with the agent's tools, its work kept under its own memory
//! id); a reflect call sees the plan and the completed steps with their results and answers a
//! new plan, until `result` is non-empty or `max_steps` steps ran.
//!
//! On the stream each executed step is a `STEP_STARTED` / `STEP_FINISHED` pair named by the
//! step, with the executor's events (tool calls, results, text) inside it; each plan is a
//! `CUSTOM {name: "plan"}`; the final answer is the last text message. The outer thread keeps
//! the question and the final answer only.

use std::sync::Arc;

use futures::StreamExt;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::history::{last_user_text, message_text};
use super::plan_board::{COMPLETED, IN_PROGRESS, PlanBoard};
use super::usage::Ledger;
use super::{Agent, Overrides, Report};
use crate::connector::template::{Escape, render};
use crate::conversation::{ContentBlock, Message, Role};
use crate::model::{ModelEvent, ModelRequest, retry};
use crate::protocol::events::Event;
use crate::protocol::input::RunAgentInput;
use crate::protocol::new_id;
use crate::runs::nested::{SIDE_CAPACITY, Subagent};
use crate::runs::{EmitError, Emitter};
use crate::store::Store;

/// ml-commons' default bound on executed steps (`max_steps`).
pub const DEFAULT_MAX_STEPS: usize = 20;
/// ml-commons' default bound on the executor's model calls per step (`executor_max_iterations`).
pub const DEFAULT_EXECUTOR_MAX_ITERATIONS: u32 = 20;
/// Interactions of the thread the planner sees by default (`message_history_limit`).
pub const DEFAULT_HISTORY_INTERACTIONS: usize = 10;

/// What the planner must answer, told in every planner and reflect prompt.
const RESPONSE_FORMAT: &str = r#"Answer with one JSON object and nothing else (no markdown fences, no text around it):
{"steps": ["<the first step still to do>", "<the next one>", ...], "result": "<the final answer for the user, or an empty string while steps remain>"}
Give "steps" while work remains and leave "result" empty; once the objective is met, give the complete final answer in "result" (it is shown to the user as is) and an empty "steps" list."#;

const PLANNER_SYSTEM: &str = "You plan how to reach an objective with the tools available. Break the objective into the fewest concrete steps another agent can carry out one at a time with those tools; each step must say everything needed to do it, since the executor sees only the step. Do not do the steps yourself.";

const PLANNER_PROMPT: &str = "Write a short step-by-step plan for the objective below. If it can be answered without any tool, give the answer in \"result\" right away.";

const REFLECT_PROMPT: &str = "Review the plan in light of the steps completed and their results. If the objective is met, give the final answer in \"result\". Otherwise answer the steps that still need doing (leave out the completed ones), changing the plan where the results call for it.";

const EXECUTOR_SYSTEM: &str = "You carry out one step of a larger plan. Use the tools as needed, then answer with the complete result of this step (facts, numbers, names, errors met) so that the planner can decide what comes next. Do not ask the user questions.";

const PLANNER_TEMPLATE: &str = "${parameters.tools_prompt}\n${parameters.planner_prompt}\n\nObjective: ${parameters.user_prompt}\n\n${parameters.plan_execute_reflect_response_format}";

const PLANNER_WITH_HISTORY_TEMPLATE: &str = "${parameters.tools_prompt}\n${parameters.planner_prompt}\n\nObjective: ${parameters.user_prompt}\n\nEarlier in this conversation:\n[${parameters.completed_steps}]\n\n${parameters.plan_execute_reflect_response_format}";

const REFLECT_TEMPLATE: &str = "${parameters.tools_prompt}\n${parameters.planner_prompt}\n\nObjective: ${parameters.user_prompt}\n\nOriginal plan:\n[${parameters.steps}]\n\nSteps completed so far, with their results:\n[${parameters.completed_steps}]\n\n${parameters.reflect_prompt}\n\n${parameters.plan_execute_reflect_response_format}";

const REPAIR: &str = "That answer is not the JSON object asked for. Answer again with only the JSON object {\"steps\": [...], \"result\": \"...\"}.";

/// Why a run stopped early: the `RUN_ERROR` code and message.
type Stop = (String, String);

fn stop(code: &str, message: impl Into<String>) -> Stop {
    (code.to_string(), message.into())
}

fn halted(e: EmitError) -> Stop {
    match e {
        EmitError::Disconnected => stop("DISCONNECTED", "The client disconnected."),
        EmitError::Violation(v) => {
            tracing::error!(violation = %v, "plan-execute-reflect run stopped by the verifier");
            stop(
                "INTERNAL_ERROR",
                "The gateway produced an invalid event sequence and stopped the run.",
            )
        }
    }
}

fn cancelled() -> Stop {
    stop("CANCELLED", "The run was cancelled.")
}

/// A plan as the planner answered it.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Steps still to do, in order.
    pub steps: Vec<String>,
    /// The final answer; empty while steps remain.
    pub result: String,
}

/// Reads a planner's answer: the JSON object, also inside a fenced block or with text around
/// it. `Err` says what is wrong.
pub fn parse_plan(text: &str) -> Result<Plan, String> {
    let candidates = [
        text.trim().to_string(),
        unfence(text),
        outer_object(text).unwrap_or_default(),
    ];
    let value = candidates
        .iter()
        .find_map(|c| match serde_json::from_str::<Value>(c) {
            Ok(v @ Value::Object(_)) => Some(v),
            _ => None,
        })
        .ok_or_else(|| "no JSON object found".to_string())?;
    let result = match value.get("result") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.trim().to_string(),
        Some(other) => other.to_string(),
    };
    let steps = match value.get("steps") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|s| match s {
                Value::String(s) => s.trim().to_string(),
                other => other.to_string(),
            })
            .filter(|s| !s.is_empty())
            .collect(),
        Some(_) => return Err("\"steps\" is not a list".into()),
    };
    if result.is_empty() && steps.is_empty() {
        return Err("neither steps nor a result".into());
    }
    Ok(Plan { steps, result })
}

/// The content of the first fenced code block, if any.
fn unfence(text: &str) -> String {
    let Some(start) = text.find("```") else {
        return String::new();
    };
    let after = &text[start + 3..];
    // Skip the info string (`json`).
    let body = after.split_once('\n').map(|(_, b)| b).unwrap_or(after);
    body.split("```").next().unwrap_or("").trim().to_string()
}

/// From the first `{` to the last `}`.
fn outer_object(text: &str) -> Option<String> {
    let start = text.find('{')?;
    let end = text.rfind('}')?;
    (end > start).then(|| text[start..=end].to_string())
}

/// The agent's plan-execute-reflect settings, from its parameters and the execution's.
#[derive(Debug, Clone)]
struct Settings {
    max_steps: usize,
    executor_max_iterations: u32,
    executor_history_limit: Option<u64>,
    history_limit: usize,
    planner_system: String,
    executor_system: String,
}

impl Settings {
    fn of(agent: &Agent, params: &Map<String, Value>) -> Self {
        let number = |k: &str| {
            params
                .get(k)
                .and_then(|v| v.as_u64().or_else(|| v.as_str()?.trim().parse().ok()))
        };
        let text = |k: &str| {
            params
                .get(k)
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty())
                .map(str::to_string)
        };
        Self {
            max_steps: number("max_steps")
                .filter(|n| *n >= 1)
                .map_or(DEFAULT_MAX_STEPS, |n| n.min(100) as usize),
            executor_max_iterations: number("executor_max_iterations")
                .filter(|n| (1..=100).contains(n))
                .map_or(DEFAULT_EXECUTOR_MAX_ITERATIONS, |n| n as u32),
            executor_history_limit: number("executor_message_history_limit"),
            history_limit: number("message_history_limit")
                .map(|n| n as usize)
                .or(agent.memory.message_history_limit)
                .unwrap_or(DEFAULT_HISTORY_INTERACTIONS),
            planner_system: text("system_prompt")
                .or_else(|| agent.system_prompt.clone())
                .unwrap_or_else(|| PLANNER_SYSTEM.to_string()),
            executor_system: text("executor_system_prompt")
                .unwrap_or_else(|| EXECUTOR_SYSTEM.to_string()),
        }
    }
}

/// The executor's side of a run: its thread and what it has done so far.
struct Executor {
    /// Its memory id (a thread of the same agent).
    thread: String,
    /// Its conversation so far (AG-UI messages), so a step sees the steps before it.
    history: Vec<Value>,
    /// The id of the last step's question.
    parent_interaction_id: Option<String>,
}

/// Runs a plan-execute-reflect agent on `input`.
pub async fn run(
    agent: &Agent,
    input: &RunAgentInput,
    emitter: &mut Emitter,
    cancel: CancellationToken,
    store: Option<Arc<dyn Store>>,
) -> Report {
    let overrides = Overrides::of(input);
    let mut params = agent.parameters.clone();
    params.extend(overrides.parameters.clone());
    let keeps = agent.memory.store && store.is_some();
    let executor_thread = params
        .get("executor_agent_memory_id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty() && !s.contains('\0'))
        .map(str::to_string)
        .unwrap_or_else(crate::agent::registry::new_doc_id);
    let mut per = Per {
        agent,
        input,
        emitter,
        cancel,
        store,
        overrides,
        settings: Settings::of(agent, &params),
        params,
        usage: Ledger::default(),
        executor: Executor {
            thread: executor_thread,
            history: Vec::new(),
            parent_interaction_id: None,
        },
        stop_reason: "end_turn",
    };
    let outcome = per.drive().await;
    let mut report = Report {
        stop_reason: per.stop_reason,
        ..Report::default()
    };
    if let Err((code, message)) = outcome {
        tracing::info!(code, %message, "plan-execute-reflect run failed");
        let usage = per.usage.ag_ui();
        per.emitter
            .fail_with_usage(&code, message.clone(), usage)
            .await;
        report.error = Some((code, message));
    }
    if keeps {
        report.executor = Some((
            per.executor.thread.clone(),
            per.executor
                .parent_interaction_id
                .clone()
                .unwrap_or_default(),
        ));
    }
    report.messages = per.emitter.transcript().own_messages();
    report.usage = std::mem::take(&mut per.usage);
    report
}

struct Per<'a> {
    agent: &'a Agent,
    input: &'a RunAgentInput,
    emitter: &'a mut Emitter,
    cancel: CancellationToken,
    store: Option<Arc<dyn Store>>,
    overrides: Overrides,
    settings: Settings,
    /// The agent's parameters with the execution's over them (prompt templates read these).
    params: Map<String, Value>,
    usage: Ledger,
    executor: Executor,
    stop_reason: &'static str,
}

impl Per<'_> {
    async fn drive(&mut self) -> Result<(), Stop> {
        let input = self.input;
        self.emitter
            .emit(super::history::run_started(input, self.emitter.is_v1()))
            .await
            .map_err(halted)?;
        let question = match self.params.get("question").and_then(Value::as_str) {
            Some(q) if !q.trim().is_empty() => q.to_string(),
            _ => last_user_text(&input.raw_messages).unwrap_or_default(),
        };
        if question.trim().is_empty() {
            return Err(stop(
                "INVALID_PARAMETERS",
                "a plan-execute-reflect agent needs a question (the input's text)",
            ));
        }
        let thread_store =
            self.agent
                .thread_store(self.store.clone(), &input.thread_id, &self.overrides);
        let unavailable = |e: crate::store::StoreError| {
            tracing::error!(error = %e, "store failed");
            stop(
                "STORE_UNAVAILABLE",
                "The conversation store is unavailable; try again shortly.",
            )
        };
        let mut earlier = String::new();
        if let Some(ts) = &thread_store {
            let stored = ts.prepare(&input.raw_messages).await.map_err(unavailable)?;
            earlier = interactions(&stored, &input.raw_messages, self.settings.history_limit);
            // The executor's memory belongs to whoever owns the conversation; one named by
            // the execution (`executor_agent_memory_id`) must be theirs.
            if let Some(store) = &self.store {
                let owner = store
                    .thread_owner(&self.agent.id, &input.thread_id)
                    .await
                    .map_err(unavailable)?
                    .unwrap_or_default();
                let holder = store
                    .claim_thread(&self.agent.id, &self.executor.thread, &owner)
                    .await
                    .map_err(unavailable)?;
                if holder != owner {
                    return Err(stop(
                        "INVALID_PARAMETERS",
                        format!(
                            "executor_agent_memory_id: no memory {:?} of this conversation's owner",
                            self.executor.thread
                        ),
                    ));
                }
            }
        }
        let mut vars = self.params.clone();
        vars.insert("user_prompt".into(), json!(question));
        vars.insert("question".into(), json!(question));
        vars.insert("tools_prompt".into(), json!(self.tools_prompt()));
        vars.entry("planner_prompt")
            .or_insert_with(|| json!(PLANNER_PROMPT));
        vars.entry("reflect_prompt")
            .or_insert_with(|| json!(REFLECT_PROMPT));
        vars.entry("plan_execute_reflect_response_format")
            .or_insert_with(|| json!(RESPONSE_FORMAT));
        let template = |vars: &Map<String, Value>, key: &str, default: &str| {
            vars.get(key)
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty())
                .unwrap_or(default)
                .to_string()
        };
        let planner_template = if earlier.is_empty() {
            template(&vars, "planner_prompt_template", PLANNER_TEMPLATE)
        } else {
            vars.insert("completed_steps".into(), json!(earlier));
            template(
                &vars,
                "planner_with_history_template",
                PLANNER_WITH_HISTORY_TEMPLATE,
            )
        };
        let reflect_template = template(&vars, "reflect_prompt_template", REFLECT_TEMPLATE);
        let mut prompt = fill(&planner_template, &vars)?;
        let mut completed: Vec<String> = Vec::new();
        let mut executed = 0usize;
        let mut board = PlanBoard::default();
        let answer = loop {
            let plan = self.plan(&prompt).await?;
            self.emitter
                .emit(Event::Custom {
                    name: "plan".into(),
                    value: json!({ "steps": plan.steps, "result": plan.result }),
                })
                .await
                .map_err(halted)?;
            if let Some(snapshot) = board.revise(&plan.steps) {
                self.emitter.emit(snapshot).await.map_err(halted)?;
            }
            if !plan.result.is_empty() {
                break plan.result;
            }
            if executed >= self.settings.max_steps {
                self.stop_reason = "max_steps";
                break self.max_steps_answer(&completed);
            }
            let step = plan.steps[0].clone();
            self.emitter
                .emit(board.mark(IN_PROGRESS))
                .await
                .map_err(halted)?;
            let result = self.execute(&step).await?;
            self.emitter
                .emit(board.mark(COMPLETED))
                .await
                .map_err(halted)?;
            executed += 1;
            completed.push(format!("\nStep {executed}: {step}\n"));
            completed.push(format!("\nStep {executed} Result: {result}\n"));
            vars.insert(
                "steps".into(),
                json!(
                    plan.steps
                        .iter()
                        .map(|s| format!("\"{s}\""))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
            vars.insert("completed_steps".into(), json!(completed.join(", ")));
            prompt = fill(&reflect_template, &vars)?;
        };
        let id = new_id("msg");
        for event in [
            Event::TextMessageStart {
                message_id: id.clone(),
                role: Some("assistant".into()),
                name: None,
            },
            Event::TextMessageContent {
                message_id: id.clone(),
                delta: answer.clone(),
            },
            Event::TextMessageEnd {
                message_id: id.clone(),
            },
        ] {
            self.emitter.emit(event).await.map_err(halted)?;
        }
        // The outer thread keeps the question (saved by `prepare`), the plan as it ended and
        // the final answer; the steps live in the executor's memory. Stored before
        // RUN_FINISHED.
        if let Some(ts) = &thread_store {
            let mut keep = board.message();
            keep.extend([json!({ "id": id, "role": "assistant", "content": answer })]);
            ts.save(keep).await.map_err(unavailable)?;
        }
        if !self.usage.is_empty() {
            self.emitter
                .emit(Event::Custom {
                    name: "token_usage".into(),
                    value: self.usage.report(),
                })
                .await
                .map_err(halted)?;
        }
        let usage = (self.emitter.is_v1() && !self.usage.is_empty()).then(|| self.usage.ag_ui());
        self.emitter
            .emit(Event::RunFinished {
                thread_id: input.thread_id.clone(),
                run_id: input.run_id.clone(),
                result: None,
                outcome: None,
                usage,
            })
            .await
            .map_err(halted)?;
        Ok(())
    }

    /// The answer of a run that reached `max_steps`: what was done, for the user to continue.
    fn max_steps_answer(&self, completed: &[String]) -> String {
        let last = completed
            .chunks(2)
            .last()
            .map(|c| c.join("").trim().to_string())
            .unwrap_or_default();
        format!(
            "Max steps limit ({}) reached before the objective was met. Continue with the same memory_id to go on.\nLast executed step and its result:\n{last}",
            self.settings.max_steps
        )
    }

    /// The tools as the planner is told about them.
    fn tools_prompt(&self) -> String {
        let mut specs = self.agent.tools.specs();
        if let Some(selected) = &self.overrides.selected_tools {
            specs.retain(|t| selected.contains(&t.name));
        }
        if specs.is_empty() {
            return "No tools are available: plan steps that need none.\n".into();
        }
        let mut out = String::from(
            "The executor of your plan can use these tools, and only these (invent none):\n",
        );
        for (i, t) in specs.iter().enumerate() {
            out.push_str(&format!("Tool {} - {}: {}\n", i + 1, t.name, t.description));
        }
        out
    }

    /// Asks the planner; a malformed answer gets one repair request.
    async fn plan(&mut self, prompt: &str) -> Result<Plan, Stop> {
        let mut messages = vec![Message::user_text(prompt)];
        let mut problem = String::new();
        for _ in 0..2 {
            let text = self.complete(messages.clone()).await?;
            match parse_plan(&text) {
                Ok(p) => return Ok(p),
                Err(p) => {
                    tracing::info!(problem = %p, "planner answer is not a plan; asking again");
                    problem = format!("{p}; it answered {:?}", snippet(&text));
                    messages.push(Message {
                        role: Role::Assistant,
                        content: vec![ContentBlock::Text {
                            text: if text.trim().is_empty() {
                                "(no answer)".into()
                            } else {
                                text
                            },
                        }],
                    });
                    messages.push(Message::user_text(REPAIR));
                }
            }
        }
        Err(stop(
            "INVALID_PLAN",
            format!(
                "the planner did not answer a JSON plan {{\"steps\": [...], \"result\": \"...\"}}, even when asked again: {problem}"
            ),
        ))
    }

    /// One planner call, its text collected (the planner is not streamed to the client).
    async fn complete(&mut self, messages: Vec<Message>) -> Result<String, Stop> {
        let request = ModelRequest {
            system: vec![self.settings.planner_system.clone()],
            messages,
            tools: Vec::new(),
            params: self.agent.params.clone(),
        };
        let provider = &self.agent.provider;
        let mut stream =
            retry::stream_with_retries(Arc::clone(provider), request, self.agent.retry);
        let mut text = String::new();
        let mut usage: Option<crate::model::Usage> = None;
        loop {
            let next = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => return Err(cancelled()),
                n = stream.next() => n,
            };
            let Some(item) = next else { break };
            match item {
                Ok(ModelEvent::TextDelta(d)) => text.push_str(&d),
                Ok(ModelEvent::Usage(u)) => usage.get_or_insert_with(Default::default).add(&u),
                Ok(_) => {}
                Err(e) => return Err(stop(e.code(), e.to_string())),
            }
        }
        if let Some(u) = usage {
            self.usage.record(
                provider.name(),
                provider.model_id(),
                self.agent.model_ref.as_deref(),
                u,
            );
        }
        Ok(text)
    }

    /// Runs one step through the executor (the ReAct loop), streaming its events inside a
    /// step; returns the step's result.
    async fn execute(&mut self, step: &str) -> Result<String, Stop> {
        let step_name = step.to_string();
        self.emitter
            .emit(Event::StepStarted {
                step_name: step_name.clone(),
            })
            .await
            .map_err(halted)?;
        let question_id = new_id("msg");
        let question = json!({ "id": question_id, "role": "user", "content": step });
        let mut messages = self.executor.history.clone();
        messages.push(question.clone());
        let mut parameters = Map::new();
        parameters.insert("system_prompt".into(), json!(self.settings.executor_system));
        parameters.insert(
            "max_iteration".into(),
            json!(self.settings.executor_max_iterations),
        );
        if let Some(n) = self.settings.executor_history_limit {
            parameters.insert("message_history_limit".into(), json!(n));
        }
        if let Some(s) = &self.overrides.selected_tools {
            parameters.insert("selected_tools".into(), json!(s));
        }
        let run = json!({
            "threadId": self.executor.thread,
            "runId": new_id("run"),
            "messages": messages,
            "tools": [],
            "context": [],
            "state": self.input.state.clone().unwrap_or_else(|| json!({})),
            "forwardedProps": { "parameters": parameters },
            "protocolVersion": "1.0",
        });
        let inner = crate::protocol::input::parse(run.to_string().as_bytes()).map_err(|e| {
            stop(
                "INTERNAL_ERROR",
                format!("executor input: {}: {}", e.field, e.message),
            )
        })?;
        let sub = Subagent {
            description: Some(step.to_string()),
            shares_state: true,
            ..Subagent::new("executor")
        };
        let report = run_nested(
            self.agent,
            &inner,
            sub,
            self.emitter,
            &self.cancel,
            self.store.clone(),
        )
        .await?;
        self.usage.absorb(report.usage);
        if let Some((code, message)) = report.error {
            return Err((code, message));
        }
        let result = crate::runs::nested::answer(&report.messages).to_string();
        self.executor.history.push(question);
        self.executor.history.extend(report.messages);
        self.executor.parent_interaction_id = Some(question_id);
        self.emitter
            .emit(Event::StepFinished { step_name })
            .await
            .map_err(halted)?;
        Ok(result)
    }
}

/// Runs the executor's whole run on an emitter of its own, streaming it into `outer` as
/// subagent `sub` (a 1.0 client sees it attributed; an older one as the run's own events); a
/// gone outer client cancels it.
async fn run_nested(
    agent: &Agent,
    input: &RunAgentInput,
    sub: Subagent,
    outer: &mut Emitter,
    cancel: &CancellationToken,
    store: Option<Arc<dyn Store>>,
) -> Result<Report, Stop> {
    let (tx, mut rx) = mpsc::channel(SIDE_CAPACITY);
    let child = cancel.child_token();
    let inner_cancel = child.clone();
    let run = async move {
        let mut emitter = Emitter::nested(tx, Arc::new(sub));
        super::react::run(agent, input, &mut emitter, inner_cancel, store).await
    };
    let forward = async {
        let mut failed: Option<EmitError> = None;
        while let Some(side) = rx.recv().await {
            if failed.is_some() {
                continue;
            }
            if let Err(e) = outer.side(side).await {
                failed = Some(e);
                child.cancel();
            }
        }
        failed
    };
    let (report, failed) = tokio::join!(run, forward);
    if let Some(e) = failed {
        return Err(halted(e));
    }
    if cancel.is_cancelled() {
        return Err(cancelled());
    }
    Ok(report)
}

fn fill(template: &str, vars: &Map<String, Value>) -> Result<String, Stop> {
    render(template, vars, &Map::new(), Escape::Raw)
        .map_err(|e| stop("INVALID_PARAMETERS", format!("prompt template: {e}")))
}

fn snippet(text: &str) -> String {
    let t = text.trim();
    match t.char_indices().nth(200) {
        Some((i, _)) => format!("{}...", &t[..i]),
        None => t.to_string(),
    }
}

/// The thread's earlier questions and answers (the last `limit` interactions), for the
/// planner of a continued conversation.
fn interactions(stored: &[Value], current: &[Value], limit: usize) -> String {
    let current_ids: Vec<&str> = current
        .iter()
        .filter_map(|m| m.get("id").and_then(Value::as_str))
        .collect();
    let mut pairs: Vec<(String, String)> = Vec::new();
    for m in stored {
        if m.get("id")
            .and_then(Value::as_str)
            .is_some_and(|id| current_ids.contains(&id))
        {
            continue;
        }
        match m.get("role").and_then(Value::as_str) {
            Some("user") => pairs.push((message_text(m, " "), String::new())),
            Some("assistant") => {
                if let Some(last) = pairs.last_mut() {
                    let text = message_text(m, " ");
                    if !text.is_empty() {
                        last.1 = text;
                    }
                }
            }
            _ => {}
        }
    }
    let skip = pairs.len().saturating_sub(limit);
    pairs[skip..]
        .iter()
        .map(|(q, a)| format!("\nQuestion: {q}\nResponse: {a}\n"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_are_read_bare_fenced_or_with_text_around() {
        let want = Plan {
            steps: vec!["list the indexes".into()],
            result: String::new(),
        };
        assert_eq!(
            parse_plan(r#"{"steps": ["list the indexes"], "result": ""}"#).unwrap(),
            want
        );
        assert_eq!(
            parse_plan("```json\n{\"steps\": [\"list the indexes\"]}\n```").unwrap(),
            want
        );
        assert_eq!(
            parse_plan(
                "Here is the plan: {\"steps\": [\"list the indexes\"], \"result\": null} Done."
            )
            .unwrap(),
            want
        );
        assert_eq!(
            parse_plan(r#"{"steps": [], "result": "42"}"#)
                .unwrap()
                .result,
            "42"
        );
    }

    #[test]
    fn answers_that_are_not_plans_say_why() {
        assert!(parse_plan("I think we should list indexes.").is_err());
        assert!(parse_plan(r#"{"steps": [], "result": ""}"#).is_err());
        assert!(parse_plan(r#"{"steps": "one", "result": ""}"#).is_err());
    }

    #[test]
    fn earlier_interactions_pair_questions_with_answers() {
        let stored = vec![
            json!({"id": "1", "role": "user", "content": "q1"}),
            json!({"id": "2", "role": "assistant", "content": "a1"}),
            json!({"id": "3", "role": "user", "content": "q2"}),
            json!({"id": "4", "role": "assistant", "content": "a2"}),
            json!({"id": "5", "role": "user", "content": "now"}),
        ];
        let current = vec![json!({"id": "5", "role": "user", "content": "now"})];
        let text = interactions(&stored, &current, 1);
        assert!(text.contains("Question: q2") && text.contains("Response: a2"));
        assert!(!text.contains("q1") && !text.contains("now"));
    }
}
