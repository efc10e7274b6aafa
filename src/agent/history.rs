//! A thread's history in the store: merging what the client sends with what is stored (per the
//! agent's history source), saving what a run produced, and bounding what goes to the model.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::Value;

use crate::config::{HistorySource, MemoryConfig};
use crate::conversation::{ContentBlock, Message, Role};
use crate::protocol::input::InputMessage;
use crate::store::memory::{Filter, Namespace, NewWorkingMemory, Page, SortKey};
use crate::store::{Store, StoreError, StoredMessage};

/// One thread of one agent in the store.
pub struct ThreadStore {
    store: Arc<dyn Store>,
    agent: String,
    thread: String,
    /// The agent's memory settings.
    pub config: MemoryConfig,
}

fn id_of(v: &Value) -> Option<&str> {
    v.get("id").and_then(Value::as_str)
}

fn role_of(v: &Value) -> &str {
    v.get("role").and_then(Value::as_str).unwrap_or("")
}

impl ThreadStore {
    /// The thread `thread` of `agent`.
    pub fn new(store: Arc<dyn Store>, agent: &str, thread: &str, config: MemoryConfig) -> Self {
        Self {
            store,
            agent: agent.to_string(),
            thread: thread.to_string(),
            config,
        }
    }

    /// The stored thread as AG-UI messages.
    pub async fn load(&self) -> Result<Vec<Value>, StoreError> {
        match &self.config.memory_container_id {
            None => Ok(self
                .store
                .load_thread(&self.agent, &self.thread)
                .await?
                .into_iter()
                .map(|m| m.body)
                .collect()),
            Some(container) => self.load_container(container).await,
        }
    }

    /// Saves messages (new ones appended, known ids updated in place).
    pub async fn save(&self, messages: Vec<Value>) -> Result<(), StoreError> {
        let stored: Vec<StoredMessage> = messages
            .into_iter()
            .filter_map(StoredMessage::from_agui)
            .collect();
        match &self.config.memory_container_id {
            None => {
                self.store
                    .save_messages(&self.agent, &self.thread, &stored)
                    .await
            }
            Some(container) => self.save_container(container, stored).await,
        }
    }

    fn namespace(&self) -> Namespace {
        Namespace::from([
            ("agent_id".to_string(), self.agent.clone()),
            ("session_id".to_string(), self.thread.clone()),
        ])
    }

    /// The thread from a memory container: its session's conversational working memories, each
    /// holding one AG-UI message; a later version of a message id replaces the earlier one in
    /// place.
    async fn load_container(&self, container: &str) -> Result<Vec<Value>, StoreError> {
        let filter = Filter {
            namespace: self.namespace().into_iter().collect(),
            namespace_size: None,
            payload_type: Some("conversational".into()),
        };
        let mut out: Vec<Value> = Vec::new();
        let mut from = 0;
        loop {
            let page = Page {
                from,
                size: 500,
                sort: SortKey::Created,
                descending: false,
            };
            let hits = self
                .store
                .search_working_memory(container, &filter, page)
                .await?;
            let n = hits.items.len() as i64;
            for wm in hits.items {
                let Some(Value::Array(msgs)) = wm.body.get("messages") else {
                    continue;
                };
                for m in msgs {
                    match out
                        .iter()
                        .position(|o| id_of(o).is_some() && id_of(o) == id_of(m))
                    {
                        Some(i) => out[i] = m.clone(),
                        None => out.push(m.clone()),
                    }
                }
            }
            from += n;
            if n == 0 || from >= hits.total {
                return Ok(out);
            }
        }
    }

    /// Adds the messages the container does not hold yet (or holds in another version).
    async fn save_container(
        &self,
        container: &str,
        messages: Vec<StoredMessage>,
    ) -> Result<(), StoreError> {
        if messages.is_empty() {
            return Ok(());
        }
        let known = self.load_container(container).await?;
        // What a run adds is its thread's owner's (recorded before the run, see `api::owner`).
        let owner = self
            .store
            .thread_owner(&self.agent, &self.thread)
            .await?
            .unwrap_or_default();
        for m in messages {
            if known
                .iter()
                .any(|k| id_of(k) == Some(m.id.as_str()) && *k == m.body)
            {
                continue;
            }
            let mut body = serde_json::Map::new();
            body.insert("messages".into(), Value::Array(vec![m.body]));
            body.insert(
                "metadata".into(),
                serde_json::json!({"input_type": "messages", "source": "ag-ui"}),
            );
            let new = NewWorkingMemory {
                payload_type: "conversational".into(),
                namespace: self.namespace(),
                body,
                owner: owner.clone(),
            };
            if self
                .store
                .add_working_memory(container, new)
                .await?
                .is_none()
            {
                return Err(StoreError::Corrupt(format!(
                    "memory container {container:?} does not exist"
                )));
            }
        }
        Ok(())
    }

    /// The history this run works on, saving what the client added. `client` mode: the
    /// client's messages are the truth (saved, deduplicated by id). `server` mode: the stored
    /// thread is, plus the client's new messages; a `tool` result is taken only for a call
    /// that is still pending.
    pub async fn prepare(&self, client: &[Value]) -> Result<Vec<Value>, StoreError> {
        match self.config.history {
            HistorySource::Client => {
                // The client re-sends the whole history every run: write only what is new or
                // changed, so a long thread costs one read instead of one write per message.
                let stored = self.load().await?;
                let known: HashMap<&str, &Value> =
                    stored.iter().filter_map(|m| Some((id_of(m)?, m))).collect();
                let changed: Vec<Value> = client
                    .iter()
                    .filter(|m| id_of(m).is_some_and(|id| known.get(id) != Some(m)))
                    .cloned()
                    .collect();
                self.save(changed).await?;
                Ok(client.to_vec())
            }
            HistorySource::Server => {
                let mut stored = self.load().await?;
                let known: HashSet<String> = stored
                    .iter()
                    .filter_map(id_of)
                    .map(str::to_string)
                    .collect();
                let mut pending: HashSet<String> = stored
                    .iter()
                    .filter(|m| role_of(m) == "assistant")
                    .flat_map(|m| {
                        m.get("toolCalls")
                            .and_then(Value::as_array)
                            .cloned()
                            .unwrap_or_default()
                    })
                    .filter_map(|c| c.get("id").and_then(Value::as_str).map(str::to_string))
                    .collect();
                for m in stored.iter().filter(|m| role_of(m) == "tool") {
                    if let Some(c) = m.get("toolCallId").and_then(Value::as_str) {
                        pending.remove(c);
                    }
                }
                let mut fresh = Vec::new();
                for m in client {
                    let Some(id) = id_of(m) else { continue };
                    if known.contains(id) {
                        continue;
                    }
                    if role_of(m) == "tool" {
                        let call = m.get("toolCallId").and_then(Value::as_str).unwrap_or("");
                        if !pending.remove(call) {
                            tracing::info!(
                                call,
                                "tool result for a call that is not pending; ignored"
                            );
                            continue;
                        }
                    }
                    fresh.push(m.clone());
                }
                self.save(fresh.clone()).await?;
                stored.extend(fresh);
                Ok(stored)
            }
        }
    }
}

/// Parses stored or merged AG-UI messages, skipping (and logging) any that no longer parse.
pub fn parse_messages(raw: &[Value]) -> Vec<InputMessage> {
    raw.iter()
        .filter_map(|v| match serde_json::from_value::<InputMessage>(v.clone()) {
            Ok(m) => Some(m),
            Err(e) => {
                tracing::warn!(id = ?id_of(v), error = %e, "stored message does not parse; skipped");
                None
            }
        })
        .collect()
}

/// Keeps the last `limit` interactions (a question and everything up to the next question:
/// the calls, their results, the answer) before the current question, as ml-commons counts
/// `message_history_limit`. A cut falls on a question, so a call never loses its result.
pub fn limit_history(messages: &mut Vec<Message>, limit: usize) {
    if limit == 0 {
        return;
    }
    let results = |m: &Message| {
        m.content
            .iter()
            .any(|b| matches!(b, ContentBlock::ToolResult { .. }))
    };
    // A user message with anything but results asks something (converted history may merge a
    // call's results with the next question into one message).
    let asks = |m: &Message| {
        m.role == Role::User
            && m.content
                .iter()
                .any(|b| !matches!(b, ContentBlock::ToolResult { .. }))
    };
    let mut seen = 0;
    for i in (0..messages.len()).rev() {
        if asks(&messages[i]) {
            seen += 1;
            // The current question and `limit` before it.
            if seen == limit + 1 {
                // A question that carries results starts inside the interaction of their
                // calls: keep that whole interaction.
                let mut start = i;
                while start > 0 && results(&messages[start]) {
                    start -= 1;
                    while start > 0 && !asks(&messages[start]) {
                        start -= 1;
                    }
                }
                messages.drain(..start);
                return;
            }
        }
    }
}

/// The text of a raw AG-UI message: its string content, or its parts' texts joined by `sep`.
pub(crate) fn message_text(m: &Value, sep: &str) -> String {
    match m.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(sep),
        _ => String::new(),
    }
}

/// The text of the last user message among raw AG-UI messages.
pub(crate) fn last_user_text(raw: &[Value]) -> Option<String> {
    raw.iter()
        .rev()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .map(|m| message_text(m, " "))
}

/// The `RUN_STARTED` event opening a run of `input` (the protocol version only for 1.0
/// clients, which know the field).
pub(crate) fn run_started(
    input: &crate::protocol::input::RunAgentInput,
    v1: bool,
) -> crate::protocol::events::Event {
    crate::protocol::events::Event::RunStarted {
        thread_id: input.thread_id.clone(),
        run_id: input.run_id.clone(),
        parent_run_id: input.parent_run_id.clone(),
        protocol_version: if v1 {
            input.protocol_version.clone()
        } else {
            None
        },
        input: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::ToolResultBlock;
    use serde_json::json;

    #[test]
    fn the_limit_counts_interactions_and_never_separates_a_call_from_its_result() {
        let call = Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse {
                id: "c".into(),
                name: "f".into(),
                input: json!({}),
                signature: None,
            }],
        };
        let result = Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult {
                tool_use_id: "c".into(),
                content: vec![ToolResultBlock::Text { text: "r".into() }],
                is_error: false,
            }],
        };
        let mut m = vec![
            Message::user_text("old"),
            Message {
                role: Role::Assistant,
                content: vec![ContentBlock::Text {
                    text: "old answer".into(),
                }],
            },
            Message::user_text("a"),
            call.clone(),
            result.clone(),
            Message::user_text("b"),
        ];
        let mut one = m.clone();
        limit_history(&mut one, 1);
        assert_eq!(
            one,
            vec![
                Message::user_text("a"),
                call,
                result,
                Message::user_text("b")
            ],
            "one interaction before the question, its call and result whole"
        );
        let mut all = m.clone();
        limit_history(&mut all, 5);
        assert_eq!(all, m);
        limit_history(&mut m, 2);
        assert_eq!(m.len(), 6);
    }
}
