//! Actions under way, as the fleet shows them: a workload checkpointing (a preemption), a card
//! or node draining. A finding whose suggested action is already under way says so and offers
//! nothing else for its subject; advice that ignored them suggested the same drain again, or a
//! second victim for work a preemption in progress is about to start.

use super::{Finding, Suggestion};
use crate::model::Fleet;

/// Findings whose action is under way say so, with nothing else to do.
pub(super) fn mark(fleet: &Fleet, out: &mut [Finding]) {
    for f in out.iter_mut() {
        let Suggestion::Action { action, .. } = &f.suggestion else { continue };
        if let Some(text) = action.under_way(fleet) {
            f.suggestion = Suggestion::InProgress { action: action.clone(), text };
        }
    }
}
