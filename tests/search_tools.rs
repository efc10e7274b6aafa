/// The embedded knowledge base: documents ingested through `/indices/...` are searchable at
/// once (ranked, filterable by metadata, deletable), survive a restart, the shipped demo corpus
/// answers the seeds' Seattle question, and a model's `search` call returns cited snippets.
mod common;

use common::*;
use serde_json::{Value, json};

const SCRIPTED: &str = r#"
[[agents]]
id = "kb"
[agents.model]
provider = "scripted"
[[agents.tools]]
type = "search"
name = "kb"
"#;

struct Api {
    http: reqwest::Client,
    base: String,
}

impl Api {
    fn new(gw: &Gateway) -> Api {
        Api {
            http: reqwest::Client::new(),
            base: gw.url(""),
        }
    }

    async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        let value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
        (status, value)
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.send(reqwest::Method::GET, path, None).await
    }
    async fn put(&self, path: &str) -> (u16, Value) {
        self.send(reqwest::Method::PUT, path, None).await
    }
    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.send(reqwest::Method::POST, path, Some(body)).await
    }
    async fn delete(&self, path: &str) -> (u16, Value) {
        self.send(reqwest::Method::DELETE, path, None).await
    }

    async fn search(&self, index: &str, body: Value) -> Vec<Value> {
        let (status, v) = self.post(&format!("/indices/{index}/_search"), body).await;
        assert_eq!(status, 200, "{v}");
        v["hits"].as_array().unwrap().clone()
    }
}

fn ids(hits: &[Value]) -> Vec<&str> {
    hits.iter().map(|h| h["id"].as_str().unwrap()).collect()
}

fn article(id: &str, title: &str, text: &str, metadata: Value) -> Value {
    json!({"id": id, "fields": {"title": title, "text": text}, "metadata": metadata})
}

#[tokio::test]
async fn ingest_search_filter_and_delete_through_the_api() {
    let gw = Gateway::start(SCRIPTED).await;
    let api = Api::new(&gw);

    let (status, v) = api.get("/indices").await;
    assert_eq!(status, 200);
    assert_eq!(v["indices"][0]["name"], "demo");
    assert!(v["indices"][0]["docs"].as_u64().unwrap() >= 12, "{v}");

    // Index lifecycle and naming.
    assert_eq!(api.put("/indices/handbook").await.0, 201);
    let (status, v) = api.put("/indices/handbook").await;
    assert_eq!(status, 400);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already exists"),
        "{v}"
    );
    let (status, v) = api.put("/indices/Hand%20Book").await;
    assert_eq!(status, 400);
    assert_eq!(v["error"]["field"], "name");

    // One document, then the same id again replaces it.
    let (status, v) = api
        .post(
            "/indices/handbook/documents",
            article(
                "vpn",
                "VPN setup",
                "Install the client and sign in with your badge.",
                json!({"team": "it"}),
            ),
        )
        .await;
    assert_eq!(
        (status, v["result"].as_str()),
        (201, Some("created")),
        "{v}"
    );
    let (status, v) = api
        .post(
            "/indices/handbook/documents",
            article(
                "vpn",
                "VPN setup",
                "Install the VPN client, then connect to the office network.",
                json!({"team": "it", "year": 2024}),
            ),
        )
        .await;
    assert_eq!(
        (status, v["result"].as_str()),
        (200, Some("updated")),
        "{v}"
    );

    // Bulk: valid documents are written, invalid ones reported by position.
    let (status, v) = api
        .post(
            "/indices/handbook/documents/_bulk",
            json!({"documents": [
                article("leave", "Parental leave", "Employees get sixteen weeks of paid parental leave.", json!({"team": "hr", "year": 2024})),
                article("expenses", "Travel expenses", "Submit receipts for travel expenses within thirty days.", json!({"team": "finance", "year": 2023})),
                {"id": "broken", "fields": {"title": 42}},
                {"fields": {"text": "no id"}},
                article("laptops", "Laptop refresh", "Laptops are replaced every three years by the IT team.", json!({"team": "it", "year": 2023})),
            ]}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (v["indexed"].as_u64(), v["failed"].as_u64()),
        (Some(3), Some(2)),
        "{v}"
    );
    assert_eq!(v["errors"][0]["position"], 2);
    assert_eq!(v["errors"][0]["id"], "broken");
    assert!(
        v["errors"][0]["error"]
            .as_str()
            .unwrap()
            .starts_with("fields.title"),
        "{v}"
    );
    assert_eq!(v["errors"][1]["position"], 3);
    assert!(
        v["errors"][1]["error"].as_str().unwrap().contains("id"),
        "{v}"
    );

    let (_, v) = api.get("/indices").await;
    let handbook = v["indices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "handbook")
        .unwrap();
    assert_eq!(handbook["docs"], 4);

    // Ranking: the document about the query comes first; stemming matches "expense receipt".
    let hits = api
        .search("handbook", json!({"query": "expense receipt"}))
        .await;
    assert_eq!(ids(&hits)[0], "expenses");
    assert_eq!(hits[0]["index"], "handbook");
    assert!(
        hits[0]["snippet"].as_str().unwrap().contains("receipts"),
        "{hits:?}"
    );
    assert_eq!(
        hits[0]["metadata"],
        json!({"team": "finance", "year": 2023})
    );
    let hits = api
        .search("handbook", json!({"query": "how do I connect to the VPN"}))
        .await;
    assert_eq!(ids(&hits)[0], "vpn");
    assert!(
        hits[0]["fields"]["text"]
            .as_str()
            .unwrap()
            .contains("office network"),
        "the replacement is indexed"
    );

    // Metadata filters: exact match on top-level keys, all keys must match.
    let hits = api
        .search(
            "handbook",
            json!({"query": "laptops IT", "filter": {"team": "it"}}),
        )
        .await;
    assert_eq!(ids(&hits)[0], "laptops");
    assert!(hits.iter().all(|h| h["metadata"]["team"] == "it"));
    let hits = api
        .search(
            "handbook",
            json!({"query": "", "filter": {"team": "it", "year": 2024}}),
        )
        .await;
    assert_eq!(ids(&hits), ["vpn"]);
    let hits = api
        .search(
            "handbook",
            json!({"query": "", "filter": {"year": [2023, 2024]}, "top_k": 10}),
        )
        .await;
    assert_eq!(hits.len(), 4);

    // Deleting a document.
    assert_eq!(
        api.delete("/indices/handbook/documents/expenses").await.0,
        200
    );
    let (status, v) = api.delete("/indices/handbook/documents/expenses").await;
    assert_eq!(status, 404);
    assert_eq!(v["error"]["type"], "not_found");
    let hits = api
        .search("handbook", json!({"query": "expense receipt"}))
        .await;
    assert!(!ids(&hits).contains(&"expenses"));

    // Clear 4xx answers.
    let (status, v) = api
        .post("/indices/handbook/_search", json!({"query": 5}))
        .await;
    assert_eq!(
        (status, v["error"]["field"].as_str()),
        (400, Some("query")),
        "{v}"
    );
    let (status, v) = api
        .post(
            "/indices/handbook/_search",
            json!({"query": "x", "top_k": 0}),
        )
        .await;
    assert_eq!(
        (status, v["error"]["field"].as_str()),
        (400, Some("top_k")),
        "{v}"
    );
    let (status, v) = api
        .post(
            "/indices/handbook/documents",
            json!({"id": "x", "fields": {"text": "t"}, "extra": 1}),
        )
        .await;
    assert_eq!(status, 400, "{v}");
    let (status, _) = api
        .post("/indices/nope/documents", article("a", "b", "c", json!({})))
        .await;
    assert_eq!(status, 404);
    let resp = reqwest::Client::new()
        .post(gw.url("/indices/handbook/documents"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["type"], "invalid_request");

    // Deleting the index.
    assert_eq!(api.delete("/indices/handbook").await.0, 200);
    assert_eq!(api.delete("/indices/handbook").await.0, 404);
    let (status, _) = api
        .post("/indices/handbook/_search", json!({"query": "vpn"}))
        .await;
    assert_eq!(status, 404);
    let (_, v) = api.get("/indices").await;
    assert!(
        v["indices"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["name"] != "handbook")
    );
    // And the name can be used again.
    assert_eq!(api.put("/indices/handbook").await.0, 201);
    assert!(
        api.search("handbook", json!({"query": "vpn"}))
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn documents_survive_a_restart() {
    let dir = temp_dir("kb-restart");
    let config = format!("data_dir = {:?}\n{SCRIPTED}", dir.display().to_string());
    let first_service = {
        let gw = Gateway::start(&config).await;
        let api = Api::new(&gw);
        assert_eq!(api.put("/indices/notes").await.0, 201);
        let (status, v) = api
            .post(
                "/indices/notes/documents/_bulk",
                json!({"documents": [
                    article("n1", "Kayaks", "The kayak rental opens at nine on weekends.", json!({"kind": "hours"})),
                    article("n2", "Bikes", "Bike repairs take two days.", json!({"kind": "service"})),
                ]}),
            )
            .await;
        assert_eq!((status, v["indexed"].as_u64()), (200, Some(2)), "{v}");
        std::sync::Arc::downgrade(&gw.state.search)
    };
    // The first gateway shuts down in the background; give it a bounded while to let go of
    // its index writers, as a restarted process would have.
    for _ in 0..100 {
        if first_service.strong_count() == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    let gw = Gateway::start(&config).await;
    let api = Api::new(&gw);
    let hits = api.search("notes", json!({"query": "kayak weekend"})).await;
    assert_eq!(ids(&hits)[0], "n1");
    assert_eq!(hits[0]["metadata"]["kind"], "hours");
    let (_, v) = api.get("/indices").await;
    let names: Vec<&str> = v["indices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["demo", "notes"],
        "the demo is seeded once, not again"
    );
    // The reopened index takes writes too.
    let (status, v) = api
        .post(
            "/indices/notes/documents",
            article(
                "n3",
                "Canoes",
                "Canoes need a reservation.",
                json!({"kind": "hours"}),
            ),
        )
        .await;
    assert_eq!(status, 201, "{v}");
    let hits = api
        .search("notes", json!({"query": "", "filter": {"kind": "hours"}}))
        .await;
    assert_eq!(hits.len(), 2);
    drop(gw);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn the_demo_corpus_answers_the_seattle_question() {
    let gw = Gateway::start(SCRIPTED).await;
    let api = Api::new(&gw);
    let hits = api
        .search(
            "demo",
            json!({"query": "what's the population of Seattle in 2023?", "top_k": 3}),
        )
        .await;
    assert_eq!(ids(&hits)[0], "seattle-2023", "{hits:#?}");
    assert!(hits[0]["snippet"].as_str().unwrap().contains("3,519,000"));
    assert_eq!(hits[0]["metadata"]["city"], "Seattle");
    let hits = api
        .search(
            "demo",
            json!({"query": "population", "filter": {"city": "Seattle"}, "top_k": 10}),
        )
        .await;
    assert_eq!(ids(&hits).len(), 3);
    assert!(ids(&hits).iter().all(|id| id.starts_with("seattle-")));

    // The agent's search source reports healthy with the index count.
    let health: Value = reqwest::get(gw.url("/healthz"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let source = &health["toolSources"][0];
    assert_eq!(source["status"], "ok", "{health}");
    assert_eq!(source["name"], "kb");
    assert_eq!(source["indices"], 1);
}

#[tokio::test]
async fn a_model_searches_the_knowledge_base_and_gets_cited_snippets() {
    let up = FakeOpenAi::start(vec![
        Reply::Sse(tool_call_turn(
            "call_s1",
            "search",
            r#"{"query":"Seattle population 2023","top_k":2,"filter":{"city":"Seattle"}}"#,
        )),
        Reply::Sse(text_chunks(
            "Seattle had 3,519,000 people in 2023 [seattle-2023].",
        )),
    ])
    .await;
    let config = up.config("[[agents.tools]]\ntype = \"search\"\nindex = \"demo\"\ntop_k = 4\n");
    let gw = Gateway::start(&config).await;
    let events = gw
        .run(
            "a",
            &run_input(
                "t-kb",
                json!([{"id": "u1", "role": "user", "content": "What was Seattle's population in 2023?"}]),
            ),
        )
        .await;
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED");
    let result = of_type(&events, "TOOL_CALL_RESULT")[0];
    assert_eq!(result["toolCallId"], "call_s1");
    let hits: Value = serde_json::from_str(result["content"].as_str().unwrap()).unwrap();
    let hits = hits.as_array().unwrap();
    assert_eq!(
        hits.len(),
        2,
        "the model's top_k wins over the configured one"
    );
    assert_eq!(hits[0]["id"], "seattle-2023");
    assert_eq!(hits[0]["index"], "demo");
    assert!(hits[0]["snippet"].as_str().unwrap().contains("3,519,000"));
    assert_eq!(hits[0]["metadata"]["year"], 2023);
    assert!(hits.iter().all(|h| h["metadata"]["city"] == "Seattle"));

    // The model saw the tool's spec, and the second call carries the cited snippets back.
    let first = &up.requests()[0];
    let spec = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "search")
        .expect("search tool offered");
    assert_eq!(spec["function"]["parameters"]["required"], json!(["query"]));
    let msgs = up.requests()[1]["messages"].as_array().unwrap().clone();
    let tool_msg = msgs.iter().find(|m| m["role"] == "tool").unwrap();
    assert!(
        tool_msg["content"]
            .as_str()
            .unwrap()
            .contains("seattle-2023")
    );
    assert!(text(&events).contains("[seattle-2023]"));
}
