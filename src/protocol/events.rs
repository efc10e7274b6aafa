//! The 31 AG-UI 1.0 event types, serialised exactly as `@ag-ui/core` expects them:
//! `type` in SCREAMING_SNAKE_CASE, fields in camelCase, optional fields omitted (never `null`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One event on the wire, with its optional integer millisecond timestamp and the subagent
/// it belongs to.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Envelope {
    /// The event itself; its fields sit next to `timestamp` in the JSON object.
    #[serde(flatten)]
    pub event: Event,
    /// The subagent invocation that produced it (`subagentRunId`); absent for the run's own
    /// agent. Never set on `SUBAGENT_*` events, whose own `subagentRunId` names the subagent.
    #[serde(
        rename = "subagentRunId",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub subagent: Option<String>,
    /// Milliseconds since the Unix epoch, when the event was emitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<i64>,
}

impl<'de> Deserialize<'de> for Envelope {
    /// Read by hand: `subagentRunId` is the attribution on most events but a field of the
    /// event itself on `SUBAGENT_*` ones, which a flattened field cannot tell apart.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut map = serde_json::Map::<String, Value>::deserialize(d)?;
        let timestamp = match map.remove("timestamp") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_i64()
                    .ok_or_else(|| serde::de::Error::custom("timestamp must be an integer"))?,
            ),
        };
        let own = map
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| t.starts_with("SUBAGENT_"));
        let subagent = if own {
            None
        } else {
            match map.remove("subagentRunId") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s),
                Some(_) => return Err(serde::de::Error::custom("subagentRunId must be a string")),
            }
        };
        let event = Event::deserialize(Value::Object(map)).map_err(serde::de::Error::custom)?;
        Ok(Envelope {
            event,
            subagent,
            timestamp,
        })
    }
}

/// Every AG-UI event. Payloads the gateway never inspects (snapshots, patches, raw events) stay
/// `serde_json::Value`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "SCREAMING_SNAKE_CASE")]
#[allow(missing_docs)]
pub enum Event {
    #[serde(rename_all = "camelCase")]
    RunStarted {
        thread_id: String,
        run_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_run_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        protocol_version: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input: Option<Value>,
    },
    #[serde(rename_all = "camelCase")]
    RunFinished {
        thread_id: String,
        run_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        outcome: Option<Outcome>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Vec<TokenUsage>>,
    },
    #[serde(rename_all = "camelCase")]
    RunError {
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Vec<TokenUsage>>,
    },
    #[serde(rename_all = "camelCase")]
    StepStarted {
        step_name: String,
    },
    #[serde(rename_all = "camelCase")]
    StepFinished {
        step_name: String,
    },
    #[serde(rename_all = "camelCase")]
    TextMessageStart {
        message_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        role: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    TextMessageContent {
        message_id: String,
        delta: String,
    },
    #[serde(rename_all = "camelCase")]
    TextMessageEnd {
        message_id: String,
    },
    #[serde(rename_all = "camelCase")]
    TextMessageChunk {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        role: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        delta: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    ToolCallStart {
        tool_call_id: String,
        tool_call_name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_message_id: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    ToolCallArgs {
        tool_call_id: String,
        delta: String,
    },
    #[serde(rename_all = "camelCase")]
    ToolCallEnd {
        tool_call_id: String,
    },
    #[serde(rename_all = "camelCase")]
    ToolCallChunk {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_call_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_call_name: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_message_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        delta: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    ToolCallResult {
        message_id: String,
        tool_call_id: String,
        content: ToolResultContent,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        role: Option<String>,
    },
    StateSnapshot {
        snapshot: Value,
    },
    StateDelta {
        delta: Vec<Value>,
    },
    MessagesSnapshot {
        messages: Vec<Value>,
    },
    #[serde(rename_all = "camelCase")]
    ActivitySnapshot {
        message_id: String,
        activity_type: String,
        content: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replace: Option<bool>,
    },
    #[serde(rename_all = "camelCase")]
    ActivityDelta {
        message_id: String,
        activity_type: String,
        patch: Vec<Value>,
    },
    Raw {
        event: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source: Option<String>,
    },
    /// `value` is required on the wire but may be `null`.
    Custom {
        name: String,
        value: Value,
    },
    #[serde(rename_all = "camelCase")]
    ReasoningStart {
        message_id: String,
    },
    /// `role` is always `"reasoning"`.
    #[serde(rename_all = "camelCase")]
    ReasoningMessageStart {
        message_id: String,
        role: String,
    },
    #[serde(rename_all = "camelCase")]
    ReasoningMessageContent {
        message_id: String,
        delta: String,
    },
    #[serde(rename_all = "camelCase")]
    ReasoningMessageEnd {
        message_id: String,
    },
    #[serde(rename_all = "camelCase")]
    ReasoningMessageChunk {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        delta: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    ReasoningEnd {
        message_id: String,
    },
    #[serde(rename_all = "camelCase")]
    ReasoningEncryptedValue {
        subtype: EncryptedSubtype,
        entity_id: String,
        encrypted_value: String,
    },
    #[serde(rename_all = "camelCase")]
    SubagentStarted {
        subagent_run_id: String,
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_subagent_run_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_tool_call_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_message_id: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    SubagentFinished {
        subagent_run_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        outcome: Option<Value>,
    },
    #[serde(rename_all = "camelCase")]
    SubagentError {
        subagent_run_id: String,
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<String>,
    },
}

impl Event {
    /// The wire name of this event's type, e.g. `"RUN_STARTED"`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Event::RunStarted { .. } => "RUN_STARTED",
            Event::RunFinished { .. } => "RUN_FINISHED",
            Event::RunError { .. } => "RUN_ERROR",
            Event::StepStarted { .. } => "STEP_STARTED",
            Event::StepFinished { .. } => "STEP_FINISHED",
            Event::TextMessageStart { .. } => "TEXT_MESSAGE_START",
            Event::TextMessageContent { .. } => "TEXT_MESSAGE_CONTENT",
            Event::TextMessageEnd { .. } => "TEXT_MESSAGE_END",
            Event::TextMessageChunk { .. } => "TEXT_MESSAGE_CHUNK",
            Event::ToolCallStart { .. } => "TOOL_CALL_START",
            Event::ToolCallArgs { .. } => "TOOL_CALL_ARGS",
            Event::ToolCallEnd { .. } => "TOOL_CALL_END",
            Event::ToolCallChunk { .. } => "TOOL_CALL_CHUNK",
            Event::ToolCallResult { .. } => "TOOL_CALL_RESULT",
            Event::StateSnapshot { .. } => "STATE_SNAPSHOT",
            Event::StateDelta { .. } => "STATE_DELTA",
            Event::MessagesSnapshot { .. } => "MESSAGES_SNAPSHOT",
            Event::ActivitySnapshot { .. } => "ACTIVITY_SNAPSHOT",
            Event::ActivityDelta { .. } => "ACTIVITY_DELTA",
            Event::Raw { .. } => "RAW",
            Event::Custom { .. } => "CUSTOM",
            Event::ReasoningStart { .. } => "REASONING_START",
            Event::ReasoningMessageStart { .. } => "REASONING_MESSAGE_START",
            Event::ReasoningMessageContent { .. } => "REASONING_MESSAGE_CONTENT",
            Event::ReasoningMessageEnd { .. } => "REASONING_MESSAGE_END",
            Event::ReasoningMessageChunk { .. } => "REASONING_MESSAGE_CHUNK",
            Event::ReasoningEnd { .. } => "REASONING_END",
            Event::ReasoningEncryptedValue { .. } => "REASONING_ENCRYPTED_VALUE",
            Event::SubagentStarted { .. } => "SUBAGENT_STARTED",
            Event::SubagentFinished { .. } => "SUBAGENT_FINISHED",
            Event::SubagentError { .. } => "SUBAGENT_ERROR",
        }
    }
}

/// `TOOL_CALL_RESULT.content`: a string everywhere, an array of content parts for 1.0 clients only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ToolResultContent {
    /// Plain text (what 0.0.x clients accept).
    Text(String),
    /// Content parts (`{type:"text", text}`, `{type:"image", source}`, ...), 1.0 only.
    Parts(Vec<Value>),
}

/// Why a run ended (`RUN_FINISHED.outcome`), 1.0 only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Outcome {
    /// The run completed; frontend calls it left for the client are named.
    #[serde(rename_all = "camelCase")]
    Success {
        /// Frontend tool calls that await a result from the application.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pending_tool_call_ids: Option<Vec<String>>,
    },
    /// The run paused for something outside it.
    Interrupt {
        /// At least one interrupt.
        interrupts: Vec<Interrupt>,
    },
    /// The run was stopped before it completed and did not fail.
    Cancelled,
}

/// Something a paused run waits for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(missing_docs)]
pub struct Interrupt {
    pub id: String,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_schema: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
}

/// `REASONING_ENCRYPTED_VALUE.subtype`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[allow(missing_docs)]
pub enum EncryptedSubtype {
    Message,
    ToolCall,
}

/// Token counts for one provider and model, in AG-UI's accounting: input and output are totals,
/// reasoning and cache counts are parts of them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(missing_docs)]
pub struct TokenUsage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_input_tokens: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn optional_fields_are_omitted_and_names_are_camel_case() {
        let env = Envelope {
            event: Event::ToolCallStart {
                tool_call_id: "c1".into(),
                tool_call_name: "f".into(),
                parent_message_id: None,
            },
            subagent: None,
            timestamp: Some(17),
        };
        let v = serde_json::to_value(&env).unwrap();
        assert_eq!(
            v,
            json!({"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"f","timestamp":17})
        );
    }

    #[test]
    fn outcome_and_encrypted_subtype_shapes() {
        let e = Event::RunFinished {
            thread_id: "t".into(),
            run_id: "r".into(),
            result: None,
            outcome: Some(Outcome::Success {
                pending_tool_call_ids: Some(vec!["c".into()]),
            }),
            usage: None,
        };
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            json!({"type":"RUN_FINISHED","threadId":"t","runId":"r",
                   "outcome":{"type":"success","pendingToolCallIds":["c"]}})
        );
        let e = Event::ReasoningEncryptedValue {
            subtype: EncryptedSubtype::ToolCall,
            entity_id: "x".into(),
            encrypted_value: "s".into(),
        };
        assert_eq!(serde_json::to_value(&e).unwrap()["subtype"], "tool-call");
        assert_eq!(
            serde_json::to_value(Outcome::Cancelled).unwrap(),
            json!({"type":"cancelled"})
        );
    }

    #[test]
    fn custom_keeps_a_null_value() {
        let e = Event::Custom {
            name: "n".into(),
            value: Value::Null,
        };
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"type":"CUSTOM","name":"n","value":null}"#
        );
    }

    #[test]
    fn events_round_trip_through_the_envelope() {
        let line = r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"hi","timestamp":5}"#;
        let env: Envelope = serde_json::from_str(line).unwrap();
        assert_eq!(env.timestamp, Some(5));
        assert_eq!(env.event.type_name(), "TEXT_MESSAGE_CONTENT");
        assert_eq!(serde_json::to_string(&env).unwrap(), line);
    }

    #[test]
    fn attribution_sits_beside_the_event_except_on_subagent_events() {
        let line =
            r#"{"type":"TEXT_MESSAGE_END","messageId":"m","subagentRunId":"s1","timestamp":5}"#;
        let env: Envelope = serde_json::from_str(line).unwrap();
        assert_eq!(env.subagent.as_deref(), Some("s1"));
        assert_eq!(serde_json::to_string(&env).unwrap(), line);
        let line = r#"{"type":"SUBAGENT_FINISHED","subagentRunId":"s1"}"#;
        let env: Envelope = serde_json::from_str(line).unwrap();
        assert_eq!(env.subagent, None);
        assert_eq!(
            env.event,
            Event::SubagentFinished {
                subagent_run_id: "s1".into(),
                result: None,
                outcome: None
            }
        );
        assert_eq!(serde_json::to_string(&env).unwrap(), line);
        assert!(
            serde_json::from_str::<Envelope>(r#"{"type":"RAW","event":1,"subagentRunId":3}"#)
                .is_err()
        );
    }
}
