//! The embedded backend's one tool: full-text search of the knowledge base, answering with
//! cited snippets (and showing them to the UI as a `citations` activity).

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};

use super::citations;
use super::embedded::{MAX_TOP_K, SearchError, SearchRequest, SearchService};
use crate::conversation::ToolSpec;
use crate::tools::{Tool, ToolContext, ToolOutput};

/// Most hits a model may ask for.
const MAX_TOOL_TOP_K: usize = 50;

/// `search {query, top_k?, filter?, index?}` over the embedded indexes.
pub struct EmbeddedSearchTool {
    spec: ToolSpec,
    service: Arc<SearchService>,
    index: String,
    top_k: usize,
}

impl EmbeddedSearchTool {
    /// A tool searching `index` by default, returning `top_k` hits unless asked otherwise.
    pub fn new(
        name: String,
        description: Option<String>,
        service: Arc<SearchService>,
        index: String,
        top_k: usize,
    ) -> Self {
        let description = description.unwrap_or_else(|| {
            format!(
                "Search the knowledge base (index \"{index}\") by full text. Returns the best \
                 matching documents as a JSON array of {{id, index, score, snippet, title, \
                 metadata}}, best first. Cite the documents you use by id. Use `filter` to \
                 restrict by exact metadata values."
            )
        });
        let spec = ToolSpec {
            name,
            description,
            input_schema: json!({
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "description": "Keywords or a question, e.g. \"Seattle population 2023\"."
                    },
                    "top_k": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_TOOL_TOP_K,
                        "description": format!("How many documents to return (default {top_k}).")
                    },
                    "filter": {
                        "type": "object",
                        "description": "Exact-match metadata filter: key -> value, or key -> list of values (any may match), e.g. {\"city\": \"Seattle\", \"year\": 2023}.",
                        "additionalProperties": {
                            "type": ["string", "number", "boolean", "array"]
                        }
                    },
                    "index": {
                        "type": "string",
                        "description": format!("The index to search (default \"{index}\").")
                    }
                },
                "required": ["query"],
                "additionalProperties": false
            }),
            strict: None,
        };
        Self {
            spec,
            service,
            index,
            top_k,
        }
    }

    async fn run(&self, args: Value, ctx: ToolContext) -> ToolOutput {
        let query = args["query"].as_str().unwrap_or_default().to_string();
        let top_k = args["top_k"]
            .as_u64()
            .map(|k| (k as usize).clamp(1, MAX_TOOL_TOP_K.min(MAX_TOP_K)))
            .unwrap_or(self.top_k);
        let filter: Map<String, Value> = args["filter"].as_object().cloned().unwrap_or_default();
        let index = args["index"].as_str().unwrap_or(&self.index).to_string();
        let req = SearchRequest {
            query: query.clone(),
            top_k,
            filter,
            include_fields: false,
        };
        match self.service.search(&index, req).await {
            Ok(hits) => match serde_json::to_string(&hits) {
                Ok(text) => {
                    let cited = hits.iter().map(citations::from_hit).collect();
                    citations::send(&ctx, &query, cited).await;
                    ToolOutput::ok(text)
                }
                Err(e) => ToolOutput::error(format!("Search results could not be encoded: {e}")),
            },
            Err(SearchError::NoIndex(_) | SearchError::InvalidName(_)) => {
                ToolOutput::error(format!(
                    "Unknown index {index:?}. Available indices: {}",
                    self.service.index_names().join(", ")
                ))
            }
            Err(e @ SearchError::Storage(_)) => {
                tracing::warn!(tool = %self.spec.name, error = %e, "search failed");
                ToolOutput::error("The search failed inside the gateway; try again later.")
            }
            Err(e) => ToolOutput::error(format!("Invalid search: {e}")),
        }
    }
}

impl Tool for EmbeddedSearchTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call(&self, args: Value, ctx: ToolContext) -> BoxFuture<'_, ToolOutput> {
        Box::pin(self.run(args, ctx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_util::sync::CancellationToken;

    fn ctx() -> ToolContext {
        ToolContext {
            thread_id: "t".into(),
            run_id: "r".into(),
            tool_call_id: "c".into(),
            cancel: CancellationToken::new(),
            state: Default::default(),
            side: None,
        }
    }

    #[tokio::test]
    async fn the_tool_cites_snippets_and_explains_unknown_indices() {
        let dir =
            std::env::temp_dir().join(format!("agui-kb-tool-{}", uuid::Uuid::new_v4().simple()));
        let svc = Arc::new(SearchService::open(&dir).unwrap());
        let tool =
            EmbeddedSearchTool::new("search".into(), None, Arc::clone(&svc), "demo".into(), 3);
        assert!(crate::tools::compile_schema("search", &tool.spec().input_schema).is_some());
        let out = tool
            .call(
                json!({"query": "Seattle population", "filter": {"year": 2022}}),
                ctx(),
            )
            .await;
        assert!(!out.is_error, "{out:?}");
        let hits: Value = serde_json::from_str(&out.text).unwrap();
        assert_eq!(hits.as_array().unwrap().len(), 1);
        assert_eq!(hits[0]["id"], "seattle-2022");
        assert_eq!(hits[0]["index"], "demo");
        assert!(hits[0]["snippet"].as_str().unwrap().contains("3,489,000"));
        assert!(hits[0]["score"].as_f64().unwrap() > 0.0);

        let out = tool.call(json!({"query": "population"}), ctx()).await;
        let hits: Value = serde_json::from_str(&out.text).unwrap();
        assert_eq!(hits.as_array().unwrap().len(), 3, "the configured top_k");

        let out = tool
            .call(json!({"query": "x", "index": "nope"}), ctx())
            .await;
        assert!(out.is_error);
        assert!(out.text.contains("Available indices: demo"), "{}", out.text);
        let _ = std::fs::remove_dir_all(dir);
    }
}
