//! Messages for failures, written for the operator: they name the API server (its URL without
//! credentials) and the cause at the bottom of the error chain, never a token or certificate.

use kube::runtime::watcher;

/// The watch fell behind the server's compaction (HTTP 410 Gone) and must list again.
pub fn is_gone(e: &watcher::Error) -> bool {
    match e {
        watcher::Error::WatchError(s) => s.code == 410,
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => s.code == 410,
        _ => false,
    }
}

/// A watcher failure as what was being done ("listing", "watching") and why.
pub fn describe_watch(e: &watcher::Error, server: &str) -> (&'static str, String) {
    match e {
        watcher::Error::InitialListFailed(e) => ("listing", describe(e, server)),
        watcher::Error::WatchStartFailed(e) => ("watching", describe(e, server)),
        watcher::Error::WatchFailed(e) => ("watching", format!("the stream broke: {}", describe(e, server))),
        watcher::Error::WatchError(s) => {
            ("watching", format!("{server} sent an error: {}", status(s.code, &s.reason, &s.message)))
        }
        watcher::Error::NoResourceVersion => ("listing", format!("{server} sent no resourceVersion")),
    }
}

fn status(code: u16, reason: &str, message: &str) -> String {
    let message = message.trim();
    match (reason.is_empty(), message.is_empty()) {
        (_, true) if reason.is_empty() => format!("HTTP {code}"),
        (_, true) => format!("HTTP {code} {reason}"),
        (true, false) => format!("HTTP {code}: {message}"),
        (false, false) => format!("HTTP {code} {reason}: {message}"),
    }
}

/// A client error, as "cannot reach https://10.0.0.1:6443: Connection refused (os error 111)"
/// or "https://10.0.0.1:6443 answered HTTP 403 Forbidden: ...".
pub fn describe(e: &kube::Error, server: &str) -> String {
    if let Some(why) = refused(e) {
        return format!("{server} sent too much: {why}");
    }
    match e {
        kube::Error::Api(s) => {
            let first_line = s.message.lines().next().unwrap_or_default();
            format!("{server} answered {}", status(s.code, &s.reason, first_line))
        }
        kube::Error::HyperError(_) | kube::Error::Service(_) => format!("cannot reach {server}: {}", root_cause(e)),
        kube::Error::Auth(_) => format!("authenticating to {server}: {}", root_cause(e)),
        kube::Error::SerdeError(err) => format!("{server} sent something that is not the expected JSON: {err}"),
        kube::Error::ReadEvents(_) => format!("reading from {server}: {}", root_cause(e)),
        other => format!("{server}: {other}"),
    }
}

/// The cap that cut an answer short (answers.rs), wherever it is in the chain.
fn refused(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cur = Some(e);
    while let Some(c) = cur {
        if let Some(r) = c.downcast_ref::<super::answers::Refused>() {
            return Some(r.to_string());
        }
        cur = c.source();
    }
    None
}

/// The innermost cause's message: hyper and tower wrap the useful part ("Connection refused")
/// several layers down.
pub fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut last = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let s = c.to_string();
        if !s.is_empty() {
            last = s;
        }
        cur = c.source();
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16, reason: &str, message: &str) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status::failure(message, reason).with_code(code)))
    }

    #[test]
    fn messages_name_the_server_and_the_cause() {
        let s = "https://10.0.0.1:6443";
        assert_eq!(
            describe(&api(403, "Forbidden", "pods is forbidden: User \"bob\" cannot list"), s),
            "https://10.0.0.1:6443 answered HTTP 403 Forbidden: pods is forbidden: User \"bob\" cannot list"
        );
        assert_eq!(describe(&api(500, "", ""), s), "https://10.0.0.1:6443 answered HTTP 500");
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "Connection refused (os error 111)");
        let e = kube::Error::Service(Box::new(io));
        assert_eq!(describe(&e, s), "cannot reach https://10.0.0.1:6443: Connection refused (os error 111)");
        let w = watcher::Error::InitialListFailed(api(500, "InternalError", "etcd down"));
        let (verb, why) = describe_watch(&w, s);
        assert_eq!(
            (verb, why.as_str()),
            ("listing", "https://10.0.0.1:6443 answered HTTP 500 InternalError: etcd down")
        );
    }

    #[test]
    fn gone_is_recognised() {
        let gone = kube::core::Status::failure("too old resource version", "Expired").with_code(410);
        assert!(is_gone(&watcher::Error::WatchError(Box::new(gone))));
        assert!(is_gone(&watcher::Error::InitialListFailed(api(410, "Expired", "continue token expired"))));
        assert!(!is_gone(&watcher::Error::WatchStartFailed(api(500, "", ""))));
        assert!(!is_gone(&watcher::Error::NoResourceVersion));
    }
}
