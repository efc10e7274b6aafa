//! Executing agents: `_execute` (one JSON answer in ml-commons' formats, or `?async=true` and a
//! task), `_execute/stream` (AG-UI SSE for a `RunAgentInput` or the standard `input`), and
//! `GET /_plugins/_ml/tasks/{id}`.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::{MlError, json_body};
use crate::AppState;
use crate::agent::react::new_id;
use crate::agent::registry::new_doc_id;
use crate::agent::{Agent, Report};
use crate::api::auth::Principal;
use crate::api::{agui, owner};
use crate::conversation::standard::{self, InputType};
use crate::protocol::encode::Wire;
use crate::protocol::input::{self, RunAgentInput};
use crate::store::docs::{Doc, DocKind};

/// Whether the query string asks for an asynchronous execution: `async=true` or `async=false`
/// (any case; a bare `async` means true, as OpenSearch reads boolean parameters). Any other
/// value is refused rather than read as false.
fn wants_async(query: Option<&str>) -> Result<bool, MlError> {
    let mut wanted = false;
    for (k, v) in url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        if k != "async" {
            continue;
        }
        wanted = match v.to_ascii_lowercase().as_str() {
            "true" | "" => true,
            "false" => false,
            _ => {
                return Err(MlError::BadRequest {
                    field: "async".into(),
                    reason: format!("{v:?} is not a boolean; use async=true or async=false"),
                    details: json!({ "expected": ["true", "false"] }),
                });
            }
        };
    }
    Ok(wanted)
}

async fn agent(state: &AppState, id: &str) -> Result<Arc<Agent>, MlError> {
    if state.runs.is_shutting_down() {
        return Err(MlError::Unavailable(
            "The gateway is shutting down; retry on another instance.".into(),
        ));
    }
    state
        .agents
        .get(id)
        .await
        .map_err(|e| MlError::Internal(format!("agent {id:?} does not build: {e}")))?
        .ok_or_else(|| MlError::NotFound(format!("no agent {id:?}")))
}

fn flag(p: &Map<String, Value>, key: &str) -> bool {
    match p.get(key) {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s.eq_ignore_ascii_case("true"),
        _ => false,
    }
}

/// An execution turned into a run.
struct Prepared {
    input: RunAgentInput,
    /// The conversation, when the agent keeps one.
    memory_id: Option<String>,
    /// The id of this execution's (last) user message.
    interaction_id: String,
    verbose: bool,
    include_token_usage: bool,
    /// A plan-execute-reflect run's executor memory, named before it starts (an async task
    /// reports it at once).
    executor_memory_id: Option<String>,
}

/// Validates an execute body (`parameters` and / or the standard `input`) and builds the run.
async fn prepare(
    state: &AppState,
    who: &Principal,
    agent: &Agent,
    body: &Value,
) -> Result<Prepared, MlError> {
    let mut params = match body.get("parameters") {
        None => Map::new(),
        Some(Value::Object(p)) => p.clone(),
        Some(_) => return Err(MlError::bad("parameters", "must be an object")),
    };
    let messages = match body.get("input") {
        Some(raw) => {
            let parsed = standard::parse(raw).map_err(|e| MlError::BadRequest {
                field: e.field,
                reason: e.reason,
                details: e.details,
            })?;
            // The RFC (seed 000) sends content blocks and messages to a `conversational` agent
            // registered with a `model` block; the docs keep other V1 agents to text.
            let rich = agent.kind.takes_rich_input()
                || (agent.unified && agent.kind == crate::config::AgentKind::Conversational);
            if parsed.kind != InputType::Text && !rich {
                return Err(MlError::BadRequest {
                    field: "input".into(),
                    reason: format!(
                        "a {} agent takes plain text input only; content blocks and messages need a conversational_v2 agent, or a conversational one registered with a model block",
                        agent.kind.as_str()
                    ),
                    details: json!({ "expected": "string", "agent_type": agent.kind.as_str() }),
                });
            }
            params
                .entry("question")
                .or_insert_with(|| json!(parsed.question));
            parsed.messages
        }
        None => match params.get("question") {
            Some(Value::String(q)) if !q.trim().is_empty() => {
                vec![json!({ "id": new_id("msg"), "role": "user", "content": q })]
            }
            Some(Value::String(_)) | None => {
                return Err(MlError::BadRequest {
                    field: "parameters.question".into(),
                    reason: "required: give the standard input, or parameters.question".into(),
                    details: json!({ "expected": "input (string, content blocks or messages) or parameters.question" }),
                });
            }
            Some(_) => return Err(MlError::bad("parameters.question", "must be a string")),
        },
    };
    let memory_id = match params.get("memory_id") {
        None => None,
        // A NUL would reach the store as a key, which PostgreSQL refuses.
        Some(Value::String(m)) if !m.is_empty() && !m.contains('\0') => Some(m.clone()),
        Some(_) => {
            return Err(MlError::bad(
                "parameters.memory_id",
                "must be a non-empty string without NUL characters",
            ));
        }
    };
    let overrides = crate::agent::Overrides {
        memory_container_id: params
            .get("memory_container_id")
            .and_then(Value::as_str)
            .map(str::to_string),
        ..Default::default()
    };
    owner::check_container(state, who, agent, &overrides).await?;
    if let Some(m) = &memory_id {
        let no_memory = || {
            MlError::NotFound(format!(
                "no memory {m:?} for agent {:?}; omit memory_id to start a new conversation",
                agent.id
            ))
        };
        // Another principal's conversation is answered as none at all, before it is read.
        owner::check_thread(state, who, agent, m)
            .await
            .map_err(|e| match e {
                owner::Refusal::NotFound(_) => no_memory(),
                other => other.into(),
            })?;
        if let Some(ts) = agent.thread_store(Some(Arc::clone(&state.store)), m, &overrides)
            && ts.load().await?.is_empty()
        {
            return Err(no_memory());
        }
    }
    let thread = memory_id.clone().unwrap_or_else(new_doc_id);
    let executor_memory_id =
        if agent.kind == crate::config::AgentKind::PlanExecuteReflect && agent.memory.store {
            let id = match params.get("executor_agent_memory_id") {
                Some(Value::String(e)) if !e.is_empty() && !e.contains('\0') => e.clone(),
                None => new_doc_id(),
                Some(_) => {
                    return Err(MlError::bad(
                        "parameters.executor_agent_memory_id",
                        "must be a non-empty string without NUL characters",
                    ));
                }
            };
            params.insert("executor_agent_memory_id".into(), json!(id));
            Some(id)
        } else {
            None
        };
    let interaction_id = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["id"].as_str())
        .unwrap_or_default()
        .to_string();
    let verbose = flag(&params, "verbose");
    let include_token_usage = flag(&params, "include_token_usage");
    let run = json!({
        "threadId": thread,
        "runId": new_id("run"),
        "messages": messages,
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": { "parameters": params },
        "protocolVersion": "1.0",
    });
    let input = input::parse(run.to_string().as_bytes())
        .map_err(|e| MlError::bad(format!("input.{}", e.field), e.message))?;
    check(state, agent, &input, "input.")?;
    Ok(Prepared {
        input,
        memory_id: agent.memory.store.then_some(thread),
        interaction_id,
        verbose,
        include_token_usage,
        executor_memory_id,
    })
}

/// The run's answer text: the last assistant message's.
fn answer(report: &Report) -> String {
    report
        .messages
        .iter()
        .rev()
        .find(|m| m["role"] == "assistant" && m["content"].as_str().is_some_and(|c| !c.is_empty()))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// Tool results of the run by tool name, in order (for `verbose`).
fn tool_outputs(report: &Report) -> Vec<(String, String)> {
    let mut names = std::collections::HashMap::new();
    for m in &report.messages {
        if let Some(calls) = m["toolCalls"].as_array() {
            for c in calls {
                if let (Some(id), Some(name)) = (c["id"].as_str(), c["function"]["name"].as_str()) {
                    names.insert(id.to_string(), name.to_string());
                }
            }
        }
    }
    report
        .messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| {
            let name = names.get(m["toolCallId"].as_str()?)?.clone();
            Some((name, m["content"].as_str().unwrap_or_default().to_string()))
        })
        .collect()
}

/// A failed run as an error answer.
fn run_error(code: &str, message: &str) -> MlError {
    match code {
        "THREAD_BUSY" => MlError::Conflict(message.to_string()),
        "STORE_UNAVAILABLE" => MlError::Unavailable(message.to_string()),
        "INVALID_PARAMETERS" => MlError::bad("parameters", message),
        "INTERNAL_ERROR" | "CANCELLED" | "DISCONNECTED" => {
            MlError::Internal(format!("{code}: {message}"))
        }
        _ => MlError::Upstream {
            reason: message.to_string(),
            details: json!({ "code": code }),
        },
    }
}

/// The response body, in the agent type's format.
fn respond(agent: &Agent, p: &Prepared, report: &Report) -> Result<Value, MlError> {
    if let Some((code, message)) = &report.error {
        return Err(run_error(code, message));
    }
    let text = answer(report);
    let mut output = Vec::new();
    if agent.kind == crate::config::AgentKind::ConversationalV2 {
        let mut input_tokens = 0;
        let mut output_tokens = 0;
        for u in report.usage.ag_ui() {
            input_tokens += u.input_tokens.unwrap_or(0);
            output_tokens += u.output_tokens.unwrap_or(0);
        }
        let mut data = json!({
            "stop_reason": report.stop_reason,
            "message": { "role": "assistant", "content": [{ "text": text }] },
            "metrics": { "total_usage": {
                "inputTokens": input_tokens,
                "outputTokens": output_tokens,
                "totalTokens": input_tokens + output_tokens,
            }},
        });
        if let Some(m) = &p.memory_id {
            data["memory_id"] = json!(m);
        }
        for (name, value) in &report.notices {
            data[name.as_str()] = value.clone();
        }
        output.push(json!({ "name": "response", "dataAsMap": data }));
        return Ok(json!({ "inference_results": [{ "output": output }] }));
    }
    if agent.kind == crate::config::AgentKind::PlanExecuteReflect {
        return Ok(respond_per(p, report, text));
    }
    if let Some(m) = &p.memory_id {
        output.push(json!({ "name": "memory_id", "result": m }));
        // The V1 docs name it parent_message_id, later ones parent_interaction_id: both.
        output.push(json!({ "name": "parent_message_id", "result": p.interaction_id }));
        output.push(json!({ "name": "parent_interaction_id", "result": p.interaction_id }));
    }
    if agent.kind.is_flow() {
        let last = report
            .last_tool
            .clone()
            .unwrap_or_else(|| "response".into());
        let shown: Vec<(String, String)> = if p.verbose {
            tool_outputs(report)
        } else {
            report.outputs.clone()
        };
        for (name, out) in shown.iter().filter(|(n, _)| *n != last) {
            output.push(json!({ "name": name, "result": out }));
        }
        output.push(json!({ "name": last, "result": text }));
    } else {
        if p.verbose {
            for (name, out) in tool_outputs(report) {
                output.push(json!({ "name": name, "result": out }));
            }
        }
        output.push(json!({ "name": "response", "result": text }));
        for (name, value) in &report.notices {
            output.push(json!({ "name": name, "dataAsMap": { name.as_str(): value } }));
        }
        if p.include_token_usage {
            output.push(json!({ "name": "token_usage", "dataAsMap": report.usage.report() }));
        }
    }
    Ok(json!({ "inference_results": [{ "output": output }] }))
}

/// A plan-execute-reflect answer as ml-commons shapes it: the planner's memory and
/// interaction, the executor's, then the final answer as `dataAsMap.response`.
fn respond_per(p: &Prepared, report: &Report, text: String) -> Value {
    let mut output = Vec::new();
    let mut top = serde_json::Map::new();
    if let Some(m) = &p.memory_id {
        output.push(json!({ "name": "memory_id", "result": m }));
        output.push(json!({ "name": "parent_interaction_id", "result": p.interaction_id }));
        output.push(json!({ "name": "parent_message_id", "result": p.interaction_id }));
        top.insert("memory_id".into(), json!(m));
    }
    if let Some((memory, interaction)) = &report.executor {
        output.push(json!({ "name": "executor_agent_memory_id", "result": memory }));
        output
            .push(json!({ "name": "executor_agent_parent_interaction_id", "result": interaction }));
        top.insert("executor_agent_memory_id".into(), json!(memory));
    }
    output.push(json!({ "name": "response", "dataAsMap": { "response": text } }));
    for (name, value) in &report.notices {
        output.push(json!({ "name": name, "dataAsMap": { name.as_str(): value } }));
    }
    if p.include_token_usage {
        output.push(json!({ "name": "token_usage", "dataAsMap": report.usage.report() }));
    }
    top.insert("inference_results".into(), json!([{ "output": output }]));
    Value::Object(top)
}

/// `POST /_plugins/_ml/agents/{id}/_execute`.
pub async fn execute(
    State(state): State<AppState>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    caller: Option<axum::Extension<crate::api::auth::Caller>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, MlError> {
    let is_async = wants_async(query.as_deref())?;
    let body = json_body(body)?;
    let agent = agent(&state, &id).await?;
    let who = owner::principal(&state, caller.as_deref());
    let prepared = prepare(&state, &who, &agent, &body).await?;
    let permit = admit(&state, caller.as_deref())?;
    owner::claim_run(&state, &who, &agent, &prepared.input).await?;
    if is_async {
        return start_task(&state, agent, prepared, permit, who.name).await;
    }
    let started = agui::start(
        &state,
        Arc::clone(&agent),
        prepared.input.clone(),
        permit,
        who.name,
        Wire::Sse,
    )
    .await;
    let report = started.finish().await;
    Ok(Json(respond(&agent, &prepared, &report)?).into_response())
}

fn task_body(agent: &str, state: &str, created: i64) -> Value {
    json!({
        "task_type": "AGENT_EXECUTION",
        "function_name": "AGENT",
        "state": state,
        "agent_id": agent,
        "is_async": true,
        "create_time": created,
        "last_update_time": crate::store::now_ms(),
    })
}

/// Runs the execution in the background; its task document follows it to the end.
async fn start_task(
    state: &AppState,
    agent: Arc<Agent>,
    prepared: Prepared,
    permit: crate::runs::limits::RunPermit,
    owner: String,
) -> Result<Response, MlError> {
    let task_id = new_doc_id();
    let doc = Doc::new(
        &task_id,
        "",
        task_body(&agent.id, "RUNNING", crate::store::now_ms()),
    )
    .owned_by(owner.as_str());
    state.store.put_doc(DocKind::Task, &doc).await?;
    let started = agui::start(
        state,
        Arc::clone(&agent),
        prepared.input.clone(),
        permit,
        owner,
        Wire::Sse,
    )
    .await;
    let memory_id = prepared.memory_id.clone();
    let prepared_interaction = prepared.interaction_id.clone();
    let is_per = agent.kind == crate::config::AgentKind::PlanExecuteReflect;
    let executor_memory_id = prepared.executor_memory_id.clone();
    let store = Arc::clone(&state.store);
    tokio::spawn(async move {
        let report = started.finish().await;
        let mut body = task_body(&agent.id, "COMPLETED", doc.created_ms);
        match respond(&agent, &prepared, &report) {
            Ok(response) => body["response"] = response,
            Err(e) => {
                body["state"] = json!("FAILED");
                body["error"] = json!(e.to_string());
            }
        }
        let done = Doc { body, ..doc };
        if let Err(e) = store.put_doc(DocKind::Task, &done).await {
            tracing::error!(task = %done.id, error = %e, "could not record an async execution's result");
        }
    });
    let mut answer = json!({ "task_id": task_id, "status": "RUNNING" });
    if let Some(m) = memory_id {
        answer["response"] = json!({ "memory_id": m });
        if is_per {
            answer["response"]["parent_interaction_id"] = json!(prepared_interaction);
            if let Some(e) = executor_memory_id {
                answer["response"]["executor_agent_memory_id"] = json!(e);
            }
        }
    }
    Ok(Json(answer).into_response())
}

/// `GET /_plugins/_ml/tasks/{id}`.
pub async fn get_task(
    State(state): State<AppState>,
    Path(id): Path<String>,
    caller: Option<axum::Extension<crate::api::auth::Caller>>,
) -> Result<Json<Value>, MlError> {
    let who = owner::principal(&state, caller.as_deref());
    match state.store.doc(DocKind::Task, &id).await? {
        // Another principal's task is answered as no task at all.
        Some(d) if who.may_use(d.owner.as_deref()) => {
            let mut body = d.body;
            body["task_id"] = json!(d.id);
            Ok(Json(body))
        }
        _ => Err(MlError::NotFound(format!("no task {id:?}"))),
    }
}

/// `POST /_plugins/_ml/agents/{id}/_execute/stream`: AG-UI SSE (or the AG-UI protobuf
/// encoding, when `Accept` asks for it), for a `RunAgentInput` (what `HttpAgent` posts) or an
/// execute body with the standard `input` / `parameters`.
pub async fn execute_stream(
    State(state): State<AppState>,
    Path(id): Path<String>,
    caller: Option<axum::Extension<crate::api::auth::Caller>>,
    headers: axum::http::HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, MlError> {
    let bytes = body.map_err(|e| {
        if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
            MlError::TooLarge
        } else {
            MlError::bad("", e.body_text())
        }
    })?;
    let agent = agent(&state, &id).await?;
    let who = owner::principal(&state, caller.as_deref());
    let wire = agui::wire(&headers)?;
    let value = json_body(Ok(bytes.clone()))?;
    let is_agui = ["threadId", "runId", "messages"]
        .iter()
        .any(|k| value.get(*k).is_some());
    let run = if is_agui {
        let run = input::parse(&bytes).map_err(|e| MlError::bad(e.field, e.message))?;
        check(&state, &agent, &run, "")?;
        run
    } else {
        prepare(&state, &who, &agent, &value).await?.input
    };
    let permit = admit(&state, caller.as_deref())?;
    owner::claim_run(&state, &who, &agent, &run).await?;
    let started = agui::start(&state, agent, run, permit, who.name, wire).await;
    Ok(agui::stream_response(&state, started))
}

/// Refuses a run the AG-UI endpoint would refuse (tool name clashes, size limits); `prefix`
/// goes before the field named.
fn check(
    state: &AppState,
    agent: &Agent,
    run: &RunAgentInput,
    prefix: &str,
) -> Result<(), MlError> {
    agui::check_tools(agent, run)
        .and_then(|()| agui::check_limits(state, run))
        .map_err(|e| match e {
            crate::api::ApiError::BadRequest { field, message } => {
                MlError::bad(format!("{prefix}{field}"), message)
            }
            other => MlError::Internal(other.to_string()),
        })
}

/// Takes a place for the run under the gateway's and the caller's limits.
fn admit(
    state: &AppState,
    caller: Option<&crate::api::auth::Caller>,
) -> Result<crate::runs::limits::RunPermit, MlError> {
    agui::admit(state, caller).map_err(|r| match r {
        crate::runs::limits::Refused::Gateway(_) => MlError::Unavailable(r.to_string()),
        crate::runs::limits::Refused::Key(..) => MlError::TooManyRuns(r.to_string()),
    })
}
