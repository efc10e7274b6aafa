//! A streamed run's response body, and what drives the run's loop.
//!
//! While its client reads, a run's loop is polled from its own response body, inside the
//! connection's task: an upstream token wakes that one task, which runs the loop, takes the
//! frames the loop sent and hands them to hyper in the same poll. (A loop in a task of its own
//! cost a second task wake-up per token, and with it the scheduler waking the other worker
//! thread: about one extra context switch per token.)
//!
//! The loop moves to a task of its own, and goes on as it always did, when the body is dropped
//! (the client left: the run is cancelled or detached) or when the body has not polled it for a
//! whole stall interval (a client that stopped reading, an HTTP/2 stream whose window never opens):
//! its emitter then counts the client as gone once the channel stays full.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use axum::body::Bytes;
use futures::Stream;
use tokio::sync::mpsc;
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;

use crate::runs::RunManager;

/// A run's loop, from registration to release.
pub(crate) type RunFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A deadline far enough away to stand for "never" (an `Instant` plus `Duration::MAX`
/// overflows).
const FAR: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// The most bytes of waiting frames joined into one write.
const COALESCE_BYTES: usize = 64 * 1024;

/// A run's loop and who drives it.
pub(crate) struct RunDriver {
    /// The loop while the body drives it; empty once it ended or moved to its own task.
    slot: Mutex<Held>,
    /// How many times the body has polled it (the watchdog sees whether this moves; a
    /// counter costs the token path no clock read).
    polls: AtomicU64,
}

/// What the body holds while it drives the loop.
struct Held {
    run: Option<RunFuture>,
    /// The body's task, woken when the loop moves away: while the body drives the loop it waits
    /// on the loop's own wakers, which the loop's new task takes over.
    body: Option<Waker>,
}

impl RunDriver {
    /// Drives `run` from the body, with a watchdog that moves it to its own task when the body
    /// stops polling it for `stall`; the watchdog ends with the run (`cancel`).
    pub(crate) fn new(run: RunFuture, stall: Duration, cancel: CancellationToken) -> Arc<Self> {
        let driver = Arc::new(Self {
            slot: Mutex::new(Held {
                run: Some(run),
                body: None,
            }),
            polls: AtomicU64::new(0),
        });
        tokio::spawn(watch(Arc::clone(&driver), stall, cancel));
        driver
    }

    fn slot(&self) -> MutexGuard<'_, Held> {
        // A panic while polling the loop ends the connection's task, never in this lock's
        // holder otherwise; the slot stays usable.
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Polls the loop; false once it ended or is driven elsewhere.
    fn drive(&self, cx: &mut Context<'_>) -> bool {
        self.polls.fetch_add(1, Ordering::Relaxed);
        let mut held = self.slot();
        let Some(run) = held.run.as_mut() else {
            return false;
        };
        if run.as_mut().poll(cx).is_ready() {
            held.run = None;
            return false;
        }
        if !held.body.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            held.body = Some(cx.waker().clone());
        }
        true
    }

    /// Moves the loop, if the body still holds it, to a task of its own.
    fn release(&self) {
        let (run, body) = {
            let mut held = self.slot();
            (held.run.take(), held.body.take())
        };
        if let Some(run) = run
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            rt.spawn(run);
        }
        // The body now waits on its channel instead (its next poll finds the loop gone).
        if let Some(body) = body {
            body.wake();
        }
    }
}

/// Moves the loop to its own task once the body has not polled it for a whole `stall`
/// interval (so after one to two of them).
async fn watch(driver: Arc<RunDriver>, stall: Duration, cancel: CancellationToken) {
    let mut seen = driver.polls.load(Ordering::Relaxed);
    let mut ended = false;
    loop {
        // Whether a whole interval passed (the run's end cuts one short, to look at once).
        let whole = if ended {
            tokio::time::sleep(stall).await;
            true
        } else {
            tokio::select! {
                () = tokio::time::sleep(stall) => true,
                () = cancel.cancelled() => {
                    ended = true;
                    false
                }
            }
        };
        if driver.slot().run.is_none() {
            return;
        }
        let polls = driver.polls.load(Ordering::Relaxed);
        if whole && polls == seen {
            tracing::info!(
                stall_secs = stall.as_secs(),
                "the client stopped taking its stream; the run goes on in its own task"
            );
            driver.release();
            return;
        }
        seen = polls;
    }
}

/// Cancels the run when the response body is dropped (the client left), unless the run may
/// detach and go on (followed again through its event log).
pub(crate) struct Disconnect {
    pub cancel: CancellationToken,
    pub detach: Option<(Arc<RunManager>, String, String)>,
    /// How long a detached run may go on without its client.
    pub detached_for: Duration,
}

impl Drop for Disconnect {
    fn drop(&mut self) {
        if let Some((runs, thread, run)) = &self.detach
            && !self.cancel.is_cancelled()
            && runs.try_detach(thread, run)
        {
            tracing::info!(%thread, %run, "client left; the run goes on detached");
            let (cancel, limit) = (self.cancel.clone(), self.detached_for);
            tokio::spawn(async move {
                tokio::select! {
                    _ = tokio::time::sleep(limit) => cancel.cancel(),
                    _ = cancel.cancelled() => {}
                }
            });
            return;
        }
        self.cancel.cancel();
    }
}

/// The response body: frames from the run, a keep-alive frame (SSE's comment) after each quiet
/// interval if the encoding has one.
/// Dropping it (client gone) hands the loop to its own task and drops the [`Disconnect`]
/// guard (which cancels or detaches the run).
pub(crate) struct SseBody {
    rx: mpsc::Receiver<Bytes>,
    /// The loop this body drives; `None` once it ended or moved to its own task.
    driver: Option<Arc<RunDriver>>,
    /// One timer for the stream's life, moved on only when it fires (arming a timeout per
    /// frame cost a timer-wheel insert and removal per token).
    quiet: Pin<Box<Sleep>>,
    last: Instant,
    /// The quiet interval and the frame sent after it; none for an encoding without one.
    keepalive: Option<(Duration, Bytes)>,
    _disconnect: Disconnect,
}

impl SseBody {
    /// The body of a run sending into `rx`, driving its loop through `driver` if given, with
    /// a keep-alive frame after each quiet interval if `keepalive` gives one.
    pub(crate) fn new(
        rx: mpsc::Receiver<Bytes>,
        driver: Option<Arc<RunDriver>>,
        keepalive: Option<(Duration, Bytes)>,
        disconnect: Disconnect,
    ) -> Self {
        // Without keep-alives the timer is never polled.
        let first = keepalive.as_ref().map_or(Duration::MAX, |(d, _)| *d);
        Self {
            rx,
            driver,
            quiet: Box::pin(tokio::time::sleep_until(Instant::now() + first.min(FAR))),
            last: Instant::now(),
            keepalive,
            _disconnect: disconnect,
        }
    }

    /// The next frame of the run, if one is there.
    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        if let Some(driver) = &self.driver
            && !driver.drive(cx)
        {
            self.driver = None;
        }
        if self.driver.is_some() {
            // The loop only sends while polled, just above: nothing to wait on here.
            return match self.rx.try_recv() {
                Ok(frame) => Poll::Ready(Some(frame)),
                Err(mpsc::error::TryRecvError::Empty) => Poll::Pending,
                Err(mpsc::error::TryRecvError::Disconnected) => Poll::Ready(None),
            };
        }
        self.rx.poll_recv(cx)
    }
}

impl Drop for SseBody {
    fn drop(&mut self) {
        if let Some(driver) = self.driver.take() {
            driver.release();
        }
    }
}

impl Stream for SseBody {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            match this.poll_frame(cx) {
                Poll::Ready(Some(frame)) => {
                    this.last = Instant::now();
                    return Poll::Ready(Some(Ok(join_waiting(frame, &mut this.rx))));
                }
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => {}
            }
            let Some((every, frame)) = &this.keepalive else {
                return Poll::Pending;
            };
            if this.quiet.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            let due = this.last + *every;
            if Instant::now() < due {
                // Frames went out since the timer was set: wait the rest.
                this.quiet.as_mut().reset(due);
                continue;
            }
            this.last = Instant::now();
            this.quiet.as_mut().reset(this.last + *every);
            return Poll::Ready(Some(Ok(frame.clone())));
        }
    }
}

/// `frame` and the frames already waiting behind it, as one write (one syscall under load).
fn join_waiting(frame: Bytes, rx: &mut mpsc::Receiver<Bytes>) -> Bytes {
    let Ok(next) = rx.try_recv() else {
        return frame;
    };
    let mut out = bytes::BytesMut::with_capacity(frame.len() * 4 + next.len());
    out.extend_from_slice(&frame);
    out.extend_from_slice(&next);
    while out.len() < COALESCE_BYTES {
        match rx.try_recv() {
            Ok(more) => out.extend_from_slice(&more),
            Err(_) => break,
        }
    }
    out.freeze()
}
