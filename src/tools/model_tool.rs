//! ml-commons' `MLModelTool`: a registered model called with a templated prompt. In a ReAct
//! loop the model passes `question`; in a flow the prompt is filled from the flow's parameters.

use std::sync::Arc;

use futures::StreamExt;
use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::{Tool, ToolContext, ToolOutput};
use crate::connector::template::{Escape, render};
use crate::conversation::{Message, ToolSpec};
use crate::model::{InferenceParams, ModelEvent, ModelRequest, Provider};

/// A model as a tool.
pub struct ModelTool {
    spec: ToolSpec,
    provider: Arc<dyn Provider>,
    params: InferenceParams,
    prompt: String,
    system_prompt: Option<String>,
}

impl ModelTool {
    /// A tool named by `spec` calling `provider` with `prompt` filled from the call's arguments.
    pub fn new(
        spec: ToolSpec,
        provider: Arc<dyn Provider>,
        params: InferenceParams,
        prompt: String,
        system_prompt: Option<String>,
    ) -> Self {
        Self {
            spec,
            provider,
            params,
            prompt,
            system_prompt,
        }
    }

    /// The default argument schema: one `question`.
    pub fn default_schema() -> Value {
        serde_json::json!({
            "type": "object",
            "properties": { "question": { "type": "string", "description": "What to ask the model" } },
            "required": ["question"]
        })
    }

    async fn ask(&self, args: Value, ctx: ToolContext) -> ToolOutput {
        let params: Map<String, Value> = match args {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        // A flow passes the prompt ready-made; a model passes the template's parameters.
        let prompt = match params.get("prompt").and_then(Value::as_str) {
            Some(p) => p.to_string(),
            None => match render(&self.prompt, &params, &Map::new(), Escape::Raw) {
                Ok(p) => p,
                Err(e) => return ToolOutput::error(e.to_string()),
            },
        };
        let request = ModelRequest {
            system: self.system_prompt.iter().cloned().collect(),
            messages: vec![Message::user_text(prompt)],
            tools: Vec::new(),
            params: self.params.clone(),
        };
        let mut stream = self.provider.stream(request);
        let mut text = String::new();
        loop {
            let next = tokio::select! {
                biased;
                _ = ctx.cancel.cancelled() => return ToolOutput::error("cancelled"),
                n = stream.next() => n,
            };
            match next {
                None => break,
                Some(Ok(ModelEvent::TextDelta(d))) => text.push_str(&d),
                Some(Ok(_)) => {}
                Some(Err(e)) => return ToolOutput::error(format!("the model failed: {e}")),
            }
        }
        ToolOutput::ok(text)
    }
}

impl Tool for ModelTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call(&self, args: Value, ctx: ToolContext) -> BoxFuture<'_, ToolOutput> {
        Box::pin(self.ask(args, ctx))
    }
}
