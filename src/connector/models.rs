//! Registered models as connectors reach them: a model id resolved to its connector document
//! and opened credential, looked up in the store.

use serde_json::{Map, Value};

use crate::store::Store;
use crate::store::docs::{Doc, DocKind};
use crate::store::sealed::Sealer;

/// A model the registration refers to: its connector (public part and opened credential).
#[derive(Debug, Clone)]
pub struct ResolvedModel {
    /// The registered model's id.
    pub model_id: String,
    /// Its connector without the credential.
    pub connector: Value,
    /// The opened credential.
    pub credential: Map<String, Value>,
}

/// Looks registered models up (the store, with credentials opened).
#[async_trait::async_trait]
pub trait ModelLookup: Send + Sync {
    /// The model `id`, or `None` when there is none.
    async fn model(&self, id: &str) -> Result<Option<ResolvedModel>, String>;
    /// The connector `id`'s document and opened credential, or `None` when there is none.
    async fn connector(&self, id: &str) -> Result<Option<(Value, Map<String, Value>)>, String>;
}

/// Looks models up in the store, opening their credentials.
pub struct StoreModels<'a> {
    /// The store.
    pub store: &'a dyn Store,
    /// The key.
    pub sealer: &'a Sealer,
}

impl StoreModels<'_> {
    /// A connector document and its opened credential.
    pub async fn connector_doc(
        &self,
        id: &str,
    ) -> Result<Option<(Value, Map<String, Value>)>, String> {
        let Some(doc) = self
            .store
            .doc(DocKind::Connector, id)
            .await
            .map_err(|e| e.to_string())?
        else {
            return Ok(None);
        };
        let cred = self.open(&doc)?;
        Ok(Some((doc.body, cred)))
    }

    fn open(&self, doc: &Doc) -> Result<Map<String, Value>, String> {
        match &doc.sealed {
            None => Ok(Map::new()),
            Some(s) => match self.sealer.open(&doc.id, s) {
                Ok(Value::Object(m)) => Ok(m),
                Ok(_) => Ok(Map::new()),
                Err(e) => Err(e.to_string()),
            },
        }
    }
}

#[async_trait::async_trait]
impl ModelLookup for StoreModels<'_> {
    async fn model(&self, id: &str) -> Result<Option<ResolvedModel>, String> {
        let Some(doc) = self
            .store
            .doc(DocKind::Model, id)
            .await
            .map_err(|e| e.to_string())?
        else {
            return Ok(None);
        };
        let (connector, credential) =
            match (doc.body.get("connector"), doc.body.get("connector_id")) {
                (Some(c), _) => (c.clone(), self.open(&doc)?),
                (None, Some(Value::String(cid))) => self
                    .connector_doc(cid)
                    .await?
                    .ok_or_else(|| format!("model {id:?} uses connector {cid:?}, which is gone"))?,
                _ => return Err(format!("model {id:?} has no connector")),
            };
        Ok(Some(ResolvedModel {
            model_id: id.to_string(),
            connector,
            credential,
        }))
    }

    async fn connector(&self, id: &str) -> Result<Option<(Value, Map<String, Value>)>, String> {
        self.connector_doc(id).await
    }
}
