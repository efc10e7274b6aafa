/// ml-commons' conversation memory API over `conversation_index` threads: a memory per
/// conversation, a message per question and answer (the execution's `parent_message_id`),
/// the tool calls as its traces, `_search`, paging, delete, and another key's memory unseen.
mod common;

use common::{FakeOpenAi, Gateway, Reply, text_chunks, tool_call_turn};
use serde_json::{Value, json};

async fn call(
    gw: &Gateway,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
    key: Option<&str>,
) -> (u16, Value) {
    let mut req = reqwest::Client::new().request(method, gw.url(path));
    if let Some(b) = body {
        req = req.json(&b);
    }
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn output<'a>(resp: &'a Value, name: &str) -> &'a str {
    common::ml_output(resp, name)["result"]
        .as_str()
        .unwrap_or_else(|| panic!("output {name:?} has no result in {resp}"))
}

const ALICE: &str = "alice-key-0123456789abcdef";
const BOB: &str = "bob-key-0123456789abcdef00";
const OPS: &str = "ops-key-fedcba9876543210";

fn hash(key: &str) -> String {
    agui_gateway::config::auth::hex(&agui_gateway::config::auth::hash_key(key))
}

#[tokio::test]
async fn conversations_read_back_as_memories_messages_and_traces() {
    let mut stores = vec![String::new()];
    if let Some(url) = common::test_pg("the conversation memory API on PostgreSQL") {
        stores.push(format!("[store]\nurl = \"{url}\"\n"));
    }
    for store in stores {
        let toml = format!(
            "{store}\n[[auth.keys]]\nname = \"alice-cm\"\nsha256 = \"{}\"\n[[auth.keys]]\nname = \"bob-cm\"\nsha256 = \"{}\"\n[[auth.keys]]\nname = \"ops\"\nadmin = true\nsha256 = \"{}\"\n[[agents]]\nid = \"cfg\"\n[agents.model]\nprovider = \"scripted\"\n",
            hash(ALICE),
            hash(BOB),
            hash(OPS)
        );
        one_store(&toml).await;
    }
}

async fn one_store(toml: &str) {
    let alice = Some(ALICE);
    let bob = Some(BOB);
    let up = FakeOpenAi::start(vec![
        Reply::Sse(tool_call_turn(
            "call_1",
            "get_weather",
            r#"{"city":"Paris"}"#,
        )),
        Reply::Sse(text_chunks("It is sunny in Paris.")),
        Reply::Sse(text_chunks("You asked about Paris.")),
    ])
    .await;
    let gw = Gateway::start(toml).await;
    let post = reqwest::Method::POST;
    let get = reqwest::Method::GET;
    let (status, reg) = call(
        &gw,
        post.clone(),
        "/_plugins/_ml/agents/_register",
        Some(json!({
            "name": "weather", "type": "conversational",
            "model": {"model_id": "gpt-test", "model_provider": "openai/v1/chat/completions",
                      "credential": {"openAI_key": "sk-x"}, "model_parameters": {"base_url": up.base_url()}},
            "memory": {"type": "conversation_index"},
            "tools": [{"type": "http", "name": "get_weather", "url": format!("http://{}/weather", up.addr),
                       "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]
        })),
        Some(OPS),
    )
    .await;
    assert_eq!(status, 200, "{reg}");
    let agent = reg["agent_id"].as_str().unwrap();
    let exec = format!("/_plugins/_ml/agents/{agent}/_execute");
    let (status, first) = call(
        &gw,
        post.clone(),
        &exec,
        Some(json!({"parameters": {"question": "Weather in Paris?"}})),
        alice,
    )
    .await;
    assert_eq!(status, 200, "{first}");
    let memory_id = output(&first, "memory_id").to_string();
    let first_message = output(&first, "parent_message_id").to_string();
    let (status, second) = call(
        &gw,
        post.clone(),
        &exec,
        Some(json!({"parameters": {"question": "What did I ask?", "memory_id": memory_id}})),
        alice,
    )
    .await;
    assert_eq!(status, 200, "{second}");
    let second_message = output(&second, "parent_message_id").to_string();

    let (status, m) = call(
        &gw,
        get.clone(),
        &format!("/_plugins/_ml/memory/{memory_id}"),
        None,
        alice,
    )
    .await;
    assert_eq!(status, 200, "{m}");
    assert_eq!(m["memory_id"], memory_id.as_str());
    assert_eq!(m["name"], "Weather in Paris?");
    assert_eq!(m["user"], "alice-cm");
    assert!(
        m["create_time"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{m}"
    );

    let (status, list) = call(
        &gw,
        get.clone(),
        &format!("/_plugins/_ml/memory/{memory_id}/messages"),
        None,
        alice,
    )
    .await;
    assert_eq!(status, 200, "{list}");
    let messages = list["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "{list}");
    assert_eq!(messages[0]["message_id"], first_message.as_str());
    assert_eq!(messages[0]["input"], "Weather in Paris?");
    assert_eq!(messages[0]["response"], "It is sunny in Paris.");
    assert_eq!(messages[1]["message_id"], second_message.as_str());
    assert_eq!(messages[1]["response"], "You asked about Paris.");
    let (_, paged) = call(
        &gw,
        get.clone(),
        &format!("/_plugins/_ml/memory/{memory_id}/messages?max_results=1"),
        None,
        alice,
    )
    .await;
    assert_eq!(paged["messages"].as_array().unwrap().len(), 1);
    assert_eq!(paged["next_token"], 1);
    let (_, page2) = call(
        &gw,
        get.clone(),
        &format!("/_plugins/_ml/memory/{memory_id}/messages?max_results=1&next_token=1"),
        None,
        alice,
    )
    .await;
    assert_eq!(page2["messages"][0]["message_id"], second_message.as_str());
    assert!(page2.get("next_token").is_none(), "{page2}");

    let (status, one) = call(
        &gw,
        get.clone(),
        &format!("/_plugins/_ml/memory/message/{first_message}"),
        None,
        alice,
    )
    .await;
    assert_eq!(status, 200, "{one}");
    assert_eq!(one["memory_id"], memory_id.as_str());
    assert_eq!(one["response"], "It is sunny in Paris.");
    let (status, traces) = call(
        &gw,
        get.clone(),
        &format!("/_plugins/_ml/memory/message/{first_message}/traces"),
        None,
        alice,
    )
    .await;
    assert_eq!(status, 200, "{traces}");
    let t = &traces["traces"][0];
    assert_eq!(t["origin"], "get_weather", "{traces}");
    assert_eq!(t["trace_number"], 1);
    assert_eq!(t["parent_message_id"], first_message.as_str());
    assert!(t["input"].as_str().unwrap().contains("Paris"), "{traces}");
    assert!(
        t["response"].as_str().unwrap().contains("sunny"),
        "{traces}"
    );
    let (_, none) = call(
        &gw,
        get.clone(),
        &format!("/_plugins/_ml/memory/message/{second_message}/traces"),
        None,
        alice,
    )
    .await;
    assert_eq!(none["traces"], json!([]));

    let (status, found) = call(
        &gw,
        post.clone(),
        "/_plugins/_ml/memory/_search",
        Some(json!({"query": {"match": {"name": "paris"}}})),
        alice,
    )
    .await;
    assert_eq!(status, 200, "{found}");
    assert_eq!(found["hits"]["total"]["value"], 1, "{found}");
    assert_eq!(found["hits"]["hits"][0]["_id"], memory_id.as_str());
    let (status, found) = call(
        &gw,
        post.clone(),
        &format!("/_plugins/_ml/memory/{memory_id}/_search"),
        Some(json!({"query": {"match": {"input": "ask"}}})),
        alice,
    )
    .await;
    assert_eq!(status, 200, "{found}");
    assert_eq!(found["hits"]["total"]["value"], 1, "{found}");
    assert_eq!(found["hits"]["hits"][0]["_id"], second_message.as_str());

    // Bob sees none of it.
    for path in [
        format!("/_plugins/_ml/memory/{memory_id}"),
        format!("/_plugins/_ml/memory/{memory_id}/messages"),
        format!("/_plugins/_ml/memory/message/{first_message}"),
        format!("/_plugins/_ml/memory/message/{first_message}/traces"),
    ] {
        let (status, body) = call(&gw, get.clone(), &path, None, bob).await;
        assert_eq!(status, 404, "{path}: {body}");
        assert_eq!(body["status"], 404, "{body}");
    }
    let (_, list) = call(&gw, get.clone(), "/_plugins/_ml/memory", None, bob).await;
    assert_eq!(list["memories"], json!([]), "{list}");
    let (_, list) = call(&gw, get.clone(), "/_plugins/_ml/memory", None, alice).await;
    assert_eq!(
        list["memories"][0]["memory_id"],
        memory_id.as_str(),
        "{list}"
    );
    let (status, _) = call(
        &gw,
        reqwest::Method::DELETE,
        &format!("/_plugins/_ml/memory/{memory_id}"),
        None,
        bob,
    )
    .await;
    assert_eq!(status, 404);

    let (status, gone) = call(
        &gw,
        reqwest::Method::DELETE,
        &format!("/_plugins/_ml/memory/{memory_id}"),
        None,
        alice,
    )
    .await;
    assert_eq!(status, 200, "{gone}");
    assert_eq!(gone["success"], true);
    let (status, _) = call(
        &gw,
        get.clone(),
        &format!("/_plugins/_ml/memory/{memory_id}"),
        None,
        alice,
    )
    .await;
    assert_eq!(status, 404);
    let (status, _) = call(
        &gw,
        get,
        &format!("/_plugins/_ml/memory/message/{first_message}"),
        None,
        alice,
    )
    .await;
    assert_eq!(status, 404);
}
