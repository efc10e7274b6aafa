//! Text embeddings through registered models: what `VectorDBTool`, `neural` queries and the
//! ingestion of an embedded index with an embedding model call.

use std::sync::Arc;

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
        let connector = crate::connector::Connector {
            doc: &m.connector,
            credential: &m.credential,
        };
        connector
            .embed(&self.net, texts)
            .await
            .map_err(|e| format!("embedding model {model_id:?}: {e}"))
    }
}
