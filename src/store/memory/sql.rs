//! Agentic memory on the SQL store (SQLite embedded, PostgreSQL shared): containers, sessions
//! and working memories as rows, namespaces as their own rows for filtering.

use sqlx::any::AnyRow;
// Statements are literals of this file; search statements are assembled from literal fragments
// with every caller-supplied value bound as a parameter.
use sqlx::{Any, AssertSqlSafe, Row, Transaction};

use super::*;

/// A fresh document id.
fn new_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

fn to_text<T: serde::Serialize>(v: &T) -> Result<String, StoreError> {
    serde_json::to_string(v).map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// [`to_text`] for what a conversation wrote (memories, their metadata): known secrets are
/// removed before they reach the database.
fn to_clean_text<T: serde::Serialize>(v: &T) -> Result<String, StoreError> {
    to_text(v).map(crate::redact::redact_json_text)
}

fn from_text<T: serde::de::DeserializeOwned>(what: &str, s: &str) -> Result<T, StoreError> {
    serde_json::from_str(s).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A bound value of an assembled statement.
enum Arg {
    Text(String),
    Int(i64),
}

const CONTAINER_COLUMNS: &str =
    "container_id, name, description, configuration, created_time, last_updated_time, owner";
const SESSION_COLUMNS: &str = "s.container_id, s.session_id, s.summary, s.metadata, s.namespace, s.created_time, s.last_updated_time";
const WORKING_COLUMNS: &str = "w.container_id, w.memory_id, w.payload_type, w.session_id, w.message_id, w.namespace, w.body, w.created_time, w.last_updated_time";

fn container_row(r: &AnyRow) -> Result<Container, StoreError> {
    let id: String = r.try_get(0)?;
    let configuration: String = r.try_get(3)?;
    Ok(Container {
        name: r.try_get(1)?,
        description: r.try_get(2)?,
        configuration: from_text(&format!("container {id}"), &configuration)?,
        created_time: r.try_get(4)?,
        last_updated_time: r.try_get(5)?,
        owner: r.try_get(6)?,
        id,
    })
}

fn session_row(r: &AnyRow) -> Result<Session, StoreError> {
    let session_id: String = r.try_get(1)?;
    let what = format!("session {session_id}");
    Ok(Session {
        container_id: r.try_get(0)?,
        summary: r.try_get(2)?,
        metadata: from_text(&what, &r.try_get::<String, _>(3)?)?,
        namespace: from_text(&what, &r.try_get::<String, _>(4)?)?,
        created_time: r.try_get(5)?,
        last_updated_time: r.try_get(6)?,
        session_id,
    })
}

fn working_row(r: &AnyRow) -> Result<WorkingMemory, StoreError> {
    let memory_id: String = r.try_get(1)?;
    let what = format!("working memory {memory_id}");
    Ok(WorkingMemory {
        container_id: r.try_get(0)?,
        payload_type: r.try_get(2)?,
        session_id: r.try_get(3)?,
        message_id: r.try_get(4)?,
        namespace: from_text(&what, &r.try_get::<String, _>(5)?)?,
        body: from_text(&what, &r.try_get::<String, _>(6)?)?,
        created_time: r.try_get(7)?,
        last_updated_time: r.try_get(8)?,
        memory_id,
    })
}

impl SqlStore {
    /// An assembled statement in this backend's placeholder syntax.
    fn dynamic_sql(&self, sql: String) -> String {
        if self.kind() == "sqlite" {
            sql.replace('$', "?")
        } else {
            sql
        }
    }

    /// Takes the container's row for the rest of the transaction and the next sequence
    /// number; `None` when the container is unknown.
    async fn lock_container(
        &self,
        tx: &mut Transaction<'static, Any>,
        id: &str,
    ) -> Result<Option<(i64, Map<String, Value>)>, StoreError> {
        let sql = self.sql(
            "UPDATE memory_containers SET next_seq = next_seq + 1 WHERE container_id = $1 RETURNING next_seq, configuration",
        );
        let row = sqlx::query(AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(&mut **tx)
            .await?;
        let Some(row) = row else { return Ok(None) };
        let seq: i64 = row.try_get(0)?;
        let configuration: String = row.try_get(1)?;
        Ok(Some((
            seq,
            from_text(&format!("container {id}"), &configuration)?,
        )))
    }

    async fn insert_namespace(
        &self,
        tx: &mut Transaction<'static, Any>,
        container: &str,
        owner_kind: &'static str,
        owner_id: &str,
        namespace: &Namespace,
    ) -> Result<(), StoreError> {
        let sql = self.sql(
            "INSERT INTO memory_namespaces (container_id, owner_kind, owner_id, ns_key, ns_value) VALUES ($1, $2, $3, $4, $5)",
        );
        for (key, value) in namespace {
            sqlx::query(AssertSqlSafe(sql.clone()))
                .bind(container)
                .bind(owner_kind)
                .bind(owner_id)
                .bind(key.as_str())
                .bind(value.as_str())
                .execute(&mut **tx)
                .await?;
        }
        Ok(())
    }

    /// The `WHERE` clause of a search over `alias` (`s` sessions or `w` working memory) and its
    /// arguments, the container being `$1`.
    fn search_where(
        alias: &'static str,
        owner_kind: &'static str,
        owner_column: &'static str,
        container: &str,
        filter: &Filter,
    ) -> (String, Vec<Arg>) {
        let mut sql = format!("WHERE {alias}.container_id = $1");
        let mut args = vec![Arg::Text(container.to_string())];
        if let Some(size) = filter.namespace_size {
            args.push(Arg::Int(size));
            sql += &format!(" AND {alias}.namespace_size = ${}", args.len());
        }
        if let (Some(kind), "w") = (&filter.payload_type, alias) {
            args.push(Arg::Text(kind.clone()));
            sql += &format!(" AND w.payload_type = ${}", args.len());
        }
        for (key, value) in &filter.namespace {
            args.push(Arg::Text(key.clone()));
            args.push(Arg::Text(value.clone()));
            sql += &format!(
                " AND EXISTS (SELECT 1 FROM memory_namespaces n WHERE n.container_id = {alias}.container_id \
                 AND n.owner_kind = '{owner_kind}' AND n.owner_id = {alias}.{owner_column} \
                 AND n.ns_key = ${} AND n.ns_value = ${})",
                args.len() - 1,
                args.len()
            );
        }
        (sql, args)
    }

    /// Runs `SELECT COUNT(*) FROM {from} {where}` and the page query; returns the total and
    /// the page's rows.
    async fn run_search(
        &self,
        columns: &'static str,
        from: &'static str,
        (where_sql, args): (String, Vec<Arg>),
        order: String,
        page: Page,
    ) -> Result<(i64, Vec<AnyRow>), StoreError> {
        let count_sql = self.dynamic_sql(format!("SELECT COUNT(*) FROM {from} {where_sql}"));
        let mut q = sqlx::query(AssertSqlSafe(count_sql));
        for a in &args {
            q = match a {
                Arg::Text(s) => q.bind(s.clone()),
                Arg::Int(i) => q.bind(*i),
            };
        }
        let total: i64 = q.fetch_one(&self.pool).await?.try_get(0)?;
        if page.size == 0 || page.from >= total {
            return Ok((total, Vec::new()));
        }
        let n = args.len();
        let page_sql = self.dynamic_sql(format!(
            "SELECT {columns} FROM {from} {where_sql} ORDER BY {order} LIMIT ${} OFFSET ${}",
            n + 1,
            n + 2
        ));
        let mut q = sqlx::query(AssertSqlSafe(page_sql));
        for a in args {
            q = match a {
                Arg::Text(s) => q.bind(s),
                Arg::Int(i) => q.bind(i),
            };
        }
        let rows = q
            .bind(page.size)
            .bind(page.from)
            .fetch_all(&self.pool)
            .await?;
        Ok((total, rows))
    }
}

fn direction(page: Page) -> &'static str {
    if page.descending { "DESC" } else { "ASC" }
}

#[async_trait]
impl MemoryStore for SqlStore {
    async fn create_container(&self, new: NewContainer) -> Result<Container, StoreError> {
        self.timed(async move {
            let now = now_ms();
            let container = Container {
                id: new_id(),
                name: new.name,
                description: new.description,
                configuration: new.configuration,
                created_time: now,
                last_updated_time: now,
                owner: Some(new.owner),
            };
            let sql = self.sql(
                "INSERT INTO memory_containers (container_id, name, description, configuration, next_seq, created_time, last_updated_time, owner) \
                 VALUES ($1, $2, $3, $4, 0, $5, $5, $6)",
            );
            sqlx::query(AssertSqlSafe(sql))
                .bind(container.id.as_str())
                .bind(container.name.as_str())
                .bind(container.description.clone())
                .bind(to_text(&container.configuration)?)
                .bind(now)
                .bind(container.owner.clone())
                .execute(&self.pool)
                .await?;
            Ok(container)
        })
        .await
    }

    async fn container(&self, id: &str) -> Result<Option<Container>, StoreError> {
        self.timed(async move {
            let sql = self.sql(
                "SELECT container_id, name, description, configuration, created_time, last_updated_time, owner \
                 FROM memory_containers WHERE container_id = $1",
            );
            let row = sqlx::query(AssertSqlSafe(sql))
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
            row.as_ref().map(container_row).transpose()
        })
        .await
    }

    async fn delete_container(&self, id: &str) -> Result<bool, StoreError> {
        self.timed(async move {
            let mut tx = self.pool.begin().await?;
            // The container row goes first: its lock keeps concurrent writers out until commit,
            // after which they find no container.
            let done = sqlx::query(AssertSqlSafe(
                self.sql("DELETE FROM memory_containers WHERE container_id = $1"),
            ))
            .bind(id)
            .execute(&mut *tx)
            .await?;
            if done.rows_affected() == 0 {
                return Ok(false);
            }
            for sql in [
                "DELETE FROM memory_namespaces WHERE container_id = $1",
                "DELETE FROM memory_working WHERE container_id = $1",
                "DELETE FROM memory_sessions WHERE container_id = $1",
            ] {
                sqlx::query(AssertSqlSafe(self.sql(sql)))
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(true)
        })
        .await
    }

    async fn search_containers(&self, page: Page) -> Result<Hits<Container>, StoreError> {
        self.timed(async move {
                let total: i64 = sqlx::query("SELECT COUNT(*) FROM memory_containers")
                    .fetch_one(&self.pool)
                    .await?
                    .try_get(0)?;
                let order = format!("created_time {0}, container_id {0}", direction(page));
                let sql = self.dynamic_sql(format!(
                "SELECT {CONTAINER_COLUMNS} FROM memory_containers ORDER BY {order} LIMIT $1 OFFSET $2"
            ));
                let rows = sqlx::query(AssertSqlSafe(sql))
                    .bind(page.size)
                    .bind(page.from)
                    .fetch_all(&self.pool)
                    .await?;
                Ok(Hits {
                    total,
                    items: rows.iter().map(container_row).collect::<Result<_, _>>()?,
                })
        })
        .await
    }

    async fn create_session(
        &self,
        container: &str,
        new: NewSession,
    ) -> Result<SessionCreated, StoreError> {
        self.timed(async move {
            let mut tx = self.pool.begin().await?;
            let Some((seq, _)) = self.lock_container(&mut tx, container).await? else {
                return Ok(SessionCreated::NoContainer);
            };
            let now = now_ms();
            let owner = new.owner;
            let session = Session {
                container_id: container.to_string(),
                session_id: new.session_id.unwrap_or_else(new_id),
                summary: new.summary,
                metadata: new.metadata,
                namespace: new.namespace,
                created_time: now,
                last_updated_time: now,
            };
            let sql = self.sql(
                "INSERT INTO memory_sessions (container_id, session_id, seq, summary, metadata, namespace, namespace_size, next_message_id, created_time, last_updated_time, owner) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, 0, $8, $8, $9) ON CONFLICT (container_id, session_id) DO NOTHING",
            );
            let done = sqlx::query(AssertSqlSafe(sql))
                .bind(container)
                .bind(session.session_id.as_str())
                .bind(seq)
                .bind(session.summary.clone())
                .bind(to_clean_text(&session.metadata)?)
                .bind(to_text(&session.namespace)?)
                .bind(count(session.namespace.len()))
                .bind(now)
                .bind(owner)
                .execute(&mut *tx)
                .await?;
            if done.rows_affected() == 0 {
                return Ok(SessionCreated::Exists);
            }
            self.insert_namespace(
                &mut tx,
                container,
                "session",
                &session.session_id,
                &session.namespace,
            )
            .await?;
            tx.commit().await?;
            Ok(SessionCreated::Created(session))
        })
        .await
    }

    async fn session(&self, container: &str, id: &str) -> Result<Option<Session>, StoreError> {
        self.timed(async move {
            let sql = self.sql(
                "SELECT s.container_id, s.session_id, s.summary, s.metadata, s.namespace, s.created_time, s.last_updated_time \
                 FROM memory_sessions s WHERE s.container_id = $1 AND s.session_id = $2",
            );
            let row = sqlx::query(AssertSqlSafe(sql))
                .bind(container)
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
            row.as_ref().map(session_row).transpose()
        })
        .await
    }

    async fn delete_session(&self, container: &str, id: &str) -> Result<bool, StoreError> {
        self.timed(async move {
            let mut tx = self.pool.begin().await?;
            if self.lock_container(&mut tx, container).await?.is_none() {
                return Ok(false);
            }
            let done = sqlx::query(AssertSqlSafe(self.sql(
                "DELETE FROM memory_sessions WHERE container_id = $1 AND session_id = $2",
            )))
            .bind(container)
            .bind(id)
            .execute(&mut *tx)
            .await?;
            if done.rows_affected() == 0 {
                return Ok(false);
            }
            for sql in [
                "DELETE FROM memory_namespaces WHERE container_id = $1 AND owner_kind = 'session' AND owner_id = $2",
                "DELETE FROM memory_namespaces WHERE container_id = $1 AND owner_kind = 'working' \
                 AND owner_id IN (SELECT memory_id FROM memory_working WHERE container_id = $1 AND session_id = $2)",
                "DELETE FROM memory_working WHERE container_id = $1 AND session_id = $2",
            ] {
                sqlx::query(AssertSqlSafe(self.sql(sql)))
                    .bind(container)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(true)
        })
        .await
    }

    async fn search_sessions(
        &self,
        container: &str,
        filter: &Filter,
        page: Page,
    ) -> Result<Hits<Session>, StoreError> {
        self.timed(async move {
            let clause = Self::search_where("s", "session", "session_id", container, filter);
            let order = format!("s.seq {}", direction(page));
            let (total, rows) = self
                .run_search(SESSION_COLUMNS, "memory_sessions s", clause, order, page)
                .await?;
            Ok(Hits {
                total,
                items: rows.iter().map(session_row).collect::<Result<_, _>>()?,
            })
        })
        .await
    }

    async fn add_working_memory(
        &self,
        container: &str,
        new: NewWorkingMemory,
    ) -> Result<Option<WorkingMemory>, StoreError> {
        self.timed(async move {
            let mut tx = self.pool.begin().await?;
            let Some((seq, configuration)) = self.lock_container(&mut tx, container).await? else {
                return Ok(None);
            };
            let mut namespace = new.namespace;
            let open_sessions = configuration
                .get("disable_session")
                .and_then(Value::as_bool)
                == Some(false);
            if open_sessions && !namespace.contains_key("session_id") {
                namespace.insert("session_id".to_string(), new_id());
            }
            let now = now_ms();
            let session_id = namespace.get("session_id").cloned();
            let mut message_id = None;
            if let Some(sid) = &session_id {
                // The container lock makes this read-then-write safe against concurrent adds.
                let sql = self.sql(
                    "SELECT next_message_id FROM memory_sessions WHERE container_id = $1 AND session_id = $2",
                );
                let next: Option<i64> = sqlx::query(AssertSqlSafe(sql))
                    .bind(container)
                    .bind(sid.as_str())
                    .fetch_optional(&mut *tx)
                    .await?
                    .map(|r| r.try_get(0))
                    .transpose()?;
                match next {
                    Some(n) => {
                        let sql = self.sql(
                            "UPDATE memory_sessions SET next_message_id = $1, last_updated_time = $2 WHERE container_id = $3 AND session_id = $4",
                        );
                        sqlx::query(AssertSqlSafe(sql))
                            .bind(n + 1)
                            .bind(now)
                            .bind(container)
                            .bind(sid.as_str())
                            .execute(&mut *tx)
                            .await?;
                        message_id = Some(n);
                    }
                    None => {
                        // A session opened by its first memory: its namespace is the memory's,
                        // less the session id itself.
                        let mut session_ns = namespace.clone();
                        session_ns.remove("session_id");
                        let sql = self.sql(
                            "INSERT INTO memory_sessions (container_id, session_id, seq, summary, metadata, namespace, namespace_size, next_message_id, created_time, last_updated_time, owner) \
                             VALUES ($1, $2, $3, NULL, '{}', $4, $5, 1, $6, $6, $7)",
                        );
                        sqlx::query(AssertSqlSafe(sql))
                            .bind(container)
                            .bind(sid.as_str())
                            .bind(seq)
                            .bind(to_text(&session_ns)?)
                            .bind(count(session_ns.len()))
                            .bind(now)
                            .bind(new.owner.as_str())
                            .execute(&mut *tx)
                            .await?;
                        self.insert_namespace(&mut tx, container, "session", sid, &session_ns)
                            .await?;
                        message_id = Some(0);
                    }
                }
            }
            let memory = WorkingMemory {
                container_id: container.to_string(),
                memory_id: new_id(),
                payload_type: new.payload_type,
                session_id,
                message_id,
                namespace,
                body: new.body,
                created_time: now,
                last_updated_time: now,
            };
            let sql = self.sql(
                "INSERT INTO memory_working (container_id, memory_id, seq, session_id, message_id, payload_type, namespace, namespace_size, body, created_time, last_updated_time, owner) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, $11)",
            );
            sqlx::query(AssertSqlSafe(sql))
                .bind(container)
                .bind(memory.memory_id.as_str())
                .bind(seq)
                .bind(memory.session_id.clone())
                .bind(memory.message_id)
                .bind(memory.payload_type.as_str())
                .bind(to_text(&memory.namespace)?)
                .bind(count(memory.namespace.len()))
                .bind(to_clean_text(&memory.body)?)
                .bind(now)
                .bind(new.owner.as_str())
                .execute(&mut *tx)
                .await?;
            self.insert_namespace(
                &mut tx,
                container,
                "working",
                &memory.memory_id,
                &memory.namespace,
            )
            .await?;
            tx.commit().await?;
            Ok(Some(memory))
        })
        .await
    }

    async fn working_memory(
        &self,
        container: &str,
        id: &str,
    ) -> Result<Option<WorkingMemory>, StoreError> {
        self.timed(async move {
            let sql = self.sql(
                "SELECT w.container_id, w.memory_id, w.payload_type, w.session_id, w.message_id, w.namespace, w.body, w.created_time, w.last_updated_time \
                 FROM memory_working w WHERE w.container_id = $1 AND w.memory_id = $2",
            );
            let row = sqlx::query(AssertSqlSafe(sql))
                .bind(container)
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
            row.as_ref().map(working_row).transpose()
        })
        .await
    }

    async fn delete_working_memory(&self, container: &str, id: &str) -> Result<bool, StoreError> {
        self.timed(async move {
            let mut tx = self.pool.begin().await?;
            let done = sqlx::query(AssertSqlSafe(
                self.sql("DELETE FROM memory_working WHERE container_id = $1 AND memory_id = $2"),
            ))
            .bind(container)
            .bind(id)
            .execute(&mut *tx)
            .await?;
            if done.rows_affected() == 0 {
                return Ok(false);
            }
            sqlx::query(AssertSqlSafe(self.sql(
                "DELETE FROM memory_namespaces WHERE container_id = $1 AND owner_kind = 'working' AND owner_id = $2",
            )))
            .bind(container)
            .bind(id)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(true)
        })
        .await
    }

    async fn search_working_memory(
        &self,
        container: &str,
        filter: &Filter,
        page: Page,
    ) -> Result<Hits<WorkingMemory>, StoreError> {
        self.timed(async move {
            let clause = Self::search_where("w", "working", "memory_id", container, filter);
            let dir = direction(page);
            // COALESCE: the backends disagree on where NULLs sort.
            let order = match page.sort {
                SortKey::Created => format!("w.seq {dir}"),
                SortKey::MessageId => format!("COALESCE(w.message_id, -1) {dir}, w.seq {dir}"),
            };
            let (total, rows) = self
                .run_search(WORKING_COLUMNS, "memory_working w", clause, order, page)
                .await?;
            Ok(Hits {
                total,
                items: rows.iter().map(working_row).collect::<Result<_, _>>()?,
            })
        })
        .await
    }
}
