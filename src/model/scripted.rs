//! A deterministic provider driven by a fixture file: rules match on the conversation and reply
//! with reasoning, text and/or tool calls, streamed in small deltas. It powers the embedded demo
//! agent, offline development, the tests and `protocol-fixtures/`.
//!
//! Fixture (JSON):
//! ```json
//! { "chunk_chars": 8, "delay_ms": 0,
//!   "rules": [
//!     { "when": { "user_contains": ["weather"] },
//!       "reply": { "tool_calls": [ { "name": "get_weather", "arguments": { "city": "{last_word}" } } ] } },
//!     { "when": { "after_tool": "get_weather" }, "reply": { "text": "It is {tool_result}." } } ],
//!   "default": { "text": "I can only talk about the weather." } }
//! ```
//! `when` keys (all must hold): `user_contains` (string or list, any, case-insensitive; the last
//! turn must be the user's own words), `after_tool` (the last turn holds results of this tool,
//! `"*"` for any), `after_tool_times` (with `after_tool`: its results since the user's last words
//! number exactly this; steps a multi-call script), `tool_available` (the request offers this
//! tool), `user_has_image` (the user's last words came with an image). Placeholders in reply strings:
//! `{user_text}`, `{last_word}`, `{after:WORD}` (the rest of the text after WORD),
//! `{line_after:WORD}` (the rest of its line), `{tool_result}`, `{tool_name}`.

use std::time::Duration;

use futures::StreamExt;
use serde::Deserialize;
use serde_json::Value;

use super::{ModelError, ModelEvent, ModelRequest, ModelStream, Provider, StopReason, Usage};
use crate::conversation::{ContentBlock, Message, Role, ToolResultBlock};

/// A parsed fixture.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fixture {
    /// Characters per streamed delta.
    #[serde(default = "default_chunk")]
    pub chunk_chars: usize,
    /// Pause between deltas, for a realistic demo.
    #[serde(default)]
    pub delay_ms: u64,
    /// Rules, first match wins.
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// The reply when no rule matches.
    #[serde(default)]
    pub default: Option<Reply>,
}

fn default_chunk() -> usize {
    8
}

/// One rule.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Conditions.
    #[serde(default)]
    pub when: When,
    /// The reply.
    pub reply: Reply,
}

/// Conditions of a rule; all given ones must hold.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct When {
    /// Any of these substrings in the user's last words.
    #[serde(default)]
    pub user_contains: Option<OneOrMany>,
    /// The last turn holds results of this tool (`*`: any tool).
    #[serde(default)]
    pub after_tool: Option<String>,
    /// With `after_tool`: how many of its results came since the user's last words.
    #[serde(default)]
    pub after_tool_times: Option<usize>,
    /// The request offers this tool.
    #[serde(default)]
    pub tool_available: Option<String>,
    /// Whether the user's last words came with an image.
    #[serde(default)]
    pub user_has_image: Option<bool>,
}

/// A string or a list of strings.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    /// One.
    One(String),
    /// Many.
    Many(Vec<String>),
}

impl OneOrMany {
    fn items(&self) -> Vec<&str> {
        match self {
            OneOrMany::One(s) => vec![s.as_str()],
            OneOrMany::Many(v) => v.iter().map(String::as_str).collect(),
        }
    }
}

/// What the scripted model answers.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reply {
    /// Reasoning streamed before the answer.
    #[serde(default)]
    pub reasoning: Option<String>,
    /// A provider signature closing the reasoning (as Anthropic and Bedrock Claude send).
    #[serde(default)]
    pub reasoning_signature: Option<String>,
    /// The answer text.
    #[serde(default)]
    pub text: Option<String>,
    /// Tool calls, in order.
    #[serde(default)]
    pub tool_calls: Vec<ScriptedCall>,
    /// Fail the model call with this upstream error instead.
    #[serde(default)]
    pub error: Option<String>,
}

/// A scripted tool call.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedCall {
    /// The tool to call.
    pub name: String,
    /// Its arguments; strings may hold placeholders.
    #[serde(default)]
    pub arguments: Value,
}

impl Fixture {
    /// Parses a fixture, reporting the path of a bad field.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut de = serde_json::Deserializer::from_str(text);
        let f: Fixture = serde_path_to_error::deserialize(&mut de)
            .map_err(|e| format!("{}: {}", e.path(), e.inner()))?;
        if f.chunk_chars == 0 {
            return Err("chunk_chars: must be at least 1".into());
        }
        Ok(f)
    }
}

/// The view of the conversation rules match against.
struct Turn<'a> {
    user_text: String,
    /// Whether the user's last words came with an image.
    user_image: bool,
    /// Results per tool name since the user's last words.
    result_counts: Vec<(String, usize)>,
    /// Tool names and result texts of the last turn, when it is a tool-result turn.
    results: Vec<(String, String)>,
    offered: Vec<&'a str>,
}

fn last_turn(req: &ModelRequest) -> Turn<'_> {
    let offered = req.tools.iter().map(|t| t.name.as_str()).collect();
    let words_at = req.messages.iter().rposition(|m| {
        m.role == Role::User
            && m.content
                .iter()
                .any(|b| !matches!(b, ContentBlock::ToolResult { .. }))
    });
    let words = words_at.map(|i| &req.messages[i]);
    let user_text = words.map(Message::text).unwrap_or_default();
    let user_image = words.is_some_and(|m| {
        m.content
            .iter()
            .any(|b| matches!(b, ContentBlock::Media(m) if m.kind == crate::conversation::MediaKind::Image))
    });
    let since = words_at.map_or(0, |i| i + 1);
    let mut call_names: Vec<(&str, &str)> = Vec::new();
    let mut result_counts: Vec<(String, usize)> = Vec::new();
    for m in &req.messages[since.min(req.messages.len())..] {
        for b in &m.content {
            match b {
                ContentBlock::ToolUse { id, name, .. } => call_names.push((id, name)),
                ContentBlock::ToolResult { tool_use_id, .. } => {
                    let name = call_names
                        .iter()
                        .find(|(id, _)| id == tool_use_id)
                        .map_or("", |(_, n)| n);
                    match result_counts.iter_mut().find(|(n, _)| n == name) {
                        Some((_, c)) => *c += 1,
                        None => result_counts.push((name.to_string(), 1)),
                    }
                }
                _ => {}
            }
        }
    }
    let mut results = Vec::new();
    if let Some(last) = req.messages.last().filter(|m| m.role == Role::User) {
        let names: Vec<(String, String)> = req
            .messages
            .iter()
            .flat_map(|m| m.content.iter())
            .filter_map(|b| match b {
                ContentBlock::ToolUse { id, name, .. } => Some((id.clone(), name.clone())),
                _ => None,
            })
            .collect();
        for b in &last.content {
            if let ContentBlock::ToolResult {
                tool_use_id,
                content,
                ..
            } = b
            {
                let name = names
                    .iter()
                    .find(|(id, _)| id == tool_use_id)
                    .map(|(_, n)| n.clone())
                    .unwrap_or_default();
                results.push((name, ToolResultBlock::joined_text(content)));
            }
        }
    }
    Turn {
        user_text,
        user_image,
        result_counts,
        results,
        offered,
    }
}

impl When {
    fn matches(&self, turn: &Turn<'_>) -> bool {
        if let Some(tool) = &self.tool_available
            && !turn.offered.contains(&tool.as_str())
        {
            return false;
        }
        if let Some(want) = self.user_has_image
            && want != turn.user_image
        {
            return false;
        }
        match &self.after_tool {
            Some(tool) => {
                if turn.results.is_empty()
                    || !(tool == "*" || turn.results.iter().any(|(n, _)| n == tool))
                {
                    return false;
                }
                if let Some(times) = self.after_tool_times {
                    let seen = turn
                        .result_counts
                        .iter()
                        .filter(|(n, _)| tool == "*" || n == tool)
                        .map(|(_, c)| c)
                        .sum::<usize>();
                    if seen != times {
                        return false;
                    }
                }
            }
            None => {
                if !turn.results.is_empty() {
                    return false;
                }
            }
        }
        if let Some(words) = &self.user_contains {
            let text = turn.user_text.to_lowercase();
            if !words
                .items()
                .iter()
                .any(|w| text.contains(&w.to_lowercase()))
            {
                return false;
            }
        }
        true
    }
}

/// The user's text after the first `word` (case-insensitive), trimmed; empty when absent.
fn after(text: &str, word: &str) -> String {
    let word = word.to_lowercase();
    // Lowercasing may change byte lengths (non-ASCII text): `get` never slices inside a
    // character.
    let rest = text
        .to_lowercase()
        .find(&word)
        .and_then(|i| text.get(i + word.len()..));
    rest.map(|r| trim_word(r.trim()).to_string())
        .unwrap_or_default()
}

fn trim_word(s: &str) -> &str {
    s.trim_matches(|c: char| !c.is_alphanumeric() && c != '*' && c != '/' && c != '(' && c != ')')
}

fn fill(template: &str, turn: &Turn<'_>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let Some(len) = rest[start..].find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let key = &rest[start + 1..start + len];
        let value = match key {
            "user_text" => Some(turn.user_text.clone()),
            "last_word" => turn
                .user_text
                .split_whitespace()
                .last()
                .map(|w| trim_word(w).to_string()),
            "tool_result" => Some(
                turn.results
                    .iter()
                    .map(|(_, r)| r.as_str())
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
            "tool_name" => Some(
                turn.results
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            k if k.starts_with("after:") => Some(after(&turn.user_text, &k["after:".len()..])),
            k if k.starts_with("line_after:") => {
                let rest = after(&turn.user_text, &k["line_after:".len()..]);
                Some(trim_word(rest.lines().next().unwrap_or_default()).to_string())
            }
            _ => None,
        };
        match value {
            Some(v) => out.push_str(&v),
            None => {
                // Not a placeholder (a JSON object in the reply, say): keep the brace and
                // look for placeholders inside.
                out.push('{');
                rest = &rest[start + 1..];
                continue;
            }
        }
        rest = &rest[start + len + 1..];
    }
    out.push_str(rest);
    out
}

fn fill_value(v: &Value, turn: &Turn<'_>) -> Value {
    match v {
        Value::String(s) => Value::String(fill(s, turn)),
        Value::Array(a) => Value::Array(a.iter().map(|x| fill_value(x, turn)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| (k.clone(), fill_value(x, turn)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn chunks(s: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    chars.chunks(n).map(|c| c.iter().collect()).collect()
}

/// Rough token estimate (4 characters a token) so usage reporting has real numbers to carry.
fn estimate_tokens(chars: usize) -> u64 {
    chars.div_ceil(4) as u64
}

/// The scripted provider.
pub struct ScriptedProvider {
    fixture: Fixture,
    model_id: String,
}

impl ScriptedProvider {
    /// A provider answering from `fixture`.
    pub fn new(fixture: Fixture, model_id: impl Into<String>) -> Self {
        Self {
            fixture,
            model_id: model_id.into(),
        }
    }

    /// The events of one reply, computed eagerly (the fixture is small).
    fn script(&self, req: &ModelRequest) -> Result<Vec<ModelEvent>, ModelError> {
        let turn = last_turn(req);
        let reply = self
            .fixture
            .rules
            .iter()
            .find(|r| r.when.matches(&turn))
            .map(|r| &r.reply)
            .or(self.fixture.default.as_ref())
            .cloned()
            .unwrap_or_else(|| Reply {
                text: Some("(the scripted model has no reply for this)".into()),
                ..Default::default()
            });
        if let Some(message) = reply.error {
            return Err(ModelError::Upstream {
                message,
                code: Some("scripted_error".into()),
            });
        }
        let n = self.fixture.chunk_chars;
        let mut out = Vec::new();
        let mut produced = 0;
        if let Some(r) = &reply.reasoning {
            let r = fill(r, &turn);
            produced += r.len();
            out.extend(chunks(&r, n).into_iter().map(ModelEvent::ReasoningDelta));
            if let Some(sig) = &reply.reasoning_signature {
                out.push(ModelEvent::ReasoningSignature(sig.clone()));
            }
            out.push(ModelEvent::ReasoningEnd);
        }
        if let Some(t) = &reply.text {
            let t = fill(t, &turn);
            produced += t.len();
            out.extend(chunks(&t, n).into_iter().map(ModelEvent::TextDelta));
        }
        for call in &reply.tool_calls {
            let id = format!("call_{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
            let args = match &call.arguments {
                Value::Null => "{}".to_string(),
                v => fill_value(v, &turn).to_string(),
            };
            produced += args.len();
            out.push(ModelEvent::ToolCallStart {
                id: id.clone(),
                name: call.name.clone(),
            });
            out.extend(
                chunks(&args, n)
                    .into_iter()
                    .map(|delta| ModelEvent::ToolCallDelta {
                        id: id.clone(),
                        delta,
                    }),
            );
            out.push(ModelEvent::ToolCallEnd { id });
        }
        let stop = if reply.tool_calls.is_empty() {
            StopReason::EndTurn
        } else {
            StopReason::ToolUse
        };
        out.push(ModelEvent::Stop(stop));
        let prompt_chars: usize = req.system.iter().map(String::len).sum::<usize>()
            + req
                .messages
                .iter()
                .map(|m| serde_json::to_string(m).map(|s| s.len()).unwrap_or(0))
                .sum::<usize>();
        out.push(ModelEvent::Usage(Usage {
            input_tokens: estimate_tokens(prompt_chars),
            output_tokens: estimate_tokens(produced),
            ..Default::default()
        }));
        Ok(out)
    }
}

impl Provider for ScriptedProvider {
    fn name(&self) -> &str {
        "scripted"
    }

    /// A script's chunks are its events, one for one (fixtures and tests rely on it).
    fn coalesce_deltas(&self) -> bool {
        false
    }

    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let script = self.script(&request);
        let delay = Duration::from_millis(self.fixture.delay_ms);
        async_stream::stream! {
            match script {
                Err(e) => yield Err(e),
                Ok(events) => {
                    for e in events {
                        if !delay.is_zero() && matches!(e, ModelEvent::TextDelta(_) | ModelEvent::ReasoningDelta(_) | ModelEvent::ToolCallDelta { .. }) {
                            tokio::time::sleep(delay).await;
                        }
                        yield Ok(e);
                    }
                }
            }
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::ToolSpec;

    const FIXTURE: &str = r#"{
      "chunk_chars": 4,
      "rules": [
        {"when": {"after_tool": "calculator"}, "reply": {"text": "It is {tool_result}."}},
        {"when": {"user_contains": "calculate"}, "reply": {"tool_calls": [{"name": "calculator", "arguments": {"expression": "{after:calculate}"}}]}},
        {"when": {"user_contains": ["background"], "tool_available": "change_background"},
         "reply": {"tool_calls": [{"name": "change_background", "arguments": {"background": "{last_word}"}}]}}
      ],
      "default": {"reasoning": "hm", "text": "Hello there"}
    }"#;

    fn provider() -> ScriptedProvider {
        ScriptedProvider::new(Fixture::parse(FIXTURE).unwrap(), "scripted-1")
    }

    fn text_of(events: &[ModelEvent]) -> String {
        events
            .iter()
            .filter_map(|e| match e {
                ModelEvent::TextDelta(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn default_reply_streams_in_small_deltas_with_usage() {
        let req = ModelRequest {
            messages: vec![Message::user_text("hi")],
            ..Default::default()
        };
        let ev = provider().script(&req).unwrap();
        assert_eq!(ev[0], ModelEvent::ReasoningDelta("hm".into()));
        assert_eq!(ev[1], ModelEvent::ReasoningEnd);
        assert_eq!(ev[2], ModelEvent::TextDelta("Hell".into()));
        assert_eq!(text_of(&ev), "Hello there");
        assert!(matches!(ev.last(), Some(ModelEvent::Usage(u)) if u.output_tokens > 0));
    }

    #[test]
    fn rules_count_tool_rounds_since_the_user_spoke_and_see_images() {
        let p = ScriptedProvider::new(
            Fixture::parse(
                r#"{"rules": [
                  {"when": {"after_tool": "step", "after_tool_times": 2}, "reply": {"text": "two"}},
                  {"when": {"after_tool": "step", "after_tool_times": 1}, "reply": {"text": "one"}},
                  {"when": {"user_has_image": true}, "reply": {"text": "an image"}}],
                  "default": {"text": "words"}}"#,
            )
            .unwrap(),
            "s",
        );
        let round = |id: &str| {
            [
                Message {
                    role: Role::Assistant,
                    content: vec![ContentBlock::ToolUse {
                        id: id.into(),
                        name: "step".into(),
                        input: Value::Null,
                        signature: None,
                    }],
                },
                Message {
                    role: Role::User,
                    content: vec![ContentBlock::ToolResult {
                        tool_use_id: id.into(),
                        content: vec![ToolResultBlock::Text { text: "ok".into() }],
                        is_error: false,
                    }],
                },
            ]
        };
        let mut messages = vec![Message::user_text("go")];
        messages.extend(round("a"));
        let answer = |m: &[Message]| {
            text_of(
                &p.script(&ModelRequest {
                    messages: m.to_vec(),
                    ..Default::default()
                })
                .unwrap(),
            )
        };
        assert_eq!(answer(&messages), "one");
        messages.extend(round("b"));
        assert_eq!(answer(&messages), "two");
        // A new user turn starts the count again.
        messages.push(Message::user_text("again"));
        messages.extend(round("c"));
        assert_eq!(answer(&messages), "one");
        let image = Message {
            role: Role::User,
            content: vec![
                ContentBlock::Text {
                    text: "look".into(),
                },
                ContentBlock::Media(crate::conversation::Media {
                    kind: crate::conversation::MediaKind::Image,
                    mime_type: Some("image/png".into()),
                    source: crate::conversation::MediaSource::Base64 {
                        data: "AAAA".into(),
                    },
                    filename: None,
                }),
            ],
        };
        assert_eq!(answer(&[image]), "an image");
        assert_eq!(answer(&[Message::user_text("plain")]), "words");
    }

    #[test]
    fn rules_match_user_words_offered_tools_and_tool_results() {
        let p = provider();
        let req = ModelRequest {
            messages: vec![Message::user_text("Please calculate 6*7!")],
            ..Default::default()
        };
        let ev = p.script(&req).unwrap();
        let ModelEvent::ToolCallStart { id, name } = &ev[0] else {
            panic!("{ev:?}")
        };
        assert_eq!(name, "calculator");
        let args: String = ev
            .iter()
            .filter_map(|e| match e {
                ModelEvent::ToolCallDelta { delta, .. } => Some(delta.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(args, r#"{"expression":"6*7"}"#);
        // After the tool result the follow-up rule answers.
        let mut req = req;
        req.messages.push(Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse {
                id: id.clone(),
                name: name.clone(),
                input: Value::Null,
                signature: None,
            }],
        });
        req.messages.push(Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult {
                tool_use_id: id.clone(),
                content: vec![ToolResultBlock::Text { text: "42".into() }],
                is_error: false,
            }],
        });
        assert_eq!(text_of(&p.script(&req).unwrap()), "It is 42.");
        // A frontend-tool rule applies only when the client offers the tool.
        let mut req = ModelRequest {
            messages: vec![Message::user_text("change the background to blue")],
            ..Default::default()
        };
        assert_eq!(text_of(&p.script(&req).unwrap()), "Hello there");
        req.tools.push(ToolSpec {
            name: "change_background".into(),
            description: String::new(),
            input_schema: Value::Null,
            strict: None,
        });
        assert!(
            matches!(&p.script(&req).unwrap()[0], ModelEvent::ToolCallStart { name, .. } if name == "change_background")
        );
    }

    #[test]
    fn bad_fixtures_name_the_field() {
        let e =
            Fixture::parse(r#"{"rules":[{"when":{"usr_contains":"x"},"reply":{}}]}"#).unwrap_err();
        assert!(e.starts_with("rules[0].when"), "{e}");
    }
}
