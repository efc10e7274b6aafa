//! ml-commons prompt templates on the ReAct loop: `llm.parameters.prompt` (or an execution's
//! `parameters.prompt`) shapes the question the model sees, and `system_prompt` may name
//! parameters too. Both are filled from the agent's parameters, then the execution's, with
//! `question` the text of the message being answered. Memory keeps the question as asked.

use serde_json::{Map, Value, json};

use crate::connector::template::{Escape, render};
use crate::conversation::{ContentBlock, Message, Role};

/// The template the question goes through, if one changes it.
fn template<'a>(
    agent: &'a Map<String, Value>,
    execution: &'a Map<String, Value>,
) -> Option<&'a str> {
    execution
        .get("prompt")
        .or_else(|| agent.get("prompt"))
        .and_then(Value::as_str)
        .filter(|t| t.trim() != "${parameters.question}" && !t.trim().is_empty())
}

/// The parameters templates see: the agent's, the execution's over them, and `question`.
fn scope(
    agent: &Map<String, Value>,
    execution: &Map<String, Value>,
    question: Option<String>,
) -> Map<String, Value> {
    let mut p = agent.clone();
    p.extend(execution.clone());
    if let Some(q) = question
        && !p.contains_key("question")
    {
        p.insert("question".into(), json!(q));
    }
    p
}

/// The text of the question being answered: the last message, when the user wrote it (a run
/// that carries tool results continues an answer and is left alone).
fn question_text(messages: &[Message]) -> Option<String> {
    let last = messages.last().filter(|m| m.role == Role::User)?;
    if last
        .content
        .iter()
        .any(|b| matches!(b, ContentBlock::ToolResult { .. }))
    {
        return None;
    }
    let text: Vec<&str> = last
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    (!text.is_empty()).then(|| text.join("\n"))
}

/// Fills the prompt template into the question (its text blocks become the filled prompt;
/// media stay) and the placeholders of the system prompt. A placeholder with neither a value
/// nor a default is the caller's fault, named in the error.
pub fn apply(
    messages: &mut [Message],
    system: Option<&mut String>,
    agent: &Map<String, Value>,
    execution: &Map<String, Value>,
) -> Result<(), String> {
    let question = question_text(messages);
    let scope = scope(agent, execution, question.clone());
    if let Some(s) = system
        && s.contains("${parameters.")
    {
        *s = render(s, &scope, &Map::new(), Escape::Raw)
            .map_err(|e| format!("system_prompt: {e}"))?;
    }
    let (Some(t), Some(_)) = (template(agent, execution), question) else {
        return Ok(());
    };
    let filled = render(t, &scope, &Map::new(), Escape::Raw).map_err(|e| format!("prompt: {e}"))?;
    if let Some(last) = messages.last_mut() {
        last.content
            .retain(|b| !matches!(b, ContentBlock::Text { .. }));
        last.content.insert(0, ContentBlock::Text { text: filled });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn the_template_shapes_the_question_and_the_execution_overrides_it() {
        let agent = map(json!({"prompt": "Answer briefly: ${parameters.question}", "tone": "dry"}));
        let mut m = vec![Message::user_text("why?")];
        apply(&mut m, None, &agent, &Map::new()).unwrap();
        assert_eq!(m, vec![Message::user_text("Answer briefly: why?")]);

        let exec = map(
            json!({"prompt": "${parameters.question}, ${parameters.next_action}", "next_action": "then compare"}),
        );
        let mut m = vec![Message::user_text("NYC?")];
        let mut system = "Be ${parameters.tone}.".to_string();
        apply(&mut m, Some(&mut system), &agent, &exec).unwrap();
        assert_eq!(m, vec![Message::user_text("NYC?, then compare")]);
        assert_eq!(system, "Be dry.");

        // A missing placeholder is named; the default form is fine.
        let exec = map(json!({"prompt": "${parameters.nope}"}));
        let err = apply(&mut [Message::user_text("q")], None, &agent, &exec).unwrap_err();
        assert!(err.contains("parameters.nope"), "{err}");
        let exec = map(json!({"prompt": "${parameters.chat_history:-}${parameters.question}"}));
        let mut m = vec![Message::user_text("q")];
        apply(&mut m, None, &agent, &exec).unwrap();
        assert_eq!(m, vec![Message::user_text("q")]);
    }

    #[test]
    fn tool_results_are_not_a_question() {
        let agent = map(json!({"prompt": "X ${parameters.question}"}));
        let results = Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult {
                tool_use_id: "c".into(),
                content: vec![],
                is_error: false,
            }],
        };
        let mut m = vec![results.clone()];
        apply(&mut m, None, &agent, &Map::new()).unwrap();
        assert_eq!(m, vec![results]);
    }
}
