//! One update from the watch stores: GPU nodes with their capacity, GPU pods as workloads,
//! and Kueue's pending Workloads laid over them, with their queue positions where known.

use std::sync::Arc;

use k8s_openapi::api::scheduling::v1::PriorityClass;

use super::objects::{GpuNode, GpuPod, KueueWorkload, key};
use super::pods::Classes;
use super::visibility::Positions;
use super::{dra, kueue, nodes, pods};
use crate::model::KindRules;
use crate::sources::Partial;

pub fn build(
    node_objs: &[Arc<GpuNode>],
    pod_objs: &[Arc<GpuPod>],
    class_objs: &[Arc<PriorityClass>],
    kueue_objs: &[Arc<KueueWorkload>],
    kinds: &KindRules,
    positions: &Positions,
    dra_objs: &dra::Objects,
) -> Partial {
    let classes: Classes = class_objs.iter().filter_map(|c| Some((c.metadata.name.clone()?, c.value?))).collect();
    let used = pods::used_by_node(pod_objs.iter().map(AsRef::as_ref));
    let mut pic = dra::picture(dra_objs, pod_objs);
    let mut nodes: Vec<_> = node_objs
        .iter()
        .filter_map(|n| {
            let name = n.metadata.name.as_deref()?;
            match pic.nodes.remove(name) {
                Some(cards) => Some(nodes::dra_node(n, cards)),
                None => nodes::map(n, used.get(name)),
            }
        })
        .collect();
    // Slices of a node whose Node object is not (yet) seen: shown, but not as schedulable.
    for (name, cards) in std::mem::take(&mut pic.nodes) {
        let reason = Some("no Node object seen for this DRA pool".to_string());
        nodes.push(crate::model::Node { name, schedulable: false, reason, cards, ..crate::model::Node::default() });
    }
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    let mut workloads: Vec<_> = pod_objs
        .iter()
        .filter_map(|p| {
            pods::map(p, kinds, &classes).or_else(|| {
                let asked = pic.requests.remove(&key(&p.metadata))?;
                let mut w = pods::with_request(p, asked, kinds, &classes);
                // What tessera sees blocking the claim, before the scheduler's words.
                if let Some(why) = pic.blockers.remove(&key(&p.metadata)).filter(|_| !w.state.is_active()) {
                    w.reason = Some(match w.reason.take() {
                        Some(s) => format!("{why} (scheduler: {s})"),
                        None => why,
                    });
                }
                if w.state.is_active() {
                    w.cards = pic.held.remove(&w.id).unwrap_or_default();
                }
                Some(w)
            })
        })
        .collect();
    kueue::apply(&mut workloads, kueue_objs, pod_objs, kinds, &classes, positions);
    workloads.sort_by(|a, b| a.id.cmp(&b.id));
    one_card_nodes(&mut nodes, &mut workloads);
    let note = (nodes.is_empty() && !node_objs.is_empty()).then(|| match (node_objs.len(), dra_objs.slices_unknown) {
        // Unread slices are not "no GPUs": DRA nodes advertise none through the device plugin.
        (_, Some(why)) => format!("GPUs of DRA nodes unknown: ResourceSlices are not read ({why})"),
        (1, None) => "the 1 node does not advertise an nvidia.com GPU resource".to_string(),
        (n, None) => format!("none of {n} nodes advertises an nvidia.com GPU resource"),
    });
    let note: Vec<String> = note.into_iter().chain(pic.notes).collect();
    let note = (!note.is_empty()).then(|| note.join("; "));
    Partial { nodes, workloads, note, ..Partial::default() }
}

/// Kubernetes never says which card a pod got, except where a node has one card: there every
/// bound GPU pod holds it (and, on a shared card, the node's replicas in use are the card's).
/// Elsewhere dcgm-exporter's pod labels say which card.
fn one_card_nodes(nodes: &mut [crate::model::Node], workloads: &mut [crate::model::Workload]) {
    // Bound pods by node, once: not a scan of every pod per node.
    let mut by_node: std::collections::HashMap<String, Vec<usize>> = std::collections::HashMap::new();
    for (i, w) in workloads.iter().enumerate().filter(|(_, w)| w.state.is_active()) {
        if let Some(n) = &w.node {
            by_node.entry(n.clone()).or_default().push(i);
        }
    }
    for n in nodes.iter_mut() {
        let [card] = n.cards.as_mut_slice() else { continue };
        if card.mig.enabled {
            continue;
        }
        let r = crate::model::CardRef::new(n.name.clone(), card.index);
        for &i in by_node.get(&n.name).into_iter().flatten() {
            let w = &mut workloads[i];
            if w.request.mig_profile.is_none() && !w.cards.contains(&r) {
                w.cards.push(r.clone());
                card.add_holder(None, &w.id);
            }
        }
        if card.sharing.unit.is_some() {
            let used: u64 = n
                .capacity
                .iter()
                .filter(|c| matches!(c.resource, crate::model::Resource::Shared { .. }))
                .map(|c| c.used)
                .sum();
            card.sharing.replicas_used = u32::try_from(used).ok();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Resource, WorkloadState};
    use serde_json::json;

    fn obj<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> Arc<T> {
        Arc::new(serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}")))
    }

    /// #47 (words): one node without GPUs is not "none of 1 nodes".
    #[test]
    fn one_node_without_gpus_is_said_in_the_singular() {
        let cpu = |n: &str| obj::<GpuNode>(json!({"metadata": {"name": n}, "status": {"allocatable": {"cpu": "4"}}}));
        let note = |nodes: &[Arc<GpuNode>]| {
            build(nodes, &[], &[], &[], &KindRules::default(), &Positions::new(), &dra::Objects::default()).note
        };
        assert_eq!(note(&[cpu("a")]).as_deref(), Some("the 1 node does not advertise an nvidia.com GPU resource"));
        assert_eq!(
            note(&[cpu("a"), cpu("b")]).as_deref(),
            Some("none of 2 nodes advertises an nvidia.com GPU resource")
        );
    }

    #[test]
    fn bound_pods_count_against_their_node_and_pending_ones_queue() {
        let node = obj::<GpuNode>(json!({
            "metadata": {"name": "gpu-1", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8"}},
            "status": {"allocatable": {"nvidia.com/gpu": "8"}, "conditions": [{"type": "Ready", "status": "True"}]}
        }));
        let cpu_node = obj::<GpuNode>(json!({"metadata": {"name": "cpu-1"}, "status": {"allocatable": {"cpu": "4"}}}));
        let pod = |name: &str, node: Option<&str>, phase: &str, gpus: u32| {
            obj::<GpuPod>(json!({
                "metadata": {"name": name, "namespace": "ml"},
                "spec": {"nodeName": node, "priorityClassName": "batch-high",
                    "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]},
                "status": {"phase": phase}
            }))
        };
        let pods = [
            pod("a", Some("gpu-1"), "Running", 4),
            pod("b", Some("gpu-1"), "Pending", 2),
            pod("c", None, "Pending", 8),
            pod("done", Some("gpu-1"), "Succeeded", 2),
        ];
        let classes = [obj::<PriorityClass>(json!({"metadata": {"name": "batch-high"}, "value": 700}))];
        let p = build(
            &[node, cpu_node],
            &pods,
            &classes,
            &[],
            &KindRules::default(),
            &Positions::new(),
            &dra::Objects::default(),
        );
        assert_eq!(p.nodes.len(), 1);
        let cap = &p.nodes[0].capacity;
        assert_eq!(cap.len(), 1);
        assert_eq!(cap[0].resource, Resource::WholeCard { model: Some("H100-80GB".into()) });
        assert_eq!((cap[0].total, cap[0].used), (8, 6));
        let ids: Vec<_> = p.workloads.iter().map(|w| (w.id.as_str(), w.state, w.priority)).collect();
        assert_eq!(
            ids,
            [
                ("k8s:ml/a", WorkloadState::Running, Some(700)),
                ("k8s:ml/b", WorkloadState::Running, Some(700)),
                ("k8s:ml/c", WorkloadState::Pending, Some(700)),
            ]
        );
        assert_eq!(p.note, None);
    }

    #[test]
    fn a_cluster_without_gpus_says_so() {
        let cpu_node = obj::<GpuNode>(json!({"metadata": {"name": "cpu-1"}, "status": {"allocatable": {"cpu": "4"}}}));
        let p = build(&[cpu_node], &[], &[], &[], &KindRules::default(), &Positions::new(), &dra::Objects::default());
        assert!(p.nodes.is_empty());
        assert_eq!(p.note.as_deref(), Some("the 1 node does not advertise an nvidia.com GPU resource"));
    }
}
