//! Who may reach what: threads, runs, async tasks and memory containers belong to the principal
//! that created them (see [`Principal`]). Another principal is answered as if the thing did not
//! exist (404, never 403: ids cannot be probed) unless its key is an admin. Every check runs
//! before a run streams, so a refused run neither reads nor appends to the thread.

use crate::AppState;
use crate::agent::{Agent, Overrides};
use crate::api::ApiError;
use crate::api::auth::{Caller, Principal};
use crate::protocol::input::RunAgentInput;
use crate::store::StoreError;

/// Why a request may not use what it names.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// Another principal owns it (or it does not exist): a 404.
    #[error("{0}")]
    NotFound(String),
    /// The store could not say who owns it.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The request leaves out something the agent needs: a 400 naming the field.
    #[error("{field}: {reason}")]
    Missing {
        /// The field the request must give.
        field: String,
        /// Why.
        reason: String,
    },
}

impl From<Refusal> for ApiError {
    fn from(r: Refusal) -> Self {
        match r {
            Refusal::NotFound(m) => ApiError::NotFound(m),
            Refusal::Store(e) => ApiError::StoreUnavailable(e.to_string()),
            Refusal::Missing { field, reason } => ApiError::BadRequest {
                field,
                message: reason,
            },
        }
    }
}

impl From<Refusal> for crate::api::ml::MlError {
    fn from(r: Refusal) -> Self {
        match r {
            Refusal::NotFound(m) => crate::api::ml::MlError::NotFound(m),
            Refusal::Store(e) => e.into(),
            Refusal::Missing { field, reason } => crate::api::ml::MlError::bad(field, reason),
        }
    }
}

/// The principal of a request on this gateway.
pub fn principal(state: &AppState, caller: Option<&Caller>) -> Principal {
    Principal::of(caller, !state.settings.api_keys.is_empty())
}

fn no_thread(agent: &Agent, thread: &str) -> Refusal {
    Refusal::NotFound(format!("no thread {thread:?} for agent {:?}", agent.id))
}

/// Refuses a memory container named in a run's parameters (`memory_container_id`) that
/// another principal created. The container of the agent's own configuration is the
/// operator's choice and always usable.
pub async fn check_container(
    state: &AppState,
    who: &Principal,
    agent: &Agent,
    overrides: &Overrides,
) -> Result<(), Refusal> {
    if !agent.memory.store {
        return Ok(());
    }
    let Some(id) = agent.memory_for(overrides).memory_container_id else {
        if agent.memory.agentic {
            return Err(Refusal::Missing {
                field: "parameters.memory_container_id".into(),
                reason: "this agent keeps agentic memory and names no container: give one at registration (memory.memory_container_id) or per execution".into(),
            });
        }
        return Ok(());
    };
    // No container has a NUL in its id, and PostgreSQL would refuse the lookup.
    if id.contains('\0') {
        return Err(Refusal::NotFound(format!("no memory container {id:?}")));
    }
    // The agent's own container was chosen by whoever registered it; another one must be the
    // caller's. Either must exist: a missing one is the request's fault, not the store's.
    let registered = agent.memory.memory_container_id.as_deref() == Some(id.as_str());
    match state.store.container(&id).await? {
        Some(c) if registered || who.may_use(c.owner.as_deref()) => Ok(()),
        _ => Err(Refusal::NotFound(format!("no memory container {id:?}"))),
    }
}

/// Refuses a thread another principal owns, without claiming it (a read before the run).
pub async fn check_thread(
    state: &AppState,
    who: &Principal,
    agent: &Agent,
    thread: &str,
) -> Result<(), Refusal> {
    if !agent.memory.store {
        return Ok(());
    }
    match state.store.thread_owner(&agent.id, thread).await? {
        Some(owner) if !who.may_use(Some(&owner)) => Err(no_thread(agent, thread)),
        _ => Ok(()),
    }
}

/// The recorded run `run_id` of agent `agent_id`, if `who` may see it: another principal's
/// run is answered as no run at all (`None`), as one of another agent is.
pub async fn run_of(
    state: &AppState,
    who: &Principal,
    agent_id: &str,
    run_id: &str,
) -> Result<Option<crate::store::RunRecord>, Refusal> {
    Ok(state
        .store
        .run(run_id)
        .await?
        .filter(|r| r.agent_id == agent_id && who.may_use(Some(&r.owner))))
}

/// Before a run starts: refuses a run id or a thread (or a memory container) another principal
/// owns, and records a new thread as the principal's. Threads are only recorded for agents
/// that keep them; a stateless agent's thread id names nothing stored.
pub async fn claim_run(
    state: &AppState,
    who: &Principal,
    agent: &Agent,
    input: &RunAgentInput,
) -> Result<(), Refusal> {
    // A run id is its event log's name: another principal's must not be written or restarted.
    // (An admin, and the one principal of a gateway without keys, may use any: no read.)
    if !who.admin
        && let Some(owner) = state.store.run_owner(&input.run_id).await?
        && !who.may_use(Some(&owner))
    {
        return Err(Refusal::NotFound(format!(
            "no run {:?} of this key; start runs with a new runId",
            input.run_id
        )));
    }
    if !agent.memory.store {
        return Ok(());
    }
    check_container(state, who, agent, &Overrides::of(input)).await?;
    let owner = state
        .store
        .claim_thread(&agent.id, &input.thread_id, &who.name)
        .await?;
    if !who.may_use(Some(&owner)) {
        return Err(no_thread(agent, &input.thread_id));
    }
    Ok(())
}
