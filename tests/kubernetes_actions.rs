//! The Kubernetes executor against the fake API server (tests/common/k8s.rs): plans made from
//! what the Kubernetes source collected, executed, and the exact requests the server received;
//! cordon and uncordon, the MIG config label followed to success or failure, evictions and a
//! PodDisruptionBudget's refusal, and `tessera drain --kubernetes` end to end with its audit.

use std::time::{Duration, Instant};

use chrono::Utc;
use serde_json::{Value, json};
use tessera::actions::execute::execute;
use tessera::actions::plan::plan;
use tessera::actions::{Action, Backend, Env, Op, Options, Outcome, Plan};
use tessera::model::{Fleet, SourceKind};
use tessera::sources::SourceUpdate;
use tessera::sources::kubernetes::{self, Settings};
use tessera::store::Store;

mod common;
use common::k8s::{Call, FakeK8s, NODES, PODS, TOKEN};
use common::{Temp, k8s_fixture as fixture};

const STATE: &str = "nvidia.com/mig.config.state";

/// The real GKE node renamed, with the labels of a real H100 node whose GPU Operator applied
/// `all-disabled` (`nvidia.com/mig.config.state=success`), and one allocatable GPU.
fn gpu_node(name: &str) -> Value {
    let mut n = fixture("node-full.gke-no-gpu.managedfields-testdata.json");
    n["metadata"]["name"] = json!(name);
    for (k, v) in fixture("node-labels.h100-mig-all-disabled-single.json").as_object().into_iter().flatten() {
        n["metadata"]["labels"][k] = v.clone();
    }
    n["status"]["allocatable"]["nvidia.com/gpu"] = json!("1");
    n["status"]["capacity"]["nvidia.com/gpu"] = json!("1");
    n
}

/// A real one-GPU pod manifest, running on `node` since two hours ago.
fn running_pod(namespace: &str, name: &str, node: &str) -> Value {
    let mut p = fixture("pod.gpu-1.device-plugin-readme.json");
    let started = (Utc::now() - chrono::Duration::hours(2)).to_rfc3339();
    p["metadata"]["name"] = json!(name);
    p["metadata"]["namespace"] = json!(namespace);
    p["metadata"]["uid"] = json!(format!("uid-{name}"));
    p["metadata"]["creationTimestamp"] = json!(started);
    p["spec"]["nodeName"] = json!(node);
    p["status"] = json!({"phase": "Running", "startTime": started});
    p
}

fn settings(k: &FakeK8s, dir: &Temp) -> Settings {
    Settings { kubeconfig: Some(k.kubeconfig(&dir.0)), ..Settings::default() }
}

/// What the Kubernetes source reports, in a store as the console keeps it.
async fn fleet(s: &Settings) -> Fleet {
    let partial = kubernetes::collect_once(s, Duration::from_secs(10)).await.unwrap_or_else(|e| panic!("{e:?}"));
    let mut store = Store::new();
    store.register("kubernetes", SourceKind::Kubernetes, Duration::from_secs(5));
    let update =
        SourceUpdate { source: "kubernetes".into(), kind: SourceKind::Kubernetes, at: Utc::now(), result: Ok(partial) };
    store.apply(update, Utc::now());
    store.fleet().clone()
}

async fn plan_for(s: &Settings, action: Action) -> Plan {
    let opts = Options::new(&tessera::config::Config::default(), false, Utc::now());
    let p = plan(&action, &fleet(s).await, &opts).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.backend, Backend::Kubernetes);
    assert!(p.allowed(), "{}", p.render());
    p
}

async fn run(p: &Plan, s: &Settings) -> Outcome {
    let env = Env { kubernetes: Some(s.clone()), command_timeout: Duration::from_secs(10), ..Env::default() };
    execute(p, &env, None).await
}

fn call(method: &str, path: &str, content_type: &str, body: Value) -> Call {
    Call { method: method.into(), path: path.into(), content_type: content_type.into(), body }
}

fn merge_patch(node: &str, body: Value) -> Call {
    call("PATCH", &format!("/api/v1/nodes/{node}"), "application/merge-patch+json", body)
}

fn message(o: &Outcome, step: usize) -> &str {
    o.steps.get(step).and_then(|s| s.message.as_deref()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_cordons_and_undrain_uncordons() {
    let k = FakeK8s::start();
    k.put(NODES, gpu_node("gpu-1"));
    let dir = Temp::new("k8s-act-cordon");
    let s = settings(&k, &dir);

    let o = run(&plan_for(&s, Action::Drain { target: "gpu-1".into(), evict: false }).await, &s).await;
    assert!(o.ok, "{o:#?}");
    assert_eq!(k.writes(), [merge_patch("gpu-1", json!({"spec": {"unschedulable": true}}))]);
    assert_eq!(message(&o, 0), "node gpu-1: spec.unschedulable = true");
    assert_eq!(k.get(NODES, "/gpu-1").map(|n| n["spec"]["unschedulable"].clone()), Some(json!(true)));

    let o = run(&plan_for(&s, Action::Undrain { target: "gpu-1".into(), force: false }).await, &s).await;
    assert!(o.ok, "{o:#?}");
    assert_eq!(k.writes()[1..], [merge_patch("gpu-1", json!({"spec": {"unschedulable": false}}))]);
    assert_eq!(message(&o, 0), "node gpu-1: spec.unschedulable = false");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_is_read_back_and_failures_name_the_call() {
    let k = FakeK8s::start();
    k.put(NODES, gpu_node("gpu-1"));
    let dir = Temp::new("k8s-act-patch-errors");
    let s = settings(&k, &dir);
    let cordon = |node: &str| Op::KubePatchNode { node: node.into(), patch: json!({"spec": {"unschedulable": true}}) };

    let e = tessera::actions::kubernetes::run_op(&cordon("ghost"), &s).await.map_err(|e| e.to_string()).err();
    assert_eq!(e.as_deref(), Some("PATCH /api/v1/nodes/ghost: no node ghost (HTTP 404)"));

    // The server says yes but the node does not change (a webhook undid it): not a success.
    let unchanged = k.get(NODES, "/gpu-1").unwrap_or_default();
    k.answer("PATCH", "/api/v1/nodes/gpu-1", 200, unchanged);
    let e = tessera::actions::kubernetes::run_op(&cordon("gpu-1"), &s)
        .await
        .map_err(|e| e.to_string())
        .err()
        .unwrap_or_default();
    assert_eq!(e, "node gpu-1: spec.unschedulable is false after the patch, not true: something changed it back");

    let forbidden = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden",
        "code": 403, "message": "nodes \"gpu-1\" is forbidden: User \"ops\" cannot patch resource \"nodes\""});
    k.answer("PATCH", "/api/v1/nodes/gpu-1", 403, forbidden);
    let e = tessera::actions::kubernetes::run_op(&cordon("gpu-1"), &s)
        .await
        .map_err(|e| e.to_string())
        .err()
        .unwrap_or_default();
    assert_eq!(
        e,
        "PATCH /api/v1/nodes/gpu-1: the API server answered HTTP 403 Forbidden: nodes \"gpu-1\" is forbidden: \
         User \"ops\" cannot patch resource \"nodes\""
    );
    assert!(!e.contains(TOKEN));
}

/// Play the GPU Operator's MIG manager: a moment after the config label is patched (the wait
/// has begun and still sees the previous `success`), set the state to each value, `gap` apart.
async fn mig_manager(k: &FakeK8s, node: &str, states: &[&str], gap: Duration) {
    let t0 = Instant::now();
    while !k.writes().iter().any(|c| c.method == "PATCH") {
        assert!(t0.elapsed() < Duration::from_secs(20), "no PATCH came");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    for (i, state) in states.iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(gap).await;
        }
        k.edit(NODES, &format!("/{node}"), |n| n["metadata"]["labels"][STATE] = json!(state));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repartition_labels_the_node_and_follows_the_mig_manager() {
    for (end, ok) in [("success", true), ("failed", false)] {
        let k = FakeK8s::start();
        k.put(NODES, gpu_node("mig-1"));
        let dir = Temp::new(&format!("repartition-{end}"));
        let s = settings(&k, &dir);
        let p = plan_for(&s, Action::Repartition { target: "mig-1".into(), layout: "all-balanced".into() }).await;
        let t0 = Instant::now();
        let states = ["pending", end];
        let (o, ()) = tokio::join!(run(&p, &s), mig_manager(&k, "mig-1", &states, Duration::from_secs(1)));
        let took = t0.elapsed();

        let label = json!({"metadata": {"labels": {"nvidia.com/mig.config": "all-balanced"}}});
        assert_eq!(k.writes(), [merge_patch("mig-1", label)], "only the label is written");
        assert_eq!(message(&o, 0), "node mig-1: label nvidia.com/mig.config = all-balanced");
        assert!(took >= Duration::from_millis(1400) && took < Duration::from_secs(5), "{end}: {took:?}");
        if ok {
            assert!(o.ok, "{o:#?}");
            assert!(message(&o, 1).starts_with("nvidia.com/mig.config.state = success after "), "{o:#?}");
        } else {
            assert!(!o.ok);
            let why = "nvidia.com/mig.config.state = failed: the MIG manager could not apply the config; see its logs";
            assert_eq!(o.error.as_deref(), Some(why));
            assert_eq!((o.steps[0].status, o.steps[1].status), ("done", "failed"));
            assert!(o.reached.starts_with("steps 1-1 done (Label the node"), "{}", o.reached);
            assert!(o.reached.contains(&format!("step 2 failed: {why}")), "{}", o.reached);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wait_trusts_only_a_changed_state_and_times_out_with_the_last_value() {
    let k = FakeK8s::start();
    k.put(NODES, gpu_node("mig-1"));
    let dir = Temp::new("k8s-act-wait");
    let s = settings(&k, &dir);
    let wait_on = |node: &str, timeout_s| Op::KubeWaitLabel {
        node: node.into(),
        key: STATE.into(),
        success: "success".into(),
        failure: "failed".into(),
        timeout_s,
    };
    let wait = |timeout_s| wait_on("mig-1", timeout_s);
    let run_op = |op: Op| {
        let s = s.clone();
        async move { tessera::actions::kubernetes::run_op(&op, &s).await.map_err(|e| e.to_string()) }
    };

    // `success` left from the previous config is not this change's success.
    let t0 = Instant::now();
    let e = run_op(wait(2)).await.err().unwrap_or_default();
    assert!(t0.elapsed() >= Duration::from_secs(2), "{e}");
    let stale = "nvidia.com/mig.config.state stayed success, its value from before the change, for 2 s: the MIG \
                 manager did not pick the change up (is it running on mig-1? was that config already applied?)";
    assert_eq!(e, stale);

    // pending -> success within 50 ms: a 2-second poll would miss `pending`; the watch does not.
    k.put(NODES, gpu_node("mig-1"));
    let edit = |state: &str| k.edit(NODES, "/mig-1", |n| n["metadata"]["labels"][STATE] = json!(state));
    let (got, ()) = tokio::join!(run_op(wait(10)), async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        edit("pending");
        tokio::time::sleep(Duration::from_millis(50)).await;
        edit("success");
    });
    let got = got.unwrap_or_else(|e| panic!("{e}"));
    assert!(got.starts_with("nvidia.com/mig.config.state = success after ") && got.ends_with(" s"), "{got}");

    // Stuck in pending: the timeout names the last value.
    edit("pending");
    let e = run_op(wait(2)).await.err().unwrap_or_default();
    assert_eq!(e, "nvidia.com/mig.config.state did not become success within 2 s; last value seen: pending");

    assert_eq!(run_op(wait_on("ghost", 5)).await, Err("watching node ghost: no node ghost".into()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preempt_evicts_through_the_eviction_api_and_a_pdb_refusal_is_clear() {
    let k = FakeK8s::start();
    k.put(NODES, gpu_node("gpu-1"));
    // The namespace says training (the default `[kinds]` rules); it has run for two hours.
    k.put(PODS, running_pod("training", "trainer", "gpu-1"));
    let dir = Temp::new("k8s-act-evict");
    let s = settings(&k, &dir);
    let p = plan_for(&s, Action::Preempt { workload: "k8s:training/trainer".into(), force: false }).await;

    let o = run(&p, &s).await;
    assert!(o.ok, "{o:#?}");
    assert_eq!(message(&o, 0), "eviction of training/trainer accepted (graceful termination started)");
    let writes = k.writes();
    let [w] = writes.as_slice() else { panic!("one write: {writes:#?}") };
    assert_eq!(
        (w.method.as_str(), w.path.as_str(), w.content_type.as_str()),
        ("POST", "/api/v1/namespaces/training/pods/trainer/eviction", "application/json")
    );
    assert_eq!(w.body["apiVersion"], "policy/v1");
    assert_eq!(w.body["kind"], "Eviction");
    assert_eq!(w.body["metadata"]["name"], "trainer");
    assert_eq!(w.body["metadata"]["namespace"], "training");

    // What kube-apiserver answers when a PodDisruptionBudget allows no disruption.
    let refusal = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "Cannot evict pod as it would violate the pod's disruption budget.", "reason": "TooManyRequests",
        "details": {"causes": [{"reason": "DisruptionBudget",
            "message": "The disruption budget trainer-pdb needs 1 healthy pods and has 1 currently"}]}, "code": 429});
    k.answer("POST", "/api/v1/namespaces/training/pods/trainer/eviction", 429, refusal);
    let o = run(&p, &s).await;
    assert!(!o.ok);
    assert_eq!(
        o.error.as_deref(),
        Some(
            "eviction of training/trainer refused: a PodDisruptionBudget allows no disruption now (HTTP 429): \
             Cannot evict pod as it would violate the pod's disruption budget. (The disruption budget trainer-pdb \
             needs 1 healthy pods and has 1 currently)"
        )
    );
    assert!(o.reached.starts_with("step 1 failed; nothing was changed before it"), "{}", o.reached);
    // Asked once: a refused eviction is reported, not retried behind the operator's back.
    assert_eq!(k.writes().iter().filter(|c| c.path.ends_with("/eviction")).count(), 2);

    let gone = Op::KubeEvict { namespace: "training".into(), pod: "finished".into() };
    let e = tessera::actions::kubernetes::run_op(&gone, &s).await.map_err(|e| e.to_string());
    assert_eq!(e, Err("pod training/finished no longer exists".into()));
}

#[test]
fn tessera_drain_kubernetes_end_to_end() {
    let k = FakeK8s::start();
    k.put(NODES, gpu_node("gpu-1"));
    let dir = Temp::new("k8s-act-cli");
    let kubeconfig = k.kubeconfig(&dir.0);
    let state = dir.0.join("state");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["drain", "gpu-1", "--kubernetes", "--yes"])
        .env("KUBECONFIG", &kubeconfig)
        .env("XDG_STATE_HOME", &state)
        .env("XDG_CONFIG_HOME", dir.0.join("no-config"))
        .env("HOME", &dir.0)
        .env("USER", "tester")
        .output()
        .unwrap_or_else(|e| panic!("cannot run tessera: {e}"));
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("done: node gpu-1: spec.unschedulable = true"), "{stdout}");
    assert_eq!(k.writes(), [merge_patch("gpu-1", json!({"spec": {"unschedulable": true}}))]);

    let audit = state.join("tessera/audit.jsonl");
    let text = std::fs::read_to_string(&audit).unwrap_or_else(|e| panic!("{}: {e}", audit.display()));
    let records: Vec<Value> =
        text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect();
    let kinds: Vec<&str> = records.iter().map(|r| r["record"].as_str().unwrap_or_default()).collect();
    assert_eq!(kinds, ["intent", "outcome"]);
    assert_eq!(
        records[0]["plan"]["steps"][0]["call"],
        "PATCH /api/v1/nodes/gpu-1 (merge-patch) {\"spec\":{\"unschedulable\":true}}"
    );
    assert_eq!(records[1]["result"]["ok"], true);
    assert_eq!(records[1]["who"]["user"], "tester");
    assert!(!text.contains(TOKEN), "no credential in the audit log");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&audit).map(|m| m.permissions().mode() & 0o777).unwrap_or_default();
    assert_eq!(mode, 0o600);
}
