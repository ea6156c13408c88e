//! Layout plan findings: each card the planner would repartition, with the waiting work it
//! would start, as a repartition the runner can plan and confirm (`a` in the Advice view),
//! once something it would start has waited past `[policy] queue_wait_threshold`.

use super::planner::Plan;
use super::{Context, Finding, Kind, Subject, Suggestion, minutes};
use crate::act::Action;
use crate::model::Fleet;
use crate::model::mig::lookup;

/// The share of the card the work a change starts gets (a whole card: 1; an instance: its
/// memory slices over the card's).
pub(super) fn started_share(fleet: &Fleet, c: &super::planner::CardChange) -> f64 {
    let model = lookup(&c.model);
    c.serves
        .iter()
        .filter_map(|id| fleet.workload(id))
        .map(|w| match (&w.request.mig_profile, model) {
            (Some(p), Some(m)) => {
                m.profile(p).map_or(0.0, |pr| f64::from(pr.memory_slices) / f64::from(m.memory_slices.max(1)))
            }
            _ => 1.0,
        })
        .sum()
}

pub(super) fn findings(fleet: &Fleet, cx: &Context, plan: &Plan, out: &mut Vec<Finding>) {
    for c in &plan.changes {
        // A destructive change is worth proposing once something has waited past the threshold.
        let serves: Vec<&String> = c.serves.iter().collect();
        let Some((oldest, severity)) = super::waited_past(fleet, cx, &serves) else { continue };
        // The share of the card the started work gets, a day long.
        let share = started_share(fleet, c);
        let mut evidence: Vec<String> = c
            .serves
            .iter()
            .filter_map(|id| fleet.workload(id))
            .take(6)
            .map(|w| {
                let wants = w.request.mig_profile.clone().unwrap_or_else(|| "a whole card".into());
                let waited = w.wait(cx.now).map_or_else(|| "?".into(), |d| minutes(d.num_seconds().max(0) as u64));
                let prio = w.priority.map_or_else(String::new, |p| format!(", priority {p}"));
                format!("{} ({}) wants {wants}, waited {waited}{prio}", w.id, w.name)
            })
            .collect();
        if c.serves.len() > 6 {
            evidence.push(format!("and {} more", c.serves.len() - 6));
        }
        evidence.push(format!(
            "{} is idle ({}, now {}); the new layout uses NVIDIA's placements for the model",
            c.card, c.model, c.from
        ));
        let names = c.serves.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
        out.push(Finding {
            kind: Kind::LayoutPlan,
            severity,
            subject: Subject::Card { card: c.card.to_string() },
            title: format!(
                "repartition {} to {}: starts {} waiting, the oldest for {}",
                c.card,
                c.to,
                c.serves.len(),
                minutes(oldest)
            ),
            evidence,
            gpu_hours_per_day: share * 24.0,
            cost_per_day: cx.money(Some(&c.model), share * 24.0),
            suggestion: Suggestion::Action {
                action: Action::Repartition { target: c.card.to_string(), layout: c.to.clone() },
                why: format!("starts {names}{}", if c.serves.len() > 3 { ", …" } else { "" }),
            },
            cards: vec![c.card.clone()],
        });
    }
}
