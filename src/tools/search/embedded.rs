//! The embedded knowledge base: one tantivy index per named index under the service directory.
//!
//! This file is the service (indexes by name, writes, the demo seed); `index.rs` is one
//! index: schema, analysis, queries and snippets.
//!
//! Each document has an `id` (unique: adding it again replaces it), text `fields` (all searched,
//! stemmed English full text) and `metadata` (a JSON object returned with hits and filterable
//! by exact match on its top-level keys). Writes go through one lazily created `IndexWriter` per
//! index behind a tokio mutex; every write commits and reloads the reader, so a search right
//! after an ingestion answer sees it. Commits and searches run on the blocking pool.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError, RwLock};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tantivy::collector::Count;
use tantivy::query::TermQuery;
use tantivy::schema::IndexRecordOption;
use tantivy::{IndexWriter, Term};

pub use super::index::EmbeddingSpec;
use super::index::KbIndex;

/// The demo corpus created on the first open of an empty service directory.
const DEMO_CORPUS: &str = include_str!("../../../config/demo-corpus.json");
/// Name of the demo index.
pub const DEMO_INDEX: &str = "demo";
/// Written once the service directory has been initialised, so a deleted demo stays deleted.
const SEEDED_MARKER: &str = ".initialized";
/// The smallest budget tantivy accepts for one indexing thread is 15 MB.
const WRITER_BUDGET: usize = 32_000_000;
/// Most hits one search returns.
pub const MAX_TOP_K: usize = 100;
/// Most documents one bulk request may carry.
pub const MAX_BULK: usize = 10_000;
const MAX_ID_BYTES: usize = 512;

/// What can go wrong with the knowledge base; the API maps these to 4xx/5xx answers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SearchError {
    /// The index name breaks the naming rule.
    #[error(
        "invalid index name {0:?}: use 1-64 lowercase letters, digits, '-' or '_', starting with a letter or digit"
    )]
    InvalidName(String),
    /// No such index.
    #[error("index {0:?} does not exist")]
    NoIndex(String),
    /// The index exists already.
    #[error("index {0:?} already exists")]
    Exists(String),
    /// No such document.
    #[error("document {id:?} does not exist in index {index:?}")]
    NoDocument {
        /// The index.
        index: String,
        /// The document id.
        id: String,
    },
    /// A request value is unusable; `field` names it.
    #[error("{field}: {message}")]
    Invalid {
        /// The offending field.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// The index storage failed.
    #[error("index storage failed: {0}")]
    Storage(String),
    /// Texts could not be embedded (no such model, the model failed).
    #[error("embedding failed: {0}")]
    Embedding(String),
}

impl From<tantivy::TantivyError> for SearchError {
    fn from(e: tantivy::TantivyError) -> Self {
        if let tantivy::TantivyError::LockFailure(..) = e {
            return SearchError::Storage(format!(
                "{e} (is another gateway writing to the same data_dir?)"
            ));
        }
        SearchError::Storage(e.to_string())
    }
}

pub(super) fn invalid(field: impl Into<String>, message: impl Into<String>) -> SearchError {
    SearchError::Invalid {
        field: field.into(),
        message: message.into(),
    }
}

/// One document to index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Document {
    /// Unique within its index; adding the same id again replaces the document.
    pub id: String,
    /// Field name -> text; every field is searched.
    #[serde(default)]
    pub fields: BTreeMap<String, String>,
    /// Returned with hits; top-level keys are filterable by exact match.
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// The document's embedding for k-NN; computed at ingestion when the index has an
    /// embedding model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vector: Option<Vec<f32>>,
}

impl Document {
    /// Checks the id, field names and sizes.
    pub fn validate(&self) -> Result<(), SearchError> {
        if self.id.is_empty() || self.id.len() > MAX_ID_BYTES {
            return Err(invalid("id", format!("must be 1-{MAX_ID_BYTES} bytes")));
        }
        if self.id.chars().any(char::is_control) {
            return Err(invalid("id", "must not contain control characters"));
        }
        if self.fields.values().all(|t| t.trim().is_empty()) {
            return Err(invalid("fields", "at least one field must have some text"));
        }
        for name in self.fields.keys() {
            if !crate::settings::valid_name(name) {
                return Err(invalid(
                    format!("fields.{name}"),
                    "field names are 1-64 letters, digits, '-' or '_'",
                ));
            }
        }
        if let Some(v) = &self.vector
            && super::vectors::normalized(v).is_none()
        {
            return Err(invalid(
                "vector",
                "must be a non-empty list of finite numbers, not all zero",
            ));
        }
        Ok(())
    }
}

/// One search.
#[derive(Debug, Clone, Default)]
pub struct SearchRequest {
    /// Full-text query; tantivy query syntax (`title:seattle`, `"exact phrase"`) is understood,
    /// anything it cannot parse is searched as plain words. Empty matches every document.
    pub query: String,
    /// How many hits (clamped to 1..=[`MAX_TOP_K`]).
    pub top_k: usize,
    /// Metadata key -> value (or a list of values, any of which may match); all keys must match.
    pub filter: Map<String, Value>,
    /// Whether hits carry every field's text (the debugging API wants them; tools do not).
    pub include_fields: bool,
}

/// One search result, citable by `index` and `id`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hit {
    /// The document id.
    pub id: String,
    /// The index it came from.
    pub index: String,
    /// Relevance (BM25); higher is better.
    pub score: f32,
    /// The passage that best matches the query.
    pub snippet: String,
    /// The document's `title` field, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The document's metadata.
    pub metadata: Value,
    /// Every field, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fields: Option<BTreeMap<String, String>>,
}

/// An index and its size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IndexInfo {
    /// The name.
    pub name: String,
    /// Live documents.
    pub docs: u64,
    /// The model that embeds its documents, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embedding: Option<EmbeddingSpec>,
}

/// What a write did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WriteReport {
    /// Documents written.
    pub indexed: usize,
    /// Of those, how many replaced a document with the same id.
    pub replaced: usize,
}

/// Whether `s` may name an index (it becomes a directory name and a URL path segment).
pub fn valid_index_name(s: &str) -> bool {
    let mut chars = s.chars();
    s.len() <= 64
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

fn check_name(name: &str) -> Result<(), SearchError> {
    if valid_index_name(name) {
        Ok(())
    } else {
        Err(SearchError::InvalidName(name.to_string()))
    }
}

/// The embedded indexes shared by every agent and the ingestion API.
pub struct SearchService {
    dir: PathBuf,
    /// Open indexes by name. A std lock: held only for map operations, never across `.await`.
    indices: RwLock<BTreeMap<String, Arc<KbIndex>>>,
    /// Serialises index creation and deletion, so a re-created index never meets the files of
    /// its deleted namesake.
    admin: tokio::sync::Mutex<()>,
    /// Embeds texts for indexes with an embedding model (set once the model store is open).
    pub(super) embedder: std::sync::OnceLock<Arc<dyn super::embedder::Embedder>>,
}

impl std::fmt::Debug for SearchService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchService")
            .field("dir", &self.dir)
            .field("indices", &self.index_names())
            .finish()
    }
}

impl SearchService {
    /// Opens (or creates) the indexes stored under `dir`. The first open of an empty directory
    /// creates the `demo` index from the shipped corpus.
    pub fn open(dir: &Path) -> Result<Self, String> {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let entries =
            std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        let mut indices = BTreeMap::new();
        for entry in entries.flatten() {
            let path = entry.path();
            let Some(name) = path
                .file_name()
                .and_then(|n| n.to_str())
                .map(str::to_string)
            else {
                continue;
            };
            if !path.is_dir() || !valid_index_name(&name) || !path.join("meta.json").exists() {
                continue;
            }
            match KbIndex::open(&name, &path) {
                Ok(kb) => {
                    indices.insert(name, Arc::new(kb));
                }
                // One broken index should not take the gateway down; health shows the others.
                Err(e) => tracing::error!(index = %name, error = %e, "cannot open search index"),
            }
        }
        let marker = dir.join(SEEDED_MARKER);
        if indices.is_empty() && !marker.exists() {
            let kb = seed_demo(&dir.join(DEMO_INDEX)).map_err(|e| format!("demo index: {e}"))?;
            indices.insert(DEMO_INDEX.to_string(), Arc::new(kb));
        }
        if !marker.exists() {
            std::fs::write(&marker, b"")
                .map_err(|e| format!("cannot write {}: {e}", marker.display()))?;
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            indices: RwLock::new(indices),
            admin: tokio::sync::Mutex::new(()),
            embedder: std::sync::OnceLock::new(),
        })
    }

    /// Names of the open indexes, sorted.
    pub fn index_names(&self) -> Vec<String> {
        self.map().keys().cloned().collect()
    }

    /// How many indexes there are.
    pub fn len(&self) -> usize {
        self.map().len()
    }

    /// Whether there is no index.
    pub fn is_empty(&self) -> bool {
        self.map().is_empty()
    }

    /// Whether `name` exists.
    pub fn contains(&self, name: &str) -> bool {
        self.map().contains_key(name)
    }

    /// Every index with its live document count.
    pub fn list(&self) -> Vec<IndexInfo> {
        let all: Vec<Arc<KbIndex>> = self.map().values().cloned().collect();
        all.iter()
            .map(|kb| IndexInfo {
                name: kb.name.clone(),
                docs: kb.reader.searcher().num_docs(),
                embedding: kb.embedding.clone(),
            })
            .collect()
    }

    /// Creates an empty index.
    pub async fn create_index(&self, name: &str) -> Result<IndexInfo, SearchError> {
        self.create_index_with(name, None).await
    }

    /// Creates an empty index whose documents are embedded with `embedding`'s model.
    pub async fn create_index_with(
        &self,
        name: &str,
        embedding: Option<EmbeddingSpec>,
    ) -> Result<IndexInfo, SearchError> {
        check_name(name)?;
        let _admin = self.admin.lock().await;
        if self.contains(name) {
            return Err(SearchError::Exists(name.to_string()));
        }
        let path = self.dir.join(name);
        let owned = name.to_string();
        let kb = blocking(move || {
            if path.join("meta.json").exists() {
                return Err(SearchError::Storage(format!(
                    "{} holds an index that could not be opened; remove it first",
                    path.display()
                )));
            }
            if path.exists() {
                // Leftovers of an interrupted deletion.
                std::fs::remove_dir_all(&path).map_err(|e| SearchError::Storage(e.to_string()))?;
            }
            KbIndex::create(&owned, &path, embedding)
        })
        .await?;
        let kb_embedding = kb.embedding.clone();
        self.indices
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.to_string(), Arc::new(kb));
        Ok(IndexInfo {
            name: name.to_string(),
            docs: 0,
            embedding: kb_embedding,
        })
    }

    /// Deletes an index and its files.
    pub async fn delete_index(&self, name: &str) -> Result<(), SearchError> {
        check_name(name)?;
        let _admin = self.admin.lock().await;
        let kb = self
            .indices
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(name)
            .ok_or_else(|| SearchError::NoIndex(name.to_string()))?;
        kb.dropped.store(true, Ordering::SeqCst);
        // Waits for a write in progress; later writers see `dropped` and give up.
        let mut writer = Arc::clone(&kb.writer).lock_owned().await;
        let path = kb.path.clone();
        blocking(move || {
            if let Some(w) = writer.take() {
                let _ = w.wait_merging_threads();
            }
            drop(writer);
            std::fs::remove_dir_all(&path).map_err(|e| SearchError::Storage(e.to_string()))
        })
        .await
    }

    /// Adds (or replaces) documents in one commit. Every document must be valid.
    pub async fn add_documents(
        &self,
        index: &str,
        docs: Vec<Document>,
    ) -> Result<WriteReport, SearchError> {
        for (i, d) in docs.iter().enumerate() {
            d.validate().map_err(|e| match e {
                SearchError::Invalid { field, message } if docs.len() > 1 => SearchError::Invalid {
                    field: format!("documents[{i}].{field}"),
                    message,
                },
                other => other,
            })?;
        }
        let kb = self.get(index)?;
        let docs = self.with_vectors(&kb, docs).await?;
        write(&kb, move |kb, w| {
            let searcher = kb.reader.searcher();
            let mut report = WriteReport::default();
            let mut pending = kb.pending.lock().unwrap_or_else(PoisonError::into_inner);
            for d in &docs {
                pending.push((d.id.clone(), d.vector.clone()));
                let term = Term::from_field_text(kb.f.id, &d.id);
                if searcher.search(
                    &TermQuery::new(term.clone(), IndexRecordOption::Basic),
                    &Count,
                )? > 0
                {
                    report.replaced += 1;
                }
                w.delete_term(term);
                w.add_document(kb.f.document(d))?;
                report.indexed += 1;
            }
            Ok(report)
        })
        .await
    }

    /// Deletes one document.
    pub async fn delete_document(&self, index: &str, id: &str) -> Result<(), SearchError> {
        let kb = self.get(index)?;
        let (index, id) = (index.to_string(), id.to_string());
        write(&kb, move |kb, w| {
            let term = Term::from_field_text(kb.f.id, &id);
            let query = TermQuery::new(term.clone(), IndexRecordOption::Basic);
            if kb.reader.searcher().search(&query, &Count)? == 0 {
                return Err(SearchError::NoDocument { index, id });
            }
            w.delete_term(term);
            kb.pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((id, None));
            Ok(())
        })
        .await
    }

    /// Searches one index.
    pub async fn search(&self, index: &str, req: SearchRequest) -> Result<Vec<Hit>, SearchError> {
        let kb = self.get(index)?;
        blocking(move || kb.search(&req)).await
    }

    fn map(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<KbIndex>>> {
        self.indices.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn get(&self, name: &str) -> Result<Arc<KbIndex>, SearchError> {
        if let Some(kb) = self.map().get(name) {
            return Ok(Arc::clone(kb));
        }
        check_name(name)?;
        Err(SearchError::NoIndex(name.to_string()))
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, SearchError> + Send + 'static,
) -> Result<T, SearchError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| SearchError::Storage(format!("index task failed: {e}")))?
}

/// Runs `op` with the index's writer, then commits and reloads the reader; a failed operation
/// is rolled back, and a writer that fails to roll back is dropped and re-created next time.
async fn write<T: Send + 'static>(
    kb: &Arc<KbIndex>,
    op: impl FnOnce(&KbIndex, &mut IndexWriter) -> Result<T, SearchError> + Send + 'static,
) -> Result<T, SearchError> {
    let mut guard = Arc::clone(&kb.writer).lock_owned().await;
    if kb.dropped.load(Ordering::SeqCst) {
        return Err(SearchError::NoIndex(kb.name.clone()));
    }
    let kb = Arc::clone(kb);
    blocking(move || {
        let w = match guard.as_mut() {
            Some(w) => w,
            None => guard.insert(kb.index.writer_with_num_threads(1, WRITER_BUDGET)?),
        };
        let result = op(&kb, w).and_then(|v| {
            w.commit()?;
            Ok(v)
        });
        let pending =
            std::mem::take(&mut *kb.pending.lock().unwrap_or_else(PoisonError::into_inner));
        match result {
            Ok(v) => {
                kb.reader.reload()?;
                let mut vectors = kb.vectors.write().unwrap_or_else(PoisonError::into_inner);
                for (id, v) in pending {
                    match v {
                        Some(v) => vectors.upsert(&id, &v),
                        None => vectors.remove(&id),
                    }
                }
                Ok(v)
            }
            Err(e) => {
                if w.rollback().is_err() {
                    *guard = None;
                }
                Err(e)
            }
        }
    })
    .await
}

fn seed_demo(path: &Path) -> Result<KbIndex, SearchError> {
    #[derive(Deserialize)]
    struct Corpus {
        documents: Vec<Document>,
    }
    let corpus: Corpus = serde_json::from_str(DEMO_CORPUS)
        .map_err(|e| SearchError::Storage(format!("bad demo corpus: {e}")))?;
    if path.exists() {
        std::fs::remove_dir_all(path).map_err(|e| SearchError::Storage(e.to_string()))?;
    }
    let kb = KbIndex::create(DEMO_INDEX, path, None)?;
    // A short-lived writer: the lock is released before anyone else may need it.
    let mut w: IndexWriter = kb.index.writer_with_num_threads(1, WRITER_BUDGET)?;
    for d in &corpus.documents {
        d.validate()?;
        w.add_document(kb.f.document(d))?;
    }
    w.commit()?;
    w.wait_merging_threads()?;
    kb.reader.reload()?;
    Ok(kb)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(id: &str, title: &str, text: &str, meta: Value) -> Document {
        Document {
            id: id.into(),
            fields: [
                ("title".to_string(), title.to_string()),
                ("text".to_string(), text.to_string()),
            ]
            .into_iter()
            .collect(),
            metadata: meta.as_object().cloned().unwrap_or_default(),
            vector: None,
        }
    }

    fn req(query: &str) -> SearchRequest {
        SearchRequest {
            query: query.into(),
            top_k: 5,
            ..Default::default()
        }
    }

    fn temp() -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("agui-kb-unit-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn index_names_are_checked() {
        for ok in ["demo", "a", "kb_2024", "0-x"] {
            assert!(valid_index_name(ok), "{ok}");
        }
        for bad in ["", "Demo", "_x", "-x", "a/b", "..", "a.b", &"x".repeat(65)] {
            assert!(!valid_index_name(bad), "{bad}");
        }
    }

    #[test]
    fn documents_are_validated() {
        let mut d = doc("x", "T", "body", json!({}));
        assert!(d.validate().is_ok());
        d.id.clear();
        assert!(matches!(d.validate(), Err(SearchError::Invalid { field, .. }) if field == "id"));
        let mut d = doc("x", "", " ", json!({}));
        assert!(d.validate().is_err());
        d.fields.insert("bad name".into(), "text".into());
        let e = d.validate().unwrap_err();
        assert!(e.to_string().starts_with("fields.bad name:"), "{e}");
    }

    #[tokio::test]
    async fn ingest_search_filter_replace_delete_and_reopen() {
        let dir = temp();
        let svc = SearchService::open(&dir).unwrap();
        assert_eq!(svc.index_names(), ["demo"], "the first open seeds the demo");
        svc.create_index("kb").await.unwrap();
        assert_eq!(
            svc.create_index("kb").await,
            Err(SearchError::Exists("kb".into()))
        );
        let docs = vec![
            doc(
                "rust",
                "Rust",
                "Rust is a systems programming language with ownership.",
                json!({"lang": "en", "year": 2015}),
            ),
            doc(
                "tokio",
                "Tokio",
                "Tokio is an asynchronous runtime for Rust programs.",
                json!({"lang": "en", "year": 2016}),
            ),
            doc(
                "bread",
                "Bread",
                "Bakers knead the dough and bake the loaves.",
                json!({"lang": "fr", "tags": ["food", "baking"]}),
            ),
        ];
        let r = svc.add_documents("kb", docs).await.unwrap();
        assert_eq!(
            r,
            WriteReport {
                indexed: 3,
                replaced: 0
            }
        );

        // Stemming: "baking" finds "bake"/"Bakers".
        let hits = svc.search("kb", req("baking loaf")).await.unwrap();
        assert_eq!(hits[0].id, "bread");
        assert!(hits[0].snippet.contains("bake"), "{:?}", hits[0]);
        assert_eq!(hits[0].metadata["lang"], "fr");

        // Ranking: the document about runtimes first.
        let hits = svc.search("kb", req("asynchronous runtime")).await.unwrap();
        assert_eq!(hits[0].id, "tokio");
        assert_eq!(hits.len(), 1);

        // Filters: exact, lenient about number vs string, lists mean any-of, arrays match elements.
        let mut r = req("rust");
        r.filter = json!({"year": "2016"}).as_object().unwrap().clone();
        let ids: Vec<_> = svc
            .search("kb", r.clone())
            .await
            .unwrap()
            .into_iter()
            .map(|h| h.id)
            .collect();
        assert_eq!(ids, ["tokio"]);
        r.filter = json!({"year": [2015, 2016], "lang": "en"})
            .as_object()
            .unwrap()
            .clone();
        assert_eq!(svc.search("kb", r.clone()).await.unwrap().len(), 2);
        r.query = String::new();
        r.filter = json!({"tags": "baking"}).as_object().unwrap().clone();
        let ids: Vec<_> = svc
            .search("kb", r.clone())
            .await
            .unwrap()
            .into_iter()
            .map(|h| h.id)
            .collect();
        assert_eq!(ids, ["bread"]);
        r.filter = json!({"lang": "EN"}).as_object().unwrap().clone();
        assert!(svc.search("kb", r).await.unwrap().is_empty(), "exact match");

        // Field-scoped syntax, and text that is not valid syntax still searches its words.
        let hits = svc.search("kb", req("title:tokio")).await.unwrap();
        assert_eq!(hits[0].id, "tokio");
        let hits = svc
            .search("kb", req("Question: what is Tokio?"))
            .await
            .unwrap();
        assert_eq!(hits[0].id, "tokio");

        // Re-adding an id replaces it.
        let r = svc
            .add_documents(
                "kb",
                vec![doc(
                    "bread",
                    "Bread",
                    "Sourdough needs a starter.",
                    json!({}),
                )],
            )
            .await
            .unwrap();
        assert_eq!(r.replaced, 1);
        assert!(svc.search("kb", req("knead")).await.unwrap().is_empty());
        assert_eq!(
            svc.search("kb", req("sourdough")).await.unwrap()[0].id,
            "bread"
        );
        assert_eq!(svc.list().iter().find(|i| i.name == "kb").unwrap().docs, 3);

        svc.delete_document("kb", "bread").await.unwrap();
        assert!(matches!(
            svc.delete_document("kb", "bread").await,
            Err(SearchError::NoDocument { .. })
        ));
        assert!(svc.search("kb", req("sourdough")).await.unwrap().is_empty());
        drop(svc);

        // Reopen: the documents are still there, and the deleted demo would stay deleted.
        let svc = SearchService::open(&dir).unwrap();
        assert_eq!(
            svc.search("kb", req("ownership")).await.unwrap()[0].id,
            "rust"
        );
        svc.delete_index("demo").await.unwrap();
        svc.delete_index("kb").await.unwrap();
        assert_eq!(
            svc.delete_index("kb").await,
            Err(SearchError::NoIndex("kb".into()))
        );
        drop(svc);
        let svc = SearchService::open(&dir).unwrap();
        assert!(svc.is_empty());
        assert!(matches!(
            svc.search("kb", req("x")).await,
            Err(SearchError::NoIndex(_))
        ));
        assert!(matches!(
            svc.search("Bad", req("x")).await,
            Err(SearchError::InvalidName(_))
        ));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn the_demo_corpus_answers_the_seattle_question() {
        let dir = temp();
        let svc = SearchService::open(&dir).unwrap();
        let hits = svc
            .search("demo", req("what is the population of Seattle in 2023?"))
            .await
            .unwrap();
        assert_eq!(hits[0].id, "seattle-2023", "{hits:#?}");
        assert!(hits[0].snippet.contains("3,519,000"), "{:?}", hits[0]);
        assert_eq!(
            hits[0].metadata,
            json!({"city": "Seattle", "state": "WA", "year": 2023, "population": 3519000})
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
