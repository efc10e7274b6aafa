//! Connectors and models: create / register, get, delete, search, `_predict`.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use futures::StreamExt;
use serde_json::{Map, Value, json};

use super::docs::{deleted, public, search};
use super::{MlError, json_body};
use crate::AppState;
use crate::agent::registry::new_doc_id;
use crate::agent::spec::{ModelLookup, model_config};
use crate::connector::{CallError, Connector, validate};
use crate::conversation::Message;
use crate::model::{ModelEvent, ModelRequest};
use crate::store::docs::{Doc, DocKind};

const CONNECTOR_INDEX: &str = ".plugins-ml-connector";
const MODEL_INDEX: &str = ".plugins-ml-model";

fn seal(state: &AppState, id: &str, cred: Map<String, Value>) -> Result<Option<String>, MlError> {
    if cred.is_empty() {
        return Ok(None);
    }
    state
        .agents
        .sealer()
        .seal(id, &Value::Object(cred))
        .map(Some)
        .map_err(|e| MlError::Internal(e.to_string()))
}

/// `POST /_plugins/_ml/connectors/_create`.
pub async fn create_connector(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, MlError> {
    let body = json_body(body)?;
    let (public, cred) = validate(&body, "")?;
    crate::connector::check_urls(&public, "", state.agents.net())?;
    let id = new_doc_id();
    let name = public["name"].as_str().unwrap_or("").to_string();
    let mut doc = Doc::new(&id, name, public);
    doc.sealed = seal(&state, &id, cred)?;
    state.store.put_doc(DocKind::Connector, &doc).await?;
    Ok(Json(json!({ "connector_id": id })))
}

/// `GET /_plugins/_ml/connectors/{id}`.
pub async fn get_connector(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, MlError> {
    match state.store.doc(DocKind::Connector, &id).await? {
        Some(d) => Ok(Json(public(&d))),
        None => Err(MlError::NotFound(format!("no connector {id:?}"))),
    }
}

/// `DELETE /_plugins/_ml/connectors/{id}`: refused while a model uses it.
pub async fn delete_connector(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, MlError> {
    let users: Vec<String> = state
        .store
        .docs(DocKind::Model)
        .await?
        .into_iter()
        .filter(|m| m.body.get("connector_id").and_then(Value::as_str) == Some(id.as_str()))
        .map(|m| m.id)
        .collect();
    delete_unused(&state, DocKind::Connector, &id, &users, "model").await
}

/// Deletes a document nothing uses any more (`users` name what still does, as `user_noun`s).
async fn delete_unused(
    state: &AppState,
    kind: DocKind,
    id: &str,
    users: &[String],
    user_noun: &str,
) -> Result<Json<Value>, MlError> {
    let (noun, index) = match kind {
        DocKind::Connector => ("connector", CONNECTOR_INDEX),
        _ => ("model", MODEL_INDEX),
    };
    if !users.is_empty() {
        return Err(MlError::Conflict(format!(
            "{} {user_noun}(s) still use {noun} {id:?}: {users:?}; delete them first",
            users.len()
        )));
    }
    if state.store.delete_doc(kind, id).await? {
        Ok(Json(deleted(index, id)))
    } else {
        Err(MlError::NotFound(format!("no {noun} {id:?}")))
    }
}

/// A `_search` over every document of `kind`.
async fn search_kind(
    state: &AppState,
    kind: DocKind,
    index: &str,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, MlError> {
    let body = json_body(body)?;
    let docs = state.store.docs(kind).await?;
    Ok(Json(search(index, &body, docs)?))
}

/// `POST /_plugins/_ml/connectors/_search`.
pub async fn search_connectors(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, MlError> {
    search_kind(&state, DocKind::Connector, CONNECTOR_INDEX, body).await
}

/// `POST /_plugins/_ml/models/_register`: a remote model over a `connector_id` or an inline
/// `connector` (whose credential is sealed with the model).
pub async fn register_model(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, MlError> {
    let body = json_body(body)?;
    let name = match body.get("name") {
        Some(Value::String(n)) if !n.trim().is_empty() => n.clone(),
        _ => return Err(MlError::bad("name", "required, a non-empty string")),
    };
    match body.get("function_name").and_then(Value::as_str) {
        None => {}
        Some(f) if f.eq_ignore_ascii_case("remote") => {}
        Some(f) => {
            return Err(MlError::bad(
                "function_name",
                format!("{f:?} is not supported: this gateway serves remote models only"),
            ));
        }
    }
    let id = new_doc_id();
    let mut stored = json!({
        "name": name,
        "function_name": "remote",
        "description": body.get("description").cloned().unwrap_or(json!("")),
        "model_state": "DEPLOYED",
    });
    let mut sealed = None;
    match (body.get("connector_id"), body.get("connector")) {
        (Some(_), Some(_)) => {
            return Err(MlError::bad(
                "connector",
                "give connector_id or connector, not both",
            ));
        }
        (Some(Value::String(cid)), None) => {
            if state.store.doc(DocKind::Connector, cid).await?.is_none() {
                return Err(MlError::bad(
                    "connector_id",
                    format!("no connector {cid:?}"),
                ));
            }
            stored["connector_id"] = json!(cid);
        }
        (Some(_), None) => return Err(MlError::bad("connector_id", "must be a string")),
        (None, Some(c)) => {
            let (public, cred) = validate(c, "connector.")?;
            crate::connector::check_urls(&public, "connector.", state.agents.net())?;
            stored["connector"] = public;
            sealed = seal(&state, &id, cred)?;
        }
        (None, None) => {
            return Err(MlError::bad(
                "connector_id",
                "required: connector_id or an inline connector",
            ));
        }
    }
    let mut doc = Doc::new(&id, name, stored);
    doc.sealed = sealed;
    state.store.put_doc(DocKind::Model, &doc).await?;
    Ok(Json(
        json!({ "task_id": new_doc_id(), "status": "CREATED", "model_id": id }),
    ))
}

/// `GET /_plugins/_ml/models/{id}`.
pub async fn get_model(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, MlError> {
    match state.store.doc(DocKind::Model, &id).await? {
        Some(d) => Ok(Json(public(&d))),
        None => Err(MlError::NotFound(format!("no model {id:?}"))),
    }
}

/// Registered agents whose `llm` or `MLModelTool` uses model `id`.
async fn agents_using(state: &AppState, id: &str) -> Result<Vec<String>, MlError> {
    Ok(state
        .store
        .docs(DocKind::Agent)
        .await?
        .into_iter()
        .filter(|a| {
            a.body.pointer("/llm/model_id").and_then(Value::as_str) == Some(id)
                || a.body
                    .get("tools")
                    .and_then(Value::as_array)
                    .is_some_and(|t| {
                        t.iter().any(|t| {
                            t.pointer("/parameters/model_id").and_then(Value::as_str) == Some(id)
                        })
                    })
        })
        .map(|a| a.id)
        .collect())
}

/// `DELETE /_plugins/_ml/models/{id}`: refused while an agent uses it.
pub async fn delete_model(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, MlError> {
    let users = agents_using(&state, &id).await?;
    delete_unused(&state, DocKind::Model, &id, &users, "agent").await
}

/// `POST /_plugins/_ml/models/_search`.
pub async fn search_models(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, MlError> {
    search_kind(&state, DocKind::Model, MODEL_INDEX, body).await
}

/// `POST /_plugins/_ml/models/{id}/_deploy` and `_undeploy`: remote models are always ready.
pub async fn deploy(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, MlError> {
    if state.store.doc(DocKind::Model, &id).await?.is_none() {
        return Err(MlError::NotFound(format!("no model {id:?}")));
    }
    Ok(Json(
        json!({ "task_id": new_doc_id(), "task_type": "DEPLOY_MODEL", "status": "COMPLETED" }),
    ))
}

/// `POST /_plugins/_ml/models/{id}/_predict`: the connector's predict action with the body's
/// `parameters` (SigV4-signed for `aws_sigv4` connectors); with `text_docs`, embeddings through
/// the action's pre/post-process functions (a `scripted` model embeds offline); with
/// `query_text` and `text_docs`, a rerank.
pub async fn predict(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, MlError> {
    let body = json_body(body)?;
    let params = match body.get("parameters") {
        None => Map::new(),
        Some(Value::Object(p)) => p.clone(),
        Some(_) => return Err(MlError::bad("parameters", "must be an object")),
    };
    let text_docs = match body.get("text_docs") {
        None => None,
        Some(Value::Array(a)) if !a.is_empty() && a.iter().all(Value::is_string) => Some(
            a.iter()
                .filter_map(|d| d.as_str().map(str::to_string))
                .collect::<Vec<_>>(),
        ),
        Some(_) => {
            return Err(MlError::bad(
                "text_docs",
                "must be a non-empty array of strings",
            ));
        }
    };
    let query_text = match body.get("query_text") {
        None => None,
        Some(Value::String(q)) => Some(q.clone()),
        Some(_) => return Err(MlError::bad("query_text", "must be a string")),
    };
    let models = state.agents.models();
    let model = models
        .model(&id)
        .await
        .map_err(MlError::Internal)?
        .ok_or_else(|| MlError::NotFound(format!("no model {id:?}")))?;
    let connector = Connector {
        doc: &model.connector,
        credential: &model.credential,
    };
    let net = state.agents.net();
    let answer = match (text_docs, query_text) {
        (Some(docs), Some(q)) => {
            if connector.is_scripted() {
                return Err(MlError::bad(
                    "query_text",
                    "the offline (scripted) model does not rerank",
                ));
            }
            connector.predict_rerank(net, &q, &docs, &params).await
        }
        (Some(docs), None) => connector.predict_text_docs(net, &docs, &params).await,
        (None, Some(_)) => return Err(MlError::bad("text_docs", "required with query_text")),
        (None, None) if connector.is_scripted() => {
            return scripted_predict(&state, &model, &params).await.map(Json);
        }
        (None, None) => connector.predict(net, &params).await,
    };
    match answer {
        Ok(v) => Ok(Json(v)),
        Err(CallError::Refused(e)) => Err(MlError::bad("actions.url", e.to_string())),
        Err(CallError::Template(m)) => Err(MlError::bad("parameters", m)),
        Err(CallError::Upstream { status, body }) => Err(MlError::Upstream {
            reason: format!("the model endpoint answered {status}"),
            details: json!({ "upstream_status": status, "upstream_body": body }),
        }),
        Err(e) => Err(MlError::Upstream {
            reason: e.to_string(),
            details: json!({}),
        }),
    }
}

/// `_predict` on a scripted model: its fixture answers the `prompt`.
async fn scripted_predict(
    state: &AppState,
    model: &crate::agent::spec::ResolvedModel,
    params: &Map<String, Value>,
) -> Result<Value, MlError> {
    let prompt = params
        .get("prompt")
        .or_else(|| params.get("question"))
        .and_then(Value::as_str)
        .ok_or_else(|| MlError::bad("parameters.prompt", "required"))?;
    let cfg = model_config(
        model,
        None,
        "model",
        params,
        state.settings.model_idle_timeout_secs,
    )?;
    let provider = crate::agent::build_provider(&cfg, state.agents.net())
        .map_err(|e| MlError::bad("model", e.to_string()))?;
    let mut stream = provider.stream(ModelRequest {
        messages: vec![Message::user_text(prompt)],
        ..ModelRequest::default()
    });
    let mut text = String::new();
    while let Some(e) = stream.next().await {
        match e {
            Ok(ModelEvent::TextDelta(d)) => text.push_str(&d),
            Ok(_) => {}
            Err(e) => {
                return Err(MlError::Upstream {
                    reason: e.to_string(),
                    details: json!({}),
                });
            }
        }
    }
    Ok(json!({
        "inference_results": [{
            "output": [{ "name": "response", "dataAsMap": { "response": text } }],
            "status_code": 200,
        }]
    }))
}
