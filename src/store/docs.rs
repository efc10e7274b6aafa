//! The agent API's documents: connectors, models, agents and tasks, one JSON document each,
//! with an optional sealed (encrypted) credential beside it.

use async_trait::async_trait;
use serde_json::Value;
use sqlx::{AssertSqlSafe, Row};

use super::sql::SqlStore;
use super::{StoreError, now_ms};

/// What a document is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocKind {
    /// A connector (`/_plugins/_ml/connectors`).
    Connector,
    /// A registered model.
    Model,
    /// A registered agent.
    Agent,
    /// An asynchronous execution.
    Task,
    /// Settings written through `PUT /_cluster/settings`.
    Settings,
}

impl DocKind {
    fn as_str(self) -> &'static str {
        match self {
            DocKind::Connector => "connector",
            DocKind::Model => "model",
            DocKind::Agent => "agent",
            DocKind::Task => "task",
            DocKind::Settings => "settings",
        }
    }
}

/// One stored document.
#[derive(Debug, Clone, PartialEq)]
pub struct Doc {
    /// Its id.
    pub id: String,
    /// Its name (searchable).
    pub name: String,
    /// The document, without secrets.
    pub body: Value,
    /// The encrypted credential, if any (see [`crate::store::sealed`]).
    pub sealed: Option<String>,
    /// Creation time, ms since the epoch.
    pub created_ms: i64,
    /// Last update, ms since the epoch (changes on every write).
    pub updated_ms: i64,
    /// The principal that created it (an API key's name; `""` for the anonymous one); `None`
    /// for documents stored before owners were recorded. Kept as first written.
    pub owner: Option<String>,
}

impl Doc {
    /// A new document, created now.
    pub fn new(id: impl Into<String>, name: impl Into<String>, body: Value) -> Self {
        let now = now_ms();
        Self {
            id: id.into(),
            name: name.into(),
            body,
            sealed: None,
            created_ms: now,
            updated_ms: now,
            owner: None,
        }
    }

    /// The same document, created by `owner`.
    pub fn owned_by(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }
}

/// Storage of the agent API's documents.
#[async_trait]
pub trait DocStore: Send + Sync {
    /// Inserts or replaces a document (its `updated_ms` is set to now when it is not newer).
    async fn put_doc(&self, kind: DocKind, doc: &Doc) -> Result<(), StoreError>;
    /// A document by id.
    async fn doc(&self, kind: DocKind, id: &str) -> Result<Option<Doc>, StoreError>;
    /// Every document of a kind, oldest first.
    async fn docs(&self, kind: DocKind) -> Result<Vec<Doc>, StoreError>;
    /// Deletes a document; `false` when there was none.
    async fn delete_doc(&self, kind: DocKind, id: &str) -> Result<bool, StoreError>;
}

fn doc_from_row(r: &sqlx::any::AnyRow) -> Result<Doc, StoreError> {
    let body: String = r.try_get(2)?;
    Ok(Doc {
        id: r.try_get(0)?,
        name: r.try_get(1)?,
        body: serde_json::from_str(&body).map_err(|e| StoreError::Corrupt(e.to_string()))?,
        sealed: r.try_get(3)?,
        created_ms: r.try_get(4)?,
        updated_ms: r.try_get(5)?,
        owner: r.try_get(6)?,
    })
}

#[async_trait]
impl DocStore for SqlStore {
    async fn put_doc(&self, kind: DocKind, doc: &Doc) -> Result<(), StoreError> {
        // Tasks record what a run said (answers, upstream errors): known secrets are removed
        // before they reach the database. Registrations are configuration, whose secrets are
        // sealed apart; rewriting them would break the configuration itself.
        let body = match kind {
            DocKind::Task => crate::redact::redact_json_text(doc.body.to_string()),
            _ => doc.body.to_string(),
        };
        self.timed(async move {
            let sql = self.sql(
                "INSERT INTO ml_docs (kind, id, name, body, sealed, created_ms, updated_ms, owner) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
                 ON CONFLICT (kind, id) DO UPDATE SET name = excluded.name, body = excluded.body, \
                 sealed = excluded.sealed, updated_ms = excluded.updated_ms",
            );
            sqlx::query(AssertSqlSafe(sql))
                .bind(kind.as_str())
                .bind(doc.id.as_str())
                .bind(doc.name.as_str())
                .bind(body)
                .bind(doc.sealed.clone())
                .bind(doc.created_ms)
                .bind(doc.updated_ms.max(now_ms()))
                .bind(doc.owner.clone())
                .execute(&self.pool)
                .await?;
            Ok(())
        })
        .await
    }

    async fn doc(&self, kind: DocKind, id: &str) -> Result<Option<Doc>, StoreError> {
        self.timed(async move {
            let sql = self.sql(
                "SELECT id, name, body, sealed, created_ms, updated_ms, owner FROM ml_docs WHERE kind = $1 AND id = $2",
            );
            let row = sqlx::query(AssertSqlSafe(sql))
                .bind(kind.as_str())
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
            row.as_ref().map(doc_from_row).transpose()
        })
        .await
    }

    async fn docs(&self, kind: DocKind) -> Result<Vec<Doc>, StoreError> {
        self.timed(async move {
            let sql = self.sql(
                "SELECT id, name, body, sealed, created_ms, updated_ms, owner FROM ml_docs WHERE kind = $1 ORDER BY created_ms, id",
            );
            let rows = sqlx::query(AssertSqlSafe(sql))
                .bind(kind.as_str())
                .fetch_all(&self.pool)
                .await?;
            rows.iter().map(doc_from_row).collect()
        })
        .await
    }

    async fn delete_doc(&self, kind: DocKind, id: &str) -> Result<bool, StoreError> {
        self.timed(async move {
            let sql = self.sql("DELETE FROM ml_docs WHERE kind = $1 AND id = $2");
            let done = sqlx::query(AssertSqlSafe(sql))
                .bind(kind.as_str())
                .bind(id)
                .execute(&self.pool)
                .await?;
            Ok(done.rows_affected() > 0)
        })
        .await
    }
}
