//! Persistence behind one [`Store`] trait: threads (AG-UI messages stored whole, in order,
//! deduplicated by id), thread leases (one run per thread across gateways), and run event logs
//! (replay after a reconnect). Two implementations share the SQL in [`sql`]: SQLite (embedded
//! default, a WAL file under the data directory) and PostgreSQL (several gateways).

pub mod conversations;
pub mod docs;
pub mod memory;
pub mod sealed;
pub mod sql;

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database refused or could not be reached.
    #[error("store unavailable: {0}")]
    Database(#[source] sqlx::Error),
    /// The database did not answer in time.
    #[error("store unavailable: no answer within {} s", .0.as_secs_f32())]
    Timeout(Duration),
    /// Migrations failed.
    #[error("store migration failed: {0}")]
    Migration(#[source] sqlx::migrate::MigrateError),
    /// A stored row could not be read back.
    #[error("corrupt stored data: {0}")]
    Corrupt(String),
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        StoreError::Database(e)
    }
}

/// One stored AG-UI message.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredMessage {
    /// The message id (AG-UI `id`).
    pub id: String,
    /// The whole AG-UI message as JSON.
    pub body: Value,
}

impl StoredMessage {
    /// Wraps an AG-UI message; `None` when it has no string `id`.
    pub fn from_agui(body: Value) -> Option<Self> {
        let id = body.get("id")?.as_str()?.to_string();
        Some(Self { id, body })
    }

    /// The message's `role`.
    pub fn role(&self) -> &str {
        self.body.get("role").and_then(Value::as_str).unwrap_or("")
    }
}

/// A run as recorded for replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRecord {
    /// The run.
    pub run_id: String,
    /// Its agent.
    pub agent_id: String,
    /// Its thread.
    pub thread_id: String,
    /// Whether it has ended.
    pub finished: bool,
    /// The principal that started it (an API key's name; `""` for the anonymous one).
    pub owner: String,
}

/// Consecutive frames of one run's stream, stored as one row: a `seq json` line per frame
/// (serialised JSON never holds a raw newline). The run appends to it as it streams and the
/// log writer stores it whole, so a frame costs the log one line of text, not a row.
#[derive(Debug, Clone, Default)]
pub struct Chunk {
    /// The run.
    pub run_id: std::sync::Arc<str>,
    /// The first frame's sequence number (0 while empty).
    pub first: u64,
    /// The last frame's sequence number.
    pub last: u64,
    /// The frames, one `seq json` line each.
    pub text: String,
}

impl Chunk {
    /// An empty chunk of `run_id`.
    pub fn new(run_id: std::sync::Arc<str>) -> Self {
        Self {
            run_id,
            ..Self::default()
        }
    }

    /// A chunk holding `frames` (`(seq, json)`, in order).
    pub fn of(run_id: &str, frames: &[(u64, String)]) -> Self {
        let mut c = Self::new(run_id.into());
        for (seq, json) in frames {
            c.push(*seq, json);
        }
        c
    }

    /// Appends frame `seq`.
    pub fn push(&mut self, seq: u64, json: &str) {
        use std::fmt::Write;
        if self.text.is_empty() {
            self.first = seq;
        }
        self.last = seq;
        let _ = writeln!(self.text, "{seq} {json}");
    }

    /// Whether it holds no frame.
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// The frames of a chunk's `text` numbered after `after`, in order.
    pub fn frames_after(text: &str, after: u64) -> impl Iterator<Item = (u64, &str)> {
        text.lines().filter_map(move |line| {
            let (seq, frame) = line.split_once(' ')?;
            let seq = seq.parse::<u64>().ok()?;
            (seq > after).then_some((seq, frame))
        })
    }
}

/// One write to the run event logs.
#[derive(Debug, Clone)]
pub enum LogWrite {
    /// A run starts (or starts again).
    Start(RunRecord),
    /// Consecutive frames of a run's stream (shared with the writer, which answers readers
    /// from it until it is committed).
    Frames(std::sync::Arc<Chunk>),
    /// A run ended; its events are kept for `keep`.
    Finish {
        /// The run.
        run_id: std::sync::Arc<str>,
        /// How long its events stay replayable.
        keep: std::time::Duration,
    },
}

/// Outcome of trying to take a thread's lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lease {
    /// This run holds the thread now.
    Acquired,
    /// Another run holds it, until it ends or its lease expires.
    Busy {
        /// The holding run.
        run_id: String,
    },
}

/// The persistence interface of the gateway.
#[async_trait]
pub trait Store:
    memory::MemoryStore + docs::DocStore + conversations::ConversationIndex + Send + Sync + 'static
{
    /// `sqlite` or `postgres`.
    fn kind(&self) -> &'static str;

    /// Whether several gateways may use the store at once (PostgreSQL). Then thread leases
    /// keep one run per thread across them; the embedded store serves one process, whose run
    /// manager alone does that.
    fn is_shared(&self) -> bool;

    /// The thread's messages in order.
    async fn load_thread(
        &self,
        agent: &str,
        thread: &str,
    ) -> Result<Vec<StoredMessage>, StoreError>;
    /// Inserts new messages at the end (in the given order) and updates known ones in place;
    /// one transaction.
    async fn save_messages(
        &self,
        agent: &str,
        thread: &str,
        messages: &[StoredMessage],
    ) -> Result<(), StoreError>;
    /// Deletes a thread (and who owned it).
    async fn delete_thread(&self, agent: &str, thread: &str) -> Result<(), StoreError>;
    /// Records `owner` as the thread's owner unless it has one already; returns its owner.
    /// One statement, so of two principals racing for a new thread exactly one gets it.
    async fn claim_thread(
        &self,
        agent: &str,
        thread: &str,
        owner: &str,
    ) -> Result<String, StoreError>;
    /// The thread's owner, when recorded.
    async fn thread_owner(&self, agent: &str, thread: &str) -> Result<Option<String>, StoreError>;
    /// Who started a run, whether or not its events have expired (until it is purged).
    async fn run_owner(&self, run_id: &str) -> Result<Option<String>, StoreError>;

    /// Takes the thread for `run_id` for `ttl` unless another gateway's run holds an unexpired
    /// lease. A lease of the same `holder` is taken over: a gateway runs one run per thread
    /// (the run manager sees to it), so a lease it still holds is one whose release failed.
    async fn acquire_lease(
        &self,
        agent: &str,
        thread: &str,
        run_id: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<Lease, StoreError>;
    /// Extends this run's lease; `false` when it was lost.
    async fn renew_lease(
        &self,
        agent: &str,
        thread: &str,
        run_id: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError>;
    /// The run holding an unexpired lease on the thread, if any.
    async fn lease_holder(&self, agent: &str, thread: &str) -> Result<Option<String>, StoreError>;
    /// Gives the thread back.
    async fn release_lease(
        &self,
        agent: &str,
        thread: &str,
        run_id: &str,
    ) -> Result<(), StoreError>;

    /// Records a run's start.
    async fn start_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        self.write_log(&[LogWrite::Start(run.clone())]).await
    }
    /// Marks a run finished; its events are kept for `keep`.
    async fn finish_run(&self, run_id: &str, keep: Duration) -> Result<(), StoreError> {
        self.write_log(&[LogWrite::Finish {
            run_id: run_id.into(),
            keep,
        }])
        .await
    }
    /// Run starts, frames and ends, of any runs, in order and in one transaction.
    async fn write_log(&self, writes: &[LogWrite]) -> Result<(), StoreError>;
    /// A run, if known and not expired.
    async fn run(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError>;
    /// Appends numbered frames of a run's event stream.
    async fn append_events(
        &self,
        run_id: &str,
        events: &[(u64, String)],
    ) -> Result<(), StoreError> {
        self.write_log(&[LogWrite::Frames(Chunk::of(run_id, events).into())])
            .await
    }
    /// The frames after `after`, in order.
    async fn events_after(
        &self,
        run_id: &str,
        after: u64,
    ) -> Result<Vec<(u64, String)>, StoreError>;
    /// Deletes expired runs and their events; returns how many runs went.
    async fn purge_expired(&self) -> Result<u64, StoreError>;
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    crate::protocol::encode::now_ms()
}
