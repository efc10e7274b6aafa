//! Tool use for text-completion models (ml-commons' first agents, before function calling):
//! the tools, the conversation and the calls made so far are written into one prompt that asks
//! for a JSON object `{"thought", "action", "action_input"}` to call a tool or `{"thought",
//! "final_answer"}` to answer; the completion is read back into tool calls or text.

use serde_json::{Map, Value, json};

use super::wire::text_of_message;
use crate::conversation::{ContentBlock, Role, ToolResultBlock, ToolSpec};
use crate::model::{ModelEvent, ModelRequest, StopReason};

/// The prompt for `request` whose question is message `q`, framed as Claude's text
/// completions expect (`\n\nHuman: ... \n\nAssistant:`), as ml-commons frames it.
pub(super) fn prompt(request: &ModelRequest, q: Option<usize>) -> String {
    let mut out = String::from("\n\nHuman: ");
    for s in &request.system {
        out.push_str(s);
        out.push_str("\n\n");
    }
    out.push_str("TOOLS\n------\nYou can ask for one of these tools to look up what helps answer the question:\n\n");
    for t in &request.tools {
        out.push_str(&format!(
            "{}: {} (input: {})\n",
            t.name, t.description, t.input_schema
        ));
    }
    let names: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
    out.push_str(&format!(
        "\nRESPONSE FORMAT\n---------------\nAnswer with one JSON object and nothing else, in one of two shapes.\n\
         To use a tool: {{\"thought\": \"why this tool\", \"action\": \"one of [{}]\", \"action_input\": \"the tool's input: a string, or a JSON object matching its input\"}}\n\
         To answer: {{\"thought\": \"Now I know the final answer\", \"final_answer\": \"the answer, in full sentences\"}}\n",
        names.join(", ")
    ));
    let (history, question, after) = match q {
        Some(i) => (
            &request.messages[..i],
            text_of_message(&request.messages[i]),
            &request.messages[i + 1..],
        ),
        None => (&request.messages[..], String::new(), &[][..]),
    };
    let lines: Vec<String> = history
        .iter()
        .map(|m| {
            let who = if m.role == Role::User { "Human" } else { "AI" };
            format!("{who}: {}", text_of_message(m))
        })
        .filter(|l| !l.ends_with(": "))
        .collect();
    if !lines.is_empty() {
        out.push_str("\nCHAT HISTORY\n------------\n");
        out.push_str(&lines.join("\n"));
        out.push('\n');
    }
    out.push_str("\nQUESTION\n--------\n");
    out.push_str(&question);
    out.push('\n');
    for m in after {
        for b in &m.content {
            match b {
                ContentBlock::ToolUse { name, input, .. } => {
                    let call = json!({"thought": "", "action": name, "action_input": input});
                    out.push_str(&format!("\n{call}\n"));
                }
                ContentBlock::ToolResult { content, .. } => {
                    out.push_str("\nTOOL RESPONSE\n-------------\n");
                    out.push_str(&ToolResultBlock::joined_text(content));
                    out.push('\n');
                }
                _ => {}
            }
        }
    }
    out.push_str("\n\nAssistant:");
    out
}

/// An agent's conversation with no tools, framed as Claude's text completions take it:
/// alternating `Human:` / `Assistant:` turns, the system prompt opening the first.
pub(super) fn transcript(request: &ModelRequest, q: Option<usize>) -> String {
    let upto = q.map_or(request.messages.len(), |i| i + 1);
    let mut out = String::new();
    let system = request.system.join("\n\n");
    for (n, m) in request.messages[..upto].iter().enumerate() {
        let text = text_of_message(m);
        if m.role == Role::User {
            out.push_str("\n\nHuman: ");
            if n == 0 && !system.is_empty() {
                out.push_str(&system);
                out.push_str("\n\n");
            }
        } else {
            out.push_str("\n\nAssistant: ");
        }
        // Completions start with a space by Claude's convention; one is enough.
        out.push_str(text.trim());
    }
    out.push_str("\n\nAssistant:");
    out
}

/// The JSON object in a completion, fenced or not.
fn json_in(text: &str) -> Option<Map<String, Value>> {
    let (a, b) = (text.find('{')?, text.rfind('}')?);
    if a >= b {
        return None;
    }
    serde_json::from_str::<Value>(&text[a..=b])
        .ok()?
        .as_object()
        .cloned()
}

/// A tool's arguments from `action_input`: a JSON object as it is; a string into the tool's
/// only property when it has one, else as `input`.
fn arguments(input: Option<&Value>, tool: &ToolSpec) -> Value {
    let text = match input {
        Some(Value::Object(o)) => return Value::Object(o.clone()),
        Some(Value::String(s)) => {
            if let Ok(Value::Object(o)) = serde_json::from_str::<Value>(s) {
                return Value::Object(o);
            }
            s.clone()
        }
        Some(other) => other.to_string(),
        None => String::new(),
    };
    let props: Vec<&String> = tool
        .input_schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().collect())
        .unwrap_or_default();
    let key = match props.as_slice() {
        [only] => only.as_str(),
        _ => "input",
    };
    json!({ key: text })
}

/// The completion as a tool call, a final answer, or plain text.
pub(super) fn read(text: &str, tools: &[ToolSpec]) -> Vec<ModelEvent> {
    let parsed = json_in(text);
    if let Some(o) = &parsed
        && let Some(name) = o.get("action").and_then(Value::as_str)
        && let Some(tool) = tools
            .iter()
            .find(|t| t.name.eq_ignore_ascii_case(name.trim()))
    {
        let id = format!("call_{}", uuid::Uuid::new_v4().simple());
        let args = arguments(o.get("action_input"), tool);
        let mut out = Vec::new();
        if let Some(t) = o
            .get("thought")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        {
            out.push(ModelEvent::ReasoningDelta(t.to_string()));
            out.push(ModelEvent::ReasoningEnd);
        }
        out.push(ModelEvent::ToolCallStart {
            id: id.clone(),
            name: tool.name.clone(),
        });
        out.push(ModelEvent::ToolCallDelta {
            id: id.clone(),
            delta: args.to_string(),
        });
        out.push(ModelEvent::ToolCallEnd { id });
        out.push(ModelEvent::Stop(StopReason::ToolUse));
        return out;
    }
    let answer = parsed
        .as_ref()
        .and_then(|o| o.get("final_answer"))
        .map(crate::connector::template::text_of)
        .unwrap_or_else(|| text.trim().to_string());
    vec![
        ModelEvent::TextDelta(answer),
        ModelEvent::Stop(StopReason::EndTurn),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::Message;

    fn tool() -> ToolSpec {
        ToolSpec {
            name: "weather".into(),
            description: "Weather for a city".into(),
            input_schema: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
            strict: None,
        }
    }

    #[test]
    fn completions_become_calls_or_answers() {
        let ev = read(
            "```json\n{\"thought\": \"look\", \"action\": \"weather\", \"action_input\": \"Paris\"}\n```",
            &[tool()],
        );
        assert!(ev.contains(&ModelEvent::ReasoningDelta("look".into())));
        assert!(ev.iter().any(|e| matches!(e, ModelEvent::ToolCallDelta { delta, .. } if delta == "{\"city\":\"Paris\"}")));
        let ev = read(
            "{\"thought\": \"Now I know the final answer\", \"final_answer\": \"Sunny.\"}",
            &[tool()],
        );
        assert_eq!(ev[0], ModelEvent::TextDelta("Sunny.".into()));
        assert_eq!(
            read(" just text ", &[tool()])[0],
            ModelEvent::TextDelta("just text".into())
        );
        // An action naming no tool is an answer.
        let ev = read("{\"action\": \"nope\", \"action_input\": \"x\"}", &[tool()]);
        assert!(matches!(&ev[0], ModelEvent::TextDelta(_)));
    }

    #[test]
    fn the_prompt_holds_tools_history_question_and_scratchpad() {
        let req = ModelRequest {
            system: vec!["Be brief.".into()],
            messages: vec![
                Message::user_text("before"),
                Message {
                    role: Role::Assistant,
                    content: vec![ContentBlock::Text {
                        text: "earlier".into(),
                    }],
                },
                Message::user_text("Weather in Paris?"),
            ],
            tools: vec![tool()],
            params: Default::default(),
        };
        let p = prompt(&req, Some(2));
        assert!(p.starts_with("\n\nHuman: Be brief."));
        assert!(p.contains("weather: Weather for a city"));
        assert!(p.contains("Human: before\nAI: earlier"));
        assert!(p.contains("QUESTION\n--------\nWeather in Paris?"));
        assert!(p.ends_with("\n\nAssistant:"));
        assert_eq!(
            transcript(&req, Some(2)),
            "\n\nHuman: Be brief.\n\nbefore\n\nAssistant: earlier\n\nHuman: Weather in Paris?\n\nAssistant:"
        );
    }
}
