//! Agents: a model, a system prompt and backend tools, built from config; and the loops that
//! run them.

pub mod agent_tool;
pub mod approvals;
pub mod flow;
pub mod history;
pub mod per;
mod plan_board;
pub mod prompt;
pub mod react;
pub mod registry;
pub mod spec;

/// Token accounting lives with the runs (a nested run's ledger travels up its side channel).
pub use crate::runs::usage;

use std::sync::Arc;
use std::time::Duration;

use crate::config::{
    AgentConfig, AgentKind, FlowStep, MemoryConfig, ModelConfig, ProviderConfig, RetryPolicy,
    ToolKind,
};
use crate::model::anthropic::{AnthropicProvider, AnthropicSettings};
use crate::model::bedrock::{BedrockProvider, BedrockSettings};
use crate::model::media::MediaPolicy;
use crate::model::openai::{OpenAiProvider, OpenAiSettings};
use crate::model::scripted::ScriptedProvider;
use crate::model::{InferenceParams, Provider};
use crate::outbound::{Net, Refused};
use crate::tools::builtin::{Calculator, Publish, StateTool};
use crate::tools::http::HttpTool;
use crate::tools::model_tool::ModelTool;
use crate::tools::search::SearchService;
use crate::tools::{Registry, RegistryBuilder, Tool};

/// How a run ended, for callers that answer with one response instead of a stream.
#[derive(Debug, Default)]
pub struct Report {
    /// `end_turn`, `max_iterations` or `tool_use` (stopped on a call the client must answer).
    pub stop_reason: &'static str,
    /// The `RUN_ERROR` code and message, when it failed.
    pub error: Option<(String, String)>,
    /// The messages the run produced (AG-UI messages, as the client would build them).
    pub messages: Vec<serde_json::Value>,
    /// Its model calls.
    pub usage: usage::Ledger,
    /// Outputs of flow steps marked `include_output_in_agent_response`, by tool.
    pub outputs: Vec<(String, String)>,
    /// The flow step that produced the answer.
    pub last_tool: Option<String>,
    /// What the run told the client besides the answer (`content_dropped`, `input_notices`),
    /// by name, so a synchronous answer reports it as the stream did.
    pub notices: Vec<(String, serde_json::Value)>,
    /// A plan-execute-reflect run's executor: its memory id and its last step's interaction.
    pub executor: Option<(String, String)>,
}

/// Runs `agent` on `input` with the loop its type calls for.
pub async fn drive(
    agent: &Agent,
    input: &crate::protocol::input::RunAgentInput,
    emitter: &mut crate::runs::Emitter,
    cancel: tokio_util::sync::CancellationToken,
    store: Option<Arc<dyn crate::store::Store>>,
) -> Report {
    use tracing::Instrument;
    // Span names and attributes follow OpenTelemetry's GenAI conventions where they apply.
    let span = tracing::info_span!(
        "invoke_agent",
        otel.name = format!("invoke_agent {}", agent.id),
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.id = %agent.id,
        gen_ai.conversation.id = %input.thread_id,
        thread_id = %input.thread_id,
        run_id = %input.run_id,
        otel.status_code = tracing::field::Empty,
        error.type = tracing::field::Empty,
    );
    let report = if agent.kind.is_flow() {
        flow::run(agent, input, emitter, cancel, store)
            .instrument(span.clone())
            .await
    } else if agent.kind == AgentKind::PlanExecuteReflect {
        // Boxed: its state (planner, executor and reflection turns, 7.6 KiB) would otherwise
        // size every run's task, ReAct and flow runs included (4.1 KiB at most).
        Box::pin(per::run(agent, input, emitter, cancel, store))
            .instrument(span.clone())
            .await
    } else {
        react::run(agent, input, emitter, cancel, store)
            .instrument(span.clone())
            .await
    };
    if let Some((code, _)) = &report.error {
        failed_span(&span, code);
    }
    report
}

/// Runs one backend tool call under an `execute_tool` span and counts it in the metrics.
pub(crate) async fn execute_tool(
    tools: &crate::tools::Registry,
    name: &str,
    call_id: &str,
    args: &str,
    ctx: crate::tools::ToolContext,
) -> crate::tools::ToolOutput {
    use tracing::Instrument;
    let span = tracing::info_span!(
        "execute_tool",
        otel.name = format!("execute_tool {name}"),
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = name,
        gen_ai.tool.call.id = call_id,
        otel.status_code = tracing::field::Empty,
        error.type = tracing::field::Empty,
    );
    let started = std::time::Instant::now();
    let out = tools.call(name, args, ctx).instrument(span.clone()).await;
    if out.is_error {
        failed_span(&span, "tool_error");
    }
    crate::metrics::tool_call(name, out.is_error, started.elapsed());
    out
}

/// Marks a span as failed with the error code the client saw (or the tool's failure).
pub(crate) fn failed_span(span: &tracing::Span, code: &str) {
    span.record("otel.status_code", "ERROR");
    span.record("error.type", code);
}

/// What an execution's `parameters` change for one run (carried in `forwardedProps.parameters`).
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    /// Bound on history messages sent to the model.
    pub message_history_limit: Option<usize>,
    /// Only these tools (and, in a flow, in this order).
    pub selected_tools: Option<Vec<String>>,
    /// The execution's parameters merged over the agent's.
    pub parameters: serde_json::Map<String, serde_json::Value>,
    /// A system prompt replacing the agent's.
    pub system_prompt: Option<String>,
    /// A bound on model calls replacing the agent's (1 to 100).
    pub max_iterations: Option<u32>,
    /// The memory container to keep this run's thread in (agentic-memory agents).
    pub memory_container_id: Option<String>,
}

impl Overrides {
    /// Reads them from a run's input.
    pub fn of(input: &crate::protocol::input::RunAgentInput) -> Self {
        use serde_json::Value;
        let Some(Value::Object(p)) = input
            .forwarded_props
            .as_ref()
            .and_then(|f| f.get("parameters"))
        else {
            return Self::default();
        };
        let number = |v: &Value| v.as_u64().or_else(|| v.as_str()?.trim().parse().ok());
        let selected_tools = p.get("selected_tools").and_then(|v| match v {
            Value::Array(a) => Some(
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect(),
            ),
            // ml-commons passes lists as JSON text too.
            Value::String(s) => serde_json::from_str::<Vec<String>>(s).ok(),
            _ => None,
        });
        let text = |k: &str| {
            p.get(k)
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty())
                .map(str::to_string)
        };
        Self {
            system_prompt: text("system_prompt"),
            max_iterations: p
                .get("max_iteration")
                .and_then(number)
                .filter(|n| (1..=100).contains(n))
                .map(|n| n as u32),
            memory_container_id: text("memory_container_id"),
            message_history_limit: p
                .get("message_history_limit")
                .and_then(number)
                .map(|n| n as usize),
            selected_tools,
            parameters: p.clone(),
        }
    }
}

impl Agent {
    /// Where a run with `overrides` keeps thread `thread`, unless the agent keeps none.
    pub fn thread_store(
        &self,
        store: Option<Arc<dyn crate::store::Store>>,
        thread: &str,
        overrides: &Overrides,
    ) -> Option<history::ThreadStore> {
        store
            .filter(|_| self.memory.store)
            .map(|s| history::ThreadStore::new(s, &self.id, thread, self.memory_for(overrides)))
    }

    /// Its memory settings for a run with `overrides` (a container named per execution).
    pub fn memory_for(&self, overrides: &Overrides) -> MemoryConfig {
        let mut m = self.memory.clone();
        if m.agentic
            && let Some(c) = &overrides.memory_container_id
        {
            m.memory_container_id = Some(c.clone());
        }
        m
    }
}

/// What agents share with each other and the rest of the server.
#[derive(Clone)]
pub struct Shared {
    /// Where media URLs may be fetched from.
    pub media: Arc<MediaPolicy>,
    /// The embedded search indexes.
    pub search: Arc<SearchService>,
    /// The `[opensearch]` cluster ml-commons tools use; the embedded indexes when `None`.
    pub cluster: Option<Arc<crate::tools::search::cluster::Cluster>>,
    /// At most this many backend tool calls of one run execute at once.
    pub tool_concurrency: usize,
    /// The agent registry, for tools that run other agents (`AgentTool`).
    pub agents: agent_tool::AgentLink,
}

/// A runnable agent.
pub struct Agent {
    /// URL-safe id.
    pub id: String,
    /// Display name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Its own system prompt, sent before anything the client adds.
    pub system_prompt: Option<String>,
    /// Bound on model calls per run.
    pub max_iterations: u32,
    /// The model.
    pub provider: Arc<dyn Provider>,
    /// Sampling defaults for every call.
    pub params: InferenceParams,
    /// Backend tools.
    pub tools: Registry,
    /// How model calls that fail before streaming are retried.
    pub retry: RetryPolicy,
    /// Where media URLs may be fetched from.
    pub media: Arc<MediaPolicy>,
    /// How it keeps its threads.
    pub memory: MemoryConfig,
    /// Which loop runs it.
    pub kind: AgentKind,
    /// Parameters every execution starts from.
    pub parameters: serde_json::Map<String, serde_json::Value>,
    /// A flow agent's steps.
    pub flow: Vec<FlowStep>,
    /// The gateway id of its registered model, when it has one (usage reports name it).
    pub model_ref: Option<String>,
    /// Registered with the unified `model` block (the RFC's interface): its provider maps
    /// content blocks and messages, so the standard `input` may carry them whatever its type.
    pub unified: bool,
    /// Tools whose streaming arguments clients show as state.
    pub predict_state: Vec<crate::config::PredictState>,
    /// At most this many backend tool calls of one run execute at once.
    pub tool_concurrency: usize,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("id", &self.id)
            .field("provider", &self.provider.name())
            .field("model", &self.provider.model_id())
            .field("tools", &self.tools)
            .finish()
    }
}

impl Agent {
    /// Builds an agent from resolved config. `net` hands out the HTTP client of each URL: the
    /// shared unchecked one for the config file's agents, the outbound policy's for registered
    /// ones.
    pub async fn build(cfg: &AgentConfig, net: &Net, deps: &Shared) -> Result<Self, String> {
        let provider = build_provider(&cfg.model, net).map_err(|e| e.to_string())?;
        let mut tools = RegistryBuilder::default();
        for t in &cfg.tools {
            let options = t.options.clone();
            let tool: Arc<dyn Tool> = match &t.kind {
                ToolKind::Http {
                    spec,
                    url,
                    method,
                    headers,
                } => Arc::new(HttpTool::new(
                    spec.clone(),
                    net.client_for(url)
                        .map_err(|e| format!("tool {:?}: {e}", spec.name))?,
                    url.clone(),
                    *method,
                    headers.clone(),
                    options.timeout,
                )),
                ToolKind::State {
                    name,
                    description,
                    state_key,
                    schema,
                } => Arc::new(StateTool::new(
                    name,
                    description.clone(),
                    state_key.clone(),
                    schema.clone(),
                )),
                ToolKind::Builtin { name, kind } => match kind.as_str() {
                    "calculator" => Arc::new(Calculator::new(name)),
                    "publish" => Arc::new(Publish::new(name)),
                    other => return Err(format!("unknown built-in tool {other:?}")),
                },
                ToolKind::Model {
                    spec,
                    model,
                    prompt,
                    system_prompt,
                } => Arc::new(ModelTool::new(
                    spec.clone(),
                    build_provider(model, net).map_err(|e| e.to_string())?,
                    model.params.clone(),
                    prompt.clone(),
                    system_prompt.clone(),
                )),
                ToolKind::MlCommons(c) => Arc::new(crate::tools::search::ml_run::MlTool::new(
                    c.clone(),
                    match &deps.cluster {
                        Some(cluster) => {
                            crate::tools::search::ml_run::MlBackend::Cluster(Arc::clone(cluster))
                        }
                        None => crate::tools::search::ml_run::MlBackend::Embedded,
                    },
                    Arc::clone(&deps.search),
                )),
                ToolKind::Agent { spec, agent_id } => Arc::new(agent_tool::AgentTool::new(
                    spec.clone(),
                    agent_id.clone(),
                    Arc::clone(&deps.agents),
                )),
                ToolKind::Mcp(c) => {
                    let client = match &c.transport {
                        crate::tools::mcp::McpTransport::Http { url, .. } => net
                            // rmcp's own client keeps no idle connections either.
                            .own_client_for(url.as_str(), |b| b.pool_max_idle_per_host(0))
                            .map_err(|e| format!("MCP server {:?}: {e}", c.name))?,
                        _ => None,
                    };
                    tools.source(
                        crate::tools::mcp::start_with(c.clone(), client).await,
                        options,
                    );
                    continue;
                }
                ToolKind::OpenApi(c) => {
                    tools.source(
                        crate::tools::openapi::start(c.clone(), net.clone()).await,
                        options,
                    );
                    continue;
                }
                ToolKind::Search(c) => {
                    let client = match &c.backend {
                        crate::tools::search::Backend::OpenSearch {
                            url, verify_tls, ..
                        } => {
                            if !verify_tls && !net.is_open() {
                                return Err(format!(
                                    "search {:?}: verify_tls = false only in the config file",
                                    c.name
                                ));
                            }
                            net.client_for(url.as_str())
                                .map_err(|e| format!("search {:?}: {e}", c.name))?
                        }
                        _ => net.client(),
                    };
                    let source =
                        crate::tools::search::start(c.clone(), Arc::clone(&deps.search), client)
                            .await;
                    tools.source(source, options);
                    continue;
                }
            };
            tools.tool(tool, options)?;
        }
        let tools = tools.build();
        Ok(Self {
            id: cfg.id.clone(),
            name: cfg.name.clone(),
            description: cfg.description.clone(),
            system_prompt: cfg.system_prompt.clone(),
            max_iterations: cfg.max_iterations,
            provider,
            params: cfg.model.params.clone(),
            tools,
            retry: cfg.model.retry,
            media: Arc::clone(&deps.media),
            memory: cfg.memory.clone(),
            kind: cfg.kind,
            parameters: cfg.parameters.clone(),
            flow: cfg.flow.clone(),
            model_ref: None,
            unified: false,
            predict_state: cfg.predict_state.clone(),
            tool_concurrency: deps.tool_concurrency.max(1),
        })
    }
}

/// The provider a model config names, with the client `net` gives its URL.
pub fn build_provider(model: &ModelConfig, net: &Net) -> Result<Arc<dyn Provider>, Refused> {
    let idle_timeout = Duration::from_secs(model.idle_timeout_secs);
    let url = match &model.provider {
        ProviderConfig::OpenAi { base_url, .. } | ProviderConfig::Anthropic { base_url, .. } => {
            Some(base_url.as_str())
        }
        ProviderConfig::Bedrock { endpoint_url, .. } => {
            // The AWS SDK brings its own HTTP client: the endpoint's literal address is
            // checked here, its DNS answers are not (see the README's security section).
            if let Some(u) = endpoint_url {
                net.check(u)?;
            }
            None
        }
        ProviderConfig::Scripted { .. } | ProviderConfig::Connector(_) => None,
    };
    let client = match (url, net) {
        (Some(u), _) => net.client_for(u)?,
        (None, _) => net.client(),
    };
    let client = match (model.http2_prior_knowledge, net) {
        // Only the config file sets it; registered models speak what the guarded client does.
        (true, Net::Open(_)) => reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .http2_prior_knowledge()
            .build()
            .unwrap_or(client),
        _ => client,
    };
    let client = &client;

    let model_id = model.model_id.clone();
    Ok(match &model.provider {
        ProviderConfig::OpenAi {
            base_url,
            api_key,
            headers,
            extra,
        } => Arc::new(OpenAiProvider::new(
            client.clone(),
            OpenAiSettings {
                base_url: base_url.clone(),
                model_id,
                api_key: api_key.clone(),
                headers: headers.clone(),
                extra: extra.clone(),
                idle_timeout,
            },
        )),
        ProviderConfig::Anthropic {
            base_url,
            api_key,
            version,
            headers,
            extra,
        } => Arc::new(AnthropicProvider::new(
            client.clone(),
            AnthropicSettings {
                base_url: base_url.clone(),
                model_id,
                api_key: api_key.clone(),
                version: version.clone(),
                headers: headers.clone(),
                extra: extra.clone(),
                idle_timeout,
            },
        )),
        ProviderConfig::Bedrock {
            region,
            endpoint_url,
            credentials,
            bearer_token,
            extra,
        } => Arc::new(BedrockProvider::new(BedrockSettings {
            model_id,
            region: region.clone(),
            endpoint_url: endpoint_url.clone(),
            credentials: credentials.clone(),
            bearer_token: bearer_token.clone(),
            extra: extra.clone(),
            idle_timeout,
        })),
        ProviderConfig::Scripted { fixture } => {
            Arc::new(ScriptedProvider::new(fixture.clone(), model_id))
        }
        // Its URL is checked when filled in, at each call.
        ProviderConfig::Connector(c) => Arc::new(crate::connector::llm::ConnectorProvider::new(
            (**c).clone(),
            model_id,
            net.clone(),
        )),
    })
}
