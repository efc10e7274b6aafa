//! The web demo (`web-demo/`, built into `web-demo/dist/`), embedded in the binary and served at
//! `/`, so `agui-gateway serve` alone shows a working AG-UI chatbot.

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::AppState;

const INDEX: &str = include_str!("../../web-demo/dist/index.html");
const APP_JS: &str = include_str!("../../web-demo/dist/app.js");
const APP_CSS: &str = include_str!("../../web-demo/dist/app.css");

fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut resp = body.into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    // Revalidated every time: the files change with the binary.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    resp
}

/// `/`, `/app.js`, `/app.css`.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/",
            get(|| async { asset(INDEX, "text/html; charset=utf-8") }),
        )
        .route(
            "/app.js",
            get(|| async { asset(APP_JS, "text/javascript; charset=utf-8") }),
        )
        .route(
            "/app.css",
            get(|| async { asset(APP_CSS, "text/css; charset=utf-8") }),
        )
}
