//! What the ml-commons tools need of the embedded indexes: ingestion through an index's
//! embedding model, the OpenSearch query DSL subset they honour (`match`, `match_phrase`,
//! `multi_match`, `match_all`, `term`, `terms`, `ids`, `bool`; `neural` and `knn` as exact
//! vector search), and index statistics and mappings.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use tantivy::Term;
use tantivy::query::{AllQuery, BooleanQuery, EmptyQuery, Occur, Query, TermQuery};
use tantivy::schema::IndexRecordOption;

use super::embedded::{Document, Hit, MAX_TOP_K, SearchError, SearchService, invalid};
use super::embedder::Embedder;
use super::index::{EmbeddingSpec, KbIndex, SEP, analyzer, canonical};

/// Hits of a DSL query when it names no `size` (OpenSearch's default).
const DEFAULT_SIZE: usize = 10;
/// Query types the embedded indexes honour.
const SUPPORTED: &str =
    "match, match_phrase, multi_match, match_all, term, terms, ids, bool, neural, knn";

/// An index with its size, for `ListIndexTool` / `CatIndexTool`.
#[derive(Debug, Clone)]
pub struct IndexStats {
    /// The name.
    pub name: String,
    /// Live documents.
    pub docs: u64,
    /// Bytes on disk.
    pub bytes: u64,
    /// The embedding model, if any.
    pub embedding: Option<EmbeddingSpec>,
    /// Vectors held.
    pub vectors: usize,
    /// Their dimension.
    pub dims: Option<usize>,
}

fn dir_size(path: &std::path::Path) -> u64 {
    std::fs::read_dir(path)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum()
}

/// How a k-NN query gets its vector.
enum Probe {
    Vector(Vec<f32>),
    Text {
        text: String,
        model_id: Option<String>,
    },
}

/// A translated query.
enum Plan {
    Text(Box<dyn Query>),
    Knn {
        probe: Probe,
        k: usize,
        filter: Option<Box<dyn Query>>,
    },
}

impl SearchService {
    /// Sets what embeds texts (once; later calls are ignored).
    pub fn set_embedder(&self, e: Arc<dyn Embedder>) {
        let _ = self.embedder.set(e);
    }

    /// What embeds texts, once set.
    pub fn embedder(&self) -> Option<Arc<dyn Embedder>> {
        self.embedder.get().cloned()
    }

    fn need_embedder(&self) -> Result<Arc<dyn Embedder>, SearchError> {
        self.embedder()
            .ok_or_else(|| SearchError::Embedding("no model store to embed with".into()))
    }

    /// Every index with its size and embedding model.
    pub fn stats(&self) -> Vec<IndexStats> {
        self.index_names()
            .into_iter()
            .filter_map(|n| self.get(&n).ok())
            .map(|kb| {
                let v = kb
                    .vectors
                    .read()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                IndexStats {
                    name: kb.name.clone(),
                    docs: kb.num_docs(),
                    bytes: dir_size(&kb.path),
                    embedding: kb.embedding.clone(),
                    vectors: v.len(),
                    dims: v.dims(),
                }
            })
            .collect()
    }

    /// An OpenSearch-shaped mapping of `index`: its fields (from a sample of documents), its
    /// metadata keys, and its vector field.
    pub fn mapping(&self, index: &str) -> Result<Value, SearchError> {
        let kb = self.get(index)?;
        let (fields, meta) = kb.field_names(1000)?;
        let mut props = Map::new();
        for f in fields {
            props.insert(f, json!({"type": "text"}));
        }
        for (k, v) in meta {
            let ty = match v {
                Value::Number(n) if n.is_f64() => "double",
                Value::Number(_) => "long",
                Value::Bool(_) => "boolean",
                _ => "keyword",
            };
            props.entry(k).or_insert(json!({"type": ty}));
        }
        let dims = kb
            .vectors
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .dims();
        if let Some(spec) = &kb.embedding {
            props.insert(
                "embedding".into(),
                json!({"type": "knn_vector", "dimension": dims, "model_id": spec.model_id,
                       "source_field": spec.field.clone().unwrap_or_else(|| "*".into())}),
            );
        } else if let Some(d) = dims {
            props.insert(
                "embedding".into(),
                json!({"type": "knn_vector", "dimension": d}),
            );
        }
        Ok(json!({"properties": props}))
    }

    /// The documents with their vectors: those without one are embedded with the index's
    /// model (when it has one); every vector must have the index's dimension.
    pub(super) async fn with_vectors(
        &self,
        kb: &KbIndex,
        mut docs: Vec<Document>,
    ) -> Result<Vec<Document>, SearchError> {
        if let Some(spec) = &kb.embedding {
            let missing: Vec<usize> = (0..docs.len())
                .filter(|i| docs[*i].vector.is_none())
                .collect();
            if !missing.is_empty() {
                let texts: Vec<String> = missing
                    .iter()
                    .map(|i| embed_text(&docs[*i], spec.field.as_deref()))
                    .collect();
                let vectors = self
                    .need_embedder()?
                    .embed(&spec.model_id, &texts)
                    .await
                    .map_err(SearchError::Embedding)?;
                for (i, v) in missing.into_iter().zip(vectors) {
                    docs[i].vector = Some(v);
                }
            }
        }
        let store = kb
            .vectors
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut dims = store.dims();
        for (i, d) in docs.iter().enumerate() {
            if let Some(v) = &d.vector {
                let field = if docs.len() > 1 {
                    format!("documents[{i}].vector")
                } else {
                    "vector".to_string()
                };
                match dims {
                    Some(n) if n != v.len() => {
                        return Err(invalid(
                            field,
                            format!("has {} dimensions; the index's vectors have {n}", v.len()),
                        ));
                    }
                    _ => dims = Some(v.len()),
                }
            }
        }
        Ok(docs)
    }

    /// Runs an OpenSearch search body (`query`, `size`, `from`) on an embedded index; query
    /// types outside the supported subset are refused by name.
    pub async fn search_dsl(&self, index: &str, body: &Value) -> Result<Vec<Hit>, SearchError> {
        let kb = self.get(index)?;
        for key in [
            "aggs",
            "aggregations",
            "sort",
            "collapse",
            "search_after",
            "script_fields",
            "rescore",
        ] {
            if body.get(key).is_some() {
                return Err(invalid(
                    key,
                    format!(
                        "{key:?} is not supported on embedded indexes (only query, size, from and _source)"
                    ),
                ));
            }
        }
        let size = match body.get("size") {
            None | Some(Value::Null) => DEFAULT_SIZE,
            Some(v) => {
                v.as_u64()
                    .or_else(|| v.as_str()?.parse().ok())
                    .ok_or_else(|| invalid("size", "must be a number"))? as usize
            }
        };
        let from = body.get("from").and_then(Value::as_u64).unwrap_or(0) as usize;
        if size == 0 {
            return Ok(Vec::new());
        }
        let size = size.min(MAX_TOP_K);
        let plan = match body.get("query") {
            None => Plan::Text(Box::new(AllQuery)),
            Some(q) => plan(&kb, q, "query")?,
        };
        match plan {
            Plan::Text(q) => {
                let kb2 = Arc::clone(&kb);
                blocking(move || kb2.run_query(&*q, &*q, size, from, true)).await
            }
            Plan::Knn { probe, k, filter } => {
                let vector = match probe {
                    Probe::Vector(v) => v,
                    Probe::Text { text, model_id } => {
                        // The index's own model: its vectors are only comparable with the
                        // query's when one model made both (a query's model_id, often a
                        // cluster's, serves indexes without one).
                        let model = kb
                            .embedding
                            .as_ref()
                            .map(|s| s.model_id.clone())
                            .or(model_id)
                            .ok_or_else(|| {
                                invalid(
                                    "query.neural",
                                    format!(
                                        "index {index:?} has no embedding model; name model_id"
                                    ),
                                )
                            })?;
                        self.need_embedder()?
                            .embed(&model, &[text])
                            .await
                            .map_err(SearchError::Embedding)?
                            .pop()
                            .ok_or_else(|| SearchError::Embedding("no vector".into()))?
                    }
                };
                let kb2 = Arc::clone(&kb);
                blocking(move || {
                    let allowed = match &filter {
                        Some(f) => Some(kb2.ids_matching(&**f)?),
                        None => None,
                    };
                    let keep = |id: &str| allowed.as_ref().is_none_or(|a| a.contains(id));
                    let top = kb2
                        .vectors
                        .read()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .nearest(&vector, k.max(size + from), &keep)
                        .map_err(|m| invalid("query", m))?;
                    let top: Vec<(String, f32)> = top.into_iter().skip(from).take(size).collect();
                    kb2.hits_for(&top, true)
                })
                .await
            }
        }
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, SearchError> + Send + 'static,
) -> Result<T, SearchError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| SearchError::Storage(format!("index task failed: {e}")))?
}

/// The text of a document its index embeds.
fn embed_text(d: &Document, field: Option<&str>) -> String {
    match field.and_then(|f| d.fields.get(f)) {
        Some(t) => t.clone(),
        None => d.fields.values().cloned().collect::<Vec<_>>().join("\n"),
    }
}

/// The single `{name: body}` entry of a query object.
fn single<'a>(q: &'a Value, at: &str) -> Result<(&'a str, &'a Value), SearchError> {
    match q.as_object() {
        Some(o) if o.len() == 1 => {
            let (k, v) = o.iter().next().ok_or_else(|| invalid(at, "empty"))?;
            Ok((k.as_str(), v))
        }
        _ => Err(invalid(at, "must be an object with one query type")),
    }
}

fn text_value(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(_) | Value::Bool(_) => Some(v.to_string()),
        Value::Object(o) => o.get("query").and_then(text_value),
        _ => None,
    }
}

fn plan(kb: &KbIndex, q: &Value, at: &str) -> Result<Plan, SearchError> {
    let (kind, body) = single(q, at)?;
    match kind {
        "neural" => {
            let (_field, spec) = single(body, &format!("{at}.neural"))?;
            let text = spec
                .get("query_text")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid(format!("{at}.neural"), "query_text is required"))?;
            let filter = match spec.get("filter") {
                Some(f) => Some(text_query(kb, f, &format!("{at}.neural.filter"))?),
                None => None,
            };
            Ok(Plan::Knn {
                probe: Probe::Text {
                    text: text.to_string(),
                    model_id: spec
                        .get("model_id")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                },
                k: spec.get("k").and_then(Value::as_u64).unwrap_or(10) as usize,
                filter,
            })
        }
        "knn" => {
            let (_field, spec) = single(body, &format!("{at}.knn"))?;
            let vector: Vec<f32> = spec
                .get("vector")
                .and_then(Value::as_array)
                .and_then(|a| a.iter().map(|x| x.as_f64().map(|f| f as f32)).collect())
                .ok_or_else(|| invalid(format!("{at}.knn"), "vector must be a list of numbers"))?;
            let filter = match spec.get("filter") {
                Some(f) => Some(text_query(kb, f, &format!("{at}.knn.filter"))?),
                None => None,
            };
            Ok(Plan::Knn {
                probe: Probe::Vector(vector),
                k: spec.get("k").and_then(Value::as_u64).unwrap_or(10) as usize,
                filter,
            })
        }
        "bool" => {
            // A vector query under `must` with only filters beside it stays a k-NN search.
            let must = clauses(body.get("must"));
            if must.len() == 1
                && let Ok(("neural" | "knn", _)) = single(must[0], at)
                && body.get("should").is_none()
            {
                let mut rest = body.as_object().cloned().unwrap_or_default();
                rest.remove("must");
                let filter = if rest.is_empty() {
                    None
                } else {
                    rest.insert("must".into(), json!({"match_all": {}}));
                    Some(text_query(kb, &json!({"bool": rest}), at)?)
                };
                return match plan(kb, must[0], &format!("{at}.bool.must"))? {
                    Plan::Knn {
                        probe,
                        k,
                        filter: inner,
                    } => Ok(Plan::Knn {
                        probe,
                        k,
                        filter: filter.or(inner),
                    }),
                    text => Ok(text),
                };
            }
            Ok(Plan::Text(text_query(kb, q, at)?))
        }
        _ => Ok(Plan::Text(text_query(kb, q, at)?)),
    }
}

fn clauses(v: Option<&Value>) -> Vec<&Value> {
    match v {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a.iter().collect(),
        Some(one) => vec![one],
    }
}

fn words(text: &str) -> Vec<String> {
    let mut a = analyzer();
    let mut stream = a.token_stream(text);
    let mut out = Vec::new();
    while let Some(t) = stream.next() {
        out.push(t.text.clone());
    }
    out
}

/// Terms of `text` in `field`: the combined text for `text`, `*` and `_all`, else that field
/// of the document's fields.
fn field_terms(kb: &KbIndex, field: &str, text: &str) -> Vec<Term> {
    words(text)
        .into_iter()
        .map(|w| {
            if matches!(field, "text" | "*" | "_all") {
                Term::from_field_text(kb.f.text, &w)
            } else {
                let mut t = Term::from_field_json_path(kb.f.fields, field, false);
                t.append_type_and_str(&w);
                t
            }
        })
        .collect()
}

fn any_of(terms: Vec<Term>, occur: Occur) -> Box<dyn Query> {
    if terms.is_empty() {
        return Box::new(EmptyQuery);
    }
    Box::new(BooleanQuery::new(
        terms
            .into_iter()
            .map(|t| {
                (
                    occur,
                    Box::new(TermQuery::new(t, IndexRecordOption::WithFreqs)) as Box<dyn Query>,
                )
            })
            .collect(),
    ))
}

/// A metadata key's exact value (or the document id for `_id`).
fn exact(kb: &KbIndex, field: &str, v: &Value) -> Box<dyn Query> {
    let term = if field == "_id" {
        Term::from_field_text(kb.f.id, &canonical(v))
    } else {
        Term::from_field_text(kb.f.meta, &format!("{field}{SEP}{}", canonical(v)))
    };
    Box::new(TermQuery::new(term, IndexRecordOption::Basic))
}

/// A text query: match on a field's words, or on a metadata key's exact value.
fn match_field(kb: &KbIndex, field: &str, text: &str, all: bool) -> Box<dyn Query> {
    let occur = if all { Occur::Must } else { Occur::Should };
    let words = any_of(field_terms(kb, field, text), occur);
    Box::new(BooleanQuery::new(vec![
        (Occur::Should, words),
        (Occur::Should, exact(kb, field, &json!(text))),
    ]))
}

fn text_query(kb: &KbIndex, q: &Value, at: &str) -> Result<Box<dyn Query>, SearchError> {
    let (kind, body) = single(q, at)?;
    let here = format!("{at}.{kind}");
    Ok(match kind {
        "match_all" => Box::new(AllQuery),
        "match" | "match_phrase" | "match_phrase_prefix" => {
            let (field, v) = single(body, &here)?;
            let text = text_value(v).ok_or_else(|| invalid(&here, "needs a text"))?;
            let all = kind != "match"
                || v.get("operator")
                    .and_then(Value::as_str)
                    .map(str::to_ascii_lowercase)
                    == Some("and".into());
            match_field(kb, field, &text, all)
        }
        "multi_match" => {
            let text = body
                .get("query")
                .and_then(text_value)
                .ok_or_else(|| invalid(&here, "query is required"))?;
            let fields: Vec<String> = body
                .get("fields")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        // `title^2`: boosts are not honoured, the field is.
                        .map(|f| f.split('^').next().unwrap_or(f).to_string())
                        .collect()
                })
                .unwrap_or_default();
            if fields.is_empty() {
                match_field(kb, "text", &text, false)
            } else {
                Box::new(BooleanQuery::new(
                    fields
                        .iter()
                        .map(|f| (Occur::Should, match_field(kb, f, &text, false)))
                        .collect(),
                ))
            }
        }
        "term" => {
            let (field, v) = single(body, &here)?;
            let v = match v {
                Value::Object(o) => o.get("value").cloned().unwrap_or(Value::Null),
                other => other.clone(),
            };
            exact(kb, field, &v)
        }
        "terms" => {
            let (field, v) = single(body, &here)?;
            let values = v
                .as_array()
                .ok_or_else(|| invalid(&here, "must list values"))?;
            Box::new(BooleanQuery::new(
                values
                    .iter()
                    .map(|x| (Occur::Should, exact(kb, field, x)))
                    .collect(),
            ))
        }
        "ids" => {
            let values = body
                .get("values")
                .and_then(Value::as_array)
                .ok_or_else(|| invalid(&here, "values must list ids"))?;
            Box::new(BooleanQuery::new(
                values
                    .iter()
                    .map(|x| (Occur::Should, exact(kb, "_id", x)))
                    .collect(),
            ))
        }
        "bool" => {
            let mut parts: Vec<(Occur, Box<dyn Query>)> = Vec::new();
            let mut positive = false;
            for (key, occur) in [
                ("must", Occur::Must),
                ("filter", Occur::Must),
                ("should", Occur::Should),
                ("must_not", Occur::MustNot),
            ] {
                for (i, c) in clauses(body.get(key)).into_iter().enumerate() {
                    positive |= occur != Occur::MustNot;
                    parts.push((occur, text_query(kb, c, &format!("{here}.{key}[{i}]"))?));
                }
            }
            if !positive {
                parts.push((Occur::Must, Box::new(AllQuery)));
            }
            Box::new(BooleanQuery::new(parts))
        }
        "neural" | "knn" => {
            return Err(invalid(
                &here,
                "vector queries are supported at the top level or as a bool's only must clause",
            ));
        }
        other => {
            return Err(invalid(
                &here,
                format!(
                    "{other:?} queries are not supported on embedded indexes; supported: {SUPPORTED}"
                ),
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Bag of hashed words: texts sharing words are near.
    struct Words;

    #[async_trait::async_trait]
    impl Embedder for Words {
        async fn embed(&self, model_id: &str, texts: &[String]) -> Result<Vec<Vec<f32>>, String> {
            if model_id != "words" {
                return Err(format!("no model {model_id:?} is registered"));
            }
            Ok(texts
                .iter()
                .map(|t| {
                    let mut v = vec![0.01f32; 64];
                    for w in words(t) {
                        let h = w
                            .bytes()
                            .fold(7u32, |a, b| a.wrapping_mul(31).wrapping_add(b as u32));
                        v[(h % 64) as usize] += 1.0;
                    }
                    v
                })
                .collect())
        }
    }

    fn doc(id: &str, text: &str, meta: Value) -> Document {
        Document {
            id: id.into(),
            fields: BTreeMap::from([("text".to_string(), text.to_string())]),
            metadata: meta.as_object().cloned().unwrap_or_default(),
            vector: None,
        }
    }

    #[tokio::test]
    async fn vectors_are_embedded_searched_filtered_and_reloaded() {
        let dir = std::env::temp_dir().join(format!("agui-sem-{}", uuid::Uuid::new_v4().simple()));
        let svc = SearchService::open(&dir).unwrap();
        svc.set_embedder(Arc::new(Words));
        let spec = EmbeddingSpec {
            model_id: "words".into(),
            field: Some("text".into()),
        };
        svc.create_index_with("pop", Some(spec)).await.unwrap();
        svc.add_documents(
            "pop",
            vec![
                doc(
                    "sea",
                    "Seattle metro population 2023 is 3,519,000",
                    json!({"city": "Seattle"}),
                ),
                doc(
                    "nyc",
                    "New York City metro population 2023 is 18,937,000",
                    json!({"city": "New York"}),
                ),
                doc("bread", "Bakers knead dough", json!({"city": "Paris"})),
            ],
        )
        .await
        .unwrap();
        // The index's model embeds the query, whatever model_id the query names.
        let neural = json!({"query": {"neural": {"population_description_embedding": {
            "query_text": "Seattle population", "model_id": "w0T3NJwBZFG13462QeiT"}}}, "size": 2});
        let hits = svc.search_dsl("pop", &neural).await.unwrap();
        assert_eq!(hits[0].id, "sea", "{hits:#?}");
        assert_eq!(hits.len(), 2);
        // A bool filter beside the vector query narrows its candidates.
        let filtered = json!({"query": {"bool": {
            "must": {"neural": {"e": {"query_text": "Seattle population"}}},
            "filter": {"term": {"city": "New York"}}}}});
        let hits = svc.search_dsl("pop", &filtered).await.unwrap();
        assert_eq!(
            hits.iter().map(|h| h.id.as_str()).collect::<Vec<_>>(),
            ["nyc"]
        );
        // The text subset.
        let m = json!({"query": {"bool": {"must": [{"match": {"text": "population"}}],
            "must_not": {"term": {"_id": "nyc"}}}}});
        let hits = svc.search_dsl("pop", &m).await.unwrap();
        assert_eq!(
            hits.iter().map(|h| h.id.as_str()).collect::<Vec<_>>(),
            ["sea"]
        );
        let e = svc
            .search_dsl("pop", &json!({"query": {"fuzzy": {"text": "x"}}}))
            .await
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("\"fuzzy\" queries are not supported"),
            "{e}"
        );
        // Unknown models fail the ingestion, naming the model.
        svc.create_index_with(
            "bad",
            Some(EmbeddingSpec {
                model_id: "nope".into(),
                field: None,
            }),
        )
        .await
        .unwrap();
        let e = svc
            .add_documents("bad", vec![doc("x", "y", json!({}))])
            .await
            .unwrap_err();
        assert!(
            matches!(e, SearchError::Embedding(ref m) if m.contains("nope")),
            "{e}"
        );
        // Replacing and deleting keep the vectors in step; reopening reloads them.
        svc.delete_document("pop", "bread").await.unwrap();
        drop(svc);
        let svc = SearchService::open(&dir).unwrap();
        let st = svc.stats().into_iter().find(|s| s.name == "pop").unwrap();
        assert_eq!((st.docs, st.vectors, st.dims), (2, 2, Some(64)));
        let knn = json!({"query": {"knn": {"v": {"vector": vec![1.0f32; 64], "k": 5}}}});
        assert_eq!(svc.search_dsl("pop", &knn).await.unwrap().len(), 2);
        let mapping = svc.mapping("pop").unwrap();
        assert_eq!(mapping["properties"]["embedding"]["type"], "knn_vector");
        assert_eq!(mapping["properties"]["city"]["type"], "keyword");
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[cfg(test)]
mod measure {
    use super::*;
    use std::collections::BTreeMap;

    /// Prints how long ingestion with vectors, a k-NN search and reopening (which reloads the
    /// vectors from the stored documents) take; run with
    /// `cargo test --release --lib semantic::measure -- --ignored --nocapture`.
    #[tokio::test(flavor = "multi_thread")]
    #[ignore]
    async fn reopening_reloads_vectors() {
        let n: usize = std::env::var("AGUI_MEASURE_DOCS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(10_000);
        let dims = 384;
        let dir =
            std::env::temp_dir().join(format!("agui-measure-{}", uuid::Uuid::new_v4().simple()));
        let svc = SearchService::open(&dir).unwrap();
        svc.create_index("v").await.unwrap();
        let mut seed = 11u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % 2000) as f32 / 1000.0 - 1.0
        };
        let start = std::time::Instant::now();
        for chunk in 0..n.div_ceil(5_000) {
            let docs: Vec<Document> = (chunk * 5_000..((chunk + 1) * 5_000).min(n))
                .map(|i| Document {
                    id: format!("d{i}"),
                    fields: BTreeMap::from([("text".to_string(), format!("document {i}"))]),
                    metadata: Map::new(),
                    vector: Some((0..dims).map(|_| next()).collect()),
                })
                .collect();
            svc.add_documents("v", docs).await.unwrap();
        }
        println!("ingested {n} docs x {dims} dims in {:?}", start.elapsed());
        let q: Vec<f32> = (0..dims).map(|_| next()).collect();
        let body = json!({"size": 10, "query": {"knn": {"e": {"vector": q, "k": 10}}}});
        let start = std::time::Instant::now();
        assert_eq!(svc.search_dsl("v", &body).await.unwrap().len(), 10);
        println!("k-NN search with hits: {:?}", start.elapsed());
        drop(svc);
        let start = std::time::Instant::now();
        let svc = SearchService::open(&dir).unwrap();
        println!("reopened (vectors reloaded) in {:?}", start.elapsed());
        assert_eq!(
            svc.stats().iter().find(|s| s.name == "v").unwrap().vectors,
            n
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
