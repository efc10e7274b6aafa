/// ml-commons prompt templates as ml-commons applies them: `llm.parameters.prompt` and
/// `system_prompt` shape what a conversational agent's model sees (memory keeps the question as
/// asked), an execution's `prompt` replaces the template and any execution parameter fills it
/// (`${parameters.next_action}`), a flow's `MLModelTool` takes `prompt` and `<tool>.prompt`
/// from the execution, `${parameters.<tool>.output:-}` and `${parameters.chat_history:-}` fill
/// in ml-commons' format, and `message_history_limit` counts interactions.
mod common;

use common::Gateway;
use serde_json::{Value, json};

const MINIMAL: &str = "[[agents]]\nid = \"cfg\"\n[agents.model]\nprovider = \"scripted\"\n";

async fn send(gw: &Gateway, get: bool, path: &str, body: Value) -> (u16, Value) {
    let body = (!get).then_some(&body);
    common::send_json(if get { "GET" } else { "POST" }, gw.url(path), body).await
}

fn output<'a>(resp: &'a Value, name: &str) -> &'a Value {
    common::ml_output(resp, name)
}

/// A registered model on the scripted provider that answers with what it was asked (and the
/// system prompt it got, when it asks for it).
async fn echo_model(gw: &Gateway) -> String {
    let (status, reg) = send(
        gw,
        false,
        "/_plugins/_ml/agents/_register",
        json!({"name": "echo", "type": "conversational",
               "model": {"model_id": "echo", "model_provider": "scripted",
                         "model_parameters": {"fixture": {"default": {"text": "Heard: {user_text}"}}}}}),
    )
    .await;
    assert_eq!(status, 200, "{reg}");
    let id = reg["agent_id"].as_str().unwrap();
    let (_, agent) = send(gw, true, &format!("/_plugins/_ml/agents/{id}"), Value::Null).await;
    agent["llm"]["model_id"].as_str().unwrap().to_string()
}

/// [`execute`], which must answer 200.
async fn executed(gw: &Gateway, agent: &str, parameters: Value) -> Value {
    let (status, out) = execute(gw, agent, parameters).await;
    assert_eq!(status, 200, "{out}");
    out
}

async fn execute(gw: &Gateway, agent: &str, parameters: Value) -> (u16, Value) {
    send(
        gw,
        false,
        &format!("/_plugins/_ml/agents/{agent}/_execute"),
        json!({ "parameters": parameters }),
    )
    .await
}

#[tokio::test]
async fn a_conversational_agent_asks_through_its_prompt_template() {
    let gw = Gateway::start(MINIMAL).await;
    let model = echo_model(&gw).await;
    let (status, reg) = send(
        &gw,
        false,
        "/_plugins/_ml/agents/_register",
        json!({"name": "pirate", "type": "conversational", "app_type": "rag",
               "llm": {"model_id": model, "parameters": {
                   "max_iteration": 3,
                   "system_prompt": "You speak like a ${parameters.persona:-pirate}.",
                   "prompt": "Answer as a pirate: ${parameters.question}"}},
               "memory": {"type": "conversation_index"}}),
    )
    .await;
    assert_eq!(status, 200, "{reg}");
    let id = reg["agent_id"].as_str().unwrap().to_string();

    let out = executed(&gw, &id, json!({"question": "Where is the \"gold\"?"})).await;
    assert_eq!(
        output(&out, "response")["result"],
        "Heard: Answer as a pirate: Where is the \"gold\"?"
    );
    let memory = output(&out, "memory_id")["result"]
        .as_str()
        .unwrap()
        .to_string();

    // The execution's prompt replaces the template; any execution parameter fills it.
    let out = executed(
        &gw,
        &id,
        json!({"question": "And the map?", "memory_id": memory,
               "next_action": "then bury it",
               "prompt": "${parameters.question}, ${parameters.next_action}"}),
    )
    .await;
    assert_eq!(
        output(&out, "response")["result"],
        "Heard: And the map?, then bury it"
    );

    // Memory keeps the questions as asked, not the filled prompts.
    let (status, msgs) = send(
        &gw,
        true,
        &format!("/_plugins/_ml/memory/{memory}/messages"),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{msgs}");
    let inputs: Vec<&str> = msgs["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["input"].as_str().unwrap())
        .collect();
    assert_eq!(inputs, ["Where is the \"gold\"?", "And the map?"]);

    // A placeholder with no value and no default is the caller's fault, named.
    let (status, err) = execute(
        &gw,
        &id,
        json!({"question": "x", "prompt": "${parameters.question} ${parameters.missing}"}),
    )
    .await;
    assert_eq!(status, 400, "{err}");
    assert!(err.to_string().contains("parameters.missing"), "{err}");
}

#[tokio::test]
async fn a_conversational_flow_fills_outputs_history_and_execution_prompts() {
    let gw = Gateway::start(MINIMAL).await;
    let model = echo_model(&gw).await;
    let (status, reg) = send(
        &gw,
        false,
        "/_plugins/_ml/agents/_register",
        json!({"name": "rag flow", "type": "conversational_flow", "app_type": "rag",
               "memory": {"type": "conversation_index"},
               "tools": [
                   {"type": "builtin", "name": "kb", "kind": "calculator",
                    "input": {"expression": "6*7"}},
                   {"type": "MLModelTool", "name": "answerer",
                    "parameters": {"model_id": model,
                        "prompt": "Context: ${parameters.kb.output:-}\n\n${parameters.chat_history:-}\n\nHuman:${parameters.question}\n\nAssistant:"}}
               ]}),
    )
    .await;
    assert_eq!(status, 200, "{reg}");
    let id = reg["agent_id"].as_str().unwrap().to_string();

    let first = executed(&gw, &id, json!({"question": "one"})).await;
    let answer1 = output(&first, "answerer")["result"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(answer1, "Heard: Context: 42\n\n\n\nHuman:one\n\nAssistant:");
    let memory = output(&first, "memory_id")["result"]
        .as_str()
        .unwrap()
        .to_string();

    // Seed 000 step 5: the execution's prompt, next_action and a history limit.
    let second = executed(
        &gw,
        &id,
        json!({"question": "two", "next_action": "then compare", "memory_id": memory,
               "message_history_limit": 5,
               "prompt": "Context: ${parameters.kb.output:-}\n\n${parameters.chat_history:-}\n\nHuman:always learn useful information from chat history\nHuman:${parameters.question}, ${parameters.next_action}\n\nAssistant:"}),
    ).await;
    let history = format!(
        "Below is Chat History between Human and AI which sorted by time with asc order:\nHuman:one\nAssistant:{answer1}\n"
    );
    assert_eq!(
        output(&second, "answerer")["result"],
        format!(
            "Heard: Context: 42\n\n{history}\n\nHuman:always learn useful information from chat history\nHuman:two, then compare\n\nAssistant:"
        )
    );
    let answer2 = output(&second, "answerer")["result"]
        .as_str()
        .unwrap()
        .to_string();

    // `<tool>.prompt` replaces one tool's template; the limit counts interactions (one here).
    let third = executed(
        &gw,
        &id,
        json!({"question": "three", "memory_id": memory, "message_history_limit": 1,
               "answerer.prompt": "${parameters.chat_history:-}Q:${parameters.question}"}),
    )
    .await;
    assert_eq!(
        output(&third, "answerer")["result"],
        format!(
            "Heard: Below is Chat History between Human and AI which sorted by time with asc order:\nHuman:two\nAssistant:{answer2}\nQ:three"
        )
    );

    // selected_tools runs the model alone: the output placeholder takes its default.
    let fourth = executed(
        &gw,
        &id,
        json!({"question": "four", "selected_tools": ["answerer"],
               "answerer.prompt": "[${parameters.kb.output:-no context}] ${parameters.question}"}),
    )
    .await;
    assert_eq!(
        output(&fourth, "answerer")["result"],
        "Heard: [no context] four"
    );
}
