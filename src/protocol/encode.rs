//! Wire framing: one SSE frame per event (`data: <compact JSON>\n\n`, LF only) and keep-alive
//! comments.

use bytes::Bytes;

use super::events::Envelope;

/// `Content-Type` of the SSE response.
pub const SSE_CONTENT_TYPE: &str = "text/event-stream";

/// A keep-alive comment frame; clients ignore it.
pub const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";

/// Encodes one event as an SSE frame. Serialising our own event types cannot fail; JSON never
/// contains a raw newline, so a single `data:` line is always enough.
pub fn sse_frame(event: &Envelope) -> Bytes {
    let mut buf = Vec::with_capacity(128);
    buf.extend_from_slice(b"data: ");
    // Writing into a Vec only fails if a Serialize impl fails, which ours do not.
    if serde_json::to_writer(&mut buf, event).is_err() {
        buf.truncate(6);
        buf.extend_from_slice(
            br#"{"type":"RUN_ERROR","message":"event encoding failed","code":"INTERNAL_ERROR"}"#,
        );
    }
    buf.extend_from_slice(b"\n\n");
    Bytes::from(buf)
}

/// Milliseconds since the Unix epoch, for event timestamps.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::events::Event;

    #[test]
    fn frames_are_single_data_lines_with_lf_only() {
        let env = Envelope {
            event: Event::TextMessageContent {
                message_id: "m".into(),
                delta: "a\r\nb\n".into(),
            },
            timestamp: Some(1),
        };
        let f = sse_frame(&env);
        let s = std::str::from_utf8(&f).unwrap();
        assert!(s.starts_with("data: {") && s.ends_with("}\n\n"));
        assert!(!s.contains('\r'));
        assert_eq!(s.matches('\n').count(), 2);
    }
}
