//! What every request meets before the router: the body-size check that comes before
//! `100 Continue`, the whole-body deadline, and the count of requests in flight that tells
//! when a connection is idle.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::Request;
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::sync::Notify;
use tokio::time::{Instant, Sleep};

use crate::api::ApiError;

/// The requests in flight on one connection; a connection with none is idle.
#[derive(Default)]
pub(crate) struct Activity {
    open: AtomicUsize,
    /// Requests ever started: an idle period that saw one start and end is not idle.
    started: AtomicU64,
    /// Told when the last request in flight ends.
    quiet: Notify,
}

impl Activity {
    fn start(self: &Arc<Self>) -> InFlight {
        self.open.fetch_add(1, Ordering::AcqRel);
        self.started.fetch_add(1, Ordering::AcqRel);
        InFlight(Arc::clone(self))
    }

    /// Resolves once the connection has had no request in flight for `idle`.
    pub(crate) async fn idle_for(&self, idle: Duration) {
        loop {
            if self.open.load(Ordering::Acquire) > 0 {
                // `notify_one` keeps a permit, so an end between the load and here is not lost.
                self.quiet.notified().await;
                continue;
            }
            let seen = self.started.load(Ordering::Acquire);
            tokio::time::sleep(idle).await;
            if self.open.load(Ordering::Acquire) == 0
                && self.started.load(Ordering::Acquire) == seen
            {
                return;
            }
        }
    }
}

/// One request in flight, from its head until its response body is done or dropped.
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0.open.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.quiet.notify_one();
        }
    }
}

/// The router as one connection's hyper service.
#[derive(Clone)]
pub(crate) struct ConnService {
    pub(crate) app: Router,
    pub(crate) activity: Arc<Activity>,
    /// The largest request body accepted.
    pub(crate) max_body_bytes: u64,
    /// How long after its head the whole request body may take.
    pub(crate) body_timeout: Duration,
}

impl hyper::service::Service<Request<Incoming>> for ConnService {
    type Response = Response<Tracked>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Tracked>, Infallible>> + Send>>;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        let in_flight = self.activity.start();
        // hyper sends `100 Continue` when the body is first read: a declared length over the
        // limit is refused before anything reads it.
        if req.body().size_hint().lower() > self.max_body_bytes {
            let resp = ApiError::PayloadTooLarge.into_response();
            return Box::pin(std::future::ready(Ok(track(resp, in_flight))));
        }
        let expired = Arc::new(AtomicBool::new(false));
        let deadline = Instant::now() + self.body_timeout;
        let req = req.map(|body| Deadline {
            body,
            deadline,
            timer: None,
            expired: Arc::clone(&expired),
        });
        // The router is always ready: no `poll_ready` first.
        let routed = tower::Service::call(&mut self.app.clone(), req);
        Box::pin(async move {
            let Ok(resp) = routed.await;
            // The handler saw its body fail; the answer says why.
            let resp = if expired.load(Ordering::Acquire) {
                ApiError::RequestTimeout.into_response()
            } else {
                resp
            };
            Ok(track(resp, in_flight))
        })
    }
}

fn track(resp: Response, in_flight: InFlight) -> Response<Tracked> {
    resp.map(|body| Tracked {
        body,
        _in_flight: in_flight,
    })
}

/// A response body that keeps its request counted as in flight until it is done or dropped.
pub(crate) struct Tracked {
    body: Body,
    _in_flight: InFlight,
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// Why a request body ended early.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BodyError {
    /// The whole body did not arrive within the deadline.
    #[error("the request body did not arrive within the body timeout")]
    Deadline,
    /// The connection failed.
    #[error(transparent)]
    Hyper(#[from] hyper::Error),
}

/// A request body that must end by `deadline` (measured from its head): a client sending a
/// byte now and then cannot keep a request open.
pub(crate) struct Deadline {
    body: Incoming,
    deadline: Instant,
    /// Made when the body first waits for the client.
    timer: Option<Pin<Box<Sleep>>>,
    expired: Arc<AtomicBool>,
}

impl HttpBody for Deadline {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        if this.expired.load(Ordering::Relaxed) {
            return Poll::Ready(Some(Err(BodyError::Deadline)));
        }
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Pending => {}
            Poll::Ready(frame) => return Poll::Ready(frame.map(|f| f.map_err(BodyError::from))),
        }
        let deadline = this.deadline;
        let timer = this
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => {
                this.expired.store(true, Ordering::Release);
                Poll::Ready(Some(Err(BodyError::Deadline)))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
