//! Text embeddings through registered models: what `VectorDBTool`, `neural` queries and the
//! ingestion of an embedded index with an embedding model call.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::agent::spec::ModelLookup;

/// Embeds texts with a registered model.
#[async_trait::async_trait]
pub trait Embedder: Send + Sync {
    /// One vector per text, in order. The error is for the caller to show (no secrets).
    async fn embed(&self, model_id: &str, texts: &[String]) -> Result<Vec<Vec<f32>>, String>;
}

/// The registered models of the store, called under the outbound URL policy.
pub struct StoreEmbedder {
    /// Where models live.
    pub store: Arc<dyn crate::store::Store>,
    /// Opens their credentials.
    pub sealer: Arc<crate::store::sealed::Sealer>,
    /// HTTP clients for their URLs.
    pub net: crate::outbound::Net,
}

#[async_trait::async_trait]
impl Embedder for StoreEmbedder {
    async fn embed(&self, model_id: &str, texts: &[String]) -> Result<Vec<Vec<f32>>, String> {
        let models = crate::agent::registry::StoreModels {
            store: &*self.store,
            sealer: &self.sealer,
        };
        let m = models
            .model(model_id)
            .await?
            .ok_or_else(|| format!("no model {model_id:?} is registered"))?;
        embed_with_connector(&m.connector, &m.credential, &self.net, texts).await
    }
}

/// Calls a connector's predict action for each batch of texts and reads the vectors out of the
/// answer. The parameters cover ml-commons' embedding blueprints: `input` (OpenAI, a list),
/// `texts` (Cohere, a list) and `inputText` (Titan, one text per call).
pub async fn embed_with_connector(
    doc: &Value,
    credential: &Map<String, Value>,
    net: &crate::outbound::Net,
    texts: &[String],
) -> Result<Vec<Vec<f32>>, String> {
    let connector = crate::connector::Connector { doc, credential };
    let body = connector
        .action("predict")
        .and_then(|a| a.get("request_body"))
        .and_then(Value::as_str)
        .unwrap_or("");
    // Titan takes one text per request.
    let one_by_one = body.contains("inputText");
    let batches: Vec<Vec<String>> = if one_by_one {
        texts.iter().map(|t| vec![t.clone()]).collect()
    } else {
        texts.chunks(64).map(<[String]>::to_vec).collect()
    };
    let mut out = Vec::with_capacity(texts.len());
    for batch in batches {
        let mut p = Map::new();
        p.insert("input".into(), json!(batch));
        p.insert("texts".into(), json!(batch));
        p.insert("inputText".into(), json!(batch[0]));
        let answer = connector
            .predict(net, &p)
            .await
            .map_err(|e| format!("embedding model: {e}"))?;
        let data = answer
            .pointer("/inference_results/0/output/0/dataAsMap")
            .cloned()
            .unwrap_or(Value::Null);
        let vectors = vectors_of(&data).ok_or_else(|| {
            "embedding model: its answer holds no embedding (data[].embedding, embedding or embeddings)"
                .to_string()
        })?;
        if vectors.len() != batch.len() {
            return Err(format!(
                "embedding model: {} texts gave {} vectors",
                batch.len(),
                vectors.len()
            ));
        }
        out.extend(vectors);
    }
    Ok(out)
}

/// The vectors of an embedding answer, in the shapes of OpenAI, Titan and Cohere (or a
/// `response_filter`'s `response`).
pub fn vectors_of(data: &Value) -> Option<Vec<Vec<f32>>> {
    fn vector(v: &Value) -> Option<Vec<f32>> {
        let a = v.as_array()?;
        if a.is_empty() {
            return None;
        }
        a.iter().map(|x| x.as_f64().map(|f| f as f32)).collect()
    }
    fn vectors(v: &Value) -> Option<Vec<Vec<f32>>> {
        if let Some(one) = vector(v) {
            return Some(vec![one]);
        }
        let a = v.as_array()?;
        a.iter()
            .map(|x| vector(x).or_else(|| vector(x.get("embedding")?)))
            .collect()
    }
    for key in ["data", "embeddings", "embedding", "response"] {
        if let Some(v) = data.get(key)
            && let Some(found) = vectors(v)
        {
            return Some(found);
        }
    }
    // Cohere v2: {"embeddings": {"float": [[...]]}}.
    data.pointer("/embeddings/float").and_then(vectors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_are_read_from_each_provider_shape() {
        let openai = json!({"data": [{"embedding": [0.1, 0.2]}, {"embedding": [0.3, 0.4]}]});
        assert_eq!(vectors_of(&openai).unwrap().len(), 2);
        let titan = json!({"embedding": [1.0, 2.0, 3.0], "inputTextTokenCount": 3});
        assert_eq!(vectors_of(&titan).unwrap(), vec![vec![1.0, 2.0, 3.0]]);
        let cohere = json!({"embeddings": [[1.0], [2.0]]});
        assert_eq!(vectors_of(&cohere).unwrap().len(), 2);
        let v2 = json!({"embeddings": {"float": [[1.0, 0.0]]}});
        assert_eq!(vectors_of(&v2).unwrap(), vec![vec![1.0, 0.0]]);
        assert!(vectors_of(&json!({"text": "no"})).is_none());
    }
}
