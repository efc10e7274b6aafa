//! The paced phase: what real models make the gateway do. Each run streams `tokens` tokens,
//! one upstream SSE frame per token, `tps` frames a second, with `n` runs at once (100, 1,000,
//! 10,000). Per level it prints the gateway's CPU per token, its fixed CPU per run (a wave of
//! one-token runs at the same concurrency: store writes, event log, transcript, registry),
//! the CPU per token beyond that fixed cost, wake-ups per token (context switches of the
//! gateway's threads), read/write syscalls per token (`/proc/<pid>/io`), RSS per run at the
//! wave's peak (and the gateway's peak RSS during it: the paced wave runs first, so the
//! one-token wave's burst does not count), and the relay latency p99.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{
    ClientStats, Gateway, H2_STREAMS_PER_CONNECTION, Upstream, client, client_pool, ms, percentile,
    relay_sorted, run_body, sample, sample_all,
};

/// Counters of the gateway process that grow with its work.
#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    cpu: Duration,
    /// Voluntary and involuntary context switches of every thread: each is a thread parked
    /// and woken again (or preempted).
    switches: u64,
    /// `syscr + syscw`: read-like and write-like syscalls.
    syscalls: u64,
}

impl std::ops::Sub for Counters {
    type Output = Counters;
    fn sub(self, o: Counters) -> Counters {
        Counters {
            cpu: self.cpu.saturating_sub(o.cpu),
            switches: self.switches.saturating_sub(o.switches),
            syscalls: self.syscalls.saturating_sub(o.syscalls),
        }
    }
}

fn field(text: &str, key: &str) -> u64 {
    text.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn counters(pid: u32) -> Counters {
    let mut switches = 0;
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
            switches += field(&status, "voluntary_ctxt_switches:")
                + field(&status, "nonvoluntary_ctxt_switches:");
        }
    }
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
    Counters {
        cpu: sample(pid).cpu,
        switches,
        syscalls: field(&io, "syscr:") + field(&io, "syscw:"),
    }
}

/// Samples the RSS of `pids` (summed) every 50 ms until `stop`; answers the highest seen (KiB).
pub(super) fn peak_rss(pids: Vec<u32>, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<u64> {
    tokio::spawn(async move {
        let mut peak = 0;
        while !stop.load(Ordering::Relaxed) {
            peak = peak.max(sample_all(&pids).rss_kib);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        peak.max(sample_all(&pids).rss_kib)
    })
}

/// Runs `n` clients at once over `pool` (HTTP/2 clients take 100 runs per connection) and
/// gathers what they saw.
pub(super) async fn wave_on(
    pool: &[reqwest::Client],
    url: &str,
    n: usize,
    epoch: Instant,
) -> Vec<ClientStats> {
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            tokio::spawn(client(
                pool[(i / H2_STREAMS_PER_CONNECTION) % pool.len()].clone(),
                url.to_string(),
                run_body(i),
                epoch,
                false,
                None,
            ))
        })
        .collect();
    let mut out = Vec::with_capacity(n);
    for t in tasks {
        out.push(t.await.unwrap_or_default());
    }
    out
}

/// The settings of the phase.
pub(super) struct Paced<'a> {
    pub http: &'a reqwest::Client,
    pub gw: &'a Gateway,
    pub up: &'a Upstream,
    pub epoch: Instant,
    pub levels: &'a [usize],
    pub tokens: usize,
    pub tps: u64,
    pub fd_limit: u64,
}

/// Runs the phase and prints one row per level.
pub(super) async fn run(p: Paced<'_>) {
    let pid = p.gw.pid();
    println!(
        "## paced: {} tokens per run at {} tokens/s, one upstream frame per token",
        p.tokens, p.tps
    );
    println!(
        "{:>7}  {:>5}  {:>9}  {:>10}  {:>10}  {:>9}  {:>9}  {:>9}  {:>8}  {:>10}  {:>6}",
        "runs",
        "conn",
        "CPU/token",
        "fixed/run",
        "CPU/token*",
        "wakes/tok",
        "sysc/tok",
        "RSS/run",
        "peak RSS",
        "relay p99",
        "failed"
    );
    for &n in p.levels {
        // A connection per client and per upstream call while the open-file limit allows it
        // (as separate browsers and a local vLLM); past it, HTTP/2 both ways (100 runs per
        // client connection, one upstream connection).
        let h1 = 2 * n as u64 + 256 <= p.fd_limit;
        let (agent, conn) = if h1 {
            ("bench", "h1")
        } else {
            ("bench-h2", "h2")
        };
        let url = format!("http://{}/agents/{agent}/agui", p.gw.addr);
        let pool = client_pool(p.http, h1, n);
        // The paced wave first, so that its memory is its own: the one-token wave below
        // starts all its runs at once, and the allocator keeps that burst's high-water mark.
        p.up.tokens.store(p.tokens as u64, Ordering::Relaxed);
        p.up.tps.store(p.tps, Ordering::Relaxed);
        let baseline = sample(pid).rss_kib;
        let stop = Arc::new(AtomicBool::new(false));
        let peak = peak_rss(vec![pid], Arc::clone(&stop));
        let before = counters(pid);
        let stats = wave_on(&pool, &url, n, p.epoch).await;
        let used = counters(pid) - before;
        stop.store(true, Ordering::Relaxed);
        let peak = peak.await.unwrap_or(baseline);

        // The fixed cost: the same number of runs, one token each, unpaced.
        p.up.tokens.store(1, Ordering::Relaxed);
        p.up.tps.store(0, Ordering::Relaxed);
        let before = sample(pid).cpu;
        wave_on(&pool, &url, n, p.epoch).await;
        let fixed = sample(pid).cpu.saturating_sub(before);
        let fixed_per_run = fixed / n.max(1) as u32;

        let tokens = stats.iter().map(|s| s.tokens).sum::<u64>().max(1) as f64;
        let failed = stats.iter().filter(|s| s.failed.is_some()).count();
        let lat = relay_sorted(&stats);
        let per_token = used.cpu.as_secs_f64() * 1e6 / tokens;
        let beyond =
            (used.cpu.saturating_sub(fixed_per_run * n as u32)).as_secs_f64() * 1e6 / tokens;
        if let Some(why) = stats.iter().find_map(|s| s.failed.as_ref()) {
            println!("         ({failed} runs failed; the first: {why})");
        }
        println!(
            "{n:>7}  {conn:>5}  {per_token:>6.1} µs  {:>7.2} ms  {beyond:>7.1} µs  {:>9.2}  {:>9.2}  {:>5.1} KiB  {:>5.0} MB  {:>10}  {failed:>6}",
            fixed_per_run.as_secs_f64() * 1e3,
            used.switches as f64 / tokens,
            used.syscalls as f64 / tokens,
            peak.saturating_sub(baseline) as f64 / n.max(1) as f64,
            peak as f64 / 1024.0,
            ms(Duration::from_nanos(percentile(&lat, 0.99))),
        );
    }
    println!(
        "(CPU/token*: beyond the fixed cost per run; wakes: context switches of the gateway's threads;\n sysc: read/write syscalls from /proc/<pid>/io; RSS/run: peak during the paced wave over the\n gateway before it; peak RSS: the gateway's during the paced wave, which runs before the\n one-token wave)\n"
    );
}
