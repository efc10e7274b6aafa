//! A model behind a user-written connector, driven the way ml-commons drives it: the
//! conversation becomes ml-commons' parameters for the connector's `_llm_interface`
//! (`system_prompt`, `prompt`, `_chat_history`, `_interactions`, `_tools`, `tool_configs`),
//! the connector's own `request_body` is rendered with them and the predict action is called;
//! the answer is read per interface into [`ModelEvent`]s (Bedrock Converse, its DeepSeek R1
//! variant, OpenAI chat completions, Gemini `generateContent`). A connector with no chat
//! interface (a V1 text-completion connector such as Claude instant's `/invoke`) answers the
//! prompt with the text its `response_filter` picks, and asks for tools in the prompt.

use std::sync::Arc;

use futures::StreamExt;
use serde_json::{Map, Value};

mod gemini;
mod react;
mod wire;

use wire::{
    converse_message, converse_text, deepseek_message, openai_messages, text_of_message, tool_json,
};
pub use wire::{read_converse, read_deepseek, read_openai};

use super::template::{Escape, Missing, render_except};
use super::{CallError, Connector};
use crate::conversation::{ContentBlock, Message, Role};
use crate::model::media::MediaSupport;
use crate::model::{ModelError, ModelEvent, ModelRequest, ModelStream, Provider, StopReason};

/// How the connector's request and answer are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interface {
    /// Bedrock Converse with native tool use (`bedrock/converse`, `bedrock/converse/claude`).
    BedrockConverse,
    /// Bedrock Converse for DeepSeek R1 (`bedrock/converse/deepseek_r1`), which has no native
    /// tool use: the tools go where the body's prompt names `${parameters._tools}`, and the
    /// model answers JSON `{"stop_reason": "tool_use", "tool_calls": [{"id", "tool_name",
    /// "input"}]}` or its final answer, as ml-commons reads it.
    BedrockConverseDeepseekR1,
    /// OpenAI chat completions (`openai/v1/chat/completions`).
    OpenAiChat,
    /// Gemini's `generateContent` (`gemini/v1beta/generatecontent`).
    GeminiGenerateContent,
    /// No chat interface: the prompt in, the filtered `response` out; tools, when an agent
    /// offers some, are asked for in the prompt and read from a JSON answer (ml-commons' first
    /// agents did the same).
    Completion,
}

impl Interface {
    /// The interface an `_llm_interface` value names.
    pub fn parse(name: &str) -> Option<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "bedrock/converse" | "bedrock/converse/claude" => Some(Self::BedrockConverse),
            "bedrock/converse/deepseek_r1" => Some(Self::BedrockConverseDeepseekR1),
            "openai/v1/chat/completions" => Some(Self::OpenAiChat),
            "gemini/v1beta/generatecontent" => Some(Self::GeminiGenerateContent),
            _ => None,
        }
    }

    /// ml-commons' `tool_configs` for the interface, used when neither the connector nor the
    /// agent sets one.
    fn default_tool_configs(self) -> &'static str {
        match self {
            Self::BedrockConverse => r#", "toolConfig": {"tools": [${parameters._tools:-}]}"#,
            Self::OpenAiChat => {
                r#", "tools": [${parameters._tools:-}], "parallel_tool_calls": false"#
            }
            Self::GeminiGenerateContent => {
                r#", "tools": [{"functionDeclarations": [${parameters._tools:-}]}], "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}}"#
            }
            Self::Completion | Self::BedrockConverseDeepseekR1 => "",
        }
    }
}

/// The parameters ml-commons inserts into a request body without escaping.
pub const NO_ESCAPE: &[&str] = &["_chat_history", "_interactions", "_tools", "tool_configs"];

/// Whether a connector's predict `request_body` is written for ml-commons' function-calling
/// agents: it names the conversation or the tools, so it can carry a whole ReAct turn.
pub fn is_agent_template(connector: &Value) -> bool {
    predict_body(connector).is_some_and(|b| {
        NO_ESCAPE
            .iter()
            .any(|p| b.contains(&format!("${{parameters.{p}")))
    })
}

/// The connector's predict `request_body`, when it has one.
pub fn predict_body(connector: &Value) -> Option<&str> {
    connector
        .get("actions")?
        .as_array()?
        .iter()
        .find(|a| {
            a.get("action_type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.eq_ignore_ascii_case("predict"))
        })?
        .get("request_body")?
        .as_str()
}

/// Whether a registered model is called through its connector's own `request_body` (as
/// ml-commons does), and how: a user-written connector (no `model_provider`) whose body is
/// written for function calling (it names `_chat_history`, `_interactions`, `_tools` or
/// `tool_configs`) is read per its `_llm_interface` (or what its URL shows); one whose URL
/// shows no chat API and that names no interface is a text-completion model (prompt in,
/// `response_filter` out). Other bodies carry only a prompt, which would lose the
/// conversation and tools: the interface's own provider speaks for them.
pub fn select(
    connector: &Value,
    interface: Option<&str>,
    url: &str,
) -> Result<Option<Interface>, super::Invalid> {
    let user_written = connector.get("model_provider").is_none()
        && matches!(
            connector.get("protocol").and_then(Value::as_str),
            Some("http" | "aws_sigv4")
        );
    if !user_written || predict_body(connector).is_none() {
        return Ok(None);
    }
    let shown = if url.contains("/converse") {
        Some(Interface::BedrockConverse)
    } else if url.ends_with("/chat/completions") {
        Some(Interface::OpenAiChat)
    } else if url.contains(":generateContent") {
        Some(Interface::GeminiGenerateContent)
    } else {
        None
    };
    let named = interface.map(|i| {
        Interface::parse(i).ok_or_else(|| {
            super::invalid(
                "parameters._llm_interface",
                format!(
                    "{i:?} is not supported; expected bedrock/converse/claude, bedrock/converse, bedrock/converse/deepseek_r1, openai/v1/chat/completions or gemini/v1beta/generatecontent"
                ),
            )
        })
    });
    if is_agent_template(connector) {
        return match named.transpose()?.or(shown) {
            Some(i) => Ok(Some(i)),
            None => Err(super::invalid(
                "parameters._llm_interface",
                "required: the model's connector does not show which API it speaks",
            )),
        };
    }
    Ok(match (interface, shown) {
        // Gemini has no provider of its own here: a prompt-only body is a completion.
        (None, None | Some(Interface::GeminiGenerateContent)) => Some(Interface::Completion),
        _ => None,
    })
}

/// A connector's credential, kept out of `Debug` output.
#[derive(Clone, Default)]
pub struct Credential(pub Map<String, Value>);

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[REDACTED]")
    }
}

/// The connector-backed model's settings.
#[derive(Debug, Clone)]
pub struct ConnectorModel {
    /// The connector's public document.
    pub connector: Value,
    /// Its opened credential.
    pub credential: Credential,
    /// How its request and answer are read.
    pub interface: Interface,
    /// The agent's parameters (`llm.parameters` and the agent's own), over the connector's.
    pub parameters: Map<String, Value>,
    /// A completion model's `prompt` is the request's question as it is (an `MLModelTool`'s
    /// rendered template); otherwise an agent's conversation is framed as Claude's text
    /// completions take it.
    pub prompt_only: bool,
}

impl ConnectorModel {
    /// The predict action's URL filled from the connector's and agent's parameters, when it
    /// is complete without the call's own.
    pub fn url(&self) -> Option<String> {
        let c = Connector {
            doc: &self.connector,
            credential: &self.credential.0,
        };
        let action = c.predict_action().ok()?;
        let params = c.parameters(&self.parameters);
        let u = action.get("url")?.as_str()?;
        super::template::render(u, &params, &Map::new(), Escape::Raw)
            .ok()
            .filter(|u| !u.contains("${"))
    }
}

struct Inner {
    model: ConnectorModel,
    model_id: String,
    net: crate::outbound::Net,
}

/// The [`Provider`] calling a connector's predict action.
pub struct ConnectorProvider(Arc<Inner>);

impl ConnectorProvider {
    /// A provider for `model`, reaching it through `net`.
    pub fn new(model: ConnectorModel, model_id: String, net: crate::outbound::Net) -> Self {
        Self(Arc::new(Inner {
            model,
            model_id,
            net,
        }))
    }
}

impl Provider for ConnectorProvider {
    fn name(&self) -> &str {
        "connector"
    }

    fn model_id(&self) -> &str {
        &self.0.model_id
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let inner = self.0.clone();
        futures::stream::once(async move { inner.turn(request).await })
            .flat_map(|r| match r {
                Ok(events) => futures::stream::iter(events.into_iter().map(Ok)).boxed(),
                Err(e) => futures::stream::iter([Err(e)]).boxed(),
            })
            .boxed()
    }

    fn media_support(&self, _media: &crate::conversation::Media) -> MediaSupport {
        MediaSupport::Unsupported(
            "a connector's request_body carries text only; register the model with the unified `model` block for media"
                .into(),
        )
    }

    fn coalesce_deltas(&self) -> bool {
        false
    }
}

impl Inner {
    async fn turn(&self, request: ModelRequest) -> Result<Vec<ModelEvent>, ModelError> {
        let interface = self.model.interface;
        let mut params = parameters(interface, &request, &self.model.parameters)?;
        if interface == Interface::Completion && !self.model.prompt_only && request.tools.is_empty()
        {
            let q = question_index(&request.messages);
            params.insert(
                "prompt".into(),
                Value::String(react::transcript(&request, q)),
            );
        }
        let connector = Connector {
            doc: &self.model.connector,
            credential: &self.model.credential.0,
        };
        let action = connector.predict_action().map_err(model_error)?;
        let mut all = connector.parameters(&params);
        // `tool_configs` holds placeholders of its own (`${parameters._tools:-}`): filled first,
        // then inserted as it is.
        if let Some(Value::String(tc)) = all.get("tool_configs").cloned()
            && tc.contains("${")
        {
            let filled = render_except(&tc, &all, &Map::new(), Escape::Json, NO_ESCAPE)
                .map_err(template_error)?;
            all.insert("tool_configs".into(), Value::String(filled));
        }
        let cred = &self.model.credential.0;
        let (_, doc) = connector
            .call_with(&self.net, action, &all, |t| {
                render_except(t, &all, cred, Escape::Json, NO_ESCAPE)
            })
            .await
            .map_err(model_error)?;
        let mut events = match interface {
            Interface::BedrockConverse => read_converse(&doc),
            Interface::BedrockConverseDeepseekR1 => {
                let text = match all.get("llm_response_filter").and_then(Value::as_str) {
                    Some(path) => super::jsonpath::select(&doc, path)
                        .map_err(|e| ModelError::Protocol(e.to_string()))?
                        .map(|v| super::template::text_of(&v))
                        .unwrap_or_default(),
                    None => converse_text(&doc),
                };
                return Ok(read_deepseek(&text, doc.get("usage")));
            }
            Interface::OpenAiChat => read_openai(&doc)?,
            Interface::GeminiGenerateContent => gemini::read(&doc),
            Interface::Completion => {
                let text = completion_text(action, &all, &doc)?;
                if !request.tools.is_empty() {
                    return Ok(react::read(&text, &request.tools));
                }
                return Ok(vec![
                    ModelEvent::TextDelta(text),
                    ModelEvent::Stop(StopReason::EndTurn),
                ]);
            }
        };
        // ml-commons' `llm_response_filter` names where the answer's text is.
        if let Some(path) = all.get("llm_response_filter").and_then(Value::as_str) {
            let calls = events
                .iter()
                .any(|e| matches!(e, ModelEvent::ToolCallStart { .. }));
            if !calls {
                let picked = super::jsonpath::select(&doc, path)
                    .map_err(|e| ModelError::Protocol(e.to_string()))?
                    .unwrap_or(Value::Null);
                events.retain(|e| !matches!(e, ModelEvent::TextDelta(_)));
                events.insert(0, ModelEvent::TextDelta(super::template::text_of(&picked)));
            }
        }
        Ok(events)
    }
}

fn template_error(m: Missing) -> ModelError {
    ModelError::Upstream {
        message: format!("the connector's request_body: {m}"),
        code: Some("TEMPLATE".into()),
    }
}

fn model_error(e: CallError) -> ModelError {
    match e {
        CallError::Upstream { status, body } => ModelError::Http {
            status,
            message: crate::model::error_message_from_body(&body),
        },
        CallError::Unreachable(m) => ModelError::Connect(m),
        CallError::NotJson | CallError::BadAnswer(_) => ModelError::Protocol(e.to_string()),
        other => ModelError::Upstream {
            message: other.to_string(),
            code: Some("CONNECTOR".into()),
        },
    }
}

/// The text a completion connector answered: its `response_filter`'s pick, else the answer's
/// `response` field (ml-commons' `response_field` default), else the answer as JSON text.
fn completion_text(
    action: &Value,
    params: &Map<String, Value>,
    doc: &Value,
) -> Result<String, ModelError> {
    let picked = match super::response_filter(action, params) {
        Some(path) => super::jsonpath::select(doc, path)
            .map_err(|e| ModelError::Protocol(e.to_string()))?
            .unwrap_or(Value::Null),
        None => {
            let field = params
                .get("response_field")
                .and_then(Value::as_str)
                .unwrap_or("response");
            doc.get(field).cloned().unwrap_or_else(|| doc.clone())
        }
    };
    Ok(super::template::text_of(&picked))
}

/// Where the question is: the last user message that is not only tool results.
fn question_index(messages: &[Message]) -> Option<usize> {
    messages.iter().rposition(|m| {
        m.role == Role::User
            && m.content
                .iter()
                .any(|b| !matches!(b, ContentBlock::ToolResult { .. }))
    })
}

/// ml-commons' parameters for `request` on `interface`, over the agent's `base` parameters.
pub fn parameters(
    interface: Interface,
    request: &ModelRequest,
    base: &Map<String, Value>,
) -> Result<Map<String, Value>, ModelError> {
    for m in &request.messages {
        if m.content
            .iter()
            .any(|b| matches!(b, ContentBlock::Media(_)))
        {
            return Err(ModelError::Unsupported(
                "a connector's request_body carries text only".into(),
            ));
        }
    }
    let mut p = base.clone();
    let system = request.system.join("\n\n");
    if !system.is_empty() || !p.contains_key("system_prompt") {
        p.insert("system_prompt".into(), Value::String(system));
    }
    let q = question_index(&request.messages);
    let prompt = q
        .map(|i| text_of_message(&request.messages[i]))
        .unwrap_or_default();
    p.insert("prompt".into(), Value::String(prompt));
    if interface == Interface::Completion {
        if !request.tools.is_empty() {
            p.insert("prompt".into(), Value::String(react::prompt(request, q)));
        }
        return Ok(p);
    }
    let (history, interactions) = match q {
        Some(i) => (&request.messages[..i], &request.messages[i + 1..]),
        None => (&request.messages[..], &[][..]),
    };
    let names = gemini::call_names(&request.messages);
    let wire = |m: &Message| -> Vec<Value> {
        match interface {
            Interface::BedrockConverse => vec![converse_message(m)],
            Interface::BedrockConverseDeepseekR1 => vec![deepseek_message(m)],
            Interface::GeminiGenerateContent => vec![gemini::message(m, &names)],
            _ => openai_messages(m),
        }
    };
    let mut chat_history = String::new();
    for m in history {
        for w in wire(m) {
            chat_history.push_str(&w.to_string());
            chat_history.push(',');
        }
    }
    let mut inter = String::new();
    for m in interactions {
        for w in wire(m) {
            inter.push(',');
            inter.push_str(&w.to_string());
        }
    }
    let tools: Vec<String> = request
        .tools
        .iter()
        .map(|t| tool_json(interface, t).to_string())
        .collect();
    p.insert("_chat_history".into(), Value::String(chat_history));
    p.insert("_interactions".into(), Value::String(inter));
    p.insert("_tools".into(), Value::String(tools.join(",")));
    if !p.contains_key("tool_configs") && !tools.is_empty() {
        p.insert(
            "tool_configs".into(),
            Value::String(interface.default_tool_configs().into()),
        );
    }
    if interface == Interface::OpenAiChat {
        // What ml-commons sets for bodies that name them.
        for (k, v) in [("tool_choice", "auto"), ("parallel_tool_calls", "false")] {
            p.entry(k).or_insert_with(|| Value::String(v.into()));
        }
    }
    Ok(p)
}

/// Renders `template` with the interface's raw parameters unescaped (for tests and `_predict`).
pub fn render_request_body(template: &str, params: &Map<String, Value>) -> Result<String, Missing> {
    render_except(template, params, &Map::new(), Escape::Json, NO_ESCAPE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::{ToolResultBlock, ToolSpec};
    use serde_json::json;

    const SEED_BODY: &str = "{ \"system\": [{\"text\": \"${parameters.system_prompt}\"}], \"messages\": [${parameters._chat_history:-}{\"role\":\"user\",\"content\":[{\"text\":\"${parameters.prompt}\"}]}${parameters._interactions:-}]${parameters.tool_configs:-} }";

    fn turn() -> ModelRequest {
        ModelRequest {
            system: vec!["Be \"brief\".".into()],
            messages: vec![
                Message::user_text("earlier?"),
                Message {
                    role: Role::Assistant,
                    content: vec![ContentBlock::Text {
                        text: "earlier answer".into(),
                    }],
                },
                Message::user_text("line1\nline \"2\""),
                Message {
                    role: Role::Assistant,
                    content: vec![ContentBlock::ToolUse {
                        id: "t1".into(),
                        name: "lookup".into(),
                        input: json!({"q": "x"}),
                        signature: None,
                    }],
                },
                Message {
                    role: Role::User,
                    content: vec![ContentBlock::ToolResult {
                        tool_use_id: "t1".into(),
                        content: vec![ToolResultBlock::Text { text: "42".into() }],
                        is_error: false,
                    }],
                },
            ],
            tools: vec![ToolSpec {
                name: "lookup".into(),
                description: "Looks up".into(),
                input_schema: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
                strict: None,
            }],
            params: Default::default(),
        }
    }

    #[test]
    fn the_seed_converse_body_renders_to_valid_json_with_history_tools_and_interactions() {
        let mut p = parameters(Interface::BedrockConverse, &turn(), &Map::new()).unwrap();
        let tc =
            render_request_body(Interface::BedrockConverse.default_tool_configs(), &p).unwrap();
        p.insert("tool_configs".into(), Value::String(tc));
        let body: Value =
            serde_json::from_str(&render_request_body(SEED_BODY, &p).unwrap()).unwrap();
        assert_eq!(body["system"][0]["text"], "Be \"brief\".");
        let msgs = body["messages"].as_array().unwrap();
        assert_eq!(msgs.len(), 5);
        assert_eq!(msgs[0]["content"][0]["text"], "earlier?");
        assert_eq!(msgs[2]["content"][0]["text"], "line1\nline \"2\"");
        assert_eq!(msgs[3]["content"][0]["toolUse"]["toolUseId"], "t1");
        assert_eq!(
            msgs[4]["content"][0]["toolResult"]["content"][0]["text"],
            "42"
        );
        assert_eq!(body["toolConfig"]["tools"][0]["toolSpec"]["name"], "lookup");
    }
}
