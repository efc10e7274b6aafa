//! A plan-execute-reflect run's plan as a `plan` activity (see [`super::per`]).

use serde_json::{Value, json};

use crate::protocol::events::Event;
use crate::protocol::new_id;

pub(super) const PENDING: &str = "pending";
pub(super) const IN_PROGRESS: &str = "in_progress";
pub(super) const COMPLETED: &str = "completed";

/// The plan as a UI draws it: one `plan` activity whose content is
/// `{steps: [{description, status}]}`, the steps done so far followed by the planner's latest
/// remaining ones. A revision by the planner is a snapshot; a step starting or ending is a
/// delta on its status.
#[derive(Debug, Default)]
pub(super) struct PlanBoard {
    id: Option<String>,
    steps: Vec<(String, &'static str)>,
    /// How many steps are done (they stay as they were whatever the planner says next).
    done: usize,
}

impl PlanBoard {
    /// The planner's latest remaining steps; a snapshot when the plan changed.
    pub(super) fn revise(&mut self, remaining: &[String]) -> Option<Event> {
        let next: Vec<(String, &'static str)> = self.steps[..self.done]
            .iter()
            .cloned()
            .chain(remaining.iter().map(|s| (s.clone(), PENDING)))
            .collect();
        if self.id.is_some() && next == self.steps {
            return None;
        }
        if self.id.is_none() && remaining.is_empty() {
            // Answered at once: there was never a plan to show.
            return None;
        }
        self.steps = next;
        let id = self.id.get_or_insert_with(|| new_id("plan")).clone();
        Some(Event::ActivitySnapshot {
            message_id: id,
            activity_type: "plan".into(),
            content: self.content(),
            replace: Some(true),
        })
    }

    /// Sets the status of the step under way (the first not done); `completed` moves on.
    pub(super) fn mark(&mut self, status: &'static str) -> Event {
        let i = self.done;
        if let Some(step) = self.steps.get_mut(i) {
            step.1 = status;
        }
        if status == COMPLETED {
            self.done += 1;
        }
        Event::ActivityDelta {
            message_id: self.id.clone().unwrap_or_default(),
            activity_type: "plan".into(),
            patch: vec![
                json!({"op": "replace", "path": format!("/steps/{i}/status"), "value": status}),
            ],
        }
    }

    fn content(&self) -> Value {
        let steps: Vec<Value> = self
            .steps
            .iter()
            .map(|(d, s)| json!({"description": d, "status": s}))
            .collect();
        json!({ "steps": steps })
    }

    /// The plan as a stored `activity` message (none when there never was one).
    pub(super) fn message(&self) -> Vec<Value> {
        self.id
            .iter()
            .map(|id| json!({"id": id, "role": "activity", "activityType": "plan", "content": self.content()}))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(e: &Event) -> Value {
        match e {
            Event::ActivitySnapshot { content, .. } => content["steps"].clone(),
            other => panic!("not a snapshot: {other:?}"),
        }
    }

    #[test]
    fn done_steps_stay_and_only_changes_are_sent() {
        let mut b = PlanBoard::default();
        assert!(b.revise(&[]).is_none(), "an immediate answer has no plan");
        let first = b.revise(&["a".into(), "b".into()]).unwrap();
        assert_eq!(
            steps(&first)[1],
            json!({"description": "b", "status": PENDING})
        );
        b.mark(IN_PROGRESS);
        let Event::ActivityDelta { patch, .. } = b.mark(COMPLETED) else {
            panic!("a delta")
        };
        assert_eq!(patch[0]["path"], "/steps/0/status");
        assert!(b.revise(&["b".into()]).is_none(), "the same plan");
        let revised = b.revise(&["c".into()]).unwrap();
        assert_eq!(
            steps(&revised),
            json!([{"description": "a", "status": COMPLETED},
                   {"description": "c", "status": PENDING}])
        );
        assert_eq!(b.message()[0]["role"], "activity");
    }
}
