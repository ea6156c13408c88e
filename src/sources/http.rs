//! HTTP transport for the metrics sources: timeouts, a response size cap, the sources' memory
//! budget, gzip, bearer or basic auth for one origin each (never over plain http unless the
//! config says so), a custom CA, TLS verification on by default. Credentials are read once and
//! never printed: errors name the URL and the failure, not the headers, and a response that
//! echoes a credential has it blanked out.

use crate::budget::{Budget, Chunks};
use crate::config::{Credentials, Http};
use crate::url::{origin, redact};

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

impl FetchError {
    /// The server gave no answer at all: it could not be reached, or timed out.
    pub fn unanswered(&self) -> bool {
        matches!(self, Self::Connect { .. } | Self::Timeout { .. })
    }
}

/// Why a secret file gave no secret.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("cannot read {path}: {why}")]
    Read { path: String, why: crate::files::ReadError },
    #[error("{path} is empty")]
    Empty { path: String },
}

/// Why a client could not be made or given its credentials.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The CA file of `[sources.http]`.
    #[error(transparent)]
    Ca(#[from] super::tls::CaError),
    /// reqwest could not build the client.
    #[error("HTTP client: {0}")]
    Build(#[source] reqwest::Error),
    /// The credentials set contradict each other (which, in words).
    #[error("{0}")]
    Conflict(&'static str),
    #[error(transparent)]
    Secret(#[from] SecretError),
    /// The environment variable named for a bearer token is unset or empty.
    #[error("environment variable {var} is not set")]
    NoEnv { var: String },
    /// Credentials for something that is not a URL (`url` as shown: redacted).
    #[error("{url}: not a URL")]
    NotAUrl { url: String },
    /// Credentials for a plain http origin without `allow_plain_http` (`url` redacted).
    #[error(
        "{url}: credentials over plain http would cross the network readable: use https, or set allow_plain_http = true"
    )]
    PlainHttp { url: String },
}

/// A configured client: one per source, shared by its requests. Credentials belong to one
/// origin each and are sent there only.
#[derive(Clone)]
pub struct Client {
    inner: reqwest::Client,
    creds: Vec<(String, Auth)>,
    /// Secrets written into configured URLs (a `?token=` value, a password before `@`): a
    /// server that echoes its request must not carry them into an error.
    url_secrets: Vec<String>,
    max_body: usize,
    budget: Budget,
}

#[derive(Clone)]
enum Auth {
    Bearer(String),
    Basic(String, String),
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the credentials: which origins have some, and of what kind.
        let creds: Vec<String> = self
            .creds
            .iter()
            .map(|(o, a)| format!("{o}: {}", if matches!(a, Auth::Bearer(_)) { "bearer" } else { "basic" }))
            .collect();
        f.debug_struct("Client").field("credentials", &creds).field("max_body", &self.max_body).finish()
    }
}

/// The secret in the file at `path`, trimmed.
pub fn read_secret(path: &str) -> Result<String, SecretError> {
    let s = crate::files::read_text(std::path::Path::new(path), crate::files::SECRET_LIMIT)
        .map_err(|why| SecretError::Read { path: path.to_string(), why })?;
    let s = s.trim().to_string();
    if s.is_empty() {
        return Err(SecretError::Empty { path: path.to_string() });
    }
    Ok(s)
}

/// The secret `c` names, read now (a file, the environment).
fn read_credentials(c: &Credentials) -> Result<Option<Auth>, ClientError> {
    if let Some(why) = c.conflict() {
        return Err(ClientError::Conflict(why));
    }
    Ok(match (&c.bearer_token_file, &c.bearer_token_env, &c.basic_user) {
        (Some(f), _, _) => Some(Auth::Bearer(read_secret(f)?)),
        (None, Some(var), _) => Some(Auth::Bearer(
            std::env::var(var)
                .ok()
                .filter(|v| !v.trim().is_empty())
                .ok_or_else(|| ClientError::NoEnv { var: var.clone() })?,
        )),
        (None, None, Some(user)) => {
            let pass = c.basic_password_file.as_deref().map(read_secret).transpose()?.unwrap_or_default();
            Some(Auth::Basic(user.clone(), pass))
        }
        _ => None,
    })
}

impl Client {
    /// A client with the transport settings of `cfg` (timeouts, CA, verification) and no
    /// credentials: `with_credentials` adds them for one origin.
    pub fn new(cfg: &Http) -> Result<Self, ClientError> {
        // Redirects: at most 10, on the same host and port only (reqwest drops Authorization
        // on a change of host, but not a custom header such as slurmrestd's JWT), and never
        // from https down to http.
        let redirects = reqwest::redirect::Policy::custom(|a| {
            let first = a.previous().first().cloned();
            let down = a.url().scheme() == "http" && a.previous().iter().any(|u| u.scheme() == "https");
            let elsewhere = first.is_some_and(|f| {
                f.host_str() != a.url().host_str() || f.port_or_known_default() != a.url().port_or_known_default()
            });
            if down {
                a.error("a redirect from https to plain http")
            } else if elsewhere {
                a.error("a redirect to another host (credentials stay with their origin)")
            } else if a.previous().len() > 10 {
                a.error("more than 10 redirects")
            } else {
                a.follow()
            }
        });
        let mut b = reqwest::Client::builder()
            .redirect(redirects)
            .connect_timeout(cfg.connect_timeout)
            .timeout(cfg.timeout)
            .gzip(true)
            .user_agent(concat!("tessera/", env!("CARGO_PKG_VERSION")));
        if let Some(ca) = &cfg.ca_file {
            for cert in super::tls::ca_certificates(ca)? {
                b = b.add_root_certificate(cert);
            }
        }
        if cfg.insecure_skip_verify {
            b = b.danger_accept_invalid_certs(true);
        }
        let inner = b.build().map_err(ClientError::Build)?;
        Ok(Self { inner, creds: Vec::new(), url_secrets: Vec::new(), max_body: MAX_BODY, budget: Budget::global() })
    }

    /// Send `c` to the origin of `url` (and nowhere else). Over plain http only when `c` says
    /// `allow_plain_http`: a token or password would cross the network readable.
    pub fn with_credentials(mut self, url: &str, c: &Credentials) -> Result<Self, ClientError> {
        let Some(auth) = read_credentials(c)? else { return Ok(self) };
        let o = origin(url).ok_or_else(|| ClientError::NotAUrl { url: redact(url) })?;
        if o.starts_with("http://") && !c.allow_plain_http {
            return Err(ClientError::PlainHttp { url: redact(url) });
        }
        self.creds.retain(|(have, _)| *have != o);
        self.creds.push((o, auth));
        Ok(self)
    }

    /// Hold the bytes of responses against `budget` instead of the process's.
    pub fn with_budget(mut self, budget: Budget) -> Self {
        self.budget = budget;
        self
    }

    /// Every secret this client holds, and the forms a server could echo them in.
    fn secrets(&self) -> Vec<String> {
        use base64::Engine as _;
        let mut out = Vec::new();
        for (_, a) in &self.creds {
            match a {
                Auth::Bearer(t) => out.push(t.clone()),
                Auth::Basic(u, p) => {
                    out.push(base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}")));
                    if !p.is_empty() {
                        out.push(p.clone());
                    }
                }
            }
        }
        out.extend(self.url_secrets.iter().cloned());
        // As a server may echo them: percent-encoded (either case of hex) and decoded.
        let forms: Vec<String> = out.iter().flat_map(|s| encodings(s)).collect();
        out.extend(forms);
        out.retain(|s| s.len() >= 4);
        out.sort();
        out.dedup();
        // Longest first: a secret inside another is blanked with it.
        out.sort_by_key(|s| std::cmp::Reverse(s.len()));
        out
    }

    /// Whether this client holds any credential (then answers are scrubbed before mapping).
    pub fn has_secrets(&self) -> bool {
        !self.creds.is_empty() || !self.url_secrets.is_empty()
    }

    /// Treat the secrets written into a configured URL as secrets: its password, and the
    /// values of query keys that name one (`token`, `api_key`, `password`, ...). Other query
    /// values (`cluster=gpu-a100`) are data: blanking them would blank node names too.
    pub fn with_url_secrets(mut self, url: &str) -> Self {
        let secret_key = |k: &str| {
            let k = k.to_ascii_lowercase();
            [
                "token",
                "key",
                "secret",
                "pass",
                "pwd",
                "auth",
                "sig",
                "credential",
                "session",
                "jwt",
                "code",
                "bearer",
                "cookie",
                "otp",
            ]
            .iter()
            .any(|w| k.contains(w))
        };
        if let Ok(u) = reqwest::Url::parse(url) {
            let mut found: Vec<String> =
                u.query_pairs().filter(|(k, _)| secret_key(k)).map(|(_, v)| v.into_owned()).collect();
            found.extend(u.password().map(str::to_string));
            // As written too: a server may echo the percent-encoded form.
            found.extend(
                u.query()
                    .into_iter()
                    .flat_map(|q| q.split('&'))
                    .filter_map(|kv| kv.split_once('='))
                    .filter(|(k, _)| secret_key(k))
                    .map(|(_, v)| v.to_string()),
            );
            for v in found {
                if v.len() >= 4 && !self.url_secrets.contains(&v) {
                    self.url_secrets.push(v);
                }
            }
        }
        self
    }

    /// `text` with every secret of this client blanked out (errors and notes that quote an
    /// answer pass through it).
    pub fn scrub(&self, text: &str) -> String {
        self.secrets().iter().fold(text.to_string(), |t, s| replace_any_case(&t, s))
    }

    /// GET `url` and return the body as text, at most the size cap.
    pub async fn get(&self, url: &str) -> Result<String, FetchError> {
        self.get_with(url, &[]).await
    }

    /// GET with extra headers (slurmrestd's `X-SLURM-USER-TOKEN`, say). Header values are
    /// never part of an error message.
    pub async fn get_with(&self, url: &str, headers: &[(&str, &str)]) -> Result<String, FetchError> {
        // Made only for an error: a scrape a second per exporter parses no URL it needs not.
        let shown = || redact(url);
        let mut req = self.inner.get(url).header("Accept", "text/plain;version=0.0.4;q=1,*/*;q=0.1");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let here = if self.creds.is_empty() { None } else { origin(url) };
        req = match self.creds.iter().find(|(o, _)| Some(o) == here.as_ref()).map(|(_, a)| a) {
            None => req,
            Some(Auth::Bearer(t)) => req.bearer_auth(t),
            Some(Auth::Basic(u, p)) => req.basic_auth(u, Some(p)),
        };
        let map = |e: reqwest::Error| {
            if e.is_timeout() {
                FetchError::Timeout { url: shown() }
            } else if e.is_connect() {
                FetchError::Connect { url: shown(), why: super::tls::explain(&e) }
            } else {
                FetchError::Other { url: shown(), why: super::tls::explain(&e) }
            }
        };
        let mut resp = req.send().await.map_err(map)?;
        let status = resp.status();
        if resp.content_length().is_some_and(|n| n > self.max_body as u64) {
            return Err(FetchError::TooLarge { url: shown(), limit: self.max_body });
        }
        // The memory the body takes is held against the sources' budget until the text is
        // handed over.
        let over = |e: crate::budget::Exhausted| FetchError::Other { url: shown(), why: e.to_string() };
        let mut body = Chunks::new(&self.budget);
        while let Some(chunk) = resp.chunk().await.map_err(map)? {
            if body.len() + chunk.len() > self.max_body {
                return Err(FetchError::TooLarge { url: shown(), limit: self.max_body });
            }
            body.extend(&chunk).map_err(over)?;
        }
        let body = body.join().map_err(over)?;
        let text = String::from_utf8(body).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        if !status.is_success() {
            // Enough of the body to read an API's error envelope; the message shows its first
            // line, never a credential a server echoes back.
            // Scrubbed whole, then cut: a secret cut at the edge would leave its prefix.
            let body = Some(self.scrub(&text).chars().take(4096).collect::<String>()).filter(|b| !b.trim().is_empty());
            return Err(FetchError::Status { url: shown(), status: status.as_u16(), body });
        }
        Ok(text)
    }
}

/// The other forms of `secret` a server may echo: percent-encoded (upper and lower hex) and
/// percent-decoded.
fn encodings(secret: &str) -> Vec<String> {
    let mut upper = String::new();
    for b in secret.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            upper.push(char::from(b));
        } else {
            upper.push_str(&format!("%{b:02X}"));
        }
    }
    let lower = percent_hex_lower(&upper);
    let decoded = reqwest::Url::parse(&format!("http://h/?v={secret}"))
        .ok()
        .and_then(|u| u.query_pairs().next().map(|(_, v)| v.into_owned()))
        .unwrap_or_default();
    vec![upper, lower, decoded]
}

/// `%2F` written `%2f`.
fn percent_hex_lower(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut after = 0;
    for c in s.chars() {
        if c == '%' {
            after = 2;
            out.push(c);
        } else if after > 0 {
            after -= 1;
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// `text` with every occurrence of `secret` blanked, in any ASCII case.
fn replace_any_case(text: &str, secret: &str) -> String {
    let (hay, needle) = (text.to_ascii_lowercase(), secret.to_ascii_lowercase());
    if needle.is_empty() || !hay.contains(&needle) {
        return text.to_string();
    }
    // ASCII lower-casing keeps every byte where it was: positions carry over.
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    while let Some(i) = hay[from..].find(&needle) {
        out.push_str(&text[from..from + i]);
        out.push_str("<redacted>");
        from += i + needle.len();
    }
    out.push_str(&text[from..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::url::check_url;

    /// Keys the list missed (`jwt`, `pwd`, `code`), and echoes of a token in another case or
    /// percent-encoded, are blanked too (they were printed).
    #[test]
    fn every_echo_of_a_url_secret_is_blanked() {
        let c = Client::new(&Http::default())
            .unwrap_or_else(|e| panic!("{e}"))
            .with_url_secrets("https://h/api?jwt=AbCdEf123&pwd=s3cr%2Ft&code=Zq9x81&cluster=gpu-a100");
        let seen = c.scrub("jwt abcdef123, ABCDEF123, pwd s3cr/t and s3cr%2Ft and s3cr%2ft, code zq9x81, gpu-a100-01");
        assert_eq!(
            seen,
            "jwt <redacted>, <redacted>, pwd <redacted> and <redacted> and <redacted>, code <redacted>, gpu-a100-01"
        );
    }

    /// Every shape that leaked a credential or named a target wrongly: what is shown (errors,
    /// JSON, the header), the source's name, and where credentials would go.
    /// A URL's token is a secret; its other query values are data, never blanked (a
    /// `cluster=gpu-a100` turned node gpu-a100-01 into `<redacted>-01`).
    #[test]
    fn only_secret_query_values_are_secrets() {
        let c = Client::new(&Http::default())
            .unwrap_or_else(|e| panic!("{e}"))
            .with_url_secrets("https://mimir/prometheus?cluster=gpu-a100&X-Api-Key=k3y-9876&access_token=abcd1234");
        assert_eq!(c.scrub("node gpu-a100-01, key k3y-9876, abcd1234"), "node gpu-a100-01, key <redacted>, <redacted>");
    }

    /// "No answer" is decided on the error's kind, never its words: a server whose error
    /// page says "cannot connect" or ends in "timed out" did answer.
    #[test]
    fn no_answer_is_the_kind_not_the_words() {
        let url = || "http://h:9090".to_string();
        assert!(FetchError::Timeout { url: url() }.unanswered());
        assert!(FetchError::Connect { url: url(), why: "refused".into() }.unanswered());
        let page =
            FetchError::Status { url: url(), status: 502, body: Some("upstream: cannot connect: timed out".into()) };
        assert!(!page.unanswered());
        assert!(!FetchError::Other { url: url(), why: "timed out".into() }.unanswered());
    }

    #[test]
    fn url_shapes_table() {
        let name = crate::sources::scrape::source_name;
        let cases: &[(&str, &str, &str, Option<&str>)] = &[
            ("http://h:9400?token=SECRET", "http://h:9400", "scrape:h:9400", Some("http://h:9400")),
            ("http://u:SECRET@h?a=b@c", "http://h", "scrape:h", None),
            ("http://u:SECRET@h:1/p?x=SECRET#SECRET", "http://h:1/p", "scrape:h:1/p", None),
            (
                "https://alice:SECRET@prom:9090/api/v1/query?query=up&token=SECRET",
                "https://prom:9090/api/v1/query",
                "scrape:prom:9090/api/v1/query",
                None,
            ),
            ("http://gpu-1:9400/metrics", "http://gpu-1:9400/metrics", "scrape:gpu-1:9400", Some("http://gpu-1:9400")),
            (
                "http://[::1]:9400/metrics#SECRET",
                "http://[::1]:9400/metrics",
                "scrape:[::1]:9400",
                Some("http://[::1]:9400"),
            ),
            ("HTTP://GPU-1:9400/metrics", "http://gpu-1:9400/metrics", "scrape:gpu-1:9400", Some("http://gpu-1:9400")),
            ("https://h/", "https://h/", "scrape:h/", Some("https://h:443")),
            ("http://h:9400/?token=SECRET", "http://h:9400/", "scrape:h:9400/", Some("http://h:9400")),
            // Not URLs (and URLs with credentials in them, refused: give them in
            // [[sources.auth]]): cut by hand the same way; nothing to send credentials to.
            ("http://h:port?token=SECRET", "http://h:port", "scrape:h:port", None),
            ("gpu-1:9400?SECRET", "gpu-1:9400", "scrape:gpu-1:9400", None),
        ];
        for (url, shown, named, to) in cases {
            assert_eq!(redact(url), *shown, "{url}");
            assert_eq!(name(url), *named, "{url}");
            assert_eq!(origin(url).as_deref().filter(|_| check_url(url).is_ok()), *to, "{url}");
            assert!(!redact(url).contains("SECRET") && !name(url).contains("SECRET"), "{url}");
        }
    }

    #[test]
    fn conflicting_auth_is_refused() {
        let both =
            Credentials { bearer_token_env: Some("T".into()), basic_user: Some("u".into()), ..Credentials::default() };
        let c = Client::new(&Http::default()).unwrap_or_else(|e| panic!("{e}"));
        assert!(c.clone().with_credentials("https://p:9090", &both).is_err());
        let orphan = Credentials { basic_password_file: Some("/p".into()), ..Credentials::default() };
        assert!(c.clone().with_credentials("https://p:9090", &orphan).is_err());
    }

    /// A response held against the budget holds the memory it takes, not only its length (a
    /// body grown by doubling took up to twice what was held).
    #[test]
    fn a_response_held_is_the_memory_it_takes() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap_or_else(|e| panic!("{e}"));
            let mut request = [0u8; 4096];
            let _ = s.read(&mut request);
            // No length: read until the connection closes, as a flood is.
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n");
            let _ = s.write_all(&b"# line\n".repeat((3 << 20) / 7 + 1));
        });
        let budget = Budget::new(64 << 20);
        let c = Client::new(&Http::default()).unwrap_or_else(|e| panic!("{e}")).with_budget(budget.clone());
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap_or_else(|e| panic!("{e}"));
        let text = rt.block_on(c.get(&format!("http://{addr}/metrics"))).unwrap_or_else(|e| panic!("{e}"));
        let _ = server.join();
        assert!(text.len() > 3 << 20);
        assert!(
            budget.peak() >= text.capacity(),
            "held at most {} for a body taking {}",
            budget.peak(),
            text.capacity()
        );
        // At most the last chunk, partly filled, and the one being joined more.
        let most = text.len() + 2 * crate::budget::CHUNK;
        assert!(budget.peak() <= most, "held {} for {} bytes", budget.peak(), text.len());
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn status_errors_show_one_line() {
        let e = FetchError::Status { url: "u".into(), status: 500, body: Some("\n  <html>\n<body>oops</body>".into()) };
        assert_eq!(e.to_string(), "u: HTTP 500: <html>");
    }
}
