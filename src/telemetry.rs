//! Logs and traces. Logs go to stdout, as text or (`AGUI_LOG_FORMAT=json`) one JSON object per
//! line. Traces go to an OpenTelemetry collector over OTLP/HTTP when the standard variables name
//! one (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`); the exporter
//! reads the other standard variables itself (`OTEL_EXPORTER_OTLP_HEADERS`, `..._PROTOCOL`,
//! `..._TIMEOUT`, `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`,
//! `OTEL_BSP_*`).
//!
//! Spans: one server span per HTTP request (continuing the caller's W3C `traceparent`), and
//! under it `invoke_agent` per run, `chat` per model call and `execute_tool` per backend tool
//! call, named and attributed after OpenTelemetry's GenAI conventions. Message text never goes
//! into a span.

use std::sync::atomic::{AtomicBool, Ordering};

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

static TRACING: AtomicBool = AtomicBool::new(false);

/// Whether spans are exported (the HTTP server span is added only then).
pub fn exporting() -> bool {
    TRACING.load(Ordering::Relaxed)
}

/// Text-log fields written with their control characters escaped: identifiers come from
/// clients, and a raw newline or ANSI sequence in one would forge log lines or colours.
/// (JSON records escape them already.)
fn escaped_fields() -> impl for<'w> tracing_subscriber::fmt::FormatFields<'w> + 'static {
    use std::fmt::Write as _;
    use tracing_subscriber::field::MakeExt;
    tracing_subscriber::fmt::format::debug_fn(|w, field, value| {
        let name = field.name();
        if name != "message" {
            write!(w, "{}=", name.strip_prefix("r#").unwrap_or(name))?;
        }
        write!(Escaping(w), "{value:?}")
    })
    .delimited(" ")
}

/// A `fmt::Write` that passes text through with control characters escaped (`\u{1b}`, `\n`).
struct Escaping<'a, W: std::fmt::Write>(&'a mut W);

impl<W: std::fmt::Write> std::fmt::Write for Escaping<'_, W> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let mut rest = s;
        while let Some(i) = rest.find(char::is_control) {
            self.0.write_str(&rest[..i])?;
            let c = rest[i..].chars().next().unwrap_or_default();
            write!(self.0, "{}", c.escape_default())?;
            rest = &rest[i + c.len_utf8()..];
        }
        self.0.write_str(rest)
    }
}

/// What `init` set up; `shutdown` sends the spans still queued.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

/// Installs the global subscriber: logs filtered by `RUST_LOG` (else `default_filter`), and
/// the trace exporter if the environment configures one. A broken exporter configuration is
/// reported and leaves logging in place.
pub fn init(default_filter: &str) -> Telemetry {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    let json = std::env::var("AGUI_LOG_FORMAT").is_ok_and(|v| v.eq_ignore_ascii_case("json"));
    // JSON records carry the fields of the enclosing spans (agent, thread and run ids; model
    // and tool names), for log pipelines.
    let logs = if json {
        tracing_subscriber::fmt::layer()
            .with_writer(RedactedStdout)
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .with_filter(filter)
            .boxed()
    } else {
        tracing_subscriber::fmt::layer()
            // Colours only for a person at a terminal, not in files and pipelines.
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
            .fmt_fields(escaped_fields())
            .with_writer(RedactedStdout)
            .with_filter(filter)
            .boxed()
    };
    let (provider, problem) = match otlp_requested() {
        false => (None, None),
        true => match tracer_provider() {
            Ok(p) => (Some(p), None),
            Err(e) => (None, Some(e)),
        },
    };
    let traces = provider.as_ref().map(|p| {
        tracing_opentelemetry::layer()
            .with_tracer(p.tracer("agui-gateway"))
            // No per-poll clock reads, thread ids or source locations on the hot path.
            .with_tracked_inactivity(false)
            .with_threads(false)
            .with_location(false)
            .with_target(false)
            // The gateway's own spans (and the events inside them); not every dependency's.
            .with_filter(Targets::new().with_target("agui_gateway", tracing::Level::INFO))
    });
    tracing_subscriber::registry()
        .with(logs)
        .with(traces)
        .init();
    if let Some(e) = problem {
        tracing::warn!(error = %e, "traces are not exported: the OTLP exporter could not be set up");
    }
    if provider.is_some() {
        TRACING.store(true, Ordering::Relaxed);
        tracing::info!("exporting traces over OTLP/HTTP");
    }
    Telemetry { provider }
}

/// Stdout for log lines, each passed through the redactor first: whatever an error or a field
/// quotes, a known secret never reaches the logs (see [`crate::redact`]).
struct RedactedStdout;

/// One log record's writer: the formatter writes a record whole, so a secret is never split
/// across two writes.
struct RedactedLine;

impl std::io::Write for RedactedLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        std::io::stdout()
            .lock()
            .write_all(&crate::redact::redact_bytes(buf))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stdout().flush()
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for RedactedStdout {
    type Writer = RedactedLine;

    fn make_writer(&'a self) -> Self::Writer {
        RedactedLine
    }
}

impl Telemetry {
    /// Flushes and stops the exporter (it blocks on the export, so it runs off the runtime).
    pub async fn shutdown(self) {
        if let Some(p) = self.provider {
            let _ = tokio::task::spawn_blocking(move || {
                if let Err(e) = p.shutdown() {
                    eprintln!("agui-gateway: flushing traces failed: {e}");
                }
            })
            .await;
        }
    }
}

fn env_set(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.trim().is_empty())
}

fn otlp_requested() -> bool {
    let disabled = std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.eq_ignore_ascii_case("true"))
        || std::env::var("OTEL_TRACES_EXPORTER")
            .is_ok_and(|v| v.trim().eq_ignore_ascii_case("none"));
    !disabled
        && (env_set("OTEL_EXPORTER_OTLP_ENDPOINT") || env_set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
}

fn tracer_provider() -> Result<SdkTracerProvider, String> {
    use opentelemetry_otlp::{Protocol, WithExportConfig};
    let protocol = std::env::var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|_| std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .unwrap_or_default();
    // The specification's default is http/protobuf (the exporter crate would pick JSON).
    let protocol = match protocol.trim().to_ascii_lowercase().as_str() {
        "" | "http/protobuf" => Protocol::HttpBinary,
        "http/json" => Protocol::HttpJson,
        other => {
            return Err(format!(
                "OTEL_EXPORTER_OTLP_PROTOCOL {other:?} is not supported; use http/protobuf \
                 (the collector's port 4318) or http/json"
            ));
        }
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(protocol)
        .build()
        .map_err(|e| e.to_string())?;
    let mut resource = opentelemetry_sdk::Resource::builder();
    let named = env_set("OTEL_SERVICE_NAME")
        || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|v| v.contains("service.name="));
    if !named {
        resource = resource.with_service_name("agui-gateway");
    }
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(Redacting(exporter))
        .with_resource(resource.build())
        .build())
}

/// A span exporter whose spans lose known secrets (attribute values, event attributes and
/// names, error descriptions) before they are sent (see [`crate::redact`]).
#[derive(Debug)]
struct Redacting<E>(E);

impl<E: opentelemetry_sdk::trace::SpanExporter> opentelemetry_sdk::trace::SpanExporter
    for Redacting<E>
{
    fn export(
        &self,
        mut batch: Vec<opentelemetry_sdk::trace::SpanData>,
    ) -> impl std::future::Future<Output = opentelemetry_sdk::error::OTelSdkResult> + Send {
        for span in &mut batch {
            redact_attributes(&mut span.attributes);
            for e in span.events.events.iter_mut() {
                redact_attributes(&mut e.attributes);
                if let std::borrow::Cow::Owned(n) = crate::redact::redact(&e.name) {
                    e.name = n.into();
                }
            }
            if let opentelemetry::trace::Status::Error { description } = &mut span.status
                && let std::borrow::Cow::Owned(d) = crate::redact::redact(description)
            {
                *description = d.into();
            }
        }
        self.0.export(batch)
    }

    fn shutdown_with_timeout(
        &self,
        timeout: std::time::Duration,
    ) -> opentelemetry_sdk::error::OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> opentelemetry_sdk::error::OTelSdkResult {
        self.0.force_flush()
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.0.set_resource(resource);
    }
}

fn redact_attributes(attributes: &mut [opentelemetry::KeyValue]) {
    for kv in attributes {
        if let opentelemetry::Value::String(s) = &kv.value
            && let std::borrow::Cow::Owned(clean) = crate::redact::redact(s.as_str())
        {
            kv.value = opentelemetry::Value::String(clean.into());
        }
    }
}

/// Adds the current span's W3C `traceparent` to an outgoing request while traces are exported,
/// so upstreams that trace (vLLM, a tool service) join the run's trace.
pub fn with_traceparent(req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    if !exporting() {
        return req;
    }
    let mut carrier = std::collections::HashMap::new();
    TraceContextPropagator::new().inject_context(&tracing::Span::current().context(), &mut carrier);
    match carrier.remove("traceparent") {
        Some(tp) => req.header("traceparent", tp),
        None => req,
    }
}

/// Reads W3C trace context from request headers.
struct Headers<'a>(&'a http::HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

/// Middleware (installed while exporting): a server span per request, child of the caller's
/// `traceparent` if it sent one. A run started by the request carries the span into its task.
pub async fn server_span(req: Request, next: Next) -> Response {
    // Probes and scrapes would drown the traces that matter.
    if matches!(req.uri().path(), "/healthz" | "/metrics") {
        return next.run(req).await;
    }
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_default();
    let method = req.method().clone();
    let span = tracing::info_span!(
        "http_request",
        otel.name = format!("{method} {route}"),
        otel.kind = "server",
        http.request.method = %method,
        http.route = route,
        http.response.status_code = tracing::field::Empty,
    );
    let parent = TraceContextPropagator::new().extract(&Headers(req.headers()));
    let _ = span.set_parent(parent);
    let resp = next.run(req).instrument(span.clone()).await;
    // Integers go to OpenTelemetry as i64 (a u64 would arrive as a string).
    span.record(
        "http.response.status_code",
        i64::from(resp.status().as_u16()),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt::Write;

    #[test]
    fn escaping_writer_escapes_only_control_characters() {
        let mut out = String::new();
        Escaping(&mut out)
            .write_str("a\u{1b}[31mb\nc\r\té\u{7f}")
            .unwrap();
        assert_eq!(out, "a\\u{1b}[31mb\\nc\\r\\té\\u{7f}");
    }
}
