//! The JSONPath subset connectors use in `response_filter`: `$`, `.name`, `['name']`, `[n]`
//! (negative from the end) and `[*]` / `.*` (every element, collected into an array).

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Key(String),
    Index(i64),
    All,
}

/// A malformed path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid JSONPath {path:?}: {problem}")]
pub struct BadPath {
    path: String,
    problem: String,
}

fn parse(path: &str) -> Result<Vec<Step>, BadPath> {
    let bad = |problem: &str| BadPath {
        path: path.to_string(),
        problem: problem.to_string(),
    };
    let rest = path
        .trim()
        .strip_prefix('$')
        .ok_or_else(|| bad("must start with $"))?;
    let chars: Vec<char> = rest.chars().collect();
    let mut steps = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '.' => {
                let start = i + 1;
                let mut end = start;
                while end < chars.len() && chars[end] != '.' && chars[end] != '[' {
                    end += 1;
                }
                let name: String = chars[start..end].iter().collect();
                if name.is_empty() {
                    return Err(bad("empty name after '.'"));
                }
                steps.push(if name == "*" {
                    Step::All
                } else {
                    Step::Key(name)
                });
                i = end;
            }
            '[' => {
                let close = chars[i..]
                    .iter()
                    .position(|c| *c == ']')
                    .ok_or_else(|| bad("unclosed '['"))?
                    + i;
                let inner: String = chars[i + 1..close].iter().collect();
                let inner = inner.trim();
                let step = if inner == "*" {
                    Step::All
                } else if let Some(q) = inner
                    .strip_prefix('\'')
                    .and_then(|s| s.strip_suffix('\''))
                    .or_else(|| inner.strip_prefix('"').and_then(|s| s.strip_suffix('"')))
                {
                    Step::Key(q.to_string())
                } else {
                    Step::Index(
                        inner
                            .parse()
                            .map_err(|_| bad("index must be a number, '*' or a quoted name"))?,
                    )
                };
                steps.push(step);
                i = close + 1;
            }
            _ => return Err(bad("expected '.' or '['")),
        }
    }
    Ok(steps)
}

/// What `path` selects in `doc`; `Ok(None)` when nothing matches.
pub fn select(doc: &Value, path: &str) -> Result<Option<Value>, BadPath> {
    let steps = parse(path)?;
    let mut current = vec![doc.clone()];
    let mut many = false;
    for step in steps {
        let mut next = Vec::new();
        for v in current {
            match (&step, v) {
                (Step::Key(k), Value::Object(mut o)) => next.extend(o.remove(k)),
                (Step::Index(n), Value::Array(mut a)) => {
                    let len = a.len() as i64;
                    let at = if *n < 0 { len + n } else { *n };
                    if (0..len).contains(&at) {
                        next.push(a.swap_remove(at as usize));
                    }
                }
                (Step::All, Value::Array(a)) => {
                    many = true;
                    next.extend(a);
                }
                (Step::All, Value::Object(o)) => {
                    many = true;
                    next.extend(o.into_iter().map(|(_, v)| v));
                }
                _ => {}
            }
        }
        current = next;
    }
    Ok(match (many, current.len()) {
        (false, 0) => None,
        (false, _) => current.into_iter().next(),
        (true, _) => Some(Value::Array(current)),
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
    }
}
