//! Agents: register (legacy `llm` or the unified `model` block), get, delete, search. Config
//! file agents are part of the same registry: listed and readable, not deletable here.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use serde_json::{Value, json};

use super::docs::{deleted, public, search as run_search};
use super::{MlError, json_body};
use crate::AppState;
use crate::agent::Agent;
use crate::store::docs::{Doc, DocKind};

const AGENT_INDEX: &str = ".plugins-ml-agent";

/// A config-file agent as an agent document.
fn fixed_doc(a: &Agent) -> Doc {
    let tools: Vec<Value> = a
        .tools
        .specs()
        .into_iter()
        .map(|t| json!({ "name": t.name, "description": t.description }))
        .collect();
    let mut doc = Doc::new(
        &a.id,
        &a.name,
        json!({
            "name": a.name,
            "type": a.kind.as_str(),
            "description": a.description,
            "model": { "model_id": a.provider.model_id(), "model_provider": a.provider.name() },
            "tools": tools,
            "memory": if a.memory.store { json!({"type": "conversation_index"}) } else { Value::Null },
            "source": "config",
        }),
    );
    doc.created_ms = 0;
    doc.updated_ms = 0;
    doc
}

/// `POST /_plugins/_ml/agents/_register`.
pub async fn register(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, MlError> {
    let body = json_body(body)?;
    let id = state.agents.register(&body).await?;
    tracing::info!(agent = %id, "agent registered");
    Ok(Json(json!({ "agent_id": id })))
}

/// `GET /_plugins/_ml/agents/{id}`.
pub async fn get_agent(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, MlError> {
    if let Some(a) = state.agents.fixed().find(|a| a.id == id) {
        return Ok(Json(public(&fixed_doc(a))));
    }
    match state.store.doc(DocKind::Agent, &id).await? {
        Some(d) => Ok(Json(public(&d))),
        None => Err(MlError::NotFound(format!("no agent {id:?}"))),
    }
}

/// `DELETE /_plugins/_ml/agents/{id}`.
pub async fn delete_agent(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, MlError> {
    if state.agents.is_fixed(&id) {
        return Err(MlError::Conflict(format!(
            "agent {id:?} is defined in the config file; remove it there"
        )));
    }
    if state.agents.delete(&id).await? {
        Ok(Json(deleted(AGENT_INDEX, &id)))
    } else {
        Err(MlError::NotFound(format!("no agent {id:?}")))
    }
}

/// `POST /_plugins/_ml/agents/_search`.
pub async fn search(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, MlError> {
    let body = json_body(body)?;
    let mut docs: Vec<Doc> = state.agents.fixed().map(|a| fixed_doc(a)).collect();
    docs.sort_by(|a, b| a.id.cmp(&b.id));
    docs.extend(state.store.docs(DocKind::Agent).await?);
    Ok(Json(run_search(AGENT_INDEX, &body, docs)?))
}
