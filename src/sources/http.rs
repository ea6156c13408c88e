//! HTTP transport for the metrics sources: timeouts, a response size cap, gzip, bearer or
//! basic auth, a custom CA, TLS verification on by default. Credentials are read once and
//! never printed: errors name the URL and the failure, not the headers.

use crate::config::Http;

/// The most tessera reads of one response.
pub const MAX_BODY: usize = 256 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FetchError {
    #[error("{url}: cannot connect: {why}")]
    Connect { url: String, why: String },
    #[error("{url}: timed out")]
    Timeout { url: String },
    #[error("{url}: HTTP {status}{}", body.as_ref().map(|b| format!(": {b}")).unwrap_or_default())]
    Status { url: String, status: u16, body: Option<String> },
    #[error("{url}: response larger than {limit} bytes")]
    TooLarge { url: String, limit: usize },
    #[error("{url}: {why}")]
    Other { url: String, why: String },
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

fn read_secret(path: &str) -> Result<String, String> {
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
        let mut req = self.inner.get(url).header("Accept", "text/plain;version=0.0.4;q=1,*/*;q=0.1");
        req = match &self.auth {
            Auth::None => req,
            Auth::Bearer(t) => req.bearer_auth(t),
            Auth::Basic(u, p) => req.basic_auth(u, Some(p)),
        };
        let map = |e: reqwest::Error| {
            if e.is_timeout() {
                FetchError::Timeout { url: url.into() }
            } else if e.is_connect() {
                FetchError::Connect { url: url.into(), why: root_cause(&e) }
            } else {
                FetchError::Other { url: url.into(), why: root_cause(&e) }
            }
        };
        let mut resp = req.send().await.map_err(map)?;
        let status = resp.status();
        if resp.content_length().is_some_and(|n| n > self.max_body as u64) {
            return Err(FetchError::TooLarge { url: url.into(), limit: self.max_body });
        }
        let mut body: Vec<u8> = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(map)? {
            if body.len() + chunk.len() > self.max_body {
                return Err(FetchError::TooLarge { url: url.into(), limit: self.max_body });
            }
            body.extend_from_slice(&chunk);
        }
        let text = String::from_utf8_lossy(&body).into_owned();
        if !status.is_success() {
            let first = text.lines().next().map(|l| l.trim().chars().take(120).collect::<String>());
            return Err(FetchError::Status { url: url.into(), status: status.as_u16(), body: first });
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
