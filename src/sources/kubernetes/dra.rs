//! Dynamic Resource Allocation: the cards a DRA driver (NVIDIA's `gpu.nvidia.com`) publishes
//! in ResourceSlices, what allocated ResourceClaims hold on them (and which pods, through
//! `reservedFor`), their device taints (the driver's and DeviceTaintRules'), and what pods with
//! claims ask for. Both slice layouts are read: since Kubernetes 1.35 the driver publishes a
//! pool's counter sets in a slice of their own, on 1.34 each GPU's slice carries its counter
//! set beside its devices; the pool is read whole either way.

mod cards;
mod cel;
mod counters;
pub mod explain;
mod index;
pub mod intern;
pub mod objects;
mod request;
mod taints;

use std::collections::BTreeMap;
use std::sync::Arc;

use super::objects::{GpuPod, key};
use crate::model::dra::TaintRules;
use crate::model::{Card, CardRef, Request};
use objects::{Claim, Class, Rule, Slice, Template};

/// The driver whose devices are GPUs.
pub const GPU_DRIVER: &str = "gpu.nvidia.com";
/// The most notes the DRA part adds to a source's note: the rest are counted.
const MAX_NOTES: usize = 6;

/// The DRA objects of one update, as the watch stores hold them.
#[derive(Clone, Copy, Default)]
pub struct Objects<'a> {
    pub slices: &'a [Arc<Slice>],
    pub claims: &'a [Arc<Claim>],
    pub templates: &'a [Arc<Template>],
    pub classes: &'a [Arc<Class>],
    pub rules: &'a [Arc<Rule>],
    /// Whether the API server serves DeviceTaintRules; `None`: not known.
    pub rules_served: Option<bool>,
    /// Why the claims are not known (their watch failed or has not listed yet): then what
    /// holds each DRA card is unknown, and none is free.
    pub claims_unknown: Option<&'a str>,
    /// Why the DeviceTaintRules served are not known: a drain by a rule would not be seen.
    pub rules_unknown: Option<&'a str>,
    /// Why the ResourceSlices are not known: the GPUs of DRA nodes are then unknown.
    pub slices_unknown: Option<&'a str>,
}

/// What DRA says of the cluster: the cards of each DRA node, the cards each pod holds, and
/// problems of objects that are not a card's.
#[derive(Debug, Default)]
pub struct Picture {
    /// Node name → its DRA cards, by index.
    pub nodes: BTreeMap<String, Vec<Card>>,
    /// Workload id (`k8s:NS/POD`) → the cards its claims hold.
    pub held: BTreeMap<String, Vec<CardRef>>,
    /// Pod (`NS/POD`) → what its claims ask for, for pods whose claims ask for GPUs.
    pub requests: std::collections::HashMap<String, Request>,
    /// Pending pod (`NS/POD`) → why its claims cannot be allocated now, where tessera sees it.
    pub blockers: std::collections::HashMap<String, String>,
    pub notes: Vec<String>,
}

impl Picture {
    /// Add a note, bounded.
    fn note(&mut self, text: String) {
        match self.notes.len() {
            n if n < MAX_NOTES => self.notes.push(text),
            n if n == MAX_NOTES => self.notes.push("DRA: more problems not shown".into()),
            _ => {}
        }
    }
}

/// The picture from the objects, and what the pods with claims among `pods` ask for.
/// A card whose claims or rules could not be read says so: its holders (and so its free
/// capacity) or a drain by a rule are unknown, never taken as none.
fn unknown_parts(c: &mut Card, o: &Objects) {
    let Some(d) = c.dra.as_deref_mut() else { return };
    if let Some(why) = o.claims_unknown {
        d.holders_unknown = true;
        d.placeable = None;
        d.problem(format!("what holds it is unknown: ResourceClaims are not read ({why})"));
        c.mig.placements = crate::model::Placements::Unknown;
    }
    if let Some(why) = o.rules_unknown {
        d.taint_rules = TaintRules::Unknown;
        d.problem(format!("a drain by a DeviceTaintRule would not be seen: DeviceTaintRules are not read ({why})"));
    }
}

pub fn picture(o: &Objects, pods: &[Arc<GpuPod>]) -> Picture {
    let mut pic = Picture::default();
    let devices = index::Devices::new(o.slices);
    let lookup = request::Lookup::new(*o, &devices);
    for p in pods.iter().filter(|p| !p.spec.resource_claims.is_empty()) {
        if let Some(r) = request::request(p, &lookup) {
            pic.requests.insert(key(&p.metadata), r);
        }
    }
    let held = index::Allocations::new(o.claims, &devices, &mut pic);
    let rules = taints::Rules::new(o.rules);
    for pool in devices.pools() {
        let (node, cards) = cards::cards(pool, &held, &rules, &mut pic);
        if let Some(node) = node {
            for c in &cards {
                for id in c.holders() {
                    let r = CardRef::new(node.clone(), c.index);
                    let list = pic.held.entry(id.to_string()).or_default();
                    if !list.contains(&r) {
                        list.push(r);
                    }
                }
            }
            pic.nodes.entry(node).or_default().extend(cards);
        }
    }
    let served = match o.rules_served {
        None => TaintRules::Unknown,
        Some(true) => TaintRules::Served,
        Some(false) => TaintRules::NotServed,
    };
    for cards in pic.nodes.values_mut() {
        cards.sort_by_key(|c| c.index);
        for d in cards.iter_mut().filter_map(|c| c.dra.as_deref_mut()) {
            d.taint_rules = served;
        }
        for c in cards.iter_mut() {
            unknown_parts(c, o);
        }
    }
    let unbound = |p: &&Arc<GpuPod>| p.spec.node_name.as_deref().is_none_or(str::is_empty);
    for p in pods.iter().filter(|p| !p.spec.resource_claims.is_empty()).filter(unbound) {
        let specs = request::unallocated(p, &lookup);
        if let Some(why) = explain::explain(lookup.objects(), &devices, &specs, &pic.nodes) {
            pic.blockers.insert(key(&p.metadata), why);
        }
    }
    pic
}

#[cfg(test)]
#[path = "dra_tests.rs"]
mod tests;
