//! Active runs: one per thread, each with a cancellation token, removed when the run ends.

pub mod emitter;
pub mod transcript;

use std::sync::Arc;
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
}

/// The registry of active runs, keyed by thread id. Guards are never held across `.await`:
/// every method does one map operation and returns.
#[derive(Debug, Default)]
pub struct RunManager {
    /// Active runs by thread id.
    active: DashMap<String, ActiveRun>,
}

impl RunManager {
    /// An empty registry.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
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
                e.insert(ActiveRun {
                    run_id: run_id.to_string(),
                    cancel: cancel.clone(),
                    started: Instant::now(),
                });
                Ok(RunGuard {
                    manager: Arc::clone(self),
                    thread_id: thread_id.to_string(),
                    run_id: run_id.to_string(),
                    cancel,
                })
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

    /// Cancels every active run (shutdown).
    pub fn cancel_all(&self) {
        let tokens: Vec<CancellationToken> = self.active.iter().map(|r| r.cancel.clone()).collect();
        for t in tokens {
            t.cancel();
        }
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
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        let run_id = &self.run_id;
        self.manager
            .active
            .remove_if(&self.thread_id, |_, r| &r.run_id == run_id);
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
}
