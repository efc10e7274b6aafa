//! ml-commons' MCP connectors (`"protocol": "mcp_sse"` or `"mcp_streamable_http"`): a server
//! `url`, its endpoint (`parameters.sse_endpoint`, default `/sse`; `parameters.endpoint`,
//! default `/mcp`), `headers` with `${credential.*}` placeholders. An agent names them in
//! `parameters.mcp_connectors` (`[{"mcp_connector_id": "...", "tool_filters": ["regex"]}]`) and
//! their tools join its own, through the same MCP client as configured servers.

use serde_json::{Map, Value};

use super::template::{Escape, render};
use super::{Invalid, invalid};
use crate::redact::Secret;
use crate::tools::mcp::{McpConfig, McpTransport};

/// The MCP protocols of connectors.
pub const MCP_PROTOCOLS: &[&str] = &["mcp_sse", "mcp_streamable_http"];

/// Checks an MCP connector (`f` prefixes field names).
pub(super) fn validate(
    obj: &Map<String, Value>,
    f: &dyn Fn(&str) -> String,
) -> Result<(), Invalid> {
    match obj.get("url").and_then(Value::as_str) {
        Some(u) if u.starts_with("http://") || u.starts_with("https://") => {
            url::Url::parse(u).map_err(|e| invalid(f("url"), format!("not a valid URL: {e}")))?;
        }
        _ => return Err(invalid(f("url"), "required, the MCP server's http(s) URL")),
    }
    if let Some(h) = obj.get("headers")
        && !h
            .as_object()
            .is_some_and(|h| h.values().all(Value::is_string))
    {
        return Err(invalid(f("headers"), "must be an object of strings"));
    }
    for key in ["sse_endpoint", "endpoint"] {
        if let Some(e) = obj.get("parameters").and_then(|p| p.get(key))
            && !e.as_str().is_some_and(|e| e.starts_with('/'))
        {
            return Err(invalid(
                f(&format!("parameters.{key}")),
                "must be a path starting with /",
            ));
        }
    }
    Ok(())
}

/// The full endpoint URL of an MCP connector document.
pub fn endpoint(doc: &Value) -> Option<String> {
    let base = doc.get("url")?.as_str()?.trim_end_matches('/');
    let sse = doc.get("protocol").and_then(Value::as_str) == Some("mcp_sse");
    let (key, default) = if sse {
        ("sse_endpoint", "/sse")
    } else {
        ("endpoint", "/mcp")
    };
    let path = doc
        .pointer(&format!("/parameters/{key}"))
        .and_then(Value::as_str)
        .unwrap_or(default);
    Some(format!("{base}{path}"))
}

/// The MCP client configuration of connector `id` (its document and opened credential), with
/// the agent's tool filters (regular expressions a tool name must match whole).
pub fn client_config(
    id: &str,
    doc: &Value,
    credential: &Map<String, Value>,
    filters: &[String],
    field: &str,
) -> Result<McpConfig, Invalid> {
    let url = endpoint(doc).ok_or_else(|| invalid(field, "the connector has no url"))?;
    let params = doc
        .get("parameters")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut headers = Vec::new();
    for (k, v) in doc
        .get("headers")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let text = render(
            v.as_str().unwrap_or_default(),
            &params,
            credential,
            Escape::Raw,
        )
        .map_err(|e| invalid(field, format!("connector {id:?}, header {k}: {e}")))?;
        let value = Secret::header(k, text);
        crate::tools::mcp::check_header(k, &value)
            .map_err(|p| invalid(field, format!("connector {id:?}, header {k}: {p}")))?;
        headers.push((k.clone(), value));
    }
    let filters = filters
        .iter()
        .map(|p| {
            regex::Regex::new(&format!("^(?:{p})$"))
                .map_err(|e| invalid(format!("{field}.tool_filters"), format!("{p:?}: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(McpConfig {
        name: doc
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.trim().is_empty())
            .unwrap_or(id)
            .to_string(),
        transport: McpTransport::Http {
            url,
            headers,
            bearer_token: None,
            sse: doc.get("protocol").and_then(Value::as_str) == Some("mcp_sse"),
        },
        prefix: String::new(),
        allow: None,
        deny: Vec::new(),
        filters,
        refresh: None,
    })
}
