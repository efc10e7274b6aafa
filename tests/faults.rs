/// Faults end in a valid stream or a clean error, and leave nothing behind: garbage from the
/// upstream, an upstream that keeps answering 429, a thousand clients leaving at once, and a
/// PostgreSQL store that goes away, or stops answering, mid-run and comes back.
/// (Stalls, early closes, silence and slow readers are in `upstream_failures` and
/// `cancellation`.)
mod common;

use common::*;
use serde_json::json;

#[tokio::test]
async fn garbage_from_the_upstream_ends_the_run_with_a_protocol_error() {
    let up = FakeOpenAi::start(vec![Reply::Sse(vec![
        json!({"choices": [{"index": 0, "delta": {"content": "Hel"}}]}),
        json!("this is not a chat completion chunk"),
        json!({"choices": [{"index": 0, "delta": {"content": "lo"}}]}),
    ])])
    .await;
    let gw = Gateway::start(&up.config("")).await;
    // read_events verifies the stream as @ag-ui/client would.
    let events = gw.run("a", &user_says_hi("t-garbage")).await;
    let last = events.last().unwrap();
    assert_eq!(last["type"], "RUN_ERROR", "{events:?}");
    assert_eq!(last["code"], "UPSTREAM_PROTOCOL_ERROR");
    // What had streamed was closed before the error.
    assert!(events.iter().any(|e| e["type"] == "TEXT_MESSAGE_END"));
    wait_no_runs(&gw).await;
}

#[tokio::test]
async fn an_upstream_that_keeps_throttling_is_retried_a_bounded_number_of_times() {
    let throttled = || Reply::Status(429, r#"{"error":{"message":"slow down"}}"#.into());
    let up = FakeOpenAi::start(vec![throttled(), throttled(), throttled(), throttled()]).await;
    let gw = Gateway::start(&up.config("")).await;
    let events = gw.run("a", &user_says_hi("t-429s")).await;
    let last = events.last().unwrap();
    assert_eq!(last["type"], "RUN_ERROR");
    assert_eq!(last["code"], "UPSTREAM_RATE_LIMITED");
    assert!(last["message"].as_str().unwrap().contains("slow down"));
    // The first attempt and max_retries (2) more, no further.
    assert_eq!(up.requests().len(), 3);
    wait_no_runs(&gw).await;
}

#[tokio::test]
async fn a_thousand_clients_leaving_at_once_leave_no_run_behind() {
    const N: usize = 1000;
    let stalled = || {
        Reply::Stall(vec![
            json!({"choices": [{"index": 0, "delta": {"content": "Thinking"}}]}),
        ])
    };
    let up = FakeOpenAi::start((0..N).map(|_| stalled()).collect()).await;
    let gw = Gateway::start(&up.config("")).await;
    let http = reqwest::Client::new();
    let mut streams = Vec::with_capacity(N);
    for chunk in (0..N).collect::<Vec<_>>().chunks(100) {
        let opened = futures::future::join_all(chunk.iter().map(|i| {
            let http = http.clone();
            let url = gw.url("/agents/a/agui");
            let body = user_says_hi(&format!("t-many-{i}"));
            async move {
                let mut r = http.post(url).json(&body).send().await.unwrap();
                assert_eq!(r.status(), 200);
                read_until(&mut r, "Thinking").await;
                r
            }
        }))
        .await;
        streams.extend(opened);
    }
    assert_eq!(gw.state.runs.active_count(), N);
    // Every client goes at once: every run is cancelled, its upstream request dropped and its
    // place given back.
    drop(streams);
    wait_no_runs(&gw).await;
    let metrics = gw.get_text("/metrics").await;
    assert!(metrics.contains("agui_runs_active 0"), "{metrics}");
}

/// A TCP relay in front of PostgreSQL that the test can cut (live connections closed, new ones
/// refused) and restore: the store going away mid-run, as a database restart or a network
/// failure would make it.
struct Relay {
    addr: std::net::SocketAddr,
    up: std::sync::Arc<std::sync::atomic::AtomicBool>,
    cut: tokio::sync::watch::Sender<u64>,
    paused: tokio::sync::watch::Sender<bool>,
}

/// Copies one direction; while the relay is paused, bytes read are held, as in a network
/// partition (no error, no answer).
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut paused: tokio::sync::watch::Receiver<bool>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if paused.wait_for(|p| !p).await.is_err() {
            return;
        }
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if paused.wait_for(|p| !p).await.is_err() || to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

impl Relay {
    async fn start(target: String) -> Relay {
        use std::sync::atomic::Ordering::SeqCst;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let up = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let (cut, _) = tokio::sync::watch::channel(0u64);
        let (paused, _) = tokio::sync::watch::channel(false);
        let (is_up, cuts, pauses) = (std::sync::Arc::clone(&up), cut.clone(), paused.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if !is_up.load(SeqCst) {
                    continue; // dropped: the connection is refused
                }
                let target = target.clone();
                let mut cut = cuts.subscribe();
                let paused = pauses.subscribe();
                tokio::spawn(async move {
                    let Ok(server) = tokio::net::TcpStream::connect(&target).await else {
                        return;
                    };
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    tokio::select! {
                        _ = pump(client_read, server_write, paused.clone()) => {}
                        _ = pump(server_read, client_write, paused) => {}
                        _ = cut.changed() => {}
                    }
                });
            }
        });
        Relay {
            addr,
            up,
            cut,
            paused,
        }
    }

    /// Connections close and new ones are refused.
    fn cut(&self) {
        self.up.store(false, std::sync::atomic::Ordering::SeqCst);
        self.cut.send_modify(|n| *n += 1);
    }

    fn restore(&self) {
        self.up.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Nothing gets through and nothing fails: the database just stops answering.
    fn pause(&self, paused: bool) {
        self.paused.send_replace(paused);
    }

    /// A PostgreSQL URL for the test database through a new relay.
    async fn for_test_pg(url: &str) -> (Relay, String) {
        let parsed = reqwest::Url::parse(url).unwrap();
        let target = format!(
            "{}:{}",
            parsed.host_str().unwrap(),
            parsed.port().unwrap_or(5432)
        );
        let relay = Relay::start(target).await;
        let mut via_relay = parsed.clone();
        via_relay.set_host(Some("127.0.0.1")).unwrap();
        via_relay.set_port(Some(relay.addr.port())).unwrap();
        (relay, via_relay.to_string())
    }
}

/// A model reply that streams "Half " and waits for the gate before it finishes.
fn gated_reply(gate: &std::sync::Arc<tokio::sync::Notify>) -> Reply {
    Reply::Gated(
        vec![json!({"choices": [{"index": 0, "delta": {"content": "Half "}}]})],
        std::sync::Arc::clone(gate),
        text_chunks("an answer."),
    )
}

/// A gateway on PostgreSQL through a relay (`store_toml` adds to `[store]`), whose model
/// streams "Half " and waits. A run on a fresh thread is streaming when `fault` hits the relay;
/// then the model finishes. The run must end with `STORE_UNAVAILABLE` and leave no run behind,
/// and while the fault lasts a new run is refused the same way. The next reply is "Back again.".
async fn store_fault_mid_run(
    url: &str,
    store_toml: &str,
    fault: impl FnOnce(&Relay),
) -> (Gateway, Relay, String) {
    let (relay, via_relay) = Relay::for_test_pg(url).await;
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    let up = FakeOpenAi::start(vec![
        gated_reply(&gate),
        Reply::Sse(text_chunks("Back again.")),
    ])
    .await;
    let toml = format!(
        "[store]\nurl = \"{via_relay}\"\n{store_toml}\n{}",
        up.config("")
    );
    let gw = Gateway::start(&toml).await;
    let thread = format!("t-store-{}", uuid::Uuid::new_v4().simple());

    let mut first = gw.post("a", &user_says_hi(&thread)).await;
    assert_eq!(first.status(), 200);
    let seen = read_until(&mut first, "Half").await;
    fault(&relay);
    gate.notify_one();
    let events = read_events_after(seen, first, false).await;
    let last = events.last().unwrap();
    assert_eq!(last["type"], "RUN_ERROR", "{events:?}");
    assert_eq!(last["code"], "STORE_UNAVAILABLE");
    wait_no_runs(&gw).await;

    // Who owns the thread cannot be checked without the store: refused before streaming.
    let refused = gw.post("a", &user_says_hi(&format!("{thread}-down"))).await;
    assert_eq!(refused.status(), 503);
    assert!(refused.headers().contains_key("retry-after"));
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["type"], "store_unavailable", "{body}");
    wait_no_runs(&gw).await;
    (gw, relay, thread)
}

#[tokio::test]
async fn a_store_that_goes_away_mid_run_ends_it_cleanly_and_the_gateway_recovers() {
    let Some(url) = test_pg("a store going away mid-run") else {
        return;
    };
    let (gw, relay, thread) = store_fault_mid_run(&url, "", Relay::cut).await;
    // Once it is back, the gateway uses it again without a restart.
    relay.restore();
    let again = gw.run("a", &user_says_hi(&format!("{thread}-after"))).await;
    assert_eq!(again.last().unwrap()["type"], "RUN_FINISHED", "{again:?}");
    wait_no_runs(&gw).await;
}

#[tokio::test]
async fn a_store_that_stops_answering_mid_run_times_out_cleanly_and_recovers() {
    let Some(url) = test_pg("a store that stops answering") else {
        return;
    };
    // Saving the turn times out: the run ends with a clean error instead of hanging.
    let (gw, relay, thread) =
        store_fault_mid_run(&url, "op_timeout_secs = 0.5", |r| r.pause(true)).await;
    // Once it answers again, the same thread runs: the lease the first run could not release
    // is this gateway's own, and taken over.
    relay.pause(false);
    let again = gw.run("a", &user_says_hi(&thread)).await;
    assert_eq!(again.last().unwrap()["type"], "RUN_FINISHED", "{again:?}");
    assert_eq!(text(&again), "Back again.");
    wait_no_runs(&gw).await;
}
