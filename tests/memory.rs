/// Threads are stored: re-sent histories are deduplicated, a reload (empty `messages`) gets the
/// stored thread back as MESSAGES_SNAPSHOT, threads survive a restart, the server-history mode
/// takes only new messages, the history limit never separates a call from its result, and a
/// failed run keeps what completed.
mod common;

use common::*;
use serde_json::{Value, json};

fn scripted(data_dir: &std::path::Path, memory: &str) -> String {
    format!(
        r#"
data_dir = "{}"
[[agents]]
id = "m"
{memory}
[agents.model]
provider = "scripted"
[[agents.tools]]
type = "builtin"
name = "calculator"
"#,
        data_dir.display()
    )
}

fn ids(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn client_history_is_saved_once_and_a_reload_gets_the_thread_back_even_after_a_restart() {
    let dir = temp_dir("mem");
    let gw = Gateway::start(&scripted(&dir, "")).await;
    let first = json!([{"id": "u1", "role": "user", "content": "please calculate 6*7"}]);
    let events = gw.run("m", &run_input("th-1", first.clone())).await;
    let call = of_type(&events, "TOOL_CALL_START")[0].clone();
    let answer = of_type(&events, "TEXT_MESSAGE_START")[0]["messageId"].clone();

    // Reload: no messages, the stored thread comes back as the client built it.
    let events = gw
        .run(
            "m",
            &json!({"threadId": "th-1", "runId": "r-reload", "messages": []}),
        )
        .await;
    assert_eq!(
        types(&events),
        ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    );
    let snapshot = events[1]["messages"].as_array().unwrap().clone();
    let roles: Vec<&str> = snapshot
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["user", "reasoning", "assistant", "tool", "assistant"]
    );
    assert_eq!(snapshot[2]["id"], call["parentMessageId"]);
    assert_eq!(
        snapshot[2]["toolCalls"][0]["function"]["arguments"],
        r#"{"expression":"6*7"}"#
    );
    assert_eq!(snapshot[3]["content"], "42");
    assert_eq!(snapshot[4]["id"], answer);
    assert_eq!(snapshot[4]["content"], "The result is 42.");

    // The client re-sends that history with one more message: nothing is duplicated.
    // One message was edited on the client: the new version replaces the stored one in place.
    let mut next = snapshot.clone();
    next[0]["content"] = json!("please calculate 6*7 (edited)");
    next.push(json!({"id": "u2", "role": "user", "content": "hello"}));
    gw.run("m", &run_input("th-1", Value::Array(next))).await;
    drop(gw);

    // A new gateway on the same data directory still has the thread.
    let gw = Gateway::start(&scripted(&dir, "")).await;
    let events = gw
        .run(
            "m",
            &json!({"threadId": "th-1", "runId": "r-reload-2", "messages": []}),
        )
        .await;
    let restored = events[1]["messages"].as_array().unwrap().clone();
    let mut expected = ids(&snapshot);
    expected.push("u2".into());
    assert_eq!(ids(&restored)[..6], expected[..]);
    assert_eq!(restored[0]["content"], "please calculate 6*7 (edited)");
    assert_eq!(restored.len(), 7, "u2's answer was stored too");
    let unique: std::collections::HashSet<_> = ids(&restored).into_iter().collect();
    assert_eq!(unique.len(), 7);
    // Other agents' threads and opted-out agents see nothing.
    let gw2 = Gateway::start(&scripted(&dir, "[agents.memory]\nstore = false")).await;
    let events = gw2
        .run(
            "m",
            &json!({"threadId": "th-1", "runId": "r-x", "messages": []}),
        )
        .await;
    assert_eq!(types(&events), ["RUN_STARTED", "RUN_FINISHED"]);
}

#[tokio::test]
async fn server_history_takes_only_new_messages_and_pending_tool_results() {
    let up = FakeOpenAi::start(vec![
        Reply::Sse(text_chunks("First answer.")),
        Reply::Sse(tool_call_turn(
            "call_f",
            "change_background",
            r#"{"background":"red"}"#,
        )),
        Reply::Sse(text_chunks("Red it is.")),
    ])
    .await;
    let config = up.config("[agents.memory]\nhistory = \"server\"");
    let gw = Gateway::start(&config).await;
    gw.run(
        "a",
        &run_input(
            "th-s",
            json!([{"id": "u1", "role": "user", "content": "hi"}]),
        ),
    )
    .await;
    // The client sends only its new message; the model still sees the whole thread.
    let mut body = run_input(
        "th-s",
        json!([{"id": "u2", "role": "user", "content": "make it red"}]),
    );
    body["tools"] = json!([{"name": "change_background", "description": "bg"}]);
    gw.run("a", &body).await;
    let msgs = up.requests()[1]["messages"].as_array().unwrap().clone();
    let texts: Vec<String> = msgs.iter().map(|m| m["content"].to_string()).collect();
    assert!(
        texts[1].contains("hi")
            && texts[2].contains("First answer")
            && texts[3].contains("make it red"),
        "{texts:?}"
    );
    // A result for a call that is not pending is ignored; the pending one is taken.
    let mut body = run_input(
        "th-s",
        json!([
            {"id": "t-bogus", "role": "tool", "toolCallId": "nope", "content": "ignored"},
            {"id": "t-ok", "role": "tool", "toolCallId": "call_f", "content": "done"}
        ]),
    );
    body["tools"] = json!([{"name": "change_background", "description": "bg"}]);
    let events = gw.run("a", &body).await;
    assert_eq!(text(&events), "Red it is.");
    let msgs = up.requests()[2]["messages"].as_array().unwrap().clone();
    let tools: Vec<&Value> = msgs.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0]["content"], "done");
}

#[tokio::test]
async fn the_history_limit_keeps_calls_with_their_results() {
    let up = FakeOpenAi::start(vec![Reply::Sse(text_chunks("ok"))]).await;
    let gw = Gateway::start(&up.config("[agents.memory]\nmessage_history_limit = 1")).await;
    let body = run_input(
        "th-lim",
        json!([
            {"id": "u0", "role": "user", "content": "older question"},
            {"id": "a0", "role": "assistant", "content": "older answer"},
            {"id": "u1", "role": "user", "content": "old question"},
            {"id": "a1", "role": "assistant", "toolCalls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
            {"id": "t1", "role": "tool", "toolCallId": "c1", "content": "sunny"},
            {"id": "u2", "role": "user", "content": "and now?"}
        ]),
    );
    gw.run("a", &body).await;
    let msgs = up.requests()[0]["messages"].as_array().unwrap().clone();
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "user"],
        "one interaction (question, call, result) before the current question"
    );
}

#[tokio::test]
async fn a_failed_run_keeps_the_messages_that_completed() {
    let up = FakeOpenAi::start(vec![
        Reply::Sse(tool_call_turn(
            "call_w",
            "get_weather",
            r#"{"city":"Rome"}"#,
        )),
        Reply::Cut(vec![
            json!({"choices": [{"index": 0, "delta": {"content": "Half"}}]}),
        ]),
    ])
    .await;
    let config = up.config("").replace(
        "retry_initial_backoff_ms = 5",
        "retry_initial_backoff_ms = 5\nmax_retries = 0",
    );
    let gw = Gateway::start(&config).await;
    let events = gw
        .run(
            "a",
            &run_input(
                "th-err",
                json!([{"id": "u1", "role": "user", "content": "Rome?"}]),
            ),
        )
        .await;
    assert_eq!(events.last().unwrap()["type"], "RUN_ERROR");
    let events = gw
        .run(
            "a",
            &json!({"threadId": "th-err", "runId": "r2", "messages": []}),
        )
        .await;
    let stored = events[1]["messages"].as_array().unwrap().clone();
    let roles: Vec<&str> = stored.iter().map(|m| m["role"].as_str().unwrap()).collect();
    // The user message, the completed call and its result; the cut text is not kept.
    assert_eq!(roles, ["user", "assistant", "tool"]);
}

#[tokio::test]
async fn memory_containers_are_served_by_the_gateway() {
    let dir = temp_dir("mc");
    let gw = Gateway::start(&scripted(&dir, "")).await;
    let client = reqwest::Client::new();
    let created: Value = client
        .post(gw.url("/_plugins/_ml/memory_containers/_create"))
        .json(&json!({"name": "support", "description": "support bot memory"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["memory_container_id"]
        .as_str()
        .expect("an id")
        .to_string();
    let got = client
        .get(gw.url(&format!("/_plugins/_ml/memory_containers/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(got.status(), 200);
    let gone = client
        .get(gw.url("/_plugins/_ml/memory_containers/nope"))
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), 404);
}

#[tokio::test]
async fn an_agent_can_keep_its_threads_in_a_memory_container() {
    let dir = temp_dir("mc-agent");
    let gw = Gateway::start(&scripted(&dir, "")).await;
    let client = reqwest::Client::new();
    let created: Value = client
        .post(gw.url("/_plugins/_ml/memory_containers/_create"))
        .json(&json!({"name": "threads"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let container = created["memory_container_id"].as_str().unwrap().to_string();
    drop(gw);
    let memory = format!(
        "[agents.memory]\ntype = \"agentic_memory\"\nmemory_container_id = \"{container}\""
    );
    let gw = Gateway::start(&scripted(&dir, &memory)).await;
    let first = json!([{"id": "u1", "role": "user", "content": "hello"}]);
    let events = gw.run("m", &run_input("mc-thread", first.clone())).await;
    let answer = of_type(&events, "TEXT_MESSAGE_START")[0]["messageId"].clone();
    // Re-sending the history stores nothing twice.
    let mut again = first.as_array().unwrap().clone();
    again.push(json!({"id": answer, "role": "assistant", "content": text(&events)}));
    again.push(json!({"id": "u2", "role": "user", "content": "hi again"}));
    gw.run("m", &run_input("mc-thread", Value::Array(again)))
        .await;
    let reload = gw
        .run(
            "m",
            &json!({"threadId": "mc-thread", "runId": "r-reload", "messages": []}),
        )
        .await;
    let ids = ids(reload[1]["messages"].as_array().unwrap());
    assert_eq!(ids.len(), 4, "{ids:?}");
    assert_eq!(
        &ids[..3],
        &[
            "u1".to_string(),
            answer.as_str().unwrap().to_string(),
            "u2".to_string()
        ]
    );
    // The messages are working memories of the thread's session in the container.
    let hits: Value = client
        .get(gw.url(&format!("/_plugins/_ml/memory_containers/{container}/memories/working/_search?namespace.session_id=mc-thread&size=50")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(hits["hits"]["total"]["value"], 4, "{hits}");
}

#[tokio::test]
async fn snapshot_on_finish_ends_every_run_with_the_whole_thread() {
    let dir = temp_dir("snap");
    let gw = Gateway::start(&scripted(
        &dir,
        "[agents.memory]\nsnapshot_on_finish = true",
    ))
    .await;
    let events = gw
        .run(
            "m",
            &run_input(
                "snap-1",
                json!([{"id": "u1", "role": "user", "content": "hello"}]),
            ),
        )
        .await;
    let t = types(&events);
    assert_eq!(
        &t[t.len() - 3..],
        ["MESSAGES_SNAPSHOT", "CUSTOM", "RUN_FINISHED"]
    );
    let snapshot = of_type(&events, "MESSAGES_SNAPSHOT")[0]["messages"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(snapshot.len(), 2);
    assert_eq!(snapshot[1]["content"], text(&events));
}
