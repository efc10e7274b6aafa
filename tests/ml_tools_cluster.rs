/// ml-commons' index tools registered by type (seed 000's V2 `SearchIndexTool` with a `neural`
/// query and `attributes.input_schema`, `VectorDBTool`, and the RFC's bare `ListIndexTool`,
/// `IndexMappingTool`, `CatIndexTool`) run on the gateway's `[opensearch]` cluster: the neural
/// query reaches it unchanged with the question filled in, `VectorDBTool` embeds with its model
/// and sends a k-NN query, every request carries the cluster's credentials (basic auth or
/// SigV4), and the model reads ml-commons' output shapes.
mod common;
#[path = "common/ml_fakes.rs"]
mod ml_fakes;

use base64::Engine;
use common::*;
use ml_fakes::*;
use serde_json::{Value, json};

#[tokio::test]
async fn registered_ml_commons_tools_query_the_configured_cluster() {
    let os = OpenSearchFake::start().await;
    let emb = Embeddings::start().await;
    // Any variable that is set will do as the password; PATH spares mutating the environment.
    let password = std::env::var("PATH").expect("PATH is set");
    let basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("admin:{password}"))
    );
    let question = "Seattle \"metro\" population?";
    let turn = vec![
        call_start(0, "c_search", "retrieve_population_data"),
        call_args(0, &json!({"question": question}).to_string()),
        call_start(1, "c_vec", "population_knowledge_base"),
        call_args(1, &json!({"question": question}).to_string()),
        call_start(2, "c_list", "ListIndexTool"),
        call_args(2, "{}"),
        call_start(3, "c_map", "IndexMappingTool"),
        call_args(3, r#"{"index":["test_population_data"]}"#),
        call_start(4, "c_cat", "CatIndexTool"),
        call_args(4, r#"{"indices":["test_population_data"]}"#),
        call_start(5, "c_missing", "SearchIndexTool"),
        call_args(
            5,
            r#"{"index":"missing","query":{"query":{"match_all":{}}}}"#,
        ),
        finish("tool_calls"),
    ];
    let up = FakeOpenAi::start(vec![
        Reply::Sse(turn),
        Reply::Sse(text_chunks("3,519,000 in 2023.")),
    ])
    .await;
    let gw = Gateway::start(&format!(
        "[[agents]]\nid = \"cfg\"\n[agents.model]\nprovider = \"scripted\"\n\
         [opensearch]\nurl = \"{}\"\nusername = \"admin\"\npassword_env = \"PATH\"\n",
        os.base
    ))
    .await;
    let base = gw.url("");
    let base = base.trim_end_matches('/');
    let embedding_model = register_model(base, emb.connector()).await;
    let llm = register_model(base, chat_connector(&up.base_url())).await;
    let (status, reg) = post(
        base,
        "/_plugins/_ml/agents/_register",
        json!({
            "name": "RAG", "type": "conversational",
            "llm": {"model_id": llm},
            "parameters": {"_llm_interface": "openai/v1/chat/completions"},
            "tools": [
                seed_search_tool("retrieve_population_data", "test_population_data", "population_description_embedding", "population_description"),
                {"type": "VectorDBTool", "name": "population_knowledge_base",
                 "parameters": {"model_id": embedding_model, "index": "test_population_data",
                    "embedding_field": "population_description_embedding",
                    "source_field": ["population_description"],
                    "input": "${parameters.question}"}},
                {"type": "ListIndexTool"}, {"type": "SearchIndexTool"},
                {"type": "IndexMappingTool"}, {"type": "CatIndexTool"}
            ]
        }),
    )
    .await;
    assert_eq!(status, 200, "{reg}");
    let id = reg["agent_id"].as_str().unwrap();
    let (status, out) = post(
        base,
        &format!("/_plugins/_ml/agents/{id}/_execute"),
        json!({"parameters": {"question": question}}),
    )
    .await;
    assert_eq!(status, 200, "{out}");

    // What the cluster received, with basic auth on every request.
    let seen = os.requests();
    assert!(
        seen.iter()
            .all(|s| s.headers.get("authorization").unwrap() == basic.as_str()),
        "{seen:#?}"
    );
    let searches: Vec<&Value> = seen
        .iter()
        .filter(|s| s.path_and_query == "/test_population_data/_search")
        .filter_map(|s| s.body.as_ref())
        .collect();
    assert_eq!(searches.len(), 2, "{seen:#?}\n{:#?}", up.requests().get(1));
    let neural = searches
        .iter()
        .find(|b| b["query"].get("neural").is_some())
        .expect("the neural query");
    assert_eq!(
        **neural,
        json!({"query": {"neural": {"population_description_embedding": {
            "query_text": question, "model_id": "w0T3NJwBZFG13462QeiT"}}},
            "size": 2, "_source": "population_description"}),
        "the seed's query, unchanged but for the question"
    );
    let knn = searches
        .iter()
        .find(|b| b["query"].get("knn").is_some())
        .expect("the k-NN query");
    let want: Vec<Value> = embed(question).into_iter().map(|x| json!(x)).collect();
    assert_eq!(
        **knn,
        json!({"size": 2, "_source": ["population_description"],
            "query": {"knn": {"population_description_embedding": {"vector": want, "k": 10}}}})
    );
    assert_eq!(
        emb.inputs.lock().unwrap().clone(),
        vec![vec![question.to_string()]]
    );
    let paths: Vec<&str> = seen.iter().map(|s| s.path_and_query.as_str()).collect();
    assert!(paths.contains(&"/_cat/indices?format=json"), "{paths:?}");
    assert!(
        paths.contains(&"/_cat/indices/test_population_data?format=json"),
        "{paths:?}"
    );
    assert!(paths.contains(&"/test_population_data"), "{paths:?}");
    assert!(paths.contains(&"/missing/_search"), "{paths:?}");

    // What the model was offered: the registration's schema, and ml-commons' defaults.
    let offered = up.requests()[0]["tools"].as_array().unwrap().clone();
    let function = |name: &str| {
        offered
            .iter()
            .find(|t| t["function"]["name"] == name)
            .unwrap_or_else(|| panic!("{name} offered: {offered:#?}"))["function"]
            .clone()
    };
    assert_eq!(
        function("retrieve_population_data")["parameters"],
        seed_search_tool(
            "retrieve_population_data",
            "test_population_data",
            "population_description_embedding",
            "population_description"
        )["attributes"]["input_schema"]
    );
    assert_eq!(
        function("SearchIndexTool")["parameters"]["required"],
        json!(["index", "query"])
    );
    assert!(
        function("ListIndexTool")["description"]
            .as_str()
            .unwrap()
            .starts_with("This tool gets index information from the OpenSearch cluster.")
    );

    // What the model read back: ml-commons' output shapes.
    let results: Vec<Value> = up.requests()[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .cloned()
        .collect();
    let result = |id: &str| {
        results
            .iter()
            .find(|m| m["tool_call_id"] == id)
            .unwrap_or_else(|| panic!("no result for {id}: {results:#?}"))["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let line: Value = serde_json::from_str(result("c_search").trim()).unwrap();
    assert_eq!(
        line,
        json!({"_index": "test_population_data", "_id": "sea-2023", "_score": 0.91,
            "_source": {"population_description": POPULATION_HIT}})
    );
    assert!(result("c_vec").contains("3,519,000"));
    let list = result("c_list");
    let mut lines = list.lines();
    assert!(
        lines
            .next()
            .unwrap()
            .starts_with("row,health,status,index,uuid,"),
        "{list}"
    );
    assert_eq!(
        lines.next().unwrap(),
        "1,green,open,test_population_data,b7T3,1,1,6,0,18.2kb,9.1kb"
    );
    let cat = result("c_cat");
    assert!(
        cat.starts_with("health\tstatus\tindex\tuuid\tpri\trep\tdocs.count"),
        "{cat}"
    );
    let mapping = result("c_map");
    assert!(
        mapping.starts_with("index: test_population_data\n\nmappings:\nproperties="),
        "{mapping}"
    );
    assert!(mapping.contains("settings:\nindex.knn=true\n"), "{mapping}");
    let missing = result("c_missing");
    assert!(missing.contains("OpenSearch HTTP 404"), "{missing}");
    assert!(!out.to_string().contains(&password));
}

/// `[opensearch]` with `aws_region` signs each request with SigV4 for `es`, credentials from
/// the AWS default chain (here the environment of the gateway process); a flow agent of one
/// bare `ListIndexTool` needs no model.
#[tokio::test]
async fn sigv4_signs_cluster_requests_with_the_default_chain() {
    let os = OpenSearchFake::start().await;
    let path = temp_dir("sigv4").join("gw.toml");
    std::fs::write(
        &path,
        format!(
            "[[agents]]\nid = \"cfg\"\n[agents.model]\nprovider = \"scripted\"\n\
             [opensearch]\nurl = \"{}\"\naws_region = \"eu-west-3\"\naws_service = \"es\"\n",
            os.base
        ),
    )
    .unwrap();
    let gw = GatewayProcess::spawn(
        &path,
        &[
            ("AWS_ACCESS_KEY_ID", "AKIDGATEWAYTEST"),
            ("AWS_SECRET_ACCESS_KEY", "gateway-test-secret"),
            ("AWS_EC2_METADATA_DISABLED", "true"),
            ("AWS_CONFIG_FILE", "/nonexistent"),
            ("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent"),
        ],
        false,
    )
    .await;
    let base = gw.base.clone();
    let (status, reg) = post(
        &base,
        "/_plugins/_ml/agents/_register",
        json!({"name": "indices", "type": "flow", "tools": [{"type": "ListIndexTool"}]}),
    )
    .await;
    assert_eq!(status, 200, "{reg}");
    let id = reg["agent_id"].as_str().unwrap();
    let (status, out) = post(
        &base,
        &format!("/_plugins/_ml/agents/{id}/_execute"),
        json!({"parameters": {"question": "which indices are there?"}}),
    )
    .await;
    assert_eq!(status, 200, "{out}");
    assert!(out.to_string().contains("test_population_data"), "{out}");
    let seen = os.requests();
    let h = &seen.last().unwrap().headers;
    let auth = h.get("authorization").unwrap().to_str().unwrap();
    assert!(
        auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDGATEWAYTEST/")
            && auth.contains("/eu-west-3/es/aws4_request"),
        "{auth}"
    );
    assert!(h.get("x-amz-date").is_some());
    assert!(h.get("x-amz-content-sha256").is_some());
    assert!(!out.to_string().contains("gateway-test-secret"));
}

/// Against a real cluster when the environment names one (`AGUI_TEST_OPENSEARCH`, e.g.
/// `http://admin:pass@localhost:9200`): `ListIndexTool` and `SearchIndexTool` flows see an
/// index the test creates.
#[tokio::test]
async fn a_real_cluster_answers_when_the_environment_has_one() {
    let Some(url) = std::env::var("AGUI_TEST_OPENSEARCH")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        eprintln!("\n*** AGUI_TEST_OPENSEARCH is unset: a real OpenSearch is NOT tested ***\n");
        return;
    };
    let parsed = url::Url::parse(&url).expect("AGUI_TEST_OPENSEARCH is a URL");
    let mut plain = parsed.clone();
    plain.set_username("").unwrap();
    plain.set_password(None).unwrap();
    let http = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    let auth = |r: reqwest::RequestBuilder| {
        if parsed.username().is_empty() {
            r
        } else {
            r.basic_auth(parsed.username(), parsed.password())
        }
    };
    let index = format!("agui-test-{}", uuid::Uuid::new_v4().simple());
    let base = plain.as_str().trim_end_matches('/').to_string();
    let r = auth(http.put(format!("{base}/{index}")))
        .json(&json!({"mappings": {"properties": {"population_description": {"type": "text"}}}}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{:?}", r.text().await);
    let r = auth(http.put(format!("{base}/{index}/_doc/sea-2023?refresh=true")))
        .json(&json!({"population_description": POPULATION_HIT}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{:?}", r.text().await);

    let mut section = format!("[opensearch]\nurl = \"{base}\"\nverify_tls = false\n");
    let password_var = "AGUI_TEST_OPENSEARCH_PASSWORD_FOR_GATEWAY";
    if !parsed.username().is_empty() {
        section.push_str(&format!(
            "username = \"{}\"\npassword_env = \"{password_var}\"\n",
            parsed.username()
        ));
    }
    let path = temp_dir("real-os").join("gw.toml");
    std::fs::write(
        &path,
        format!("[[agents]]\nid = \"cfg\"\n[agents.model]\nprovider = \"scripted\"\n{section}"),
    )
    .unwrap();
    let gw = GatewayProcess::spawn(
        &path,
        &[(password_var, parsed.password().unwrap_or(""))],
        false,
    )
    .await;
    let (status, reg) = post(
        &gw.base,
        "/_plugins/_ml/agents/_register",
        json!({"name": "real", "type": "flow",
               "tools": [{"type": "ListIndexTool"}, {"type": "SearchIndexTool"}]}),
    )
    .await;
    assert_eq!(status, 200, "{reg}");
    let (status, out) = post(
        &gw.base,
        &format!(
            "/_plugins/_ml/agents/{}/_execute",
            reg["agent_id"].as_str().unwrap()
        ),
        json!({"parameters": {"question": "Seattle", "index": index,
            "query": {"query": {"match": {"population_description": "Seattle"}}}}}),
    )
    .await;
    let _ = auth(http.delete(format!("{base}/{index}"))).send().await;
    assert_eq!(status, 200, "{out}");
    let text = out.to_string();
    assert!(text.contains(&index), "{out}");
    assert!(text.contains("sea-2023"), "{out}");
}
