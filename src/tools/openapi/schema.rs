//! Schemas out of an OpenAPI document: local `$ref`s expanded within limits, and OpenAPI 3.0
//! dialect turned into the JSON Schema that models and the registry's validator read.

use serde_json::{Map, Value, json};

/// Longest chain of nested `$ref` expansions in one schema branch. Deeper (or cyclic)
/// references become an open schema, so a recursive type cannot grow without bound.
const MAX_REF_DEPTH: usize = 16;
/// Most `$ref` expansions in one schema: a DAG of shared schemas can grow exponentially
/// without any cycle.
const MAX_REF_EXPANSIONS: usize = 2_000;
/// Keywords whose values are data, not schemas: a `$ref` key inside them is not a reference.
const DATA_KEYWORDS: &[&str] = &["enum", "const", "default", "example", "examples"];
/// Keywords whose values map user-chosen names to schemas: the names are not keywords.
const NAMED_SCHEMAS: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];
/// Keywords only documentation generators read; dropped to keep schemas small for the model.
const NOISE_KEYWORDS: &[&str] = &["xml", "externalDocs", "discriminator"];

/// Expands local references of one document.
pub(crate) struct Resolver<'a> {
    doc: &'a Value,
    /// Expansions so far, against [`MAX_REF_EXPANSIONS`].
    expansions: usize,
}

impl<'a> Resolver<'a> {
    /// A resolver over `doc`.
    pub(crate) fn new(doc: &'a Value) -> Self {
        Self { doc, expansions: 0 }
    }

    /// The value a local reference (`#/components/...`) points at. Other documents are never
    /// fetched: a tool list must not depend on (or leak requests to) third-party hosts.
    pub(crate) fn lookup(&self, reference: &str) -> Result<&'a Value, String> {
        let Some(fragment) = reference.strip_prefix('#') else {
            return Err(format!("external reference {reference:?} is not fetched"));
        };
        self.doc
            .pointer(&percent_decode(fragment))
            .ok_or_else(|| format!("reference {reference:?} points at nothing"))
    }

    /// Follows the `$ref` chain of a parameter, request body or path item to the object
    /// itself.
    pub(crate) fn follow(&self, mut v: &'a Value) -> Result<&'a Value, String> {
        for _ in 0..MAX_REF_DEPTH {
            match v.get("$ref").and_then(Value::as_str) {
                Some(r) => v = self.lookup(r)?,
                None => return Ok(v),
            }
        }
        Err("reference chain is too long or cyclic".into())
    }

    /// `schema` with every local reference expanded (within the limits) and OpenAPI 3.0
    /// dialect turned into JSON Schema, so the model sees one self-contained schema and the
    /// registry's validator agrees with the API.
    pub(crate) fn schema(&mut self, schema: &Value) -> Value {
        self.expansions = 0;
        let mut stack = Vec::new();
        self.expand(schema, &mut stack)
    }

    fn expand(&mut self, v: &Value, stack: &mut Vec<String>) -> Value {
        let m = match v {
            Value::Object(m) => m,
            Value::Array(a) => {
                return Value::Array(a.iter().map(|x| self.expand(x, stack)).collect());
            }
            other => return other.clone(),
        };
        if let Some(r) = m.get("$ref").and_then(Value::as_str) {
            let mut out = self.expand_ref(r, stack);
            // OpenAPI 3.1 lets siblings (description, nullable...) refine a reference.
            if let Value::Object(o) = &mut out {
                for (k, x) in m.iter().filter(|(k, _)| k.as_str() != "$ref") {
                    let x = self.keyword(k, x, stack);
                    if let Some(x) = x {
                        o.insert(k.clone(), x);
                    }
                }
                normalise(o);
            }
            return out;
        }
        let mut out = Map::new();
        for (k, x) in m {
            if let Some(x) = self.keyword(k, x, stack) {
                out.insert(k.clone(), x);
            }
        }
        normalise(&mut out);
        Value::Object(out)
    }

    /// One keyword's value, expanded as its kind requires; `None` drops it.
    fn keyword(&mut self, k: &str, x: &Value, stack: &mut Vec<String>) -> Option<Value> {
        if NOISE_KEYWORDS.contains(&k) || k.starts_with("x-") {
            return None;
        }
        if DATA_KEYWORDS.contains(&k) {
            return Some(x.clone());
        }
        if NAMED_SCHEMAS.contains(&k)
            && let Value::Object(named) = x
        {
            let named = named
                .iter()
                .map(|(name, s)| (name.clone(), self.expand(s, stack)))
                .collect();
            return Some(Value::Object(named));
        }
        Some(self.expand(x, stack))
    }

    fn expand_ref(&mut self, r: &str, stack: &mut Vec<String>) -> Value {
        let short = r.rsplit('/').next().unwrap_or(r);
        if stack.iter().any(|s| s == r) {
            return json!({"description": format!("A {short} (recursive; same shape as its parent)")});
        }
        if stack.len() >= MAX_REF_DEPTH || self.expansions >= MAX_REF_EXPANSIONS {
            return json!({"description": format!("A {short} (nested too deeply to describe)")});
        }
        let target = match self.lookup(r) {
            Ok(t) => t,
            Err(e) => {
                tracing::debug!(reference = r, problem = %e, "OpenAPI reference left open");
                return json!({});
            }
        };
        self.expansions += 1;
        stack.push(r.to_string());
        let out = self.expand(target, stack);
        stack.pop();
        out
    }
}

/// OpenAPI 3.0 keywords that mean something else (or nothing) in JSON Schema 2020-12, made
/// equivalent; and read-only properties dropped, since requests must not send them.
fn normalise(s: &mut Map<String, Value>) {
    if let Some(nullable) = s.remove("nullable")
        && nullable == Value::Bool(true)
    {
        match s.get_mut("type") {
            Some(Value::String(t)) => {
                let t = std::mem::take(t);
                s.insert("type".into(), json!([t, "null"]));
            }
            Some(Value::Array(ts)) if !ts.iter().any(|t| t == "null") => ts.push(json!("null")),
            _ => {}
        }
        if let Some(Value::Array(e)) = s.get_mut("enum")
            && !e.contains(&Value::Null)
        {
            e.push(Value::Null);
        }
    }
    for (flag, bound) in [
        ("exclusiveMinimum", "minimum"),
        ("exclusiveMaximum", "maximum"),
    ] {
        if let Some(Value::Bool(exclusive)) = s.get(flag) {
            let exclusive = *exclusive;
            s.remove(flag);
            if exclusive && let Some(b) = s.remove(bound) {
                s.insert(flag.into(), b);
            }
        }
    }
    let read_only: Vec<String> = match s.get("properties") {
        Some(Value::Object(props)) => props
            .iter()
            .filter(|(_, p)| p.get("readOnly") == Some(&Value::Bool(true)))
            .map(|(k, _)| k.clone())
            .collect(),
        _ => Vec::new(),
    };
    if !read_only.is_empty() {
        if let Some(Value::Object(props)) = s.get_mut("properties") {
            props.retain(|k, _| !read_only.contains(k));
        }
        if let Some(Value::Array(req)) = s.get_mut("required") {
            req.retain(|k| !k.as_str().is_some_and(|k| read_only.iter().any(|r| r == k)));
        }
    }
}

/// `%XX` escapes of a URI fragment decoded (JSON pointers in `$ref`s may use them).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::openapi::plan::tests::doc;

    #[test]
    fn references_expand_and_cycles_stop() {
        let d = doc();
        let mut r = Resolver::new(&d);
        let pet = r.schema(&json!({"$ref": "#/components/schemas/Pet"}));
        let props = &pet["properties"];
        assert!(props.get("id").is_none(), "read-only dropped: {pet}");
        assert_eq!(pet["required"], json!(["name"]));
        assert_eq!(props["tag"]["type"], json!(["string", "null"]));
        assert_eq!(props["default"]["enum"], json!(["ball", "bone"]));
        assert!(props["name"].get("x-internal").is_none());
        assert!(pet.get("xml").is_none());
        assert_eq!(pet["example"], json!({"$ref": "not a reference"}));
        // The recursive child is described, not expanded.
        let child = &props["children"]["items"];
        assert!(child.get("properties").is_none());
        assert!(child["description"].as_str().unwrap().contains("recursive"));
        assert!(!pet.to_string().contains("#/components"), "{pet}");
    }

    #[test]
    fn remote_and_dangling_references_stay_open() {
        let d = json!({"components": {"schemas": {"a~b/c": {"type": "string"}}}});
        let mut r = Resolver::new(&d);
        assert_eq!(
            r.schema(&json!({"$ref": "https://evil.example/schema.json"})),
            json!({})
        );
        assert_eq!(r.schema(&json!({"$ref": "#/nowhere"})), json!({}));
        assert_eq!(percent_decode("a%7e%2Fb%"), "a~/b%");
        assert_eq!(
            r.schema(&json!({"$ref": "#/components/schemas/a~0b~1c"})),
            json!({"type": "string"})
        );
        assert_eq!(
            r.schema(&json!({"$ref": "#/components/schemas/a%7E0b~1c", "description": "d"})),
            json!({"type": "string", "description": "d"})
        );
        assert!(
            r.lookup("other.yaml#/x")
                .unwrap_err()
                .contains("not fetched")
        );
    }

    #[test]
    fn exponential_and_deep_references_are_bounded() {
        // Each level refers to the next one twice: 2^30 nodes if expanded naively.
        let mut schemas = Map::new();
        for i in 0..30 {
            let next = format!("#/components/schemas/S{}", i + 1);
            schemas.insert(
                format!("S{i}"),
                json!({"type": "object", "properties": {"a": {"$ref": next}, "b": {"$ref": next}}}),
            );
        }
        schemas.insert("S30".into(), json!({"type": "string"}));
        let d = json!({"components": {"schemas": schemas}});
        let mut r = Resolver::new(&d);
        let s = r.schema(&json!({"$ref": "#/components/schemas/S0"}));
        assert!(s.to_string().contains("nested too deeply"));
        assert!(s.to_string().len() < 2_000_000);
    }

    #[test]
    fn openapi_30_keywords_become_json_schema() {
        let d = json!({});
        let mut r = Resolver::new(&d);
        let s = r.schema(&json!({
            "type": "integer", "minimum": 0, "exclusiveMinimum": true,
            "maximum": 9, "exclusiveMaximum": false,
            "nullable": true, "enum": [1, 2]
        }));
        assert_eq!(
            s,
            json!({"type": ["integer", "null"], "exclusiveMinimum": 0, "maximum": 9, "enum": [1, 2, null]})
        );
        assert!(jsonschema::validator_for(&s).is_ok());
    }
}
