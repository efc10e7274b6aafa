//! Runs inside runs. An agent that calls another agent (ml-commons `AgentTool`, a
//! plan-execute-reflect executor step) runs it on an emitter of its own whose events go up to
//! the spawning run instead of to a client; there they become the AG-UI 1.0 subagent events:
//! the inner `RUN_STARTED` turns into `SUBAGENT_STARTED`, its `RUN_FINISHED` / `RUN_ERROR`
//! into `SUBAGENT_FINISHED` / `SUBAGENT_ERROR`, and everything between carries the
//! invocation's `subagentRunId`. Tools use the same channel for events they send while they
//! work (progress activities).

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::protocol::events::{Event, Outcome};
use crate::protocol::verify::Owner;

/// One subagent invocation, as the run that spawned it announces it.
#[derive(Debug, Clone, Default)]
pub struct Subagent {
    /// The invocation's fresh id (`subagentRunId`).
    pub id: String,
    /// The subagent's (reusable) name.
    pub name: String,
    /// What it is for, for display.
    pub description: Option<String>,
    /// The tool call that spawned it, when an agent is a tool.
    pub parent_tool_call_id: Option<String>,
    /// Whether it works on the run's shared state: its `STATE_*` events reach the client only
    /// then (an agent tool's inner run starts from an empty state of its own).
    pub shares_state: bool,
}

impl Subagent {
    /// A new invocation of `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            id: crate::protocol::new_id("sub"),
            name: name.into(),
            ..Self::default()
        }
    }
}

/// What a run's tools and nested runs send into it while they work.
#[derive(Debug)]
pub enum SideEvent {
    /// An event of a nested run: its own (`by: None`) or one of its own subagents'.
    Nested {
        /// The invocation it belongs to.
        sub: Arc<Subagent>,
        /// The event.
        event: Event,
        /// The deeper subagent it is attributed to, if any.
        by: Owner,
    },
    /// An event the tool sends on the run's behalf (an activity: progress, citations).
    Emit(Event),
    /// The model calls a nested run made, for the run's own accounting (`RUN_FINISHED.usage`,
    /// `token_usage`).
    Usage(crate::runs::usage::Ledger),
}

/// The sending side of a run's side channel.
pub type SideTx = mpsc::Sender<SideEvent>;

/// How many side events may wait for the run to take them (a nested run then waits: a slow
/// client slows its subagents too instead of growing memory).
pub const SIDE_CAPACITY: usize = 64;

/// What a nested run's event becomes in the run that spawned it, with its attribution:
/// `None` when it stays out of that run's stream (the nested run's own snapshot and
/// accounting, and its private state).
pub fn lift(sub: &Subagent, event: Event, by: Owner) -> Option<(Event, Owner)> {
    if by.is_some() {
        // A deeper subagent's event is already attributed.
        return Some((event, by));
    }
    let lifted = match event {
        Event::RunStarted { .. } => Event::SubagentStarted {
            subagent_run_id: sub.id.clone(),
            name: sub.name.clone(),
            description: sub.description.clone(),
            parent_subagent_run_id: None,
            parent_tool_call_id: sub.parent_tool_call_id.clone(),
            parent_message_id: None,
        },
        Event::RunFinished {
            result, outcome, ..
        } => Event::SubagentFinished {
            subagent_run_id: sub.id.clone(),
            result,
            outcome: match outcome {
                Some(Outcome::Interrupt { interrupts }) => Some(json!({
                    "type": "suspended",
                    "interruptIds": interrupts.iter().map(|i| i.id.clone()).collect::<Vec<_>>(),
                })),
                _ => None,
            },
        },
        Event::RunError { message, code, .. } => Event::SubagentError {
            subagent_run_id: sub.id.clone(),
            message,
            code,
        },
        // Its own subagents, started directly by it, are its children.
        mut e @ Event::SubagentStarted { .. } => {
            if let Event::SubagentStarted {
                parent_subagent_run_id: parent @ None,
                ..
            } = &mut e
            {
                *parent = Some(sub.id.clone());
            }
            e
        }
        e @ (Event::SubagentFinished { .. } | Event::SubagentError { .. }) => e,
        Event::MessagesSnapshot { .. } => return None,
        Event::Custom { ref name, .. } if name == "token_usage" => return None,
        Event::StateSnapshot { .. } | Event::StateDelta { .. } if !sub.shares_state => {
            return None;
        }
        other => return Some((other, Some(sub.id.clone()))),
    };
    Some((lifted, None))
}

/// The answer a nested run gave: its last non-empty assistant text of its own.
pub fn answer(messages: &[Value]) -> &str {
    messages
        .iter()
        .rev()
        .find(|m| {
            m["role"] == "assistant"
                && m.get("subagentRunId").is_none()
                && m["content"].as_str().is_some_and(|c| !c.is_empty())
        })
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub() -> Subagent {
        Subagent {
            id: "s1".into(),
            name: "helper".into(),
            parent_tool_call_id: Some("c1".into()),
            ..Subagent::default()
        }
    }

    #[test]
    fn the_nested_lifecycle_becomes_subagent_events() {
        let started = Event::RunStarted {
            thread_id: "t".into(),
            run_id: "r".into(),
            parent_run_id: None,
            protocol_version: None,
            input: None,
        };
        let (e, by) = lift(&sub(), started, None).unwrap();
        assert_eq!(by, None);
        assert!(
            matches!(e, Event::SubagentStarted { ref subagent_run_id, ref parent_tool_call_id, .. }
            if subagent_run_id == "s1" && parent_tool_call_id.as_deref() == Some("c1"))
        );
        let err = Event::RunError {
            message: "boom".into(),
            code: Some("X".into()),
            usage: None,
        };
        assert!(matches!(
            lift(&sub(), err, None).unwrap().0,
            Event::SubagentError { ref message, .. } if message == "boom"
        ));
        let text = Event::TextMessageEnd {
            message_id: "m".into(),
        };
        assert_eq!(
            lift(&sub(), text.clone(), None).unwrap().1.as_deref(),
            Some("s1")
        );
        assert_eq!(
            lift(&sub(), text, Some("deeper".into()))
                .unwrap()
                .1
                .as_deref(),
            Some("deeper")
        );
        let state = Event::StateSnapshot {
            snapshot: json!({}),
        };
        assert!(
            lift(&sub(), state, None).is_none(),
            "an agent tool's state is its own"
        );
    }

    #[test]
    fn a_grandchild_gets_its_parent() {
        let inner = Event::SubagentStarted {
            subagent_run_id: "s2".into(),
            name: "n".into(),
            description: None,
            parent_subagent_run_id: None,
            parent_tool_call_id: Some("c9".into()),
            parent_message_id: None,
        };
        let (e, by) = lift(&sub(), inner, None).unwrap();
        assert_eq!(by, None);
        assert!(
            matches!(e, Event::SubagentStarted { parent_subagent_run_id: Some(ref p), .. } if p == "s1")
        );
    }

    #[test]
    fn the_answer_is_the_last_own_assistant_text() {
        let messages = vec![
            json!({"role":"assistant","content":"first"}),
            json!({"role":"assistant","content":"last"}),
            json!({"role":"assistant","content":"inner","subagentRunId":"x"}),
            json!({"role":"assistant","content":""}),
        ];
        assert_eq!(answer(&messages), "last");
    }
}
