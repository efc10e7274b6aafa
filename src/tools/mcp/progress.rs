//! MCP progress notifications as AG-UI `progress` activities.
//!
//! A call that runs with a side channel into its run gets a fresh, unguessable progress token
//! of the gateway's own ([`Routes::open`]); its route lives exactly as long as the call. The
//! server's `notifications/progress` are picked up by [`Tapped`], a wrapper around the session's
//! transport, as the session reads them: in order, before the call's response (rmcp hands
//! notifications to the client handler on spawned tasks, which may run after the response has
//! been delivered and in any order). Taking one costs a map lookup and a short lock: the
//! latest state is kept and the call is woken, so a server flooding notifications never holds
//! up the session's reader; the call turns the state into events at its own pace ([`watch`]),
//! coalescing whatever arrived meanwhile: an `ACTIVITY_SNAPSHOT` first, then `ACTIVITY_DELTA`
//! patches.
//!
//! rmcp puts a progress token of its own on every request, and the envelope's token wins over
//! the one in the params when the request is written; [`Tapped`] therefore copies the call's
//! own token into the envelope on the way out, so the server sees the token that was routed
//! before the request left.

use std::borrow::Cow;
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{
    ClientRequest, GetMeta, JsonRpcMessage, NumberOrString, ProgressNotificationParam,
    ProgressToken, RequestParamsMeta, ServerNotification,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::Link;
use crate::protocol::events::Event;
use crate::tools::ToolContext;

/// Longest progress message passed on (characters): it is a status line, not content.
const MAX_MESSAGE_CHARS: usize = 200;
/// Least time between two progress events of one call; what arrives meanwhile is coalesced.
const MIN_GAP: Duration = Duration::from_millis(100);
/// The activity type of progress activities.
const ACTIVITY_TYPE: &str = "progress";

/// The progress routes of one server's calls, by token.
#[derive(Default)]
pub(super) struct Routes {
    open: Mutex<HashMap<Arc<str>, Arc<Route>>>,
}

/// Where one call's progress goes.
#[derive(Default)]
pub(super) struct Route {
    state: Mutex<Option<Progress>>,
    changed: Notify,
}

/// The latest progress a server reported for a call.
#[derive(Debug, Clone, PartialEq)]
struct Progress {
    progress: f64,
    total: Option<f64>,
    message: Option<String>,
}

/// An open route; dropping it (the call ended, was cancelled or timed out) closes it, and
/// later notifications with its token are ignored.
pub(super) struct RouteGuard<'a> {
    routes: &'a Routes,
    token: Arc<str>,
    route: Arc<Route>,
}

impl Drop for RouteGuard<'_> {
    fn drop(&mut self) {
        lock(&self.routes.open).remove(&self.token);
    }
}

impl RouteGuard<'_> {
    /// The token to send with the call.
    pub(super) fn token(&self) -> ProgressToken {
        ProgressToken(NumberOrString::String(Arc::clone(&self.token)))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Routes {
    /// Opens a route under a fresh token.
    pub(super) fn open(&self) -> RouteGuard<'_> {
        let token: Arc<str> = crate::protocol::new_id("agui-progress").into();
        let route = Arc::new(Route::default());
        lock(&self.open).insert(Arc::clone(&token), Arc::clone(&route));
        RouteGuard {
            routes: self,
            token,
            route,
        }
    }

    /// Takes one notification: kept as its call's latest state when the token is one of an
    /// open route's and the progress did not go backwards (rmcp does not promise order beyond
    /// the transport's, and a server's regressions would only make the bar jump).
    fn deliver(&self, p: &ProgressNotificationParam, redact: impl Fn(&str) -> String) {
        let NumberOrString::String(token) = &p.progress_token.0 else {
            return;
        };
        let Some(route) = lock(&self.open).get(token).cloned() else {
            return;
        };
        if !p.progress.is_finite() {
            return;
        }
        let next = Progress {
            progress: p.progress,
            total: p.total.filter(|t| t.is_finite()),
            message: p
                .message
                .as_deref()
                .map(|m| {
                    redact(m)
                        .chars()
                        .take(MAX_MESSAGE_CHARS)
                        .collect::<String>()
                })
                .filter(|m| !m.trim().is_empty()),
        };
        {
            let mut state = lock(&route.state);
            match &*state {
                Some(s) if s.progress > next.progress => return,
                Some(s) if *s == next => return,
                _ => {}
            }
            // A total, once known, stays known.
            let total = next.total.or(state.as_ref().and_then(|s| s.total));
            *state = Some(Progress { total, ..next });
        }
        route.changed.notify_one();
    }
}

/// A number as JSON: whole numbers as integers ("3", not "3.0").
fn number(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 9.0e15 {
        json!(x as i64)
    } else {
        json!(x)
    }
}

/// One call's progress activity: what was sent so far, so the next event is a patch.
pub(super) struct Board {
    message_id: String,
    tool_call_id: String,
    tool: String,
    sent: Option<Progress>,
}

impl Board {
    /// The activity of call `tool_call_id` of `tool`.
    pub(super) fn new(tool_call_id: &str, tool: &str) -> Self {
        Self {
            message_id: crate::protocol::new_id("progress"),
            tool_call_id: tool_call_id.to_string(),
            tool: tool.to_string(),
            sent: None,
        }
    }

    fn content(&self, p: &Progress) -> Value {
        let mut c = json!({
            "toolCallId": self.tool_call_id,
            "tool": self.tool,
            "progress": number(p.progress),
        });
        if let Some(t) = p.total {
            c["total"] = number(t);
        }
        if let Some(m) = &p.message {
            c["message"] = json!(m);
        }
        c
    }

    /// The event that brings the client from what was sent to `now`, if anything changed.
    fn next(&mut self, now: &Progress) -> Option<Event> {
        let event = match &self.sent {
            None => Event::ActivitySnapshot {
                message_id: self.message_id.clone(),
                activity_type: ACTIVITY_TYPE.into(),
                content: self.content(now),
                replace: None,
            },
            Some(before) if before == now => return None,
            Some(before) => {
                let mut patch = Vec::new();
                if before.progress != now.progress {
                    patch.push(json!({"op": "replace", "path": "/progress", "value": number(now.progress)}));
                }
                match (before.total, now.total) {
                    (None, Some(t)) => {
                        patch.push(json!({"op": "add", "path": "/total", "value": number(t)}))
                    }
                    (Some(a), Some(b)) if a != b => {
                        patch.push(json!({"op": "replace", "path": "/total", "value": number(b)}))
                    }
                    _ => {}
                }
                match (&before.message, &now.message) {
                    (None, Some(m)) => {
                        patch.push(json!({"op": "add", "path": "/message", "value": m}))
                    }
                    (Some(a), Some(b)) if a != b => {
                        patch.push(json!({"op": "replace", "path": "/message", "value": b}))
                    }
                    (Some(_), None) => patch.push(json!({"op": "remove", "path": "/message"})),
                    _ => {}
                }
                if patch.is_empty() {
                    return None;
                }
                Event::ActivityDelta {
                    message_id: self.message_id.clone(),
                    activity_type: ACTIVITY_TYPE.into(),
                    patch,
                }
            }
        };
        self.sent = Some(now.clone());
        Some(event)
    }
}

/// Runs `call`, streaming its route's progress into `side` as it comes (at most one event per
/// [`MIN_GAP`]) and whatever is left once it returns, so the activity is complete before the
/// call's result. `None` when `cancel` fired first.
pub(super) async fn watch<F: Future>(
    call: F,
    route: &RouteGuard<'_>,
    board: &mut Board,
    ctx: &ToolContext,
) -> Option<F::Output> {
    let cancel = &ctx.cancel;
    tokio::pin!(call);
    let route = &route.route;
    let mut dirty = false;
    let mut gate: Option<std::pin::Pin<Box<tokio::time::Sleep>>> = None;
    let mut live = true;
    let out = loop {
        tokio::select! {
            biased;
            _ = cancel.cancelled() => return None,
            out = &mut call => break out,
            _ = route.changed.notified() => dirty = true,
            _ = async { if let Some(g) = gate.as_mut() { g.as_mut().await } }, if gate.is_some() => {
                gate = None;
            }
        }
        if dirty && gate.is_none() && live {
            dirty = false;
            let now = lock(&route.state).clone();
            if let Some(ev) = now.and_then(|p| board.next(&p)) {
                live = ctx.emit(ev).await;
                if cancel.is_cancelled() {
                    return None;
                }
                gate = Some(Box::pin(tokio::time::sleep(MIN_GAP)));
            }
        }
    };
    // Everything the server reported before it answered has been taken by now (the session
    // reads the notifications before the response).
    let last = lock(&route.state).clone();
    if live
        && let Some(ev) = last.and_then(|p| board.next(&p))
        && !ctx.emit(ev).await
        && cancel.is_cancelled()
    {
        return None;
    }
    Some(out)
}

/// A session transport that takes progress notifications for [`Routes`] as they are read and
/// puts a call's own progress token on the wire.
pub(super) struct Tapped<T> {
    inner: T,
    link: Arc<Link>,
}

impl<T> Tapped<T> {
    pub(super) fn new(inner: T, link: Arc<Link>) -> Self {
        Self { inner, link }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Tapped<T> {
    type Error = T::Error;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn send(
        &mut self,
        mut item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let JsonRpcMessage::Request(r) = &mut item
            && let ClientRequest::CallToolRequest(call) = &mut r.request
            && let Some(token) = call.params.progress_token()
        {
            r.request.get_meta_mut().set_progress_token(token);
        }
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let msg = self.inner.receive().await;
        if let Some(JsonRpcMessage::Notification(n)) = &msg
            && let ServerNotification::ProgressNotification(p) = &n.notification
        {
            let link = &self.link;
            link.progress.deliver(&p.params, |m| link.redactor.clean(m));
        }
        msg
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(
        token: &ProgressToken,
        progress: f64,
        total: Option<f64>,
        message: Option<&str>,
    ) -> ProgressNotificationParam {
        let mut p = ProgressNotificationParam::new(token.clone(), progress);
        p.total = total;
        p.message = message.map(str::to_string);
        p
    }

    fn state(g: &RouteGuard<'_>) -> Option<Progress> {
        lock(&g.route.state).clone()
    }

    #[test]
    fn only_open_routes_take_progress_and_it_never_goes_back() {
        let routes = Routes::default();
        let same = |m: &str| m.to_string();
        let stranger = ProgressToken(NumberOrString::Number(1));
        routes.deliver(&note(&stranger, 1.0, None, None), same);
        let guard = routes.open();
        let token = guard.token();
        routes.deliver(&note(&token, 2.0, Some(10.0), Some("two")), same);
        routes.deliver(&note(&token, 1.0, None, Some("one")), same);
        assert_eq!(
            state(&guard),
            Some(Progress {
                progress: 2.0,
                total: Some(10.0),
                message: Some("two".into())
            })
        );
        // The total stays known; the message is the latest one (none).
        routes.deliver(&note(&token, 3.0, None, None), same);
        assert_eq!(
            state(&guard),
            Some(Progress {
                progress: 3.0,
                total: Some(10.0),
                message: None
            })
        );
        routes.deliver(&note(&token, f64::NAN, None, None), same);
        assert_eq!(state(&guard).unwrap().progress, 3.0);
        let long = "x".repeat(1000);
        routes.deliver(&note(&token, 4.0, None, Some(&long)), |m| {
            m.replace('x', "y")
        });
        let m = state(&guard).unwrap().message.unwrap();
        assert_eq!(m, "y".repeat(MAX_MESSAGE_CHARS));
        let route = Arc::clone(&guard.route);
        drop(guard);
        assert!(lock(&routes.open).is_empty());
        routes.deliver(&note(&token, 9.0, None, None), same);
        assert_eq!(lock(&route.state).as_ref().unwrap().progress, 4.0);
    }

    #[test]
    fn the_board_sends_a_snapshot_then_patches() {
        let mut b = Board::new("call_1", "count");
        let p = |progress: f64, total: Option<f64>, message: Option<&str>| Progress {
            progress,
            total,
            message: message.map(str::to_string),
        };
        let Some(Event::ActivitySnapshot {
            content,
            activity_type,
            ..
        }) = b.next(&p(1.0, None, Some("a")))
        else {
            panic!("a snapshot first")
        };
        assert_eq!(activity_type, "progress");
        assert_eq!(
            content,
            json!({"toolCallId": "call_1", "tool": "count", "progress": 1, "message": "a"})
        );
        assert!(b.next(&p(1.0, None, Some("a"))).is_none());
        let Some(Event::ActivityDelta { patch, .. }) = b.next(&p(1.5, Some(3.0), None)) else {
            panic!("then a delta")
        };
        assert_eq!(
            patch,
            [
                json!({"op": "replace", "path": "/progress", "value": 1.5}),
                json!({"op": "add", "path": "/total", "value": 3}),
                json!({"op": "remove", "path": "/message"}),
            ]
        );
    }
}
