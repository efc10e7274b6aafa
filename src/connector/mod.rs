//! ml-commons connectors: a templated HTTP call (`url`, `headers`, `request_body` with
//! `${parameters.*}` / `${credential.*}` placeholders), optionally SigV4-signed, whose answer is
//! narrowed by a `response_filter` JSONPath. Used by `_predict` and the `MLModelTool`.

pub mod embed;
pub mod hashed;
pub mod jsonpath;
pub mod llm;
pub mod mcp;
pub mod models;
pub mod process;
pub mod sigv4;
pub mod template;

use std::time::Duration;

use serde_json::{Map, Value, json};

use template::{Escape, render};

/// A connector definition that is wrong, naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct Invalid {
    /// The field path, e.g. `actions[0].url`.
    pub field: String,
    /// What is wrong.
    pub problem: String,
}

/// An [`Invalid`] for `field`.
pub(crate) fn invalid(field: impl Into<String>, problem: impl Into<String>) -> Invalid {
    Invalid {
        field: field.into(),
        problem: problem.into(),
    }
}

/// Checks a connector's URLs against the outbound URL policy (`net`) when they are written
/// out; a URL whose host comes from a placeholder is checked when `_predict` fills it in.
pub fn check_urls(doc: &Value, prefix: &str, net: &crate::outbound::Net) -> Result<(), Invalid> {
    let literal = |u: &str| !u.contains("${");
    if let Some(actions) = doc.get("actions").and_then(Value::as_array) {
        for (i, a) in actions.iter().enumerate() {
            if let Some(u) = a.get("url").and_then(Value::as_str).filter(|u| literal(u)) {
                net.check(u)
                    .map_err(|e| invalid(format!("{prefix}actions[{i}].url"), e.to_string()))?;
            }
        }
    }
    if let Some(u) = mcp::endpoint(doc).filter(|u| literal(u)) {
        net.check(&u)
            .map_err(|e| invalid(format!("{prefix}url"), e.to_string()))?;
    }
    if let Some(u) = doc
        .pointer("/parameters/endpoint_url")
        .and_then(Value::as_str)
        .filter(|u| literal(u))
    {
        net.check(u)
            .map_err(|e| invalid(format!("{prefix}parameters.endpoint_url"), e.to_string()))?;
    }
    Ok(())
}

/// The protocols a connector may use (`scripted`: the gateway's offline models, a fixture for
/// text and hashed features for embeddings, with no endpoint).
pub const PROTOCOLS: &[&str] = &[
    "http",
    "aws_sigv4",
    "mcp_sse",
    "mcp_streamable_http",
    "scripted",
];

/// Splits a connector document into its public part and its credential, after checking it.
/// `prefix` is prepended to field names in errors (`connector.` for inline connectors).
pub fn validate(doc: &Value, prefix: &str) -> Result<(Value, Map<String, Value>), Invalid> {
    let f = |k: &str| format!("{prefix}{k}");
    let Some(obj) = doc.as_object() else {
        return Err(invalid(prefix.trim_end_matches('.'), "must be an object"));
    };
    match obj.get("name") {
        Some(Value::String(s)) if !s.trim().is_empty() => {}
        _ => return Err(invalid(f("name"), "required, a non-empty string")),
    }
    let protocol = match obj.get("protocol") {
        Some(Value::String(p)) if PROTOCOLS.contains(&p.as_str()) => p.as_str(),
        Some(Value::String(p)) => {
            return Err(invalid(
                f("protocol"),
                format!("{p:?} is not supported; expected one of {PROTOCOLS:?}"),
            ));
        }
        _ => {
            return Err(invalid(
                f("protocol"),
                format!("required: one of {PROTOCOLS:?}"),
            ));
        }
    };
    let parameters = match obj.get("parameters") {
        None => Map::new(),
        Some(Value::Object(p)) => p.clone(),
        Some(_) => return Err(invalid(f("parameters"), "must be an object")),
    };
    let credential = match obj.get("credential") {
        None => Map::new(),
        Some(Value::Object(c)) => {
            for (k, v) in c {
                if !v.is_string() {
                    return Err(invalid(f(&format!("credential.{k}")), "must be a string"));
                }
            }
            c.clone()
        }
        Some(_) => return Err(invalid(f("credential"), "must be an object of strings")),
    };
    if protocol == "aws_sigv4" {
        for k in ["access_key", "secret_key"] {
            if !credential.contains_key(k) {
                return Err(invalid(
                    f(&format!("credential.{k}")),
                    "required for protocol aws_sigv4",
                ));
            }
        }
        for k in ["region", "service_name"] {
            if !parameters.get(k).is_some_and(Value::is_string) {
                return Err(invalid(
                    f(&format!("parameters.{k}")),
                    "required for protocol aws_sigv4",
                ));
            }
        }
    }
    if protocol == "scripted" {
        hashed::dimension(&parameters).map_err(|p| invalid(f("parameters.dimension"), p))?;
        let mut public = obj.clone();
        public.remove("credential");
        return Ok((Value::Object(public), credential));
    }
    if mcp::MCP_PROTOCOLS.contains(&protocol) {
        mcp::validate(obj, &f)?;
        let mut public = obj.clone();
        public.remove("credential");
        return Ok((Value::Object(public), credential));
    }
    let Some(Value::Array(actions)) = obj.get("actions") else {
        return Err(invalid(f("actions"), "required, a non-empty array"));
    };
    if actions.is_empty() {
        return Err(invalid(f("actions"), "required, a non-empty array"));
    }
    for (i, a) in actions.iter().enumerate() {
        let af = |k: &str| f(&format!("actions[{i}].{k}"));
        if !a.get("action_type").is_some_and(Value::is_string) {
            return Err(invalid(af("action_type"), "required, e.g. \"predict\""));
        }
        match a.get("method").and_then(Value::as_str) {
            Some(m)
                if ["GET", "POST", "PUT", "DELETE", "PATCH"]
                    .contains(&m.to_ascii_uppercase().as_str()) => {}
            _ => {
                return Err(invalid(
                    af("method"),
                    "required: GET, POST, PUT, PATCH or DELETE",
                ));
            }
        }
        match a.get("url").and_then(Value::as_str) {
            Some(u) if u.starts_with("http://") || u.starts_with("https://") => {}
            _ => return Err(invalid(af("url"), "required, an http(s) URL")),
        }
        if let Some(h) = a.get("headers")
            && !h
                .as_object()
                .is_some_and(|h| h.values().all(Value::is_string))
        {
            return Err(invalid(af("headers"), "must be an object of strings"));
        }
        if let Some(b) = a.get("request_body")
            && !b.is_string()
        {
            return Err(invalid(
                af("request_body"),
                "must be a string (a JSON template)",
            ));
        }
        if let Some(p) = a
            .get("response_filter")
            .or_else(|| parameters.get("response_filter"))
        {
            let Some(p) = p.as_str() else {
                return Err(invalid(af("response_filter"), "must be a JSONPath string"));
            };
            jsonpath::select(&Value::Null, p)
                .map_err(|e| invalid(af("response_filter"), e.to_string()))?;
        }
        for (key, check) in [
            (
                "pre_process_function",
                (|n: &str| process::pre(n).map(|_| ())) as fn(&str) -> Result<(), String>,
            ),
            ("post_process_function", |n: &str| {
                process::post(n).map(|_| ())
            }),
        ] {
            match a.get(key) {
                None => {}
                Some(Value::String(n)) => check(n).map_err(|p| invalid(af(key), p))?,
                Some(_) => return Err(invalid(af(key), "must be a function name (a string)")),
            }
        }
    }
    let mut public = obj.clone();
    public.remove("credential");
    Ok((Value::Object(public), credential))
}

/// Why a connector call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The request could not be built from the template and parameters (a client fault).
    #[error("{0}")]
    Template(String),
    /// The upstream could not be reached.
    #[error("the model endpoint could not be reached: {0}")]
    Unreachable(String),
    /// The upstream answered with an error status.
    #[error("the model endpoint answered {status}: {body}")]
    Upstream {
        /// Its status.
        status: u16,
        /// Its body, scrubbed and capped.
        body: String,
    },
    /// The upstream answered something that is not JSON.
    #[error("the model endpoint answered something that is not JSON")]
    NotJson,
    /// The upstream answered JSON that does not hold what the connector reads from it.
    #[error("{0}")]
    BadAnswer(String),
    /// The outbound URL policy refuses the URL (a client fault).
    #[error(transparent)]
    Refused(#[from] crate::outbound::Refused),
}

/// A connector with its credential, ready to call.
pub struct Connector<'a> {
    /// The public document.
    pub doc: &'a Value,
    /// The opened credential.
    pub credential: &'a Map<String, Value>,
}

impl Connector<'_> {
    /// The connector's parameters overlaid with `overrides`.
    pub fn parameters(&self, overrides: &Map<String, Value>) -> Map<String, Value> {
        let mut p = self
            .doc
            .get("parameters")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        for (k, v) in overrides {
            p.insert(k.clone(), v.clone());
        }
        p
    }

    /// The action of `action_type` (case-insensitive).
    pub fn action(&self, action_type: &str) -> Option<&Value> {
        self.doc.get("actions")?.as_array()?.iter().find(|a| {
            a.get("action_type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.eq_ignore_ascii_case(action_type))
        })
    }

    /// Runs the `predict` action with `overrides` and answers in `_predict`'s shape: the
    /// action's `post_process_function` makes tensors of the answer, else the answer (narrowed
    /// by `response_filter`) is the `response` output's `dataAsMap`.
    pub async fn predict(
        &self,
        net: &crate::outbound::Net,
        overrides: &Map<String, Value>,
    ) -> Result<Value, CallError> {
        let action = self.predict_action()?;
        let params = self.parameters(overrides);
        let (status, doc) = self.call(net, action, &params).await?;
        if let Some(name) = action.get("post_process_function").and_then(Value::as_str) {
            let tensors = self.post_process(action, &params, name, &doc, None)?;
            return Ok(json!({
                "inference_results": [{ "output": tensors, "status_code": status }]
            }));
        }
        let data = match response_filter(action, &params) {
            Some(path) => {
                let picked = jsonpath::select(&doc, path)
                    .map_err(|e| CallError::Template(e.to_string()))?
                    .unwrap_or(Value::Null);
                json!({ "response": picked })
            }
            None if doc.is_object() => doc,
            None => json!({ "response": doc }),
        };
        Ok(json!({
            "inference_results": [{
                "output": [{ "name": "response", "dataAsMap": data }],
                "status_code": status,
            }]
        }))
    }

    /// The `predict` action, or a template error naming its absence.
    pub(crate) fn predict_action(&self) -> Result<&Value, CallError> {
        self.action("predict")
            .ok_or_else(|| CallError::Template("the connector has no predict action".into()))
    }

    /// Tensors out of `doc` by the post-process function `name` (`docs`: how many documents a
    /// rerank scored). The connector's own `response_filter` wins over the function's path,
    /// as in ml-commons.
    pub(crate) fn post_process(
        &self,
        action: &Value,
        params: &Map<String, Value>,
        name: &str,
        doc: &Value,
        docs: Option<usize>,
    ) -> Result<Vec<Value>, CallError> {
        let (path, kind) = process::post(name).map_err(CallError::Template)?;
        let path = response_filter(action, params).unwrap_or(path);
        let picked = jsonpath::select(doc, path)
            .map_err(|e| CallError::Template(e.to_string()))?
            .unwrap_or(Value::Null);
        match kind {
            process::Post::Rerank => {
                let n = docs.unwrap_or_else(|| picked.as_array().map_or(0, Vec::len));
                process::rerank_tensors(&picked, n).map_err(CallError::BadAnswer)
            }
            kind => Ok(process::vectors(kind, &picked)
                .map_err(CallError::BadAnswer)?
                .iter()
                .map(|v| process::embedding_tensor(v))
                .collect()),
        }
    }

    /// Renders `action` with `params`, calls it (SigV4-signed for `aws_sigv4`) and answers its
    /// status and JSON body; an error status is a [`CallError::Upstream`].
    pub(crate) async fn call(
        &self,
        net: &crate::outbound::Net,
        action: &Value,
        params: &Map<String, Value>,
    ) -> Result<(u16, Value), CallError> {
        self.call_with(net, action, params, |t| {
            render(t, params, self.credential, Escape::Json)
        })
        .await
    }

    /// [`Connector::call`] with the request body rendered by `body` (the `_llm_interface`
    /// provider inserts some parameters unescaped).
    pub(crate) async fn call_with(
        &self,
        net: &crate::outbound::Net,
        action: &Value,
        params: &Map<String, Value>,
        body: impl FnOnce(&str) -> Result<String, template::Missing>,
    ) -> Result<(u16, Value), CallError> {
        let filled = |t: &str, e: Escape| {
            render(t, params, self.credential, e).map_err(|m| CallError::Template(m.to_string()))
        };
        let method = action
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or("POST")
            .to_ascii_uppercase();
        let url = filled(
            action.get("url").and_then(Value::as_str).unwrap_or(""),
            Escape::Raw,
        )?;
        let url = bedrock_endpoint_override(self.doc, url);
        // Checked once filled in: parameters given to `_predict` may change the host.
        let client = net.client_for(&url)?;
        let url = url::Url::parse(&url)
            .map_err(|e| CallError::Template(format!("the url {url:?} is not valid: {e}")))?;
        let mut headers: Vec<(String, String)> = Vec::new();
        if let Some(h) = action.get("headers").and_then(Value::as_object) {
            for (k, v) in h {
                // ml-commons' marker for "sign the payload"; the signer sets the real value.
                if k.eq_ignore_ascii_case("x-amz-content-sha256") {
                    continue;
                }
                headers.push((k.clone(), filled(v.as_str().unwrap_or(""), Escape::Raw)?));
            }
        }
        let body = match action.get("request_body").and_then(Value::as_str) {
            None => Vec::new(),
            Some(t) => {
                let text = body(t).map_err(|m| CallError::Template(m.to_string()))?;
                if serde_json::from_str::<Value>(&text).is_err() {
                    return Err(CallError::Template(
                        "request_body is not valid JSON once its placeholders are filled".into(),
                    ));
                }
                text.into_bytes()
            }
        };
        // ml-commons sends its JSON bodies as JSON when the connector names no type (the
        // OpenAI blueprints do not), and real endpoints refuse them otherwise.
        if !body.is_empty()
            && !headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        {
            headers.push(("content-type".into(), "application/json".into()));
        }
        if self.doc.get("protocol").and_then(Value::as_str) == Some("aws_sigv4") {
            headers = sign_v4(&method, &url, headers, &body, params, self.credential)?;
        }
        let method = reqwest::Method::from_bytes(method.as_bytes())
            .map_err(|_| CallError::Template("bad method".into()))?;
        let mut req = client
            .request(method, url)
            .timeout(read_timeout(self.doc))
            .body(body);
        for (k, v) in &headers {
            req = req.header(k.as_str(), v.as_str());
        }
        let resp = req
            .send()
            .await
            .map_err(|e| CallError::Unreachable(crate::model::sse::error_chain(&e)))?;
        let status = resp.status();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| CallError::Unreachable(crate::model::sse::error_chain(&e)))?;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes);
            return Err(CallError::Upstream {
                status: status.as_u16(),
                body: crate::model::scrub(&text, 2000),
            });
        }
        let doc: Value = serde_json::from_slice(&bytes).map_err(|_| CallError::NotJson)?;
        Ok((status.as_u16(), doc))
    }
}

/// A unified `model` block's Bedrock connector reaches where the AWS SDK would for the agent
/// (`AWS_ENDPOINT_URL_BEDROCK_RUNTIME`, else `AWS_ENDPOINT_URL`), so `_predict` and `_execute`
/// agree; connectors users write keep the URL they wrote.
fn bedrock_endpoint_override(doc: &Value, url: String) -> String {
    let from_block = doc
        .get("model_provider")
        .and_then(Value::as_str)
        .is_some_and(|p| p.starts_with("bedrock"));
    if !from_block {
        return url;
    }
    let Some(endpoint) = ["AWS_ENDPOINT_URL_BEDROCK_RUNTIME", "AWS_ENDPOINT_URL"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.trim().is_empty()))
    else {
        return url;
    };
    match url::Url::parse(&url) {
        Ok(u) if u.host_str().is_some_and(|h| h.ends_with(".amazonaws.com")) => {
            let mut path = u.path().to_string();
            if let Some(q) = u.query() {
                path = format!("{path}?{q}");
            }
            format!("{}{path}", endpoint.trim_end_matches('/'))
        }
        _ => url,
    }
}

/// The action's `response_filter`, else the connector parameters'.
fn response_filter<'a>(action: &'a Value, params: &'a Map<String, Value>) -> Option<&'a str> {
    action
        .get("response_filter")
        .or_else(|| params.get("response_filter"))
        .and_then(Value::as_str)
}

fn read_timeout(doc: &Value) -> Duration {
    let secs = doc
        .pointer("/client_config/read_timeout")
        .and_then(Value::as_u64)
        .unwrap_or(60);
    Duration::from_secs(secs.clamp(1, 600))
}

/// Adds SigV4 headers (with `x-amz-content-sha256`) for the connector's region and service.
fn sign_v4(
    method: &str,
    url: &url::Url,
    mut headers: Vec<(String, String)>,
    body: &[u8],
    params: &Map<String, Value>,
    credential: &Map<String, Value>,
) -> Result<Vec<(String, String)>, CallError> {
    let s = |m: &Map<String, Value>, k: &str| m.get(k).and_then(Value::as_str).map(str::to_string);
    let (Some(ak), Some(sk)) = (s(credential, "access_key"), s(credential, "secret_key")) else {
        return Err(CallError::Template(
            "aws_sigv4 needs credential.access_key and credential.secret_key".into(),
        ));
    };
    let region = s(params, "region").unwrap_or_else(|| "us-east-1".into());
    let service = s(params, "service_name").unwrap_or_else(|| "bedrock".into());
    let credentials = aws_credential_types::Credentials::new(
        ak,
        sk,
        s(credential, "session_token"),
        None,
        "agui-gateway",
    );
    let signed = sigv4::headers(credentials, &region, &service, method, url, &headers, body)
        .map_err(CallError::Template)?;
    headers.extend(signed);
    Ok(headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_the_field() {
        let ok = json!({
            "name": "c", "protocol": "aws_sigv4",
            "parameters": {"region": "us-east-1", "service_name": "bedrock"},
            "credential": {"access_key": "AK", "secret_key": "SK"},
            "actions": [{"action_type": "predict", "method": "POST", "url": "https://x/y", "request_body": "{}"}]
        });
        let (public, cred) = validate(&ok, "").unwrap();
        assert!(public.get("credential").is_none());
        assert_eq!(cred["access_key"], "AK");
        let mut bad = ok.clone();
        bad["credential"] = json!({"access_key": "AK"});
        assert_eq!(
            validate(&bad, "connector.").unwrap_err().field,
            "connector.credential.secret_key"
        );
        let mut bad = ok.clone();
        bad["protocol"] = json!("grpc");
        assert_eq!(validate(&bad, "").unwrap_err().field, "protocol");
        let mut bad = ok.clone();
        bad["actions"][0]["url"] = json!("ftp://x");
        assert_eq!(validate(&bad, "").unwrap_err().field, "actions[0].url");
        let mut bad = ok;
        bad["actions"][0]["response_filter"] = json!("choices");
        assert_eq!(
            validate(&bad, "").unwrap_err().field,
            "actions[0].response_filter"
        );
    }
}
