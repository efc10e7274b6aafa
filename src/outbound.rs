//! The outbound URL policy: where URLs that come in through the API (registered connectors,
//! models, tools, MCP servers) may lead.
//!
//! An address is refused when it is not globally reachable (loopback, private, link-local,
//! CGNAT, unique-local, documentation, benchmarking, multicast, ...), including IPv4 addresses
//! embedded in IPv6 forms (mapped, compatible, NAT64, 6to4, Teredo), unless the operator allowed
//! it: `[outbound] trusted_endpoints` (regexes matched against the whole URL, like ml-commons'
//! `trusted_connector_endpoints_regex`) or `[outbound] allowed_cidrs`.
//!
//! URLs are checked when they are registered (literal addresses, `localhost`) and again when a
//! request goes out: a guarded client resolves names through [`GuardedResolver`], which drops
//! refused addresses, and re-checks every redirect. reqwest does not resolve IP literals, so
//! every URL is also checked before a client is handed out for it ([`Net::client_for`]).
//! Entries of the config file are the operator's and stay unchecked ([`Net::Open`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;
use regex::Regex;

/// Why a URL or address may not be reached.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refused {
    /// Not an absolute http(s) URL.
    #[error("{0:?} is not an http or https URL")]
    BadUrl(String),
    /// The host is (or resolves to) an address the policy refuses.
    #[error(
        "{host:?} is a {class} address, refused by the outbound URL policy (allow it with [outbound] trusted_endpoints or allowed_cidrs)"
    )]
    Address {
        /// The host as written.
        host: String,
        /// What kind of address it is.
        class: &'static str,
    },
    /// A redirect led somewhere the policy refuses.
    #[error("a redirect to {0:?} was refused by the outbound URL policy")]
    Redirect(String),
}

/// Why the `[outbound]` settings are wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// A `trusted_endpoints` entry is not a regex.
    #[error("trusted_endpoints: {0}")]
    Regex(String),
    /// An `allowed_cidrs` entry is not a CIDR.
    #[error("allowed_cidrs: {0:?} is not a CIDR like 10.0.0.0/8 or fd00::/8")]
    Cidr(String),
}

const fn v4(a: u8, b: u8, c: u8, d: u8) -> u32 {
    u32::from_be_bytes([a, b, c, d])
}

/// IPv4 ranges that are not globally reachable (IANA special-purpose registry), with a name.
const V4_REFUSED: &[(u32, u8, &str)] = &[
    (v4(0, 0, 0, 0), 8, "\"this network\""),
    (v4(10, 0, 0, 0), 8, "private"),
    (v4(100, 64, 0, 0), 10, "shared (CGNAT)"),
    (v4(127, 0, 0, 0), 8, "loopback"),
    (v4(169, 254, 0, 0), 16, "link-local"),
    (v4(172, 16, 0, 0), 12, "private"),
    (v4(192, 0, 0, 0), 24, "IETF protocol assignment"),
    (v4(192, 0, 2, 0), 24, "documentation"),
    (v4(192, 88, 99, 0), 24, "6to4 relay"),
    (v4(192, 168, 0, 0), 16, "private"),
    (v4(198, 18, 0, 0), 15, "benchmarking"),
    (v4(198, 51, 100, 0), 24, "documentation"),
    (v4(203, 0, 113, 0), 24, "documentation"),
    (v4(224, 0, 0, 0), 4, "multicast"),
    (v4(240, 0, 0, 0), 4, "reserved"),
];

/// The kind of a refused IPv4 address; `None` when it is globally reachable.
fn classify_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let n = u32::from(ip);
    V4_REFUSED
        .iter()
        .find(|(net, len, _)| n >> (32 - len) == net >> (32 - len))
        .map(|(_, _, class)| *class)
}

/// The IPv4 address an IPv6 address carries, when it is one of the forms that reach IPv4
/// hosts: mapped `::ffff:a.b.c.d`, compatible `::a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4
/// `2002::/16`, and Teredo `2001::/32` (both its server and its obfuscated client address).
fn embedded_v4(ip: Ipv6Addr) -> Vec<Ipv4Addr> {
    let s = ip.segments();
    let pair = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    if let Some(v4) = ip.to_ipv4_mapped() {
        return vec![v4];
    }
    if s[..6] == [0; 6] {
        return vec![pair(s[6], s[7])];
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return vec![pair(s[6], s[7])];
    }
    if s[0] == 0x2002 {
        return vec![pair(s[1], s[2])];
    }
    if s[0] == 0x2001 && s[1] == 0 {
        return vec![pair(s[2], s[3]), pair(!s[6], !s[7])];
    }
    Vec::new()
}

/// IPv6 ranges that are not globally reachable, with a name (checked after embedded IPv4).
const V6_REFUSED: &[(u128, u8, &str)] = &[
    (0, 128, "unspecified"),
    (1, 128, "loopback"),
    (0x0064_ff9b_0001 << 80, 48, "NAT64 local-use"),
    (0x0100 << 112, 64, "discard-only"),
    (0x2001_0002 << 96, 48, "benchmarking"),
    (0x2001_0010 << 96, 28, "ORCHID"),
    (0x2001_0020 << 96, 28, "ORCHIDv2"),
    (0x2001_0db8 << 96, 32, "documentation"),
    (0x3fff << 112, 20, "documentation"),
    (0x5f00 << 112, 16, "segment-routing"),
    (0xfc00 << 112, 7, "unique-local"),
    (0xfe80 << 112, 10, "link-local"),
    (0xfec0 << 112, 10, "site-local"),
    (0xff00 << 112, 8, "multicast"),
];

/// The kind of a refused address (`"loopback"`, `"private"`, ...); `None` when the address is
/// globally reachable. IPv6 forms that carry an IPv4 address are refused when it is.
pub fn classify(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => {
            let n = u128::from(v6);
            if let Some((_, _, class)) = V6_REFUSED
                .iter()
                .find(|(net, len, _)| n >> (128 - len) == net >> (128 - len))
            {
                return Some(class);
            }
            embedded_v4(v6).into_iter().find_map(classify_v4)
        }
    }
}

/// What the operator allowed beyond public addresses.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    trusted: Vec<Regex>,
    allowed: Vec<IpNet>,
}

impl Policy {
    /// A policy from `[outbound] trusted_endpoints` (regexes over whole URLs, anchored as
    /// written) and `allowed_cidrs`.
    pub fn new(trusted: &[String], cidrs: &[String]) -> Result<Self, PolicyError> {
        let trusted = trusted
            .iter()
            .map(|r| Regex::new(r).map_err(|e| PolicyError::Regex(e.to_string())))
            .collect::<Result<_, _>>()?;
        let allowed = cidrs
            .iter()
            .map(|c| {
                c.parse::<IpNet>()
                    .or_else(|_| c.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| PolicyError::Cidr(c.clone()))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { trusted, allowed })
    }

    /// Whether `url` matches a `trusted_endpoints` pattern.
    pub fn is_trusted(&self, url: &url::Url) -> bool {
        self.trusted.iter().any(|r| r.is_match(url.as_str()))
    }

    /// The kind of `ip` when the policy refuses it.
    pub fn refuses(&self, ip: IpAddr) -> Option<&'static str> {
        // Compare IPv4-mapped addresses as IPv4 so `127.0.0.0/8` covers `::ffff:127.0.0.1`.
        let plain = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        if self
            .allowed
            .iter()
            .any(|n| n.contains(&ip) || n.contains(&plain))
        {
            return None;
        }
        classify(ip)
    }

    /// Checks what can be known without DNS: an http(s) URL whose host is not a refused
    /// literal address nor `localhost`. Trusted URLs pass.
    pub fn check_url(&self, url: &url::Url) -> Result<(), Refused> {
        if !matches!(url.scheme(), "http" | "https") || url.cannot_be_a_base() {
            return Err(Refused::BadUrl(url.to_string()));
        }
        if self.is_trusted(url) {
            return Ok(());
        }
        let refused = |host: &str, class| {
            Err(Refused::Address {
                host: host.to_string(),
                class,
            })
        };
        match url.host() {
            None => Err(Refused::BadUrl(url.to_string())),
            Some(url::Host::Ipv4(ip)) => match self.refuses(IpAddr::V4(ip)) {
                Some(class) => refused(&ip.to_string(), class),
                None => Ok(()),
            },
            Some(url::Host::Ipv6(ip)) => match self.refuses(IpAddr::V6(ip)) {
                Some(class) => refused(&format!("[{ip}]"), class),
                None => Ok(()),
            },
            Some(url::Host::Domain(d)) => {
                let d = d.trim_end_matches('.').to_ascii_lowercase();
                // Resolvers answer these locally (RFC 6761) without asking DNS.
                let local = d == "localhost" || d.ends_with(".localhost");
                match local.then(|| self.refuses(IpAddr::V4(Ipv4Addr::LOCALHOST))) {
                    Some(Some(class)) => refused(&d, class),
                    _ => Ok(()),
                }
            }
        }
    }

    /// [`Policy::check_url`] on URL text.
    pub fn check_str(&self, url: &str) -> Result<(), Refused> {
        let parsed = url::Url::parse(url).map_err(|_| Refused::BadUrl(url.to_string()))?;
        self.check_url(&parsed)
    }
}

/// A DNS resolver that drops the addresses the policy refuses; a name left with none fails.
#[derive(Debug, Clone)]
pub struct GuardedResolver {
    policy: Arc<Policy>,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = Arc::clone(&self.policy);
        Box::pin(async move {
            let host = name.as_str().to_string();
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut first_refused = None;
            let kept: Vec<SocketAddr> = found
                .into_iter()
                .filter(|a| match policy.refuses(a.ip()) {
                    Some(class) => {
                        first_refused.get_or_insert(class);
                        false
                    }
                    None => true,
                })
                .collect();
            if kept.is_empty() {
                let err: Box<dyn std::error::Error + Send + Sync> = match first_refused {
                    Some(class) => Box::new(Refused::Address { host, class }),
                    None => format!("{host:?} did not resolve").into(),
                };
                return Err(err);
            }
            let addrs: reqwest::dns::Addrs = Box::new(kept.into_iter());
            Ok(addrs)
        })
    }
}

/// The HTTP clients of registered entries: one whose every hop is guarded, and one for
/// trusted endpoints whose redirects must stay within trusted endpoints.
#[derive(Debug)]
pub struct Egress {
    policy: Arc<Policy>,
    guarded: reqwest::Client,
    trusted: reqwest::Client,
}

/// How many redirects a guarded request follows.
const MAX_REDIRECTS: usize = 10;

/// A client builder for `policy`: `trusted` (an endpoint matching `trusted_endpoints`)
/// follows redirects only to trusted endpoints; otherwise every name is resolved through the
/// guard and every redirect re-checked.
fn builder(policy: &Arc<Policy>, trusted: bool) -> reqwest::ClientBuilder {
    let b = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .pool_idle_timeout(Duration::from_secs(90))
        // A proxy from the environment would resolve names where the guard cannot see.
        .no_proxy();
    let p = Arc::clone(policy);
    let redirect = reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() >= MAX_REDIRECTS {
            return attempt.error("too many redirects");
        }
        let ok = match trusted {
            true => p.is_trusted(attempt.url()),
            false => p.check_url(attempt.url()).is_ok(),
        };
        if ok {
            attempt.follow()
        } else {
            let to = Refused::Redirect(attempt.url().to_string());
            attempt.error(to)
        }
    });
    let b = b.redirect(redirect);
    match trusted {
        true => b,
        false => b.dns_resolver(GuardedResolver {
            policy: Arc::clone(policy),
        }),
    }
}

impl Egress {
    /// The clients for `policy`.
    pub fn new(policy: Policy) -> Result<Self, reqwest::Error> {
        let policy = Arc::new(policy);
        Ok(Self {
            guarded: builder(&policy, false).build()?,
            trusted: builder(&policy, true).build()?,
            policy,
        })
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }
}

/// Where an entry came from, and so which HTTP client its URLs get.
#[derive(Debug, Clone)]
pub enum Net {
    /// The config file's: the operator's, unchecked.
    Open(reqwest::Client),
    /// The API's: checked by the outbound URL policy.
    Guarded(Arc<Egress>),
}

impl Net {
    /// The client to reach `url` with, or why it may not be reached.
    pub fn client_for(&self, url: &str) -> Result<reqwest::Client, Refused> {
        match self {
            Net::Open(c) => Ok(c.clone()),
            Net::Guarded(e) => {
                let parsed = url::Url::parse(url).map_err(|_| Refused::BadUrl(url.to_string()))?;
                e.policy.check_url(&parsed)?;
                Ok(match e.policy.is_trusted(&parsed) {
                    true => e.trusted.clone(),
                    false => e.guarded.clone(),
                })
            }
        }
    }

    /// A client of its own for `url`, built by `tune` from the right builder (for clients
    /// with other settings, e.g. MCP's unpooled one). The open net gives `None`: the caller's
    /// default.
    pub fn own_client_for(
        &self,
        url: &str,
        tune: impl FnOnce(reqwest::ClientBuilder) -> reqwest::ClientBuilder,
    ) -> Result<Option<reqwest::Client>, Refused> {
        let Net::Guarded(e) = self else {
            return Ok(None);
        };
        let parsed = url::Url::parse(url).map_err(|_| Refused::BadUrl(url.to_string()))?;
        e.policy.check_url(&parsed)?;
        tune(builder(&e.policy, e.policy.is_trusted(&parsed)))
            .build()
            .map(Some)
            .map_err(|_| Refused::BadUrl(url.to_string()))
    }

    /// The client for URLs checked elsewhere or not yet known: the open one, or the guarded one
    /// (names resolved through the guard, redirects re-checked; literal addresses unchecked).
    pub fn client(&self) -> reqwest::Client {
        match self {
            Net::Open(c) => c.clone(),
            Net::Guarded(e) => e.guarded.clone(),
        }
    }

    /// Checks `url` without handing out a client (for clients built elsewhere, e.g. the AWS
    /// SDK's).
    pub fn check(&self, url: &str) -> Result<(), Refused> {
        self.client_for(url).map(drop)
    }

    /// Whether this is the config file's unchecked client.
    pub fn is_open(&self) -> bool {
        matches!(self, Net::Open(_))
    }
}

/// The host of an `Origin` or `Host` value is a loopback name (`localhost`, `127.0.0.1`,
/// `[::1]`, any port).
pub fn is_loopback_host(authority: &str) -> bool {
    let host = match authority.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    host == "localhost"
        || host.ends_with(".localhost")
        || host
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_loopback() || embedded_loopback(ip))
}

fn embedded_loopback(ip: IpAddr) -> bool {
    matches!(ip, IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()))
}

/// An `Origin` header of a page served from a loopback host over http or https.
pub fn is_loopback_origin(origin: &[u8]) -> bool {
    let Ok(origin) = std::str::from_utf8(origin) else {
        return false;
    };
    let rest = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    match rest {
        Some(authority) if !authority.contains(['/', '@', '?', '#']) => is_loopback_host(authority),
        _ => false,
    }
}

/// Reads a response body up to `max` bytes; `true` when there was more.
pub async fn read_capped(
    resp: reqwest::Response,
    max: usize,
) -> Result<(Vec<u8>, bool), reqwest::Error> {
    use futures::StreamExt;
    let mut body = Vec::new();
    let mut stream = resp.bytes_stream();
    while let Some(chunk) = stream.next().await {
        body.extend_from_slice(&chunk?);
        if body.len() > max {
            body.truncate(max);
            return Ok((body, true));
        }
    }
    Ok((body, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(host_url: &str) -> Option<&'static str> {
        let url = url::Url::parse(host_url).unwrap();
        match Policy::default().check_url(&url) {
            Ok(()) => None,
            Err(Refused::Address { class, .. }) => Some(class),
            Err(e) => panic!("{host_url}: {e}"),
        }
    }

    #[test]
    fn ipv4_special_ranges_are_refused() {
        for (ip, class) in [
            ("0.0.0.0", "\"this network\""),
            ("0.1.2.3", "\"this network\""),
            ("10.0.0.1", "private"),
            ("10.255.255.255", "private"),
            ("100.64.0.1", "shared (CGNAT)"),
            ("100.127.255.254", "shared (CGNAT)"),
            ("127.0.0.1", "loopback"),
            ("127.255.0.9", "loopback"),
            ("169.254.169.254", "link-local"),
            ("172.16.0.1", "private"),
            ("172.31.255.255", "private"),
            ("192.0.0.8", "IETF protocol assignment"),
            ("192.0.2.1", "documentation"),
            ("192.88.99.1", "6to4 relay"),
            ("192.168.1.1", "private"),
            ("198.18.0.1", "benchmarking"),
            ("198.19.255.255", "benchmarking"),
            ("198.51.100.7", "documentation"),
            ("203.0.113.9", "documentation"),
            ("224.0.0.1", "multicast"),
            ("239.255.255.250", "multicast"),
            ("240.0.0.1", "reserved"),
            ("255.255.255.255", "reserved"),
        ] {
            assert_eq!(classify(ip.parse().unwrap()), Some(class), "{ip}");
        }
    }

    #[test]
    fn public_ipv4_and_ipv6_pass() {
        for ip in [
            "1.1.1.1",
            "8.8.8.8",
            "100.63.255.255",
            "100.128.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "192.0.1.1",
            "198.17.255.255",
            "198.20.0.0",
            "223.255.255.255",
            "2606:4700:4700::1111",
            "2a00:1450:4001:81c::200e",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
            "2001:3::1",
        ] {
            assert_eq!(classify(ip.parse().unwrap()), None, "{ip}");
        }
    }

    #[test]
    fn ipv6_special_ranges_are_refused() {
        for (ip, class) in [
            ("::", "unspecified"),
            ("::1", "loopback"),
            ("fc00::1", "unique-local"),
            ("fd12:3456::1", "unique-local"),
            ("fe80::1", "link-local"),
            ("febf::1", "link-local"),
            ("fec0::1", "site-local"),
            ("ff02::1", "multicast"),
            ("2001:db8::1", "documentation"),
            ("3fff::1", "documentation"),
            ("100::1", "discard-only"),
            ("2001:2::1", "benchmarking"),
            ("2001:10::1", "ORCHID"),
            ("2001:20::1", "ORCHIDv2"),
            ("64:ff9b:1::1", "NAT64 local-use"),
            ("5f00::1", "segment-routing"),
        ] {
            assert_eq!(classify(ip.parse().unwrap()), Some(class), "{ip}");
        }
    }

    #[test]
    fn ipv4_inside_ipv6_is_checked() {
        for (ip, class) in [
            // mapped and compatible
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:169.254.169.254", "link-local"),
            ("::127.0.0.1", "loopback"),
            ("::10.0.0.1", "private"),
            ("::a9fe:a9fe", "link-local"),
            // NAT64
            ("64:ff9b::127.0.0.1", "loopback"),
            ("64:ff9b::a9fe:a9fe", "link-local"),
            ("64:ff9b::192.168.0.1", "private"),
            // 6to4
            ("2002:7f00:1::", "loopback"),
            ("2002:a9fe:a9fe::1", "link-local"),
            ("2002:c0a8:101::", "private"),
            // Teredo: server 127.0.0.1, and a client 127.0.0.1 (stored inverted)
            ("2001:0:7f00:1::", "loopback"),
            ("2001:0:808:808::80ff:fffe", "loopback"),
        ] {
            assert_eq!(classify(ip.parse().unwrap()), Some(class), "{ip}");
        }
        // A Teredo address between public hosts is public.
        assert_eq!(classify("2001:0:808:808::f7f7:f7f7".parse().unwrap()), None);
    }

    #[test]
    fn url_forms_of_refused_addresses_are_refused() {
        for u in [
            "http://127.0.0.1:9200/",
            "http://127.1/",
            "http://2130706433/latest/meta-data/",
            "http://0x7f000001/",
            "http://0177.0.0.1/",
            "http://0x7f.1/",
            "http://0/",
            "http://169.254.169.254/latest/meta-data/",
            "http://0xa9fea9fe/",
            "http://[::1]:8080/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::ffff:7f00:1]/",
            "http://[::127.0.0.1]/",
            "http://[64:ff9b::7f00:1]/",
            "http://[2002:7f00:1::]/",
            "http://[fe80::1]/",
            "http://[fd00::1]/",
            "http://localhost:8080/",
            "http://LOCALHOST./",
            "http://api.localhost/",
            "https://10.0.0.1/v1",
        ] {
            assert!(refused(u).is_some(), "{u} passed");
        }
        for u in [
            "https://api.openai.com/v1",
            "http://8.8.8.8/",
            "http://134744072/",
            "https://[2606:4700:4700::1111]/",
            "http://localhost.example.com/",
        ] {
            assert_eq!(refused(u), None, "{u}");
        }
    }

    #[test]
    fn non_http_urls_are_refused() {
        let p = Policy::default();
        for u in [
            "file:///etc/passwd",
            "ftp://8.8.8.8/",
            "gopher://x/",
            "not a url",
        ] {
            assert!(matches!(p.check_str(u), Err(Refused::BadUrl(_))), "{u}");
        }
    }

    #[test]
    fn trusted_patterns_and_cidrs_open_the_policy() {
        let p = Policy::new(
            &[r"^http://127\.0\.0\.1:9200/.*".into()],
            &["10.1.0.0/16".into(), "fd00::1".into()],
        )
        .unwrap();
        assert_eq!(p.check_str("http://127.0.0.1:9200/_search"), Ok(()));
        assert!(p.check_str("http://127.0.0.1:9201/_search").is_err());
        assert!(p.check_str("https://127.0.0.1:9200/").is_err());
        assert_eq!(p.check_str("http://10.1.2.3/"), Ok(()));
        assert!(p.check_str("http://10.2.0.1/").is_err());
        assert_eq!(p.check_str("http://[fd00::1]/"), Ok(()));
        assert!(p.check_str("http://[fd00::2]/").is_err());
        // An allowed IPv4 range covers its IPv4-mapped form.
        assert_eq!(p.check_str("http://[::ffff:10.1.0.1]/"), Ok(()));
        let lo = Policy::new(&[], &["127.0.0.0/8".into()]).unwrap();
        assert_eq!(lo.check_str("http://localhost:1/"), Ok(()));
        assert!(Policy::new(&["(".into()], &[]).is_err());
        assert!(Policy::new(&[], &["10.0.0.0/33".into()]).is_err());
    }

    #[test]
    fn open_net_checks_nothing_guarded_checks() {
        let open = Net::Open(reqwest::Client::new());
        assert!(open.client_for("http://127.0.0.1/").is_ok());
        let guarded = Net::Guarded(Arc::new(Egress::new(Policy::default()).unwrap()));
        assert!(guarded.client_for("http://127.0.0.1/").is_err());
        assert!(guarded.client_for("https://example.com/").is_ok());
    }

    #[tokio::test]
    async fn the_resolver_drops_refused_addresses() {
        use reqwest::dns::Resolve;
        let r = GuardedResolver {
            policy: Arc::new(Policy::default()),
        };
        let err = r
            .resolve("localhost".parse().unwrap())
            .await
            .err()
            .expect("localhost refused");
        assert!(err.to_string().contains("loopback"), "{err}");
        let open = GuardedResolver {
            policy: Arc::new(Policy::new(&[], &["127.0.0.0/8".into(), "::1".into()]).unwrap()),
        };
        let addrs: Vec<_> = open
            .resolve("localhost".parse().unwrap())
            .await
            .unwrap()
            .collect();
        assert!(addrs.iter().all(|a| a.ip().is_loopback()) && !addrs.is_empty());
    }

    #[test]
    fn loopback_hosts_and_origins() {
        for h in [
            "localhost",
            "localhost:8080",
            "127.0.0.1",
            "127.0.0.1:1",
            "[::1]",
            "[::1]:8080",
            "LocalHost:3000",
        ] {
            assert!(is_loopback_host(h), "{h}");
        }
        for h in [
            "evil.com",
            "127.0.0.1.evil.com",
            "localhost.evil.com:80",
            "[::2]",
            "10.0.0.1",
        ] {
            assert!(!is_loopback_host(h), "{h}");
        }
        for o in [
            "http://localhost:3000",
            "https://127.0.0.1",
            "http://[::1]:5173",
        ] {
            assert!(is_loopback_origin(o.as_bytes()), "{o}");
        }
        for o in [
            "null",
            "http://evil.com",
            "file://localhost",
            "http://localhost.evil.com",
            "http://localhost@evil.com",
            "http://127.0.0.1/x",
        ] {
            assert!(!is_loopback_origin(o.as_bytes()), "{o}");
        }
    }
}
