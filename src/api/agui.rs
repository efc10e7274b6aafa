//! `POST /agents/{id}/agui`: validate the `RunAgentInput` (4xx JSON before any streaming),
//! register the run, spawn the loop, and stream its events as SSE with keep-alives.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::ApiError;
use crate::AppState;
use crate::agent::react;
use crate::protocol::encode::{KEEP_ALIVE, SSE_CONTENT_TYPE};
use crate::protocol::input;
use crate::runs::Emitter;

/// The handler.
pub async fn run_agent(
    State(state): State<AppState>,
    Path(agent_id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let agent = state
        .agents
        .get(&agent_id)
        .cloned()
        .ok_or_else(|| ApiError::NotFound(format!("no agent with id {agent_id:?}")))?;
    let body = body.map_err(|e| match e {
        BytesRejection::FailedToBufferBody(_)
            if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE =>
        {
            ApiError::PayloadTooLarge
        }
        other => ApiError::BadRequest {
            field: String::new(),
            message: other.body_text(),
        },
    })?;
    let input = input::parse(&body).map_err(|e| ApiError::BadRequest {
        field: e.field,
        message: e.message,
    })?;
    for (i, tool) in input.tools.iter().enumerate() {
        if agent.tools.contains(&tool.name) {
            return Err(ApiError::BadRequest {
                field: format!("tools[{i}].name"),
                message: format!(
                    "frontend tool {:?} clashes with a backend tool of agent {:?}; rename one of them",
                    tool.name, agent.id
                ),
            });
        }
    }

    let (tx, rx) = mpsc::channel(state.settings.channel_capacity);
    let cancel = CancellationToken::new();
    let mut emitter = Emitter::new(tx, input.is_v1());
    match state
        .runs
        .begin(&input.thread_id, &input.run_id, cancel.clone())
    {
        Err(busy) => {
            tracing::info!(thread = %input.thread_id, active_run = %busy.run_id, "thread busy");
            let message = format!(
                "Thread {:?} already has an active run ({}); wait for it to finish or cancel it.",
                input.thread_id, busy.run_id
            );
            tokio::spawn(async move { emitter.fail("THREAD_BUSY", message).await });
        }
        Ok(guard) => {
            tokio::spawn(async move {
                let _guard = guard;
                let cancel = _guard.cancel.clone();
                react::run(&agent, &input, &mut emitter, cancel).await;
            });
        }
    }
    let keepalive = Duration::from_secs(state.settings.keepalive_secs);
    let mut resp =
        Body::from_stream(sse_stream(rx, keepalive, cancel.drop_guard())).into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(SSE_CONTENT_TYPE),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(resp)
}

/// The response body: frames from the run, a keep-alive comment after each quiet interval.
/// Dropping it (client gone) drops `guard`, which cancels the run.
fn sse_stream(
    rx: mpsc::Receiver<Bytes>,
    keepalive: Duration,
    guard: DropGuard,
) -> impl futures::Stream<Item = Result<Bytes, Infallible>> + Send {
    futures::stream::unfold((rx, guard), move |(mut rx, guard)| async move {
        match tokio::time::timeout(keepalive, rx.recv()).await {
            Ok(Some(frame)) => Some((Ok(frame), (rx, guard))),
            Ok(None) => None,
            Err(_) => Some((Ok(Bytes::from_static(KEEP_ALIVE)), (rx, guard))),
        }
    })
}
