//! Reading RunAgentInput: shapes, errors that name their field, limits.

use super::*;

fn err(body: &str) -> InputError {
    parse(body.as_bytes()).unwrap_err()
}

#[test]
fn minimal_input_with_unknown_keys_parses() {
    let input =
        parse(br#"{"threadId":"t","runId":"r","messages":[],"extra":{"x":1},"state":null}"#)
            .unwrap();
    assert!(input.tools.is_empty() && input.context.is_empty() && !input.is_v1());
}

#[test]
fn missing_and_mistyped_fields_are_named() {
    let e = err(r#"{"runId":"r","messages":[]}"#);
    assert_eq!(e.field, "threadId");
    let e = err(r#"{"threadId":"t","runId":"r"}"#);
    assert_eq!(e.field, "messages");
    let e = err(r#"{"threadId":5,"runId":"r","messages":[]}"#);
    assert_eq!(e.field, "threadId");
    assert!(e.message.contains("invalid type"), "{}", e.message);
    let e =
        err(r#"{"threadId":"t","runId":"r","messages":[{"id":"1","role":"tool","content":"x"}]}"#);
    assert_eq!(e.field, "messages[0].toolCallId");
    let e =
        err(r#"{"threadId":"t","runId":"r","messages":[{"id":"1","role":"user","content":7}]}"#);
    assert_eq!(e.field, "messages[0].content");
    let e = err(r#"{"threadId":"t","runId":"r","messages":[{"id":"1","role":"wizard"}]}"#);
    assert_eq!(e.field, "messages[0].role");
    assert!(e.message.contains("wizard"));
    let e = err(r#"{"threadId":"t""#);
    assert!(e.message.starts_with("malformed JSON"));
    let e = err(r#"{"threadId":" ","runId":"r","messages":[]}"#);
    assert_eq!(e.field, "threadId");
    let e =
        err(r#"{"threadId":"t","runId":"r","messages":[],"tools":[{"name":"a"},{"name":"a"}]}"#);
    assert_eq!(e.field, "tools[1].name");
}

#[test]
fn user_content_as_string_parts_and_legacy_binary() {
    let input = parse(
        br#"{"threadId":"t","runId":"r","protocolVersion":"1.0","messages":[
          {"id":"1","role":"user","content":"hi"},
          {"id":"2","role":"user","content":[
             {"type":"text","text":"look"},
             {"type":"image","source":{"type":"data","value":"AAAA","mimeType":"image/png"}},
             {"type":"document","source":{"type":"url","value":"https://x/y.pdf"}},
             {"type":"audio","source":{"type":"file","value":"file-1","provider":"openai"}},
             {"type":"binary","mimeType":"image/jpeg","url":"https://x/a.jpg"},
             {"type":"hologram","foo":1}
          ]},
          {"id":"3","role":"assistant","content":null,"toolCalls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},
          {"id":"4","role":"activity","activityType":"x","content":{}},
          {"id":"5","role":"reasoning","content":"hmm","encryptedValue":"sig"}
        ]}"#,
    )
    .unwrap();
    assert!(input.is_v1());
    let InputMessage::User {
        content: Content::Parts(parts),
        ..
    } = &input.messages[1]
    else {
        panic!("parts expected")
    };
    assert_eq!(parts.len(), 6);
    assert_eq!(parts[5], Part::Unknown);
    assert!(matches!(&parts[4], Part::Binary { url: Some(u), .. } if u == "https://x/a.jpg"));
    assert_eq!(input.messages[1].clone_text(), "look");
}

#[test]
fn a_subagents_messages_are_for_display_only() {
    let input = parse(
        br#"{"threadId":"t","runId":"r","messages":[
          {"id":"1","role":"assistant","content":"inner","subagentRunId":"s1"},
          {"id":"2","role":"tool","toolCallId":"c","content":"x","subagentRunId":"s1"},
          {"id":"3","role":"user","content":"hi","subagentRunId":null}
        ]}"#,
    )
    .unwrap();
    assert!(matches!(input.messages[0], InputMessage::Display));
    assert!(matches!(input.messages[1], InputMessage::Display));
    assert!(matches!(input.messages[2], InputMessage::User { .. }));
}

#[test]
fn nul_in_identifiers_is_refused_with_the_field_named() {
    let e = err("{\"threadId\":\"t\\u0000\",\"runId\":\"r\",\"messages\":[]}");
    assert_eq!(e.field, "threadId");
    assert!(e.message.contains("NUL"), "{}", e.message);
    let e = err(
        r#"{"threadId":"t","runId":"r","messages":[{"id":"a","role":"assistant","toolCalls":[{"id":"c\u0000","function":{"name":"f"}}]}]}"#,
    );
    assert_eq!(e.field, "messages[0].toolCalls[0].id");
    let e = err(
        r#"{"threadId":"t","runId":"r","messages":[{"id":"m\u0000","role":"user","content":"x"}]}"#,
    );
    assert_eq!(e.field, "messages[0].id");
    // Other control characters are the logs' business (escaped there), not a refusal.
    assert!(parse(br#"{"threadId":"t\u001b[31m","runId":"r","messages":[]}"#).is_ok());
}

#[test]
fn inline_media_needs_base64_and_a_media_type_of_its_kind() {
    let with = |part: &str| {
        format!(
            r#"{{"threadId":"t","runId":"r","messages":[{{"id":"1","role":"user","content":[{part}]}}]}}"#
        )
    };
    let ok = [
        r#"{"type":"image","source":{"type":"data","value":"iVBORw0KGgo=","mimeType":"image/png"}}"#,
        r#"{"type":"image","source":{"type":"data","value":"iVBORw0KGgo","mimeType":"IMAGE/PNG"}}"#,
        r#"{"type":"document","source":{"type":"data","value":"JVBE\nRi0=","mimeType":"application/pdf"}}"#,
        r#"{"type":"audio","source":{"type":"url","value":"https://x/a.mp3"}}"#,
        r#"{"type":"binary","mimeType":"text/plain; charset=utf-8","data":"aGk="}"#,
    ];
    for part in ok {
        assert!(parse(with(part).as_bytes()).is_ok(), "{part}");
    }
    let bad = [
        (
            r#"{"type":"image","source":{"type":"data","value":"%%%","mimeType":"image/png"}}"#,
            "messages[0].content[0].source.value",
        ),
        (
            r#"{"type":"image","source":{"type":"data","value":"","mimeType":"image/png"}}"#,
            "messages[0].content[0].source.value",
        ),
        (
            r#"{"type":"image","source":{"type":"data","value":"AAAA","mimeType":"png"}}"#,
            "messages[0].content[0].source.mimeType",
        ),
        (
            r#"{"type":"image","source":{"type":"data","value":"AAAA","mimeType":"application/pdf"}}"#,
            "messages[0].content[0].source.mimeType",
        ),
        (
            r#"{"type":"video","source":{"type":"url","value":"https://x/v","mimeType":"image/png"}}"#,
            "messages[0].content[0].source.mimeType",
        ),
        (
            r#"{"type":"binary","mimeType":"image/png","data":"not base64!"}"#,
            "messages[0].content[0].data",
        ),
        (
            r#"{"type":"binary","data":"AAAA"}"#,
            "messages[0].content[0].mimeType",
        ),
        (
            r#"{"type":"binary","mimeType":"image/png\r\nx: y","url":"https://x/a"}"#,
            "messages[0].content[0].mimeType",
        ),
    ];
    for (part, field) in bad {
        let e = err(&with(part));
        assert_eq!(e.field, field, "{part}: {}", e.message);
    }
}

#[test]
fn context_values_that_are_not_strings_are_kept_as_json() {
    let input = parse(
        br#"{"threadId":"t","runId":"r","messages":[],"context":[{"description":"d","value":{"a":1}}]}"#,
    )
    .unwrap();
    assert_eq!(input.context[0].value, r#"{"a":1}"#);
}

impl InputMessage {
    fn clone_text(&self) -> String {
        match self {
            InputMessage::User { content, .. } => content.text(),
            _ => String::new(),
        }
    }
}
