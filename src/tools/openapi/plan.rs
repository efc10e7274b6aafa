//! From an OpenAPI document to operation plans: one argument schema per operation, how each
//! parameter travels, and the names the model calls. Pure functions over `serde_json::Value`.

use std::collections::HashSet;

use reqwest::Method;
use serde_json::{Map, Value, json};

use super::schema::Resolver;
use crate::settings::valid_name;

/// Tool descriptions are cut here; whole API manuals in `description` cost tokens every turn.
const MAX_DESCRIPTION_CHARS: usize = 1024;
/// Path-item keys that are operations, in the order tools are listed.
const METHODS: &[&str] = &[
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// Where a parameter travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Location {
    /// A `{name}` in the path template.
    Path,
    /// The query string.
    Query,
    /// A request header.
    Header,
}

/// How arrays and objects are spelled (OpenAPI `style`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Style {
    /// `a,b` (path and header default).
    Simple,
    /// `.a.b` in a path.
    Label,
    /// `;n=a,b` in a path.
    Matrix,
    /// `n=a&n=b` (query default).
    Form,
    /// `n=a%20b`.
    SpaceDelimited,
    /// `n=a|b`.
    PipeDelimited,
    /// `n[k]=v`.
    DeepObject,
}

/// How one parameter is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Param {
    /// The name on the wire.
    pub name: String,
    /// The argument property that carries it (the name, unless two locations share it).
    pub arg: String,
    /// Where it goes.
    pub location: Location,
    /// How it is spelled.
    pub style: Style,
    /// Whether arrays and objects are exploded.
    pub explode: bool,
    /// Declared with `content` instead of `schema`: sent as JSON text.
    pub json: bool,
}

/// The JSON request body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Body {
    /// The media type sent (`application/json` or a `+json` type).
    pub content_type: String,
}

/// One operation, ready to become a tool.
#[derive(Debug, Clone)]
pub(crate) struct Operation {
    /// The tool name (prefixed, sanitised, unique).
    pub name: String,
    /// Description for the model.
    pub description: String,
    /// The argument schema.
    pub input_schema: Value,
    /// HTTP method.
    pub method: Method,
    /// The path template (`/pets/{petId}`).
    pub path: String,
    /// Parameters, in declaration order.
    pub params: Vec<Param>,
    /// The body, when the operation takes JSON.
    pub body: Option<Body>,
}

/// What to build.
#[derive(Debug, Default)]
pub(crate) struct PlanOptions<'a> {
    /// Tool-name prefix.
    pub prefix: Option<&'a str>,
    /// Only these operationIds (or fallback names).
    pub allow: Option<&'a [String]>,
    /// Header names (lower case) the configured auth sets; the model may not set them.
    pub reserved_headers: Vec<String>,
}

/// A document's operations as tools, and what was left out.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    /// Operations that became tools.
    pub operations: Vec<Operation>,
    /// `(operation, reason)` for operations that could not.
    pub skipped: Vec<(String, String)>,
    /// Allow-listed names the document does not have.
    pub unknown: Vec<String>,
}

/// Builds one tool plan per supported operation of `doc`.
pub(crate) fn plan(doc: &Value, opts: &PlanOptions<'_>) -> Plan {
    let mut out = Plan::default();
    let mut resolver = Resolver::new(doc);
    let mut names = HashSet::new();
    let mut seen = HashSet::new();
    let Some(paths) = doc.get("paths").and_then(Value::as_object) else {
        return out;
    };
    for (path, item) in paths {
        let item = match resolver.follow(item) {
            Ok(Value::Object(i)) => i,
            Ok(_) => continue,
            Err(e) => {
                out.skipped.push((path.clone(), e));
                continue;
            }
        };
        for method in METHODS {
            let Some(op) = item.get(*method).filter(|o| o.is_object()) else {
                continue;
            };
            let id = op
                .get("operationId")
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty())
                .map(str::to_string)
                .unwrap_or_else(|| fallback_name(method, path));
            seen.insert(id.clone());
            if opts.allow.is_some_and(|a| !a.contains(&id)) {
                continue;
            }
            match operation(&mut resolver, method, path, item, op, opts) {
                Ok(mut o) => {
                    o.name = unique(tool_name(opts.prefix, &id), &mut names);
                    out.operations.push(o);
                }
                Err(reason) => out.skipped.push((id, reason)),
            }
        }
    }
    if let Some(allow) = opts.allow {
        out.unknown = allow
            .iter()
            .filter(|a| !seen.contains(*a))
            .cloned()
            .collect();
    }
    out
}

fn operation(
    r: &mut Resolver<'_>,
    method: &str,
    path: &str,
    item: &Map<String, Value>,
    op: &Value,
    opts: &PlanOptions<'_>,
) -> Result<Operation, String> {
    let http_method = Method::from_bytes(method.to_ascii_uppercase().as_bytes())
        .map_err(|_| format!("method {method} is not supported"))?;
    let mut properties = Map::new();
    let mut required = Vec::new();

    // The body first, so it owns the `body` property whatever the parameters are called.
    let body = match op.get("requestBody") {
        None => None,
        Some(b) => {
            let b = r.follow(b)?;
            let is_required = b.get("required") == Some(&Value::Bool(true));
            let content = b.get("content").and_then(Value::as_object);
            let json_type = content.and_then(|c| {
                c.keys()
                    .find(|k| is_json(k))
                    .map(|k| (k.clone(), c.get(k).cloned().unwrap_or(Value::Null)))
            });
            match json_type {
                Some((content_type, media)) => {
                    let mut schema = r.schema(media.get("schema").unwrap_or(&json!({})));
                    describe(&mut schema, b.get("description"));
                    properties.insert("body".into(), schema);
                    if is_required {
                        required.push(json!("body"));
                    }
                    Some(Body { content_type })
                }
                None => {
                    let types: Vec<&str> = content
                        .map(|c| c.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    if is_required {
                        return Err(format!(
                            "the request body is not JSON ({})",
                            types.join(", ")
                        ));
                    }
                    tracing::debug!(path, method, "optional non-JSON request body left out");
                    None
                }
            }
        }
    };

    // Path-level parameters, overridden by the operation's own of the same name and place.
    let mut declared: Vec<&Value> = Vec::new();
    let lists = [item.get("parameters"), op.get("parameters")];
    for p in lists
        .into_iter()
        .flatten()
        .filter_map(Value::as_array)
        .flatten()
    {
        let p = r.follow(p)?;
        let key = |v: &Value| (v.get("name").cloned(), v.get("in").cloned());
        declared.retain(|d| key(d) != key(p));
        declared.push(p);
    }
    let mut params = Vec::new();
    for p in declared {
        let name = p
            .get("name")
            .and_then(Value::as_str)
            .ok_or("a parameter has no name")?;
        let location = match p.get("in").and_then(Value::as_str) {
            Some("path") => Location::Path,
            Some("query") => Location::Query,
            Some("header") => {
                let lower = name.to_ascii_lowercase();
                // The spec says these three are ignored; the auth header is ours to set.
                if ["accept", "content-type", "authorization"].contains(&lower.as_str())
                    || opts.reserved_headers.contains(&lower)
                {
                    continue;
                }
                Location::Header
            }
            Some("cookie") => {
                if p.get("required") == Some(&Value::Bool(true)) {
                    return Err(format!("cookie parameter {name:?} is not supported"));
                }
                continue;
            }
            other => return Err(format!("parameter {name:?} is in {other:?}")),
        };
        let is_required =
            location == Location::Path || p.get("required") == Some(&Value::Bool(true));
        let content_schema = p
            .get("content")
            .and_then(Value::as_object)
            .and_then(|c| c.values().next())
            .and_then(|m| m.get("schema"));
        let json = p.get("schema").is_none() && content_schema.is_some();
        let mut schema = match p.get("schema").or(content_schema) {
            Some(s) => r.schema(s),
            None => json!({"type": "string"}),
        };
        describe(&mut schema, p.get("description"));
        let style = match p.get("style").and_then(Value::as_str) {
            None => match location {
                Location::Query => Style::Form,
                _ => Style::Simple,
            },
            Some("simple") => Style::Simple,
            Some("label") => Style::Label,
            Some("matrix") => Style::Matrix,
            Some("form") => Style::Form,
            Some("spaceDelimited") => Style::SpaceDelimited,
            Some("pipeDelimited") => Style::PipeDelimited,
            Some("deepObject") => Style::DeepObject,
            Some(other) => return Err(format!("parameter style {other:?} is not supported")),
        };
        let explode = p
            .get("explode")
            .and_then(Value::as_bool)
            .unwrap_or(style == Style::Form);
        let mut arg = name.to_string();
        if properties.contains_key(&arg) {
            arg = format!("{}_{name}", location_word(location));
            if properties.contains_key(&arg) {
                return Err(format!("parameter {name:?} is declared twice"));
            }
        }
        properties.insert(arg.clone(), schema);
        if is_required {
            required.push(json!(arg));
        }
        params.push(Param {
            name: name.to_string(),
            arg,
            location,
            style,
            explode,
            json,
        });
    }
    for placeholder in placeholders(path) {
        if !params
            .iter()
            .any(|p| p.location == Location::Path && p.name == placeholder)
        {
            return Err(format!("path parameter {placeholder:?} is not declared"));
        }
    }

    let mut input_schema = json!({
        "type": "object",
        "properties": properties,
        "additionalProperties": false,
    });
    if !required.is_empty() {
        input_schema["required"] = Value::Array(required);
    }
    Ok(Operation {
        name: String::new(),
        description: description(op, method, path),
        input_schema,
        method: http_method,
        path: path.to_string(),
        params,
        body,
    })
}

/// `application/json`, `application/json; charset=utf-8`, `application/merge-patch+json`...
/// (also the gateway's own test of request bodies).
pub(crate) fn is_json(media_type: &str) -> bool {
    let essence = media_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

fn location_word(l: Location) -> &'static str {
    match l {
        Location::Path => "path",
        Location::Query => "query",
        Location::Header => "header",
    }
}

/// Adds the parameter's (or body's) description where the schema has none of its own.
fn describe(schema: &mut Value, description: Option<&Value>) {
    if let (Value::Object(s), Some(Value::String(d))) = (schema, description)
        && !d.trim().is_empty()
        && !s.contains_key("description")
    {
        s.insert("description".into(), json!(d.trim()));
    }
}

/// The `{name}`s of a path template.
pub(crate) fn placeholders(path: &str) -> Vec<&str> {
    path.split('{')
        .skip(1)
        .filter_map(|s| s.split_once('}').map(|(name, _)| name))
        .collect()
}

fn description(op: &Value, method: &str, path: &str) -> String {
    let text = |k: &str| {
        op.get(k)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
    };
    let mut d = match (text("summary"), text("description")) {
        (Some(s), Some(d)) if d.starts_with(s) => d.to_string(),
        (Some(s), Some(d)) => format!("{s}\n\n{d}"),
        (Some(s), None) | (None, Some(s)) => s.to_string(),
        (None, None) => format!("{} {path}", method.to_ascii_uppercase()),
    };
    if op.get("deprecated") == Some(&Value::Bool(true)) {
        d.insert_str(0, "Deprecated. ");
    }
    if let Some((cut, _)) = d.char_indices().nth(MAX_DESCRIPTION_CHARS) {
        d.truncate(cut);
        d.push('…');
    }
    d
}

/// Any character outside `[A-Za-z0-9_-]` becomes `_`.
pub(crate) fn sanitise(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `get /pets/{petId}` -> `get_pets_petId`, for operations without an operationId.
pub(crate) fn fallback_name(method: &str, path: &str) -> String {
    let raw = sanitise(&format!("{method}_{path}"));
    let mut out = String::with_capacity(raw.len());
    for c in raw.chars() {
        if !(c == '_' && out.ends_with('_')) {
            out.push(c);
        }
    }
    out.trim_end_matches('_').to_string()
}

/// The tool name: prefix (joined by `_` unless it ends in a separator) + sanitised id, cut to
/// 64 characters (the OpenAI function-name limit).
pub(crate) fn tool_name(prefix: Option<&str>, id: &str) -> String {
    let mut id = sanitise(id);
    if id.trim_matches('_').is_empty() {
        id = "operation".into();
    }
    let mut name = match prefix {
        Some(p) if p.ends_with('_') || p.ends_with('-') => format!("{p}{id}"),
        Some(p) => format!("{p}_{id}"),
        None => id,
    };
    // Sanitised text is ASCII, so any byte index is a character boundary.
    name.truncate(64);
    name
}

/// `name`, or `name_2`, `name_3`... when a sanitised or truncated name is already taken.
fn unique(name: String, taken: &mut HashSet<String>) -> String {
    let mut candidate = name.clone();
    let mut n = 2;
    while !taken.insert(candidate.clone()) {
        let suffix = format!("_{n}");
        let stem = &name[..name.len().min(64 - suffix.len())];
        candidate = format!("{stem}{suffix}");
        n += 1;
    }
    debug_assert!(valid_name(&candidate));
    candidate
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn doc() -> Value {
        json!({
            "openapi": "3.0.3",
            "paths": {
                "/pets/{petId}": {
                    "parameters": [{"$ref": "#/components/parameters/PetId"}],
                    "get": {
                        "operationId": "getPet",
                        "summary": "Find a pet",
                        "parameters": [
                            {"name": "verbose", "in": "query", "schema": {"type": "boolean"}},
                            {"name": "X-Trace", "in": "header", "required": true, "schema": {"type": "string"}},
                            {"name": "Authorization", "in": "header", "schema": {"type": "string"}},
                            {"name": "session", "in": "cookie", "schema": {"type": "string"}}
                        ]
                    }
                },
                "/pets": {
                    "post": {
                        "operationId": "create pet!",
                        "requestBody": {"$ref": "#/components/requestBodies/NewPet"}
                    },
                    "put": {
                        "requestBody": {"required": true, "content": {"multipart/form-data": {}}}
                    },
                    "get": {
                        "parameters": [{"name": "tags", "in": "query", "style": "pipeDelimited", "schema": {"type": "array", "items": {"type": "string"}}}]
                    }
                },
                "/broken/{id}": {"get": {"operationId": "broken"}}
            },
            "components": {
                "parameters": {
                    "PetId": {"name": "petId", "in": "path", "required": true, "description": "The pet's id", "schema": {"type": "integer", "format": "int64"}}
                },
                "requestBodies": {
                    "NewPet": {"required": true, "description": "The new pet", "content": {"application/json; charset=utf-8": {"schema": {"$ref": "#/components/schemas/Pet"}}}}
                },
                "schemas": {
                    "Pet": {
                        "type": "object",
                        "required": ["id", "name"],
                        "properties": {
                            "id": {"type": "integer", "readOnly": true},
                            "name": {"type": "string", "x-internal": 1},
                            "tag": {"type": "string", "nullable": true},
                            "default": {"$ref": "#/components/schemas/Toy"},
                            "children": {"type": "array", "items": {"$ref": "#/components/schemas/Pet"}}
                        },
                        "xml": {"name": "pet"},
                        "example": {"$ref": "not a reference"}
                    },
                    "Toy": {"type": "string", "enum": ["ball", "bone"]}
                }
            }
        })
    }

    #[test]
    fn operations_become_schemas_with_path_query_header_and_body() {
        let d = doc();
        let p = plan(
            &d,
            &PlanOptions {
                prefix: Some("pets"),
                ..Default::default()
            },
        );
        let names: Vec<&str> = p.operations.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["pets_get_pets", "pets_create_pet_", "pets_getPet"]);
        let get = &p.operations[2];
        assert_eq!(get.description, "Find a pet");
        assert_eq!(
            get.input_schema,
            json!({
                "type": "object",
                "properties": {
                    "petId": {"type": "integer", "format": "int64", "description": "The pet's id"},
                    "verbose": {"type": "boolean"},
                    "X-Trace": {"type": "string"}
                },
                "required": ["petId", "X-Trace"],
                "additionalProperties": false
            })
        );
        assert_eq!(get.params.len(), 3, "authorization and cookie left out");
        assert_eq!(get.params[1].style, Style::Form);
        assert!(get.params[1].explode);
        let post = &p.operations[1];
        assert_eq!(post.method, Method::POST);
        assert_eq!(
            post.body,
            Some(Body {
                content_type: "application/json; charset=utf-8".into()
            })
        );
        assert_eq!(post.input_schema["required"], json!(["body"]));
        let body = &post.input_schema["properties"]["body"];
        assert_eq!(body["description"], "The new pet");
        assert_eq!(body["properties"]["name"]["type"], "string");
        assert_eq!(p.operations[0].params[0].style, Style::PipeDelimited);
        assert_eq!(p.operations[0].description, "GET /pets");
        let skipped: Vec<&str> = p.skipped.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(skipped, ["broken", "put_pets"]);
        assert!(p.skipped[0].1.contains("\"id\" is not declared"));
        assert!(p.skipped[1].1.contains("multipart/form-data"));
        for o in &p.operations {
            assert!(
                jsonschema::validator_for(&o.input_schema).is_ok(),
                "{}",
                o.name
            );
        }
    }

    #[test]
    fn allow_list_and_reserved_headers() {
        let d = doc();
        let allow = vec!["getPet".to_string(), "nope".to_string()];
        let p = plan(
            &d,
            &PlanOptions {
                allow: Some(&allow),
                reserved_headers: vec!["x-trace".into()],
                ..Default::default()
            },
        );
        assert_eq!(p.operations.len(), 1);
        assert_eq!(p.operations[0].name, "getPet");
        assert!(
            p.operations[0].input_schema["properties"]
                .get("X-Trace")
                .is_none()
        );
        assert_eq!(p.unknown, ["nope"]);
    }

    #[test]
    fn names_are_sanitised_bounded_and_unique() {
        assert_eq!(fallback_name("get", "/a/{b}/c.json"), "get_a_b_c_json");
        assert_eq!(tool_name(Some("x-"), "a.b"), "x-a_b");
        assert_eq!(tool_name(None, "!!"), "operation");
        let long = "a".repeat(80);
        assert_eq!(tool_name(Some("p"), &long).len(), 64);
        let mut taken = HashSet::new();
        assert_eq!(unique(tool_name(None, &long), &mut taken).len(), 64);
        let second = unique(tool_name(None, &long), &mut taken);
        assert!(second.ends_with("_2") && second.len() == 64);
        assert!(valid_name(&second));
        assert_eq!(placeholders("/a/{x}/b/{y}.json"), ["x", "y"]);
    }
}
