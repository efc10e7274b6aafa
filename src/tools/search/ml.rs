//! ml-commons' index tool types as an agent registration names them: `SearchIndexTool`,
//! `VectorDBTool`, `ListIndexTool`, `IndexMappingTool` and `CatIndexTool`, with ml-commons'
//! parameter names, defaults (name = the type, its description and input schema) and output
//! shapes. They run against the gateway's `[opensearch]` cluster when there is one, else on
//! the embedded indexes ([`super::ml_run`]).

use serde_json::{Map, Value, json};

use crate::connector::{Invalid, invalid};
use crate::conversation::ToolSpec;

/// `VectorDBTool`'s hits unless `doc_size` says otherwise (ml-commons' default).
pub const DEFAULT_DOC_SIZE: usize = 2;
/// `VectorDBTool`'s `k` unless set (ml-commons' default).
pub const DEFAULT_K: usize = 10;

/// The ml-commons tool types the gateway runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MlToolType {
    /// `{index, query}`: a query DSL search.
    SearchIndex,
    /// Embeds `input` and runs a k-NN query.
    VectorDb,
    /// Index information as a CSV table.
    ListIndex,
    /// Mappings and settings of indices.
    IndexMapping,
    /// Index information as a tab-separated table (the older `_cat/indices` tool).
    CatIndex,
}

/// Every type name.
pub const ML_TOOL_TYPES: &[&str] = &[
    "SearchIndexTool",
    "VectorDBTool",
    "ListIndexTool",
    "IndexMappingTool",
    "CatIndexTool",
];

impl MlToolType {
    /// The type a registration names.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "SearchIndexTool" => Self::SearchIndex,
            "VectorDBTool" => Self::VectorDb,
            "ListIndexTool" => Self::ListIndex,
            "IndexMappingTool" => Self::IndexMapping,
            "CatIndexTool" => Self::CatIndex,
            _ => return None,
        })
    }

    /// The type's name (also the tool's default name).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SearchIndex => "SearchIndexTool",
            Self::VectorDb => "VectorDBTool",
            Self::ListIndex => "ListIndexTool",
            Self::IndexMapping => "IndexMappingTool",
            Self::CatIndex => "CatIndexTool",
        }
    }

    /// ml-commons' default description.
    pub fn default_description(self) -> &'static str {
        match self {
            Self::SearchIndex => {
                "Use this tool to search an index by providing two parameters: 'index' for the index name, and 'query' for the OpenSearch DSL formatted query. Only use this tool when both index name and DSL query is available. Returns documents matching the query in the provided index."
            }
            Self::VectorDb => "Use this tool to search data in OpenSearch index.",
            Self::ListIndex => {
                "This tool gets index information from the OpenSearch cluster. It takes 2 optional arguments named `indices` which is a comma-delimited list of one or more indices to get information from (default is an empty list meaning all indices), and `local` which means whether to return information from the local node only instead of the cluster manager node (default is false). The tool returns the indices information, including `health`, `status`, `index`, `uuid`, `pri`, `rep`, `docs.count`, `docs.deleted`, `store.size`, `pri.store. size `, `pri.store.size`, `pri.store`."
            }
            Self::IndexMapping => {
                "This tool gets index mapping information from a certain index. It takes 1 required argument named `index` which is a comma-delimited list of one or more indices to get mapping information from, which expands wildcards. It takes 1 optional argument named `local` which means whether to return information from the local node only instead of the cluster manager node (Default is false). The tool returns the index mapping information, which is about how documents and their fields are stored and indexed, and also returns the index settings."
            }
            Self::CatIndex => "Use this tool to get index information.",
        }
    }

    /// ml-commons' default input schema (the retriever has none there; the gateway offers the
    /// `question` its `input` template reads).
    pub fn default_schema(self) -> Value {
        match self {
            Self::SearchIndex => json!({
                "type": "object",
                "properties": {
                    "index": {"type": "string", "description": "OpenSearch index name. Example: index1"},
                    "query": {"type": "object", "description": "OpenSearch Query DSL as a JSON object. The object MUST follow OpenSearch Query DSL and MUST include a top-level 'query' field. Preferred format for reliable parsing. Example: {\"query\":{\"match\":{\"field\":\"value\"}},\"size\":10}. String format is also supported for backward compatibility, but object format is strongly recommended."}
                },
                "required": ["index", "query"],
                "additionalProperties": false
            }),
            Self::VectorDb => json!({
                "type": "object",
                "properties": {
                    "question": {"type": "string", "description": "Natural language question to search the index for"}
                },
                "required": ["question"]
            }),
            Self::ListIndex | Self::CatIndex => json!({
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
            Self::IndexMapping => json!({
                "type": "object",
                "properties": {
                    "index": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "OpenSearch index name list, separated by comma. for example: [\"index1\", \"index2\"]"
                    }
                },
                "required": ["index"]
            }),
        }
    }
}

/// A compiled ml-commons tool entry.
#[derive(Debug, Clone)]
pub struct MlToolConfig {
    /// Which tool.
    pub ty: MlToolType,
    /// Name, description and the schema the model is offered.
    pub spec: ToolSpec,
    /// The registration's `parameters` (templates and settings); a call's arguments are laid
    /// over them.
    pub params: Map<String, Value>,
    /// Fills a missing `size` of `SearchIndexTool` queries (a config file search entry's
    /// `top_k`).
    pub fill_size: Option<usize>,
}

/// A count parameter given as a number or as text (ml-commons keeps parameters as strings).
pub fn count(params: &Map<String, Value>, key: &str) -> Result<Option<usize>, String> {
    match params.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64().or_else(|| v.as_str()?.trim().parse().ok()) {
            Some(n) if (1..=10_000).contains(&n) => Ok(Some(n as usize)),
            _ => Err("must be a whole number between 1 and 10000".into()),
        },
    }
}

/// A list parameter given as a list, as JSON text of a list, or as comma-separated text.
pub fn list(v: Option<&Value>) -> Vec<String> {
    match v {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|x| x.as_str().map(str::to_string))
            .collect(),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Array(a)) => list(Some(&Value::Array(a))),
            _ => s
                .split(',')
                .map(|x| x.trim().to_string())
                .filter(|x| !x.is_empty())
                .collect(),
        },
        Some(_) => Vec::new(),
    }
}

/// Reads a registration's tool entry of an ml-commons type (`name`, `description`,
/// `parameters`); `f` names fields. The model of a `VectorDBTool` is checked by the caller.
pub fn from_registration(
    ty: MlToolType,
    entry: &Map<String, Value>,
    f: &dyn Fn(&str) -> String,
) -> Result<MlToolConfig, Invalid> {
    let name = match entry.get("name") {
        None | Some(Value::Null) => ty.as_str().to_string(),
        Some(Value::String(n)) if crate::settings::valid_name(n) => n.clone(),
        Some(_) => {
            return Err(invalid(
                f("name"),
                "must be 1-64 letters, digits, '-' or '_'",
            ));
        }
    };
    let description = match entry.get("description") {
        None | Some(Value::Null) => ty.default_description().to_string(),
        Some(Value::String(d)) if !d.trim().is_empty() => d.clone(),
        Some(_) => return Err(invalid(f("description"), "must be a non-empty string")),
    };
    let params = match entry.get("parameters") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err(invalid(f("parameters"), "must be an object")),
    };
    for key in ["k", "doc_size"] {
        count(&params, key).map_err(|p| invalid(f(&format!("parameters.{key}")), p))?;
    }
    let text = |key: &str, required: bool| -> Result<(), Invalid> {
        match params.get(key) {
            None if !required => Ok(()),
            Some(Value::String(s)) if !s.trim().is_empty() => Ok(()),
            None => Err(invalid(
                f(&format!("parameters.{key}")),
                format!("required for {}", ty.as_str()),
            )),
            Some(_) => Err(invalid(
                f(&format!("parameters.{key}")),
                "must be a non-empty string",
            )),
        }
    };
    match ty {
        MlToolType::VectorDb => {
            text("model_id", true)?;
            text("index", true)?;
            text("embedding_field", false)?;
            text("nested_path", false)?;
            text("input", false)?;
        }
        MlToolType::SearchIndex => {
            text("input", false)?;
            text("index", false)?;
            if let Some(q) = params.get("query")
                && !q.is_object()
                && !q.is_string()
            {
                return Err(invalid(
                    f("parameters.query"),
                    "must be a query DSL object (or its JSON text)",
                ));
            }
        }
        _ => {}
    }
    Ok(MlToolConfig {
        ty,
        spec: ToolSpec {
            name,
            description,
            input_schema: ty.default_schema(),
            strict: None,
        },
        params,
        fill_size: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn bare_types_take_ml_commons_defaults() {
        let f = |k: &str| format!("tools[0].{k}");
        for ty in ML_TOOL_TYPES {
            let t = MlToolType::parse(ty).unwrap();
            if t == MlToolType::VectorDb {
                continue;
            }
            let c = from_registration(t, &entry(json!({"type": ty})), &f).unwrap();
            assert_eq!(c.spec.name, *ty);
            assert_eq!(c.spec.description, t.default_description());
            assert!(crate::tools::compile_schema(ty, &c.spec.input_schema).is_some());
        }
        let e = from_registration(
            MlToolType::VectorDb,
            &entry(json!({"type": "VectorDBTool"})),
            &f,
        )
        .unwrap_err();
        assert_eq!(e.field, "tools[0].parameters.model_id");
        let e = from_registration(
            MlToolType::VectorDb,
            &entry(json!({"parameters": {"model_id": "m", "index": "i", "k": "zero"}})),
            &f,
        )
        .unwrap_err();
        assert_eq!(e.field, "tools[0].parameters.k");
    }

    #[test]
    fn lists_come_as_lists_json_text_or_commas() {
        assert_eq!(list(Some(&json!(["a", "b"]))), ["a", "b"]);
        assert_eq!(list(Some(&json!("[\"a\"]"))), ["a"]);
        assert_eq!(list(Some(&json!("a, b"))), ["a", "b"]);
        assert!(list(Some(&json!(""))).is_empty());
    }
}
