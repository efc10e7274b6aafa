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
//! Errors are [`ApiError`] JSON. Creating an existing session is a 400.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{FromRef, Path, RawQuery, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::ApiError;
use crate::AppState;
use crate::store::StoreError;
use crate::store::memory::{
    Container, Filter, MemoryStore, Namespace, NewContainer, NewSession, NewWorkingMemory, Page,
    Session, SessionCreated, SortKey, WorkingMemory,
};

/// Routes of the memory API, over the gateway's store.
pub fn routes(store: Arc<dyn crate::store::Store>) -> Router<AppState> {
    let store: Arc<dyn MemoryStore> = store;
    routes_with(store)
}

/// Routes of the memory API over `store`, for any outer router state.
pub fn routes_with<S: Clone + Send + Sync + 'static>(store: Arc<dyn MemoryStore>) -> Router<S> {
    router::<Memory>().with_state(Memory(store))
}

/// The handlers' state: the memory store.
#[derive(Clone)]
struct Memory(Arc<dyn MemoryStore>);

const BASE: &str = "/_plugins/_ml/memory_containers";
const DEFAULT_SIZE: i64 = 10;
const MAX_SIZE: i64 = 1000;
const MAX_WINDOW: i64 = 10_000;
const MAX_CONDITIONS: usize = 32;
const MAX_NAMESPACE_KEYS: usize = 16;
const INPUT_TYPES: [&str; 3] = ["text", "content_blocks", "messages"];

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

// ---------------------------------------------------------------------------------------------
// Errors and parsing

fn bad(field: impl Into<String>, message: impl Into<String>) -> ApiError {
    ApiError::BadRequest {
        field: field.into(),
        message: message.into(),
    }
}

fn internal(e: StoreError) -> ApiError {
    ApiError::Internal(e.to_string())
}

fn no_container(id: &str) -> ApiError {
    ApiError::NotFound(format!("memory container {id} not found"))
}

/// Parses a JSON body; `None` for an empty one. Errors name the offending field.
fn parse_body<T: DeserializeOwned>(body: &[u8]) -> Result<Option<T>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let describe = |e: serde_json::Error| {
        if e.is_syntax() || e.is_eof() {
            format!("the body is not valid JSON: {e}")
        } else {
            e.to_string()
        }
    };
    let mut de = serde_json::Deserializer::from_slice(body);
    let parsed = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { String::new() } else { path };
        bad(field, describe(e.into_inner()))
    })?;
    de.end().map_err(|e| bad("", describe(e)))?;
    Ok(Some(parsed))
}

/// An id that may appear in a URL path.
fn check_id(field: &str, id: &str) -> Result<(), ApiError> {
    if id.is_empty() || id.len() > 256 {
        return Err(bad(field, "must be 1 to 256 bytes long"));
    }
    if id.chars().any(|c| c == '/' || c.is_control()) {
        return Err(bad(field, "must not contain '/' or control characters"));
    }
    Ok(())
}

fn check_namespace(field: &str, ns: &Namespace) -> Result<(), ApiError> {
    if ns.len() > MAX_NAMESPACE_KEYS {
        return Err(bad(
            field,
            format!("at most {MAX_NAMESPACE_KEYS} keys are allowed"),
        ));
    }
    for (key, value) in ns {
        if key.is_empty() || key.len() > 128 {
            return Err(bad(field, "keys must be 1 to 128 bytes long"));
        }
        if value.is_empty() || value.len() > 512 {
            return Err(bad(
                format!("{field}.{key}"),
                "must be a non-empty string of at most 512 bytes",
            ));
        }
    }
    if let Some(session) = ns.get("session_id") {
        check_id(&format!("{field}.session_id"), session)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Containers

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateContainerRequest {
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    configuration: Option<Map<String, Value>>,
}

async fn create_container(
    State(Memory(store)): State<Memory>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let req: CreateContainerRequest = parse_body(&body)?.ok_or_else(|| {
        bad(
            "",
            "a JSON body is required, e.g. {\"name\": \"...\", \"description\": \"...\"}",
        )
    })?;
    if req.name.trim().is_empty() {
        return Err(bad("name", "must not be empty"));
    }
    let configuration = req.configuration.unwrap_or_default();
    if configuration
        .get("disable_session")
        .is_some_and(|v| !v.is_boolean())
    {
        return Err(bad(
            "configuration.disable_session",
            "must be true or false",
        ));
    }
    let container = store
        .create_container(NewContainer {
            name: req.name,
            description: req.description,
            configuration,
        })
        .await
        .map_err(internal)?;
    Ok(Json(
        json!({ "memory_container_id": container.id, "status": "created" }),
    ))
}

fn container_source(c: &Container) -> Value {
    let mut source = json!({
        "name": c.name,
        "configuration": c.configuration,
        "created_time": c.created_time,
        "last_updated_time": c.last_updated_time,
    });
    if let Some(d) = &c.description {
        source["description"] = json!(d);
    }
    source
}

async fn get_container(
    State(Memory(store)): State<Memory>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let container = store
        .container(&id)
        .await
        .map_err(internal)?
        .ok_or_else(|| no_container(&id))?;
    Ok(Json(container_source(&container)))
}

async fn delete_container(
    State(Memory(store)): State<Memory>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    if !store.delete_container(&id).await.map_err(internal)? {
        return Err(no_container(&id));
    }
    Ok(Json(json!({ "_id": id, "result": "deleted" })))
}

async fn search_containers(
    State(Memory(store)): State<Memory>,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let start = Instant::now();
    let (_, page) = parse_search(Target::Containers, query.as_deref(), &body)?;
    let hits = store.search_containers(page).await.map_err(internal)?;
    let items = hits
        .items
        .iter()
        .map(|c| (c.id.clone(), container_source(c)))
        .collect();
    Ok(Json(search_response(start, hits.total, items)))
}

// ---------------------------------------------------------------------------------------------
// Working memory and sessions

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum PayloadType {
    Conversational,
    Data,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddMemoryRequest {
    #[serde(default)]
    messages: Option<Vec<Value>>,
    #[serde(default)]
    structured_data: Option<Map<String, Value>>,
    #[serde(default)]
    structured_data_blob: Option<Map<String, Value>>,
    #[serde(default)]
    binary_data: Option<String>,
    #[serde(default)]
    payload_type: Option<PayloadType>,
    #[serde(default)]
    namespace: Option<Namespace>,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    #[serde(default)]
    tags: Option<Map<String, Value>>,
    #[serde(default)]
    infer: Option<bool>,
}

const BLOCK_EXAMPLE: &str = "[{\"type\": \"text\", \"text\": \"...\"}]";

/// Messages must be structured: objects with an optional string `role` and `content`, an array
/// of content blocks each naming its `type`. Everything else in them is kept as sent.
fn check_messages(messages: &[Value]) -> Result<(), ApiError> {
    if messages.is_empty() {
        return Err(bad("messages", "must hold at least one message"));
    }
    for (i, m) in messages.iter().enumerate() {
        let field = format!("messages[{i}]");
        let Some(m) = m.as_object() else {
            return Err(bad(
                field,
                "a message must be an object with `role` and `content`",
            ));
        };
        if let Some(role) = m.get("role")
            && role.as_str().is_none_or(str::is_empty)
        {
            return Err(bad(
                format!("{field}.role"),
                "must be a string such as \"user\" or \"assistant\"",
            ));
        }
        let content_field = format!("{field}.content");
        let blocks = match m.get("content") {
            None => {
                return Err(bad(
                    content_field,
                    format!("is required: an array of content blocks such as {BLOCK_EXAMPLE}"),
                ));
            }
            Some(Value::Array(blocks)) => blocks,
            Some(_) => {
                return Err(bad(
                    content_field,
                    format!("must be an array of content blocks such as {BLOCK_EXAMPLE}"),
                ));
            }
        };
        if blocks.is_empty() {
            return Err(bad(content_field, "must hold at least one content block"));
        }
        for (j, b) in blocks.iter().enumerate() {
            if b.get("type")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                return Err(bad(
                    format!("{content_field}[{j}]"),
                    "a content block must be an object with a string `type` (\"text\", \"image\", ...)",
                ));
            }
        }
    }
    Ok(())
}

/// The input type the seeds ask to record in `metadata`.
fn input_type(
    messages: Option<&Vec<Value>>,
    blob: Option<&Map<String, Value>>,
) -> Option<&'static str> {
    if messages.is_some() {
        return Some("messages");
    }
    match blob?.get("input")? {
        Value::String(_) => Some("text"),
        Value::Array(items)
            if !items.is_empty() && items.iter().all(|i| i.get("role").is_some()) =>
        {
            Some("messages")
        }
        Value::Array(_) => Some("content_blocks"),
        _ => None,
    }
}

async fn add_memory(
    State(Memory(store)): State<Memory>,
    Path(container): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let req: AddMemoryRequest = parse_body(&body)?.ok_or_else(|| {
        bad(
            "",
            "a JSON body is required, e.g. {\"messages\": [...], \"namespace\": {\"session_id\": \"...\"}}",
        )
    })?;
    if req.infer == Some(true) {
        return Err(bad(
            "infer",
            "inference (fact extraction into long-term memory) is not supported here; send \"infer\": false or leave it out",
        ));
    }
    if let Some(messages) = &req.messages {
        check_messages(messages)?;
    }
    let payload_type = req.payload_type.unwrap_or(
        if req.messages.is_none() && (req.structured_data.is_some() || req.binary_data.is_some()) {
            PayloadType::Data
        } else {
            PayloadType::Conversational
        },
    );
    match payload_type {
        PayloadType::Conversational
            if req.messages.is_none() && req.structured_data_blob.is_none() =>
        {
            return Err(bad(
                "messages",
                "is required for a conversational memory (or give structured_data_blob)",
            ));
        }
        PayloadType::Data
            if req.structured_data.is_none()
                && req.structured_data_blob.is_none()
                && req.binary_data.is_none() =>
        {
            return Err(bad(
                "structured_data",
                "is required for a data memory (or give structured_data_blob or binary_data)",
            ));
        }
        _ => {}
    }
    let namespace = req.namespace.unwrap_or_default();
    check_namespace("namespace", &namespace)?;
    let mut metadata = req.metadata.unwrap_or_default();
    match metadata.get("input_type") {
        Some(Value::String(t)) if INPUT_TYPES.contains(&t.as_str()) => {}
        Some(_) => {
            return Err(bad(
                "metadata.input_type",
                "must be \"text\", \"content_blocks\" or \"messages\"",
            ));
        }
        None => {
            if let Some(t) = input_type(req.messages.as_ref(), req.structured_data_blob.as_ref()) {
                metadata.insert("input_type".into(), json!(t));
            }
        }
    }

    let mut stored = Map::new();
    if let Some(m) = req.messages {
        stored.insert("messages".into(), Value::Array(m));
    }
    if let Some(d) = req.structured_data {
        stored.insert("structured_data".into(), Value::Object(d));
    }
    if let Some(d) = req.structured_data_blob {
        stored.insert("structured_data_blob".into(), Value::Object(d));
    }
    if let Some(d) = req.binary_data {
        stored.insert("binary_data".into(), Value::String(d));
    }
    stored.insert("metadata".into(), Value::Object(metadata));
    stored.insert("tags".into(), Value::Object(req.tags.unwrap_or_default()));
    stored.insert("infer".into(), Value::Bool(false));

    let memory = store
        .add_working_memory(
            &container,
            NewWorkingMemory {
                payload_type: match payload_type {
                    PayloadType::Conversational => "conversational",
                    PayloadType::Data => "data",
                }
                .to_string(),
                namespace,
                body: stored,
            },
        )
        .await
        .map_err(internal)?
        .ok_or_else(|| no_container(&container))?;
    let mut answer = json!({ "working_memory_id": memory.memory_id });
    if let Some(s) = memory.session_id {
        answer["session_id"] = json!(s);
    }
    Ok(Json(answer))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct CreateSessionRequest {
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    summary: Option<String>,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    #[serde(default)]
    namespace: Option<Namespace>,
}

async fn create_session(
    State(Memory(store)): State<Memory>,
    Path(container): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let req: CreateSessionRequest = parse_body(&body)?.unwrap_or_default();
    let mut namespace = req.namespace.unwrap_or_default();
    check_namespace("namespace", &namespace)?;
    // The session's own id is not part of its namespace; a namespace naming it must agree.
    let ns_session = namespace.remove("session_id");
    let session_id = match (req.session_id, ns_session) {
        (Some(a), Some(b)) if a != b => {
            return Err(bad(
                "namespace.session_id",
                "differs from session_id; give one of them",
            ));
        }
        (a, b) => a.or(b),
    };
    if let Some(id) = &session_id {
        check_id("session_id", id)?;
    }
    let created = store
        .create_session(
            &container,
            NewSession {
                session_id: session_id.clone(),
                summary: req.summary,
                metadata: req.metadata.unwrap_or_default(),
                namespace,
            },
        )
        .await
        .map_err(internal)?;
    match created {
        SessionCreated::Created(s) => Ok(Json(
            json!({ "session_id": s.session_id, "status": "created" }),
        )),
        SessionCreated::Exists => Err(bad(
            "session_id",
            format!(
                "session {} already exists in this memory container",
                session_id.unwrap_or_default()
            ),
        )),
        SessionCreated::NoContainer => Err(no_container(&container)),
    }
}

fn session_source(s: &Session) -> Value {
    let mut source = json!({
        "memory_container_id": s.container_id,
        "metadata": s.metadata,
        "namespace": s.namespace,
        "namespace_size": s.namespace.len(),
        "created_time": s.created_time,
        "last_updated_time": s.last_updated_time,
    });
    if let Some(summary) = &s.summary {
        source["summary"] = json!(summary);
    }
    source
}

fn working_source(m: &WorkingMemory) -> Value {
    let mut source = m.body.clone();
    source.insert("memory_container_id".into(), json!(m.container_id));
    source.insert("payload_type".into(), json!(m.payload_type));
    if let Some(id) = m.message_id {
        source.insert("message_id".into(), json!(id));
    }
    source.insert("namespace".into(), json!(m.namespace));
    source.insert("namespace_size".into(), json!(m.namespace.len()));
    source.insert("created_time".into(), json!(m.created_time));
    source.insert("last_updated_time".into(), json!(m.last_updated_time));
    Value::Object(source)
}

/// The `{type}` of a memory path: `sessions` or `working`.
fn memory_type(kind: &str) -> Result<Target, ApiError> {
    match kind {
        "sessions" => Ok(Target::Sessions),
        "working" => Ok(Target::Working),
        "long-term" | "history" => Err(bad(
            "type",
            format!(
                "{kind} memory needs the container's LLM and embedding strategies, which this gateway does not run; supported types: sessions, working"
            ),
        )),
        other => Err(bad(
            "type",
            format!("unknown memory type {other:?}; supported types: sessions, working"),
        )),
    }
}

/// A 404 for a missing document: names the container when it is the container that is missing.
async fn missing(
    store: &dyn MemoryStore,
    container: &str,
    what: &str,
    id: &str,
) -> Result<ApiError, ApiError> {
    if store
        .container(container)
        .await
        .map_err(internal)?
        .is_none()
    {
        return Ok(no_container(container));
    }
    Ok(ApiError::NotFound(format!(
        "{what} {id} not found in memory container {container}"
    )))
}

async fn get_memory(
    State(Memory(store)): State<Memory>,
    Path((container, kind, id)): Path<(String, String, String)>,
) -> Result<Json<Value>, ApiError> {
    let target = memory_type(&kind)?;
    let found = match target {
        Target::Sessions => store
            .session(&container, &id)
            .await
            .map_err(internal)?
            .map(|s| session_source(&s)),
        _ => store
            .working_memory(&container, &id)
            .await
            .map_err(internal)?
            .map(|m| working_source(&m)),
    };
    match found {
        Some(source) => Ok(Json(source)),
        None => Err(missing(&*store, &container, target.noun(), &id).await?),
    }
}

async fn delete_memory(
    State(Memory(store)): State<Memory>,
    Path((container, kind, id)): Path<(String, String, String)>,
) -> Result<Json<Value>, ApiError> {
    let target = memory_type(&kind)?;
    let deleted = match target {
        Target::Sessions => store.delete_session(&container, &id).await,
        _ => store.delete_working_memory(&container, &id).await,
    }
    .map_err(internal)?;
    if !deleted {
        return Err(missing(&*store, &container, target.noun(), &id).await?);
    }
    Ok(Json(json!({ "_id": id, "result": "deleted" })))
}

async fn search_memories(
    State(Memory(store)): State<Memory>,
    Path((container, kind)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let start = Instant::now();
    let target = memory_type(&kind)?;
    let (filter, page) = parse_search(target, query.as_deref(), &body)?;
    if store
        .container(&container)
        .await
        .map_err(internal)?
        .is_none()
    {
        return Err(no_container(&container));
    }
    let (total, items) = match target {
        Target::Sessions => {
            let hits = store
                .search_sessions(&container, &filter, page)
                .await
                .map_err(internal)?;
            let items = hits
                .items
                .iter()
                .map(|s| (s.session_id.clone(), session_source(s)))
                .collect();
            (hits.total, items)
        }
        _ => {
            let hits = store
                .search_working_memory(&container, &filter, page)
                .await
                .map_err(internal)?;
            let items = hits
                .items
                .iter()
                .map(|m| (m.memory_id.clone(), working_source(m)))
                .collect();
            (hits.total, items)
        }
    };
    Ok(Json(search_response(start, total, items)))
}

// ---------------------------------------------------------------------------------------------
// Search requests

/// What a search or a memory path addresses; decides which filters and sort keys are allowed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    Containers,
    Sessions,
    Working,
}

impl Target {
    fn noun(self) -> &'static str {
        match self {
            Target::Containers => "memory container",
            Target::Sessions => "session",
            Target::Working => "working memory",
        }
    }

    fn fields(self) -> &'static str {
        match self {
            Target::Containers => "none (memory containers support match_all only)",
            Target::Sessions => "namespace.<key>, namespace_size",
            Target::Working => "namespace.<key>, namespace_size, payload_type",
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct SearchRequest {
    #[serde(default)]
    query: Option<Value>,
    #[serde(default)]
    from: Option<i64>,
    #[serde(default)]
    size: Option<i64>,
    #[serde(default)]
    sort: Option<Value>,
}

fn parse_search(
    target: Target,
    query_string: Option<&str>,
    body: &[u8],
) -> Result<(Filter, Page), ApiError> {
    let req: SearchRequest = parse_body(body)?.unwrap_or_default();
    let mut filter = Filter::default();
    if let Some(q) = &req.query {
        parse_query(q, target, "query", &mut filter)?;
    }
    let mut from = req.from;
    let mut size = req.size;
    let mut sort = match &req.sort {
        Some(s) => parse_sort(s, target)?,
        None => (SortKey::Created, false),
    };
    for (key, value) in url::form_urlencoded::parse(query_string.unwrap_or("").as_bytes()) {
        let int = |v: &str| {
            v.parse::<i64>()
                .map_err(|_| bad(key.to_string(), "must be an integer"))
        };
        match &*key {
            "from" => from = Some(int(&value)?),
            "size" => size = Some(int(&value)?),
            "sort" => {
                let (field, order) = value.split_once(':').unwrap_or((&value, "asc"));
                sort = parse_sort(&json!({ field: order }), target)?;
            }
            "pretty" => {}
            "namespace_size" | "payload_type" => {
                let v = if key == "namespace_size" {
                    json!(int(&value)?)
                } else {
                    json!(value)
                };
                apply_term(&key, &v, target, &key, &mut filter)?;
            }
            k if k.starts_with("namespace.") => {
                apply_term(k, &json!(value), target, k, &mut filter)?;
            }
            other => {
                return Err(bad(
                    other,
                    "unknown parameter; expected from, size, sort, namespace.<key>, namespace_size or payload_type",
                ));
            }
        }
    }
    let from = from.unwrap_or(0);
    let size = size.unwrap_or(DEFAULT_SIZE);
    if from < 0 {
        return Err(bad("from", "must not be negative"));
    }
    if !(0..=MAX_SIZE).contains(&size) {
        return Err(bad("size", format!("must be between 0 and {MAX_SIZE}")));
    }
    if from + size > MAX_WINDOW {
        return Err(bad(
            "from",
            format!("from + size must be at most {MAX_WINDOW} (the result window)"),
        ));
    }
    Ok((
        filter,
        Page {
            from,
            size,
            sort: sort.0,
            descending: sort.1,
        },
    ))
}

/// `"field"`, `{"field": "desc"}`, `{"field": {"order": "desc"}}` or a one-element array of
/// these.
fn parse_sort(sort: &Value, target: Target) -> Result<(SortKey, bool), ApiError> {
    const HINT: &str = "expected \"created_time\", {\"created_time\": \"desc\"} or {\"created_time\": {\"order\": \"desc\"}}";
    let one = match sort {
        Value::Array(items) if items.len() == 1 => &items[0],
        Value::Array(_) => return Err(bad("sort", "exactly one sort key is supported")),
        other => other,
    };
    let (field, order) = match one {
        Value::String(f) => (f.as_str(), "asc"),
        Value::Object(o) if o.len() == 1 => {
            let Some((f, spec)) = o.iter().next() else {
                return Err(bad("sort", HINT));
            };
            let order = match spec {
                Value::String(s) => s.as_str(),
                Value::Object(s) => s.get("order").and_then(Value::as_str).unwrap_or("asc"),
                _ => return Err(bad("sort", HINT)),
            };
            (f.as_str(), order)
        }
        _ => return Err(bad("sort", HINT)),
    };
    let key = match (field, target) {
        ("created_time", _) => SortKey::Created,
        ("message_id", Target::Working) => SortKey::MessageId,
        _ => {
            let allowed = if target == Target::Working {
                "created_time or message_id"
            } else {
                "created_time"
            };
            return Err(bad(
                "sort",
                format!("cannot sort on {field:?}; sortable: {allowed}"),
            ));
        }
    };
    let descending = match order {
        "asc" => false,
        "desc" => true,
        other => {
            return Err(bad(
                "sort",
                format!("order must be \"asc\" or \"desc\", not {other:?}"),
            ));
        }
    };
    Ok((key, descending))
}

fn parse_query(q: &Value, target: Target, path: &str, filter: &mut Filter) -> Result<(), ApiError> {
    let clause = q
        .as_object()
        .filter(|o| o.len() == 1)
        .and_then(|o| o.iter().next());
    let Some((name, body)) = clause else {
        return Err(bad(
            path,
            "a query is an object with one clause: match_all, term or bool",
        ));
    };
    match name.as_str() {
        "match_all" => Ok(()),
        "term" if target != Target::Containers => {
            let term = body
                .as_object()
                .filter(|o| o.len() == 1)
                .and_then(|o| o.iter().next());
            let Some((field, value)) = term else {
                return Err(bad(
                    format!("{path}.term"),
                    "a term query names one field, e.g. {\"namespace.user_id\": \"bob\"}",
                ));
            };
            let value = match value {
                Value::Object(o) => o.get("value").ok_or_else(|| {
                    bad(
                        format!("{path}.term.{field}"),
                        "expected a value or {\"value\": ...}",
                    )
                })?,
                v => v,
            };
            apply_term(
                field,
                value,
                target,
                &format!("{path}.term.{field}"),
                filter,
            )
        }
        "bool" if target != Target::Containers => {
            let Some(parts) = body.as_object() else {
                return Err(bad(format!("{path}.bool"), "must be an object"));
            };
            for (occur, clauses) in parts {
                let at = format!("{path}.bool.{occur}");
                if occur != "must" && occur != "filter" {
                    return Err(bad(at, "unsupported; bool supports must and filter"));
                }
                match clauses {
                    Value::Array(list) => {
                        for (i, c) in list.iter().enumerate() {
                            parse_query(c, target, &format!("{at}[{i}]"), filter)?;
                        }
                    }
                    single => parse_query(single, target, &at, filter)?,
                }
            }
            Ok(())
        }
        other => Err(bad(
            path,
            match target {
                Target::Containers => {
                    format!("unsupported query {other:?}; memory containers support match_all only")
                }
                _ => format!(
                    "unsupported query {other:?}; supported: match_all, term, bool (must, filter)"
                ),
            },
        )),
    }
}

fn apply_term(
    field: &str,
    value: &Value,
    target: Target,
    at: &str,
    filter: &mut Filter,
) -> Result<(), ApiError> {
    if filter.namespace.len() + 2 > MAX_CONDITIONS {
        return Err(bad(
            at,
            format!("at most {MAX_CONDITIONS} conditions are allowed"),
        ));
    }
    match (field, target) {
        (_, Target::Containers) => Err(bad(
            at,
            format!(
                "memory containers cannot be filtered; filterable: {}",
                target.fields()
            ),
        )),
        ("namespace_size", _) => {
            let n = value
                .as_i64()
                .ok_or_else(|| bad(at, "namespace_size must be an integer"))?;
            filter.namespace_size = Some(n);
            Ok(())
        }
        ("payload_type", Target::Working) => {
            let v = value
                .as_str()
                .filter(|v| *v == "conversational" || *v == "data")
                .ok_or_else(|| bad(at, "payload_type must be \"conversational\" or \"data\""))?;
            filter.payload_type = Some(v.to_string());
            Ok(())
        }
        (f, _) if f.starts_with("namespace.") && f.len() > "namespace.".len() => {
            let v = value
                .as_str()
                .ok_or_else(|| bad(at, "namespace values are strings"))?;
            filter
                .namespace
                .push((f["namespace.".len()..].to_string(), v.to_string()));
            Ok(())
        }
        (f, _) => Err(bad(
            at,
            format!("cannot filter on {f:?}; filterable: {}", target.fields()),
        )),
    }
}

/// OpenSearch's search response shape. Results are not scored: `_score` and `max_score` are
/// null, as for a sorted search.
fn search_response(start: Instant, total: i64, hits: Vec<(String, Value)>) -> Value {
    let hits: Vec<Value> = hits
        .into_iter()
        .map(|(id, source)| json!({ "_id": id, "_score": null, "_source": source }))
        .collect();
    json!({
        "took": u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
        "timed_out": false,
        "hits": {
            "total": { "value": total, "relation": "eq" },
            "max_score": null,
            "hits": hits,
        },
    })
}
