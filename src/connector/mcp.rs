//! ml-commons' MCP connectors (`"protocol": "mcp_sse"` or `"mcp_streamable_http"`): a server
//! `url`, its endpoint (`parameters.sse_endpoint`, default `/sse`; `parameters.endpoint`,
//! default `/mcp`), `headers` with `${credential.*}` placeholders. An agent names them in
//! `parameters.mcp_connectors` (`[{"mcp_connector_id": "...", "tool_filters": ["regex"]}]`) and
//! their tools join its own, through the same MCP client as configured servers.

use serde_json::{Map, Value};

use super::{Invalid, invalid};

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
