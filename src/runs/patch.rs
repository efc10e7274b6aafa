//! JSON Patch (RFC 6902) as AG-UI applies it: `STATE_DELTA` on the shared state, `ACTIVITY_DELTA`
//! on an activity's content.

use serde_json::Value;

/// `state` after `ops`, or why they do not apply.
pub fn apply_ops(state: &Value, ops: &[Value]) -> Result<Value, String> {
    let patch: json_patch::Patch = serde_json::from_value(Value::Array(ops.to_vec()))
        .map_err(|e| format!("Invalid JSON Patch: {e}"))?;
    let mut next = state.clone();
    json_patch::patch(&mut next, &patch)
        .map_err(|e| format!("The change does not apply to the current state: {e}"))?;
    Ok(next)
}
