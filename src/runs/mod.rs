//! Active runs: one per thread, each with a cancellation token, removed when the run ends.

pub mod emitter;
pub mod eventlog;
pub mod limits;
pub mod nested;
pub mod patch;
pub mod transcript;
pub mod usage;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use dashmap::DashMap;
use dashmap::mapref::entry::Entry;
use tokio_util::sync::CancellationToken;

pub use emitter::{EmitError, Emitter};

/// The run already active on a thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadBusy {
    /// The active run's id.
    pub run_id: String,
}

#[derive(Debug)]
struct ActiveRun {
    run_id: String,
    cancel: CancellationToken,
    started: Instant,
    /// Set when its client left and the run goes on detached.
    detached: Arc<AtomicBool>,
    /// Set once its terminal event is sent: only clean-up (saving, releasing) is left.
    closing: Arc<AtomicBool>,
}

/// The registry of active runs, keyed by thread id. Guards are never held across `.await`:
/// every method does one map operation and returns.
#[derive(Debug, Default)]
pub struct RunManager {
    /// Active runs by thread id.
    active: DashMap<String, ActiveRun>,
    /// How many active runs are detached from their clients.
    detached: AtomicUsize,
    /// The most detached runs allowed at once.
    max_detached: usize,
    /// Raised when the server starts shutting down: new runs are refused and runs cancelled
    /// from then on end with `SHUTDOWN`.
    shutting_down: Arc<AtomicBool>,
}

impl RunManager {
    /// An empty registry that detaches no runs.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// An empty registry allowing `max_detached` runs to outlive their clients.
    pub fn with_detach_limit(max_detached: usize) -> Arc<Self> {
        Arc::new(Self {
            max_detached,
            ..Self::default()
        })
    }

    /// Lets the run of `thread` go on without its client, if under the limit.
    pub fn try_detach(&self, thread_id: &str, run_id: &str) -> bool {
        let Some(run) = self.active.get(thread_id) else {
            return false;
        };
        if run.run_id != run_id {
            return false;
        }
        let flag = Arc::clone(&run.detached);
        drop(run);
        let admitted = self
            .detached
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < self.max_detached).then_some(n + 1)
            })
            .is_ok();
        if admitted {
            flag.store(true, Ordering::SeqCst);
        }
        admitted
    }

    /// Whether `run_id` is the active run of `thread_id` here.
    pub fn is_running(&self, thread_id: &str, run_id: &str) -> bool {
        self.active
            .get(thread_id)
            .is_some_and(|r| r.run_id == run_id)
    }

    /// Whether a run of `thread_id` is active here.
    pub fn thread_busy(&self, thread_id: &str) -> bool {
        self.active.contains_key(thread_id)
    }

    /// How many runs are detached now.
    pub fn detached_count(&self) -> usize {
        self.detached.load(Ordering::SeqCst)
    }

    /// Registers a run; refused while another run on the thread is active. Dropping the
    /// returned guard unregisters it.
    pub fn begin(
        self: &Arc<Self>,
        thread_id: &str,
        run_id: &str,
        cancel: CancellationToken,
    ) -> Result<RunGuard, ThreadBusy> {
        match self.active.entry(thread_id.to_string()) {
            Entry::Occupied(e) => Err(ThreadBusy {
                run_id: e.get().run_id.clone(),
            }),
            Entry::Vacant(e) => {
                let closing = Arc::new(AtomicBool::new(false));
                e.insert(ActiveRun {
                    run_id: run_id.to_string(),
                    cancel: cancel.clone(),
                    started: Instant::now(),
                    detached: Arc::new(AtomicBool::new(false)),
                    closing: Arc::clone(&closing),
                });
                Ok(RunGuard {
                    manager: Arc::clone(self),
                    thread_id: thread_id.to_string(),
                    run_id: run_id.to_string(),
                    cancel,
                    closing,
                })
            }
        }
    }

    /// [`RunManager::begin`], but a thread whose run has already sent its terminal event (and
    /// is only saving and releasing) is waited for, up to `wait`: a client starting its next
    /// run right after `RUN_FINISHED` must not be told the thread is busy.
    pub async fn begin_when_free(
        self: &Arc<Self>,
        thread_id: &str,
        run_id: &str,
        cancel: CancellationToken,
        wait: std::time::Duration,
    ) -> Result<RunGuard, ThreadBusy> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            match self.begin(thread_id, run_id, cancel.clone()) {
                Ok(g) => return Ok(g),
                Err(busy) => {
                    let closing = self
                        .active
                        .get(thread_id)
                        .map(|r| r.closing.load(Ordering::SeqCst));
                    if closing == Some(false) || tokio::time::Instant::now() >= deadline {
                        return Err(busy);
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
            }
        }
    }

    /// Cancels the active run of a thread; returns whether there was one.
    pub fn cancel(&self, thread_id: &str) -> bool {
        let token = self.active.get(thread_id).map(|r| r.cancel.clone());
        match token {
            Some(t) => {
                t.cancel();
                true
            }
            None => false,
        }
    }

    /// Cancels `run_id` if it is the active run of `thread_id`; returns whether it was.
    pub fn cancel_run(&self, thread_id: &str, run_id: &str) -> bool {
        let token = self
            .active
            .get(thread_id)
            .filter(|r| r.run_id == run_id)
            .map(|r| r.cancel.clone());
        token.map(|t| t.cancel()).is_some()
    }

    /// Cancels every active run (shutdown).
    pub fn cancel_all(&self) {
        let tokens: Vec<CancellationToken> = self.active.iter().map(|r| r.cancel.clone()).collect();
        for t in tokens {
            t.cancel();
        }
    }

    /// Starts the shutdown: no new runs; cancellations from now on are reported as `SHUTDOWN`.
    pub fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
    }

    /// Whether the server is shutting down.
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }

    /// The flag [`RunManager::begin_shutdown`] raises, for emitters.
    pub fn shutdown_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.shutting_down)
    }

    /// Waits until no run is active or `grace` has passed; `true` when all ended.
    pub async fn drain(&self, grace: std::time::Duration) -> bool {
        let deadline = tokio::time::Instant::now() + grace;
        while self.active_count() > 0 {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        true
    }

    /// How many runs are active.
    pub fn active_count(&self) -> usize {
        self.active.len()
    }

    /// Seconds the oldest active run has been going, for health output.
    pub fn oldest_run_secs(&self) -> Option<u64> {
        self.active
            .iter()
            .map(|r| r.started.elapsed().as_secs())
            .max()
    }
}

/// Keeps a run registered while alive.
#[derive(Debug)]
pub struct RunGuard {
    manager: Arc<RunManager>,
    thread_id: String,
    run_id: String,
    /// The run's cancellation token.
    pub cancel: CancellationToken,
    /// Set by the emitter when the terminal event has gone out.
    pub closing: Arc<AtomicBool>,
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        // The run is over: anything still waiting on its token (a detached-run timer) ends.
        self.cancel.cancel();
        let run_id = &self.run_id;
        let removed = self
            .manager
            .active
            .remove_if(&self.thread_id, |_, r| &r.run_id == run_id);
        if let Some((_, run)) = removed
            && run.detached.load(Ordering::SeqCst)
        {
            self.manager.detached.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_run_per_thread_and_cleanup_on_drop() {
        let m = RunManager::new();
        let g = m.begin("t", "r1", CancellationToken::new()).unwrap();
        assert_eq!(
            m.begin("t", "r2", CancellationToken::new())
                .unwrap_err()
                .run_id,
            "r1"
        );
        let other = m.begin("u", "r3", CancellationToken::new()).unwrap();
        assert_eq!(m.active_count(), 2);
        assert!(m.cancel("t"));
        assert!(g.cancel.is_cancelled());
        drop(g);
        assert_eq!(m.active_count(), 1);
        assert!(m.begin("t", "r4", CancellationToken::new()).is_ok());
        drop(other);
        assert!(!m.cancel("u"));
    }

    #[test]
    fn cancel_run_names_the_run_not_just_the_thread() {
        let m = RunManager::new();
        let g = m.begin("t", "r1", CancellationToken::new()).unwrap();
        assert!(
            !m.cancel_run("t", "r0"),
            "a run that is no longer the thread's"
        );
        assert!(!g.cancel.is_cancelled());
        assert!(m.cancel_run("t", "r1"));
        assert!(g.cancel.is_cancelled());
        drop(g);
        assert!(!m.cancel_run("t", "r1"));
    }
}
