//! Agentic memory storage, shaped after OpenSearch ml-commons' memory containers: a container
//! holds sessions and working memory (raw conversation documents). Every session and working
//! memory carries a `namespace` (string keys and values such as `agent_id`, `session_id`,
//! `user_id`) that searches filter on, so callers sharing a container stay isolated.
//!
//! [`SqlStore`] implements [`MemoryStore`] with one set of statements for SQLite and
//! PostgreSQL (migration `0002_memory`). Writes to a container first take its row
//! (`UPDATE memory_containers ... next_seq + 1`): that row lock orders concurrent writers, hands
//! out the per-container sequence that paging sorts by, and makes a write racing a container
//! delete either land before it (and be deleted) or find no container.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::sql::SqlStore;
use super::{Store, StoreError, now_ms};

/// A namespace: string keys (`agent_id`, `session_id`, `user_id`, ...) to string values.
pub type Namespace = BTreeMap<String, String>;

/// A memory container.
#[derive(Debug, Clone, PartialEq)]
pub struct Container {
    /// `memory_container_id`.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its description.
    pub description: Option<String>,
    /// The `configuration` object as given at creation (stored, not interpreted, apart from
    /// `disable_session`).
    pub configuration: Map<String, Value>,
    /// Milliseconds since the epoch.
    pub created_time: i64,
    /// Milliseconds since the epoch.
    pub last_updated_time: i64,
    /// The principal that created it (an API key's name; `""` for the anonymous one); `None`
    /// for containers created before owners were recorded.
    pub owner: Option<String>,
}

/// A container to create.
#[derive(Debug, Clone, PartialEq)]
pub struct NewContainer {
    /// Its name.
    pub name: String,
    /// Its description.
    pub description: Option<String>,
    /// Its configuration object.
    pub configuration: Map<String, Value>,
    /// The principal creating it.
    pub owner: String,
}

/// A session of a container.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    /// Its container.
    pub container_id: String,
    /// `session_id`.
    pub session_id: String,
    /// An optional summary or description.
    pub summary: Option<String>,
    /// Free-form metadata (a JSON object).
    pub metadata: Map<String, Value>,
    /// Its namespace (never holds `session_id`: that is the session itself).
    pub namespace: Namespace,
    /// Milliseconds since the epoch.
    pub created_time: i64,
    /// Milliseconds since the epoch; moves when a working memory is added to the session.
    pub last_updated_time: i64,
}

/// A session to create.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NewSession {
    /// A caller-chosen id; a random one when `None`.
    pub session_id: Option<String>,
    /// An optional summary.
    pub summary: Option<String>,
    /// Free-form metadata.
    pub metadata: Map<String, Value>,
    /// Its namespace (without `session_id`).
    pub namespace: Namespace,
    /// The principal creating it.
    pub owner: String,
}

/// Outcome of creating a session.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionCreated {
    /// Created.
    Created(Session),
    /// A session with this id already exists in the container.
    Exists,
    /// No such container.
    NoContainer,
}

/// One working-memory document: what one add-memory request stored.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkingMemory {
    /// Its container.
    pub container_id: String,
    /// `working_memory_id`.
    pub memory_id: String,
    /// `conversational` or `data`.
    pub payload_type: String,
    /// The namespace's `session_id`, if any.
    pub session_id: Option<String>,
    /// Position within its session (0, 1, 2, ... in insertion order); `None` without a session.
    pub message_id: Option<i64>,
    /// Its namespace.
    pub namespace: Namespace,
    /// The stored payload, whole: `messages`, `metadata`, `tags`, `infer`, `structured_data`,
    /// `structured_data_blob`, `binary_data`.
    pub body: Map<String, Value>,
    /// Milliseconds since the epoch.
    pub created_time: i64,
    /// Milliseconds since the epoch.
    pub last_updated_time: i64,
}

/// A working memory to add.
#[derive(Debug, Clone, PartialEq)]
pub struct NewWorkingMemory {
    /// `conversational` or `data`.
    pub payload_type: String,
    /// Its namespace. Without `session_id`, a new session is opened only when the container's
    /// configuration has `"disable_session": false` (as in ml-commons).
    pub namespace: Namespace,
    /// The payload, stored whole.
    pub body: Map<String, Value>,
    /// The principal adding it (a session it opens is theirs too).
    pub owner: String,
}

/// Which documents a search returns: every condition must hold.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Filter {
    /// `namespace.<key> == value` for each pair (a key may repeat: all must hold).
    pub namespace: Vec<(String, String)>,
    /// The document's namespace has exactly this many keys (exact-namespace isolation).
    pub namespace_size: Option<i64>,
    /// Working memory only: `conversational` or `data`.
    pub payload_type: Option<String>,
}

/// The order of search results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortKey {
    /// Insertion order (which is also `created_time` order).
    #[default]
    Created,
    /// Working memory: `message_id` (documents without a session first), then insertion order.
    MessageId,
}

/// A page of search results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    /// Results to skip.
    pub from: i64,
    /// Results to return.
    pub size: i64,
    /// Sort key.
    pub sort: SortKey,
    /// Newest (or highest) first.
    pub descending: bool,
}

/// One page of results and how many matched in all.
#[derive(Debug, Clone, PartialEq)]
pub struct Hits<T> {
    /// How many documents matched.
    pub total: i64,
    /// This page.
    pub items: Vec<T>,
}

/// Storage of the agentic memory API.
#[async_trait]
pub trait MemoryStore: Send + Sync + 'static {
    /// Creates a container with a fresh id.
    async fn create_container(&self, new: NewContainer) -> Result<Container, StoreError>;
    /// A container.
    async fn container(&self, id: &str) -> Result<Option<Container>, StoreError>;
    /// Deletes a container with its sessions and working memory; `false` when unknown.
    async fn delete_container(&self, id: &str) -> Result<bool, StoreError>;
    /// Containers, oldest first unless `page.descending`.
    async fn search_containers(&self, page: Page) -> Result<Hits<Container>, StoreError>;

    /// Creates a session.
    async fn create_session(
        &self,
        container: &str,
        new: NewSession,
    ) -> Result<SessionCreated, StoreError>;
    /// A session.
    async fn session(&self, container: &str, id: &str) -> Result<Option<Session>, StoreError>;
    /// Deletes a session and its working memories; `false` when unknown.
    async fn delete_session(&self, container: &str, id: &str) -> Result<bool, StoreError>;
    /// Sessions of a container matching `filter` (`payload_type` is ignored).
    async fn search_sessions(
        &self,
        container: &str,
        filter: &Filter,
        page: Page,
    ) -> Result<Hits<Session>, StoreError>;

    /// Stores a working memory, opening its session if new; `None` when the container is
    /// unknown.
    async fn add_working_memory(
        &self,
        container: &str,
        new: NewWorkingMemory,
    ) -> Result<Option<WorkingMemory>, StoreError>;
    /// A working memory.
    async fn working_memory(
        &self,
        container: &str,
        id: &str,
    ) -> Result<Option<WorkingMemory>, StoreError>;
    /// Deletes a working memory; `false` when unknown.
    async fn delete_working_memory(&self, container: &str, id: &str) -> Result<bool, StoreError>;
    /// Working memories of a container matching `filter`.
    async fn search_working_memory(
        &self,
        container: &str,
        filter: &Filter,
        page: Page,
    ) -> Result<Hits<WorkingMemory>, StoreError>;
}

mod sql;
