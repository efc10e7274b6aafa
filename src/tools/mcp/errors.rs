//! Errors as an operator needs them: the transport's root cause unwrapped from rmcp's
//! wrappers, and URL credentials kept out of health output, logs and tool results.

use std::error::Error as StdError;

use rmcp::ServiceError;
use rmcp::service::ClientInitializeError;
use rmcp::transport::streamable_http_client::StreamableHttpError;

use super::McpTransport;

/// A transport error as "what failed: the root cause". rmcp's wrappers keep the transport's
/// own error out of `source()`, so they are unwrapped by hand; the root cause (e.g.
/// "Connection refused") is what an operator needs and the top-level message leaves it out.
pub(super) fn describe(e: &(dyn StdError + 'static)) -> String {
    let mut e = e;
    loop {
        if let Some(ServiceError::TransportSend(t)) = e.downcast_ref::<ServiceError>() {
            e = t.error.as_ref();
        } else if let Some(ClientInitializeError::TransportError { error, .. }) =
            e.downcast_ref::<ClientInitializeError>()
        {
            e = error.error.as_ref();
        } else if let Some(StreamableHttpError::Client(c)) =
            e.downcast_ref::<StreamableHttpError<reqwest::Error>>()
        {
            e = c;
        } else {
            break;
        }
    }
    let top = e.to_string();
    let mut root = None;
    let mut next = e.source();
    while let Some(s) = next {
        root = Some(s);
        next = s.source();
    }
    match root.map(|r| r.to_string()) {
        Some(r) if !top.contains(&r) => format!("{top}: {r}"),
        _ => top,
    }
}

/// Keeps URLs' credentials (user info, query) out of health output, logs and tool results.
pub(super) struct Redactor {
    replace: Vec<(String, String)>,
}

impl Redactor {
    pub(super) fn new(t: &McpTransport) -> Self {
        let mut replace = Vec::new();
        if let McpTransport::Http { url, .. } = t
            && let Ok(parsed) = url::Url::parse(url)
        {
            let mut safe = parsed.clone();
            let _ = safe.set_username("");
            let _ = safe.set_password(None);
            safe.set_query(None);
            safe.set_fragment(None);
            replace.push((parsed.to_string(), safe.to_string()));
            replace.push((url.clone(), safe.to_string()));
        }
        Self { replace }
    }

    pub(super) fn clean(&self, s: &str) -> String {
        let mut out = s.to_string();
        for (from, to) in &self.replace {
            if from != to {
                out = out.replace(from.as_str(), to);
            }
        }
        const MAX: usize = 400;
        if out.len() > MAX {
            let mut cut = MAX;
            while !out.is_char_boundary(cut) {
                cut -= 1;
            }
            out.truncate(cut);
            out.push('…');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_their_credentials_in_messages() {
        let r = Redactor::new(&McpTransport::Http {
            url: "https://u:p@mcp.example.com/mcp?key=abc".into(),
            headers: vec![],
            bearer_token: None,
            sse: false,
        });
        let s = r.clean("error sending request for url (https://u:p@mcp.example.com/mcp?key=abc)");
        assert_eq!(
            s,
            "error sending request for url (https://mcp.example.com/mcp)"
        );
    }
}
