//! The OpenSearch backend: ml-commons' `SearchIndexTool`, `ListIndexTool` and
//! `IndexMappingTool`, with their argument shapes, calling the cluster's REST API with basic
//! auth. A non-2xx answer becomes an error result carrying OpenSearch's status and body.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::config::Secret;
use crate::conversation::ToolSpec;
use crate::tools::{Tool, ToolContext, ToolOutput};

/// Responses are cut at this size, like HTTP tools'.
const MAX_RESPONSE: usize = 1024 * 1024;

/// A cluster endpoint and its credentials.
pub struct Cluster {
    client: reqwest::Client,
    base: url::Url,
    username: Option<String>,
    password: Option<Secret>,
}

impl Cluster {
    /// A cluster at `base` (e.g. `https://localhost:9200`, a path prefix is kept).
    pub fn new(
        client: reqwest::Client,
        base: url::Url,
        username: Option<String>,
        password: Option<Secret>,
    ) -> Self {
        Self {
            client,
            base,
            username,
            password,
        }
    }

    /// The URL of these path segments under the base, each segment percent-encoded.
    fn url(&self, segments: &[&str]) -> Result<url::Url, String> {
        let mut u = self.base.clone();
        {
            let mut path = u
                .path_segments_mut()
                .map_err(|_| format!("{} cannot have a path", self.base))?;
            path.pop_if_empty();
            for s in segments {
                path.push(s);
            }
        }
        Ok(u)
    }

    async fn send(
        &self,
        tool: &str,
        method: reqwest::Method,
        url: url::Url,
        body: Option<&Value>,
    ) -> ToolOutput {
        let mut req = self.client.request(method, url);
        if let Some(b) = body {
            req = req.json(b);
        }
        if let Some(user) = &self.username {
            req = req.basic_auth(user, self.password.as_ref().map(Secret::expose));
        }
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(tool, error = %e, "opensearch request failed");
                return ToolOutput::error(format!("{tool}: OpenSearch could not be reached."));
            }
        };
        let out = crate::tools::http_output(resp, MAX_RESPONSE, tool).await;
        if out.is_error && out.text.starts_with("HTTP ") {
            return ToolOutput::error(format!("OpenSearch {}", out.text));
        }
        out
    }
}

/// Index names become path segments; refuse the ones that would address cluster APIs.
fn check_index(name: &str) -> Result<(), String> {
    if name.is_empty() || name == "." || name == ".." || (name.starts_with('_') && name != "_all") {
        return Err(format!("{name:?} is not an index name"));
    }
    Ok(())
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect()
}

/// `SearchIndexTool {index, query}`: the query DSL object is the `_search` body, unchanged
/// (a configured `top_k` only fills in a missing `size`).
pub struct SearchIndexTool {
    spec: ToolSpec,
    cluster: Arc<Cluster>,
    default_index: Option<String>,
    size: Option<usize>,
}

impl SearchIndexTool {
    /// The tool; `default_index` makes `index` optional.
    pub fn new(cluster: Arc<Cluster>, default_index: Option<String>, size: Option<usize>) -> Self {
        let mut index_desc = "OpenSearch index name. for example: index1".to_string();
        if let Some(d) = &default_index {
            index_desc.push_str(&format!(" (default {d:?})"));
        }
        let required = if default_index.is_some() {
            json!(["query"])
        } else {
            json!(["index", "query"])
        };
        let spec = ToolSpec {
            name: "SearchIndexTool".into(),
            description: "Use this tool to search an index by providing two parameters: 'index' for the index name, and 'query' for the OpenSearch DSL formatted query. Only use this tool when both index name and DSL query is available. Returns documents matching the query in the provided index.".into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "index": {"type": "string", "description": index_desc},
                    "query": {
                        "type": "object",
                        "description": "OpenSearch search index query. You need to get index mapping to write correct search query. It must be a valid OpenSearch query. Valid value:\n{\"query\":{\"match\":{\"population_description\":\"seattle 2023 population\"}},\"size\":2,\"_source\":\"population_description\"}\nInvalid value: \n{\"match\":{\"population_description\":\"seattle 2023 population\"}}\nThe value is invalid because the match not wrapped by \"query\"."
                    }
                },
                "required": required,
                "additionalProperties": false
            }),
        };
        Self {
            spec,
            cluster,
            default_index,
            size,
        }
    }

    async fn run(&self, args: Value) -> ToolOutput {
        let Some(index) = args["index"]
            .as_str()
            .map(str::to_string)
            .or_else(|| self.default_index.clone())
        else {
            return ToolOutput::error("SearchIndexTool: `index` is required.");
        };
        if let Err(e) = check_index(&index) {
            return ToolOutput::error(format!("SearchIndexTool: {e}."));
        }
        let mut body = args["query"].clone();
        if let (Some(size), Value::Object(q)) = (self.size, &mut body) {
            q.entry("size").or_insert(json!(size));
        }
        let url = match self.cluster.url(&[&index, "_search"]) {
            Ok(u) => u,
            Err(e) => return ToolOutput::error(e),
        };
        self.cluster
            .send(&self.spec.name, reqwest::Method::POST, url, Some(&body))
            .await
    }
}

impl Tool for SearchIndexTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn call(&self, args: Value, _ctx: ToolContext) -> BoxFuture<'_, ToolOutput> {
        Box::pin(self.run(args))
    }
}

/// `ListIndexTool {indices?}`: `GET _cat/indices[/<list>]?format=json`.
pub struct ListIndexTool {
    spec: ToolSpec,
    cluster: Arc<Cluster>,
}

impl ListIndexTool {
    /// The tool.
    pub fn new(cluster: Arc<Cluster>) -> Self {
        let spec = ToolSpec {
            name: "ListIndexTool".into(),
            description: "This tool gets index information from the OpenSearch cluster: health, status, index name, document count and store size of each index. It takes an optional argument 'indices', a list of index names (wildcards allowed); an empty or missing list means all indices.".into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "indices": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "OpenSearch index name list, separated by comma. for example: [\"index1\", \"index2\"], use empty array [] to list all indices in the cluster"
                    }
                },
                "additionalProperties": false
            }),
        };
        Self { spec, cluster }
    }

    async fn run(&self, args: Value) -> ToolOutput {
        let indices = strings(&args["indices"]);
        for i in &indices {
            if let Err(e) = check_index(i) {
                return ToolOutput::error(format!("ListIndexTool: {e}."));
            }
        }
        let joined = indices.join(",");
        let segments: Vec<&str> = if indices.is_empty() {
            vec!["_cat", "indices"]
        } else {
            vec!["_cat", "indices", &joined]
        };
        let mut url = match self.cluster.url(&segments) {
            Ok(u) => u,
            Err(e) => return ToolOutput::error(e),
        };
        url.set_query(Some("format=json"));
        self.cluster
            .send(&self.spec.name, reqwest::Method::GET, url, None)
            .await
    }
}

impl Tool for ListIndexTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn call(&self, args: Value, _ctx: ToolContext) -> BoxFuture<'_, ToolOutput> {
        Box::pin(self.run(args))
    }
}

/// `IndexMappingTool {index: [..]}`: `GET <list>/_mapping`.
pub struct IndexMappingTool {
    spec: ToolSpec,
    cluster: Arc<Cluster>,
}

impl IndexMappingTool {
    /// The tool.
    pub fn new(cluster: Arc<Cluster>) -> Self {
        let spec = ToolSpec {
            name: "IndexMappingTool".into(),
            description: "This tool gets index mapping information from a certain index. It takes 1 required argument named 'index' which is a list of one or more indices to get mapping information from, which expands wildcards. The mappings are in JSON format under the key 'properties' which includes the field name as a key and a JSON object with field type under the key 'type'.".into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "index": {
                        "type": "array",
                        "items": {"type": "string"},
                        "minItems": 1,
                        "description": "OpenSearch index name list, separated by comma. for example: [\"index1\", \"index2\"]"
                    }
                },
                "required": ["index"],
                "additionalProperties": false
            }),
        };
        Self { spec, cluster }
    }

    async fn run(&self, args: Value) -> ToolOutput {
        let indices = strings(&args["index"]);
        if indices.is_empty() {
            return ToolOutput::error("IndexMappingTool: `index` must list at least one index.");
        }
        for i in &indices {
            if let Err(e) = check_index(i) {
                return ToolOutput::error(format!("IndexMappingTool: {e}."));
            }
        }
        let url = match self.cluster.url(&[&indices.join(","), "_mapping"]) {
            Ok(u) => u,
            Err(e) => return ToolOutput::error(e),
        };
        self.cluster
            .send(&self.spec.name, reqwest::Method::GET, url, None)
            .await
    }
}

impl Tool for IndexMappingTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn call(&self, args: Value, _ctx: ToolContext) -> BoxFuture<'_, ToolOutput> {
        Box::pin(self.run(args))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(base: &str) -> Cluster {
        Cluster::new(
            reqwest::Client::new(),
            url::Url::parse(base).unwrap(),
            None,
            None,
        )
    }

    #[test]
    fn urls_keep_the_base_path_and_encode_segments() {
        let c = cluster("http://h:9200");
        assert_eq!(
            c.url(&["a,b", "_mapping"]).unwrap().as_str(),
            "http://h:9200/a,b/_mapping"
        );
        let c = cluster("https://h/os/");
        assert_eq!(
            c.url(&["logs-*", "_search"]).unwrap().as_str(),
            "https://h/os/logs-*/_search"
        );
        assert_eq!(
            c.url(&["a/b?c", "_search"]).unwrap().as_str(),
            "https://h/os/a%2Fb%3Fc/_search"
        );
    }

    #[test]
    fn cluster_apis_are_not_index_names() {
        assert!(check_index("logs-2024").is_ok());
        assert!(check_index("_all").is_ok());
        assert!(check_index(".kibana").is_ok());
        for bad in ["", ".", "..", "_cluster", "_nodes"] {
            assert!(check_index(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn schemas_compile() {
        let c = Arc::new(cluster("http://h:9200"));
        for spec in [
            SearchIndexTool::new(Arc::clone(&c), None, None)
                .spec()
                .clone(),
            SearchIndexTool::new(Arc::clone(&c), Some("x".into()), None)
                .spec()
                .clone(),
            ListIndexTool::new(Arc::clone(&c)).spec().clone(),
            IndexMappingTool::new(c).spec().clone(),
        ] {
            assert!(crate::tools::compile_schema(&spec.name, &spec.input_schema).is_some());
        }
    }
}
