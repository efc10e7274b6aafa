//! A run's event log: every frame, numbered, written to the store in batches by a background
//! task (the run never waits on the database per event), kept after the run for replay.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::store::{RunRecord, Store};

/// Frames waiting for the writer; beyond this the run waits (a slow store slows the run
/// instead of growing memory).
const BUFFER: usize = 1024;
/// The most frames written in one transaction.
const BATCH: usize = 256;

/// The sending side of a run's event log.
#[derive(Debug, Clone)]
pub struct EventLog {
    tx: mpsc::Sender<(u64, String)>,
}

impl EventLog {
    /// Records the run and starts its writer. The run is marked finished (events kept for
    /// `keep`) once every `EventLog` is dropped and the last frames are written.
    /// The returned handle completes once the run is marked finished.
    pub fn start(
        store: Arc<dyn Store>,
        run: RunRecord,
        keep: Duration,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let (tx, mut rx) = mpsc::channel::<(u64, String)>(BUFFER);
        let writer = tokio::spawn(async move {
            if let Err(e) = store.start_run(&run).await {
                tracing::warn!(run = %run.run_id, error = %e, "cannot record the run; it will not be replayable");
            }
            let mut batch = Vec::with_capacity(BATCH);
            while rx.recv_many(&mut batch, BATCH).await > 0 {
                if let Err(e) = store.append_events(&run.run_id, &batch).await {
                    tracing::warn!(run = %run.run_id, error = %e, "cannot log run events");
                }
                batch.clear();
            }
            if let Err(e) = store.finish_run(&run.run_id, keep).await {
                tracing::warn!(run = %run.run_id, error = %e, "cannot mark the run finished");
            }
        });
        (Self { tx }, writer)
    }

    /// Queues one frame's JSON.
    pub async fn push(&self, seq: u64, json: String) {
        // The writer only stops when every sender is gone, so this cannot fail while we hold one.
        let _ = self.tx.send((seq, json)).await;
    }
}
