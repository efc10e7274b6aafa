//! One embedded index: its schema, English analysis (stemming, stop words), the query and
//! metadata-filter translation, and snippets.
//!
//! Plain queries search `text`, every field's text together; `fields` (a JSON field) makes
//! `title:seattle` search one field. Metadata becomes `key<US>value` keywords, so a filter is
//! a term lookup; the original fields and metadata are stored as JSON and returned with hits.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

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
    text: Field,
    /// The fields as a JSON object, stemmed: lets `title:seattle` search one field.
    fields: Field,
    /// `key<US>value` keywords of the metadata, for exact-match filters.
    meta: Field,
    /// The original `{"fields", "metadata"}` JSON, stored only.
    source: Field,
}

const SEP: char = '\u{1f}';

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

fn analyzer() -> TextAnalyzer {
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
}

impl KbIndex {
    pub(super) fn create(name: &str, path: &Path) -> Result<KbIndex, SearchError> {
        std::fs::create_dir_all(path).map_err(|e| SearchError::Storage(e.to_string()))?;
        let index = Index::create_in_dir(path, Fields::schema())?;
        Self::wrap(name, path, index)
    }

    pub(super) fn open(name: &str, path: &Path) -> Result<KbIndex, SearchError> {
        Self::wrap(name, path, Index::open_in_dir(path)?)
    }

    fn wrap(name: &str, path: &Path, index: Index) -> Result<KbIndex, SearchError> {
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
        })
    }

    fn text_query(&self, query: &str) -> Box<dyn Query> {
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

    fn words_query(&self, q: &str) -> Box<dyn Query> {
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

    fn filter_query(
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
        let top_k = req.top_k.clamp(1, MAX_TOP_K);
        let text = self.text_query(&req.query);
        let query: Box<dyn Query> = match self.filter_query(&req.filter)? {
            None => text.box_clone(),
            Some(filter) => Box::new(BooleanQuery::new(vec![
                (Occur::Must, text.box_clone()),
                (Occur::Must, filter),
            ])),
        };
        let searcher = self.reader.searcher();
        let top = searcher.search(&query, &TopDocs::with_limit(top_k).order_by_score())?;
        let mut snippets = SnippetGenerator::create(&searcher, &*text, self.f.text)?;
        snippets.set_max_num_chars(SNIPPET_CHARS);
        let mut hits = Vec::with_capacity(top.len());
        for (score, addr) in top {
            let doc: TantivyDocument = searcher.doc(addr)?;
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
            hits.push(Hit {
                id,
                index: self.name.clone(),
                score: (score * 10_000.0).round() / 10_000.0,
                snippet: best_snippet(&snippets, &fields),
                title: fields.get("title").cloned(),
                metadata: match &source["metadata"] {
                    Value::Object(m) => Value::Object(m.clone()),
                    _ => Value::Object(Map::new()),
                },
                fields: req.include_fields.then_some(fields),
            });
        }
        Ok(hits)
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
