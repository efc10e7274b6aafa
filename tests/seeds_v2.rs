/// Seed 000's V2 and RFC §3 requests as written (ids filled in, hosts pointed at local
/// stand-ins): the Claude 3.7 model with its inline Converse connector, `_predict` with a
/// system prompt, the V2 "RAG Agent" (`_llm_interface: bedrock/converse/claude`, two
/// `SearchIndexTool`s with `neural` queries and `attributes.input_schema`), and the RFC's
/// three-step registration (`connectors/_register`, `models/_register`, an agent with bare
/// `ListIndexTool`, `SearchIndexTool`, `IndexMappingTool`); each runs end to end against a
/// Bedrock stand-in answering `/converse` (SigV4 checked) and an OpenSearch stand-in speaking
/// its REST API behind the gateway's `[opensearch]` section.
mod common;
#[path = "common/ml_fakes.rs"]
mod ml_fakes;

use common::bedrock_fake::{BedrockReply, FakeBedrock, text_events, tool_use_events};
use common::*;
use ml_fakes::*;
use serde_json::{Value, json};

/// The request body the seed's Claude 3.7 connector writes (V2 and RFC §3.1 alike).
const CONVERSE_BODY: &str = "{ \"system\": [{\"text\": \"${parameters.system_prompt}\"}], \"messages\": [${parameters._chat_history:-}{\"role\":\"user\",\"content\":[{\"text\":\"${parameters.prompt}\"}]}${parameters._interactions:-}]${parameters.tool_configs:-} }";

async fn gateway(os: &OpenSearchFake) -> (Gateway, String) {
    let gw = Gateway::start(&format!(
        "[[agents]]\nid = \"cfg\"\n[agents.model]\nprovider = \"scripted\"\n\
         [opensearch]\nurl = \"{}\"\n",
        os.base
    ))
    .await;
    let base = gw.url("").trim_end_matches('/').to_string();
    (gw, base)
}

fn result<'a>(resp: &'a Value, name: &str) -> &'a Value {
    ml_output(resp, name)
}

#[tokio::test]
async fn the_v2_rag_agent_searches_with_neural_queries_through_its_converse_connector() {
    let question = "What is the population of \"Seattle\" in 2023?";
    let bedrock = FakeBedrock::start(vec![
        BedrockReply::Events(text_events("Hello! How can I help?")),
        BedrockReply::Events(tool_use_events(
            "tu-1",
            "retrieve_population_data",
            &json!({"question": question}).to_string(),
        )),
        BedrockReply::Events(text_events("Seattle had 3,519,000 people in 2023.")),
    ])
    .await;
    let os = OpenSearchFake::start().await;
    let (_gw, base) = gateway(&os).await;

    // 1. The model, its connector inline, as written (the host aside).
    let (status, m) = post(
        &base,
        "/_plugins/_ml/models/_register",
        json!({
          "name": "Bedrock Claude 3.7 model",
          "function_name": "remote",
          "description": "test model",
          "connector": {
            "name": "Bedrock Claude3.7 connector",
            "description": "test connector",
            "version": 1,
            "protocol": "aws_sigv4",
            "parameters": {
              "region": "us-west-2",
              "service_name": "bedrock",
              "model": "us.anthropic.claude-3-7-sonnet-20250219-v1:0"
            },
            "credential": {
              "access_key": "AKIDV2SEED",
              "secret_key": "v2-seed-secret"
            },
            "actions": [
              {
                "action_type": "predict",
                "method": "POST",
                "url": format!("{}/model/${{parameters.model}}/converse", bedrock.endpoint()),
                "headers": {
                  "content-type": "application/json"
                },
                "request_body": CONVERSE_BODY
              }
            ]
          }
        }),
    )
    .await;
    assert_eq!(status, 200, "{m}");
    let model = m["model_id"].as_str().unwrap().to_string();

    // _predict as written.
    let (status, p) = post(
        &base,
        &format!("/_plugins/_ml/models/{model}/_predict"),
        json!({
            "parameters": {
                "system_prompt": "You are a helpful assistant.",
                "prompt": "hello"
            }
        }),
    )
    .await;
    assert_eq!(status, 200, "{p}");
    let first = &bedrock.requests()[0];
    assert_eq!(
        first.path,
        "/model/us.anthropic.claude-3-7-sonnet-20250219-v1:0/converse"
    );
    assert!(
        first.headers["authorization"]
            .to_str()
            .unwrap()
            .contains("/us-west-2/bedrock/aws4_request"),
        "{:?}",
        first.headers
    );
    assert_eq!(
        first.body,
        json!({"system": [{"text": "You are a helpful assistant."}],
               "messages": [{"role": "user", "content": [{"text": "hello"}]}]})
    );

    // 2. The agent, as written.
    let (status, a) = post(&base, "/_plugins/_ml/agents/_register", json!({
      "name": "RAG Agent",
      "type": "conversational",
      "description": "this is a test agent",
      "app_type": "rag",
      "llm": {
        "model_id": model,
        "parameters": {
          "max_iteration": 10,
          "system_prompt": "You are a helpful assistant. You are able to assist with a wide range of tasks, from answering simple questions to providing in-depth explanations and discussions on a wide range of topics.\nIf the question is complex, you will split it into several smaller questions, and solve them one by one. For example, the original question is:\nhow many orders in last three month? Which month has highest?\nYou will spit into several smaller questions:\n1.Calculate total orders of last three month.\n2.Calculate monthly total order of last three month and calculate which month's order is highest.",
          "prompt": "${parameters.question}"
        }
      },
      "memory": {
        "type": "conversation_index"
      },
      "parameters": {
        "_llm_interface": "bedrock/converse/claude"
      },
      "tools": [
        seed_search_tool("retrieve_population_data", "test_population_data",
                    "population_description_embedding", "population_description"),
        seed_search_tool("retrieve_tech_news", "test_tech_news", "passage_embedding", "passage")
      ]
    })).await;
    assert_eq!(status, 200, "{a}");
    let agent = a["agent_id"].as_str().unwrap().to_string();

    let (status, r) = post(
        &base,
        &format!("/_plugins/_ml/agents/{agent}/_execute"),
        json!({"parameters": {"question": question}}),
    )
    .await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(
        result(&r, "response")["result"],
        "Seattle had 3,519,000 people in 2023."
    );
    assert!(result(&r, "memory_id")["result"].is_string());

    // The model was offered the tools with their input_schema, as Converse's toolConfig.
    let calls = bedrock.requests();
    let asked = &calls[1].body;
    assert!(
        asked["system"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("You are a helpful assistant."),
        "{asked}"
    );
    assert_eq!(asked["messages"][0]["content"][0]["text"], question);
    let tools = asked["toolConfig"]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 2, "{asked}");
    assert_eq!(tools[0]["toolSpec"]["name"], "retrieve_population_data");
    assert_eq!(
        tools[0]["toolSpec"]["inputSchema"]["json"]["required"],
        json!(["question"])
    );

    // The neural query reached the cluster unchanged but for the question.
    let searches: Vec<Seen> = os
        .requests()
        .into_iter()
        .filter(|s| s.path_and_query.ends_with("/_search"))
        .collect();
    assert_eq!(searches.len(), 1);
    assert_eq!(searches[0].path_and_query, "/test_population_data/_search");
    assert_eq!(
        searches[0].body.clone().unwrap(),
        json!({"query": {"neural": {"population_description_embedding": {
                   "query_text": question, "model_id": "w0T3NJwBZFG13462QeiT"}}},
               "size": 2, "_source": "population_description"})
    );

    // The second call carries the toolUse and its toolResult (the hit) as Converse messages.
    let second = calls[2].body.to_string();
    assert!(second.contains("\"toolUseId\":\"tu-1\""), "{second}");
    assert!(second.contains("3,519,000"), "{second}");
}

#[tokio::test]
async fn the_rfc_three_step_agent_lists_indices_with_default_tools() {
    let bedrock = FakeBedrock::start(vec![
        BedrockReply::Events(tool_use_events("tu-1", "ListIndexTool", "{}")),
        BedrockReply::Events(text_events("You have one index: test_population_data.")),
    ])
    .await;
    let os = OpenSearchFake::start().await;
    let (_gw, base) = gateway(&os).await;

    // 1. The connector, as written (the host aside).
    let (status, c) = post(&base, "/_plugins/_ml/connectors/_register", json!({
        "name": "My Claude3.7 connector",
        "description": "my test connector",
        "version": 1,
        "protocol": "aws_sigv4",
        "parameters": {
          "region": "us-east-1",
          "service_name": "bedrock",
          "model": "us.anthropic.claude-3-7-sonnet-20250219-v1:0"
        },
        "credential": {
          "access_key": "AKIDRFC",
          "secret_key": "rfc-secret",
          "session_token": "rfc-token"
        },
        "actions": [
          {
            "action_type": "predict",
            "method": "POST",
            "url": format!("{}/model/${{parameters.model}}/converse", bedrock.endpoint()),
            "headers": {
              "content-type": "application/json"
            },
            "request_body": "{\"system\": [{\"text\": \"${parameters.system_prompt}\"}], \"messages\": [${parameters._chat_history:-}{\"role\":\"user\",\"content\":[{\"text\":\"${parameters.prompt}\"}]}${parameters._interactions:-}]${parameters.tool_configs:-} }"
          }
        ]
    })).await;
    assert_eq!(status, 200, "{c}");

    // 2. The model.
    let (status, m) = post(
        &base,
        "/_plugins/_ml/models/_register",
        json!({
          "name": "agent model",
          "function_name": "remote",
          "description": "<>",
          "connector_id": c["connector_id"]
        }),
    )
    .await;
    assert_eq!(status, 200, "{m}");

    // 3.1 The agent with the default tools.
    let (status, a) = post(
        &base,
        "/_plugins/_ml/agents/_register",
        json!({
          "name": "Claude 3.7 without t2ppl",
          "type": "conversational",
          "description": "this is a test agent",
          "llm": {
            "model_id": m["model_id"],
            "parameters": {
              "max_iteration": 50,
              "system_prompt": "Assistant is a large language model.",
              "prompt": "${parameters.question}"
            }
          },
          "tools": [
            {
              "type": "ListIndexTool"
            },
            {
              "type": "SearchIndexTool"
            },
            {
              "type": "IndexMappingTool"
            }
          ],
          "parameters": {
            "_llm_interface": "bedrock/converse/claude"
          },
          "memory": {
            "type": "conversation_index"
          }
        }),
    )
    .await;
    assert_eq!(status, 200, "{a}");

    // 4. Execute, as written.
    let (status, r) = post(
        &base,
        &format!(
            "/_plugins/_ml/agents/{}/_execute",
            a["agent_id"].as_str().unwrap()
        ),
        json!({"parameters": {"question": "hi"}}),
    )
    .await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(
        result(&r, "response")["result"],
        "You have one index: test_population_data."
    );
    let calls = bedrock.requests();
    let names: Vec<&str> = calls[0].body["toolConfig"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["toolSpec"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["ListIndexTool", "SearchIndexTool", "IndexMappingTool"]
    );
    assert!(
        calls[0].headers.contains_key("x-amz-security-token"),
        "the session token signs too"
    );
    // The model's ListIndexTool call reached the cluster, its CSV table came back to the model.
    assert!(
        os.requests()
            .iter()
            .any(|s| s.method == "GET" && s.path_and_query.starts_with("/_cat/indices")),
        "{:?}",
        os.requests()
            .iter()
            .map(|s| &s.path_and_query)
            .collect::<Vec<_>>()
    );
    let second = calls[1].body.to_string();
    assert!(second.contains("test_population_data"), "{second}");
}
