//! Memory containers: `POST /_create`, `GET|DELETE /{id}`, `GET|POST /_search`.

use std::time::Instant;

use axum::Json;
use axum::extract::{Path, RawQuery, State};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::Memory;
use super::request::{bad, internal, no_container, parse_body};
use super::search::{Target, parse_search, search_response};
use crate::api::ApiError;
use crate::store::memory::{Container, NewContainer};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateContainerRequest {
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    configuration: Option<Map<String, Value>>,
}

pub(super) async fn create_container(
    State(Memory(store)): State<Memory>,
    caller: Option<axum::Extension<crate::api::auth::Caller>>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let req: CreateContainerRequest = parse_body(&body)?.ok_or_else(|| {
        bad(
            "",
            "a JSON body is required, e.g. {\"name\": \"...\", \"description\": \"...\"}",
        )
    })?;
    if req.name.trim().is_empty() {
        return Err(bad("name", "must not be empty"));
    }
    let configuration = req.configuration.unwrap_or_default();
    if configuration
        .get("disable_session")
        .is_some_and(|v| !v.is_boolean())
    {
        return Err(bad(
            "configuration.disable_session",
            "must be true or false",
        ));
    }
    let container = store
        .create_container(NewContainer {
            name: req.name,
            description: req.description,
            configuration,
            owner: super::owner_name(caller.as_deref()),
        })
        .await
        .map_err(internal)?;
    Ok(Json(
        json!({ "memory_container_id": container.id, "status": "created" }),
    ))
}

fn container_source(c: &Container) -> Value {
    let mut source = json!({
        "name": c.name,
        "configuration": c.configuration,
        "created_time": c.created_time,
        "last_updated_time": c.last_updated_time,
    });
    if let Some(d) = &c.description {
        source["description"] = json!(d);
    }
    source
}

pub(super) async fn get_container(
    State(Memory(store)): State<Memory>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let container = store
        .container(&id)
        .await
        .map_err(internal)?
        .ok_or_else(|| no_container(&id))?;
    Ok(Json(container_source(&container)))
}

pub(super) async fn delete_container(
    State(Memory(store)): State<Memory>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    if !store.delete_container(&id).await.map_err(internal)? {
        return Err(no_container(&id));
    }
    Ok(Json(json!({ "_id": id, "result": "deleted" })))
}

pub(super) async fn search_containers(
    State(Memory(store)): State<Memory>,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let start = Instant::now();
    let (_, page) = parse_search(Target::Containers, query.as_deref(), &body)?;
    let hits = store.search_containers(page).await.map_err(internal)?;
    let items = hits
        .items
        .iter()
        .map(|c| (c.id.clone(), container_source(c)))
        .collect();
    Ok(Json(search_response(start, hits.total, items)))
}
