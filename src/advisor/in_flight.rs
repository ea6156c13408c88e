//! Actions under way, as the fleet shows them: a workload checkpointing (a preemption), a card
//! or node draining. A finding whose suggested action is already under way says so and offers
//! nothing else for its subject; advice that ignored them suggested the same drain again, or a
//! second victim for work a preemption in progress is about to start.

use super::{Finding, Suggestion};
use crate::act::Action;
use crate::model::{Card, Fleet, Node, WorkloadState};

/// What of `action` the fleet shows under way, in words, or `None`.
pub(super) fn under_way(fleet: &Fleet, action: &Action) -> Option<String> {
    match action {
        Action::Preempt { workload, .. } => fleet
            .workload(workload)
            .filter(|w| w.state == WorkloadState::Checkpointing)
            .map(|_| format!("preempting {workload}: it is checkpointing, then it requeues")),
        Action::Drain { target: t, .. } => {
            let cards = target(fleet, t);
            (!cards.is_empty() && cards.iter().all(|(n, c)| c.draining || node_drained(n)))
                .then(|| format!("draining {t}: no new work lands on it"))
        }
        Action::Undrain { .. } | Action::Repartition { .. } => None,
    }
}

/// The node and cards an action's target names: `NODE/INDEX`, a GPU UUID, or a node's every
/// card (empty where the fleet has no such target).
pub(super) fn target<'f>(fleet: &'f Fleet, target: &str) -> Vec<(&'f Node, &'f Card)> {
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
pub(super) fn node_drained(n: &Node) -> bool {
    n.reason.as_deref().is_some_and(|r| r.starts_with("drain") || r.contains("cordoned"))
}

/// Findings whose action is under way say so, with nothing else to do.
pub(super) fn mark(fleet: &Fleet, out: &mut [Finding]) {
    for f in out.iter_mut() {
        let Suggestion::Action { action, .. } = &f.suggestion else { continue };
        if let Some(text) = under_way(fleet, action) {
            f.suggestion = Suggestion::InProgress { action: action.clone(), text };
        }
    }
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
            assert!(under_way(&fleet, &drain("n/1")).is_some(), "{reason}");
            assert!(under_way(&fleet, &drain("n")).is_some(), "{reason}");
        }
        let fleet = Fleet { nodes: vec![node(None)], ..Fleet::default() };
        assert_eq!(under_way(&fleet, &drain("n/1")), None);
        assert_eq!(target(&fleet, "n").len(), 2);
        assert_eq!(
            target(&fleet, "n/1").first().map(|(n, c)| CardRef::new(n.name.clone(), c.index)),
            Some(CardRef::new("n", 1))
        );
        assert!(target(&fleet, "m/0").is_empty());
    }
}
