//! The ReAct loop's tool calls: backend calls run concurrently with what they send meanwhile
//! (a nested agent's events, progress) streamed before their results; calls people decided
//! about; the pause for approval.

use super::*;

impl Run<'_> {
    /// What a tool call of this run may know about it.
    pub(super) fn tool_context(&self, tool_call_id: &str) -> ToolContext {
        ToolContext {
            thread_id: self.input.thread_id.clone(),
            run_id: self.input.run_id.clone(),
            tool_call_id: tool_call_id.to_string(),
            cancel: self.cancel.clone(),
            state: Arc::clone(&self.state),
            side: None,
        }
    }

    /// Applies a call's change to the shared state (`STATE_SNAPSHOT` / `STATE_DELTA`), then
    /// streams its result as a new `tool` message. A change that no longer applies (another
    /// call changed the state first) turns the result into an error the model can act on.
    pub(super) async fn emit_result(
        &mut self,
        tool_call_id: &str,
        out: ToolOutput,
    ) -> Result<ToolOutput, Halt> {
        let mut out = out;
        match out.state.take() {
            None => {}
            Some(StateUpdate::Snapshot(next)) => {
                self.state = Arc::new(next.clone());
                self.emitter
                    .emit(Event::StateSnapshot { snapshot: next })
                    .await?;
            }
            Some(StateUpdate::Delta(ops)) => match apply_ops(&self.state, &ops) {
                Ok(next) => {
                    self.state = Arc::new(next);
                    self.emitter.emit(Event::StateDelta { delta: ops }).await?;
                }
                Err(e) => out = ToolOutput::error(e),
            },
        }
        self.emitter
            .emit(Event::ToolCallResult {
                message_id: new_id("msg"),
                tool_call_id: tool_call_id.to_string(),
                content: ToolResultContent::Text(out.text.clone()),
                role: Some("tool".into()),
            })
            .await?;
        Ok(out)
    }

    /// Runs (or refuses) the calls people decided about, streaming each result under the
    /// original call id and putting it into the history in place of its placeholder.
    pub(super) async fn apply_decisions(
        &mut self,
        messages: &mut [Message],
        decisions: Vec<approvals::Decision>,
    ) -> Result<(), Halt> {
        for d in decisions {
            let Some((name, input)) = approvals::find_call(messages, &d.call_id) else {
                tracing::info!(call = %d.call_id, "approval for a call that is not in the history; ignored");
                continue;
            };
            let out = if d.approved {
                let args = d.arguments.unwrap_or(input).to_string();
                self.agent
                    .tools
                    .call(&name, &args, self.tool_context(&d.call_id))
                    .await
            } else {
                ToolOutput::error(approvals::DENIED)
            };
            let out = self.emit_result(&d.call_id, out).await?;
            approvals::set_result(messages, &d.call_id, &out);
        }
        Ok(())
    }

    /// Ends the run waiting for a person to approve `gated` calls: an interrupt for 1.0 clients,
    /// pending calls (like frontend tools) for older ones.
    pub(super) async fn pause_for_approval(
        &mut self,
        gated: &[&Call],
        frontend: &[&Call],
    ) -> Result<(), Halt> {
        let requests: Vec<Value> = gated
            .iter()
            .map(|c| json!({"toolCallId": c.id, "toolName": c.name, "arguments": args_value(&c.args)}))
            .collect();
        self.emitter
            .emit(Event::Custom {
                name: "approval_required".into(),
                value: json!(requests),
            })
            .await?;
        if self.emitter.is_v1() {
            let interrupts = gated
                .iter()
                .map(|c| approvals::interrupt(&c.id, &c.name, &c.args))
                .collect();
            return self.end(Some(Outcome::Interrupt { interrupts })).await;
        }
        let pending = gated
            .iter()
            .chain(frontend.iter())
            .map(|c| c.id.clone())
            .collect();
        self.finish(pending).await
    }

    /// What a tool sent while it worked: events to stream, a nested run's model calls to count.
    pub(super) async fn take_side(&mut self, side: SideEvent) -> Result<(), Halt> {
        match side {
            SideEvent::Usage(ledger) => self.usage.absorb(ledger),
            other => self.emitter.side(other).await?,
        }
        Ok(())
    }

    /// Runs a turn's backend calls concurrently, streaming each result as it completes, and
    /// returns the result blocks in call order.
    pub(super) async fn run_backend(&mut self, calls: &[&Call]) -> Result<Vec<ContentBlock>, Halt> {
        let agent: &Agent = self.agent;
        let tools = &agent.tools;
        // Parallel calls run together, at most `tool_concurrency` at a time; results are
        // streamed as they complete and kept in call order for the model. (The futures are
        // collected first: a lazy `map` inside the stream trips the run task's Send check.)
        // What the calls send while they work (a nested agent's events, progress) streams
        // as it comes; whatever a call sent before it returned goes out before its result.
        let (side_tx, mut side_rx) = mpsc::channel(SIDE_CAPACITY);
        let jobs: Vec<_> = calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let mut ctx = self.tool_context(&c.id);
                ctx.side = Some(side_tx.clone());
                async move {
                    let out = crate::agent::execute_tool(tools, &c.name, &c.id, &c.args, ctx).await;
                    (i, out)
                }
            })
            .collect();
        drop(side_tx);
        let mut pending = futures::stream::iter(jobs).buffer_unordered(agent.tool_concurrency);
        let mut outputs: Vec<Option<ToolOutput>> = vec![None; calls.len()];
        loop {
            let next = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => return Err(Halt::Cancelled),
                Some(side) = side_rx.recv() => Err(side),
                n = pending.next() => Ok(n),
            };
            let (i, out) = match next {
                Err(side) => {
                    self.take_side(side).await?;
                    continue;
                }
                Ok(None) => break,
                Ok(Some(done)) => done,
            };
            while let Ok(side) = side_rx.try_recv() {
                self.take_side(side).await?;
            }
            if out.is_error {
                tracing::info!(tool = %calls[i].name, "backend tool returned an error result");
            }
            let out = self.emit_result(&calls[i].id, out).await?;
            outputs[i] = Some(out);
        }
        Ok(calls
            .iter()
            .zip(outputs)
            .map(|(c, out)| {
                let out = out.unwrap_or_else(|| ToolOutput::error("Tool call did not complete."));
                ContentBlock::ToolResult {
                    tool_use_id: c.id.clone(),
                    content: vec![ToolResultBlock::Text { text: out.text }],
                    is_error: out.is_error,
                }
            })
            .collect())
    }
}

/// The arguments as the model will see them in history: the JSON object, or the raw text
/// wrapped so nothing is lost when the model produced invalid JSON.
pub(super) fn args_value(args: &str) -> Value {
    match serde_json::from_str::<Value>(args) {
        Ok(v @ Value::Object(_)) => v,
        Ok(other) => json!({ "value": other }),
        Err(_) => json!({ "raw_arguments": args }),
    }
}
