//! The server: its shared state, router and accept loop.

use std::collections::HashMap;
use std::future::Future;
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderName, Method, header};
use axum::routing::{delete, get, post};
use tower_http::cors::CorsLayer;
use tower_http::trace::TraceLayer;

use crate::agent::Agent;
use crate::config::{Config, ServerSettings};
use crate::outbound::Net;
use crate::runs::RunManager;
use crate::{agent, api, config, runs, store, telemetry, tools};

/// Shared state of the server; cheap to clone.
#[derive(Clone)]
pub struct AppState(Arc<AppInner>);

/// What [`AppState`] holds.
pub struct AppInner {
    /// Agents by id: the config file's, and those registered through the agent API.
    pub agents: Arc<agent::registry::Agents>,
    /// Active runs, for the one-run-per-thread rule and cancellation.
    pub runs: Arc<RunManager>,
    /// Server-wide limits and timings.
    pub settings: ServerSettings,
    /// The embedded search indexes (ingestion API and search tools).
    pub search: Arc<tools::search::SearchService>,
    /// Threads, thread leases and run event logs (SQLite, or PostgreSQL shared by gateways).
    pub store: Arc<dyn store::Store>,
    /// Admission of new runs (global and per-key limits).
    pub limiter: Arc<runs::limits::Limiter>,
    /// The run event logs' writer (one per gateway, group commit).
    pub event_log: runs::eventlog::LogWriter,
    /// This process's identity in thread leases.
    pub gateway_id: String,
    /// Where embedded stores keep their files.
    pub data_dir: std::path::PathBuf,
}

impl Deref for AppState {
    type Target = AppInner;
    fn deref(&self) -> &AppInner {
        &self.0
    }
}

impl AppState {
    /// Builds agents, providers and tools from a resolved config.
    pub async fn from_config(config: &Config) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .pool_idle_timeout(Duration::from_secs(90))
            .build()?;
        let store: Arc<dyn store::Store> = match &config.store_url {
            Some(url) => Arc::new(
                store::sql::SqlStore::connect_postgres(url.expose())
                    .await
                    .map_err(|e| anyhow::anyhow!("cannot open the PostgreSQL store: {e}"))?
                    .with_op_timeout(config.store_op_timeout),
            ),
            None => {
                let path = config.data_dir.join("agui.db");
                Arc::new(
                    store::sql::SqlStore::open_sqlite(&path)
                        .await
                        .map_err(|e| {
                            anyhow::anyhow!("cannot open the SQLite store {}: {e}", path.display())
                        })?
                        .with_op_timeout(config.store_op_timeout),
                )
            }
        };
        spawn_purger(Arc::clone(&store));
        let cluster = match &config.opensearch {
            None => None,
            Some(os) => {
                let c = tools::search::cluster::Cluster::client_for(os, client.clone())
                    .map_err(|e| anyhow::anyhow!("[opensearch] {e}"))?;
                Some(Arc::new(tools::search::cluster::Cluster::new(
                    c,
                    os.url.clone(),
                    os.auth.clone(),
                )))
            }
        };
        let shared = agent::Shared {
            cluster,
            media: Arc::new(config.media.clone()),
            search: Arc::new(
                tools::search::SearchService::open(&config.data_dir.join("search")).map_err(
                    |e| anyhow::anyhow!("search index in {}: {e}", config.data_dir.display()),
                )?,
            ),
            tool_concurrency: config.server.max_tool_concurrency,
            agents: Default::default(),
        };
        let mut agents = HashMap::new();
        for a in &config.agents {
            let agent = Agent::build(a, &Net::Open(client.clone()), &shared)
                .await
                .map_err(|e| anyhow::anyhow!("agent {:?}: {e}", a.id))?;
            agents.insert(a.id.clone(), Arc::new(agent));
        }
        let sealer = match &config.master_key {
            config::MasterKey::Env(k) => store::sealed::Sealer::from_base64(k.expose()),
            config::MasterKey::File(p) => store::sealed::Sealer::from_file_or_generate(p),
            config::MasterKey::InDataDir => {
                store::sealed::Sealer::from_file_or_generate(&config.data_dir.join("master.key"))
            }
        }
        .map_err(|e| anyhow::anyhow!("{e}"))?;
        let search = Arc::clone(&shared.search);
        let policy = config
            .outbound
            .policy()
            .map_err(|e| anyhow::anyhow!("[outbound] {e}"))?;
        let guarded = Net::Guarded(Arc::new(crate::outbound::Egress::new(policy)?));
        let sealer = Arc::new(sealer);
        // Embedding models are registered through the API: their URLs are under the policy.
        search.set_embedder(Arc::new(tools::search::embedder::StoreEmbedder {
            store: Arc::clone(&store),
            sealer: Arc::clone(&sealer),
            net: guarded.clone(),
        }));
        let agents = agent::registry::Agents::new(
            agents,
            Arc::clone(&store),
            sealer,
            guarded,
            shared,
            config.server.model_idle_timeout_secs,
        );
        let agents = Arc::new(agents);
        agents.link();
        Ok(Self(Arc::new(AppInner {
            agents,
            runs: RunManager::with_detach_limit(config.server.max_detached_runs),
            settings: config.server.clone(),
            search,
            event_log: runs::eventlog::LogWriter::spawn(Arc::clone(&store)),
            limiter: runs::limits::Limiter::new(config.server.max_concurrent_runs),
            store,
            gateway_id: format!("gw-{}", uuid::Uuid::new_v4().simple()),
            data_dir: config.data_dir.clone(),
        })))
    }
}

/// Deletes expired run event logs and leases once a minute, for the life of the process.
fn spawn_purger(store: Arc<dyn store::Store>) {
    let weak = Arc::downgrade(&store);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(60));
        loop {
            tick.tick().await;
            let Some(store) = weak.upgrade() else { return };
            if let Err(e) = store.purge_expired().await {
                tracing::warn!(error = %e, "purging expired runs failed");
            }
        }
    });
}

/// The application router, without a socket (tests drive it directly).
pub fn router(state: AppState) -> Router {
    let cors = CorsLayer::new()
        .allow_origin(api::inbound::allow_origin(&state.settings.cors_origins))
        .allow_methods([
            Method::GET,
            Method::POST,
            Method::PUT,
            Method::DELETE,
            Method::OPTIONS,
        ])
        // Listed, not `*`: a wildcard does not cover `Authorization` in browsers.
        .allow_headers([
            header::CONTENT_TYPE,
            header::ACCEPT,
            header::AUTHORIZATION,
            header::CACHE_CONTROL,
            HeaderName::from_static("x-api-key"),
            HeaderName::from_static("last-event-id"),
        ])
        .expose_headers([header::RETRY_AFTER]);
    let mut app = Router::new()
        .route("/healthz", get(api::health::healthz))
        .route("/metrics", get(api::health::metrics))
        .route("/agents", get(api::health::agents))
        .route("/agents/{id}/agui", post(api::agui::run_agent))
        .route(
            "/agents/{id}/agui/runs/{run_id}/events",
            get(api::agui::run_events),
        )
        .route(
            "/agents/{id}/agui/runs/{run_id}",
            delete(api::agui::cancel_run),
        )
        .merge(api::search::routes())
        .merge(api::ml::routes())
        .merge(api::web::routes())
        .merge(api::memory::routes(Arc::clone(&state.store)))
        .layer(DefaultBodyLimit::max(state.settings.max_body_bytes))
        .layer(axum::middleware::from_fn(api::json_errors))
        .layer(axum::middleware::from_fn(api::redact_responses))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            api::auth::require,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            api::inbound::guard,
        ))
        .layer(cors);
    if telemetry::exporting() {
        app = app.layer(axum::middleware::from_fn(telemetry::server_span));
    }
    app.layer(TraceLayer::new_for_http()).with_state(state)
}

/// Serves until `shutdown` resolves. Then no new connection or run is taken; active runs may
/// finish for `shutdown_grace_secs`, after which the rest end with `RUN_ERROR` code `SHUTDOWN`
/// (their completed messages saved, their event logs flushed).
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let runs = Arc::clone(&state.runs);
    let grace = Duration::from_secs(state.settings.shutdown_grace_secs);
    let closing = state.clone();
    let limits = crate::listen::Limits::new(&state.settings);
    crate::listen::serve(listener, router(state), limits, async move {
        shutdown.await;
        runs.begin_shutdown();
        let active = runs.active_count();
        tracing::info!(
            active,
            grace_secs = grace.as_secs(),
            "shutting down: no new runs; waiting for active ones"
        );
        tokio::spawn(async move {
            if !runs.drain(grace).await {
                tracing::warn!(
                    left = runs.active_count(),
                    "grace period over; ending the remaining runs with SHUTDOWN"
                );
                runs.cancel_all();
            }
        });
    })
    .await?;
    // Every connection is closed; runs still writing their last events and thread messages
    // get a moment to commit them.
    closing.runs.drain(Duration::from_secs(5)).await;
    // Close tool sources (MCP sessions, child processes) once no run can use them.
    for agent in closing.agents.loaded() {
        agent.tools.close().await;
    }
    Ok(())
}
