//! `PUT /_cluster/settings` and `GET /_cluster/settings` for the `plugins.ml_commons.*` keys
//! ml-commons users set before registering things (seed 000: `trusted_connector_endpoints_regex`,
//! `mcp_connector_enabled`). The gateway has no cluster: the settings are kept (in the store,
//! shared by gateways on one PostgreSQL) and answered back as OpenSearch does, and none of them
//! widens what the gateway allows: outbound addresses stay under `[outbound]`, MCP connectors
//! are always enabled. Admin keys only (the auth middleware's default scope).

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use serde_json::{Map, Value, json};

use super::{MlError, json_body};
use crate::AppState;
use crate::store::docs::{Doc, DocKind};

/// The prefix every accepted setting has.
const PREFIX: &str = "plugins.ml_commons.";
const DOC_ID: &str = "cluster";

/// Flattens `{"plugins": {"ml_commons": {"x": 1}}}` and `{"plugins.ml_commons.x": 1}` alike
/// into dotted keys with text values (OpenSearch answers settings as strings; lists stay lists).
fn flatten(prefix: &str, v: &Value, out: &mut Map<String, Value>) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, x, out);
            }
        }
        Value::Array(a) => {
            let items = a
                .iter()
                .map(|x| match x {
                    Value::String(s) => json!(s),
                    other => json!(other.to_string()),
                })
                .collect();
            out.insert(prefix.to_string(), Value::Array(items));
        }
        Value::String(s) => {
            out.insert(prefix.to_string(), json!(s));
        }
        Value::Null => {
            out.insert(prefix.to_string(), Value::Null);
        }
        other => {
            out.insert(prefix.to_string(), json!(other.to_string()));
        }
    }
}

/// Dotted keys back into OpenSearch's nested answer.
fn nest(flat: &Map<String, Value>) -> Value {
    let mut root = Map::new();
    for (k, v) in flat {
        let mut node = &mut root;
        let mut parts = k.split('.').peekable();
        while let Some(p) = parts.next() {
            if parts.peek().is_none() {
                node.insert(p.to_string(), v.clone());
            } else {
                let next = node
                    .entry(p.to_string())
                    .or_insert_with(|| Value::Object(Map::new()));
                if !next.is_object() {
                    *next = Value::Object(Map::new());
                }
                let Some(m) = next.as_object_mut() else { break };
                node = m;
            }
        }
    }
    Value::Object(root)
}

async fn stored(state: &AppState) -> Result<(Map<String, Value>, Map<String, Value>), MlError> {
    let doc = state.store.doc(DocKind::Settings, DOC_ID).await?;
    let part = |k: &str| {
        doc.as_ref()
            .and_then(|d| d.body.get(k))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    };
    Ok((part("persistent"), part("transient")))
}

/// `PUT /_cluster/settings`: `persistent` and / or `transient` settings; a `null` value
/// removes one.
pub async fn put(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, MlError> {
    let body = json_body(body)?;
    let obj = body.as_object().cloned().unwrap_or_default();
    if let Some(k) = obj.keys().find(|k| *k != "persistent" && *k != "transient") {
        return Err(MlError::bad(k, "expected persistent and / or transient"));
    }
    let (mut persistent, mut transient) = stored(&state).await?;
    let mut answer = json!({ "acknowledged": true, "persistent": {}, "transient": {} });
    for (part, kept) in [
        ("persistent", &mut persistent),
        ("transient", &mut transient),
    ] {
        let Some(given) = obj.get(part) else { continue };
        if !given.is_object() {
            return Err(MlError::bad(part, "must be an object of settings"));
        }
        let mut flat = Map::new();
        flatten("", given, &mut flat);
        if let Some(k) = flat.keys().find(|k| !k.starts_with(PREFIX)) {
            return Err(MlError::BadRequest {
                field: format!("{part}.{k}"),
                reason: format!("not a setting of this gateway; it keeps {PREFIX}* settings"),
                details: json!({ "expected": format!("{PREFIX}*") }),
            });
        }
        for (k, v) in &flat {
            if v.is_null() {
                kept.remove(k);
            } else {
                kept.insert(k.clone(), v.clone());
            }
        }
        answer[part] = nest(&flat);
    }
    let doc = Doc::new(
        DOC_ID,
        "",
        json!({ "persistent": persistent, "transient": transient }),
    );
    state.store.put_doc(DocKind::Settings, &doc).await?;
    Ok(Json(answer))
}

/// `GET /_cluster/settings`: what was set, nested as OpenSearch answers (`?flat_settings=true`
/// gives dotted keys).
pub async fn get(
    State(state): State<AppState>,
    axum::extract::RawQuery(query): axum::extract::RawQuery,
) -> Result<Json<Value>, MlError> {
    let flat_wanted = url::form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .any(|(k, v)| k == "flat_settings" && v != "false");
    let (persistent, transient) = stored(&state).await?;
    let shape = |m: Map<String, Value>| {
        if flat_wanted {
            Value::Object(m)
        } else {
            nest(&m)
        }
    };
    Ok(Json(
        json!({ "persistent": shape(persistent), "transient": shape(transient) }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_and_dotted_settings_flatten_alike_and_nest_back() {
        let mut a = Map::new();
        flatten(
            "",
            &json!({"plugins": {"ml_commons": {"mcp_connector_enabled": true, "trusted_connector_endpoints_regex": ["^https://x$"]}}}),
            &mut a,
        );
        let mut b = Map::new();
        flatten(
            "",
            &json!({"plugins.ml_commons.mcp_connector_enabled": "true", "plugins.ml_commons.trusted_connector_endpoints_regex": ["^https://x$"]}),
            &mut b,
        );
        assert_eq!(a, b);
        assert_eq!(
            nest(&a)["plugins"]["ml_commons"]["mcp_connector_enabled"],
            "true"
        );
    }
}
