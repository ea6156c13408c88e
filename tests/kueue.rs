//! Kueue queue positions end to end against the fake API server (tests/common/k8s.rs and
//! k8s/kueue.rs): positions from the visibility API in pending reasons, following changes
//! from one interval to the next; a forbidden or failing API as a note on a healthy source,
//! asked again only after the backoff; an API that is not served; pages in `collect_once`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tessera::sources::kubernetes::{self, Settings};
use tessera::sources::{Partial, SourceUpdate};
use tokio::sync::mpsc;

mod common;
use common::k8s::kueue::{pending_item, pending_path};
use common::k8s::{FakeK8s, KUEUE, TOKEN};
use common::{Temp, k8s_fixture as fixture};

const TICK: Duration = Duration::from_millis(200);
const PATIENCE: Duration = Duration::from_secs(20);

/// A Workload of a suspended Job asking for 2 GPUs, pending with the status from Kueue's
/// troubleshooting docs ("couldn't assign flavors ...").
fn workload(namespace: &str, name: &str, queue: &str) -> Value {
    let mut wl = json!({
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}"),
            "creationTimestamp": "2026-03-01T09:00:00Z",
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": format!("job-{name}"),
                "uid": format!("job-uid-{name}"), "controller": true}]},
        "spec": {"queueName": queue, "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "2"}}}]}}}]}
    });
    wl["status"] = fixture("kueue.workload-status.pending-insufficient-quota.json")["status"].clone();
    wl
}

/// Kueue with the visibility API as `version`, and three pending Workloads in two LocalQueues.
fn cluster(version: Option<&'static str>) -> FakeK8s {
    let k = FakeK8s::start();
    k.set_kueue(true);
    k.set_visibility(version);
    k.put(KUEUE, workload("team-a", "train-1", "user-queue"));
    k.put(KUEUE, workload("team-a", "train-2", "user-queue"));
    k.put(KUEUE, workload("team-b", "sweep", "gpu-queue"));
    k
}

fn settings(k: &FakeK8s, dir: &Temp) -> Settings {
    Settings { context: None, kubeconfig: Some(k.kubeconfig(&dir.0)), kinds: Default::default() }
}

/// The source's updates as the store reads them: one that says nothing changed since the
/// last stands for the last data sent.
struct Updates {
    rx: mpsc::Receiver<SourceUpdate>,
    last: Option<Partial>,
}

fn start(settings: Settings) -> Updates {
    let (tx, rx) = mpsc::channel(64);
    kubernetes::spawn("kubernetes".into(), settings, TICK, tx);
    Updates { rx, last: None }
}

/// The first update satisfying `ok`; an error update (an unhealthy source) fails the test.
async fn until(rx: &mut Updates, what: &str, ok: impl Fn(&Partial) -> bool) -> Partial {
    let start = Instant::now();
    loop {
        let u = tokio::time::timeout(PATIENCE, rx.rx.recv()).await.unwrap_or_else(|_| panic!("no update for {what}"));
        let result = match u.unwrap_or_else(|| panic!("the source stopped")).result {
            Ok(p) if p.unchanged => Ok(rx.last.clone().unwrap_or_else(|| panic!("unchanged before any data"))),
            Ok(p) => {
                rx.last = Some(p.clone());
                Ok(p)
            }
            Err(e) => Err(e),
        };
        match result {
            Ok(p) if ok(&p) => return p,
            Ok(p) => assert!(start.elapsed() < PATIENCE, "timed out waiting for {what}; last: {p:#?}"),
            Err(e) => panic!("unexpected error while waiting for {what}: {e:?}"),
        }
    }
}

fn reason<'a>(p: &'a Partial, id: &str) -> &'a str {
    let w = p.workloads.iter().find(|w| w.id == id).unwrap_or_else(|| panic!("{id} in {:?}", p.workloads));
    w.reason.as_deref().unwrap_or_default()
}

fn asked(k: &FakeK8s, path: &str) -> usize {
    k.requests().iter().filter(|r| r.split('?').next() == Some(path)).count()
}

const FLAVORS: &str = "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default-flavor \
                       in ClusterQueue";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn positions_appear_in_reasons_and_follow_changes() {
    let k = cluster(Some("v1beta1"));
    // The ClusterQueue interleaves both LocalQueues.
    k.pending_workloads("team-a", "user-queue", &[("train-1", 2), ("train-2", 3)]);
    k.pending_workloads("team-b", "gpu-queue", &[("sweep", 0)]);
    let dir = Temp::new("kueue-follow");
    let mut rx = start(settings(&k, &dir));
    let p = until(&mut rx, "positions", |p| reason(p, "kueue:team-b/sweep").contains("position")).await;
    let p = if reason(&p, "kueue:team-a/train-2").contains("position") {
        p
    } else {
        until(&mut rx, "all positions", |p| reason(p, "kueue:team-a/train-2").contains("position")).await
    };
    assert_eq!(
        reason(&p, "kueue:team-a/train-1"),
        format!("Kueue queue user-queue (position 3 in cluster queue, 1 in local queue): {FLAVORS}")
    );
    assert!(
        reason(&p, "kueue:team-a/train-2").starts_with("Kueue queue user-queue (position 4 in cluster queue, 2 in")
    );
    assert!(reason(&p, "kueue:team-b/sweep").starts_with("Kueue queue gpu-queue (position 1 in cluster queue, 1 in"));
    assert_eq!(p.note, None);
    let path = pending_path("v1beta1", "team-a", "user-queue");
    let first = k.requests().into_iter().find(|r| r.starts_with(&path)).unwrap_or_default();
    assert_eq!(first, format!("{path}?limit=1000&offset=0"));

    // train-1 is admitted elsewhere and leaves the queue: train-2 moves up at the next round.
    k.pending_workloads("team-a", "user-queue", &[("train-2", 1)]);
    let p = until(&mut rx, "the new position", |p| {
        reason(p, "kueue:team-a/train-2").starts_with("Kueue queue user-queue (position 2 in cluster queue, 1 in")
    })
    .await;
    assert_eq!(reason(&p, "kueue:team-a/train-1"), format!("Kueue queue user-queue: {FLAVORS}"));

    // Watch events do not cause rounds: forty changes in two seconds, about ten rounds.
    let before = asked(&k, &path);
    let t0 = Instant::now();
    for i in 0..40 {
        k.edit(KUEUE, "team-b/sweep", |w| w["metadata"]["labels"] = json!({"edit": i.to_string()}));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let rounds = asked(&k, &path) - before;
    let ticks = (t0.elapsed().as_millis() / TICK.as_millis()) as usize;
    assert!(rounds <= ticks + 2, "{rounds} rounds in {ticks} intervals");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_api_is_a_note_on_a_healthy_source_and_asked_again_later() {
    let k = cluster(Some("v1beta2"));
    let forbidden = "localqueues.visibility.kueue.x-k8s.io \"user-queue\" is forbidden: User \"tessera\" cannot get \
                     resource \"localqueues/pendingworkloads\" in API group \"visibility.kueue.x-k8s.io\" in the \
                     namespace \"team-a\"";
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": forbidden, "reason": "Forbidden", "code": 403});
    let path_a = pending_path("v1beta2", "team-a", "user-queue");
    k.answer("GET", &path_a, 403, body);
    // The aggregated server is down for the other queue: kube-apiserver's plain-text 503.
    let path_b = pending_path("v1beta2", "team-b", "gpu-queue");
    k.answer("GET", &path_b, 503, json!("service unavailable"));
    let dir = Temp::new("kueue-forbidden");
    let mut rx = start(settings(&k, &dir));
    let p = until(&mut rx, "the note", |p| p.note.is_some()).await;
    let note = p.note.clone().unwrap_or_default();
    let expected =
        format!("Kueue positions unavailable for team-a/user-queue (and 1 more queue): {} answered HTTP 403", k.url());
    assert!(note.starts_with(&expected), "{note}");
    assert!(note.contains("is forbidden: User \"tessera\""), "{note}");
    assert!(!note.contains(TOKEN));
    assert_eq!(reason(&p, "kueue:team-a/train-1"), format!("Kueue queue user-queue: {FLAVORS}"));
    assert_eq!(p.workloads.len(), 3);

    // Neither queue is asked again within the backoff (5 minutes), however many intervals pass.
    let t0 = Instant::now();
    while t0.elapsed() < TICK * 6 {
        let p = until(&mut rx, "updates", |_| true).await;
        assert!(p.note.as_deref().is_some_and(|n| n.starts_with(&expected)), "{:?}", p.note);
    }
    assert_eq!((asked(&k, &path_a), asked(&k, &path_b)), (1, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_that_is_not_served_is_a_note_and_nothing_pending_is_no_note() {
    let k = cluster(None);
    k.pending_workloads("team-a", "user-queue", &[("train-1", 0)]);
    let dir = Temp::new("kueue-unserved");
    let p = kubernetes::collect_once(&settings(&k, &dir), Duration::from_secs(10))
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(
        p.note.as_deref(),
        Some(format!("Kueue positions unavailable: {} does not serve visibility.kueue.x-k8s.io", k.url()).as_str())
    );
    assert_eq!(reason(&p, "kueue:team-a/train-1"), format!("Kueue queue user-queue: {FLAVORS}"));

    // Admitted Workloads are not pending: no queue to ask, nothing to explain.
    for key in ["team-a/train-1", "team-a/train-2", "team-b/sweep"] {
        k.edit(KUEUE, key, |w| w["status"]["admission"] = json!({"clusterQueue": "cq"}));
    }
    let p = kubernetes::collect_once(&settings(&k, &dir), Duration::from_secs(10))
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(p.note, None);
    assert!(p.workloads.is_empty());
    assert!(!k.requests().iter().any(|r| r.contains("pendingworkloads")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collect_once_reads_positions_page_by_page() {
    let k = cluster(Some("v1beta1"));
    // 1,000 others wait ahead of train-2 in its LocalQueue: it is on the second page.
    let mut items: Vec<Value> =
        (0..1000).map(|i| pending_item("team-a", &format!("other-{i}"), "user-queue", i + 5, i)).collect();
    items.insert(0, pending_item("team-a", "train-1", "user-queue", 0, 0));
    items.push(pending_item("team-a", "train-2", "user-queue", 1100, 1001));
    k.pending_items("team-a", "user-queue", items);
    k.pending_workloads("team-b", "gpu-queue", &[("sweep", 7)]);
    let dir = Temp::new("kueue-pages");
    let p = kubernetes::collect_once(&settings(&k, &dir), Duration::from_secs(10))
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert!(reason(&p, "kueue:team-a/train-1").contains("(position 1 in cluster queue, 1 in local queue)"));
    assert!(reason(&p, "kueue:team-a/train-2").contains("(position 1101 in cluster queue, 1002 in local queue)"));
    assert!(reason(&p, "kueue:team-b/sweep").contains("(position 8 in cluster queue, 1 in local queue)"));
    assert_eq!(p.note, None);
    let path = pending_path("v1beta1", "team-a", "user-queue");
    let pages: Vec<String> = k.requests().into_iter().filter(|r| r.starts_with(&path)).collect();
    assert_eq!(pages, [format!("{path}?limit=1000&offset=0"), format!("{path}?limit=1000&offset=1000")]);
}
