//! Stream normalisation: a pure `(state, chunk) -> Vec<ModelEvent>` step. Tool-call fragments
//! are keyed by `index` and may interleave across calls; servers that omit ids, repeat names or
//! reuse index 0 for every call are handled here.

use super::wire::{Chunk, ToolCallDelta};
use crate::model::sse::SseNormaliser;
use crate::model::{ModelError, ModelEvent, StopReason, Usage};

#[derive(Debug)]
struct Call {
    index: u32,
    id: String,
    name: String,
    started: bool,
    ended: bool,
    /// Argument fragments that arrived before the name.
    pending: String,
}

/// The normaliser's state for one model call.
#[derive(Debug, Default)]
pub struct StreamState {
    calls: Vec<Call>,
    stop: Option<StopReason>,
    generated_ids: u32,
}

fn map_finish(reason: &str) -> StopReason {
    match reason {
        "stop" | "eos" | "end_turn" => StopReason::EndTurn,
        "tool_calls" | "function_call" => StopReason::ToolUse,
        "length" | "max_tokens" => StopReason::MaxTokens,
        "content_filter" => StopReason::ContentFiltered,
        other => StopReason::Other(other.to_string()),
    }
}

impl StreamState {
    /// Consumes one chunk.
    pub fn step(&mut self, chunk: Chunk) -> Result<Vec<ModelEvent>, ModelError> {
        if let Some(err) = chunk.error {
            let message = err
                .get("message")
                .and_then(|m| m.as_str())
                .map(str::to_string)
                .or_else(|| err.as_str().map(str::to_string))
                .unwrap_or_else(|| err.to_string());
            let code = err.get("code").and_then(|c| match c {
                serde_json::Value::String(s) => Some(s.clone()),
                serde_json::Value::Number(n) => Some(n.to_string()),
                _ => None,
            });
            return Err(ModelError::Upstream { message, code });
        }
        let mut out = Vec::new();
        for choice in chunk.choices.unwrap_or_default() {
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.delta {
                for r in [delta.reasoning_content, delta.reasoning]
                    .into_iter()
                    .flatten()
                {
                    if !r.is_empty() {
                        out.push(ModelEvent::ReasoningDelta(r));
                    }
                }
                for t in [delta.content, delta.refusal].into_iter().flatten() {
                    if !t.is_empty() {
                        out.push(ModelEvent::TextDelta(t));
                    }
                }
                for (pos, tc) in delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
                    self.tool_fragment(pos, tc, &mut out)?;
                }
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.close_calls(&mut out)?;
                let stop = map_finish(&reason);
                if self.stop.is_none() {
                    out.push(ModelEvent::Stop(stop.clone()));
                    self.stop = Some(stop);
                }
            }
        }
        if let Some(u) = chunk.usage {
            out.push(ModelEvent::Usage(Usage {
                input_tokens: u.prompt_tokens.unwrap_or(0),
                output_tokens: u.completion_tokens.unwrap_or(0),
                reasoning_tokens: u.completion_tokens_details.and_then(|d| d.reasoning_tokens),
                cached_input_tokens: u.prompt_tokens_details.and_then(|d| d.cached_tokens),
                cache_write_input_tokens: None,
            }));
        }
        Ok(out)
    }

    fn tool_fragment(
        &mut self,
        pos: usize,
        tc: ToolCallDelta,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), ModelError> {
        let index = tc.index.unwrap_or(pos as u32);
        let (name, args) = tc
            .function
            .map(|f| (f.name.unwrap_or_default(), f.arguments.unwrap_or_default()))
            .unwrap_or_default();
        let existing = self.calls.iter().position(|c| c.index == index && !c.ended);
        // A new id on an index that already carries a named call means the server reuses
        // indexes: the old call is complete.
        let slot = match (existing, tc.id.as_deref()) {
            (Some(i), Some(id))
                if !id.is_empty() && self.calls[i].id != id && self.calls[i].started =>
            {
                self.end_call(i, out)?;
                None
            }
            (found, _) => found,
        };
        let i = match slot {
            Some(i) => i,
            None => {
                let id = match tc.id.filter(|id| !id.is_empty()) {
                    Some(id) => id,
                    None => {
                        self.generated_ids += 1;
                        format!(
                            "call_{}_{}",
                            uuid::Uuid::new_v4().simple(),
                            self.generated_ids
                        )
                    }
                };
                self.calls.push(Call {
                    index,
                    id,
                    name: String::new(),
                    started: false,
                    ended: false,
                    pending: String::new(),
                });
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[i];
        if call.name.is_empty() && !name.is_empty() {
            call.name = name;
        }
        if !call.started && !call.name.is_empty() {
            call.started = true;
            out.push(ModelEvent::ToolCallStart {
                id: call.id.clone(),
                name: call.name.clone(),
            });
            if !call.pending.is_empty() {
                out.push(ModelEvent::ToolCallDelta {
                    id: call.id.clone(),
                    delta: std::mem::take(&mut call.pending),
                });
            }
        }
        if !args.is_empty() {
            if call.started {
                out.push(ModelEvent::ToolCallDelta {
                    id: call.id.clone(),
                    delta: args,
                });
            } else {
                call.pending.push_str(&args);
            }
        }
        Ok(())
    }

    fn end_call(&mut self, i: usize, out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        let call = &mut self.calls[i];
        if call.ended {
            return Ok(());
        }
        if !call.started {
            return Err(ModelError::Protocol(format!(
                "tool call {} has no name",
                call.id
            )));
        }
        call.ended = true;
        out.push(ModelEvent::ToolCallEnd {
            id: call.id.clone(),
        });
        Ok(())
    }

    fn close_calls(&mut self, out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        for i in 0..self.calls.len() {
            self.end_call(i, out)?;
        }
        Ok(())
    }

    /// The stream said `[DONE]`: close what is open; a missing finish reason is inferred.
    pub fn done(&mut self) -> Result<Vec<ModelEvent>, ModelError> {
        let mut out = Vec::new();
        self.close_calls(&mut out)?;
        if self.stop.is_none() {
            let stop = if self.calls.is_empty() {
                StopReason::EndTurn
            } else {
                StopReason::ToolUse
            };
            out.push(ModelEvent::Stop(stop.clone()));
            self.stop = Some(stop);
        }
        Ok(out)
    }

    /// The connection ended without `[DONE]`: fine after a finish reason, a cut otherwise.
    pub fn eof(&mut self) -> Result<Vec<ModelEvent>, ModelError> {
        if self.stop.is_none() {
            return Err(ModelError::Interrupted(
                "the connection closed before the model finished its turn".into(),
            ));
        }
        self.done()
    }
}

impl SseNormaliser for StreamState {
    fn event(&mut self, _name: &str, data: &str) -> Result<(Vec<ModelEvent>, bool), ModelError> {
        if data == "[DONE]" {
            return Ok((self.done()?, true));
        }
        let chunk = serde_json::from_str::<super::wire::Chunk>(data)
            .map_err(|e| ModelError::Protocol(format!("unreadable chunk: {e}")))?;
        Ok((self.step(chunk)?, false))
    }

    fn eof(&mut self) -> Result<Vec<ModelEvent>, ModelError> {
        StreamState::eof(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chunk(v: serde_json::Value) -> Chunk {
        serde_json::from_value(v).unwrap()
    }
    fn tc(index: u32, id: Option<&str>, name: Option<&str>, args: &str) -> serde_json::Value {
        let mut f = json!({"arguments": args});
        if let Some(n) = name {
            f["name"] = json!(n);
        }
        let mut t = json!({"index": index, "type": "function", "function": f});
        if let Some(i) = id {
            t["id"] = json!(i);
        }
        t
    }
    fn delta_calls(calls: Vec<serde_json::Value>) -> Chunk {
        chunk(json!({"choices":[{"index":0,"delta":{"tool_calls": calls},"finish_reason":null}]}))
    }

    #[test]
    fn text_reasoning_and_usage_only_chunk() {
        let mut s = StreamState::default();
        let ev = s
            .step(chunk(json!({"choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning_content":"hmm"}}]})))
            .unwrap();
        assert_eq!(ev, vec![ModelEvent::ReasoningDelta("hmm".into())]);
        let ev = s
            .step(chunk(
                json!({"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}),
            ))
            .unwrap();
        assert_eq!(ev, vec![ModelEvent::TextDelta("Hi".into())]);
        let ev = s
            .step(chunk(
                json!({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}),
            ))
            .unwrap();
        assert_eq!(ev, vec![ModelEvent::Stop(StopReason::EndTurn)]);
        let ev = s
            .step(chunk(json!({"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,
                "prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":2}}})))
            .unwrap();
        assert_eq!(
            ev,
            vec![ModelEvent::Usage(Usage {
                input_tokens: 10,
                output_tokens: 5,
                reasoning_tokens: Some(2),
                cached_input_tokens: Some(4),
                cache_write_input_tokens: None
            })]
        );
        assert_eq!(s.done().unwrap(), vec![]);
    }

    #[test]
    fn interleaved_parallel_tool_calls_keep_their_own_arguments() {
        let mut s = StreamState::default();
        let mut all = Vec::new();
        all.extend(
            s.step(delta_calls(vec![tc(0, Some("a"), Some("weather"), "")]))
                .unwrap(),
        );
        all.extend(
            s.step(delta_calls(vec![tc(
                1,
                Some("b"),
                Some("time"),
                "{\"tz\":",
            )]))
            .unwrap(),
        );
        all.extend(
            s.step(delta_calls(vec![
                tc(0, None, None, "{\"city\":"),
                tc(1, None, None, "\"UTC\"}"),
            ]))
            .unwrap(),
        );
        all.extend(
            s.step(delta_calls(vec![tc(0, None, None, "\"Paris\"}")]))
                .unwrap(),
        );
        all.extend(
            s.step(chunk(
                json!({"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}),
            ))
            .unwrap(),
        );
        let args = |id: &str| -> String {
            all.iter()
                .filter_map(|e| match e {
                    ModelEvent::ToolCallDelta { id: i, delta } if i == id => Some(delta.as_str()),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(args("a"), "{\"city\":\"Paris\"}");
        assert_eq!(args("b"), "{\"tz\":\"UTC\"}");
        assert_eq!(
            all[0],
            ModelEvent::ToolCallStart {
                id: "a".into(),
                name: "weather".into()
            }
        );
        let tail = &all[all.len() - 3..];
        assert_eq!(
            tail,
            &[
                ModelEvent::ToolCallEnd { id: "a".into() },
                ModelEvent::ToolCallEnd { id: "b".into() },
                ModelEvent::Stop(StopReason::ToolUse)
            ]
        );
    }

    #[test]
    fn missing_ids_are_generated_and_reused_index_zero_splits_calls() {
        let mut s = StreamState::default();
        let ev = s
            .step(delta_calls(vec![tc(0, None, Some("f"), "{}")]))
            .unwrap();
        let ModelEvent::ToolCallStart { id, .. } = &ev[0] else {
            panic!()
        };
        assert!(id.starts_with("call_"));
        let mut s = StreamState::default();
        s.step(delta_calls(vec![tc(0, Some("x"), Some("f"), "{}")]))
            .unwrap();
        let ev = s
            .step(delta_calls(vec![tc(0, Some("y"), Some("g"), "{}")]))
            .unwrap();
        assert_eq!(ev[0], ModelEvent::ToolCallEnd { id: "x".into() });
        assert_eq!(
            ev[1],
            ModelEvent::ToolCallStart {
                id: "y".into(),
                name: "g".into()
            }
        );
    }

    #[test]
    fn error_chunk_and_cut_stream_are_errors() {
        let mut s = StreamState::default();
        let e = s
            .step(chunk(
                json!({"error":{"message":"overloaded","code":"server_error"}}),
            ))
            .unwrap_err();
        assert_eq!(
            e,
            ModelError::Upstream {
                message: "overloaded".into(),
                code: Some("server_error".into())
            }
        );
        let mut s = StreamState::default();
        s.step(chunk(
            json!({"choices":[{"index":0,"delta":{"content":"par"}}]}),
        ))
        .unwrap();
        assert!(matches!(s.eof(), Err(ModelError::Interrupted(_))));
        // [DONE] without a finish reason infers one.
        let mut s = StreamState::default();
        s.step(delta_calls(vec![tc(0, Some("a"), Some("f"), "{}")]))
            .unwrap();
        assert_eq!(
            s.done().unwrap(),
            vec![
                ModelEvent::ToolCallEnd { id: "a".into() },
                ModelEvent::Stop(StopReason::ToolUse)
            ]
        );
    }

    #[test]
    fn args_before_the_name_are_held_back() {
        let mut s = StreamState::default();
        assert!(
            s.step(delta_calls(vec![tc(0, Some("a"), None, "{\"q\"")]))
                .unwrap()
                .is_empty()
        );
        let ev = s
            .step(delta_calls(vec![tc(0, None, Some("search"), ":1}")]))
            .unwrap();
        assert_eq!(
            ev,
            vec![
                ModelEvent::ToolCallStart {
                    id: "a".into(),
                    name: "search".into()
                },
                ModelEvent::ToolCallDelta {
                    id: "a".into(),
                    delta: "{\"q\"".into()
                },
                ModelEvent::ToolCallDelta {
                    id: "a".into(),
                    delta: ":1}".into()
                },
            ]
        );
    }
}
