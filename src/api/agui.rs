//! `POST /agents/{id}/agui`: validate the `RunAgentInput` (4xx JSON before any streaming),
//! register the run, spawn the loop, and stream its events as SSE with keep-alives.

use std::convert::Infallible;
use std::sync::Arc;
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
        Err(active) => {
            tracing::info!(thread = %input.thread_id, active_run = %active.run_id, "thread busy");
            let message = busy_message(&input.thread_id, &active.run_id);
            tokio::spawn(async move { emitter.fail("THREAD_BUSY", message).await });
        }
        Ok(guard) => {
            let state = state.clone();
            tokio::spawn(async move {
                let _guard = guard;
                let cancel = _guard.cancel.clone();
                // The lease holds the thread across gateways sharing a store.
                match Lease::take(&state, &agent.id, &input.thread_id, &input.run_id).await {
                    Taken::Unavailable(message) => emitter.fail("STORE_UNAVAILABLE", message).await,
                    Taken::Busy(holder) => {
                        tracing::info!(thread = %input.thread_id, active_run = %holder, "thread busy on another gateway");
                        emitter
                            .fail("THREAD_BUSY", busy_message(&input.thread_id, &holder))
                            .await;
                    }
                    Taken::Held(lease) => {
                        react::run(
                            &agent,
                            &input,
                            &mut emitter,
                            cancel,
                            Some(Arc::clone(&state.store)),
                        )
                        .await;
                        lease.release().await;
                    }
                }
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

fn busy_message(thread: &str, run: &str) -> String {
    format!(
        "Thread {thread:?} already has an active run ({run}); wait for it to finish or cancel it."
    )
}

/// A thread lease held for one run, renewed in the background until released.
struct Lease {
    store: Arc<dyn crate::store::Store>,
    agent: String,
    thread: String,
    run: String,
    renewer: tokio::task::JoinHandle<()>,
}

/// What taking a lease gave.
enum Taken {
    /// The run holds the thread.
    Held(Lease),
    /// This run holds it.
    Busy(String),
    /// The store did not answer.
    Unavailable(String),
}

impl Lease {
    async fn take(state: &AppState, agent: &str, thread: &str, run: &str) -> Taken {
        let ttl = Duration::from_secs(state.settings.lease_secs);
        let store = Arc::clone(&state.store);
        match store
            .acquire_lease(agent, thread, run, &state.gateway_id, ttl)
            .await
        {
            Err(e) => {
                tracing::error!(error = %e, "thread lease failed");
                Taken::Unavailable(
                    "The conversation store is unavailable; try again shortly.".into(),
                )
            }
            Ok(crate::store::Lease::Busy { run_id }) => Taken::Busy(run_id),
            Ok(crate::store::Lease::Acquired) => {
                let (s, a, t, r) = (
                    Arc::clone(&store),
                    agent.to_string(),
                    thread.to_string(),
                    run.to_string(),
                );
                let renewer = tokio::spawn(async move {
                    let mut tick = tokio::time::interval(ttl / 3);
                    tick.tick().await;
                    loop {
                        tick.tick().await;
                        if let Err(e) = s.renew_lease(&a, &t, &r, ttl).await {
                            tracing::warn!(error = %e, "renewing a thread lease failed");
                        }
                    }
                });
                Taken::Held(Lease {
                    store,
                    agent: agent.into(),
                    thread: thread.into(),
                    run: run.into(),
                    renewer,
                })
            }
        }
    }

    async fn release(self) {
        self.renewer.abort();
        if let Err(e) = self
            .store
            .release_lease(&self.agent, &self.thread, &self.run)
            .await
        {
            tracing::warn!(error = %e, "releasing a thread lease failed; it will expire");
        }
    }
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
