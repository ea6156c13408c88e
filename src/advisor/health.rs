//! Unhealthy but held: work running on a card that is lost, threw a fatal XID or has
//! uncorrectable ECC errors. Drain it (no new work) and move what runs there.

use super::{Context, Finding, Kind, Severity, Subject, Suggestion};
use crate::act::Action;
use crate::model::{CardRef, Fleet, WorkloadKind, WorkloadState};

pub(super) fn unhealthy_held(fleet: &Fleet, cx: &Context, out: &mut Vec<Finding>) {
    for (n, c) in fleet.cards() {
        let Some(fault) = c.health.fault() else { continue };
        let holders: Vec<&str> = c.holders().collect();
        if holders.is_empty() {
            continue;
        }
        let r = CardRef::new(n.name.clone(), c.index);
        let model = c.gpu_model().map_or_else(|| c.model.clone(), |m| m.name.clone());
        // Drained already: training its scheduler can requeue, past its minimum runtime, is
        // moved by the preemption this suggests (it was said in words only).
        let movable = holders.iter().copied().find(|id| {
            fleet.workload(id).is_some_and(|w| {
                w.kind == WorkloadKind::Training
                    && w.state == WorkloadState::Running
                    && w.requeueable != Some(false)
                    && w.runtime(cx.now).and_then(|d| d.to_std().ok()).is_some_and(|r| r >= cx.min_runtime)
            })
        });
        let suggestion = if let (true, Some(id)) = (c.draining, movable) {
            Suggestion::Action {
                action: Action::Preempt { workload: id.to_string(), force: false },
                why: format!("the card is failing and drained: {id} checkpoints and requeues onto a healthy card"),
            }
        } else if c.draining {
            Suggestion::Words { text: format!("move {} off it: the card is failing", holders.join(", ")) }
        } else {
            Suggestion::Action {
                action: Action::Drain { target: r.to_string(), evict: false },
                why: "no new work on a failing card; then move what runs there".into(),
            }
        };
        out.push(Finding {
            kind: Kind::UnhealthyHeld,
            severity: Severity::High,
            // Once drained, the finding is about the work to move: the preemption acts on it.
            subject: match (c.draining, movable) {
                (true, Some(id)) => Subject::Workload { id: id.to_string() },
                _ => Subject::Card { card: r.to_string() },
            },
            title: format!("{r} is unhealthy ({fault}) and holds {}", holders.join(", ")),
            evidence: vec![
                format!("health: {fault}{}", if c.draining { "; drained" } else { "; not drained" }),
                format!("{} on it", crate::units::count(holders.len() as u64, "workload", "workloads")),
            ],
            gpu_hours_per_day: 24.0,
            cost_per_day: cx.money(Some(&model), 24.0),
            suggestion,
            cards: vec![r],
        });
    }
}
