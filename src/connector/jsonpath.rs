//! `response_filter` JSONPath (RFC 9535, through `serde_json_path`), answered as ml-commons'
//! Jayway JsonPath answers: a definite path (names and indexes only) gives its one value, an
//! indefinite one (wildcards, slices, filters, descendants, unions) the list of what it matched.

use serde_json::Value;
use serde_json_path::JsonPath;

/// A malformed path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid JSONPath {path:?}: {problem}")]
pub struct BadPath {
    path: String,
    problem: String,
}

/// Whether the path can match more than one value: any selector but a name or an index, seen
/// outside quoted names.
fn indefinite(path: &str) -> bool {
    let mut quote: Option<char> = None;
    let mut prev = '\0';
    let mut in_brackets = false;
    for c in path.chars() {
        match quote {
            Some(q) => {
                if c == q && prev != '\\' {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' => quote = Some(c),
                '[' => in_brackets = true,
                ']' => in_brackets = false,
                '*' | '?' => return true,
                '.' if prev == '.' => return true,
                ':' | ',' if in_brackets => return true,
                _ => {}
            },
        }
        prev = c;
    }
    false
}

/// What `path` selects in `doc`; `Ok(None)` when nothing matches.
pub fn select(doc: &Value, path: &str) -> Result<Option<Value>, BadPath> {
    let parsed = JsonPath::parse(path.trim()).map_err(|e| BadPath {
        path: path.to_string(),
        problem: e.to_string(),
    })?;
    let nodes = parsed.query(doc);
    Ok(if indefinite(path) {
        Some(Value::Array(nodes.all().into_iter().cloned().collect()))
    } else {
        nodes.first().cloned()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selects_the_shapes_connectors_use() {
        let doc = json!({
            "choices": [{"message": {"content": "hi"}}, {"message": {"content": "yo"}}],
            "output": {"message": {"content": [{"text": "bedrock"}]}},
            "completion": "claude v1",
            "a b": 1
        });
        assert_eq!(
            select(&doc, "$.choices[0].message.content").unwrap(),
            Some(json!("hi"))
        );
        assert_eq!(
            select(&doc, "$.choices[-1].message.content").unwrap(),
            Some(json!("yo"))
        );
        assert_eq!(
            select(&doc, "$.output.message.content[0].text").unwrap(),
            Some(json!("bedrock"))
        );
        assert_eq!(
            select(&doc, "$.completion").unwrap(),
            Some(json!("claude v1"))
        );
        assert_eq!(select(&doc, "$['a b']").unwrap(), Some(json!(1)));
        assert_eq!(
            select(&doc, "$.choices[*].message.content").unwrap(),
            Some(json!(["hi", "yo"]))
        );
        assert_eq!(select(&doc, "$.nope").unwrap(), None);
        assert_eq!(select(&doc, "$").unwrap(), Some(doc.clone()));
        assert!(select(&doc, "choices").is_err());
        assert!(select(&doc, "$.choices[x]").is_err());
        assert_eq!(
            select(&doc, "$..text").unwrap(),
            Some(json!(["bedrock"])),
            "a descendant search is a list"
        );
        assert_eq!(
            select(
                &doc,
                "$.choices[?@.message.content == 'yo'].message.content"
            )
            .unwrap(),
            Some(json!(["yo"]))
        );
    }
}
