//! The server of the DRA scale benchmark (issue 49, "Speed and memory"; scripts/dra-scale.sh
//! runs it and measures tessera against it): a generated DynamicMIG cluster served by the fake
//! API server (tests/common/k8s.rs) until told to stop. Node 1 is the fixtures' h100-dyn-01
//! with everything the fixtures hold (the static MIG node, claims, templates, classes, taint
//! rules, pods, the pending 8-GPU pod); nodes 2..N are copies of h100-dyn-01 named
//! `h100-dyn-NN`, each with its 9 slices (208 devices: 8 GPUs and every MIG placement against
//! per-GPU counter sets) and its allocated claims and their pods, in namespaces of its own
//! (`training-NN`, `inference-NN`). 1,000 nodes: 208,000 devices in 9,000 slices, ~250 MB of
//! slice JSON. Generated in memory: nothing is written but the kubeconfig and a few files that
//! say the server is up.
//!
//! Ignored: `DRA_SCALE_DIR=DIR DRA_SCALE_NODES=1000 cargo test --release --test dra_scale --
//! --ignored --nocapture` serves until `DIR/stop` exists (or an hour has passed).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
use common::k8s::dra::{CLAIMS, SLICES, items, node};
use common::k8s::{FakeK8s, NODES, PODS};

/// The fixtures' DynamicMIG node, copied.
const TEMPLATE_NODE: &str = "h100-dyn-01";
const SPLIT: &str = "resourceslices.h100-dynamicmig.json";
const STATIC: &str = "resourceslices.h100-static-mig.json";

/// Node `i` (1-based): node 1 is the fixtures' own.
fn node_name(i: usize) -> String {
    format!("h100-dyn-{i:02}")
}

/// `objects` as JSON text, for copies made by replacing names in it.
fn texts(objects: &[Value]) -> Vec<String> {
    objects.iter().map(Value::to_string).collect()
}

/// A copy of `text` for node `i`: the node (and pool) renamed, the namespace given a suffix.
fn copy(text: &str, i: usize) -> Value {
    let name = node_name(i);
    let mut v: Value = serde_json::from_str(&text.replace(TEMPLATE_NODE, &name)).unwrap_or_else(|e| panic!("{e}"));
    if let Some(ns) = v["metadata"]["namespace"].as_str().map(str::to_string) {
        v["metadata"]["namespace"] = Value::String(format!("{ns}-{i:02}"));
    }
    if let Some(uid) = v["metadata"]["uid"].as_str().map(str::to_string) {
        v["metadata"]["uid"] = Value::String(format!("{uid}-{i:02}"));
    }
    v
}

#[test]
#[ignore = "the server of a benchmark: scripts/dra-scale.sh runs it"]
fn serve_a_generated_dynamic_mig_cluster() {
    let dir = PathBuf::from(std::env::var("DRA_SCALE_DIR").unwrap_or_else(|_| "target/dra-scale".into()));
    let nodes: usize = std::env::var("DRA_SCALE_NODES").ok().and_then(|n| n.parse().ok()).unwrap_or(1000).max(1);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let started = Instant::now();
    let k = FakeK8s::start();
    // The fixtures whole: node 1, the static MIG node, the control plane and every object.
    k.load_dra(&[SPLIT, STATIC]);
    // Copies of node 1's slices, claims and the pods its claims are reserved for.
    let slices = texts(&items(SPLIT));
    let on_node = |v: &Value| v.to_string().contains(TEMPLATE_NODE);
    let claims: Vec<Value> = items("resourceclaims.json").into_iter().filter(on_node).collect();
    let held: Vec<String> = claims
        .iter()
        .flat_map(|c| c["status"]["reservedFor"].as_array().cloned().unwrap_or_default())
        .filter_map(|r| r["name"].as_str().map(str::to_string))
        .collect();
    let pods: Vec<Value> = items("pods.json")
        .into_iter()
        .filter(|p| on_node(p) || p["metadata"]["name"].as_str().is_some_and(|n| held.iter().any(|h| h == n)))
        .collect();
    let (claims, pods) = (texts(&claims), texts(&pods));
    let (mut devices, mut slice_count) = (0usize, 0usize);
    for i in 1..=nodes {
        if i > 1 {
            k.preload(NODES, [node(&node_name(i), false)]);
        }
        for s in &slices {
            let v = if i == 1 { serde_json::from_str(s).unwrap_or(Value::Null) } else { copy(s, i) };
            devices += v["spec"]["devices"].as_array().map_or(0, Vec::len);
            slice_count += 1;
            if i > 1 {
                k.preload(SLICES, [v]);
            }
        }
        if i > 1 {
            k.preload(CLAIMS, claims.iter().map(|c| copy(c, i)));
            k.preload(PODS, pods.iter().map(|p| copy(p, i)));
        }
    }
    let kubeconfig = k.kubeconfig(&dir);
    let said = format!(
        "nodes={nodes} dynamic_mig_devices={devices} dynamic_mig_slices={slice_count} claims_per_node={} pods_per_node={} \
         generated_s={:.1} kubeconfig={}\n",
        claims.len(),
        pods.len(),
        started.elapsed().as_secs_f64(),
        kubeconfig.display()
    );
    print!("{said}");
    std::fs::write(dir.join("ready"), said).unwrap_or_else(|e| panic!("{e}"));
    let stop = dir.join("stop");
    while !stop.exists() && started.elapsed() < Duration::from_secs(3600) {
        std::thread::sleep(Duration::from_millis(200));
    }
}
