//! The primitives every settings parser shares, whoever owns the section: the config file's
//! tables, each tool kind's own entries, the agent API's registrations. A leaf: it depends on
//! nothing of the crate, so `config` and the tool kinds both build on it without reaching into
//! each other. (Secrets are [`crate::redact::Secret`]: the redactor must know them.)

/// Names the model and URLs see: the OpenAI function-name rule.
pub fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Checks that `u` is an http(s) URL.
pub fn check_url(u: &str) -> Result<String, String> {
    let parsed = url::Url::parse(u).map_err(|e| format!("{u:?} is not a valid URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("{u:?} must be an http or https URL"));
    }
    Ok(u.to_string())
}

/// Reads a table into `T`, naming the key of any problem.
pub fn from_table<T: serde::de::DeserializeOwned>(
    table: toml::Table,
) -> Result<T, (String, String)> {
    serde_path_to_error::deserialize(toml::Value::Table(table))
        .map_err(|e| (e.path().to_string(), e.inner().to_string()))
}
