/// API keys: hashed in config, required on every non-public endpoint once configured, with
/// per-agent allow lists (401 without a valid key, 403 outside the key's reach) and CORS
/// preflights that allow the Authorization header.
mod common;

use common::*;
use serde_json::json;

const SITE_KEY: &str = "site-key-0123456789abcdef";
const OPS_KEY: &str = "ops-key-fedcba9876543210";

async fn gateway() -> Gateway {
    let ops_hash = agui_gateway::config::auth::hex(&agui_gateway::config::auth::hash_key(OPS_KEY));
    let toml = format!(
        r#"
[server]
cors_origins = ["https://shop.example"]
[[auth.keys]]
name = "website"
key_env = "AGUI_TEST_SITE_KEY"
agents = ["a"]
[[auth.keys]]
name = "ops"
sha256 = "{ops_hash}"
admin = true
[[agents]]
id = "a"
[agents.model]
provider = "scripted"
[[agents]]
id = "b"
[agents.model]
provider = "scripted"
"#
    );
    let env = |v: &str| (v == "AGUI_TEST_SITE_KEY").then(|| SITE_KEY.to_string());
    let mut config =
        agui_gateway::config::Config::parse_with_env(&toml, "test.toml", None, &env).unwrap();
    config.data_dir = temp_dir("auth");
    Gateway::from_config(config).await
}

async fn post(gw: &Gateway, agent: &str, key: Option<&str>) -> reqwest::Response {
    let mut req = reqwest::Client::new()
        .post(gw.url(&format!("/agents/{agent}/agui")))
        .header("accept", "text/event-stream")
        .json(&user_says_hi(&format!(
            "t-{agent}-{}",
            key.unwrap_or("none")
        )));
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    req.send().await.unwrap()
}

#[tokio::test]
async fn runs_need_a_key_that_lists_the_agent() {
    let gw = gateway().await;
    // No key, and a wrong one: 401 JSON with a Bearer challenge.
    for key in [None, Some("not-a-key-at-all-0000")] {
        let r = post(&gw, "a", key).await;
        assert_eq!(r.status(), 401);
        assert_eq!(r.headers()["www-authenticate"], "Bearer");
        let v: serde_json::Value = r.json().await.unwrap();
        assert_eq!(v["error"]["type"], "unauthorized");
    }
    // The website key runs agent a, not agent b.
    let r = post(&gw, "a", Some(SITE_KEY)).await;
    assert_eq!(r.status(), 200);
    let events = read_events(r, false).await;
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED");
    let r = post(&gw, "b", Some(SITE_KEY)).await;
    assert_eq!(r.status(), 403);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["error"]["type"], "forbidden");
    assert!(v["error"]["message"].as_str().unwrap().contains("\"b\""));
    // X-API-Key works too; the ops key runs every agent.
    let r = reqwest::Client::new()
        .post(gw.url("/agents/b/agui"))
        .header("x-api-key", OPS_KEY)
        .json(&user_says_hi("t-ops"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // Nothing the keys said ends up in an answer.
    let listed = reqwest::Client::new()
        .get(gw.url("/agents"))
        .bearer_auth(SITE_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(listed.status(), 200);
    assert!(!listed.text().await.unwrap().contains(SITE_KEY));
}

#[tokio::test]
async fn admin_endpoints_need_an_admin_key_and_health_stays_public() {
    let gw = gateway().await;
    let http = reqwest::Client::new();
    assert_eq!(
        http.get(gw.url("/healthz")).send().await.unwrap().status(),
        200
    );
    assert_eq!(http.get(gw.url("/")).send().await.unwrap().status(), 200);
    let register = json!({"name": "x", "type": "flow", "tools": []});
    let url = gw.url("/_plugins/_ml/agents/_register");
    let r = http.post(&url).json(&register).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = http
        .post(&url)
        .bearer_auth(SITE_KEY)
        .json(&register)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = http
        .post(&url)
        .bearer_auth(OPS_KEY)
        .json(&register)
        .send()
        .await
        .unwrap();
    // Let in: the agent API itself answers (this body lacks the tools a flow agent needs).
    assert_eq!(r.status(), 400);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["error"]["type"], "illegal_argument_exception");
}

#[tokio::test]
async fn a_browser_preflight_may_send_authorization_from_an_allowed_origin() {
    let gw = gateway().await;
    let http = reqwest::Client::new();
    let preflight = |origin: &'static str| {
        http.request(reqwest::Method::OPTIONS, gw.url("/agents/a/agui"))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "content-type,accept,authorization",
            )
            .send()
    };
    let r = preflight("https://shop.example").await.unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "https://shop.example"
    );
    let allowed = r.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    for h in ["content-type", "accept", "authorization"] {
        assert!(allowed.contains(h), "{allowed}");
    }
    // Another origin gets no CORS grant.
    let r = preflight("https://evil.example").await.unwrap();
    assert!(r.headers().get("access-control-allow-origin").is_none());
    // An error answer to an allowed origin still carries CORS headers (the page can read it).
    let r = http
        .post(gw.url("/agents/a/agui"))
        .header("origin", "https://shop.example")
        .json(&user_says_hi("t-cors"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "https://shop.example"
    );
}
