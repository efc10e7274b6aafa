//! The bedrock provider itself (server builds).

use super::{convert, stream};
use std::sync::Arc;
use std::time::Duration;

use aws_config::BehaviorVersion;
use aws_config::retry::RetryConfig;
use aws_config::stalled_stream_protection::StalledStreamProtectionConfig;
use aws_sdk_bedrockruntime::Client;
use aws_sdk_bedrockruntime::config::{Credentials, Region, Token};
use aws_sdk_bedrockruntime::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_bedrockruntime::types::error::ConverseStreamOutputError;
use aws_smithy_runtime_api::client::auth::AuthSchemeId;
use aws_smithy_types::Document;
use futures::StreamExt;
use tokio::sync::OnceCell;

use crate::conversation::Media;
use crate::model::media::MediaSupport;
use crate::model::{ModelError, ModelRequest, ModelStream, Provider, scrub};
use crate::redact::Secret;

/// Static AWS credentials.
#[derive(Debug, Clone)]
pub struct AwsCredentials {
    /// Access key id.
    pub access_key: Secret,
    /// Secret access key.
    pub secret_key: Secret,
    /// Session token for temporary credentials.
    pub session_token: Option<Secret>,
}

/// Settings of one Bedrock model.
#[derive(Debug, Clone)]
pub struct BedrockSettings {
    /// Model or inference-profile id.
    pub model_id: String,
    /// Region; the SDK's default chain when `None`.
    pub region: Option<String>,
    /// Endpoint override.
    pub endpoint_url: Option<String>,
    /// Explicit credentials; the standard chain when `None`.
    pub credentials: Option<AwsCredentials>,
    /// A Bedrock API key, sent as a bearer token instead of SigV4.
    pub bearer_token: Option<Secret>,
    /// `additionalModelRequestFields`.
    pub extra: serde_json::Map<String, serde_json::Value>,
    /// The longest silence tolerated between two stream events.
    pub idle_timeout: Duration,
}

/// A provider calling Bedrock `ConverseStream`.
pub struct BedrockProvider {
    inner: Arc<Inner>,
}

struct Inner {
    settings: BedrockSettings,
    /// Built on first use: loading the AWS config may touch the environment, profile files or
    /// instance metadata, which start-up should not wait for.
    client: OnceCell<Client>,
}

impl BedrockProvider {
    /// A provider; the SDK client is created on the first call.
    pub fn new(settings: BedrockSettings) -> Self {
        Self {
            inner: Arc::new(Inner {
                settings,
                client: OnceCell::new(),
            }),
        }
    }
}

impl Inner {
    async fn client(&self) -> &Client {
        self.client
            .get_or_init(|| async {
                let s = &self.settings;
                let mut loader = aws_config::defaults(BehaviorVersion::latest())
                    .retry_config(RetryConfig::disabled())
                    .stalled_stream_protection(StalledStreamProtectionConfig::disabled());
                if let Some(r) = &s.region {
                    loader = loader.region(Region::new(r.clone()));
                }
                if let Some(c) = &s.credentials {
                    loader = loader.credentials_provider(Credentials::new(
                        c.access_key.expose(),
                        c.secret_key.expose(),
                        c.session_token.as_ref().map(|t| t.expose().to_string()),
                        None,
                        "agui-gateway-config",
                    ));
                }
                if let Some(u) = &s.endpoint_url {
                    loader = loader.endpoint_url(u.clone());
                }
                // The standard chain's keys from the environment are secrets the redactor
                // must know as well as configured ones.
                for var in [
                    "AWS_SECRET_ACCESS_KEY",
                    "AWS_SESSION_TOKEN",
                    "AWS_BEARER_TOKEN_BEDROCK",
                ] {
                    if let Ok(v) = std::env::var(var) {
                        crate::redact::register(&v);
                    }
                }
                let sdk = loader.load().await;
                let mut b = aws_sdk_bedrockruntime::config::Builder::from(&sdk);
                if let Some(t) = &s.bearer_token {
                    b = b
                        .bearer_token(Token::new(t.expose(), None))
                        .auth_scheme_preference([AuthSchemeId::from("httpBearerAuth")]);
                }
                Client::from_conf(b.build())
            })
            .await
    }
}

/// Maps an SDK error to the provider-neutral one, keeping the HTTP status and AWS error code.
fn sdk_error<
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug + 'static,
>(
    e: &SdkError<E, R>,
    status: Option<u16>,
    fallback_code: Option<&str>,
) -> ModelError {
    match e {
        SdkError::ServiceError(ctx) => {
            let err = ctx.err();
            let code = err.code().or(fallback_code).map(str::to_string);
            let message = scrub(err.message().unwrap_or("no message"), 1000);
            let message = match &code {
                Some(c) => format!("{c}: {message}"),
                None => message,
            };
            match status {
                Some(status) if status >= 400 => ModelError::Http { status, message },
                _ => ModelError::Upstream {
                    message,
                    code: code.map(|c| lower_first(&c)),
                },
            }
        }
        SdkError::DispatchFailure(_) | SdkError::TimeoutError(_) => {
            ModelError::Connect(scrub(&crate::model::sse::error_chain(e), 1000))
        }
        _ => ModelError::Interrupted(scrub(&crate::model::sse::error_chain(e), 1000)),
    }
}

fn stream_error_code(e: &ConverseStreamOutputError) -> &'static str {
    match e {
        ConverseStreamOutputError::InternalServerException(_) => "internalServerException",
        ConverseStreamOutputError::ModelStreamErrorException(_) => "modelStreamErrorException",
        ConverseStreamOutputError::ValidationException(_) => "validationException",
        ConverseStreamOutputError::ThrottlingException(_) => "throttlingException",
        ConverseStreamOutputError::ServiceUnavailableException(_) => "serviceUnavailableException",
        _ => "unknownException",
    }
}

fn lower_first(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_lowercase().chain(c).collect(),
        None => String::new(),
    }
}

impl Provider for BedrockProvider {
    fn name(&self) -> &str {
        "bedrock"
    }

    fn model_id(&self) -> &str {
        &self.inner.settings.model_id
    }

    fn media_support(&self, media: &Media) -> MediaSupport {
        convert::media_support(media)
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let input = match convert::converse_input(&request) {
            Ok(i) => i,
            Err(e) => return futures::stream::once(async move { Err(e) }).boxed(),
        };
        let settings = &self.inner.settings;
        let extra: Option<Document> = (!settings.extra.is_empty())
            .then(|| convert::to_document(&serde_json::Value::Object(settings.extra.clone())));
        let idle = settings.idle_timeout;
        let model_id = settings.model_id.clone();
        let inner = Arc::clone(&self.inner);
        async_stream::stream! {
            let client = inner.client().await.clone();
            let send = client
                .converse_stream()
                .model_id(model_id)
                .set_system(Some(input.system))
                .set_messages(Some(input.messages))
                .set_tool_config(input.tool_config)
                .set_inference_config(input.inference)
                .set_additional_model_request_fields(extra)
                .send()
                .await;
            let mut output = match send {
                Ok(o) => o,
                Err(e) => {
                    let status = e.raw_response().map(|r| r.status().as_u16());
                    yield Err(sdk_error(&e, status, None));
                    return;
                }
            };
            let mut state = stream::StreamState::default();
            loop {
                let next = match tokio::time::timeout(idle, output.stream.recv()).await {
                    Ok(n) => n,
                    Err(_) => {
                        yield Err(ModelError::Idle(idle.as_secs()));
                        return;
                    }
                };
                match next {
                    Ok(Some(event)) => match state.step(event) {
                        Ok(events) => {
                            for e in events {
                                yield Ok(e);
                            }
                        }
                        Err(e) => {
                            yield Err(e);
                            return;
                        }
                    },
                    Ok(None) => {
                        if let Err(e) = state.eof() {
                            yield Err(e);
                        }
                        return;
                    }
                    Err(e) => {
                        // Exception frames carry no error code; the variant names it.
                        let code = match &e {
                            SdkError::ServiceError(ctx) => Some(stream_error_code(ctx.err())),
                            _ => None,
                        };
                        yield Err(sdk_error(&e, None, code));
                        return;
                    }
                }
            }
        }
        .boxed()
    }
}
