//! The protobuf encoding of every event, compared with the JSON the SSE path sends.

use super::*;
use serde_json::json;

fn env(event: Event) -> Envelope {
    Envelope {
        event,
        subagent: None,
        timestamp: Some(1_700_000_000_123),
    }
}

#[test]
fn a_subagents_event_carries_its_attribution() {
    let mut e = env(Event::TextMessageEnd {
        message_id: "m".into(),
    });
    e.subagent = Some("s1".into());
    let Some(Arm::TextMessageEnd(end)) = to_proto(&e).event else {
        panic!("a TEXT_MESSAGE_END")
    };
    assert_eq!(end.subagent_run_id.as_deref(), Some("s1"));
    let Some(Arm::TextMessageEnd(end)) = to_proto(&env(Event::TextMessageEnd {
        message_id: "m".into(),
    }))
    .event
    else {
        panic!("a TEXT_MESSAGE_END")
    };
    assert_eq!(end.subagent_run_id, None);
}

/// Decodes one frame back into its message.
fn unframe(frame: &[u8]) -> wire::Event {
    let len = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
    assert_eq!(frame.len(), 4 + len, "one frame, length-prefixed");
    wire::Event::decode(&frame[4..]).unwrap()
}

/// Back from `google.protobuf.Value` (what the client's decoder does).
fn json_of(v: &prost_types::Value) -> Value {
    use prost_types::value::Kind;
    match v.kind.as_ref().unwrap() {
        Kind::NullValue(_) => Value::Null,
        Kind::BoolValue(b) => json!(b),
        Kind::NumberValue(n) => json!(n),
        Kind::StringValue(s) => json!(s),
        Kind::ListValue(l) => Value::Array(l.values.iter().map(json_of).collect()),
        Kind::StructValue(s) => Value::Object(
            s.fields
                .iter()
                .map(|(k, v)| (k.clone(), json_of(v)))
                .collect(),
        ),
    }
}

#[test]
fn a_text_delta_is_framed_with_its_type_and_timestamp() {
    let f = proto_frame(&env(Event::TextMessageContent {
        message_id: "m1".into(),
        delta: "héllo".into(),
    }))
    .unwrap();
    let Some(Arm::TextMessageContent(e)) = unframe(&f).event else {
        panic!("wrong arm");
    };
    let base = e.base_event.unwrap();
    assert_eq!(base.r#type, T::TextMessageContent as i32);
    assert_eq!(base.timestamp, Some(1_700_000_000_123));
    assert_eq!((e.message_id.as_str(), e.delta.as_str()), ("m1", "héllo"));
    assert_eq!(e.subagent_run_id, None);
}

#[test]
fn every_event_type_names_its_own_arm() {
    // The decoder refuses an envelope whose arm and base type disagree.
    let events = [
        Event::StepStarted {
            step_name: "s".into(),
        },
        Event::ReasoningEncryptedValue {
            subtype: EncryptedSubtype::ToolCall,
            entity_id: "c".into(),
            encrypted_value: "x".into(),
        },
        Event::SubagentError {
            subagent_run_id: "s".into(),
            message: "m".into(),
            code: None,
        },
        Event::Custom {
            name: "n".into(),
            value: Value::Null,
        },
    ];
    for e in events {
        let name = e.type_name();
        let msg = to_proto(&env(e));
        let bytes = msg.encode_to_vec();
        let back = wire::Event::decode(bytes.as_slice()).unwrap();
        let arm_type = match back.event.unwrap() {
            Arm::StepStarted(x) => x.base_event,
            Arm::ReasoningEncryptedValue(x) => {
                assert_eq!(x.subtype, "tool-call");
                x.base_event
            }
            Arm::SubagentError(x) => x.base_event,
            Arm::Custom(x) => {
                assert_eq!(json_of(x.value.as_ref().unwrap()), Value::Null);
                x.base_event
            }
            other => panic!("unexpected arm {other:?}"),
        }
        .unwrap()
        .r#type;
        assert_eq!(T::try_from(arm_type).unwrap().as_str_name(), name);
    }
}

#[test]
fn json_payloads_ride_as_protobuf_values() {
    let snapshot = json!({"a": [1, 2.5, null, true, "s"], "b": {"c": {}}});
    let f = proto_frame(&env(Event::StateSnapshot { snapshot })).unwrap();
    let Some(Arm::StateSnapshot(e)) = unframe(&f).event else {
        panic!("wrong arm");
    };
    // Numbers are doubles on this wire, as in JavaScript.
    let want = json!({"a": [1.0, 2.5, null, true, "s"], "b": {"c": {}}});
    assert_eq!(json_of(e.snapshot.as_ref().unwrap()), want);
}

#[test]
fn patches_become_typed_operations() {
    let delta = vec![
        json!({"op": "replace", "path": "/a", "value": 1}),
        json!({"op": "move", "from": "/a", "path": "/b"}),
        json!({"op": "add", "path": "/n", "value": null}),
        json!({"op": "bogus", "path": "/x"}),
    ];
    let Some(Arm::StateDelta(e)) = to_proto(&env(Event::StateDelta { delta })).event else {
        panic!("wrong arm");
    };
    use wire::JsonPatchOperationType as Op;
    let ops: Vec<_> = e.delta.iter().map(|o| o.op).collect();
    assert_eq!(ops, [Op::Replace as i32, Op::Move as i32, Op::Add as i32]);
    assert_eq!(e.delta[1].from.as_deref(), Some("/a"));
    assert!(e.delta[1].value.is_none());
    assert_eq!(json_of(e.delta[2].value.as_ref().unwrap()), Value::Null);
}

#[test]
fn run_finished_flattens_its_outcome() {
    let e = Event::RunFinished {
        thread_id: "t".into(),
        run_id: "r".into(),
        result: None,
        outcome: Some(Outcome::Success {
            pending_tool_call_ids: Some(vec!["c1".into()]),
        }),
        usage: Some(vec![TokenUsage {
            input_tokens: Some(u64::MAX),
            output_tokens: Some(7),
            ..TokenUsage::default()
        }]),
    };
    let Some(Arm::RunFinished(f)) = to_proto(&env(e)).event else {
        panic!("wrong arm");
    };
    assert_eq!(f.outcome, "success");
    assert_eq!(f.pending_tool_call_ids, ["c1"]);
    assert_eq!(f.usage[0].input_tokens, Some((1 << 53) - 1));
    assert_eq!(f.usage[0].output_tokens, Some(7));
    assert!(f.result.is_none());
    let e = Event::RunFinished {
        thread_id: "t".into(),
        run_id: "r".into(),
        result: Some(json!("done")),
        outcome: Some(Outcome::Interrupt {
            interrupts: vec![Interrupt {
                id: "i".into(),
                reason: "tool_call".into(),
                message: None,
                tool_call_id: Some("c".into()),
                response_schema: None,
                expires_at: None,
            }],
        }),
        usage: None,
    };
    let Some(Arm::RunFinished(f)) = to_proto(&env(e)).event else {
        panic!("wrong arm");
    };
    assert_eq!(f.outcome, "interrupt");
    assert_eq!(f.interrupts[0].tool_call_id.as_deref(), Some("c"));
    assert_eq!(json_of(f.result.as_ref().unwrap()), json!("done"));
}

#[test]
fn tool_results_carry_text_or_parts_never_both() {
    let text = Event::ToolCallResult {
        message_id: "m".into(),
        tool_call_id: "c".into(),
        content: ToolResultContent::Text("42".into()),
        role: Some("tool".into()),
    };
    let Some(Arm::ToolCallResult(r)) = to_proto(&env(text)).event else {
        panic!("wrong arm");
    };
    assert_eq!(r.content.as_deref(), Some("42"));
    assert!(r.content_parts.is_empty());
    let parts = Event::ToolCallResult {
        message_id: "m".into(),
        tool_call_id: "c".into(),
        content: ToolResultContent::Parts(vec![
            json!({"type": "text", "text": "hi"}),
            json!({"type": "image", "source": {"type": "data", "value": "AAA=", "mimeType": "image/png"}}),
            json!({"type": "hologram"}),
        ]),
        role: None,
    };
    let Some(Arm::ToolCallResult(r)) = to_proto(&env(parts)).event else {
        panic!("wrong arm");
    };
    assert!(r.content.is_none());
    assert_eq!(r.content_parts.len(), 2);
    use wire::input_content::Part;
    let Some(Part::Image(img)) = &r.content_parts[1].part else {
        panic!("image part");
    };
    let Some(wire::input_content_source::Source::Data(d)) =
        img.source.as_ref().and_then(|s| s.source.as_ref())
    else {
        panic!("data source");
    };
    assert_eq!(
        (d.value.as_str(), d.mime_type.as_str()),
        ("AAA=", "image/png")
    );
}

#[test]
fn messages_snapshot_uses_the_union_message() {
    let messages = vec![
        json!({"id": "u", "role": "user", "content": [{"type": "text", "text": "hi"}]}),
        json!({"id": "a", "role": "assistant", "content": "yes",
               "toolCalls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}),
        json!({"id": "t", "role": "tool", "toolCallId": "c", "content": "ok"}),
    ];
    let Some(Arm::MessagesSnapshot(s)) = to_proto(&env(Event::MessagesSnapshot { messages })).event
    else {
        panic!("wrong arm");
    };
    assert_eq!(s.messages[0].content, None);
    assert_eq!(s.messages[0].content_parts.len(), 1);
    assert_eq!(s.messages[1].content.as_deref(), Some("yes"));
    let call = &s.messages[1].tool_calls[0];
    assert_eq!(call.function.as_ref().unwrap().arguments, "{}");
    assert_eq!(s.messages[2].tool_call_id.as_deref(), Some("c"));
}

#[test]
fn an_event_too_large_for_a_client_is_refused() {
    let e = proto_frame(&env(Event::TextMessageContent {
        message_id: "m".into(),
        delta: "x".repeat(MAX_MESSAGE_BYTES + 1),
    }))
    .unwrap_err();
    assert!(e.bytes > MAX_MESSAGE_BYTES);
}
