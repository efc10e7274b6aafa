//! Threads seen as ml-commons' conversation memory (`conversation_index`): a thread is a
//! memory, found by its id alone; its messages carry their times; a message is found by its id.

use async_trait::async_trait;
use sqlx::{AssertSqlSafe, Row};

use super::sql::SqlStore;
use super::{StoreError, StoredMessage};

/// A stored thread and who owns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadRecord {
    /// The agent it belongs to.
    pub agent: String,
    /// Its id (the memory id).
    pub thread: String,
    /// The principal that made it.
    pub owner: String,
    /// Creation time, ms since the epoch.
    pub created_ms: i64,
    /// Its last message's last update (its creation when it has none), ms since the epoch.
    pub updated_ms: i64,
    /// Its first user message, whole (what ml-commons names a memory by).
    pub first_question: Option<serde_json::Value>,
}

/// A stored message with its times.
#[derive(Debug, Clone, PartialEq)]
pub struct TimedMessage {
    /// The message.
    pub message: StoredMessage,
    /// When it was first stored, ms since the epoch.
    pub created_ms: i64,
    /// When it was last written, ms since the epoch.
    pub updated_ms: i64,
}

/// Reading threads by id, across agents.
#[async_trait]
pub trait ConversationIndex: Send + Sync {
    /// Threads, newest first: the ones with id `thread` (one per agent that used the id) or
    /// all; only `owner`'s when given; at most `limit`.
    async fn threads(
        &self,
        thread: Option<&str>,
        owner: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ThreadRecord>, StoreError>;
    /// The (agent, thread) holding message `message_id`.
    async fn message_thread(
        &self,
        message_id: &str,
    ) -> Result<Option<(String, String)>, StoreError>;
    /// A thread's messages in order, with their times.
    async fn timed_thread(
        &self,
        agent: &str,
        thread: &str,
    ) -> Result<Vec<TimedMessage>, StoreError>;
}

#[async_trait]
impl ConversationIndex for SqlStore {
    async fn threads(
        &self,
        thread: Option<&str>,
        owner: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ThreadRecord>, StoreError> {
        self.timed(async move {
            let mut sql = String::from(
                "SELECT t.agent_id, t.thread_id, t.owner, t.created_at, \
                 COALESCE((SELECT MAX(m.updated_at) FROM messages m \
                 WHERE m.agent_id = t.agent_id AND m.thread_id = t.thread_id), t.created_at), \
                 (SELECT q.body FROM messages q WHERE q.agent_id = t.agent_id \
                 AND q.thread_id = t.thread_id AND q.role = 'user' ORDER BY q.position LIMIT 1) \
                 FROM threads t WHERE 1 = 1",
            );
            let mut binds = Vec::new();
            for (column, value) in [("t.thread_id", thread), ("t.owner", owner)] {
                if let Some(v) = value {
                    binds.push(v);
                    sql.push_str(&format!(
                        " AND {column} = {}",
                        self.placeholder(binds.len())
                    ));
                }
            }
            sql.push_str(&format!(
                " ORDER BY t.created_at DESC, t.thread_id LIMIT {}",
                limit.min(10_000)
            ));
            let mut q = sqlx::query(AssertSqlSafe(sql));
            for b in binds {
                q = q.bind(b);
            }
            let rows = q.fetch_all(&self.pool).await?;
            rows.into_iter()
                .map(|r| {
                    Ok(ThreadRecord {
                        agent: r.try_get(0)?,
                        thread: r.try_get(1)?,
                        owner: r.try_get(2)?,
                        created_ms: r.try_get(3)?,
                        updated_ms: r.try_get(4)?,
                        // A body that does not parse only costs the memory its name.
                        first_question: r
                            .try_get::<Option<String>, _>(5)?
                            .and_then(|b| serde_json::from_str(&b).ok()),
                    })
                })
                .collect()
        })
        .await
    }

    async fn message_thread(
        &self,
        message_id: &str,
    ) -> Result<Option<(String, String)>, StoreError> {
        self.timed(async move {
            let sql = self.sql("SELECT agent_id, thread_id FROM messages WHERE message_id = $1");
            let row = sqlx::query(AssertSqlSafe(sql))
                .bind(message_id)
                .fetch_optional(&self.pool)
                .await?;
            row.map(|r| Ok((r.try_get(0)?, r.try_get(1)?))).transpose()
        })
        .await
    }

    async fn timed_thread(
        &self,
        agent: &str,
        thread: &str,
    ) -> Result<Vec<TimedMessage>, StoreError> {
        self.timed(async move {
            let sql = self.sql(
                "SELECT message_id, body, created_at, updated_at FROM messages \
                 WHERE agent_id = $1 AND thread_id = $2 ORDER BY position",
            );
            let rows = sqlx::query(AssertSqlSafe(sql))
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
                    Ok(TimedMessage {
                        message: StoredMessage { id, body },
                        created_ms: r.try_get(2)?,
                        updated_ms: r.try_get(3)?,
                    })
                })
                .collect()
        })
        .await
    }
}
