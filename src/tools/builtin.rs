//! Built-in tools that need nothing outside the gateway.

use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolOutput};
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
                }),
            },
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
