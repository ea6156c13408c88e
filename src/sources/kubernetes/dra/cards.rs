//! A pool's devices → its cards. A card is known by the `uuid` of its `gpu` device or, where
//! only MIG devices are published (static MIG), by their `parentUUID`; never by device names
//! alone. Its index is the minor number the driver puts in the device names (`gpu-5`,
//! `gpu-5-mig-…`: card 5). DynamicMIG cards (devices that consume a counter set) are laid out
//! from the counters (counters.rs); static MIG cards from their instances' `memorySliceN`
//! capacities.

use std::collections::HashMap;

use super::Picture;
use super::counters::{self, Held};
use super::index::{Allocations, Pool};
use super::objects::Device;
use super::taints::{self, Rules};
use crate::model::dra::{Allocation, DraCard, MAX_DEVICE_NAMES};
use crate::model::{Card, MigState, Placements, Vendor};

/// The minor number in a device name the driver wrote: `gpu-5` or `gpu-5-mig-…`.
fn minor(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("gpu-")?;
    let digits = rest.split('-').next()?;
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then(|| digits.parse().ok()).flatten()
}

/// The devices of one card while it is gathered.
#[derive(Default)]
struct Gathered<'a> {
    uuid: Option<&'a str>,
    gpu: Option<&'a Device>,
    migs: Vec<&'a Device>,
}

impl Gathered<'_> {
    fn devices(&self) -> impl Iterator<Item = &Device> {
        self.gpu.into_iter().chain(self.migs.iter().copied())
    }
}

/// The pool's node (where it has one) and its cards.
pub fn cards(pool: &Pool, held: &Allocations, rules: &Rules, pic: &mut Picture) -> (Option<String>, Vec<Card>) {
    let mut gathered: Vec<Gathered> = Vec::new();
    let mut by_uuid: HashMap<&str, usize> = HashMap::new();
    let mut orphans = 0usize;
    for d in pool.devices.iter().filter(|d| d.attributes.kind.as_deref() == Some("gpu")) {
        let uuid = d.attributes.uuid.as_deref();
        if let Some(u) = uuid {
            if by_uuid.contains_key(u) {
                pic.note(format!("pool {}: two gpu devices share UUID {u}; {} left out", pool.name, &*d.name));
                continue;
            }
            by_uuid.insert(u, gathered.len());
        }
        gathered.push(Gathered { uuid, gpu: Some(d), migs: Vec::new() });
    }
    for d in pool.devices.iter().filter(|d| d.attributes.kind.as_deref() == Some("mig")) {
        let Some(parent) = d.attributes.parent_uuid.as_deref() else {
            orphans += 1;
            continue;
        };
        let i = *by_uuid.entry(parent).or_insert_with(|| {
            gathered.push(Gathered { uuid: Some(parent), ..Gathered::default() });
            gathered.len() - 1
        });
        gathered[i].migs.push(d);
    }
    if orphans > 0 {
        pic.note(format!("pool {}: {orphans} MIG devices name no parent GPU (no parentUUID): not shown", pool.name));
    }
    if pool.node.is_none() && !gathered.is_empty() {
        pic.note(format!("pool {}: published for no single node (nodeName unset): its cards are not shown", pool.name));
        return (None, Vec::new());
    }
    let monitored = taints::monitored(pool.devices.iter().copied());
    let mut cards: Vec<Card> = gathered.iter().map(|g| card(pool, g, held, rules, monitored)).collect();
    number(&mut cards, &gathered);
    for p in &pool.problems {
        pic.note(format!("DRA {p}"));
    }
    (pool.node.map(str::to_string), cards)
}

/// Indices from the names' minor numbers; a card without one, or one a card before it took,
/// gets the next free index and says so.
fn number(cards: &mut [Card], gathered: &[Gathered]) {
    let mut taken = std::collections::BTreeSet::new();
    let mut lost = Vec::new();
    for (i, g) in gathered.iter().enumerate() {
        let minors: Vec<Option<u32>> = g.devices().map(|d| minor(&d.name)).collect();
        let first = minors.first().copied().flatten();
        match first.filter(|m| minors.iter().all(|x| *x == Some(*m)) && taken.insert(*m)) {
            Some(m) => cards[i].index = m,
            None => lost.push(i),
        }
    }
    for i in lost {
        let next = (0..).find(|n| !taken.contains(n)).unwrap_or(u32::MAX);
        taken.insert(next);
        cards[i].index = next;
        if let Some(d) = cards[i].dra.as_mut() {
            d.problem(format!("its device names carry no minor number of its own: shown as card {next}"));
        }
    }
}

fn card(pool: &Pool, g: &Gathered, held: &Allocations, rules: &Rules, monitored: bool) -> Card {
    let any = g.devices().next();
    let attr = |f: fn(&Device) -> Option<&str>| g.devices().find_map(f).map(str::to_string);
    let dynamic = g.devices().any(|d| !d.consumes_counters.items.is_empty());
    let mut card = Card {
        uuid: g.uuid.map(str::to_string),
        model: attr(|d| d.attributes.product.as_deref()).unwrap_or_default(),
        vendor: Some(Vendor::Nvidia),
        pci_bus_id: attr(|d| d.attributes.pci_bus_id.as_deref()),
        memory_total_mib: g.gpu.and_then(Device::memory_mib),
        allocation: Some(Allocation::Dra),
        ..Card::default()
    };
    let mut dra = DraCard {
        driver: pool.driver.to_string(),
        pool: pool.name.to_string(),
        device: g.gpu.map(|d| d.name.to_string()),
        devices: u32::try_from(g.devices().count()).unwrap_or(u32::MAX),
        device_names: device_names(g),
        dynamic,
        ..DraCard::default()
    };
    if g.uuid.is_none() {
        dra.problem("its gpu device has no uuid attribute: matched to other sources by index only");
    }
    for p in &pool.problems {
        dra.problem(p.clone());
    }
    let all_taints: Vec<_> = g.devices().flat_map(|d| taints::of_device(rules, pool.driver, pool.name, d)).collect();
    let blocked = |d: &Device| all_taints.iter().any(|t| t.device == *d.name && t.blocks());
    let holders: Vec<Held> = g
        .devices()
        .map(|d| Held { device: d, holders: held.holders(pool.name, &d.name), blocked: blocked(d) })
        .collect();
    if dynamic {
        let set_name =
            any.and_then(|d| d.consumes_counters.items.first()).map(|c| c.counter_set.to_string()).unwrap_or_default();
        let layout = counters::layout(&set_name, pool.sets.get(set_name.as_str()).copied(), &holders);
        for p in layout.problems {
            dra.problem(p);
        }
        dra.counter_set = Some(set_name);
        dra.placeable = layout.placeable;
        card.workloads = layout.whole;
        if !layout.instances.is_empty() || !layout.placed {
            card.mig = MigState {
                enabled: true,
                instances: layout.instances,
                placements: if layout.placed && dra.placeable.is_some() {
                    Placements::Known
                } else {
                    Placements::Unknown
                },
                ..MigState::default()
            };
        }
    } else if g.migs.is_empty() {
        card.workloads = holders.iter().flat_map(|h| h.holders.iter().cloned()).collect();
    } else {
        card.mig = static_mig(&holders, &mut dra);
    }
    card.dra = Some(Box::new(dra));
    taints::apply(&mut card, all_taints, holders.len(), g.gpu.map(|d| &*d.name), monitored);
    card
}

/// The card's device names, whole GPU first, then its MIG devices by name; at most
/// `MAX_DEVICE_NAMES` (the count says when there were more).
fn device_names(g: &Gathered) -> Vec<String> {
    let mut migs: Vec<&str> = g.migs.iter().map(|d| &*d.name).collect();
    migs.sort_unstable();
    let names = g.gpu.map(|d| &*d.name).into_iter().chain(migs);
    names.take(MAX_DEVICE_NAMES).map(str::to_string).collect()
}

/// Static MIG: the instances the driver publishes, each where its `memorySliceN` capacities
/// put it; one without them is placed by tessera's rule (the store infers it).
fn static_mig(holders: &[Held], dra: &mut DraCard) -> MigState {
    let mut mig = MigState { enabled: true, ..MigState::default() };
    for h in holders.iter().filter(|h| h.device.attributes.kind.as_deref() == Some("mig")) {
        match counters::instance(h.device, h.device.slice_capacities(), h.holders) {
            Some(i) => mig.instances.push(i),
            None => {
                dra.problem(format!(
                    "{} publishes no contiguous memorySlice capacities: placed by inference",
                    &*h.device.name
                ));
                let mut i = counters::instance(h.device, 1, h.holders).unwrap_or_default();
                (i.start, i.size) = (0, 0);
                mig.instances.push(i);
                mig.placements = Placements::Inferred;
            }
        }
    }
    mig.instances.sort_by_key(|i| i.start);
    for (n, i) in mig.instances.iter_mut().enumerate() {
        i.gi_id = u32::try_from(n).unwrap_or(u32::MAX).saturating_add(1);
    }
    mig
}

#[cfg(test)]
mod tests {
    use super::minor;

    #[test]
    fn the_minor_number_is_the_one_the_driver_wrote() {
        assert_eq!(minor("gpu-5"), Some(5));
        assert_eq!(minor("gpu-12-mig-1g10gb-19-0"), Some(12));
        assert_eq!(minor("gpu-"), None);
        assert_eq!(minor("gpux-1"), None);
        assert_eq!(minor("vfio-0"), None);
    }
}
