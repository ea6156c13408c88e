//! Actions under way, as the fleet shows them: a workload checkpointing (a preemption), a card
//! or node draining. A finding whose suggested action is already under way says so and offers
//! nothing else for its subject; advice that ignored them suggested the same drain again, or a
//! second victim for work a preemption in progress is about to start.

use super::{Finding, Suggestion};
use crate::actions::Action;
use crate::model::{Card, Fleet, WorkloadState};

/// What of `action` the fleet shows under way, in words, or `None`.
pub(super) fn under_way(fleet: &Fleet, action: &Action) -> Option<String> {
    match action {
        Action::Preempt { workload, .. } => fleet
            .workload(workload)
            .filter(|w| w.state == WorkloadState::Checkpointing)
            .map(|_| format!("preempting {workload}: it is checkpointing, then it requeues")),
        Action::Drain { target } => {
            let cards = cards_of(fleet, target);
            (!cards.is_empty() && cards.iter().all(|c| c.draining))
                .then(|| format!("draining {target}: no new work lands on it"))
        }
        Action::Undrain { .. } | Action::Repartition { .. } => None,
    }
}

/// The cards an action's target names: `NODE/INDEX`, a GPU UUID, or a node's every card.
fn cards_of<'f>(fleet: &'f Fleet, target: &str) -> Vec<&'f Card> {
    if let Some((node, index)) = target.rsplit_once('/')
        && let Ok(index) = index.parse::<u32>()
    {
        return fleet.nodes.iter().filter(|n| n.name == node).filter_map(|n| n.card_at(index)).collect();
    }
    if let Some((_, c)) = fleet.cards().find(|(_, c)| c.uuid.as_deref() == Some(target)) {
        return vec![c];
    }
    fleet.nodes.iter().filter(|n| n.name == target).flat_map(|n| n.cards.iter()).collect()
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
