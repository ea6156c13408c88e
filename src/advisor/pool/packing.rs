//! Packing: a multi-card request the fleet has the cards for, but no node free together; the
//! node to drain so it empties.

use super::{Late, not_whole, whole_of};
use crate::advisor::{Finding, Kind, Subject, Suggestion, minutes};
use crate::model::{Card, CardRef, Fleet, Node, Resource};

/// A multi-card request that fits the fleet but no node's free cards: the node with the fewest
/// busy cards of the resource among those with enough of them, to drain so it empties.
pub(super) fn packing(fleet: &Fleet, resource: &Resource, late: &Late, free_all: u64) -> Option<Finding> {
    let biggest = late.biggest;
    let e = Emptying::choose(fleet, resource, biggest)?;
    let node = e.node;
    let cards: Vec<CardRef> = e.busy.iter().map(|c| CardRef::new(node.name.clone(), c.index)).collect();
    let suggestion = e.suggestion(biggest);
    Some(Finding {
        kind: Kind::Packing,
        severity: late.severity,
        subject: Subject::Resource { resource: resource.to_string() },
        title: format!(
            "{}: {} free, at most {} on one node; packing, not a shortage: {} would give it, the oldest \
             waiting {}",
            if late.jobs.len() == 1 {
                format!("1 job waits for {resource}, {biggest} together")
            } else {
                format!(
                    "{} jobs wait for {resource}, the largest {biggest} together",
                    crate::units::grouped(late.jobs.len() as u64)
                )
            },
            crate::units::grouped(free_all),
            late.block,
            e.remedy(),
            minutes(late.oldest)
        ),
        evidence: vec![
            format!("{}: {} busy, held by {}{}", node.name, e.busy.len(), e.holders(), e.relaid()),
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

/// The node to empty for the request, and what stands in the way.
struct Emptying<'f> {
    node: &'f Node,
    /// Every card of the resource there is drained already (the plan is under way).
    drained: bool,
    /// Held: what must end or move (a card drained for this is the drain under way).
    busy: Vec<&'f Card>,
    /// MIG or shared: to lay out whole once idle.
    relayout: Vec<&'f Card>,
}

impl<'f> Emptying<'f> {
    /// Among the schedulable nodes with at least `biggest` healthy cards of `resource`, a node
    /// already drained for it first (its plan under way), then the least to do.
    fn choose(fleet: &'f Fleet, resource: &Resource, biggest: u64) -> Option<Self> {
        let (node, drained, busy, relayout) = fleet
            .nodes
            .iter()
            .filter(|n| n.schedulable)
            .filter_map(|n| {
                let mine: Vec<&Card> =
                    n.cards.iter().filter(|c| c.health.fault().is_none() && whole_of(c, resource)).collect();
                let busy: Vec<&Card> = mine.iter().copied().filter(|c| !c.is_idle()).collect();
                let relayout: Vec<&Card> = mine.iter().copied().filter(|c| not_whole(c)).collect();
                (mine.len() as u64 >= biggest).then_some((n, mine, busy, relayout))
            })
            .min_by_key(|(n, mine, busy, relayout)| {
                (!mine.iter().all(|c| c.draining), busy.len() + relayout.len(), n.name.clone())
            })
            .map(|(n, mine, busy, relayout)| (n, mine.iter().all(|c| c.draining), busy, relayout))?;
        Some(Self { node, drained, busy, relayout })
    }

    /// Who holds the busy cards, the first six by id: `a, b` or `nobody`.
    fn holders(&self) -> String {
        let mut h: Vec<String> = self.busy.iter().flat_map(|c| c.holders().map(str::to_string)).collect();
        h.sort();
        h.dedup();
        if h.is_empty() { "nobody".to_string() } else { h.iter().take(6).cloned().collect::<Vec<_>>().join(", ") }
    }

    /// The cards to lay out whole, as the evidence adds them (empty where none).
    fn relaid(&self) -> String {
        if self.relayout.is_empty() {
            String::new()
        } else {
            let n = crate::units::count(self.relayout.len() as u64, "card", "cards");
            format!("; {n} to lay out whole once idle (MIG or shared now)")
        }
    }

    /// What would give the request, in words: emptying the node, laying its cards out whole.
    fn remedy(&self) -> String {
        let name = &self.node.name;
        match (self.busy.len(), self.relayout.len()) {
            (0, r) => format!("laying out {r} of {name}'s cards whole"),
            (b, 0) => format!("emptying {name} ({b} busy)"),
            (b, r) => format!("emptying {name} ({b} busy) and laying out {r} of its cards whole"),
        }
    }

    /// The node is held first (drained: nothing new lands on the cards it frees), its MIG cards
    /// laid out whole as they empty, then given back for the `biggest`-card job (a card laid out
    /// whole on an undrained node went to the next small job).
    fn suggestion(&self, biggest: u64) -> Suggestion {
        let node = self.node;
        let first_mig = self.relayout.iter().find(|c| c.mig.enabled && c.is_idle());
        match (self.drained, first_mig) {
            (false, _) => Suggestion::Action {
                action: crate::act::Action::Drain { target: node.name.clone(), evict: false },
                why: if self.busy.is_empty() {
                    format!(
                        "no new work lands on {} while its cards are laid out whole for the {biggest}-card job",
                        node.name
                    )
                } else {
                    format!(
                        "no new work lands on {}; as its {} end (or their training is preempted) and its cards are \
                         laid out whole, the {biggest}-card job fits",
                        node.name,
                        crate::units::count(self.busy.len() as u64, "busy card", "busy cards")
                    )
                },
            },
            // Drained for it: what is left is said, one plan per subject (the next pass must not
            // offer a second action for the same wait).
            (true, mig) => {
                let next = match (self.busy.is_empty(), mig, self.relayout.is_empty()) {
                    (true, _, true) => {
                        format!("it is empty and whole: undrain {} for the {biggest}-card job", node.name)
                    }
                    (_, Some(c), _) => format!(
                        "repartition {}/{} whole (idle now), and its other MIG cards as they empty, then undrain {}",
                        node.name, c.index, node.name
                    ),
                    _ => format!(
                        "waiting for its work to end ({} busy); lay its cards out whole, then undrain {}",
                        self.busy.len(),
                        node.name
                    ),
                };
                Suggestion::InProgress {
                    action: crate::act::Action::Drain { target: node.name.clone(), evict: false },
                    text: format!("{} is drained for the {biggest}-card job: {next}", node.name),
                }
            }
        }
    }
}
