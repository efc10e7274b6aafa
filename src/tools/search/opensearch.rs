//! A `type = "search"` entry's `backend = "opensearch"`: ml-commons' `SearchIndexTool`,
//! `ListIndexTool` and `IndexMappingTool` on the entry's cluster, the same tools (and cluster
//! client) an agent registration's ml-commons tool types use.

use std::sync::Arc;

use serde_json::{Map, json};

use super::cluster::Cluster;
use super::embedded::SearchService;
use super::ml::{MlToolConfig, MlToolType};
use super::ml_run::{MlBackend, MlTool};
use crate::conversation::ToolSpec;
use crate::tools::Tool;

/// The entry's three tools; `default_index` makes `index` optional, `size` fills a missing
/// `size` of queries.
pub fn entry_tools(
    cluster: Arc<Cluster>,
    default_index: Option<String>,
    size: Option<usize>,
    service: Arc<SearchService>,
) -> Vec<Arc<dyn Tool>> {
    let tool = |ty: MlToolType, params: Map<String, serde_json::Value>, fill: Option<usize>| {
        let mut schema = ty.default_schema();
        if ty == MlToolType::SearchIndex
            && let Some(d) = &default_index
        {
            schema["required"] = json!(["query"]);
            schema["properties"]["index"]["description"] = json!(format!(
                "OpenSearch index name. Example: index1 (default {d:?})"
            ));
        }
        Arc::new(MlTool::new(
            MlToolConfig {
                ty,
                spec: ToolSpec {
                    name: ty.as_str().into(),
                    description: ty.default_description().into(),
                    input_schema: schema,
                    strict: None,
                },
                params,
                fill_size: fill,
            },
            MlBackend::Cluster(Arc::clone(&cluster)),
            Arc::clone(&service),
        )) as Arc<dyn Tool>
    };
    let mut search_params = Map::new();
    if let Some(d) = &default_index {
        search_params.insert("index".into(), json!(d));
    }
    vec![
        tool(MlToolType::SearchIndex, search_params, size),
        tool(MlToolType::ListIndex, Map::new(), None),
        tool(MlToolType::IndexMapping, Map::new(), None),
    ]
}
