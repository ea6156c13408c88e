//! Kueue: a Workload waiting for quota explains why its job has no pods (Kueue suspends the
//! job) or why its gated pods wait. Pending Workloads that ask for GPUs mark their pods, or
//! become workloads `kueue:NAMESPACE/NAME` of their own when no pod exists yet. Positions
//! from the visibility API, where known, go into the reason.

use std::collections::{BTreeMap, HashMap};

use super::objects::{GpuPod, KueueWorkload, condition, created};
use super::pods::{self, Classes};
use super::resources;
use crate::model::KindRules;
use crate::model::{Workload, WorkloadState};

/// Where a pending Workload stands; positions count from 0, as the API sends them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub cluster_queue: u64,
    pub local_queue: u64,
    pub priority: Option<i32>,
}

impl Position {
    /// "position 3 in cluster queue, 1 in local queue", counting from 1 as people do.
    pub fn describe(&self) -> String {
        let (cq, lq) = (self.cluster_queue.saturating_add(1), self.local_queue.saturating_add(1));
        format!("position {cq} in cluster queue, {lq} in local queue")
    }
}

/// Positions by (namespace, Workload name).
pub type Positions = HashMap<(String, String), Position>;

/// Why the Workload waits, if it is waiting for quota: `Some(message)` while QuotaReserved is
/// not True and it is neither admitted, finished nor deactivated; with its place in the queues
/// when the visibility API told it.
pub fn pending_reason(w: &KueueWorkload, at: Option<&Position>) -> Option<String> {
    let conds = &w.status.conditions;
    let is_true = |t: &str| condition(conds, t).is_some_and(|c| c.status == "True");
    if w.spec.active == Some(false) || w.status.admission.is_some() || is_true("Finished") || is_true("QuotaReserved") {
        return None;
    }
    let message = condition(conds, "QuotaReserved").and_then(|c| c.message.clone()).filter(|m| !m.is_empty());
    let queue = w.spec.queue_name.as_deref().filter(|q| !q.is_empty()).unwrap_or("(no queue)");
    let queue = match at {
        Some(p) => format!("{queue} ({})", p.describe()),
        None => queue.to_string(),
    };
    Some(match message {
        Some(m) => format!("Kueue queue {queue}: {m}"),
        None => format!("Kueue queue {queue}: waiting for quota"),
    })
}

/// Whether any pod set asks for a GPU resource: only those Workloads are shown.
pub fn asks_for_gpus(w: &KueueWorkload) -> bool {
    w.spec.pod_sets.iter().any(|s| !resources::pod_gpus(&s.template.spec).is_empty())
}

fn class_name(w: &KueueWorkload) -> Option<&str> {
    let s = &w.spec;
    match &s.priority_class_ref {
        Some(r) if !r.name.is_empty() => Some(r.name.as_str()),
        _ => s.priority_class_name.as_deref().filter(|n| !n.is_empty()),
    }
}

/// A Workload's priority: its own value, else the value of the PriorityClass it names (a
/// Kueue WorkloadPriorityClass is not read, and Kueue fills the value in anyway).
fn priority(w: &KueueWorkload, classes: &Classes) -> Option<i64> {
    let s = &w.spec;
    let pod_class = match &s.priority_class_ref {
        Some(r) => r.group == "scheduling.k8s.io",
        None => s.priority_class_source.as_deref().is_none_or(|src| src == "scheduling.k8s.io/priorityclass"),
    };
    s.priority.or_else(|| class_name(w).filter(|_| pod_class).and_then(|c| classes.get(c).copied())).map(i64::from)
}

/// The Workload as a pending workload, or `None` when it is not pending or asks for no GPU.
pub fn map(w: &KueueWorkload, reason: String, kinds: &KindRules, classes: &Classes) -> Option<Workload> {
    let mut gpus: BTreeMap<String, u64> = BTreeMap::new();
    for set in &w.spec.pod_sets {
        let pods = u64::try_from(set.count.unwrap_or(1)).unwrap_or(0);
        for (res, n) in resources::pod_gpus(&set.template.spec) {
            *gpus.entry(res).or_default() += n.saturating_mul(pods);
        }
    }
    if gpus.is_empty() {
        return None;
    }
    let template = w.spec.pod_sets.iter().map(|s| &s.template.spec).find(|s| !resources::pod_gpus(s).is_empty())?;
    let meta = &w.metadata;
    let namespace = meta.namespace.clone().unwrap_or_default();
    let name = meta.name.clone().unwrap_or_default();
    // The job's name means more to its owner than the generated Workload name.
    let shown = meta
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map_or_else(|| name.clone(), |o| o.name.clone());
    let class = class_name(w).unwrap_or_default();
    let queue = w.spec.queue_name.as_deref().unwrap_or_default();
    let kind = kinds.classify([class, namespace.as_str(), queue], true);
    let mut out = Workload::new(format!("kueue:{namespace}/{name}"), shown, kind, WorkloadState::Pending);
    out.owner = Some(namespace).filter(|n| !n.is_empty());
    out.reason = Some(reason);
    out.priority = priority(w, classes);
    out.request = pods::request(&gpus, template);
    out.submitted_at = created(meta);
    Some(out)
}

/// Lay pending Workloads over the pod workloads: a Workload whose owner also owns pods (a
/// job's pods, or the pod itself under Kueue's pod integration) gives those pending pods its
/// reason; one without pods becomes a pending workload of its own.
pub fn apply(
    workloads: &mut Vec<Workload>,
    kueue: &[impl AsRef<KueueWorkload>],
    pods: &[impl AsRef<GpuPod>],
    kinds: &KindRules,
    classes: &Classes,
    positions: &Positions,
) {
    // Owner uid (or a pod's own uid) → ids of the pod workloads it covers.
    let mut by_owner: HashMap<&str, Vec<String>> = HashMap::new();
    for p in pods.iter().map(AsRef::as_ref) {
        let id = format!("k8s:{}", super::objects::key(&p.metadata));
        let owners = p.metadata.owner_references.iter().flatten().map(|o| o.uid.as_str());
        for uid in owners.chain(p.metadata.uid.as_deref()) {
            by_owner.entry(uid).or_default().push(id.clone());
        }
    }
    let at: HashMap<String, usize> = workloads.iter().enumerate().map(|(i, w)| (w.id.clone(), i)).collect();
    let mut extra = Vec::new();
    for w in kueue.iter().map(AsRef::as_ref) {
        let meta = &w.metadata;
        let place = positions.get(&(meta.namespace.clone().unwrap_or_default(), meta.name.clone().unwrap_or_default()));
        let Some(reason) = pending_reason(w, place) else { continue };
        let covered: Vec<usize> = w
            .metadata
            .owner_references
            .iter()
            .flatten()
            .filter_map(|o| by_owner.get(o.uid.as_str()))
            .flatten()
            .filter_map(|id| at.get(id).copied())
            .collect();
        if covered.is_empty() {
            // The summary's priority is the one Kueue queues by; it stands in when the
            // Workload names a WorkloadPriorityClass, which is not read.
            let mapped = map(w, reason, kinds, classes).map(|mut m| {
                m.priority = m.priority.or(place.and_then(|p| p.priority).map(i64::from));
                m
            });
            extra.extend(mapped);
            continue;
        }
        for i in covered {
            if workloads[i].state == WorkloadState::Pending {
                workloads[i].reason = Some(reason.clone());
            }
        }
    }
    workloads.extend(extra);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn workload(v: serde_json::Value) -> KueueWorkload {
        serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The status stanza from Kueue's troubleshooting docs, on a Workload of a suspended Job
    /// that asks for two pods of one GPU each.
    fn pending_sample() -> KueueWorkload {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/kubernetes/kueue.workload-status.pending-insufficient-quota.json");
        let status: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{e}"))).unwrap_or_default();
        let mut v = json!({
            "metadata": {"name": "job-sample-job-jrjfr-8d56e", "namespace": "team-a", "uid": "w-1",
                "creationTimestamp": "2024-03-21T13:42:00Z",
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "sample-job-jrjfr",
                    "uid": "job-1", "controller": true}]},
            "spec": {"queueName": "user-queue", "priorityClassName": "research-low",
                "priorityClassSource": "scheduling.k8s.io/priorityclass",
                "podSets": [{"name": "main", "count": 2, "template": {"spec": {"containers": [
                    {"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}]}
        });
        v["status"] = status["status"].clone();
        workload(v)
    }

    #[test]
    fn pending_workload_without_pods_becomes_a_workload() {
        let classes = Classes::from([("research-low".to_string(), 100)]);
        let w = pending_sample();
        let mut out = Vec::new();
        let none = Positions::new();
        apply(
            &mut out,
            &[std::sync::Arc::new(w)],
            &[] as &[std::sync::Arc<GpuPod>],
            &KindRules::default(),
            &classes,
            &none,
        );
        assert_eq!(out.len(), 1);
        let w = &out[0];
        assert_eq!(w.id, "kueue:team-a/job-sample-job-jrjfr-8d56e");
        assert_eq!(w.name, "sample-job-jrjfr");
        assert_eq!(w.owner.as_deref(), Some("team-a"));
        assert_eq!(w.state, WorkloadState::Pending);
        assert_eq!(
            w.reason.as_deref(),
            Some(
                "Kueue queue user-queue: couldn't assign flavors to pod set main: insufficient quota for cpu in \
                 flavor default-flavor in ClusterQueue"
            )
        );
        assert_eq!(w.priority, Some(100));
        assert_eq!(w.request.gpus, Some(2));
        assert_eq!(w.kind, crate::model::WorkloadKind::Training);
        assert_eq!(w.submitted_at.map(|t| t.to_rfc3339()), Some("2024-03-21T13:42:00+00:00".into()));
    }

    #[test]
    fn pending_workload_marks_its_gated_pods() {
        let pod: GpuPod = serde_json::from_value(json!({
            "metadata": {"name": "sample-job-jrjfr-abcde", "namespace": "team-a", "uid": "p-1",
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "sample-job-jrjfr", "uid": "job-1"}]},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                "reason": "SchedulingGated", "message": "Scheduling is blocked due to non-empty scheduling gates"}]}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let kinds = KindRules::default();
        let mut out: Vec<Workload> = pods::map(&pod, &kinds, &Classes::new()).into_iter().collect();
        assert_eq!(
            out[0].reason.as_deref(),
            Some("SchedulingGated: Scheduling is blocked due to non-empty scheduling gates")
        );
        let pending = [std::sync::Arc::new(pending_sample())];
        apply(&mut out, &pending, &[std::sync::Arc::new(pod)], &kinds, &Classes::new(), &Positions::new());
        assert_eq!(out.len(), 1, "the pod stands for the Workload: {out:?}");
        assert!(out[0].reason.as_deref().is_some_and(|r| r.starts_with("Kueue queue user-queue: couldn't assign")));
    }

    #[test]
    fn positions_go_into_the_reason() {
        let at = Position { cluster_queue: 2, local_queue: 0, priority: Some(7) };
        let positions = Positions::from([(("team-a".into(), "job-sample-job-jrjfr-8d56e".into()), at)]);
        let mut out = Vec::new();
        let pending = [std::sync::Arc::new(pending_sample())];
        let no_pods: &[std::sync::Arc<GpuPod>] = &[];
        apply(&mut out, &pending, no_pods, &KindRules::default(), &Classes::new(), &positions);
        assert_eq!(
            out[0].reason.as_deref(),
            Some(
                "Kueue queue user-queue (position 3 in cluster queue, 1 in local queue): couldn't assign flavors to \
                 pod set main: insufficient quota for cpu in flavor default-flavor in ClusterQueue"
            )
        );
        assert_eq!(out[0].priority, Some(7), "the summary's priority where the class value is unknown");
    }

    #[test]
    fn admitted_finished_inactive_and_cpu_only_are_not_pending() {
        let base = pending_sample();
        let mut admitted = base.clone();
        admitted.status.conditions[0].status = "True".into();
        assert_eq!(pending_reason(&admitted, None), None);
        let mut inactive = base.clone();
        inactive.spec.active = Some(false);
        assert_eq!(pending_reason(&inactive, None), None);
        let mut fresh = base.clone();
        fresh.status.conditions.clear();
        assert_eq!(pending_reason(&fresh, None).as_deref(), Some("Kueue queue user-queue: waiting for quota"));
        let mut cpu = base;
        cpu.spec.pod_sets[0].template.spec.containers[0].resources.limits.clear();
        assert!(map(&cpu, "x".into(), &KindRules::default(), &Classes::new()).is_none());
    }

    #[test]
    fn v1beta2_priority_class_ref_and_mig_request() {
        let w = workload(json!({
            "metadata": {"name": "infer-1", "namespace": "serving"},
            "spec": {"queueName": "lq", "priorityClassRef": {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "online"},
                "podSets": [{"name": "main", "count": 3, "template": {"spec": {"containers": [
                    {"name": "c", "resources": {"requests": {"nvidia.com/mig-1g.10gb": "1"}}}]}}}]}
        }));
        let classes = Classes::from([("online".to_string(), 5000)]);
        let reason = pending_reason(&w, None).unwrap_or_default();
        let out = map(&w, reason, &KindRules::default(), &classes).unwrap_or_else(|| panic!("mapped"));
        assert_eq!(out.kind, crate::model::WorkloadKind::Inference);
        assert_eq!(out.priority, Some(5000));
        assert_eq!(out.request.mig_profile.as_deref(), Some("1g.10gb"));
        assert_eq!(out.request.gpus, Some(3));
        assert_eq!(out.name, "infer-1");
    }
}
