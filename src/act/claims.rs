//! What an action claims and what the fleet shows of it under way: the node, cards and
//! workload it acts on (the advice's plan settles conflicts by them), and whether the fleet
//! already shows it happening (a workload checkpointing, a card or node draining).

use super::Action;
use crate::model::{Card, Fleet, Node, WorkloadState};

impl Action {
    /// What of this action the fleet shows under way, in words, or `None`.
    pub fn under_way(&self, fleet: &Fleet) -> Option<String> {
        match self {
            Action::Preempt { workload, .. } => fleet
                .workload(workload)
                .filter(|w| w.state == WorkloadState::Checkpointing)
                .map(|_| format!("preempting {workload}: it is checkpointing, then it requeues")),
            Action::Drain { target: t, .. } => {
                let cards = cards_named(fleet, t);
                (!cards.is_empty() && cards.iter().all(|(n, c)| c.draining || node_drained(n)))
                    .then(|| format!("draining {t}: no new work lands on it"))
            }
            Action::Undrain { .. } | Action::Repartition { .. } => None,
        }
    }

    /// What this action acts on: `workload:ID`, `node:NAME`, `card:NODE/INDEX`. A target is
    /// named one way whatever way it was written (a GPU UUID is its `NODE/INDEX`). A drain at
    /// a scheduler (Slurm, Kubernetes) stops the whole node, so it claims every card of the
    /// node; a simulated or NVML drain, the card alone.
    pub fn claims(&self, fleet: &Fleet) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let card = |n: &Node, c: &Card| format!("card:{}/{}", n.name, c.index);
        match self {
            Action::Preempt { workload, .. } => out.push(format!("workload:{workload}")),
            Action::Drain { target, .. } | Action::Undrain { target, .. } => {
                for (n, c) in cards_named(fleet, target) {
                    out.push(format!("node:{}", n.name));
                    if target == &n.name || whole_node(fleet, n) {
                        out.extend(n.cards.iter().map(|c| card(n, c)));
                    } else {
                        out.push(card(n, c));
                    }
                }
            }
            Action::Repartition { target, .. } => {
                out.extend(cards_named(fleet, target).into_iter().map(|(n, c)| card(n, c)));
            }
        }
        out
    }
}

/// The node and cards an action's target names: `NODE/INDEX`, a GPU UUID, or a node's every
/// card (empty where the fleet has no such target).
pub fn cards_named<'f>(fleet: &'f Fleet, target: &str) -> Vec<(&'f Node, &'f Card)> {
    if let Some((node, index)) = target.rsplit_once('/')
        && let Ok(index) = index.parse::<u32>()
    {
        return fleet.nodes.iter().filter(|n| n.name == node).filter_map(|n| Some((n, n.card_at(index)?))).collect();
    }
    if let Some(found) = fleet.cards().find(|(_, c)| c.uuid.as_deref() == Some(target)) {
        return vec![found];
    }
    fleet.nodes.iter().filter(|n| n.name == target).flat_map(|n| n.cards.iter().map(move |c| (n, c))).collect()
}

/// A node drained as a whole at its scheduler (Slurm's DRAIN states, a Kubernetes cordon).
fn node_drained(n: &Node) -> bool {
    n.reason.as_deref().is_some_and(|r| r.starts_with("drain") || r.contains("cordoned"))
}

/// Whether a drain on `n` stops the whole node: its actions go to a scheduler.
fn whole_node(fleet: &Fleet, n: &Node) -> bool {
    use crate::model::SourceKind;
    let kind = |name: &String| fleet.sources.iter().find(|s| s.name == *name).map(|s| s.kind);
    n.sources.iter().filter_map(kind).any(|k| matches!(k, SourceKind::Slurm | SourceKind::Kubernetes))
        && !n.sources.iter().filter_map(kind).any(|k| matches!(k, SourceKind::Simulated | SourceKind::Nvml))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::CardRef;

    /// A Kubernetes cordon or a Slurm drain stops the node, not its cards one by one: a drain
    /// of one of its cards is under way too (it was offered again, and `a` then said "already
    /// drained").
    #[test]
    fn a_node_drained_at_its_scheduler_is_a_drain_under_way() {
        let card = |index| Card { index, ..Card::default() };
        let node = |reason: Option<&str>| Node {
            name: "n".into(),
            schedulable: reason.is_none(),
            reason: reason.map(String::from),
            cards: vec![card(0), card(1)],
            ..Node::default()
        };
        let drain = |target: &str| Action::Drain { target: target.into(), evict: false };
        for reason in ["cordoned", "drain: by ops"] {
            let fleet = Fleet { nodes: vec![node(Some(reason))], ..Fleet::default() };
            assert!(drain("n/1").under_way(&fleet).is_some(), "{reason}");
            assert!(drain("n").under_way(&fleet).is_some(), "{reason}");
        }
        let fleet = Fleet { nodes: vec![node(None)], ..Fleet::default() };
        assert_eq!(drain("n/1").under_way(&fleet), None);
        assert_eq!(cards_named(&fleet, "n").len(), 2);
        assert_eq!(
            cards_named(&fleet, "n/1").first().map(|(n, c)| CardRef::new(n.name.clone(), c.index)),
            Some(CardRef::new("n", 1))
        );
        assert!(cards_named(&fleet, "m/0").is_empty());
    }
}
