//! Node mapping: which nodes have GPUs, whether the scheduler may use them, what it can hand
//! out (allocatable against what bound pods hold), and the cards GPU Feature Discovery labels.

use std::collections::{BTreeMap, HashMap};

use super::objects::{GpuNode, condition};
use super::resources::{
    self, COUNT, GpuResource, MEMORY, MIG_CONFIG, MIG_STATE, MIG_STRATEGY, MPS_CAPABLE, PLUGIN_CONFIG, PRODUCT,
    REPLICAS, SHARING,
};
use crate::model::{Capacity, Card, Node, Resource, ShareUnit, Sharing, SharingMode};

/// Units of each GPU resource (by resource name) held by pods bound to one node.
pub type Used = HashMap<String, u64>;

fn label<'a>(n: &'a GpuNode, key: &str) -> Option<&'a str> {
    n.metadata.labels.as_ref()?.get(key).map(String::as_str).filter(|v| !v.is_empty())
}

/// True when the node advertises any NVIDIA GPU resource, even at zero (a device plugin
/// that lost its cards still says the node is a GPU node).
pub fn is_gpu_node(n: &GpuNode) -> bool {
    n.status.capacity.keys().chain(n.status.allocatable.keys()).any(|k| GpuResource::parse(k).is_some())
}

/// The MIG manager's view: the named config and how applying it went.
struct MigConfig<'a> {
    config: Option<&'a str>,
    state: Option<&'a str>,
}

impl MigConfig<'_> {
    fn describe(&self) -> Option<String> {
        self.config.map(|c| format!("mig.config={c}, state {}", self.state.unwrap_or("unknown")))
    }
}

/// The node as tessera shows it, or `None` for a node without GPUs.
pub fn map(n: &GpuNode, used: Option<&Used>) -> Option<Node> {
    if !is_gpu_node(n) {
        return None;
    }
    let name = n.metadata.name.clone().unwrap_or_default();
    let mig = MigConfig { config: label(n, MIG_CONFIG), state: label(n, MIG_STATE) };
    let (schedulable, reason) = schedulable(n, &mig);
    let product = label(n, PRODUCT);
    let single_profile = match label(n, MIG_STRATEGY) {
        Some("single") => product.and_then(|p| resources::split_product(p).1),
        _ => None,
    };
    let share = share(n);
    let capacity = capacity(n, used, product, single_profile, share.as_ref());
    let mut cards = cards(n, product, single_profile, &mig);
    if let Some(s) = &share {
        // GFD labels whole cards only; MIG cards (mixed strategy) have replicas 0.
        for c in cards.iter_mut().filter(|c| !c.mig.enabled) {
            c.sharing = s.clone();
            if let (Some(mib), Some(r)) = (c.memory_total_mib, s.replicas.filter(|_| s.mode == Some(SharingMode::Mps)))
            {
                // Each MPS replica gets 1/replicas of the memory and compute (device plugin README).
                c.sharing.mps_memory_limit_mib = Some(mib / u64::from(r.max(1)));
            }
        }
    }
    Some(Node { name, schedulable, reason, cards, capacity, labels: labels(n), ..Node::default() })
}

/// A node whose GPUs a DRA driver publishes: its cards are DRA's (`cards`), its
/// schedulability and labels the Node object's; a device plugin's resources on it are not read
/// (a node is shown as one or the other).
pub fn dra_node(n: &GpuNode, cards: Vec<Card>) -> Node {
    let name = n.metadata.name.clone().unwrap_or_default();
    let mig = MigConfig { config: label(n, MIG_CONFIG), state: label(n, MIG_STATE) };
    let (schedulable, reason) = schedulable(n, &mig);
    Node { name, schedulable, reason, cards, labels: labels(n), ..Node::default() }
}

/// The node's labels, bounded (`MAX_LABELS`, each cut to `MAX_LABEL_LEN`): Node Feature
/// Discovery's `feature.node.kubernetes.io/` labels (often a hundred or more, never what a
/// schedule selects by) come last, so the rest are kept first.
fn labels(n: &GpuNode) -> BTreeMap<String, String> {
    use crate::model::fleet::{MAX_LABEL_LEN, MAX_LABELS};
    let cut = |s: &str| s.chars().take(MAX_LABEL_LEN).collect::<String>();
    let nfd = |k: &str| k.starts_with("feature.node.kubernetes.io/");
    let (first, last): (Vec<_>, Vec<_>) = n.metadata.labels.iter().flatten().partition(|(k, _)| !nfd(k));
    first.into_iter().chain(last).take(MAX_LABELS).map(|(k, v)| (cut(k), cut(v))).collect()
}

/// Cordoned or not Ready means the scheduler will not place pods; the MIG manager's state is
/// added when a reconfiguration is under way or failed, since the GPUs are withdrawn meanwhile.
fn schedulable(n: &GpuNode, mig: &MigConfig) -> (bool, Option<String>) {
    let mut why = Vec::new();
    let cordoned = n.spec.unschedulable == Some(true);
    if cordoned {
        why.push("cordoned".to_string());
    }
    let ready = match condition(&n.status.conditions, "Ready") {
        Some(c) if c.status == "True" => true,
        Some(c) => {
            let detail: Vec<&str> = [c.reason.as_deref(), c.message.as_deref()].into_iter().flatten().collect();
            let status = if c.status == "False" { String::new() } else { format!(" ({})", c.status) };
            why.push(if detail.is_empty() {
                format!("NotReady{status}")
            } else {
                format!("NotReady{status}: {}", detail.join(": "))
            });
            false
        }
        None => {
            why.push("no Ready condition reported".to_string());
            false
        }
    };
    if let (Some(config), Some(state @ ("pending" | "rebooting" | "failed"))) = (mig.config, mig.state) {
        why.push(format!("MIG reconfiguration to {config}: {state}"));
    }
    (!cordoned && ready, (!why.is_empty()).then(|| why.join("; ")))
}

/// The sharing GPU Feature Discovery labels on the node: time-slicing or MPS with replicas per
/// card (`gpu.replicas` is per card: GFD's code, not its docs' "multiplied" wording), exclusive
/// for `none`; `None` where the labels are absent (an older plugin: unknown, not exclusive).
fn share(n: &GpuNode) -> Option<Sharing> {
    let strategy = label(n, SHARING)?;
    let replicas = label(n, REPLICAS).and_then(|r| r.parse::<u32>().ok());
    let mode = match strategy {
        "time-slicing" => SharingMode::TimeSliced,
        "mps" => SharingMode::Mps,
        "none" => SharingMode::Exclusive,
        _ => return None,
    };
    // Shared by the label; replicas 1 (or 0) means the plugin does not replicate. Missing or
    // unreadable replicas leave the count unknown, not the card exclusive.
    let shared = mode.unisolated() && replicas.is_none_or(|r| r > 1);
    let config = label(n, PLUGIN_CONFIG).map(|c| format!(", {PLUGIN_CONFIG}={c}")).unwrap_or_default();
    Some(Sharing {
        mode: Some(if shared { mode } else { SharingMode::Exclusive }),
        replicas: replicas.filter(|_| shared),
        unit: shared.then_some(ShareUnit::Replica),
        mps_server: label(n, MPS_CAPABLE).filter(|_| mode == SharingMode::Mps).map(|v| v == "true"),
        mps_thread_pct: replicas.filter(|&r| shared && mode == SharingMode::Mps && r > 0).map(|r| 100 / r),
        origin: Some(format!("label {SHARING}={strategy}{config}")),
        ..Sharing::default()
    })
}

fn capacity(
    n: &GpuNode,
    used: Option<&Used>,
    product: Option<&str>,
    single_profile: Option<&str>,
    share: Option<&Sharing>,
) -> Vec<Capacity> {
    // Allocatable is what the scheduler hands out; a node that has not reported it yet still
    // says its capacity.
    let list = if n.status.allocatable.is_empty() { &n.status.capacity } else { &n.status.allocatable };
    let model = product.map(resources::model_name);
    let shared = share.is_some_and(|s| s.unit.is_some());
    let replica = Resource::Shared { unit: ShareUnit::Replica, model: model.clone() };
    // (resource, whole-card requests take these units) -> (total, used): `nvidia.com/gpu` and
    // `nvidia.com/gpu.shared` on one node stay apart.
    let mut by: BTreeMap<(Resource, bool), (u64, u64)> = BTreeMap::new();
    for (res, qty) in list {
        let (resource, whole_requests) = match GpuResource::parse(res) {
            Some(GpuResource::Gpu) => match single_profile {
                Some(p) => (Resource::MigInstance { profile: p.to_string() }, false),
                // Shared without renameByDefault: nvidia.com/gpu counts replicas, and a pod
                // asking for a GPU gets one of them.
                None if shared => (replica.clone(), true),
                None => (Resource::WholeCard { model: model.clone() }, false),
            },
            Some(GpuResource::Mig(profile)) => (Resource::MigInstance { profile }, false),
            Some(GpuResource::Shared) => (replica.clone(), false),
            None => continue,
        };
        let total = resources::count(qty).unwrap_or(0);
        let held = used.and_then(|u| u.get(res)).copied().unwrap_or(0);
        let e = by.entry((resource, whole_requests)).or_default();
        e.0 += total;
        e.1 += held;
    }
    by.into_iter()
        .filter(|(_, (total, used))| *total > 0 || *used > 0)
        .map(|((resource, whole_requests), (total, used))| Capacity { resource, total, used, whole_requests })
        .collect()
}

/// Cards from GFD's `nvidia.com/gpu.count`. Kubernetes says which cards exist and their model,
/// never which MIG instances sit where: MIG cards say so rather than look free.
fn cards(n: &GpuNode, product: Option<&str>, single_profile: Option<&str>, mig: &MigConfig) -> Vec<Card> {
    let Some(count) = label(n, COUNT).and_then(|c| c.parse::<u32>().ok()) else { return Vec::new() };
    let model = product.map(|p| resources::split_product(p).0.to_string()).unwrap_or_default();
    let disabled = mig.config == Some("all-disabled");
    let unknown = |extra: &str| {
        let config = mig.describe().map(|d| format!(" ({d})")).unwrap_or_default();
        format!("{extra}layout not reported by Kubernetes{config}")
    };
    let card = |index: u32, memory: Option<u64>, error: Option<String>| {
        let mut c = Card {
            index,
            model: model.clone(),
            memory_total_mib: memory,
            allocation: Some(crate::model::dra::Allocation::DevicePlugin),
            ..Card::default()
        };
        c.mig.enabled = error.is_some();
        c.mig.error = error;
        c
    };

    if let Some(profile) = single_profile {
        // Under the single strategy GFD counts MIG devices, not cards, and gpu.memory is one
        // instance's. The card count follows only where every card has the same, full layout.
        let per_card = crate::model::mig::catalog::lookup(&model)
            .and_then(|m| m.profile(profile))
            .map(|p| u32::from(p.max_count))
            .filter(|&m| m > 0 && mig.config.is_none_or(|c| c == format!("all-{profile}")));
        let Some(per_card) = per_card else { return Vec::new() };
        let error = unknown(&format!("{per_card}× {profile} per card assumed; "));
        return (0..count.div_ceil(per_card)).map(|i| card(i, None, Some(error.clone()))).collect();
    }

    let memory = label(n, MEMORY).and_then(|m| m.parse::<u64>().ok());
    let list = if n.status.capacity.is_empty() { &n.status.allocatable } else { &n.status.capacity };
    let mig_resources = list.iter().any(|(k, v)| {
        matches!(GpuResource::parse(k), Some(GpuResource::Mig(_))) && resources::count(v).unwrap_or(0) > 0
    });
    let mig_cards = match label(n, MIG_STRATEGY) {
        Some("mixed") if mig_resources && !disabled => {
            // Mixed strategy: nvidia.com/gpu counts only the cards without MIG.
            let whole = list.get(resources::GPU).and_then(resources::count).unwrap_or(0);
            u64::from(count).saturating_sub(whole)
        }
        _ => 0,
    };
    let error = match mig_cards {
        0 => None,
        m if m >= u64::from(count) => Some(unknown("")),
        m => Some(unknown(&format!("{m} of {count} cards are in MIG mode and Kubernetes does not say which; "))),
    };
    (0..count).map(|i| card(i, memory, error.clone())).collect()
}

#[cfg(test)]
#[path = "nodes_tests.rs"]
mod tests;
