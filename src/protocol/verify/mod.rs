//! The lifecycle state machine every outgoing event passes through. It enforces the rules the
//! `@ag-ui/client` verifiers (1.0.0 and 0.0.x) and the stricter validators apply, so the gateway
//! finds its own bugs before a browser does. A violation is a gateway bug, never a client fault.

use std::collections::{HashMap, HashSet};

use super::events::{Event, Outcome, ToolResultContent};

/// A rule the next event would break.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("AG-UI protocol violation at {event}: {rule}")]
pub struct Violation {
    /// The offending event's type.
    pub event: &'static str,
    /// What it breaks.
    pub rule: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Idle,
    Running,
    Finished,
    Errored,
}

/// Tracks what is open in one run's event stream.
#[derive(Debug)]
pub struct Verifier {
    v1: bool,
    phase: Phase,
    /// Text messages started and not yet ended, in start order.
    open_text: Vec<String>,
    /// Tool calls started and not ended, with the arguments streamed so far.
    open_calls: HashMap<String, String>,
    /// Start order of open calls, so closing is deterministic.
    open_call_order: Vec<String>,
    /// Calls that ended in this run or are known from the input history: results may name them.
    finished_calls: HashSet<String>,
    /// Calls that already have a result.
    answered_calls: HashSet<String>,
    /// Steps started and not finished, with the subagent that started each.
    open_steps: Vec<(Owner, String)>,
    /// The open reasoning span of each agent (the run's own and each subagent's).
    reasoning_spans: Vec<(Owner, String)>,
    open_reasoning: Vec<String>,
    /// Every message, tool-call and activity id used in this run (ids are never reused), with
    /// who produced it (`None`: the run's own agent): later events about it must carry the
    /// same attribution.
    ids: HashMap<String, Owner>,
    /// Activity message ids, so a delta names a known activity.
    activities: HashSet<String>,
    /// Subagents started and not yet finished, in start order.
    active_subagents: Vec<String>,
    /// Subagents that finished or failed: their ids are spent.
    ended_subagents: HashSet<String>,
}

/// The subagent an event is attributed to (`None`: the run's own agent).
pub type Owner = Option<String>;

impl Verifier {
    /// A verifier for a client that does (`v1`) or does not accept 1.0-only shapes.
    pub fn new(v1: bool) -> Self {
        Self {
            v1,
            phase: Phase::Idle,
            open_text: Vec::new(),
            open_calls: HashMap::new(),
            open_call_order: Vec::new(),
            finished_calls: HashSet::new(),
            answered_calls: HashSet::new(),
            open_steps: Vec::new(),
            reasoning_spans: Vec::new(),
            open_reasoning: Vec::new(),
            ids: HashMap::new(),
            activities: HashSet::new(),
            active_subagents: Vec::new(),
            ended_subagents: HashSet::new(),
        }
    }

    /// Declares tool calls from the input history, so a resumed run may send their results.
    pub fn know_tool_calls<I: IntoIterator<Item = String>>(&mut self, ids: I) {
        self.finished_calls.extend(ids);
    }

    /// Whether the stream has ended (`RUN_FINISHED` or `RUN_ERROR` was accepted).
    pub fn is_closed(&self) -> bool {
        matches!(self.phase, Phase::Finished | Phase::Errored)
    }

    /// Whether `id` was already used for a message, tool call or activity in this run.
    pub fn is_used(&self, id: &str) -> bool {
        self.ids.contains_key(id)
    }

    /// Whether `RUN_STARTED` was accepted and the run has not ended.
    pub fn is_running(&self) -> bool {
        self.phase == Phase::Running
    }

    /// Checks an event of the run's own agent against the rules and, if it passes, records
    /// its effect.
    pub fn check(&mut self, event: &Event) -> Result<(), Violation> {
        self.check_as(event, None)
    }

    /// Checks `event`, produced by subagent `by` (`None`: the run's own agent), against the
    /// rules and, if it passes, records its effect.
    pub fn check_as(&mut self, event: &Event, by: Option<&str>) -> Result<(), Violation> {
        let name = event.type_name();
        let fail = |rule: String| Err(Violation { event: name, rule });
        if let Some(s) = by {
            if !self.v1 {
                return fail("subagent attribution is 1.0-only".into());
            }
            if !self.active_subagents.iter().any(|a| a == s) {
                return fail(format!("attributed to subagent {s:?}, which is not active"));
            }
            if matches!(
                event,
                Event::RunStarted { .. }
                    | Event::RunFinished { .. }
                    | Event::RunError { .. }
                    | Event::MessagesSnapshot { .. }
                    | Event::SubagentStarted { .. }
                    | Event::SubagentFinished { .. }
                    | Event::SubagentError { .. }
            ) {
                return fail("run-scoped and subagent events carry no attribution".into());
            }
        }
        let owner: Owner = by.map(str::to_string);
        match self.phase {
            Phase::Finished => return fail("nothing may follow RUN_FINISHED".into()),
            Phase::Errored => return fail("nothing may follow RUN_ERROR".into()),
            Phase::Idle if !matches!(event, Event::RunStarted { .. } | Event::RunError { .. }) => {
                return fail("the first event must be RUN_STARTED or RUN_ERROR".into());
            }
            _ => {}
        }
        match event {
            Event::RunStarted { .. } => {
                if self.phase != Phase::Idle {
                    return fail("RUN_STARTED while a run is active".into());
                }
                self.phase = Phase::Running;
            }
            Event::RunError { .. } => self.phase = Phase::Errored,
            Event::RunFinished { outcome, .. } => {
                if let Some(open) = self.first_open() {
                    return fail(format!("{open} is still open"));
                }
                if let Some(s) = self.active_subagents.first() {
                    return fail(format!("subagent {s:?} is still active"));
                }
                match outcome {
                    Some(Outcome::Cancelled) if !self.v1 => {
                        return fail("outcome `cancelled` is 1.0-only".into());
                    }
                    Some(Outcome::Success {
                        pending_tool_call_ids: Some(_),
                    }) if !self.v1 => {
                        return fail("pendingToolCallIds is 1.0-only".into());
                    }
                    Some(Outcome::Interrupt { interrupts }) if interrupts.is_empty() => {
                        return fail("an interrupt outcome needs at least one interrupt".into());
                    }
                    _ => {}
                }
                self.phase = Phase::Finished;
            }
            Event::StepStarted { step_name } => {
                let step = (owner, step_name.clone());
                if self.open_steps.contains(&step) {
                    return fail(format!("step {step_name:?} is already active"));
                }
                self.open_steps.push(step);
            }
            Event::StepFinished { step_name } => {
                let Some(i) = self
                    .open_steps
                    .iter()
                    .position(|(o, s)| s == step_name && *o == owner)
                else {
                    return fail(format!("step {step_name:?} was not started by its agent"));
                };
                self.open_steps.remove(i);
            }
            Event::TextMessageStart { message_id, .. } => {
                self.claim_id(message_id, owner).or_else(&fail)?;
                self.open_text.push(message_id.clone());
            }
            Event::TextMessageContent { message_id, delta } => {
                if !self.open_text.contains(message_id) {
                    return fail(format!("no open text message {message_id:?}"));
                }
                self.same_owner(message_id, by).or_else(&fail)?;
                if delta.is_empty() {
                    return fail("empty delta".into());
                }
            }
            Event::TextMessageEnd { message_id } => {
                let Some(i) = self.open_text.iter().position(|m| m == message_id) else {
                    return fail(format!("no open text message {message_id:?}"));
                };
                self.same_owner(message_id, by).or_else(&fail)?;
                self.open_text.remove(i);
            }
            Event::ToolCallStart {
                tool_call_id,
                parent_message_id,
                ..
            } => {
                if let Some(p) = parent_message_id
                    && self.ids.contains_key(p)
                {
                    self.same_owner(p, by).or_else(&fail)?;
                }
                self.claim_id(tool_call_id, owner).or_else(&fail)?;
                self.open_calls.insert(tool_call_id.clone(), String::new());
                self.open_call_order.push(tool_call_id.clone());
            }
            Event::ToolCallArgs {
                tool_call_id,
                delta,
            } => {
                let Some(args) = self.open_calls.get_mut(tool_call_id) else {
                    return fail(format!("no open tool call {tool_call_id:?}"));
                };
                args.push_str(delta);
                self.same_owner(tool_call_id, by).or_else(&fail)?;
            }
            Event::ToolCallEnd { tool_call_id } => {
                if !self.open_calls.contains_key(tool_call_id) {
                    return fail(format!("no open tool call {tool_call_id:?}"));
                }
                self.same_owner(tool_call_id, by).or_else(&fail)?;
                let Some(args) = self.open_calls.remove(tool_call_id) else {
                    return fail(format!("no open tool call {tool_call_id:?}"));
                };
                self.open_call_order.retain(|c| c != tool_call_id);
                // Arguments are the model's words, streamed as they came: invalid JSON is the
                // model's fault, reported to it as an error result rather than failing the run.
                if serde_json::from_str::<serde::de::IgnoredAny>(&args).is_err() {
                    tracing::warn!(tool_call_id = %tool_call_id, "tool-call arguments are not valid JSON");
                }
                self.finished_calls.insert(tool_call_id.clone());
            }
            Event::ToolCallResult {
                message_id,
                tool_call_id,
                content,
                ..
            } => {
                if !self.finished_calls.contains(tool_call_id) {
                    return fail(format!(
                        "result for unknown or unfinished call {tool_call_id:?}"
                    ));
                }
                if matches!(content, ToolResultContent::Parts(_)) && !self.v1 {
                    return fail("array content is 1.0-only".into());
                }
                if self.answered_calls.contains(tool_call_id) {
                    return fail(format!("second result for call {tool_call_id:?}"));
                }
                self.claim_id(message_id, owner).or_else(&fail)?;
                self.answered_calls.insert(tool_call_id.clone());
            }
            Event::ReasoningStart { message_id } => {
                if self.reasoning_spans.iter().any(|(o, _)| *o == owner) {
                    return fail("a reasoning span is already open".into());
                }
                self.reasoning_spans.push((owner, message_id.clone()));
            }
            Event::ReasoningMessageStart { message_id, .. } => {
                if !self.reasoning_spans.iter().any(|(o, _)| *o == owner) {
                    return fail("no open reasoning span".into());
                }
                self.claim_id(message_id, owner).or_else(&fail)?;
                self.open_reasoning.push(message_id.clone());
            }
            Event::ReasoningMessageContent { message_id, delta } => {
                if !self.open_reasoning.contains(message_id) {
                    return fail(format!("no open reasoning message {message_id:?}"));
                }
                self.same_owner(message_id, by).or_else(&fail)?;
                if delta.is_empty() {
                    return fail("empty delta".into());
                }
            }
            Event::ReasoningMessageEnd { message_id } => {
                let Some(i) = self.open_reasoning.iter().position(|m| m == message_id) else {
                    return fail(format!("no open reasoning message {message_id:?}"));
                };
                self.same_owner(message_id, by).or_else(&fail)?;
                self.open_reasoning.remove(i);
            }
            Event::ReasoningEnd { message_id } => {
                let Some(i) = self
                    .reasoning_spans
                    .iter()
                    .position(|(o, m)| m == message_id && *o == owner)
                else {
                    return fail(format!("no open reasoning span {message_id:?}"));
                };
                if self
                    .open_reasoning
                    .iter()
                    .any(|m| self.ids.get(m) == Some(&owner))
                {
                    return fail("a reasoning message is still open".into());
                }
                self.reasoning_spans.remove(i);
            }
            Event::ActivitySnapshot { message_id, .. } => {
                if !self.activities.contains(message_id) {
                    self.claim_id(message_id, owner).or_else(&fail)?;
                    self.activities.insert(message_id.clone());
                } else {
                    // A later snapshot of it belongs to whoever sends it (as the client does).
                    self.ids.insert(message_id.clone(), owner);
                }
            }
            Event::ActivityDelta { message_id, .. } => {
                if !self.activities.contains(message_id) {
                    return fail(format!("no activity {message_id:?}"));
                }
                self.same_owner(message_id, by).or_else(&fail)?;
            }
            Event::SubagentStarted { .. }
            | Event::SubagentFinished { .. }
            | Event::SubagentError { .. }
                if !self.v1 =>
            {
                return fail("SUBAGENT_* events are 1.0-only".into());
            }
            Event::SubagentStarted {
                subagent_run_id,
                parent_subagent_run_id,
                ..
            } => {
                if subagent_run_id.is_empty() {
                    return fail("empty subagentRunId".into());
                }
                if self.active_subagents.contains(subagent_run_id)
                    || self.ended_subagents.contains(subagent_run_id)
                {
                    return fail(format!(
                        "subagent {subagent_run_id:?} was already started in this run"
                    ));
                }
                if let Some(p) = parent_subagent_run_id
                    && !self.active_subagents.contains(p)
                {
                    return fail(format!("parent subagent {p:?} is not active"));
                }
                self.active_subagents.push(subagent_run_id.clone());
            }
            Event::SubagentFinished {
                subagent_run_id, ..
            }
            | Event::SubagentError {
                subagent_run_id, ..
            } => {
                let Some(i) = self
                    .active_subagents
                    .iter()
                    .position(|s| s == subagent_run_id)
                else {
                    return fail(format!("no active subagent {subagent_run_id:?}"));
                };
                self.active_subagents.remove(i);
                self.ended_subagents.insert(subagent_run_id.clone());
            }
            _ => {}
        }
        Ok(())
    }

    /// Whether `id` (a message, call or activity) belongs to `by`.
    fn same_owner(&self, id: &str, by: Option<&str>) -> Result<(), String> {
        // Runs without subagents (nearly all, and every token of them) own everything.
        if by.is_none() && self.active_subagents.is_empty() && self.ended_subagents.is_empty() {
            return Ok(());
        }
        let owner = self.ids.get(id).and_then(|o| o.as_deref());
        if owner == by {
            return Ok(());
        }
        let name = |o: Option<&str>| match o {
            Some(s) => format!("subagent {s:?}"),
            None => "the run's own agent".to_string(),
        };
        Err(format!(
            "{id:?} belongs to {}, not {}",
            name(owner),
            name(by)
        ))
    }

    fn claim_id(&mut self, id: &str, owner: Owner) -> Result<(), String> {
        if id.is_empty() {
            return Err("empty id".into());
        }
        if self.ids.contains_key(id) {
            return Err(format!("id {id:?} was already used in this run"));
        }
        self.ids.insert(id.to_string(), owner);
        Ok(())
    }

    fn first_open(&self) -> Option<String> {
        if let Some(m) = self.open_text.first() {
            return Some(format!("text message {m:?}"));
        }
        if let Some(c) = self.open_call_order.first() {
            return Some(format!("tool call {c:?}"));
        }
        if let Some((_, s)) = self.open_steps.first() {
            return Some(format!("step {s:?}"));
        }
        if let Some(m) = self.open_reasoning.first() {
            return Some(format!("reasoning message {m:?}"));
        }
        self.reasoning_spans
            .first()
            .map(|(_, m)| format!("reasoning span {m:?}"))
    }

    fn owner_of(&self, id: &str) -> Owner {
        self.ids.get(id).cloned().flatten()
    }

    /// The events that close everything still open, in a valid order, each with the subagent
    /// it belongs to; active subagents end with `SUBAGENT_ERROR`, innermost first. Tool calls
    /// whose arguments are incomplete JSON are closed as they are: the run is about to fail
    /// anyway.
    pub fn closers(&self) -> Vec<(Event, Owner)> {
        let mut out = Vec::new();
        for m in &self.open_reasoning {
            let e = Event::ReasoningMessageEnd {
                message_id: m.clone(),
            };
            out.push((e, self.owner_of(m)));
        }
        for (o, m) in &self.reasoning_spans {
            let e = Event::ReasoningEnd {
                message_id: m.clone(),
            };
            out.push((e, o.clone()));
        }
        for m in &self.open_text {
            let e = Event::TextMessageEnd {
                message_id: m.clone(),
            };
            out.push((e, self.owner_of(m)));
        }
        for c in &self.open_call_order {
            let e = Event::ToolCallEnd {
                tool_call_id: c.clone(),
            };
            out.push((e, self.owner_of(c)));
        }
        for (o, s) in self.open_steps.iter().rev() {
            let e = Event::StepFinished {
                step_name: s.clone(),
            };
            out.push((e, o.clone()));
        }
        for s in self.active_subagents.iter().rev() {
            let e = Event::SubagentError {
                subagent_run_id: s.clone(),
                message: "the run ended before this subagent finished".into(),
                code: None,
            };
            out.push((e, None));
        }
        out
    }

    /// Records `event` without checking it: used only when closing a failing run.
    pub fn force(&mut self, event: &Event) {
        match event {
            Event::ReasoningMessageEnd { message_id } => {
                self.open_reasoning.retain(|m| m != message_id)
            }
            Event::ReasoningEnd { message_id } => {
                self.reasoning_spans.retain(|(_, m)| m != message_id)
            }
            Event::TextMessageEnd { message_id } => self.open_text.retain(|m| m != message_id),
            Event::ToolCallEnd { tool_call_id } => {
                self.open_calls.remove(tool_call_id);
                self.open_call_order.retain(|c| c != tool_call_id);
            }
            Event::StepFinished { step_name } => self.open_steps.retain(|(_, s)| s != step_name),
            Event::SubagentError {
                subagent_run_id, ..
            } => {
                self.active_subagents.retain(|s| s != subagent_run_id);
                self.ended_subagents.insert(subagent_run_id.clone());
            }
            Event::RunError { .. } => self.phase = Phase::Errored,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;
