//! Slurm nodes (`sinfo --json`, slurmrestd `/nodes`) to fleet nodes: scheduler state and drain
//! reason, GPU GRES as schedulable capacity, and whole-GPU GRES devices as cards (their GRES
//! index is the device order on the node). MIG GRES devices are instances whose parent card
//! Slurm does not name: they count as capacity only. Nodes are mapped one at a time as the
//! document is read (`stream.rs`), at most `MAX_NODES` of them and `MAX_CARDS` cards.

use std::collections::HashMap;

use serde_json::Value;

use super::gres;
use super::json::{states, text};
use crate::model::{Capacity, Card, Node, Resource, ShareUnit, Sharing, SharingMode};

/// Node states (base or flag) under which Slurm starts nothing new there.
const UNSCHEDULABLE: &[&str] =
    &["DOWN", "DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING", "FUTURE", "NOT_RESPONDING", "POWERED_DOWN", "UNKNOWN"];

/// The most nodes read from one answer: the largest supported fleet (4,096 nodes of 16 cards)
/// has 65,536 cards; no more nodes than that.
pub const MAX_NODES: usize = crate::sources::MAX_CARDS;
/// The most cards read from one answer.
pub const MAX_CARDS: usize = crate::sources::MAX_CARDS;
/// The most GRES entries a node's `gres` or `gres_used` may have (a real node has a few).
pub const MAX_GRES: usize = 256;

/// What `add` found.
#[derive(Debug, Default)]
pub struct Nodes {
    pub nodes: Vec<Node>,
    /// Node objects without a name, or past a bound (`MAX_GRES`, `stream.rs`'s).
    pub unreadable: usize,
    /// Per node, GRES device index -> card index (`gres_indexes`).
    pub indexes: HashMap<String, HashMap<u32, u32>>,
    /// Nodes past `MAX_NODES`, and cards past `MAX_CARDS`: counted, not read.
    pub cut_nodes: usize,
    pub cut_cards: usize,
    cards: usize,
}

/// Map every node; nodes without GPU GRES are kept (they may run CPU work) but have no cards.
/// Returns the nodes and how many node objects were unreadable.
pub fn map(doc: &Value) -> (Vec<Node>, usize) {
    let out = all(doc);
    (out.nodes, out.unreadable)
}

/// Per node, GRES device index -> card index.
pub fn card_indexes(doc: &Value) -> HashMap<String, HashMap<u32, u32>> {
    all(doc).indexes
}

fn all(doc: &Value) -> Nodes {
    let mut out = Nodes::default();
    for n in doc.get("nodes").and_then(Value::as_array).into_iter().flatten() {
        add(&mut out, n);
    }
    out
}

/// Map one node into `out` (the streamed reader's step, `stream.rs`).
pub fn add(out: &mut Nodes, n: &Value) {
    let Some(name) = text(n.get("name")).or_else(|| text(n.get("hostname"))) else {
        out.unreadable += 1;
        return;
    };
    // sinfo can list a node once per partition: keep the first.
    if out.indexes.contains_key(name) {
        return;
    }
    if out.nodes.len() >= MAX_NODES {
        out.cut_nodes += 1;
        return;
    }
    let total = gres::parse(text(n.get("gres")).unwrap_or_default());
    let used = gres::parse(text(n.get("gres_used")).unwrap_or_default());
    if total.len() > MAX_GRES || used.len() > MAX_GRES {
        out.unreadable += 1;
        return;
    }
    let (x, cut) = node(name, n, &total, &used, MAX_CARDS.saturating_sub(out.cards));
    out.cards += x.cards.len();
    out.cut_cards += cut;
    out.indexes.insert(name.to_string(), gres_indexes(&total));
    out.nodes.push(x);
}

/// GRES device index -> card index. Slurm numbers every GPU GRES device, MIG instances
/// included; cards are the whole-GPU devices in that order, numbered from 0 as the driver
/// numbers the physical cards (MIG devices sit on cards Slurm does not name).
fn gres_indexes(total: &[gres::Gres]) -> HashMap<u32, u32> {
    let mut map = HashMap::new();
    let (mut gres_index, mut card) = (0u32, 0u32);
    for g in total.iter().filter(|g| g.name == "gpu") {
        let count = u32::try_from(g.count).unwrap_or(0).min(64);
        for _ in 0..count {
            if g.mig_profile().is_none() {
                map.insert(gres_index, card);
                card += 1;
            }
            gres_index += 1;
        }
    }
    map
}

/// A node with at most `room` cards; the cards past it are counted.
fn node(name: &str, n: &Value, total: &[gres::Gres], used: &[gres::Gres], room: usize) -> (Node, usize) {
    let name = name.to_string();
    let st = states(n.get("state"), n.get("state_flags"));
    let blocked: Vec<&str> = st.iter().map(String::as_str).filter(|s| UNSCHEDULABLE.contains(s)).collect();
    let schedulable = blocked.is_empty();
    let why = text(n.get("reason"));
    let reason = (!schedulable).then(|| {
        let what = blocked.iter().map(|s| s.to_ascii_lowercase()).collect::<Vec<_>>().join("+");
        match why {
            Some(r) => format!("{what}: {r}"),
            None => what,
        }
    });
    let draining = st.iter().any(|s| s.starts_with("DRAIN"));

    let mut cards = Vec::new();
    let mut cut = 0;
    let mut capacity: Vec<Capacity> = Vec::new();
    let mut next_index = 0u32;
    for g in total.iter().filter(|g| g.name == "gpu") {
        let in_use: u64 =
            used.iter().filter(|u| u.name == "gpu" && u.kind == g.kind).map(|u| u.count).sum::<u64>().min(g.count);
        let resource = match g.mig_profile() {
            Some(profile) => Resource::MigInstance { profile },
            None => Resource::WholeCard { model: g.kind.clone() },
        };
        match capacity.iter_mut().find(|c| c.resource == resource) {
            Some(c) => {
                c.total += g.count;
                c.used += in_use;
            }
            None => capacity.push(Capacity {
                resource: resource.clone(),
                total: g.count,
                used: in_use,
                whole_requests: false,
            }),
        }
        let count = u32::try_from(g.count).unwrap_or(0).min(64);
        if matches!(resource, Resource::WholeCard { .. }) {
            for _ in 0..count {
                if cards.len() < room {
                    let model = g.kind.clone().unwrap_or_else(|| "gpu".into());
                    cards.push(Card { index: next_index, model, draining, ..Card::default() });
                } else {
                    cut += 1;
                }
                next_index += 1;
            }
        }
    }
    shares(total, &mut cards, &mut capacity);
    (Node { name, schedulable, reason, cards, capacity, sources: Vec::new(), ..Node::default() }, cut)
}

/// `shard` and `mps` GRES share the node's GPUs of their type, split evenly where gres.conf
/// gives no per-card count (Slurm's rule). What is in use comes from the jobs (`apply_shares`):
/// 22.05's `gres_used` counts the GPUs with shards in use (`shard:l4:3(IDX:0-1,3)`), not shards.
fn shares(total: &[gres::Gres], cards: &mut [Card], capacity: &mut Vec<Capacity>) {
    for g in total {
        let (unit, mode) = match g.name.as_str() {
            "shard" => (ShareUnit::Replica, SharingMode::TimeSliced),
            "mps" => (ShareUnit::Mps, SharingMode::Mps),
            _ => continue,
        };
        let fits = |c: &Card| g.kind.as_ref().is_none_or(|k| &c.model == k);
        let gpus = cards.iter().filter(|c| fits(c)).count() as u64;
        if gpus == 0 || g.count == 0 {
            continue;
        }
        // Split evenly where it divides; otherwise gres.conf gives per-file counts that the
        // node object does not show: replicas per card unknown.
        let per_card = (g.count % gpus == 0).then(|| u32::try_from(g.count / gpus).unwrap_or(u32::MAX));
        for c in cards.iter_mut().filter(|c| fits(c) && c.sharing.unit.is_none()) {
            c.sharing = Sharing {
                mode: Some(mode),
                replicas: per_card,
                unit: Some(unit),
                replicas_used: Some(0),
                origin: Some(format!(
                    "Slurm GRES {}:{}{}",
                    g.name,
                    g.kind.as_deref().map_or(String::new(), |k| format!("{k}:")),
                    g.count
                )),
                ..Sharing::default()
            };
        }
        let resource = Resource::Shared { unit, model: g.kind.clone() };
        match capacity.iter_mut().find(|c| c.resource == resource) {
            Some(c) => c.total += g.count,
            None => capacity.push(Capacity { resource, total: g.count, used: 0, whole_requests: false }),
        }
    }
}

/// Lay the shares running jobs hold onto the cards and the node's shared capacity. A card
/// held as a whole `gpu` cannot give shares at the same time (Slurm's rule): all its units
/// count as used.
pub fn apply_shares(
    nodes: &mut [Node],
    shares: &[(crate::model::CardRef, ShareUnit, u32)],
    whole: &[crate::model::CardRef],
    unknown: &dyn Fn(&str) -> bool,
) {
    for n in nodes.iter_mut() {
        let unknown_here = unknown(&n.name);
        for c in n.cards.iter_mut().filter(|c| c.sharing.unit.is_some()) {
            let r = crate::model::CardRef::new(n.name.clone(), c.index);
            let unit = c.sharing.unit;
            c.sharing.replicas_used = if whole.contains(&r) {
                c.sharing.replicas
            } else if unknown_here {
                None
            } else {
                Some(shares.iter().filter(|(x, u, _)| *x == r && Some(*u) == unit).map(|(_, _, k)| *k).sum())
            };
        }
        let name = n.name.clone();
        for cap in n.capacity.iter_mut() {
            let Resource::Shared { unit, model } = &cap.resource else { continue };
            let cards: Vec<&Card> = n
                .cards
                .iter()
                .filter(|c| c.sharing.unit == Some(*unit) && model.as_ref().is_none_or(|m| &c.model == m))
                .collect();
            // (units, in use) per card; a card whose units or use are unknown makes the node's
            // free shares unknown, and unknown is never free.
            let known: Option<Vec<(u64, u64)>> = cards
                .iter()
                .map(|c| Some((u64::from(c.sharing.replicas?), u64::from(c.sharing.replicas_used?))))
                .collect();
            let Some(known) = known else {
                cap.used = cap.total;
                continue;
            };
            cap.used = known.iter().map(|(_, u)| u).sum::<u64>().min(cap.total);
            if *unit == ShareUnit::Mps {
                // Slurm 22.05 serves MPS from one GPU of a node at a time (seen on the real
                // 22.05: with one GPU's units partly taken, a job for more waits while another
                // GPU has all its units free). The node's free MPS units are that GPU's, or
                // one GPU's; a GPU held whole as `gpu` is not that GPU.
                let free_of = |(r, u): &(u64, u64)| r.saturating_sub(*u);
                let mps: Vec<(u64, u64)> = cards
                    .iter()
                    .zip(&known)
                    .filter(|(c, _)| !whole.contains(&crate::model::CardRef::new(name.clone(), c.index)))
                    .map(|(_, k)| *k)
                    .collect();
                let free = match mps.iter().find(|(_, u)| *u > 0) {
                    Some(active) => free_of(active),
                    None => mps.iter().map(free_of).max().unwrap_or(0),
                };
                cap.used = cap.total.saturating_sub(free).max(cap.used);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn old_dialect_drained_node_with_typed_and_mig_gres() {
        let doc = json!({"nodes": [{"name": "gpu1", "state": "idle", "state_flags": ["DRAIN"],
            "reason": "tessera: root: swap fan", "gres": "gpu:h100:2(S:0),gpu:a100_3g.20gb:2(S:0)",
            "gres_used": "gpu:h100:1(IDX:0),gpu:a100_3g.20gb:1(IDX:3)"}]});
        let (nodes, bad) = map(&doc);
        assert_eq!(bad, 0);
        let n = &nodes[0];
        assert!(!n.schedulable);
        assert_eq!(n.reason.as_deref(), Some("drain: tessera: root: swap fan"));
        assert_eq!(
            n.cards.iter().map(|c| (c.index, c.model.as_str(), c.draining)).collect::<Vec<_>>(),
            vec![(0, "h100", true), (1, "h100", true)]
        );
        assert_eq!(
            n.capacity,
            vec![
                Capacity {
                    resource: Resource::WholeCard { model: Some("h100".into()) },
                    total: 2,
                    used: 1,
                    whole_requests: false
                },
                Capacity {
                    resource: Resource::MigInstance { profile: "3g.20gb".into() },
                    total: 2,
                    used: 1,
                    whole_requests: false
                },
            ]
        );
    }

    #[test]
    fn new_dialect_and_oddities() {
        let doc = json!({"nodes": [
            {"name": "ia1", "state": ["ALLOCATED"], "gres": "gpu:h100:2,gpu:h200:4",
             "gres_used": "gpu:h100:1(IDX:0),gpu:h200:0(IDX:N/A)"},
            {"name": "ia1", "state": ["IDLE"]},
            {"name": "cpu1", "state": ["DOWN", "NOT_RESPONDING"], "reason": "", "gres": ""},
            {"state": "idle"},
            {"name": "odd", "state": "idle", "gres": "gpu:(null)", "gres_used": "gpu:99"}]});
        let (nodes, bad) = map(&doc);
        assert_eq!(bad, 1);
        assert_eq!(nodes.len(), 3, "a node listed twice is kept once");
        assert!(nodes[0].schedulable);
        assert_eq!(nodes[0].cards.iter().map(|c| c.index).collect::<Vec<_>>(), vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(nodes[0].cards[2].model, "h200");
        assert_eq!(nodes[1].reason.as_deref(), Some("down+not_responding"));
        assert!(nodes[1].cards.is_empty() && nodes[1].capacity.is_empty());
        assert!(nodes[2].capacity.iter().all(|c| c.used <= c.total), "used never exceeds total");
    }

    /// Cards past `MAX_CARDS` are counted, not made; a node with more GRES entries than any
    /// node has is unreadable.
    #[test]
    fn counts_are_bounded() {
        let mut out = Nodes::default();
        for i in 0..MAX_CARDS / 64 + 1 {
            add(&mut out, &json!({"name": format!("n{i}"), "gres": "gpu:64"}));
        }
        assert_eq!((out.cards, out.cut_cards), (MAX_CARDS, 64));
        assert!(out.nodes.last().is_some_and(|n| n.cards.is_empty()), "the node is kept, its cards cut");
        let many = vec!["gpu:x:1"; MAX_GRES + 1].join(",");
        add(&mut out, &json!({"name": "m", "gres": many}));
        assert_eq!(out.unreadable, 1);
    }

    #[test]
    fn gres_indexes_skip_mig_devices() {
        let doc = json!({"nodes": [{"name": "n", "state": "idle", "gres": "gpu:a100_3g.20gb:2,gpu:h100:2"}]});
        let (nodes, _) = map(&doc);
        assert_eq!(nodes[0].cards.iter().map(|c| c.index).collect::<Vec<_>>(), vec![0, 1]);
        let m = &card_indexes(&doc)["n"];
        assert_eq!((m.get(&0), m.get(&2), m.get(&3)), (None, Some(&0), Some(&1)));
    }

    #[test]
    fn shares_in_use_unknown_uneven_and_mps_one_gpu_at_a_time() {
        use crate::model::CardRef;
        let node = |gres: &str| map(&json!({"nodes": [{"name": "n", "state": "idle", "gres": gres}]})).0;
        let shared = |n: &Node| n.capacity.iter().find(|c| matches!(c.resource, Resource::Shared { .. })).cloned();
        let r = |i| CardRef::new("n", i);
        // Evenly split, use known: used is the jobs' shares; a GPU held whole gives none.
        let mut n = node("gpu:l4:4,shard:16");
        apply_shares(&mut n, &[(r(0), ShareUnit::Replica, 3)], &[r(1)], &|_| false);
        let used: Vec<Option<u32>> = n[0].cards.iter().map(|c| c.sharing.replicas_used).collect();
        assert_eq!(used, [Some(3), Some(4), Some(0), Some(0)]);
        assert_eq!(shared(&n[0]).map(|c| (c.total, c.used)), Some((16, 7)));
        // Unknown use (an unreadable job, an unplaced share): nothing free.
        let mut n = node("gpu:l4:4,shard:16");
        apply_shares(&mut n, &[], &[], &|_| true);
        assert!(n[0].cards.iter().all(|c| c.sharing.replicas_used.is_none()));
        assert_eq!(shared(&n[0]).map(|c| c.free()), Some(0));
        // 10 shards over 4 GPUs: per-file counts the node does not show; unknown, not 2 each.
        let mut n = node("gpu:l4:4,shard:10");
        assert!(n[0].cards.iter().all(|c| c.sharing.replicas.is_none()));
        apply_shares(&mut n, &[], &[], &|_| false);
        assert_eq!(shared(&n[0]).map(|c| c.free()), Some(0));
        // MPS: the GPU in MPS use is the node's, whatever the others have; a GPU held whole
        // (its units all "used") is never taken for it.
        let mut n = node("gpu:l4:2,mps:200");
        apply_shares(&mut n, &[(r(1), ShareUnit::Mps, 80)], &[], &|_| false);
        assert_eq!(shared(&n[0]).map(|c| c.free()), Some(20));
        let mut n = node("gpu:l4:2,mps:200");
        apply_shares(&mut n, &[], &[r(0)], &|_| false);
        assert_eq!(shared(&n[0]).map(|c| c.free()), Some(100), "card 1 serves MPS while card 0 is held whole");
    }
}
