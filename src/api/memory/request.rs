//! What every handler shares: error constructors, JSON bodies parsed with errors naming the
//! offending field, and checks of ids and namespaces.

use serde::de::DeserializeOwned;

use crate::api::ApiError;
use crate::store::StoreError;
use crate::store::memory::Namespace;

const MAX_NAMESPACE_KEYS: usize = 16;

pub(super) fn bad(field: impl Into<String>, message: impl Into<String>) -> ApiError {
    ApiError::BadRequest {
        field: field.into(),
        message: message.into(),
    }
}

pub(super) fn internal(e: StoreError) -> ApiError {
    ApiError::Internal(e.to_string())
}

pub(super) fn no_container(id: &str) -> ApiError {
    ApiError::NotFound(format!("memory container {id} not found"))
}

/// Parses a JSON body; `None` for an empty one. Errors name the offending field.
pub(super) fn parse_body<T: DeserializeOwned>(body: &[u8]) -> Result<Option<T>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let describe = |e: serde_json::Error| {
        if e.is_syntax() || e.is_eof() {
            format!("the body is not valid JSON: {e}")
        } else {
            e.to_string()
        }
    };
    let mut de = serde_json::Deserializer::from_slice(body);
    let parsed = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { String::new() } else { path };
        bad(field, describe(e.into_inner()))
    })?;
    de.end().map_err(|e| bad("", describe(e)))?;
    Ok(Some(parsed))
}

/// An id that may appear in a URL path.
pub(super) fn check_id(field: &str, id: &str) -> Result<(), ApiError> {
    if id.is_empty() || id.len() > 256 {
        return Err(bad(field, "must be 1 to 256 bytes long"));
    }
    if id.chars().any(|c| c == '/' || c.is_control()) {
        return Err(bad(field, "must not contain '/' or control characters"));
    }
    Ok(())
}

pub(super) fn check_namespace(field: &str, ns: &Namespace) -> Result<(), ApiError> {
    if ns.len() > MAX_NAMESPACE_KEYS {
        return Err(bad(
            field,
            format!("at most {MAX_NAMESPACE_KEYS} keys are allowed"),
        ));
    }
    for (key, value) in ns {
        if key.is_empty() || key.len() > 128 {
            return Err(bad(field, "keys must be 1 to 128 bytes long"));
        }
        if value.is_empty() || value.len() > 512 {
            return Err(bad(
                format!("{field}.{key}"),
                "must be a non-empty string of at most 512 bytes",
            ));
        }
    }
    if let Some(session) = ns.get("session_id") {
        check_id(&format!("{field}.session_id"), session)?;
    }
    Ok(())
}
