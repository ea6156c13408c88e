//! Free capacity, defined once: what a card, a node or the fleet can give a new workload now,
//! and how many queued workloads a MIG layout would serve. The queue, the console's filters
//! and sorts, and the repartition picker all count with these functions.

use std::collections::{BTreeMap, BTreeSet};

use super::fleet::{Card, Fleet, Node};
use super::mig::Placed;
use super::mig::catalog::model_key;
use super::resource::Resource;
use super::sharing::ShareUnit;
use super::workload::Workload;

/// Whether new work can start on a card at all: its node is schedulable, the card is not
/// drained and it is healthy (not lost, no fatal XID, no uncorrectable ECC error).
pub fn usable(node: &Node, card: &Card) -> bool {
    node.schedulable && !card.draining && card.health.fault().is_none()
}

/// Free capacity on a card: unheld instances plus free slices (MIG), free replicas (a shared
/// card that says how many are in use), or 1 for an idle whole card; 0 for a card that is not
/// usable.
pub fn free_units(node: &Node, card: &Card) -> u32 {
    if !usable(node, card) {
        return 0;
    }
    if card.mig.enabled {
        let unheld = card.mig.instances.iter().filter(|i| i.workloads.is_empty() && !i.in_use_by_unknown()).count();
        unheld as u32 + card.usable_free_slices().map_or(0, u16::count_ones)
    } else if let Some(free) = card.free_replicas() {
        free
    } else if card.sharing_mode().is_some_and(super::sharing::SharingMode::unisolated)
        && card.sharing.replicas.is_some()
    {
        // Replicas whose use on this card nobody reports (Kubernetes on a multi-card node):
        // not counted free here; the scheduler's count is the node's.
        0
    } else {
        u32::from(card.is_idle())
    }
}

/// On a usable DynamicMIG card, how many instances of each profile its counters can still
/// place, one profile at a time: the profile's catalog placements that fit the free slices,
/// taken left to right (optimal for one size of aligned placement), at most its count a card. The DRA driver creates
/// them per claim, so free slices are free capacity here, unlike on a static MIG card.
fn dynamic_free(node: &Node, card: &Card, placeable: &[String]) -> Vec<(String, u64)> {
    let (Some(model), true) = (card.gpu_model(), usable(node, card)) else { return Vec::new() };
    let free = if card.mig.enabled {
        card.free_slice_mask()
    } else {
        Some(crate::model::mig::catalog::slice_mask(0, model.memory_slices))
    };
    let Some(free) = free else { return Vec::new() };
    placeable
        .iter()
        .filter_map(|name| {
            let p = model.profile(name)?;
            let mut placements = p.placements.clone();
            placements.sort_by_key(|x| x.start);
            let (mut taken, mut count) = (0u16, 0u64);
            for x in placements {
                let m = x.mask();
                // At most the profile's own count on a card (one 1g.10gb+me).
                if count < u64::from(p.max_count.max(1)) && m & free == m && m & taken == 0 {
                    taken |= m;
                    count += 1;
                }
            }
            (count > 0).then(|| (name.clone(), count))
        })
        .collect()
}

/// Free capacity on a card in GiB of its memory: the share of it that is free (the memory
/// slices of unheld instances and free slices, free replicas, or an idle whole card) times
/// its memory. What the free sort ranks by: an idle H200 above an A100 with seven free 1g
/// instances (by unit count it was the other way round). 0 for a card that is not usable.
pub fn free_gib(node: &Node, card: &Card) -> f64 {
    if free_units(node, card) == 0 {
        return 0.0;
    }
    // Without a memory total (Slurm, some Kubernetes) the units rank, as a GiB each.
    let Some(total) = card.memory_total_mib.map(|m| m as f64 / 1024.0) else {
        return f64::from(free_units(node, card));
    };
    let share = if card.mig.enabled {
        let slices = card.gpu_model().map_or(0, |m| m.memory_slices);
        let unheld: u32 = card
            .mig
            .instances
            .iter()
            .filter(|i| i.workloads.is_empty() && !i.in_use_by_unknown())
            .map(|i| u32::from(i.size))
            .sum();
        let free = unheld + card.usable_free_slices().map_or(0, u16::count_ones);
        if slices == 0 {
            return f64::from(free_units(node, card));
        }
        f64::from(free) / f64::from(slices)
    } else {
        match (card.free_replicas(), card.sharing.replicas) {
            (Some(free), Some(all)) if all > 0 => f64::from(free) / f64::from(all),
            _ => 1.0,
        }
    };
    share.min(1.0) * total
}

/// Free units per resource across the fleet: idle whole cards per model, idle MIG instances
/// per profile, free replicas of shared cards per unit and model. Where a scheduler counts a
/// node's resources, its count is what a pending job can get.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Free {
    pub whole: BTreeMap<String, u64>,
    pub mig: BTreeMap<String, u64>,
    pub shared: BTreeMap<(ShareUnit, String), u64>,
    /// Free replicas a scheduler hands out for whole-card requests too (the device plugin
    /// without `renameByDefault` advertises them as `nvidia.com/gpu`), per model.
    pub gpu_replicas: BTreeMap<String, u64>,
    /// The same counts node by node: a multi-GPU job needs its cards on one node.
    per_node: Vec<NodeFree>,
}

/// One node's free units; `shared_card` is the most free units of a share on one card,
/// where the cards say (a sharing request must fit on one card in Slurm).
#[derive(Debug, Clone, Default, PartialEq)]
struct NodeFree {
    whole: BTreeMap<String, u64>,
    mig: BTreeMap<String, u64>,
    shared: BTreeMap<(ShareUnit, String), u64>,
    shared_card: BTreeMap<(ShareUnit, String), u64>,
    gpu_replicas: BTreeMap<String, u64>,
}

impl NodeFree {
    fn is_empty(&self) -> bool {
        self.whole.is_empty() && self.mig.is_empty() && self.shared.is_empty() && self.gpu_replicas.is_empty()
    }
}

fn model_of(model: Option<&String>) -> String {
    model.map_or_else(|| "unknown".to_string(), |m| model_key(m))
}

/// Sum the entries of `map` whose model matches `model` (`None`: any model).
fn of_model<K: Ord>(map: &BTreeMap<K, u64>, model: Option<&String>, key: impl Fn(&K) -> &str) -> u64 {
    map.iter().filter(|(k, _)| model.is_none_or(|m| key(k) == m)).map(|(_, v)| v).sum()
}

impl Free {
    pub fn compute(fleet: &Fleet) -> Self {
        let mut f = Self::default();
        // A catalog lookup per card name, not per card: thousands of cards share a few names.
        let mut keys: std::collections::HashMap<&str, String> = std::collections::HashMap::new();
        for node in &fleet.nodes {
            let mut said = CardsSay::default();
            for card in &node.cards {
                said.add(node, card, &mut keys);
            }
            let n = if node.capacity.is_empty() { said.free } else { said.scheduler_free(node) };
            merge(&mut f.whole, &n.whole);
            merge(&mut f.mig, &n.mig);
            merge(&mut f.shared, &n.shared);
            merge(&mut f.gpu_replicas, &n.gpu_replicas);
            if !n.is_empty() {
                f.per_node.push(n);
            }
        }
        f
    }

    /// The most free units of `resource` on any one node (for a share, on one card where the
    /// cards say: Slurm fits a sharing request on one card).
    pub fn largest_block(&self, resource: &Resource) -> u64 {
        let on = |n: &NodeFree| match resource {
            Resource::WholeCard { model } => {
                of_model(&n.whole, model.as_ref(), String::as_str)
                    + of_model(&n.gpu_replicas, model.as_ref(), String::as_str)
            }
            Resource::MigInstance { profile } => n.mig.get(profile).copied().unwrap_or(0),
            Resource::Shared { unit, model } => {
                let hit =
                    |((u, k), _): &(&(ShareUnit, String), &u64)| u == unit && model.as_ref().is_none_or(|m| k == m);
                let per_card = n.shared_card.iter().filter(hit).map(|(_, v)| *v).max();
                per_card.unwrap_or_else(|| n.shared.iter().filter(hit).map(|(_, v)| *v).sum())
            }
        };
        self.per_node.iter().map(on).max().unwrap_or(0)
    }

    /// Free units of one resource (`model: None`: any model). Whole-card requests count the
    /// replicas a scheduler hands out under the same name (`gpu_replicas`).
    pub fn of(&self, resource: &Resource) -> u64 {
        match resource {
            Resource::WholeCard { model } => {
                of_model(&self.whole, model.as_ref(), String::as_str)
                    + of_model(&self.gpu_replicas, model.as_ref(), String::as_str)
            }
            Resource::MigInstance { profile } => self.mig.get(profile).copied().unwrap_or(0),
            Resource::Shared { unit, model } => self
                .shared
                .iter()
                .filter(|((u, k), _)| u == unit && model.as_ref().is_none_or(|m| k == m))
                .map(|(_, v)| v)
                .sum(),
        }
    }

    /// Of `of(resource)`, the units that are replicas of shared cards (the queue says so).
    pub fn replicas_of(&self, resource: &Resource) -> u64 {
        match resource {
            Resource::WholeCard { model } => of_model(&self.gpu_replicas, model.as_ref(), String::as_str),
            Resource::Shared { .. } => self.of(resource),
            Resource::MigInstance { .. } => 0,
        }
    }
}

/// What a node's cards say, card by card: usable and unheld, by model and profile; free
/// replicas; and which models, profiles and shares the cards show at all (a scheduler's
/// count is capped by the cards only where they show the resource).
#[derive(Default)]
struct CardsSay {
    free: NodeFree,
    seen_whole: BTreeSet<String>,
    seen_mig: BTreeSet<String>,
    /// Shares the cards show, and whether every such card says how many are in use.
    seen_shared: BTreeMap<(ShareUnit, String), bool>,
    /// The most a usable card of each share could give: replicas on usable cards.
    shared_most: BTreeMap<(ShareUnit, String), u64>,
}

impl CardsSay {
    /// Count one card of `node`; `keys` keeps the model key of each card name seen.
    fn add<'f>(&mut self, node: &Node, card: &'f Card, keys: &mut std::collections::HashMap<&'f str, String>) {
        // DynamicMIG: what the counters can still place is free MIG capacity (it was
        // counted as none); an idle card is free whole as well, below.
        if let Some(placeable) = card.dra.as_deref().filter(|d| d.dynamic).and_then(|d| d.placeable.as_ref()) {
            for (profile, count) in dynamic_free(node, card, placeable) {
                self.seen_mig.insert(profile.clone());
                *self.free.mig.entry(profile).or_default() += count;
            }
            if card.mig.enabled {
                return;
            }
        }
        if card.mig.enabled {
            for inst in &card.mig.instances {
                self.seen_mig.insert(inst.profile.clone());
                if usable(node, card) && inst.workloads.is_empty() && !inst.in_use_by_unknown() {
                    *self.free.mig.entry(inst.profile.clone()).or_default() += 1;
                }
            }
            return;
        }
        let key = keys.entry(card.model.as_str()).or_insert_with(|| model_key(&card.model)).clone();
        // A shared card serves replicas; only a scheduler that also hands it out whole
        // (Slurm: an idle shard GPU is a free gpu) counts it as a whole card.
        // A Slurm shard GPU whose shares in use are unknown may be in use: not free whole.
        let shared =
            card.sharing.replicas.is_some() && (node.capacity.is_empty() || card.sharing.replicas_used.is_none());
        if usable(node, card) && card.is_idle() && !shared {
            *self.free.whole.entry(key.clone()).or_default() += 1;
        }
        self.seen_whole.insert(key.clone());
        if let (Some(unit), Some(_)) = (card.sharing.unit, card.sharing.replicas) {
            self.add_replicas(node, card, (unit, key));
        }
    }

    /// Count the replicas of a shared card of share `k`.
    fn add_replicas(&mut self, node: &Node, card: &Card, k: (ShareUnit, String)) {
        let free = card.free_replicas();
        let known = self.seen_shared.entry(k.clone()).or_insert(true);
        *known &= free.is_some();
        if usable(node, card) {
            *self.shared_most.entry(k.clone()).or_default() += u64::from(card.sharing.replicas.unwrap_or(0));
        }
        if let Some(free) = free.filter(|_| usable(node, card)) {
            *self.free.shared.entry(k.clone()).or_default() += u64::from(free);
            let best = self.free.shared_card.entry(k).or_default();
            *best = (*best).max(u64::from(free));
        }
    }

    /// The free units of a node whose scheduler counts its resources: the scheduler's count
    /// is what a job can get, but never more than the cards it can see allow (a drained or
    /// dead card it still counts is not free).
    fn scheduler_free(&self, node: &Node) -> NodeFree {
        let n = &self.free;
        let mut s = NodeFree::default();
        for c in node.capacity.iter().filter(|_| node.schedulable) {
            match &c.resource {
                Resource::WholeCard { model } => {
                    let key = model_of(model.as_ref());
                    let cap = self.seen_whole.contains(&key).then(|| n.whole.get(&key).copied().unwrap_or(0));
                    let free = cap.map_or(c.free(), |cap| c.free().min(cap));
                    *s.whole.entry(key).or_default() += free;
                }
                Resource::MigInstance { profile } => {
                    let cap = self.seen_mig.contains(profile).then(|| n.mig.get(profile).copied().unwrap_or(0));
                    *s.mig.entry(profile.clone()).or_default() += cap.map_or(c.free(), |cap| c.free().min(cap));
                }
                Resource::Shared { unit, model } => {
                    let k = (*unit, model_of(model.as_ref()));
                    // Capped by what the cards have free where every shared card says
                    // what it has in use, else by the replicas of the usable cards (a
                    // dead card's replicas are never free).
                    let cap = match self.seen_shared.get(&k) {
                        Some(true) => Some(n.shared.get(&k).copied().unwrap_or(0)),
                        Some(false) => Some(self.shared_most.get(&k).copied().unwrap_or(0)),
                        None => None,
                    };
                    let free = cap.map_or(c.free(), |cap| c.free().min(cap));
                    if c.whole_requests {
                        // Handed out under the GPU resource's name: whole-card requests
                        // get them, requests for the renamed shared resource do not.
                        *s.gpu_replicas.entry(k.1).or_default() += free;
                        continue;
                    }
                    *s.shared.entry(k.clone()).or_default() += free;
                    if let Some(&best) = n.shared_card.get(&k) {
                        s.shared_card.insert(k.clone(), best.min(free));
                    }
                }
            }
        }
        s
    }
}

fn merge<K: Ord + Clone>(into: &mut BTreeMap<K, u64>, from: &BTreeMap<K, u64>) {
    for (k, v) in from {
        *into.entry(k.clone()).or_default() += v;
    }
}

/// Pending workloads that one card, empty and laid out as `layout` (`None`: a whole card of
/// catalog model `model`), would start: each instance serves one workload asking for its
/// profile; a whole card serves one single-GPU workload of its model or of any model. A
/// request for more units than the card has is not served; smaller requests go first.
pub fn card_would_serve(model: &str, layout: Option<&[Placed]>, pending: &[&Workload]) -> u64 {
    let mut asks: Vec<(Resource, u64)> = pending.iter().map(|w| w.request.asks()).collect();
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
        let node = Node::new("n");
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
            cards: vec![dead, idle],
            // Slurm still counts both GPUs free: it has not seen the XID.
            capacity: vec![Capacity {
                resource: Resource::WholeCard { model: Some("H100-80GB".into()) },
                total: 2,
                used: 0,
                whole_requests: false,
            }],
            ..Node::new("n")
        };
        let fleet = Fleet { nodes: vec![node], ..Fleet::default() };
        let any = Resource::WholeCard { model: None };
        assert_eq!(Free::compute(&fleet).of(&any), 1, "the dead card is not free, whatever the scheduler counts");
    }

    #[test]
    fn unusable_cards_have_nothing_free() {
        let node = Node::new("n");
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

    #[test]
    fn replicas_in_use_unknown_are_never_free_and_dead_cards_give_none() {
        use crate::model::{Capacity, ShareUnit, Sharing, SharingMode};
        let shared = |index, lost| {
            let mut c = Card { index, model: "NVIDIA L4".into(), ..Card::default() };
            c.sharing = Sharing {
                mode: Some(SharingMode::TimeSliced),
                replicas: Some(4),
                unit: Some(ShareUnit::Replica),
                ..Sharing::default()
            };
            c.health.lost = lost;
            c
        };
        let resource = Resource::Shared { unit: ShareUnit::Replica, model: Some("L4".into()) };
        let node = Node {
            cards: vec![shared(0, false), shared(1, true)],
            // Kubernetes: 8 replicas, 1 in use, which card unknown; one card is dead.
            capacity: vec![Capacity { resource: resource.clone(), total: 8, used: 1, whole_requests: false }],
            ..Node::new("n")
        };
        assert_eq!(free_units(&node, &node.cards[0]), 0, "use on this card unknown: not counted free here");
        let fleet = Fleet { nodes: vec![node], ..Fleet::default() };
        assert_eq!(Free::compute(&fleet).of(&resource), 4, "7 by the scheduler, at most the live card's 4");
    }
}
