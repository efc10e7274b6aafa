//! `[auth]`: API keys (kept as SHA-256 hashes only), each with the agents it may run and
//! whether it may use the admin APIs. No keys: the gateway is open (local use).

use serde::Deserialize;

use super::Fail;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AuthFile {
    #[serde(default)]
    keys: Vec<KeyFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    name: String,
    #[serde(default)]
    sha256: Option<String>,
    #[serde(default)]
    key_env: Option<String>,
    #[serde(default)]
    agents: Option<Vec<String>>,
    #[serde(default)]
    admin: bool,
    #[serde(default)]
    max_concurrent_runs: Option<usize>,
}

/// One API key: its hash, never the key.
#[derive(Clone)]
pub struct ApiKey {
    /// A label for logs and metrics.
    pub name: String,
    /// SHA-256 of the key.
    pub hash: [u8; 32],
    /// Agents this key may run (`*`: all).
    pub agents: Vec<String>,
    /// May register agents, models and connectors, ingest documents and read memory.
    pub admin: bool,
    /// At most this many runs at once with this key (beyond: 429 with Retry-After).
    pub max_concurrent_runs: Option<usize>,
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiKey")
            .field("name", &self.name)
            .field("agents", &self.agents)
            .field("admin", &self.admin)
            .finish_non_exhaustive()
    }
}

impl ApiKey {
    /// Whether this key may run `agent`.
    pub fn allows(&self, agent: &str) -> bool {
        self.agents.iter().any(|a| a == "*" || a == agent)
    }
}

/// SHA-256 of a presented key.
pub fn hash_key(key: &str) -> [u8; 32] {
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, key.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// Lowercase hex of a hash (what `agui-gateway hash-key` prints).
pub fn hex(hash: &[u8; 32]) -> String {
    hash.iter().map(|b| format!("{b:02x}")).collect()
}

pub(super) fn resolve(
    file: AuthFile,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<ApiKey>, Fail> {
    let mut keys: Vec<ApiKey> = Vec::new();
    for (i, k) in file.keys.into_iter().enumerate() {
        let at = |f: &str| format!("auth.keys[{i}].{f}");
        let hash = match (&k.sha256, &k.key_env) {
            (Some(h), None) => parse_hex(h).ok_or_else(|| {
                (
                    at("sha256"),
                    "must be 64 hex digits (agui-gateway hash-key prints them)".to_string(),
                )
            })?,
            (None, Some(var)) => match env(var) {
                Some(v) if v.len() >= 16 => hash_key(&v),
                Some(_) => {
                    return Err((
                        at("key_env"),
                        format!("the key in {var} is shorter than 16 characters"),
                    ));
                }
                None => return Err((at("key_env"), format!("{var} is not set"))),
            },
            _ => {
                return Err((
                    at("sha256"),
                    "give exactly one of sha256 and key_env".to_string(),
                ));
            }
        };
        if k.name.trim().is_empty() {
            return Err((at("name"), "must not be empty".into()));
        }
        if keys.iter().any(|o| o.name == k.name) {
            return Err((at("name"), format!("{:?} is used twice", k.name)));
        }
        if keys.iter().any(|o| o.hash == hash) {
            return Err((at("sha256"), "the same key is listed twice".into()));
        }
        keys.push(ApiKey {
            name: k.name,
            hash,
            agents: k.agents.unwrap_or_else(|| vec!["*".into()]),
            admin: k.admin,
            max_concurrent_runs: k.max_concurrent_runs.map(|n| n.max(1)),
        });
    }
    Ok(keys)
}

fn parse_hex(s: &str) -> Option<[u8; 32]> {
    let s = s.trim();
    if s.len() != 64 || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&s[i * 2..i * 2 + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_hashed_and_checked() {
        let env = |v: &str| (v == "K").then(|| "a-very-long-secret-key".to_string());
        let h = hex(&hash_key("other-long-secret-key"));
        let file: AuthFile = toml::from_str(&format!(
            r#"
            [[keys]]
            name = "site"
            key_env = "K"
            agents = ["demo"]
            [[keys]]
            name = "ops"
            sha256 = "{h}"
            admin = true
            "#
        ))
        .unwrap();
        let keys = resolve(file, &env).unwrap();
        assert_eq!(keys[0].hash, hash_key("a-very-long-secret-key"));
        assert!(keys[0].allows("demo") && !keys[0].allows("other") && !keys[0].admin);
        assert!(keys[1].allows("anything") && keys[1].admin);
        assert!(!format!("{keys:?}").contains("a-very-long"));
        let bad: AuthFile = toml::from_str("[[keys]]\nname = \"x\"\nsha256 = \"zz\"\n").unwrap();
        assert_eq!(resolve(bad, &env).unwrap_err().0, "auth.keys[0].sha256");
        let short = |_: &str| Some("short".to_string());
        let f: AuthFile = toml::from_str("[[keys]]\nname = \"x\"\nkey_env = \"K\"\n").unwrap();
        assert!(resolve(f, &short).unwrap_err().1.contains("shorter"));
    }
}
