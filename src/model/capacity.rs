//! Free capacity, defined once: what a card, a node or the fleet can give a new workload now,
//! and how many queued workloads a MIG layout would serve. The queue, the console's filters
//! and sorts, and the repartition picker all count with these functions.

use std::collections::{BTreeMap, BTreeSet};

use super::fleet::{Card, Fleet, Node};
use super::mig::Placed;
use super::queue::Resource;
use super::workload::Workload;

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
        let unheld = card.mig.instances.iter().filter(|i| i.workloads.is_empty() && !i.in_use_by_unknown()).count();
        unheld as u32 + card.usable_free_slices().map_or(0, u16::count_ones)
    } else {
        u32::from(card.is_idle())
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
    /// The same counts node by node: a multi-GPU job needs its cards on one node.
    per_node: Vec<(BTreeMap<String, u64>, BTreeMap<String, u64>)>,
}

impl Free {
    pub fn compute(fleet: &Fleet) -> Self {
        let mut f = Self::default();
        // A catalog lookup per card name, not per card: thousands of cards share a few names.
        let mut keys: std::collections::HashMap<&str, String> = std::collections::HashMap::new();
        for node in &fleet.nodes {
            // What the cards say: usable and unheld, by model and profile.
            let (mut whole, mut mig) = (BTreeMap::<String, u64>::new(), BTreeMap::<String, u64>::new());
            let (mut seen_whole, mut seen_mig) = (BTreeSet::<String>::new(), BTreeSet::<String>::new());
            for card in &node.cards {
                if card.mig.enabled {
                    for inst in &card.mig.instances {
                        seen_mig.insert(inst.profile.clone());
                        if usable(node, card) && inst.workloads.is_empty() && !inst.in_use_by_unknown() {
                            *mig.entry(inst.profile.clone()).or_default() += 1;
                        }
                    }
                } else {
                    let key = keys.entry(card.model.as_str()).or_insert_with(|| model_key(&card.model)).clone();
                    if usable(node, card) && card.is_idle() {
                        *whole.entry(key.clone()).or_default() += 1;
                    }
                    seen_whole.insert(key);
                }
            }
            if !node.capacity.is_empty() {
                // A scheduler's count is what a job can get, but never more than the cards it
                // can see allow: a drained or dead card it still counts is not free.
                let (mut sw, mut sm) = (BTreeMap::<String, u64>::new(), BTreeMap::<String, u64>::new());
                for c in node.capacity.iter().filter(|_| node.schedulable) {
                    match &c.resource {
                        Resource::WholeCard { model } => {
                            let key = model.as_deref().map_or_else(|| "unknown".to_string(), model_key);
                            let cap = seen_whole.contains(&key).then(|| whole.get(&key).copied().unwrap_or(0));
                            let free = cap.map_or(c.free(), |cap| c.free().min(cap));
                            *sw.entry(key).or_default() += free;
                        }
                        Resource::MigInstance { profile } => {
                            let cap = seen_mig.contains(profile).then(|| mig.get(profile).copied().unwrap_or(0));
                            *sm.entry(profile.clone()).or_default() += cap.map_or(c.free(), |cap| c.free().min(cap));
                        }
                    }
                }
                whole = sw;
                mig = sm;
            }
            for (k, v) in &whole {
                *f.whole.entry(k.clone()).or_default() += v;
            }
            for (k, v) in &mig {
                *f.mig.entry(k.clone()).or_default() += v;
            }
            if !whole.is_empty() || !mig.is_empty() {
                f.per_node.push((whole, mig));
            }
        }
        f
    }

    /// The most free units of `resource` on any one node.
    pub fn largest_block(&self, resource: &Resource) -> u64 {
        let on = |(whole, mig): &(BTreeMap<String, u64>, BTreeMap<String, u64>)| match resource {
            Resource::WholeCard { model: Some(m) } => whole.get(m).copied().unwrap_or(0),
            Resource::WholeCard { model: None } => whole.values().sum(),
            Resource::MigInstance { profile } => mig.get(profile).copied().unwrap_or(0),
        };
        self.per_node.iter().map(on).max().unwrap_or(0)
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

/// One pending workload's request as the picker matches it: how many units of what.
fn asks(w: &Workload) -> (Resource, u64) {
    let n = u64::from(w.request.gpus.unwrap_or(1).max(1));
    match &w.request.mig_profile {
        Some(p) => (Resource::MigInstance { profile: p.clone() }, n),
        None => (Resource::WholeCard { model: w.request.model.as_deref().map(model_key) }, n),
    }
}

/// Pending workloads that one card, empty and laid out as `layout` (`None`: a whole card of
/// catalog model `model`), would start: each instance serves one workload asking for its
/// profile; a whole card serves one single-GPU workload of its model or of any model. A
/// request for more units than the card has is not served; smaller requests go first.
pub fn card_would_serve(model: &str, layout: Option<&[Placed]>, pending: &[&Workload]) -> u64 {
    let mut asks: Vec<(Resource, u64)> = pending.iter().map(|w| asks(w)).collect();
    asks.sort_by_key(|a| a.1);
    let mut served = 0;
    match layout {
        None => {
            let whole = asks.iter().find(|(r, n)| {
                *n == 1 && matches!(r, Resource::WholeCard { model: m } if m.as_deref().is_none_or(|m| m == model))
            });
            served += u64::from(whole.is_some());
        }
        Some(layout) => {
            let mut left: BTreeMap<&str, u64> = BTreeMap::new();
            for p in layout {
                *left.entry(p.profile.as_str()).or_default() += 1;
            }
            for (r, n) in &asks {
                if let Resource::MigInstance { profile } = r
                    && let Some(l) = left.get_mut(profile.as_str())
                    && *l >= *n
                {
                    *l -= n;
                    served += 1;
                }
            }
        }
    }
    served
}

/// Pending workloads that `profile` instances would serve (the Kubernetes `all-<profile>`
/// configs): those asking for the profile.
pub fn profile_serves(profile: &str, pending: &[&Workload]) -> u64 {
    pending.iter().filter(|w| w.request.mig_profile.as_deref() == Some(profile)).count() as u64
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
    fn a_card_serves_one_workload_per_instance_and_never_a_job_bigger_than_itself() {
        use crate::model::mig::{enumerate, lookup};
        use crate::model::{WorkloadKind, WorkloadState};
        let job = |id: &str, gpus: u32, profile: Option<&str>| {
            let mut w = Workload::new(id, id, WorkloadKind::Training, WorkloadState::Pending);
            w.request.gpus = Some(gpus);
            w.request.mig_profile = profile.map(str::to_string);
            w
        };
        let h200 = lookup("NVIDIA H200").unwrap_or_else(|| panic!("H200 in the catalog"));
        let eight = job("big", 8, None);
        let one = job("one", 1, None);
        let three = job("infer", 1, Some("3g.71gb"));
        assert_eq!(card_would_serve(&h200.name, None, &[&eight]), 0, "8 GPUs never fit one card");
        assert_eq!(card_would_serve(&h200.name, None, &[&eight, &one]), 1);
        let layouts = enumerate(h200);
        let with_3g = layouts.iter().find(|l| l.iter().filter(|p| p.profile == "3g.71gb").count() == 2);
        let with_3g = with_3g.unwrap_or_else(|| panic!("a 3g.71gb x2 layout"));
        assert_eq!(card_would_serve(&h200.name, Some(with_3g), &[&eight, &three]), 1, "one job, one instance");
        let other = layouts.iter().find(|l| l.iter().all(|p| p.profile != "3g.71gb"));
        assert_eq!(card_would_serve(&h200.name, other.map(Vec::as_slice), &[&three]), 0);
    }

    #[test]
    fn a_schedulers_count_never_exceeds_what_the_cards_allow() {
        use crate::model::Capacity;
        let dead = Card {
            index: 0,
            model: "NVIDIA H100 80GB HBM3".into(),
            health: crate::model::Health { last_xid: Some(79), ..Default::default() },
            ..Card::default()
        };
        let idle = Card { index: 1, model: "NVIDIA H100 80GB HBM3".into(), ..Card::default() };
        let node = Node {
            name: "n".into(),
            schedulable: true,
            cards: vec![dead, idle],
            // Slurm still counts both GPUs free: it has not seen the XID.
            capacity: vec![Capacity {
                resource: Resource::WholeCard { model: Some("H100-80GB".into()) },
                total: 2,
                used: 0,
            }],
            ..Node::default()
        };
        let fleet = Fleet { nodes: vec![node], ..Fleet::default() };
        let any = Resource::WholeCard { model: None };
        assert_eq!(Free::compute(&fleet).of(&any), 1, "the dead card is not free, whatever the scheduler counts");
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
