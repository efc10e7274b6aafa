//! A fake AWS Bedrock Runtime speaking the real `ConverseStream` wire protocol over HTTP on
//! `127.0.0.1:0`: `POST /model/{modelId}/converse-stream` answered with binary AWS event-stream
//! frames (`application/vnd.amazon.eventstream`), or with a REST-JSON error. `POST
//! /model/{modelId}/converse` (what ml-commons connectors call) answers the same scripted reply
//! folded into one Converse JSON document. Good enough for the
//! official `aws-sdk-bedrockruntime` client pointed at it with `endpoint_url(fake.endpoint())`.
//!
//! Wire notes (checked against aws-sdk-bedrockruntime 1.153):
//! - Event frames carry `:message-type: event`, `:event-type: <lowerCamel union member>`
//!   (`messageStart`, `contentBlockStart`, `contentBlockDelta`, `contentBlockStop`, `messageStop`,
//!   `metadata`) and `:content-type: application/json`; the payload is the member's JSON shape.
//! - Exception frames carry `:message-type: exception` and `:exception-type: <lowerCamel>`
//!   (`modelStreamErrorException`, `internalServerException`, `validationException`,
//!   `throttlingException`, `serviceUnavailableException`); payload `{"message": ...}`.
//!   Any other exception type surfaces as an unmodelled (generic) stream error.
//! - HTTP errors are recognised by status != 2xx; the error code comes from the
//!   `x-amzn-ErrorType` header (PascalCase shape name, e.g. `ThrottlingException`) and the
//!   message from the body's `message` field.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use aws_smithy_eventstream::frame::write_message_to;
use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use futures::StreamExt;
use serde_json::{Value, json};

/// One scripted answer of the fake Bedrock, served in order, one per request.
#[derive(Clone, Debug)]
pub enum BedrockReply {
    /// A stream of events: each (event_type, json payload). Sent as event frames, then the body ends.
    Events(Vec<(&'static str, Value)>),
    /// These events, then an exception frame: (exception_type e.g. "modelStreamErrorException", message).
    EventsThenException(Vec<(&'static str, Value)>, &'static str, String),
    /// A non-200 answer: status, x-amzn-ErrorType value (e.g. "ThrottlingException"), message.
    Error(u16, &'static str, String),
}

/// A request the fake received.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    /// The request path with the model id percent-decoded, e.g.
    /// `/model/anthropic.claude-3-haiku-20240307-v1:0/converse-stream`.
    pub path: String,
    pub headers: HeaderMap,
    /// The JSON body (`Value::Null` if it was not JSON).
    pub body: Value,
}

pub struct FakeBedrock {
    pub addr: SocketAddr,
    pub requests: Arc<Mutex<Vec<RecordedRequest>>>,
}

struct Shared {
    replies: Mutex<VecDeque<BedrockReply>>,
    requests: Arc<Mutex<Vec<RecordedRequest>>>,
}

impl Shared {
    /// Records a request and takes the next scripted reply.
    fn take(&self, path: String, headers: HeaderMap, body: &[u8]) -> Option<BedrockReply> {
        self.requests.lock().unwrap().push(RecordedRequest {
            path,
            headers,
            body: serde_json::from_slice(body).unwrap_or(Value::Null),
        });
        self.replies.lock().unwrap().pop_front()
    }
}

impl FakeBedrock {
    /// Starts the fake; `replies` are served in order, one per request; when none are left it
    /// answers 500 `InternalServerException`.
    pub async fn start(replies: Vec<BedrockReply>) -> FakeBedrock {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let shared = Arc::new(Shared {
            replies: Mutex::new(replies.into()),
            requests: Arc::clone(&requests),
        });
        let app = axum::Router::new()
            .route("/model/{modelId}/converse-stream", post(converse_stream))
            .route("/model/{modelId}/converse", post(converse))
            .with_state(shared);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeBedrock { addr, requests }
    }

    /// `http://127.0.0.1:PORT`, for `endpoint_url`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A copy of the requests received so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.requests.lock().unwrap().clone()
    }
}

/// One binary event-stream frame with string headers.
fn frame(headers: &[(&'static str, &str)], payload: &Value) -> Bytes {
    let headers = headers
        .iter()
        .map(|(name, value)| Header::new(*name, HeaderValue::String(value.to_string().into())))
        .collect();
    let message = Message::new_from_parts(headers, serde_json::to_vec(payload).unwrap());
    let mut out = Vec::new();
    write_message_to(&message, &mut out).expect("event-stream frame");
    Bytes::from(out)
}

fn event_frame(event_type: &str, payload: &Value) -> Bytes {
    frame(
        &[
            (":message-type", "event"),
            (":event-type", event_type),
            (":content-type", "application/json"),
        ],
        payload,
    )
}

fn exception_frame(exception_type: &str, message: &str) -> Bytes {
    frame(
        &[
            (":message-type", "exception"),
            (":exception-type", exception_type),
            (":content-type", "application/json"),
        ],
        &json!({ "message": message }),
    )
}

fn error_response(status: u16, error_type: &str, message: &str) -> Response {
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap())
        .header("content-type", "application/json")
        .header("x-amzn-ErrorType", error_type)
        .header("x-amzn-RequestId", "fake-bedrock-request")
        .body(Body::from(json!({ "message": message }).to_string()))
        .unwrap()
}

fn stream_response(frames: Vec<Bytes>) -> Response {
    let chunks = futures::stream::iter(frames.into_iter().map(Ok::<Bytes, std::io::Error>));
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/vnd.amazon.eventstream")
        .header("x-amzn-RequestId", "fake-bedrock-request")
        .body(Body::from_stream(chunks.boxed()))
        .unwrap()
}

async fn converse_stream(
    State(shared): State<Arc<Shared>>,
    Path(model_id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let reply = shared.take(format!("/model/{model_id}/converse-stream"), headers, &body);
    match reply {
        None => error_response(
            500,
            "InternalServerException",
            "fake bedrock: no scripted reply left",
        ),
        Some(BedrockReply::Error(status, error_type, message)) => {
            error_response(status, error_type, &message)
        }
        Some(BedrockReply::Events(events)) => stream_response(
            events
                .iter()
                .map(|(t, payload)| event_frame(t, payload))
                .collect(),
        ),
        Some(BedrockReply::EventsThenException(events, exception_type, message)) => {
            let mut frames: Vec<Bytes> = events
                .iter()
                .map(|(t, payload)| event_frame(t, payload))
                .collect();
            frames.push(exception_frame(exception_type, &message));
            stream_response(frames)
        }
    }
}

/// The scripted events folded into the non-streaming `Converse` answer: the message's content
/// blocks, `stopReason` and `usage`.
fn folded(events: &[(&'static str, Value)]) -> Value {
    let mut blocks: Vec<Value> = Vec::new();
    let mut stop = Value::Null;
    let mut usage = Value::Null;
    let at = |blocks: &mut Vec<Value>, i: usize| {
        while blocks.len() <= i {
            blocks.push(Value::Null);
        }
    };
    for (t, p) in events {
        let i = p["contentBlockIndex"].as_u64().unwrap_or(0) as usize;
        match *t {
            "contentBlockStart" => {
                at(&mut blocks, i);
                let tu = &p["start"]["toolUse"];
                blocks[i] = json!({"toolUse": {"toolUseId": tu["toolUseId"], "name": tu["name"], "input": ""}});
            }
            "contentBlockDelta" => {
                at(&mut blocks, i);
                if let Some(text) = p["delta"]["text"].as_str() {
                    if blocks[i].is_null() {
                        blocks[i] = json!({"text": ""});
                    }
                    let before = blocks[i]["text"].as_str().unwrap_or("").to_string();
                    blocks[i]["text"] = json!(before + text);
                } else if let Some(part) = p["delta"]["toolUse"]["input"].as_str() {
                    let before = blocks[i]["toolUse"]["input"]
                        .as_str()
                        .unwrap_or("")
                        .to_string();
                    blocks[i]["toolUse"]["input"] = json!(before + part);
                }
            }
            "messageStop" => stop = p["stopReason"].clone(),
            "metadata" => usage = p["usage"].clone(),
            _ => {}
        }
    }
    for b in &mut blocks {
        if let Some(input) = b["toolUse"]["input"].as_str() {
            b["toolUse"]["input"] = serde_json::from_str(input).unwrap_or(json!({}));
        }
    }
    blocks.retain(|b| !b.is_null());
    json!({
        "output": {"message": {"role": "assistant", "content": blocks}},
        "stopReason": stop,
        "usage": usage,
        "metrics": {"latencyMs": 100}
    })
}

async fn converse(
    State(shared): State<Arc<Shared>>,
    Path(model_id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let reply = shared.take(format!("/model/{model_id}/converse"), headers, &body);
    match reply {
        Some(BedrockReply::Events(events)) => Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "application/json")
            .header("x-amzn-RequestId", "fake-bedrock-request")
            .body(Body::from(folded(&events).to_string()))
            .unwrap(),
        Some(BedrockReply::Error(status, error_type, message)) => {
            error_response(status, error_type, &message)
        }
        Some(BedrockReply::EventsThenException(_, error_type, message)) => {
            error_response(500, error_type, &message)
        }
        None => error_response(
            500,
            "InternalServerException",
            "fake bedrock: no scripted reply left",
        ),
    }
}

/// The closing `metadata` event: usage `input` in / `output` out, latency 100 ms.
pub fn metadata_event(input: u64, output: u64) -> (&'static str, Value) {
    (
        "metadata",
        json!({
            "usage": {"inputTokens": input, "outputTokens": output, "totalTokens": input + output},
            "metrics": {"latencyMs": 100}
        }),
    )
}

/// messageStart, one contentBlockDelta per word at index 0, contentBlockStop, messageStop
/// end_turn, metadata usage (10 in / 5 out).
pub fn text_events(text: &str) -> Vec<(&'static str, Value)> {
    let mut events = vec![("messageStart", json!({"role": "assistant"}))];
    for word in text.split_inclusive(char::is_whitespace) {
        events.push((
            "contentBlockDelta",
            json!({"contentBlockIndex": 0, "delta": {"text": word}}),
        ));
    }
    events.push(("contentBlockStop", json!({"contentBlockIndex": 0})));
    events.push(("messageStop", json!({"stopReason": "end_turn"})));
    events.push(metadata_event(10, 5));
    events
}

/// One tool call at block index 0: messageStart, contentBlockStart (toolUse), the `input` JSON
/// text split in two deltas, contentBlockStop, messageStop tool_use, metadata (10 in / 5 out).
pub fn tool_use_events(tool_use_id: &str, name: &str, input: &str) -> Vec<(&'static str, Value)> {
    let mid = input
        .char_indices()
        .nth(input.chars().count() / 2)
        .map_or(0, |(i, _)| i);
    let mut events = vec![
        ("messageStart", json!({"role": "assistant"})),
        (
            "contentBlockStart",
            json!({"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": tool_use_id, "name": name}}}),
        ),
    ];
    for part in [&input[..mid], &input[mid..]] {
        if !part.is_empty() {
            events.push((
                "contentBlockDelta",
                json!({"contentBlockIndex": 0, "delta": {"toolUse": {"input": part}}}),
            ));
        }
    }
    events.push(("contentBlockStop", json!({"contentBlockIndex": 0})));
    events.push(("messageStop", json!({"stopReason": "tool_use"})));
    events.push(metadata_event(10, 5));
    events
}
