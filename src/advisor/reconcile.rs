//! One plan out of the rules' findings: each card, workload and waiting job is the subject of
//! at most one suggested action. The rules look at the fleet each on its own; here their
//! suggestions meet. Conflicts are settled in a stated order (health and risks to running work,
//! then waiting inference, then waiting training and capacity, then waste, then cost; within a
//! rank the more severe, then the more costly), and the loser is merged (the same action: it
//! points at the winner) or dropped (another action: its reason is said), never left to
//! contradict the winner.

use std::collections::HashMap;

use serde::Serialize;

use super::{Finding, Kind, Subject, Suggestion};
use crate::act::Action;
use crate::model::Fleet;

/// The order conflicts are settled in, first wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rank {
    /// A failing card, out-of-memory risk or interference on work that runs.
    Health,
    /// Inference that waits.
    WaitingInference,
    /// Other waiting work, and the capacity it needs.
    WaitingTraining,
    /// Capacity held and not used.
    Waste,
    /// Cards to release, schedules to change.
    Cost,
}

impl Rank {
    pub fn of(kind: Kind) -> Self {
        match kind {
            Kind::UnhealthyHeld | Kind::Crowded | Kind::Interference => Self::Health,
            Kind::PreemptionCandidate => Self::WaitingInference,
            Kind::LayoutPlan | Kind::DrainPlan | Kind::ScaleOut | Kind::ScheduleCost | Kind::Packing => {
                Self::WaitingTraining
            }
            Kind::HeldIdle | Kind::Oversized | Kind::MigWaste | Kind::Fragmentation | Kind::UseMig => Self::Waste,
            Kind::ScaleIn | Kind::ScheduleSuggestion => Self::Cost,
        }
    }
}

/// One suggested action of the plan, with the suggestions it won over.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Planned {
    /// The finding it answers (its kind and subject, as in `findings`).
    pub kind: Kind,
    pub subject: String,
    pub rank: Rank,
    pub action: Action,
    /// What it acts on or serves: `workload:ID`, `card:NODE/INDEX`.
    pub claims: Vec<String>,
    /// Suggestions that lost to it.
    pub won_over: Vec<Lost>,
}

/// A suggestion that lost a conflict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Lost {
    pub kind: Kind,
    pub subject: String,
    /// `merged` (the same action) or `dropped` (another action for the same subject).
    pub outcome: &'static str,
    pub reason: String,
}

/// What a finding's suggestion acts on or serves, or nothing when it suggests no action. A
/// target is named one way whatever way it was written (a GPU UUID is its `NODE/INDEX`). A
/// drain at a scheduler (Slurm, Kubernetes) stops the whole node, so it claims every card of
/// the node; a simulated or NVML drain, the card alone.
fn claims(fleet: &Fleet, f: &Finding) -> Vec<String> {
    let Suggestion::Action { action, .. } = &f.suggestion else { return Vec::new() };
    let mut out: Vec<String> = Vec::new();
    out.extend(action.claims(fleet));
    // Freeing its cards for waiting work claims them; preempting idle work does not.
    if matches!(action, Action::Preempt { .. }) && f.kind == Kind::PreemptionCandidate {
        out.extend(f.cards.iter().map(|c| format!("card:{c}")));
    }
    if out.is_empty() {
        // A target the fleet does not know: claimed as written.
        out.extend(f.cards.iter().map(|c| format!("card:{c}")));
    }
    // The waiting job it serves, or the workload it is about.
    if let Subject::Workload { id } = &f.subject {
        out.push(format!("workload:{id}"));
    }
    out.sort();
    out.dedup();
    out
}

/// Settle the findings' suggestions into one plan: losers' suggestions are rewritten to say
/// what they lost to (in `findings`), and the plan lists each action once with what it won over.
pub fn reconcile(fleet: &Fleet, findings: &mut [Finding]) -> Vec<Planned> {
    let mut order: Vec<usize> = (0..findings.len()).collect();
    order.sort_by(|&a, &b| {
        let (x, y) = (&findings[a], &findings[b]);
        Rank::of(x.kind)
            .cmp(&Rank::of(y.kind))
            .then(y.severity.cmp(&x.severity))
            .then(y.gpu_hours_per_day.total_cmp(&x.gpu_hours_per_day))
            .then(x.title.cmp(&y.title))
    });
    let mut plan: Vec<Planned> = Vec::new();
    let mut owner: HashMap<String, usize> = HashMap::new();
    for i in order {
        let mine = claims(fleet, &findings[i]);
        let Some(action) = findings[i].suggestion.action().cloned() else { continue };
        let taken = mine.iter().find_map(|c| owner.get(c).map(|&p| (c.clone(), p)));
        let f = &findings[i];
        let Some((claim, p)) = taken else {
            for c in &mine {
                owner.insert(c.clone(), plan.len());
            }
            plan.push(Planned {
                kind: f.kind,
                subject: f.subject.text(),
                rank: Rank::of(f.kind),
                action,
                claims: mine,
                won_over: Vec::new(),
            });
            continue;
        };
        let winner = &plan[p];
        // The same action merges, unless it was to serve waiting work of its own: one
        // preemption or repartition does not start two jobs that each needed all of it.
        let serves_its_own =
            matches!(f.kind, Kind::PreemptionCandidate | Kind::LayoutPlan | Kind::DrainPlan | Kind::ScheduleCost);
        let (outcome, text) = if winner.action == action && !serves_its_own {
            ("merged", format!("the same as the {} advice for {}: {action}", winner.kind.as_str(), winner.subject))
        } else {
            let what = claim.split_once(':').map_or(claim.as_str(), |(_, w)| w);
            (
                "dropped",
                format!(
                    "not now: {} ({} advice for {}) comes first for {what}",
                    winner.action,
                    winner.kind.as_str(),
                    winner.subject
                ),
            )
        };
        plan[p].won_over.push(Lost { kind: f.kind, subject: f.subject.text(), outcome, reason: text.clone() });
        findings[i].suggestion = Suggestion::Words { text };
    }
    // Carried out in order, the plan's preemptions wait out a checkpoint grace: the cards it
    // lays out or drains, idle now, are changed first, before new work can take them in
    // that wait (the order conflicts were settled in stays in each action's `rank`).
    plan.sort_by_key(|p| matches!(p.action, Action::Preempt { .. }));
    plan
}

#[cfg(test)]
#[path = "reconcile_tests.rs"]
mod tests;
