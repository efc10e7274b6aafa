//! Running the ml-commons index tools: against an OpenSearch cluster ([`Cluster`]) or on the
//! embedded indexes ([`SearchService`]), answering in ml-commons' output shapes:
//!
//! - `SearchIndexTool`, `VectorDBTool`: one JSON line per hit,
//!   `{"_index", "_id", "_score", "_source"}` (empty text when nothing matched;
//!   `return_raw_response` gives the whole search response);
//! - `ListIndexTool`: a CSV table with a `row` column; `CatIndexTool`: the `_cat/indices`
//!   columns separated by tabs;
//! - `IndexMappingTool`: `index: <name>`, its `mappings:` and `settings:` as `key=value` lines.
//!
//! The two that find documents also show them to the UI as a `citations` activity when the
//! run streams what tools send.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};

use super::citations;
use super::cluster::{Cluster, ClusterError, check_index};
use super::embedded::{Hit, SearchService};
use super::ml::{DEFAULT_DOC_SIZE, DEFAULT_K, MlToolConfig, MlToolType, count, list};
use crate::connector::template::{Escape, render, render_value};
use crate::conversation::ToolSpec;
use crate::tools::{Tool, ToolContext, ToolOutput};

/// Where the tool's indices are.
#[derive(Clone)]
pub enum MlBackend {
    /// An OpenSearch cluster.
    Cluster(Arc<Cluster>),
    /// The gateway's own indexes.
    Embedded,
}

/// One ml-commons tool, ready to call.
pub struct MlTool {
    cfg: MlToolConfig,
    backend: MlBackend,
    /// The embedded indexes, and the embedder every backend uses.
    service: Arc<SearchService>,
}

impl MlTool {
    /// The tool of `cfg` on `backend`.
    pub fn new(cfg: MlToolConfig, backend: MlBackend, service: Arc<SearchService>) -> Self {
        Self {
            cfg,
            backend,
            service,
        }
    }

    fn fail(&self, msg: impl std::fmt::Display) -> ToolOutput {
        ToolOutput::error(format!("{}: {msg}", self.cfg.spec.name))
    }

    async fn run(&self, args: Value, ctx: ToolContext) -> ToolOutput {
        let mut params = self.cfg.params.clone();
        if let Value::Object(a) = args {
            params.extend(a);
        }
        let mut found = None;
        let out = match self.cfg.ty {
            MlToolType::SearchIndex => self.search_index(&params, &mut found).await,
            MlToolType::VectorDb => self.vector_db(&params, &mut found).await,
            MlToolType::ListIndex => self.list_indices(&params, true).await,
            MlToolType::CatIndex => self.list_indices(&params, false).await,
            MlToolType::IndexMapping => self.index_mapping(&params).await,
        };
        if out.is_ok()
            && let Some(Found { query, hits }) = found
        {
            let cited = hits.iter().map(citations::from_opensearch_hit).collect();
            citations::send(&ctx, &query, cited).await;
        }
        match out {
            Ok(text) => ToolOutput::ok(text),
            Err(e) => self.fail(e),
        }
    }

    /// Index and query: from the `input` template (filled with the parameters and the call's
    /// arguments), else from `index` and `query` themselves.
    fn index_and_query(&self, params: &Map<String, Value>) -> Result<(String, Value), String> {
        let mut p = params.clone();
        if let Some(q) = p.get("query").cloned() {
            let filled = match &q {
                Value::Object(_) => {
                    render_value(&q, params, Escape::Raw).map_err(|e| e.to_string())?
                }
                Value::String(s) => Value::String(
                    render(s, params, &Map::new(), Escape::Json).map_err(|e| e.to_string())?,
                ),
                other => other.clone(),
            };
            p.insert("query".into(), filled);
        }
        let (index, query) = match p.get("input").and_then(Value::as_str) {
            Some(template) if !template.trim().is_empty() => {
                let text =
                    render(template, &p, &Map::new(), Escape::Json).map_err(|e| e.to_string())?;
                match serde_json::from_str::<Value>(&text) {
                    Ok(Value::Object(o)) if o.contains_key("index") && o.contains_key("query") => {
                        (o.get("index").cloned(), o.get("query").cloned())
                    }
                    _ => (p.get("index").cloned(), p.get("query").cloned()),
                }
            }
            _ => (p.get("index").cloned(), p.get("query").cloned()),
        };
        let index = index
            .as_ref()
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
            .map(str::to_string);
        let query = match query {
            Some(Value::String(s)) => serde_json::from_str::<Value>(&s).ok(),
            Some(v @ Value::Object(_)) => Some(v),
            _ => None,
        };
        match (index, query) {
            (Some(i), Some(q)) if q.is_object() => Ok((i, q)),
            _ => Err("SearchIndexTool's two parameters: index and query are required and should be in valid format".into()),
        }
    }

    async fn search_index(
        &self,
        params: &Map<String, Value>,
        found: &mut Option<Found>,
    ) -> Result<String, String> {
        let (index, mut query) = self.index_and_query(params)?;
        // What the search was for, as a UI shows it: the query clause.
        let label = query.get("query").unwrap_or(&query).to_string();
        if let (Some(size), Value::Object(q)) = (self.cfg.fill_size, &mut query) {
            q.entry("size").or_insert(json!(size));
        }
        let raw = params
            .get("return_raw_response")
            .is_some_and(|v| v == &json!(true) || v == &json!("true"));
        match &self.backend {
            MlBackend::Cluster(c) => {
                let resp = self.cluster_search(c, &index, &query).await?;
                let hits = resp
                    .pointer("/hits/hits")
                    .and_then(Value::as_array)
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                let text = if raw {
                    resp.to_string()
                } else {
                    hit_lines(hits)
                };
                *found = Some(Found::new(label, hits));
                Ok(text)
            }
            MlBackend::Embedded => {
                let hits = self
                    .service
                    .search_dsl(&index, &query)
                    .await
                    .map_err(|e| e.to_string())?;
                let docs = opensearch_hits(&hits, query.get("_source"));
                let text = if raw {
                    json!({"hits": {"total": {"value": docs.len(), "relation": "eq"},
                    "hits": docs}})
                    .to_string()
                } else {
                    hit_lines(&docs)
                };
                *found = Some(Found::new(label, &docs));
                Ok(text)
            }
        }
    }

    async fn cluster_search(
        &self,
        c: &Cluster,
        index: &str,
        body: &Value,
    ) -> Result<Value, String> {
        for i in index.split(',') {
            check_index(i.trim())?;
        }
        let url = c.url(&[index, "_search"]).map_err(|e| e.to_string())?;
        c.request(reqwest::Method::POST, url, Some(body))
            .await
            .map_err(|e| e.to_string())
    }

    async fn vector_db(
        &self,
        params: &Map<String, Value>,
        found: &mut Option<Found>,
    ) -> Result<String, String> {
        let template = params
            .get("input")
            .and_then(Value::as_str)
            .unwrap_or("${parameters.question}");
        let text = render(template, params, &Map::new(), Escape::Raw).map_err(|e| e.to_string())?;
        if text.trim().is_empty() {
            return Err("[input] is null or empty, can not process it.".into());
        }
        let s = |k: &str| params.get(k).and_then(Value::as_str).unwrap_or("");
        let (model_id, index) = (s("model_id"), s("index"));
        let k = count(params, "k")?.unwrap_or(DEFAULT_K);
        let doc_size = count(params, "doc_size")?.unwrap_or(DEFAULT_DOC_SIZE);
        let sources = list(params.get("source_field"));
        let field = s("embedding_field");
        let source = (!sources.is_empty()).then(|| json!(sources));
        match &self.backend {
            MlBackend::Cluster(c) => {
                if field.is_empty() {
                    return Err(
                        "Parameter [embedding_field] and [model_id] can not be null or empty."
                            .into(),
                    );
                }
                let vector = self
                    .service
                    .embedder()
                    .ok_or("no model store to embed the input with")?
                    .embed(model_id, std::slice::from_ref(&text))
                    .await?
                    .pop()
                    .ok_or("the embedding model answered no vector")?;
                let mut query = json!({"knn": {field: {"vector": vector, "k": k}}});
                let nested = s("nested_path");
                if !nested.is_empty() {
                    query = json!({"nested": {"path": nested, "query": query}});
                }
                let mut body = json!({"size": doc_size, "query": query});
                if let Some(src) = source {
                    body["_source"] = src;
                }
                let resp = self.cluster_search(c, index, &body).await?;
                let hits = resp
                    .pointer("/hits/hits")
                    .and_then(Value::as_array)
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                *found = Some(Found::new(text, hits));
                Ok(hit_lines(hits))
            }
            MlBackend::Embedded => {
                // An embedded index has one vector per document, whatever the field's name;
                // its own embedding model (else this tool's) embeds the input.
                let body = json!({"size": doc_size, "query": {"neural": {"embedding": {
                    "query_text": text, "model_id": model_id, "k": k}}}});
                let hits = self
                    .service
                    .search_dsl(index, &body)
                    .await
                    .map_err(|e| e.to_string())?;
                let docs = opensearch_hits(&hits, source.as_ref());
                *found = Some(Found::new(text, &docs));
                Ok(hit_lines(&docs))
            }
        }
    }

    async fn list_indices(&self, params: &Map<String, Value>, csv: bool) -> Result<String, String> {
        let indices = list(params.get("indices"));
        let rows: Vec<Vec<String>> = match &self.backend {
            MlBackend::Cluster(c) => {
                for i in &indices {
                    check_index(i)?;
                }
                let joined = indices.join(",");
                let mut segments = vec!["_cat", "indices"];
                if !indices.is_empty() {
                    segments.push(&joined);
                }
                let mut url = c.url(&segments).map_err(|e| e.to_string())?;
                url.set_query(Some("format=json"));
                let resp = match c.request(reqwest::Method::GET, url, None).await {
                    Err(ClusterError::Status { status: 404, .. }) => json!([]),
                    other => other.map_err(|e| e.to_string())?,
                };
                resp.as_array()
                    .into_iter()
                    .flatten()
                    .map(|r| {
                        [
                            "health",
                            "status",
                            "index",
                            "uuid",
                            "pri",
                            "rep",
                            "docs.count",
                            "docs.deleted",
                            "store.size",
                            "pri.store.size",
                        ]
                        .iter()
                        .map(|k| {
                            r.get(*k)
                                .map(crate::connector::template::text_of)
                                .unwrap_or_default()
                        })
                        .collect()
                    })
                    .collect()
            }
            MlBackend::Embedded => self
                .service
                .stats()
                .into_iter()
                .filter(|s| indices.is_empty() || indices.iter().any(|p| glob(p, &s.name)))
                .map(|s| {
                    vec![
                        "green".into(),
                        "open".into(),
                        s.name.clone(),
                        s.name.clone(),
                        "1".into(),
                        "0".into(),
                        s.docs.to_string(),
                        "0".into(),
                        format!("{}b", s.bytes),
                        format!("{}b", s.bytes),
                    ]
                })
                .collect(),
        };
        if rows.is_empty() {
            return Ok(format!(
                "There were no results searching the indices parameter [{}].",
                params
                    .get("indices")
                    .map(crate::connector::template::text_of)
                    .unwrap_or_else(|| "null".into())
            ));
        }
        let mut out = String::new();
        if csv {
            out.push_str("row,health,status,index,uuid,pri(number of primary shards),rep(number of replica shards),docs.count(number of available documents),docs.deleted(number of deleted documents),store.size(store size of primary and replica shards),pri.store.size(store size of primary shards)\n");
            for (i, r) in rows.iter().enumerate() {
                out.push_str(&format!("{},{}\n", i + 1, r.join(",")));
            }
        } else {
            out.push_str("health\tstatus\tindex\tuuid\tpri\trep\tdocs.count\tdocs.deleted\tstore.size\tpri.store.size\n");
            for r in &rows {
                out.push_str(&r.join("\t"));
                out.push('\n');
            }
        }
        Ok(out)
    }

    async fn index_mapping(&self, params: &Map<String, Value>) -> Result<String, String> {
        let indices = list(params.get("index"));
        let none = || {
            format!(
                "There were no results searching the index parameter [{}].",
                params
                    .get("index")
                    .map(crate::connector::template::text_of)
                    .unwrap_or_else(|| "null".into())
            )
        };
        if indices.is_empty() {
            return Ok(none());
        }
        let mut found: Vec<IndexDescription> = Vec::new();
        match &self.backend {
            MlBackend::Cluster(c) => {
                for i in &indices {
                    check_index(i)?;
                }
                let url = c.url(&[&indices.join(",")]).map_err(|e| e.to_string())?;
                let resp = c
                    .request(reqwest::Method::GET, url, None)
                    .await
                    .map_err(|e| e.to_string())?;
                for (name, v) in resp.as_object().into_iter().flatten() {
                    let mut settings = Vec::new();
                    flatten("", &v["settings"], &mut settings);
                    found.push((name.clone(), v["mappings"].clone(), settings));
                }
            }
            MlBackend::Embedded => {
                for s in self.service.stats() {
                    if !indices.iter().any(|p| glob(p, &s.name)) {
                        continue;
                    }
                    let mapping = self.service.mapping(&s.name).map_err(|e| e.to_string())?;
                    let mut settings = vec![
                        ("index.number_of_shards".to_string(), "1".to_string()),
                        ("index.number_of_replicas".to_string(), "0".to_string()),
                        ("index.provided_name".to_string(), s.name.clone()),
                    ];
                    if let Some(e) = &s.embedding {
                        settings.push(("index.knn".into(), "true".into()));
                        settings.push(("index.embedding.model_id".into(), e.model_id.clone()));
                    }
                    found.push((s.name, mapping, settings));
                }
            }
        }
        if found.is_empty() {
            return Ok(none());
        }
        let mut out = String::new();
        for (name, mappings, settings) in found {
            out.push_str(&format!("index: {name}\n\n"));
            if let Some(m) = mappings.as_object() {
                out.push_str("mappings:\n");
                for (k, v) in m {
                    out.push_str(&format!("{k}={v}\n"));
                }
                out.push_str("\n\n");
            }
            out.push_str("settings:\n");
            for (k, v) in settings {
                out.push_str(&format!("{k}={v}\n"));
            }
            out.push_str("\n\n");
        }
        Ok(out)
    }
}

impl Tool for MlTool {
    fn spec(&self) -> &ToolSpec {
        &self.cfg.spec
    }
    fn call(&self, args: Value, ctx: ToolContext) -> BoxFuture<'_, ToolOutput> {
        Box::pin(self.run(args, ctx))
    }
}

/// The documents a search found, for the citations activity.
struct Found {
    query: String,
    hits: Vec<Value>,
}

impl Found {
    fn new(query: String, hits: &[Value]) -> Self {
        Self {
            query,
            hits: hits.to_vec(),
        }
    }
}

/// An index's name, mappings and flattened settings.
type IndexDescription = (String, Value, Vec<(String, String)>);

/// `a*` style patterns of index lists.
fn glob(pattern: &str, name: &str) -> bool {
    if pattern == "_all" || pattern == "*" {
        return true;
    }
    match pattern.split_once('*') {
        None => pattern == name,
        Some((pre, post)) => {
            name.len() >= pre.len() + post.len() && name.starts_with(pre) && name.ends_with(post)
        }
    }
}

/// Settings as ml-commons prints them: dotted keys.
fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
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
        Value::Null => {}
        other => out.push((
            prefix.to_string(),
            crate::connector::template::text_of(other),
        )),
    }
}

/// One JSON line per hit, with the four keys ml-commons keeps.
fn hit_lines(hits: &[Value]) -> String {
    let mut out = String::new();
    for h in hits {
        let line = json!({
            "_index": h.get("_index").cloned().unwrap_or(Value::Null),
            "_id": h.get("_id").cloned().unwrap_or(Value::Null),
            "_score": h.get("_score").cloned().unwrap_or(Value::Null),
            "_source": h.get("_source").cloned().unwrap_or(Value::Null),
        });
        out.push_str(&line.to_string());
        out.push('\n');
    }
    out
}

/// Embedded hits as OpenSearch hits: `_source` is the document's fields and metadata,
/// narrowed as the query's `_source` asks (a name, a list, `{"includes": [...]}` or `false`).
pub fn opensearch_hits(hits: &[Hit], source: Option<&Value>) -> Vec<Value> {
    let keep: Option<Vec<String>> = match source {
        None | Some(Value::Null) | Some(Value::Bool(true)) => None,
        Some(Value::Bool(false)) => Some(Vec::new()),
        Some(Value::String(s)) => Some(vec![s.clone()]),
        Some(Value::Array(a)) => Some(
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect(),
        ),
        Some(Value::Object(o)) => o.get("includes").and_then(Value::as_array).map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        }),
        Some(_) => None,
    };
    hits.iter()
        .map(|h| {
            let mut src = Map::new();
            for (k, v) in h.fields.iter().flatten() {
                src.insert(k.clone(), json!(v));
            }
            if let Value::Object(m) = &h.metadata {
                for (k, v) in m {
                    src.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
            if let Some(keep) = &keep {
                src.retain(|k, _| keep.iter().any(|p| glob(p, k)));
            }
            json!({"_index": h.index, "_id": h.id, "_score": h.score, "_source": src})
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_and_settings() {
        assert!(glob("pop*", "population"));
        assert!(glob("*", "x"));
        assert!(!glob("pop*", "demo"));
        let mut out = Vec::new();
        flatten(
            "",
            &json!({"index": {"number_of_shards": "1", "knn": "true"}}),
            &mut out,
        );
        assert!(out.contains(&("index.number_of_shards".into(), "1".into())));
    }

    #[test]
    fn hits_keep_ml_commons_keys() {
        let text = hit_lines(&[json!({"_index": "i", "_id": "1", "_score": 1.5,
            "_source": {"a": 1}, "sort": [1]})]);
        let line: Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(
            line,
            json!({"_index": "i", "_id": "1", "_score": 1.5, "_source": {"a": 1}})
        );
    }
}
