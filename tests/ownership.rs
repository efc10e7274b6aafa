/// Threads, runs, async tasks and conversations belong to the API key that made them: another
/// key gets 404 (never their messages, events or results) and cannot run on them, an admin key
/// reaches them, and `/agents` lists only what the key may run. On SQLite, and on PostgreSQL
/// when `AGUI_TEST_PG` is set.
mod common;

use common::*;
use serde_json::{Value, json};

const ALICE: &str = "alice-key-0123456789abcdef";
const BOB: &str = "bob-key-0123456789abcdef00";
const OPS: &str = "ops-key-fedcba9876543210";

fn hash(key: &str) -> String {
    agui_gateway::config::auth::hex(&agui_gateway::config::auth::hash_key(key))
}

/// One gateway per store: SQLite always, PostgreSQL when the suite has one.
async fn gateways() -> Vec<Gateway> {
    let mut stores = vec![String::new()];
    if let Some(url) = test_pg("ownership on the PostgreSQL store") {
        stores.push(format!("[store]\nurl = \"{url}\"\n"));
    }
    let mut out = Vec::new();
    for store in stores {
        let toml = format!(
            r#"
{store}
[[auth.keys]]
name = "alice"
sha256 = "{alice}"
agents = ["x", "y"]
[[auth.keys]]
name = "bob"
sha256 = "{bob}"
agents = ["x"]
[[auth.keys]]
name = "ops"
sha256 = "{ops}"
admin = true
[[agents]]
id = "x"
[agents.model]
provider = "scripted"
[[agents]]
id = "y"
[agents.model]
provider = "scripted"
[agents.memory]
type = "agentic_memory"
memory_container_id = "operator-container"
"#,
            alice = hash(ALICE),
            bob = hash(BOB),
            ops = hash(OPS),
        );
        out.push(Gateway::start(&toml).await);
    }
    out
}

fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

async fn run_as(gw: &Gateway, key: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(gw.url("/agents/x/agui"))
        .header("accept", "text/event-stream")
        .bearer_auth(key)
        .json(body)
        .send()
        .await
        .unwrap()
}

/// The stored thread as `key` sees it on a page reload (`messages: []`).
async fn snapshot_as(gw: &Gateway, key: &str, thread: &str) -> Vec<Value> {
    let r = run_as(gw, key, &run_input(thread, json!([]))).await;
    assert_eq!(r.status(), 200, "{:?}", r.text().await);
    let events = read_events(r, false).await;
    of_type(&events, "MESSAGES_SNAPSHOT")
        .first()
        .map(|s| s["messages"].as_array().unwrap().clone())
        .unwrap_or_default()
}

async fn assert_not_found(r: reqwest::Response, secret: &str) {
    assert_eq!(r.status(), 404);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    let body = r.text().await.unwrap();
    assert!(!body.contains(secret), "{body}");
    assert!(!body.contains("MESSAGES_SNAPSHOT"), "{body}");
}

async fn get_as(gw: &Gateway, key: &str, path: &str) -> reqwest::Response {
    reqwest::Client::new()
        .get(gw.url(path))
        .bearer_auth(key)
        .send()
        .await
        .unwrap()
}

async fn post_json_as(gw: &Gateway, key: &str, path: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(gw.url(path))
        .bearer_auth(key)
        .json(body)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn another_keys_thread_and_runs_are_not_found_and_stay_unchanged() {
    for gw in gateways().await {
        let kind = gw.state.store.kind();
        let thread = unique("t");
        let alice_run = unique("run");
        let body = json!({"threadId": thread, "runId": alice_run,
            "messages": [{"id": "u1", "role": "user", "content": "alice's secret plan"}]});
        let r = run_as(&gw, ALICE, &body).await;
        assert_eq!(r.status(), 200, "{kind}");
        let events = read_events(r, false).await;
        assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED", "{kind}");
        let stored = snapshot_as(&gw, ALICE, &thread).await;
        assert_eq!(stored.len(), 2, "{kind}: {stored:?}");

        // Bob's reload of Alice's thread: 404 JSON before any stream, no snapshot.
        let r = run_as(&gw, BOB, &run_input(&thread, json!([]))).await;
        assert_not_found(r, "secret plan").await;
        // Bob's run on it: refused before streaming; the thread is unchanged.
        let r = run_as(
            &gw,
            BOB,
            &run_input(
                &thread,
                json!([{"id": "b1", "role": "user", "content": "bob was here"}]),
            ),
        )
        .await;
        assert_not_found(r, "secret plan").await;
        let after = gw.state.store.load_thread("x", &thread).await.unwrap();
        let bodies: Vec<Value> = after.into_iter().map(|m| m.body).collect();
        assert_eq!(bodies, stored, "{kind}");
        // Bob cannot replay Alice's run, nor write into its event log under its id.
        let events_path = format!("/agents/x/agui/runs/{alice_run}/events");
        assert_not_found(get_as(&gw, BOB, &events_path).await, "secret plan").await;
        let reuse = json!({"threadId": unique("bob"), "runId": alice_run,
            "messages": [{"id": "b2", "role": "user", "content": "hi"}]});
        assert_not_found(run_as(&gw, BOB, &reuse).await, "secret plan").await;
        // Alice replays her own run.
        let r = get_as(&gw, ALICE, &events_path).await;
        assert_eq!(r.status(), 200, "{kind}");
        let replayed = read_events(r, false).await;
        assert_eq!(replayed.last().unwrap()["type"], "RUN_FINISHED", "{kind}");
        // An admin key reaches Alice's thread and run.
        assert_eq!(snapshot_as(&gw, OPS, &thread).await, stored, "{kind}");
        assert_eq!(get_as(&gw, OPS, &events_path).await.status(), 200);
        // Bob's own thread is his.
        let own = unique("bob");
        let r = run_as(&gw, BOB, &user_says_hi(&own)).await;
        assert_eq!(r.status(), 200, "{kind}");
        read_events(r, false).await;
        assert_eq!(snapshot_as(&gw, BOB, &own).await.len(), 2, "{kind}");
        wait_no_runs(&gw).await;
    }
}

/// Another key cannot stop a run (`DELETE .../runs/{runId}`): 404, and the run goes on to its
/// end; its owner can.
#[tokio::test]
async fn another_key_cannot_stop_a_run() {
    for gw in gateways().await {
        let kind = gw.state.store.kind();
        let stop = |run: &str, key: &'static str| {
            let url = gw.url(&format!("/agents/x/agui/runs/{run}"));
            async move {
                reqwest::Client::new()
                    .delete(url)
                    .bearer_auth(key)
                    .send()
                    .await
                    .unwrap()
            }
        };
        let run = unique("run");
        let body = json!({"threadId": unique("t"), "runId": run,
            "messages": [{"id": "u1", "role": "user", "content": "hello"}]});
        let mut r = run_as(&gw, ALICE, &body).await;
        assert_eq!(r.status(), 200, "{kind}");
        let seen = read_until(&mut r, "TEXT_MESSAGE_CONTENT").await;
        assert_not_found(stop(&run, BOB).await, "hello").await;
        let events = read_events_after(seen, r, false).await;
        assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED", "{kind}");

        let run = unique("run");
        let body = json!({"threadId": unique("t"), "runId": run,
            "messages": [{"id": "u1", "role": "user", "content": "hello"}]});
        let mut r = run_as(&gw, ALICE, &body).await;
        let seen = read_until(&mut r, "TEXT_MESSAGE_CONTENT").await;
        assert_eq!(stop(&run, ALICE).await.status(), 204, "{kind}");
        let events = read_events_after(seen, r, false).await;
        assert_eq!(events.last().unwrap()["code"], "CANCELLED", "{kind}");
        wait_no_runs(&gw).await;
    }
}

#[tokio::test]
async fn another_keys_task_and_memory_are_not_found() {
    for gw in gateways().await {
        let kind = gw.state.store.kind();
        let r = post_json_as(
            &gw,
            ALICE,
            "/_plugins/_ml/agents/x/_execute?async=true",
            &json!({"parameters": {"question": "alice's secret question"}}),
        )
        .await;
        assert_eq!(r.status(), 200, "{kind}");
        let started: Value = r.json().await.unwrap();
        let task = started["task_id"].as_str().unwrap().to_string();
        let memory_id = started["response"]["memory_id"]
            .as_str()
            .unwrap()
            .to_string();
        let task_path = format!("/_plugins/_ml/tasks/{task}");
        // Alice follows her task to its end.
        let mut done = Value::Null;
        for _ in 0..500 {
            let r = get_as(&gw, ALICE, &task_path).await;
            assert_eq!(r.status(), 200, "{kind}");
            done = r.json().await.unwrap();
            if done["state"] != "RUNNING" {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(done["state"], "COMPLETED", "{kind}: {done}");
        // Bob's read of Alice's task: 404; an admin's: the task.
        let r = get_as(&gw, BOB, &task_path).await;
        assert_eq!(r.status(), 404, "{kind}");
        let text = r.text().await.unwrap();
        assert!(!text.contains("COMPLETED"), "{text}");
        let r = get_as(&gw, OPS, &task_path).await;
        assert_eq!(r.status(), 200, "{kind}");

        // Bob naming Alice's conversation is refused, and it stays as it was.
        let before = gw.state.store.load_thread("x", &memory_id).await.unwrap();
        assert_eq!(before.len(), 2, "{kind}");
        for path in [
            "/_plugins/_ml/agents/x/_execute",
            "/_plugins/_ml/agents/x/_execute?async=true",
        ] {
            let r = post_json_as(
                &gw,
                BOB,
                path,
                &json!({"parameters": {"question": "what did alice say?", "memory_id": memory_id}}),
            )
            .await;
            assert_eq!(r.status(), 404, "{kind} {path}");
            let text = r.text().await.unwrap();
            assert!(!text.contains("secret"), "{text}");
        }
        let r = reqwest::Client::new()
            .post(gw.url("/_plugins/_ml/agents/x/_execute/stream"))
            .bearer_auth(BOB)
            .json(&run_input(&memory_id, json!([])))
            .send()
            .await
            .unwrap();
        assert_not_found(r, "secret").await;
        let after = gw.state.store.load_thread("x", &memory_id).await.unwrap();
        assert_eq!(after, before, "{kind}");
        // Alice goes on with it.
        let r = post_json_as(
            &gw,
            ALICE,
            "/_plugins/_ml/agents/x/_execute",
            &json!({"parameters": {"question": "and then?", "memory_id": memory_id}}),
        )
        .await;
        assert_eq!(r.status(), 200, "{kind}: {:?}", r.text().await);
        wait_no_runs(&gw).await;
    }
}

/// Ids with a NUL are refused before they reach the store (PostgreSQL refuses them as keys).
#[tokio::test]
async fn nul_in_a_memory_id_or_container_id_is_a_client_error() {
    for gw in gateways().await {
        let kind = gw.state.store.kind();
        for (agent, params, status) in [
            ("x", json!({"question": "q", "memory_id": "m\u{0}x"}), 400),
            (
                "y",
                json!({"question": "q", "memory_container_id": "c\u{0}x"}),
                404,
            ),
        ] {
            let r = post_json_as(
                &gw,
                ALICE,
                &format!("/_plugins/_ml/agents/{agent}/_execute"),
                &json!({ "parameters": params }),
            )
            .await;
            assert_eq!(r.status().as_u16(), status, "{kind} {params}");
        }
    }
}

#[tokio::test]
async fn memory_containers_record_their_creator_and_other_keys_cannot_borrow_them() {
    for gw in gateways().await {
        let kind = gw.state.store.kind();
        let r = post_json_as(
            &gw,
            OPS,
            "/_plugins/_ml/memory_containers/_create",
            &json!({"name": "ops memory"}),
        )
        .await;
        assert_eq!(r.status(), 200, "{kind}");
        let id = r.json::<Value>().await.unwrap()["memory_container_id"]
            .as_str()
            .unwrap()
            .to_string();
        let container = gw.state.store.container(&id).await.unwrap().unwrap();
        assert_eq!(container.owner.as_deref(), Some("ops"), "{kind}");
        // A run naming the container in its parameters: refused to another key, before it
        // reads or writes a session there; an admin may.
        let borrow = |thread: &str| {
            json!({"threadId": thread, "runId": unique("run"),
                "messages": [{"id": "u1", "role": "user", "content": "hi"}],
                "forwardedProps": {"parameters": {"memory_container_id": id}}})
        };
        let thread = unique("borrow");
        let r = reqwest::Client::new()
            .post(gw.url("/agents/y/agui"))
            .bearer_auth(ALICE)
            .json(&borrow(&thread))
            .send()
            .await
            .unwrap();
        assert_not_found(r, "ops memory").await;
        let page = agui_gateway::store::memory::Page {
            from: 0,
            size: 10,
            sort: agui_gateway::store::memory::SortKey::Created,
            descending: false,
        };
        let held = gw
            .state
            .store
            .search_working_memory(&id, &Default::default(), page)
            .await
            .unwrap();
        assert_eq!(held.total, 0, "{kind}");
        let r = reqwest::Client::new()
            .post(gw.url("/agents/y/agui"))
            .bearer_auth(OPS)
            .json(&borrow(&thread))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{kind}");
        read_events(r, false).await;
        wait_no_runs(&gw).await;
    }
}

#[tokio::test]
async fn agents_lists_only_what_the_key_may_run() {
    for gw in gateways().await {
        let ids = |v: Value| -> Vec<String> {
            v["agents"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a["id"].as_str().unwrap().to_string())
                .collect()
        };
        let listed = |key: &'static str| {
            let gw = &gw;
            async move {
                let r = get_as(gw, key, "/agents").await;
                assert_eq!(r.status(), 200);
                ids(r.json().await.unwrap())
            }
        };
        assert_eq!(listed(BOB).await, ["x"]);
        assert_eq!(listed(ALICE).await, ["x", "y"]);
        // An admin sees every agent, registered ones too (other tests' on a shared PostgreSQL).
        let all = listed(OPS).await;
        assert_eq!(all[..2], ["x", "y"], "{all:?}");
    }
}
