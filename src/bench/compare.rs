//! `agui-gateway bench compare`: the paced load (one upstream frame per token, `tps` frames a
//! second, `tokens` per run, a connection per client) against one AG-UI server: the gateway as
//! `bench` starts it, or a server given as a command line (ag-ui-strands and pydantic-ai in
//! `scripts/compare.sh`). The command finds the fake upstream's OpenAI base URL in
//! `AGUI_BENCH_UPSTREAM` (`http://127.0.0.1:PORT/v1`) and the port to serve on in `PORT`, and
//! serves AG-UI at `path`. Same upstream, clients and `/proc` readings as the rest of the bench;
//! CPU and RSS are the server process's and its descendants' (workers it forked at start).
//!
//! Per concurrency level it prints to stderr CPU per token, peak RSS, relay latency
//! (upstream write -> client read), time to first event (request sent -> first SSE event),
//! failed runs and how long the wave took; then to stdout a markdown table, header and one row,
//! for the script to gather.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::paced::{peak_rss, wave_on};
use super::{
    Gateway, durations_sorted, ms, percentile, process_tree, raise_fd_limit, relay_sorted,
    sample_all, start_upstream,
};

/// What to measure, and how to name it.
#[derive(Debug, Clone)]
pub struct CompareOptions {
    /// The server's name in the row.
    pub name: String,
    /// Its version in the row.
    pub version: String,
    /// The command that starts it; empty: the gateway (`gateway_bin`).
    pub command: Vec<String>,
    /// Where the command's server takes AG-UI runs.
    pub path: String,
    /// Concurrent runs per wave; the row has CPU per token at each, RSS and the wave's time at
    /// the last, relay p99 and time to first event at the first.
    pub levels: Vec<usize>,
    /// Tokens per run.
    pub tokens: usize,
    /// Upstream tokens (frames) per second per run.
    pub tps: u64,
    /// The gateway binary, when there is no command.
    pub gateway_bin: PathBuf,
}

/// The server under test.
enum Server {
    Gateway(Gateway),
    Command {
        child: tokio::process::Child,
        url: String,
        log: PathBuf,
    },
}

impl Server {
    async fn start(opts: &CompareOptions, upstream: std::net::SocketAddr) -> anyhow::Result<Self> {
        let Some((program, args)) = opts.command.split_first() else {
            return Ok(Server::Gateway(
                Gateway::start(&opts.gateway_bin, upstream).await?,
            ));
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let log = std::env::temp_dir().join(format!(
            "agui-compare-{}-{}.log",
            opts.name,
            uuid::Uuid::new_v4().simple()
        ));
        let out = std::fs::File::create(&log)?;
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .env("AGUI_BENCH_UPSTREAM", format!("http://{upstream}/v1"))
            .env("PORT", port.to_string())
            .stdin(std::process::Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .kill_on_drop(true)
            .spawn()?;
        // Interpreters take a while to import their frameworks: up to a minute.
        for _ in 0..1_200 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                let url = format!("http://127.0.0.1:{port}{}", opts.path);
                return Ok(Server::Command { child, url, log });
            }
            if let Some(status) = child.try_wait()? {
                anyhow::bail!("{} exited ({status}); see {}", opts.name, log.display());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        anyhow::bail!(
            "{} did not listen on port {port}; see {}",
            opts.name,
            log.display()
        )
    }

    fn pid(&self) -> u32 {
        match self {
            Server::Gateway(gw) => gw.pid(),
            Server::Command { child, .. } => child.id().unwrap_or(0),
        }
    }

    fn url(&self) -> String {
        match self {
            Server::Gateway(gw) => format!("http://{}/agents/bench/agui", gw.addr),
            Server::Command { url, .. } => url.clone(),
        }
    }

    /// Ends the command's server and waits for it (the gateway ends when dropped).
    async fn stop(self) {
        if let Server::Command { mut child, .. } = self {
            let _ = child.kill().await;
        }
    }

    fn log(&self) -> PathBuf {
        match self {
            Server::Gateway(gw) => gw.log(),
            Server::Command { log, .. } => log.clone(),
        }
    }
}

/// What one wave measured.
struct Level {
    runs: usize,
    failed: usize,
    /// Server CPU per relayed token, µs (`None`: no token came through).
    cpu_per_token: Option<f64>,
    peak_rss_kib: u64,
    relay_p99: Duration,
    first_event_p50: Duration,
    took: Duration,
}

/// `1000` as `1,000`.
fn count(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Measures the server named in `opts` and prints its row.
pub async fn compare(opts: CompareOptions) -> anyhow::Result<()> {
    anyhow::ensure!(!opts.levels.is_empty(), "no concurrency level to measure");
    let max = opts.levels.iter().copied().max().unwrap_or(0) as u64;
    // The server and this process each hold a socket per client and per upstream call.
    let fd_limit = raise_fd_limit(2 * max + 1024);
    anyhow::ensure!(
        2 * max + 256 <= fd_limit,
        "{max} runs need about {} open files; the limit is {fd_limit}",
        2 * max + 256
    );
    let epoch = Instant::now();
    let (up, upstream) = start_upstream(epoch).await?;
    let server = Server::start(&opts, upstream).await?;
    let url = server.url();
    // A run that takes 60 times its paced length (and at least a minute) has failed.
    let paced = Duration::from_secs_f64(opts.tokens as f64 / opts.tps.max(1) as f64);
    let deadline = (paced * 60).max(Duration::from_secs(60));
    let pool = [reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(deadline)
        .build()?];
    eprintln!(
        "bench compare: {} {} (pid {}) at {url}, upstream {upstream}, log {}",
        opts.name,
        opts.version,
        server.pid(),
        server.log().display()
    );

    // Warm-up (imports, connection pools, caches); its runs must stream.
    up.tokens.store(20, Ordering::Relaxed);
    up.tps.store(0, Ordering::Relaxed);
    let warm = wave_on(&pool, &url, 10, epoch).await;
    if warm.iter().all(|s| s.tokens == 0) {
        let why = warm.iter().find_map(|s| s.failed.clone());
        anyhow::bail!(
            "{} streamed no token in the warm-up ({}); see {}",
            opts.name,
            why.unwrap_or_else(|| "no TEXT_MESSAGE_CONTENT".into()),
            server.log().display()
        );
    }

    up.tokens.store(opts.tokens as u64, Ordering::Relaxed);
    up.tps.store(opts.tps, Ordering::Relaxed);
    let mut levels = Vec::new();
    for &n in &opts.levels {
        // Let the previous wave's runs wind down on the server.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let pids = process_tree(server.pid());
        let before = sample_all(&pids).cpu;
        let stop = Arc::new(AtomicBool::new(false));
        let peak = peak_rss(pids.clone(), Arc::clone(&stop));
        let start = Instant::now();
        let stats = wave_on(&pool, &url, n, epoch).await;
        let took = start.elapsed();
        let cpu = sample_all(&pids).cpu.saturating_sub(before);
        stop.store(true, Ordering::Relaxed);
        let peak_rss_kib = peak.await.unwrap_or(0);

        let tokens: u64 = stats.iter().map(|s| s.tokens).sum();
        let failed = stats.iter().filter(|s| s.failed.is_some()).count();
        let relay = relay_sorted(&stats);
        let first = durations_sorted(&stats, |s| s.first_event);
        let level = Level {
            runs: n,
            failed,
            cpu_per_token: (tokens > 0).then(|| cpu.as_secs_f64() * 1e6 / tokens as f64),
            peak_rss_kib,
            relay_p99: Duration::from_nanos(percentile(&relay, 0.99)),
            first_event_p50: Duration::from_nanos(percentile(&first, 0.5)),
            took,
        };
        eprintln!(
            "{:>6} runs: {tokens} tokens of {}, CPU {:.2} s, CPU/token {:.1} µs, peak RSS {:.1} MB, relay p50 {} p99 {}, first event p50 {} p99 {}, wave {:.1} s, {failed} failed",
            count(n),
            n * opts.tokens,
            cpu.as_secs_f64(),
            level.cpu_per_token.unwrap_or(0.0),
            peak_rss_kib as f64 / 1024.0,
            ms(Duration::from_nanos(percentile(&relay, 0.5))),
            ms(level.relay_p99),
            ms(level.first_event_p50),
            ms(Duration::from_nanos(percentile(&first, 0.99))),
            took.as_secs_f64(),
        );
        if let Some(why) = stats.iter().find_map(|s| s.failed.as_ref()) {
            eprintln!("        the first failure: {why}");
        }
        levels.push(level);
    }
    server.stop().await;
    print_row(&opts, &levels);
    Ok(())
}

fn print_row(opts: &CompareOptions, levels: &[Level]) {
    let (first, last) = (&levels[0], &levels[levels.len() - 1]);
    let mut header = vec!["server".to_string(), "version".to_string()];
    let mut row = vec![opts.name.clone(), opts.version.clone()];
    for l in levels {
        header.push(format!("CPU/token, {} runs", count(l.runs)));
        row.push(l.cpu_per_token.map_or("–".into(), |c| format!("{c:.0} µs")));
    }
    header.push(format!("peak RSS, {} runs", count(last.runs)));
    row.push(format!("{:.0} MB", last.peak_rss_kib as f64 / 1024.0));
    header.push(format!("relay p99, {} runs", count(first.runs)));
    row.push(ms(first.relay_p99));
    header.push(format!("first event p50, {} runs", count(first.runs)));
    row.push(ms(first.first_event_p50));
    header.push(format!(
        "failed runs ({})",
        levels
            .iter()
            .map(|l| count(l.runs))
            .collect::<Vec<_>>()
            .join(" / ")
    ));
    row.push(
        levels
            .iter()
            .map(|l| count(l.failed))
            .collect::<Vec<_>>()
            .join(" / "),
    );
    header.push(format!(
        "{}-run wave (paced: {:.0} s)",
        count(last.runs),
        opts.tokens as f64 / opts.tps.max(1) as f64
    ));
    row.push(format!("{:.1} s", last.took.as_secs_f64()));
    let line = |cells: &[String]| format!("| {} |", cells.join(" | "));
    println!("{}", line(&header));
    println!("|{}", "---|".repeat(header.len()));
    println!("{}", line(&row));
}
