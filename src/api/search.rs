//! The knowledge-base ingestion API. (Being implemented.)

use axum::Router;

use crate::AppState;

/// Routes of the ingestion API.
pub fn routes() -> Router<AppState> {
    Router::new()
}
