//! The agentic memory API, shaped after OpenSearch ml-commons' memory containers (the seeds'
//! "agentic memory"): a container holds sessions and working memory; every document carries a
//! `namespace` (`agent_id`, `session_id`, `user_id`, or any other string keys) that searches
//! filter on, so agents, users and sessions sharing a container stay apart.
//!
//! Endpoints, all under `/_plugins/_ml/memory_containers`:
//! - `POST /_create` `{name, description?, configuration?}` → `{"memory_container_id", "status":
//!   "created"}`. `configuration` is stored and returned whole; only `disable_session` is read.
//! - `GET /{id}` → the container's source `{name, description, configuration, created_time,
//!   last_updated_time}`; `DELETE /{id}` → `{"_id", "result": "deleted"}` (its sessions and
//!   working memory go with it); `GET|POST /_search` lists containers (`match_all` only).
//! - `POST /{id}/memories` adds one working-memory document: `{messages, namespace, metadata,
//!   tags, infer, payload_type, structured_data, structured_data_blob, binary_data}` →
//!   `{"session_id"?, "working_memory_id"}`. `messages` are stored whole (every field, every
//!   content block: images, documents, tool use ...); each needs `content`, an array of blocks
//!   with a string `type`. The input type goes to `metadata.input_type` unless given: `messages`
//!   for `messages`, else from `structured_data_blob.input` (a string is `text`, an array of
//!   messages `messages`, another array `content_blocks`), as the seeds propose. `infer: true`
//!   is refused: fact extraction needs an LLM this API does not run.
//! - `POST /{id}/memories/sessions` `{session_id?, summary?, metadata?, namespace?}` →
//!   `{"session_id", "status": "created"}`. A memory whose `namespace.session_id` names no
//!   session opens it; without `session_id` a session is opened only when the container's
//!   configuration says `"disable_session": false` (ml-commons' rule).
//! - `GET|DELETE /{id}/memories/{type}/{memory_id}` with `type` `sessions` or `working`; GET
//!   answers the document's `_source`. Deleting a session deletes its working memories.
//! - `GET|POST /{id}/memories/{type}/_search`: OpenSearch's response shape `{took, timed_out,
//!   hits: {total: {value, relation}, max_score, hits: [{_id, _score, _source}]}}`.
//!
//! Working-memory `_source` (the seeds' index mapping): `memory_container_id`, `payload_type`,
//! `messages`, `message_id` (0, 1, 2 ... within the session), `namespace`, `namespace_size`,
//! `metadata`, `tags`, `infer`, the optional data fields, `created_time`, `last_updated_time`.
//!
//! Choices where the seeds are silent: search takes `from`/`size` (default 0/10, `size` at
//! most 1000, `from + size` at most 10000) in the body or the query string (the query string
//! wins); `sort` is `created_time` (insertion order, the default, ascending) or, for working
//! memory, `message_id`, as `"created_time"`, `{"created_time": "desc"}`,
//! `{"created_time": {"order": "desc"}}`, a one-element array of these, or `sort=field:desc`.
//! `query` is a subset of the query DSL: `match_all`, `term` on `namespace.<key>`,
//! `namespace_size` (exact-namespace isolation) or `payload_type`, and `bool` with `must` /
//! `filter`; the query string may add `namespace.<key>=value`, `namespace_size=n`,
//! `payload_type=...`. Anything else is a 400 naming the offending field, never ignored.
//! Errors are [`ApiError`](super::ApiError) JSON. Creating an existing session is a 400.
//!
//! Map:
//! - this file: [`routes`], [`routes_with`], the handlers' state and the route table.
//! - `request.rs`: error constructors, JSON bodies, id and namespace checks shared by handlers.
//! - `containers.rs`: create, get, delete and search memory containers.
//! - `working.rs`: adding a working-memory document (message checks, payload and input type).
//! - `sessions.rs`: creating a session.
//! - `memories.rs`: get, delete and search of sessions and working memory by `{type}`.
//! - `search.rs`: the search request (`query` DSL subset, `sort`, `from`/`size`, query string)
//!   and OpenSearch's response shape.

mod containers;
mod memories;
mod request;
mod search;
mod sessions;
mod working;

use std::sync::Arc;

use axum::Router;
use axum::extract::FromRef;
use axum::routing::{get, post};

use crate::AppState;
use crate::store::memory::MemoryStore;
use containers::{create_container, delete_container, get_container, search_containers};
use memories::{delete_memory, get_memory, search_memories};
use sessions::create_session;
use working::add_memory;

/// Routes of the memory API, over the gateway's store.
pub fn routes(store: Arc<dyn crate::store::Store>) -> Router<AppState> {
    let store: Arc<dyn MemoryStore> = store;
    routes_with(store)
}

/// Routes of the memory API over `store`, for any outer router state.
pub fn routes_with<S: Clone + Send + Sync + 'static>(store: Arc<dyn MemoryStore>) -> Router<S> {
    router::<Memory>().with_state(Memory(store))
}

/// The owner recorded for what a request creates: its key's name, or the anonymous
/// principal's `""` on a gateway without keys (see [`crate::api::auth::Principal`]).
fn owner_name(caller: Option<&crate::api::auth::Caller>) -> String {
    caller.map(|c| c.name.clone()).unwrap_or_default()
}

/// The handlers' state: the memory store.
#[derive(Clone)]
struct Memory(Arc<dyn MemoryStore>);

const BASE: &str = "/_plugins/_ml/memory_containers";

fn router<S>() -> Router<S>
where
    Memory: FromRef<S>,
    S: Clone + Send + Sync + 'static,
{
    Router::new()
        .route(&format!("{BASE}/_create"), post(create_container))
        .route(
            &format!("{BASE}/_search"),
            get(search_containers).post(search_containers),
        )
        .route(
            &format!("{BASE}/{{container_id}}"),
            get(get_container).delete(delete_container),
        )
        .route(
            &format!("{BASE}/{{container_id}}/memories"),
            post(add_memory),
        )
        .route(
            &format!("{BASE}/{{container_id}}/memories/sessions"),
            post(create_session),
        )
        .route(
            &format!("{BASE}/{{container_id}}/memories/{{kind}}/_search"),
            get(search_memories).post(search_memories),
        )
        .route(
            &format!("{BASE}/{{container_id}}/memories/{{kind}}/{{memory_id}}"),
            get(get_memory).delete(delete_memory),
        )
}
