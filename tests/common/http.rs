//! A tiny HTTP/1.1 server on 127.0.0.1 for tests: fixed routes, optional bearer check,
//! optional delay, counting requests. It serves until dropped.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone)]
pub struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    pub delay: Duration,
    /// Send the body again and again, for ever (a flooding peer).
    pub flood: bool,
}

impl Reply {
    pub fn ok(body: impl Into<Vec<u8>>) -> Self {
        Self {
            status: 200,
            content_type: "text/plain; version=0.0.4",
            body: body.into(),
            delay: Duration::ZERO,
            flood: false,
        }
    }

    /// A 200 whose body never ends.
    pub fn flood() -> Self {
        Self { flood: true, ..Self::ok(b"# flood\n".repeat(8192)) }
    }

    pub fn status(status: u16, content_type: &'static str, body: impl Into<Vec<u8>>) -> Self {
        Self { status, content_type, body: body.into(), delay: Duration::ZERO, flood: false }
    }
}

pub struct Server {
    pub addr: String,
    routes: Arc<Mutex<HashMap<String, Reply>>>,
    pub requests: Arc<AtomicUsize>,
    /// The Authorization header of every request, in order (None: none sent).
    pub auths: Arc<Mutex<Vec<Option<String>>>>,
    stop: Arc<AtomicBool>,
}

impl Server {
    /// Serve `routes` (path -> reply); with `token`, requests without `Authorization: Bearer
    /// TOKEN` get 401.
    pub fn start(routes: HashMap<String, Reply>, token: Option<&str>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind: {e}"));
        let addr = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
        let routes = Arc::new(Mutex::new(routes));
        let requests = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let auths = Arc::new(Mutex::new(Vec::new()));
        let (r, n, s, seen) = (routes.clone(), requests.clone(), stop.clone(), auths.clone());
        let token = token.map(str::to_string);
        listener.set_nonblocking(true).unwrap_or_else(|e| panic!("{e}"));
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let (r, n, token, seen) = (r.clone(), n.clone(), token.clone(), seen.clone());
                        std::thread::spawn(move || serve(stream, &r, &n, &seen, token.as_deref()));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Self { addr, routes, requests, auths, stop }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn set(&self, path: &str, reply: Reply) {
        if let Ok(mut r) = self.routes.lock() {
            r.insert(path.to_string(), reply);
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn serve(
    stream: TcpStream,
    routes: &Mutex<HashMap<String, Reply>>,
    n: &AtomicUsize,
    seen: &Mutex<Vec<Option<String>>>,
    token: Option<&str>,
) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut reader = BufReader::new(match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    });
    let mut stream = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
        let mut auth = None;
        let mut length = 0usize;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                break;
            }
            let lower = h.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                length = v.trim().parse().unwrap_or(0);
            }
            if lower.starts_with("authorization:") {
                auth = Some(h["authorization:".len()..].trim().to_string());
            }
            // slurmrestd's JWT header counts as the same token.
            if lower.starts_with("x-slurm-user-token:") {
                auth = Some(format!("Bearer {}", h["x-slurm-user-token:".len()..].trim()));
            }
        }
        let mut body = vec![0; length];
        let _ = reader.read_exact(&mut body);
        n.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut s) = seen.lock() {
            s.push(auth.clone());
        }
        let reply = match (token, auth.as_deref()) {
            (Some(t), Some(a)) if a == format!("Bearer {t}") => lookup(routes, &path),
            // Like some proxies: the refusal quotes what it was sent.
            (Some(_), a) => Reply::status(401, "text/plain", format!("unauthorized: {}\n", a.unwrap_or("nothing"))),
            (None, _) => lookup(routes, &path),
        };
        std::thread::sleep(reply.delay);
        if reply.flood {
            let head = format!("HTTP/1.1 200 X\r\nContent-Type: {}\r\nConnection: close\r\n\r\n", reply.content_type);
            if stream.write_all(head.as_bytes()).is_err() {
                return;
            }
            while stream.write_all(&reply.body).is_ok() {}
            return;
        }
        let head = format!(
            "HTTP/1.1 {} X\r\nContent-Type: {}\r\nContent-Length: {}\r\n\r\n",
            reply.status,
            reply.content_type,
            reply.body.len()
        );
        if stream.write_all(head.as_bytes()).and_then(|_| stream.write_all(&reply.body)).is_err() {
            return;
        }
    }
}

/// The route of the whole target (path and query) if there is one, else of its path.
fn lookup(routes: &Mutex<HashMap<String, Reply>>, target: &str) -> Reply {
    let path = target.split('?').next().unwrap_or(target);
    routes
        .lock()
        .ok()
        .and_then(|r| r.get(target).or_else(|| r.get(path)).cloned())
        .unwrap_or_else(|| Reply::status(404, "text/plain", "not found\n"))
}
