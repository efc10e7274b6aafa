//! The encoding phase: the same paced load (`runs` at once, `tokens` each at `tps`, one upstream
//! frame per token, AG-UI 1.0 clients) streamed as SSE and as the AG-UI protobuf encoding, one
//! after the other. Per encoding it prints the bytes the clients received per token and per run
//! and the gateway's CPU per token and per run.

use std::sync::atomic::Ordering;

use futures::StreamExt;
use prost::Message as _;
use serde_json::{Value, json};

use super::{Gateway, Upstream, sample};
use crate::protocol::proto::wire;

/// The settings of the phase.
pub(super) struct Encoding<'a> {
    pub http: &'a reqwest::Client,
    pub gw: &'a Gateway,
    pub up: &'a Upstream,
    pub encodings: &'a [String],
    pub runs: usize,
    pub tokens: usize,
    pub tps: u64,
}

/// What the clients of one encoding saw.
#[derive(Debug, Default)]
struct Seen {
    bytes: u64,
    tokens: u64,
    events: u64,
    failed: Option<String>,
}

/// Counts the `t<nanos>` tokens of a text delta.
fn tokens_in(delta: &str) -> u64 {
    delta
        .split_whitespace()
        .filter(|t| {
            t.strip_prefix('t')
                .is_some_and(|n| n.parse::<u64>().is_ok())
        })
        .count() as u64
}

/// Reads what one body held: SSE `data:` frames or length-prefixed protobuf messages.
fn tally(body: &[u8], proto: bool, seen: &mut Seen) {
    seen.bytes += body.len() as u64;
    if proto {
        let mut rest = body;
        while rest.len() >= 4 {
            let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
            let Some(msg) = rest.get(4..4 + len) else {
                seen.failed = Some("a cut protobuf frame".into());
                return;
            };
            rest = &rest[4 + len..];
            seen.events += 1;
            match wire::Event::decode(msg).map(|e| e.event) {
                Ok(Some(wire::event::Event::TextMessageContent(c))) => {
                    seen.tokens += tokens_in(&c.delta)
                }
                Ok(Some(wire::event::Event::RunError(e))) => {
                    seen.failed = Some(format!("RUN_ERROR {:?}", e.code))
                }
                Ok(_) => {}
                Err(e) => seen.failed = Some(format!("undecodable frame: {e}")),
            }
        }
        return;
    }
    for frame in String::from_utf8_lossy(body).split("\n\n") {
        let Some(data) = frame.lines().find_map(|l| l.strip_prefix("data: ")) else {
            continue;
        };
        seen.events += 1;
        let Ok(v) = serde_json::from_str::<Value>(data) else {
            continue;
        };
        match v["type"].as_str() {
            Some("TEXT_MESSAGE_CONTENT") => {
                seen.tokens += tokens_in(v["delta"].as_str().unwrap_or_default())
            }
            Some("RUN_ERROR") => seen.failed = Some(format!("RUN_ERROR {}", v["code"])),
            _ => {}
        }
    }
}

/// Streams one run with `accept` and tallies its body.
async fn one(http: reqwest::Client, url: String, i: usize, accept: &'static str) -> Seen {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let body = json!({
        "threadId": format!("enc-{i}-{id}"), "runId": format!("run-{id}"), "protocolVersion": "1.0",
        "messages": [{"id": "u1", "role": "user", "content": "go"}],
        "tools": [], "context": [], "state": {}, "forwardedProps": {}
    });
    let mut seen = Seen::default();
    let resp = match http
        .post(&url)
        .header("accept", accept)
        .json(&body)
        .send()
        .await
    {
        Ok(r) if r.status().is_success() => r,
        Ok(r) => {
            seen.failed = Some(format!("HTTP {}", r.status()));
            return seen;
        }
        Err(e) => {
            seen.failed = Some(e.to_string());
            return seen;
        }
    };
    let proto = accept != "text/event-stream";
    let mut buf = Vec::new();
    let mut stream = resp.bytes_stream();
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(c) => buf.extend_from_slice(&c),
            Err(e) => {
                seen.failed = Some(e.to_string());
                break;
            }
        }
    }
    tally(&buf, proto, &mut seen);
    seen
}

/// Runs the phase and prints one row per encoding.
pub(super) async fn run(p: Encoding<'_>) {
    let pid = p.gw.pid();
    let url = format!("http://{}/agents/bench/agui", p.gw.addr);
    println!(
        "## encoding: {} runs x {} tokens at {} tokens/s, AG-UI 1.0 clients",
        p.runs, p.tokens, p.tps
    );
    println!(
        "{:>9}  {:>11}  {:>10}  {:>10}  {:>9}  {:>9}  {:>6}",
        "encoding", "bytes/token", "bytes/run", "CPU/token", "CPU/run", "events", "failed"
    );
    for encoding in p.encodings {
        let accept = match encoding.as_str() {
            "sse" => "text/event-stream",
            "proto" => crate::protocol::proto::PROTO_CONTENT_TYPE,
            other => {
                println!("{other:>9}  unknown encoding (sse, proto)");
                continue;
            }
        };
        p.up.tokens.store(p.tokens as u64, Ordering::Relaxed);
        p.up.tps.store(p.tps, Ordering::Relaxed);
        let before = sample(pid).cpu;
        let tasks: Vec<_> = (0..p.runs)
            .map(|i| tokio::spawn(one(p.http.clone(), url.clone(), i, accept)))
            .collect();
        let mut all = Vec::with_capacity(p.runs);
        for t in tasks {
            all.push(t.await.unwrap_or_default());
        }
        let cpu = sample(pid).cpu.saturating_sub(before);
        let bytes: u64 = all.iter().map(|s| s.bytes).sum();
        let tokens = all.iter().map(|s| s.tokens).sum::<u64>().max(1);
        let events: u64 = all.iter().map(|s| s.events).sum();
        let failed = all.iter().filter(|s| s.failed.is_some()).count();
        if let Some(why) = all.iter().find_map(|s| s.failed.as_ref()) {
            println!("           ({failed} runs failed; the first: {why})");
        }
        let runs = p.runs.max(1) as f64;
        println!(
            "{encoding:>9}  {:>11.1}  {:>10.0}  {:>7.1} µs  {:>6.2} ms  {:>9}  {failed:>6}",
            bytes as f64 / tokens as f64,
            bytes as f64 / runs,
            cpu.as_secs_f64() * 1e6 / tokens as f64,
            cpu.as_secs_f64() * 1e3 / runs,
            events,
        );
    }
    println!(
        "(bytes: response bodies as the clients read them, every event of the run included; CPU:\n the gateway process over the whole wave, run set-up and the replay log included)\n"
    );
}
