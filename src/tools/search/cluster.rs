//! The OpenSearch cluster client every ml-commons tool uses: the gateway-wide `[opensearch]`
//! section (or a `type = "search"` entry's `backend = "opensearch"`), authenticated with basic
//! auth or AWS SigV4 (`es` for managed domains, `aoss` for Serverless, credentials from the AWS
//! default chain).
//!
//! ```toml
//! [opensearch]
//! url = "https://localhost:9200"
//! username = "admin"                 # basic auth, with password_env
//! password_env = "OPENSEARCH_PASSWORD"
//! # or SigV4:
//! # aws_region = "us-east-1"
//! # aws_service = "es"               # or "aoss"
//! verify_tls = true
//! ```

use serde::Deserialize;
use serde_json::Value;

use crate::redact::Secret;

/// Responses are cut at this size, like HTTP tools'.
const MAX_RESPONSE: usize = 1024 * 1024;

type Fail = (String, String);

fn fail(key: &str, problem: impl Into<String>) -> Fail {
    (key.to_string(), problem.into())
}

/// How requests to the cluster are authenticated.
#[derive(Debug, Clone)]
pub enum ClusterAuth {
    /// No credentials.
    None,
    /// HTTP basic auth.
    Basic {
        /// The user.
        username: String,
        /// The password.
        password: Option<Secret>,
    },
    /// AWS SigV4 with credentials from the AWS default chain.
    SigV4 {
        /// The region the domain lives in.
        region: String,
        /// `es` (managed domains) or `aoss` (Serverless collections).
        service: String,
    },
}

/// A resolved `[opensearch]` section.
#[derive(Debug, Clone)]
pub struct ClusterSettings {
    /// Base URL (a path prefix is kept).
    pub url: url::Url,
    /// Authentication.
    pub auth: ClusterAuth,
    /// Whether certificates are verified.
    pub verify_tls: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SectionFile {
    url: String,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password_env: Option<String>,
    #[serde(default)]
    aws_region: Option<String>,
    #[serde(default)]
    aws_service: Option<String>,
    #[serde(default)]
    verify_tls: Option<bool>,
}

/// Reads the `[opensearch]` section; problems name the key.
pub fn parse_section(
    table: toml::Table,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ClusterSettings, Fail> {
    let f: SectionFile = crate::settings::from_table(table)?;
    let url = parse_url(&f.url)?;
    let auth = match (&f.username, &f.aws_region, &f.aws_service) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
            return Err(fail(
                "aws_region",
                "basic auth (username) and SigV4 (aws_region) exclude each other",
            ));
        }
        (None, None, Some(_)) => return Err(fail("aws_region", "required with aws_service")),
        (None, Some(region), service) => {
            if f.password_env.is_some() {
                return Err(fail("password_env", "only with username"));
            }
            let service = service.clone().unwrap_or_else(|| "es".into());
            if !matches!(service.as_str(), "es" | "aoss") {
                return Err(fail(
                    "aws_service",
                    format!("{service:?}: expected \"es\" or \"aoss\""),
                ));
            }
            if region.trim().is_empty() {
                return Err(fail("aws_region", "must not be empty"));
            }
            ClusterAuth::SigV4 {
                region: region.clone(),
                service,
            }
        }
        (username, None, None) => basic(username.clone(), f.password_env.as_deref(), env)?,
    };
    Ok(ClusterSettings {
        url,
        auth,
        verify_tls: f.verify_tls.unwrap_or(true),
    })
}

/// Checks a cluster URL.
pub fn parse_url(raw: &str) -> Result<url::Url, Fail> {
    let url = url::Url::parse(raw)
        .map_err(|e| fail("url", format!("{raw:?} is not a valid URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.cannot_be_a_base() {
        return Err(fail("url", format!("{raw:?} must be an http or https URL")));
    }
    Ok(url)
}

/// Basic auth from `username` and the variable `password_env` names.
pub fn basic(
    username: Option<String>,
    password_env: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ClusterAuth, Fail> {
    let password = match password_env {
        None => None,
        Some(_) if username.is_none() => return Err(fail("password_env", "needs username")),
        Some(var) => match env(var) {
            Some(v) if !v.is_empty() => Some(Secret::new(v)),
            _ => {
                return Err(fail(
                    "password_env",
                    format!("environment variable {var} is not set"),
                ));
            }
        },
    };
    Ok(match username {
        Some(username) => ClusterAuth::Basic { username, password },
        None => ClusterAuth::None,
    })
}

/// Why a cluster request failed; the text is what the model reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// The request could not be built (a bad index name, signing).
    #[error("{0}")]
    Request(String),
    /// The cluster could not be reached.
    #[error("OpenSearch could not be reached")]
    Unreachable,
    /// The cluster answered an error status.
    #[error("OpenSearch HTTP {status}: {body}")]
    Status {
        /// The status.
        status: u16,
        /// Its body, capped.
        body: String,
    },
    /// The answer is not JSON.
    #[error("OpenSearch answered something that is not JSON")]
    NotJson,
}

/// A cluster endpoint and its credentials.
pub struct Cluster {
    client: reqwest::Client,
    base: url::Url,
    auth: ClusterAuth,
    /// The AWS default chain, loaded at the first signed request.
    aws: tokio::sync::OnceCell<Option<aws_credential_types::provider::SharedCredentialsProvider>>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("base", &self.base.as_str())
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// A cluster at `base` (e.g. `https://localhost:9200`, a path prefix is kept).
    pub fn new(client: reqwest::Client, base: url::Url, auth: ClusterAuth) -> Self {
        Self {
            client,
            base,
            auth,
            aws: tokio::sync::OnceCell::new(),
        }
    }

    /// The client for `settings`: `client` itself, or one accepting any certificate when
    /// `verify_tls` is off.
    pub fn client_for(
        settings: &ClusterSettings,
        client: reqwest::Client,
    ) -> Result<reqwest::Client, String> {
        if settings.verify_tls {
            return Ok(client);
        }
        reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(10))
            .tls_danger_accept_invalid_certs(true)
            .build()
            .map_err(|e| format!("HTTP client: {e}"))
    }

    /// The base URL.
    pub fn base(&self) -> &url::Url {
        &self.base
    }

    /// The URL of these path segments under the base, each segment percent-encoded.
    pub fn url(&self, segments: &[&str]) -> Result<url::Url, ClusterError> {
        let mut u = self.base.clone();
        {
            let mut path = u
                .path_segments_mut()
                .map_err(|_| ClusterError::Request(format!("{} cannot have a path", self.base)))?;
            path.pop_if_empty();
            for s in segments {
                path.push(s);
            }
        }
        Ok(u)
    }

    /// Sends one request and answers its JSON body.
    pub async fn request(
        &self,
        method: reqwest::Method,
        url: url::Url,
        body: Option<&Value>,
    ) -> Result<Value, ClusterError> {
        let bytes = match body {
            Some(b) => serde_json::to_vec(b).map_err(|e| ClusterError::Request(e.to_string()))?,
            None => Vec::new(),
        };
        let mut headers: Vec<(String, String)> = Vec::new();
        if body.is_some() {
            headers.push(("content-type".into(), "application/json".into()));
        }
        if let ClusterAuth::SigV4 { region, service } = &self.auth {
            headers.push((
                "host".into(),
                url.host_str()
                    .map(|h| match url.port() {
                        Some(p) => format!("{h}:{p}"),
                        None => h.to_string(),
                    })
                    .unwrap_or_default(),
            ));
            let signed = self
                .sign(method.as_str(), &url, &headers, &bytes, region, service)
                .await?;
            headers.extend(signed);
        }
        let mut req = self.client.request(method, url);
        for (k, v) in &headers {
            if k != "host" {
                req = req.header(k.as_str(), v.as_str());
            }
        }
        if let ClusterAuth::Basic { username, password } = &self.auth {
            req = req.basic_auth(username, password.as_ref().map(Secret::expose));
        }
        if body.is_some() {
            req = req.body(bytes);
        }
        let resp = req.send().await.map_err(|e| {
            tracing::warn!(error = %e, "opensearch request failed");
            ClusterError::Unreachable
        })?;
        let status = resp.status();
        let (body, truncated) = crate::outbound::read_capped(resp, MAX_RESPONSE)
            .await
            .map_err(|_| ClusterError::Unreachable)?;
        if !status.is_success() {
            let mut text = String::from_utf8_lossy(&body).into_owned();
            if truncated {
                text.push_str("\n[response truncated]");
            }
            return Err(ClusterError::Status {
                status: status.as_u16(),
                body: text,
            });
        }
        serde_json::from_slice(&body).map_err(|_| ClusterError::NotJson)
    }

    async fn sign(
        &self,
        method: &str,
        url: &url::Url,
        headers: &[(String, String)],
        body: &[u8],
        region: &str,
        service: &str,
    ) -> Result<Vec<(String, String)>, ClusterError> {
        use aws_credential_types::provider::ProvideCredentials;
        let provider = self
            .aws
            .get_or_init(|| async {
                aws_config::defaults(aws_config::BehaviorVersion::latest())
                    .load()
                    .await
                    .credentials_provider()
            })
            .await
            .clone()
            .ok_or_else(|| ClusterError::Request("no AWS credentials are configured".into()))?;
        let creds = provider.provide_credentials().await.map_err(|e| {
            tracing::warn!(error = %e, "AWS credentials for OpenSearch");
            ClusterError::Request("AWS credentials could not be loaded".into())
        })?;
        crate::connector::sigv4::headers(creds, region, service, method, url, headers, body)
            .map_err(ClusterError::Request)
    }
}

/// Index names become path segments; refuse the ones that would address cluster APIs.
pub fn check_index(name: &str) -> Result<(), String> {
    if name.is_empty() || name == "." || name == ".." || (name.starts_with('_') && name != "_all") {
        return Err(format!("{name:?} is not an index name"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(base: &str) -> Cluster {
        Cluster::new(
            reqwest::Client::new(),
            url::Url::parse(base).unwrap(),
            ClusterAuth::None,
        )
    }

    #[test]
    fn urls_keep_the_base_path_and_encode_segments() {
        let c = cluster("http://h:9200");
        assert_eq!(
            c.url(&["a,b", "_mapping"]).unwrap().as_str(),
            "http://h:9200/a,b/_mapping"
        );
        let c = cluster("https://h/os/");
        assert_eq!(
            c.url(&["logs-*", "_search"]).unwrap().as_str(),
            "https://h/os/logs-*/_search"
        );
        assert_eq!(
            c.url(&["a/b?c", "_search"]).unwrap().as_str(),
            "https://h/os/a%2Fb%3Fc/_search"
        );
    }

    #[test]
    fn cluster_apis_are_not_index_names() {
        assert!(check_index("logs-2024").is_ok());
        assert!(check_index("_all").is_ok());
        assert!(check_index(".kibana").is_ok());
        for bad in ["", ".", "..", "_cluster", "_nodes"] {
            assert!(check_index(bad).is_err(), "{bad}");
        }
    }

    fn section(text: &str) -> Result<ClusterSettings, Fail> {
        let env = |k: &str| (k == "OS_PW").then(|| "s3cret".to_string());
        parse_section(toml::from_str(text).unwrap(), &env)
    }

    #[test]
    fn sections_resolve_auth_and_name_bad_keys() {
        let s =
            section("url = \"https://os:9200\"\nusername = \"admin\"\npassword_env = \"OS_PW\"")
                .unwrap();
        assert!(
            matches!(&s.auth, ClusterAuth::Basic { password: Some(p), .. } if p.expose() == "s3cret")
        );
        assert!(!format!("{s:?}").contains("s3cret"));
        let s = section("url = \"https://x.aoss.amazonaws.com\"\naws_region = \"eu-west-1\"\naws_service = \"aoss\"").unwrap();
        assert!(matches!(&s.auth, ClusterAuth::SigV4 { service, .. } if service == "aoss"));
        let s = section("url = \"https://x\"\naws_region = \"eu-west-1\"").unwrap();
        assert!(matches!(&s.auth, ClusterAuth::SigV4 { service, .. } if service == "es"));
        let key = |t: &str| section(t).unwrap_err().0;
        assert_eq!(key("url = \"ftp://x\""), "url");
        assert_eq!(
            key("url = \"http://x\"\nusername = \"u\"\npassword_env = \"NOPE\""),
            "password_env"
        );
        assert_eq!(
            key("url = \"http://x\"\naws_region = \"r\"\naws_service = \"s3\""),
            "aws_service"
        );
        assert_eq!(
            key("url = \"http://x\"\nusername = \"u\"\naws_region = \"r\""),
            "aws_region"
        );
        assert_eq!(key("url = \"http://x\"\ncolour = 1"), "colour");
    }
}
