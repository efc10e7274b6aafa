//! What a web page may make the gateway do: CORS origins (by default pages served from
//! loopback hosts only), the `Host` allow-list against DNS rebinding, and JSON-only bodies so a
//! page cannot send a run or a registration as a "simple" cross-origin request (`text/plain`
//! forms need no preflight).

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header, request::Parts};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body::Body as _;
use tower_http::cors::AllowOrigin;

use crate::AppState;

/// The CORS origins of `[server] cors_origins`: `*` for any, a list, or by default (empty)
/// pages served from `localhost`, `127.0.0.1` or `[::1]` over http(s) on any port.
pub fn allow_origin(origins: &[String]) -> AllowOrigin {
    if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else if origins.is_empty() {
        AllowOrigin::predicate(|origin: &HeaderValue, _: &Parts| {
            crate::outbound::is_loopback_origin(origin.as_bytes())
        })
    } else {
        AllowOrigin::list(origins.iter().filter_map(|o| HeaderValue::from_str(o).ok()))
    }
}

fn error(status: StatusCode, kind: &str, message: String) -> Response {
    (status, axum::Json(super::error_json(kind, &message))).into_response()
}

/// Whether a `content-type` is JSON (`application/json` or `application/*+json`, any
/// parameters).
fn is_json(v: &HeaderValue) -> bool {
    v.to_str().is_ok_and(crate::tools::openapi::is_json)
}

fn has_body(body: &Body) -> bool {
    !body.is_end_stream() && body.size_hint().exact() != Some(0)
}

/// Refuses requests whose `Host` (or HTTP/2 `:authority`) is not allowed (421), and bodies
/// of POST/PUT/PATCH requests that are not JSON (415). A request without a `Host` comes from
/// no browser and passes.
pub async fn guard(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let authority = req
        .uri()
        .authority()
        .map(|a| a.as_str().to_string())
        .or_else(|| {
            req.headers()
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .map(str::to_string)
        });
    if let Some(a) = authority
        && !state.settings.allowed_hosts.allows(&a)
    {
        return error(
            StatusCode::MISDIRECTED_REQUEST,
            "misdirected_request",
            format!(
                "this gateway does not answer for host {a:?}; list it in [server] allowed_hosts"
            ),
        );
    }
    // Ids in paths and queries become store keys, and PostgreSQL refuses a NUL in text: no id
    // has one, so such a request is refused whole rather than failing in the store.
    if req
        .uri()
        .path_and_query()
        .is_some_and(|pq| pq.as_str().contains("%00"))
    {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "the path and query must not contain an encoded NUL (%00)".into(),
        );
    }
    let writes = matches!(req.method().as_str(), "POST" | "PUT" | "PATCH");
    if writes
        && has_body(req.body())
        && !req.headers().get(header::CONTENT_TYPE).is_some_and(is_json)
    {
        return error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "the body must be JSON, sent with content-type: application/json".into(),
        );
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_content_types() {
        for v in [
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON",
            "application/merge-patch+json",
        ] {
            assert!(is_json(&HeaderValue::from_static(v)), "{v}");
        }
        for v in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "text/json",
            "application/jsonp",
        ] {
            assert!(!is_json(&HeaderValue::from_static(v)), "{v}");
        }
    }
}
