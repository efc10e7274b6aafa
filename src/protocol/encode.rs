//! Wire framing: one SSE frame per event (`data: <compact JSON>\n\n`, LF only) and keep-alive
//! comments, or, for a client that asks for it, the protobuf encoding ([`super::proto`]); and
//! the choice between them ([`Wire::negotiate`]).

use bytes::Bytes;

use super::events::{Envelope, Event};
use super::proto::{MAX_MESSAGE_BYTES, PROTO_CONTENT_TYPE, TooLarge, proto_frame};

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

/// How a response's events are framed, chosen from the request's `Accept` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Wire {
    /// `text/event-stream`: `id:` + `data: <JSON>` frames and comment keep-alives (the default).
    #[default]
    Sse,
    /// `application/vnd.ag-ui.event+proto`: length-prefixed `ag_ui.Event` messages.
    Proto,
}

/// The `Accept` header refuses both encodings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the Accept header refuses every encoding this endpoint streams: text/event-stream and application/vnd.ag-ui.event+proto"
)]
pub struct NotAcceptable;

impl Wire {
    /// The response's `Content-Type`.
    pub fn content_type(self) -> &'static str {
        match self {
            Wire::Sse => SSE_CONTENT_TYPE,
            Wire::Proto => PROTO_CONTENT_TYPE,
        }
    }

    /// What is sent after a quiet interval. The protobuf stream has no frame a client skips
    /// (`@ag-ui/client` fails on an empty message and warns on an unknown one), so it has none.
    pub fn keep_alive(self) -> Option<Bytes> {
        match self {
            Wire::Sse => Some(Bytes::from_static(KEEP_ALIVE)),
            Wire::Proto => None,
        }
    }

    /// Encodes one event as the `seq`-th of its run: its JSON with known secrets redacted (what
    /// the replay log keeps) and its frame, which carries the same redacted content. `Err`
    /// for an event larger than a client accepts in either encoding (`@ag-ui/client` fails the
    /// stream past 10 MB of SSE text or a 10 MB message).
    pub fn encode(self, seq: u64, envelope: Envelope) -> Result<(String, Bytes), TooLarge> {
        let json = event_json(&envelope);
        match self {
            Wire::Sse => {
                let json = crate::redact::redact_json_text(json);
                let frame = sse_frame(seq, &json);
                if frame.len() > MAX_MESSAGE_BYTES {
                    return Err(TooLarge { bytes: frame.len() });
                }
                Ok((json, frame))
            }
            // The protobuf frame is built from the typed event; only when redaction changed
            // the JSON is the event taken back from it.
            Wire::Proto if !crate::redact::contains_secret(&json) => {
                let frame = proto_frame(&envelope)?;
                Ok((json, frame))
            }
            Wire::Proto => {
                let json = crate::redact::redact_json_text(json);
                let frame = proto_from_json(&json)?;
                Ok((json, frame))
            }
        }
    }

    /// Frames an event logged as JSON (already redacted) for replay.
    pub fn frame_logged(self, seq: u64, json: &str) -> Bytes {
        match self {
            Wire::Sse => sse_frame(seq, json),
            // Only events that passed `encode` are logged, and a protobuf message is never
            // larger than its JSON: none is refused here.
            Wire::Proto => proto_from_json(json).unwrap_or_default(),
        }
    }

    /// The encoding an `Accept` header asks for. SSE unless the header names the protobuf type
    /// (`application/vnd.ag-ui.event+proto`) with at least SSE's quality, or accepts only it;
    /// a header that names neither (`application/json`, garbage) still gets SSE, as before
    /// negotiation existed. Refused ([`NotAcceptable`], a 406) only when it gives both a
    /// quality of 0.
    pub fn negotiate(accept: Option<&str>) -> Result<Wire, NotAcceptable> {
        let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
            return Ok(Wire::Sse);
        };
        let sse = quality(accept, "text", "event-stream");
        let proto = quality(accept, "application", "vnd.ag-ui.event+proto");
        match (sse, proto) {
            // Named explicitly and liked at least as much as SSE.
            (s, Some((p, 3))) if p > 0.0 && s.is_none_or(|(s, _)| p >= s) => Ok(Wire::Proto),
            (Some((s, _)), _) if s > 0.0 => Ok(Wire::Sse),
            // Only a wildcard takes protobuf, and SSE is refused or not matched.
            (Some(_), Some((p, _))) if p > 0.0 => Ok(Wire::Proto),
            (Some(_), _) => Err(NotAcceptable),
            (None, Some((p, _))) if p > 0.0 => Ok(Wire::Proto),
            (None, Some(_)) => Err(NotAcceptable),
            (None, None) => Ok(Wire::Sse),
        }
    }
}

/// The quality an `Accept` header gives `kind/sub`, and how specifically (1: `*/*`, 2:
/// `kind/*`, 3: exact): the most specific matching range wins. Unparsable ranges are skipped.
fn quality(accept: &str, kind: &str, sub: &str) -> Option<(f32, u8)> {
    let mut best: Option<(f32, u8)> = None;
    for range in accept.split(',') {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or_default().trim();
        let Some((t, s)) = media.split_once('/') else {
            continue;
        };
        let (t, s) = (t.trim(), s.trim());
        let specificity = if t == "*" && s == "*" {
            1
        } else if t.eq_ignore_ascii_case(kind) && s == "*" {
            2
        } else if t.eq_ignore_ascii_case(kind) && s.eq_ignore_ascii_case(sub) {
            3
        } else {
            continue;
        };
        let q = parts
            .filter_map(|p| p.split_once('='))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
            .map(|(_, v)| v.trim().parse::<f32>().unwrap_or(1.0).clamp(0.0, 1.0))
            .unwrap_or(1.0);
        if best.is_none_or(|(_, b)| specificity > b) {
            best = Some((q, specificity));
        }
    }
    best
}

/// A protobuf frame for an event given as (redacted) JSON.
fn proto_from_json(json: &str) -> Result<Bytes, TooLarge> {
    match serde_json::from_str::<Envelope>(json) {
        Ok(envelope) => proto_frame(&envelope),
        Err(e) => {
            // Our own events always parse back; only a redaction inside a tag could stop them.
            tracing::error!(error = %e, "a redacted event no longer parses; sending RUN_ERROR");
            proto_frame(&Envelope {
                event: Event::RunError {
                    message: "An event could not be encoded.".into(),
                    code: Some("INTERNAL_ERROR".into()),
                    usage: None,
                },
                subagent: None,
                timestamp: Some(now_ms()),
            })
        }
    }
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

    #[test]
    fn accept_negotiation() {
        let proto = Ok(Wire::Proto);
        let sse = Ok(Wire::Sse);
        for (accept, want) in [
            (None, &sse),
            (Some(""), &sse),
            (Some("text/event-stream"), &sse),
            (Some("*/*"), &sse),
            (Some("application/json"), &sse),
            (Some("garbage;;;,"), &sse),
            (Some("application/vnd.ag-ui.event+proto"), &proto),
            (Some("Application/VND.AG-UI.Event+Proto"), &proto),
            (
                Some("application/vnd.ag-ui.event+proto, text/event-stream"),
                &proto,
            ),
            (
                Some("text/event-stream, application/vnd.ag-ui.event+proto"),
                &proto,
            ),
            (
                Some("text/event-stream, application/vnd.ag-ui.event+proto;q=0.5"),
                &sse,
            ),
            (
                Some("text/event-stream;q=0.4, application/vnd.ag-ui.event+proto;q=0.5"),
                &proto,
            ),
            (Some("application/vnd.ag-ui.event+proto;q=0, */*"), &sse),
            (Some("application/*"), &proto),
            (Some("application/*, text/event-stream"), &sse),
            (
                Some("text/event-stream;q=0, application/vnd.ag-ui.event+proto"),
                &proto,
            ),
            (Some("text/event-stream;q=0, */*"), &proto),
            (Some("text/event-stream;q=0"), &Err(NotAcceptable)),
            (Some("*/*;q=0"), &Err(NotAcceptable)),
            (
                Some("application/vnd.ag-ui.event+proto;q=0"),
                &Err(NotAcceptable),
            ),
            (Some("text/event-stream;q=bogus"), &sse),
        ] {
            assert_eq!(&Wire::negotiate(accept), want, "{accept:?}");
        }
    }

    #[test]
    fn proto_frames_carry_the_redacted_content() {
        let secret = "sk-proto-frame-SECRET-0042";
        crate::redact::register(secret);
        let env = Envelope {
            event: Event::RunError {
                message: format!("upstream said: bad key {secret}"),
                code: Some("UPSTREAM_ERROR".into()),
                usage: None,
            },
            subagent: None,
            timestamp: Some(1),
        };
        let (json, frame) = Wire::Proto.encode(3, env).unwrap();
        assert!(
            !json.contains(secret) && json.contains("[REDACTED]"),
            "{json}"
        );
        assert!(!crate::redact::contains_secret_bytes(&frame));
        use prost::Message as _;
        let Some(super::super::proto::wire::event::Event::RunError(e)) =
            super::super::proto::wire::Event::decode(&frame[4..])
                .unwrap()
                .event
        else {
            panic!("wrong arm");
        };
        assert!(e.message.contains("[REDACTED]"), "{}", e.message);
        // Replay frames the logged (redacted) JSON the same way.
        assert_eq!(Wire::Proto.frame_logged(3, &json), frame);
        assert!(
            Wire::Sse
                .frame_logged(3, &json)
                .starts_with(b"id: 3\ndata: {")
        );
    }
}
