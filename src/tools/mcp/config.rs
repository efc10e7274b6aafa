//! The `type = "mcp"` configuration table: an HTTP endpoint or a stdio command, tool
//! filters and prefix, resolved (secrets from the environment, paths against the config's
//! directory) and checked, with errors naming the offending key.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::redact::Secret;
use crate::settings::valid_name;

/// Headers the streamable HTTP transport sets itself and refuses from configuration.
const RESERVED_HEADERS: &[&str] = &[
    "accept",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

/// How the gateway reaches an MCP server.
#[derive(Debug, Clone)]
pub enum McpTransport {
    /// A streamable HTTP endpoint.
    Http {
        /// The endpoint.
        url: String,
        /// Extra headers on every request, values secret.
        headers: Vec<(String, Secret)>,
        /// Sent as `Authorization: Bearer ...`.
        bearer_token: Option<Secret>,
        /// The older HTTP+SSE transport (`transport = "sse"`, ml-commons' `mcp_sse`) instead
        /// of streamable HTTP.
        sse: bool,
    },
    /// A child process speaking MCP on stdin/stdout.
    Stdio {
        /// The program (relative paths already resolved against the config's directory).
        command: PathBuf,
        /// Its arguments.
        args: Vec<String>,
        /// Variables set for it, on top of a minimal inherited set.
        env: Vec<(String, Secret)>,
    },
}

/// A resolved `type = "mcp"` entry.
#[derive(Debug, Clone)]
pub struct McpConfig {
    /// The server's name, for health output and logs.
    pub name: String,
    /// How to reach it.
    pub transport: McpTransport,
    /// Put before every tool name the model sees.
    pub prefix: String,
    /// Only these tools (original names), when set.
    pub allow: Option<Vec<String>>,
    /// Never these tools (original names).
    pub deny: Vec<String>,
    /// When set, only tools whose original name one of these matches (ml-commons'
    /// `tool_filters`, anchored at both ends).
    pub filters: Vec<regex::Regex>,
    /// Re-list the tools this often, besides on `list_changed` notifications.
    pub refresh: Option<Duration>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct McpFile {
    name: String,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    headers_env: BTreeMap<String, String>,
    #[serde(default)]
    bearer_token_env: Option<String>,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    prefix: Option<String>,
    #[serde(default)]
    allow: Option<Vec<String>>,
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default)]
    refresh_secs: Option<u64>,
    #[serde(default)]
    transport: Option<String>,
}

type Fail = (String, String);

fn fail(key: impl Into<String>, problem: impl Into<String>) -> Fail {
    (key.into(), problem.into())
}

/// Reads a `type = "mcp"` table (without `type` and the common option keys).
pub fn parse(
    table: toml::Table,
    env: &dyn Fn(&str) -> Option<String>,
    dir: Option<&Path>,
) -> Result<McpConfig, (String, String)> {
    let f: McpFile = crate::settings::from_table(table).map_err(|(key, problem)| {
        // A missing key is reported at the table itself ("."); name the key instead.
        let missing = problem
            .strip_prefix("missing field `")
            .and_then(|rest| rest.split('`').next())
            .filter(|_| key == "." || key.is_empty());
        match missing {
            Some(field) => (field.to_string(), problem.clone()),
            None => (key, problem),
        }
    })?;
    if f.name.trim().is_empty() {
        return Err(fail("name", "must not be empty"));
    }
    let prefix = f.prefix.unwrap_or_default();
    if !prefix.is_empty() && (prefix.len() > 63 || !valid_name(&prefix)) {
        return Err(fail(
            "prefix",
            format!("{prefix:?} must be at most 63 letters, digits, '-' or '_'"),
        ));
    }
    if f.refresh_secs == Some(0) {
        return Err(fail("refresh_secs", "must be at least 1"));
    }
    let lookup = |var: &str, key: String| -> Result<Secret, Fail> {
        match env(var) {
            Some(v) if !v.is_empty() => Ok(Secret::new(v)),
            _ => Err(fail(key, format!("environment variable {var} is not set"))),
        }
    };
    let transport = match (f.url, f.command) {
        (Some(_), Some(_)) => {
            return Err(fail(
                "command",
                "set url (HTTP) or command (stdio), not both",
            ));
        }
        (None, None) => {
            return Err(fail(
                "url",
                "missing; set url (streamable HTTP) or command (stdio)",
            ));
        }
        (Some(url), None) => {
            if !f.args.is_empty() {
                return Err(fail("args", "only for command (stdio) servers"));
            }
            if !f.env.is_empty() {
                return Err(fail("env", "only for command (stdio) servers"));
            }
            let parsed =
                url::Url::parse(&url).map_err(|e| fail("url", format!("not a valid URL: {e}")))?;
            if !matches!(parsed.scheme(), "http" | "https") {
                return Err(fail("url", "must be an http or https URL"));
            }
            // A server's error or progress text may quote a key the URL carries.
            crate::redact::register_url(&parsed);
            let mut headers = Vec::new();
            let mut seen = HashSet::new();
            let literal = f.headers.into_iter().map(|(k, v)| {
                let key = format!("headers.{k}");
                let v = Secret::header(&k, v);
                (k, Ok(v), key)
            });
            let from_env = f.headers_env.into_iter().map(|(k, var)| {
                let key = format!("headers_env.{k}");
                let v = lookup(&var, key.clone());
                (k, v, key)
            });
            for (name, value, key) in literal.chain(from_env) {
                let value = value?;
                check_header(&name, &value).map_err(|p| fail(key.clone(), p))?;
                if !seen.insert(name.to_ascii_lowercase()) {
                    return Err(fail(key, "header set twice"));
                }
                headers.push((name, value));
            }
            let bearer_token = match f.bearer_token_env {
                Some(var) => {
                    if seen.contains("authorization") {
                        return Err(fail(
                            "bearer_token_env",
                            "an Authorization header is already set",
                        ));
                    }
                    Some(lookup(&var, "bearer_token_env".into())?)
                }
                None => None,
            };
            McpTransport::Http {
                url,
                headers,
                bearer_token,
                sse: match f.transport.as_deref() {
                    None | Some("streamable_http") => false,
                    Some("sse") => true,
                    Some(other) => {
                        return Err(fail(
                            "transport",
                            format!("{other:?} must be \"streamable_http\" or \"sse\""),
                        ));
                    }
                },
            }
        }
        (None, Some(command)) => {
            for (key, set) in [
                ("headers", !f.headers.is_empty()),
                ("headers_env", !f.headers_env.is_empty()),
                ("bearer_token_env", f.bearer_token_env.is_some()),
                ("transport", f.transport.is_some()),
            ] {
                if set {
                    return Err(fail(key, "only for url (HTTP) servers"));
                }
            }
            if command.trim().is_empty() {
                return Err(fail("command", "must not be empty"));
            }
            let path = PathBuf::from(&command);
            // A bare program name ("npx") is looked up on PATH; only paths with a directory
            // part are taken relative to the config file.
            let command = match dir {
                Some(d) if path.is_relative() && path.components().count() > 1 => d.join(path),
                _ => path,
            };
            let mut vars = Vec::new();
            for (k, v) in f.env {
                if k.is_empty() || k.contains('=') || k.contains('\0') {
                    return Err(fail(format!("env.{k}"), "not a valid variable name"));
                }
                let v = Secret::header(&k, v);
                vars.push((k, v));
            }
            McpTransport::Stdio {
                command,
                args: f.args,
                env: vars,
            }
        }
    };
    Ok(McpConfig {
        name: f.name,
        transport,
        prefix,
        allow: f.allow,
        deny: f.deny,
        filters: Vec::new(),
        refresh: f.refresh_secs.map(Duration::from_secs),
    })
}

/// Whether a header can be sent (name and value valid, not one the transport sets itself).
pub fn check_header(name: &str, value: &Secret) -> Result<(), String> {
    if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
        return Err("not a valid header name".into());
    }
    if RESERVED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
        return Err("set by the MCP transport itself".into());
    }
    if http::HeaderValue::from_str(value.expose()).is_err() {
        return Err("not a valid header value".into());
    }
    Ok(())
}

/// The MCP client configuration of ml-commons MCP connector `id` (its document and opened credential), with
/// the agent's tool filters (regular expressions a tool name must match whole).
pub fn from_connector(
    id: &str,
    doc: &serde_json::Value,
    credential: &serde_json::Map<String, serde_json::Value>,
    filters: &[String],
    field: &str,
) -> Result<McpConfig, crate::connector::Invalid> {
    let url = crate::connector::mcp::endpoint(doc)
        .ok_or_else(|| crate::connector::invalid(field, "the connector has no url"))?;
    if let Ok(parsed) = url::Url::parse(&url) {
        crate::redact::register_url(&parsed);
    }
    let params = doc
        .get("parameters")
        .and_then(serde_json::Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut headers = Vec::new();
    for (k, v) in doc
        .get("headers")
        .and_then(serde_json::Value::as_object)
        .into_iter()
        .flatten()
    {
        let text = crate::connector::template::render(
            v.as_str().unwrap_or_default(),
            &params,
            credential,
            crate::connector::template::Escape::Raw,
        )
        .map_err(|e| {
            crate::connector::invalid(field, format!("connector {id:?}, header {k}: {e}"))
        })?;
        let value = Secret::header(k, text);
        check_header(k, &value).map_err(|p| {
            crate::connector::invalid(field, format!("connector {id:?}, header {k}: {p}"))
        })?;
        headers.push((k.clone(), value));
    }
    let filters = filters
        .iter()
        .map(|p| {
            regex::Regex::new(&format!("^(?:{p})$")).map_err(|e| {
                crate::connector::invalid(format!("{field}.tool_filters"), format!("{p:?}: {e}"))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(McpConfig {
        name: doc
            .get("name")
            .and_then(serde_json::Value::as_str)
            .filter(|n| !n.trim().is_empty())
            .unwrap_or(id)
            .to_string(),
        transport: McpTransport::Http {
            url,
            headers,
            bearer_token: None,
            sse: doc.get("protocol").and_then(serde_json::Value::as_str) == Some("mcp_sse"),
        },
        prefix: String::new(),
        allow: None,
        deny: Vec::new(),
        filters,
        refresh: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(s: &str) -> Result<McpConfig, Fail> {
        let env = |k: &str| match k {
            "TOKEN" => Some("s3cret".to_string()),
            "API_KEY" => Some("k3y".to_string()),
            _ => None,
        };
        parse(toml::from_str(s).unwrap(), &env, Some(Path::new("/etc/gw")))
    }

    fn key(s: &str) -> String {
        parse_str(s).unwrap_err().0
    }

    #[test]
    fn http_entries_resolve_headers_and_tokens() {
        let c = parse_str(
            r#"
name = "docs"
url = "https://mcp.example.com/mcp"
headers = { X-Team = "blue" }
headers_env = { X-Api-Key = "API_KEY" }
bearer_token_env = "TOKEN"
prefix = "docs_"
allow = ["search"]
refresh_secs = 60
"#,
        )
        .unwrap();
        assert_eq!(c.prefix, "docs_");
        assert_eq!(c.refresh, Some(Duration::from_secs(60)));
        let McpTransport::Http {
            headers,
            bearer_token,
            ..
        } = &c.transport
        else {
            panic!("{c:?}")
        };
        assert_eq!(headers.len(), 2);
        assert_eq!(bearer_token.as_ref().unwrap().expose(), "s3cret");
        let debug = format!("{c:?}");
        assert!(!debug.contains("s3cret") && !debug.contains("k3y") && !debug.contains("blue"));
    }

    #[test]
    fn stdio_commands_resolve_against_the_config_dir() {
        let c = parse_str(
            r#"name = "x"
command = "bin/server"
args = ["--fast"]
env = { LEVEL = "debug" }"#,
        )
        .unwrap();
        let McpTransport::Stdio { command, args, env } = &c.transport else {
            panic!()
        };
        assert_eq!(command, Path::new("/etc/gw/bin/server"));
        assert_eq!(args, &["--fast"]);
        assert_eq!(env[0].0, "LEVEL");
        let c = parse_str("name = \"x\"\ncommand = \"npx\"").unwrap();
        let McpTransport::Stdio { command, .. } = &c.transport else {
            panic!()
        };
        assert_eq!(command, Path::new("npx"), "bare names stay on PATH");
    }

    #[test]
    fn errors_name_the_key() {
        assert_eq!(
            key("name = \"x\"\nurl = \"http://x\"\ntransport = \"websocket\""),
            "transport"
        );
        assert_eq!(
            key("name = \"x\"\ncommand = \"y\"\ntransport = \"sse\""),
            "transport"
        );
        let sse = parse_str("name = \"x\"\nurl = \"http://x/sse\"\ntransport = \"sse\"").unwrap();
        assert!(matches!(
            sse.transport,
            McpTransport::Http { sse: true, .. }
        ));
        assert_eq!(key("url = \"http://x\""), "name");
        assert_eq!(key("name = \"x\""), "url");
        assert_eq!(
            key("name = \"x\"\nurl = \"http://x\"\ncommand = \"y\""),
            "command"
        );
        assert_eq!(key("name = \"x\"\nurl = \"ftp://x\""), "url");
        assert_eq!(key("name = \"x\"\nurl = \"not a url\""), "url");
        assert_eq!(
            key("name = \"x\"\nurl = \"http://x\"\nheaders_env = { A = \"NOPE\" }"),
            "headers_env.A"
        );
        assert_eq!(
            key("name = \"x\"\nurl = \"http://x\"\nheaders = { \"Bad Name\" = \"v\" }"),
            "headers.Bad Name"
        );
        assert_eq!(
            key("name = \"x\"\nurl = \"http://x\"\nheaders = { Accept = \"v\" }"),
            "headers.Accept"
        );
        assert_eq!(
            key("name = \"x\"\nurl = \"http://x\"\nbearer_token_env = \"NOPE\""),
            "bearer_token_env"
        );
        assert_eq!(
            key(
                "name = \"x\"\nurl = \"http://x\"\nheaders = { Authorization = \"a\" }\nbearer_token_env = \"TOKEN\""
            ),
            "bearer_token_env"
        );
        assert_eq!(
            key("name = \"x\"\nurl = \"http://x\"\nargs = [\"a\"]"),
            "args"
        );
        assert_eq!(
            key("name = \"x\"\ncommand = \"y\"\nheaders = { A = \"b\" }"),
            "headers"
        );
        assert_eq!(
            key("name = \"x\"\nurl = \"http://x\"\nprefix = \"a b\""),
            "prefix"
        );
        assert_eq!(
            key("name = \"x\"\nurl = \"http://x\"\nrefresh_secs = 0"),
            "refresh_secs"
        );
        assert_eq!(
            key("name = \"x\"\nurl = \"http://x\"\nrefresh_secs = \"5\""),
            "refresh_secs"
        );
        assert_eq!(
            key("name = \"x\"\nurl = \"http://x\"\nallow = \"a\""),
            "allow"
        );
        let (k, p) = parse_str("name = \"x\"\nurl = \"http://x\"\nbogus = 1").unwrap_err();
        assert!(p.contains("bogus"), "{k}: {p}");
        let (_, p) = parse_str("name = \"x\"\nurl = \"http://x\"\nheaders_env = { A = \"NOPE\" }")
            .unwrap_err();
        assert!(p.contains("NOPE"), "{p}");
    }
}
