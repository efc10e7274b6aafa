//! MCP servers as tool sources. (Being implemented: this placeholder refuses the config.)

use std::path::Path;
use std::sync::Arc;

use super::ToolSource;

/// A resolved `type = "mcp"` entry.
#[derive(Debug, Clone)]
pub struct McpConfig {
    /// The server's name.
    pub name: String,
}

/// Reads a `type = "mcp"` table (without `type` and the common option keys).
pub fn parse(
    _table: toml::Table,
    _env: &dyn Fn(&str) -> Option<String>,
    _dir: Option<&Path>,
) -> Result<McpConfig, (String, String)> {
    Err((
        "type".into(),
        "MCP tools are not available in this build yet".into(),
    ))
}

/// Starts the source; never fails (a server that is down has no tools until it comes up).
pub async fn start(cfg: McpConfig) -> Arc<dyn ToolSource> {
    Arc::new(super::EmptySource(cfg.name))
}
