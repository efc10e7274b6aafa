//! Text embeddings through a connector, as ml-commons computes them for `text_docs`: the
//! predict action's `pre_process_function` makes parameters of each batch of docs, the
//! rendered request goes out (one per batch), and the `post_process_function` reads the
//! vectors back. `scripted` connectors embed offline ([`super::hashed`]).

use serde_json::{Map, Value, json};

use super::{CallError, Connector, hashed, process};

impl Connector<'_> {
    /// Whether this connector is the gateway's offline (`scripted`) model.
    pub fn is_scripted(&self) -> bool {
        self.doc.get("protocol").and_then(Value::as_str) == Some("scripted")
    }

    /// One vector per text, in order.
    pub async fn embed(
        &self,
        net: &crate::outbound::Net,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, CallError> {
        let batches = self.embed_batches(net, texts, &Map::new()).await?;
        Ok(batches.into_iter().flatten().collect())
    }

    /// The vectors of `texts`, one list per request made (ml-commons answers one inference
    /// result per request); `overrides` are `_predict`'s parameters.
    pub async fn embed_batches(
        &self,
        net: &crate::outbound::Net,
        texts: &[String],
        overrides: &Map<String, Value>,
    ) -> Result<Vec<Vec<Vec<f32>>>, CallError> {
        let params = self.parameters(overrides);
        if self.is_scripted() {
            let dim = hashed::dimension(&params)
                .map_err(|p| CallError::Template(format!("parameters.dimension: {p}")))?;
            return Ok(vec![texts.iter().map(|t| hashed::embed(t, dim)).collect()]);
        }
        let action = self.predict_action()?;
        let pre = match action.get("pre_process_function").and_then(Value::as_str) {
            Some(name) => process::pre(name).map_err(CallError::Template)?,
            None => process::Pre::OpenAiEmbedding,
        };
        let post = action.get("post_process_function").and_then(Value::as_str);
        let step = process::step_size(pre, &params, texts.len());
        let mut out = Vec::new();
        for batch in texts.chunks(step) {
            let mut p = params.clone();
            p.extend(process::pre_process(pre, batch, None, &params));
            let (_, doc) = self.call(net, action, &p).await?;
            let vectors = match post {
                Some(name) => {
                    let (path, kind) = process::post(name).map_err(CallError::Template)?;
                    let path = super::response_filter(action, &p).unwrap_or(path);
                    let picked = super::jsonpath::select(&doc, path)
                        .map_err(|e| CallError::Template(e.to_string()))?
                        .unwrap_or(Value::Null);
                    process::vectors(kind, &picked).map_err(CallError::BadAnswer)?
                }
                None => process::guess_vectors(&doc).map_err(CallError::BadAnswer)?,
            };
            if vectors.len() != batch.len() {
                return Err(CallError::BadAnswer(format!(
                    "the embedding endpoint answered {} vectors for {} texts",
                    vectors.len(),
                    batch.len()
                )));
            }
            out.push(vectors);
        }
        Ok(out)
    }

    /// `_predict` with `text_docs` in ml-commons' shape: one inference result per request,
    /// each holding a `sentence_embedding` tensor per doc.
    pub async fn predict_text_docs(
        &self,
        net: &crate::outbound::Net,
        texts: &[String],
        overrides: &Map<String, Value>,
    ) -> Result<Value, CallError> {
        let batches = self.embed_batches(net, texts, overrides).await?;
        let results: Vec<Value> = batches
            .iter()
            .map(|b| {
                json!({
                    "output": b.iter().map(|v| process::embedding_tensor(v)).collect::<Vec<_>>(),
                    "status_code": 200,
                })
            })
            .collect();
        Ok(json!({ "inference_results": results }))
    }

    /// `_predict` with `query_text` and `text_docs` on a rerank connector: one `similarity`
    /// tensor per doc, in the docs' order.
    pub async fn predict_rerank(
        &self,
        net: &crate::outbound::Net,
        query: &str,
        texts: &[String],
        overrides: &Map<String, Value>,
    ) -> Result<Value, CallError> {
        let params = self.parameters(overrides);
        let action = self.predict_action()?;
        let pre = match action.get("pre_process_function").and_then(Value::as_str) {
            Some(name) => process::pre(name).map_err(CallError::Template)?,
            None => process::Pre::CohereRerank,
        };
        let mut p = params.clone();
        p.extend(process::pre_process(pre, texts, Some(query), &params));
        let (status, doc) = self.call(net, action, &p).await?;
        let name = action
            .get("post_process_function")
            .and_then(Value::as_str)
            .unwrap_or("connector.post_process.default.rerank");
        let tensors = self.post_process(action, &p, name, &doc, Some(texts.len()))?;
        Ok(json!({
            "inference_results": [{ "output": tensors, "status_code": status }]
        }))
    }
}

/// Why [`embed_with_model`] could not embed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmbedError {
    /// No model has that id.
    #[error("no model {0:?} is registered")]
    NoModel(String),
    /// The model store could not be read.
    #[error("the model store failed: {0}")]
    Store(String),
    /// The model's connector call failed.
    #[error(transparent)]
    Call(#[from] CallError),
}

/// One vector per text from the registered model `model_id` (a remote embedding model, or
/// the offline `scripted` one): what `VectorDBTool`, `neural` queries and ingestion use.
pub async fn embed_with_model(
    models: &dyn crate::connector::models::ModelLookup,
    net: &crate::outbound::Net,
    model_id: &str,
    texts: &[String],
) -> Result<Vec<Vec<f32>>, EmbedError> {
    let m = models
        .model(model_id)
        .await
        .map_err(EmbedError::Store)?
        .ok_or_else(|| EmbedError::NoModel(model_id.to_string()))?;
    let connector = Connector {
        doc: &m.connector,
        credential: &m.credential,
    };
    Ok(connector.embed(net, texts).await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connector::models::{ModelLookup, ResolvedModel};

    struct One(ResolvedModel);

    #[async_trait::async_trait]
    impl ModelLookup for One {
        async fn model(&self, id: &str) -> Result<Option<ResolvedModel>, String> {
            Ok((id == self.0.model_id).then(|| self.0.clone()))
        }
        async fn connector(&self, _: &str) -> Result<Option<(Value, Map<String, Value>)>, String> {
            Ok(None)
        }
    }

    #[tokio::test]
    async fn a_registered_model_embeds_by_id() {
        let models = One(ResolvedModel {
            model_id: "m1".into(),
            connector: json!({"name": "offline", "protocol": "scripted", "parameters": {"dimension": 32}}),
            credential: Map::new(),
        });
        let net = crate::outbound::Net::Open(reqwest::Client::new());
        let texts = vec!["population of Seattle".to_string(), "".to_string()];
        let v = embed_with_model(&models, &net, "m1", &texts).await.unwrap();
        assert_eq!((v.len(), v[0].len()), (2, 32));
        let norm: f32 = v[0].iter().map(|x| x * x).sum();
        assert!((norm - 1.0).abs() < 1e-4);
        assert!(matches!(
            embed_with_model(&models, &net, "nope", &texts).await,
            Err(EmbedError::NoModel(_))
        ));
    }
}
