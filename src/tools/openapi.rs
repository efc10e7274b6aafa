//! OpenAPI operations as tools. (Being implemented: this placeholder refuses the config.)

use std::path::Path;
use std::sync::Arc;

use super::ToolSource;

/// A resolved `type = "openapi"` entry.
#[derive(Debug, Clone)]
pub struct OpenApiConfig {
    /// The entry's name.
    pub name: String,
}

/// Reads a `type = "openapi"` table (without `type` and the common option keys).
pub fn parse(
    _table: toml::Table,
    _env: &dyn Fn(&str) -> Option<String>,
    _dir: Option<&Path>,
) -> Result<OpenApiConfig, (String, String)> {
    Err((
        "type".into(),
        "OpenAPI tools are not available in this build yet".into(),
    ))
}

/// Loads the document and builds one tool per operation; a document that cannot be loaded
/// leaves the source without tools (health says why).
pub async fn start(cfg: OpenApiConfig, _client: reqwest::Client) -> Arc<dyn ToolSource> {
    Arc::new(super::EmptySource(cfg.name))
}
