//! Retries for model calls that fail before their first event: throttling, 5xx, overload and
//! connection errors, with exponential backoff and jitter. Once anything has streamed, an error
//! ends the run instead (the client has already seen part of the answer).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;

use super::{ModelError, ModelRequest, ModelStream, Provider};

/// How model calls that fail before their first token are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 disables).
    pub max_retries: u32,
    /// Backoff before the first retry; doubled each time, with jitter.
    pub initial_backoff_ms: u64,
    /// Cap of one backoff.
    pub max_backoff_ms: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 2,
            initial_backoff_ms: 500,
            max_backoff_ms: 8_000,
        }
    }
}

/// Whether a failure before the first event is worth another attempt.
pub fn retryable(e: &ModelError) -> bool {
    match e {
        ModelError::Http { status, .. } => {
            matches!(status, 408 | 425 | 429 | 500 | 502 | 503 | 504 | 529)
        }
        ModelError::Connect(_) | ModelError::Interrupted(_) => true,
        ModelError::Upstream {
            code: Some(code), ..
        } => {
            let c = code.to_ascii_lowercase();
            [
                "throttl",
                "overloaded",
                "serviceunavailable",
                "internalserver",
                "rate_limit",
                "modelnotready",
            ]
            .iter()
            .any(|k| c.contains(k))
        }
        _ => false,
    }
}

/// The pause before retry number `attempt` (1-based): exponential, capped, with full jitter
/// between half and all of it so that many clients do not retry in lockstep.
pub fn backoff(policy: &RetryPolicy, attempt: u32) -> Duration {
    let exp = policy
        .initial_backoff_ms
        .saturating_mul(1u64 << attempt.saturating_sub(1).min(20));
    let cap = exp.min(policy.max_backoff_ms).max(1);
    let jitter = (uuid::Uuid::new_v4().as_u128() % (cap as u128 / 2 + 1)) as u64;
    Duration::from_millis(cap / 2 + jitter)
}

/// Calls `provider`, retrying failures that happen before the first event.
pub fn stream_with_retries(
    provider: Arc<dyn Provider>,
    request: ModelRequest,
    policy: RetryPolicy,
) -> ModelStream {
    async_stream::stream! {
        let mut attempt = 0u32;
        loop {
            let mut s = provider.stream(request.clone());
            match s.next().await {
                Some(Err(e)) if attempt < policy.max_retries && retryable(&e) => {
                    attempt += 1;
                    let pause = backoff(&policy, attempt);
                    tracing::warn!(provider = provider.name(), attempt, error = %e, ?pause, "model call failed before streaming; retrying");
                    tokio::time::sleep(pause).await;
                }
                Some(first) => {
                    yield first;
                    while let Some(item) = s.next().await {
                        yield item;
                    }
                    return;
                }
                None => return,
            }
        }
    }
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelEvent;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Fails `failures` times with `error`, then answers one text event.
    struct Flaky {
        calls: AtomicU32,
        failures: u32,
        error: ModelError,
    }

    impl Provider for Flaky {
        fn name(&self) -> &str {
            "flaky"
        }
        fn model_id(&self) -> &str {
            "m"
        }
        fn stream(&self, _: ModelRequest) -> ModelStream {
            let n = self.calls.fetch_add(1, Ordering::SeqCst);
            let item = if n < self.failures {
                Err(self.error.clone())
            } else {
                Ok(ModelEvent::TextDelta("ok".into()))
            };
            futures::stream::once(async move { item }).boxed()
        }
    }

    fn policy(max: u32) -> RetryPolicy {
        RetryPolicy {
            max_retries: max,
            initial_backoff_ms: 10,
            max_backoff_ms: 40,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn throttling_is_retried_until_it_succeeds() {
        let p = Arc::new(Flaky {
            calls: AtomicU32::new(0),
            failures: 2,
            error: ModelError::Http {
                status: 429,
                message: "slow down".into(),
            },
        });
        let out: Vec<_> = stream_with_retries(p.clone(), ModelRequest::default(), policy(2))
            .collect()
            .await;
        assert_eq!(out, vec![Ok(ModelEvent::TextDelta("ok".into()))]);
        assert_eq!(p.calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn the_budget_is_bounded_and_client_errors_are_not_retried() {
        let p = Arc::new(Flaky {
            calls: AtomicU32::new(0),
            failures: 5,
            error: ModelError::Http {
                status: 503,
                message: "down".into(),
            },
        });
        let out: Vec<_> = stream_with_retries(p.clone(), ModelRequest::default(), policy(2))
            .collect()
            .await;
        assert!(matches!(
            out[..],
            [Err(ModelError::Http { status: 503, .. })]
        ));
        assert_eq!(p.calls.load(Ordering::SeqCst), 3);
        let p = Arc::new(Flaky {
            calls: AtomicU32::new(0),
            failures: 1,
            error: ModelError::Http {
                status: 400,
                message: "bad".into(),
            },
        });
        let _: Vec<_> = stream_with_retries(p.clone(), ModelRequest::default(), policy(2))
            .collect()
            .await;
        assert_eq!(p.calls.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn backoff_grows_within_its_cap() {
        let p = RetryPolicy {
            max_retries: 5,
            initial_backoff_ms: 100,
            max_backoff_ms: 1000,
        };
        for attempt in 1..6 {
            let d = backoff(&p, attempt).as_millis() as u64;
            let cap = (100u64 << (attempt - 1)).min(1000);
            assert!(d >= cap / 2 && d <= cap, "attempt {attempt}: {d} ms");
        }
        assert!(retryable(&ModelError::Upstream {
            message: String::new(),
            code: Some("throttlingException".into())
        }));
        assert!(retryable(&ModelError::Upstream {
            message: String::new(),
            code: Some("overloaded_error".into())
        }));
        assert!(!retryable(&ModelError::Unsupported("x".into())));
    }
}
