//! URLs as tessera shows and checks them: redacted for showing (no credentials, query or
//! fragment), checked for the config (http or https, a host, no credentials), the origin
//! credentials belong to, and the host (and port) a URL names.

/// A URL fit to show: without `user:password@`, the query and the fragment, where tokens hide.
pub fn redact(url: &str) -> String {
    if let Ok(u) = reqwest::Url::parse(url)
        && u.has_host()
    {
        let host = u.host_str().unwrap_or_default();
        let port = u.port().map(|p| format!(":{p}")).unwrap_or_default();
        // `http://h:9090` stays without the `/` the parser adds.
        let written = url.split_once("://").map_or(url, |(_, r)| r);
        let written = written.split(['?', '#']).next().unwrap_or_default();
        let path = if u.path() == "/" && !written.contains('/') { "" } else { u.path() };
        return format!("{}://{host}{port}{path}", u.scheme());
    }
    // Not a URL: cut it the same way by hand (the authority ends at the first / ? or #).
    let (scheme, rest) = url.split_once("://").map_or(("", url), |(s, r)| (s, r));
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let path = path.split(['?', '#']).next().unwrap_or("");
    if scheme.is_empty() { format!("{host}{path}") } else { format!("{scheme}://{host}{path}") }
}

/// Why a config's URL is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// The parser's reason.
    #[error("not a URL: {0}")]
    NotUrl(String),
    #[error("the scheme is {0}")]
    Scheme(String),
    #[error("the URL has no host")]
    NoHost,
    #[error("credentials in the URL: give them in [[sources.auth]] (basic_user, basic_password_file)")]
    Credentials,
}

/// An http(s) URL with a host, or why not (for the config's URLs).
pub fn check_url(url: &str) -> Result<reqwest::Url, UrlError> {
    let u = reqwest::Url::parse(url).map_err(|e| UrlError::NotUrl(e.to_string()))?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err(UrlError::Scheme(u.scheme().into()));
    }
    if u.host_str().is_none_or(str::is_empty) {
        return Err(UrlError::NoHost);
    }
    // The client would send them as basic auth, to wherever, over plain http too.
    if !u.username().is_empty() || u.password().is_some() {
        return Err(UrlError::Credentials);
    }
    Ok(u)
}

/// `scheme://host:port` of a URL (the default port written out): where credentials belong.
pub fn origin(url: &str) -> Option<String> {
    let u = reqwest::Url::parse(url).ok()?;
    Some(format!("{}://{}:{}", u.scheme(), u.host_str()?, u.port_or_known_default()?))
}

/// `host:port` of a URL (`http://gpu-1:9400/metrics` -> `gpu-1:9400`).
pub fn host_port(url: &str) -> String {
    host_port_str(url).to_string()
}

fn host_port_str(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let rest = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    rest.rsplit_once('@').map_or(rest, |(_, h)| h)
}

/// The host alone, for node names (`gpu-1:9400` -> `gpu-1`; IPv6 in brackets kept).
pub fn host(url: &str) -> String {
    host_str(url).to_string()
}

/// [`host`] as a slice of `url` (all-smi rows name their host per sample: no copy each).
pub fn host_str(url: &str) -> &str {
    // A bare host (all-smi's `instance`, on every row): nothing to take off.
    if !url.bytes().any(|b| matches!(b, b':' | b'/' | b'@' | b'?' | b'#' | b'[')) {
        return url;
    }
    parsed_host(url)
}

/// [`host_str`] the long way, for any URL.
fn parsed_host(url: &str) -> &str {
    let hp = host_port_str(url);
    if hp.starts_with('[') {
        return hp.find(']').map_or(hp, |i| &hp[..=i]);
    }
    hp.rsplit_once(':').map_or(hp, |(h, _)| h)
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
    fn hosts_of_urls() {
        assert_eq!(host("http://gpu-1:9400/metrics"), "gpu-1");
        assert_eq!(host("https://user@10.0.0.5/metrics"), "10.0.0.5");
        assert_eq!(host("http://[::1]:9400/metrics"), "[::1]");
        assert_eq!(host_str("node-7:9090"), "node-7", "a slice, for all-smi rows");
        assert_eq!(host_str("[::1"), "[::1", "no closing bracket: as written");
        assert_eq!(host_port("gpu-2:9400"), "gpu-2:9400");
    }

    proptest::proptest! {
        /// The bare host's shortcut answers as the long way does, whatever the text.
        #[test]
        fn a_bare_host_is_its_own_host(s in "[a-z0-9:/@?#\\[\\]._-]{0,24}", any in proptest::prelude::any::<String>()) {
            proptest::prop_assert_eq!(host_str(&s), parsed_host(&s));
            proptest::prop_assert_eq!(host_str(&any), parsed_host(&any));
        }
    }
}
