//! ml-commons placeholders: `${parameters.x}`, `${parameters.x:-default}` and
//! `${credential.x}`, filled in URLs, headers and request bodies. Values going into a JSON body
//! are escaped the way the template expects: a string is inserted as the inside of a JSON string
//! (the template supplies the quotes), anything else as JSON text.

use serde_json::{Map, Value};

/// How a value is written into the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Escape {
    /// As it is (URLs, headers, prompts).
    Raw,
    /// Inside a JSON document: strings JSON-escaped without their quotes.
    Json,
}

/// A placeholder with no value and no default.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "no value for ${{{0}}}: pass it in `parameters` or give the placeholder a default (${{{0}:-...}})"
)]
pub struct Missing(pub String);

/// The value of `name` in `params` as text: strings as they are, other JSON as JSON text.
pub fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn escaped(v: &Value, escape: Escape) -> String {
    match (escape, v) {
        (Escape::Raw, v) => text_of(v),
        (Escape::Json, Value::String(s)) => {
            let quoted = Value::String(s.clone()).to_string();
            quoted[1..quoted.len() - 1].to_string()
        }
        (Escape::Json, other) => other.to_string(),
    }
}

/// Fills every placeholder of `template`. Unknown namespaces (`${foo}`) are left as they are;
/// a parameter or credential with neither value nor default is an error.
pub fn render(
    template: &str,
    params: &Map<String, Value>,
    credential: &Map<String, Value>,
    escape: Escape,
) -> Result<String, Missing> {
    render_except(template, params, credential, escape, &[])
}

/// [`render`], with the parameters named in `raw` inserted as they are (ml-commons'
/// `no_escape_params`: JSON fragments such as `_chat_history` or `tool_configs`).
pub fn render_except(
    template: &str,
    params: &Map<String, Value>,
    credential: &Map<String, Value>,
    escape: Escape,
    raw: &[&str],
) -> Result<String, Missing> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let inner = &after[..end];
        let (path, default) = match inner.split_once(":-") {
            Some((p, d)) => (p, Some(d)),
            None => (inner, None),
        };
        let found = if let Some(name) = path.strip_prefix("parameters.") {
            Some(params.get(name))
        } else {
            path.strip_prefix("credential.")
                .map(|name| credential.get(name))
        };
        match found {
            None => out.push_str(&rest[start..start + 2 + end + 1]),
            Some(Some(v)) => {
                let as_is = path
                    .strip_prefix("parameters.")
                    .is_some_and(|n| raw.contains(&n));
                out.push_str(&escaped(v, if as_is { Escape::Raw } else { escape }));
            }
            Some(None) => match default {
                Some(d) => out.push_str(d),
                None => return Err(Missing(path.to_string())),
            },
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Renders every string inside a JSON value (tool parameters that are objects).
pub fn render_value(
    v: &Value,
    params: &Map<String, Value>,
    escape: Escape,
) -> Result<Value, Missing> {
    let empty = Map::new();
    Ok(match v {
        Value::String(s) => Value::String(render(s, params, &empty, escape)?),
        Value::Array(a) => Value::Array(
            a.iter()
                .map(|x| render_value(x, params, escape))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| Ok((k.clone(), render_value(x, params, escape)?)))
                .collect::<Result<_, Missing>>()?,
        ),
        other => other.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn placeholders_fill_with_values_defaults_and_credentials() {
        let p = map(json!({"region": "us-west-2", "prompt": "say \"hi\"\n", "max": 300}));
        let c = map(json!({"key": "sk-1"}));
        let body = r#"{"prompt":"${parameters.prompt}","max":${parameters.max},"t":${parameters.t:-0.5},"h":"${parameters.h:-}"}"#;
        let out = render(body, &p, &c, Escape::Json).unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            v,
            json!({"prompt": "say \"hi\"\n", "max": 300, "t": 0.5, "h": ""})
        );
        assert_eq!(
            render(
                "https://bedrock-runtime.${parameters.region}.amazonaws.com",
                &p,
                &c,
                Escape::Raw
            )
            .unwrap(),
            "https://bedrock-runtime.us-west-2.amazonaws.com"
        );
        assert_eq!(
            render("Bearer ${credential.key}", &p, &c, Escape::Raw).unwrap(),
            "Bearer sk-1"
        );
        assert_eq!(
            render("${parameters.nope}", &p, &c, Escape::Raw),
            Err(Missing("parameters.nope".into()))
        );
        assert_eq!(
            render("${other.x} ${", &p, &c, Escape::Raw).unwrap(),
            "${other.x} ${"
        );
    }
}
