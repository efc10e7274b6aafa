//! Liveness, discovery and metrics: `GET /healthz`, `GET /agents`, `GET /metrics`. Nothing secret is
//! ever listed.

use axum::Json;
use axum::extract::State;
use axum::response::IntoResponse;
use serde_json::{Value, json};

use crate::AppState;

/// `GET /healthz`.
pub async fn healthz(State(state): State<AppState>) -> Json<Value> {
    let mut sources = Vec::new();
    for a in state.agents.loaded() {
        for mut h in a.tools.health() {
            h["agent"] = json!(a.id);
            sources.push(h);
        }
    }
    let degraded = sources.iter().any(|h| h["status"] != "ok");
    Json(json!({
        "status": if degraded { "degraded" } else { "ok" },
        "version": env!("CARGO_PKG_VERSION"),
        "agents": state.agents.loaded().len(),
        "activeRuns": state.runs.active_count(),
        "detachedRuns": state.runs.detached_count(),
        "oldestRunSecs": state.runs.oldest_run_secs().unwrap_or(0),
        "toolSources": sources,
    }))
}

/// `GET /agents`: ids, names, models and tool names of the agents the caller's key may run
/// (every agent without keys).
pub async fn agents(
    State(state): State<AppState>,
    caller: Option<axum::Extension<crate::api::auth::Caller>>,
) -> Json<Value> {
    let may_run = |id: &str| caller.as_ref().is_none_or(|c| c.allows(id));
    let mut list: Vec<Value> = state
        .agents
        .fixed()
        .filter(|a| may_run(&a.id))
        .map(|a| {
            json!({
                "id": a.id,
                "name": a.name,
                "description": a.description,
                "model": { "provider": a.provider.name(), "modelId": a.provider.model_id() },
                "tools": a.tools.specs().into_iter().map(|t| t.name).collect::<Vec<_>>(),
                "endpoint": format!("/agents/{}/agui", a.id),
            })
        })
        .collect();
    list.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
    // Agents registered through the agent API, from their documents (not built to be listed).
    match state.store.docs(crate::store::docs::DocKind::Agent).await {
        Ok(docs) => list.extend(docs.into_iter().filter(|d| may_run(&d.id)).map(|d| {
            json!({
                "id": d.id,
                "name": d.name,
                "description": d.body.get("description").cloned().unwrap_or(json!("")),
                "type": d.body.get("type").cloned().unwrap_or(Value::Null),
                "endpoint": format!("/agents/{}/agui", d.id),
            })
        })),
        Err(e) => tracing::warn!(error = %e, "listing registered agents failed"),
    }
    Json(json!({ "agents": list }))
}

/// `GET /metrics`: Prometheus text format.
pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        crate::metrics::render(state.runs.active_count(), state.runs.detached_count()),
    )
}
