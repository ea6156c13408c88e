//! A fake Kubernetes API server on 127.0.0.1 for the Kubernetes source's tests: discovery
//! (`/api`, `/apis`, Kueue's groups when installed), list with `limit`/`continue` and field
//! selectors, and watch streams of newline-delimited events (ADDED, MODIFIED, DELETED,
//! BOOKMARK, and ERROR 410 once history is compacted). For the actions: GET and merge-PATCH of
//! one node, pod evictions, and DeviceTaintRules created, read and deleted (k8s/write.rs), each write recorded with its method, content type and body, and
//! a canned answer for any method and path. Kueue's visibility API is in k8s/kueue.rs.
//! Failures, delays and a bearer token check are switches. It serves until dropped.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

pub mod dra;
pub mod kueue;
mod write;
use kueue::VISIBILITY_GROUP;
use write::{one, write};

pub const NODES: &str = "/api/v1/nodes";
pub const PODS: &str = "/api/v1/pods";
pub const CLASSES: &str = "/apis/scheduling.k8s.io/v1/priorityclasses";
pub const KUEUE: &str = "/apis/kueue.x-k8s.io/v1beta1/workloads";
pub const TOKEN: &str = "tessera-test-token-s3cret";

#[derive(Default)]
struct Collection {
    objects: BTreeMap<String, Value>,
    /// (resourceVersion, type, object), oldest first.
    events: Vec<(u64, &'static str, Value)>,
    /// Watches from an older resourceVersion get 410 Gone.
    compacted_below: u64,
}

#[derive(Default)]
struct State {
    rv: u64,
    collections: BTreeMap<&'static str, Collection>,
    kueue: bool,
    /// resource.k8s.io served: `Some(true)` with DeviceTaintRules (dra.rs).
    dra: Option<bool>,
    visibility: kueue::Visibility,
    fail: Option<u16>,
    delay: Duration,
    requests: Vec<String>,
    writes: Vec<Call>,
    /// (method, path) -> (status, body), answered instead of the usual handling.
    answers: BTreeMap<(String, String), (u16, String)>,
    /// path -> an item: a GET of the path is answered with a list of it that never ends.
    floods: BTreeMap<String, String>,
    /// DeviceTaintRule creations that succeed before every further one is refused (403).
    rule_creates_left: Option<usize>,
}

/// A request that is not a GET, as the server received it.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub method: String,
    /// Without the query.
    pub path: String,
    pub content_type: String,
    /// The body as JSON (a string when it is not JSON).
    pub body: Value,
}

impl State {
    /// Create or replace an object: an ADDED or MODIFIED event.
    fn upsert(&mut self, path: &'static str, mut obj: Value) -> Value {
        self.rv += 1;
        obj["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        let c = self.collections.entry(path).or_default();
        let kind = if c.objects.insert(key(&obj), obj.clone()).is_some() { "MODIFIED" } else { "ADDED" };
        c.events.push((self.rv, kind, obj.clone()));
        obj
    }
}

type Shared = Arc<(Mutex<State>, Condvar)>;

pub struct FakeK8s {
    pub addr: String,
    shared: Shared,
    stop: Arc<AtomicBool>,
}

fn key(obj: &Value) -> String {
    let m = &obj["metadata"];
    format!("{}/{}", m["namespace"].as_str().unwrap_or_default(), m["name"].as_str().unwrap_or_default())
}

impl FakeK8s {
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind: {e}"));
        let addr = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
        let mut state = State { rv: 100, ..State::default() };
        for path in [NODES, PODS, CLASSES, KUEUE].into_iter().chain(dra::ALL) {
            state.collections.insert(path, Collection::default());
        }
        let shared: Shared = Arc::new((Mutex::new(state), Condvar::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (sh, st) = (shared.clone(), stop.clone());
        listener.set_nonblocking(true).unwrap_or_else(|e| panic!("{e}"));
        std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let (sh, st) = (sh.clone(), st.clone());
                        std::thread::spawn(move || serve(stream, &sh, &st));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Self { addr, shared, stop }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A kubeconfig in `dir` whose current context points here with the bearer token.
    pub fn kubeconfig(&self, dir: &Path) -> PathBuf {
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\n\
             users:\n- name: tester\n  user:\n    token: {TOKEN}\ncontexts:\n- name: fake\n  context:\n    \
             cluster: fake\n    user: tester\ncurrent-context: fake\n",
            self.url()
        );
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{e}"));
        let path = dir.join("kubeconfig");
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
        path
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let (lock, cv) = &*self.shared;
        let mut s = lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let out = f(&mut s);
        cv.notify_all();
        out
    }

    /// Create or replace an object: an ADDED or MODIFIED event.
    pub fn put(&self, path: &'static str, obj: Value) {
        self.with(|s| s.upsert(path, obj));
    }

    /// Store objects as if they had always been there: no events (a watch from a list's
    /// resourceVersion sees none of them), so a generated cluster is held once.
    pub fn preload(&self, path: &'static str, objects: impl IntoIterator<Item = Value>) {
        self.with(|s| {
            for mut obj in objects {
                s.rv += 1;
                obj["metadata"]["resourceVersion"] = json!(s.rv.to_string());
                s.collections.entry(path).or_default().objects.insert(key(&obj), obj);
            }
        });
    }

    /// The object stored under `key` (`NS/NAME`, `/NAME` when not namespaced).
    pub fn get(&self, path: &'static str, key: &str) -> Option<Value> {
        self.with(|s| s.collections.get(path).and_then(|c| c.objects.get(key).cloned()))
    }

    /// Change a stored object in place: a MODIFIED event. Panics when there is none.
    pub fn edit(&self, path: &'static str, key: &str, change: impl FnOnce(&mut Value)) {
        let mut obj = self.get(path, key).unwrap_or_else(|| panic!("no {key} in {path}"));
        change(&mut obj);
        self.put(path, obj);
    }

    /// The requests other than GETs, in order.
    pub fn writes(&self) -> Vec<Call> {
        self.with(|s| s.writes.clone())
    }

    /// Answer `method path` (no query) with this status and body from now on.
    pub fn answer(&self, method: &str, path: &str, code: u16, body: Value) {
        self.with(|s| s.answers.insert((method.into(), path.into()), (code, body.to_string())));
    }

    /// Answer `GET path` (no query; watches too) with this text as it is, from now on.
    pub fn answer_text(&self, path: &str, text: String) {
        self.with(|s| s.answers.insert(("GET".into(), path.into()), (200, text)));
    }

    /// Answer `GET path` (no query; watches too) with a list of `item` that never ends, sent
    /// as it is written, from now on.
    pub fn flood(&self, path: &str, item: &str) {
        self.with(|s| s.floods.insert(path.into(), item.into()));
    }

    pub fn delete(&self, path: &'static str, key: &str) {
        self.with(|s| {
            s.rv += 1;
            let rv = s.rv;
            let c = s.collections.entry(path).or_default();
            if let Some(mut obj) = c.objects.remove(key) {
                obj["metadata"]["resourceVersion"] = json!(rv.to_string());
                c.events.push((rv, "DELETED", obj));
            }
        });
    }

    pub fn bookmark(&self, path: &'static str) {
        self.with(|s| {
            s.rv += 1;
            let rv = s.rv;
            let kind = if path == PODS { "Pod" } else { "Node" };
            let obj = json!({"kind": kind, "apiVersion": "v1", "metadata": {"resourceVersion": rv.to_string()}});
            s.collections.entry(path).or_default().events.push((rv, "BOOKMARK", obj));
        });
    }

    /// Change objects without events, then compact history: open watches get 410 Gone and
    /// only a new list shows the change.
    pub fn compact(&self, path: &'static str, change: impl FnOnce(&mut BTreeMap<String, Value>)) {
        self.with(|s| {
            s.rv += 1;
            let rv = s.rv;
            let c = s.collections.entry(path).or_default();
            change(&mut c.objects);
            for obj in c.objects.values_mut() {
                obj["metadata"]["resourceVersion"] = json!(rv.to_string());
            }
            c.events.clear();
            c.compacted_below = rv;
        });
    }

    pub fn set_kueue(&self, on: bool) {
        self.with(|s| s.kueue = on);
    }

    /// Answer every request with this HTTP status (and end open watches), or stop failing.
    pub fn fail(&self, status: Option<u16>) {
        self.with(|s| s.fail = status);
    }

    /// Wait this long before answering any request.
    pub fn delay(&self, d: Duration) {
        self.with(|s| s.delay = d);
    }

    /// The request lines seen so far (path and query).
    pub fn requests(&self) -> Vec<String> {
        self.with(|s| s.requests.clone())
    }
}

impl Drop for FakeK8s {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.shared.1.notify_all();
    }
}

fn query(target: &str) -> (String, BTreeMap<String, String>) {
    let (path, q) = target.split_once('?').unwrap_or((target, ""));
    let decode = |s: &str| {
        let s = s.replace('+', " ");
        let mut out = Vec::new();
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'%'
                && let Some(v) = s.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                out.push(v);
                i += 3;
                continue;
            }
            out.push(b[i]);
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    };
    let params = q.split('&').filter_map(|kv| kv.split_once('=')).map(|(k, v)| (decode(k), decode(v))).collect();
    (path.to_string(), params)
}

/// `a.b!=x,c=y` as the API server reads it, for the dotted fields the tests use.
fn matches(obj: &Value, selector: Option<&String>) -> bool {
    let Some(sel) = selector else { return true };
    sel.split(',').filter(|t| !t.is_empty()).all(|term| {
        let (field, want, negate) = match term.split_once("!=") {
            Some((f, v)) => (f, v, true),
            None => match term.split_once('=') {
                Some((f, v)) => (f, v.trim_start_matches('='), false),
                None => return true,
            },
        };
        let got = field.split('.').fold(obj, |v, k| &v[k]).as_str().unwrap_or_default();
        (got == want) != negate
    })
}

fn status_body(code: u16, reason: &str, message: &str) -> String {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
        "reason": reason, "code": code})
    .to_string()
}

fn respond(stream: &mut TcpStream, code: u16, body: &str) -> bool {
    let head = format!("HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n", body.len());
    stream.write_all(head.as_bytes()).and_then(|_| stream.write_all(body.as_bytes())).is_ok()
}

fn chunk(stream: &mut TcpStream, line: &str) -> bool {
    let data = format!("{line}\n");
    stream.write_all(format!("{:x}\r\n{data}\r\n", data.len()).as_bytes()).and_then(|_| stream.flush()).is_ok()
}

fn serve(stream: TcpStream, shared: &Shared, stop: &AtomicBool) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let Ok(read) = stream.try_clone() else { return };
    let mut reader = BufReader::new(read);
    let mut stream = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let method = line.split_whitespace().next().unwrap_or("GET").to_string();
        let target = line.split_whitespace().nth(1).unwrap_or("/").to_string();
        let (mut auth, mut content_type, mut length) = (String::new(), String::new(), 0usize);
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                break;
            }
            let Some((name, value)) = h.split_once(':') else { continue };
            match name.to_ascii_lowercase().as_str() {
                "authorization" => auth = value.trim().to_string(),
                "content-type" => content_type = value.trim().to_string(),
                "content-length" => length = value.trim().parse().unwrap_or(0),
                _ => {}
            }
        }
        let mut body = vec![0; length];
        if std::io::Read::read_exact(&mut reader, &mut body).is_err() {
            return;
        }
        let lock = &shared.0;
        let (path, params) = query(&target);
        let (delay, fail, kueue, answer, discovery, flood, dra_served, dra_resources) = {
            let mut s = lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            s.requests.push(target.clone());
            if method != "GET" {
                let text = String::from_utf8_lossy(&body).into_owned();
                let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
                let content_type = content_type.clone();
                s.writes.push(Call { method: method.clone(), path: path.clone(), content_type, body });
            }
            let answer = s.answers.get(&(method.clone(), path.clone())).cloned();
            let discovery = kueue::groups(&s);
            let visibility = path.starts_with(&format!("/apis/{VISIBILITY_GROUP}/"));
            let answer = answer.or_else(|| visibility.then(|| kueue::visibility(&s, &path, &params)));
            let flood = s.floods.get(&path).filter(|_| method == "GET").cloned();
            let dra_served = dra::served(&s, &path);
            let dra_resources = dra::resources(&s, &path);
            (s.delay, s.fail, s.kueue, answer, discovery, flood, dra_served, dra_resources)
        };
        std::thread::sleep(delay);
        if auth != format!("Bearer {TOKEN}") {
            respond(&mut stream, 401, &status_body(401, "Unauthorized", "Unauthorized"));
            continue;
        }
        if let Some(code) = fail {
            respond(
                &mut stream,
                code,
                &status_body(code, "InternalError", "the fake API server is failing on purpose"),
            );
            continue;
        }
        if let Some(item) = flood {
            endless(&mut stream, stop, &item);
            return;
        }
        if let Some((code, text)) = answer {
            respond(&mut stream, code, &text);
            continue;
        }
        if method != "GET" || one(&path).is_some() {
            let (code, text) = write(shared, &method, &path, &content_type, &body);
            if !respond(&mut stream, code, &text) {
                return;
            }
            continue;
        }
        let ok = match path.as_str() {
            "/api" => respond(&mut stream, 200, &json!({"kind": "APIVersions", "versions": ["v1"]}).to_string()),
            "/apis" => respond(&mut stream, 200, &discovery.to_string()),
            "/apis/kueue.x-k8s.io/v1beta1" if kueue => respond(&mut stream, 200, &kueue::kueue_resources().to_string()),
            _ if dra_resources.is_some() => {
                respond(&mut stream, 200, &dra_resources.map(|v| v.to_string()).unwrap_or_default())
            }
            p if dra::ALL.contains(&p) && !dra_served => respond(
                &mut stream,
                404,
                &status_body(404, "NotFound", "the server could not find the requested resource"),
            ),
            p if params.get("watch").is_some_and(|w| w == "true" || w == "1") => {
                let Some(name) = [NODES, PODS, CLASSES, KUEUE].into_iter().chain(dra::ALL).find(|c| *c == p) else {
                    respond(&mut stream, 404, &status_body(404, "NotFound", "not found"));
                    continue;
                };
                if name == KUEUE && !kueue {
                    respond(&mut stream, 404, &status_body(404, "NotFound", "not found"));
                    continue;
                }
                watch(&mut stream, shared, stop, name, &params);
                // The stream ended: HTTP/1.1 with chunked bodies can go on, but a real server
                // closes here too often for a client to rely on reuse.
                return;
            }
            p => match [NODES, PODS, CLASSES, KUEUE].into_iter().chain(dra::ALL).find(|c| *c == p) {
                Some(KUEUE) if !kueue => respond(&mut stream, 404, &status_body(404, "NotFound", "not found")),
                Some(name) => {
                    let body = list(&lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner), name, &params);
                    respond(&mut stream, 200, &body)
                }
                None => respond(&mut stream, 404, &status_body(404, "NotFound", "the server could not find it")),
            },
        };
        if !ok {
            return;
        }
    }
}

fn list(s: &State, name: &'static str, params: &BTreeMap<String, String>) -> String {
    let Some(c) = s.collections.get(name) else { return status_body(404, "NotFound", "not found") };
    let items: Vec<&Value> = c.objects.values().filter(|o| matches(o, params.get("fieldSelector"))).collect();
    let start: usize = params.get("continue").and_then(|c| c.parse().ok()).unwrap_or(0);
    let limit: usize = params.get("limit").and_then(|l| l.parse().ok()).filter(|&l| l > 0).unwrap_or(usize::MAX);
    let end = start.saturating_add(limit).min(items.len());
    let page: &[&Value] = items.get(start..end).unwrap_or_default();
    let mut meta = json!({"resourceVersion": s.rv.to_string()});
    if end < items.len() {
        meta["continue"] = json!(end.to_string());
    }
    // Written out item by item, not copied into one value first: a page of DynamicMIG slices
    // is a megabyte, and the scale benchmark reads 282 of them.
    let items: Vec<String> = page.iter().map(|o| o.to_string()).collect();
    format!(r#"{{"kind":"List","apiVersion":"v1","metadata":{meta},"items":[{}]}}"#, items.join(","))
}

/// Stream events after the requested resourceVersion until the watch times out, the server
/// starts failing, history is compacted past it (410), or the server stops.
fn watch(
    stream: &mut TcpStream,
    shared: &Shared,
    stop: &AtomicBool,
    name: &'static str,
    params: &BTreeMap<String, String>,
) {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    if stream.write_all(head.as_bytes()).is_err() {
        return;
    }
    let mut from: u64 = params.get("resourceVersion").and_then(|v| v.parse().ok()).unwrap_or(0);
    let timeout = Duration::from_secs(params.get("timeoutSeconds").and_then(|t| t.parse().ok()).unwrap_or(290));
    let started = std::time::Instant::now();
    let selector = params.get("fieldSelector").cloned();
    let (lock, cv) = &**shared;
    let mut s = lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    loop {
        if stop.load(Ordering::Relaxed) || s.fail.is_some() || started.elapsed() > timeout {
            break;
        }
        let Some(c) = s.collections.get(name) else { break };
        if from < c.compacted_below {
            let gone = format!(
                r#"{{"type":"ERROR","object":{}}}"#,
                status_body(410, "Expired", &format!("too old resource version: {from} ({})", c.compacted_below))
            );
            drop(s);
            chunk(stream, &gone);
            break;
        }
        let pending: Vec<(u64, &'static str, Value)> = c.events.iter().filter(|(rv, ..)| *rv > from).cloned().collect();
        if pending.is_empty() {
            s = cv.wait_timeout(s, Duration::from_millis(100)).map(|(g, _)| g).unwrap_or_else(|e| e.into_inner().0);
            continue;
        }
        drop(s);
        for (rv, kind, obj) in pending {
            from = rv;
            // An object that stops matching the selector is gone as far as this watch goes.
            let kind = if kind == "MODIFIED" && !matches(&obj, selector.as_ref()) { "DELETED" } else { kind };
            if kind != "BOOKMARK" && kind != "DELETED" && !matches(&obj, selector.as_ref()) {
                continue;
            }
            if !chunk(stream, &json!({"type": kind, "object": obj}).to_string()) {
                return;
            }
        }
        s = lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    }
    let _ = stream.write_all(b"0\r\n\r\n");
}

/// A list whose items never end, until the client goes or the server stops.
fn endless(stream: &mut TcpStream, stop: &AtomicBool, item: &str) {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    let open = r#"{"kind":"List","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":["#;
    let more = format!(",{item}").repeat(1000);
    let mut ok = stream.write_all(head.as_bytes()).is_ok() && chunk(stream, &format!("{open}{item}"));
    while ok && !stop.load(Ordering::Relaxed) {
        ok = chunk(stream, &more);
    }
}

/// A listener that accepts connections and never answers.
pub struct Silent {
    pub addr: String,
    stop: Arc<AtomicBool>,
}

impl Silent {
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind: {e}"));
        let addr = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
        listener.set_nonblocking(true).unwrap_or_else(|e| panic!("{e}"));
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            while !st.load(Ordering::Relaxed) {
                if let Ok((s, _)) = listener.accept() {
                    held.push(s);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        Self { addr, stop }
    }
}

impl Drop for Silent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
