//! One redactor for every secret the gateway holds. Constructing a [`Secret`] makes its value
//! known to a process-wide set; every log line, event frame, error answer and stored document
//! passes [`redact`] (or [`redact_value`]) on its way out, so a secret an upstream echoes back
//! ("Incorrect API key provided: sk-...") never leaves, whichever path it takes.
//!
//! Known values are matched with one Aho-Corasick automaton, rebuilt when a new value arrives
//! (rare: start-up, registrations) and read through a shared pointer, so the hot path (one scan
//! per event frame) costs one uncontended read lock and one SIMD-prefiltered pass.
//!
//! The set only grows: a key that was once in use may still come back in an old upstream
//! answer, and secrets are few (one per credential, not per request).

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use aho_corasick::{AhoCorasick, MatchKind};
use serde_json::Value;

/// What a secret is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// Shorter values are not registered: redacting them would mangle ordinary text, and a
/// credential that short is no secret anyway.
pub const MIN_LEN: usize = 8;

/// The registered values (the writers' side).
static KNOWN: Mutex<BTreeSet<Box<str>>> = Mutex::new(BTreeSet::new());
/// The automaton over [`KNOWN`] (the readers' side).
static MATCHER: RwLock<Option<Arc<AhoCorasick>>> = RwLock::new(None);
/// Whether anything is registered: with no secrets the scan is skipped entirely.
static ANY: AtomicBool = AtomicBool::new(false);

/// A secret value: never printed by `Debug`, and known to the redactor from the moment it is
/// made.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Arc<str>);

impl Secret {
    /// Wraps a secret and registers it with the redactor.
    pub fn new(s: impl Into<Arc<str>>) -> Self {
        let s = s.into();
        register(&s);
        Self(s)
    }

    /// An HTTP header's value: registered when the header carries credentials (by its name,
    /// or a value in the `Bearer <token>` shape). Ordinary headers (`Accept:
    /// application/json`) are not, so their values are not cut out of unrelated text.
    pub fn header(name: &str, value: impl Into<Arc<str>>) -> Self {
        let value = value.into();
        register_header(name, &value);
        Self(value)
    }

    /// The secret itself, for the one place that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

/// Whether a header or field name says its value is a credential.
pub fn is_sensitive_name(name: &str) -> bool {
    const WORDS: &[&str] = &[
        "auth",
        "key",
        "token",
        "secret",
        "password",
        "passwd",
        "cookie",
        "session",
        "credential",
        "signature",
        "bearer",
    ];
    let n = name.to_ascii_lowercase();
    WORDS.iter().any(|w| n.contains(w))
}

/// Registers a header's value if it carries credentials (see [`Secret::header`]).
pub fn register_header(name: &str, value: &str) {
    let schemed = value
        .split_once(' ')
        .is_some_and(|(scheme, _)| is_auth_scheme(scheme));
    if is_sensitive_name(name) || schemed {
        register(value);
    }
}

fn is_auth_scheme(s: &str) -> bool {
    ["bearer", "basic", "token", "apikey", "key"]
        .iter()
        .any(|k| s.eq_ignore_ascii_case(k))
}

/// Registers the credentials a URL carries: its password (`user:password@`) and the values of
/// query parameters named like one (`?api_key=...`, `&token=...`). A server or driver may quote
/// them alone, without the URL around them.
pub fn register_url(url: &url::Url) {
    if let Some(pw) = url.password() {
        register(pw);
    }
    for (name, value) in url.query_pairs() {
        if is_sensitive_name(&name) {
            register(&value);
        }
    }
}

/// Makes `value` known to the redactor. Values shorter than [`MIN_LEN`] are ignored. A value
/// in an `Authorization` shape (`Bearer <token>`) registers its token as well (an upstream
/// may quote the token alone), and a `Basic` one its decoded password.
pub fn register(value: &str) {
    let mut forms: Vec<String> = Vec::with_capacity(4);
    add_forms(value, &mut forms);
    if let Some((scheme, rest)) = value.trim().split_once(' ')
        && is_auth_scheme(scheme)
    {
        let rest = rest.trim();
        add_forms(rest, &mut forms);
        if scheme.eq_ignore_ascii_case("basic") {
            use base64::Engine;
            if let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(rest)
                && let Ok(text) = String::from_utf8(bytes)
            {
                let password = text.split_once(':').map_or(text.as_str(), |(_, p)| p);
                add_forms(password, &mut forms);
            }
        }
    }
    if forms.is_empty() {
        return;
    }
    let Ok(mut known) = KNOWN.lock() else {
        return;
    };
    let mut added = false;
    for f in forms {
        added |= known.insert(f.into_boxed_str());
    }
    if !added {
        return;
    }
    // Longest first among overlapping values, so a token inside its `Bearer` header value
    // is not left half-replaced.
    let built = AhoCorasick::builder()
        .match_kind(MatchKind::LeftmostLongest)
        .build(known.iter().map(|s| s.as_bytes()));
    if let (Ok(ac), Ok(mut slot)) = (built, MATCHER.write()) {
        *slot = Some(Arc::new(ac));
        ANY.store(true, Ordering::Release);
    }
}

/// A value and its JSON-escaped form (what it looks like inside an encoded JSON string), if
/// long enough.
fn add_forms(value: &str, out: &mut Vec<String>) {
    // A template (`Bearer ${credential.key}`) is not the secret; what it expands to is.
    if value.len() < MIN_LEN || value.contains("${") {
        return;
    }
    out.push(value.to_string());
    if let Ok(quoted) = serde_json::to_string(value) {
        let escaped = &quoted[1..quoted.len() - 1];
        if escaped != value {
            out.push(escaped.to_string());
        }
    }
}

/// Registers every string of a credential document (e.g. an opened sealed credential).
/// Inside a `headers` object only credential-bearing headers count (see [`Secret::header`]).
pub fn register_json(value: &Value) {
    match value {
        Value::String(s) => register(s),
        Value::Array(a) => a.iter().for_each(register_json),
        Value::Object(o) => {
            for (k, v) in o {
                match v {
                    Value::Object(headers) if k.ends_with("headers") => {
                        for (name, hv) in headers {
                            if let Some(s) = hv.as_str() {
                                register_header(name, s);
                            }
                        }
                    }
                    _ => register_json(v),
                }
            }
        }
        _ => {}
    }
}

fn matcher() -> Option<Arc<AhoCorasick>> {
    if !ANY.load(Ordering::Acquire) {
        return None;
    }
    MATCHER.read().ok().and_then(|m| m.clone())
}

/// Whether `text` holds a known secret.
pub fn contains_secret(text: &str) -> bool {
    matcher().is_some_and(|m| m.is_match(text))
}

/// Whether `bytes` hold a known secret.
pub fn contains_secret_bytes(bytes: &[u8]) -> bool {
    matcher().is_some_and(|m| m.is_match(bytes))
}

/// `text` with every known secret replaced by [`REDACTED`]; borrowed when there was none.
pub fn redact(text: &str) -> Cow<'_, str> {
    match matcher() {
        Some(m) if m.is_match(text) => {
            Cow::Owned(m.replace_all(text, &vec![REDACTED; m.patterns_len()]))
        }
        _ => Cow::Borrowed(text),
    }
}

/// [`redact`] on bytes (a log line, which may not be UTF-8).
pub fn redact_bytes(bytes: &[u8]) -> Cow<'_, [u8]> {
    match matcher() {
        Some(m) if m.is_match(bytes) => {
            Cow::Owned(m.replace_all_bytes(bytes, &vec![REDACTED.as_bytes(); m.patterns_len()]))
        }
        _ => Cow::Borrowed(bytes),
    }
}

/// Redacts `text` in place; returns whether anything was replaced.
pub fn redact_string(text: &mut String) -> bool {
    match redact(text) {
        Cow::Borrowed(_) => false,
        Cow::Owned(s) => {
            *text = s;
            true
        }
    }
}

/// Redacts every string (and object key) of a JSON document in place; returns whether
/// anything was replaced. Only strings are touched, so the document keeps its shape.
pub fn redact_value(value: &mut Value) -> bool {
    let Some(m) = matcher() else {
        return false;
    };
    walk(&m, value)
}

fn walk(m: &AhoCorasick, value: &mut Value) -> bool {
    match value {
        Value::String(s) if m.is_match(s.as_str()) => {
            *s = m.replace_all(s, &vec![REDACTED; m.patterns_len()]);
            true
        }
        Value::Array(a) => a.iter_mut().fold(false, |acc, v| walk(m, v) | acc),
        Value::Object(o) => {
            let mut changed = false;
            if o.keys().any(|k| m.is_match(k.as_str())) {
                let old = std::mem::take(o);
                for (k, v) in old {
                    let k = if m.is_match(k.as_str()) {
                        changed = true;
                        m.replace_all(&k, &vec![REDACTED; m.patterns_len()])
                    } else {
                        k
                    };
                    o.insert(k, v);
                }
            }
            o.values_mut().fold(changed, |acc, v| walk(m, v) | acc)
        }
        _ => false,
    }
}

/// An encoded JSON text (an event frame) with known secrets removed from its strings; the
/// text as it was when it holds none. The scan runs over the encoded text once; only a hit
/// pays for a parse, so replacements stay inside strings and the JSON stays valid.
pub fn redact_json_text(json: String) -> String {
    let Some(m) = matcher() else {
        return json;
    };
    if !m.is_match(json.as_str()) {
        return json;
    }
    match serde_json::from_str::<Value>(&json) {
        Ok(mut v) => {
            walk(&m, &mut v);
            v.to_string()
        }
        // Not JSON after all: plain replacement is the best there is.
        Err(_) => m.replace_all(&json, &vec![REDACTED; m.patterns_len()]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_urls_password_and_key_parameters_are_secrets() {
        let url = url::Url::parse(
            "https://u:pw-url-EEEE-5555@h.example/mcp?api_key=k-url-FFFF-6666&page=2",
        )
        .unwrap();
        register_url(&url);
        let text = "said pw-url-EEEE-5555 and k-url-FFFF-6666 on page=2";
        let clean = redact(text);
        assert!(
            !clean.contains("pw-url-EEEE") && !clean.contains("k-url-FFFF"),
            "{clean}"
        );
        assert!(clean.contains("page=2"));
    }
    use serde_json::json;

    // The set is process-wide: each test uses values of its own.

    #[test]
    fn registered_values_are_replaced_everywhere() {
        let s = Secret::new("sk-unit-AAAA-1111");
        assert_eq!(format!("{s:?}"), REDACTED);
        assert_eq!(
            redact("Incorrect API key provided: sk-unit-AAAA-1111."),
            "Incorrect API key provided: [REDACTED]."
        );
        assert!(matches!(redact("nothing here"), Cow::Borrowed(_)));
        assert_eq!(
            redact_bytes(b"x sk-unit-AAAA-1111 y").as_ref(),
            b"x [REDACTED] y"
        );
    }

    #[test]
    fn short_values_are_ignored() {
        register("abc1234");
        assert_eq!(redact("abc1234 stays"), "abc1234 stays");
    }

    #[test]
    fn bearer_headers_register_their_token_and_plain_headers_nothing() {
        let _ = Secret::header("Authorization", "Bearer tok-unit-BBBB-2222");
        assert_eq!(redact("got tok-unit-BBBB-2222"), "got [REDACTED]");
        assert_eq!(
            redact("header Bearer tok-unit-BBBB-2222"),
            "header [REDACTED]"
        );
        let _ = Secret::header("Accept", "application/x-unit-plain");
        assert_eq!(
            redact("application/x-unit-plain"),
            "application/x-unit-plain"
        );
        let _ = Secret::header("X-Api-Key", "plainish-unit-CCCC");
        assert_eq!(redact("plainish-unit-CCCC"), REDACTED);
    }

    #[test]
    fn basic_auth_registers_the_password() {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::STANDARD.encode("user:pw-unit-DDDD-3333");
        register(&format!("Basic {b64}"));
        assert_eq!(redact("password pw-unit-DDDD-3333"), "password [REDACTED]");
    }

    #[test]
    fn json_documents_keep_their_shape() {
        register("quo\"te-unit-EEEE");
        let mut v = json!({"a": ["x quo\"te-unit-EEEE y", 12345678], "quo\"te-unit-EEEE": 1});
        assert!(redact_value(&mut v));
        assert_eq!(
            v,
            json!({"a": ["x [REDACTED] y", 12345678], "[REDACTED]": 1})
        );
        let text = json!({"message": "bad quo\"te-unit-EEEE"}).to_string();
        let out = redact_json_text(text);
        assert_eq!(
            serde_json::from_str::<Value>(&out).unwrap(),
            json!({"message": "bad [REDACTED]"})
        );
    }

    #[test]
    fn credential_documents_register_credentials_but_not_plain_headers() {
        register_json(&json!({
            "openAI_key": "sk-unit-FFFF-4444",
            "/tools/0/headers": {"Content-Type": "application/x-unit-json", "X-Token": "hdr-unit-GGGG"},
        }));
        assert_eq!(
            redact("sk-unit-FFFF-4444 hdr-unit-GGGG"),
            "[REDACTED] [REDACTED]"
        );
        assert_eq!(redact("application/x-unit-json"), "application/x-unit-json");
    }

    /// A rough figure for the per-frame cost (run with `--ignored --nocapture`).
    #[test]
    #[ignore]
    fn frame_scan_cost() {
        for i in 0..20 {
            register(&format!("sk-bench-{i:04}-abcdefghijklmnop"));
        }
        let frame = r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"msg_0123456789abcdef","delta":"Hello, this is a typical token ","timestamp":1712345678901}"#.to_string();
        let n = 1_000_000;
        let t = std::time::Instant::now();
        let mut total = 0;
        for _ in 0..n {
            total += redact_json_text(std::hint::black_box(frame.clone())).len();
        }
        let with = t.elapsed();
        let t = std::time::Instant::now();
        for _ in 0..n {
            total += std::hint::black_box(frame.clone()).len();
        }
        let without = t.elapsed();
        println!(
            "per frame: {:?} with the scan, {:?} without ({total})",
            with / n,
            without / n
        );
    }
}
