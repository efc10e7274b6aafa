//! One model turn of the ReAct loop: the provider's stream as AG-UI events (text, reasoning
//! spans, tool calls with their streamed arguments), collected into the turn's blocks and calls.

use super::*;

pub(super) struct OpenReasoning {
    span_id: String,
    message_id: String,
    text: String,
    signature: Option<String>,
    /// Set when this message stands for a redacted block.
    redacted: Option<String>,
}

impl Run<'_> {
    pub(super) fn assign_call_id(&mut self, provider_id: &str) -> String {
        let mut id = provider_id.to_string();
        let mut n = 1;
        while id.is_empty() || self.used_call_ids.contains(&id) {
            n += 1;
            id = format!("{provider_id}_{n}");
        }
        self.used_call_ids.insert(id.clone());
        id
    }

    /// Streams one model call as AG-UI events and collects what it said.
    pub(super) async fn model_turn(&mut self, request: ModelRequest) -> Result<Turn, Halt> {
        let started = std::time::Instant::now();
        let mut first_event = None;
        let model = self.agent.provider.model_id();
        let span = tracing::info_span!(
            "chat",
            otel.name = format!("chat {model}"),
            otel.kind = "client",
            gen_ai.operation.name = "chat",
            gen_ai.system = self.agent.provider.name(),
            gen_ai.request.model = model,
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.output_tokens = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        let turn = tracing::Instrument::instrument(
            self.model_turn_streamed(request, started, &mut first_event),
            span.clone(),
        )
        .await;
        if let Err(Halt::Model(e)) = &turn {
            crate::agent::failed_span(&span, e.code());
        }
        // A cancelled call says nothing about the upstream.
        if !matches!(turn, Err(Halt::Cancelled)) {
            crate::metrics::model_call(
                self.agent.provider.name(),
                turn.is_ok(),
                first_event,
                started.elapsed(),
            );
        }
        turn
    }

    pub(super) async fn model_turn_streamed(
        &mut self,
        request: ModelRequest,
        started: std::time::Instant,
        first_event: &mut Option<std::time::Duration>,
    ) -> Result<Turn, Halt> {
        let mut call_usage: Option<Usage> = None;
        let message_id = new_id("msg");
        let mut text = String::new();
        let mut text_open = false;
        let mut text_id = message_id.clone();
        let mut text_segments = 0u32;
        let mut reasoning: Option<OpenReasoning> = None;
        let mut blocks = Vec::new();
        let mut calls: Vec<Call> = Vec::new();
        let mut stop = None;
        let mut stream =
            retry::stream_with_retries(Arc::clone(&self.agent.provider), request, self.agent.retry);
        if self.agent.provider.coalesce_deltas() {
            stream = crate::model::coalesce::coalesce(stream);
        }
        // One wait for cancellation for the whole turn: a new one per event registered and
        // removed a waiter on the token (two lock round trips) per streamed token.
        let mut cancelled = std::pin::pin!(self.cancel.clone().cancelled_owned());
        loop {
            let next = tokio::select! {
                biased;
                _ = &mut cancelled => return Err(Halt::Cancelled),
                n = stream.next() => n,
            };
            let Some(item) = next else { break };
            if first_event.is_none() && item.is_ok() {
                *first_event = Some(started.elapsed());
            }
            match item.map_err(Halt::Model)? {
                ModelEvent::ReasoningDelta(delta) => {
                    if delta.is_empty() {
                        continue;
                    }
                    let r = self.open_reasoning(&mut reasoning).await?;
                    r.text.push_str(&delta);
                    let message_id = r.message_id.clone();
                    self.emitter
                        .emit(Event::ReasoningMessageContent { message_id, delta })
                        .await?;
                }
                ModelEvent::ReasoningSignature(sig) => {
                    self.open_reasoning(&mut reasoning).await?.signature = Some(sig);
                }
                ModelEvent::RedactedReasoning(data) => {
                    // A redacted block is its own reasoning message carrying only the payload.
                    self.close_reasoning(&mut reasoning, &mut blocks).await?;
                    self.open_reasoning(&mut reasoning).await?.redacted = Some(data);
                    self.close_reasoning(&mut reasoning, &mut blocks).await?;
                }
                ModelEvent::TextDelta(delta) => {
                    if delta.is_empty() {
                        continue;
                    }
                    self.close_reasoning(&mut reasoning, &mut blocks).await?;
                    if !text_open {
                        text_open = true;
                        // The turn's first text message carries the turn's id (tool calls name
                        // it as parent); text resuming after a tool call gets a new one.
                        if text_segments > 0 {
                            text_id = new_id("msg");
                        }
                        text_segments += 1;
                        self.emitter
                            .emit(Event::TextMessageStart {
                                message_id: text_id.clone(),
                                role: Some("assistant".into()),
                                name: None,
                            })
                            .await?;
                    }
                    text.push_str(&delta);
                    self.emitter
                        .emit(Event::TextMessageContent {
                            message_id: text_id.clone(),
                            delta,
                        })
                        .await?;
                }
                ModelEvent::ToolCallStart { id, name } => {
                    self.close_reasoning(&mut reasoning, &mut blocks).await?;
                    // Text is closed before a call streams, as clients render them in turn.
                    if text_open {
                        text_open = false;
                        self.emitter
                            .emit(Event::TextMessageEnd {
                                message_id: text_id.clone(),
                            })
                            .await?;
                    }
                    let wire_id = self.assign_call_id(&id);
                    let predictions: Vec<Value> = self
                        .agent
                        .predict_state
                        .iter()
                        .filter(|p| p.tool == name)
                        .map(|p| json!({"state_key": p.state_key, "tool": p.tool, "tool_argument": p.tool_argument}))
                        .collect();
                    if !predictions.is_empty() {
                        // Tells the client to show the call's streaming arguments as state.
                        self.emitter
                            .emit(Event::Custom {
                                name: "PredictState".into(),
                                value: Value::Array(predictions),
                            })
                            .await?;
                    }
                    self.emitter
                        .emit(Event::ToolCallStart {
                            tool_call_id: wire_id.clone(),
                            tool_call_name: name.clone(),
                            parent_message_id: Some(message_id.clone()),
                        })
                        .await?;
                    calls.push(Call {
                        provider_id: id,
                        id: wire_id,
                        name,
                        args: String::new(),
                        ended: false,
                    });
                }
                ModelEvent::ToolCallDelta { id, delta } => {
                    let Some(call) = calls.iter_mut().find(|c| c.provider_id == id && !c.ended)
                    else {
                        return Err(Halt::Model(ModelError::Protocol(format!(
                            "arguments for unknown tool call {id}"
                        ))));
                    };
                    if delta.is_empty() {
                        continue;
                    }
                    call.args.push_str(&delta);
                    let tool_call_id = call.id.clone();
                    self.emitter
                        .emit(Event::ToolCallArgs {
                            tool_call_id,
                            delta,
                        })
                        .await?;
                }
                ModelEvent::ToolCallEnd { id } => {
                    if let Some(i) = calls.iter().position(|c| c.provider_id == id && !c.ended) {
                        self.end_call(&mut calls[i]).await?;
                    }
                }
                ModelEvent::ReasoningEnd => {
                    self.close_reasoning(&mut reasoning, &mut blocks).await?;
                }
                ModelEvent::Usage(u) => call_usage.get_or_insert_with(Usage::default).add(&u),
                ModelEvent::Stop(reason) => stop = Some(reason),
            }
        }
        self.close_reasoning(&mut reasoning, &mut blocks).await?;
        if text_open {
            self.emitter
                .emit(Event::TextMessageEnd {
                    message_id: text_id,
                })
                .await?;
        }
        for call in calls.iter_mut() {
            self.end_call(call).await?;
        }
        if let Some(u) = call_usage {
            let span = tracing::Span::current();
            // As i64: OpenTelemetry takes a u64 field as a string.
            let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
            span.record("gen_ai.usage.input_tokens", count(u.input_tokens));
            span.record("gen_ai.usage.output_tokens", count(u.output_tokens));
            self.usage.record(
                self.agent.provider.name(),
                self.agent.provider.model_id(),
                self.agent.model_ref.as_deref(),
                u,
            );
        }
        let produced_text = !text.is_empty();
        if produced_text {
            blocks.push(ContentBlock::Text { text });
        }
        if matches!(
            stop,
            Some(StopReason::ContentFiltered | StopReason::Other(_))
        ) && !produced_text
            && calls.is_empty()
        {
            // A turn stopped by a filter or guardrail with nothing to show: say so in the chat.
            let reason = stop_reason_name(stop.as_ref());
            let id = new_id("msg");
            self.say(
                &id,
                &format!("The model stopped without an answer ({reason})."),
            )
            .await?;
        }
        Ok(Turn {
            blocks,
            calls,
            stop,
        })
    }

    pub(super) async fn end_call(&mut self, call: &mut Call) -> Result<(), Halt> {
        if call.ended {
            return Ok(());
        }
        call.ended = true;
        if call.args.trim().is_empty() {
            // Validators require arguments that parse as JSON; an argument-less call is `{}`.
            call.args = "{}".into();
            self.emitter
                .emit(Event::ToolCallArgs {
                    tool_call_id: call.id.clone(),
                    delta: call.args.clone(),
                })
                .await?;
        }
        self.emitter
            .emit(Event::ToolCallEnd {
                tool_call_id: call.id.clone(),
            })
            .await?;
        Ok(())
    }

    pub(super) async fn open_reasoning<'r>(
        &mut self,
        slot: &'r mut Option<OpenReasoning>,
    ) -> Result<&'r mut OpenReasoning, Halt> {
        let open = match slot.take() {
            Some(open) => open,
            None => {
                let span_id = new_id("rsn");
                let message_id = new_id("msg");
                self.emitter
                    .emit(Event::ReasoningStart {
                        message_id: span_id.clone(),
                    })
                    .await?;
                self.emitter
                    .emit(Event::ReasoningMessageStart {
                        message_id: message_id.clone(),
                        role: "reasoning".into(),
                    })
                    .await?;
                OpenReasoning {
                    span_id,
                    message_id,
                    text: String::new(),
                    signature: None,
                    redacted: None,
                }
            }
        };
        Ok(slot.insert(open))
    }

    pub(super) async fn close_reasoning(
        &mut self,
        slot: &mut Option<OpenReasoning>,
        blocks: &mut Vec<ContentBlock>,
    ) -> Result<(), Halt> {
        let Some(r) = slot.take() else { return Ok(()) };
        self.emitter
            .emit(Event::ReasoningMessageEnd {
                message_id: r.message_id.clone(),
            })
            .await?;
        let secret = match (&r.redacted, &r.signature) {
            (Some(data), _) => Some(redacted_value(data)),
            (None, Some(sig)) => Some(sig.clone()),
            (None, None) => None,
        };
        if let Some(encrypted_value) = secret {
            self.emitter
                .emit(Event::ReasoningEncryptedValue {
                    subtype: EncryptedSubtype::Message,
                    entity_id: r.message_id.clone(),
                    encrypted_value,
                })
                .await?;
        }
        self.emitter
            .emit(Event::ReasoningEnd {
                message_id: r.span_id,
            })
            .await?;
        blocks.push(match r.redacted {
            Some(data) => ContentBlock::RedactedReasoning { data },
            None => ContentBlock::Reasoning {
                text: r.text,
                signature: r.signature,
            },
        });
        Ok(())
    }
}
