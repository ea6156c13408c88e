//! Pending pods explained: a claim not allocated is replayed against the cards the slices
//! publish, and the real blocker said: "wants 8 whole H100 on one node (matchAttribute
//! productName): h100-dyn-01 has 5 (gpu-0 carved into MIG, gpu-1 held, gpu-7 tainted
//! NoExecute); h100-mig-01 publishes no whole GPUs (MIG on)". The scheduler's own words
//! ("cannot allocate all claims") name neither the claim nor the reason. CEL selectors are read
//! in their common form (equalities on `type`, `productName`, `profile`, `device.driver`);
//! anything else is said as a selector tessera cannot read, never guessed.

use std::collections::BTreeMap;

use super::Objects;
use super::objects::{ClaimSpec, Exact};
use super::request::{Kind, cel_equals, class_kind};
use crate::model::Card;

/// Whether tessera reads every term of a CEL expression: `&&` of equalities on the driver or
/// on the attributes it knows.
fn readable(expression: &str) -> bool {
    expression.split("&&").all(|term| {
        let t = term.trim().trim_start_matches('(').trim_end_matches(')').trim();
        let known = ["type", "productName", "profile"].iter().any(|a| cel_equals(t, a).is_some());
        let driver = t.starts_with("device.driver") && t.contains("==");
        (known || driver) && t.matches("==").count() == 1 && !t.contains("||") && !t.contains('!')
    })
}

/// `NVIDIA H100 80GB HBM3` → `H100`.
fn short(product: &str) -> &str {
    product.strip_prefix("NVIDIA ").unwrap_or(product).split_whitespace().next().unwrap_or(product)
}

/// Why one node cannot give `n` whole GPUs of `product`: how many it has and what holds the
/// rest; `None` where it can.
fn whole_on(node: &str, cards: &[Card], product: Option<&str>, n: usize) -> Option<String> {
    let dra: Vec<&Card> = cards.iter().filter(|c| c.dra.is_some()).collect();
    let whole: Vec<&Card> =
        dra.iter().copied().filter(|c| c.dra.as_ref().is_some_and(|d| d.device.is_some())).collect();
    if whole.is_empty() {
        let mig = if dra.iter().any(|c| c.mig.enabled) { " (MIG on)" } else { "" };
        return Some(format!("{node} publishes no whole GPUs{mig}"));
    }
    let mut free = 0usize;
    let mut why = Vec::new();
    for c in whole {
        let d = c.dra.as_deref();
        let name = d.and_then(|d| d.device.clone()).unwrap_or_else(|| format!("gpu-{}", c.index));
        let blocked = d.and_then(|d| d.taints.iter().find(|t| t.blocks() && Some(&t.device) == d.device.as_ref()));
        if product.is_some_and(|p| c.model != p) {
            why.push(format!("{name} is a {}", short(&c.model)));
        } else if let Some(t) = blocked {
            why.push(format!("{name} tainted {}", t.effect));
        } else if c.health.fault().is_some() {
            why.push(format!("{name} unhealthy"));
        } else if c.mig.enabled {
            why.push(format!("{name} carved into MIG"));
        } else if !c.workloads.is_empty() {
            why.push(format!("{name} held"));
        } else {
            free += 1;
        }
    }
    (free < n).then(|| {
        let rest = if why.is_empty() { String::new() } else { format!(" ({})", why.join(", ")) };
        format!("{node} has {free}{rest}")
    })
}

/// Why `n` whole GPUs of `product` (any where `None`) on one node cannot be allocated from
/// `nodes`' DRA cards: "wants 8 whole H100 on one node{constraint}: NODE has 5 (gpu-0 carved
/// into MIG, …)"; `None` where some node could give them. The simulated cluster says its
/// waiting claim in these words too.
pub fn whole_gpus(
    product: Option<&str>,
    n: usize,
    constraint: &str,
    nodes: &BTreeMap<String, Vec<Card>>,
) -> Option<String> {
    let what = product.map_or("GPUs".to_string(), |p| short(p).to_string());
    let mut blockers = Vec::new();
    for (node, cards) in nodes {
        match whole_on(node, cards, product, n) {
            Some(b) => blockers.push(b),
            None => return None,
        }
    }
    Some(format!("wants {n} whole {what} on one node{constraint}: {}", blockers.join("; ")))
}

/// The blocker of one alternative, or `None` where some node could give it.
fn alternative(
    o: &Objects,
    spec: &ClaimSpec,
    request: &str,
    e: &Exact,
    nodes: &BTreeMap<String, Vec<Card>>,
) -> Option<String> {
    let cel: Vec<&str> =
        e.selectors.items.iter().filter_map(|s| s.cel.as_ref()).map(|c| c.expression.as_str()).collect();
    if let Some(x) = cel.iter().find(|x| !readable(x)) {
        return Some(format!("request {request} has a selector tessera cannot read: {x}"));
    }
    let product = cel.iter().find_map(|x| cel_equals(x, "productName"));
    let n = usize::try_from(e.count.unwrap_or(1).max(1)).unwrap_or(usize::MAX);
    match class_kind(o, &e.device_class_name) {
        Some(Kind::Gpu) => {
            let constraint = spec
                .devices
                .constraints
                .items
                .iter()
                .filter(|c| c.requests.is_empty() || c.requests.iter().any(|r| r == request))
                .find_map(|c| c.match_attribute.as_deref())
                .map(|a| format!(" (matchAttribute {})", a.rsplit('/').next().unwrap_or(a)))
                .unwrap_or_default();
            whole_gpus(product, n, &constraint, nodes)
        }
        Some(Kind::Mig) => {
            let profile = cel.iter().find_map(|x| cel_equals(x, "profile"))?;
            let placeable = nodes.values().flatten().filter(|c| {
                c.dra.as_ref().is_some_and(|d| d.placeable.as_ref().is_some_and(|p| p.iter().any(|x| x == profile)))
                    || c.mig.instances.iter().any(|i| i.profile == profile && i.workloads.is_empty())
            });
            (placeable.count() < n).then(|| format!("wants {n}× MIG {profile}: no card can place it now"))
        }
        None => Some(format!("request {request}: device class {} is not one tessera knows", &*e.device_class_name)),
    }
}

/// Why the claims cannot be allocated, where tessera can say; `None` where it sees room.
pub fn explain(o: &Objects, specs: &[&ClaimSpec], nodes: &BTreeMap<String, Vec<Card>>) -> Option<String> {
    let mut said = Vec::new();
    for spec in specs {
        for r in &spec.devices.requests.items {
            // Every alternative blocked blocks the request; the first one's reason is said.
            let reasons: Vec<Option<String>> =
                r.alternatives().map(|e| alternative(o, spec, &r.name, e, nodes)).collect();
            if !reasons.is_empty() && reasons.iter().all(Option::is_some) {
                said.extend(reasons.into_iter().flatten().next());
            }
        }
    }
    (!said.is_empty()).then(|| said.join("; "))
}

#[cfg(test)]
mod tests {
    use super::readable;

    #[test]
    fn common_cel_forms_are_read_and_the_rest_is_not_guessed() {
        assert!(readable("device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"));
        assert!(readable("device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"));
        assert!(!readable("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"));
        assert!(!readable("device.attributes['gpu.nvidia.com'].profile == '1g.10gb' || true"));
        assert!(!readable("device.attributes['gpu.nvidia.com'].architecture == 'Hopper'"));
    }
}
