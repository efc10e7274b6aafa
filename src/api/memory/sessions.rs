//! Sessions: `POST /{id}/memories/sessions`, and a session's `_source`.

use axum::Json;
use axum::extract::{Path, State};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::Memory;
use super::request::{bad, check_id, check_namespace, internal, no_container, parse_body};
use crate::api::ApiError;
use crate::store::memory::{Namespace, NewSession, Session, SessionCreated};

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct CreateSessionRequest {
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    summary: Option<String>,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    #[serde(default)]
    namespace: Option<Namespace>,
}

pub(super) async fn create_session(
    State(Memory(store)): State<Memory>,
    Path(container): Path<String>,
    caller: Option<axum::Extension<crate::api::auth::Caller>>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let req: CreateSessionRequest = parse_body(&body)?.unwrap_or_default();
    let mut namespace = req.namespace.unwrap_or_default();
    check_namespace("namespace", &namespace)?;
    // The session's own id is not part of its namespace; a namespace naming it must agree.
    let ns_session = namespace.remove("session_id");
    let session_id = match (req.session_id, ns_session) {
        (Some(a), Some(b)) if a != b => {
            return Err(bad(
                "namespace.session_id",
                "differs from session_id; give one of them",
            ));
        }
        (a, b) => a.or(b),
    };
    if let Some(id) = &session_id {
        check_id("session_id", id)?;
    }
    let created = store
        .create_session(
            &container,
            NewSession {
                session_id: session_id.clone(),
                summary: req.summary,
                metadata: req.metadata.unwrap_or_default(),
                namespace,
                owner: super::owner_name(caller.as_deref()),
            },
        )
        .await
        .map_err(internal)?;
    match created {
        SessionCreated::Created(s) => Ok(Json(
            json!({ "session_id": s.session_id, "status": "created" }),
        )),
        SessionCreated::Exists => Err(bad(
            "session_id",
            format!(
                "session {} already exists in this memory container",
                session_id.unwrap_or_default()
            ),
        )),
        SessionCreated::NoContainer => Err(no_container(&container)),
    }
}

pub(super) fn session_source(s: &Session) -> Value {
    let mut source = json!({
        "memory_container_id": s.container_id,
        "metadata": s.metadata,
        "namespace": s.namespace,
        "namespace_size": s.namespace.len(),
        "created_time": s.created_time,
        "last_updated_time": s.last_updated_time,
    });
    if let Some(summary) = &s.summary {
        source["summary"] = json!(summary);
    }
    source
}
