//! The fake Bedrock speaks well enough for the official SDK client.

mod common;

use aws_sdk_bedrockruntime::Client;
use aws_sdk_bedrockruntime::config::retry::RetryConfig;
use aws_sdk_bedrockruntime::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_bedrockruntime::operation::converse_stream::ConverseStreamError;
use aws_sdk_bedrockruntime::types::error::ConverseStreamOutputError;
use aws_sdk_bedrockruntime::types::{
    ContentBlock, ContentBlockDelta, ContentBlockStart, ConversationRole, ConverseStreamOutput,
    Message, StopReason,
};
use common::bedrock_fake::{BedrockReply, FakeBedrock, text_events, tool_use_events};
use serde_json::json;

const MODEL: &str = "anthropic.claude-3-haiku-20240307-v1:0";

fn client(fake: &FakeBedrock) -> Client {
    let config = aws_sdk_bedrockruntime::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(fake.endpoint())
        .credentials_provider(Credentials::new("AKID", "SECRET", None, None, "test"))
        .retry_config(RetryConfig::disabled())
        .build();
    Client::from_conf(config)
}

fn user(text: &str) -> Message {
    Message::builder()
        .role(ConversationRole::User)
        .content(ContentBlock::Text(text.into()))
        .build()
        .unwrap()
}

#[tokio::test]
async fn text_stream_reaches_the_sdk() {
    let fake = FakeBedrock::start(vec![BedrockReply::Events(text_events("Hello there"))]).await;
    let mut output = client(&fake)
        .converse_stream()
        .model_id(MODEL)
        .messages(user("hi"))
        .send()
        .await
        .expect("converse_stream");

    let (mut text, mut stop, mut usage, mut started) = (String::new(), None, None, false);
    while let Some(event) = output.stream.recv().await.expect("event") {
        match event {
            ConverseStreamOutput::MessageStart(m) => {
                assert_eq!(m.role, ConversationRole::Assistant);
                started = true;
            }
            ConverseStreamOutput::ContentBlockDelta(d) => {
                assert_eq!(d.content_block_index, 0);
                match d.delta {
                    Some(ContentBlockDelta::Text(t)) => text.push_str(&t),
                    other => panic!("unexpected delta {other:?}"),
                }
            }
            ConverseStreamOutput::MessageStop(s) => stop = Some(s.stop_reason),
            ConverseStreamOutput::Metadata(m) => usage = m.usage,
            ConverseStreamOutput::ContentBlockStop(_) => {}
            other => panic!("unexpected event {other:?}"),
        }
    }
    assert!(started);
    assert_eq!(text, "Hello there");
    assert_eq!(stop, Some(StopReason::EndTurn));
    let usage = usage.expect("usage");
    assert_eq!(
        (usage.input_tokens, usage.output_tokens, usage.total_tokens),
        (10, 5, 15)
    );

    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    assert!(requests[0].path.contains(MODEL), "{}", requests[0].path);
    assert_eq!(
        requests[0].body["messages"],
        json!([{"role": "user", "content": [{"text": "hi"}]}])
    );
    assert!(requests[0].headers.contains_key("authorization"));
}

#[tokio::test]
async fn tool_use_stream_reaches_the_sdk() {
    let fake = FakeBedrock::start(vec![BedrockReply::Events(tool_use_events(
        "t1",
        "get_weather",
        r#"{"city":"Paris"}"#,
    ))])
    .await;
    let mut output = client(&fake)
        .converse_stream()
        .model_id(MODEL)
        .messages(user("weather?"))
        .send()
        .await
        .expect("converse_stream");
    let (mut start, mut input, mut stop) = (None, String::new(), None);
    while let Some(event) = output.stream.recv().await.expect("event") {
        match event {
            ConverseStreamOutput::ContentBlockStart(s) => match s.start {
                Some(ContentBlockStart::ToolUse(t)) => start = Some((t.tool_use_id, t.name)),
                other => panic!("unexpected start {other:?}"),
            },
            ConverseStreamOutput::ContentBlockDelta(d) => match d.delta {
                Some(ContentBlockDelta::ToolUse(t)) => input.push_str(&t.input),
                other => panic!("unexpected delta {other:?}"),
            },
            ConverseStreamOutput::MessageStop(s) => stop = Some(s.stop_reason),
            _ => {}
        }
    }
    assert_eq!(start, Some(("t1".into(), "get_weather".into())));
    assert_eq!(input, r#"{"city":"Paris"}"#);
    assert_eq!(stop, Some(StopReason::ToolUse));
}

#[tokio::test]
async fn exception_frame_is_a_modelled_stream_error() {
    let mut events = text_events("partial");
    events.truncate(2); // messageStart + one delta
    let fake = FakeBedrock::start(vec![BedrockReply::EventsThenException(
        events,
        "modelStreamErrorException",
        "boom".into(),
    )])
    .await;
    let mut output = client(&fake)
        .converse_stream()
        .model_id(MODEL)
        .messages(user("hi"))
        .send()
        .await
        .expect("converse_stream");
    let mut seen = 0;
    let err = loop {
        match output.stream.recv().await {
            Ok(Some(_)) => seen += 1,
            Ok(None) => panic!("stream ended without the exception"),
            Err(e) => break e,
        }
    };
    assert_eq!(seen, 2);
    match err.into_service_error() {
        ConverseStreamOutputError::ModelStreamErrorException(e) => {
            assert_eq!(e.message(), Some("boom"));
        }
        other => panic!("unexpected error {other:?}"),
    }
}

#[tokio::test]
async fn http_error_maps_to_the_modelled_error() {
    let fake = FakeBedrock::start(vec![BedrockReply::Error(
        429,
        "ThrottlingException",
        "Too many requests".into(),
    )])
    .await;
    let err = client(&fake)
        .converse_stream()
        .model_id(MODEL)
        .messages(user("hi"))
        .send()
        .await
        .expect_err("throttled");
    match err.into_service_error() {
        ConverseStreamError::ThrottlingException(e) => {
            assert_eq!(e.message(), Some("Too many requests"));
        }
        other => panic!("unexpected error {other:?}"),
    }
    // Retries are disabled: exactly one request.
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn no_reply_left_is_an_internal_server_error() {
    let fake = FakeBedrock::start(vec![]).await;
    let err = client(&fake)
        .converse_stream()
        .model_id(MODEL)
        .messages(user("hi"))
        .send()
        .await
        .expect_err("500");
    assert!(
        matches!(
            err.into_service_error(),
            ConverseStreamError::InternalServerException(_)
        ),
        "expected InternalServerException"
    );
}
