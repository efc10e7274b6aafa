//! Built-in tools that need nothing outside the gateway.

use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::{StateUpdate, Tool, ToolContext, ToolOutput};
use crate::conversation::ToolSpec;

/// Evaluates arithmetic: `+ - * / % ^`, parentheses, unary minus, decimals.
pub struct Calculator {
    spec: ToolSpec,
}

impl Calculator {
    /// The calculator, under `name`.
    pub fn new(name: &str) -> Self {
        Self {
            spec: ToolSpec {
                name: name.to_string(),
                description: "Evaluate an arithmetic expression, e.g. \"(2+3)*4.5\". Supports + - * / % ^ and parentheses.".into(),
                input_schema: json!({
                    "type": "object",
                    "properties": {"expression": {"type": "string", "description": "The expression to evaluate"}},
                    "required": ["expression"]
                }), strict: None, },
        }
    }
}

impl Tool for Calculator {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call(&self, args: Value, _ctx: ToolContext) -> BoxFuture<'_, ToolOutput> {
        Box::pin(async move {
            let Some(expr) = args.get("expression").and_then(Value::as_str) else {
                return ToolOutput::error("Missing string argument \"expression\".");
            };
            match evaluate(expr) {
                Ok(v) => ToolOutput::ok(format_number(v)),
                Err(e) => ToolOutput::error(format!("Cannot evaluate {expr:?}: {e}")),
            }
        })
    }
}

/// A stand-in for a consequential action (posting a message somewhere): it only echoes what it
/// would publish. The demo agent gates it behind approval to show human-in-the-loop.
pub struct Publish {
    spec: ToolSpec,
}

impl Publish {
    /// The tool, under `name`.
    pub fn new(name: &str) -> Self {
        Self {
            spec: ToolSpec {
                name: name.to_string(),
                description: "Publish a short message to the team channel.".into(),
                input_schema: json!({
                    "type": "object",
                    "properties": {"text": {"type": "string", "minLength": 1, "maxLength": 500}},
                    "required": ["text"]
                }),
                strict: None,
            },
        }
    }
}

impl Tool for Publish {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call(&self, args: Value, _ctx: ToolContext) -> BoxFuture<'_, ToolOutput> {
        Box::pin(async move {
            let text = args.get("text").and_then(Value::as_str).unwrap_or_default();
            ToolOutput::ok(format!("Published: {text}"))
        })
    }
}

fn format_number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// Recursive-descent evaluation; depth is bounded so hostile input cannot overflow the stack.
pub fn evaluate(expr: &str) -> Result<f64, String> {
    let tokens: Vec<char> = expr.chars().filter(|c| !c.is_whitespace()).collect();
    if tokens.len() > 1000 {
        return Err("expression too long".into());
    }
    let mut p = Parser {
        t: &tokens,
        i: 0,
        depth: 0,
    };
    let v = p.sum()?;
    if p.i != tokens.len() {
        return Err(format!("unexpected {:?}", tokens[p.i]));
    }
    if !v.is_finite() {
        return Err("result is not a finite number".into());
    }
    Ok(v)
}

struct Parser<'a> {
    t: &'a [char],
    i: usize,
    depth: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.t.get(self.i).copied()
    }

    fn sum(&mut self) -> Result<f64, String> {
        let mut v = self.product()?;
        while let Some(op @ ('+' | '-')) = self.peek() {
            self.i += 1;
            let r = self.product()?;
            v = if op == '+' { v + r } else { v - r };
        }
        Ok(v)
    }

    fn product(&mut self) -> Result<f64, String> {
        let mut v = self.power()?;
        while let Some(op @ ('*' | '/' | '%' | 'x' | '×')) = self.peek() {
            self.i += 1;
            let r = self.power()?;
            v = match op {
                '/' if r == 0.0 => return Err("division by zero".into()),
                '/' => v / r,
                '%' => v % r,
                _ => v * r,
            };
        }
        Ok(v)
    }

    fn power(&mut self) -> Result<f64, String> {
        let base = self.unary()?;
        if self.peek() == Some('^') {
            self.i += 1;
            let exp = self.power()?;
            return Ok(base.powf(exp));
        }
        Ok(base)
    }

    fn unary(&mut self) -> Result<f64, String> {
        self.depth += 1;
        if self.depth > 200 {
            return Err("expression nested too deeply".into());
        }
        let v = match self.peek() {
            Some('-') => {
                self.i += 1;
                -self.unary()?
            }
            Some('+') => {
                self.i += 1;
                self.unary()?
            }
            Some('(') => {
                self.i += 1;
                let v = self.sum()?;
                if self.peek() != Some(')') {
                    return Err("missing ')'".into());
                }
                self.i += 1;
                v
            }
            Some(c) if c.is_ascii_digit() || c == '.' => {
                let start = self.i;
                while self.peek().is_some_and(|c| c.is_ascii_digit() || c == '.') {
                    self.i += 1;
                }
                let s: String = self.t[start..self.i].iter().collect();
                s.parse::<f64>().map_err(|_| format!("bad number {s:?}"))?
            }
            Some(c) => return Err(format!("unexpected {c:?}")),
            None => return Err("unexpected end of expression".into()),
        };
        self.depth -= 1;
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic() {
        assert_eq!(evaluate("6*7").unwrap(), 42.0);
        assert_eq!(evaluate("(2 + 3) * 4.5").unwrap(), 22.5);
        assert_eq!(evaluate("2^3^2").unwrap(), 512.0);
        assert_eq!(evaluate("-3 + -(-2)").unwrap(), -1.0);
        assert!(evaluate("1/0").is_err());
        assert!(evaluate("2+").is_err());
        assert!(evaluate("abc").is_err());
        assert!(evaluate(&"(".repeat(900)).is_err());
        assert_eq!(format_number(42.0), "42");
        assert_eq!(format_number(0.5), "0.5");
    }
}

/// Changes the run's shared state (the application state AG-UI clients send as `state`):
/// with a `state_key`, its argument of that name replaces that key; otherwise `set` merges
/// top-level keys (sent as `STATE_SNAPSHOT`) and `ops` applies RFC 6902 operations (sent as
/// `STATE_DELTA`). The result tells the model the state it produced.
pub struct StateTool {
    spec: ToolSpec,
    key: Option<String>,
}

/// Escapes a key for a JSON Pointer (RFC 6901).
fn pointer_segment(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

impl StateTool {
    /// A state tool named `name`; `key` confines it to one top-level key whose value follows
    /// `schema`.
    pub fn new(
        name: &str,
        description: Option<String>,
        key: Option<String>,
        schema: Option<Value>,
    ) -> Self {
        let (default_description, input_schema) = match &key {
            Some(k) => (
                format!("Set the shared application state's {k:?}."),
                json!({
                    "type": "object",
                    "properties": { k.clone(): schema.unwrap_or_else(|| json!({})) },
                    "required": [k],
                }),
            ),
            None => (
                "Change the shared application state. Give `set` (top-level keys to replace) or `ops` (JSON Patch operations, e.g. {\"op\":\"replace\",\"path\":\"/steps/0/status\",\"value\":\"done\"}).".to_string(),
                json!({
                    "type": "object",
                    "properties": {
                        "set": { "type": "object", "description": "Top-level keys and their new values" },
                        "ops": {
                            "type": "array",
                            "description": "RFC 6902 JSON Patch operations",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "op": { "type": "string", "enum": ["add", "remove", "replace", "move", "copy", "test"] },
                                    "path": { "type": "string" },
                                    "from": { "type": "string" },
                                    "value": {}
                                },
                                "required": ["op", "path"]
                            }
                        }
                    }
                }),
            ),
        };
        Self {
            spec: ToolSpec {
                name: name.to_string(),
                description: description.unwrap_or(default_description),
                input_schema,
                strict: None,
            },
            key,
        }
    }

    fn change(&self, args: &Value, state: &Value) -> Result<(Value, StateUpdate), String> {
        let current = match state {
            Value::Object(_) => state.clone(),
            _ => json!({}),
        };
        if let Some(k) = &self.key {
            let value = args
                .get(k)
                .cloned()
                .ok_or_else(|| format!("Missing argument {k:?}."))?;
            let ops = vec![
                json!({"op": "add", "path": format!("/{}", pointer_segment(k)), "value": value}),
            ];
            let next = crate::runs::patch::apply_ops(&current, &ops)?;
            return Ok((next, StateUpdate::Delta(ops)));
        }
        match (args.get("set"), args.get("ops")) {
            (Some(Value::Object(set)), None) => {
                let mut next = current;
                if let Value::Object(o) = &mut next {
                    o.extend(set.clone());
                }
                Ok((next.clone(), StateUpdate::Snapshot(next)))
            }
            (None, Some(Value::Array(ops))) => {
                let next = crate::runs::patch::apply_ops(&current, ops)?;
                Ok((next, StateUpdate::Delta(ops.clone())))
            }
            _ => Err("Give either `set` (an object of top-level keys) or `ops` (a JSON Patch array), not both.".into()),
        }
    }
}

impl Tool for StateTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call(&self, args: Value, ctx: ToolContext) -> BoxFuture<'_, ToolOutput> {
        Box::pin(async move {
            match self.change(&args, &ctx.state) {
                Ok((next, update)) => {
                    let mut out =
                        ToolOutput::ok(format!("State updated. The state is now: {next}"));
                    out.state = Some(update);
                    out
                }
                Err(e) => ToolOutput::error(e),
            }
        })
    }
}

#[cfg(test)]
mod state_tests {
    use std::sync::Arc;

    use super::*;

    fn ctx(state: Value) -> ToolContext {
        ToolContext {
            thread_id: "t".into(),
            run_id: "r".into(),
            tool_call_id: "c".into(),
            cancel: tokio_util::sync::CancellationToken::new(),
            state: Arc::new(state),
            side: None,
        }
    }

    #[tokio::test]
    async fn state_tools_set_patch_and_refuse_what_does_not_apply() {
        let generic = StateTool::new("update_state", None, None, None);
        let out = generic
            .call(
                json!({"set": {"steps": [{"status": "pending"}]}}),
                ctx(json!({"recipe": {"title": "soup"}})),
            )
            .await;
        assert_eq!(
            out.state,
            Some(StateUpdate::Snapshot(
                json!({"recipe": {"title": "soup"}, "steps": [{"status": "pending"}]})
            ))
        );
        let ops = json!([{"op": "replace", "path": "/steps/0/status", "value": "done"}]);
        let out = generic
            .call(
                json!({"ops": ops}),
                ctx(json!({"steps": [{"status": "pending"}]})),
            )
            .await;
        assert!(
            !out.is_error && out.text.contains("\"done\""),
            "{}",
            out.text
        );
        assert_eq!(
            out.state,
            Some(StateUpdate::Delta(ops.as_array().unwrap().clone()))
        );
        let out = generic
            .call(
                json!({"ops": [{"op": "replace", "path": "/nope/0", "value": 1}]}),
                ctx(json!({})),
            )
            .await;
        assert!(out.is_error && out.state.is_none());
        assert!(generic.call(json!({}), ctx(json!({}))).await.is_error);

        let keyed = StateTool::new("write_document", None, Some("doc/x".into()), None);
        let out = keyed
            .call(json!({"doc/x": "Hello"}), ctx(Value::Null))
            .await;
        assert_eq!(
            out.state,
            Some(StateUpdate::Delta(vec![
                json!({"op": "add", "path": "/doc~1x", "value": "Hello"})
            ]))
        );
    }
}
