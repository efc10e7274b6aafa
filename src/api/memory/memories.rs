//! Sessions and working memory by `{type}`: `GET|DELETE /{id}/memories/{type}/{memory_id}`
//! and `GET|POST /{id}/memories/{type}/_search`.

use std::time::Instant;

use axum::Json;
use axum::extract::{Path, RawQuery, State};
use bytes::Bytes;
use serde_json::{Value, json};

use super::Memory;
use super::request::{bad, internal, no_container};
use super::search::{Target, parse_search, search_response};
use super::sessions::session_source;
use super::working::working_source;
use crate::api::ApiError;
use crate::store::memory::MemoryStore;

/// The `{type}` of a memory path: `sessions` or `working`.
fn memory_type(kind: &str) -> Result<Target, ApiError> {
    match kind {
        "sessions" => Ok(Target::Sessions),
        "working" => Ok(Target::Working),
        "long-term" | "history" => Err(bad(
            "type",
            format!(
                "{kind} memory needs the container's LLM and embedding strategies, which this gateway does not run; supported types: sessions, working"
            ),
        )),
        other => Err(bad(
            "type",
            format!("unknown memory type {other:?}; supported types: sessions, working"),
        )),
    }
}

/// A 404 for a missing document: names the container when it is the container that is missing.
async fn missing(
    store: &dyn MemoryStore,
    container: &str,
    what: &str,
    id: &str,
) -> Result<ApiError, ApiError> {
    if store
        .container(container)
        .await
        .map_err(internal)?
        .is_none()
    {
        return Ok(no_container(container));
    }
    Ok(ApiError::NotFound(format!(
        "{what} {id} not found in memory container {container}"
    )))
}

pub(super) async fn get_memory(
    State(Memory(store)): State<Memory>,
    Path((container, kind, id)): Path<(String, String, String)>,
) -> Result<Json<Value>, ApiError> {
    let target = memory_type(&kind)?;
    let found = match target {
        Target::Sessions => store
            .session(&container, &id)
            .await
            .map_err(internal)?
            .map(|s| session_source(&s)),
        _ => store
            .working_memory(&container, &id)
            .await
            .map_err(internal)?
            .map(|m| working_source(&m)),
    };
    match found {
        Some(source) => Ok(Json(source)),
        None => Err(missing(&*store, &container, target.noun(), &id).await?),
    }
}

pub(super) async fn delete_memory(
    State(Memory(store)): State<Memory>,
    Path((container, kind, id)): Path<(String, String, String)>,
) -> Result<Json<Value>, ApiError> {
    let target = memory_type(&kind)?;
    let deleted = match target {
        Target::Sessions => store.delete_session(&container, &id).await,
        _ => store.delete_working_memory(&container, &id).await,
    }
    .map_err(internal)?;
    if !deleted {
        return Err(missing(&*store, &container, target.noun(), &id).await?);
    }
    Ok(Json(json!({ "_id": id, "result": "deleted" })))
}

pub(super) async fn search_memories(
    State(Memory(store)): State<Memory>,
    Path((container, kind)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let start = Instant::now();
    let target = memory_type(&kind)?;
    let (filter, page) = parse_search(target, query.as_deref(), &body)?;
    if store
        .container(&container)
        .await
        .map_err(internal)?
        .is_none()
    {
        return Err(no_container(&container));
    }
    let (total, items) = match target {
        Target::Sessions => {
            let hits = store
                .search_sessions(&container, &filter, page)
                .await
                .map_err(internal)?;
            let items = hits
                .items
                .iter()
                .map(|s| (s.session_id.clone(), session_source(s)))
                .collect();
            (hits.total, items)
        }
        _ => {
            let hits = store
                .search_working_memory(&container, &filter, page)
                .await
                .map_err(internal)?;
            let items = hits
                .items
                .iter()
                .map(|m| (m.memory_id.clone(), working_source(m)))
                .collect();
            (hits.total, items)
        }
    };
    Ok(Json(search_response(start, total, items)))
}
