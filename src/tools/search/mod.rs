//! Knowledge-base search tools, from a `type = "search"` entry:
//!
//! - `backend = "embedded"` (default): one tool (`search`, renamable with `tool_name`) over the
//!   gateway's own tantivy indexes ([`embedded`]), filled through the ingestion API
//!   (`/indices/...`). It answers with cited snippets.
//! - `backend = "opensearch"`: ml-commons' `SearchIndexTool`, `ListIndexTool` and
//!   `IndexMappingTool` against an OpenSearch cluster ([`opensearch`]), the same tools an agent
//!   registration names by type ([`ml`], [`ml_run`]) on the `[opensearch]` cluster
//!   ([`cluster`]).
//!
//! ```toml
//! [[agents.tools]]
//! type = "search"
//! name = "kb"                 # the source's name in health output
//! backend = "embedded"        # or "opensearch"
//! index = "demo"              # default index (embedded: "demo")
//! top_k = 5                   # embedded: hits per search; opensearch: fills a missing "size"
//! tool_name = "search"        # embedded only
//! description = "..."         # embedded only: the tool description the model sees
//! url = "https://localhost:9200"  # opensearch only
//! username = "admin"          # opensearch only, with password_env
//! password_env = "OPENSEARCH_PASSWORD"
//! verify_tls = true           # opensearch only; false accepts any certificate
//! ```

pub mod citations;
pub mod cluster;
pub mod embedded;
pub mod embedder;
mod index;
pub mod ml;
pub mod ml_run;
pub mod opensearch;
pub mod semantic;
pub mod tools;
pub mod vectors;

use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};

pub use embedded::{
    Document, Hit, IndexInfo, SearchError, SearchRequest, SearchService, WriteReport,
};

use super::{SourceTool, ToolSource};
use crate::redact::Secret;

/// Hits per search unless configured.
const DEFAULT_TOP_K: usize = 5;

/// A resolved `type = "search"` entry.
#[derive(Debug, Clone)]
pub struct SearchConfig {
    /// The entry's name (health output).
    pub name: String,
    /// Where the documents live.
    pub backend: Backend,
    /// Default index of the tools (embedded: always set).
    pub index: Option<String>,
}

/// The backends of a search entry.
#[derive(Debug, Clone)]
pub enum Backend {
    /// The gateway's own indexes.
    Embedded {
        /// The tool's name.
        tool_name: String,
        /// The tool's description, if not the default.
        description: Option<String>,
        /// Hits per search.
        top_k: usize,
    },
    /// An OpenSearch cluster.
    OpenSearch {
        /// Base URL.
        url: url::Url,
        /// Basic-auth user.
        username: Option<String>,
        /// Basic-auth password.
        password: Option<Secret>,
        /// Whether certificates are verified.
        verify_tls: bool,
        /// Fills a missing `size` of `SearchIndexTool` queries.
        size: Option<usize>,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchFile {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    backend: Option<String>,
    #[serde(default)]
    index: Option<String>,
    #[serde(default)]
    top_k: Option<usize>,
    #[serde(default)]
    tool_name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password_env: Option<String>,
    #[serde(default)]
    verify_tls: Option<bool>,
}

type Fail = (String, String);

fn fail(key: &str, problem: impl Into<String>) -> Fail {
    (key.to_string(), problem.into())
}

/// Reads a `type = "search"` table (without `type` and the common option keys).
pub fn parse(
    table: toml::Table,
    env: &dyn Fn(&str) -> Option<String>,
    _dir: Option<&Path>,
) -> Result<SearchConfig, Fail> {
    let f: SearchFile = crate::settings::from_table(table)?;
    let check_tool_name = |key: &str, n: &str| {
        if crate::settings::valid_name(n) {
            Ok(())
        } else {
            Err(fail(
                key,
                format!("{n:?} must be 1-64 letters, digits, '-' or '_'"),
            ))
        }
    };
    if let Some(k) = f.top_k
        && !(1..=50).contains(&k)
    {
        return Err(fail("top_k", "must be between 1 and 50"));
    }
    let only = |key: &str, set: bool, backend: &str| {
        if set {
            Err(fail(key, format!("only for backend = \"{backend}\"")))
        } else {
            Ok(())
        }
    };
    match f.backend.as_deref().unwrap_or("embedded") {
        "embedded" => {
            only("url", f.url.is_some(), "opensearch")?;
            only("username", f.username.is_some(), "opensearch")?;
            only("password_env", f.password_env.is_some(), "opensearch")?;
            only("verify_tls", f.verify_tls.is_some(), "opensearch")?;
            let index = f.index.unwrap_or_else(|| embedded::DEMO_INDEX.to_string());
            if !embedded::valid_index_name(&index) {
                return Err(fail(
                    "index",
                    format!(
                        "{index:?}: index names are 1-64 lowercase letters, digits, '-' or '_'"
                    ),
                ));
            }
            let tool_name = f.tool_name.unwrap_or_else(|| "search".into());
            check_tool_name("tool_name", &tool_name)?;
            let name = f.name.unwrap_or_else(|| tool_name.clone());
            check_tool_name("name", &name)?;
            Ok(SearchConfig {
                name,
                index: Some(index),
                backend: Backend::Embedded {
                    tool_name,
                    description: f.description.filter(|d| !d.trim().is_empty()),
                    top_k: f.top_k.unwrap_or(DEFAULT_TOP_K),
                },
            })
        }
        "opensearch" => {
            only("tool_name", f.tool_name.is_some(), "embedded")?;
            only("description", f.description.is_some(), "embedded")?;
            let raw = f
                .url
                .ok_or_else(|| fail("url", "required for backend = \"opensearch\""))?;
            let url = cluster::parse_url(&raw)?;
            let password = match cluster::basic(f.username.clone(), f.password_env.as_deref(), env)?
            {
                cluster::ClusterAuth::Basic { password, .. } => password,
                _ => None,
            };
            let name = f.name.unwrap_or_else(|| "opensearch".into());
            check_tool_name("name", &name)?;
            if let Some(i) = &f.index
                && i.trim().is_empty()
            {
                return Err(fail("index", "must not be empty"));
            }
            Ok(SearchConfig {
                name,
                index: f.index,
                backend: Backend::OpenSearch {
                    url,
                    username: f.username,
                    password,
                    verify_tls: f.verify_tls.unwrap_or(true),
                    size: f.top_k,
                },
            })
        }
        other => Err(fail(
            "backend",
            format!("unknown backend {other:?}; expected \"embedded\" or \"opensearch\""),
        )),
    }
}

/// A fixed set of search tools with their health.
struct SearchSource {
    name: String,
    tools: Vec<SourceTool>,
    health: Health,
}

enum Health {
    Embedded {
        service: Arc<SearchService>,
        index: String,
    },
    Static(Value),
}

impl ToolSource for SearchSource {
    fn name(&self) -> &str {
        &self.name
    }

    fn tools(&self) -> Vec<SourceTool> {
        self.tools.clone()
    }

    fn health(&self) -> Value {
        match &self.health {
            Health::Embedded { service, index } => {
                let mut h =
                    json!({"status": "ok", "backend": "embedded", "indices": service.len()});
                if !service.contains(index) {
                    h["status"] = json!("degraded");
                    h["error"] = json!(format!("default index {index:?} does not exist"));
                }
                h
            }
            Health::Static(v) => v.clone(),
        }
    }
}

/// Builds the search tools of an entry. Never waits on the network: an OpenSearch cluster is
/// first contacted by a tool call.
pub async fn start(
    cfg: SearchConfig,
    service: Arc<SearchService>,
    client: reqwest::Client,
) -> Arc<dyn ToolSource> {
    match cfg.backend {
        Backend::Embedded {
            tool_name,
            description,
            top_k,
        } => {
            let index = cfg
                .index
                .unwrap_or_else(|| embedded::DEMO_INDEX.to_string());
            let tool = tools::EmbeddedSearchTool::new(
                tool_name,
                description,
                Arc::clone(&service),
                index.clone(),
                top_k,
            );
            Arc::new(SearchSource {
                name: cfg.name,
                tools: vec![SourceTool::new(Arc::new(tool))],
                health: Health::Embedded { service, index },
            })
        }
        Backend::OpenSearch {
            url,
            username,
            password,
            verify_tls,
            size,
        } => {
            let client = if verify_tls {
                Ok(client)
            } else {
                reqwest::Client::builder()
                    .connect_timeout(std::time::Duration::from_secs(10))
                    .tls_danger_accept_invalid_certs(true)
                    .build()
            };
            let client = match client {
                Ok(c) => c,
                Err(e) => {
                    return Arc::new(SearchSource {
                        name: cfg.name,
                        tools: Vec::new(),
                        health: Health::Static(
                            json!({"status": "down", "backend": "opensearch", "error": format!("HTTP client: {e}")}),
                        ),
                    });
                }
            };
            let health = json!({"status": "ok", "backend": "opensearch", "url": url.as_str()});
            let auth = match username {
                Some(username) => cluster::ClusterAuth::Basic { username, password },
                None => cluster::ClusterAuth::None,
            };
            let cluster = Arc::new(cluster::Cluster::new(client, url, auth));
            let tools: Vec<SourceTool> =
                opensearch::entry_tools(cluster, cfg.index, size, Arc::clone(&service))
                    .into_iter()
                    .map(SourceTool::new)
                    .collect();
            Arc::new(SearchSource {
                name: cfg.name,
                tools,
                health: Health::Static(health),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_toml(text: &str) -> Result<SearchConfig, Fail> {
        let env = |k: &str| (k == "OS_PW").then(|| "s3cret".to_string());
        parse(toml::from_str(text).unwrap(), &env, None)
    }

    #[test]
    fn embedded_defaults_and_overrides() {
        let c = parse_toml("").unwrap();
        assert_eq!(
            (c.name.as_str(), c.index.as_deref()),
            ("search", Some("demo"))
        );
        let Backend::Embedded {
            tool_name, top_k, ..
        } = &c.backend
        else {
            panic!()
        };
        assert_eq!((tool_name.as_str(), *top_k), ("search", 5));
        let c = parse_toml("tool_name = \"kb_search\"\nindex = \"docs\"\ntop_k = 3").unwrap();
        assert_eq!(c.name, "kb_search");
        assert!(matches!(c.backend, Backend::Embedded { top_k: 3, .. }));
    }

    #[test]
    fn opensearch_entries_resolve_credentials_and_hide_them() {
        let c = parse_toml(
            "backend = \"opensearch\"\nurl = \"https://os:9200\"\nusername = \"admin\"\npassword_env = \"OS_PW\"",
        )
        .unwrap();
        let Backend::OpenSearch {
            password,
            verify_tls,
            ..
        } = &c.backend
        else {
            panic!()
        };
        assert_eq!(password.as_ref().unwrap().expose(), "s3cret");
        assert!(*verify_tls);
        assert!(!format!("{c:?}").contains("s3cret"));
    }

    #[test]
    fn problems_name_their_key() {
        let key = |t: &str| parse_toml(t).unwrap_err().0;
        assert_eq!(key("backend = \"solr\""), "backend");
        assert_eq!(key("backend = \"opensearch\""), "url");
        assert_eq!(key("backend = \"opensearch\"\nurl = \"ftp://x\""), "url");
        assert_eq!(
            key(
                "backend = \"opensearch\"\nurl = \"http://x\"\nusername = \"u\"\npassword_env = \"NOPE\""
            ),
            "password_env"
        );
        assert_eq!(key("url = \"http://x\""), "url");
        assert_eq!(
            key("backend = \"opensearch\"\nurl = \"http://x\"\ntool_name = \"s\""),
            "tool_name"
        );
        assert_eq!(key("index = \"Bad Name\""), "index");
        assert_eq!(key("top_k = 0"), "top_k");
        assert_eq!(key("tool_name = \"a b\""), "tool_name");
        assert_eq!(key("colour = \"red\""), "colour");
        let (_, problem) = parse_toml("colour = \"red\"").unwrap_err();
        assert!(problem.contains("colour"), "{problem}");
    }
}
