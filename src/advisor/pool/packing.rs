//! Packing: a multi-card request the fleet has the cards for, but no node free together; the
//! node to drain so it empties.

use super::{not_whole, whole_of};
use crate::advisor::{Finding, Kind, Severity, Subject, Suggestion, minutes};
use crate::model::{CardRef, Fleet};

/// A multi-card request that fits the fleet but no node's free cards: the node with the fewest
/// busy cards of the resource among those with enough of them, to drain so it empties.
#[allow(clippy::too_many_arguments)]
pub(super) fn packing(
    fleet: &Fleet,
    resource: &crate::model::Resource,
    late: &[&crate::model::Workload],
    biggest: u64,
    block: u64,
    free_all: u64,
    oldest: u64,
    severity: Severity,
) -> Option<Finding> {
    let (node, drained, busy, relayout) = fleet
        .nodes
        .iter()
        .filter(|n| n.schedulable)
        .filter_map(|n| {
            let mine: Vec<&crate::model::Card> =
                n.cards.iter().filter(|c| c.health.fault().is_none() && whole_of(c, resource)).collect();
            // Held: what must end or move (a card drained for this is the drain under way);
            // MIG or shared: to lay out whole once idle.
            let busy: Vec<&crate::model::Card> = mine.iter().copied().filter(|c| !c.is_idle()).collect();
            let relayout: Vec<&crate::model::Card> = mine.iter().copied().filter(|c| not_whole(c)).collect();
            (mine.len() as u64 >= biggest).then_some((n, mine, busy, relayout))
        })
        // A node already drained for it first (its plan under way), then the least to do.
        .min_by_key(|(n, mine, busy, relayout)| {
            (!mine.iter().all(|c| c.draining), busy.len() + relayout.len(), n.name.clone())
        })
        .map(|(n, mine, busy, relayout)| (n, mine.iter().all(|c| c.draining), busy, relayout))?;
    let holders: Vec<String> = {
        let mut h: Vec<String> = busy.iter().flat_map(|c| c.holders().map(str::to_string)).collect();
        h.sort();
        h.dedup();
        h
    };
    let cards: Vec<CardRef> = busy.iter().map(|c| CardRef::new(node.name.clone(), c.index)).collect();
    let who = if holders.is_empty() {
        "nobody".to_string()
    } else {
        holders.iter().take(6).cloned().collect::<Vec<_>>().join(", ")
    };
    let relaid = if relayout.is_empty() {
        String::new()
    } else {
        let n = crate::units::count(relayout.len() as u64, "card", "cards");
        format!("; {n} to lay out whole once idle (MIG or shared now)")
    };
    let remedy = match (busy.len(), relayout.len()) {
        (0, r) => format!("laying out {r} of {}'s cards whole", node.name),
        (b, 0) => format!("emptying {} ({b} busy)", node.name),
        (b, r) => format!("emptying {} ({b} busy) and laying out {r} of its cards whole", node.name),
    };
    // The node is held first (drained: nothing new lands on the cards it frees), its MIG cards
    // laid out whole as they empty, then given back for the job (a card laid out whole on an
    // undrained node went to the next small job).
    let first_mig = relayout.iter().find(|c| c.mig.enabled && c.is_idle());
    let suggestion = match (drained, first_mig) {
        (false, _) => Suggestion::Action {
            action: crate::act::Action::Drain { target: node.name.clone(), evict: false },
            why: if busy.is_empty() {
                format!(
                    "no new work lands on {} while its cards are laid out whole for the {biggest}-card job",
                    node.name
                )
            } else {
                format!(
                    "no new work lands on {}; as its {} end (or their training is preempted) and its cards are laid \
                     out whole, the {biggest}-card job fits",
                    node.name,
                    crate::units::count(busy.len() as u64, "busy card", "busy cards")
                )
            },
        },
        // Drained for it: what is left is said, one plan per subject (the next pass must not
        // offer a second action for the same wait).
        (true, mig) => {
            let next = match (busy.is_empty(), mig, relayout.is_empty()) {
                (true, _, true) => format!("it is empty and whole: undrain {} for the {biggest}-card job", node.name),
                (_, Some(c), _) => format!(
                    "repartition {}/{} whole (idle now), and its other MIG cards as they empty, then undrain {}",
                    node.name, c.index, node.name
                ),
                _ => format!(
                    "waiting for its work to end ({} busy); lay its cards out whole, then undrain {}",
                    busy.len(),
                    node.name
                ),
            };
            Suggestion::InProgress {
                action: crate::act::Action::Drain { target: node.name.clone(), evict: false },
                text: format!("{} is drained for the {biggest}-card job: {next}", node.name),
            }
        }
    };
    Some(Finding {
        kind: Kind::Packing,
        severity,
        subject: Subject::Resource { resource: resource.to_string() },
        title: format!(
            "{}: {} free, at most {block} on one node; packing, not a shortage: {remedy} would give it, the oldest \
             waiting {}",
            if late.len() == 1 {
                format!("1 job waits for {resource}, {biggest} together")
            } else {
                format!(
                    "{} jobs wait for {resource}, the largest {biggest} together",
                    crate::units::grouped(late.len() as u64)
                )
            },
            crate::units::grouped(free_all),
            minutes(oldest)
        ),
        evidence: vec![
            format!("{}: {} busy, held by {who}{relaid}", node.name, busy.len()),
            format!(
                "no node lacks the cards: {} has enough once its work ends or moves; nothing needs to be bought",
                node.name
            ),
        ],
        // The waiting request, a day long.
        gpu_hours_per_day: biggest as f64 * 24.0,
        cost_per_day: None,
        suggestion,
        cards,
    })
}
