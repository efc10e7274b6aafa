//! Wire framing: one SSE frame per event (`data: <compact JSON>\n\n`, LF only) and keep-alive
//! comments.

use bytes::Bytes;

use super::events::Envelope;

/// `Content-Type` of the SSE response.
pub const SSE_CONTENT_TYPE: &str = "text/event-stream";

/// A keep-alive comment frame; clients ignore it.
pub const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";

/// One event as compact JSON. Serialising our own event types cannot fail; should it ever,
/// the stream still gets a valid terminal event.
pub fn event_json(event: &Envelope) -> String {
    serde_json::to_string(event).unwrap_or_else(|_| {
        r#"{"type":"RUN_ERROR","message":"event encoding failed","code":"INTERNAL_ERROR"}"#
            .to_string()
    })
}

/// Frames one event's JSON for SSE: an `id:` line with its sequence number in the run (what
/// `Last-Event-ID` names on a reconnect) and one `data:` line (JSON holds no raw newline).
pub fn sse_frame(seq: u64, json: &str) -> Bytes {
    let mut buf = Vec::with_capacity(json.len() + 24);
    buf.extend_from_slice(b"id: ");
    buf.extend_from_slice(seq.to_string().as_bytes());
    buf.extend_from_slice(b"\ndata: ");
    buf.extend_from_slice(json.as_bytes());
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
            subagent: None,
            timestamp: Some(1),
        };
        let f = sse_frame(7, &event_json(&env));
        let s = std::str::from_utf8(&f).unwrap();
        assert!(
            s.starts_with("id: 7\ndata: {") && s.ends_with("}\n\n"),
            "{s}"
        );
        assert!(!s.contains('\r'));
        assert_eq!(s.matches('\n').count(), 3);
    }
}
