//! HTTP transport for the metrics sources: timeouts, a response size cap, gzip, bearer or
//! basic auth, a custom CA, TLS verification on by default. Credentials are read once and
//! never printed: errors name the URL and the failure, not the headers.

use crate::config::Http;

/// The most tessera reads of one response.
pub const MAX_BODY: usize = 256 * 1024 * 1024;

fn first_line(body: Option<&str>) -> String {
    body.and_then(|b| b.lines().map(str::trim).find(|l| !l.is_empty()))
        .map(|l| format!(": {}", l.chars().take(120).collect::<String>()))
        .unwrap_or_default()
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FetchError {
    #[error("{url}: cannot connect: {why}")]
    Connect { url: String, why: String },
    #[error("{url}: timed out")]
    Timeout { url: String },
    #[error("{url}: HTTP {status}{}", first_line(body.as_deref()))]
    Status { url: String, status: u16, body: Option<String> },
    #[error("{url}: response larger than {limit} bytes")]
    TooLarge { url: String, limit: usize },
    #[error("{url}: {why}")]
    Other { url: String, why: String },
}

/// A URL fit to show: without `user:password@` and without the query, where tokens hide.
pub fn redact(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").map_or(("", url), |(s, r)| (s, r));
    let (authority, path) = rest.find('/').map_or((rest, ""), |i| (&rest[..i], &rest[i..]));
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let path = path.split(['?', '#']).next().unwrap_or("");
    if scheme.is_empty() { format!("{host}{path}") } else { format!("{scheme}://{host}{path}") }
}

/// A configured client: one per source, shared by its requests.
#[derive(Clone)]
pub struct Client {
    inner: reqwest::Client,
    auth: Auth,
    max_body: usize,
}

#[derive(Clone)]
enum Auth {
    None,
    Bearer(String),
    Basic(String, String),
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the credentials.
        let auth = match self.auth {
            Auth::None => "none",
            Auth::Bearer(_) => "bearer",
            Auth::Basic(..) => "basic",
        };
        f.debug_struct("Client").field("auth", &auth).field("max_body", &self.max_body).finish()
    }
}

pub fn read_secret(path: &str) -> Result<String, String> {
    std::fs::read_to_string(path).map(|s| s.trim().to_string()).map_err(|e| format!("cannot read {path}: {e}"))
}

impl Client {
    pub fn new(cfg: &Http) -> Result<Self, String> {
        let mut b = reqwest::Client::builder()
            .connect_timeout(cfg.connect_timeout)
            .timeout(cfg.timeout)
            .gzip(true)
            .user_agent(concat!("tessera/", env!("CARGO_PKG_VERSION")));
        if let Some(ca) = &cfg.ca_file {
            let pem = std::fs::read(ca).map_err(|e| format!("cannot read CA file {ca}: {e}"))?;
            let cert = reqwest::Certificate::from_pem(&pem).map_err(|e| format!("CA file {ca}: {e}"))?;
            b = b.add_root_certificate(cert);
        }
        if cfg.insecure_skip_verify {
            b = b.danger_accept_invalid_certs(true);
        }
        let inner = b.build().map_err(|e| format!("HTTP client: {e}"))?;
        let bearer = cfg.bearer_token_file.is_some() || cfg.bearer_token_env.is_some();
        if bearer && (cfg.basic_user.is_some() || cfg.basic_password_file.is_some()) {
            return Err("set either a bearer token or basic auth, not both".into());
        }
        if cfg.basic_password_file.is_some() && cfg.basic_user.is_none() {
            return Err("basic_password_file needs basic_user".into());
        }
        if cfg.bearer_token_file.is_some() && cfg.bearer_token_env.is_some() {
            return Err("set bearer_token_file or bearer_token_env, not both".into());
        }
        let auth = match (&cfg.bearer_token_file, &cfg.bearer_token_env, &cfg.basic_user) {
            (Some(f), _, _) => Auth::Bearer(read_secret(f)?),
            (None, Some(var), _) => {
                Auth::Bearer(std::env::var(var).map_err(|_| format!("environment variable {var} is not set"))?)
            }
            (None, None, Some(user)) => {
                let pass = cfg.basic_password_file.as_deref().map(read_secret).transpose()?.unwrap_or_default();
                Auth::Basic(user.clone(), pass)
            }
            _ => Auth::None,
        };
        Ok(Self { inner, auth, max_body: MAX_BODY })
    }

    /// GET `url` and return the body as text, at most the size cap.
    pub async fn get(&self, url: &str) -> Result<String, FetchError> {
        self.get_with(url, &[]).await
    }

    /// GET with extra headers (slurmrestd's `X-SLURM-USER-TOKEN`, say). Header values are
    /// never part of an error message.
    pub async fn get_with(&self, url: &str, headers: &[(&str, &str)]) -> Result<String, FetchError> {
        let shown = redact(url);
        let url_for_errors = shown.as_str();
        let mut req = self.inner.get(url).header("Accept", "text/plain;version=0.0.4;q=1,*/*;q=0.1");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req = match &self.auth {
            Auth::None => req,
            Auth::Bearer(t) => req.bearer_auth(t),
            Auth::Basic(u, p) => req.basic_auth(u, Some(p)),
        };
        let map = |e: reqwest::Error| {
            if e.is_timeout() {
                FetchError::Timeout { url: url_for_errors.into() }
            } else if e.is_connect() {
                FetchError::Connect { url: url_for_errors.into(), why: root_cause(&e) }
            } else {
                FetchError::Other { url: url_for_errors.into(), why: root_cause(&e) }
            }
        };
        let mut resp = req.send().await.map_err(map)?;
        let status = resp.status();
        if resp.content_length().is_some_and(|n| n > self.max_body as u64) {
            return Err(FetchError::TooLarge { url: url_for_errors.into(), limit: self.max_body });
        }
        let mut body: Vec<u8> = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(map)? {
            if body.len() + chunk.len() > self.max_body {
                return Err(FetchError::TooLarge { url: url_for_errors.into(), limit: self.max_body });
            }
            body.extend_from_slice(&chunk);
        }
        let text = String::from_utf8_lossy(&body).into_owned();
        if !status.is_success() {
            // Enough of the body to read an API's error envelope; the message shows its first line.
            let body = Some(text.chars().take(4096).collect::<String>()).filter(|b| !b.trim().is_empty());
            return Err(FetchError::Status { url: url_for_errors.into(), status: status.as_u16(), body });
        }
        Ok(text)
    }
}

fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_shown_without_credentials_or_queries() {
        assert_eq!(
            redact("https://alice:s3cret@prom.example:9090/api/v1/query?query=up&token=x"),
            "https://prom.example:9090/api/v1/query"
        );
        assert_eq!(redact("http://gpu-1:9400/metrics"), "http://gpu-1:9400/metrics");
        assert_eq!(redact("gpu-1:9400"), "gpu-1:9400");
    }

    #[test]
    fn conflicting_auth_is_refused() {
        let both = Http { bearer_token_env: Some("T".into()), basic_user: Some("u".into()), ..Http::default() };
        assert!(Client::new(&both).is_err());
        let orphan = Http { basic_password_file: Some("/p".into()), ..Http::default() };
        assert!(Client::new(&orphan).is_err());
        assert!(Client::new(&Http::default()).is_ok());
    }

    #[test]
    fn status_errors_show_one_line() {
        let e = FetchError::Status { url: "u".into(), status: 500, body: Some("\n  <html>\n<body>oops</body>".into()) };
        assert_eq!(e.to_string(), "u: HTTP 500: <html>");
    }
}
