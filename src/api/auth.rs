//! API-key authentication and per-agent allow lists, when `[[auth.keys]]` are configured.
//! A key comes as `Authorization: Bearer <key>` or `X-API-Key: <key>`; it is hashed and
//! compared in constant time with the configured hashes. Public without a key: `/healthz` and
//! the web demo's files. Runs of an agent (`/agents/{id}/agui...`, the agent API's
//! `_execute`) need a key that lists the agent; `GET /agents` and task results need any key;
//! everything else (registering, ingesting, memory) needs an `admin` key. What a key creates
//! (threads, runs, tasks, memory) is its own: see [`crate::api::owner`].

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::AppState;
use crate::api::ApiError;
use crate::config::auth::{ApiKey, hash_key};

/// What a path needs.
#[derive(Debug, PartialEq, Eq)]
enum Scope<'a> {
    Public,
    /// Running this agent.
    Agent(&'a str),
    /// Any valid key.
    AnyKey,
    Admin,
}

fn scope(path: &str) -> Scope<'_> {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        ["healthz"] | [""] | ["app.js"] | ["app.css"] => Scope::Public,
        ["agents"] => Scope::AnyKey,
        ["agents", id, "agui", ..] => Scope::Agent(id),
        ["_plugins", "_ml", "agents", id, "_execute", ..] if !id.starts_with('_') => {
            Scope::Agent(id)
        }
        ["_plugins", "_ml", "tasks", _] => Scope::AnyKey,
        // Conversation memories answer each key with its own (see `api::ml::conversations`).
        ["_plugins", "_ml", "memory", ..] => Scope::AnyKey,
        _ => Scope::Admin,
    }
}

fn presented(req: &Request) -> Option<&str> {
    let h = req.headers();
    if let Some(v) = h.get("x-api-key").and_then(|v| v.to_str().ok()) {
        return Some(v.trim());
    }
    let v = h.get(axum::http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

fn find<'a>(keys: &'a [ApiKey], token: &str) -> Option<&'a ApiKey> {
    let hash = hash_key(token);
    // Every key is compared (in constant time) so timing says nothing about which matched.
    let mut found = None;
    for k in keys {
        if aws_lc_rs::constant_time::verify_slices_are_equal(&k.hash, &hash).is_ok() {
            found = Some(k);
        }
    }
    found
}

/// The key a request was let in with, for handlers and logs.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The key's name.
    pub name: String,
    /// Its own limit of concurrent runs.
    pub max_runs: Option<usize>,
    /// Whether it is an admin key (reaches every principal's threads, runs, tasks and memory).
    pub admin: bool,
    /// The agents it may run (`*`: all).
    pub agents: Vec<String>,
}

impl Caller {
    /// Whether this key may run `agent`.
    pub fn allows(&self, agent: &str) -> bool {
        self.agents.iter().any(|a| a == "*" || a == agent)
    }
}

/// Who makes a request, as the owner of what it creates: the key's name, or, when the gateway
/// has no keys, the one anonymous principal (`""`; key names are never empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The owner name recorded for what it creates.
    pub name: String,
    /// May reach what other principals own.
    pub admin: bool,
}

impl Principal {
    /// The principal of a request let in as `caller`. Without keys the gateway is open: its
    /// anonymous principal may do everything an admin may.
    pub fn of(caller: Option<&Caller>, keys_configured: bool) -> Self {
        match caller {
            Some(c) => Self {
                name: c.name.clone(),
                admin: c.admin,
            },
            None => Self {
                name: String::new(),
                admin: !keys_configured,
            },
        }
    }

    /// Whether it may reach something `owner` created (`None`: created before owners were
    /// recorded, which counts as the anonymous principal's).
    pub fn may_use(&self, owner: Option<&str>) -> bool {
        self.admin || self.name == owner.unwrap_or("")
    }
}

/// The middleware.
pub async fn require(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let keys = &state.settings.api_keys;
    if keys.is_empty() || req.method() == axum::http::Method::OPTIONS {
        return next.run(req).await;
    }
    let need = scope(req.uri().path());
    if need == Scope::Public {
        return next.run(req).await;
    }
    let Some(token) = presented(&req).filter(|t| !t.is_empty()) else {
        return ApiError::Unauthorized(
            "an API key is required: send Authorization: Bearer <key> or X-API-Key".into(),
        )
        .into_response();
    };
    let Some(key) = find(keys, token) else {
        tracing::info!(path = %req.uri().path(), "refused an unknown API key");
        return ApiError::Unauthorized("the API key is not valid".into()).into_response();
    };
    let refused = match need {
        Scope::Agent(agent) if !key.allows(agent) => Some(format!(
            "the key {:?} may not run agent {agent:?}",
            key.name
        )),
        Scope::Admin if !key.admin => Some(format!(
            "the key {:?} is not an admin key; this endpoint needs one",
            key.name
        )),
        _ => None,
    };
    if let Some(message) = refused {
        tracing::info!(key = %key.name, path = %req.uri().path(), "refused: not allowed");
        return ApiError::Forbidden(message).into_response();
    }
    req.extensions_mut().insert(Caller {
        name: key.name.clone(),
        max_runs: key.max_concurrent_runs,
        admin: key.admin,
        agents: key.agents.clone(),
    });
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principals_reach_their_own_and_admins_everything() {
        let key = |name: &str, admin| Caller {
            name: name.into(),
            max_runs: None,
            admin,
            agents: vec!["x".into()],
        };
        let a = Principal::of(Some(&key("a", false)), true);
        assert!(a.may_use(Some("a")) && !a.may_use(Some("b")) && !a.may_use(None));
        assert!(Principal::of(Some(&key("ops", true)), true).may_use(Some("a")));
        // Without keys, the anonymous principal is the only one and may do everything.
        let open = Principal::of(None, false);
        assert_eq!(open.name, "");
        assert!(open.may_use(None) && open.may_use(Some("a")));
        // With keys, a request without a caller is nobody's admin.
        assert!(!Principal::of(None, true).may_use(Some("a")));
        assert!(key("k", false).allows("x") && !key("k", false).allows("y"));
    }

    #[test]
    fn paths_map_to_what_they_need() {
        assert_eq!(scope("/healthz"), Scope::Public);
        assert_eq!(scope("/"), Scope::Public);
        assert_eq!(scope("/agents"), Scope::AnyKey);
        assert_eq!(scope("/agents/demo/agui"), Scope::Agent("demo"));
        assert_eq!(
            scope("/agents/demo/agui/runs/r1/events"),
            Scope::Agent("demo")
        );
        assert_eq!(
            scope("/_plugins/_ml/agents/a1/_execute/stream"),
            Scope::Agent("a1")
        );
        assert_eq!(scope("/_plugins/_ml/agents/_register"), Scope::Admin);
        assert_eq!(scope("/_plugins/_ml/agents/a1"), Scope::Admin);
        assert_eq!(scope("/_plugins/_ml/tasks/t1"), Scope::AnyKey);
        assert_eq!(scope("/indices/kb/documents"), Scope::Admin);
        assert_eq!(scope("/agents/demo/other"), Scope::Admin);
        assert_eq!(scope("/metrics"), Scope::Admin);
    }
}
