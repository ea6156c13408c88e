//! Pod mapping against the real pod manifests in tests/fixtures/kubernetes, given the
//! metadata and status an API server adds.

use serde_json::{Value, json};

use super::*;
use crate::model::WorkloadKind;

fn fixture(name: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kubernetes").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// A manifest as the API server would return it: in `namespace`, created at a fixed time,
/// with `status` (and `spec.nodeName` where given).
fn served(mut v: Value, namespace: &str, node: Option<&str>, status: Value) -> GpuPod {
    v["metadata"]["namespace"] = json!(namespace);
    v["metadata"]["creationTimestamp"] = json!("2026-03-01T10:00:00Z");
    if let Some(n) = node {
        v["spec"]["nodeName"] = json!(n);
    }
    v["status"] = status;
    serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}"))
}

fn workload(p: &GpuPod) -> Workload {
    map(p, &KindRules::default(), &Classes::new()).unwrap_or_else(|| panic!("a GPU pod"))
}

fn unschedulable() -> Value {
    json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."}]})
}

#[test]
fn numeric_quantity_pending_with_the_scheduler_reason() {
    let p = served(fixture("pod.gpu-1.device-plugin-readme.json"), "default", None, unschedulable());
    let w = workload(&p);
    assert_eq!(w.id, "k8s:default/gpu-pod");
    assert_eq!(w.name, "gpu-pod");
    assert_eq!(w.owner.as_deref(), Some("default"));
    assert_eq!(w.state, WorkloadState::Pending);
    assert_eq!(w.reason.as_deref(), Some("Unschedulable: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu."));
    assert_eq!(w.request.gpus, Some(1));
    assert_eq!(w.request.mig_profile, None);
    assert_eq!(w.kind, WorkloadKind::Training);
    assert_eq!(w.submitted_at.map(|t| t.to_rfc3339()), Some("2026-03-01T10:00:00+00:00".into()));
    assert_eq!(w.node, None);
}

#[test]
fn string_quantity_in_a_job_template() {
    let job = fixture("job.gpu-1-quoted-quantity.json");
    let template = json!({"metadata": {"name": "j-e2e-1-x7k2p"}, "spec": job["spec"]["template"]["spec"].clone()});
    let p = served(template, "default", None, json!({"phase": "Pending"}));
    assert_eq!(p.spec.containers[0].resources.limits.get("nvidia.com/gpu").map(|q| q.0.as_str()), Some("1"));
    let w = workload(&p);
    assert_eq!(w.request.gpus, Some(1));
    assert_eq!(w.reason, None);
}

#[test]
fn limits_only_gpu_running_on_its_node() {
    let status = json!({"phase": "Running", "startTime": "2026-03-01T10:00:05Z"});
    let p = served(fixture("pod.gpu-limits-only.dcgm-exporter-test.json"), "ml-inference", Some("gpu-3"), status);
    let w = workload(&p);
    assert_eq!(w.request.gpus, Some(1), "the GPU is only under limits");
    assert_eq!(w.state, WorkloadState::Running);
    assert_eq!(w.node.as_deref(), Some("gpu-3"));
    assert_eq!(w.started_at.map(|t| t.to_rfc3339()), Some("2026-03-01T10:00:05+00:00".into()));
    assert_eq!(w.kind, WorkloadKind::Inference, "namespace ml-inference");
    assert!(w.cards.is_empty());
    let used = used_by_node([&p]);
    assert_eq!(used.get("gpu-3").and_then(|u| u.get("nvidia.com/gpu")), Some(&1));
}

#[test]
fn mixed_strategy_mig_request() {
    let p = served(fixture("pod.mig-3g.20gb.hami-example.json"), "default", None, json!({"phase": "Pending"}));
    let w = workload(&p);
    assert_eq!(w.request.mig_profile.as_deref(), Some("3g.20gb"));
    assert_eq!(w.request.gpus, Some(1));
}

#[test]
fn single_strategy_profile_and_model_from_the_node_selector() {
    let p = served(fixture("pod.single-strategy-mig-nodeselector.json"), "default", None, json!({"phase": "Pending"}));
    let w = workload(&p);
    assert_eq!(w.request.mig_profile.as_deref(), Some("1g.5gb"));
    assert_eq!(w.request.model.as_deref(), Some("A100-SXM4-40GB"));
    assert_eq!(w.request.gpus, Some(1));
}

#[test]
fn product_from_required_node_affinity() {
    let mut v = fixture("pod.gpu-1.device-plugin-readme.json");
    v["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H100-80GB-HBM3"]}]}]}}});
    let w = workload(&served(v.clone(), "default", None, json!({})));
    assert_eq!(w.request.model.as_deref(), Some("H100-80GB"));
    // Two acceptable products: no single model is asked for.
    v["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"]
        [0]["values"] = json!(["NVIDIA-H100-80GB-HBM3", "NVIDIA-H200"]);
    assert_eq!(workload(&served(v, "default", None, json!({}))).request.model, None);
}

#[test]
fn priority_class_decides_the_kind_and_fills_a_missing_priority() {
    let classes_json = fixture("priorityclass.v1-with-preemptionpolicy.volcano.json");
    let classes_list: Vec<k8s_openapi::api::scheduling::v1::PriorityClass> =
        serde_json::from_value(classes_json).unwrap_or_else(|e| panic!("{e}"));
    // A v1beta1 manifest, as a current API server serves it: through scheduling.k8s.io/v1.
    let mut old = fixture("priorityclass.v1beta1.volcano-example.json");
    old["apiVersion"] = json!("scheduling.k8s.io/v1");
    let old: k8s_openapi::api::scheduling::v1::PriorityClass =
        serde_json::from_value(old).unwrap_or_else(|e| panic!("{e}"));
    let classes: Classes =
        classes_list.iter().chain([&old]).filter_map(|c| Some((c.metadata.name.clone()?, c.value?))).collect();
    assert_eq!(classes.get("job-priority"), Some(&1));
    assert_eq!(classes.get("task-priority"), Some(&10));
    assert_eq!(classes.get("high-pri"), Some(&1000));

    let mut v = fixture("pod.gpu-1.device-plugin-readme.json");
    v["spec"]["priorityClassName"] = json!("high-pri");
    let p = served(v.clone(), "research", None, json!({}));
    let rules = KindRules { inference: vec!["high-pri".into()], ..KindRules::default() };
    let w = map(&p, &rules, &classes).unwrap_or_else(|| panic!("mapped"));
    assert_eq!(w.kind, WorkloadKind::Inference, "the class name matched the inference rule");
    assert_eq!(w.priority, Some(1000), "no spec.priority: the class's value");
    v["spec"]["priority"] = json!(5);
    let w =
        map(&served(v, "research", None, json!({})), &KindRules::default(), &classes).unwrap_or_else(|| panic!("x"));
    assert_eq!(w.priority, Some(5), "the pod's own value wins");
    assert_eq!(w.kind, WorkloadKind::Training, "namespace research");
}

#[test]
fn bound_but_not_started_holds_its_gpu() {
    let status = json!({"phase": "Pending", "containerStatuses": [
        {"name": "cuda-container", "state": {"waiting": {"reason": "ContainerCreating"}}}]});
    let p = served(fixture("pod.gpu-1.device-plugin-readme.json"), "default", Some("gpu-1"), status);
    let w = workload(&p);
    assert_eq!(w.state, WorkloadState::Running);
    assert_eq!(w.reason.as_deref(), Some("ContainerCreating"));
    assert_eq!(w.node.as_deref(), Some("gpu-1"));
    assert_eq!(w.started_at, None);
}

#[test]
fn terminating_finished_and_cpu_only_pods() {
    let mut v = fixture("pod.gpu-1.device-plugin-readme.json");
    v["metadata"]["deletionTimestamp"] = json!("2026-03-01T11:00:00Z");
    let w = workload(&served(v, "default", Some("gpu-1"), json!({"phase": "Running"})));
    assert_eq!(w.state, WorkloadState::Completing);

    let done =
        served(fixture("pod.gpu-1.device-plugin-readme.json"), "default", Some("gpu-1"), json!({"phase": "Succeeded"}));
    assert!(map(&done, &KindRules::default(), &Classes::new()).is_none());
    assert!(used_by_node([&done]).is_empty());

    let mut cpu = fixture("pod.gpu-limits-only.dcgm-exporter-test.json");
    cpu["spec"]["containers"][0]["resources"]["limits"] = json!({"cpu": "200m"});
    let mut p = served(cpu, "default", Some("gpu-1"), json!({"phase": "Running"}));
    assert!(map(&p, &KindRules::default(), &Classes::new()).is_none());
    strip(&mut p);
    assert!(p.spec.containers.is_empty() && p.status.phase.is_none());
    assert_eq!(p.metadata.name.as_deref(), Some("nbody-pod"));
}

#[test]
fn init_containers_and_sidecars() {
    let p: GpuPod = serde_json::from_value(json!({
        "metadata": {"name": "x", "namespace": "n"},
        "spec": {
            "initContainers": [
                {"name": "warm", "resources": {"limits": {"nvidia.com/gpu": "4"}}},
                {"name": "side", "restartPolicy": "Always", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
            ],
            "containers": [{"name": "a", "resources": {"requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "2"}}}]
        }
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    // max(2 app + 1 sidecar, 4 init) = 4.
    assert_eq!(resources::pod_gpus(&p.spec).get("nvidia.com/gpu"), Some(&4));
}

#[test]
fn a_pod_asking_for_shared_replicas_wants_shares_not_cards() {
    use crate::model::{Resource, ShareUnit, Shares};
    // The device plugin README's pod, asking for the renamed resource instead.
    let mut v = fixture("pod.gpu-1.device-plugin-readme.json");
    v["spec"]["containers"][0]["resources"] = json!({"limits": {"nvidia.com/gpu.shared": 2}});
    let w = workload(&served(v, "serving", None, unschedulable()));
    assert_eq!(w.request.gpus, None);
    assert_eq!(w.request.shares, Some(Shares { unit: ShareUnit::Replica, count: 2 }));
    assert_eq!(w.request.asks(), (Resource::Shared { unit: ShareUnit::Replica, model: None }, 2));
}
