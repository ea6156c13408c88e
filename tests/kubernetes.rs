//! The Kubernetes source end to end against a fake API server on 127.0.0.1 (tests/common/k8s.rs):
//! the initial list, watch events, bookmarks, 410 Gone and relist, server errors and recovery,
//! slow answers, Kueue, and `collect_once` against a server that never answers.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tessera::model::{Resource, WorkloadState};
use tessera::sources::kubernetes::{self, Settings};
use tessera::sources::{Partial, SourceError, SourceUpdate};
use tokio::sync::mpsc;

mod common;
use common::k8s::{CLASSES, FakeK8s, KUEUE, NODES, PODS, Silent, TOKEN};
use common::{Temp, k8s_fixture as fixture};

const TICK: Duration = Duration::from_millis(200);
const PATIENCE: Duration = Duration::from_secs(20);

/// The real GKE node object renamed, with GPU labels and allocatable GPU resources laid in.
fn node(name: &str, labels: Value, gpus: Value) -> Value {
    let mut n = fixture("node-full.gke-no-gpu.managedfields-testdata.json");
    n["metadata"]["name"] = json!(name);
    for (k, v) in labels.as_object().into_iter().flatten() {
        n["metadata"]["labels"][k] = v.clone();
    }
    for (k, v) in gpus.as_object().into_iter().flatten() {
        n["status"]["allocatable"][k] = v.clone();
        n["status"]["capacity"][k] = v.clone();
    }
    n
}

fn h100_node() -> Value {
    node(
        "h100-1",
        fixture("node-labels.h100-mig-mixed-all-balanced.json"),
        json!({"nvidia.com/mig-1g.10gb": "16",
        "nvidia.com/mig-2g.20gb": "8", "nvidia.com/mig-3g.40gb": "8", "nvidia.com/gpu": "0"}),
    )
}

fn h20_node() -> Value {
    let mut labels = fixture("node-labels.h20-mig-mixed-custom.json");
    labels["nvidia.com/gpu.product"] = json!("NVIDIA-H20");
    labels["nvidia.com/gpu.count"] = json!("8");
    let status = fixture("node-status.h20-7gpu-plus-mig-mixed.capacity-allocatable.json");
    node("h20-1", labels, status["allocatable"].clone())
}

/// A real pod manifest as served: named, namespaced, with a uid, status and node.
fn pod(manifest: &str, namespace: &str, name: &str, node: Option<&str>, status: Value) -> Value {
    let mut p = fixture(manifest);
    p["metadata"]["name"] = json!(name);
    p["metadata"]["namespace"] = json!(namespace);
    p["metadata"]["uid"] = json!(format!("uid-{name}"));
    p["metadata"]["creationTimestamp"] = json!("2026-03-01T10:00:00Z");
    if let Some(n) = node {
        p["spec"]["nodeName"] = json!(n);
    }
    p["status"] = status;
    p
}

fn running() -> Value {
    json!({"phase": "Running", "startTime": "2026-03-01T10:00:05Z"})
}

fn unschedulable() -> Value {
    json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."}]})
}

/// A cluster: two GPU nodes and a CPU node, a MIG pod running, a GPU pod pending, a CPU pod,
/// and a PriorityClass.
fn cluster() -> FakeK8s {
    let k = FakeK8s::start();
    k.put(NODES, h100_node());
    k.put(NODES, h20_node());
    k.put(NODES, fixture("node-full.gke-no-gpu.managedfields-testdata.json"));
    k.put(PODS, pod("pod.mig-3g.20gb.hami-example.json", "serving", "llm-0", Some("h100-1"), running()));
    let mut pending = pod("pod.gpu-limits-only.dcgm-exporter-test.json", "research", "nbody", None, unschedulable());
    pending["spec"]["priorityClassName"] = json!("task-priority");
    k.put(PODS, pending);
    let mut cpu = pod("pod.gpu-limits-only.dcgm-exporter-test.json", "research", "cpu-only", Some("h20-1"), running());
    cpu["spec"]["containers"][0]["resources"]["limits"] = json!({"cpu": "1"});
    k.put(PODS, cpu);
    for c in fixture("priorityclass.v1-with-preemptionpolicy.volcano.json").as_array().into_iter().flatten() {
        k.put(CLASSES, c.clone());
    }
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

async fn next(rx: &mut Updates) -> Result<Partial, SourceError> {
    let u = tokio::time::timeout(PATIENCE, rx.rx.recv()).await.unwrap_or_else(|_| panic!("no update in {PATIENCE:?}"));
    let u = u.unwrap_or_else(|| panic!("the source stopped"));
    assert_eq!(u.source, "kubernetes");
    assert_eq!(u.kind, tessera::model::SourceKind::Kubernetes);
    match u.result {
        Ok(p) if p.unchanged => Ok(rx.last.clone().unwrap_or_else(|| panic!("unchanged before any data"))),
        Ok(p) => {
            rx.last = Some(p.clone());
            Ok(p)
        }
        Err(e) => Err(e),
    }
}

/// The first Ok update satisfying `ok`; an error update fails the test.
async fn until(rx: &mut Updates, what: &str, ok: impl Fn(&Partial) -> bool) -> Partial {
    let start = Instant::now();
    loop {
        match next(rx).await {
            Ok(p) if ok(&p) => return p,
            Ok(p) => assert!(start.elapsed() < PATIENCE, "timed out waiting for {what}; last: {p:#?}"),
            Err(e) => panic!("unexpected error while waiting for {what}: {e:?}"),
        }
    }
}

fn ids(p: &Partial) -> Vec<&str> {
    p.workloads.iter().map(|w| w.id.as_str()).collect()
}

fn workload<'a>(p: &'a Partial, id: &str) -> &'a tessera::model::Workload {
    p.workloads.iter().find(|w| w.id == id).unwrap_or_else(|| panic!("{id} in {:?}", ids(p)))
}

fn used(p: &Partial, node: &str, resource: &Resource) -> Option<(u64, u64)> {
    let n = p.nodes.iter().find(|n| n.name == node)?;
    n.capacity.iter().find(|c| &c.resource == resource).map(|c| (c.total, c.used))
}

fn mig(profile: &str) -> Resource {
    Resource::MigInstance { profile: profile.into() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_list_then_watch_events() {
    let k = cluster();
    let dir = Temp::new("k8s-events");
    let mut rx = start(settings(&k, &dir));
    let p = next(&mut rx).await.unwrap_or_else(|e| panic!("{e:?}"));
    let names: Vec<&str> = p.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["h100-1", "h20-1"], "the CPU node is left out");
    assert_eq!(p.note, None, "no Kueue is no problem");
    assert_eq!(ids(&p), ["k8s:research/nbody", "k8s:serving/llm-0"]);
    let llm = workload(&p, "k8s:serving/llm-0");
    assert_eq!((llm.state, llm.node.as_deref()), (WorkloadState::Running, Some("h100-1")));
    assert_eq!(llm.request.mig_profile.as_deref(), Some("3g.20gb"));
    let nbody = workload(&p, "k8s:research/nbody");
    assert_eq!(nbody.state, WorkloadState::Pending);
    assert_eq!(nbody.reason.as_deref(), Some("Unschedulable: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu."));
    assert_eq!(nbody.priority, Some(10), "from PriorityClass task-priority");
    assert_eq!(used(&p, "h100-1", &mig("1g.10gb")), Some((16, 0)));
    assert_eq!(used(&p, "h20-1", &Resource::WholeCard { model: Some("NVIDIA-H20".into()) }), Some((7, 0)));

    // The pending pod is scheduled onto the H20 node and starts.
    let mut started = pod("pod.gpu-limits-only.dcgm-exporter-test.json", "research", "nbody", Some("h20-1"), running());
    started["spec"]["priorityClassName"] = json!("task-priority");
    k.put(PODS, started);
    let p =
        until(&mut rx, "nbody running", |p| workload(p, "k8s:research/nbody").state == WorkloadState::Running).await;
    assert_eq!(used(&p, "h20-1", &Resource::WholeCard { model: Some("NVIDIA-H20".into()) }), Some((7, 1)));

    // A bookmark changes nothing and is no error.
    k.bookmark(PODS);
    // A new pod, a cordon and a delete.
    k.put(PODS, pod("pod.mig-3g.20gb.hami-example.json", "serving", "llm-1", None, unschedulable()));
    let mut cordoned = h100_node();
    cordoned["spec"]["unschedulable"] = json!(true);
    k.put(NODES, cordoned);
    k.delete(PODS, "serving/llm-0");
    let p = until(&mut rx, "add, cordon and delete", |p| {
        ids(p) == ["k8s:research/nbody", "k8s:serving/llm-1"] && p.nodes.first().is_some_and(|n| !n.schedulable)
    })
    .await;
    assert_eq!(p.nodes[0].reason.as_deref(), Some("cordoned"));

    // A pod that finishes leaves the watch (the field selector) and the partial.
    k.put(
        PODS,
        pod(
            "pod.gpu-limits-only.dcgm-exporter-test.json",
            "research",
            "nbody",
            Some("h20-1"),
            json!({"phase": "Succeeded"}),
        ),
    );
    let p = until(&mut rx, "nbody gone", |p| ids(p) == ["k8s:serving/llm-1"]).await;
    assert_eq!(used(&p, "h20-1", &Resource::WholeCard { model: Some("NVIDIA-H20".into()) }), Some((7, 0)));

    let reqs = k.requests();
    let pod_watch = reqs.iter().find(|r| r.starts_with("/api/v1/pods?") && r.contains("watch=true"));
    let pod_watch = pod_watch.unwrap_or_else(|| panic!("no pod watch in {reqs:?}"));
    assert!(pod_watch.contains("fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed"), "{pod_watch}");
    assert!(!reqs.iter().any(|r| r.starts_with(KUEUE)), "Kueue is not installed: {reqs:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gone_relists_and_shows_what_changed_meanwhile() {
    let k = cluster();
    let dir = Temp::new("k8s-gone");
    let mut rx = start(settings(&k, &dir));
    until(&mut rx, "first data", |p| p.workloads.len() == 2).await;
    let lists_before = k.requests().iter().filter(|r| r.starts_with("/api/v1/pods?") && !r.contains("watch")).count();
    // Changes the watch never sees: only a relist can show them.
    k.compact(PODS, |objs| {
        objs.remove("serving/llm-0");
        let p = pod("pod.gpu-1.device-plugin-readme.json", "batch", "trainer", Some("h20-1"), running());
        objs.insert("batch/trainer".into(), p);
    });
    // `until` fails on any error update: a 410 is routine, not a failure.
    let p = until(&mut rx, "the relisted pods", |p| ids(p) == ["k8s:batch/trainer", "k8s:research/nbody"]).await;
    assert_eq!(workload(&p, "k8s:batch/trainer").node.as_deref(), Some("h20-1"));
    let lists_after = k.requests().iter().filter(|r| r.starts_with("/api/v1/pods?") && !r.contains("watch")).count();
    assert!(lists_after > lists_before, "a new list after 410: {lists_before} -> {lists_after}");
    // The watch goes on after the relist.
    k.delete(PODS, "batch/trainer");
    until(&mut rx, "delete after relist", |p| ids(p) == ["k8s:research/nbody"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_are_reported_then_recovered() {
    let k = cluster();
    let dir = Temp::new("k8s-errors");
    let mut rx = start(settings(&k, &dir));
    until(&mut rx, "first data", |p| p.workloads.len() == 2).await;
    k.fail(Some(500));
    // The watches open when the server starts failing may end first with the connection
    // closed under them: the 500 follows.
    let start = Instant::now();
    let err = loop {
        if let Err(e) = next(&mut rx).await
            && (e.message.contains("HTTP 500") || start.elapsed() > PATIENCE)
        {
            break e;
        }
    };
    assert!(!err.fatal);
    assert!(err.message.contains(&k.url()), "{}", err.message);
    assert!(err.message.contains("HTTP 500"), "{}", err.message);
    assert!(!err.message.contains(TOKEN));
    // A change made while the server fails shows after it recovers (through a fresh list).
    k.put(PODS, pod("pod.gpu-1.device-plugin-readme.json", "batch", "late", None, unschedulable()));
    k.fail(None);
    let start = Instant::now();
    loop {
        match next(&mut rx).await {
            Ok(p) if ids(&p).contains(&"k8s:batch/late") => break,
            _ => assert!(start.elapsed() < PATIENCE, "no recovery"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_is_named_and_a_bad_kubeconfig_is_fatal() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let port = closed.local_addr().map(|a| a.port()).unwrap_or_default();
    drop(closed);
    let dir = Temp::new("k8s-unreachable");
    let config = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:{port}\n\
         users:\n- name: u\n  user:\n    token: {TOKEN}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    \
         user: u\ncurrent-context: c\n"
    );
    std::fs::write(dir.join("kubeconfig"), config).unwrap_or_else(|e| panic!("{e}"));
    let s = Settings { kubeconfig: Some(dir.join("kubeconfig")), ..Settings::default() };
    let mut rx = start(s);
    let err = next(&mut rx).await.err().unwrap_or_else(|| panic!("an error"));
    assert!(!err.fatal, "the server may come up");
    let cause = format!(": cannot reach http://127.0.0.1:{port}: Connection refused (os error 111)");
    assert!(err.message.starts_with("listing ") && err.message.ends_with(&cause), "{}", err.message);
    assert!(!err.message.contains(TOKEN));

    let missing = Settings { kubeconfig: Some(dir.join("nope")), ..Settings::default() };
    let mut rx = start(missing);
    let err = next(&mut rx).await.err().unwrap_or_else(|| panic!("an error"));
    assert!(err.fatal);
    let path = dir.join("nope");
    assert_eq!(err.message, format!("kubeconfig {}: No such file or directory (os error 2)", path.display()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_answers_do_not_hold_back_updates() {
    let k = cluster();
    let dir = Temp::new("k8s-slow");
    let mut rx = start(settings(&k, &dir));
    until(&mut rx, "first data", |p| p.workloads.len() == 2).await;
    // Every answer now takes 3 s, and the pod watch must relist.
    k.delay(Duration::from_secs(3));
    k.compact(PODS, |objs| {
        objs.remove("serving/llm-0");
    });
    let t0 = Instant::now();
    let mut updates = 0;
    while t0.elapsed() < Duration::from_millis(1500) {
        let p = next(&mut rx).await.unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(p.workloads.len(), 2, "the last complete data until the relist ends");
        updates += 1;
    }
    assert!(updates >= 5, "{updates} updates in 1.5 s at a {TICK:?} interval");
    k.delay(Duration::ZERO);
    until(&mut rx, "the slow relist", |p| ids(p) == ["k8s:research/nbody"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collect_once_gives_up_on_a_silent_server_in_time() {
    let silent = Silent::start();
    let dir = Temp::new("k8s-silent");
    let config = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://{}\ncontexts:\n- name: c\n  \
         context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user: {{}}\ncurrent-context: c\n",
        silent.addr
    );
    std::fs::write(dir.join("kubeconfig"), config).unwrap_or_else(|e| panic!("{e}"));
    let s = Settings { kubeconfig: Some(dir.join("kubeconfig")), ..Settings::default() };
    let t0 = Instant::now();
    let err = kubernetes::collect_once(&s, Duration::from_secs(1)).await.err().unwrap_or_else(|| panic!("an error"));
    let took = t0.elapsed();
    assert!(took >= Duration::from_millis(950) && took < Duration::from_millis(2500), "{took:?}");
    assert_eq!(err.message, format!("no complete answer from http://{} within 1s", silent.addr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collect_once_with_kueue_pending_workloads() {
    let k = cluster();
    k.set_kueue(true);
    let mut wl = json!({
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
        "metadata": {"name": "job-sample-job-jrjfr-8d56e", "namespace": "team-a", "uid": "w-1",
            "creationTimestamp": "2026-03-01T09:00:00Z",
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "sample-job-jrjfr", "uid": "job-1",
                "controller": true}]},
        "spec": {"queueName": "user-queue", "podSets": [{"name": "main", "count": 4, "template": {"spec": {
            "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "2"}}}]}}}]}
    });
    wl["status"] = fixture("kueue.workload-status.pending-insufficient-quota.json")["status"].clone();
    k.put(KUEUE, wl);
    let dir = Temp::new("k8s-kueue");
    let p = kubernetes::collect_once(&settings(&k, &dir), Duration::from_secs(10))
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    let w = workload(&p, "kueue:team-a/job-sample-job-jrjfr-8d56e");
    assert_eq!(w.name, "sample-job-jrjfr");
    assert_eq!(w.state, WorkloadState::Pending);
    assert_eq!(w.request.gpus, Some(8));
    assert!(
        w.reason.as_deref().is_some_and(|r| r.starts_with("Kueue queue user-queue: couldn't assign flavors")),
        "{w:?}"
    );
    // Positions are tests/kueue.rs's business; here the visibility API is not served.
    let note = format!("Kueue positions unavailable: {} does not serve visibility.kueue.x-k8s.io", k.url());
    assert_eq!(p.note, Some(note));
    assert_eq!(ids(&p).len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_pods_in_pages() {
    let k = FakeK8s::start();
    k.put(NODES, h20_node());
    for i in 0..10_000 {
        let gpu = i % 10 == 0;
        let mut p =
            pod("pod.gpu-limits-only.dcgm-exporter-test.json", "bulk", &format!("p{i:05}"), Some("h20-1"), running());
        if !gpu {
            p["spec"]["containers"][0]["resources"]["limits"] = json!({"cpu": "1"});
        }
        k.put(PODS, p);
    }
    let t0 = Instant::now();
    let dir = Temp::new("k8s-bulk");
    let p = kubernetes::collect_once(&settings(&k, &dir), Duration::from_secs(60))
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    let took = t0.elapsed();
    println!("10,000 pods (1,000 with GPUs) listed and mapped in {took:?}");
    assert_eq!(p.workloads.len(), 1000);
    assert_eq!(used(&p, "h20-1", &Resource::WholeCard { model: Some("NVIDIA-H20".into()) }), Some((7, 1000)));
    let pages = k.requests().iter().filter(|r| r.starts_with("/api/v1/pods?") && r.contains("limit=200")).count();
    assert_eq!(pages, 50, "200 pods a page");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_context_setting_picks_the_cluster() {
    let k = cluster();
    let dir = Temp::new("k8s-context");
    // The current context points nowhere; "live" is the fake server.
    let config = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: dead\n  cluster:\n    server: http://127.0.0.1:9\n\
         - name: fake\n  cluster:\n    server: {}\nusers:\n- name: u\n  user:\n    token: {TOKEN}\ncontexts:\n\
         - name: dead\n  context:\n    cluster: dead\n    user: u\n- name: live\n  context:\n    cluster: fake\n    \
         user: u\ncurrent-context: dead\n",
        k.url()
    );
    let path = dir.join("kubeconfig");
    std::fs::write(&path, config).unwrap_or_else(|e| panic!("{e}"));
    let live = Settings { context: Some("live".into()), kubeconfig: Some(path.clone()), ..Settings::default() };
    let p = kubernetes::collect_once(&live, Duration::from_secs(10)).await.unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(ids(&p), ["k8s:research/nbody", "k8s:serving/llm-0"]);
    kubernetes::client(&live).await.unwrap_or_else(|e| panic!("{e}"));

    let unknown = Settings { context: Some("staging".into()), kubeconfig: Some(path), ..Settings::default() };
    let err =
        kubernetes::collect_once(&unknown, Duration::from_secs(10)).await.err().unwrap_or_else(|| panic!("error"));
    assert!(err.fatal);
    assert!(err.message.contains("staging"), "{}", err.message);
    assert!(kubernetes::client(&unknown).await.is_err());
}

/// A node from a sharing fixture (`labels` and `capacity`), renamed.
fn shared_node(name: &str, fixture_name: &str) -> Value {
    let f = fixture(fixture_name);
    node(name, f["labels"].clone(), f["capacity"].clone())
}

fn gpu_pod(namespace: &str, name: &str, node: Option<&str>, resource: &str, n: u32) -> Value {
    let status = if node.is_some() { running() } else { unschedulable() };
    let mut p = pod("pod.gpu-limits-only.dcgm-exporter-test.json", namespace, name, node, status);
    p["spec"]["containers"][0]["resources"]["limits"] = json!({ resource: n.to_string() });
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_slicing_and_mps_nodes_modes_capacity_and_interference() {
    use tessera::model::capacity::Free;
    use tessera::model::{Fleet, QueueSummary, ShareUnit};
    let k = FakeK8s::start();
    // The real A10G capture (one card, time-slicing x2), an MPS node (4 L4s, x2) and a T4 node
    // sharing under the renamed resource (8 cards, x4).
    k.put(NODES, shared_node("a10g-1", "node-labels.a10g-time-slicing-2.json"));
    k.put(NODES, shared_node("l4-mps-1", "node-labels.mps-replicas-2.constructed.json"));
    k.put(NODES, shared_node("t4-1", "node-labels.time-slicing-renamed.constructed.json"));
    k.put(PODS, gpu_pod("training", "finetune", Some("a10g-1"), "nvidia.com/gpu", 1));
    k.put(PODS, gpu_pod("serving", "chat", Some("a10g-1"), "nvidia.com/gpu", 1));
    k.put(PODS, gpu_pod("serving", "embed-0", Some("t4-1"), "nvidia.com/gpu.shared", 1));
    k.put(PODS, gpu_pod("serving", "embed-1", None, "nvidia.com/gpu.shared", 1));
    k.put(PODS, gpu_pod("training", "sweep", None, "nvidia.com/gpu", 1));
    let dir = Temp::new("k8s-sharing");
    let p = kubernetes::collect_once(&settings(&k, &dir), Duration::from_secs(10))
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    let texts = |node: &str| -> Vec<String> {
        let n = p.nodes.iter().find(|n| n.name == node).unwrap_or_else(|| panic!("{node}"));
        n.cards.iter().map(|c| c.sharing_text(false)).collect()
    };
    assert_eq!(texts("a10g-1"), ["TS×2 2/2"], "one card: the node's replicas in use are its");
    assert_eq!(texts("l4-mps-1"), vec!["MPS×2"; 4]);
    assert_eq!(texts("t4-1"), vec!["TS×4"; 8], "which of 8 cards a replica is on, Kubernetes does not say");
    assert_eq!(
        used(&p, "t4-1", &Resource::Shared { unit: ShareUnit::Replica, model: Some("T4".into()) }),
        Some((32, 1))
    );

    let mut fleet = Fleet { nodes: p.nodes.clone(), workloads: p.workloads.clone(), ..Fleet::default() };
    fleet.index_workloads();
    // Free replicas count for the queue: the renamed ones for .shared requests, the MPS node's
    // (advertised as nvidia.com/gpu) for GPU requests.
    let free = Free::compute(&fleet);
    assert_eq!(free.of(&Resource::Shared { unit: ShareUnit::Replica, model: None }), 31);
    assert_eq!(free.of(&Resource::WholeCard { model: None }), 8);
    let q = QueueSummary::compute(&fleet, chrono::Utc::now());
    let whole = q.demand.iter().find(|d| d.resource == Resource::WholeCard { model: None });
    assert_eq!(whole.map(|d| (d.pending, d.free, d.replicas)), Some((1, 8, 8)), "{:?}", q.demand);

    // Training beside inference on the one time-sliced card: interference there, nowhere else.
    let cfg = tessera::config::Config::default();
    let cx = tessera::advisor::Context::new(&cfg, chrono::Utc::now());
    let findings = tessera::advisor::advise(&fleet, &cx);
    let at: Vec<String> = findings
        .iter()
        .filter(|f| f.kind == tessera::advisor::Kind::Interference)
        .flat_map(|f| f.cards.iter().map(ToString::to_string))
        .collect();
    assert_eq!(at, ["a10g-1/0"], "{findings:#?}");
}

/// A running GPU pod as a list item, small.
const SMALL_POD: &str = r#"{"metadata":{"name":"p","namespace":"n","uid":"u"},"spec":{"nodeName":"h","containers":[{"resources":{"requests":{"nvidia.com/gpu":"1"}}}]},"status":{"phase":"Running"}}"#;

/// A server that answers a page of 200 with 5,000 pods is refused before they are decoded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_with_more_items_than_asked_is_refused() {
    let k = cluster();
    let items = vec![SMALL_POD; 5_000].join(",");
    k.answer_text(
        PODS,
        format!(r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"1"}},"items":[{items}]}}"#),
    );
    let dir = Temp::new("k8s-big-page");
    let err = kubernetes::collect_once(&settings(&k, &dir), Duration::from_secs(10)).await.err();
    let err = err.unwrap_or_else(|| panic!("the page is refused"));
    assert!(err.message.contains("sent too much: a page asked for 200 items and sent more"), "{}", err.message);
    assert!(err.message.starts_with("listing pods: http://127.0.0.1:"), "{}", err.message);
}

/// A list that never ends, of nodes with 100 KB labels, stops at the cap of one answer,
/// said, within seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_list_stops_at_the_cap() {
    let k = cluster();
    let node = json!({"metadata": {"name": "n", "labels": {"x": "y".repeat(100_000)}}});
    k.flood(NODES, &node.to_string());
    let dir = Temp::new("k8s-endless");
    let t0 = Instant::now();
    let err = kubernetes::collect_once(&settings(&k, &dir), Duration::from_secs(20)).await.err();
    let err = err.unwrap_or_else(|| panic!("the list is refused"));
    assert!(err.message.contains("sent too much: an answer passed 16.0 MiB"), "{}", err.message);
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
}

/// A tick that finds nothing changed says so ("unchanged": the store keeps what it has)
/// instead of reading every store again (a 1,000-node DRA cluster is ~200,000 devices); a
/// change is sent whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_without_changes_says_unchanged() {
    let k = cluster();
    let dir = Temp::new("k8s-unchanged");
    let mut rx = start(settings(&k, &dir));
    until(&mut rx, "first data", |p| p.workloads.len() == 2).await;
    let mut unchanged = false;
    for _ in 0..10 {
        let u = tokio::time::timeout(PATIENCE, rx.rx.recv()).await.ok().flatten();
        if u.is_some_and(|u| u.result.is_ok_and(|p| p.unchanged)) {
            unchanged = true;
            break;
        }
    }
    assert!(unchanged, "no tick said unchanged");
    k.delete(PODS, "serving/llm-0");
    until(&mut rx, "the deletion", |p| ids(p) == ["k8s:research/nbody"]).await;
}
