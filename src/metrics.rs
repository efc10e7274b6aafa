//! Prometheus metrics, written in the text exposition format at `GET /metrics`: runs (active,
//! ended by agent, failed by code), tokens by provider and model, tool calls by tool and
//! outcome with their latency, and model calls with their time to first event and duration.
//! One process-wide registry: counters are bumped where things happen, without threading a
//! handle through every layer.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// Histogram buckets in seconds (tools and model calls both span milliseconds to minutes).
const BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

#[derive(Debug, Default, Clone)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, d: Duration) {
        let s = d.as_secs_f64();
        for (i, b) in BUCKETS.iter().enumerate() {
            if s <= *b {
                self.counts[i] += 1;
            }
        }
        self.sum += s;
        self.count += 1;
    }
}

/// Label values, in the order of the metric's label names.
type Labels = Vec<String>;

#[derive(Debug, Default)]
struct Registry {
    runs: BTreeMap<Labels, u64>,
    runs_failed: BTreeMap<Labels, u64>,
    tokens: BTreeMap<Labels, u64>,
    tool_calls: BTreeMap<Labels, u64>,
    tool_seconds: BTreeMap<Labels, Histogram>,
    model_calls: BTreeMap<Labels, u64>,
    model_first_event_seconds: BTreeMap<Labels, Histogram>,
    model_seconds: BTreeMap<Labels, Histogram>,
}

fn registry() -> &'static Mutex<Registry> {
    static R: OnceLock<Mutex<Registry>> = OnceLock::new();
    R.get_or_init(|| Mutex::new(Registry::default()))
}

fn with<T>(f: impl FnOnce(&mut Registry) -> T) -> T {
    let mut r = registry().lock().unwrap_or_else(|p| p.into_inner());
    f(&mut r)
}

fn labels(values: &[&str]) -> Labels {
    values.iter().map(|v| v.to_string()).collect()
}

/// A run ended; `code` is its `RUN_ERROR` code when it failed.
pub fn run_ended(agent: &str, code: Option<&str>) {
    with(|r| {
        let outcome = if code.is_some() { "error" } else { "finished" };
        *r.runs.entry(labels(&[agent, outcome])).or_default() += 1;
        if let Some(code) = code {
            *r.runs_failed.entry(labels(&[agent, code])).or_default() += 1;
        }
    });
}

/// Tokens a model call used.
pub fn tokens(provider: &str, model: &str, input: u64, output: u64) {
    with(|r| {
        *r.tokens
            .entry(labels(&[provider, model, "input"]))
            .or_default() += input;
        *r.tokens
            .entry(labels(&[provider, model, "output"]))
            .or_default() += output;
    });
}

/// A backend tool call ended.
pub fn tool_call(tool: &str, is_error: bool, took: Duration) {
    with(|r| {
        let outcome = if is_error { "error" } else { "ok" };
        *r.tool_calls.entry(labels(&[tool, outcome])).or_default() += 1;
        r.tool_seconds
            .entry(labels(&[tool]))
            .or_default()
            .observe(took);
    });
}

/// A model call ended: how long until its first event (if any) and in all.
pub fn model_call(provider: &str, ok: bool, first_event: Option<Duration>, took: Duration) {
    with(|r| {
        let outcome = if ok { "ok" } else { "error" };
        *r.model_calls
            .entry(labels(&[provider, outcome]))
            .or_default() += 1;
        if let Some(d) = first_event {
            r.model_first_event_seconds
                .entry(labels(&[provider]))
                .or_default()
                .observe(d);
        }
        r.model_seconds
            .entry(labels(&[provider]))
            .or_default()
            .observe(took);
    });
}

/// Escapes a label value (backslash, quote, newline).
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn label_text(names: &[&str], values: &[String], extra: Option<(&str, &str)>) -> String {
    let mut parts: Vec<String> = names
        .iter()
        .zip(values)
        .map(|(n, v)| format!("{n}=\"{}\"", escape(v)))
        .collect();
    if let Some((n, v)) = extra {
        parts.push(format!("{n}=\"{v}\""));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", parts.join(","))
    }
}

fn counter(out: &mut String, name: &str, help: &str, names: &[&str], m: &BTreeMap<Labels, u64>) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
    for (values, v) in m {
        let _ = writeln!(out, "{name}{} {v}", label_text(names, values, None));
    }
}

fn histogram(
    out: &mut String,
    name: &str,
    help: &str,
    names: &[&str],
    m: &BTreeMap<Labels, Histogram>,
) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
    for (values, h) in m {
        for (i, b) in BUCKETS.iter().enumerate() {
            let le = b.to_string();
            let _ = writeln!(
                out,
                "{name}_bucket{} {}",
                label_text(names, values, Some(("le", &le))),
                h.counts[i]
            );
        }
        let _ = writeln!(
            out,
            "{name}_bucket{} {}",
            label_text(names, values, Some(("le", "+Inf"))),
            h.count
        );
        let l = label_text(names, values, None);
        let _ = writeln!(out, "{name}_sum{l} {}", h.sum);
        let _ = writeln!(out, "{name}_count{l} {}", h.count);
    }
}

/// The exposition text, with the gauges read now.
pub fn render(active_runs: usize, detached_runs: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# HELP agui_runs_active Runs going now.\n# TYPE agui_runs_active gauge\nagui_runs_active {active_runs}"
    );
    let _ = writeln!(
        out,
        "# HELP agui_runs_detached Runs going on without their client.\n# TYPE agui_runs_detached gauge\nagui_runs_detached {detached_runs}"
    );
    with(|r| {
        counter(
            &mut out,
            "agui_runs_total",
            "Runs ended, by agent and outcome.",
            &["agent", "outcome"],
            &r.runs,
        );
        counter(
            &mut out,
            "agui_runs_failed_total",
            "Runs ended with RUN_ERROR, by agent and code.",
            &["agent", "code"],
            &r.runs_failed,
        );
        counter(
            &mut out,
            "agui_tokens_total",
            "Model tokens, by provider, model and direction.",
            &["provider", "model", "direction"],
            &r.tokens,
        );
        counter(
            &mut out,
            "agui_tool_calls_total",
            "Backend tool calls, by tool and outcome.",
            &["tool", "outcome"],
            &r.tool_calls,
        );
        histogram(
            &mut out,
            "agui_tool_call_seconds",
            "Backend tool call duration.",
            &["tool"],
            &r.tool_seconds,
        );
        counter(
            &mut out,
            "agui_model_calls_total",
            "Model calls, by provider and outcome.",
            &["provider", "outcome"],
            &r.model_calls,
        );
        histogram(
            &mut out,
            "agui_model_first_event_seconds",
            "Time from a model request to its first streamed event (upstream latency).",
            &["provider"],
            &r.model_first_event_seconds,
        );
        histogram(
            &mut out,
            "agui_model_call_seconds",
            "Model call duration, request to end of stream.",
            &["provider"],
            &r.model_seconds,
        );
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_and_labels_escaped() {
        let mut h = Histogram::default();
        h.observe(Duration::from_millis(20));
        h.observe(Duration::from_secs(3));
        assert_eq!(h.counts[0], 0);
        assert_eq!(h.counts[2], 1); // 0.025
        assert_eq!(h.counts[BUCKETS.len() - 1], 2); // 30
        assert_eq!(h.count, 2);
        assert_eq!(
            label_text(&["tool"], &["a\"b\\c\n".to_string()], None),
            "{tool=\"a\\\"b\\\\c\\n\"}"
        );
    }
}
