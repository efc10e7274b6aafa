//! Knowledge-base search tools. (Being implemented: this placeholder refuses the config.)

use std::path::Path;
use std::sync::Arc;

use super::ToolSource;

/// A resolved `type = "search"` entry.
#[derive(Debug, Clone)]
pub struct SearchConfig {
    /// The entry's name.
    pub name: String,
}

/// Reads a `type = "search"` table (without `type` and the common option keys).
pub fn parse(
    _table: toml::Table,
    _env: &dyn Fn(&str) -> Option<String>,
    _dir: Option<&Path>,
) -> Result<SearchConfig, (String, String)> {
    Err((
        "type".into(),
        "search tools are not available in this build yet".into(),
    ))
}

/// The embedded indexes shared by every agent and the ingestion API.
#[derive(Debug, Default)]
pub struct SearchService {}

impl SearchService {
    /// Opens (or creates) the indexes stored under `dir`.
    pub fn open(_dir: &Path) -> Result<Self, String> {
        Ok(Self {})
    }
}

/// Builds the search tools of an entry.
pub async fn start(
    cfg: SearchConfig,
    _service: Arc<SearchService>,
    _client: reqwest::Client,
) -> Arc<dyn ToolSource> {
    Arc::new(super::EmptySource(cfg.name))
}
