//! OpenAPI operations as tools, the idea of Bedrock Agents' action groups: an OpenAPI 3.0 or
//! 3.1 document (JSON or YAML, a file or a URL) is read once at start-up and each operation
//! becomes a tool the model can call.
//!
//! ```toml
//! [[agents.tools]]
//! type = "openapi"
//! name = "petstore"                          # the entry, as /healthz names it
//! spec = "petstore.yaml"                     # relative to the config file; or
//! # spec_url = "https://api.example.com/openapi.json"   # fetched at start-up
//! base_url = "https://api.example.com/v1"    # optional; else the document's servers[0].url
//! prefix = "pets"                            # optional; tools become pets_<operationId>
//! operations = ["getPetById", "createPet"]   # optional allow-list of operationIds
//! auth = { type = "header", name = "X-Api-Key", value_env = "PETSTORE_KEY" }
//! # or { type = "bearer", token_env = "VAR" } or { type = "basic", username = "u", password_env = "VAR" }
//! ```
//!
//! **Names** are operationIds sanitised to `[A-Za-z0-9_-]` and cut to 64 characters (the
//! OpenAI function-name rule), `method_path` (`get_pets_petId`) when an operation has none;
//! `operations` names operationIds as the document writes them (or that fallback). Descriptions
//! are summary and description. Tools are listed by path (sorted), then method.
//!
//! **Argument schema**: one object whose properties are the path, query and header parameters
//! under their own names (schema, description, required flag; path parameters are always
//! required), plus the JSON request body as a single property `body`, required when the body
//! is. The body is nested rather than merged into the top level because a merge breaks in
//! common cases: body fields that share a name with a parameter, and bodies that are arrays,
//! scalars or `oneOf`s; nested, the body schema is exactly the document's and validation
//! errors point at `/body/...`. A parameter name used in two places gets its place as a
//! prefix (`query_id`). Unknown properties are refused (`additionalProperties: false`), so a
//! model that puts body fields at the top level is told instead of silently ignored.
//!
//! **Schemas**: local `$ref`s (`#/components/schemas|parameters|requestBodies/...`, any JSON
//! pointer) are expanded in place; a reference already being expanded (a cycle), nested deeper
//! than 16, or past 2,000 expansions in one schema becomes an open schema with a description.
//! References to other documents are never fetched. OpenAPI 3.0 dialect is turned into JSON
//! Schema (`nullable`, boolean `exclusiveMinimum`), `readOnly` properties are dropped (requests
//! must not send them), and `xml`, `externalDocs`, `discriminator` and `x-` extensions are
//! removed to save tokens.
//!
//! **Calls** substitute path parameters (percent-encoded), query parameters and headers as
//! their `style`/`explode` say, send `body` as JSON, and add the configured auth (the model
//! can never set that header). The response body, cut at 1 MiB, is the result; non-2xx answers
//! are error results (`HTTP 404: ...`) the model reads.
//!
//! `spec_url` is fetched with the configured auth only when `base_url` is set and has the
//! same origin, so credentials never go to a third-party host that serves the document.
//!
//! **Failures**: a document that cannot be loaded or parsed leaves the source without tools
//! and `health()` says `{"status": "down", "error": ...}` without secrets; the gateway still
//! starts. Operations that cannot be called (a required non-JSON body, a required cookie) are
//! skipped with a log line and listed in health under `skipped`; allow-listed ids the document
//! lacks make the source `degraded` and are listed under `unknown_operations`.
//!
//! Not covered: form and multipart bodies, cookie parameters, per-path `servers`, the
//! document's `securitySchemes` (the configured auth goes with every call), and response
//! schemas. The shared client follows redirects; reqwest drops `Authorization` across hosts,
//! but a custom auth header would follow a cross-host redirect the API itself issues.

mod call;
mod plan;
pub(crate) use plan::is_json;
mod schema;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{SourceTool, ToolSource};
use crate::redact::Secret;
use crate::settings::{from_table, valid_name};
use call::OpenApiTool;
use plan::PlanOptions;

/// Documents larger than this are refused: real specs are a few MiB at most.
const MAX_DOCUMENT: usize = 16 * 1024 * 1024;
/// How long fetching `spec_url` may take at start-up; every agent's start waits for it.
const FETCH_TIMEOUT: Duration = Duration::from_secs(20);

/// A resolved `type = "openapi"` entry.
#[derive(Debug, Clone)]
pub struct OpenApiConfig {
    /// The entry's name, for health output.
    pub name: String,
    /// Where the document comes from.
    pub spec: SpecSource,
    /// Overrides the document's `servers[0].url`.
    pub base_url: Option<String>,
    /// Tool-name prefix.
    pub prefix: Option<String>,
    /// Only these operationIds become tools.
    pub operations: Option<Vec<String>>,
    /// Credentials sent with every call.
    pub auth: Option<Auth>,
}

/// Where an OpenAPI document is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpecSource {
    /// A file (already joined to the config file's directory).
    File(PathBuf),
    /// An http(s) URL, fetched at start-up.
    Url(String),
}

/// How calls authenticate; secrets come from environment variables.
#[derive(Debug, Clone)]
pub enum Auth {
    /// `Authorization: Bearer <token>`.
    Bearer(Secret),
    /// A header of its own, e.g. `X-Api-Key`.
    Header {
        /// The header's name.
        name: String,
        /// Its value.
        value: Secret,
    },
    /// HTTP basic auth.
    Basic {
        /// The user name (not secret).
        username: String,
        /// The password.
        password: Secret,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OpenApiFile {
    name: String,
    #[serde(default)]
    spec: Option<PathBuf>,
    #[serde(default)]
    spec_url: Option<String>,
    #[serde(default)]
    base_url: Option<String>,
    #[serde(default)]
    prefix: Option<String>,
    #[serde(default)]
    operations: Option<Vec<String>>,
    #[serde(default)]
    auth: Option<AuthFile>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
enum AuthFile {
    Bearer {
        token_env: String,
    },
    Header {
        name: String,
        value_env: String,
    },
    Basic {
        username: String,
        password_env: String,
    },
}

/// Reads a `type = "openapi"` table (without `type` and the common option keys). Errors are
/// `(key path, problem)`.
pub fn parse(
    table: toml::Table,
    env: &dyn Fn(&str) -> Option<String>,
    dir: Option<&Path>,
) -> Result<OpenApiConfig, (String, String)> {
    let f: OpenApiFile = from_table(table)?;
    let fail = |k: &str, p: String| (k.to_string(), p);
    if !valid_name(&f.name) {
        return Err(fail(
            "name",
            format!("{:?} must be 1-64 letters, digits, '-' or '_'", f.name),
        ));
    }
    let spec = match (f.spec, f.spec_url) {
        (Some(_), Some(_)) => {
            return Err(fail("spec_url", "set spec or spec_url, not both".into()));
        }
        (None, None) => {
            return Err(fail(
                "spec",
                "missing; set spec (a file) or spec_url (fetched at start-up)".into(),
            ));
        }
        (Some(p), None) => SpecSource::File(match dir {
            Some(d) if p.is_relative() => d.join(p),
            _ => p,
        }),
        (None, Some(u)) => SpecSource::Url(http_url(&u).map_err(|p| fail("spec_url", p))?),
    };
    let base_url = match f.base_url {
        Some(u) => Some(http_url(&u).map_err(|p| fail("base_url", p))?),
        None => None,
    };
    if let Some(p) = &f.prefix
        && (p.len() > 32 || !valid_name(p))
    {
        return Err(fail(
            "prefix",
            format!("{p:?} must be 1-32 letters, digits, '-' or '_'"),
        ));
    }
    if let Some(ops) = &f.operations {
        if ops.is_empty() {
            return Err(fail(
                "operations",
                "is empty; leave it out to expose every operation".into(),
            ));
        }
        if let Some(i) = ops.iter().position(|o| o.trim().is_empty()) {
            return Err(fail(
                &format!("operations[{i}]"),
                "must not be empty".into(),
            ));
        }
    }
    let auth = match f.auth {
        None => None,
        Some(AuthFile::Bearer { token_env }) => {
            let token = env_secret(&token_env, env).map_err(|p| fail("auth.token_env", p))?;
            if HeaderValue::from_str(&format!("Bearer {}", token.expose())).is_err() {
                return Err(fail(
                    "auth.token_env",
                    format!("the value of {token_env} cannot be sent in a header"),
                ));
            }
            Some(Auth::Bearer(token))
        }
        Some(AuthFile::Header { name, value_env }) => {
            if HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Err(fail(
                    "auth.name",
                    format!("{name:?} is not a valid header name"),
                ));
            }
            let value = env_secret(&value_env, env).map_err(|p| fail("auth.value_env", p))?;
            if HeaderValue::from_str(value.expose()).is_err() {
                return Err(fail(
                    "auth.value_env",
                    format!("the value of {value_env} cannot be sent in a header"),
                ));
            }
            Some(Auth::Header { name, value })
        }
        Some(AuthFile::Basic {
            username,
            password_env,
        }) => {
            let password =
                env_secret(&password_env, env).map_err(|p| fail("auth.password_env", p))?;
            Some(Auth::Basic { username, password })
        }
    };
    Ok(OpenApiConfig {
        name: f.name,
        spec,
        base_url,
        prefix: f.prefix,
        operations: f.operations,
        auth,
    })
}

/// An http(s) URL. The URL is not echoed: a query string may carry a token.
fn http_url(u: &str) -> Result<String, String> {
    let parsed = url::Url::parse(u).map_err(|e| format!("not a valid URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err("must be an http or https URL".into());
    }
    Ok(u.to_string())
}

fn env_secret(var: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Secret, String> {
    match env(var) {
        Some(v) if !v.is_empty() => Ok(Secret::new(v)),
        _ => Err(format!("environment variable {var} is not set")),
    }
}

/// Loads the document and builds one tool per operation. Never fails: a document that cannot
/// be loaded leaves the source without tools, and health says why.
/// `net` checks the document's URL and the API's server URL when the entry was registered
/// through the API.
pub async fn start(cfg: OpenApiConfig, net: crate::outbound::Net) -> Arc<dyn ToolSource> {
    let (tools, health) = match build(&cfg, &net).await {
        Ok(built) => built,
        Err(e) => {
            tracing::warn!(source = %cfg.name, error = %e, "OpenAPI document not loaded; the source has no tools");
            (Vec::new(), json!({"status": "down", "error": e}))
        }
    };
    Arc::new(OpenApiSource {
        name: cfg.name,
        tools,
        health,
    })
}

/// The tools of one document; fixed once loaded.
struct OpenApiSource {
    name: String,
    tools: Vec<SourceTool>,
    /// Computed at start-up: nothing changes afterwards.
    health: Value,
}

impl ToolSource for OpenApiSource {
    fn name(&self) -> &str {
        &self.name
    }

    fn tools(&self) -> Vec<SourceTool> {
        self.tools.clone()
    }

    fn health(&self) -> Value {
        self.health.clone()
    }
}

async fn build(
    cfg: &OpenApiConfig,
    net: &crate::outbound::Net,
) -> Result<(Vec<SourceTool>, Value), String> {
    let (doc, doc_url) = load(cfg, net).await?;
    check_version(&doc)?;
    let base = server_url(cfg.base_url.as_deref(), &doc, doc_url.as_ref())?;
    // The document names the server: a registered one must not point it inside.
    let client = net
        .client_for(&base)
        .map_err(|e| format!("the API's server URL: {e}"))?;
    let client = &client;
    let reserved_headers = match &cfg.auth {
        Some(Auth::Header { name, .. }) => vec![name.to_ascii_lowercase()],
        _ => Vec::new(),
    };
    let plan = plan::plan(
        &doc,
        &PlanOptions {
            prefix: cfg.prefix.as_deref(),
            allow: cfg.operations.as_deref(),
            reserved_headers,
        },
    );
    for (op, reason) in &plan.skipped {
        tracing::info!(source = %cfg.name, operation = %op, %reason, "OpenAPI operation skipped");
    }
    if !plan.unknown.is_empty() {
        tracing::warn!(source = %cfg.name, operations = ?plan.unknown, "allow-listed operations are not in the document");
    }
    let tools: Vec<SourceTool> = plan
        .operations
        .into_iter()
        .map(|op| {
            SourceTool::new(Arc::new(OpenApiTool::new(
                op,
                base.clone(),
                client.clone(),
                cfg.auth.clone(),
            )))
        })
        .collect();
    tracing::info!(source = %cfg.name, operations = tools.len(), "OpenAPI tools ready");
    let status = if plan.unknown.is_empty() {
        "ok"
    } else {
        "degraded"
    };
    let mut health = json!({"status": status, "operations": tools.len()});
    if !plan.skipped.is_empty() {
        let skipped: serde_json::Map<String, Value> = plan
            .skipped
            .into_iter()
            .map(|(op, reason)| (op, json!(reason)))
            .collect();
        health["skipped"] = Value::Object(skipped);
    }
    if !plan.unknown.is_empty() {
        health["unknown_operations"] = json!(plan.unknown);
    }
    Ok((tools, health))
}

/// The parsed document, and its URL when it was fetched (relative servers resolve against it).
async fn load(
    cfg: &OpenApiConfig,
    net: &crate::outbound::Net,
) -> Result<(Value, Option<url::Url>), String> {
    let (bytes, url) = match &cfg.spec {
        SpecSource::File(path) => {
            let bytes = tokio::fs::read(path)
                .await
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            (bytes, None)
        }
        SpecSource::Url(u) => {
            let url = url::Url::parse(u).map_err(|e| format!("spec_url: {e}"))?;
            let client = net.client_for(u).map_err(|e| format!("spec_url: {e}"))?;
            (fetch(cfg, &client, &url).await?, Some(url))
        }
    };
    if bytes.len() > MAX_DOCUMENT {
        return Err(format!(
            "the document is larger than {} MiB",
            MAX_DOCUMENT >> 20
        ));
    }
    let text =
        String::from_utf8(bytes).map_err(|_| "the document is not UTF-8 text".to_string())?;
    Ok((parse_document(&text)?, url))
}

async fn fetch(
    cfg: &OpenApiConfig,
    client: &reqwest::Client,
    url: &url::Url,
) -> Result<Vec<u8>, String> {
    let label = redact(url);
    let mut req = client.get(url.clone()).timeout(FETCH_TIMEOUT).header(
        "accept",
        "application/json, application/yaml, text/yaml, */*;q=0.5",
    );
    // Credentials go only where the API itself lives, never to a third-party spec host.
    let same_origin = cfg
        .base_url
        .as_deref()
        .and_then(|b| url::Url::parse(b).ok())
        .is_some_and(|b| b.origin() == url.origin());
    if same_origin {
        req = call::with_auth(req, cfg.auth.as_ref());
    }
    let resp = req
        .send()
        .await
        .map_err(|e| format!("cannot fetch {label}: {}", error_chain(&e.without_url())))?;
    if !resp.status().is_success() {
        return Err(format!(
            "fetching {label} answered HTTP {}",
            resp.status().as_u16()
        ));
    }
    let (bytes, truncated) = crate::outbound::read_capped(resp, MAX_DOCUMENT)
        .await
        .map_err(|e| format!("cannot fetch {label}: {}", error_chain(&e.without_url())))?;
    if truncated {
        return Err(format!(
            "the document is larger than {} MiB",
            MAX_DOCUMENT >> 20
        ));
    }
    Ok(bytes)
}

/// Scheme, host, port and path: user info and the query may carry credentials.
fn redact(u: &url::Url) -> String {
    format!("{}{}", u.origin().ascii_serialization(), u.path())
}

/// An error with its causes (`error sending request: ... : Connection refused`).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

/// JSON when it looks like JSON, YAML otherwise.
fn parse_document(text: &str) -> Result<Value, String> {
    let text = text.trim_start_matches('\u{feff}').trim_start();
    if text.starts_with('{') {
        return serde_json::from_str(text)
            .map_err(|e| format!("the document is not valid JSON: {e}"));
    }
    let mut y: serde_yaml_ng::Value = serde_yaml_ng::from_str(text)
        .map_err(|e| format!("the document is not valid YAML: {e}"))?;
    y.apply_merge()
        .map_err(|e| format!("the document is not valid YAML: {e}"))?;
    yaml_to_json(y)
}

/// YAML to JSON, keys made strings: YAML specs write `200:` as an integer key, which a direct
/// deserialisation into `serde_json::Value` refuses.
fn yaml_to_json(y: serde_yaml_ng::Value) -> Result<Value, String> {
    use serde_yaml_ng::Value as Y;
    Ok(match y {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => {
            if let Some(i) = n.as_i64() {
                json!(i)
            } else if let Some(u) = n.as_u64() {
                json!(u)
            } else {
                n.as_f64()
                    .and_then(serde_json::Number::from_f64)
                    .map_or(Value::Null, Value::Number)
            }
        }
        Y::String(s) => Value::String(s),
        Y::Sequence(s) => Value::Array(s.into_iter().map(yaml_to_json).collect::<Result<_, _>>()?),
        Y::Mapping(m) => {
            let mut out = serde_json::Map::new();
            for (k, v) in m {
                let k = match k {
                    Y::String(s) => s,
                    Y::Number(n) => n.to_string(),
                    Y::Bool(b) => b.to_string(),
                    Y::Null => "null".into(),
                    _ => return Err("the document has a mapping key that is not a scalar".into()),
                };
                out.insert(k, yaml_to_json(v)?);
            }
            Value::Object(out)
        }
        Y::Tagged(t) => yaml_to_json(t.value)?,
    })
}

fn check_version(doc: &Value) -> Result<(), String> {
    if !doc.is_object() {
        return Err("the document is not an object".into());
    }
    if let Some(v) = doc.get("swagger") {
        return Err(format!(
            "Swagger {v} documents are not supported; convert it to OpenAPI 3"
        ));
    }
    match doc.get("openapi").and_then(Value::as_str) {
        Some(v) if v.starts_with("3.") => Ok(()),
        Some(v) => Err(format!(
            "OpenAPI {v} is not supported (3.0 or 3.1 expected)"
        )),
        None => Err("not an OpenAPI document (no \"openapi\" version)".into()),
    }
}

/// Where calls go: `base_url`, else `servers[0].url` with its variables' defaults, resolved
/// against the document's URL when relative. No trailing `/` (paths start with one).
fn server_url(
    configured: Option<&str>,
    doc: &Value,
    doc_url: Option<&url::Url>,
) -> Result<String, String> {
    if let Some(b) = configured {
        return Ok(b.trim_end_matches('/').to_string());
    }
    let server = doc.pointer("/servers/0");
    // No servers means "/" (OpenAPI 3): the document's own host.
    let mut u = server
        .and_then(|s| s.get("url"))
        .and_then(Value::as_str)
        .unwrap_or("/")
        .to_string();
    if let Some(vars) = server
        .and_then(|s| s.get("variables"))
        .and_then(Value::as_object)
    {
        for (k, v) in vars {
            if let Some(d) = v.get("default").and_then(Value::as_str) {
                u = u.replace(&format!("{{{k}}}"), d);
            }
        }
    }
    if u.contains('{') {
        return Err(format!(
            "servers[0].url {u:?} has a variable without a default; set base_url"
        ));
    }
    let abs = match url::Url::parse(&u) {
        Ok(abs) => abs,
        Err(url::ParseError::RelativeUrlWithoutBase) => match doc_url {
            Some(d) => d
                .join(&u)
                .map_err(|e| format!("servers[0].url {u:?}: {e}"))?,
            None => {
                return Err(format!(
                    "servers[0].url {u:?} is relative and the document is a file; set base_url"
                ));
            }
        },
        Err(e) => return Err(format!("servers[0].url {u:?} is not a valid URL: {e}")),
    };
    if !matches!(abs.scheme(), "http" | "https") {
        return Err(format!("servers[0].url {u:?} is not an http or https URL"));
    }
    Ok(abs.as_str().trim_end_matches('/').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> toml::Table {
        toml::from_str(text).unwrap()
    }

    fn env(k: &str) -> Option<String> {
        (k == "KEY").then(|| "s3cret".to_string())
    }

    #[test]
    fn config_keys_and_their_errors() {
        let ok = [
            r#"name = "pets""#,
            r#"spec = "p.yaml""#,
            r#"prefix = "pets""#,
            r#"operations = ["getPet"]"#,
            r#"auth = { type = "header", name = "X-Api-Key", value_env = "KEY" }"#,
        ];
        let c = parse(table(&ok.join("\n")), &env, Some(Path::new("/etc/gw"))).unwrap();
        assert_eq!(c.spec, SpecSource::File(PathBuf::from("/etc/gw/p.yaml")));
        assert!(!format!("{c:?}").contains("s3cret"));
        let err = |extra: &str| {
            let text = format!("name = \"p\"\n{extra}");
            parse(table(&text), &env, None).unwrap_err()
        };
        let e = err("spec = \"a\"\nauth = { type = \"bearer\", token_env = \"NOPE\" }");
        assert_eq!(
            e,
            (
                "auth.token_env".into(),
                "environment variable NOPE is not set".into()
            )
        );
        let basic = "auth = { type = \"basic\", username = \"u\", password_env = \"NOPE\" }";
        assert_eq!(
            err(&format!("spec = \"a\"\n{basic}")).0,
            "auth.password_env"
        );
        let extra = "auth = { type = \"header\", name = \"X\", value_env = \"KEY\", extra = 1 }";
        let e = err(&format!("spec = \"a\"\n{extra}"));
        assert!(e.0.starts_with("auth") && e.1.contains("extra"), "{e:?}");
        let e = err("spec = \"a\"\nauth = { type = \"oauth\" }");
        assert!(e.1.contains("oauth"), "{e:?}");
        assert_eq!(err("").0, "spec");
        assert_eq!(err("spec = \"a\"\nspec_url = \"http://x/\"").0, "spec_url");
        let e = err("spec_url = \"ftp://x/?token=t\"");
        assert_eq!(e.0, "spec_url");
        assert!(!e.1.contains("token"));
        assert_eq!(err("spec = \"a\"\nprefix = \"a b\"").0, "prefix");
        assert_eq!(err("spec = \"a\"\noperations = []").0, "operations");
        assert!(err("spec = \"a\"\nwat = 1").1.contains("wat"));
    }

    #[test]
    fn yaml_and_json_documents_parse_alike() {
        let y = parse_document("openapi: 3.1.0\npaths:\n  /a:\n    get:\n      responses:\n        200:\n          description: ok\n").unwrap();
        let j = parse_document(r#"{"openapi": "3.1.0", "paths": {"/a": {"get": {"responses": {"200": {"description": "ok"}}}}}}"#).unwrap();
        assert_eq!(y, j);
        assert!(check_version(&y).is_ok());
        assert!(parse_document("{nope").unwrap_err().contains("JSON"));
        assert!(parse_document("a: [").unwrap_err().contains("YAML"));
        assert!(
            check_version(&json!({"swagger": "2.0"}))
                .unwrap_err()
                .contains("Swagger")
        );
        assert!(check_version(&json!({"openapi": "4.0"})).is_err());
    }

    #[test]
    fn the_server_url_comes_from_config_or_document() {
        let doc = json!({"servers": [{"url": "https://{region}.example.com/v1/", "variables": {"region": {"default": "eu"}}}]});
        assert_eq!(
            server_url(None, &doc, None).unwrap(),
            "https://eu.example.com/v1"
        );
        assert_eq!(
            server_url(Some("http://h/x/"), &doc, None).unwrap(),
            "http://h/x"
        );
        let rel = json!({"servers": [{"url": "/v2"}]});
        let at = url::Url::parse("http://h:8/specs/openapi.yaml?token=t").unwrap();
        assert_eq!(server_url(None, &rel, Some(&at)).unwrap(), "http://h:8/v2");
        assert_eq!(
            server_url(None, &json!({}), Some(&at)).unwrap(),
            "http://h:8"
        );
        assert!(
            server_url(None, &rel, None)
                .unwrap_err()
                .contains("set base_url")
        );
        assert_eq!(
            redact(&url::Url::parse("http://u:p@h/x?token=t").unwrap()),
            "http://h/x"
        );
    }
}
