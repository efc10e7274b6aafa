//! The knowledge-base ingestion API over the embedded indexes:
//!
//! - `GET /indices`: every index with its document count
//! - `PUT /indices/{name}` (body `{"embedding": {"model_id", "field"}}` optional: the registered
//!   model that embeds documents at ingestion), `DELETE /indices/{name}`
//! - `POST /indices/{name}/documents` `{id, fields, metadata}`: add or replace one document
//! - `POST /indices/{name}/documents/_bulk` `{documents: [...]}`: per-document errors reported
//! - `DELETE /indices/{name}/documents/{id}`
//! - `POST /indices/{name}/_search` `{query, top_k, filter}`: what the `search` tool sees; a
//!   query DSL body (`{"query": {...}, "size"}`) runs as `SearchIndexTool` runs it and answers
//!   OpenSearch's `hits`
//!
//! Bodies are JSON; problems answer [`ApiError`]s naming the offending field.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{delete, get, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::ApiError;
use crate::AppState;
use crate::tools::search::embedded::EmbeddingSpec;
use crate::tools::search::embedded::{MAX_BULK, MAX_TOP_K};
use crate::tools::search::{Document, SearchError, SearchRequest};

/// Routes of the ingestion API.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/indices", get(list_indices))
        .route("/indices/{name}", put(create_index).delete(delete_index))
        .route("/indices/{name}/documents", post(add_document))
        .route("/indices/{name}/documents/_bulk", post(bulk))
        .route("/indices/{name}/documents/{id}", delete(delete_document))
        .route("/indices/{name}/_search", post(search))
}

impl From<SearchError> for ApiError {
    fn from(e: SearchError) -> Self {
        match e {
            SearchError::InvalidName(_) | SearchError::Exists(_) => ApiError::BadRequest {
                field: "name".into(),
                message: e.to_string(),
            },
            SearchError::NoIndex(_) | SearchError::NoDocument { .. } => {
                ApiError::NotFound(e.to_string())
            }
            SearchError::Invalid { field, message } => ApiError::BadRequest { field, message },
            SearchError::Embedding(message) => ApiError::BadRequest {
                field: "embedding".into(),
                message,
            },
            other => ApiError::Internal(other.to_string()),
        }
    }
}

/// Parses a JSON body, naming the path of the first problem.
fn parse<T: DeserializeOwned>(body: Result<Bytes, BytesRejection>) -> Result<T, ApiError> {
    let bytes = body.map_err(|e| match e {
        BytesRejection::FailedToBufferBody(_) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            ApiError::PayloadTooLarge
        }
        other => ApiError::BadRequest {
            field: String::new(),
            message: other.body_text(),
        },
    })?;
    from_json(&bytes)
}

fn from_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        ApiError::BadRequest {
            // `.` is the root, `?` a syntax error before any field.
            field: if path == "." || path == "?" {
                String::new()
            } else {
                path
            },
            message: e.inner().to_string(),
        }
    })
}

async fn list_indices(State(state): State<AppState>) -> Json<Value> {
    Json(json!({ "indices": state.search.list() }))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    #[serde(default)]
    embedding: Option<EmbeddingSpec>,
}

/// An optional body `{"embedding": {"model_id", "field"}}` names the registered model that
/// embeds the documents (`field`, or all their text) at ingestion.
async fn create_index(
    State(state): State<AppState>,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let body = match body {
        Ok(b) if b.iter().all(u8::is_ascii_whitespace) => CreateBody::default(),
        other => parse(other)?,
    };
    if let Some(spec) = &body.embedding {
        use crate::agent::spec::ModelLookup;
        let found = state
            .agents
            .models()
            .model(&spec.model_id)
            .await
            .map_err(ApiError::StoreUnavailable)?;
        if found.is_none() {
            return Err(ApiError::BadRequest {
                field: "embedding.model_id".into(),
                message: format!("no model {:?} is registered", spec.model_id),
            });
        }
        if let Some(f) = &spec.field
            && !crate::settings::valid_name(f)
        {
            return Err(ApiError::BadRequest {
                field: "embedding.field".into(),
                message: "field names are 1-64 letters, digits, '-' or '_'".into(),
            });
        }
    }
    let info = state
        .search
        .create_index_with(&name, body.embedding.clone())
        .await?;
    let mut answer = json!({"acknowledged": true, "index": info.name});
    if let Some(e) = body.embedding {
        answer["embedding"] = json!(e);
    }
    Ok((StatusCode::CREATED, Json(answer)))
}

async fn delete_index(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    state.search.delete_index(&name).await?;
    Ok(Json(json!({"acknowledged": true, "index": name})))
}

async fn add_document(
    State(state): State<AppState>,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let doc: Document = parse(body)?;
    let id = doc.id.clone();
    let report = state.search.add_documents(&name, vec![doc]).await?;
    let (status, result) = if report.replaced > 0 {
        (StatusCode::OK, "updated")
    } else {
        (StatusCode::CREATED, "created")
    };
    Ok((
        status,
        Json(json!({"index": name, "id": id, "result": result})),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BulkBody {
    documents: Vec<Value>,
}

/// Valid documents are written in one commit; invalid ones are reported by position.
async fn bulk(
    State(state): State<AppState>,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let BulkBody { documents } = parse(body)?;
    if documents.len() > MAX_BULK {
        return Err(ApiError::BadRequest {
            field: "documents".into(),
            message: format!("at most {MAX_BULK} documents per request"),
        });
    }
    let mut good = Vec::new();
    let mut errors = Vec::new();
    for (i, raw) in documents.into_iter().enumerate() {
        let id = raw.get("id").cloned().unwrap_or(Value::Null);
        let parsed = serde_path_to_error::deserialize::<_, Document>(raw)
            .map_err(|e| {
                let path = e.path().to_string();
                if path == "." || path == "?" {
                    e.inner().to_string()
                } else {
                    format!("{path}: {}", e.inner())
                }
            })
            .and_then(|d| d.validate().map(|()| d).map_err(|e| e.to_string()));
        match parsed {
            Ok(d) => good.push(d),
            Err(error) => errors.push(json!({"position": i, "id": id, "error": error})),
        }
    }
    let report = if good.is_empty() {
        // Still answer 404 for a missing index, even when nothing was valid.
        if !state.search.contains(&name) {
            return Err(SearchError::NoIndex(name).into());
        }
        Default::default()
    } else {
        state.search.add_documents(&name, good).await?
    };
    Ok(Json(json!({
        "index": name,
        "indexed": report.indexed,
        "replaced": report.replaced,
        "failed": errors.len(),
        "errors": errors,
    })))
}

async fn delete_document(
    State(state): State<AppState>,
    Path((name, id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    state.search.delete_document(&name, &id).await?;
    Ok(Json(json!({"index": name, "id": id, "result": "deleted"})))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchBody {
    #[serde(default)]
    query: String,
    #[serde(default)]
    top_k: Option<usize>,
    #[serde(default)]
    filter: Map<String, Value>,
}

async fn search(
    State(state): State<AppState>,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let raw: Value = parse(body)?;
    // A query DSL object: what SearchIndexTool runs on this index, answered as OpenSearch does.
    if raw.get("query").is_some_and(Value::is_object) {
        let hits = state.search.search_dsl(&name, &raw).await?;
        let hits = crate::tools::search::ml_run::opensearch_hits(&hits, raw.get("_source"));
        return Ok(Json(json!({"hits": {
            "total": {"value": hits.len(), "relation": "eq"},
            "hits": hits,
        }})));
    }
    let b: SearchBody =
        serde_path_to_error::deserialize(raw).map_err(|e| ApiError::BadRequest {
            field: e.path().to_string(),
            message: e.inner().to_string(),
        })?;
    let top_k = b.top_k.unwrap_or(10);
    if !(1..=MAX_TOP_K).contains(&top_k) {
        return Err(ApiError::BadRequest {
            field: "top_k".into(),
            message: format!("must be between 1 and {MAX_TOP_K}"),
        });
    }
    let hits = state
        .search
        .search(
            &name,
            SearchRequest {
                query: b.query,
                top_k,
                filter: b.filter,
                include_fields: true,
            },
        )
        .await?;
    Ok(Json(json!({"index": name, "hits": hits})))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_problems_name_the_field() {
        let e = from_json::<SearchBody>(br#"{"query": 5}"#).unwrap_err();
        assert!(
            matches!(&e, ApiError::BadRequest { field, .. } if field == "query"),
            "{e:?}"
        );
        let e = from_json::<Document>(br#"{"id": "x", "fields": {"t": 1}}"#).unwrap_err();
        assert!(
            matches!(&e, ApiError::BadRequest { field, .. } if field == "fields.t"),
            "{e:?}"
        );
        let e = from_json::<SearchBody>(b"{").unwrap_err();
        assert!(
            matches!(&e, ApiError::BadRequest { field, .. } if field.is_empty()),
            "{e:?}"
        );
    }

    #[test]
    fn search_errors_map_to_statuses() {
        use axum::response::IntoResponse;
        let status = |e: SearchError| ApiError::from(e).into_response().status();
        assert_eq!(status(SearchError::NoIndex("x".into())), 404);
        assert_eq!(status(SearchError::Exists("x".into())), 400);
        assert_eq!(status(SearchError::InvalidName("X".into())), 400);
        assert_eq!(status(SearchError::Storage("disk".into())), 500);
    }
}
