//! The agentic memory API (memory containers). (Being implemented.)

use axum::Router;

use crate::AppState;

/// Routes of the memory API.
pub fn routes() -> Router<AppState> {
    Router::new()
}
