//! Kubernetes's plans: cordon and uncordon a node, name a mig-parted config in the GPU
//! Operator's label and follow its state, evict a pod.

use super::guard::Refusal;
use super::{Capabilities, Drain, NeedsCard, Op, Options, Plan, Preempt, Repartition, step};
use crate::model::{Card, Fleet, Node as FleetNode, Workload};

/// Kubernetes acts on whole nodes: it cordons them, names a MIG config for the GPU Operator
/// and evicts pods.
pub struct Kubernetes;

impl Capabilities for Kubernetes {
    fn workload_prefix(&self) -> Option<&'static str> {
        Some("k8s")
    }

    fn drain(&self) -> Option<Drain> {
        Some(drain)
    }

    fn repartition(&self) -> Option<Repartition> {
        Some(repartition)
    }

    fn preempt(&self) -> Option<Preempt> {
        Some(preempt)
    }
}

fn drain(p: &mut Plan, node: &FleetNode, _: Option<&Card>, on: bool, _: &Options) -> Result<(), NeedsCard> {
    let verb = if on { "Drain" } else { "Undrain" };
    p.summary = format!("{} node {} (Kubernetes)", if on { "Cordon" } else { "Uncordon" }, node.name);
    p.warnings.push(format!("Kubernetes cordons whole nodes: no new pods on any GPU of {}", node.name));
    let patch = serde_json::json!({ "spec": { "unschedulable": on } });
    let call = format!("PATCH /api/v1/nodes/{} (merge-patch) {patch}", node.name);
    p.steps.push(step(format!("{verb} the node"), call, Op::KubePatchNode { node: node.name.clone(), patch }));
    Ok(())
}

/// Kubernetes repartitions a node by naming a mig-parted config in a label.
fn repartition(p: &mut Plan, fleet: &Fleet, node: &FleetNode, _: Option<&Card>, layout: &str) -> Result<(), NeedsCard> {
    let name = if layout == "whole" { "all-disabled".to_string() } else { layout.to_string() };
    p.summary = format!("Set MIG config {name} on node {} (GPU Operator)", node.name);
    p.warnings.push(format!(
        "the GPU Operator applies named configs to every GPU of {}; GPU pods there must be gone first",
        node.name
    ));
    if name.contains('@') || name.contains(',') {
        p.blockers.push(Refusal::NotAConfigName { layout: layout.to_string() });
    }
    // Kubernetes names a pod's node, not its card: every active GPU workload on the node counts.
    let on_node = fleet.workloads.iter().filter(|w| w.state.is_active() && w.node.as_deref() == Some(&node.name));
    let holders: usize = on_node.count().max(node.cards.iter().map(|c| c.holders().count()).sum());
    if holders > 0 {
        p.blockers.push(Refusal::NodeBusy { node: node.name.clone(), holders });
    }
    let key = "nvidia.com/mig.config";
    let patch = serde_json::json!({ "metadata": { "labels": { key: name } } });
    p.steps.push(step(
        format!("Label the node {key}={name}"),
        format!("PATCH /api/v1/nodes/{} (merge-patch) {patch}", node.name),
        Op::KubePatchNode { node: node.name.clone(), patch },
    ));
    p.steps.push(step(
        "Follow nvidia.com/mig.config.state to success or failed",
        format!("GET /api/v1/nodes/{} until label nvidia.com/mig.config.state is success", node.name),
        Op::KubeWaitLabel {
            node: node.name.clone(),
            key: "nvidia.com/mig.config.state".into(),
            success: "success".into(),
            failure: "failed".into(),
            timeout_s: 900,
        },
    ));
    Ok(())
}

fn preempt(p: &mut Plan, w: &Workload, bare: &str, _: &Options) {
    let (ns, pod) = bare.split_once('/').unwrap_or(("default", bare));
    p.summary = format!("Evict pod {ns}/{pod} ({}): its controller recreates it", w.kind.as_str());
    p.warnings.push("the Eviction API honours PodDisruptionBudgets: it may be refused (429)".into());
    p.steps.push(step(
        "Evict the pod (graceful termination: SIGTERM, then the grace period)",
        format!("POST /api/v1/namespaces/{ns}/pods/{pod}/eviction"),
        Op::KubeEvict { namespace: ns.into(), pod: pod.into() },
    ));
}
