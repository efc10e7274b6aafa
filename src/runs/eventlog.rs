//! Run event logs: every frame, numbered, kept after the run for replay.
//!
//! A frame costs the log one line of text appended to its run's pending chunk: no channel
//! send, no allocation of its own, no task woken. One writer per gateway takes the chunks and
//! commits them together: a run's chunk is taken once it holds [`CHUNK_BYTES`] or its oldest
//! frame has waited [`MAX_LAG`], and at the run's end (its first frames at once, so that
//! the start of a run is never only in memory). At paced rates (tens of tokens a
//! second) that is about one row per run per second instead of one per token. Until a chunk is
//! committed its frames are answered from memory ([`LogWriter::frames_after`]), so followers
//! on this gateway see every frame at once; followers on other gateways sharing the store see
//! them up to [`MAX_LAG`] later.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, mpsc, oneshot};

use crate::store::{Chunk, LogWrite, RunRecord, Store, StoreError};

/// Starts, finishes and commit waits queued for the writer; beyond this, senders wait.
const BUFFER: usize = 1024;
/// The most of them handled in one transaction.
const BATCH: usize = 1024;
/// How often the writer looks for chunks to take while runs are logging.
const TICK: Duration = Duration::from_millis(50);
/// A chunk this large is taken at the next tick (about two SQLite pages).
const CHUNK_BYTES: usize = 8 * 1024;
/// The longest a frame waits in memory before its chunk is taken.
const MAX_LAG: Duration = Duration::from_secs(1);
/// A run whose uncommitted frames pass this waits for the writer (a slow store slows the runs
/// instead of growing memory).
const MAX_PENDING: usize = 1024 * 1024;

enum Op {
    Write(LogWrite),
    /// Answered once everything queued before it is committed.
    Flushed(oneshot::Sender<()>),
}

/// One run's frames not yet committed.
#[derive(Debug)]
struct RunBuf {
    /// Frames not yet taken by the writer.
    pending: Chunk,
    /// When the oldest of them was appended.
    since: Option<Instant>,
    /// Chunks taken by the writer and not yet committed, oldest first.
    inflight: VecDeque<Arc<Chunk>>,
    /// Whether a chunk was taken yet: the first one is taken at the next tick, so that a
    /// follower elsewhere (or after a crash) sees at once that the run began.
    begun: bool,
}

impl RunBuf {
    fn uncommitted_bytes(&self) -> usize {
        self.pending.text.len() + self.inflight.iter().map(|c| c.text.len()).sum::<usize>()
    }

    /// Moves the pending frames into a chunk of their own, now in flight.
    fn take(&mut self) -> Arc<Chunk> {
        let capacity = self.pending.text.len().min(CHUNK_BYTES + 1024);
        let next = Chunk {
            text: String::with_capacity(capacity),
            ..Chunk::new(Arc::clone(&self.pending.run_id))
        };
        let chunk = Arc::new(std::mem::replace(&mut self.pending, next));
        self.since = None;
        self.begun = true;
        self.inflight.push_back(Arc::clone(&chunk));
        chunk
    }
}

type Buf = Arc<Mutex<RunBuf>>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing panics while holding these locks; a poisoned one still holds consistent data.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What the writer and the runs share.
#[derive(Debug, Default)]
struct Shared {
    /// Every run logging here, by run id.
    runs: Mutex<HashMap<Arc<str>, Buf>>,
    /// Raised after every commit (runs over [`MAX_PENDING`] wait for it).
    committed: Notify,
}

impl Shared {
    fn buf(&self, run_id: &str) -> Option<Buf> {
        lock(&self.runs).get(run_id).cloned()
    }

    /// Takes the chunks that are due (large enough or old enough) into `writes`.
    fn take_due(&self, now: Instant, writes: &mut Vec<LogWrite>) {
        for buf in lock(&self.runs).values() {
            let mut b = lock(buf);
            let due = !b.begun
                || b.pending.text.len() >= CHUNK_BYTES
                || b.since.is_some_and(|t| now.duration_since(t) >= MAX_LAG);
            if due && !b.pending.is_empty() {
                writes.push(LogWrite::Frames(b.take()));
            }
        }
    }

    /// Takes every pending frame of `run_id`.
    fn take_all(&self, run_id: &str, writes: &mut Vec<LogWrite>) {
        if let Some(buf) = self.buf(run_id) {
            let mut b = lock(&buf);
            if !b.pending.is_empty() {
                writes.push(LogWrite::Frames(b.take()));
            }
        }
    }

    /// Forgets the chunks of `writes` (now in the store) and the runs that `ended`.
    fn committed(&self, writes: &[LogWrite], ended: &[(Arc<str>, Buf)]) {
        for w in writes {
            if let LogWrite::Frames(chunk) = w
                && let Some(buf) = self.buf(&chunk.run_id)
            {
                lock(&buf).inflight.retain(|c| !Arc::ptr_eq(c, chunk));
            }
        }
        let mut runs = lock(&self.runs);
        for (id, buf) in ended {
            if runs.get(id).is_some_and(|b| Arc::ptr_eq(b, buf)) {
                runs.remove(id);
            }
        }
        drop(runs);
        self.committed.notify_waiters();
    }
}

/// The gateway's event-log writer.
#[derive(Debug, Clone)]
pub struct LogWriter {
    tx: mpsc::Sender<Op>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Op::Write(_) => "Write",
            Op::Flushed(_) => "Flushed",
        })
    }
}

impl LogWriter {
    /// Starts the writer on `store`; it stops when every handle is gone.
    pub fn spawn(store: Arc<dyn Store>) -> Self {
        let (tx, mut rx) = mpsc::channel::<Op>(BUFFER);
        let shared = Arc::new(Shared::default());
        let writer = Arc::clone(&shared);
        tokio::spawn(async move {
            let shared = writer;
            let mut ops = Vec::with_capacity(BATCH);
            let mut next_tick = tokio::time::Instant::now() + TICK;
            loop {
                let logging = !lock(&shared.runs).is_empty();
                let open = if logging {
                    match tokio::time::timeout_at(next_tick, rx.recv_many(&mut ops, BATCH)).await {
                        Ok(n) => n > 0,
                        Err(_) => true,
                    }
                } else {
                    rx.recv_many(&mut ops, BATCH).await > 0
                };
                let now = tokio::time::Instant::now();
                let mut writes = Vec::new();
                if now >= next_tick || !open {
                    next_tick = now + TICK;
                    shared.take_due(now.into_std(), &mut writes);
                }
                let mut waiting = Vec::new();
                let mut ended = Vec::new();
                for op in ops.drain(..) {
                    match op {
                        Op::Write(LogWrite::Finish { run_id, keep }) => {
                            shared.take_all(&run_id, &mut writes);
                            if let Some(buf) = shared.buf(&run_id) {
                                ended.push((Arc::clone(&run_id), buf));
                            }
                            writes.push(LogWrite::Finish { run_id, keep });
                        }
                        Op::Write(w) => writes.push(w),
                        Op::Flushed(done) => waiting.push(done),
                    }
                }
                if !writes.is_empty()
                    && let Err(e) = store.write_log(&writes).await
                {
                    // The batch is dropped, as on success: its frames are lost to replay (they
                    // went to their clients already), and memory stays bounded while the store
                    // is down.
                    tracing::warn!(error = %e, writes = writes.len(), "cannot write run event logs");
                }
                shared.committed(&writes, &ended);
                for done in waiting {
                    let _ = done.send(());
                }
                if !open {
                    break;
                }
            }
        });
        Self { tx, shared }
    }

    /// Records the run and returns its log. The record is committed with the run's first
    /// frames (at the next tick), not before the run may begin: the first event does not wait
    /// on the database. The run is marked finished (events kept for `keep`) by
    /// [`EventLog::finish`].
    pub async fn start(&self, run: RunRecord, keep: Duration) -> EventLog {
        let run_id: Arc<str> = run.run_id.as_str().into();
        let buf = Arc::new(Mutex::new(RunBuf {
            pending: Chunk::new(Arc::clone(&run_id)),
            since: None,
            inflight: VecDeque::new(),
            begun: false,
        }));
        lock(&self.shared.runs).insert(Arc::clone(&run_id), Arc::clone(&buf));
        let _ = self.tx.send(Op::Write(LogWrite::Start(run))).await;
        EventLog {
            tx: self.tx.clone(),
            shared: Arc::clone(&self.shared),
            buf,
            run_id,
            keep,
            finished: false,
        }
    }

    #[cfg(test)]
    /// Waits until everything queued so far is committed.
    async fn flushed(&self) {
        flushed(&self.tx).await;
    }

    /// A run's frames numbered after `after`, in order: those in `store` and, for a run
    /// logging here, those not committed yet.
    pub async fn frames_after(
        &self,
        store: &dyn Store,
        run_id: &str,
        after: u64,
    ) -> Result<Vec<(u64, String)>, StoreError> {
        // Memory first: a chunk leaves memory only once committed, so whatever is missing
        // from this copy is in the store read after it.
        let mut frames: Vec<(u64, String)> = Vec::new();
        if let Some(buf) = self.shared.buf(run_id) {
            let b = lock(&buf);
            for text in b.inflight.iter().map(|c| &c.text).chain([&b.pending.text]) {
                frames.extend(Chunk::frames_after(text, after).map(|(s, f)| (s, f.to_string())));
            }
        }
        let mut stored = store.events_after(run_id, after).await?;
        if frames.is_empty() {
            return Ok(stored);
        }
        stored.append(&mut frames);
        stored.sort_by_key(|(seq, _)| *seq);
        stored.dedup_by_key(|(seq, _)| *seq);
        Ok(stored)
    }
}

/// The sending side of one run's event log.
#[derive(Debug)]
pub struct EventLog {
    tx: mpsc::Sender<Op>,
    shared: Arc<Shared>,
    buf: Buf,
    run_id: Arc<str>,
    keep: Duration,
    finished: bool,
}

impl EventLog {
    /// Appends one frame's JSON; waits only while the store lags [`MAX_PENDING`] behind.
    pub async fn push(&self, seq: u64, json: &str) {
        {
            let mut b = lock(&self.buf);
            if b.pending.is_empty() {
                b.since = Some(Instant::now());
            }
            b.pending.push(seq, json);
            if b.pending.text.len() < MAX_PENDING {
                return;
            }
        }
        loop {
            let committed = self.shared.committed.notified();
            let mut committed = std::pin::pin!(committed);
            committed.as_mut().enable();
            if lock(&self.buf).uncommitted_bytes() < MAX_PENDING {
                return;
            }
            committed.await;
        }
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
        flushed(&self.tx).await;
    }
}

/// Waits until everything queued on `tx` so far is committed.
async fn flushed(tx: &mpsc::Sender<Op>) {
    let (done, wait) = oneshot::channel();
    if tx.send(Op::Flushed(done)).await.is_ok() {
        let _ = wait.await;
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
    use crate::store::sql::SqlStore;

    fn record(id: &str) -> RunRecord {
        RunRecord {
            run_id: id.into(),
            agent_id: "a".into(),
            thread_id: format!("t-{id}"),
            finished: false,
            owner: String::new(),
        }
    }

    async fn store() -> (Arc<dyn Store>, SqlStore, tempdir::Dir) {
        let dir = tempdir::Dir::new();
        let store = SqlStore::open_sqlite(&dir.0.join("log.db")).await.unwrap();
        (Arc::new(store.clone()), store, dir)
    }

    mod tempdir {
        pub struct Dir(pub std::path::PathBuf);
        impl Dir {
            pub fn new() -> Self {
                let p = std::env::temp_dir().join(format!("agui-log-{}", uuid::Uuid::new_v4()));
                std::fs::create_dir_all(&p).unwrap();
                Dir(p)
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    #[tokio::test]
    async fn frames_are_readable_at_once_and_stored_by_the_end() {
        let (store, _sql, _dir) = store().await;
        let writer = LogWriter::spawn(Arc::clone(&store));
        let log = writer.start(record("r1"), Duration::from_secs(60)).await;
        log.push(1, "{\"n\":1}").await;
        // The first frame is taken at the next tick.
        while store.events_after("r1", 0).await.unwrap().is_empty() {
            tokio::time::sleep(TICK).await;
        }
        for seq in 2..=3 {
            log.push(seq, &format!("{{\"n\":{seq}}}")).await;
        }
        // The next ones are not committed yet (far under a chunk, well within the lag), yet a
        // reader here sees every frame.
        assert_eq!(store.events_after("r1", 0).await.unwrap().len(), 1);
        let seen = writer.frames_after(&*store, "r1", 1).await.unwrap();
        assert_eq!(seen, vec![(2, "{\"n\":2}".into()), (3, "{\"n\":3}".into())]);
        log.finish().await;
        let stored = store.events_after("r1", 0).await.unwrap();
        assert_eq!(stored.len(), 3);
        assert!(store.run("r1").await.unwrap().unwrap().finished);
        assert!(
            writer.shared.buf("r1").is_none(),
            "an ended run leaves memory"
        );
        assert_eq!(
            writer.frames_after(&*store, "r1", 2).await.unwrap().len(),
            1
        );
    }

    async fn stored(store: &Arc<dyn Store>, run: &str) -> usize {
        store.events_after(run, 0).await.unwrap().len()
    }

    async fn until_stored(store: &Arc<dyn Store>, run: &str, n: usize) {
        let deadline = Instant::now() + MAX_LAG + Duration::from_secs(20);
        while stored(store, run).await < n {
            assert!(
                Instant::now() < deadline,
                "{run} never had {n} frames stored"
            );
            tokio::time::sleep(TICK / 2).await;
        }
    }

    #[tokio::test]
    async fn a_chunk_is_committed_once_large_or_old_and_a_run_is_one_row_per_chunk() {
        let (store, sql, _dir) = store().await;
        let writer = LogWriter::spawn(Arc::clone(&store));
        let big = writer.start(record("big"), Duration::from_secs(60)).await;
        let slow = writer.start(record("slow"), Duration::from_secs(60)).await;
        big.push(1, "{}").await;
        slow.push(1, "{}").await;
        until_stored(&store, "big", 1).await;
        until_stored(&store, "slow", 1).await;
        // Then: nine frames of 1,000 bytes (a chunk's worth) and one small frame.
        let pushed = Instant::now();
        let frame = "x".repeat(1000);
        for seq in 2..=10 {
            big.push(seq, &frame).await;
        }
        slow.push(2, "{}").await;
        until_stored(&store, "big", 10).await;
        if pushed.elapsed() < MAX_LAG {
            assert_eq!(
                stored(&store, "slow").await,
                1,
                "a small chunk waits for its lag"
            );
        }
        until_stored(&store, "slow", 2).await;
        let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM run_event_chunks")
            .fetch_one(&sql.pool)
            .await
            .unwrap();
        assert_eq!(
            rows, 4,
            "each run: its first frame, then one row for the rest"
        );
        big.finish().await;
        slow.finish().await;
    }

    #[tokio::test]
    async fn a_dropped_log_still_marks_its_run_finished_with_its_frames() {
        let (store, _sql, _dir) = store().await;
        let writer = LogWriter::spawn(Arc::clone(&store));
        let log = writer.start(record("gone"), Duration::from_secs(60)).await;
        log.push(1, "{}").await;
        drop(log);
        writer.flushed().await;
        assert!(store.run("gone").await.unwrap().unwrap().finished);
        assert_eq!(store.events_after("gone", 0).await.unwrap().len(), 1);
    }
}
