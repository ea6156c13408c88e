//! Pending pods explained: a claim not allocated is replayed against the cards the slices
//! publish, and the real blocker said: "wants 8 whole H100 on one node (matchAttribute
//! productName): h100-dyn-01 has 5 (gpu-0 carved into MIG, gpu-1 held, gpu-7 tainted
//! NoExecute); h100-mig-01 publishes no whole GPUs (MIG on)". The scheduler's own words
//! ("cannot allocate all claims") name neither the claim nor the reason. CEL selectors are read
//! in their common forms (cel.rs: equalities on `type`, `productName`, `profile`,
//! `device.driver`, capacity comparisons) and capacity comparisons evaluated on the devices the
//! slices publish; anything else is said as a selector tessera cannot read, never guessed.

use std::collections::BTreeMap;

use super::Objects;
use super::cel::{self, Term};
use super::index::Devices;
use super::objects::{ClaimSpec, Device, Exact};
use super::request::{Kind, class_kind};
use crate::model::Card;

/// The value of the attribute an equality term of `terms` compares, if one does.
fn equal<'e>(terms: &[Term<'e>], attribute: &str) -> Option<&'e str> {
    terms.iter().find_map(|t| match t {
        Term::Equals { attribute: a, value, .. } if *a == attribute => Some(*value),
        _ => None,
    })
}

/// A capacity as it reads: bytes in `Gi` or `Mi` where whole, else the number.
fn amount(v: u64) -> String {
    const MI: u64 = 1 << 20;
    match v {
        0 => "0".into(),
        v if v % (MI << 10) == 0 => format!("{}Gi", v / (MI << 10)),
        v if v % MI == 0 => format!("{}Mi", v / MI),
        v => v.to_string(),
    }
}

/// Why `device` fails the first capacity term it fails: `memory 81559Mi`.
fn short_of(caps: &[&Term], driver: &str, device: Option<&Device>) -> Option<String> {
    let failed = caps.iter().find(|t| !device.is_some_and(|d| t.matches(driver, d)))?;
    let Term::Capacity { name, .. } = failed else { return Some(format!("not {failed}")) };
    match device.and_then(|d| d.capacity.get(name).flatten()) {
        Some(v) => Some(format!("{name} {}", amount(v))),
        None => Some(format!("no {name} capacity")),
    }
}

/// `NVIDIA H100 80GB HBM3` → `H100`.
fn short(product: &str) -> &str {
    product.strip_prefix("NVIDIA ").unwrap_or(product).split_whitespace().next().unwrap_or(product)
}

/// Why one node cannot give `n` whole GPUs of `product`: how many it has and what holds the
/// rest; `None` where it can.
fn whole_on(
    node: &str,
    cards: &[Card],
    product: Option<&str>,
    (devices, caps): (&Devices, &[&Term]),
    n: usize,
) -> Option<String> {
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
        let short_of = d.and_then(|d| short_of(caps, &d.driver, devices.get(&d.pool, &name)));
        if product.is_some_and(|p| c.model != p) {
            why.push(format!("{name} is a {}", short(&c.model)));
        } else if let Some(s) = short_of {
            why.push(format!("{name} has {s}"));
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
    // No capacity asked: no published device is looked at.
    let none = Devices::new(&[]);
    let mut blockers = Vec::new();
    for (node, cards) in nodes {
        match whole_on(node, cards, product, (&none, &[]), n) {
            Some(b) => blockers.push(b),
            None => return None,
        }
    }
    Some(format!("wants {n} whole {what} on one node{constraint}: {}", blockers.join("; ")))
}

/// The blocker of one alternative, or `None` where some node could give it.
fn alternative(
    (o, devices): (&Objects, &Devices),
    spec: &ClaimSpec,
    request: &str,
    e: &Exact,
    nodes: &BTreeMap<String, Vec<Card>>,
) -> Option<String> {
    let mut terms = Vec::new();
    for x in e.selectors.items.iter().filter_map(|s| s.cel.as_ref()).map(|c| c.expression.as_str()) {
        match cel::read(x) {
            Some(t) => terms.extend(t),
            None => return Some(format!("request {request} has a selector tessera cannot read: {x}")),
        }
    }
    let product = equal(&terms, "productName");
    let caps: Vec<&Term> = terms.iter().filter(|t| t.is_capacity()).collect();
    let with = if caps.is_empty() {
        String::new()
    } else {
        format!(" with {}", caps.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))
    };
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
            let what = product.map_or("GPUs".to_string(), |p| short(p).to_string());
            let mut blockers = Vec::new();
            for (node, cards) in nodes {
                match whole_on(node, cards, product, (devices, &caps), n) {
                    Some(b) => blockers.push(b),
                    None => return None,
                }
            }
            Some(format!("wants {n} whole {what}{with} on one node{constraint}: {}", blockers.join("; ")))
        }
        Some(Kind::Mig) => {
            let profile = equal(&terms, "profile");
            // The profiles it can take: the one named, else (a capacity asked) those whose
            // devices the slices publish meet every term.
            let profiles: Vec<&str> = match (profile, caps.is_empty()) {
                (Some(p), true) => vec![p],
                (None, true) => return None,
                (_, false) => {
                    let mut ps: Vec<&str> = devices
                        .pools()
                        .flat_map(|p| p.devices.iter().map(move |d| (p.driver, *d)))
                        .filter(|(driver, d)| {
                            d.attributes.kind.as_deref() == Some("mig") && terms.iter().all(|t| t.matches(driver, d))
                        })
                        .filter_map(|(_, d)| d.attributes.profile.as_deref())
                        .collect();
                    ps.sort_unstable();
                    ps.dedup();
                    ps
                }
            };
            let what = format!("{}{with}", profile.map_or("MIG".to_string(), |p| format!("MIG {p}")));
            if profiles.is_empty() {
                return Some(format!("wants {n}× {what}: no MIG device the slices publish has it"));
            }
            let placeable = nodes.values().flatten().filter(|c| {
                c.dra.as_ref().is_some_and(|d| {
                    d.placeable.as_ref().is_some_and(|p| p.iter().any(|x| profiles.contains(&x.as_str())))
                }) || c.mig.instances.iter().any(|i| profiles.contains(&i.profile.as_str()) && i.workloads.is_empty())
            });
            (placeable.count() < n).then(|| format!("wants {n}× {what}: no card can place it now"))
        }
        None => Some(format!("request {request}: device class {} is not one tessera knows", &*e.device_class_name)),
    }
}

/// Why the claims cannot be allocated, where tessera can say; `None` where it sees room.
pub fn explain(
    o: &Objects,
    devices: &Devices,
    specs: &[&ClaimSpec],
    nodes: &BTreeMap<String, Vec<Card>>,
) -> Option<String> {
    let mut said = Vec::new();
    for spec in specs {
        for r in &spec.devices.requests.items {
            // Every alternative blocked blocks the request; the first one's reason is said.
            let reasons: Vec<Option<String>> =
                r.alternatives().map(|e| alternative((o, devices), spec, &r.name, e, nodes)).collect();
            if !reasons.is_empty() && reasons.iter().all(Option::is_some) {
                said.extend(reasons.into_iter().flatten().next());
            }
        }
    }
    (!said.is_empty()).then(|| said.join("; "))
}

#[cfg(test)]
mod tests {
    use super::amount;

    #[test]
    fn capacities_read_in_their_units() {
        assert_eq!(amount(81559 << 20), "81559Mi");
        assert_eq!(amount(40 << 30), "40Gi");
        assert_eq!(amount(132), "132");
    }
}
