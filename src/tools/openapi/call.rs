//! One OpenAPI operation as a [`Tool`]: the validated arguments become path, query, headers
//! and a JSON body; the response body is the result, and a non-2xx answer is an error result
//! the model can read.

use futures::future::BoxFuture;
use reqwest::RequestBuilder;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderName, HeaderValue};
use serde_json::{Map, Value};

use super::Auth;
use super::plan::{Location, Operation, Param, Style};
use crate::conversation::ToolSpec;
use crate::tools::{Tool, ToolContext, ToolOutput};

/// Responses are cut at this size so a huge body cannot flood the model context or memory.
const MAX_RESPONSE: usize = 1024 * 1024;

/// One operation, callable.
pub(crate) struct OpenApiTool {
    spec: ToolSpec,
    op: Operation,
    /// Server URL without a trailing `/`; the path template is appended.
    base_url: String,
    client: reqwest::Client,
    auth: Option<Auth>,
}

impl OpenApiTool {
    /// A tool for `op`, sent to `base_url` with `client` (shared connection pool).
    pub(crate) fn new(
        op: Operation,
        base_url: String,
        client: reqwest::Client,
        auth: Option<Auth>,
    ) -> Self {
        let spec = ToolSpec {
            name: op.name.clone(),
            description: op.description.clone(),
            input_schema: op.input_schema.clone(),
            strict: None,
        };
        Self {
            spec,
            op,
            base_url,
            client,
            auth,
        }
    }

    async fn run(&self, args: Value) -> ToolOutput {
        let name = &self.spec.name;
        let p = match prepare(&self.op, &args) {
            Ok(p) => p,
            Err(e) => {
                return ToolOutput::error(format!("{e} Fix the arguments and call {name} again."));
            }
        };
        let url = format!("{}{}", self.base_url, p.path);
        let mut req = self
            .client
            .request(self.op.method.clone(), &url)
            .header(ACCEPT, "application/json, */*;q=0.8");
        if !p.query.is_empty() {
            req = req.query(&p.query);
        }
        for (k, v) in &p.headers {
            let (Ok(k), Ok(v)) = (
                HeaderName::from_bytes(k.as_bytes()),
                HeaderValue::from_str(v),
            ) else {
                return ToolOutput::error(format!(
                    "Header {k:?} cannot carry {v:?}: not a valid HTTP header value."
                ));
            };
            req = req.header(k, v);
        }
        if let (Some(body), Some(b)) = (&p.body, &self.op.body) {
            req = req
                .header(CONTENT_TYPE, b.content_type.as_str())
                .body(body.to_string());
        }
        req = with_auth(req, self.auth.as_ref());
        let req = crate::telemetry::with_traceparent(req);
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) => {
                let what = if e.is_builder() {
                    "the request could not be built (invalid URL or header)"
                } else if e.is_timeout() {
                    "the API timed out"
                } else if e.is_connect() {
                    "the API could not be reached"
                } else {
                    "the request failed"
                };
                // Without the URL: user info and query values do not belong in logs.
                tracing::warn!(tool = %name, error = %e.without_url(), "OpenAPI call failed");
                return ToolOutput::error(format!("Tool {name}: {what}."));
            }
        };
        let status = resp.status();
        let (body, truncated) = match crate::outbound::read_capped(resp, MAX_RESPONSE).await {
            Ok(b) => b,
            Err(_) => return ToolOutput::error(format!("Tool {name}: the response broke off.")),
        };
        let mut text = String::from_utf8_lossy(&body).into_owned();
        if truncated {
            text.push_str("\n[response truncated]");
        }
        let code = status.as_u16();
        if status.is_success() {
            if text.trim().is_empty() {
                text = format!("HTTP {code} (no content)");
            }
            ToolOutput::ok(text)
        } else {
            if text.trim().is_empty() {
                text = status.canonical_reason().unwrap_or("no body").to_string();
            }
            ToolOutput::error(format!("HTTP {code}: {text}"))
        }
    }
}

impl Tool for OpenApiTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call(&self, args: Value, _ctx: ToolContext) -> BoxFuture<'_, ToolOutput> {
        Box::pin(self.run(args))
    }
}

/// Adds the configured credentials to a request.
pub(crate) fn with_auth(req: RequestBuilder, auth: Option<&Auth>) -> RequestBuilder {
    match auth {
        None => req,
        Some(Auth::Bearer(token)) => req.bearer_auth(token.expose()),
        Some(Auth::Basic { username, password }) => {
            req.basic_auth(username, Some(password.expose()))
        }
        Some(Auth::Header { name, value }) => match HeaderValue::from_str(value.expose()) {
            Ok(mut v) => {
                // Keeps the key out of any debug output of the request.
                v.set_sensitive(true);
                req.header(name.as_str(), v)
            }
            // `parse` checked the value; without it the API answers 401, which the model reads.
            Err(_) => req,
        },
    }
}

/// A request's parts, before the URL and auth are added.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Prepared {
    /// The path with parameters substituted and percent-encoded.
    pub path: String,
    /// Query pairs, not yet encoded.
    pub query: Vec<(String, String)>,
    /// Header pairs.
    pub headers: Vec<(String, String)>,
    /// The JSON body.
    pub body: Option<Value>,
}

/// Spreads the arguments over the request as the operation declares. Errors are sentences
/// for the model.
pub(crate) fn prepare(op: &Operation, args: &Value) -> Result<Prepared, String> {
    let empty = Map::new();
    let args = args.as_object().unwrap_or(&empty);
    let mut out = Prepared {
        path: render_path(op, args)?,
        body: args.get("body").filter(|_| op.body.is_some()).cloned(),
        ..Default::default()
    };
    for p in &op.params {
        let Some(v) = args.get(&p.arg).filter(|v| !v.is_null()) else {
            continue;
        };
        match p.location {
            Location::Path => {}
            Location::Query => out.query.extend(query_pairs(p, v)),
            Location::Header => out.headers.push((p.name.clone(), header_value(p, v))),
        }
    }
    Ok(out)
}

fn render_path(op: &Operation, args: &Map<String, Value>) -> Result<String, String> {
    let mut out = String::with_capacity(op.path.len());
    let mut rest = op.path.as_str();
    while let Some(start) = rest.find('{') {
        let Some(len) = rest[start..].find('}') else {
            break;
        };
        out.push_str(&rest[..start]);
        let name = &rest[start + 1..start + len];
        let param = op
            .params
            .iter()
            .find(|p| p.location == Location::Path && p.name == name)
            .ok_or_else(|| format!("Path parameter {name:?} is not declared."))?;
        let value = args
            .get(&param.arg)
            .filter(|v| !v.is_null())
            .ok_or_else(|| format!("Missing path parameter {:?}.", param.arg))?;
        out.push_str(&path_value(param, value));
        rest = &rest[start + len + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A parameter value as OpenAPI's styles see it.
enum Shape {
    One(String),
    List(Vec<String>),
    Pairs(Vec<(String, String)>),
}

fn shape(p: &Param, v: &Value) -> Shape {
    if p.json {
        return Shape::One(v.to_string());
    }
    match v {
        Value::Array(a) => Shape::List(a.iter().map(scalar).collect()),
        Value::Object(m) => Shape::Pairs(m.iter().map(|(k, v)| (k.clone(), scalar(v))).collect()),
        other => Shape::One(scalar(other)),
    }
}

/// Strings as they are, anything else as JSON text (nested structures have no standard
/// spelling in parameters).
fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn flat(pairs: &[(String, String)], enc: fn(&str) -> String) -> Vec<String> {
    pairs.iter().flat_map(|(k, v)| [enc(k), enc(v)]).collect()
}

fn assigned(pairs: &[(String, String)], enc: fn(&str) -> String) -> Vec<String> {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect()
}

fn path_value(p: &Param, v: &Value) -> String {
    let e: fn(&str) -> String = encode;
    let name = e(&p.name);
    let sep = if p.explode { "." } else { "," };
    match (p.style, shape(p, v)) {
        (Style::Label, Shape::One(s)) => format!(".{}", e(&s)),
        (Style::Label, Shape::List(l)) => {
            format!(".{}", l.iter().map(|x| e(x)).collect::<Vec<_>>().join(sep))
        }
        (Style::Label, Shape::Pairs(ps)) if p.explode => format!(".{}", assigned(&ps, e).join(".")),
        (Style::Label, Shape::Pairs(ps)) => format!(".{}", flat(&ps, e).join(",")),
        (Style::Matrix, Shape::One(s)) => format!(";{name}={}", e(&s)),
        (Style::Matrix, Shape::List(l)) if p.explode => {
            l.iter().map(|x| format!(";{name}={}", e(x))).collect()
        }
        (Style::Matrix, Shape::List(l)) => {
            format!(
                ";{name}={}",
                l.iter().map(|x| e(x)).collect::<Vec<_>>().join(",")
            )
        }
        (Style::Matrix, Shape::Pairs(ps)) if p.explode => {
            assigned(&ps, e).iter().map(|a| format!(";{a}")).collect()
        }
        (Style::Matrix, Shape::Pairs(ps)) => format!(";{name}={}", flat(&ps, e).join(",")),
        (_, Shape::One(s)) => e(&s),
        (_, Shape::List(l)) => l.iter().map(|x| e(x)).collect::<Vec<_>>().join(","),
        (_, Shape::Pairs(ps)) if p.explode => assigned(&ps, e).join(","),
        (_, Shape::Pairs(ps)) => flat(&ps, e).join(","),
    }
}

fn query_pairs(p: &Param, v: &Value) -> Vec<(String, String)> {
    let n = p.name.clone();
    match (p.style, shape(p, v)) {
        (_, Shape::One(s)) => vec![(n, s)],
        (Style::DeepObject, Shape::Pairs(ps)) => ps
            .into_iter()
            .map(|(k, v)| (format!("{n}[{k}]"), v))
            .collect(),
        (Style::SpaceDelimited, Shape::List(l)) if !p.explode => vec![(n, l.join(" "))],
        (Style::PipeDelimited, Shape::List(l)) if !p.explode => vec![(n, l.join("|"))],
        (_, Shape::List(l)) if p.explode => l.into_iter().map(|x| (n.clone(), x)).collect(),
        (_, Shape::List(l)) => vec![(n, l.join(","))],
        (_, Shape::Pairs(ps)) if p.explode => ps,
        (_, Shape::Pairs(ps)) => vec![(n, flat(&ps, |s| s.to_string()).join(","))],
    }
}

fn header_value(p: &Param, v: &Value) -> String {
    let same: fn(&str) -> String = |s| s.to_string();
    match shape(p, v) {
        Shape::One(s) => s,
        Shape::List(l) => l.join(","),
        Shape::Pairs(ps) if p.explode => assigned(&ps, same).join(","),
        Shape::Pairs(ps) => flat(&ps, same).join(","),
    }
}

/// Percent-encodes everything but RFC 3986 unreserved characters, so a value can never add
/// a path segment, a query or a fragment.
pub(crate) fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::plan::Body;
    use super::*;
    use reqwest::Method;
    use serde_json::json;

    fn param(name: &str, location: Location, style: Style, explode: bool) -> Param {
        Param {
            name: name.into(),
            arg: name.into(),
            location,
            style,
            explode,
            json: false,
        }
    }

    fn op(path: &str, params: Vec<Param>) -> Operation {
        Operation {
            name: "t".into(),
            description: String::new(),
            input_schema: json!({}),
            method: Method::GET,
            path: path.into(),
            params,
            body: Some(Body {
                content_type: "application/json".into(),
            }),
        }
    }

    #[test]
    fn path_parameters_are_encoded_and_styled() {
        let o = op(
            "/pets/{id}/{label}{matrix}/x",
            vec![
                param("id", Location::Path, Style::Simple, false),
                param("label", Location::Path, Style::Label, false),
                param("matrix", Location::Path, Style::Matrix, true),
            ],
        );
        let p = prepare(
            &o,
            &json!({"id": "a b/c?d", "label": [1, 2], "matrix": ["x", "y"]}),
        )
        .unwrap();
        assert_eq!(p.path, "/pets/a%20b%2Fc%3Fd/.1,2;matrix=x;matrix=y/x");
        assert!(
            prepare(&o, &json!({"label": 1, "matrix": 1}))
                .unwrap_err()
                .contains("\"id\"")
        );
        let obj = op(
            "/o/{o}",
            vec![param("o", Location::Path, Style::Simple, true)],
        );
        assert_eq!(
            prepare(&obj, &json!({"o": {"a": 1, "b": "x y"}}))
                .unwrap()
                .path,
            "/o/a=1,b=x%20y"
        );
    }

    #[test]
    fn query_headers_and_body() {
        let mut j = param("filter", Location::Query, Style::Form, true);
        j.json = true;
        let o = op(
            "/s",
            vec![
                param("tag", Location::Query, Style::Form, true),
                param("ids", Location::Query, Style::Form, false),
                param("pipe", Location::Query, Style::PipeDelimited, false),
                param("deep", Location::Query, Style::DeepObject, true),
                param("flag", Location::Query, Style::Form, true),
                param("absent", Location::Query, Style::Form, true),
                j,
                param("X-Ids", Location::Header, Style::Simple, false),
            ],
        );
        let p = prepare(
            &o,
            &json!({
                "tag": ["a", "b"], "ids": [1, 2], "pipe": ["x", "y"], "deep": {"k": "v"},
                "flag": true, "absent": null, "filter": {"q": 1}, "X-Ids": [3, 4],
                "body": {"name": "Rex"}
            }),
        )
        .unwrap();
        let q: Vec<(&str, &str)> = p
            .query
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            q,
            [
                ("tag", "a"),
                ("tag", "b"),
                ("ids", "1,2"),
                ("pipe", "x|y"),
                ("deep[k]", "v"),
                ("flag", "true"),
                ("filter", r#"{"q":1}"#)
            ]
        );
        assert_eq!(p.headers, [("X-Ids".to_string(), "3,4".to_string())]);
        assert_eq!(p.body, Some(json!({"name": "Rex"})));
    }

    #[test]
    fn encoding_keeps_only_unreserved_characters() {
        assert_eq!(encode("aZ09-._~"), "aZ09-._~");
        assert_eq!(encode("ä/%#"), "%C3%A4%2F%25%23");
    }
}
