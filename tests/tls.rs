//! TLS against a server on 127.0.0.1 with certificates made here: a private CA given as
//! `ca_file` is trusted; without it the error says "unknown issuer" and how to trust a CA; a
//! self-signed server certificate is trusted as `ca_file` unless it is marked a CA (what
//! `openssl req -x509` makes), which the verifier refuses as a server's own and the error
//! says; a name mismatch and an expired certificate are said in words.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::sync::Arc;

use rcgen::{BasicConstraints, Certificate, CertificateParams, DnType, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::Value;

fn ca() -> (Certificate, KeyPair) {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap_or_else(|e| panic!("{e}"));
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, "tessera test CA");
    let key = KeyPair::generate().unwrap_or_else(|e| panic!("{e}"));
    let cert = p.self_signed(&key).unwrap_or_else(|e| panic!("{e}"));
    (cert, key)
}

/// A server certificate for `names`, signed by `issuer` (or self-signed), valid now unless
/// `expired`; `as_ca` marks it a CA (basicConstraints CA:TRUE).
fn server_cert(
    names: &[&str],
    issuer: Option<&(Certificate, KeyPair)>,
    expired: bool,
    as_ca: bool,
) -> (Certificate, KeyPair) {
    let mut p = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
        .unwrap_or_else(|e| panic!("{e}"));
    p.distinguished_name.push(DnType::CommonName, names.first().copied().unwrap_or("server"));
    if as_ca {
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    }
    if expired {
        p.not_before = rcgen::date_time_ymd(2020, 1, 1);
        p.not_after = rcgen::date_time_ymd(2021, 1, 1);
    }
    let key = KeyPair::generate().unwrap_or_else(|e| panic!("{e}"));
    let cert = match issuer {
        Some((ca, ca_key)) => p.signed_by(&key, ca, ca_key),
        None => p.self_signed(&key),
    }
    .unwrap_or_else(|e| panic!("{e}"));
    (cert, key)
}

/// An HTTPS server on 127.0.0.1 answering every request with dcgm-exporter text.
fn serve(cert: &Certificate, key: &KeyPair) -> String {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = vec![CertificateDer::from(cert.der().to_vec())];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(chain, key))
        .unwrap_or_else(|e| panic!("{e}"));
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let addr = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
    let body = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/dcgm/metrics-t4-nonmig.datadog-fixture.prom"),
    )
    .unwrap_or_default();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (config, body) = (config.clone(), body.clone());
            std::thread::spawn(move || {
                let Ok(conn) = rustls::ServerConnection::new(config) else { return };
                let mut tls = rustls::StreamOwned::new(conn, stream);
                let mut req = Vec::new();
                let mut buf = [0u8; 4096];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = tls.write_all(head.as_bytes()).and_then(|()| tls.write_all(body.as_bytes()));
                tls.conn.send_close_notify();
                let _ = tls.flush();
            });
        }
    });
    addr
}

/// `tessera snapshot --json` scraping `https://ADDR/metrics`, with `ca_file` if given: the
/// source's state and error.
fn scrape(addr: &str, ca_file: Option<&std::path::Path>, name: &str) -> (String, String) {
    let dir = std::env::temp_dir().join(format!("tessera-tls-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let mut text = format!("[sources]\nscrape = [\"https://{addr}/metrics\"]\n");
    if let Some(ca) = ca_file {
        text.push_str(&format!("[sources.http]\nca_file = {:?}\n", ca.display().to_string()));
    }
    let cfg = dir.join("config.toml");
    std::fs::write(&cfg, text).unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["snapshot", "--json", "--config", &cfg.to_string_lossy()])
        .env("XDG_CONFIG_HOME", "/nonexistent-tessera-test")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let _ = std::fs::remove_dir_all(&dir);
    let s = &v["sources"][0];
    let err = format!("{}{}", s["error"].as_str().unwrap_or_default(), String::from_utf8_lossy(&out.stderr));
    (s["state"].as_str().unwrap_or_default().to_string(), err)
}

fn pem_file(name: &str, cert: &Certificate) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tessera-tls-pem-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let path = dir.join(name);
    std::fs::write(&path, cert.pem()).unwrap_or_else(|e| panic!("{e}"));
    path
}

#[test]
fn a_private_ca_is_trusted_and_failures_are_said_in_words() {
    let authority = ca();
    let ca_pem = pem_file("ca.pem", &authority.0);

    // Signed by the CA: trusted with ca_file, refused without it (unknown issuer, and how).
    let (cert, key) = server_cert(&["127.0.0.1", "localhost"], Some(&authority), false, false);
    let good = serve(&cert, &key);
    let (state, err) = scrape(&good, Some(&ca_pem), "ca");
    assert_eq!(state, "live", "{err}");
    let (state, err) = scrape(&good, None, "none");
    assert_ne!(state, "live");
    assert!(err.contains("unknown issuer") && err.contains("ca_file"), "{err}");

    // A self-signed server certificate (not a CA) given as ca_file: trusted.
    let (own, own_key) = server_cert(&["127.0.0.1"], None, false, false);
    let own_pem = pem_file("self.pem", &own);
    let (state, err) = scrape(&serve(&own, &own_key), Some(&own_pem), "self");
    assert_eq!(state, "live", "{err}");
    // One marked as a CA (what `openssl req -x509` makes by default) cannot be a server's own
    // certificate for the verifier; the error says so and what to do.
    let (ca_like, ca_like_key) = server_cert(&["127.0.0.1"], None, false, true);
    let ca_like_pem = pem_file("self-ca.pem", &ca_like);
    let (state, err) = scrape(&serve(&ca_like, &ca_like_key), Some(&ca_like_pem), "self-ca");
    assert_ne!(state, "live");
    assert!(err.contains("presents a CA certificate as its own"), "{err}");

    // The wrong name, and an expired certificate, from the trusted CA.
    let (other, other_key) = server_cert(&["other.example"], Some(&authority), false, false);
    let (state, err) = scrape(&serve(&other, &other_key), Some(&ca_pem), "name");
    assert_ne!(state, "live");
    assert!(err.contains("not valid for this host name"), "{err}");
    let (old, old_key) = server_cert(&["127.0.0.1"], Some(&authority), true, false);
    let (state, err) = scrape(&serve(&old, &old_key), Some(&ca_pem), "expired");
    assert_ne!(state, "live");
    assert!(err.contains("has expired"), "{err}");
    let _ = std::fs::remove_dir_all(ca_pem.parent().unwrap_or(&ca_pem));
}
