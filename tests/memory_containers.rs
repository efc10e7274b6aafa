/// The agentic memory API keeps structured (multimodal) messages whole in working memory,
/// isolates sessions, agents and users by namespace, pages in insertion order, and answers
/// unknown ids with 404 and malformed bodies with 400s naming the field; on SQLite and (with
/// `AGUI_TEST_PG`) PostgreSQL.
mod common;

use std::net::SocketAddr;
use std::sync::Arc;

use agui_gateway::store::memory::MemoryStore;
use agui_gateway::store::sql::SqlStore;
use reqwest::{Client, Method, StatusCode};
use serde_json::{Value, json};

const BASE: &str = "/_plugins/_ml/memory_containers";

/// A memory API server over one store.
struct Server {
    addr: SocketAddr,
    kind: &'static str,
    http: Client,
}

async fn serve(store: Arc<dyn MemoryStore>, kind: &'static str) -> Server {
    let app: axum::Router = agui_gateway::api::memory::routes_with(store);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Server {
        addr,
        kind,
        http: Client::new(),
    }
}

async fn servers() -> Vec<Server> {
    let dir = common::temp_dir("memory-containers");
    let sqlite = SqlStore::open_sqlite(&dir.join("agui.db")).await.unwrap();
    let mut out = vec![serve(Arc::new(sqlite), "sqlite").await];
    if let Some(url) = common::test_pg("the PostgreSQL memory store") {
        let pg = SqlStore::connect_postgres(&url)
            .await
            .expect("AGUI_TEST_PG must point at a running PostgreSQL");
        out.push(serve(Arc::new(pg), "postgres").await);
    }
    out
}

impl Server {
    /// Sends `body` (JSON, raw text, or nothing) and returns the status and JSON answer.
    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut req = self
            .http
            .request(method, format!("http://{}{path}", self.addr));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        let text = resp.text().await.unwrap();
        let value = serde_json::from_str(&text)
            .unwrap_or_else(|_| panic!("{}: {path}: not JSON: {text}", self.kind));
        (status, value)
    }

    async fn raw(&self, path: &str, body: &str) -> (StatusCode, Value) {
        let resp = self
            .http
            .post(format!("http://{}{path}", self.addr))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        let status = resp.status();
        (status, resp.json().await.unwrap())
    }

    async fn ok(&self, method: Method, path: &str, body: Option<Value>) -> Value {
        let (status, v) = self.call(method, path, body).await;
        assert_eq!(status, StatusCode::OK, "{}: {path}: {v}", self.kind);
        v
    }

    async fn container(&self, config: Value) -> String {
        let v = self
            .ok(
                Method::POST,
                &format!("{BASE}/_create"),
                Some(json!({
                    "name": "agentic memory test",
                    "description": "Store conversations with semantic search and summarization",
                    "configuration": config,
                })),
            )
            .await;
        assert_eq!(v["status"], "created", "{v}");
        v["memory_container_id"].as_str().unwrap().to_string()
    }

    async fn add(&self, container: &str, body: Value) -> Value {
        self.ok(
            Method::POST,
            &format!("{BASE}/{container}/memories"),
            Some(body),
        )
        .await
    }

    async fn search(&self, container: &str, kind: &str, query: &str, body: Option<Value>) -> Value {
        let method = if body.is_some() {
            Method::POST
        } else {
            Method::GET
        };
        self.ok(
            method,
            &format!("{BASE}/{container}/memories/{kind}/_search{query}"),
            body,
        )
        .await
    }
}

fn text(role: &str, t: &str) -> Value {
    json!({"role": role, "content": [{"type": "text", "text": t}]})
}

fn texts(hits: &Value) -> Vec<String> {
    hits["hits"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|h| h["_source"]["messages"].as_array().unwrap().clone())
        .map(|m| m["content"][0]["text"].as_str().unwrap().to_string())
        .collect()
}

fn total(hits: &Value) -> i64 {
    hits["hits"]["total"]["value"].as_i64().unwrap()
}

#[tokio::test]
async fn containers_are_created_read_and_deleted_with_their_memories() {
    for s in servers().await {
        let config = json!({"disable_session": true, "strategies": [{"type": "SEMANTIC", "namespace": ["user_id"]}]});
        let id = s.container(config.clone()).await;
        let got = s.ok(Method::GET, &format!("{BASE}/{id}"), None).await;
        assert_eq!(got["name"], "agentic memory test", "{}", s.kind);
        assert_eq!(
            got["description"],
            "Store conversations with semantic search and summarization"
        );
        assert_eq!(got["configuration"], config);
        assert!(got["created_time"].as_i64().unwrap() > 1_700_000_000_000);

        let listed = s
            .ok(
                Method::POST,
                &format!("{BASE}/_search"),
                Some(json!({"query": {"match_all": {}}, "size": 1000})),
            )
            .await;
        assert!(
            listed["hits"]["hits"]
                .as_array()
                .unwrap()
                .iter()
                .any(|h| h["_id"] == id.as_str() && h["_source"]["name"] == "agentic memory test"),
            "{}: {listed}",
            s.kind
        );

        let added = s
            .add(
                &id,
                json!({"messages": [text("user", "hi")], "namespace": {"session_id": "s1"}}),
            )
            .await;
        let deleted = s.ok(Method::DELETE, &format!("{BASE}/{id}"), None).await;
        assert_eq!(deleted, json!({"_id": id, "result": "deleted"}));
        let (status, err) = s.call(Method::GET, &format!("{BASE}/{id}"), None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{}", s.kind);
        assert_eq!(err["error"]["type"], "not_found");
        // Its memories went with it.
        let wid = added["working_memory_id"].as_str().unwrap();
        let (status, _) = s
            .call(
                Method::GET,
                &format!("{BASE}/{id}/memories/working/{wid}"),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let (status, _) = s.call(Method::DELETE, &format!("{BASE}/{id}"), None).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }
}

#[tokio::test]
async fn sessions_are_isolated_by_namespace_and_paged_in_order() {
    for s in servers().await {
        let c = s.container(json!({})).await;
        // Two sessions of one user and agent, interleaved, plus another user's session.
        for i in 0..5 {
            for session in ["a", "b"] {
                let added = s
                    .add(
                        &c,
                        json!({
                            "messages": [text("user", &format!("{session}{i}"))],
                            "namespace": {"agent_id": "agent1", "session_id": session, "user_id": "bob"},
                            "metadata": {"turn": i},
                        }),
                    )
                    .await;
                assert_eq!(added["session_id"], session, "{}", s.kind);
            }
        }
        s.add(
            &c,
            json!({"messages": [text("user", "alice's")], "namespace": {"agent_id": "agent1", "session_id": "c", "user_id": "alice"}}),
        )
        .await;

        // A session's messages, in order, paged with from/size in the query string.
        let page1 = s
            .search(&c, "working", "?namespace.session_id=a&size=2", None)
            .await;
        assert_eq!(texts(&page1), ["a0", "a1"], "{}", s.kind);
        assert_eq!(total(&page1), 5);
        let page3 = s
            .search(&c, "working", "?namespace.session_id=a&from=4&size=2", None)
            .await;
        assert_eq!(texts(&page3), ["a4"]);
        let hit = &page3["hits"]["hits"][0];
        assert_eq!(hit["_source"]["message_id"], 4, "{}: {hit}", s.kind);
        assert_eq!(hit["_source"]["namespace_size"], 3);
        assert_eq!(hit["_source"]["payload_type"], "conversational");
        assert_eq!(hit["_source"]["memory_container_id"], c.as_str());
        assert_eq!(hit["_source"]["metadata"]["input_type"], "messages");
        assert_eq!(hit["_source"]["metadata"]["turn"], 4);

        // The same through the query DSL, newest first, paged with from/size in the body.
        let desc = s
            .search(
                &c,
                "working",
                "",
                Some(json!({
                    "query": {"bool": {"must": [
                        {"term": {"namespace.session_id": "b"}},
                        {"term": {"namespace.agent_id": {"value": "agent1"}}}
                    ]}},
                    "sort": [{"created_time": {"order": "desc"}}],
                    "from": 1, "size": 3
                })),
            )
            .await;
        assert_eq!(texts(&desc), ["b3", "b2", "b1"], "{}", s.kind);

        // Namespace isolation: users, agents and sessions never see each other's memories.
        let bob = s
            .search(&c, "working", "?namespace.user_id=bob&size=100", None)
            .await;
        assert_eq!(total(&bob), 10, "{}", s.kind);
        assert!(!texts(&bob).contains(&"alice's".to_string()));
        let alice = s
            .search(&c, "working", "?namespace.user_id=alice", None)
            .await;
        assert_eq!(texts(&alice), ["alice's"]);
        let nobody = s
            .search(
                &c,
                "working",
                "?namespace.user_id=alice&namespace.session_id=a",
                None,
            )
            .await;
        assert_eq!(total(&nobody), 0);
        let other_agent = s
            .search(&c, "working", "?namespace.agent_id=agent2", None)
            .await;
        assert_eq!(total(&other_agent), 0);
        let everything = s.search(&c, "working", "?size=0", None).await;
        assert_eq!(total(&everything), 11);
        assert!(everything["hits"]["hits"].as_array().unwrap().is_empty());

        // Sessions were opened by their first memory; their namespace omits the session id.
        let sessions = s
            .search(
                &c,
                "sessions",
                "",
                Some(json!({"query": {"term": {"namespace.user_id": "bob"}}})),
            )
            .await;
        let ids: Vec<&str> = sessions["hits"]["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["_id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["a", "b"], "{}", s.kind);
        assert_eq!(
            sessions["hits"]["hits"][0]["_source"]["namespace"],
            json!({"agent_id": "agent1", "user_id": "bob"})
        );
        let a = s
            .ok(
                Method::GET,
                &format!("{BASE}/{c}/memories/sessions/a"),
                None,
            )
            .await;
        assert_eq!(a["namespace_size"], 2);

        // Memories of another container are invisible here.
        let other = s.container(json!({})).await;
        let empty = s
            .search(&other, "working", "?namespace.session_id=a", None)
            .await;
        assert_eq!(total(&empty), 0);
        s.ok(Method::DELETE, &format!("{BASE}/{other}"), None).await;

        // Deleting a session deletes its working memory only.
        s.ok(
            Method::DELETE,
            &format!("{BASE}/{c}/memories/sessions/a"),
            None,
        )
        .await;
        let a = s
            .search(&c, "working", "?namespace.session_id=a", None)
            .await;
        assert_eq!(total(&a), 0, "{}", s.kind);
        let b = s
            .search(&c, "working", "?namespace.session_id=b", None)
            .await;
        assert_eq!(total(&b), 5);
        s.ok(Method::DELETE, &format!("{BASE}/{c}"), None).await;
    }
}

#[tokio::test]
async fn multimodal_messages_round_trip_whole() {
    for s in servers().await {
        let c = s.container(json!({})).await;
        let messages = json!([
            {"role": "user", "content": [
                {"type": "text", "text": "What's in this image?"},
                {"type": "image", "source": {"type": "base64", "format": "png", "data": "iVBORw0KGgoAAAANSUhEUgAAAG4AAAAe"}}
            ]},
            {"role": "assistant", "content": [
                {"type": "reasoning", "text": "It shows text.", "signature": "sig=="},
                {"type": "tool_use", "id": "t1", "name": "ocr", "input": {"lang": "en"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "Hello World!!"}], "status": "success"},
                {"type": "document", "source": {"type": "base64", "format": "pdf", "data": "JVBERi0x"}, "name": "scan"}
            ], "id": "m3"}
        ]);
        let added = s
            .add(
                &c,
                json!({
                    "messages": messages,
                    "namespace": {"agent_id": "x", "session_id": "mm"},
                    "tags": {"topic": "ocr"},
                    "infer": false,
                }),
            )
            .await;
        let id = added["working_memory_id"].as_str().unwrap();
        let got = s
            .ok(
                Method::GET,
                &format!("{BASE}/{c}/memories/working/{id}"),
                None,
            )
            .await;
        assert_eq!(got["messages"], messages, "{}", s.kind);
        assert_eq!(got["tags"], json!({"topic": "ocr"}));
        assert_eq!(got["infer"], false);
        assert_eq!(got["message_id"], 0);
        assert_eq!(got["metadata"]["input_type"], "messages");

        // The seeds' structured_data_blob form records the input type it carries.
        let blob_input = json!([
            {"type": "text", "text": "What's in this image?"},
            {"type": "image", "source": {"type": "base64", "format": "png", "data": "iVBORw0KGgoAA"}}
        ]);
        let added = s
            .add(
                &c,
                json!({
                    "structured_data_blob": {"input": blob_input, "response": "Hello World!!", "final_answer": true},
                    "payload_type": "conversational",
                    "namespace": {"session_id": "mm"},
                    "metadata": {"type": "message"},
                }),
            )
            .await;
        let id = added["working_memory_id"].as_str().unwrap();
        let got = s
            .ok(
                Method::GET,
                &format!("{BASE}/{c}/memories/working/{id}"),
                None,
            )
            .await;
        assert_eq!(
            got["structured_data_blob"]["input"], blob_input,
            "{}",
            s.kind
        );
        assert_eq!(
            got["metadata"],
            json!({"type": "message", "input_type": "content_blocks"})
        );
        assert_eq!(got["message_id"], 1);
        let added = s
            .add(
                &c,
                json!({"structured_data_blob": {"input": "plain text"}, "namespace": {"session_id": "mm"}}),
            )
            .await;
        let id = added["working_memory_id"].as_str().unwrap();
        let got = s
            .ok(
                Method::GET,
                &format!("{BASE}/{c}/memories/working/{id}"),
                None,
            )
            .await;
        assert_eq!(got["metadata"]["input_type"], "text");

        // Deleting one memory leaves the others.
        let deleted = s
            .ok(
                Method::DELETE,
                &format!("{BASE}/{c}/memories/working/{id}"),
                None,
            )
            .await;
        assert_eq!(deleted, json!({"_id": id, "result": "deleted"}));
        let (status, _) = s
            .call(
                Method::GET,
                &format!("{BASE}/{c}/memories/working/{id}"),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let left = s
            .search(&c, "working", "?namespace.session_id=mm", None)
            .await;
        assert_eq!(total(&left), 2, "{}", s.kind);
        s.ok(Method::DELETE, &format!("{BASE}/{c}"), None).await;
    }
}

#[tokio::test]
async fn sessions_are_created_explicitly_or_by_configuration() {
    for s in servers().await {
        let c = s.container(json!({})).await;
        let created = s
            .ok(
                Method::POST,
                &format!("{BASE}/{c}/memories/sessions"),
                Some(json!({"session_id": "abc123", "summary": "trip planning", "metadata": {"k": "v"}, "namespace": {"user_id": "bob"}})),
            )
            .await;
        assert_eq!(
            created,
            json!({"session_id": "abc123", "status": "created"})
        );
        let session = s
            .ok(
                Method::GET,
                &format!("{BASE}/{c}/memories/sessions/abc123"),
                None,
            )
            .await;
        assert_eq!(session["summary"], "trip planning", "{}", s.kind);
        assert_eq!(session["metadata"], json!({"k": "v"}));
        assert_eq!(session["namespace"], json!({"user_id": "bob"}));
        let (status, err) = s
            .call(
                Method::POST,
                &format!("{BASE}/{c}/memories/sessions"),
                Some(json!({"session_id": "abc123"})),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(
            err["error"]["message"]
                .as_str()
                .unwrap()
                .contains("already exists")
        );
        // A generated id.
        let generated = s
            .ok(Method::POST, &format!("{BASE}/{c}/memories/sessions"), None)
            .await;
        assert!(!generated["session_id"].as_str().unwrap().is_empty());
        // The first memory of an explicitly created session is its message 0.
        s.add(
            &c,
            json!({"messages": [text("user", "hi")], "namespace": {"session_id": "abc123"}}),
        )
        .await;
        let hits = s
            .search(&c, "working", "?namespace.session_id=abc123", None)
            .await;
        assert_eq!(
            hits["hits"]["hits"][0]["_source"]["message_id"], 0,
            "{}",
            s.kind
        );

        // Without a session id, no session unless the container says disable_session: false.
        let added = s
            .add(
                &c,
                json!({"messages": [text("user", "loose")], "namespace": {"user_id": "z"}}),
            )
            .await;
        assert!(added.get("session_id").is_none(), "{added}");
        let with_sessions = s.container(json!({"disable_session": false})).await;
        let added = s
            .add(
                &with_sessions,
                json!({"messages": [text("user", "opens a session")], "namespace": {"user_id": "z"}}),
            )
            .await;
        let sid = added["session_id"].as_str().unwrap();
        let session = s
            .ok(
                Method::GET,
                &format!("{BASE}/{with_sessions}/memories/sessions/{sid}"),
                None,
            )
            .await;
        assert_eq!(session["namespace"], json!({"user_id": "z"}), "{}", s.kind);
        // Exact-namespace isolation with namespace_size.
        let exact = s
            .search(
                &with_sessions,
                "working",
                "",
                Some(json!({"query": {"bool": {"filter": [
                    {"term": {"namespace.user_id": "z"}}, {"term": {"namespace_size": 1}}
                ]}}})),
            )
            .await;
        assert_eq!(total(&exact), 0, "{}", s.kind);
        for id in [c, with_sessions] {
            s.ok(Method::DELETE, &format!("{BASE}/{id}"), None).await;
        }
    }
}

#[tokio::test]
async fn unknown_ids_are_404() {
    for s in servers().await {
        let c = s.container(json!({})).await;
        let missing = "doesnotexist";
        for (method, path, body) in [
            (Method::GET, format!("{BASE}/{missing}"), None),
            (Method::DELETE, format!("{BASE}/{missing}"), None),
            (
                Method::POST,
                format!("{BASE}/{missing}/memories"),
                Some(json!({"messages": [text("user", "hi")]})),
            ),
            (
                Method::POST,
                format!("{BASE}/{missing}/memories/sessions"),
                None,
            ),
            (
                Method::GET,
                format!("{BASE}/{missing}/memories/working/_search"),
                None,
            ),
            (
                Method::GET,
                format!("{BASE}/{missing}/memories/working/x"),
                None,
            ),
            (
                Method::GET,
                format!("{BASE}/{c}/memories/working/{missing}"),
                None,
            ),
            (
                Method::DELETE,
                format!("{BASE}/{c}/memories/working/{missing}"),
                None,
            ),
            (
                Method::GET,
                format!("{BASE}/{c}/memories/sessions/{missing}"),
                None,
            ),
            (
                Method::DELETE,
                format!("{BASE}/{c}/memories/sessions/{missing}"),
                None,
            ),
        ] {
            let (status, v) = s.call(method.clone(), &path, body).await;
            assert_eq!(
                status,
                StatusCode::NOT_FOUND,
                "{}: {method} {path}: {v}",
                s.kind
            );
            assert_eq!(v["error"]["type"], "not_found");
            assert!(
                v["error"]["message"].as_str().unwrap().contains(missing),
                "{v}"
            );
        }
        s.ok(Method::DELETE, &format!("{BASE}/{c}"), None).await;
    }
}

#[tokio::test]
async fn malformed_bodies_are_400_naming_the_field() {
    let s = servers().await.remove(0);
    let c = s.container(json!({})).await;
    let add = format!("{BASE}/{c}/memories");
    let cases: Vec<(String, Value, &str, &str)> = vec![
        (
            format!("{BASE}/_create"),
            json!({"description": "no name"}),
            "",
            "missing field `name`",
        ),
        (
            format!("{BASE}/_create"),
            json!({"name": ""}),
            "name",
            "must not be empty",
        ),
        (
            format!("{BASE}/_create"),
            json!({"name": "n", "nmae": 1}),
            "nmae",
            "unknown field `nmae`",
        ),
        (
            format!("{BASE}/_create"),
            json!({"name": "n", "configuration": {"disable_session": "no"}}),
            "configuration.disable_session",
            "true or false",
        ),
        (add.clone(), json!({}), "messages", "is required"),
        (
            add.clone(),
            json!({"messages": "hello"}),
            "messages",
            "expected a sequence",
        ),
        (
            add.clone(),
            json!({"messages": []}),
            "messages",
            "at least one message",
        ),
        (
            add.clone(),
            json!({"messages": ["hi"]}),
            "messages[0]",
            "must be an object",
        ),
        (
            add.clone(),
            json!({"messages": [{"role": "user", "content": "hi"}]}),
            "messages[0].content",
            "array of content blocks",
        ),
        (
            add.clone(),
            json!({"messages": [{"role": "user"}]}),
            "messages[0].content",
            "is required",
        ),
        (
            add.clone(),
            json!({"messages": [text("user", "ok"), {"role": "user", "content": [{"text": "no type"}]}]}),
            "messages[1].content[0]",
            "string `type`",
        ),
        (
            add.clone(),
            json!({"messages": [{"role": 7, "content": [{"type": "text", "text": "x"}]}]}),
            "messages[0].role",
            "must be a string",
        ),
        (
            add.clone(),
            json!({"messages": [text("user", "x")], "namespace": {"user_id": 3}}),
            "namespace.user_id",
            "expected a string",
        ),
        (
            add.clone(),
            json!({"messages": [text("user", "x")], "namespace": {"session_id": "a/b"}}),
            "namespace.session_id",
            "must not contain '/'",
        ),
        (
            add.clone(),
            json!({"messages": [text("user", "x")], "payload_type": "weird"}),
            "payload_type",
            "unknown variant `weird`",
        ),
        (
            add.clone(),
            json!({"messages": [text("user", "x")], "infer": true}),
            "infer",
            "not supported",
        ),
        (
            add.clone(),
            json!({"messages": [text("user", "x")], "metadata": {"input_type": "audio"}}),
            "metadata.input_type",
            "\"content_blocks\"",
        ),
        (
            add.clone(),
            json!({"payload_type": "data"}),
            "structured_data",
            "is required",
        ),
        (
            format!("{BASE}/{c}/memories/sessions"),
            json!({"session_id": "a", "namespace": {"session_id": "b"}}),
            "namespace.session_id",
            "differs",
        ),
        (
            format!("{BASE}/{c}/memories/working/_search"),
            json!({"query": {"match": {"messages": "x"}}}),
            "query",
            "unsupported query \"match\"",
        ),
        (
            format!("{BASE}/{c}/memories/working/_search"),
            json!({"query": {"bool": {"must_not": []}}}),
            "query.bool.must_not",
            "unsupported",
        ),
        (
            format!("{BASE}/{c}/memories/working/_search"),
            json!({"query": {"term": {"messages.role": "user"}}}),
            "query.term.messages.role",
            "cannot filter on",
        ),
        (
            format!("{BASE}/{c}/memories/sessions/_search"),
            json!({"sort": [{"message_id": "asc"}]}),
            "sort",
            "cannot sort on",
        ),
        (
            format!("{BASE}/{c}/memories/working/_search"),
            json!({"size": 5000}),
            "size",
            "between 0 and 1000",
        ),
        (
            format!("{BASE}/{c}/memories/working/_search"),
            json!({"from": -1}),
            "from",
            "negative",
        ),
        (
            format!("{BASE}/{c}/memories/working/_search"),
            json!({"aggs": {}}),
            "aggs",
            "unknown field `aggs`",
        ),
        (
            format!("{BASE}/{c}/memories/long-term/_search"),
            json!({}),
            "type",
            "supported types: sessions, working",
        ),
    ];
    for (path, body, field, message) in cases {
        let (status, v) = s.call(Method::POST, &path, Some(body.clone())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path} {body}: {v}");
        assert_eq!(v["error"]["type"], "invalid_request", "{v}");
        assert_eq!(
            v["error"]["field"].as_str().unwrap_or(""),
            field,
            "{path} {body}: {v}"
        );
        let got = v["error"]["message"].as_str().unwrap();
        assert!(
            got.contains(message),
            "{path} {body}: {got:?} lacks {message:?}"
        );
    }
    // Not JSON at all, and an empty body where one is required.
    let (status, v) = s.raw(&add, "{\"messages\": [").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not valid JSON"),
        "{v}"
    );
    let (status, v) = s.raw(&add, "").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("body is required"),
        "{v}"
    );
    // Query-string mistakes.
    for (query, field) in [
        ("?size=ten", "size"),
        ("?frm=1", "frm"),
        ("?sort=created_time:up", "sort"),
    ] {
        let (status, v) = s
            .call(
                Method::GET,
                &format!("{BASE}/{c}/memories/working/_search{query}"),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {v}");
        assert_eq!(v["error"]["field"], field, "{query}: {v}");
    }
    // Nothing malformed was stored.
    let all = s.search(&c, "working", "", None).await;
    assert_eq!(total(&all), 0);
    s.ok(Method::DELETE, &format!("{BASE}/{c}"), None).await;
}
