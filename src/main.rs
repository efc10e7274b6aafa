//! The `agui-gateway` command line.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

use agui_gateway::{AppState, config::Config, serve};

#[derive(Parser)]
#[command(
    name = "agui-gateway",
    version,
    about = "AG-UI streaming gateway for LLM agents"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server (embedded demo config when no --config is given).
    Serve {
        /// TOML configuration file.
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// Listen address, overriding the config's `listen`.
        #[arg(long, short)]
        listen: Option<SocketAddr>,
    },
    /// Check a configuration file and exit.
    CheckConfig {
        /// TOML configuration file.
        config: PathBuf,
    },
    /// Measure the gateway: CPU per token, relay latency, throughput, memory per run, time to
    /// first event (a fake upstream, the gateway as a child process, concurrent clients).
    #[command(args_conflicts_with_subcommands = true)]
    Bench {
        #[command(subcommand)]
        compare: Option<Box<BenchCommand>>,
        /// Smaller loads (memory up to 1,000 runs), for a quick look.
        #[arg(long)]
        quick: bool,
        /// Concurrent runs of the latency phase.
        #[arg(long, default_value_t = 100)]
        runs: usize,
        /// Concurrency levels of the memory phase.
        #[arg(long, value_delimiter = ',')]
        levels: Option<Vec<usize>>,
        /// Concurrency levels of the paced phase.
        #[arg(long, value_delimiter = ',')]
        paced_levels: Option<Vec<usize>>,
        /// Upstream tokens per second per run in the paced phase (one frame per token).
        #[arg(long)]
        tps: Option<u64>,
        /// The encodings the encoding phase compares: sse, proto, or both.
        #[arg(long, default_value = "both", value_parser = ["sse", "proto", "both"])]
        encoding: String,
        /// Run only these phases (latency, paced, encoding, throughput, memory, churn).
        #[arg(long, value_delimiter = ',')]
        only: Option<Vec<String>>,
        /// Tokens per reply in the throughput phase.
        #[arg(long)]
        throughput_tokens: Option<usize>,
        /// Waves of 1,000 runs in the churn phase.
        #[arg(long)]
        churn_waves: Option<usize>,
        /// How the memory phase reaches the upstream: h1 (a connection per run), h2 (one
        /// shared connection), or both.
        #[arg(long, value_delimiter = ',')]
        upstream: Option<Vec<String>>,
        /// How the memory phase's clients reach the gateway: h1 (a connection per run), h2
        /// (up to 100 runs per connection, as browsers multiplex), or both.
        #[arg(long, value_delimiter = ',')]
        clients: Option<Vec<String>>,
        /// The gateway to measure (a wrapper script works too); this executable by default.
        #[arg(long)]
        gateway: Option<std::path::PathBuf>,
    },
    /// Serve the demo MCP tools (echo, add, fail) on stdin/stdout, for tests and trying out
    /// `type = "mcp"` entries.
    #[command(hide = true)]
    McpDemoServer,
    /// Read an API key on stdin and print its SHA-256, for `sha256 = "..."` in `[[auth.keys]]`
    /// (the key itself never goes in the config).
    HashKey,
}

#[derive(Subcommand)]
enum BenchCommand {
    /// The paced load against one AG-UI server, the gateway or a command given after `--`
    /// (which finds the fake upstream's base URL in AGUI_BENCH_UPSTREAM and its port in PORT):
    /// CPU per token, peak RSS, relay p99, time to first event, as a markdown row on stdout.
    Compare {
        /// The server's name in the row.
        #[arg(long, default_value = "agui-gateway")]
        name: String,
        /// Its version in the row.
        #[arg(long, default_value = env!("CARGO_PKG_VERSION"))]
        server_version: String,
        /// Where the command's server takes AG-UI runs.
        #[arg(long, default_value = "/")]
        path: String,
        /// Concurrent runs per wave.
        #[arg(long, value_delimiter = ',', default_value = "100,1000")]
        levels: Vec<usize>,
        /// Tokens per run.
        #[arg(long, default_value_t = 100)]
        tokens: usize,
        /// Upstream tokens (frames) per second per run.
        #[arg(long, default_value_t = 20)]
        tps: u64,
        /// The gateway to measure when no command is given; this executable by default.
        #[arg(long)]
        gateway: Option<PathBuf>,
        /// The server to start instead of the gateway.
        #[arg(last = true)]
        command: Vec<String>,
    },
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    if let Command::McpDemoServer = cli.command {
        // stdout carries the MCP protocol, so logs go to stderr.
        tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_env_filter(
                EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
            )
            .init();
        return match agui_gateway::tools::mcp_demo::serve_stdio().await {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("agui-gateway mcp-demo-server: {e}");
                std::process::ExitCode::from(2)
            }
        };
    }
    // rmcp logs every notification a server sends (progress messages included: an MCP
    // server's text, which may quote anything) at info; its warnings are what an operator needs.
    let telemetry = agui_gateway::telemetry::init("info,rmcp=warn");
    let outcome = run(cli).await;
    telemetry.shutdown().await;
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("agui-gateway: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::McpDemoServer => Ok(agui_gateway::tools::mcp_demo::serve_stdio().await?),
        Command::HashKey => {
            let mut key = String::new();
            std::io::stdin().read_line(&mut key)?;
            let key = key.trim_end_matches(['\r', '\n']);
            anyhow::ensure!(key.len() >= 16, "an API key needs at least 16 characters");
            let hash = agui_gateway::config::auth::hash_key(key);
            println!("{}", agui_gateway::config::auth::hex(&hash));
            Ok(())
        }
        Command::Bench {
            compare: Some(compare),
            ..
        } => {
            let BenchCommand::Compare {
                name,
                server_version,
                path,
                levels,
                tokens,
                tps,
                gateway,
                command,
            } = *compare;
            agui_gateway::bench::compare(agui_gateway::bench::CompareOptions {
                name,
                version: server_version,
                command,
                path,
                levels,
                tokens,
                tps,
                gateway_bin: gateway.unwrap_or_else(|| {
                    std::env::current_exe().unwrap_or_else(|_| "agui-gateway".into())
                }),
            })
            .await
        }
        Command::Bench {
            compare: None,
            quick,
            runs,
            levels,
            paced_levels,
            tps,
            only,
            encoding,
            throughput_tokens,
            churn_waves,
            upstream,
            clients,
            gateway,
        } => {
            let mut opts = agui_gateway::bench::BenchOptions {
                latency_runs: runs,
                ..Default::default()
            };
            if quick {
                opts.memory_levels = vec![1, 100, 1_000];
                opts.paced_levels = vec![100, 1_000];
                opts.churn_waves = 3;
                opts.latency_tokens = 40;
            }
            if let Some(l) = levels {
                opts.memory_levels = l;
            }
            if let Some(l) = paced_levels {
                opts.paced_levels = l;
            }
            if let Some(t) = tps {
                opts.paced_tps = t;
            }
            if let Some(t) = throughput_tokens {
                opts.throughput_tokens = t;
            }
            if let Some(w) = churn_waves {
                opts.churn_waves = w;
            }
            if let Some(only) = only {
                opts.phases = only;
            }
            if encoding != "both" {
                opts.encodings = vec![encoding];
            }
            if let Some(g) = gateway {
                opts.gateway_bin = g;
            }
            if let Some(u) = upstream {
                opts.memory_upstreams = u;
            }
            if let Some(c) = clients {
                opts.memory_clients = c;
            }
            agui_gateway::bench::run(opts).await
        }
        Command::CheckConfig { config } => {
            let c = Config::load(Some(&config))?;
            println!("{}: ok ({} agents)", config.display(), c.agents.len());
            Ok(())
        }
        Command::Serve { config, listen } => {
            let mut cfg = Config::load(config.as_deref())?;
            if let Some(addr) = listen {
                cfg.set_listen(addr);
            }
            let state = AppState::from_config(&cfg).await?;
            let listener = tokio::net::TcpListener::bind(cfg.listen)
                .await
                .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", cfg.listen))?;
            let addr = listener.local_addr()?;
            let ids: Vec<&str> = cfg.agents.iter().map(|a| a.id.as_str()).collect();
            tracing::info!(%addr, agents = ?ids, "agui-gateway listening; POST /agents/{{id}}/agui");
            serve(listener, state, shutdown_signal()).await?;
            Ok(())
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutting down");
}
