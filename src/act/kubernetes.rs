//! Kubernetes's plans: cordon and uncordon a node, name a mig-parted config in the GPU
//! Operator's label and follow its state, evict a pod; on a DRA card, drain by
//! DeviceTaintRules (one per device the card publishes) and undrain by deleting tessera's.

use serde_json::{Value, json};

use super::guard::Refusal;
use super::{Action, Capabilities, Drain, NeedsCard, Op, Options, Plan, Preempt, Repartition, step};
use crate::model::dra::{DraCard, MANAGED_BY, TaintRules};
use crate::model::{Card, Fleet, Node as FleetNode, Workload};

/// Where DeviceTaintRules are created.
pub const TAINT_RULES_PATH: &str = "/apis/resource.k8s.io/v1beta2/devicetaintrules";
/// The taint key of tessera's DeviceTaintRules.
pub const TAINT_KEY: &str = "tessera/drain";
/// The annotation that names the card a rule drains (`NODE/INDEX`).
pub const CARD_ANNOTATION: &str = "tessera/card";

/// Kubernetes acts on whole nodes: it cordons them, names a MIG config for the GPU Operator
/// and evicts pods. A DRA card it drains by itself, with DeviceTaintRules.
pub struct Kubernetes;

impl Capabilities for Kubernetes {
    fn on_card(&self, card: &Card) -> bool {
        card.dra.is_some()
    }

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

fn drain(p: &mut Plan, node: &FleetNode, card: Option<&Card>, on: bool, _: &Options) -> Result<(), NeedsCard> {
    if let Some(c) = card
        && let Some(d) = c.dra.as_deref()
    {
        let name = format!("{}/{}", node.name, c.index);
        if on {
            let evict = matches!(p.action, Action::Drain { evict: true, .. });
            dra_drain(p, &name, c, d, evict);
        } else {
            dra_undrain(p, &name, d);
        }
        return Ok(());
    }
    let verb = if on { "Drain" } else { "Undrain" };
    p.summary = format!("{} node {} (Kubernetes)", if on { "Cordon" } else { "Uncordon" }, node.name);
    p.warnings.push(format!("Kubernetes cordons whole nodes: no new pods on any GPU of {}", node.name));
    let patch = serde_json::json!({ "spec": { "unschedulable": on } });
    let call = format!("PATCH /api/v1/nodes/{} (merge-patch) {patch}", node.name);
    p.steps.push(step(format!("{verb} the node"), call, Op::KubePatchNode { node: node.name.clone(), patch }));
    Ok(())
}

/// Kubernetes repartitions a node by naming a mig-parted config in a label. Not a card under
/// DynamicMIG (the DRA driver lays it out per claim); a static MIG card under DRA keeps its
/// published layout until the driver restarts.
fn repartition(
    p: &mut Plan,
    fleet: &Fleet,
    node: &FleetNode,
    card: Option<&Card>,
    layout: &str,
) -> Result<(), NeedsCard> {
    let cards: Vec<&Card> = match card {
        Some(c) => vec![c],
        None => node.cards.iter().collect(),
    };
    if let Some(c) = cards.iter().find(|c| c.dra.as_ref().is_some_and(|d| d.dynamic)) {
        p.blockers.push(Refusal::DraDynamic { card: format!("{}/{}", node.name, c.index) });
    }
    if cards.iter().any(|c| c.dra.as_ref().is_some_and(|d| !d.dynamic)) {
        p.warnings.push(format!(
            "the DRA driver publishes MIG devices as it finds them when it starts: once the config is applied, \
             restart its kubelet plugin on {} to publish the new layout (until then its ResourceSlices keep the old one)",
            node.name
        ));
    }
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

/// Every device of the card is kept off by a `NoExecute` taint (its pods evicted).
pub fn evicted(c: &Card) -> bool {
    let Some(d) = c.dra.as_deref() else { return false };
    let names = d.all_device_names().unwrap_or_default();
    !names.is_empty() && names.iter().all(|n| d.taints.iter().any(|t| t.device == *n && t.effect == "NoExecute"))
}

/// The name of tessera's rule for one device: `tessera-drain-POOL-DEVICE` (`evict` for
/// `NoExecute`), a valid object name (DNS subdomain: lowercase, at most 253 characters; a
/// longer one ends in a hash of the whole).
pub fn rule_name(evict: bool, pool: &str, device: &str) -> String {
    let kind = if evict { "evict" } else { "drain" };
    let raw = format!("tessera-{kind}-{pool}-{device}").to_ascii_lowercase();
    let clean: String = raw.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' { c } else { '-' }).collect();
    let clean = clean.trim_end_matches(['-', '.']).to_string();
    if clean.len() <= 253 && clean == raw {
        return clean;
    }
    // FNV-1a of the raw name: stable across runs, so the plan is the same when made again.
    let hash = raw.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    let head: String = clean.chars().take(253 - 17).collect();
    format!("{}-{hash:016x}", head.trim_end_matches(['-', '.']))
}

/// The DeviceTaintRule that keeps `device` of `card` off (`NoSchedule`) or also evicts
/// (`NoExecute`), with tessera's label.
pub fn taint_rule(name: &str, card: &str, d: &DraCard, device: &str, evict: bool) -> Value {
    let effect = if evict { "NoExecute" } else { "NoSchedule" };
    json!({
        "apiVersion": "resource.k8s.io/v1beta2",
        "kind": "DeviceTaintRule",
        "metadata": {
            "name": name,
            "labels": { MANAGED_BY.0: MANAGED_BY.1 },
            "annotations": { CARD_ANNOTATION: card },
        },
        "spec": {
            "deviceSelector": { "driver": d.driver, "pool": d.pool, "device": device },
            "taint": { "key": TAINT_KEY, "effect": effect },
        },
    })
}

/// Drain a DRA card: one DeviceTaintRule per device it publishes (the whole GPU and, under
/// DynamicMIG, every MIG placement: a claim for any of them would land on it), created all or
/// none (a failure deletes those created).
fn dra_drain(p: &mut Plan, name: &str, c: &Card, d: &DraCard, evict: bool) {
    let effect = if evict { "NoExecute" } else { "NoSchedule" };
    match d.taint_rules {
        TaintRules::Served => {}
        TaintRules::NotServed => p.blockers.push(Refusal::TaintRulesNotServed),
        TaintRules::Unknown => p.warnings.push(
            "whether the API server serves DeviceTaintRules (resource.k8s.io/v1beta2) is not known here: \
             the creation says"
                .into(),
        ),
    }
    let Some(devices) = d.all_device_names() else {
        p.blockers.push(Refusal::DraDevicesUnknown {
            card: name.to_string(),
            named: d.device_names.len(),
            published: d.devices,
        });
        p.summary = format!("Drain {name} through DRA: its devices are not all known");
        return;
    };
    let have = d.tessera_rules();
    let mut made = 0usize;
    for device in devices {
        let rule = rule_name(evict, &d.pool, device);
        if have.contains(&rule.as_str()) {
            continue;
        }
        let object = taint_rule(&rule, name, d, device, evict);
        let call = format!("POST {TAINT_RULES_PATH} {object}");
        let what = format!("Create DeviceTaintRule {rule} ({effect} on {device})");
        p.steps.push(step(what, call, Op::KubeCreateTaintRule { name: rule, object }));
        made += 1;
    }
    let whole = d.device.as_deref().map_or_else(|| "its MIG devices".to_string(), str::to_string);
    let rules = if made == 1 { "1 DeviceTaintRule".to_string() } else { format!("{made} DeviceTaintRules") };
    let each = if d.dynamic { "the whole GPU and every MIG placement" } else { "each device it publishes" };
    p.summary = format!("Drain {name} ({whole}) through DRA: {rules} with effect {effect}, one for {each}");
    let holders: Vec<&str> = c.holders().collect();
    if evict {
        p.warnings.push(
            "NoExecute evicts the pods whose claims hold these devices (their controllers decide what comes back)"
                .into(),
        );
        let who = match holders.as_slice() {
            // Claims not read: who would be evicted is not known, never "nobody".
            [] if d.holders_unknown => "what holds it is unknown (ResourceClaims are not read)".to_string(),
            [] => "no workload holds it now".to_string(),
            [one] => format!("{one} holds it"),
            many => format!(
                "{} hold it ({})",
                crate::units::count(many.len() as u64, "workload", "workloads"),
                many.join(", ")
            ),
        };
        p.second_confirmation = Some(format!("{rules} with effect NoExecute evict what runs on {name}: {who}. Evict?"));
    } else {
        p.warnings.push("new claims avoid it; pods holding it keep running (drain --evict evicts them)".into());
        if !holders.is_empty() {
            p.warnings.push(format!("{} still hold it: {}", holders.len(), holders.join(", ")));
        }
    }
    if made > 1 {
        p.warnings.push(format!("the {made} rules are created all or none: a failure deletes those created"));
    }
}

/// Undrain a DRA card: delete the DeviceTaintRules tessera made for it, and only those.
fn dra_undrain(p: &mut Plan, name: &str, d: &DraCard) {
    let ours = d.tessera_rules();
    let mut theirs: Vec<String> =
        d.taints.iter().filter(|t| t.blocks() && !t.tessera).filter_map(|t| t.rule.clone()).collect();
    theirs.sort_unstable();
    theirs.dedup();
    let published = d.taints.iter().filter(|t| t.blocks() && t.rule.is_none()).count();
    for rule in &ours {
        let call =
            format!("DELETE {TAINT_RULES_PATH}/{rule} (after a GET shows label {}={})", MANAGED_BY.0, MANAGED_BY.1);
        let what = format!("Delete DeviceTaintRule {rule}");
        p.steps.push(step(what, call, Op::KubeDeleteTaintRule { name: (*rule).to_string() }));
    }
    let n = ours.len();
    let rules = if n == 1 { "1 DeviceTaintRule".to_string() } else { format!("{n} DeviceTaintRules") };
    p.summary = format!("Undrain {name} through DRA: delete tessera's {rules}");
    if ours.is_empty() && !theirs.is_empty() {
        p.blockers.push(Refusal::NotTesserasRules { card: name.to_string(), rules: theirs });
        return;
    }
    if !theirs.is_empty() {
        p.warnings.push(format!(
            "{} DeviceTaintRules tessera did not make stay ({}, ...): they keep devices of {name} off",
            theirs.len(),
            theirs[0]
        ));
    }
    if published > 0 {
        p.warnings.push(format!("the driver's own taints on {published} devices stay (health: see the card)"));
    }
}

#[cfg(test)]
#[path = "kubernetes_tests.rs"]
mod tests;
