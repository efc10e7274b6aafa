//! What connectors, models and agents share: documents answered with their ids and times, and
//! the `_search` subset (`match`, `term`, `terms`, `ids`, `match_all`, `bool`).

use serde_json::{Value, json};

use super::MlError;
use crate::store::docs::Doc;

/// A document as `GET` answers it: the stored body with its times (never a credential: those
/// live sealed beside the body).
pub fn public(doc: &Doc) -> Value {
    let mut v = doc.body.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("credential");
        o.insert("created_time".into(), json!(doc.created_ms));
        o.insert("last_updated_time".into(), json!(doc.updated_ms));
    }
    v
}

/// The delete answer.
pub fn deleted(index: &str, id: &str) -> Value {
    json!({ "_index": index, "_id": id, "_version": 1, "result": "deleted" })
}

fn field<'a>(doc: &'a Value, path: &str) -> Option<&'a Value> {
    let path = path.strip_suffix(".keyword").unwrap_or(path);
    path.split('.').try_fold(doc, |v, k| v.get(k))
}

fn tokens(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .collect()
}

fn as_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn one(query: &Value, key: &str) -> Result<(String, Value), MlError> {
    let obj = query
        .as_object()
        .filter(|o| o.len() == 1)
        .ok_or_else(|| MlError::bad(format!("query.{key}"), "must name one field"))?;
    let (f, v) = obj
        .iter()
        .next()
        .map(|(f, v)| (f.clone(), v.clone()))
        .unwrap_or_default();
    // `{"name": {"query": "x"}}` and `{"type": {"value": "flow"}}` are the long forms.
    let v = match v {
        Value::Object(o) => o
            .get("query")
            .or_else(|| o.get("value"))
            .cloned()
            .unwrap_or(Value::Null),
        v => v,
    };
    Ok((f, v))
}

/// Whether `doc` (with its `id`) matches `query`.
pub fn matches(query: &Value, id: &str, doc: &Value) -> Result<bool, MlError> {
    let Some(q) = query.as_object() else {
        return Err(MlError::bad("query", "must be an object"));
    };
    let Some((kind, body)) = q.iter().next() else {
        return Ok(true);
    };
    Ok(match kind.as_str() {
        "match_all" => true,
        "match" => {
            let (f, v) = one(body, "match")?;
            let wanted = tokens(&as_text(&v));
            let have = field(doc, &f)
                .map(|x| tokens(&as_text(x)))
                .unwrap_or_default();
            !wanted.is_empty() && wanted.iter().any(|t| have.contains(t))
        }
        "term" => {
            let (f, v) = one(body, "term")?;
            if f == "_id" {
                as_text(&v) == id
            } else {
                field(doc, &f).is_some_and(|x| as_text(x) == as_text(&v))
            }
        }
        "terms" => {
            let (f, v) = one(body, "terms")?;
            let list = v.as_array().cloned().unwrap_or_default();
            field(doc, &f).is_some_and(|x| list.iter().any(|w| as_text(w) == as_text(x)))
        }
        "ids" => body
            .get("values")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|v| v.as_str() == Some(id))),
        "bool" => {
            let list = |k: &str| -> Vec<Value> {
                match body.get(k) {
                    Some(Value::Array(a)) => a.clone(),
                    Some(v @ Value::Object(_)) => vec![v.clone()],
                    _ => Vec::new(),
                }
            };
            let mut ok = true;
            for c in list("must").iter().chain(list("filter").iter()) {
                ok &= matches(c, id, doc)?;
            }
            for c in list("must_not") {
                ok &= !matches(&c, id, doc)?;
            }
            let should = list("should");
            if !should.is_empty() && list("must").is_empty() && list("filter").is_empty() {
                let mut any = false;
                for c in &should {
                    any |= matches(c, id, doc)?;
                }
                ok &= any;
            }
            ok
        }
        other => {
            return Err(MlError::bad(
                format!("query.{other}"),
                "not supported; use match, term, terms, ids, match_all or bool",
            ));
        }
    })
}

/// Runs a `_search` body over `docs` and answers in OpenSearch's shape.
pub fn search(index: &str, body: &Value, docs: Vec<Doc>) -> Result<Value, MlError> {
    let query = body
        .get("query")
        .cloned()
        .unwrap_or(json!({"match_all": {}}));
    let size = body
        .get("size")
        .and_then(Value::as_u64)
        .unwrap_or(10)
        .min(1000) as usize;
    let from = body.get("from").and_then(Value::as_u64).unwrap_or(0) as usize;
    let mut hits = Vec::new();
    for d in &docs {
        let doc = public(d);
        if matches(&query, &d.id, &doc)? {
            hits.push(json!({ "_index": index, "_id": d.id, "_score": 1.0, "_source": doc }));
        }
    }
    let total = hits.len();
    let hits: Vec<Value> = hits.into_iter().skip(from).take(size).collect();
    Ok(json!({
        "took": 0,
        "timed_out": false,
        "hits": {
            "total": { "value": total, "relation": "eq" },
            "max_score": if total > 0 { json!(1.0) } else { Value::Null },
            "hits": hits,
        }
    }))
}
