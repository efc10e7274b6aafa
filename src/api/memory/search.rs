//! Search requests and responses: the `query` DSL subset (`match_all`, `term`, `bool` with
//! `must` / `filter`), `sort`, `from`/`size` from the body or the query string (which wins),
//! and OpenSearch's response shape.

use std::time::Instant;

use serde::Deserialize;
use serde_json::{Value, json};

use super::request::{bad, parse_body};
use crate::api::ApiError;
use crate::store::memory::{Filter, Page, SortKey};

const DEFAULT_SIZE: i64 = 10;
const MAX_SIZE: i64 = 1000;
const MAX_WINDOW: i64 = 10_000;
const MAX_CONDITIONS: usize = 32;

/// What a search or a memory path addresses; decides which filters and sort keys are allowed.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Target {
    Containers,
    Sessions,
    Working,
}

impl Target {
    pub(super) fn noun(self) -> &'static str {
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

pub(super) fn parse_search(
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
pub(super) fn search_response(start: Instant, total: i64, hits: Vec<(String, Value)>) -> Value {
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
