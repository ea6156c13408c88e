//! Counters → layout: under DynamicMIG a card's MIG instances are what its allocated devices
//! consume from its counter set (an allocated `gpu-0-mig-3g40gb-9-4` consumes
//! `memory-slice-4` … `memory-slice-7`: a 3g.40gb at slices 4–7), and what it can still give
//! is every published placement whose counters still fit. A counter no set declares, or a
//! set consumed past its value, leaves the free capacity unknown, never guessed.

use std::collections::HashMap;

use super::objects::{CounterSet, Device, slices};
use crate::model::{ComputeInstance, MigInstance};

/// The counters that say which memory slices a placement takes.
const SLICE_COUNTER: &str = "memory-slice-";

/// One device of the card with the workloads holding it (empty: free).
pub struct Held<'a> {
    pub device: &'a Device,
    pub holders: &'a [String],
    /// Kept off by a `NoSchedule` or `NoExecute` taint.
    pub blocked: bool,
}

/// What the counters say of one card.
#[derive(Debug, Default)]
pub struct Layout {
    /// MIG instances of the allocated MIG devices, in slice order.
    pub instances: Vec<MigInstance>,
    /// Holders of the whole GPU, where it is allocated whole.
    pub whole: Vec<String>,
    /// The MIG profiles that can still be placed, smallest first; `None`: unknown.
    pub placeable: Option<Vec<String>>,
    /// Every instance's placement is known from its counters.
    pub placed: bool,
    pub problems: Vec<String>,
}

/// The memory slices a device consumes from a set (bit N = `memory-slice-N`).
fn slice_mask(device: &Device, set: &str) -> u16 {
    let c = device.consumes_counters.items.iter().find(|c| &*c.counter_set == set);
    c.map_or(0, |c| slices(c.counters.items.iter().map(|(n, v)| (&**n, *v)), SLICE_COUNTER))
}

/// An instance from a MIG device taking `mask` (contiguous), held by `holders`.
pub fn instance(device: &Device, mask: u16, holders: &[String]) -> Option<MigInstance> {
    if mask == 0 {
        return None;
    }
    let start = mask.trailing_zeros() as u8;
    let size = mask.count_ones() as u8;
    // Contiguous: `size` ones from `start` (16 slices fill the mask: no shift past its width).
    if mask >> start != u16::MAX >> (16 - u32::from(size)) {
        return None;
    }
    let profile = device.attributes.profile.as_deref().unwrap_or("?").to_string();
    Some(MigInstance {
        gi_id: 0,
        profile: profile.clone(),
        start,
        size,
        compute_instances: vec![ComputeInstance { ci_id: 0, profile }],
        memory_total_mib: device.memory_mib(),
        workloads: holders.to_vec(),
        ..MigInstance::default()
    })
}

/// The layout of a DynamicMIG card whose devices consume `set_name`.
pub fn layout(set_name: &str, set: Option<&CounterSet>, devices: &[Held]) -> Layout {
    let mut out = Layout { placed: true, ..Layout::default() };
    let Some(set) = set else {
        out.problems.push(format!("its devices consume counter set {set_name}, which no slice of the pool declares"));
        out.placed = false;
        for h in devices.iter().filter(|h| !h.holders.is_empty()) {
            whole_or_instance(h, set_name, &mut out);
        }
        return out;
    };
    let mut value: HashMap<&str, Option<u64>> = set.counters.items.iter().map(|(n, v)| (&**n, *v)).collect();
    value.retain(|_, v| v.is_some());
    let mut used: HashMap<&str, u64> = HashMap::new();
    let mut known = true;
    for h in devices.iter().filter(|h| !h.holders.is_empty()) {
        for c in &h.device.consumes_counters.items {
            if &*c.counter_set != set_name {
                out.problems.push(format!(
                    "{} consumes counter set {}, not this GPU's {set_name}",
                    &*h.device.name, &*c.counter_set
                ));
                known = false;
                continue;
            }
            for (name, v) in c.counters.items.iter() {
                match (value.get(&**name), v) {
                    (Some(_), Some(v)) => {
                        // A sum past u64 is consumed past any value (a wrapped sum read as fine).
                        let u = used.entry(name).or_default();
                        *u = u.saturating_add(*v);
                    }
                    _ => {
                        out.problems.push(format!(
                            "{} consumes counter {}, which counter set {set_name} does not declare",
                            &*h.device.name, &**name
                        ));
                        known = false;
                    }
                }
            }
        }
        whole_or_instance(h, set_name, &mut out);
    }
    let mut over: Vec<String> = used
        .iter()
        .filter_map(|(n, u)| {
            let v = value.get(n).copied().flatten()?;
            (*u > v).then(|| format!("{n} {u} of {v}"))
        })
        .collect();
    if !over.is_empty() {
        over.sort();
        out.problems.push(format!("counter set {set_name} consumed past its value: {}", over.join(", ")));
        known = false;
    }
    if known {
        out.placeable = Some(placeable(set_name, &value, &used, devices));
    }
    out.instances.sort_by_key(|i| i.start);
    for (n, i) in out.instances.iter_mut().enumerate() {
        // The driver makes the GPU instance when the pod starts; its id is not published.
        i.gi_id = u32::try_from(n).unwrap_or(u32::MAX).saturating_add(1);
    }
    out
}

fn whole_or_instance(h: &Held, set_name: &str, out: &mut Layout) {
    match h.device.attributes.kind.as_deref() {
        Some("gpu") => out.whole.extend(h.holders.iter().cloned()),
        Some("mig") => match instance(h.device, slice_mask(h.device, set_name), h.holders) {
            Some(i) => out.instances.push(i),
            None => {
                out.placed = false;
                out.problems.push(format!(
                    "{} is allocated but its memory-slice counters name no contiguous placement",
                    &*h.device.name
                ));
            }
        },
        _ => {}
    }
}

/// The MIG profiles whose placements fit what the set has left, smallest first.
fn placeable(
    set_name: &str,
    value: &HashMap<&str, Option<u64>>,
    used: &HashMap<&str, u64>,
    devices: &[Held],
) -> Vec<String> {
    let mut out: Vec<(u32, String)> = Vec::new();
    for h in devices.iter().filter(|h| h.holders.is_empty() && !h.blocked) {
        if h.device.attributes.kind.as_deref() != Some("mig") {
            continue;
        }
        let Some(profile) = h.device.attributes.profile.as_deref() else { continue };
        let fits = h.device.consumes_counters.items.iter().all(|c| {
            &*c.counter_set == set_name
                && c.counters.items.iter().all(|(n, v)| match (value.get(&**n).copied().flatten(), v) {
                    (Some(max), Some(v)) => used.get(&**n).copied().unwrap_or(0).saturating_add(*v) <= max,
                    _ => false,
                })
        });
        if fits && !out.iter().any(|(_, p)| p == profile) {
            out.push((slice_mask(h.device, set_name).count_ones(), profile.to_string()));
        }
    }
    out.sort();
    out.into_iter().map(|(_, p)| p).collect()
}
