//! One registry of agents: those of the config file (built at start-up) and those registered
//! through the agent API (stored documents, built on first use and rebuilt when their document
//! changes, so every gateway sharing a store serves the same agents).

use std::collections::HashMap;
use std::sync::Arc;

use dashmap::DashMap;
use serde_json::{Map, Value, json};

use super::spec::{self, Invalid};
use super::{Agent, Shared};
pub use crate::connector::models::StoreModels;
use crate::store::Store;
use crate::store::docs::{Doc, DocKind};
use crate::store::sealed::Sealer;

/// Why the registry could not answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// The registration is wrong (a client fault).
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// The store or the key failed (a server fault).
    #[error("{0}")]
    Internal(String),
}

/// The agents.
pub struct Agents {
    /// Agents of the config file, by id.
    fixed: HashMap<String, Arc<Agent>>,
    /// Registered agents built so far, with the document they were built from.
    registered: DashMap<String, (Doc, Arc<Agent>)>,
    /// Where registrations live.
    store: Arc<dyn Store>,
    /// Seals and opens credentials.
    sealer: Arc<Sealer>,
    /// HTTP clients under the outbound URL policy (registered URLs are the API's, not the
    /// operator's).
    net: crate::outbound::Net,
    /// What agents share.
    shared: Shared,
    /// Default stream idle limit for registered agents' models.
    idle_timeout_secs: u64,
}

/// A fresh document id (URL-safe, 20 characters like ml-commons').
pub fn new_doc_id() -> String {
    let u = uuid::Uuid::new_v4().simple().to_string();
    u[..20].to_string()
}

/// Keys of tool entries that carry secrets (HTTP headers, credentials): sealed with the agent
/// document, shown as `[REDACTED]`.
const SECRET_TOOL_KEYS: &[&str] = &["headers", "credential"];

/// Splits the secrets out of a registration: the public body and the secrets by JSON pointer.
fn split_secrets(body: &Value) -> (Value, Map<String, Value>) {
    let mut public = body.clone();
    let mut secrets = Map::new();
    if let Some(tools) = public.get_mut("tools").and_then(Value::as_array_mut) {
        for (i, t) in tools.iter_mut().enumerate() {
            let Some(t) = t.as_object_mut() else { continue };
            for key in SECRET_TOOL_KEYS {
                if let Some(v) = t.get_mut(*key) {
                    let redacted = match v {
                        Value::Object(o) => Value::Object(
                            o.keys().map(|k| (k.clone(), json!("[REDACTED]"))).collect(),
                        ),
                        _ => json!("[REDACTED]"),
                    };
                    secrets.insert(format!("/tools/{i}/{key}"), std::mem::replace(v, redacted));
                }
            }
        }
    }
    (public, secrets)
}

/// Puts sealed secrets back where [`split_secrets`] took them from.
fn merge_secrets(body: &mut Value, secrets: Map<String, Value>) {
    for (pointer, v) in secrets {
        if let Some(slot) = body.pointer_mut(&pointer) {
            *slot = v;
        }
    }
}

impl Agents {
    /// A registry over the config file's agents and the store's registrations.
    pub fn new(
        fixed: HashMap<String, Arc<Agent>>,
        store: Arc<dyn Store>,
        sealer: Arc<Sealer>,
        net: crate::outbound::Net,
        shared: Shared,
        idle_timeout_secs: u64,
    ) -> Self {
        Self {
            fixed,
            registered: DashMap::new(),
            store,
            sealer,
            net,
            shared,
            idle_timeout_secs,
        }
    }

    /// The key that seals credentials.
    pub fn sealer(&self) -> &Sealer {
        &self.sealer
    }

    /// Model lookups against the store.
    pub fn models(&self) -> StoreModels<'_> {
        StoreModels {
            store: &*self.store,
            sealer: &self.sealer,
        }
    }

    /// The HTTP clients of registered entries.
    pub fn net(&self) -> &crate::outbound::Net {
        &self.net
    }

    /// The config file's agents.
    pub fn fixed(&self) -> impl Iterator<Item = &Arc<Agent>> {
        self.fixed.values()
    }

    /// Whether `id` is a config-file agent.
    pub fn is_fixed(&self, id: &str) -> bool {
        self.fixed.contains_key(id)
    }

    /// Every agent built so far (config-file agents and registered ones in use).
    pub fn loaded(&self) -> Vec<Arc<Agent>> {
        let mut out: Vec<Arc<Agent>> = self.fixed.values().cloned().collect();
        out.extend(self.registered.iter().map(|e| Arc::clone(&e.value().1)));
        out
    }

    /// Makes the registry reachable from the tools of its agents (`AgentTool`).
    pub fn link(self: &Arc<Self>) {
        let _ = self.shared.agents.set(Arc::downgrade(self));
    }

    /// The stored registration of agent `id` (`None` for config-file agents and unknown ids).
    pub async fn stored_body(&self, id: &str) -> Option<Value> {
        match self.store.doc(DocKind::Agent, id).await {
            Ok(Some(d)) => Some(d.body),
            _ => None,
        }
    }

    /// The agent `id`, built from its current registration.
    pub async fn get(&self, id: &str) -> Result<Option<Arc<Agent>>, RegistryError> {
        if let Some(a) = self.fixed.get(id) {
            return Ok(Some(Arc::clone(a)));
        }
        let doc = self
            .store
            .doc(DocKind::Agent, id)
            .await
            .map_err(|e| RegistryError::Internal(e.to_string()))?;
        let Some(doc) = doc else {
            self.registered.remove(id);
            return Ok(None);
        };
        if let Some(entry) = self.registered.get(id)
            && entry.0 == doc
        {
            return Ok(Some(Arc::clone(&entry.1)));
        }
        let mut body = doc.body.clone();
        if let Some(sealed) = &doc.sealed {
            match self.sealer.open(id, sealed) {
                Ok(Value::Object(secrets)) => merge_secrets(&mut body, secrets),
                Ok(_) => {}
                Err(e) => return Err(RegistryError::Internal(e.to_string())),
            }
        }
        let agent = Arc::new(self.build(id, &body).await?);
        self.registered
            .insert(id.to_string(), (doc, Arc::clone(&agent)));
        Ok(Some(agent))
    }

    async fn build(&self, id: &str, body: &Value) -> Result<Agent, RegistryError> {
        let compiled = spec::compile(id, body, &self.models(), self.idle_timeout_secs).await?;
        spec::check_outbound(body, &compiled.config, &self.net)?;
        let mut agent = Agent::build(&compiled.config, &self.net, &self.shared)
            .await
            .map_err(|p| Invalid {
                field: "tools".into(),
                problem: p,
            })?;
        agent.model_ref = compiled.model_id;
        agent.unified = body.get("model").is_some();
        Ok(agent)
    }

    /// Registers an agent; returns its id. A `model` block creates its connector and model
    /// first (sealed credential), as ml-commons does.
    pub async fn register(&self, body: &Value) -> Result<String, RegistryError> {
        let Some(obj) = body.as_object() else {
            return Err(Invalid {
                field: String::new(),
                problem: "the body must be a JSON object".into(),
            }
            .into());
        };
        let internal = |e: &dyn std::fmt::Display| RegistryError::Internal(e.to_string());
        let mut stored = obj.clone();
        let id = new_doc_id();
        let mut created_model = None;
        if let Some(block) = obj.get("model") {
            if obj.contains_key("llm") {
                return Err(Invalid {
                    field: "model".into(),
                    problem: "give either a model block or llm.model_id, not both".into(),
                }
                .into());
            }
            let name = obj.get("name").and_then(Value::as_str).unwrap_or("agent");
            let (connector, credential) = spec::connector_for_model_block(name, block)?;
            let model_id = new_doc_id();
            let mut model = Doc::new(
                &model_id,
                format!("{name} model"),
                json!({
                    "name": format!("{name} model"),
                    "function_name": "remote",
                    "description": format!("Created for agent {name:?}"),
                    "model_state": "DEPLOYED",
                    "connector": connector,
                }),
            );
            if !credential.is_empty() {
                model.sealed = Some(
                    self.sealer
                        .seal(&model_id, &Value::Object(credential))
                        .map_err(|e| internal(&e))?,
                );
            }
            self.store
                .put_doc(DocKind::Model, &model)
                .await
                .map_err(|e| internal(&e))?;
            let mut public = block.clone();
            if let Some(o) = public.as_object_mut() {
                o.remove("credential");
            }
            stored.insert("model".into(), public);
            stored.insert(
                "llm".into(),
                json!({
                    "model_id": model_id,
                    "parameters": block.get("model_parameters").cloned().unwrap_or(json!({})),
                }),
            );
            created_model = Some(model_id);
        }
        let stored = Value::Object(stored);
        let built = match super::agent_tool::check_targets(&stored, self).await {
            Ok(()) => self.build(&id, &stored).await,
            Err(e) => Err(e.into()),
        };
        let agent = match built {
            Ok(a) => a,
            Err(e) => {
                if let Some(m) = created_model {
                    let _ = self.store.delete_doc(DocKind::Model, &m).await;
                }
                return Err(e);
            }
        };
        let name = obj.get("name").and_then(Value::as_str).unwrap_or("");
        let (public, secrets) = split_secrets(&stored);
        let mut doc = Doc::new(&id, name, public);
        if !secrets.is_empty() {
            doc.sealed = Some(
                self.sealer
                    .seal(&id, &Value::Object(secrets))
                    .map_err(|e| internal(&e))?,
            );
        }
        self.store
            .put_doc(DocKind::Agent, &doc)
            .await
            .map_err(|e| internal(&e))?;
        // Cache what was stored (the store may have moved `updated_ms` forward).
        if let Ok(Some(doc)) = self.store.doc(DocKind::Agent, &id).await {
            self.registered.insert(id.clone(), (doc, Arc::new(agent)));
        }
        Ok(id)
    }

    /// Deletes a registered agent (and the model its `model` block created); `false` when
    /// there was none.
    pub async fn delete(&self, id: &str) -> Result<bool, RegistryError> {
        let internal = |e: &dyn std::fmt::Display| RegistryError::Internal(e.to_string());
        let doc = self
            .store
            .doc(DocKind::Agent, id)
            .await
            .map_err(|e| internal(&e))?;
        let Some(doc) = doc else { return Ok(false) };
        if doc.body.get("model").is_some()
            && let Some(m) = doc.body.pointer("/llm/model_id").and_then(Value::as_str)
        {
            self.store
                .delete_doc(DocKind::Model, m)
                .await
                .map_err(|e| internal(&e))?;
        }
        let gone = self
            .store
            .delete_doc(DocKind::Agent, id)
            .await
            .map_err(|e| internal(&e))?;
        if let Some((_, (_, agent))) = self.registered.remove(id) {
            tokio::spawn(async move { agent.tools.close().await });
        }
        Ok(gone)
    }
}
