/// Without an `[opensearch]` cluster, ml-commons' index tools run on the embedded indexes: an
/// index created with an embedding model embeds its documents at ingestion, seed 000's V1
/// `conversational_flow` agent (`VectorDBTool` feeding `MLModelTool`'s prompt) answers from it,
/// and the V2 RAG agent's `SearchIndexTool` `neural` query, `ListIndexTool` and
/// `IndexMappingTool` answer in ml-commons' shapes; query DSL the embedded indexes do not
/// honour is an error result naming it.
mod common;
#[path = "common/ml_fakes.rs"]
mod ml_fakes;

use common::*;
use ml_fakes::*;
use serde_json::{Value, json};

const DOCS: &[(&str, &str)] = &[
    (
        "sea-2021",
        "The metro area population of Seattle in 2021 was 3,461,000, a 0.82% increase from 2020.",
    ),
    (
        "sea-2023",
        "The current metro area population of Seattle in 2023 is 3,519,000, a 0.86% increase from 2022.",
    ),
    (
        "nyc-2021",
        "The metro area population of New York City in 2021 was 18,823,000, a 0.1% decline from 2020.",
    ),
    (
        "nyc-2023",
        "The current metro area population of New York City in 2023 is 18,937,000, a 0.37% increase from 2022.",
    ),
    (
        "chi-2023",
        "Chicago's current metro area population in 2023 is 8,937,000.",
    ),
    (
        "bread",
        "Sourdough bakers knead the dough and bake the loaves at dawn.",
    ),
];

/// A gateway on the embedded defaults with `test_population_data` created with an embedding
/// model and filled; answers the gateway, its base URL and the embedding model's id.
async fn population_index(emb: &Embeddings) -> (Gateway, String, String) {
    let gw =
        Gateway::start("[[agents]]\nid = \"cfg\"\n[agents.model]\nprovider = \"scripted\"\n").await;
    let base = gw.url("").trim_end_matches('/').to_string();
    let model = register_model(&base, emb.connector()).await;
    let resp = reqwest::Client::new()
        .put(format!("{base}/indices/test_population_data"))
        .json(&json!({"embedding": {"model_id": model, "field": "population_description"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201, "{:?}", resp.text().await);
    let docs: Vec<Value> = DOCS
        .iter()
        .map(|(id, text)| json!({"id": id, "fields": {"population_description": text}}))
        .collect();
    let (status, body) = post(
        &base,
        "/indices/test_population_data/documents/_bulk",
        json!({"documents": docs}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["indexed"], DOCS.len(), "{body}");
    (gw, base, model)
}

#[tokio::test]
async fn seed_v1_flow_answers_from_an_embedded_vector_index() {
    let emb = Embeddings::start().await;
    let (_gw, base, embedding_model) = population_index(&emb).await;
    // Ingestion embedded each document's field through the model.
    let ingested: Vec<String> = emb.inputs.lock().unwrap().concat();
    assert_eq!(ingested.len(), DOCS.len());
    assert!(ingested.contains(&DOCS[0].1.to_string()));

    let listed: Value = reqwest::get(format!("{base}/indices"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let entry = listed["indices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "test_population_data")
        .unwrap()
        .clone();
    assert_eq!(
        entry,
        json!({"name": "test_population_data", "docs": DOCS.len(),
            "embedding": {"model_id": embedding_model, "field": "population_description"}})
    );

    // The ingestion API's search runs query DSL as SearchIndexTool does.
    let (status, found) = post(
        &base,
        "/indices/test_population_data/_search",
        json!({"query": {"match": {"population_description": "Chicago"}}, "size": 1}),
    )
    .await;
    assert_eq!(status, 200, "{found}");
    assert_eq!(found["hits"]["hits"][0]["_id"], "chi-2023", "{found}");
    assert_eq!(found["hits"]["hits"].as_array().unwrap().len(), 1);

    // An unknown embedding model is refused at creation, naming the field.
    let resp = reqwest::Client::new()
        .put(format!("{base}/indices/other"))
        .json(&json!({"embedding": {"model_id": "no-such-model"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    assert!(resp.text().await.unwrap().contains("embedding.model_id"));

    let answer = "Seattle grew by 58,000 people from 2021 to 2023.";
    let up = FakeOpenAi::start(vec![Reply::Sse(text_chunks(answer))]).await;
    let llm = register_model(&base, chat_connector(&up.base_url())).await;
    // Seed 000's V1 registration, ids filled in.
    let prompt = "\n\nHuman:You are a professional data analysist. You will always answer question based on the given context first. If the answer is not directly shown in the context, you will analyze the data and find the answer. If you don't know the answer, just say don't know. \n\nContext:\n${parameters.population_knowledge_base.output:-}\n\n${parameters.chat_history:-}\n\nHuman:${parameters.question}\n\nAssistant:";
    let (status, reg) = post(
        &base,
        "/_plugins/_ml/agents/_register",
        json!({
            "name": "population data analysis agent",
            "type": "conversational_flow",
            "description": "This is a demo agent for population data analysis",
            "app_type": "rag",
            "memory": {"type": "conversation_index"},
            "tools": [
                {
                    "type": "VectorDBTool",
                    "name": "population_knowledge_base",
                    "parameters": {
                        "model_id": embedding_model,
                        "index": "test_population_data",
                        "embedding_field": "population_description_embedding",
                        "source_field": ["population_description"],
                        "input": "${parameters.question}"
                    }
                },
                {
                    "type": "MLModelTool",
                    "name": "bedrock_claude_model",
                    "description": "A general tool to answer any question",
                    "parameters": {"model_id": llm, "prompt": prompt}
                }
            ]
        }),
    )
    .await;
    assert_eq!(status, 200, "{reg}");
    let id = reg["agent_id"].as_str().unwrap();
    let question = "what's the population increase of Seattle from 2021 to 2023?";
    let (status, out) = post(
        &base,
        &format!("/_plugins/_ml/agents/{id}/_execute"),
        json!({"parameters": {"question": question}}),
    )
    .await;
    assert_eq!(status, 200, "{out}");
    let outputs = out["inference_results"][0]["output"].as_array().unwrap();
    let result = outputs
        .iter()
        .find(|o| o["name"] == "bedrock_claude_model")
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(result["result"], answer);
    assert!(outputs.iter().any(|o| o["name"] == "memory_id"), "{out}");

    // The question was embedded, and the model's prompt holds the two nearest documents
    // (doc_size 2) as ml-commons' hit lines.
    assert_eq!(
        emb.inputs.lock().unwrap().last().unwrap(),
        &vec![question.to_string()]
    );
    let sent = up.requests()[0]["messages"].to_string();
    let context: String = up.requests()[0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert!(context.contains("Context:\n{\"_id\":\"sea-2"), "{context}");
    assert!(
        context.contains("3,461,000") && context.contains("3,519,000"),
        "{sent}"
    );
    assert!(!context.contains("Sourdough"), "{context}");
    let hits: Vec<Value> = context
        .lines()
        .filter(|l| l.starts_with("{\"_id\""))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(hits.len(), 2, "{context}");
    assert_eq!(hits[0]["_index"], "test_population_data");
    assert_eq!(
        hits[0]["_source"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["population_description"]
    );
}

#[tokio::test]
async fn seed_v2_neural_search_and_index_tools_run_on_embedded_indexes() {
    let emb = Embeddings::start().await;
    let (_gw, base, _) = population_index(&emb).await;
    let turn = vec![
        call_start(0, "c_neural", "retrieve_population_data"),
        call_args(0, r#"{"question":"Seattle population in 2023"}"#),
        call_start(1, "c_list", "ListIndexTool"),
        call_args(1, "{}"),
        call_start(2, "c_map", "IndexMappingTool"),
        call_args(2, r#"{"index":["test_population_data"]}"#),
        call_start(3, "c_match", "SearchIndexTool"),
        call_args(
            3,
            r#"{"index":"test_population_data","query":{"query":{"bool":{"must":{"match":{"population_description":"Chicago"}}}},"size":3}}"#,
        ),
        call_start(4, "c_fuzzy", "SearchIndexTool"),
        call_args(
            4,
            r#"{"index":"test_population_data","query":{"query":{"fuzzy":{"population_description":"Chicgo"}}}}"#,
        ),
        finish("tool_calls"),
    ];
    let up = FakeOpenAi::start(vec![
        Reply::Sse(turn),
        Reply::Sse(text_chunks("3,519,000.")),
    ])
    .await;
    let llm = register_model(&base, chat_connector(&up.base_url())).await;
    let (status, reg) = post(
        &base,
        "/_plugins/_ml/agents/_register",
        json!({
            "name": "RAG Agent", "type": "conversational",
            "llm": {"model_id": llm, "parameters": {"max_iteration": 5}},
            "parameters": {"_llm_interface": "openai/v1/chat/completions"},
            "memory": {"type": "conversation_index"},
            "tools": [
                {
                    "type": "SearchIndexTool",
                    "name": "retrieve_population_data",
                    "description": "This tool provides recent tech news.",
                    "parameters": {
                        "input": "{\"index\": \"${parameters.index}\", \"query\": ${parameters.query} }",
                        "index": "test_population_data",
                        "query": {
                            "query": {"neural": {"population_description_embedding": {
                                "query_text": "${parameters.question}",
                                // The seed's (a cluster's) model id: the embedded index
                                // embeds the query with its own model.
                                "model_id": "w0T3NJwBZFG13462QeiT"
                            }}},
                            "size": 2,
                            "_source": "population_description"
                        }
                    },
                    "attributes": {
                        "input_schema": {
                            "type": "object",
                            "properties": {"question": {"type": "string", "description": "Natural language question"}},
                            "required": ["question"],
                            "additionalProperties": false
                        },
                        "strict": false
                    }
                },
                {"type": "ListIndexTool"}, {"type": "SearchIndexTool"}, {"type": "IndexMappingTool"}
            ]
        }),
    )
    .await;
    assert_eq!(status, 200, "{reg}");
    let id = reg["agent_id"].as_str().unwrap();
    let (status, out) = post(
        &base,
        &format!("/_plugins/_ml/agents/{id}/_execute"),
        json!({"parameters": {"question": "How many people live in Seattle?"}}),
    )
    .await;
    assert_eq!(status, 200, "{out}");

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
    let neural: Vec<Value> = result("c_neural")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(neural.len(), 2, "{neural:#?}");
    assert_eq!(neural[0]["_id"], "sea-2023", "{neural:#?}");
    assert_eq!(
        neural[0]["_source"],
        json!({"population_description": DOCS[1].1})
    );
    assert!(neural[0]["_score"].as_f64().unwrap() > neural[1]["_score"].as_f64().unwrap());
    assert!(
        emb.inputs
            .lock()
            .unwrap()
            .contains(&vec!["Seattle population in 2023".to_string()])
    );

    let list = result("c_list");
    assert!(list.starts_with("row,health,status,index,uuid,"), "{list}");
    assert!(
        list.contains(",test_population_data,test_population_data,1,0,6,0,"),
        "{list}"
    );
    let mapping = result("c_map");
    assert!(
        mapping.starts_with("index: test_population_data\n\nmappings:\nproperties="),
        "{mapping}"
    );
    assert!(
        mapping.contains("knn_vector") && mapping.contains("\"dimension\":64"),
        "{mapping}"
    );
    assert!(mapping.contains("index.embedding.model_id="), "{mapping}");
    let chicago: Vec<Value> = result("c_match")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(chicago.len(), 1);
    assert_eq!(chicago[0]["_id"], "chi-2023");
    let fuzzy = result("c_fuzzy");
    assert!(
        fuzzy.contains("\"fuzzy\" queries are not supported on embedded indexes"),
        "{fuzzy}"
    );
}

/// The offline (`scripted`) embedding model needs no network: an index created with it and a
/// flow of one `VectorDBTool` answer with ml-commons' hit lines.
#[tokio::test]
async fn the_offline_embedding_model_serves_an_embedded_vector_index() {
    let gw =
        Gateway::start("[[agents]]\nid = \"cfg\"\n[agents.model]\nprovider = \"scripted\"\n").await;
    let base = gw.url("").trim_end_matches('/').to_string();
    let model = register_model(
        &base,
        json!({"name": "offline", "protocol": "scripted", "parameters": {"dimension": 256}}),
    )
    .await;
    let resp = reqwest::Client::new()
        .put(format!("{base}/indices/offline_population"))
        .json(&json!({"embedding": {"model_id": model}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let docs: Vec<Value> = DOCS
        .iter()
        .map(|(id, text)| json!({"id": id, "fields": {"population_description": text}}))
        .collect();
    let (status, body) = post(
        &base,
        "/indices/offline_population/documents/_bulk",
        json!({"documents": docs}),
    )
    .await;
    assert_eq!(
        (status, &body["indexed"]),
        (200, &json!(DOCS.len())),
        "{body}"
    );
    let (status, reg) = post(
        &base,
        "/_plugins/_ml/agents/_register",
        json!({"name": "retrieve", "type": "flow", "tools": [{
            "type": "VectorDBTool",
            "parameters": {"model_id": model, "index": "offline_population",
                "embedding_field": "embedding", "source_field": ["population_description"],
                "doc_size": 3, "input": "${parameters.question}"}
        }]}),
    )
    .await;
    assert_eq!(status, 200, "{reg}");
    let (status, out) = post(
        &base,
        &format!(
            "/_plugins/_ml/agents/{}/_execute",
            reg["agent_id"].as_str().unwrap()
        ),
        json!({"parameters": {"question": "population of Seattle in 2023"}}),
    )
    .await;
    assert_eq!(status, 200, "{out}");
    let text = out["inference_results"][0]["output"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "VectorDBTool")
        .unwrap_or_else(|| panic!("{out}"))["result"]
        .as_str()
        .unwrap()
        .to_string();
    let hits: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(hits.len(), 3, "{text}");
    assert!(hits.iter().all(|h| h["_index"] == "offline_population"));
}
