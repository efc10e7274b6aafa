/// Connections cannot be held without being used: an HTTP/2 client that goes quiet after its
/// preface, a request body that trickles, a client that never reads its stream and a flood of
/// idle sockets are all closed by timeouts or the connection cap, so `/healthz` keeps
/// answering; a body declared too large is refused with 413 before `100 Continue`.
mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::*;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Far longer than any timeout configured here: "eventually", not a timing assertion.
const BOUND: Duration = Duration::from_secs(30);

const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The fake upstream's config with `settings` added to `[server]`.
fn config(up: &FakeOpenAi, settings: &str) -> String {
    up.config("")
        .replace("[server]\n", &format!("[server]\n{settings}\n"))
}

/// Reads until the server closes the connection; returns everything read.
async fn read_to_close(tcp: &mut TcpStream) -> Vec<u8> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    tokio::time::timeout(BOUND, async {
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .expect("the server must close the connection");
    seen
}

/// Reads a response head (through the blank line).
async fn read_head(tcp: &mut TcpStream) -> String {
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    tokio::time::timeout(BOUND, async {
        while !seen.ends_with(b"\r\n\r\n") {
            let n = tcp.read(&mut byte).await.unwrap();
            assert!(n > 0, "closed before a response head: {seen:?}");
            seen.push(byte[0]);
        }
    })
    .await
    .expect("a response head");
    String::from_utf8(seen).unwrap()
}

fn post_head(addr: SocketAddr, length: usize, extra: &str) -> String {
    format!(
        "POST /agents/a/agui HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {length}\r\n{extra}\r\n"
    )
}

#[tokio::test]
async fn an_http2_client_that_goes_quiet_after_its_preface_is_closed() {
    let up = FakeOpenAi::start(vec![]).await;
    let gw = Gateway::start(&config(&up, "idle_timeout_secs = 1")).await;
    // With its SETTINGS frame (a real client's first flight) and without it.
    let empty_settings: &[u8] = &[0, 0, 0, 4, 0, 0, 0, 0, 0];
    for opening in [[H2_PREFACE, empty_settings].concat(), H2_PREFACE.to_vec()] {
        let mut tcp = TcpStream::connect(gw.addr).await.unwrap();
        tcp.write_all(&opening).await.unwrap();
        let seen = read_to_close(&mut tcp).await;
        // The server spoke HTTP/2 first: its own SETTINGS frame (type 4 on stream 0).
        assert!(seen.len() >= 9 && seen[3] == 4, "{seen:?}");
    }
    // A client that is not quiet is still served.
    assert!(gw.get_text("/healthz").await.contains("ok"));
}

#[tokio::test]
async fn a_request_body_that_stops_arriving_gets_408_and_the_connection_closes() {
    let up = FakeOpenAi::start(vec![]).await;
    let gw = Gateway::start(&config(&up, "body_timeout_secs = 1")).await;
    let mut tcp = TcpStream::connect(gw.addr).await.unwrap();
    tcp.write_all(post_head(gw.addr, 1000, "").as_bytes())
        .await
        .unwrap();
    // A start, then nothing more (as a client sending a byte now and then would look).
    tcp.write_all(b"{\"threadId\":").await.unwrap();
    let answer = String::from_utf8(read_to_close(&mut tcp).await).unwrap();
    assert!(answer.starts_with("HTTP/1.1 408 "), "{answer}");
    let body: serde_json::Value =
        serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(body["error"]["type"], "request_timeout", "{body}");
    assert!(up.requests().is_empty(), "nothing reached the model");
    assert_eq!(gw.state.limiter.active(), 0);
}

#[tokio::test]
async fn a_client_that_never_reads_its_stream_is_closed_and_its_run_ends() {
    // About 25 MB of text: far more than the socket buffers on both sides hold.
    let big = "x".repeat(64 * 1024);
    let chunks = (0..400)
        .map(|_| json!({"choices": [{"index": 0, "delta": {"content": big}}]}))
        .collect();
    let up = FakeOpenAi::start(vec![Reply::Stall(chunks)]).await;
    let gw = Gateway::start(&config(&up, "write_timeout_secs = 1")).await;
    let body = serde_json::to_vec(&user_says_hi("t-unread")).unwrap();
    let mut tcp = TcpStream::connect(gw.addr).await.unwrap();
    tcp.write_all(post_head(gw.addr, body.len(), "").as_bytes())
        .await
        .unwrap();
    tcp.write_all(&body).await.unwrap();
    // The client reads nothing. The gateway's writes stall, the connection is ended, and
    // the run with it (its upstream request is dropped).
    tokio::time::timeout(BOUND, up.upstream.dropped.notified())
        .await
        .expect("the run's upstream request must be dropped");
    wait_no_runs(&gw).await;
    // What the socket still held arrives, then the end; the run never finished.
    let seen = String::from_utf8_lossy(&read_to_close(&mut tcp).await).into_owned();
    assert!(
        seen.starts_with("HTTP/1.1 200 "),
        "{}",
        &seen[..200.min(seen.len())]
    );
    assert!(!seen.contains("RUN_FINISHED"));
}

#[tokio::test]
async fn an_http2_stream_whose_window_never_opens_ends_its_run() {
    // The run's loop is driven from its response body, which hyper polls only once the
    // stream has window: with none ever granted, the loop must still go on in a task of its
    // own, find the client taking nothing, and end (its upstream request dropped).
    let chunk = json!({"choices": [{"index": 0, "delta": {"content": "x".repeat(1024)}}]});
    let up = FakeOpenAi::start(vec![Reply::Stall(vec![chunk; 200])]).await;
    let gw = Gateway::start(&config(&up, "write_timeout_secs = 1")).await;
    let http = reqwest::Client::builder()
        .http2_prior_knowledge()
        .http2_initial_stream_window_size(0)
        .build()
        .unwrap();
    let resp = http
        .post(gw.url("/agents/a/agui"))
        .json(&user_says_hi("t-no-window"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    // The response head came (HEADERS need no window); the body never will.
    tokio::time::timeout(BOUND, up.upstream.dropped.notified())
        .await
        .expect("the run's upstream request must be dropped");
    wait_no_runs(&gw).await;
    drop(resp);
}

#[tokio::test]
async fn a_flood_of_idle_connections_at_the_cap_does_not_stop_healthz() {
    let up = FakeOpenAi::start(vec![]).await;
    let gw = Gateway::start(&config(
        &up,
        "max_connections = 4\nheader_read_timeout_secs = 1\nidle_timeout_secs = 1",
    ))
    .await;
    // Five times the cap, none of them sending a byte.
    let mut flood = Vec::new();
    for _ in 0..20 {
        flood.push(TcpStream::connect(gw.addr).await.unwrap());
    }
    // Those past the cap are closed as they come, the others by the header timeout.
    for tcp in &mut flood {
        assert!(read_to_close(tcp).await.is_empty());
    }
    // New clients are answered again, the flood's sockets still open on its side.
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let answered = tokio::time::timeout(BOUND, async {
        loop {
            match http.get(gw.url("/healthz")).send().await {
                Ok(r) if r.status() == 200 => return,
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    })
    .await;
    assert!(
        answered.is_ok(),
        "/healthz must answer once the flood is reaped"
    );
    drop(flood);
}

#[tokio::test]
async fn expect_100_continue_with_a_length_over_the_limit_gets_413_not_100() {
    let up = FakeOpenAi::start(vec![]).await;
    let gw = Gateway::start(&config(&up, "max_body_bytes = 1000")).await;
    let mut tcp = TcpStream::connect(gw.addr).await.unwrap();
    tcp.write_all(post_head(gw.addr, 5000, "Expect: 100-continue\r\n").as_bytes())
        .await
        .unwrap();
    let head = read_head(&mut tcp).await;
    assert!(head.starts_with("HTTP/1.1 413 "), "{head}");
    let answer = String::from_utf8(read_to_close(&mut tcp).await).unwrap();
    assert!(answer.contains("\"payload_too_large\""), "{answer}");

    // Within the limit, the client is told to go on.
    let mut tcp = TcpStream::connect(gw.addr).await.unwrap();
    tcp.write_all(post_head(gw.addr, 500, "Expect: 100-continue\r\n").as_bytes())
        .await
        .unwrap();
    let head = read_head(&mut tcp).await;
    assert!(head.starts_with("HTTP/1.1 100 "), "{head}");
}
