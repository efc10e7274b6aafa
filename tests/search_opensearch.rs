/// The OpenSearch backend offers ml-commons' SearchIndexTool, ListIndexTool and
/// IndexMappingTool: a model's calls reach the cluster as `POST {index}/_search` with the query
/// DSL passed through unchanged, `GET _cat/indices?format=json` and `GET {index}`, all with
/// basic auth, and answer in ml-commons' output shapes; a non-2xx answer becomes an error
/// result the model reads.
mod common;

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use common::*;
use serde_json::{Value, json};

#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path_and_query: String,
    auth: Option<String>,
    body: Option<Value>,
}

#[derive(Default)]
struct Cluster {
    seen: Mutex<Vec<Seen>>,
    expected_auth: String,
}

async fn opensearch(
    State(c): State<Arc<Cluster>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let seen = Seen {
        method: method.to_string(),
        path_and_query: uri
            .path_and_query()
            .map(|p| p.to_string())
            .unwrap_or_default(),
        auth: auth.clone(),
        body: serde_json::from_slice(&body).ok(),
    };
    c.seen.lock().unwrap().push(seen);
    if auth.as_deref() != Some(c.expected_auth.as_str()) {
        return (StatusCode::UNAUTHORIZED, "Unauthorized").into_response();
    }
    let json_ok = |v: Value| axum::Json(v).into_response();
    match (method.as_str(), uri.path()) {
        ("GET", "/_cat/indices") => json_ok(json!([
            {"health": "green", "status": "open", "index": "population", "docs.count": "3"}
        ])),
        ("GET", "/population") => json_ok(json!({
            "population": {"mappings": {"properties": {"population_description": {"type": "text"}}},
                           "settings": {"index": {"number_of_shards": "1"}}}
        })),
        ("POST", "/population/_search") => json_ok(json!({
            "took": 3,
            "hits": {"total": {"value": 1}, "hits": [{
                "_index": "population", "_id": "sea-2023", "_score": 2.1,
                "_source": {"population_description": "The current metro area population of Seattle in 2023 is 3,519,000"}
            }]}
        })),
        ("POST", "/missing/_search") => (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"error": {"type": "index_not_found_exception"}, "status": 404})),
        )
            .into_response(),
        _ => StatusCode::BAD_REQUEST.into_response(),
    }
}

async fn start_cluster(expected_auth: String) -> (String, Arc<Cluster>) {
    let cluster = Arc::new(Cluster {
        seen: Mutex::new(Vec::new()),
        expected_auth,
    });
    let app = axum::Router::new()
        .fallback(opensearch)
        .with_state(Arc::clone(&cluster));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (format!("http://{addr}"), cluster)
}

#[tokio::test]
async fn ml_commons_tools_call_the_cluster_with_basic_auth() {
    // Any variable that is set will do as the password; PATH spares mutating the environment.
    let password = std::env::var("PATH").expect("PATH is set");
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("admin:{password}"))
    );
    let (os_url, cluster) = start_cluster(expected.clone()).await;

    let dsl = json!({
        "query": {"match": {"population_description": "seattle 2023 population"}},
        "size": 2,
        "_source": "population_description"
    });
    let turn = vec![
        call_start(0, "call_list", "ListIndexTool"),
        call_args(0, "{}"),
        call_start(1, "call_map", "IndexMappingTool"),
        call_args(1, r#"{"index":["population"]}"#),
        call_start(2, "call_search", "SearchIndexTool"),
        call_args(2, &json!({"index": "population", "query": dsl}).to_string()),
        finish("tool_calls"),
    ];
    let up = FakeOpenAi::start(vec![
        Reply::Sse(turn),
        Reply::Sse(tool_call_turn(
            "call_missing",
            "SearchIndexTool",
            r#"{"index":"missing","query":{"query":{"match_all":{}}}}"#,
        )),
        Reply::Sse(text_chunks("Seattle had 3,519,000 people in 2023.")),
    ])
    .await;
    let config = up.config(&format!(
        "[[agents.tools]]\ntype = \"search\"\nbackend = \"opensearch\"\nname = \"cluster\"\nurl = \"{os_url}\"\nusername = \"admin\"\npassword_env = \"PATH\"\n"
    ));
    let gw = Gateway::start(&config).await;
    let events = gw
        .run(
            "a",
            &run_input(
                "t-os",
                json!([{"id": "u1", "role": "user", "content": "Seattle population in 2023?"}]),
            ),
        )
        .await;
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED");

    // The requests the cluster received, exactly.
    let seen = cluster.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 4, "{seen:#?}");
    assert!(
        seen.iter()
            .all(|s| s.auth.as_deref() == Some(expected.as_str())),
        "{seen:#?}"
    );
    let find = |p: &str| {
        seen.iter()
            .find(|s| s.path_and_query == p)
            .unwrap_or_else(|| panic!("no request to {p}: {seen:#?}"))
    };
    let list = find("/_cat/indices?format=json");
    assert_eq!((list.method.as_str(), &list.body), ("GET", &None));
    let mapping = find("/population");
    assert_eq!(mapping.method, "GET");
    let search = find("/population/_search");
    assert_eq!(search.method, "POST");
    assert_eq!(
        search.body.as_ref(),
        Some(&dsl),
        "the query DSL is passed through unchanged"
    );
    let missing = find("/missing/_search");
    assert_eq!(missing.body, Some(json!({"query": {"match_all": {}}})));

    // Results: bodies for 2xx, error results naming the status otherwise.
    let result = |id: &str| {
        of_type(&events, "TOOL_CALL_RESULT")
            .into_iter()
            .find(|r| r["toolCallId"] == id)
            .unwrap_or_else(|| panic!("no result for {id}"))["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    // ml-commons' output shapes: a CSV table, mapping and settings lines, one line per hit.
    let listed = result("call_list");
    assert!(listed.starts_with("row,health,status,index,"), "{listed}");
    assert!(listed.contains("\n1,green,open,population,"), "{listed}");
    let mapped = result("call_map");
    assert!(
        mapped.starts_with("index: population\n\nmappings:\nproperties="),
        "{mapped}"
    );
    assert!(mapped.contains("population_description"), "{mapped}");
    assert!(
        mapped.contains("settings:\nindex.number_of_shards=1"),
        "{mapped}"
    );
    let found: Value = serde_json::from_str(result("call_search").trim()).unwrap();
    assert_eq!(found["_id"], "sea-2023");
    assert_eq!(found["_index"], "population");
    let failed = result("call_missing");
    assert!(
        failed.starts_with("SearchIndexTool: OpenSearch HTTP 404"),
        "{failed}"
    );
    assert!(failed.contains("index_not_found_exception"));
    let tool_msgs: Vec<Value> = up.requests()[2]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .cloned()
        .collect();
    assert!(
        tool_msgs.last().unwrap()["content"]
            .as_str()
            .unwrap()
            .starts_with("Error: SearchIndexTool: OpenSearch HTTP 404"),
        "{tool_msgs:#?}"
    );

    // The model saw the seeds' argument shapes.
    let tools = up.requests()[0]["tools"].as_array().unwrap().clone();
    let params = |name: &str| {
        tools
            .iter()
            .find(|t| t["function"]["name"] == name)
            .unwrap_or_else(|| panic!("{name} offered"))["function"]["parameters"]
            .clone()
    };
    assert_eq!(
        params("SearchIndexTool")["required"],
        json!(["index", "query"])
    );
    assert_eq!(
        params("SearchIndexTool")["properties"]["query"]["type"],
        "object"
    );
    assert_eq!(
        params("ListIndexTool")["properties"]["indices"]["type"],
        "array"
    );
    assert_eq!(params("IndexMappingTool")["required"], json!(["index"]));
    assert_eq!(
        params("IndexMappingTool")["properties"]["index"]["type"],
        "array"
    );

    // Health: up without contacting the cluster, credentials never shown.
    let health: Value = reqwest::get(gw.url("/healthz"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let source = health["toolSources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "cluster")
        .unwrap()
        .clone();
    assert_eq!(source["status"], "ok");
    assert_eq!(source["tools"], 3);
    assert!(!health.to_string().contains(&password));
}
