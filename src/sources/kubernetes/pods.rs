//! Pod mapping: a pod that asks for GPUs becomes a workload `k8s:NAMESPACE/POD` with its
//! state, pending reason, request and priority; bound pods also count against their node.

use std::collections::{BTreeMap, HashMap};

use super::nodes::Used;
use super::objects::{GpuPod, PodSpec, condition, created, key};
use super::resources::{self, GpuResource};
use crate::model::KindRules;
use crate::model::{Request, ShareUnit, Shares, Workload, WorkloadState};

/// PriorityClass name → value, for objects that name a class but carry no value.
pub type Classes = HashMap<String, i32>;

/// Finished pods hold nothing; the watch filters them out, and they are skipped if one slips
/// through (a server that ignores the field selector).
pub fn finished(p: &GpuPod) -> bool {
    matches!(p.status.phase.as_deref(), Some("Succeeded" | "Failed"))
}

/// What a set of GPU resources (by resource name and count) asks for, in the model's terms:
/// a MIG profile wins over whole cards where a pod (oddly) asks for both.
pub fn request(gpus: &BTreeMap<String, u64>, spec: &PodSpec) -> Request {
    let product = resources::wanted_product(spec);
    let (base, single_profile) = product.map_or((None, None), |p| {
        let (_, profile) = resources::split_product(p);
        (Some(resources::model_name(p)), profile)
    });
    let mut mig: Option<(String, u64)> = None;
    let (mut whole, mut shared) = (0u64, 0u64);
    for (name, &n) in gpus {
        match GpuResource::parse(name) {
            Some(GpuResource::Mig(p)) if mig.is_none() => mig = Some((p, n)),
            Some(GpuResource::Gpu) => whole += n,
            Some(GpuResource::Shared) => shared += n,
            _ => {}
        }
    }
    let count = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    if mig.is_none() && whole == 0 && shared > 0 {
        // nvidia.com/gpu.shared: replicas of a time-sliced or MPS card, not whole cards.
        let shares = Some(Shares { unit: ShareUnit::Replica, count: count(shared) });
        return Request { shares, model: base, ..Request::default() };
    }
    let (mig_profile, n) = match (mig, single_profile) {
        (Some((profile, n)), _) => (Some(profile), n),
        (None, profile) => (profile.map(str::to_string), whole + shared),
    };
    Request { gpus: Some(count(n)), mig_profile, model: base, ..Request::default() }
}

/// The pod as a workload, or `None` when it asks for no GPU or has finished.
pub fn map(p: &GpuPod, kinds: &KindRules, classes: &Classes) -> Option<Workload> {
    if finished(p) {
        return None;
    }
    let gpus = resources::pod_gpus(&p.spec);
    if gpus.is_empty() {
        return None;
    }
    Some(with_request(p, request(&gpus, &p.spec), kinds, classes))
}

/// The pod as a workload asking for `asked` (its extended resources, or its DRA claims).
pub fn with_request(p: &GpuPod, asked: Request, kinds: &KindRules, classes: &Classes) -> Workload {
    let namespace = p.metadata.namespace.clone().unwrap_or_default();
    let class = p.spec.priority_class_name.as_deref().unwrap_or_default();
    let kind = kinds.classify([class, namespace.as_str()], true);
    let (state, reason) = state(p);
    let mut w =
        Workload::new(format!("k8s:{}", key(&p.metadata)), p.metadata.name.clone().unwrap_or_default(), kind, state);
    w.owner = Some(namespace).filter(|n| !n.is_empty());
    w.reason = reason;
    w.priority = p.spec.priority.or_else(|| classes.get(class).copied()).map(i64::from);
    w.request = asked;
    w.submitted_at = created(&p.metadata);
    if state.is_active() {
        w.started_at = p.status.start_time;
        w.node.clone_from(&p.spec.node_name);
    }
    w
}

/// A pod bound to a node holds its GPUs even while its containers are still being created,
/// so it counts as running there, not as queue demand; the waiting reason says why it has
/// not started.
fn state(p: &GpuPod) -> (WorkloadState, Option<String>) {
    if p.metadata.deletion_timestamp.is_some() {
        return (WorkloadState::Completing, Some("terminating".into()));
    }
    let bound = p.spec.node_name.as_deref().is_some_and(|n| !n.is_empty());
    match p.status.phase.as_deref() {
        Some("Running") => (WorkloadState::Running, None),
        Some("Pending") | None if bound => (WorkloadState::Running, waiting(p)),
        Some("Pending") | None => (WorkloadState::Pending, unscheduled(p)),
        _ => (WorkloadState::Unknown, p.status.phase.clone()),
    }
}

/// PodScheduled=False: the scheduler's reason and message ("Unschedulable: 0/4 nodes are
/// available: 4 Insufficient nvidia.com/gpu.").
fn unscheduled(p: &GpuPod) -> Option<String> {
    let c = condition(&p.status.conditions, "PodScheduled").filter(|c| c.status == "False")?;
    let parts: Vec<&str> =
        [c.reason.as_deref(), c.message.as_deref()].into_iter().flatten().filter(|s| !s.is_empty()).collect();
    (!parts.is_empty()).then(|| parts.join(": "))
}

fn waiting(p: &GpuPod) -> Option<String> {
    p.status.container_statuses.iter().find_map(|s| {
        let w = s.state.as_ref()?.waiting.as_ref()?;
        let reason = w.reason.as_deref()?;
        Some(match w.message.as_deref().filter(|m| !m.is_empty()) {
            Some(m) => format!("{reason}: {m}"),
            None => reason.to_string(),
        })
    })
}

/// GPU units held per node and resource name by pods bound there and not finished.
pub fn used_by_node<'a>(pods: impl IntoIterator<Item = &'a GpuPod>) -> HashMap<String, Used> {
    let mut out: HashMap<String, Used> = HashMap::new();
    for p in pods {
        let Some(node) = p.spec.node_name.as_deref().filter(|n| !n.is_empty()) else { continue };
        if finished(p) {
            continue;
        }
        for (res, n) in resources::pod_gpus(&p.spec) {
            *out.entry(node.to_string()).or_default().entry(res).or_default() += n;
        }
    }
    out
}

/// Keep only what the mapping reads: metadata bookkeeping goes, and a pod without GPUs or
/// resource claims (DRA) keeps nothing but its identity (the store needs it to apply a later delete).
pub fn strip(p: &mut GpuPod) {
    p.metadata.managed_fields = None;
    p.metadata.annotations = None;
    p.metadata.labels = None;
    if resources::pod_gpus(&p.spec).is_empty() && p.spec.resource_claims.is_empty() {
        p.spec = PodSpec::default();
        p.status = Default::default();
        p.metadata.owner_references = None;
    }
}

#[cfg(test)]
#[path = "pods_tests.rs"]
mod tests;
