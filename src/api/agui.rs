//! `POST /agents/{id}/agui`: validate the `RunAgentInput` (4xx JSON before any streaming),
//! register the run, and stream its events as SSE with keep-alives (or, when `Accept` asks for
//! it, in the AG-UI protobuf encoding), the loop driven from the response body
//! ([`super::stream`]).

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::stream::{Disconnect, RunDriver, RunFuture, SseBody};
use super::{ApiError, owner};
use crate::AppState;
use crate::agent::{Agent, Report};
use crate::protocol::encode::Wire;
use crate::protocol::input;
use crate::protocol::input::RunAgentInput;
use crate::runs::Emitter;
use crate::runs::limits::{Refused, RunPermit};

/// The handler.
pub async fn run_agent(
    State(state): State<AppState>,
    Path(agent_id): Path<String>,
    caller: Option<axum::Extension<crate::api::auth::Caller>>,
    headers: axum::http::HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    if state.runs.is_shutting_down() {
        return Err(ApiError::ShuttingDown);
    }
    let agent = state
        .agents
        .get(&agent_id)
        .await
        .map_err(|e| match e {
            crate::agent::registry::RegistryError::Invalid(i) => ApiError::Internal(format!(
                "registered agent {agent_id:?} no longer builds: {i}"
            )),
            other => ApiError::Internal(other.to_string()),
        })?
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
    check_tools(&agent, &input)?;
    check_limits(&state, &input)?;
    let wire = wire(&headers)?;
    let who = owner::principal(&state, caller.as_deref());
    // The in-memory admission first: a request refused for load costs no store I/O.
    let permit = admit(&state, caller.as_deref()).map_err(refused)?;
    owner::claim_run(&state, &who, &agent, &input).await?;
    let started = start(&state, agent, input, permit, who.name, wire).await;
    Ok(stream_response(&state, started))
}

/// The encoding the request's `Accept` header asks for ([`Wire::negotiate`]).
pub(crate) fn wire(
    headers: &axum::http::HeaderMap,
) -> Result<Wire, crate::protocol::encode::NotAcceptable> {
    // A header that is not text (or repeated) is read as its first readable value.
    let accept = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect::<Vec<_>>()
        .join(",");
    Wire::negotiate(Some(&accept))
}

/// Takes a place for a new run under the gateway's and the caller's limits.
pub(crate) fn admit(
    state: &AppState,
    caller: Option<&crate::api::auth::Caller>,
) -> Result<RunPermit, Refused> {
    let key = caller.map(|c| (c.name.as_str(), c.max_runs));
    state.limiter.admit(key).inspect_err(|r| {
        tracing::info!(refused = %r, "run not admitted");
    })
}

/// The answer to a run that was not admitted.
pub(crate) fn refused(r: Refused) -> ApiError {
    match r {
        Refused::Gateway(_) => ApiError::Overloaded(r.to_string()),
        Refused::Key(..) => ApiError::TooManyRuns(r.to_string()),
    }
}

/// Refuses requests past the configured size limits.
pub(crate) fn check_limits(state: &AppState, input: &RunAgentInput) -> Result<(), ApiError> {
    let max = state.settings.max_messages;
    if input.messages.len() > max {
        return Err(ApiError::BadRequest {
            field: "messages".into(),
            message: format!(
                "{} messages is more than this gateway takes in one request ({max}); send fewer (the thread's store keeps history)",
                input.messages.len()
            ),
        });
    }
    let max = state.settings.max_part_bytes;
    if let Some((field, size)) = input.part_over(max) {
        return Err(ApiError::BadRequest {
            field,
            message: format!(
                "{size} bytes is more than this gateway takes in one part ({max}); send large files by URL or split the text"
            ),
        });
    }
    Ok(())
}

/// Refuses frontend tools named like one of the agent's backend tools.
pub(crate) fn check_tools(agent: &Agent, input: &RunAgentInput) -> Result<(), ApiError> {
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
    Ok(())
}

/// A run that has started: its frames, its loop (not yet polled), its cancel token, and its
/// report once it ends.
pub(crate) struct Started {
    rx: mpsc::Receiver<Bytes>,
    /// The run's loop: driven from the response body by [`stream_response`], spawned by
    /// [`Started::finish`].
    run: Option<RunFuture>,
    cancel: CancellationToken,
    thread_id: String,
    run_id: String,
    /// How its frames are encoded.
    wire: Wire,
    /// The run's report, sent when it has ended and its thread is released.
    pub done: oneshot::Receiver<Report>,
}

impl Started {
    /// Reads (and drops) the frames until the run ends, then gives its report.
    pub(crate) async fn finish(mut self) -> Report {
        if let Some(run) = self.run.take() {
            tokio::spawn(run);
        }
        while self.rx.recv().await.is_some() {}
        self.done.await.unwrap_or_else(|_| Report {
            error: Some((
                "INTERNAL_ERROR".into(),
                "the run stopped unexpectedly".into(),
            )),
            ..Report::default()
        })
    }
}

/// Registers the run (one per thread, across gateways) and makes its loop; `owner` is the
/// principal recorded for it (checked by [`owner::claim_run`] beforehand); its frames are
/// encoded as `wire`.
pub(crate) async fn start(
    state: &AppState,
    agent: Arc<Agent>,
    input: RunAgentInput,
    permit: RunPermit,
    owner: String,
    wire: Wire,
) -> Started {
    let (done_tx, done) = oneshot::channel();
    let failed = |code: &str, message: String| Report {
        error: Some((code.to_string(), message)),
        ..Report::default()
    };
    let ids = (input.thread_id.clone(), input.run_id.clone());
    // Clients before AG-UI 1.0 get SSE even when they ask for protobuf: their schema lacks
    // events the gateway sends (TOOL_CALL_RESULT, the REASONING_* events), and they pick their
    // parser by the response's content type, so SSE is what they can read.
    let wire = if input.is_v1() { wire } else { Wire::Sse };
    let (tx, rx) = mpsc::channel(state.settings.channel_capacity);
    let run: RunFuture;
    let cancel = CancellationToken::new();
    let mut emitter = Emitter::new(tx, input.is_v1())
        .with_wire(wire)
        .with_stall_timeout(Duration::from_secs(state.settings.write_timeout_secs))
        .with_cancel_reason(
            state.runs.shutdown_flag(),
            "SHUTDOWN",
            "The gateway is shutting down; start the run again (another instance will take it).",
        );
    let begun = state
        .runs
        .begin_when_free(
            &input.thread_id,
            &input.run_id,
            cancel.clone(),
            Duration::from_secs(5),
        )
        .await;
    match begun {
        Err(active) => {
            tracing::info!(thread = %input.thread_id, active_run = %active.run_id, "thread busy");
            let message = busy_message(&input.thread_id, &active.run_id);
            crate::metrics::run_ended(&agent.id, Some("THREAD_BUSY"));
            let _ = done_tx.send(failed("THREAD_BUSY", message.clone()));
            run = Box::pin(async move { emitter.fail("THREAD_BUSY", message).await });
        }
        Ok(guard) => {
            let state = state.clone();
            // The request's span (while traces are exported) goes with the run into its task.
            let request_span = tracing::Span::current();
            let task = async move {
                let _permit = permit;
                let _guard = guard;
                let cancel = _guard.cancel.clone();
                let limit = state.settings.max_run_secs;
                let timed_out = Arc::new(AtomicBool::new(false));
                let mut emitter = emitter;
                // Re-assigned in place (not shadowed): each binding would take its own slot in
                // the run task's state.
                emitter = emitter
                    .with_closing_flag(Arc::clone(&_guard.closing))
                    .with_cancel_reason(
                        Arc::clone(&timed_out),
                        "RUN_TIMEOUT",
                        format!("The run went past its limit of {limit} s and was stopped."),
                    );
                // The lease holds the thread across gateways sharing a store.
                match Lease::take(&state, &agent.id, &input.thread_id, &input.run_id).await {
                    Taken::Unavailable(message) => {
                        emitter.fail("STORE_UNAVAILABLE", message.clone()).await;
                        crate::metrics::run_ended(&agent.id, Some("STORE_UNAVAILABLE"));
                        let _ = done_tx.send(failed("STORE_UNAVAILABLE", message));
                    }
                    Taken::Busy(holder) => {
                        tracing::info!(thread = %input.thread_id, active_run = %holder, "thread busy on another gateway");
                        let message = busy_message(&input.thread_id, &holder);
                        emitter.fail("THREAD_BUSY", message.clone()).await;
                        crate::metrics::run_ended(&agent.id, Some("THREAD_BUSY"));
                        let _ = done_tx.send(failed("THREAD_BUSY", message));
                    }
                    Taken::Held(lease) => {
                        let record = crate::store::RunRecord {
                            run_id: input.run_id.clone(),
                            agent_id: agent.id.clone(),
                            thread_id: input.thread_id.clone(),
                            finished: false,
                            owner,
                        };
                        let keep = Duration::from_secs(state.settings.run_events_keep_secs);
                        let log = state.event_log.start(record, keep).await;
                        emitter = emitter.with_log(log, state.settings.detach_on_disconnect);
                        let report = {
                            // Pinned where it is made: moved into a pinned slot, the loop's
                            // future would take its room in this task twice.
                            let mut drive = std::pin::pin!(crate::agent::drive(
                                &agent,
                                &input,
                                &mut emitter,
                                cancel.clone(),
                                Some(Arc::clone(&state.store)),
                            ));
                            // The wall-clock limit cancels the run, which then ends as usual (its
                            // RUN_ERROR says RUN_TIMEOUT); no timer task per run.
                            tokio::select! {
                                report = &mut drive => report,
                                _ = tokio::time::sleep(Duration::from_secs(limit)) => {
                                    timed_out.store(true, Ordering::SeqCst);
                                    cancel.cancel();
                                    drive.await
                                }
                            }
                        };
                        // The code the client saw (SHUTDOWN, RUN_TIMEOUT), not the cancellation.
                        let code = emitter
                            .error_code()
                            .or(report.error.as_ref().map(|(c, _)| c.as_str()))
                            .map(str::to_string);
                        // Followers end when the run is finished and its lease gone: finish
                        // the log first, then give the thread back.
                        if let Some(log) = emitter.take_log() {
                            log.finish().await;
                        }
                        drop(emitter);
                        lease.release().await;
                        crate::metrics::run_ended(&agent.id, code.as_deref());
                        let _ = done_tx.send(report);
                    }
                }
            };
            run = Box::pin(tracing::Instrument::instrument(task, request_span));
        }
    }
    Started {
        rx,
        run: Some(run),
        cancel,
        thread_id: ids.0,
        run_id: ids.1,
        wire,
        done,
    }
}

/// Streams a started run (SSE with keep-alives, or protobuf frames); the client leaving
/// cancels (or detaches) it.
pub(crate) fn stream_response(state: &AppState, started: Started) -> Response {
    let Started {
        rx,
        run,
        cancel,
        thread_id,
        run_id,
        wire,
        ..
    } = started;
    let stall = Duration::from_secs(state.settings.write_timeout_secs);
    let driver = run.map(|run| RunDriver::new(run, stall, cancel.clone()));
    let keepalive = Duration::from_secs(state.settings.keepalive_secs);
    let disconnect = Disconnect {
        cancel,
        detached_for: Duration::from_secs(state.settings.max_detached_secs),
        detach: state
            .settings
            .detach_on_disconnect
            .then(|| (Arc::clone(&state.runs), thread_id, run_id)),
    };
    let keepalive = wire.keep_alive().map(|frame| (keepalive, frame));
    let mut resp =
        Body::from_stream(SseBody::new(rx, driver, keepalive, disconnect)).into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(wire.content_type()),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}

fn busy_message(thread: &str, run: &str) -> String {
    format!(
        "Thread {thread:?} already has an active run ({run}); wait for it to finish or cancel it."
    )
}

/// A thread lease held for one run in a shared store, renewed in the background until
/// released. With the embedded store there is none to take (`Lease(None)`): the run manager
/// already keeps one run per thread in this process, which is the store's only user.
struct Lease(Option<StoreLease>);

struct StoreLease {
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
        if !state.store.is_shared() {
            return Taken::Held(Lease(None));
        }
        let ttl = Duration::from_secs(state.settings.lease_secs);
        let store = Arc::clone(&state.store);
        // A run on another gateway that has just finished may still be releasing the thread:
        // look again for a moment before calling it busy.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
        let mut answer = store
            .acquire_lease(agent, thread, run, &state.gateway_id, ttl)
            .await;
        while matches!(answer, Ok(crate::store::Lease::Busy { .. }))
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
            answer = store
                .acquire_lease(agent, thread, run, &state.gateway_id, ttl)
                .await;
        }
        match answer {
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
                Taken::Held(Lease(Some(StoreLease {
                    store,
                    agent: agent.into(),
                    thread: thread.into(),
                    run: run.into(),
                    renewer,
                })))
            }
        }
    }

    async fn release(self) {
        let Some(lease) = self.0 else {
            return;
        };
        lease.renewer.abort();
        if let Err(e) = lease
            .store
            .release_lease(&lease.agent, &lease.thread, &lease.run)
            .await
        {
            tracing::warn!(error = %e, "releasing a thread lease failed; it will expire");
        }
    }
}

/// How often a followed run is polled for new frames.
const FOLLOW_POLL: Duration = Duration::from_millis(100);

/// `?after=N`.
#[derive(Debug, serde::Deserialize)]
pub struct AfterQuery {
    after: Option<u64>,
}

/// `GET /agents/{id}/agui/runs/{run_id}/events`: replays a run's frames after `Last-Event-ID`
/// (or `?after=N`) from the store, then follows the run until it ends, on any gateway sharing
/// the store.
pub async fn run_events(
    State(state): State<AppState>,
    Path((agent_id, run_id)): Path<(String, String)>,
    Query(query): Query<AfterQuery>,
    caller: Option<axum::Extension<crate::api::auth::Caller>>,
    headers: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    let wire = wire(&headers)?;
    let after = match headers
        .get("last-event-id")
        .map(|v| v.to_str().map(|s| s.trim().parse::<u64>()))
    {
        Some(Ok(Ok(n))) => n,
        Some(_) => {
            return Err(ApiError::BadRequest {
                field: "Last-Event-ID".into(),
                message: "must be an event sequence number".into(),
            });
        }
        None => query.after.unwrap_or(0),
    };
    let who = owner::principal(&state, caller.as_deref());
    if owner::run_of(&state, &who, &agent_id, &run_id)
        .await?
        .is_none()
    {
        return Err(ApiError::NotFound(format!(
            "no replayable run {run_id:?} for agent {agent_id:?}"
        )));
    }
    let store = Arc::clone(&state.store);
    let log = state.event_log.clone();
    let runs = Arc::clone(&state.runs);
    let keepalive = Duration::from_secs(state.settings.keepalive_secs);
    let stream = async_stream::stream! {
        let mut last = after;
        let mut quiet = Duration::ZERO;
        loop {
            let batch = match log.frames_after(&*store, &run_id, last).await {
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!(error = %e, "replaying run events failed");
                    return;
                }
            };
            if !batch.is_empty() {
                quiet = Duration::ZERO;
                for (seq, json) in batch {
                    last = seq;
                    yield Ok::<Bytes, Infallible>(wire.frame_logged(seq, &json));
                }
                continue;
            }
            // Nothing new: done if the run has ended (its writer marks it finished only after
            // the last frame is stored), otherwise wait and look again.
            // A run whose gateway died stays "running" in a shared store; its lease lapses.
            // The embedded store's only gateway is this one.
            let alive = match store.run(&run_id).await {
                Ok(Some(r)) if !r.finished && !store.is_shared() => {
                    runs.is_running(&r.thread_id, &r.run_id)
                }
                Ok(Some(r)) if !r.finished => {
                    matches!(store.lease_holder(&r.agent_id, &r.thread_id).await, Ok(Some(h)) if h == r.run_id)
                }
                _ => false,
            };
            match alive {
                true => {}
                false => {
                    if let Ok(rest) = log.frames_after(&*store, &run_id, last).await {
                        for (seq, json) in rest {
                            yield Ok(wire.frame_logged(seq, &json));
                        }
                    }
                    return;
                }
            }
            tokio::time::sleep(FOLLOW_POLL).await;
            quiet += FOLLOW_POLL;
            if quiet >= keepalive {
                quiet = Duration::ZERO;
                if let Some(frame) = wire.keep_alive() {
                    yield Ok(frame);
                }
            }
        }
    };
    let mut resp = Body::from_stream(stream).into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(wire.content_type()),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Ok(resp)
}

/// The longest `DELETE .../runs/{run_id}` waits for the cancelled run to end.
const CANCEL_WAIT: Duration = Duration::from_secs(5);

/// `DELETE /agents/{id}/agui/runs/{run_id}`: cancels a run going on here, attached or detached
/// (a client's Stop when its runs outlive their connections), and answers `204` once it has
/// ended (its `RUN_ERROR` `CANCELLED` logged, its thread free for the next run); `404` when no
/// such run is going on here.
pub async fn cancel_run(
    State(state): State<AppState>,
    Path((agent_id, run_id)): Path<(String, String)>,
    caller: Option<axum::Extension<crate::api::auth::Caller>>,
) -> Result<Response, ApiError> {
    let deadline = tokio::time::Instant::now() + CANCEL_WAIT;
    // A run is recorded with its first frames, a tick after it starts: a Stop clicked at once
    // looks again for a moment.
    let who = owner::principal(&state, caller.as_deref());
    let mut record = None;
    for _ in 0..10 {
        record = owner::run_of(&state, &who, &agent_id, &run_id).await?;
        if record.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let thread = record
        .map(|r| r.thread_id)
        .filter(|thread| state.runs.cancel_run(thread, &run_id))
        .ok_or_else(|| {
            ApiError::NotFound(format!(
                "no run {run_id:?} of agent {agent_id:?} is going on here"
            ))
        })?;
    while state.runs.is_running(&thread, &run_id) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(axum::http::StatusCode::NO_CONTENT.into_response())
}
