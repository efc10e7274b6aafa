/// The unified interface of seed 000 (the RFC) and the Execute Agent API of seed 002, pasted as
/// written (ids filled in, elided base64 filled with a real image): a `conversational` agent
/// registered with a Bedrock `model` block runs plain text, content blocks and messages, and
/// reports token usage, against a Bedrock stand-in that `AWS_ENDPOINT_URL_BEDROCK_RUNTIME` points
/// the AWS SDK at, as it would in a user's shell.
mod common;

use common::bedrock_fake::{BedrockReply, FakeBedrock, text_events};
use common::{GatewayProcess, TRUST_LOOPBACK, temp_dir};
use serde_json::{Value, json};

/// A real PNG (seed 000's), standing in for the seeds' elided `"iVBORw0KGgo..."`.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAG4AAAAeCAYAAADNeSs6AAABWmlDQ1BJQ0MgUHJvZmlsZQAAKJF1kL1Lw1AUxU9stPiBWOzg4FCog0ot0mao4lI7aMEhtBY/cEnS2BTS+Ejj1+zg4iwODk7+BUpdCo7ughUHcXQXsmiJ95lqW8ULl/vjcLjvvAv0iApjpgigYjl2bmkxsr6xGQm+og8h9COKqKJVWVqWV8iC79ld7gMEPu9n+K6Uen583cgG9IV6vqDPn/z1d9VAUa9qND+opzVmO4AwSSzvO4zzAXHYplDEfFe45PMFZ9Xnqy/Pai5DfEc8ohlKkfiROKZ26KUOrpi7WisDTz+kW4U8zWHqcWSQhIRlpDAHSvCPV2p5d8BwCBtllGDAQQRpUhhM6MRZWNAQR4w4gVlqid/49+3amvFMq7foqaO2Vh4DbuL0zVBbm3gBRveA+hlTbOXnooIrVreTCZ8Ha0Dvqee9rQHBKaDZ8Lz3muc1L4HAE3DrfgIXSWDddJguWQAAAFZlWElmTU0AKgAAAAgAAYdpAAQAAAABAAAAGgAAAAAAA5KGAAcAAAASAAAARKACAAQAAAABAAAAbqADAAQAAAABAAAAHgAAAABBU0NJSQAAAFNjcmVlbnNob3TofmF7AAAB1WlUWHRYTUw6Y29tLmFkb2JlLnhtcAAAAAAAPHg6eG1wbWV0YSB4bWxuczp4PSJhZG9iZTpuczptZXRhLyIgeDp4bXB0az0iWE1QIENvcmUgNi4wLjAiPgogICA8cmRmOlJERiB4bWxuczpyZGY9Imh0dHA6Ly93d3cudzMub3JnLzE5OTkvMDIvMjItcmRmLXN5bnRheC1ucyMiPgogICAgICA8cmRmOkRlc2NyaXB0aW9uIHJkZjphYm91dD0iIgogICAgICAgICAgICB4bWxuczpleGlmPSJodHRwOi8vbnMuYWRvYmUuY29tL2V4aWYvMS4wLyI+CiAgICAgICAgIDxleGlmOlBpeGVsWURpbWVuc2lvbj4zMDwvZXhpZjpQaXhlbFlEaW1lbnNpb24+CiAgICAgICAgIDxleGlmOlBpeGVsWERpbWVuc2lvbj4xMTA8L2V4aWY6UGl4ZWxYRGltZW5zaW9uPgogICAgICAgICA8ZXhpZjpVc2VyQ29tbWVudD5TY3JlZW5zaG90PC9leGlmOlVzZXJDb21tZW50PgogICAgICA8L3JkZjpEZXNjcmlwdGlvbj4KICAgPC9yZGY6UkRGPgo8L3g6eG1wbWV0YT4KguVc7gAABblJREFUaAXtWVlIlG0UPu5LZaIpKYWppOJWoKIWWqkIeueCF0HeieKNF6K4IE7oRVcZSqRpYCoaRDeBqGg3uSN0oZTikqaYoZm5lGkuf8+Bd35nnG8+Z379c+A7MPMuZ/nO9571nTG7fPnyPilgcidgbnIaKwrzCSiGM1FHUAynGM5ET8BE1baU0tvGxkYKpeyfghNQUuUpMIIxKkhGnBC2tbUlpsp4ik5A1nDG6Oro6EjJycnM+vXrV3r9+rWGmLt375KtrS3v1dfX097engb+NC1iY2PJw8ODVers7KS5uTlJ9RISEmh6eprGxsYkaY4LIZkqY2Ji6Pnz5wQjCGhsbKT8/HyxlBzt7OzI29ubbt68SUlJSYfovLy8KDg4mOLj4+k4amldXR2VlJQceg70z8vLO7RvyMafHyj4XaBrUFCQXta0tDS6c+eOBk16ejq9ePFCY08srly5wrjw8HCxdeRR0nDm5pIoWeELCwtUXFxM796900lbXl7OTqETacTmysoKOTs7H+K0tram2dnZQ/uGbCAj4F3290/uByYzMzNDVGJao1Olvb09FRUVsTdC0sePH0mlUtHv378NVuIgAyIxJyeHzpw5w7Jevnx5KNUepMf8y5cv5O/vz9v379/ndAU+HAj0ghMWFBRQQEAAz0EPXVdXV5kHkYRM0tbWRkh3lpaW9PbtW3ry5Anjpb4uXbpEpaWldO7cOfr+/TvzSdEe975sWJWVlVFFRQV/8EICcBCenp6EA0IqQNinpKQItFEjDhqpDd5dW1tLiFzUQ3d3d73yPn36xDXTycmJfH196datW6wPmFBvUlNTOTX39fXRq1evyNXVlXJzc9UyUW+trKzYaD09PfTs2TP69u2bGi81yczMJEQ1ohKGg4z/C/61hMQTl5eX1VF08eJFNdXVq1cJjQfqGQDee/v2bcl8rmbUM8Gh4+VRS9+8eUNDQ0P09OlTiouLo4aGBknOiYkJsrCwoIiICNrc3GQjwqngAOvr6xQZGUk/fvygx48fs4zAwECC/trQ0dFBTU1N2tuSazgrDN3e3k69vb3sbNrEv379kkyzwAGgs6Ega7hHjx6xN0EwDhRw4cIFTkPw1NDQUN7DtWFjY4Pnxn65ubkx6/DwMI9ra2u0s7NDLi4uekXCcIDo6Giamppio9y4cUOtz9mzZ2lxcVEtY3Jykvz8/NRrMenq6hJT2dHBwYGdDLIAcBDoqg3IGiIla+NEUCwtLWmjZNeyhtMlQaSRDx8+cArVRYM91DupJmd7e5vZELHC4xDBAEQD6hAcA+kZaUgf/Pz5k3Z3d7ltb2lp4SyAzlW07pCPNCoAnSLotQFNjj4QVxjQwKkgA7IA6I4PlhLe/PPV3d3NH7E+OOJ87t27d3DryHPZGqdLEu5d8ODr169TWFgYk1y7do0SExM1yPv7+/mFoqKi6Pz58xo4GB2pDIrjyoEUOT4+znu4QiDKsrKymGdgYECDV9cC0Y4aCVrIxvzz589MOjo6SogQtOqINHwM9XLQI6JRH0V5mJ+f5zSMGpyRkaFLLa7RyFrg04aQkBACTvsKoU2nay1pOLlL8YMHDwg5GkUezUlhYaG6wxQPGhkZoffv31N2djbV1NRoNBkwWmtrKxu+urqaGxukW6RjpMyqqiquWYODgyxDyJQakQWQquBQ4AHMzMzwiOYBeDQTKpWK9yorK3k8+KXvnZubmwkpF3zoJAGIbjjEw4cP2YC6otjHx4fQG4BOG/CewIkLvjZe39pM6h9wcTGW+8kL0QJvwn1JFFt9DzwKDo0Gmgt4tEijR+GTo0FtRrSIFCpHfxQ8dMXBw0n0Gf4osgyh+c+GM+RhCu3xnYBkqjy+RyiSTuIEZLtKkTJP4uGKTONPQIk448/ur3JKRpxcU/JXtVYeTkrEmagTKIZTDGeiJ2CiaisRpxjORE/ARNVWIs5EDfcPXLUlH3d6XY0AAAAASUVORK5CYII=";

async fn post(gw: &GatewayProcess, path: &str, body: Value) -> (u16, Value) {
    common::send_json("POST", gw.url(path), Some(&body)).await
}

fn output<'a>(resp: &'a Value, name: &str) -> &'a Value {
    common::ml_output(resp, name)
}

#[tokio::test]
async fn the_rfc_agent_runs_text_content_blocks_and_messages_on_bedrock() {
    let bedrock = FakeBedrock::start(vec![
        BedrockReply::Events(text_events(
            "I can list indices, search them and read mappings.",
        )),
        BedrockReply::Events(text_events("A small hello-world screenshot.")),
        BedrockReply::Events(text_events("You like red.")),
        BedrockReply::Events(text_events("The same three tools.")),
    ])
    .await;
    let dir = temp_dir("seeds-unified");
    let config = dir.join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "data_dir = \"{}\"\n{TRUST_LOOPBACK}",
            dir.join("data").display()
        ),
    )
    .unwrap();
    let endpoint = bedrock.endpoint();
    let gw = GatewayProcess::spawn(
        &config,
        &[
            ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", endpoint.as_str()),
            ("AWS_EC2_METADATA_DISABLED", "true"),
        ],
        false,
    )
    .await;

    // 1. Register Agent (seed 000, the RFC's API definition).
    let (status, reg) = post(
        &gw,
        "/_plugins/_ml/agents/_register",
        json!({
          "name": "Claude 3.7 without t2ppl",
          "type": "conversational",
          "description": "this is a test agent",
          "model": {
            "model_id": "us.anthropic.claude-3-7-sonnet-20250219-v1:0",
            "model_provider": "bedrock/converse",
            "credential": {
              "access_key": "YOUR_ACCESS_KEY",
              "secret_key": "YOUR_SECRET_KEY",
              "session_token": "YOUR_SESSION_TOKEN"
            }
          },
          "memory": {
            "type": "conversation_index"
          }
        }),
    )
    .await;
    assert_eq!(status, 200, "{reg}");
    let exec = format!(
        "/_plugins/_ml/agents/{}/_execute",
        reg["agent_id"].as_str().unwrap()
    );

    // 2.1 Plain text.
    let (status, out) = post(
        &gw,
        &exec,
        json!({ "input": "what tools do you have access to?" }),
    )
    .await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(
        output(&out, "response")["result"],
        "I can list indices, search them and read mappings."
    );
    let reqs = bedrock.requests();
    assert_eq!(
        reqs[0].path,
        "/model/us.anthropic.claude-3-7-sonnet-20250219-v1:0/converse-stream"
    );
    let auth = reqs[0].headers["authorization"].to_str().unwrap();
    assert!(auth.contains("Credential=YOUR_ACCESS_KEY/"), "{auth}");
    assert_eq!(
        reqs[0].headers["x-amz-security-token"],
        "YOUR_SESSION_TOKEN"
    );

    // 2.2 Content blocks.
    let (status, out) = post(
        &gw,
        &exec,
        json!({
          "input": [
            {
              "type": "text",
              "text": "what can you see in this new image?"
            },
            {
              "type": "image",
              "source": {
                "type": "base64",
                "format": "png",
                "data": PNG
              }
            }
          ]
        }),
    )
    .await;
    assert_eq!(status, 200, "{out}");
    let sent = &bedrock.requests()[1].body["messages"];
    let last = &sent[sent.as_array().unwrap().len() - 1];
    assert_eq!(
        last["content"][0]["text"],
        "what can you see in this new image?"
    );
    assert_eq!(last["content"][1]["image"]["format"], "png", "{last}");

    // 2.3 Messages with content blocks.
    let (status, out) = post(
        &gw,
        &exec,
        json!({
          "input": [
            { "role": "user", "content": [ { "type": "text", "text": "I like red" } ] },
            { "role": "assistant", "content": [ { "type": "text", "text": "Thanks for telling me that! I'll remember it." } ] },
            { "role": "user", "content": [ { "type": "text", "text": "What colour do I like?" } ] }
          ]
        }),
    )
    .await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(output(&out, "response")["result"], "You like red.");
    let sent = bedrock.requests()[2].body["messages"].to_string();
    assert!(
        sent.contains("I like red") && sent.contains("What colour do I like?"),
        "{sent}"
    );

    // Seed 002: token usage with the unified registration.
    let (status, out) = post(
        &gw,
        &exec,
        json!({
          "input": "What tools do you have access to?",
          "parameters": {
            "include_token_usage": true
          }
        }),
    )
    .await;
    assert_eq!(status, 200, "{out}");
    let usage = &output(&out, "token_usage")["dataAsMap"];
    assert_eq!(usage["per_turn_usage"][0]["input_tokens"], 10, "{usage}");
    assert_eq!(usage["per_model_usage"][0]["call_count"], 1, "{usage}");
    assert_eq!(
        usage["per_model_usage"][0]["model_name"],
        "us.anthropic.claude-3-7-sonnet-20250219-v1:0"
    );
}
