//! One embedded index: its schema, English analysis (stemming, stop words), the query and
//! metadata-filter translation, and snippets.
//!
//! Plain queries search `text`, every field's text together; `fields` (a JSON field) makes
//! `title:seattle` search one field. Metadata becomes `key<US>value` keywords, so a filter is
//! a term lookup; the original fields and metadata are stored as JSON and returned with hits.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use serde::{Deserialize, Serialize};

use serde_json::{Map, Value};
use tantivy::collector::TopDocs;
use tantivy::query::{
    AllQuery, BooleanQuery, ConstScoreQuery, EmptyQuery, Occur, Query, QueryParser, TermQuery,
};
use tantivy::schema::{
    Field, IndexRecordOption, JsonObjectOptions, OwnedValue, STORED, STRING, Schema,
    TextFieldIndexing, TextOptions, Value as _,
};
use tantivy::snippet::SnippetGenerator;
use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer,
    StopWordFilter, TextAnalyzer,
};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};

use super::embedded::{Document, Hit, MAX_TOP_K, SearchError, SearchRequest, invalid};
use super::vectors::VecStore;

const TOKENIZER: &str = "kb_en";
const SNIPPET_CHARS: usize = 240;
/// Tantivy refuses terms near 64 KB; metadata values longer than this are not filterable.
const MAX_KEYWORD_BYTES: usize = 4096;

/// The schema's fields.
#[derive(Debug, Clone, Copy)]
pub(super) struct Fields {
    /// Raw, stored: the document id.
    pub(super) id: Field,
    /// Every field's text, stemmed: what plain queries search.
    pub(super) text: Field,
    /// The fields as a JSON object, stemmed: lets `title:seattle` search one field.
    pub(super) fields: Field,
    /// `key<US>value` keywords of the metadata, for exact-match filters.
    pub(super) meta: Field,
    /// The original `{"fields", "metadata"}` JSON, stored only.
    source: Field,
    /// The document's embedding (little-endian f32), stored only; indexes created before
    /// vectors existed have no such field.
    vec: Option<Field>,
}

pub(super) const SEP: char = '\u{1f}';

impl Fields {
    fn schema() -> Schema {
        let indexing = TextFieldIndexing::default()
            .set_tokenizer(TOKENIZER)
            .set_index_option(IndexRecordOption::WithFreqsAndPositions);
        let mut b = Schema::builder();
        b.add_text_field("id", STRING | STORED);
        b.add_text_field(
            "text",
            TextOptions::default().set_indexing_options(indexing.clone()),
        );
        b.add_json_field(
            "fields",
            JsonObjectOptions::default().set_indexing_options(indexing),
        );
        b.add_text_field("meta", STRING);
        b.add_text_field("source", STORED);
        b.add_bytes_field("vec", STORED);
        b.build()
    }

    fn of(schema: &Schema) -> Result<Fields, SearchError> {
        let get = |n: &str| {
            schema
                .get_field(n)
                .map_err(|_| SearchError::Storage(format!("not a knowledge-base index: no {n}")))
        };
        Ok(Fields {
            id: get("id")?,
            text: get("text")?,
            fields: get("fields")?,
            meta: get("meta")?,
            source: get("source")?,
            vec: schema.get_field("vec").ok(),
        })
    }

    pub(super) fn document(self, d: &Document) -> TantivyDocument {
        let mut doc = TantivyDocument::new();
        doc.add_text(self.id, &d.id);
        for text in d.fields.values() {
            doc.add_text(self.text, text);
        }
        doc.add_object(
            self.fields,
            d.fields
                .iter()
                .map(|(k, v)| (k.clone(), OwnedValue::Str(v.clone())))
                .collect(),
        );
        for kw in metadata_keywords(&d.metadata) {
            doc.add_text(self.meta, kw);
        }
        let source = serde_json::json!({"fields": d.fields, "metadata": d.metadata});
        doc.add_text(self.source, source.to_string());
        if let (Some(f), Some(v)) = (self.vec, &d.vector) {
            doc.add_bytes(f, &super::vectors::to_bytes(v));
        }
        doc
    }
}

/// A metadata value as the keyword filters compare: strings as they are, numbers in their
/// shortest form (`2023` and `2023.0` agree, and so do `2023` and `"2023"`), other values as
/// JSON text.
pub(super) fn canonical(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 9.0e15 => {
                format!("{}", f as i64)
            }
            _ => n.to_string(),
        },
        other => other.to_string(),
    }
}

/// The filter keywords of a metadata object: one per top-level scalar, one per element of a
/// top-level array. Values too long to be one index term stay stored but are not filterable.
fn metadata_keywords(meta: &Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    for (k, v) in meta {
        match v {
            Value::Array(items) => {
                out.extend(items.iter().map(|i| format!("{k}{SEP}{}", canonical(i))))
            }
            other => out.push(format!("{k}{SEP}{}", canonical(other))),
        }
    }
    out.retain(|kw| kw.len() <= MAX_KEYWORD_BYTES);
    out
}

pub(super) fn analyzer() -> TextAnalyzer {
    let mut b = TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .filter(AsciiFoldingFilter)
        .dynamic();
    if let Some(stop) = StopWordFilter::new(Language::English) {
        b = b.filter_dynamic(stop);
    }
    b.filter_dynamic(Stemmer::new(Language::English)).build()
}

pub(super) struct KbIndex {
    pub(super) name: String,
    pub(super) path: PathBuf,
    pub(super) index: Index,
    pub(super) reader: IndexReader,
    pub(super) f: Fields,
    /// Created at the first write and kept; `None` again only after a writer failed.
    pub(super) writer: Arc<tokio::sync::Mutex<Option<IndexWriter>>>,
    /// Set when the index is deleted, so writes that raced the deletion give up.
    pub(super) dropped: AtomicBool,
    /// The embedding model chosen at creation, if any.
    pub(super) embedding: Option<EmbeddingSpec>,
    /// The documents' vectors, for k-NN.
    pub(super) vectors: RwLock<VecStore>,
    /// Vector changes of the write in progress, applied once it commits.
    pub(super) pending: Mutex<Vec<(String, Option<Vec<f32>>)>>,
}

/// An embedded index's embedding model: ingestion embeds `field` (every field's text when
/// `None`) with `model_id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingSpec {
    /// A registered model (`POST /_plugins/_ml/models/_register`) that embeds text.
    pub model_id: String,
    /// The document field embedded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

/// Where an index keeps its [`EmbeddingSpec`].
const EMBEDDING_FILE: &str = "embedding.json";

impl KbIndex {
    pub(super) fn create(
        name: &str,
        path: &Path,
        embedding: Option<EmbeddingSpec>,
    ) -> Result<KbIndex, SearchError> {
        std::fs::create_dir_all(path).map_err(|e| SearchError::Storage(e.to_string()))?;
        if let Some(spec) = &embedding {
            let text = serde_json::to_vec(spec).map_err(|e| SearchError::Storage(e.to_string()))?;
            std::fs::write(path.join(EMBEDDING_FILE), text)
                .map_err(|e| SearchError::Storage(e.to_string()))?;
        }
        let index = Index::create_in_dir(path, Fields::schema())?;
        Self::wrap(name, path, index, embedding)
    }

    pub(super) fn open(name: &str, path: &Path) -> Result<KbIndex, SearchError> {
        let embedding = match std::fs::read(path.join(EMBEDDING_FILE)) {
            Ok(bytes) => Some(
                serde_json::from_slice(&bytes)
                    .map_err(|e| SearchError::Storage(format!("{EMBEDDING_FILE}: {e}")))?,
            ),
            Err(_) => None,
        };
        let kb = Self::wrap(name, path, Index::open_in_dir(path)?, embedding)?;
        kb.load_vectors()?;
        Ok(kb)
    }

    /// Rebuilds the in-memory vectors from the stored ones.
    fn load_vectors(&self) -> Result<(), SearchError> {
        let Some(vf) = self.f.vec else { return Ok(()) };
        let searcher = self.reader.searcher();
        let mut store = VecStore::default();
        for segment in searcher.segment_readers() {
            let docs = segment
                .get_store_reader(64)
                .map_err(|e| SearchError::Storage(e.to_string()))?;
            for doc in docs.iter::<TantivyDocument>(segment.alive_bitset()) {
                let doc = doc?;
                let (Some(id), Some(bytes)) = (
                    doc.get_first(self.f.id).and_then(|v| v.as_str()),
                    doc.get_first(vf).and_then(|v| v.as_bytes()),
                ) else {
                    continue;
                };
                store.upsert(id, &super::vectors::from_bytes(bytes));
            }
        }
        *self.vectors.write().unwrap_or_else(PoisonError::into_inner) = store;
        Ok(())
    }

    fn wrap(
        name: &str,
        path: &Path,
        index: Index,
        embedding: Option<EmbeddingSpec>,
    ) -> Result<KbIndex, SearchError> {
        // Tokenizers are not persisted with the index: register ours on every open.
        index.tokenizers().register(TOKENIZER, analyzer());
        let f = Fields::of(&index.schema())?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        Ok(KbIndex {
            name: name.to_string(),
            path: path.to_path_buf(),
            index,
            reader,
            f,
            writer: Arc::new(tokio::sync::Mutex::new(None)),
            dropped: AtomicBool::new(false),
            embedding,
            vectors: RwLock::new(VecStore::default()),
            pending: Mutex::new(Vec::new()),
        })
    }

    pub(super) fn text_query(&self, query: &str) -> Box<dyn Query> {
        let q = query.trim();
        if q.is_empty() || q == "*" {
            return Box::new(AllQuery);
        }
        let parser = QueryParser::for_index(&self.index, vec![self.f.text, self.f.fields]);
        match parser.parse_query(q) {
            Ok(parsed) => parsed,
            // Questions such as "Population: Seattle?" are not valid query syntax; search
            // their words instead.
            Err(_) => self.words_query(q),
        }
    }

    pub(super) fn words_query(&self, q: &str) -> Box<dyn Query> {
        let mut analyzer = analyzer();
        let mut stream = analyzer.token_stream(q);
        let mut terms = Vec::new();
        while let Some(tok) = stream.next() {
            terms.push(Term::from_field_text(self.f.text, &tok.text));
        }
        if terms.is_empty() {
            return Box::new(EmptyQuery);
        }
        Box::new(BooleanQuery::new_multiterms_query(terms))
    }

    pub(super) fn filter_query(
        &self,
        filter: &Map<String, Value>,
    ) -> Result<Option<Box<dyn Query>>, SearchError> {
        let mut musts: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for (k, v) in filter {
            let values: Vec<&Value> = match v {
                Value::Array(items) if items.is_empty() => {
                    return Err(invalid(
                        format!("filter.{k}"),
                        "an empty list matches nothing",
                    ));
                }
                Value::Array(items) => items.iter().collect(),
                other => vec![other],
            };
            let any: Vec<(Occur, Box<dyn Query>)> = values
                .into_iter()
                .map(|v| {
                    let term =
                        Term::from_field_text(self.f.meta, &format!("{k}{SEP}{}", canonical(v)));
                    (
                        Occur::Should,
                        Box::new(TermQuery::new(term, IndexRecordOption::Basic)) as Box<dyn Query>,
                    )
                })
                .collect();
            musts.push((Occur::Must, Box::new(BooleanQuery::new(any))));
        }
        if musts.is_empty() {
            return Ok(None);
        }
        // The filter decides membership only; relevance stays the text query's.
        Ok(Some(Box::new(ConstScoreQuery::new(
            Box::new(BooleanQuery::new(musts)),
            0.0,
        ))))
    }

    pub(super) fn search(&self, req: &SearchRequest) -> Result<Vec<Hit>, SearchError> {
        let text = self.text_query(&req.query);
        let query: Box<dyn Query> = match self.filter_query(&req.filter)? {
            None => text.box_clone(),
            Some(filter) => Box::new(BooleanQuery::new(vec![
                (Occur::Must, text.box_clone()),
                (Occur::Must, filter),
            ])),
        };
        self.run_query(&*query, &*text, req.top_k, 0, req.include_fields)
    }

    /// The best `top_k` hits of `query` after skipping `from`; snippets highlight `text`.
    pub(super) fn run_query(
        &self,
        query: &dyn Query,
        text: &dyn Query,
        top_k: usize,
        from: usize,
        include_fields: bool,
    ) -> Result<Vec<Hit>, SearchError> {
        let top_k = top_k.clamp(1, MAX_TOP_K);
        let searcher = self.reader.searcher();
        let top = searcher.search(
            query,
            &TopDocs::with_limit(top_k).and_offset(from).order_by_score(),
        )?;
        let mut snippets = SnippetGenerator::create(&searcher, text, self.f.text)?;
        snippets.set_max_num_chars(SNIPPET_CHARS);
        let mut hits = Vec::with_capacity(top.len());
        for (score, addr) in top {
            let doc: TantivyDocument = searcher.doc(addr)?;
            hits.push(self.hit(&doc, score, Some(&snippets), include_fields));
        }
        Ok(hits)
    }

    fn hit(
        &self,
        doc: &TantivyDocument,
        score: f32,
        snippets: Option<&SnippetGenerator>,
        include_fields: bool,
    ) -> Hit {
        let id = doc
            .get_first(self.f.id)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string();
        let source: Value = doc
            .get_first(self.f.source)
            .and_then(|v| v.as_str())
            .and_then(|s| serde_json::from_str(s).ok())
            .unwrap_or_default();
        let fields: BTreeMap<String, String> =
            serde_json::from_value(source["fields"].clone()).unwrap_or_default();
        Hit {
            id,
            index: self.name.clone(),
            score: (score * 10_000.0).round() / 10_000.0,
            snippet: match snippets {
                Some(g) => best_snippet(g, &fields),
                None => lead(&fields),
            },
            title: fields.get("title").cloned(),
            metadata: match &source["metadata"] {
                Value::Object(m) => Value::Object(m.clone()),
                _ => Value::Object(Map::new()),
            },
            fields: include_fields.then_some(fields),
        }
    }

    /// The hits of these ids (in this order, with these scores); ids no longer there are
    /// skipped.
    pub(super) fn hits_for(
        &self,
        scored: &[(String, f32)],
        include_fields: bool,
    ) -> Result<Vec<Hit>, SearchError> {
        let searcher = self.reader.searcher();
        let mut hits = Vec::with_capacity(scored.len());
        for (id, score) in scored {
            let q = TermQuery::new(
                Term::from_field_text(self.f.id, id),
                IndexRecordOption::Basic,
            );
            if let Some((_, addr)) = searcher
                .search(&q, &TopDocs::with_limit(1).order_by_score())?
                .first()
            {
                let doc: TantivyDocument = searcher.doc(*addr)?;
                hits.push(self.hit(&doc, *score, None, include_fields));
            }
        }
        Ok(hits)
    }

    /// The ids of every document `query` matches (k-NN filters).
    pub(super) fn ids_matching(
        &self,
        query: &dyn Query,
    ) -> Result<std::collections::HashSet<String>, SearchError> {
        let searcher = self.reader.searcher();
        let addrs = searcher.search(query, &tantivy::collector::DocSetCollector)?;
        let mut ids = std::collections::HashSet::with_capacity(addrs.len());
        for addr in addrs {
            let doc: TantivyDocument = searcher.doc(addr)?;
            if let Some(id) = doc.get_first(self.f.id).and_then(|v| v.as_str()) {
                ids.insert(id.to_string());
            }
        }
        Ok(ids)
    }

    /// Live documents.
    pub(super) fn num_docs(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    /// Field names and metadata keys (with a JSON type) of up to `sample` documents.
    pub(super) fn field_names(
        &self,
        sample: usize,
    ) -> Result<(Vec<String>, Map<String, Value>), SearchError> {
        let searcher = self.reader.searcher();
        let top = searcher.search(
            &AllQuery,
            &TopDocs::with_limit(sample.max(1)).order_by_score(),
        )?;
        let mut fields = std::collections::BTreeSet::new();
        let mut meta = Map::new();
        for (_, addr) in top {
            let doc: TantivyDocument = searcher.doc(addr)?;
            let source: Value = doc
                .get_first(self.f.source)
                .and_then(|v| v.as_str())
                .and_then(|s| serde_json::from_str(s).ok())
                .unwrap_or_default();
            if let Some(f) = source["fields"].as_object() {
                fields.extend(f.keys().cloned());
            }
            if let Some(m) = source["metadata"].as_object() {
                for (k, v) in m {
                    meta.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
        }
        Ok((fields.into_iter().collect(), meta))
    }
}

/// The start of the longest field, for hits without a text query.
fn lead(fields: &BTreeMap<String, String>) -> String {
    let longest = fields
        .values()
        .max_by_key(|t| t.len())
        .cloned()
        .unwrap_or_default();
    match longest.char_indices().nth(SNIPPET_CHARS) {
        Some((cut, _)) => format!("{}…", &longest[..cut]),
        None => longest,
    }
}

/// The passage of the field with the most query matches (ties: the longer field); without
/// matches, the start of the longest field.
fn best_snippet(generator: &SnippetGenerator, fields: &BTreeMap<String, String>) -> String {
    let best = fields
        .values()
        .map(|text| (generator.snippet(text), text))
        .filter(|(s, _)| !s.highlighted().is_empty())
        .max_by_key(|(s, text)| (s.highlighted().len(), text.len()));
    if let Some((s, _)) = best {
        return s.fragment().trim().to_string();
    }
    lead(fields)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_values_let_numbers_and_strings_agree() {
        assert_eq!(canonical(&json!(2023)), "2023");
        assert_eq!(canonical(&json!(2023.0)), "2023");
        assert_eq!(canonical(&json!("2023")), "2023");
        assert_eq!(canonical(&json!(1.5)), "1.5");
        assert_eq!(canonical(&json!(true)), "true");
        let kws = metadata_keywords(
            json!({"tags": ["a", "b"], "year": 2023})
                .as_object()
                .unwrap(),
        );
        assert_eq!(
            kws,
            [
                format!("tags{SEP}a"),
                format!("tags{SEP}b"),
                format!("year{SEP}2023")
            ]
        );
    }
}
