//! `agui-gateway bench`: measures what the gateway adds on the token path. It starts, on
//! loopback, a fast fake upstream speaking OpenAI SSE (this process), the gateway as a child
//! process (so its CPU time and memory are its own, read from `/proc`), and concurrent AG-UI
//! clients (this process), then prints:
//! - gateway CPU time per streamed token and per run;
//! - relay latency added by the gateway (upstream write -> client read; one clock, as upstream
//!   and clients share this process), p50 / p99;
//! - unthrottled throughput through the gateway as a ratio to a client reading the upstream
//!   directly;
//! - peak RSS and RSS per concurrent run at 1, 100, 1,000 and 10,000 slow streaming runs,
//!   with clients over HTTP/1.1 (a connection per run) and HTTP/2, upstreams likewise;
//! - the paced phase ([`paced`]): one upstream frame per token at 20 tokens/s, at 100, 1,000
//!   and 10,000 concurrent runs: CPU per token and per run, wake-ups and syscalls per token,
//!   RSS per run;
//! - time to first event;
//! - the encoding phase ([`encoding`]): bytes and gateway CPU per token streamed as SSE and as
//!   the AG-UI protobuf encoding;
//! - RSS after each of several waves of runs whose clients leave mid-stream (it must level
//!   off: nothing a cancelled run held may stay behind).
//!
//! Figures only: nothing here asserts a timing (the machines are shared and noisy).

mod compare;
mod encoding;
mod paced;
mod proc;

pub use compare::{CompareOptions, compare};
use proc::{process_tree, raise_fd_limit, sample, sample_all};

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{Value, json};

/// What to measure.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Concurrent runs of the latency phase.
    pub latency_runs: usize,
    /// Tokens per reply in the latency phase.
    pub latency_tokens: usize,
    /// Upstream tokens per second per run in the latency phase.
    pub latency_tps: u64,
    /// Concurrent runs of the throughput phase.
    pub throughput_runs: usize,
    /// Tokens per reply in the throughput phase (sent as fast as possible).
    pub throughput_tokens: usize,
    /// The concurrency levels of the memory phase.
    pub memory_levels: Vec<usize>,
    /// How the memory phase reaches the upstream: `h1`, `h2`.
    pub memory_upstreams: Vec<String>,
    /// How the memory phase's clients reach the gateway: `h1` (a connection per run), `h2`
    /// (up to 100 runs per connection).
    pub memory_clients: Vec<String>,
    /// Waves of the churn phase.
    pub churn_waves: usize,
    /// Runs per churn wave.
    pub churn_runs: usize,
    /// Concurrency levels of the paced phase.
    pub paced_levels: Vec<usize>,
    /// Tokens per run in the paced phase.
    pub paced_tokens: usize,
    /// Upstream tokens (frames) per second per run in the paced phase.
    pub paced_tps: u64,
    /// The gateway binary (this executable by default).
    pub gateway_bin: PathBuf,
    /// The encodings the encoding phase compares: `sse`, `proto`.
    pub encodings: Vec<String>,
    /// Concurrent runs of the encoding phase.
    pub encoding_runs: usize,
    /// Tokens per run in the encoding phase (at `paced_tps`).
    pub encoding_tokens: usize,
    /// The phases to run: `latency`, `paced`, `encoding`, `throughput`, `memory`, `churn`.
    pub phases: Vec<String>,
}

impl Default for BenchOptions {
    fn default() -> Self {
        Self {
            latency_runs: 100,
            latency_tokens: 100,
            latency_tps: 20,
            throughput_runs: 8,
            throughput_tokens: 20_000,
            memory_levels: vec![1, 100, 1_000, 10_000],
            memory_upstreams: vec!["h1".into(), "h2".into()],
            memory_clients: vec!["h1".into(), "h2".into()],
            churn_waves: 10,
            churn_runs: 1_000,
            paced_levels: vec![100, 1_000, 10_000],
            paced_tokens: 100,
            paced_tps: 20,
            gateway_bin: std::env::current_exe().unwrap_or_else(|_| "agui-gateway".into()),
            encodings: vec!["sse".into(), "proto".into()],
            encoding_runs: 100,
            encoding_tokens: 100,
            phases: vec![
                "latency".into(),
                "paced".into(),
                "encoding".into(),
                "throughput".into(),
                "memory".into(),
                "churn".into(),
            ],
        }
    }
}

/// How the fake upstream answers: tokens per reply and per second (0: as fast as it can).
#[derive(Debug)]
struct Upstream {
    tokens: AtomicU64,
    tps: AtomicU64,
    /// The clock token timestamps are taken on.
    epoch: Instant,
}

fn chunk(content: &str) -> Bytes {
    let v = json!({"id": "b", "object": "chat.completion.chunk", "created": 0, "model": "bench-model",
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": null}]});
    Bytes::from(format!("data: {v}\n\n"))
}

async fn chat(State(up): State<Arc<Upstream>>, _body: Bytes) -> Response {
    let tokens = up.tokens.load(Ordering::Relaxed);
    let tps = up.tps.load(Ordering::Relaxed);
    let up = Arc::clone(&up);
    let stream = async_stream::stream! {
        // Each run's tokens keep their own phase, as separate model streams do: a run starts
        // somewhere within one token's interval (from the arrival time's low bits), not on a
        // tick shared by every run.
        let mut tick = (tps > 0).then(|| {
            let every = Duration::from_nanos(1_000_000_000 / tps);
            let phase = up.epoch.elapsed().as_nanos() as u64 * 2_654_435_761 % every.as_nanos() as u64;
            tokio::time::interval_at(tokio::time::Instant::now() + Duration::from_nanos(phase), every)
        });
        for _ in 0..tokens {
            if let Some(t) = tick.as_mut() {
                t.tick().await;
            }
            // Each token carries the time it was written, for the relay latency.
            let nanos = up.epoch.elapsed().as_nanos();
            yield Ok::<Bytes, std::convert::Infallible>(chunk(&format!(" t{nanos}")));
        }
        let end = json!({"id": "b", "object": "chat.completion.chunk", "created": 0, "model": "bench-model",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
        let usage = json!({"id": "b", "object": "chat.completion.chunk", "created": 0, "model": "bench-model",
            "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": tokens, "total_tokens": 10 + tokens}});
        yield Ok(Bytes::from(format!("data: {end}\n\ndata: {usage}\n\ndata: [DONE]\n\n")));
    };
    let mut resp = Body::from_stream(stream).into_response();
    resp.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("text/event-stream"),
    );
    resp
}

/// Serves the fake upstream over HTTP/1.1 and HTTP/2 (h2c), with HTTP/2 limits raised so
/// one connection can carry every run of the memory phase.
async fn serve_upstream(listener: tokio::net::TcpListener, app: axum::Router) {
    let mut builder =
        hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
    builder
        .http2()
        .max_concurrent_streams(100_000)
        .max_pending_accept_reset_streams(100_000)
        .max_local_error_reset_streams(None);
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let builder = builder.clone();
        tokio::spawn(async move {
            let _ = builder
                .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                .await;
        });
    }
}

/// What one client saw.
#[derive(Debug, Default)]
struct ClientStats {
    tokens: u64,
    /// Events (or upstream chunks) that carried tokens.
    carriers: u64,
    latencies_ns: Vec<u64>,
    first_event: Option<Duration>,
    first_token: Option<Duration>,
    failed: Option<String>,
}

/// Streams one run and times its tokens. `direct` reads the upstream's own SSE instead.
async fn client(
    http: reqwest::Client,
    url: String,
    body: Value,
    epoch: Instant,
    direct: bool,
    first_token: Option<Arc<tokio::sync::Semaphore>>,
) -> ClientStats {
    let mut stats = ClientStats::default();
    let start = Instant::now();
    let resp = match http.post(&url).json(&body).send().await {
        Ok(r) if r.status().is_success() => r,
        Ok(r) => {
            stats.failed = Some(format!("HTTP {}", r.status()));
            return stats;
        }
        Err(e) => {
            stats.failed = Some(e.to_string());
            return stats;
        }
    };
    let mut events = resp.bytes_stream().eventsource();
    let mut signalled = false;
    while let Some(ev) = events.next().await {
        let Ok(ev) = ev else {
            stats.failed = Some("stream broke".into());
            break;
        };
        if stats.first_event.is_none() {
            stats.first_event = Some(start.elapsed());
        }
        if ev.data == "[DONE]" {
            break;
        }
        let Ok(v) = serde_json::from_str::<Value>(&ev.data) else {
            continue;
        };
        let delta = if direct {
            v.pointer("/choices/0/delta/content")
                .and_then(Value::as_str)
        } else {
            match v["type"].as_str() {
                Some("TEXT_MESSAGE_CONTENT") => v["delta"].as_str(),
                Some("RUN_ERROR") => {
                    stats.failed = Some(format!("RUN_ERROR {}", v["code"]));
                    None
                }
                _ => None,
            }
        };
        if let Some(d) = delta {
            stats.carriers += 1;
            let now = epoch.elapsed().as_nanos() as u64;
            for t in d.split_whitespace() {
                if let Some(sent) = t.strip_prefix('t').and_then(|n| n.parse::<u64>().ok()) {
                    stats.tokens += 1;
                    stats.latencies_ns.push(now.saturating_sub(sent));
                }
            }
            if stats.first_token.is_none() {
                stats.first_token = Some(start.elapsed());
                if let Some(s) = &first_token
                    && !signalled
                {
                    s.add_permits(1);
                    signalled = true;
                }
            }
        }
    }
    stats
}

/// Every relayed token's latency in nanoseconds, sorted.
fn relay_sorted(stats: &[ClientStats]) -> Vec<u64> {
    let mut v: Vec<u64> = stats
        .iter()
        .flat_map(|s| s.latencies_ns.iter().copied())
        .collect();
    v.sort_unstable();
    v
}

/// One duration per client that has it (`pick`), in nanoseconds, sorted.
fn durations_sorted(
    stats: &[ClientStats],
    pick: impl Fn(&ClientStats) -> Option<Duration>,
) -> Vec<u64> {
    let mut v: Vec<u64> = stats
        .iter()
        .filter_map(|s| pick(s).map(|d| d.as_nanos() as u64))
        .collect();
    v.sort_unstable();
    v
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

struct Gateway {
    child: tokio::process::Child,
    addr: SocketAddr,
    dir: PathBuf,
}

impl Gateway {
    async fn start(bin: &PathBuf, upstream: SocketAddr) -> anyhow::Result<Gateway> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
        let dir =
            std::env::temp_dir().join(format!("agui-bench-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir)?;
        let config = format!(
            r#"listen = "{addr}"
data_dir = "{data}"
[server]
channel_capacity = 64
max_body_bytes = 1048576
[[agents]]
id = "bench"
[agents.model]
provider = "openai"
model_id = "bench-model"
base_url = "http://{upstream}/v1"
max_retries = 0
[[agents]]
id = "bench-h2"
[agents.model]
provider = "openai"
model_id = "bench-model"
base_url = "http://{upstream}/v1"
max_retries = 0
http2_prior_knowledge = true
"#,
            data = dir.display()
        );
        let path = dir.join("bench.toml");
        std::fs::write(&path, config)?;
        let child = tokio::process::Command::new(bin)
            .arg("serve")
            .arg("--config")
            .arg(&path)
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(dir.join("gateway.log"))?)
            .kill_on_drop(true)
            .spawn()?;
        let http = reqwest::Client::new();
        for _ in 0..200 {
            if http
                .get(format!("http://{addr}/healthz"))
                .send()
                .await
                .is_ok()
            {
                return Ok(Gateway { child, addr, dir });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        anyhow::bail!("the gateway did not start on {addr}")
    }

    fn pid(&self) -> u32 {
        self.child.id().unwrap_or(0)
    }

    /// Where the gateway's stderr goes.
    fn log(&self) -> PathBuf {
        self.dir.join("gateway.log")
    }

    async fn active_runs(&self) -> u64 {
        let Ok(r) = reqwest::get(format!("http://{}/healthz", self.addr)).await else {
            return u64::MAX;
        };
        r.json::<Value>()
            .await
            .ok()
            .and_then(|v| v["activeRuns"].as_u64())
            .unwrap_or(u64::MAX)
    }
}

fn run_body(i: usize) -> Value {
    let id = uuid::Uuid::new_v4().simple().to_string();
    json!({
        "threadId": format!("bench-{i}-{id}"),
        "runId": format!("run-{id}"),
        "messages": [{"id": "u1", "role": "user", "content": "go"}],
        "tools": [], "context": [], "state": {}, "forwardedProps": {}
    })
}

/// Runs `n` clients at once and gathers what they saw.
async fn wave(
    http: &reqwest::Client,
    url: &str,
    n: usize,
    epoch: Instant,
    direct: bool,
) -> Vec<ClientStats> {
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let body = if direct {
                json!({"model": "m", "stream": true, "messages": []})
            } else {
                run_body(i)
            };
            tokio::spawn(client(
                http.clone(),
                url.to_string(),
                body,
                epoch,
                direct,
                None,
            ))
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap_or_default());
    }
    out
}

/// Starts `n` slow runs spread over `pool` (100 per client) and waits until each has streamed
/// a token, so all are live at once (at most two minutes); returns the clients' tasks and how
/// many runs streamed.
async fn stream_all(
    pool: &[reqwest::Client],
    url: &str,
    n: usize,
    epoch: Instant,
) -> (Vec<tokio::task::JoinHandle<ClientStats>>, usize) {
    let started = Arc::new(tokio::sync::Semaphore::new(0));
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            tokio::spawn(client(
                pool[(i / H2_STREAMS_PER_CONNECTION) % pool.len()].clone(),
                url.to_string(),
                run_body(i),
                epoch,
                false,
                Some(Arc::clone(&started)),
            ))
        })
        .collect();
    let all = tokio::time::timeout(Duration::from_secs(120), started.acquire_many(n as u32)).await;
    let streamed = match all {
        Ok(Ok(_)) => n,
        _ => started.available_permits(),
    };
    (tasks, streamed)
}

/// The clients leave; waits (at most a minute) until the gateway has cancelled their runs.
/// Prints why clients that ended on their own failed (the first reason and how many).
async fn leave(tasks: Vec<tokio::task::JoinHandle<ClientStats>>, gw: &Gateway) {
    for t in &tasks {
        t.abort();
    }
    let mut failures = Vec::new();
    for t in tasks {
        if let Ok(ClientStats {
            failed: Some(why), ..
        }) = t.await
        {
            failures.push(why);
        }
    }
    if let Some(first) = failures.first() {
        println!(
            "          ({} clients failed; the first: {first})",
            failures.len()
        );
    }
    for _ in 0..600 {
        if gw.active_runs().await == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The clients of `n` runs: the one HTTP/1.1 client (a connection per run), or HTTP/2
/// clients that multiplex up to [`H2_STREAMS_PER_CONNECTION`] runs each, as a browser does.
fn client_pool(http: &reqwest::Client, h1: bool, n: usize) -> Vec<reqwest::Client> {
    if h1 {
        return vec![http.clone()];
    }
    (0..n.div_ceil(H2_STREAMS_PER_CONNECTION))
        .map(|_| {
            reqwest::Client::builder()
                .http2_prior_knowledge()
                .build()
                .expect("client")
        })
        .collect()
}

/// Runs an HTTP/2 client multiplexes on one connection in the memory phase.
const H2_STREAMS_PER_CONNECTION: usize = 100;

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// Starts the fake upstream on loopback (`POST /v1/chat/completions`, idle until told how
/// many tokens to send); answers its settings and address.
async fn start_upstream(epoch: Instant) -> anyhow::Result<(Arc<Upstream>, SocketAddr)> {
    let up = Arc::new(Upstream {
        tokens: AtomicU64::new(0),
        tps: AtomicU64::new(0),
        epoch,
    });
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(chat))
        .with_state(Arc::clone(&up));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(serve_upstream(listener, app));
    Ok((up, addr))
}

/// Runs every phase and prints the figures.
pub async fn run(opts: BenchOptions) -> anyhow::Result<()> {
    let max_level = opts
        .memory_levels
        .iter()
        .chain(&opts.paced_levels)
        .copied()
        .max()
        .unwrap_or(0) as u64;
    let fd_limit = raise_fd_limit(max_level * 2 + 1024);
    let epoch = Instant::now();
    let (up, upstream) = start_upstream(epoch).await?;
    let gw = Gateway::start(&opts.gateway_bin, upstream).await?;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()?;
    let url = format!("http://{}/agents/bench/agui", gw.addr);
    let direct_url = format!("http://{upstream}/v1/chat/completions");
    println!(
        "agui-gateway bench: gateway pid {} on {}, upstream {upstream}, open-file limit {fd_limit}",
        gw.pid(),
        gw.addr
    );
    println!("gateway log: {}", gw.log().display());
    println!("(2 cores shared with the upstream and the clients; figures vary between runs)\n");

    // Warm-up.
    up.tokens.store(20, Ordering::Relaxed);
    up.tps.store(0, Ordering::Relaxed);
    wave(&http, &url, 4, epoch, false).await;

    // 1. Latency, CPU per token and time to first event at `latency_runs` concurrent runs.
    if opts.phases.iter().any(|p| p == "latency") {
        up.tokens
            .store(opts.latency_tokens as u64, Ordering::Relaxed);
        up.tps.store(opts.latency_tps, Ordering::Relaxed);
        let before = sample(gw.pid());
        let stats = wave(&http, &url, opts.latency_runs, epoch, false).await;
        let after = sample(gw.pid());
        let failed = stats.iter().filter(|s| s.failed.is_some()).count();
        let tokens: u64 = stats.iter().map(|s| s.tokens).sum();
        let lat = relay_sorted(&stats);
        let ttfe = durations_sorted(&stats, |s| s.first_event);
        let ttft = durations_sorted(&stats, |s| s.first_token);
        let cpu = after.cpu.saturating_sub(before.cpu);
        // The same load read directly from the upstream: the latency the gateway did not add.
        let direct = wave(&http, &direct_url, opts.latency_runs, epoch, true).await;
        let dlat = relay_sorted(&direct);
        println!(
            "## {} concurrent runs, {} tokens each at {} tokens/s",
            opts.latency_runs, opts.latency_tokens, opts.latency_tps
        );
        println!("runs failed:                   {failed}");
        println!("tokens relayed:                {tokens}");
        println!(
            "gateway CPU per token:         {:.1} µs",
            cpu.as_secs_f64() * 1e6 / tokens.max(1) as f64
        );
        println!(
            "gateway CPU per run:           {:.2} ms",
            cpu.as_secs_f64() * 1e3 / opts.latency_runs.max(1) as f64
        );
        // Upstream write -> client read through the gateway: the gateway's addition is at most
        // this (the direct figure shows what the loopback and the reader cost alone).
        println!(
            "relay latency via gateway:     p50 {}  p99 {}   (bounds what it adds; target p99 < 1 ms)",
            ms(Duration::from_nanos(percentile(&lat, 0.5))),
            ms(Duration::from_nanos(percentile(&lat, 0.99)))
        );
        println!(
            "latency reading upstream:      p50 {}  p99 {}",
            ms(Duration::from_nanos(percentile(&dlat, 0.5))),
            ms(Duration::from_nanos(percentile(&dlat, 0.99)))
        );
        println!(
            "time to first event:           p50 {}  p99 {}",
            ms(Duration::from_nanos(percentile(&ttfe, 0.5))),
            ms(Duration::from_nanos(percentile(&ttfe, 0.99)))
        );
        println!(
            "time to first token:           p50 {}  p99 {}\n",
            ms(Duration::from_nanos(percentile(&ttft, 0.5))),
            ms(Duration::from_nanos(percentile(&ttft, 0.99)))
        );
    }
    if opts.phases.iter().any(|p| p == "paced") {
        paced::run(paced::Paced {
            http: &http,
            gw: &gw,
            up: &up,
            epoch,
            levels: &opts.paced_levels,
            tokens: opts.paced_tokens,
            tps: opts.paced_tps,
            fd_limit,
        })
        .await;
    }
    if opts.phases.iter().any(|p| p == "encoding") {
        encoding::run(encoding::Encoding {
            http: &http,
            gw: &gw,
            up: &up,
            encodings: &opts.encodings,
            runs: opts.encoding_runs,
            tokens: opts.encoding_tokens,
            tps: opts.paced_tps,
        })
        .await;
    }
    // 2. Unthrottled throughput: through the gateway vs straight from the upstream.
    if opts.phases.iter().any(|p| p == "throughput") {
        up.tokens
            .store(opts.throughput_tokens as u64, Ordering::Relaxed);
        up.tps.store(0, Ordering::Relaxed);
        let t = Instant::now();
        let direct = wave(&http, &direct_url, opts.throughput_runs, epoch, true).await;
        let direct_rate =
            direct.iter().map(|s| s.tokens).sum::<u64>() as f64 / t.elapsed().as_secs_f64();
        let before = sample(gw.pid());
        let t = Instant::now();
        let via = wave(&http, &url, opts.throughput_runs, epoch, false).await;
        let via_rate = via.iter().map(|s| s.tokens).sum::<u64>() as f64 / t.elapsed().as_secs_f64();
        let cpu = sample(gw.pid()).cpu.saturating_sub(before.cpu);
        let via_tokens = via.iter().map(|s| s.tokens).sum::<u64>();
        println!(
            "## throughput, {} runs x {} tokens, unthrottled",
            opts.throughput_runs, opts.throughput_tokens
        );
        println!("reading the upstream directly: {direct_rate:.0} tokens/s");
        println!("through the gateway:           {via_rate:.0} tokens/s");
        println!(
            "ratio:                         {:.2}   (target >= 0.9)",
            via_rate / direct_rate.max(1.0)
        );
        println!(
            "gateway CPU per token:         {:.1} µs",
            cpu.as_secs_f64() * 1e6 / via_tokens.max(1) as f64
        );
        println!(
            "tokens per content event:      {:.1}   (deltas already waiting are joined)\n",
            via_tokens as f64 / via.iter().map(|s| s.carriers).sum::<u64>().max(1) as f64
        );
    }
    // 3. Memory at each concurrency level: slow runs, all streaming at once; the upstream
    // reached over HTTP/1.1 (a connection per run, as with a local vLLM) and over HTTP/2 (one
    // shared connection, as with HTTPS upstreams, which negotiate it).
    if opts.phases.iter().any(|p| p == "memory") {
        println!("## memory, slow streaming runs (1 token/s)");
        println!(
            "{:>8}  {:>9}  {:>10}  {:>10}  {:>12}  {:>9}",
            "runs", "client/up", "RSS", "peak RSS", "RSS per run", "no stream"
        );
        up.tokens.store(100_000, Ordering::Relaxed);
        up.tps.store(1, Ordering::Relaxed);
        // Per run is measured from the idle gateway, before any load: memory an earlier row
        // left with the allocator counts against the later rows (an upper bound).
        let baseline = sample(gw.pid());
        for &n in &opts.memory_levels {
            let rows = [("h1", "h1"), ("h1", "h2"), ("h2", "h1"), ("h2", "h2")]
                .into_iter()
                .filter(|(c, u)| {
                    opts.memory_clients.iter().any(|x| x == c)
                        && opts.memory_upstreams.iter().any(|x| x == u)
                });
            for (clients, upstream) in rows {
                let agent = if upstream == "h1" {
                    "bench"
                } else {
                    "bench-h2"
                };
                let label = format!("{clients}/{upstream}");
                // The gateway (and this process) holds a socket per HTTP/1.1 client and per
                // HTTP/1.1 upstream call; HTTP/2 multiplexes.
                let fds = |proto: &str| {
                    if proto == "h1" {
                        n as u64
                    } else {
                        n as u64 / 50 + 1
                    }
                };
                if fds(clients) + fds(upstream) + 256 > fd_limit {
                    println!(
                        "{n:>8}  {label:>9}  skipped: the open-file limit {fd_limit} is too low"
                    );
                    continue;
                }
                // HTTP/2 clients multiplex up to 100 runs per connection, as a browser does.
                let pool = client_pool(&http, clients == "h1", n);
                let url = format!("http://{}/agents/{agent}/agui", gw.addr);
                let (tasks, streamed) = stream_all(&pool, &url, n, epoch).await;
                let s = sample(gw.pid());
                let per_run = s.rss_kib.saturating_sub(baseline.rss_kib) as f64 / n as f64;
                leave(tasks, &gw).await;
                println!(
                    "{n:>8}  {label:>9}  {:>7.1} MB  {:>7.1} MB  {:>9.1} KiB  {:>9}",
                    s.rss_kib as f64 / 1024.0,
                    s.peak_kib as f64 / 1024.0,
                    per_run,
                    n - streamed
                );
            }
        }
    }
    // 4. Churn: waves of clients that leave mid-stream; the gateway's RSS must level off.
    if opts.phases.iter().any(|p| p == "churn") {
        let (waves, n) = (opts.churn_waves, opts.churn_runs);
        println!("## churn: {waves} waves of {n} runs whose clients leave mid-stream");
        println!(
            "{:>6}  {:>10}  {:>11}  {:>9}",
            "wave", "RSS", "active runs", "no stream"
        );
        up.tokens.store(100_000, Ordering::Relaxed);
        up.tps.store(1, Ordering::Relaxed);
        let url = format!("http://{}/agents/bench-h2/agui", gw.addr);
        for wave in 1..=waves {
            let (tasks, streamed) = stream_all(std::slice::from_ref(&http), &url, n, epoch).await;
            leave(tasks, &gw).await;
            let s = sample(gw.pid());
            println!(
                "{wave:>6}  {:>7.1} MB  {:>11}  {:>9}",
                s.rss_kib as f64 / 1024.0,
                gw.active_runs().await,
                n - streamed
            );
        }
    }
    let last = sample(gw.pid());
    println!(
        "\npeak RSS of the gateway: {:.1} MB (target: 10,000 runs under 300 MB)",
        last.peak_kib as f64 / 1024.0
    );
    Ok(())
}
