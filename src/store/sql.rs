//! The SQL store over `sqlx::Any`: one set of statements for SQLite and PostgreSQL (written with
//! `$n` placeholders, rewritten to `?n` for SQLite), each backend with its own migrations.

use std::borrow::Cow;
use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::any::{AnyPoolOptions, install_default_drivers};
// Every statement is a literal of this file; only placeholders are rewritten.
use sqlx::{AnyPool, AssertSqlSafe, Executor, Row};

use super::{Chunk, Lease, LogWrite, RunRecord, Store, StoreError, StoredMessage, now_ms};

static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Sqlite,
    Postgres,
}

/// Event-log rows per `INSERT` (4 parameters each, well under SQLite's and PostgreSQL's
/// limits).
const CHUNK_ROWS_PER_STATEMENT: usize = 200;

/// Messages per `INSERT` (8 parameters each).
const MESSAGE_ROWS_PER_STATEMENT: usize = 200;

/// A SQLite- or PostgreSQL-backed store.
#[derive(Debug, Clone)]
pub struct SqlStore {
    pub(crate) pool: AnyPool,
    kind: Kind,
    op_timeout: Duration,
}

/// How long one store operation may take by default (`[store] op_timeout_secs`).
pub const DEFAULT_OP_TIMEOUT: Duration = Duration::from_secs(15);

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl SqlStore {
    /// Opens (creating it if needed) the embedded SQLite store at `path`, in WAL mode.
    pub async fn open_sqlite(path: &Path) -> Result<Self, StoreError> {
        install_default_drivers();
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| {
                StoreError::Corrupt(format!("cannot create {}: {e}", dir.display()))
            })?;
        }
        let url = format!("sqlite://{}?mode=rwc", path.display());
        let pool = AnyPoolOptions::new()
            .max_connections(4)
            // A file in this process has no connection to lose: the ping sqlx sends before
            // handing out a connection was one more round trip to its worker per query.
            .test_before_acquire(false)
            .after_connect(|conn, _| {
                Box::pin(async move {
                    // WAL lets readers run beside the one writer; the busy timeout makes
                    // concurrent writers wait instead of failing.
                    conn.execute("PRAGMA journal_mode=WAL").await?;
                    conn.execute("PRAGMA synchronous=NORMAL").await?;
                    conn.execute("PRAGMA busy_timeout=5000").await?;
                    Ok(())
                })
            })
            .connect(&url)
            .await?;
        SQLITE_MIGRATIONS
            .run(&pool)
            .await
            .map_err(StoreError::Migration)?;
        // The embedded store serves one gateway process: leases left in it belong to a
        // process that died, and would keep their threads busy until they expire; runs it
        // left "running" ended with it, so followers must stop waiting for them.
        sqlx::query("DELETE FROM thread_leases")
            .execute(&pool)
            .await?;
        sqlx::query(
            "UPDATE runs SET state = 'finished', finished_at = started_at, expires_at = started_at + 3600000 \
             WHERE state = 'running'",
        )
        .execute(&pool)
        .await?;
        Ok(Self {
            pool,
            kind: Kind::Sqlite,
            op_timeout: DEFAULT_OP_TIMEOUT,
        })
    }

    /// Connects to PostgreSQL at `url` and runs the migrations.
    pub async fn connect_postgres(url: &str) -> Result<Self, StoreError> {
        install_default_drivers();
        let pool = AnyPoolOptions::new()
            .max_connections(16)
            .connect(url)
            .await?;
        POSTGRES_MIGRATIONS
            .run(&pool)
            .await
            .map_err(StoreError::Migration)?;
        Ok(Self {
            pool,
            kind: Kind::Postgres,
            op_timeout: DEFAULT_OP_TIMEOUT,
        })
    }

    /// Sets how long one operation may take before it fails with [`StoreError::Timeout`].
    pub fn with_op_timeout(mut self, limit: Duration) -> Self {
        self.op_timeout = limit;
        self
    }

    /// Runs one operation under the time limit. sqlx sets none on a query, so a database that
    /// stops answering (a network partition, a hung disk) would otherwise hold the run, its
    /// thread and its slot until TCP gives up, which for a connection waiting on a reply is
    /// never.
    pub(crate) async fn timed<T>(
        &self,
        op: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        tokio::time::timeout(self.op_timeout, op)
            .await
            .unwrap_or(Err(StoreError::Timeout(self.op_timeout)))
    }

    /// A transaction that writes. SQLite's must take the write lock up front (`IMMEDIATE`): a
    /// deferred one that reads first cannot upgrade once another writer committed
    /// (`SQLITE_BUSY_SNAPSHOT`, which no busy timeout resolves).
    async fn write_tx(&self) -> Result<sqlx::Transaction<'static, sqlx::Any>, sqlx::Error> {
        match self.kind {
            Kind::Sqlite => self.pool.begin_with("BEGIN IMMEDIATE").await,
            Kind::Postgres => self.pool.begin().await,
        }
    }

    /// Inserts `rows` (and empties it) in statements of up to [`CHUNK_ROWS_PER_STATEMENT`]
    /// rows each.
    async fn insert_chunks(
        &self,
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        rows: &mut Vec<&Chunk>,
    ) -> Result<(), sqlx::Error> {
        for batch in rows.chunks(CHUNK_ROWS_PER_STATEMENT) {
            let mut sql = String::from(
                "INSERT INTO run_event_chunks (run_id, first_seq, last_seq, frames) VALUES ",
            );
            self.push_rows(&mut sql, batch.len(), 4);
            sql.push_str(" ON CONFLICT (run_id, first_seq) DO NOTHING");
            let mut q = sqlx::query(AssertSqlSafe(sql));
            for r in batch {
                q = q
                    .bind(&*r.run_id)
                    .bind(r.first as i64)
                    .bind(r.last as i64)
                    .bind(r.text.as_str());
            }
            q.execute(&mut **tx).await?;
        }
        rows.clear();
        Ok(())
    }

    /// Appends the placeholders of `rows` rows of `cols` values each, numbered from 1:
    /// `($1, $2), ($3, $4)` (SQLite: `?1`...), for one multi-row statement.
    fn push_rows(&self, sql: &mut String, rows: usize, cols: usize) {
        use std::fmt::Write;
        let mark = match self.kind {
            Kind::Postgres => '$',
            Kind::Sqlite => '?',
        };
        for row in 0..rows {
            sql.push_str(if row == 0 { "(" } else { ", (" });
            for col in 0..cols {
                let sep = if col == 0 { "" } else { ", " };
                let _ = write!(sql, "{sep}{mark}{}", row * cols + col + 1);
            }
            sql.push(')');
        }
    }

    /// [`Store::thread_owner`] without the time limit (callers set it).
    async fn thread_owner_now(
        &self,
        agent: &str,
        thread: &str,
    ) -> Result<Option<String>, StoreError> {
        let sql = self.sql("SELECT owner FROM threads WHERE agent_id = $1 AND thread_id = $2");
        let row = sqlx::query(AssertSqlSafe(sql))
            .bind(agent)
            .bind(thread)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| r.try_get::<String, _>(0)).transpose()?)
    }

    /// The `n`th (from 1) bind placeholder of a statement built at run time.
    pub(crate) fn placeholder(&self, n: usize) -> String {
        match self.kind {
            Kind::Postgres => format!("${n}"),
            Kind::Sqlite => format!("?{n}"),
        }
    }

    /// The statement in this backend's placeholder syntax.
    pub(crate) fn sql(&self, sql: &'static str) -> Cow<'static, str> {
        match self.kind {
            Kind::Postgres => Cow::Borrowed(sql),
            Kind::Sqlite => Cow::Owned(sql.replace('$', "?")),
        }
    }
}

#[async_trait]
impl Store for SqlStore {
    fn kind(&self) -> &'static str {
        match self.kind {
            Kind::Sqlite => "sqlite",
            Kind::Postgres => "postgres",
        }
    }

    fn is_shared(&self) -> bool {
        self.kind == Kind::Postgres
    }

    async fn load_thread(
        &self,
        agent: &str,
        thread: &str,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        self.timed(async move {
            let sql = self.sql("SELECT message_id, body FROM messages WHERE agent_id = $1 AND thread_id = $2 ORDER BY position");
            let rows = sqlx::query(AssertSqlSafe(sql.clone()))
                .bind(agent)
                .bind(thread)
                .fetch_all(&self.pool)
                .await?;
            rows.into_iter()
                .map(|r| {
                    let id: String = r.try_get(0)?;
                    let body: String = r.try_get(1)?;
                    let body = serde_json::from_str(&body)
                        .map_err(|e| StoreError::Corrupt(format!("message {id}: {e}")))?;
                    Ok(StoredMessage { id, body })
                })
                .collect()
        })
        .await
    }

    async fn save_messages(
        &self,
        agent: &str,
        thread: &str,
        messages: &[StoredMessage],
    ) -> Result<(), StoreError> {
        self.timed(async move {
            if messages.is_empty() {
                return Ok(());
            }
            let now = now_ms();
            let mut tx = self.write_tx().await?;
            let max_sql = self.sql("SELECT COALESCE(MAX(position), -1) FROM messages WHERE agent_id = $1 AND thread_id = $2");
            let mut next: i64 = sqlx::query(AssertSqlSafe(max_sql.clone()))
                .bind(agent)
                .bind(thread)
                .fetch_one(&mut *tx)
                .await?
                .try_get::<i64, _>(0)?
                + 1;
            // New ids get the next positions; known ids keep theirs and take the new body. A
            // statement per message was a round trip to the database per message of the
            // history the client sent; one statement carries up to MESSAGE_ROWS_PER_STATEMENT.
            // An id given twice counts once (its last body), as one statement cannot update a
            // row twice.
            let mut rows: Vec<(&str, &str, String)> = Vec::with_capacity(messages.len());
            let mut at: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
            for m in messages {
                // Known secrets never reach the database (an upstream error quoted in a message).
                let body = crate::redact::redact_json_text(
                    serde_json::to_string(&m.body).map_err(|e| StoreError::Corrupt(e.to_string()))?,
                );
                match at.get(m.id.as_str()) {
                    Some(&i) => rows[i] = (m.id.as_str(), m.role(), body),
                    None => {
                        at.insert(m.id.as_str(), rows.len());
                        rows.push((m.id.as_str(), m.role(), body));
                    }
                }
            }
            for batch in rows.chunks(MESSAGE_ROWS_PER_STATEMENT) {
                let mut sql = String::from(
                    "INSERT INTO messages (agent_id, thread_id, message_id, position, role, body, created_at, updated_at) VALUES ",
                );
                self.push_rows(&mut sql, batch.len(), 8);
                sql.push_str(
                    " ON CONFLICT (agent_id, thread_id, message_id) DO UPDATE SET body = excluded.body, role = excluded.role, updated_at = excluded.updated_at",
                );
                let mut q = sqlx::query(AssertSqlSafe(sql));
                for (id, role, body) in batch {
                    q = q
                        .bind(agent)
                        .bind(thread)
                        .bind(*id)
                        .bind(next)
                        .bind(*role)
                        .bind(body.as_str())
                        .bind(now)
                        .bind(now);
                    next += 1;
                }
                q.execute(&mut *tx).await?;
            }
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    async fn delete_thread(&self, agent: &str, thread: &str) -> Result<(), StoreError> {
        self.timed(async move {
            let mut tx = self.write_tx().await?;
            for sql in [
                "DELETE FROM messages WHERE agent_id = $1 AND thread_id = $2",
                "DELETE FROM threads WHERE agent_id = $1 AND thread_id = $2",
            ] {
                sqlx::query(AssertSqlSafe(self.sql(sql)))
                    .bind(agent)
                    .bind(thread)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    async fn claim_thread(
        &self,
        agent: &str,
        thread: &str,
        owner: &str,
    ) -> Result<String, StoreError> {
        self.timed(async move {
            // Most runs are on a thread already claimed: one read, and no write lock taken.
            if let Some(o) = self.thread_owner_now(agent, thread).await? {
                return Ok(o);
            }
            // One statement answers the owner either way: this claim's, or the one that
            // raced it (the no-op update keeps it and makes RETURNING see it).
            let claim = self.sql(
                "INSERT INTO threads (agent_id, thread_id, owner, created_at) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (agent_id, thread_id) DO UPDATE SET owner = threads.owner \
                 RETURNING owner",
            );
            let row = sqlx::query(AssertSqlSafe(claim))
                .bind(agent)
                .bind(thread)
                .bind(owner)
                .bind(now_ms())
                .fetch_one(&self.pool)
                .await?;
            Ok(row.try_get(0)?)
        })
        .await
    }

    async fn thread_owner(&self, agent: &str, thread: &str) -> Result<Option<String>, StoreError> {
        self.timed(self.thread_owner_now(agent, thread)).await
    }

    async fn run_owner(&self, run_id: &str) -> Result<Option<String>, StoreError> {
        self.timed(async move {
            let sql = self.sql("SELECT owner FROM runs WHERE run_id = $1");
            let row = sqlx::query(AssertSqlSafe(sql))
                .bind(run_id)
                .fetch_optional(&self.pool)
                .await?;
            Ok(row.map(|r| r.try_get::<String, _>(0)).transpose()?)
        })
        .await
    }

    async fn acquire_lease(
        &self,
        agent: &str,
        thread: &str,
        run_id: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<Lease, StoreError> {
        self.timed(async move {
            let now = now_ms();
            // Insert, or take over an expired lease (a crashed gateway's) or one this gateway left
            // behind (its release failed: the store was away); one statement, so two gateways
            // racing cannot both win.
            let sql = self.sql(
                "INSERT INTO thread_leases (agent_id, thread_id, run_id, holder, expires_at) VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (agent_id, thread_id) DO UPDATE SET run_id = excluded.run_id, holder = excluded.holder, expires_at = excluded.expires_at \
                 WHERE thread_leases.expires_at < $6 OR thread_leases.holder = $4",
            );
            let done = sqlx::query(AssertSqlSafe(sql.clone()))
                .bind(agent)
                .bind(thread)
                .bind(run_id)
                .bind(holder)
                .bind(now + ms(ttl))
                .bind(now)
                .execute(&self.pool)
                .await?;
            if done.rows_affected() == 1 {
                return Ok(Lease::Acquired);
            }
            let sql =
                self.sql("SELECT run_id FROM thread_leases WHERE agent_id = $1 AND thread_id = $2");
            let row = sqlx::query(AssertSqlSafe(sql.clone()))
                .bind(agent)
                .bind(thread)
                .fetch_optional(&self.pool)
                .await?;
            Ok(Lease::Busy {
                run_id: row
                    .map(|r| r.try_get::<String, _>(0))
                    .transpose()?
                    .unwrap_or_default(),
        })
        })
        .await
    }

    async fn renew_lease(
        &self,
        agent: &str,
        thread: &str,
        run_id: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        self.timed(async move {
            let sql = self.sql("UPDATE thread_leases SET expires_at = $1 WHERE agent_id = $2 AND thread_id = $3 AND run_id = $4");
            let done = sqlx::query(AssertSqlSafe(sql.clone()))
                .bind(now_ms() + ms(ttl))
                .bind(agent)
                .bind(thread)
                .bind(run_id)
                .execute(&self.pool)
                .await?;
            Ok(done.rows_affected() == 1)
        })
        .await
    }

    async fn lease_holder(&self, agent: &str, thread: &str) -> Result<Option<String>, StoreError> {
        self.timed(async move {
            let sql = self.sql(
                "SELECT run_id FROM thread_leases WHERE agent_id = $1 AND thread_id = $2 AND expires_at >= $3",
            );
            let row = sqlx::query(AssertSqlSafe(sql))
                .bind(agent)
                .bind(thread)
                .bind(now_ms())
                .fetch_optional(&self.pool)
                .await?;
            Ok(row.map(|r| r.try_get::<String, _>(0)).transpose()?)
        })
        .await
    }

    async fn release_lease(
        &self,
        agent: &str,
        thread: &str,
        run_id: &str,
    ) -> Result<(), StoreError> {
        self.timed(async move {
            let sql = self.sql(
                "DELETE FROM thread_leases WHERE agent_id = $1 AND thread_id = $2 AND run_id = $3",
            );
            sqlx::query(AssertSqlSafe(sql.clone()))
                .bind(agent)
                .bind(thread)
                .bind(run_id)
                .execute(&self.pool)
                .await?;
            Ok(())
        })
        .await
    }

    async fn run(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        self.timed(async move {
            let sql = self.sql(
                "SELECT run_id, agent_id, thread_id, state, owner FROM runs WHERE run_id = $1 AND (expires_at IS NULL OR expires_at > $2)",
            );
            let row = sqlx::query(AssertSqlSafe(sql.clone()))
                .bind(run_id)
                .bind(now_ms())
                .fetch_optional(&self.pool)
                .await?;
            row.map(|r| {
                Ok(RunRecord {
                    run_id: r.try_get(0)?,
                    agent_id: r.try_get(1)?,
                    thread_id: r.try_get(2)?,
                    finished: r.try_get::<String, _>(3)? == "finished",
                    owner: r.try_get(4)?,
                })
        })
        .transpose()
        })
        .await
    }

    async fn write_log(&self, writes: &[LogWrite]) -> Result<(), StoreError> {
        self.timed(async move {
            if writes.is_empty() {
                return Ok(());
            }
            let start = self.sql(
                "INSERT INTO runs (run_id, agent_id, thread_id, state, started_at, owner) VALUES ($1, $2, $3, 'running', $4, $5) \
                 ON CONFLICT (run_id) DO UPDATE SET state = 'running', finished_at = NULL, expires_at = NULL",
            );
            let finish = self.sql(
                "UPDATE runs SET state = 'finished', finished_at = $1, expires_at = $2 WHERE run_id = $3",
            );
            let now = now_ms();
            let mut tx = self.write_tx().await?;
            // Frames of consecutive writes go out together, many runs per statement: at one
            // token per run per flush, a statement per run was a round trip to the database
            // per streamed token.
            let mut rows: Vec<&Chunk> = Vec::new();
            for w in writes {
                match w {
                    LogWrite::Frames(chunk) if !chunk.is_empty() => {
                        rows.push(&**chunk);
                        continue;
                    }
                    LogWrite::Frames(_) => continue,
                    _ => {}
                }
                self.insert_chunks(&mut tx, &mut rows).await?;
                match w {
                    LogWrite::Start(run) => {
                        sqlx::query(AssertSqlSafe(start.clone()))
                            .bind(&run.run_id)
                            .bind(&run.agent_id)
                            .bind(&run.thread_id)
                            .bind(now)
                            .bind(&run.owner)
                            .execute(&mut *tx)
                            .await?;
                    }
                    LogWrite::Finish { run_id, keep } => {
                        sqlx::query(AssertSqlSafe(finish.clone()))
                            .bind(now)
                            .bind(now + ms(*keep))
                            .bind(&**run_id)
                            .execute(&mut *tx)
                            .await?;
                    }
                    LogWrite::Frames(_) => {}
                }
            }
            self.insert_chunks(&mut tx, &mut rows).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    async fn events_after(
        &self,
        run_id: &str,
        after: u64,
    ) -> Result<Vec<(u64, String)>, StoreError> {
        self.timed(async move {
            let sql = self.sql(
                "SELECT frames FROM run_event_chunks WHERE run_id = $1 AND last_seq > $2 ORDER BY first_seq",
            );
            let rows = sqlx::query(AssertSqlSafe(sql.clone()))
                .bind(run_id)
                .bind(after as i64)
                .fetch_all(&self.pool)
                .await?;
            let mut out = Vec::new();
            for r in rows {
                let frames: String = r.try_get(0)?;
                out.extend(
                    Chunk::frames_after(&frames, after).map(|(seq, f)| (seq, f.to_string())),
                );
            }
            // A frame written twice (a retried batch) counts once: the first copy.
            out.sort_by_key(|(seq, _)| *seq);
            out.dedup_by_key(|(seq, _)| *seq);
            Ok(out)
        })
        .await
    }

    async fn purge_expired(&self) -> Result<u64, StoreError> {
        self.timed(async move {
            let now = now_ms();
            let mut tx = self.write_tx().await?;
            let events = self.sql(
                "DELETE FROM run_event_chunks WHERE run_id IN (SELECT run_id FROM runs WHERE expires_at IS NOT NULL AND expires_at < $1)",
            );
            sqlx::query(AssertSqlSafe(events.clone()))
                .bind(now)
                .execute(&mut *tx)
                .await?;
            let runs = self.sql("DELETE FROM runs WHERE expires_at IS NOT NULL AND expires_at < $1");
            let done = sqlx::query(AssertSqlSafe(runs.clone()))
                .bind(now)
                .execute(&mut *tx)
                .await?;
            let leases = self.sql("DELETE FROM thread_leases WHERE expires_at < $1");
            sqlx::query(AssertSqlSafe(leases.clone()))
                .bind(now)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(done.rows_affected())
        })
        .await
    }
}
