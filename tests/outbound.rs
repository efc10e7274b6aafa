/// The default config is no open proxy: URLs registered through the API may not reach
/// loopback, private or link-local addresses (in any spelling, after DNS, across redirects)
/// unless the operator trusts them; pages get CORS only from loopback origins; a foreign
/// `Host` is refused; bodies must be JSON.
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use serde_json::{Value, json};

/// A JSON upstream on 127.0.0.1 that counts its requests; `/redirect` answers 307 to `to`.
struct Upstream {
    addr: std::net::SocketAddr,
    hits: Arc<AtomicUsize>,
}

impl Upstream {
    async fn start(redirect_to: Option<String>) -> Upstream {
        let hits = Arc::new(AtomicUsize::new(0));
        let h = Arc::clone(&hits);
        let app = axum::Router::new().fallback(move || {
            let h = Arc::clone(&h);
            let to = redirect_to.clone();
            async move {
                h.fetch_add(1, Ordering::SeqCst);
                match to {
                    Some(to) => axum::response::Response::builder()
                        .status(307)
                        .header("location", to)
                        .body(axum::body::Body::empty())
                        .unwrap(),
                    None => axum::response::IntoResponse::into_response(axum::Json(
                        json!({"choices": [{"message": {"role": "assistant", "content": "inside"}}]}),
                    )),
                }
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Upstream { addr, hits }
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// A gateway with the default outbound policy (an empty `[outbound]` keeps the test helper
/// from trusting loopback) plus `outbound` lines.
async fn gateway(outbound: &str) -> Gateway {
    Gateway::start(&format!(
        "[[agents]]\nid = \"a\"\n[agents.model]\nprovider = \"scripted\"\n[outbound]\n{outbound}\n"
    ))
    .await
}

async fn post(gw: &Gateway, path: &str, body: Value) -> (u16, Value) {
    send_json("POST", gw.url(path), Some(&body)).await
}

fn connector(url: &str) -> Value {
    json!({
        "name": "c",
        "protocol": "http",
        "parameters": {"model": "m"},
        "actions": [{
            "action_type": "predict",
            "method": "POST",
            "url": url,
            "headers": {"content-type": "application/json"},
            "request_body": "{\"model\":\"${parameters.model}\"}"
        }]
    })
}

/// Registers `connector(url)` and a model on it; `_predict`s it.
async fn predict_through(gw: &Gateway, url: &str) -> (u16, Value) {
    let (status, c) = post(gw, "/_plugins/_ml/connectors/_create", connector(url)).await;
    assert_eq!(status, 200, "{c}");
    let (status, m) = post(
        gw,
        "/_plugins/_ml/models/_register",
        json!({"name": "m", "function_name": "remote", "connector_id": c["connector_id"]}),
    )
    .await;
    assert_eq!(status, 200, "{m}");
    let id = m["model_id"].as_str().unwrap();
    post(
        gw,
        &format!("/_plugins/_ml/models/{id}/_predict"),
        json!({"parameters": {}}),
    )
    .await
}

fn assert_refused(status: u16, body: &Value, field: &str) {
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["details"]["field"], field, "{body}");
    let reason = body["error"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("refused by the outbound URL policy"),
        "{reason}"
    );
}

#[tokio::test]
async fn connectors_to_loopback_in_any_spelling_are_refused_by_default() {
    let up = Upstream::start(None).await;
    let gw = gateway("").await;
    let port = up.addr.port();
    for host in [
        "127.0.0.1".to_string(),
        "localhost".into(),
        "2130706433".into(),
        "0x7f000001".into(),
        "0177.0.0.1".into(),
        "[::ffff:127.0.0.1]".into(),
        "[::127.0.0.1]".into(),
        "[64:ff9b::7f00:1]".into(),
        "[2002:7f00:1::]".into(),
        "[::1]".into(),
        "169.254.169.254".into(),
    ] {
        let url = format!("http://{host}:{port}/latest/meta-data/");
        let (status, body) = post(&gw, "/_plugins/_ml/connectors/_create", connector(&url)).await;
        assert_refused(status, &body, "actions[0].url");
        let mut inline = json!({"name": "m", "function_name": "remote"});
        inline["connector"] = connector(&url);
        let (status, body) = post(&gw, "/_plugins/_ml/models/_register", inline).await;
        assert_refused(status, &body, "connector.actions[0].url");
    }
    assert_eq!(up.hits(), 0);
}

#[tokio::test]
async fn a_placeholder_host_is_checked_when_predict_fills_it_in() {
    let up = Upstream::start(None).await;
    let gw = gateway("").await;
    let mut c = connector("http://${parameters.host}/v1");
    c["parameters"]["host"] = json!(up.addr.to_string());
    let (status, body) = predict_through(&gw, "http://${parameters.host}/v1").await;
    // No host parameter at all: a template error, not a request.
    assert_eq!(status, 400, "{body}");
    let (status, cd) = post(&gw, "/_plugins/_ml/connectors/_create", c).await;
    assert_eq!(status, 200, "{cd}");
    let (_, m) = post(
        &gw,
        "/_plugins/_ml/models/_register",
        json!({"name": "m", "function_name": "remote", "connector_id": cd["connector_id"]}),
    )
    .await;
    let id = m["model_id"].as_str().unwrap();
    let (status, body) = post(
        &gw,
        &format!("/_plugins/_ml/models/{id}/_predict"),
        json!({"parameters": {}}),
    )
    .await;
    assert_refused(status, &body, "actions.url");
    assert_eq!(up.hits(), 0);
}

#[tokio::test]
async fn agents_naming_loopback_models_tools_or_mcp_servers_are_refused_by_default() {
    let up = Upstream::start(None).await;
    let gw = gateway("").await;
    let inside = format!("http://{}", up.addr);
    let model = |base: &str| {
        json!({"model_id": "gpt", "model_provider": "openai/v1/chat/completions",
               "credential": {"openAI_key": "sk-x"}, "model_parameters": {"base_url": base}})
    };
    let cases = [
        (
            json!({"name": "x", "type": "conversational", "model": model(&inside)}),
            "model.model_parameters.base_url",
        ),
        (
            json!({"name": "x", "type": "conversational",
                   "model": {"model_id": "m", "model_provider": "bedrock/converse",
                             "credential": {"access_key": "a", "secret_key": "s"},
                             "model_parameters": {"region": "us-east-1", "endpoint_url": inside}}}),
            "model.model_parameters.endpoint_url",
        ),
        (
            json!({"name": "x", "type": "conversational", "model": model("https://api.openai.com/v1"),
                   "tools": [{"type": "http", "name": "t", "description": "d", "url": format!("{inside}/t")}]}),
            "tools[0].url",
        ),
        (
            json!({"name": "x", "type": "conversational", "model": model("https://api.openai.com/v1"),
                   "tools": [{"type": "mcp", "name": "m", "url": format!("{inside}/mcp")}]}),
            "tools[0].url",
        ),
        (
            json!({"name": "x", "type": "conversational", "model": model("https://api.openai.com/v1"),
                   "tools": [{"type": "openapi", "name": "o", "spec_url": format!("{inside}/openapi.json")}]}),
            "tools[0].spec_url",
        ),
        (
            json!({"name": "x", "type": "conversational", "model": model("https://api.openai.com/v1"),
                   "tools": [{"type": "openapi", "name": "o", "spec": "/etc/hostname"}]}),
            "tools[0].spec",
        ),
    ];
    for (body, field) in cases {
        let (status, resp) = post(&gw, "/_plugins/_ml/agents/_register", body.clone()).await;
        assert_eq!(status, 400, "{body} -> {resp}");
        assert_eq!(resp["error"]["details"]["field"], field, "{resp}");
    }
    assert_eq!(up.hits(), 0);
}

#[tokio::test]
async fn trusted_endpoints_open_exactly_what_they_match() {
    let up = Upstream::start(None).await;
    let other = Upstream::start(None).await;
    let pattern = format!("^http://127\\\\.0\\\\.0\\\\.1:{}/", up.addr.port());
    let gw = gateway(&format!("trusted_endpoints = [\"{pattern}\"]")).await;
    let (status, body) = predict_through(&gw, &format!("http://{}/v1", up.addr)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(up.hits(), 1);
    let (status, body) = post(
        &gw,
        "/_plugins/_ml/connectors/_create",
        connector(&format!("http://{}/v1", other.addr)),
    )
    .await;
    assert_refused(status, &body, "actions[0].url");
    assert_eq!(other.hits(), 0);
}

#[tokio::test]
async fn allowed_cidrs_open_address_ranges() {
    let up = Upstream::start(None).await;
    let gw = gateway("allowed_cidrs = [\"127.0.0.0/8\"]").await;
    let (status, body) = predict_through(&gw, &format!("http://{}/v1", up.addr)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(up.hits(), 1);
}

#[tokio::test]
async fn a_redirect_from_a_trusted_endpoint_to_a_refused_one_is_not_followed() {
    let inside = Upstream::start(None).await;
    let trusted = Upstream::start(Some(format!("http://{}/latest/meta-data/", inside.addr))).await;
    let pattern = format!("^http://127\\\\.0\\\\.0\\\\.1:{}/", trusted.addr.port());
    let gw = gateway(&format!("trusted_endpoints = [\"{pattern}\"]")).await;
    let (status, body) = predict_through(&gw, &format!("http://{}/redirect", trusted.addr)).await;
    assert_eq!(trusted.hits(), 1);
    assert_eq!(inside.hits(), 0, "the redirect was followed");
    assert_eq!(status, 502, "{body}");
    assert!(body.to_string().contains("redirect"), "{body}");
}

#[tokio::test]
async fn the_guarded_client_resolves_names_through_the_policy_and_rechecks_redirects() {
    use agui_gateway::outbound::{Egress, Net, Policy};
    let inside = Upstream::start(None).await;
    let net = Net::Guarded(Arc::new(Egress::new(Policy::default()).unwrap()));
    // `localhost` resolves to loopback: refused when resolving, nothing is reached.
    let err = net
        .client()
        .get(format!("http://localhost:{}/", inside.addr.port()))
        .send()
        .await
        .unwrap_err();
    assert!(format!("{:?}", err).contains("loopback"), "{err:?}");
    assert_eq!(inside.hits(), 0);
    // A redirect to a literal inside address is refused by the redirect policy.
    let allowed = Policy::new(&[], &[]).unwrap();
    let hop = Upstream::start(Some(format!("http://{}/", inside.addr))).await;
    let trusted_hop = Policy::new(&[format!("^http://{}/", hop.addr)], &[]).unwrap();
    for policy in [allowed, trusted_hop] {
        let net = Net::Guarded(Arc::new(Egress::new(policy).unwrap()));
        match net.client_for(&format!("http://{}/", hop.addr)) {
            Err(e) => assert!(e.to_string().contains("loopback"), "{e}"),
            Ok(client) => {
                let err = client
                    .get(format!("http://{}/", hop.addr))
                    .send()
                    .await
                    .unwrap_err();
                let why = std::error::Error::source(&err).map(|e| e.to_string());
                assert!(
                    err.is_redirect()
                        && why.is_some_and(|w| w.contains("refused by the outbound URL policy")),
                    "{err:?}"
                );
            }
        }
    }
    assert_eq!(inside.hits(), 0);
}

#[tokio::test]
async fn pages_get_cors_only_from_loopback_origins_by_default() {
    let gw = gateway("").await;
    let get = |origin: &'static str| {
        reqwest::Client::new()
            .get(gw.url("/metrics"))
            .header("origin", origin)
            .send()
    };
    let r = get("https://evil.example").await.unwrap();
    assert!(r.headers().get("access-control-allow-origin").is_none());
    let r = get("http://localhost:5173").await.unwrap();
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "http://localhost:5173"
    );
    let r = get("http://127.0.0.1:8080").await.unwrap();
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "http://127.0.0.1:8080"
    );
    // `*` only when configured.
    let open = Gateway::start("[server]\ncors_origins = [\"*\"]\n").await;
    let r = reqwest::Client::new()
        .get(open.url("/metrics"))
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["access-control-allow-origin"], "*");
}

#[tokio::test]
async fn a_foreign_host_is_refused_on_a_loopback_listener() {
    let gw = gateway("").await;
    let with_host = |host: String| {
        reqwest::Client::new()
            .get(gw.url("/healthz"))
            .header("host", host)
            .send()
    };
    let r = with_host("rebound.evil.example".into()).await.unwrap();
    assert_eq!(r.status(), 421);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["type"], "misdirected_request");
    for ok in [
        format!("127.0.0.1:{}", gw.addr.port()),
        format!("localhost:{}", gw.addr.port()),
        "[::1]:1".into(),
    ] {
        assert_eq!(with_host(ok.clone()).await.unwrap().status(), 200, "{ok}");
    }
    let listed = Gateway::start("[server]\nallowed_hosts = [\"gw.example\"]\n").await;
    let r = reqwest::Client::new()
        .get(listed.url("/healthz"))
        .header("host", "gw.example:443")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = reqwest::Client::new()
        .get(listed.url("/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 421, "127.0.0.1 is not in the configured list");
}

#[tokio::test]
async fn bodies_must_be_json() {
    let gw = gateway("").await;
    let body = json!({"threadId": "t", "runId": "r", "messages": []}).to_string();
    for (path, ct) in [
        ("/agents/a/agui", Some("text/plain")),
        ("/agents/a/agui", None),
        (
            "/_plugins/_ml/agents/_register",
            Some("text/plain;charset=UTF-8"),
        ),
        (
            "/_plugins/_ml/connectors/_create",
            Some("application/x-www-form-urlencoded"),
        ),
    ] {
        let mut req = reqwest::Client::new().post(gw.url(path)).body(body.clone());
        if let Some(ct) = ct {
            req = req.header("content-type", ct);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), 415, "{path} {ct:?}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["type"], "unsupported_media_type");
    }
    let r = reqwest::Client::new()
        .post(gw.url("/agents/a/agui"))
        .header("content-type", "application/json; charset=utf-8")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}
