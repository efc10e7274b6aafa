//! Run event logs: every frame, numbered, kept after the run for replay. One writer per
//! gateway gathers the frames of every run and commits them together (group commit): a
//! transaction every [`FLUSH_EVERY`] at most, whatever the number of runs and tokens, and a run
//! never waits on the database per event.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use crate::store::{LogWrite, RunRecord, Store};

/// Writes waiting for the writer, across all runs; beyond this, runs wait (a slow store slows
/// the runs instead of growing memory).
const BUFFER: usize = 8192;
/// The most writes committed in one transaction.
const BATCH: usize = 4096;
/// How long a write waits for the ones that follow it (followers on other gateways see frames
/// this much later; the live stream is not delayed).
const FLUSH_EVERY: Duration = Duration::from_millis(50);

enum Op {
    Write(LogWrite),
    /// One frame of a run (the hot path: no allocation beyond the frame itself).
    Frame(Arc<str>, u64, String),
    /// Answered once everything queued before it is committed.
    Flushed(oneshot::Sender<()>),
}

/// The gateway's event-log writer.
#[derive(Debug, Clone)]
pub struct LogWriter {
    tx: mpsc::Sender<Op>,
}

impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Op::Write(_) => "Write",
            Op::Frame(..) => "Frame",
            Op::Flushed(_) => "Flushed",
        })
    }
}

impl LogWriter {
    /// Starts the writer on `store`; it stops when every handle is gone.
    pub fn spawn(store: Arc<dyn Store>) -> Self {
        let (tx, mut rx) = mpsc::channel::<Op>(BUFFER);
        tokio::spawn(async move {
            let mut ops = Vec::with_capacity(BATCH);
            while rx.recv_many(&mut ops, BATCH).await > 0 {
                // Someone waits for a commit: no gathering.
                let waited = |ops: &[Op]| ops.iter().any(|o| matches!(o, Op::Flushed(_)));
                let deadline = tokio::time::Instant::now() + FLUSH_EVERY;
                let mut flush = waited(&ops);
                while ops.len() < BATCH && !flush {
                    let seen = ops.len();
                    let want = BATCH - seen;
                    match tokio::time::timeout_at(deadline, rx.recv_many(&mut ops, want)).await {
                        Ok(n) if n > 0 => flush = waited(&ops[seen..]),
                        _ => break,
                    }
                }
                let mut gather = Gather::default();
                let mut waiting = Vec::new();
                for op in ops.drain(..) {
                    match op {
                        Op::Write(w) => gather.push(w),
                        Op::Frame(run_id, seq, json) => gather.frame(run_id, seq, json),
                        Op::Flushed(done) => waiting.push(done),
                    }
                }
                let writes = gather.writes;
                if let Err(e) = store.write_log(&writes).await {
                    tracing::warn!(error = %e, writes = writes.len(), "cannot write run event logs");
                }
                for done in waiting {
                    let _ = done.send(());
                }
            }
        });
        Self { tx }
    }

    /// Records the run (at once: followers and leases look it up) and returns its log. The
    /// run is marked finished (events kept for `keep`) by [`EventLog::finish`].
    pub async fn start(&self, run: RunRecord, keep: Duration) -> EventLog {
        let run_id: Arc<str> = run.run_id.as_str().into();
        let _ = self.tx.send(Op::Write(LogWrite::Start(run))).await;
        let (done, wait) = oneshot::channel();
        if self.tx.send(Op::Flushed(done)).await.is_ok() {
            let _ = wait.await;
        }
        EventLog {
            tx: self.tx.clone(),
            run_id,
            keep,
            finished: false,
        }
    }
}

/// Gathers writes so that each run's frames in the batch become one write (one row), placed
/// where its first frame was: after its start, before its end.
#[derive(Default)]
struct Gather {
    writes: Vec<LogWrite>,
    /// Where each run's frames are in `writes`, by the run id's address (one `Arc` per run).
    frames_at: std::collections::HashMap<usize, usize>,
}

impl Gather {
    fn push(&mut self, w: LogWrite) {
        match w {
            LogWrite::Frames { run_id, frames } => {
                for (seq, json) in frames {
                    self.frame(Arc::clone(&run_id), seq, json);
                }
            }
            other => self.writes.push(other),
        }
    }

    fn frame(&mut self, run_id: Arc<str>, seq: u64, json: String) {
        let key = Arc::as_ptr(&run_id) as *const u8 as usize;
        if let Some(&i) = self.frames_at.get(&key)
            && let Some(LogWrite::Frames { frames, .. }) = self.writes.get_mut(i)
        {
            frames.push((seq, json));
            return;
        }
        self.frames_at.insert(key, self.writes.len());
        self.writes.push(LogWrite::Frames {
            run_id,
            frames: vec![(seq, json)],
        });
    }
}

/// The sending side of one run's event log.
#[derive(Debug)]
pub struct EventLog {
    tx: mpsc::Sender<Op>,
    run_id: Arc<str>,
    keep: Duration,
    finished: bool,
}

impl EventLog {
    /// Queues one frame's JSON.
    pub async fn push(&self, seq: u64, json: String) {
        // The writer only stops when every sender is gone, so this cannot fail while we hold one.
        let _ = self
            .tx
            .send(Op::Frame(Arc::clone(&self.run_id), seq, json))
            .await;
    }

    /// Marks the run finished and waits until that, and every frame before it, is committed.
    pub async fn finish(mut self) {
        self.finished = true;
        let _ = self
            .tx
            .send(Op::Write(LogWrite::Finish {
                run_id: Arc::clone(&self.run_id),
                keep: self.keep,
            }))
            .await;
        let (done, wait) = oneshot::channel();
        if self.tx.send(Op::Flushed(done)).await.is_ok() {
            let _ = wait.await;
        }
    }
}

impl Drop for EventLog {
    /// A run that ends without [`EventLog::finish`] (its task was dropped) is still marked
    /// finished, so followers stop waiting for it.
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let finish = Op::Write(LogWrite::Finish {
            run_id: Arc::clone(&self.run_id),
            keep: self.keep,
        });
        if let Err(mpsc::error::TrySendError::Full(op)) = self.tx.try_send(finish) {
            let tx = self.tx.clone();
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    let _ = tx.send(op).await;
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(run: &Arc<str>, seqs: &[u64]) -> LogWrite {
        LogWrite::Frames {
            run_id: Arc::clone(run),
            frames: seqs.iter().map(|s| (*s, format!("f{s}"))).collect(),
        }
    }

    #[test]
    fn each_runs_frames_become_one_write_between_its_start_and_its_end() {
        let (a, b): (Arc<str>, Arc<str>) = ("a".into(), "b".into());
        let record = |id: &str| RunRecord {
            run_id: id.into(),
            agent_id: "x".into(),
            thread_id: "t".into(),
            finished: false,
            owner: String::new(),
        };
        let mut g = Gather::default();
        g.push(LogWrite::Start(record("a")));
        g.push(frames(&a, &[1]));
        g.push(LogWrite::Start(record("b")));
        g.push(frames(&b, &[1]));
        g.push(frames(&a, &[2]));
        g.push(frames(&b, &[2, 3]));
        g.push(LogWrite::Finish {
            run_id: Arc::clone(&a),
            keep: Duration::ZERO,
        });
        let shape: Vec<String> = g
            .writes
            .iter()
            .map(|w| match w {
                LogWrite::Start(r) => format!("start {}", r.run_id),
                LogWrite::Frames { run_id, frames } => format!(
                    "{run_id} {:?}",
                    frames.iter().map(|(s, _)| *s).collect::<Vec<_>>()
                ),
                LogWrite::Finish { run_id, .. } => format!("finish {run_id}"),
            })
            .collect();
        assert_eq!(
            shape,
            ["start a", "a [1, 2]", "start b", "b [1, 2, 3]", "finish a"]
        );
    }
}
