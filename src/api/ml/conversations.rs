//! ml-commons' conversation memory API over the threads of `conversation_index` agents: a
//! thread is a memory (`memory_id`), each question with its answer a message (the
//! `parent_message_id` / `parent_interaction_id` of an execution), and the tool calls made to
//! answer it the message's traces.
//!
//! - `GET /_plugins/_ml/memory` (`max_results`, `next_token`), `GET|DELETE .../memory/{id}`
//! - `GET .../memory/{id}/messages` (`max_results`, `next_token`)
//! - `GET .../memory/message/{message_id}`, `GET .../memory/message/{message_id}/traces`
//! - `GET|POST .../memory/_search`, `GET|POST .../memory/{id}/_search` (the `_search` subset of
//!   [`super::docs`])
//!
//! Another principal's memory or message is answered as none at all.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{MlError, docs, json_body};
use crate::AppState;
use crate::api::auth::{Caller, Principal};
use crate::api::owner;
use crate::store::conversations::{ThreadRecord, TimedMessage};
use crate::store::docs::Doc;

const MEMORY_INDEX: &str = ".plugins-ml-memory-meta";
const MESSAGE_INDEX: &str = ".plugins-ml-memory-message";

/// Paging of the list endpoints, as ml-commons names it.
#[derive(Debug, Deserialize)]
pub struct Paging {
    #[serde(default)]
    max_results: Option<String>,
    #[serde(default)]
    next_token: Option<String>,
}

impl Paging {
    /// (offset, count), 10 by default as in ml-commons, at most 1,000.
    fn window(&self) -> Result<(usize, usize), MlError> {
        let n = |key: &str, v: &Option<String>, default: usize| match v {
            None => Ok(default),
            Some(s) => s
                .trim()
                .parse::<usize>()
                .map_err(|_| MlError::bad(key, format!("{s:?} is not a non-negative integer"))),
        };
        let size = n("max_results", &self.max_results, 10)?;
        if size == 0 || size > 1000 {
            return Err(MlError::bad("max_results", "must be between 1 and 1000"));
        }
        Ok((n("next_token", &self.next_token, 0)?, size))
    }
}

/// An ISO-8601 time, as ml-commons writes memory times.
fn iso(ms: i64) -> String {
    aws_smithy_types::DateTime::from_millis(ms)
        .fmt(aws_smithy_types::date_time::Format::DateTime)
        .unwrap_or_default()
}

/// One question, its answer, and the tool calls between them.
struct Interaction<'a> {
    question: &'a TimedMessage,
    response: String,
    updated_ms: i64,
    /// (call id, tool name, arguments, the result message if it came).
    traces: Vec<(String, String, String, Option<&'a TimedMessage>)>,
}

/// A thread's messages grouped into interactions (messages before the first question are
/// left out: they answer nothing).
fn interactions(messages: &[TimedMessage]) -> Vec<Interaction<'_>> {
    let mut out: Vec<Interaction<'_>> = Vec::new();
    for m in messages {
        let body = &m.message.body;
        match body.get("role").and_then(Value::as_str) {
            Some("user") => out.push(Interaction {
                question: m,
                response: String::new(),
                updated_ms: m.updated_ms,
                traces: Vec::new(),
            }),
            Some("assistant") => {
                let Some(i) = out.last_mut() else { continue };
                i.updated_ms = i.updated_ms.max(m.updated_ms);
                let text = crate::agent::history::message_text(body, "\n");
                if !text.is_empty() {
                    i.response = text;
                }
                for c in body
                    .get("toolCalls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let s = |p: &str| c.pointer(p).and_then(Value::as_str).unwrap_or("");
                    i.traces.push((
                        s("/id").to_string(),
                        s("/function/name").to_string(),
                        s("/function/arguments").to_string(),
                        None,
                    ));
                }
            }
            Some("tool") => {
                let Some(i) = out.last_mut() else { continue };
                i.updated_ms = i.updated_ms.max(m.updated_ms);
                let call = body.get("toolCallId").and_then(Value::as_str);
                if let Some(t) = i.traces.iter_mut().find(|t| Some(t.0.as_str()) == call) {
                    t.3 = Some(m);
                }
            }
            _ => {}
        }
    }
    out
}

fn message_json(memory_id: &str, i: &Interaction<'_>) -> Value {
    json!({
        "memory_id": memory_id,
        "message_id": i.question.message.id,
        "create_time": iso(i.question.created_ms),
        "updated_time": iso(i.updated_ms),
        "input": crate::agent::history::message_text(&i.question.message.body, "\n"),
        "prompt_template": "",
        "response": i.response,
        "origin": "",
        "additional_info": {},
    })
}

fn traces_json(memory_id: &str, i: &Interaction<'_>) -> Vec<Value> {
    i.traces
        .iter()
        .enumerate()
        .map(|(n, (call, name, args, result))| {
            let (id, created, updated, response) = match result {
                Some(r) => (
                    r.message.id.clone(),
                    r.created_ms,
                    r.updated_ms,
                    crate::agent::history::message_text(&r.message.body, "\n"),
                ),
                None => (
                    call.clone(),
                    i.question.created_ms,
                    i.updated_ms,
                    String::new(),
                ),
            };
            json!({
                "memory_id": memory_id,
                "message_id": id,
                "create_time": iso(created),
                "updated_time": iso(updated),
                "input": args,
                "prompt_template": "",
                "response": response,
                "origin": name,
                "additional_info": { "tool_call_id": call },
                "parent_message_id": i.question.message.id,
                "trace_number": n + 1,
            })
        })
        .collect()
}

fn principal(state: &AppState, caller: Option<&Caller>) -> Principal {
    owner::principal(state, caller)
}

/// The thread behind `memory_id` that `who` may read.
async fn memory(state: &AppState, who: &Principal, id: &str) -> Result<ThreadRecord, MlError> {
    let none = || MlError::NotFound(format!("no memory {id:?}"));
    if id.contains('\0') {
        return Err(none());
    }
    state
        .store
        .threads(Some(id), None, 16)
        .await?
        .into_iter()
        .find(|t| who.may_use(Some(&t.owner)))
        .ok_or_else(none)
}

fn memory_json(t: &ThreadRecord) -> Value {
    json!({
        "memory_id": t.thread,
        "create_time": iso(t.created_ms),
        "updated_time": iso(t.updated_ms),
        "name": t
            .first_question
            .as_ref()
            .map(|q| crate::agent::history::message_text(q, "\n"))
            .unwrap_or_default(),
        "user": t.owner,
        "application_type": t.agent,
    })
}

/// `GET /_plugins/_ml/memory`: the caller's memories, newest first.
pub async fn list(
    State(state): State<AppState>,
    Query(paging): Query<Paging>,
    caller: Option<axum::Extension<Caller>>,
) -> Result<Json<Value>, MlError> {
    let who = principal(&state, caller.as_deref());
    let (from, size) = paging.window()?;
    let owner = (!who.admin).then_some(who.name.as_str());
    let threads = state.store.threads(None, owner, from + size + 1).await?;
    let memories: Vec<Value> = threads
        .iter()
        .skip(from)
        .take(size)
        .map(memory_json)
        .collect();
    let mut body = json!({ "memories": memories });
    if threads.len() > from + size {
        body["next_token"] = json!(from + size);
    }
    Ok(Json(body))
}

/// `GET /_plugins/_ml/memory/{memory_id}`.
pub async fn get(
    State(state): State<AppState>,
    Path(id): Path<String>,
    caller: Option<axum::Extension<Caller>>,
) -> Result<Json<Value>, MlError> {
    let who = principal(&state, caller.as_deref());
    let t = memory(&state, &who, &id).await?;
    Ok(Json(memory_json(&t)))
}

/// `DELETE /_plugins/_ml/memory/{memory_id}`.
pub async fn delete(
    State(state): State<AppState>,
    Path(id): Path<String>,
    caller: Option<axum::Extension<Caller>>,
) -> Result<Json<Value>, MlError> {
    let who = principal(&state, caller.as_deref());
    let t = memory(&state, &who, &id).await?;
    // A run here, or another gateway's holding the thread's lease.
    if state.runs.thread_busy(&t.thread)
        || state
            .store
            .lease_holder(&t.agent, &t.thread)
            .await?
            .is_some()
    {
        return Err(MlError::Conflict(format!(
            "memory {id:?} has a run going; delete it when the run ends"
        )));
    }
    state.store.delete_thread(&t.agent, &t.thread).await?;
    Ok(Json(json!({ "success": true })))
}

/// `GET /_plugins/_ml/memory/{memory_id}/messages`: its questions and answers, in order.
pub async fn messages(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(paging): Query<Paging>,
    caller: Option<axum::Extension<Caller>>,
) -> Result<Json<Value>, MlError> {
    let who = principal(&state, caller.as_deref());
    let (from, size) = paging.window()?;
    let t = memory(&state, &who, &id).await?;
    let stored = state.store.timed_thread(&t.agent, &t.thread).await?;
    let all = interactions(&stored);
    let page: Vec<Value> = all
        .iter()
        .skip(from)
        .take(size)
        .map(|i| message_json(&t.thread, i))
        .collect();
    let mut body = json!({ "messages": page });
    if all.len() > from + size {
        body["next_token"] = json!(from + size);
    }
    Ok(Json(body))
}

/// The interaction whose question is `message_id`, in a memory `who` may read.
async fn with_message<T>(
    state: &AppState,
    who: &Principal,
    message_id: &str,
    answer: impl FnOnce(&str, &Interaction<'_>) -> T,
) -> Result<T, MlError> {
    let none = || MlError::NotFound(format!("no message {message_id:?}"));
    if message_id.contains('\0') {
        return Err(none());
    }
    let Some((agent, thread)) = state.store.message_thread(message_id).await? else {
        return Err(none());
    };
    match state.store.thread_owner(&agent, &thread).await? {
        Some(o) if who.may_use(Some(&o)) => {}
        _ => return Err(none()),
    }
    let stored = state.store.timed_thread(&agent, &thread).await?;
    let all = interactions(&stored);
    let i = all
        .iter()
        .find(|i| i.question.message.id == message_id)
        .ok_or_else(none)?;
    Ok(answer(&thread, i))
}

/// `GET /_plugins/_ml/memory/message/{message_id}`.
pub async fn message(
    State(state): State<AppState>,
    Path(id): Path<String>,
    caller: Option<axum::Extension<Caller>>,
) -> Result<Json<Value>, MlError> {
    let who = principal(&state, caller.as_deref());
    with_message(&state, &who, &id, message_json)
        .await
        .map(Json)
}

/// `GET /_plugins/_ml/memory/message/{message_id}/traces`: the tool calls made to answer it.
pub async fn traces(
    State(state): State<AppState>,
    Path(id): Path<String>,
    caller: Option<axum::Extension<Caller>>,
) -> Result<Json<Value>, MlError> {
    let who = principal(&state, caller.as_deref());
    with_message(
        &state,
        &who,
        &id,
        |m, i| json!({ "traces": traces_json(m, i) }),
    )
    .await
    .map(Json)
}

/// `POST /_plugins/_ml/memory/_search`: the caller's memories matching a query.
pub async fn search(
    State(state): State<AppState>,
    caller: Option<axum::Extension<Caller>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, MlError> {
    let body = json_body(body)?;
    let who = principal(&state, caller.as_deref());
    let owner = (!who.admin).then_some(who.name.as_str());
    let found = state
        .store
        .threads(None, owner, 10_000)
        .await?
        .iter()
        .map(|t| {
            let mut d = Doc::new(t.thread.clone(), "", memory_json(t));
            d.created_ms = t.created_ms;
            d.updated_ms = t.updated_ms;
            d
        })
        .collect();
    docs::search(MEMORY_INDEX, &body, found).map(Json)
}

/// `POST /_plugins/_ml/memory/{memory_id}/_search`: its messages matching a query.
pub async fn search_messages(
    State(state): State<AppState>,
    Path(id): Path<String>,
    caller: Option<axum::Extension<Caller>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, MlError> {
    let body = json_body(body)?;
    let who = principal(&state, caller.as_deref());
    let t = memory(&state, &who, &id).await?;
    let stored = state.store.timed_thread(&t.agent, &t.thread).await?;
    let found = interactions(&stored)
        .iter()
        .map(|i| {
            let mut d = Doc::new(
                i.question.message.id.clone(),
                "",
                message_json(&t.thread, i),
            );
            d.created_ms = i.question.created_ms;
            d.updated_ms = i.updated_ms;
            d
        })
        .collect();
    docs::search(MESSAGE_INDEX, &body, found).map(Json)
}
