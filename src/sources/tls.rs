//! TLS for the HTTP sources in words: the CA file a private server is trusted through, and
//! what a failed handshake means (unknown issuer, name mismatch, expired) with what to do,
//! instead of the library's internals.

/// Why the CA file given as `ca_file` gave no certificates.
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    #[error("cannot read CA file {path}: {why}")]
    Read { path: String, why: crate::files::ReadError },
    /// No PEM certificate block in it.
    #[error(
        "CA file {path}: no PEM certificate in it (expected -----BEGIN CERTIFICATE-----; a DER file converts with `openssl x509 -inform der -in FILE -out FILE.pem`)"
    )]
    NoPem { path: String },
    /// A PEM block that does not parse.
    #[error("CA file {path}: {source}")]
    Parse { path: String, source: reqwest::Error },
    #[error("CA file {path}: no certificate could be read")]
    Empty { path: String },
}

/// The certificates of a PEM file given as `ca_file`: every `CERTIFICATE` block in it. A file
/// that holds none is refused by name (a DER file, a key, a path to the wrong file).
pub fn ca_certificates(path: &str) -> Result<Vec<reqwest::Certificate>, CaError> {
    let pem = crate::files::read_bounded(std::path::Path::new(path), crate::files::CA_LIMIT)
        .map_err(|why| CaError::Read { path: path.to_string(), why })?;
    if !pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") {
        return Err(CaError::NoPem { path: path.to_string() });
    }
    let certs = reqwest::Certificate::from_pem_bundle(&pem)
        .map_err(|source| CaError::Parse { path: path.to_string(), source })?;
    if certs.is_empty() {
        return Err(CaError::Empty { path: path.to_string() });
    }
    Ok(certs)
}

/// The root cause of a request's failure, with a TLS failure said plainly.
pub fn explain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    let root = cur.to_string();
    plain(&root).unwrap_or(root)
}

/// A TLS verification failure, as rustls words it, in words an operator can act on.
fn plain(root: &str) -> Option<String> {
    const TRUST: &str = "trust a private CA with ca_file = \"CA.pem\" in [sources.http]: the CA that signed the server's certificate, or the server's own self-signed certificate";
    let why = if root.contains("UnknownIssuer") || root.contains("unknown issuer") {
        format!("TLS: the server's certificate is signed by an unknown issuer: {TRUST}")
    } else if root.contains("NotValidForName") || root.contains("not valid for name") {
        "TLS: the server's certificate is not valid for this host name (connect by a name the certificate lists)"
            .to_string()
    } else if root.contains("Expired") || root.contains("expired") {
        "TLS: the server's certificate has expired (or this host's clock is wrong)".to_string()
    } else if root.contains("NotValidYet") || root.contains("not valid yet") {
        "TLS: the server's certificate is not valid yet (or this host's clock is wrong)".to_string()
    } else if root.contains("CaUsedAsEndEntity") || root.contains("used as end entity") {
        "TLS: the server presents a CA certificate as its own (a self-signed certificate marked CA:TRUE, as `openssl req -x509` makes by default): sign the server's certificate with that CA instead, or make it with -addext basicConstraints=critical,CA:FALSE".to_string()
    } else if root.contains("invalid peer certificate") {
        format!("TLS: the server's certificate was refused ({root})")
    } else if root.contains("InvalidContentType") || root.contains("corrupt message") {
        "TLS: the server did not answer in TLS (is it plain http?)".to_string()
    } else {
        return None;
    };
    Some(why)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rustls_failures_are_said_plainly() {
        let issuer = plain("invalid peer certificate: UnknownIssuer").unwrap_or_default();
        assert!(issuer.contains("unknown issuer") && issuer.contains("ca_file"), "{issuer}");
        let name = plain("invalid peer certificate: certificate not valid for name \"x\"").unwrap_or_default();
        assert!(name.contains("not valid for this host name"), "{name}");
        assert!(plain("invalid peer certificate: Expired").is_some_and(|s| s.contains("expired")));
        assert_eq!(plain("connection refused"), None);
    }

    #[test]
    fn a_file_without_a_pem_certificate_is_refused_by_name() {
        let dir = std::env::temp_dir().join(format!("tessera-tls-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let f = dir.join("ca.der");
        let _ = std::fs::write(&f, [0x30u8, 0x82, 0x01, 0x0a]);
        let e = ca_certificates(&f.to_string_lossy()).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("no PEM certificate") && e.contains("ca.der"), "{e}");
        let e = ca_certificates("/nonexistent/ca.pem").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("cannot read CA file /nonexistent/ca.pem"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
