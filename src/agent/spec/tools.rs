//! A registration's tools: ml-commons tool types, any tool entry of the config file's shape,
//! `AgentTool`, and the tools of the MCP connectors it names.

use super::*;

/// The MCP servers of `parameters.mcp_connectors`: `[{"mcp_connector_id", "tool_filters"}]`
/// (ml-commons also takes the list as JSON text).
pub(super) async fn mcp_connectors(
    list: &Value,
    models: &dyn ModelLookup,
) -> Result<Vec<ToolConfig>, Invalid> {
    let field = "parameters.mcp_connectors";
    let parsed;
    let list = match list {
        Value::String(s) => {
            parsed = serde_json::from_str::<Value>(s)
                .map_err(|e| invalid(field, format!("not a JSON list: {e}")))?;
            &parsed
        }
        other => other,
    };
    let Some(entries) = list.as_array() else {
        return Err(invalid(
            field,
            "must be a list of {\"mcp_connector_id\": ...}",
        ));
    };
    let mut out = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let f = format!("{field}[{i}]");
        let id = e
            .get("mcp_connector_id")
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
            .ok_or_else(|| invalid(format!("{f}.mcp_connector_id"), "required, a connector id"))?;
        let filters: Vec<String> = match e.get("tool_filters") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) if a.iter().all(Value::is_string) => a
                .iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect(),
            Some(_) => {
                return Err(invalid(
                    format!("{f}.tool_filters"),
                    "must be a list of regular expressions",
                ));
            }
        };
        let (doc, credential) = models
            .connector(id)
            .await
            .map_err(|e| invalid(format!("{f}.mcp_connector_id"), e))?
            .ok_or_else(|| {
                invalid(
                    format!("{f}.mcp_connector_id"),
                    format!("no connector {id:?}"),
                )
            })?;
        let protocol = doc.get("protocol").and_then(Value::as_str).unwrap_or("");
        if !crate::connector::mcp::MCP_PROTOCOLS.contains(&protocol) {
            return Err(invalid(
                format!("{f}.mcp_connector_id"),
                format!("connector {id:?} is not an MCP connector (protocol {protocol:?})"),
            ));
        }
        let cfg = crate::tools::mcp::from_connector(id, &doc, &credential, &filters, &f)
            .map_err(|e| invalid(e.field, e.problem))?;
        out.push(ToolConfig {
            kind: ToolKind::Mcp(cfg),
            options: crate::tools::ToolOptions::default(),
        });
    }
    Ok(out)
}

pub(super) async fn compile_tools(
    v: Option<&Value>,
    kind: AgentKind,
    models: &dyn ModelLookup,
    idle_timeout_secs: u64,
) -> Result<(Vec<ToolConfig>, Vec<FlowStep>), Invalid> {
    let entries = match v {
        None => return Ok((Vec::new(), Vec::new())),
        Some(Value::Array(a)) => a,
        Some(_) => return Err(invalid("tools", "must be an array")),
    };
    let mut tools: Vec<ToolConfig> = Vec::new();
    let mut flow = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let f = |k: &str| format!("tools[{i}].{k}");
        let Some(o) = e.as_object() else {
            return Err(invalid(format!("tools[{i}]"), "must be an object"));
        };
        let ty = str_field(o, "type").ok_or_else(|| {
            invalid(
                f("type"),
                "required: MLModelTool, AgentTool, SearchIndexTool, VectorDBTool, ListIndexTool, IndexMappingTool, CatIndexTool, http, builtin, mcp, openapi or search",
            )
        })?;
        let include_output = o
            .get("include_output_in_agent_response")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let (tool, step_params) = if ty == "MLModelTool" {
            let p = o
                .get("parameters")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            let mid = str_field(&p, "model_id")
                .ok_or_else(|| invalid(f("parameters.model_id"), "required: a registered model"))?;
            let m = models
                .model(mid)
                .await
                .map_err(|e| invalid(f("parameters.model_id"), e))?
                .ok_or_else(|| {
                    invalid(
                        f("parameters.model_id"),
                        format!("no model {mid:?} is registered"),
                    )
                })?;
            let mut model =
                model_config(&m, None, &f("parameters.model_id"), &p, idle_timeout_secs)?;
            // ml-commons sends an MLModelTool's rendered prompt as it is.
            if let ProviderConfig::Connector(c) = &mut model.provider {
                c.prompt_only = true;
            }
            let name = str_field(o, "name").unwrap_or("MLModelTool").to_string();
            let spec = crate::conversation::ToolSpec {
                name,
                description: str_field(o, "description")
                    .unwrap_or("A general tool to answer any question")
                    .to_string(),
                input_schema: ModelTool::default_schema(),
                strict: None,
            };
            let tool = ToolConfig {
                kind: ToolKind::Model {
                    spec,
                    model: Box::new(model),
                    prompt: str_field(&p, "prompt")
                        .unwrap_or("${parameters.question}")
                        .to_string(),
                    system_prompt: str_field(&p, "system_prompt").map(str::to_string),
                },
                options: crate::tools::ToolOptions::default(),
            };
            (tool, p)
        } else if let Some(ml) = crate::tools::search::ml::MlToolType::parse(ty) {
            compile_ml_tool(ml, o, &f, models).await?
        } else if ty == "AgentTool" {
            let p = o
                .get("parameters")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            let agent_id = str_field(&p, "agent_id").ok_or_else(|| {
                invalid(
                    f("parameters.agent_id"),
                    "required: a registered agent's id",
                )
            })?;
            let spec = crate::conversation::ToolSpec {
                name: str_field(o, "name").unwrap_or("AgentTool").to_string(),
                description: str_field(o, "description")
                    .unwrap_or("Runs another agent on a question and returns its answer")
                    .to_string(),
                input_schema: crate::tools::agent_tool_schema(),
                strict: None,
            };
            let tool = ToolConfig {
                kind: ToolKind::Agent {
                    spec,
                    agent_id: agent_id.to_string(),
                },
                options: crate::tools::ToolOptions::default(),
            };
            let mut step = p.clone();
            step.remove("agent_id");
            (tool, step)
        } else {
            let mut table = o.clone();
            let input = table.remove("input");
            for k in ["include_output_in_agent_response", "attributes", "config"] {
                table.remove(k);
            }
            let tool = tool_from_json(&Value::Object(table)).map_err(|(k, p)| {
                invalid(
                    if k.is_empty() {
                        format!("tools[{i}]")
                    } else {
                        f(&k)
                    },
                    p,
                )
            })?;
            let step = match input {
                None => Map::new(),
                Some(Value::Object(m)) => m,
                Some(other) => Map::from_iter([("input".to_string(), other)]),
            };
            (tool, step)
        };
        let mut tool = tool;
        apply_attributes(&mut tool, o.get("attributes"), &f)?;
        let Some(name) = tool.name().map(str::to_string) else {
            if kind.is_flow() {
                return Err(invalid(
                    f("type"),
                    "a flow step must be a single tool (MLModelTool, http or builtin)",
                ));
            }
            tools.push(tool);
            continue;
        };
        if tools.iter().any(|t| t.name() == Some(name.as_str())) {
            return Err(invalid(f("name"), format!("duplicate tool name {name:?}")));
        }
        flow.push(FlowStep {
            tool: name,
            parameters: step_params,
            include_output,
        });
        tools.push(tool);
    }
    if !kind.is_flow() {
        flow.clear();
    }
    Ok((tools, flow))
}

/// Compiles a registration's tool entry of an ml-commons type: the tool, and the parameters a
/// flow step fills for it. A `VectorDBTool`'s model must be registered.
pub(super) async fn compile_ml_tool(
    ty: crate::tools::search::ml::MlToolType,
    entry: &Map<String, Value>,
    f: &(dyn Fn(&str) -> String + Sync),
    models: &dyn ModelLookup,
) -> Result<(ToolConfig, Map<String, Value>), Invalid> {
    let cfg = crate::tools::search::ml::from_registration(ty, entry, f)?;
    if ty == crate::tools::search::ml::MlToolType::VectorDb {
        let mid = cfg
            .params
            .get("model_id")
            .and_then(Value::as_str)
            .unwrap_or("");
        models
            .model(mid)
            .await
            .map_err(|e| invalid(f("parameters.model_id"), e))?
            .ok_or_else(|| {
                invalid(
                    f("parameters.model_id"),
                    format!("no model {mid:?} is registered"),
                )
            })?;
    }
    // A flow fills a retriever's `input` with the execution's parameters (earlier steps'
    // outputs included); the other tools fill their own templates per call.
    let step = match (ty, cfg.params.get("input")) {
        (crate::tools::search::ml::MlToolType::VectorDb, Some(input)) => {
            Map::from_iter([("input".to_string(), input.clone())])
        }
        _ => Map::new(),
    };
    Ok((
        ToolConfig {
            kind: ToolKind::MlCommons(cfg),
            options: crate::tools::ToolOptions::default(),
        },
        step,
    ))
}
