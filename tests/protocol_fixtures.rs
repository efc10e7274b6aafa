/// Recorded scenarios in `protocol-fixtures/` replay to exactly the recorded event streams
/// (generated ids and timestamps normalised): the protocol scenarios on the fixture agent, and in
/// `protocol-fixtures/demo/` the scripted scenario behind each feature of the web demo, on the
/// embedded default demo agent.
mod common;

use std::collections::HashMap;
use std::path::Path;

use common::*;
use serde_json::Value;

const GENERATED_ID_FIELDS: &[&str] = &[
    "messageId",
    "toolCallId",
    "parentMessageId",
    "entityId",
    "subagentRunId",
    "parentSubagentRunId",
    "parentToolCallId",
];

/// Replaces every id (top-level and inside snapshots) with `<id-N>` by first appearance.
fn normalise_deep(events: &[Value]) -> Vec<Value> {
    fn walk(v: &mut Value, name: &mut dyn FnMut(&str) -> String) {
        match v {
            Value::Object(o) => {
                o.remove("timestamp");
                for (k, x) in o.iter_mut() {
                    let is_id = matches!(
                        k.as_str(),
                        "id" | "messageId"
                            | "toolCallId"
                            | "parentMessageId"
                            | "entityId"
                            | "subagentRunId"
                            | "parentSubagentRunId"
                            | "parentToolCallId"
                    );
                    match x {
                        Value::String(id) if is_id => *x = Value::String(name(id)),
                        Value::Array(a) if k == "pendingToolCallIds" => {
                            for p in a {
                                if let Value::String(id) = p {
                                    *p = Value::String(name(id));
                                }
                            }
                        }
                        other => walk(other, name),
                    }
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|x| walk(x, name)),
            _ => {}
        }
    }
    let mut ids: HashMap<String, String> = HashMap::new();
    let mut name = |id: &str| {
        let n = ids.len() + 1;
        ids.entry(id.to_string())
            .or_insert_with(|| format!("<id-{n}>"))
            .clone()
    };
    events
        .iter()
        .map(|e| {
            let mut e = e.clone();
            walk(&mut e, &mut name);
            e
        })
        .collect()
}

/// Compares (or, with `UPDATE_FIXTURES`, records) one scenario's stream.
fn compare(dir: &Path, events: &[Value], failures: &mut Vec<String>) {
    let expected_path = dir.join("expected.jsonl");
    let got: String = events.iter().map(|e| format!("{e}\n")).collect();
    if std::env::var_os("UPDATE_FIXTURES").is_some() {
        std::fs::write(&expected_path, &got).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&expected_path).unwrap_or_else(|_| {
        panic!(
            "{} is missing; record it with UPDATE_FIXTURES=1",
            expected_path.display()
        )
    });
    let expected: Vec<Value> = expected
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    if expected != events {
        failures.push(format!(
            "{}:\n--- expected\n{}\n--- got\n{got}",
            dir.display(),
            expected
                .iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        ));
    }
}

fn scenario_dirs(root: &Path) -> Vec<std::path::PathBuf> {
    let mut dirs: Vec<_> = std::fs::read_dir(root)
        .unwrap()
        .map(|d| d.unwrap().path())
        .filter(|p| p.is_dir() && p.join("input.json").exists())
        .collect();
    dirs.sort();
    dirs
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[tokio::test]
async fn the_web_demo_feature_scenarios_replay_exactly() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("protocol-fixtures/demo");
    let mut config = agui_gateway::config::Config::load(None).unwrap();
    config.data_dir = temp_dir("fixtures-demo");
    // The demo model paces its deltas for people; the recording needs no pauses.
    for a in &mut config.agents {
        if let agui_gateway::config::ProviderConfig::Scripted { fixture } = &mut a.model.provider {
            fixture.delay_ms = 0;
        }
    }
    let gw = Gateway::from_config(config).await;
    let dirs = scenario_dirs(&root);
    assert!(
        dirs.len() >= 10,
        "expected the demo scenarios in {}",
        root.display()
    );
    let mut failures = Vec::new();
    for dir in &dirs {
        // `before.json`, when present, is a run whose stream only sets the scene (a stored thread).
        if dir.join("before.json").exists() {
            gw.run("demo", &read_json(&dir.join("before.json"))).await;
        }
        let events = normalise_deep(&gw.run("demo", &read_json(&dir.join("input.json"))).await);
        compare(dir, &events, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Replaces generated ids with `<id-N>` by order of first appearance; drops timestamps.
fn normalise(events: &[Value]) -> Vec<Value> {
    let mut ids: HashMap<String, String> = HashMap::new();
    let mut name = |id: &str| {
        let n = ids.len() + 1;
        ids.entry(id.to_string())
            .or_insert_with(|| format!("<id-{n}>"))
            .clone()
    };
    events
        .iter()
        .map(|e| {
            let mut e = e.clone();
            let obj = e.as_object_mut().unwrap();
            obj.remove("timestamp");
            for f in GENERATED_ID_FIELDS {
                if let Some(Value::String(id)) = obj.get(*f) {
                    let n = name(id);
                    obj.insert(f.to_string(), Value::String(n));
                }
            }
            if let Some(Value::Array(pending)) = obj
                .get_mut("outcome")
                .and_then(|o| o.get_mut("pendingToolCallIds"))
            {
                for p in pending.iter_mut() {
                    *p = Value::String(name(p.as_str().unwrap()));
                }
            }
            e
        })
        .collect()
}

#[tokio::test]
async fn recorded_scenarios_replay_exactly() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("protocol-fixtures");
    let config = format!(
        r#"
[[agents]]
id = "fixture"
system_prompt = "You are the fixture agent."
[agents.model]
provider = "scripted"
model_id = "fixture-model"
fixture = "{}"
[[agents.tools]]
type = "builtin"
name = "calculator"
"#,
        root.join("model.json").display()
    );
    let gw = Gateway::start(&config).await;
    let dirs = scenario_dirs(&root);
    assert!(
        dirs.len() >= 6,
        "expected the recorded scenarios in {}",
        root.display()
    );
    let mut failures = Vec::new();
    for dir in &dirs {
        let input: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("input.json")).unwrap())
                .unwrap();
        let events = normalise(&gw.run("fixture", &input).await);
        compare(dir, &events, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
