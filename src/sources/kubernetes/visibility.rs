//! Kueue's visibility API (`visibility.kueue.x-k8s.io`): where each pending Workload stands in
//! its ClusterQueue and LocalQueue. One request per LocalQueue that has pending GPU Workloads
//! (the per-LocalQueue endpoint needs no LocalQueue→ClusterQueue mapping), a few at a time,
//! each with a timeout. The API is often not served or not granted: that is a note and a
//! retry minutes later, never a reason to call the source unhealthy.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use kube::Client;
use serde::Deserialize;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::objects::{KueueWorkload, nullable};
use super::{Settings, error, kueue};

pub const GROUP: &str = "visibility.kueue.x-k8s.io";
/// Not served, not granted or its server down: like the Kueue CRD check, look again later.
const RECHECK: Duration = Duration::from_secs(300);
/// Any other failure (a timeout, a 500) may pass soon.
const RETRY: Duration = Duration::from_secs(30);
/// The visibility server is one Kueue pod: a few requests at a time spare it.
const PARALLEL: usize = 4;
const TIMEOUT: Duration = Duration::from_secs(10);
/// The API's own default page size; a queue is read on only while Workloads are missing.
const PAGE: usize = 1000;
const MAX_PAGES: usize = 10;

pub use super::kueue::{Position, Positions};

/// One LocalQueue's answer: (namespace, Workload name) and where it stands.
type Found = Vec<((String, String), Position)>;

/// The LocalQueues to ask, as (namespace, queue), each with the Workloads it must place.
pub type Wanted = BTreeMap<(String, String), BTreeSet<String>>;

/// `PendingWorkloadsSummary` (v1beta1 and v1beta2 alike), cut down to what is read; each
/// item's `localQueueName` is the queue asked, so it is not.
#[derive(Debug, Default, Deserialize)]
pub struct Summary {
    #[serde(default, deserialize_with = "nullable")]
    pub items: Vec<Item>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Item {
    #[serde(default, deserialize_with = "nullable")]
    pub metadata: ItemMeta,
    #[serde(default)]
    pub position_in_cluster_queue: Option<i64>,
    #[serde(default)]
    pub position_in_local_queue: Option<i64>,
    #[serde(default)]
    pub priority: Option<i32>,
}

/// Only the name: a full ObjectMeta would reject an item over one odd owner reference.
#[derive(Debug, Default, Deserialize)]
pub struct ItemMeta {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
}

/// The summary's positions; `namespace` is the LocalQueue's, for items that leave theirs out.
/// Items without a name or a position (or with a negative one) are skipped.
pub fn positions(summary: Summary, namespace: &str) -> Found {
    let pos = |p: Option<i64>| p.and_then(|p| u64::try_from(p).ok());
    summary
        .items
        .into_iter()
        .filter_map(|i| {
            let at = Position {
                cluster_queue: pos(i.position_in_cluster_queue)?,
                local_queue: pos(i.position_in_local_queue)?,
                priority: i.priority,
            };
            let ns = i.metadata.namespace.filter(|n| !n.is_empty()).unwrap_or_else(|| namespace.to_string());
            Some(((ns, i.metadata.name.filter(|n| !n.is_empty())?), at))
        })
        .collect()
}

/// A DNS-1123 name, as namespaces and LocalQueues must be: anything else cannot exist and
/// must not reach a URL path.
fn dns_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
}

/// The LocalQueues that hold pending Workloads asking for GPUs, the only ones shown.
pub fn wanted(kueue: &[impl AsRef<KueueWorkload>]) -> Wanted {
    let mut out = Wanted::new();
    for w in kueue.iter().map(AsRef::as_ref) {
        let (Some(ns), Some(name), Some(queue)) = (&w.metadata.namespace, &w.metadata.name, &w.spec.queue_name) else {
            continue;
        };
        if dns_name(ns) && dns_name(queue) && kueue::asks_for_gpus(w) && kueue::pending_reason(w, None).is_some() {
            out.entry((ns.clone(), queue.clone())).or_default().insert(name.clone());
        }
    }
    out
}

/// Why positions are missing, and when to ask again.
#[derive(Debug, Clone)]
struct Failure {
    message: String,
    retry_at: Instant,
    /// HTTP 404: the path is not served (any more).
    not_found: bool,
}

impl Failure {
    fn new(message: String, wait: Duration) -> Self {
        Self { message, retry_at: Instant::now() + wait, not_found: false }
    }

    fn from_kube(e: &kube::Error, server: &str) -> Self {
        let code = match e {
            kube::Error::Api(s) => s.code,
            _ => 0,
        };
        let wait = if matches!(code, 401 | 403 | 404 | 503) { RECHECK } else { RETRY };
        Self { not_found: code == 404, ..Self::new(error::describe(e, server), wait) }
    }

    fn late(server: &str, what: &str) -> Self {
        Self::new(format!("no answer from {server} to {what} within {}s", TIMEOUT.as_secs()), RETRY)
    }
}

/// What the last round found: positions by Workload, and a note when some are missing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Known {
    pub positions: Positions,
    pub note: Option<String>,
}

/// The visibility API as this source has found it so far.
pub struct Visibility {
    client: Client,
    server: String,
    /// The served version, once discovery found one.
    version: Option<String>,
    /// Discovery failed: no queue is asked until `retry_at`.
    discovery: Option<Failure>,
    queues: BTreeMap<(String, String), Result<Found, Failure>>,
    asked: bool,
}

impl Visibility {
    /// `client` should not retry by itself: kube's default one repeats a 503 for minutes.
    pub fn new(client: Client, server: String) -> Self {
        Self { client, server, version: None, discovery: None, queues: BTreeMap::new(), asked: false }
    }

    /// Ask each wanted LocalQueue that is not backing off; forget queues no longer wanted.
    pub async fn refresh(&mut self, wanted: &Wanted) {
        self.queues.retain(|q, _| wanted.contains_key(q));
        self.asked = !wanted.is_empty();
        if wanted.is_empty() || self.discovery.as_ref().is_some_and(|f| Instant::now() < f.retry_at) {
            return;
        }
        let version = match &self.version {
            Some(v) => v.clone(),
            None => match discover(&self.client, &self.server).await {
                Ok(v) => {
                    self.discovery = None;
                    self.version.insert(v).clone()
                }
                Err(f) => {
                    self.discovery = Some(f);
                    return;
                }
            },
        };
        let now = Instant::now();
        // Owned, so the stream's closures take no borrowed arguments (which a spawned future
        // cannot prove general enough).
        let due: Vec<((String, String), BTreeSet<String>)> = wanted
            .iter()
            .filter(|(q, _)| !matches!(self.queues.get(*q), Some(Err(f)) if now < f.retry_at))
            .map(|(q, n)| (q.clone(), n.clone()))
            .collect();
        let (client, server, version) = (&self.client, self.server.as_str(), version.as_str());
        let answers: Vec<_> = futures_util::stream::iter(due)
            .map(|(q, names)| async move {
                let answer = fetch(client, server, version, &q, &names).await;
                (q, answer)
            })
            .buffer_unordered(PARALLEL)
            .collect()
            .await;
        for (queue, answer) in answers {
            // A 404 may mean Kueue changed versions under us: look again next time.
            if answer.as_ref().is_err_and(|f| f.not_found) {
                self.version = None;
            }
            self.queues.insert(queue, answer);
        }
    }

    /// The positions found and, while wanted queues lack them, a note saying why.
    pub fn known(&self) -> Known {
        let positions = self.queues.values().filter_map(|r| r.as_ref().ok()).flatten().cloned().collect();
        let failed: Vec<_> = self.queues.iter().filter_map(|(q, r)| Some((q, r.as_ref().err()?))).collect();
        let note = match (&self.discovery, failed.first()) {
            _ if !self.asked => None,
            (Some(f), _) => Some(format!("Kueue positions unavailable: {}", f.message)),
            (None, Some(((ns, queue), f))) => {
                let more = match failed.len() - 1 {
                    0 => String::new(),
                    1 => " (and 1 more queue)".into(),
                    n => format!(" (and {n} more queues)"),
                };
                Some(format!("Kueue positions unavailable for {ns}/{queue}{more}: {}", f.message))
            }
            (None, None) => None,
        };
        Known { positions, note }
    }
}

/// The best served version of the visibility API: v1beta2, else v1beta1.
async fn discover(client: &Client, server: &str) -> Result<String, Failure> {
    let groups = tokio::time::timeout(TIMEOUT, client.list_api_groups())
        .await
        .map_err(|_| Failure::late(server, "API discovery"))?
        .map_err(|e| Failure::from_kube(&e, server))?;
    let Some(group) = groups.groups.iter().find(|g| g.name == GROUP) else {
        return Err(Failure::new(format!("{server} does not serve {GROUP}"), RECHECK));
    };
    let served: Vec<&str> = group.versions.iter().map(|v| v.version.as_str()).collect();
    match ["v1beta2", "v1beta1"].into_iter().find(|v| served.contains(v)) {
        Some(v) => Ok(v.to_string()),
        None => Err(Failure::new(format!("{server} serves {GROUP} only as {}", served.join(", ")), RECHECK)),
    }
}

/// One LocalQueue's pending Workloads, page by page until `names` are all placed.
async fn fetch(
    client: &Client,
    server: &str,
    version: &str,
    (ns, queue): &(String, String),
    names: &BTreeSet<String>,
) -> Result<Found, Failure> {
    let base = kube::core::Request::new(format!("/apis/{GROUP}/{version}/namespaces/{ns}/localqueues"));
    let mut out = Vec::new();
    let mut missing = names.clone();
    for page in 0..MAX_PAGES {
        let internal = |e: String| Failure::new(format!("internal: request for {ns}/{queue}: {e}"), RETRY);
        let mut req = base.get_subresource("pendingworkloads", queue).map_err(|e| internal(e.to_string()))?;
        let uri = format!("{}?limit={PAGE}&offset={}", req.uri(), page * PAGE);
        *req.uri_mut() = uri.parse().map_err(|e| internal(format!("{e}")))?;
        let summary: Summary = tokio::time::timeout(TIMEOUT, client.request(req))
            .await
            .map_err(|_| Failure::late(server, &format!("{ns}/{queue}")))?
            .map_err(|e| Failure::from_kube(&e, server))?;
        let full = summary.items.len() >= PAGE;
        for (key, at) in positions(summary, ns) {
            missing.remove(&key.1);
            out.push((key, at));
        }
        if !full || missing.is_empty() {
            break;
        }
    }
    Ok(out)
}

/// Positions asked in the background, once each time `ask` is called, so a slow or silent
/// visibility server never holds back an update; `known` is the last round's answer.
pub struct Background {
    ask: watch::Sender<Wanted>,
    known: Arc<Mutex<Known>>,
    task: JoinHandle<()>,
}

impl Drop for Background {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Background {
    pub fn start(settings: Settings, server: String) -> Self {
        let (ask, mut asked) = watch::channel(Wanted::new());
        let known = Arc::new(Mutex::new(Known::default()));
        let out = known.clone();
        let task = tokio::spawn(async move {
            let publish = |k: Known| {
                if let Ok(mut o) = out.lock() {
                    *o = k;
                }
            };
            // Made at the first pending Workload: without Kueue there is nothing to ask.
            let mut vis: Option<Visibility> = None;
            while asked.changed().await.is_ok() {
                let wanted = asked.borrow_and_update().clone();
                if vis.is_none() && !wanted.is_empty() {
                    match super::client(&settings).await {
                        Ok(c) => vis = Some(Visibility::new(c, server.clone())),
                        Err(m) => publish(Known {
                            note: Some(format!("Kueue positions unavailable: {m}")),
                            ..Known::default()
                        }),
                    }
                }
                match vis.as_mut() {
                    Some(v) => {
                        v.refresh(&wanted).await;
                        publish(v.known());
                    }
                    None if wanted.is_empty() => publish(Known::default()),
                    None => {}
                }
            }
        });
        Self { ask, known, task }
    }

    /// Start a round for these queues (after the one in progress, if any).
    pub fn ask(&self, wanted: Wanted) {
        self.ask.send_replace(wanted);
    }

    pub fn known(&self) -> Known {
        self.known.lock().map(|k| k.clone()).unwrap_or_default()
    }
}

/// One round for `tessera snapshot`, given up at `deadline` (the positions are not worth
/// failing the snapshot for).
pub async fn once(settings: &Settings, server: &str, wanted: &Wanted, deadline: Instant) -> Known {
    if wanted.is_empty() {
        return Known::default();
    }
    let round = async {
        let client = super::client(settings).await.map_err(|m| format!("Kueue positions unavailable: {m}"))?;
        let mut vis = Visibility::new(client, server.to_string());
        vis.refresh(wanted).await;
        Ok::<_, String>(vis.known())
    };
    match tokio::time::timeout_at(deadline, round).await {
        Ok(Ok(k)) => k,
        Ok(Err(note)) => Known { note: Some(note), ..Known::default() },
        Err(_) => Known {
            note: Some(format!("Kueue positions unavailable: no answer from {server} in time")),
            ..Known::default()
        },
    }
}

#[cfg(test)]
#[path = "visibility_tests.rs"]
mod tests;
