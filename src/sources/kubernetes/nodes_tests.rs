//! Node mapping against real GFD labels and node status from tests/fixtures/kubernetes,
//! laid into the real GKE Node object in place of its own labels and status.

use serde_json::{Value, json};

use super::*;

fn fixture(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kubernetes").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn json_fixture(name: &str) -> Value {
    serde_json::from_str(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The GKE node with `labels` added and GPU resources in `capacity`/`allocatable`.
fn node(labels: &Value, allocatable: &Value, capacity: &Value) -> GpuNode {
    let mut n = json_fixture("node-full.gke-no-gpu.managedfields-testdata.json");
    if let (Some(dst), Some(src)) = (n["metadata"]["labels"].as_object_mut(), labels.as_object()) {
        dst.extend(src.clone());
    }
    if let (Some(dst), Some(src)) = (n["status"]["allocatable"].as_object_mut(), allocatable.as_object()) {
        dst.extend(src.clone());
    }
    if let (Some(dst), Some(src)) = (n["status"]["capacity"].as_object_mut(), capacity.as_object()) {
        dst.extend(src.clone());
    }
    serde_json::from_value(n).unwrap_or_else(|e| panic!("node: {e}"))
}

fn mapped(n: &GpuNode, used: Option<&Used>) -> Node {
    map(n, used).unwrap_or_else(|| panic!("a GPU node"))
}

/// `Allocatable:` rows of the `oc describe node | egrep` sample, as a resource list.
fn describe_allocatable() -> Value {
    let text = fixture("kubectl-describe-node.dgx-h100-mig-mixed.egrep.txt");
    let block = text.split("Allocatable:").nth(1).and_then(|b| b.split("Resource").next()).unwrap_or_default();
    let mut out = serde_json::Map::new();
    for line in block.lines() {
        if let Some((k, v)) = line.split_once(':') {
            out.insert(k.trim().to_string(), json!(v.trim()));
        }
    }
    Value::Object(out)
}

#[test]
fn the_gke_node_without_gpus_is_left_out() {
    let n: GpuNode = serde_json::from_value(json_fixture("node-full.gke-no-gpu.managedfields-testdata.json"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(n.metadata.name.as_deref(), Some("node-default-pool-something"));
    assert_eq!(n.status.allocatable.get("cpu").map(|q| q.0.as_str()), Some("3920m"));
    assert!(map(&n, None).is_none());
}

#[test]
fn h20_mixed_node_whole_cards_beside_mig_instances() {
    let status = json_fixture("node-status.h20-7gpu-plus-mig-mixed.capacity-allocatable.json");
    let mut labels = json_fixture("node-labels.h20-mig-mixed-custom.json");
    // The sample's label block leaves out the GFD product and count labels of this 8-card node.
    labels["nvidia.com/gpu.product"] = json!("NVIDIA-H20");
    labels["nvidia.com/gpu.count"] = json!("8");
    let n = node(&labels, &status["allocatable"], &status["capacity"]);
    let used = Used::from([("nvidia.com/gpu".to_string(), 3), ("nvidia.com/mig-1g.12gb".to_string(), 1)]);
    let node = mapped(&n, Some(&used));
    assert!(node.schedulable, "{:?}", node.reason);
    assert_eq!(node.reason, None);
    let cap: Vec<(String, u64, u64)> =
        node.capacity.iter().map(|c| (c.resource.to_string(), c.total, c.used)).collect();
    assert_eq!(
        cap,
        [
            ("whole NVIDIA-H20".to_string(), 7, 3),
            ("MIG 1g.12gb".to_string(), 2, 1),
            ("MIG 1g.24gb".to_string(), 1, 0),
            ("MIG 3g.48gb".to_string(), 1, 0),
        ]
    );
    assert_eq!(node.cards.len(), 8);
    let c = &node.cards[3];
    assert_eq!(c.model, "NVIDIA-H20");
    assert!(c.mig.enabled);
    assert_eq!(
        c.mig.error.as_deref(),
        Some(
            "1 of 8 cards are in MIG mode and Kubernetes does not say which; layout not reported by Kubernetes \
             (mig.config=zkj-pa-uat-gpu-004, state success)"
        )
    );
}

#[test]
fn h100_mixed_all_balanced_every_card_is_mig() {
    let labels = json_fixture("node-labels.h100-mig-mixed-all-balanced.json");
    let alloc = describe_allocatable();
    assert_eq!(alloc["nvidia.com/mig-1g.10gb"], json!("16"));
    let n = node(&labels, &alloc, &alloc);
    let node = mapped(&n, None);
    let cap: Vec<(String, u64)> = node.capacity.iter().map(|c| (c.resource.to_string(), c.total)).collect();
    // nvidia.com/gpu is 0 under the mixed strategy with MIG on every card: no whole cards.
    assert_eq!(cap, [("MIG 1g.10gb".to_string(), 16), ("MIG 2g.20gb".to_string(), 8), ("MIG 3g.40gb".to_string(), 8)]);
    assert_eq!(node.cards.len(), 1);
    let c = &node.cards[0];
    assert_eq!(c.model, "NVIDIA-H100-80GB-HBM3");
    assert_eq!(c.memory_total_mib, Some(81559));
    assert!(c.mig.enabled && c.mig.instances.is_empty());
    assert_eq!(
        c.mig.error.as_deref(),
        Some("layout not reported by Kubernetes (mig.config=all-balanced, state success)")
    );
}

#[test]
fn h100_all_disabled_is_a_whole_card_with_numeric_quantities() {
    let labels = json_fixture("node-labels.h100-mig-all-disabled-single.json");
    // Numbers, not strings: some tools write quantities that way.
    let n = node(&labels, &json!({"nvidia.com/gpu": 1}), &json!({"nvidia.com/gpu": 1}));
    let node = mapped(&n, Some(&Used::from([("nvidia.com/gpu".to_string(), 1)])));
    assert_eq!(node.capacity.len(), 1);
    assert_eq!(node.capacity[0].resource, Resource::WholeCard { model: Some("H100-80GB".into()) });
    assert_eq!((node.capacity[0].total, node.capacity[0].used, node.capacity[0].free()), (1, 1, 0));
    assert_eq!(node.cards.len(), 1);
    assert!(!node.cards[0].mig.enabled);
    assert_eq!(node.cards[0].mig.error, None);
}

#[test]
fn single_strategy_counts_mig_devices_not_cards() {
    let labels = json_fixture("node-labels.a100-pcie-mig-single-1g.5gb.json");
    let n = node(&labels, &json!({"nvidia.com/gpu": "7"}), &json!({"nvidia.com/gpu": "7"}));
    let node = mapped(&n, Some(&Used::from([("nvidia.com/gpu".to_string(), 2)])));
    assert_eq!(node.capacity.len(), 1);
    assert_eq!(node.capacity[0].resource, Resource::MigInstance { profile: "1g.5gb".into() });
    assert_eq!((node.capacity[0].total, node.capacity[0].used), (7, 2));
    // gpu.count = 7 counts 1g.5gb devices: seven fill one A100 40GB.
    assert_eq!(node.cards.len(), 1);
    let c = &node.cards[0];
    assert_eq!(c.model, "A100-PCIE-40GB");
    assert_eq!(c.memory_total_mib, None, "gpu.memory is one instance's under the single strategy");
    assert!(c.mig.enabled);
    assert_eq!(c.mig.error.as_deref(), Some("7× 1g.5gb per card assumed; layout not reported by Kubernetes"));
}

#[test]
fn single_strategy_with_a_custom_config_shows_no_guessed_cards() {
    let mut labels = json_fixture("node-labels.a100-pcie-mig-single-1g.5gb.json");
    labels["nvidia.com/mig.config"] = json!("site-special");
    let n = node(&labels, &json!({"nvidia.com/gpu": "5"}), &json!({"nvidia.com/gpu": "5"}));
    let node = mapped(&n, None);
    assert!(node.cards.is_empty());
    assert_eq!(node.capacity[0].total, 5);
}

#[test]
fn cordoned_and_not_ready_nodes() {
    let labels = json_fixture("node-labels.h100-mig-all-disabled-single.json");
    let mut n = node(&labels, &json!({"nvidia.com/gpu": "1"}), &json!({"nvidia.com/gpu": "1"}));
    // The GKE sample's Ready condition is True.
    assert!(mapped(&n, None).schedulable);
    n.spec.unschedulable = Some(true);
    let m = mapped(&n, None);
    assert!(!m.schedulable);
    assert_eq!(m.reason.as_deref(), Some("cordoned"));

    n.spec.unschedulable = None;
    let ready = n.status.conditions.iter_mut().find(|c| c.type_ == "Ready").unwrap_or_else(|| panic!("Ready"));
    ready.status = "Unknown".into();
    ready.reason = Some("NodeStatusUnknown".into());
    ready.message = Some("Kubelet stopped posting node status.".into());
    let m = mapped(&n, None);
    assert!(!m.schedulable);
    assert_eq!(
        m.reason.as_deref(),
        Some("NotReady (Unknown): NodeStatusUnknown: Kubelet stopped posting node status.")
    );
}

#[test]
fn a_failed_mig_reconfiguration_is_in_the_reason() {
    let mut labels = json_fixture("node-labels.h100-mig-mixed-all-balanced.json");
    labels["nvidia.com/mig.config.state"] = json!("failed");
    let n = node(&labels, &json!({"nvidia.com/mig-1g.10gb": "2"}), &json!({"nvidia.com/mig-1g.10gb": "2"}));
    let m = mapped(&n, None);
    assert!(m.schedulable);
    assert_eq!(m.reason.as_deref(), Some("MIG reconfiguration to all-balanced: failed"));
    assert_eq!(
        m.cards[0].mig.error.as_deref(),
        Some("layout not reported by Kubernetes (mig.config=all-balanced, state failed)")
    );
}

#[test]
fn a_node_whose_device_plugin_lost_its_cards_is_still_a_gpu_node() {
    let n: GpuNode = serde_json::from_value(json!({
        "metadata": {"name": "g", "labels": {"nvidia.com/gpu.count": "2", "nvidia.com/gpu.product": "NVIDIA-H200"}},
        "status": {"allocatable": {"nvidia.com/gpu": "0"}, "conditions": [{"type": "Ready", "status": "True"}]}
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    let m = mapped(&n, None);
    assert!(m.capacity.is_empty());
    assert_eq!(m.cards.len(), 2);
    assert_eq!(m.cards[1].model, "NVIDIA-H200");
}

/// A GPU node from a fixture with `labels` and `capacity` (capacity is also allocatable).
fn shared_node(name: &str) -> GpuNode {
    let v = json_fixture(name);
    node(&v["labels"], &v["capacity"], &v["capacity"])
}

#[test]
fn time_slicing_labels_from_a_real_a10g_node() {
    use crate::model::capacity::Free;
    use crate::model::{Fleet, ShareUnit, SharingMode};
    let n = shared_node("node-labels.a10g-time-slicing-2.json");
    let used: Used = [("nvidia.com/gpu".to_string(), 1)].into_iter().collect();
    let m = mapped(&n, Some(&used));
    assert_eq!(m.cards.len(), 1, "gpu.count is physical cards, not replicas");
    let c = &m.cards[0];
    assert_eq!(c.model, "NVIDIA-A10G", "-SHARED is not part of the model");
    assert_eq!((c.sharing.mode, c.sharing.replicas), (Some(SharingMode::TimeSliced), Some(2)));
    assert_eq!(c.sharing_text(false), "TS×2", "Kubernetes does not say which card a replica is on");
    let replica = Resource::Shared { unit: ShareUnit::Replica, model: Some("A10G".into()) };
    assert_eq!(m.capacity, vec![Capacity { resource: replica, total: 2, used: 1, whole_requests: true }]);
    // A pod asking for nvidia.com/gpu gets a replica here: the queue counts it as free.
    let fleet = Fleet { nodes: vec![m], ..Fleet::default() };
    let free = Free::compute(&fleet);
    let any = Resource::WholeCard { model: None };
    assert_eq!((free.of(&any), free.replicas_of(&any)), (1, 1));
    assert_eq!(
        free.of(&Resource::Shared { unit: ShareUnit::Replica, model: None }),
        0,
        "a pod asking for nvidia.com/gpu.shared cannot have them: they are advertised as nvidia.com/gpu"
    );
}

#[test]
fn mps_labels_give_replicas_limits_and_the_daemon() {
    use crate::model::{ShareUnit, SharingMode};
    let m = mapped(&shared_node("node-labels.mps-replicas-2.constructed.json"), None);
    assert_eq!(m.cards.len(), 4);
    let s = &m.cards[0].sharing;
    assert_eq!((s.mode, s.replicas, s.mps_server), (Some(SharingMode::Mps), Some(2), Some(true)));
    assert_eq!((s.mps_thread_pct, s.mps_memory_limit_mib), (Some(50), Some(23034 / 2)));
    assert_eq!(
        s.origin.as_deref(),
        Some("label nvidia.com/gpu.sharing-strategy=mps, nvidia.com/device-plugin.config=mps-2")
    );
    assert_eq!(m.cards[3].sharing_text(true), "MPSx2");
    assert_eq!(m.capacity[0].resource, Resource::Shared { unit: ShareUnit::Replica, model: Some("L4".into()) });
    assert_eq!(m.capacity[0].total, 8, "count x replicas");
}

#[test]
fn renamed_replicas_are_shared_capacity_not_whole_cards() {
    use crate::model::capacity::Free;
    use crate::model::{Fleet, ShareUnit};
    let used: Used = [("nvidia.com/gpu.shared".to_string(), 30)].into_iter().collect();
    let m = mapped(&shared_node("node-labels.time-slicing-renamed.constructed.json"), Some(&used));
    assert_eq!(m.cards.len(), 8);
    assert_eq!(m.cards[0].sharing_text(false), "TS×4");
    assert_eq!(m.capacity.len(), 1);
    assert!(!m.capacity[0].whole_requests, "only pods asking for nvidia.com/gpu.shared get these");
    let free = Free::compute(&Fleet { nodes: vec![m], ..Fleet::default() });
    assert_eq!(free.of(&Resource::WholeCard { model: None }), 0);
    assert_eq!(free.of(&Resource::Shared { unit: ShareUnit::Replica, model: Some("T4".into()) }), 2);
}

#[test]
fn a_zero_gpu_entry_beside_renamed_replicas_keeps_them_for_shared_requests() {
    use crate::model::ShareUnit;
    // A node switched to renameByDefault can still list nvidia.com/gpu at 0.
    let v = json_fixture("node-labels.time-slicing-renamed.constructed.json");
    let mut cap = v["capacity"].clone();
    cap["nvidia.com/gpu"] = json!("0");
    let m = mapped(&node(&v["labels"], &cap, &cap), None);
    let rows: Vec<(bool, u64)> = m.capacity.iter().map(|c| (c.whole_requests, c.total)).collect();
    assert_eq!(rows, vec![(false, 32)]);
    assert_eq!(m.capacity[0].resource, Resource::Shared { unit: ShareUnit::Replica, model: Some("T4".into()) });
}

#[test]
fn time_slicing_without_a_replica_count_is_shared_with_replicas_unknown() {
    let labels = json!({"nvidia.com/gpu.count": "2", "nvidia.com/gpu.product": "NVIDIA-L4-SHARED",
        "nvidia.com/gpu.sharing-strategy": "time-slicing"});
    let m = mapped(&node(&labels, &json!({"nvidia.com/gpu": "8"}), &json!({})), None);
    assert_eq!(m.cards[0].sharing_text(false), "TS");
    assert_eq!(m.cards[0].sharing.mps_server, None);
}

#[test]
fn sharing_none_is_exclusive_and_absent_labels_are_unknown() {
    let mut labels = json!({"nvidia.com/gpu.count": "2", "nvidia.com/gpu.product": "NVIDIA-L4"});
    let m = mapped(&node(&labels, &json!({"nvidia.com/gpu": "2"}), &json!({})), None);
    assert_eq!(m.cards[0].sharing_text(false), "?", "no GFD sharing labels: unknown, not exclusive");
    labels["nvidia.com/gpu.sharing-strategy"] = json!("none");
    labels["nvidia.com/gpu.replicas"] = json!("1");
    let m = mapped(&node(&labels, &json!({"nvidia.com/gpu": "2"}), &json!({})), None);
    assert_eq!(m.cards[0].sharing_text(false), "excl");
    assert_eq!(m.capacity[0].resource, Resource::WholeCard { model: Some("L4".into()) });
}

#[test]
fn node_labels_are_kept_bounded_for_schedules_to_select_by() {
    let n = node(
        &json!({"pool": "inference", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}),
        &json!({"nvidia.com/gpu": "8"}),
        &json!({"nvidia.com/gpu": "8"}),
    );
    let m = mapped(&n, None);
    assert_eq!(m.labels.get("pool").map(String::as_str), Some("inference"));
    assert!(m.labels.contains_key("kubernetes.io/hostname"), "the node's own labels too: {:?}", m.labels);
    // A node with thousands of labels keeps a bounded number, each cut, Node Feature
    // Discovery's last: a GPU label survives a flood of them.
    let mut many: serde_json::Map<String, Value> =
        (0..5000).map(|i| (format!("feature.node.kubernetes.io/k{i}"), json!("v".repeat(10_000)))).collect();
    many.insert("nvidia.com/gpu.product".into(), json!("NVIDIA-H100-80GB-HBM3"));
    let big =
        mapped(&node(&Value::Object(many), &json!({"nvidia.com/gpu": "8"}), &json!({"nvidia.com/gpu": "8"})), None);
    assert_eq!(big.labels.len(), crate::model::fleet::MAX_LABELS);
    assert!(big.labels.values().all(|v| v.chars().count() <= crate::model::fleet::MAX_LABEL_LEN));
    assert_eq!(big.labels.get("nvidia.com/gpu.product").map(String::as_str), Some("NVIDIA-H100-80GB-HBM3"));
    // A schedule with node_labels covers this node and not one without the label.
    let cfg = crate::config::parse(
        "[[schedule]]\nname = \"s\"\nnode_labels = [\"pool=inference\"]\n[[schedule.window]]\nname = \"w\"\nhours = \"08:00-20:00\"\nlayout = \"whole\"\n",
        "t.toml",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let s = &cfg.schedules[0];
    assert_eq!(s.node_labels, [("pool".to_string(), "inference".to_string())]);
    let card = crate::model::Card::default();
    assert!(s.covers(&m, &card));
    assert!(!s.covers(&big, &card));
}
