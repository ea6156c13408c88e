//! Free capacity, defined once: what a card, a node or the fleet can give a new workload now,
//! and how many queued workloads a MIG layout would serve. The queue, the console's filters
//! and sorts, and the repartition picker all count with these functions.

use std::collections::BTreeMap;

use super::fleet::{Card, Fleet, Node};
use super::mig::Placed;
use super::queue::{QueueSummary, Resource};

/// Whether new work can start on a card at all: its node is schedulable, the card is not
/// drained and it is healthy (not lost, no fatal XID, no uncorrectable ECC error).
pub fn usable(node: &Node, card: &Card) -> bool {
    node.schedulable && !card.draining && card.health.fault().is_none()
}

/// Free capacity on a card: unheld instances plus free slices (MIG), or 1 for an idle whole
/// card; 0 for a card that is not usable.
pub fn free_units(node: &Node, card: &Card) -> u32 {
    if !usable(node, card) {
        return 0;
    }
    if card.mig.enabled {
        let unheld = card.mig.instances.iter().filter(|i| i.workloads.is_empty()).count() as u32;
        unheld + card.usable_free_slices().map_or(0, u16::count_ones)
    } else {
        u32::from(card.workloads.is_empty())
    }
}

/// A card's catalog model name, or the reported name when tessera does not know it.
pub fn model_key(model: &str) -> String {
    super::mig::catalog::lookup(model).map_or_else(|| model.to_string(), |m| m.name.clone())
}

/// Free units per resource across the fleet: idle whole cards per model, idle MIG instances
/// per profile. Where a scheduler counts a node's resources, its count is what a pending job
/// can get.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Free {
    pub whole: BTreeMap<String, u64>,
    pub mig: BTreeMap<String, u64>,
}

impl Free {
    pub fn compute(fleet: &Fleet) -> Self {
        let mut f = Self::default();
        for node in fleet.nodes.iter().filter(|n| n.schedulable && !n.capacity.is_empty()) {
            for c in &node.capacity {
                match &c.resource {
                    Resource::WholeCard { model } => {
                        let key = model.as_deref().map_or_else(|| "unknown".to_string(), model_key);
                        *f.whole.entry(key).or_default() += c.free();
                    }
                    Resource::MigInstance { profile } => *f.mig.entry(profile.clone()).or_default() += c.free(),
                }
            }
        }
        for (node, card) in fleet.cards() {
            if !usable(node, card) || !node.capacity.is_empty() {
                continue;
            }
            if card.mig.enabled {
                for inst in card.mig.instances.iter().filter(|i| i.workloads.is_empty()) {
                    *f.mig.entry(inst.profile.clone()).or_default() += 1;
                }
            } else if card.workloads.is_empty() {
                *f.whole.entry(model_key(&card.model)).or_default() += 1;
            }
        }
        f
    }

    /// Free units of one resource (`WholeCard { model: None }`: any model).
    pub fn of(&self, resource: &Resource) -> u64 {
        match resource {
            Resource::WholeCard { model: Some(m) } => self.whole.get(m).copied().unwrap_or(0),
            Resource::WholeCard { model: None } => self.whole.values().sum(),
            Resource::MigInstance { profile } => self.mig.get(profile).copied().unwrap_or(0),
        }
    }
}

/// Units the queue wants of one resource.
fn wanted(queue: &QueueSummary, res: &Resource) -> u64 {
    queue.demand.iter().filter(|d| d.resource == *res).map(|d| d.wanted).sum()
}

/// Queued workloads a whole card of `model` (a catalog name) would serve.
pub fn whole_card_serves(model: &str, queue: &QueueSummary) -> u64 {
    (wanted(queue, &Resource::WholeCard { model: Some(model.to_string()) })
        + wanted(queue, &Resource::WholeCard { model: None }))
    .min(1)
}

/// Queued workloads a MIG layout would give an instance to.
pub fn layout_serves(layout: &[Placed], queue: &QueueSummary) -> u64 {
    let mut fits = 0;
    let mut seen: Vec<&str> = Vec::new();
    for p in layout {
        if seen.contains(&p.profile.as_str()) {
            continue;
        }
        seen.push(&p.profile);
        let count = layout.iter().filter(|x| x.profile == p.profile).count() as u64;
        fits += count.min(wanted(queue, &Resource::MigInstance { profile: p.profile.clone() }));
    }
    fits
}

/// Queued workloads an instance of `profile` would serve.
pub fn profile_serves(profile: &str, queue: &QueueSummary) -> u64 {
    wanted(queue, &Resource::MigInstance { profile: profile.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::MigInstance;

    #[test]
    fn free_units_of_a_mig_card() {
        let node = Node { name: "n".into(), schedulable: true, ..Node::default() };
        let mut card = Card { model: "NVIDIA H100 80GB HBM3".into(), ..Card::default() };
        assert_eq!(free_units(&node, &card), 1, "an idle whole card");
        card.mig.enabled = true;
        card.mig.instances.push(MigInstance { profile: "3g.40gb".into(), start: 0, size: 4, ..MigInstance::default() });
        assert_eq!(free_units(&node, &card), 5, "one unheld instance and four free slices");
    }

    #[test]
    fn unusable_cards_have_nothing_free() {
        let node = Node { name: "n".into(), schedulable: true, ..Node::default() };
        let idle = Card { model: "NVIDIA H100 80GB HBM3".into(), ..Card::default() };
        let mut dead = idle.clone();
        dead.health.last_xid = Some(79);
        assert_eq!(free_units(&node, &dead), 0, "XID 79");
        let mut drained = idle.clone();
        drained.draining = true;
        assert_eq!(free_units(&node, &drained), 0, "drained");
        let cordoned = Node { schedulable: false, ..node.clone() };
        assert_eq!(free_units(&cordoned, &idle), 0, "node not schedulable");
        let mut ecc = idle.clone();
        ecc.health.ecc_volatile_uncorrected = Some(2);
        assert_eq!(free_units(&node, &ecc), 0, "uncorrectable ECC");
        let mut old_xid = idle;
        old_xid.health.last_xid = Some(13);
        assert_eq!(free_units(&node, &old_xid), 1, "a non-fatal XID (13: graphics engine exception) leaves it usable");
    }
}
