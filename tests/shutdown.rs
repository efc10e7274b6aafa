/// Graceful shutdown: once the signal comes no new run is taken; active runs may finish during
/// the grace period; the rest end with `RUN_ERROR` code `SHUTDOWN` and their upstream requests
/// are dropped; the server then returns.
mod common;

use std::time::Duration;

use agui_gateway::{AppState, config::Config};
use common::{FakeOpenAi, Reply, read_events, run_input, temp_dir};
use serde_json::json;
use tokio::sync::oneshot;

struct Server {
    addr: std::net::SocketAddr,
    state: AppState,
    stop: oneshot::Sender<()>,
    done: tokio::task::JoinHandle<std::io::Result<()>>,
}

async fn serve(toml: &str) -> Server {
    let mut config = Config::parse(toml, "test.toml", None).unwrap();
    config.data_dir = temp_dir("shutdown");
    let state = AppState::from_config(&config).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, rx) = oneshot::channel::<()>();
    let done = tokio::spawn(agui_gateway::serve(listener, state.clone(), async {
        let _ = rx.await;
    }));
    Server {
        addr,
        state,
        stop,
        done,
    }
}

async fn post(
    addr: std::net::SocketAddr,
    agent: &str,
    thread: &str,
    text: &str,
) -> reqwest::Response {
    post_with(&reqwest::Client::new(), addr, agent, thread, text).await
}

async fn post_with(
    client: &reqwest::Client,
    addr: std::net::SocketAddr,
    agent: &str,
    thread: &str,
    text: &str,
) -> reqwest::Response {
    client
        .post(format!("http://{addr}/agents/{agent}/agui"))
        .json(&run_input(
            thread,
            json!([{"id": "u1", "role": "user", "content": text}]),
        ))
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn runs_past_the_grace_period_end_with_shutdown_and_the_server_returns() {
    grace_period_runs_out(reqwest::Client::new(), reqwest::Version::HTTP_11).await;
}

/// The same over HTTP/2 (prior knowledge, as a proxy speaking h2c sends it): the connection is
/// told apart by its preface, the stream is served by hyper, and the shutdown sends GOAWAY.
#[tokio::test]
async fn over_http2_runs_past_the_grace_period_end_with_shutdown_too() {
    let h2 = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    grace_period_runs_out(h2, reqwest::Version::HTTP_2).await;
}

async fn grace_period_runs_out(client: reqwest::Client, version: reqwest::Version) {
    let up = FakeOpenAi::start(vec![Reply::Stall(vec![
        json!({"choices": [{"index": 0, "delta": {"content": "Thinking"}}]}),
    ])])
    .await;
    let toml = up
        .config("")
        .replace("[server]\n", "[server]\nshutdown_grace_secs = 1\n");
    let server = serve(&toml).await;
    let resp = post_with(&client, server.addr, "a", "t-stall", "hello").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.version(), version);
    let reading = tokio::spawn(read_events(resp, false));
    // Wait until the run is active, then shut down.
    while server.state.runs.active_count() == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    server.stop.send(()).unwrap();
    let events = tokio::time::timeout(Duration::from_secs(10), reading)
        .await
        .expect("the stream must end after the grace period")
        .unwrap();
    let last = events.last().unwrap();
    assert_eq!(last["type"], "RUN_ERROR", "{events:?}");
    assert_eq!(last["code"], "SHUTDOWN");
    // The partial text message was closed before the error.
    assert!(events.iter().any(|e| e["type"] == "TEXT_MESSAGE_END"));
    up.upstream.dropped.notified().await;
    tokio::time::timeout(Duration::from_secs(10), server.done)
        .await
        .expect("serve returns once the runs ended")
        .unwrap()
        .unwrap();
    assert_eq!(server.state.runs.active_count(), 0);
}

#[tokio::test]
async fn a_run_that_ends_within_the_grace_period_finishes_normally_and_new_runs_are_refused() {
    // The demo model paces its reply (about a second and a half for "hello").
    let server = serve("[server]\nshutdown_grace_secs = 20\n[[agents]]\nid = \"demo\"\n[agents.model]\nprovider = \"scripted\"\n").await;
    let resp = post(server.addr, "demo", "t-short", "hello").await;
    let reading = tokio::spawn(read_events(resp, false));
    while server.state.runs.active_count() == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    server.stop.send(()).unwrap();
    while !server.state.runs.is_shutting_down() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // A new run is not taken: the connection is refused, or (on a kept-alive connection)
    // answered with 503 and Retry-After.
    match reqwest::Client::new()
        .post(format!("http://{}/agents/demo/agui", server.addr))
        .json(&run_input(
            "t-late",
            json!([{"id": "u1", "role": "user", "content": "hi"}]),
        ))
        .timeout(Duration::from_secs(5))
        .send()
        .await
    {
        Ok(r) => {
            assert_eq!(r.status(), 503);
            assert!(r.headers().contains_key("retry-after"));
        }
        Err(e) => assert!(e.is_connect(), "{e}"),
    }
    let events = tokio::time::timeout(Duration::from_secs(15), reading)
        .await
        .expect("the run finishes")
        .unwrap();
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED", "{events:?}");
    assert!(common::text(&events).contains("offline demo assistant"));
    tokio::time::timeout(Duration::from_secs(10), server.done)
        .await
        .expect("serve returns")
        .unwrap()
        .unwrap();
}
