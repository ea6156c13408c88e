//! Drain plans (`[advisor] drain_plans`): for waiting work no idle card can serve, which busy
//! cards to drain and lay out anew. Only cards whose every holder may be moved are considered:
//! running training past `[policy] min_runtime` that its scheduler can requeue. The planner runs
//! again on a copy of the fleet where those cards are idle and the first plan's cards and the
//! work it starts are gone; its changes to the once-busy cards are the drain plans. The
//! suggestion is to preempt the holder (checkpoint, requeue): draining alone would move nobody.
//! The card is then idle, and the layout planner proposes its repartition as a layout plan.

use super::planner::{self, CardChange, Plan};
use super::{Context, Finding, Kind, Severity, Subject, Suggestion, minutes};
use crate::act::Action;
use crate::model::{Card, CardRef, Fleet, WorkloadKind, WorkloadState};

/// Adds the drain plans to `out`; returns the waiting work they would start.
pub(super) fn findings(fleet: &Fleet, cx: &Context, first: &Plan, out: &mut Vec<Finding>) -> Vec<String> {
    let (copy, freed) = with_movable_freed(fleet, cx, first);
    if freed.is_empty() {
        return Vec::new();
    }
    let second = planner::plan(&copy, cx.now);
    let mut starts = Vec::new();
    for c in &second.changes {
        let Some((_, holders)) = freed.iter().find(|(r, _)| *r == c.card) else { continue };
        let serves: Vec<&String> = c.serves.iter().collect();
        let Some((oldest, severity)) = super::waited_past(fleet, cx, &serves) else { continue };
        starts.extend(c.serves.iter().cloned());
        out.push(finding(fleet, cx, c, holders, oldest, severity));
    }
    starts
}

/// A copy of `fleet` where the cards whose every holder may be moved are idle, and the first
/// plan's cards (drained there: neither supply nor a candidate) and the work it starts are
/// gone; with the cards freed and their holders.
fn with_movable_freed(fleet: &Fleet, cx: &Context, first: &Plan) -> (Fleet, Vec<(CardRef, Vec<String>)>) {
    // Requeue allowed or not reported (the evidence says which); never where it is refused.
    let movable = |id: &str| {
        fleet.workload(id).is_some_and(|w| {
            w.kind == WorkloadKind::Training
                && w.state == WorkloadState::Running
                && w.requeueable != Some(false)
                && w.runtime(cx.now).and_then(|d| d.to_std().ok()).is_some_and(|r| r >= cx.min_runtime)
        })
    };
    let mut copy = fleet.clone();
    let mut freed = Vec::new();
    for node in &mut copy.nodes {
        for card in &mut node.cards {
            let r = CardRef::new(node.name.clone(), card.index);
            if first.changes.iter().any(|c| c.card == r) {
                // Taken by the first plan: neither supply nor a candidate here.
                card.draining = true;
                continue;
            }
            let holders: Vec<String> = card.holders().map(str::to_string).collect();
            if holders.is_empty() || !holders.iter().all(|h| movable(h)) || !card.processes.is_empty() {
                continue;
            }
            empty(card);
            freed.push((r, holders));
        }
    }
    if freed.is_empty() {
        return (copy, freed);
    }
    let started: Vec<&String> = first.changes.iter().flat_map(|c| &c.serves).collect();
    copy.workloads.retain(|w| !started.contains(&&w.id));
    copy.index_workloads();
    (copy, freed)
}

/// Card `card` (of the copy) as if its holders had left: no workloads, no use.
fn empty(card: &mut Card) {
    card.workloads.clear();
    for i in &mut card.mig.instances {
        i.workloads.clear();
        i.utilization_pct = None;
        i.memory_used_mib = None;
    }
    card.utilization_pct = None;
    card.memory_used_mib = None;
}

/// The drain plan for change `c` of the second plan, on a card `holders` hold; the work it
/// starts has waited `oldest` seconds.
fn finding(
    fleet: &Fleet,
    cx: &Context,
    c: &CardChange,
    holders: &[String],
    oldest: u64,
    severity: Severity,
) -> Finding {
    let names = c.serves.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
    Finding {
        kind: Kind::DrainPlan,
        severity,
        subject: Subject::Card { card: c.card.to_string() },
        title: format!(
            "drain {} ({}), then repartition to {}: starts {} waiting, the oldest for {}",
            c.card,
            holders.join(", "),
            c.to,
            c.serves.len(),
            minutes(oldest)
        ),
        evidence: vec![
            format!("no idle card serves {names}; they waited up to {}", minutes(oldest)),
            format!(
                "{} holds it: training past its minimum runtime ({}); requeue {}",
                holders.join(", "),
                minutes(cx.min_runtime.as_secs()),
                if holders.iter().all(|h| fleet.workload(h).is_some_and(|w| w.requeueable == Some(true))) {
                    "allowed by its scheduler"
                } else {
                    "not reported by its scheduler (unknown)"
                }
            ),
            format!("then: repartition {} from {} to {}", c.card, c.from, c.to),
        ],
        gpu_hours_per_day: super::layout::started_share(fleet, c) * 24.0,
        cost_per_day: cx.money(Some(&c.model), super::layout::started_share(fleet, c) * 24.0),
        suggestion: preempt_holders(c, holders),
        cards: vec![c.card.clone()],
    }
}

/// Draining alone moves nobody: preempting the one holder frees the card, and the layout
/// planner then proposes the repartition for the idle card; several holders are named in words.
fn preempt_holders(c: &CardChange, holders: &[String]) -> Suggestion {
    match holders {
        [one] => Suggestion::Action {
            action: Action::Preempt { workload: one.clone(), force: false },
            why: format!("checkpoint and requeue {one}; then repartition {} to {} (a layout plan)", c.card, c.to),
        },
        _ => Suggestion::Words {
            text: format!(
                "preempt {} (checkpoint and requeue), then repartition {} to {}",
                holders.join(" and "),
                c.card,
                c.to
            ),
        },
    }
}
