//! Joins deltas that are already waiting: when the upstream is faster than the run (one read
//! often holds dozens of tokens), consecutive text, reasoning or argument deltas of the same
//! block leave as one AG-UI event instead of one event per token. Nothing waits for more: a
//! delta goes out as soon as the next item is not ready, so latency is unchanged.
//!
//! A paced upstream (one frame per token, each read holding one) costs nothing here: the task
//! yields to let the connection hand over more only after a read that held more than one
//! delta. (Yielding after every delta re-queued the run task behind the scheduler's back and
//! woke the other worker thread once per token.)

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;

use super::{ModelError, ModelEvent, ModelStream};

/// The most bytes joined into one delta.
const MAX_JOINED: usize = 16 * 1024;

/// Wraps `inner` so ready deltas are joined.
pub fn coalesce(inner: ModelStream) -> ModelStream {
    Box::pin(Coalesce {
        inner,
        held: None,
        joining: None,
        done: false,
    })
}

struct Coalesce {
    inner: ModelStream,
    /// An item read while joining that did not belong to the delta.
    held: Option<Result<ModelEvent, ModelError>>,
    /// A delta being joined, kept over one yield to the scheduler.
    joining: Option<ModelEvent>,
    done: bool,
}

/// Appends `next` to `into` when both are deltas of the same block.
fn join(into: &mut ModelEvent, next: &ModelEvent) -> bool {
    match (into, next) {
        (ModelEvent::TextDelta(a), ModelEvent::TextDelta(b))
        | (ModelEvent::ReasoningDelta(a), ModelEvent::ReasoningDelta(b)) => {
            a.push_str(b);
            true
        }
        (
            ModelEvent::ToolCallDelta { id: a, delta },
            ModelEvent::ToolCallDelta { id: b, delta: more },
        ) if a == b => {
            delta.push_str(more);
            true
        }
        _ => false,
    }
}

fn joined_len(e: &ModelEvent) -> Option<usize> {
    match e {
        ModelEvent::TextDelta(d)
        | ModelEvent::ReasoningDelta(d)
        | ModelEvent::ToolCallDelta { delta: d, .. } => Some(d.len()),
        _ => None,
    }
}

impl Stream for Coalesce {
    type Item = Result<ModelEvent, ModelError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        // A delta kept over a yield: the connection task has had its turn to hand over what
        // the socket already holds.
        let mut event = match this.joining.take() {
            Some(e) => e,
            None => {
                let first = match this.held.take() {
                    Some(item) => item,
                    None if this.done => return Poll::Ready(None),
                    None => match this.inner.as_mut().poll_next(cx) {
                        Poll::Ready(Some(item)) => item,
                        Poll::Ready(None) => {
                            this.done = true;
                            return Poll::Ready(None);
                        }
                        Poll::Pending => return Poll::Pending,
                    },
                };
                match first {
                    Ok(e) => e,
                    Err(e) => return Poll::Ready(Some(Err(e))),
                }
            }
        };
        let mut grew = false;
        while joined_len(&event).is_some_and(|n| n < MAX_JOINED) && !this.done {
            match this.inner.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(next))) => {
                    grew = true;
                    if !join(&mut event, &next) {
                        this.held = Some(Ok(next));
                        break;
                    }
                }
                Poll::Ready(Some(Err(e))) => {
                    this.held = Some(Err(e));
                    break;
                }
                Poll::Ready(None) => this.done = true,
                Poll::Pending if grew => {
                    // More than one delta was ready, so the upstream is ahead of us. Body
                    // chunks come from the connection's own task, one at a time: let it run
                    // (no timer, no waiting on the network) before sending the delta, and
                    // again as long as it had more to hand over.
                    this.joining = Some(event);
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                Poll::Pending => break,
            }
        }
        Poll::Ready(Some(Ok(event)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    fn texts(events: &[Result<ModelEvent, ModelError>]) -> Vec<String> {
        events
            .iter()
            .map(|e| match e {
                Ok(ModelEvent::TextDelta(d)) => format!("text:{d}"),
                Ok(ModelEvent::ToolCallDelta { id, delta }) => format!("args:{id}:{delta}"),
                Ok(ModelEvent::ToolCallEnd { id }) => format!("end:{id}"),
                Ok(_) => "other".into(),
                Err(_) => "error".into(),
            })
            .collect()
    }

    #[tokio::test]
    async fn ready_deltas_of_one_block_are_joined_and_order_is_kept() {
        let items = vec![
            Ok(ModelEvent::TextDelta("a".into())),
            Ok(ModelEvent::TextDelta("b".into())),
            Ok(ModelEvent::ToolCallDelta {
                id: "1".into(),
                delta: "{".into(),
            }),
            Ok(ModelEvent::ToolCallDelta {
                id: "2".into(),
                delta: "[".into(),
            }),
            Ok(ModelEvent::ToolCallDelta {
                id: "2".into(),
                delta: "]".into(),
            }),
            Ok(ModelEvent::ToolCallEnd { id: "2".into() }),
            Ok(ModelEvent::TextDelta("c".into())),
            Err(ModelError::Protocol("x".into())),
            Ok(ModelEvent::TextDelta("d".into())),
        ];
        let out: Vec<_> = coalesce(Box::pin(futures::stream::iter(items)))
            .collect()
            .await;
        assert_eq!(
            texts(&out),
            [
                "text:ab",
                "args:1:{",
                "args:2:[]",
                "end:2",
                "text:c",
                "error",
                "text:d"
            ]
        );
    }

    #[tokio::test]
    async fn a_delta_is_not_held_back_waiting_for_the_next() {
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let mut s = coalesce(Box::pin(rx));
        tx.unbounded_send(Ok(ModelEvent::TextDelta("a".into())))
            .unwrap();
        // Only "a" is there: it comes out alone, without waiting for "b".
        assert_eq!(texts(&[s.next().await.unwrap()]), ["text:a"]);
        tx.unbounded_send(Ok(ModelEvent::TextDelta("b".into())))
            .unwrap();
        tx.unbounded_send(Ok(ModelEvent::TextDelta("c".into())))
            .unwrap();
        drop(tx);
        assert_eq!(texts(&[s.next().await.unwrap()]), ["text:bc"]);
        assert!(s.next().await.is_none());
    }

    /// Counts wake-ups.
    struct Wakes(std::sync::atomic::AtomicUsize);
    impl std::task::Wake for Wakes {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[test]
    fn a_lone_delta_leaves_on_the_first_poll_without_waking_the_task() {
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let mut s = coalesce(Box::pin(rx));
        let wakes = std::sync::Arc::new(Wakes(0.into()));
        let waker = std::task::Waker::from(std::sync::Arc::clone(&wakes));
        let mut cx = Context::from_waker(&waker);
        tx.unbounded_send(Ok(ModelEvent::TextDelta("a".into())))
            .unwrap();
        // One frame per token: the delta goes out at once and nothing re-queues the task.
        match s.as_mut().poll_next(&mut cx) {
            Poll::Ready(Some(e)) => assert_eq!(texts(&[e]), ["text:a"]),
            _ => panic!("the ready delta was held back"),
        }
        assert_eq!(wakes.0.load(std::sync::atomic::Ordering::SeqCst), 0);
        // Two ready at once: the upstream is ahead, so the task yields once to gather more.
        tx.unbounded_send(Ok(ModelEvent::TextDelta("b".into())))
            .unwrap();
        tx.unbounded_send(Ok(ModelEvent::TextDelta("c".into())))
            .unwrap();
        let before = wakes.0.load(std::sync::atomic::Ordering::SeqCst);
        assert!(s.as_mut().poll_next(&mut cx).is_pending());
        assert_eq!(
            wakes.0.load(std::sync::atomic::Ordering::SeqCst),
            before + 1
        );
        match s.as_mut().poll_next(&mut cx) {
            Poll::Ready(Some(e)) => assert_eq!(texts(&[e]), ["text:bc"]),
            _ => panic!("the joined delta was held back"),
        }
    }
}
