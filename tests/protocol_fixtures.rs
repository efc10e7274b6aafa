/// Recorded scenarios in `protocol-fixtures/` replay to exactly the recorded event streams
/// (generated ids and timestamps normalised).
mod common;

use std::collections::HashMap;
use std::path::Path;

use common::*;
use serde_json::Value;

const GENERATED_ID_FIELDS: &[&str] = &["messageId", "toolCallId", "parentMessageId", "entityId"];

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
    let update = std::env::var_os("UPDATE_FIXTURES").is_some();
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|d| d.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
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
        let expected_path = dir.join("expected.jsonl");
        let got: String = events.iter().map(|e| format!("{e}\n")).collect();
        if update {
            std::fs::write(&expected_path, &got).unwrap();
            continue;
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
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
