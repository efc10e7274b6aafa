//! The single way events leave a run: adapt them to the client's protocol version, pass them
//! through the verifier, stamp and frame them, and send them into the bounded channel that feeds
//! the HTTP body. A slow client therefore slows the run instead of growing memory. Every frame
//! passes the redactor ([`crate::redact`]) before it is sent or logged for replay.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::protocol::encode::{Wire, now_ms};
use crate::protocol::events::{Envelope, Event, Outcome, TokenUsage, ToolResultContent};
use crate::protocol::verify::{Owner, Verifier, Violation};
use crate::runs::eventlog::EventLog;
use crate::runs::nested::{SideEvent, SideTx, Subagent, lift};
use crate::runs::transcript::Transcript;

/// Why an event could not be sent.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmitError {
    /// The client is gone (the body was dropped).
    #[error("client disconnected")]
    Disconnected,
    /// The event would break the protocol: a gateway bug.
    #[error(transparent)]
    Violation(#[from] Violation),
}

/// Where an emitter's events go.
#[derive(Debug)]
enum Outlet {
    /// Framed, to the client's response body.
    Client(mpsc::Sender<Bytes>),
    /// To the run that spawned this one, as its subagent `sub`.
    Parent { tx: SideTx, sub: Arc<Subagent> },
}

/// Sends one run's events.
#[derive(Debug)]
pub struct Emitter {
    outlet: Outlet,
    verifier: Verifier,
    v1: bool,
    /// The messages the sent events create, for the thread store.
    transcript: Transcript,
    /// Sequence number of the last event sent (SSE `id:`).
    seq: u64,
    /// Where every frame is logged for replay, if anywhere.
    log: Option<EventLog>,
    /// Keep going when the client is gone (the run is detached, followed via the event log).
    detachable: bool,
    /// Whether the client went away.
    client_gone: bool,
    /// Raised when the terminal event is sent, so the next run on the thread may wait for
    /// this one's clean-up instead of being refused.
    closing: Option<Arc<AtomicBool>>,
    /// Why a cancellation happened: the first raised flag names the `RUN_ERROR` code and
    /// message a cancelled run ends with (instead of `CANCELLED`).
    cancel_reasons: Vec<CancelReason>,
    /// The `RUN_ERROR` code sent, once sent.
    error_code: Option<String>,
    /// How long a full channel may stay full before the client counts as gone: a client that
    /// keeps its connection alive but stops reading (an HTTP/2 stream whose window it never
    /// opens) must not hold the run and its upstream call.
    stall: Option<std::time::Duration>,
    /// Subagents folded into their tool results for a client older than 1.0 (their events
    /// are not sent).
    folded: HashSet<String>,
    /// Tool-call ids of nested runs renamed because this run already used them: by nested run
    /// (its subagent id), the old id to the new.
    renamed: HashMap<String, HashMap<String, String>>,
    /// How frames are encoded for the client (SSE unless it asked for protobuf).
    wire: Wire,
}

/// A cause of cancellation and what the run's `RUN_ERROR` says when it is the cause.
#[derive(Debug)]
struct CancelReason {
    flag: Arc<AtomicBool>,
    code: &'static str,
    message: String,
}

impl Emitter {
    /// An emitter for a client that does (`v1`) or does not speak AG-UI 1.0.
    pub fn new(tx: mpsc::Sender<Bytes>, v1: bool) -> Self {
        Self::with_outlet(Outlet::Client(tx), v1)
    }

    /// An emitter for a run nested in another as subagent `sub`: its events go up `tx` to the
    /// spawning run, which streams them as the subagent's.
    pub fn nested(tx: SideTx, sub: Arc<Subagent>) -> Self {
        Self::with_outlet(Outlet::Parent { tx, sub }, true)
    }

    fn with_outlet(outlet: Outlet, v1: bool) -> Self {
        Self {
            outlet,
            verifier: Verifier::new(v1),
            v1,
            transcript: Transcript::default(),
            seq: 0,
            log: None,
            detachable: false,
            client_gone: false,
            closing: None,
            cancel_reasons: Vec::new(),
            error_code: None,
            stall: None,
            folded: HashSet::new(),
            renamed: HashMap::new(),
            wire: Wire::Sse,
        }
    }

    /// Frames events for the client as `wire` (the replay log keeps JSON either way).
    pub fn with_wire(mut self, wire: Wire) -> Self {
        self.wire = wire;
        self
    }

    /// Counts the client as gone once it has taken no frame for `stall` while the channel is
    /// full.
    pub fn with_stall_timeout(mut self, stall: std::time::Duration) -> Self {
        self.stall = Some(stall);
        self
    }

    /// Reports cancellations as `code` with `message` once `flag` is raised (e.g. `SHUTDOWN`
    /// while the server goes away, `RUN_TIMEOUT` past the wall-clock limit).
    pub fn with_cancel_reason(
        mut self,
        flag: Arc<AtomicBool>,
        code: &'static str,
        message: impl Into<String>,
    ) -> Self {
        self.cancel_reasons.push(CancelReason {
            flag,
            code,
            message: message.into(),
        });
        self
    }

    /// Raises `flag` when the terminal event is sent.
    pub fn with_closing_flag(mut self, flag: Arc<AtomicBool>) -> Self {
        self.closing = Some(flag);
        self
    }

    /// Logs every frame to `log`; with `detachable`, a gone client does not stop the run.
    pub fn with_log(mut self, log: EventLog, detachable: bool) -> Self {
        self.log = Some(log);
        self.detachable = detachable;
        self
    }

    /// The `RUN_ERROR` code the client was sent (after the shutdown and timeout mappings).
    pub fn error_code(&self) -> Option<&str> {
        self.error_code.as_deref()
    }

    /// Takes the event log back (to finish it once the run is over).
    pub fn take_log(&mut self) -> Option<EventLog> {
        self.log.take()
    }

    /// Whether 1.0-only shapes may be sent.
    pub fn is_v1(&self) -> bool {
        self.v1
    }

    /// Declares tool calls from the request history (a resumed run may answer them).
    pub fn know_tool_calls(&mut self, ids: impl IntoIterator<Item = String>) {
        self.verifier.know_tool_calls(ids);
    }

    /// Whether the stream has already ended.
    pub fn is_closed(&self) -> bool {
        self.verifier.is_closed()
    }

    /// Adapts, verifies and sends one event of the run's own agent.
    pub async fn emit(&mut self, event: Event) -> Result<(), EmitError> {
        self.emit_as(event, None).await
    }

    /// Adapts, verifies and sends one event attributed to subagent `by`.
    async fn emit_as(&mut self, event: Event, by: Owner) -> Result<(), EmitError> {
        let Some((event, by)) = self.adapt(event, by) else {
            return Ok(());
        };
        if let Err(v) = self.verifier.check_as(&event, by.as_deref()) {
            tracing::error!(violation = %v, "refusing to send an invalid AG-UI event (gateway bug)");
            return Err(v.into());
        }
        self.send(event, by).await
    }

    /// Streams one event of a nested run (see [`crate::runs::nested`]) as its subagent's.
    pub async fn relay(
        &mut self,
        sub: &Subagent,
        event: Event,
        by: Owner,
    ) -> Result<(), EmitError> {
        let Some((event, by)) = lift(sub, event, by) else {
            return Ok(());
        };
        let event = self.unique_call_ids(&sub.id, event);
        self.emit_as(event, by).await
    }

    /// Handles one event a tool or nested run sent into this run.
    pub async fn side(&mut self, event: SideEvent) -> Result<(), EmitError> {
        match event {
            SideEvent::Nested { sub, event, by } => self.relay(&sub, event, by).await,
            SideEvent::Emit(event) => self.emit(event).await,
            // Accounting is the run loop's (see `agent::react`); nothing to stream.
            SideEvent::Usage(_) => Ok(()),
        }
    }

    /// Gives a nested run's tool call a fresh id when this run already used its id (a
    /// provider numbering calls `call_0`, `call_1` in every run would otherwise clash), and
    /// every later mention of it the same (an activity's `toolCallId` included).
    fn unique_call_ids(&mut self, from: &str, mut event: Event) -> Event {
        if let Event::ToolCallStart { tool_call_id, .. } = &mut event
            && self.verifier.is_used(tool_call_id)
        {
            let fresh = crate::protocol::new_id("call");
            let old = std::mem::replace(tool_call_id, fresh.clone());
            self.renamed
                .entry(from.to_string())
                .or_default()
                .insert(old, fresh);
            return event;
        }
        let Some(renamed) = self.renamed.get(from) else {
            return event;
        };
        let id = match &mut event {
            Event::ToolCallArgs { tool_call_id, .. }
            | Event::ToolCallEnd { tool_call_id }
            | Event::ToolCallResult { tool_call_id, .. }
            | Event::SubagentStarted {
                parent_tool_call_id: Some(tool_call_id),
                ..
            } => tool_call_id,
            Event::ActivitySnapshot { content, .. } => match content.get_mut("toolCallId") {
                Some(serde_json::Value::String(id)) => id,
                _ => return event,
            },
            _ => return event,
        };
        if let Some(fresh) = renamed.get(id.as_str()) {
            *id = fresh.clone();
        }
        event
    }

    /// Ends the run with `RUN_ERROR` after closing whatever is open. Never fails: a gone
    /// client simply does not get it.
    pub async fn fail(&mut self, code: &str, message: impl Into<String>) {
        self.fail_with_usage(code, message, Vec::new()).await;
    }

    /// [`Emitter::fail`], reporting the tokens the run used (1.0 clients only).
    pub async fn fail_with_usage(
        &mut self,
        code: &str,
        message: impl Into<String>,
        usage: Vec<TokenUsage>,
    ) {
        if self.verifier.is_closed() {
            return;
        }
        // A cancellation with a known cause says so (the client may retry elsewhere).
        let reason = (code == "CANCELLED")
            .then(|| {
                self.cancel_reasons
                    .iter()
                    .find(|r| r.flag.load(Ordering::SeqCst))
            })
            .flatten();
        let (code, message) = match reason {
            Some(r) => (r.code, r.message.clone()),
            None => (code, message.into()),
        };
        if self.verifier.is_running() {
            for (e, by) in self.verifier.closers() {
                self.verifier.force(&e);
                // A client older than 1.0 never saw the subagents (nor their events).
                let Some((e, by)) = self.adapt(e, by) else {
                    continue;
                };
                if self.send(e, by).await.is_err() {
                    return;
                }
            }
        }
        let usage = (self.v1 && !usage.is_empty()).then_some(usage);
        self.error_code = Some(code.to_string());
        let e = Event::RunError {
            message,
            code: Some(code.to_string()),
            usage,
        };
        self.verifier.force(&e);
        let _ = self.send(e, None).await;
    }

    /// The messages this run's events have created so far.
    pub fn transcript(&self) -> &Transcript {
        &self.transcript
    }

    async fn send(&mut self, event: Event, by: Owner) -> Result<(), EmitError> {
        self.transcript.apply_as(&event, by.as_deref());
        if let Outlet::Parent { tx, sub } = &self.outlet {
            let up = SideEvent::Nested {
                sub: Arc::clone(sub),
                event,
                by,
            };
            return tx.send(up).await.map_err(|_| EmitError::Disconnected);
        }
        let terminal = matches!(event, Event::RunFinished { .. } | Event::RunError { .. });
        // One scan of the encoded event for known secrets (an upstream quoting the key in an
        // error, a tool echoing its token), before the client or the replay log sees it; the
        // frame carries the redacted content in either encoding.
        let kind = event.type_name();
        let encoded = self.wire.encode(
            self.seq + 1,
            Envelope {
                event,
                subagent: by,
                timestamp: Some(now_ms()),
            },
        );
        // An event no client accepts is not sent: the run stops as for any other event that
        // would break the stream (and ends with RUN_ERROR).
        let (json, frame) = encoded.map_err(|e| Violation {
            event: kind,
            rule: e.to_string(),
        })?;
        // Numbered only once sent: the stream's ids have no gaps.
        self.seq += 1;
        if let Some(log) = &self.log {
            log.push(self.seq, &json).await;
        }
        if terminal && let Some(flag) = &self.closing {
            flag.store(true, Ordering::SeqCst);
        }
        if self.client_gone {
            return Ok(());
        }
        if !self.deliver(frame).await {
            if !self.detachable {
                return Err(EmitError::Disconnected);
            }
            // Detached: the run goes on and can be followed through the event log.
            self.client_gone = true;
        }
        Ok(())
    }

    /// Queues a frame for the client; false when the client is gone or stopped reading. The
    /// common case, room in the channel, takes no timer.
    async fn deliver(&mut self, frame: Bytes) -> bool {
        let Outlet::Client(tx) = &self.outlet else {
            return false;
        };
        let frame = match tx.try_send(frame) {
            Ok(()) => return true,
            Err(mpsc::error::TrySendError::Closed(_)) => return false,
            Err(mpsc::error::TrySendError::Full(frame)) => frame,
        };
        let Some(stall) = self.stall else {
            return tx.send(frame).await.is_ok();
        };
        match tokio::time::timeout(stall, tx.send(frame)).await {
            Ok(sent) => sent.is_ok(),
            Err(_) => {
                tracing::info!(
                    stall_secs = stall.as_secs(),
                    "the client stopped reading its stream; counted as gone"
                );
                false
            }
        }
    }

    /// Rewrites or drops 1.0-only shapes for older clients. Subagents an agent tool started
    /// are folded into the tool's result (their events are dropped); the others (a
    /// plan-execute-reflect executor, one step at a time) stream as the run's own.
    fn adapt(&mut self, event: Event, by: Owner) -> Option<(Event, Owner)> {
        if self.v1 {
            return Some((event, by));
        }
        if by.as_ref().is_some_and(|s| self.folded.contains(s)) {
            return None;
        }
        let event = match event {
            Event::SubagentStarted {
                subagent_run_id,
                parent_subagent_run_id,
                parent_tool_call_id,
                ..
            } => {
                let in_folded = parent_subagent_run_id
                    .as_ref()
                    .is_some_and(|p| self.folded.contains(p));
                if parent_tool_call_id.is_some() || in_folded {
                    self.folded.insert(subagent_run_id);
                }
                return None;
            }
            Event::SubagentFinished { .. } | Event::SubagentError { .. } => return None,
            // What subagents said stays out of an older client's conversation.
            Event::MessagesSnapshot { mut messages } => {
                messages.retain(|m| m.get("subagentRunId").is_none());
                Event::MessagesSnapshot { messages }
            }
            Event::ToolCallResult {
                message_id,
                tool_call_id,
                content: ToolResultContent::Parts(parts),
                role,
            } => {
                let text = parts
                    .iter()
                    .map(|p| match p.get("text").and_then(|t| t.as_str()) {
                        Some(t) => t.to_string(),
                        None => p.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                Event::ToolCallResult {
                    message_id,
                    tool_call_id,
                    content: ToolResultContent::Text(text),
                    role,
                }
            }
            Event::RunFinished {
                thread_id,
                run_id,
                result,
                outcome,
                usage,
            } => {
                let outcome = match outcome {
                    Some(Outcome::Success { .. }) | Some(Outcome::Cancelled) | None => None,
                    interrupt => interrupt,
                };
                Event::RunFinished {
                    thread_id,
                    run_id,
                    result,
                    outcome,
                    usage,
                }
            }
            other => other,
        };
        Some((event, None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn started() -> Event {
        Event::RunStarted {
            thread_id: "t".into(),
            run_id: "r".into(),
            parent_run_id: None,
            protocol_version: None,
            input: None,
        }
    }

    async fn frames(mut rx: mpsc::Receiver<Bytes>) -> Vec<serde_json::Value> {
        let mut out = Vec::new();
        while let Some(f) = rx.recv().await {
            let s = std::str::from_utf8(&f).unwrap();
            let data = s.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
            out.push(serde_json::from_str(data).unwrap());
        }
        out
    }

    #[tokio::test]
    async fn a_nested_call_id_already_used_is_renamed_everywhere_it_is_named() {
        let (tx, rx) = mpsc::channel(32);
        let mut e = Emitter::new(tx, true);
        e.emit(started()).await.unwrap();
        let call = |id: &str| Event::ToolCallStart {
            tool_call_id: id.into(),
            tool_call_name: "f".into(),
            parent_message_id: None,
        };
        e.emit(call("c1")).await.unwrap();
        let sub = Subagent {
            id: "s1".into(),
            name: "inner".into(),
            ..Subagent::default()
        };
        for event in [
            started(),
            call("c1"),
            Event::ToolCallEnd {
                tool_call_id: "c1".into(),
            },
            Event::ActivitySnapshot {
                message_id: "a1".into(),
                activity_type: "progress".into(),
                content: serde_json::json!({"toolCallId": "c1", "progress": 1}),
                replace: None,
            },
        ] {
            e.relay(&sub, event, None).await.unwrap();
        }
        drop(e);
        let f = frames(rx).await;
        let inner_start = &f[3];
        assert_eq!(inner_start["subagentRunId"], "s1");
        let fresh = inner_start["toolCallId"].as_str().unwrap();
        assert_ne!(fresh, "c1");
        assert_eq!(f[4]["toolCallId"], fresh);
        assert_eq!(f[5]["content"]["toolCallId"], fresh);
    }

    #[tokio::test]
    async fn an_event_no_client_accepts_is_not_sent_and_the_run_fails() {
        for wire in [Wire::Sse, Wire::Proto] {
            let (tx, mut rx) = mpsc::channel(16);
            let mut e = Emitter::new(tx, true).with_wire(wire);
            e.emit(started()).await.unwrap();
            let huge = Event::StateSnapshot {
                snapshot: serde_json::json!({ "blob": "x".repeat(11 * 1024 * 1024) }),
            };
            assert!(matches!(e.emit(huge).await, Err(EmitError::Violation(_))));
            e.fail("INTERNAL_ERROR", "stopped").await;
            drop(e);
            let mut sizes = Vec::new();
            while let Some(f) = rx.recv().await {
                sizes.push(f.len());
            }
            // RUN_STARTED and RUN_ERROR only, each small.
            assert_eq!(sizes.len(), 2, "{wire:?}");
            assert!(sizes.iter().all(|n| *n < 4096), "{sizes:?}");
        }
    }

    #[tokio::test]
    async fn old_clients_get_downgraded_shapes() {
        let (tx, rx) = mpsc::channel(16);
        let mut e = Emitter::new(tx, false);
        e.emit(started()).await.unwrap();
        e.emit(Event::SubagentError {
            subagent_run_id: "s".into(),
            message: "x".into(),
            code: None,
        })
        .await
        .unwrap();
        e.emit(Event::RunFinished {
            thread_id: "t".into(),
            run_id: "r".into(),
            result: None,
            outcome: Some(Outcome::Success {
                pending_tool_call_ids: Some(vec!["c".into()]),
            }),
            usage: None,
        })
        .await
        .unwrap();
        drop(e);
        let f = frames(rx).await;
        assert_eq!(f.len(), 2);
        assert!(f[1].get("outcome").is_none());
        assert!(f[1]["timestamp"].is_i64());
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_channel_makes_the_run_wait_instead_of_buffering() {
        let (tx, mut rx) = mpsc::channel(2);
        let mut e = Emitter::new(tx, true);
        e.emit(started()).await.unwrap();
        e.emit(Event::TextMessageStart {
            message_id: "m".into(),
            role: None,
            name: None,
        })
        .await
        .unwrap();
        let delta = || Event::TextMessageContent {
            message_id: "m".into(),
            delta: "x".into(),
        };
        // Nobody reads: the third event waits (time is paused, so this is not a race).
        assert!(
            tokio::time::timeout(std::time::Duration::from_secs(3600), e.emit(delta()))
                .await
                .is_err()
        );
        assert!(rx.recv().await.is_some());
        e.emit(delta()).await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_stops_reading_counts_as_gone_after_the_stall_timeout() {
        let (tx, rx) = mpsc::channel(1);
        let stall = std::time::Duration::from_secs(30);
        let mut e = Emitter::new(tx, true).with_stall_timeout(stall);
        e.emit(started()).await.unwrap();
        let begun = tokio::time::Instant::now();
        // The channel is full and nobody reads (time is paused and advances only when idle).
        let ended = e.emit(Event::TextMessageStart {
            message_id: "m".into(),
            role: None,
            name: None,
        });
        assert!(matches!(ended.await, Err(EmitError::Disconnected)));
        assert!(begun.elapsed() >= stall);
        drop(rx);
    }

    #[tokio::test]
    async fn fail_closes_what_is_open_then_errors() {
        let (tx, rx) = mpsc::channel(16);
        let mut e = Emitter::new(tx, true);
        e.emit(started()).await.unwrap();
        e.emit(Event::TextMessageStart {
            message_id: "m".into(),
            role: None,
            name: None,
        })
        .await
        .unwrap();
        e.emit(Event::ToolCallStart {
            tool_call_id: "c".into(),
            tool_call_name: "f".into(),
            parent_message_id: None,
        })
        .await
        .unwrap();
        // A violation is refused and not sent.
        assert!(
            e.emit(Event::TextMessageStart {
                message_id: "m".into(),
                role: None,
                name: None
            })
            .await
            .is_err()
        );
        e.fail("UPSTREAM_ERROR", "boom").await;
        e.fail("AGAIN", "ignored").await;
        drop(e);
        let types: Vec<String> = frames(rx)
            .await
            .iter()
            .map(|f| f["type"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            types,
            [
                "RUN_STARTED",
                "TEXT_MESSAGE_START",
                "TOOL_CALL_START",
                "TEXT_MESSAGE_END",
                "TOOL_CALL_END",
                "RUN_ERROR"
            ]
        );
    }
}
