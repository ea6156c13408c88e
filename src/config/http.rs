//! Config of the HTTP sources' transport and credentials: `[sources.http]` (timeouts, CA,
//! verification, and the Prometheus server's credentials) and `[[sources.auth]]` (credentials
//! for one origin each). Credentials go to their origin only, and over plain http only where
//! `allow_plain_http = true` says so.

use std::time::Duration;

use toml::{Table, Value};

use super::{ConfigError, Reader};

/// Transport settings for the HTTP sources (`[sources.http]`), and the credentials sent to the
/// Prometheus server.
#[derive(Debug, Clone, PartialEq)]
pub struct Http {
    pub connect_timeout: Duration,
    pub timeout: Duration,
    pub ca_file: Option<String>,
    pub insecure_skip_verify: bool,
    /// Sent to the Prometheus server (`sources.prometheus`) only.
    pub credentials: Credentials,
}

impl Default for Http {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(3),
            timeout: Duration::from_secs(10),
            ca_file: None,
            insecure_skip_verify: false,
            credentials: Credentials::default(),
        }
    }
}

/// A bearer token (from a file or the environment) or basic auth, for one origin.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Credentials {
    pub bearer_token_file: Option<String>,
    pub bearer_token_env: Option<String>,
    pub basic_user: Option<String>,
    pub basic_password_file: Option<String>,
    /// Send them over plain http too (else refused: they would cross the network readable).
    pub allow_plain_http: bool,
}

impl Credentials {
    /// Whether any credential is set.
    pub fn any(&self) -> bool {
        self.bearer_token_file.is_some()
            || self.bearer_token_env.is_some()
            || self.basic_user.is_some()
            || self.basic_password_file.is_some()
    }

    /// What conflicts in them, if anything.
    pub fn conflict(&self) -> Option<&'static str> {
        let bearer = self.bearer_token_file.is_some() || self.bearer_token_env.is_some();
        if bearer && (self.basic_user.is_some() || self.basic_password_file.is_some()) {
            Some("set either a bearer token or basic auth, not both")
        } else if self.basic_password_file.is_some() && self.basic_user.is_none() {
            Some("basic_password_file needs basic_user")
        } else if self.bearer_token_file.is_some() && self.bearer_token_env.is_some() {
            Some("set bearer_token_file or bearer_token_env, not both")
        } else {
            None
        }
    }
}

/// `[[sources.auth]]`: credentials for the origin of `url` (`scheme://host:port`).
#[derive(Debug, Clone, PartialEq)]
pub struct Auth {
    pub url: String,
    pub credentials: Credentials,
}

const CREDENTIAL_KEYS: &[&str] =
    &["bearer_token_file", "bearer_token_env", "basic_user", "basic_password_file", "allow_plain_http"];

/// One credential key into `c`; false when `k` is not one.
fn credential(r: &Reader, key: &str, k: &str, v: &Value, c: &mut Credentials) -> Result<bool, ConfigError> {
    let path = |v: &Value| -> Result<String, ConfigError> {
        let s = r.string(key, v)?;
        if s.trim().is_empty() {
            return Err(r.bad(key, v, "expected a non-empty string"));
        }
        Ok(s)
    };
    match k {
        "bearer_token_file" => c.bearer_token_file = Some(path(v)?),
        "bearer_token_env" => c.bearer_token_env = Some(path(v)?),
        "basic_user" => c.basic_user = Some(path(v)?),
        "basic_password_file" => c.basic_password_file = Some(path(v)?),
        "allow_plain_http" => c.allow_plain_http = r.boolean(key, v)?,
        _ => return Ok(false),
    }
    Ok(true)
}

/// The conflicts of a table's credentials, named at the table.
fn check(r: &Reader, table: &str, c: &Credentials) -> Result<(), ConfigError> {
    c.conflict().map_or(Ok(()), |why| Err(r.missing(table, why)))
}

pub(super) fn read_http(r: &Reader, t: &Table, h: &mut Http) -> Result<(), ConfigError> {
    for (k, v) in t {
        let key = format!("sources.http.{k}");
        match k.as_str() {
            "connect_timeout" => h.connect_timeout = timeout(r, &key, v)?,
            "timeout" => h.timeout = timeout(r, &key, v)?,
            "ca_file" => h.ca_file = Some(r.string(&key, v)?),
            "insecure_skip_verify" => h.insecure_skip_verify = r.boolean(&key, v)?,
            other if credential(r, &key, other, v, &mut h.credentials)? => {}
            _ => {
                let mut known = vec!["connect_timeout", "timeout", "ca_file", "insecure_skip_verify"];
                known.extend(CREDENTIAL_KEYS);
                return Err(r.unknown(&key, &known));
            }
        }
    }
    check(r, "sources.http", &h.credentials)
}

/// An HTTP timeout: more than nothing, at most an hour.
pub(super) fn timeout(r: &Reader, key: &str, v: &Value) -> Result<Duration, ConfigError> {
    let d = r.duration(key, v)?;
    if d.is_zero() || d > Duration::from_secs(3600) {
        return Err(r.bad(key, v, "expected a timeout between 1ms and 1h"));
    }
    Ok(d)
}

pub(super) fn read_auth(r: &Reader, key: &str, v: &Value) -> Result<Vec<Auth>, ConfigError> {
    let Value::Array(items) = v else { return Err(r.bad(key, v, "expected [[sources.auth]] tables")) };
    let mut out: Vec<Auth> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let table = format!("{key}[{i}]");
        let t = r.table(&table, item)?;
        let mut a = Auth { url: String::new(), credentials: Credentials::default() };
        for (k, v) in t {
            let key = format!("{table}.{k}");
            match k.as_str() {
                "url" => a.url = r.url(&key, v)?,
                other if credential(r, &key, other, v, &mut a.credentials)? => {}
                _ => {
                    let mut known = vec!["url"];
                    known.extend(CREDENTIAL_KEYS);
                    return Err(r.unknown(&key, &known));
                }
            }
        }
        if a.url.is_empty() {
            return Err(
                r.missing(&format!("{table}.url"), "the origin these credentials are for, e.g. https://gpu-1:9400")
            );
        }
        if !a.credentials.any() {
            return Err(r.missing(&table, "no credential: set bearer_token_file, bearer_token_env or basic_user"));
        }
        check(r, &table, &a.credentials)?;
        let origin = crate::url::origin(&a.url);
        if out.iter().any(|b| crate::url::origin(&b.url) == origin) {
            return Err(r.missing(&table, "a second [[sources.auth]] for the same origin"));
        }
        out.push(a);
    }
    Ok(out)
}
