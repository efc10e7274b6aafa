//! The agent API, shaped like OpenSearch ml-commons' (`/_plugins/_ml/...`): connectors, models
//! (`_predict`), agents (register, get, delete, search, execute, stream) and tasks. Every error
//! answers in one shape: `{"error": {"type", "reason", "details"}, "status"}`.

mod agents;
mod conversations;
mod docs;
mod execute;
mod models;
mod settings;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::AppState;

/// An agent API error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MlError {
    /// The request is wrong; `field` names what.
    #[error("{field}: {reason}")]
    BadRequest {
        /// The field path (empty for the whole body).
        field: String,
        /// What is wrong.
        reason: String,
        /// Extra facts (expected shapes, what was received).
        details: Value,
    },
    /// No such resource.
    #[error("{0}")]
    NotFound(String),
    /// The resource is in use, or busy.
    #[error("{0}")]
    Conflict(String),
    /// The body is larger than allowed.
    #[error("request body too large")]
    TooLarge,
    /// A model or tool upstream failed.
    #[error("{reason}")]
    Upstream {
        /// What failed.
        reason: String,
        /// Extra facts (upstream status, run error code).
        details: Value,
    },
    /// The store, or the gateway's capacity, is unavailable.
    #[error("{0}")]
    Unavailable(String),
    /// The caller's key has its limit of runs going.
    #[error("{0}")]
    TooManyRuns(String),
    /// The `Accept` header refuses both encodings the stream comes in.
    #[error(transparent)]
    NotAcceptable(#[from] crate::protocol::encode::NotAcceptable),
    /// A server fault; logged, answered without internals.
    #[error("internal error")]
    Internal(String),
}

impl MlError {
    /// A 400 naming `field`.
    pub fn bad(field: impl Into<String>, reason: impl Into<String>) -> Self {
        MlError::BadRequest {
            field: field.into(),
            reason: reason.into(),
            details: json!({}),
        }
    }
}

impl IntoResponse for MlError {
    fn into_response(self) -> Response {
        let (status, kind) = match &self {
            MlError::BadRequest { .. } => (StatusCode::BAD_REQUEST, "illegal_argument_exception"),
            MlError::NotFound(_) => (StatusCode::NOT_FOUND, "resource_not_found_exception"),
            MlError::Conflict(_) => (StatusCode::CONFLICT, "status_exception"),
            MlError::TooLarge => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
            MlError::Upstream { .. } => (StatusCode::BAD_GATEWAY, "remote_service_exception"),
            MlError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            MlError::TooManyRuns(_) => (StatusCode::TOO_MANY_REQUESTS, "too_many_requests"),
            MlError::NotAcceptable(_) => (StatusCode::NOT_ACCEPTABLE, "not_acceptable"),
            MlError::Internal(detail) => {
                tracing::error!(%detail, "internal error");
                (StatusCode::INTERNAL_SERVER_ERROR, "internal_error")
            }
        };
        let (reason, details) = match self {
            MlError::BadRequest {
                field,
                reason,
                mut details,
            } => {
                if !field.is_empty()
                    && let Some(d) = details.as_object_mut()
                {
                    d.entry("field").or_insert(json!(field));
                }
                let reason = if field.is_empty() {
                    reason
                } else {
                    format!("{field}: {reason}")
                };
                (reason, details)
            }
            MlError::Upstream { reason, details } => (reason, details),
            other => (other.to_string(), json!({})),
        };
        let body = crate::api::ml_error_json(status, kind, &reason, details);
        let mut resp = (status, Json(body)).into_response();
        crate::api::add_retry_after(&mut resp);
        resp
    }
}

impl From<crate::agent::spec::Invalid> for MlError {
    fn from(e: crate::agent::spec::Invalid) -> Self {
        MlError::bad(e.field, e.problem)
    }
}

impl From<crate::agent::registry::RegistryError> for MlError {
    fn from(e: crate::agent::registry::RegistryError) -> Self {
        match e {
            crate::agent::registry::RegistryError::Invalid(i) => i.into(),
            other => MlError::Internal(other.to_string()),
        }
    }
}

impl From<crate::store::StoreError> for MlError {
    fn from(e: crate::store::StoreError) -> Self {
        tracing::error!(error = %e, "store failed");
        MlError::Unavailable("The store is unavailable; try again shortly.".into())
    }
}

/// The JSON object of a request body, or the 4xx that says why not.
pub(crate) fn json_body(body: Result<Bytes, BytesRejection>) -> Result<Value, MlError> {
    let bytes = body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            MlError::TooLarge
        } else {
            MlError::bad("", e.body_text())
        }
    })?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    let v: Value = serde_json::from_slice(&bytes)
        .map_err(|e| MlError::bad("", format!("malformed JSON: {e}")))?;
    if !v.is_object() {
        return Err(MlError::bad("", "the body must be a JSON object"));
    }
    Ok(v)
}

/// The agent API's routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/_plugins/_ml/connectors/_create",
            post(models::create_connector),
        )
        // The RFC's spelling of the same call.
        .route(
            "/_plugins/_ml/connectors/_register",
            post(models::create_connector),
        )
        .route(
            "/_plugins/_ml/connectors/_search",
            post(models::search_connectors),
        )
        .route(
            "/_plugins/_ml/connectors/{id}",
            get(models::get_connector).delete(models::delete_connector),
        )
        .route(
            "/_plugins/_ml/models/_register",
            post(models::register_model),
        )
        .route("/_plugins/_ml/models/_search", post(models::search_models))
        .route(
            "/_plugins/_ml/models/{id}",
            get(models::get_model).delete(models::delete_model),
        )
        .route("/_plugins/_ml/models/{id}/_predict", post(models::predict))
        .route("/_plugins/_ml/models/{id}/_deploy", post(models::deploy))
        .route("/_plugins/_ml/models/{id}/_undeploy", post(models::deploy))
        .route("/_plugins/_ml/agents/_register", post(agents::register))
        .route("/_plugins/_ml/agents/_search", post(agents::search))
        .route(
            "/_plugins/_ml/agents/{id}",
            get(agents::get_agent).delete(agents::delete_agent),
        )
        .route("/_plugins/_ml/agents/{id}/_execute", post(execute::execute))
        .route(
            "/_plugins/_ml/agents/{id}/_execute/stream",
            post(execute::execute_stream),
        )
        .route("/_plugins/_ml/tasks/{id}", get(execute::get_task))
        .route("/_plugins/_ml/memory", get(conversations::list))
        .route(
            "/_plugins/_ml/memory/_search",
            get(conversations::search).post(conversations::search),
        )
        .route(
            "/_plugins/_ml/memory/{id}",
            get(conversations::get).delete(conversations::delete),
        )
        .route(
            "/_plugins/_ml/memory/{id}/messages",
            get(conversations::messages),
        )
        .route(
            "/_plugins/_ml/memory/{id}/_search",
            get(conversations::search_messages).post(conversations::search_messages),
        )
        .route(
            "/_plugins/_ml/memory/message/{id}",
            get(conversations::message),
        )
        .route(
            "/_plugins/_ml/memory/message/{id}/traces",
            get(conversations::traces),
        )
        .route("/_plugins/_ml/{*rest}", axum::routing::any(unknown))
        // Seed 000 writes it with a trailing slash.
        .route("/_cluster/settings", get(settings::get).put(settings::put))
        .route("/_cluster/settings/", get(settings::get).put(settings::put))
}

/// Any other path under the agent API: a 404 in the API's error shape.
async fn unknown(uri: axum::http::Uri) -> MlError {
    MlError::NotFound(format!("no agent API endpoint {}", uri.path()))
}
