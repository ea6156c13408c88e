//! Dynamic Resource Allocation end to end: the fake API server (tests/common/k8s/dra.rs)
//! serves the DRA fixtures (tests/fixtures/dra/, sources in its README) as lists and watches
//! of the resource.k8s.io kinds; the Kubernetes source, `snapshot --json` and the queue read
//! them; a cluster without DRA, or without DeviceTaintRules, is said, not an error.

use std::time::{Duration, Instant};

use serde_json::Value;
use tessera::sources::kubernetes::{self, Settings};
use tessera::sources::{Partial, SourceUpdate};
use tokio::sync::mpsc;

mod common;
use common::Temp;
use common::k8s::FakeK8s;
use common::k8s::dra::{CLAIMS, SLICES};

const SPLIT: &str = "resourceslices.h100-dynamicmig.json";
const COMBINED: &str = "resourceslices.h100-dynamicmig.combined-1.34.json";
const STATIC: &str = "resourceslices.h100-static-mig.json";
const PATIENCE: Duration = Duration::from_secs(20);

fn settings(k: &FakeK8s, dir: &Temp) -> Settings {
    Settings { context: None, kubeconfig: Some(k.kubeconfig(&dir.0)), kinds: Default::default() }
}

async fn once(k: &FakeK8s, name: &str) -> Partial {
    let dir = Temp::new(name);
    kubernetes::collect_once(&settings(k, &dir), PATIENCE).await.unwrap_or_else(|e| panic!("{e:?}"))
}

fn layout(p: &Partial, node: &str, index: u32) -> String {
    let n = p.nodes.iter().find(|n| n.name == node).unwrap_or_else(|| panic!("no {node}"));
    n.cards.iter().find(|c| c.index == index).map(|c| c.layout_text()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fixtures_served_give_cards_holders_and_the_pending_pod() {
    for slices in [[SPLIT, STATIC], [COMBINED, STATIC]] {
        let k = FakeK8s::start();
        k.load_dra(&slices);
        let p = once(&k, "dra-once").await;
        let names: Vec<&str> = p.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["h100-dyn-01", "h100-mig-01"], "{slices:?}: the control plane has no GPUs");
        assert!(p.nodes.iter().all(|n| n.cards.len() == 8 && n.schedulable && n.capacity.is_empty()));
        assert_eq!(layout(&p, "h100-dyn-01", 0), "1g.10gb@0,1g.10gb@1,1g.20gb@2,3g.40gb@4");
        assert_eq!(layout(&p, "h100-mig-01", 2), "2g.20gb@0,1g.10gb@2,1g.10gb@3,3g.40gb@4");
        let note = p.note.clone().unwrap_or_default();
        assert!(!note.contains("advertises"), "{note}");
        let pending: Vec<&str> = p.workloads.iter().filter(|w| !w.state.is_active()).map(|w| w.id.as_str()).collect();
        assert_eq!(pending, ["k8s:training/pretrain-8gpu-0"]);
        let shared = p.workloads.iter().find(|w| w.id == "k8s:inference/vllm-b-0").map(|w| w.cards.clone());
        assert_eq!(shared, Some(vec![tessera::model::CardRef::new("h100-dyn-01", 0)]));
    }
}

async fn until(rx: &mut mpsc::Receiver<SourceUpdate>, what: &str, ok: impl Fn(&Partial) -> bool) -> Partial {
    let start = Instant::now();
    loop {
        let u = tokio::time::timeout(PATIENCE, rx.recv()).await.ok().flatten();
        let u = u.unwrap_or_else(|| panic!("no update waiting for {what}"));
        match u.result {
            Ok(p) if ok(&p) => return p,
            _ => assert!(start.elapsed() < PATIENCE, "timed out waiting for {what}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_and_slices_are_watched() {
    let k = FakeK8s::start();
    k.load_dra(&[SPLIT, STATIC]);
    let dir = Temp::new("dra-watch");
    let (tx, mut rx) = mpsc::channel(64);
    kubernetes::spawn("kubernetes".into(), settings(&k, &dir), Duration::from_millis(200), tx);
    until(&mut rx, "the first picture", |p| layout(p, "h100-dyn-01", 0).contains("3g.40gb@4")).await;
    // rerank-0 ends: its claim goes, and with it the 3g.40gb instance.
    k.delete(CLAIMS, "inference/rerank-0-mig-mtfgr");
    let p =
        until(&mut rx, "the instance gone", |p| layout(p, "h100-dyn-01", 0) == "1g.10gb@0,1g.10gb@1,1g.20gb@2").await;
    let gpu0 = &p.nodes[0].cards[0];
    let free = gpu0.dra.as_ref().and_then(|d| d.placeable.clone()).unwrap_or_default();
    // Slices 4–7 free again: a 3g.40gb fits there, a 4g.40gb (placed only at 0 on an H100) not.
    assert_eq!(free, ["1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb"]);
    // The node's slices are withdrawn: its cards go with them.
    for s in common::k8s::dra::items(SPLIT) {
        let name = s["metadata"]["name"].as_str().unwrap_or_default().to_string();
        k.delete(SLICES, &format!("/{name}"));
    }
    until(&mut rx, "the DRA node gone", |p| p.nodes.iter().all(|n| n.name != "h100-dyn-01")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_without_device_taint_rules_says_so_and_one_without_dra_says_nothing() {
    let k = FakeK8s::start();
    k.load_dra(&[SPLIT, STATIC]);
    k.set_dra(Some(false));
    let p = once(&k, "dra-norules").await;
    let note = p.note.clone().unwrap_or_default();
    assert!(note.contains("DRA: DeviceTaintRules not served"), "{note}");
    let gpu7 = p.nodes[0].cards.iter().find(|c| c.index == 7).map(|c| c.draining);
    assert_eq!(gpu7, Some(false), "no rules seen, no drain");

    let k = FakeK8s::start();
    k.load_dra(&[SPLIT]);
    k.set_dra(None);
    let p = once(&k, "dra-none").await;
    assert_eq!(p.note.as_deref(), Some("none of 3 nodes advertises an nvidia.com GPU resource"));
    assert!(!k.requests().iter().any(|r| r.starts_with(SLICES)), "nothing asked of an API not served");
}

fn snapshot(k: &FakeK8s) -> Value {
    let dir = Temp::new("dra-snapshot");
    let cfg = k.kubeconfig(&dir.0);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["snapshot", "--json", "--kubernetes"])
        .env("KUBECONFIG", &cfg)
        .env("XDG_CONFIG_HOME", "/nonexistent-tessera-test")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text} {}", String::from_utf8_lossy(&out.stderr)))
}

/// The check: gpu-0's layout with its holders, every card's allocation source, and
/// the 8-GPU pod in the queue.
#[test]
fn snapshot_json_of_the_fixtures() {
    let k = FakeK8s::start();
    k.load_dra(&[SPLIT, STATIC]);
    let v = snapshot(&k);
    let gpu0 = &v["nodes"][0]["cards"][0];
    assert_eq!(gpu0["layout"], "1g.10gb@0,1g.10gb@1,1g.20gb@2,3g.40gb@4", "{gpu0}");
    assert_eq!(gpu0["allocation"], "dra");
    assert_eq!(gpu0["sharing_mode"], "dra_dynamic");
    let holders: Vec<Value> =
        gpu0["mig"]["instances"].as_array().into_iter().flatten().map(|i| i["workloads"].clone()).collect();
    assert_eq!(
        Value::Array(holders),
        serde_json::json!([
            ["k8s:inference/embed-0"],
            ["k8s:inference/embed-1"],
            ["k8s:inference/vllm-a-0", "k8s:inference/vllm-b-0"],
            ["k8s:inference/rerank-0"]
        ])
    );
    let cards =
        v["nodes"].as_array().into_iter().flatten().flat_map(|n| n["cards"].as_array().cloned().unwrap_or_default());
    assert!(cards.clone().all(|c| c["allocation"] == "dra"));
    assert_eq!(cards.count(), 16);
    assert_eq!(v["queue"]["pending"], 1, "{}", v["queue"]);
    let pending = v["workloads"].as_array().into_iter().flatten().find(|w| w["id"] == "k8s:training/pretrain-8gpu-0");
    let reason = pending.map(|w| w["reason"].as_str().unwrap_or_default().to_string()).unwrap_or_default();
    assert!(
        reason.starts_with(
            "wants 8 whole H100 on one node (matchAttribute productName): h100-dyn-01 has 5 (gpu-0 carved into MIG, \
             gpu-1 held, gpu-7 tainted NoExecute); h100-mig-01 publishes no whole GPUs (MIG on) (scheduler: Unschedulable: 0/3 nodes"
        ),
        "{reason}"
    );
    println!("{}", serde_json::to_string_pretty(gpu0).unwrap_or_default());
}

/// A forbidden ResourceClaims list (RBAC without resourceclaims) never makes the DRA cards look
/// free: what holds each is unknown, said on the card and in the note.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forbidden_claims_leave_every_dra_card_unknown_never_free() {
    let k = FakeK8s::start();
    k.load_dra(&[SPLIT, STATIC]);
    let forbidden = serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
        "message": "resourceclaims.resource.k8s.io is forbidden", "reason": "Forbidden", "code": 403});
    k.answer("GET", "/apis/resource.k8s.io/v1/resourceclaims", 403, forbidden);
    let p = once(&k, "dra-forbidden").await;
    let note = p.note.clone().unwrap_or_default();
    assert!(note.contains("resourceclaims"), "{note}");
    let cards: Vec<_> = p.nodes.iter().flat_map(|n| n.cards.iter()).filter(|c| c.dra.is_some()).collect();
    assert!(!cards.is_empty());
    for c in cards {
        let d = c.dra.as_deref().unwrap_or_else(|| panic!("no DRA part"));
        assert!(d.holders_unknown && !c.is_idle(), "card {} looks free: {d:?}", c.index);
        assert!(d.problems.iter().any(|p| p.contains("what holds it is unknown")), "{:?}", d.problems);
    }
}

/// Unread ResourceSlices are not "no GPUs": the note says what is unknown and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forbidden_slices_say_the_dra_gpus_are_unknown() {
    let k = FakeK8s::start();
    k.load_dra(&[SPLIT, STATIC]);
    let forbidden = serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
        "message": "resourceslices.resource.k8s.io is forbidden", "reason": "Forbidden", "code": 403});
    k.answer("GET", SLICES, 403, forbidden);
    let p = once(&k, "dra-slices-forbidden").await;
    let note = p.note.clone().unwrap_or_default();
    assert!(note.contains("GPUs of DRA nodes unknown: ResourceSlices are not read"), "{note}");
    assert!(!note.contains("advertises an nvidia.com GPU resource"), "{note}");
}
