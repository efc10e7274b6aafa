//! Text embeddings through registered models: what `VectorDBTool`, `neural` queries and the
//! ingestion of an embedded index with an embedding model call.

use std::sync::Arc;

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
        let models = crate::connector::models::StoreModels {
            store: &*self.store,
            sealer: &self.sealer,
        };
        crate::connector::embed::embed_with_model(&models, &self.net, model_id, texts)
            .await
            .map_err(|e| format!("embedding model {model_id:?}: {e}"))
    }
}
