//! HTTP routers and the one error type they answer with.

pub mod agui;
pub mod auth;
pub mod health;
pub mod inbound;
pub mod memory;
pub mod ml;
pub mod owner;
pub mod search;
pub(crate) mod stream;
pub mod web;

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An error answered as JSON before any streaming starts. Client faults are not logged as
/// server errors; server faults are logged and answered without internals.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApiError {
    /// No such resource.
    #[error("{0}")]
    NotFound(String),
    /// The request is malformed; `field` names what is wrong.
    #[error("{field}: {message}")]
    BadRequest {
        /// The offending field (may be empty for the whole body).
        field: String,
        /// What is wrong.
        message: String,
    },
    /// The body is larger than allowed.
    #[error("request body too large")]
    PayloadTooLarge,
    /// The body did not arrive within the server's body deadline.
    #[error("the request body did not arrive in time")]
    RequestTimeout,
    /// The server is shutting down and takes no new runs.
    #[error("the gateway is shutting down; retry on another instance")]
    ShuttingDown,
    /// The caller's key has its limit of runs going.
    #[error("{0}")]
    TooManyRuns(String),
    /// The gateway is at its limit of runs.
    #[error("{0}")]
    Overloaded(String),
    /// No valid API key.
    #[error("{0}")]
    Unauthorized(String),
    /// The key may not do this.
    #[error("{0}")]
    Forbidden(String),
    /// The store did not answer, so the request could not be checked or taken; retry later.
    #[error("the store is unavailable; retry shortly")]
    StoreUnavailable(String),
    /// The `Accept` header refuses both encodings the stream comes in.
    #[error(transparent)]
    NotAcceptable(#[from] crate::protocol::encode::NotAcceptable),
    /// A server fault.
    #[error("internal error")]
    Internal(String),
}

/// Tells clients refused for load (429, 503) when to try again.
pub(crate) fn add_retry_after(resp: &mut Response) {
    if matches!(
        resp.status(),
        StatusCode::SERVICE_UNAVAILABLE | StatusCode::TOO_MANY_REQUESTS
    ) {
        resp.headers_mut().insert(
            axum::http::header::RETRY_AFTER,
            axum::http::HeaderValue::from_static("1"),
        );
    }
}

/// The API's error body, `{"error": {"type", "message"}}`: one shape for every refusal.
pub(crate) fn error_json(kind: &str, message: &str) -> serde_json::Value {
    json!({ "error": { "type": kind, "message": message } })
}

/// ml-commons' error body, `{"error": {"type", "reason", "details"}, "status"}`: the agent
/// API's refusals (see [`ml::MlError`]).
pub(crate) fn ml_error_json(
    status: StatusCode,
    kind: &str,
    reason: &str,
    details: serde_json::Value,
) -> serde_json::Value {
    json!({
        "error": { "type": kind, "reason": reason, "details": details },
        "status": status.as_u16(),
    })
}

/// Gives every error the API's JSON shape, whoever produced it: axum's own rejections (a
/// malformed query string, a path that does not decode, a body that is not JSON), unknown
/// routes and wrong methods answer in plain text, which clients cannot parse.
pub async fn json_errors(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    // The agent API answers in ml-commons' envelope, the rest in the gateway's.
    let ml =
        req.uri().path().starts_with("/_plugins/") || req.uri().path().starts_with("/_cluster/");
    let resp = next.run(req).await;
    let status = resp.status();
    let is_json = resp
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    // Rejection texts are a line or two; anything longer is not one of them.
    let text = match axum::body::to_bytes(body, 4096).await {
        Ok(b) => String::from_utf8_lossy(&b).trim().to_string(),
        Err(_) => String::new(),
    };
    let kind = match status {
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        StatusCode::REQUEST_TIMEOUT => "request_timeout",
        s if s.is_server_error() => "internal_error",
        _ => "invalid_request",
    };
    let message = if text.is_empty() || status.is_server_error() {
        status
            .canonical_reason()
            .unwrap_or("error")
            .to_ascii_lowercase()
    } else {
        text
    };
    let body = if ml {
        ml_error_json(status, kind, &message, json!({}))
    } else {
        error_json(kind, &message)
    }
    .to_string();
    parts.headers.insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(body))
}

/// Middleware: every whole (not streamed) answer passes the redactor, so an error quoting an
/// upstream, a task document or any other JSON never carries a known secret (see
/// [`crate::redact`]). Streams are left alone: their frames were redacted as they were made.
pub async fn redact_responses(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    use http_body::Body as _;
    let resp = next.run(req).await;
    let Some(len) = resp.body().size_hint().exact() else {
        return resp;
    };
    let streamed = resp
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("text/event-stream"));
    if streamed || len == 0 {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(b) => b,
        Err(e) => return ApiError::Internal(format!("reading an answer: {e}")).into_response(),
    };
    if !crate::redact::contains_secret_bytes(&bytes) {
        return Response::from_parts(parts, axum::body::Body::from(bytes));
    }
    let clean = match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(mut v) => {
            crate::redact::redact_value(&mut v);
            v.to_string().into_bytes()
        }
        Err(_) => crate::redact::redact_bytes(&bytes).into_owned(),
    };
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(clean))
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, kind) = match &self {
            ApiError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            ApiError::BadRequest { .. } => (StatusCode::BAD_REQUEST, "invalid_request"),
            ApiError::PayloadTooLarge => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
            ApiError::RequestTimeout => (StatusCode::REQUEST_TIMEOUT, "request_timeout"),
            ApiError::ShuttingDown => (StatusCode::SERVICE_UNAVAILABLE, "shutting_down"),
            ApiError::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized"),
            ApiError::TooManyRuns(_) => (StatusCode::TOO_MANY_REQUESTS, "too_many_runs"),
            ApiError::Overloaded(_) => (StatusCode::SERVICE_UNAVAILABLE, "overloaded"),
            ApiError::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            ApiError::NotAcceptable(_) => (StatusCode::NOT_ACCEPTABLE, "not_acceptable"),
            ApiError::StoreUnavailable(detail) => {
                tracing::warn!(%detail, "store unavailable before a run could start");
                (StatusCode::SERVICE_UNAVAILABLE, "store_unavailable")
            }
            ApiError::Internal(detail) => {
                tracing::error!(%detail, "internal error");
                (StatusCode::INTERNAL_SERVER_ERROR, "internal_error")
            }
        };
        let mut body = match &self {
            ApiError::BadRequest { message, .. } => error_json(kind, message),
            _ => error_json(kind, &self.to_string()),
        };
        if let ApiError::BadRequest { field, .. } = &self
            && !field.is_empty()
        {
            body["error"]["field"] = json!(field);
        }
        let mut resp = (status, Json(body)).into_response();
        add_retry_after(&mut resp);
        if status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
        }
        resp
    }
}
