//! Media preparation before a model call: each provider says which media it takes and how
//! ([`MediaSupport`]); URL sources a provider cannot fetch itself are downloaded here under a
//! [`MediaPolicy`] (schemes, hosts, no private addresses, size and time limits); what cannot be
//! used is dropped and reported, never silently.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use base64::Engine;
use futures::StreamExt;
use serde::Serialize;

use super::Provider;
use crate::conversation::{ContentBlock, Media, MediaSource, Message, ToolResultBlock};

/// How a provider takes one media block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MediaSupport {
    /// As it is.
    Native,
    /// Only as inline bytes: a URL source must be downloaded first.
    NeedsBytes,
    /// Not at all, and why.
    Unsupported(String),
}

/// Where and how media URLs may be fetched.
#[derive(Debug, Clone)]
pub struct MediaPolicy {
    /// Allowed URL schemes.
    pub allow_schemes: Vec<String>,
    /// Allowed hosts (exact, or `.example.com` for subdomains); empty allows any public host.
    pub allow_hosts: Vec<String>,
    /// Whether loopback, private and link-local addresses may be fetched.
    pub allow_private: bool,
    /// The largest accepted download.
    pub max_bytes: usize,
    /// Time limit of one download.
    pub timeout: Duration,
}

impl Default for MediaPolicy {
    fn default() -> Self {
        Self {
            allow_schemes: vec!["https".into()],
            allow_hosts: Vec::new(),
            allow_private: false,
            max_bytes: 20 * 1024 * 1024,
            timeout: Duration::from_secs(20),
        }
    }
}

/// A media block that could not be used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Dropped {
    /// `image`, `audio`, `video` or `document`.
    pub kind: String,
    /// Why.
    pub reason: String,
}

/// Whether an address is one a fetch must not reach unless private fetches are allowed: the
/// outbound URL policy's classifier (embedded IPv4 in IPv6 forms included).
pub fn is_private(ip: IpAddr) -> bool {
    crate::outbound::classify(ip).is_some()
}

fn host_allowed(host: &str, allow: &[String]) -> bool {
    allow.is_empty()
        || allow.iter().any(|a| match a.strip_prefix('.') {
            Some(suffix) => host.ends_with(&format!(".{suffix}")) || host == suffix,
            None => host.eq_ignore_ascii_case(a),
        })
}

/// Downloads `url` under `policy`; returns the bytes and the response's media type.
pub async fn fetch(url: &str, policy: &MediaPolicy) -> Result<(Vec<u8>, Option<String>), String> {
    let parsed = url::Url::parse(url).map_err(|_| "not a valid URL".to_string())?;
    if !policy
        .allow_schemes
        .iter()
        .any(|s| s.eq_ignore_ascii_case(parsed.scheme()))
    {
        return Err(format!("URL scheme {:?} is not allowed", parsed.scheme()));
    }
    let host = parsed
        .host_str()
        .ok_or("URL has no host")?
        .trim_matches(['[', ']'])
        .to_string();
    if !host_allowed(&host, &policy.allow_hosts) {
        return Err(format!("host {host:?} is not in the allowed media hosts"));
    }
    let port = parsed.port_or_known_default().ok_or("URL has no port")?;
    let addrs: Vec<SocketAddr> = tokio::time::timeout(
        policy.timeout,
        tokio::net::lookup_host((host.as_str(), port)),
    )
    .await
    .map_err(|_| "DNS lookup timed out".to_string())?
    .map_err(|_| format!("cannot resolve {host:?}"))?
    .collect();
    if addrs.is_empty() {
        return Err(format!("cannot resolve {host:?}"));
    }
    if !policy.allow_private && addrs.iter().any(|a| is_private(a.ip())) {
        return Err(format!(
            "host {host:?} resolves to a private or loopback address"
        ));
    }
    // Pin the checked addresses so a second DNS answer cannot point elsewhere; no redirects,
    // since each hop would need the same checks.
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(policy.timeout)
        .resolve_to_addrs(&host, &addrs)
        .build()
        .map_err(|e| format!("cannot build an HTTP client: {e}"))?;
    let resp = client.get(parsed).send().await.map_err(|e| {
        if e.is_timeout() {
            "download timed out".to_string()
        } else {
            "download failed".to_string()
        }
    })?;
    if !resp.status().is_success() {
        return Err(format!("download answered HTTP {}", resp.status().as_u16()));
    }
    if resp
        .content_length()
        .is_some_and(|n| n as usize > policy.max_bytes)
    {
        return Err(format!("larger than the {} byte limit", policy.max_bytes));
    }
    let mime = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or(v).trim().to_ascii_lowercase())
        .filter(|v| !v.is_empty() && v != "application/octet-stream");
    let mut body = Vec::new();
    let mut stream = resp.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|_| "download broke off".to_string())?;
        if body.len() + chunk.len() > policy.max_bytes {
            return Err(format!("larger than the {} byte limit", policy.max_bytes));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, mime))
}

/// Makes every media block of `messages` usable by `provider`: keeps what it takes, downloads
/// URL sources it needs as bytes (each URL once), drops the rest. Returns what was dropped.
pub async fn prepare(
    messages: &mut [Message],
    provider: &dyn Provider,
    policy: &MediaPolicy,
) -> Vec<Dropped> {
    let mut dropped = Vec::new();
    let mut cache: HashMap<String, Result<(String, Option<String>), String>> = HashMap::new();
    for msg in messages.iter_mut() {
        let mut kept = Vec::with_capacity(msg.content.len());
        for block in std::mem::take(&mut msg.content) {
            match block {
                ContentBlock::Media(m) => match usable(m, provider, policy, &mut cache).await {
                    Ok(m) => kept.push(ContentBlock::Media(m)),
                    Err(d) => dropped.push(d),
                },
                ContentBlock::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                } => {
                    let mut parts = Vec::with_capacity(content.len());
                    for part in content {
                        match part {
                            ToolResultBlock::Media(m) => {
                                match usable(m, provider, policy, &mut cache).await {
                                    Ok(m) => parts.push(ToolResultBlock::Media(m)),
                                    Err(d) => {
                                        parts.push(ToolResultBlock::Text {
                                            text: format!("[{} omitted: {}]", d.kind, d.reason),
                                        });
                                        dropped.push(d);
                                    }
                                }
                            }
                            text => parts.push(text),
                        }
                    }
                    kept.push(ContentBlock::ToolResult {
                        tool_use_id,
                        content: parts,
                        is_error,
                    });
                }
                other => kept.push(other),
            }
        }
        msg.content = kept;
    }
    dropped
}

async fn usable(
    mut m: Media,
    provider: &dyn Provider,
    policy: &MediaPolicy,
    cache: &mut HashMap<String, Result<(String, Option<String>), String>>,
) -> Result<Media, Dropped> {
    let drop = |m: &Media, reason: String| Dropped {
        kind: m.kind.as_str().to_string(),
        reason,
    };
    match provider.media_support(&m) {
        MediaSupport::Native => return Ok(m),
        MediaSupport::Unsupported(why) => return Err(drop(&m, why)),
        MediaSupport::NeedsBytes => {}
    }
    let MediaSource::Url { url } = &m.source else {
        return Err(drop(
            &m,
            format!("{} cannot take this source", provider.name()),
        ));
    };
    let url = url.clone();
    if !cache.contains_key(&url) {
        let got = fetch(&url, policy).await.map(|(bytes, mime)| {
            (
                base64::engine::general_purpose::STANDARD.encode(bytes),
                mime,
            )
        });
        cache.insert(url.clone(), got);
    }
    match &cache[&url] {
        Err(why) => Err(drop(&m, format!("could not fetch {url}: {why}"))),
        Ok((data, mime)) => {
            if m.mime_type.is_none() {
                m.mime_type = mime.clone();
            }
            if m.filename.is_none() {
                m.filename = url
                    .rsplit('/')
                    .next()
                    .filter(|f| !f.is_empty())
                    .map(str::to_string);
            }
            m.source = MediaSource::Base64 { data: data.clone() };
            match provider.media_support(&m) {
                MediaSupport::Native => Ok(m),
                MediaSupport::Unsupported(why) => Err(drop(&m, why)),
                MediaSupport::NeedsBytes => Err(drop(&m, "still unusable after download".into())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_ranges_are_recognised() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_private(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "2606:4700::1111", "8.8.8.8"] {
            assert!(!is_private(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn host_allow_lists() {
        assert!(host_allowed("x.com", &[]));
        assert!(host_allowed("cdn.example.com", &[".example.com".into()]));
        assert!(host_allowed("example.com", &[".example.com".into()]));
        assert!(!host_allowed(
            "example.com.evil.net",
            &[".example.com".into()]
        ));
        assert!(!host_allowed("other.com", &["x.com".into()]));
    }

    #[tokio::test]
    async fn loopback_and_bad_schemes_are_refused_by_default() {
        let p = MediaPolicy::default();
        assert!(
            fetch("http://127.0.0.1:9/x.png", &p)
                .await
                .unwrap_err()
                .contains("scheme")
        );
        let p = MediaPolicy {
            allow_schemes: vec!["http".into()],
            ..MediaPolicy::default()
        };
        assert!(
            fetch("http://127.0.0.1:9/x.png", &p)
                .await
                .unwrap_err()
                .contains("private")
        );
        assert!(
            fetch("http://localhost:9/x.png", &p)
                .await
                .unwrap_err()
                .contains("private")
        );
        assert!(
            fetch("file:///etc/passwd", &p)
                .await
                .unwrap_err()
                .contains("scheme")
        );
    }
}
