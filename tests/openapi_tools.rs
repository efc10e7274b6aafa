/// OpenAPI operations become tools: schemas built from the document, model-driven calls that
/// reach the API with the right path, query, headers, body and auth, HTTP errors the model
/// reads, and a document that cannot be loaded leaving the gateway up with the source down.
mod common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agui_gateway::config::Config;
use agui_gateway::tools::ToolContext;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use common::*;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const KEY: &str = "test-key-5f3a";

/// Every test step finishes well within this; a hang fails instead of blocking CI.
async fn bounded<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), f)
        .await
        .expect("step did not finish in time")
}

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn env(k: &str) -> Option<String> {
    (k == "PETSTORE_KEY").then(|| KEY.to_string())
}

// ------------------------------------------------------------------ the pet store API

/// One request as the API saw it.
#[derive(Debug, Clone)]
struct Seen {
    method: Method,
    /// Path and query exactly as sent (still percent-encoded).
    uri: String,
    headers: HeaderMap,
    body: Bytes,
}

#[derive(Default)]
struct Api {
    seen: Mutex<Vec<Seen>>,
}

async fn api(
    State(api): State<Arc<Api>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    if path == "/openapi.yaml" {
        let doc = std::fs::read_to_string(fixtures().join("petstore.yaml")).unwrap();
        return ([("content-type", "application/yaml")], doc).into_response();
    }
    api.seen.lock().unwrap().push(Seen {
        method: method.clone(),
        uri: uri
            .path_and_query()
            .map(|p| p.to_string())
            .unwrap_or_default(),
        headers: headers.clone(),
        body: body.clone(),
    });
    if headers.get("x-api-key").and_then(|v| v.to_str().ok()) != Some(KEY) {
        return (StatusCode::UNAUTHORIZED, "missing or wrong API key").into_response();
    }
    let verbose = uri.query().is_some_and(|q| q.contains("verbose=true"));
    match (method, path.strip_prefix("/v1/pets")) {
        (Method::GET, Some("/0")) => (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"message": "pet 0 not found"})),
        )
            .into_response(),
        (Method::GET, Some(id)) if id.starts_with('/') => {
            axum::Json(json!({"id": &id[1..], "name": "Rex", "verbose": verbose})).into_response()
        }
        (Method::POST, Some("")) => {
            let mut pet: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            pet["id"] = json!(42);
            (StatusCode::CREATED, axum::Json(pet)).into_response()
        }
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn start_api() -> (SocketAddr, Arc<Api>) {
    let state = Arc::new(Api::default());
    let app = axum::Router::new()
        .fallback(api)
        .with_state(Arc::clone(&state));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (addr, state)
}

// ------------------------------------------------------------------ the gateway

/// The gateway with an explicit environment (the common helper reads the process's, which
/// tests cannot set safely while running in parallel).
struct Gw(Gateway);

impl Gw {
    async fn start(toml: &str) -> Gw {
        let mut config =
            Config::parse_with_env(toml, "test.toml", Some(&fixtures()), &env).expect("config");
        config.data_dir = temp_dir("openapi");
        Gw(Gateway::from_config(config).await)
    }

    async fn get(&self, path: &str) -> Value {
        reqwest::get(self.0.url(path))
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    async fn run(&self, body: &Value) -> Vec<Value> {
        self.0.run("a", body).await
    }
}

fn petstore_entry(extra: &str) -> String {
    format!(
        r#"
[[agents.tools]]
type = "openapi"
name = "petstore"
prefix = "pets"
auth = {{ type = "header", name = "X-Api-Key", value_env = "PETSTORE_KEY" }}
{extra}
"#
    )
}

fn file_entry(api: SocketAddr) -> String {
    petstore_entry(&format!(
        "spec = \"petstore.yaml\"\nbase_url = \"http://{api}/v1\""
    ))
}

fn result_of<'a>(events: &'a [Value], call: &str) -> &'a str {
    of_type(events, "TOOL_CALL_RESULT")
        .into_iter()
        .find(|r| r["toolCallId"] == call)
        .unwrap_or_else(|| panic!("no result for {call}: {events:#?}"))["content"]
        .as_str()
        .unwrap()
}

// ------------------------------------------------------------------ tests

#[tokio::test]
async fn operations_become_tools_with_path_query_header_and_body_schemas() {
    let (api, _) = start_api().await;
    let up = FakeOpenAi::start(vec![]).await;
    let gw = bounded(Gw::start(&format!("{}{}", up.config(""), file_entry(api)))).await;

    let agents = gw.get("/agents").await;
    assert_eq!(
        agents["agents"][0]["tools"],
        json!(["get_weather", "pets_createPet", "pets_getPetById"])
    );
    let agent = gw.0.state.agents.get("a").await.unwrap().unwrap();
    let specs = agent.tools.specs();
    let get = specs.iter().find(|s| s.name == "pets_getPetById").unwrap();
    assert_eq!(get.description, "Find a pet by id\n\nReturns a single pet.");
    assert_eq!(
        get.input_schema,
        json!({
            "type": "object",
            "properties": {
                "petId": {"type": "string", "description": "The pet's id"},
                "verbose": {"type": "boolean", "description": "Include the pet's history"},
                "X-Request-Id": {"type": "string", "description": "Correlation id echoed in logs"}
            },
            "required": ["petId", "X-Request-Id"],
            "additionalProperties": false
        })
    );
    let create = specs.iter().find(|s| s.name == "pets_createPet").unwrap();
    let body = &create.input_schema["properties"]["body"];
    assert_eq!(create.input_schema["required"], json!(["body"]));
    assert_eq!(body["description"], "The pet to add");
    assert_eq!(body["required"], json!(["name"]));
    assert_eq!(body["properties"]["tag"]["type"], json!(["string", "null"]));
    // NewPet -> Owner -> NewPet: the cycle is described, not expanded, and no $ref is left.
    let again = &body["properties"]["owner"]["properties"]["pets"]["items"];
    assert!(again.get("properties").is_none(), "{again}");
    assert!(!create.input_schema.to_string().contains("$ref"));

    let health = gw.get("/healthz").await;
    let source = &health["toolSources"][0];
    assert_eq!(source["name"], "petstore");
    assert_eq!(source["status"], "ok");
    assert_eq!(source["operations"], 2);
    assert_eq!(source["tools"], 2);
    assert!(
        source["skipped"]["uploadPhoto"]
            .as_str()
            .unwrap()
            .contains("multipart/form-data"),
        "{source}"
    );
    assert_eq!(health["status"], "ok");
}

#[tokio::test]
async fn a_model_driven_call_reaches_the_api_and_its_json_is_the_result() {
    let (api, seen) = start_api().await;
    let turn = vec![
        call_start(0, "call_get", "pets_getPetById"),
        call_args(
            0,
            r#"{"petId":"a b/7","verbose":true,"X-Request-Id":"req-1"}"#,
        ),
        call_start(1, "call_new", "pets_createPet"),
        call_args(1, r#"{"body":{"name":"Nemo","tag":null}}"#),
        finish("tool_calls"),
    ];
    let up = FakeOpenAi::start(vec![
        Reply::Sse(turn),
        Reply::Sse(text_chunks("Rex found, Nemo added.")),
    ])
    .await;
    let gw = bounded(Gw::start(&format!("{}{}", up.config(""), file_entry(api)))).await;
    let events = bounded(gw.run(&run_input(
        "t-openapi",
        json!([{"id": "u1", "role": "user", "content": "Find pet 7, add Nemo"}]),
    )))
    .await;
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED");

    let got: Value = serde_json::from_str(result_of(&events, "call_get")).unwrap();
    // The API echoes the raw path segment: encoded, so the `/` did not add a segment.
    assert_eq!(
        got,
        json!({"id": "a%20b%2F7", "name": "Rex", "verbose": true})
    );
    let created: Value = serde_json::from_str(result_of(&events, "call_new")).unwrap();
    assert_eq!(created, json!({"name": "Nemo", "tag": null, "id": 42}));

    let seen = seen.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:#?}");
    let get = seen.iter().find(|s| s.method == Method::GET).unwrap();
    assert_eq!(get.uri, "/v1/pets/a%20b%2F7?verbose=true");
    assert_eq!(get.headers["x-request-id"], "req-1");
    let post = seen.iter().find(|s| s.method == Method::POST).unwrap();
    assert_eq!(post.uri, "/v1/pets");
    assert_eq!(post.headers["content-type"], "application/json");
    assert_eq!(
        serde_json::from_slice::<Value>(&post.body).unwrap(),
        json!({"name": "Nemo", "tag": null})
    );
    for s in &seen {
        assert_eq!(s.headers["x-api-key"], KEY);
    }

    // The model was offered the operations, and read both results.
    let requests = up.requests();
    let offered: Vec<&str> = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(offered.contains(&"pets_getPetById") && offered.contains(&"pets_createPet"));
    let msgs = requests[1]["messages"].as_array().unwrap().clone();
    let tools: Vec<&Value> = msgs.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tools.len(), 2);
    assert!(tools[0]["content"].as_str().unwrap().contains("Rex"));
}

#[tokio::test]
async fn an_http_error_becomes_a_result_the_model_reads_and_the_run_continues() {
    let (api, _) = start_api().await;
    let up = FakeOpenAi::start(vec![
        Reply::Sse(tool_call_turn(
            "call_404",
            "pets_getPetById",
            r#"{"petId":"0","X-Request-Id":"r"}"#,
        )),
        Reply::Sse(text_chunks("There is no pet 0.")),
    ])
    .await;
    let gw = bounded(Gw::start(&format!("{}{}", up.config(""), file_entry(api)))).await;
    let events = bounded(gw.run(&run_input(
        "t-404",
        json!([{"id": "u1", "role": "user", "content": "Pet 0?"}]),
    )))
    .await;
    let result = result_of(&events, "call_404");
    assert!(
        result.starts_with("HTTP 404: ") && result.contains("pet 0 not found"),
        "{result}"
    );
    assert_eq!(text(&events), "There is no pet 0.");
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED");
    let msgs = up.requests()[1]["messages"].as_array().unwrap().clone();
    let tool = msgs.iter().find(|m| m["role"] == "tool").unwrap();
    assert!(
        tool["content"]
            .as_str()
            .unwrap()
            .starts_with("Error: HTTP 404"),
        "{tool}"
    );
}

#[test]
fn a_missing_auth_variable_is_a_config_error_naming_the_key_and_variable() {
    let text = format!(
        r#"
[[agents]]
id = "a"
[agents.model]
provider = "scripted"
{}"#,
        petstore_entry("spec = \"petstore.yaml\"")
    );
    let e = Config::parse_with_env(&text, "gw.toml", Some(&fixtures()), &|_| None).unwrap_err();
    assert_eq!(e.key, "agents[0].tools[0].auth.value_env");
    assert_eq!(e.problem, "environment variable PETSTORE_KEY is not set");
    // With the variable set the same entry is accepted.
    assert!(Config::parse_with_env(&text, "gw.toml", Some(&fixtures()), &env).is_ok());
}

#[tokio::test]
async fn an_unreachable_spec_url_leaves_the_gateway_up_and_the_source_down() {
    // A port that was just free: nothing listens there.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let up = FakeOpenAi::start(vec![Reply::Sse(text_chunks("Still here."))]).await;
    let entry = petstore_entry(&format!(
        "spec_url = \"http://{closed}/openapi.yaml?token=hunter2\""
    ));
    let gw = bounded(Gw::start(&format!("{}{entry}", up.config("")))).await;

    let health = gw.get("/healthz").await;
    assert_eq!(health["status"], "degraded");
    let source = &health["toolSources"][0];
    assert_eq!(source["name"], "petstore");
    assert_eq!(source["status"], "down");
    assert_eq!(source["tools"], 0);
    let error = source["error"].as_str().unwrap();
    assert!(error.contains("cannot fetch"), "{error}");
    let all = health.to_string();
    assert!(!all.contains("hunter2") && !all.contains(KEY), "{all}");

    // The agent still runs, with the tools that did load.
    assert_eq!(
        gw.get("/agents").await["agents"][0]["tools"],
        json!(["get_weather"])
    );
    let events = bounded(gw.run(&run_input(
        "t-down",
        json!([{"id": "u1", "role": "user", "content": "hi"}]),
    )))
    .await;
    assert_eq!(text(&events), "Still here.");
}

#[tokio::test]
async fn a_fetched_document_resolves_relative_servers_against_its_url() {
    let (api, seen) = start_api().await;
    let text = format!(
        r#"
[[agents]]
id = "a"
[agents.model]
provider = "scripted"
[[agents.tools]]
type = "openapi"
name = "petstore"
spec_url = "http://{api}/openapi.yaml"
operations = ["getPetById", "deletePet"]
auth = {{ type = "header", name = "X-Api-Key", value_env = "PETSTORE_KEY" }}
"#
    );
    let gw = bounded(Gw::start(&text)).await;
    let source = &gw.get("/healthz").await["toolSources"][0];
    assert_eq!(source["operations"], 1, "{source}");
    assert_eq!(
        source["status"], "degraded",
        "an allow-listed id is missing"
    );
    assert_eq!(source["unknown_operations"], json!(["deletePet"]));

    let ctx = ToolContext {
        thread_id: "t".into(),
        run_id: "r".into(),
        tool_call_id: "c".into(),
        cancel: CancellationToken::new(),
        state: Default::default(),
        side: None,
    };
    let agent = gw.0.state.agents.get("a").await.unwrap().unwrap();
    let tools = &agent.tools;
    let out = bounded(tools.call(
        "getPetById",
        r#"{"petId": "5", "X-Request-Id": "r-5"}"#,
        ctx.clone(),
    ))
    .await;
    assert!(!out.is_error, "{out:?}");
    assert_eq!(serde_json::from_str::<Value>(&out.text).unwrap()["id"], "5");
    assert_eq!(seen.seen.lock().unwrap()[0].uri, "/v1/pets/5");
    // Arguments are checked against the generated schema before any request.
    let bad = bounded(tools.call("getPetById", r#"{"petId": "5", "extra": 1}"#, ctx)).await;
    assert!(bad.is_error && bad.text.contains("X-Request-Id"), "{bad:?}");
    assert_eq!(seen.seen.lock().unwrap().len(), 1);
}
