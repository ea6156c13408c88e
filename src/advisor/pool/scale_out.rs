//! Scale-out: work has waited past the threshold with nothing free and nothing to preempt;
//! what to add, or, where one node could give a multi-card request once emptied, packing.

use super::packing::packing;
use super::{Late, not_whole, whole_of};
use crate::advisor::{Context, Finding, Kind, Subject, Suggestion, minutes};
use crate::model::capacity::Free;
use crate::model::{Fleet, QueueSummary, Resource, Workload, WorkloadState};

/// Adds a scale-out finding for each resource that work not in `served` has waited for past
/// the threshold, short overall or in one node's block; a packing finding where one node could
/// give the largest request once emptied.
pub(in crate::advisor) fn scale_out(
    fleet: &Fleet,
    cx: &Context,
    free: &Free,
    served: &[String],
    out: &mut Vec<Finding>,
) {
    let q = QueueSummary::with_free(fleet, cx.now, free);
    let waiting = waiting_unserved(fleet, cx, served);
    // Short overall, or a request larger than any one node has free.
    for d in q.demand.iter().filter(|d| d.wanted > d.free || d.largest_request > d.largest_block) {
        let Some(late) = Late::of(&waiting, &d.resource, cx, free) else { continue };
        let short = short(fleet, free, &d.resource, &late);
        if short == 0 {
            if late.biggest > late.block
                && let Some(f) = packing(fleet, &d.resource, &late, free.of(&d.resource))
            {
                out.push(f);
            }
            continue;
        }
        out.push(finding(fleet, cx, free, &d.resource, &late, short));
    }
}

/// The waiting work past the threshold that no repartition or preemption would start (not in
/// `served`), with what it asks for: once, not once per resource.
fn waiting_unserved<'f>(fleet: &'f Fleet, cx: &Context, served: &[String]) -> Vec<(&'f Workload, Resource)> {
    let served: std::collections::HashSet<&str> = served.iter().map(String::as_str).collect();
    fleet
        .workloads
        .iter()
        .filter(|w| w.state == WorkloadState::Pending && !served.contains(w.id.as_str()))
        .filter(|w| w.wait(cx.now).and_then(|x| x.to_std().ok()).is_some_and(|x| x >= cx.queue_wait))
        .map(|w| (w, w.request.asks().0))
        .collect()
}

/// The units of `resource` short: what the late work wants beyond what is free, and never less
/// than the largest late request beyond what one node has free (a multi-GPU job needs one
/// node).
fn short(fleet: &Fleet, free: &Free, resource: &Resource, late: &Late) -> u64 {
    // Whole cards: what no node could give even empty is short; a request one node could
    // give once emptied is packing, not a shortage (1,428 free, at most 6 on one node, an
    // 8-GPU job: "add capacity for 2" was wrong).
    let most = most_on_one_node(fleet, resource);
    let beyond_any_node = most.map_or(late.biggest.saturating_sub(late.block), |m| late.biggest.saturating_sub(m));
    // Idle cards drained (for this, or held back by an operator) are not missing hardware.
    let withheld = drained_idle(fleet, resource);
    late.wanted.saturating_sub(free.of(resource) + withheld).max(beyond_any_node)
}

/// The scale-out finding for `resource`: `short` units to add for the late work.
fn finding(fleet: &Fleet, cx: &Context, free: &Free, resource: &Resource, late: &Late, short: u64) -> Finding {
    let Late { wanted, biggest, block, .. } = *late;
    // A share is a part of a card: GPU-hours count the cards the shares make up, at the
    // replicas per card the shared cards of that kind have (unknown there: not counted).
    let (per_gpu, place) = match resource {
        Resource::Shared { unit, model } => {
            (replicas_per_card(fleet, *unit, model.as_deref()), "card (node, where cards are not told apart)")
        }
        _ => (Some(1.0), "node"),
    };
    let gpu_hours = per_gpu.map_or(0.0, |r| short as f64 / r * 24.0);
    Finding {
        kind: Kind::ScaleOut,
        severity: late.severity,
        subject: Subject::Resource { resource: resource.to_string() },
        title: format!(
            "{} waits for {}: {short} short, the oldest for {}",
            late.jobs.len(),
            resource,
            minutes(late.oldest)
        ),
        // What is free against what is wanted, and what one node has free where a request
        // needs several together: "6 free, at most 3 on one node; 1 waiting ... wants 8 together".
        evidence: vec![format!(
            "{} free{}; {} waiting past the threshold ({}) {}",
            crate::units::grouped(free.of(resource)),
            if biggest > 1 { format!(", at most {block} on one {place}") } else { String::new() },
            late.jobs.len(),
            minutes(cx.queue_wait.as_secs()),
            match (late.jobs.len(), biggest > 1) {
                (1, true) => format!("wants {wanted} together"),
                (1, false) => format!("wants {wanted}"),
                (_, true) => format!("want {wanted} in all, the largest {biggest} together"),
                (_, false) => format!("want {wanted} in all"),
            }
        )],
        gpu_hours_per_day: gpu_hours,
        cost_per_day: None,
        suggestion: Suggestion::Words {
            text: format!("add capacity for {short} × {resource} (or repartition a free card for it)"),
        },
        cards: Vec::new(),
    }
}

/// Idle whole cards of `resource` that are drained: capacity held back, not missing.
fn drained_idle(fleet: &Fleet, resource: &crate::model::Resource) -> u64 {
    fleet
        .cards()
        .filter(|(n, c)| {
            n.schedulable && c.draining && c.is_idle() && c.health.fault().is_none() && whole_of(c, resource)
        })
        .filter(|(_, c)| !not_whole(c))
        .count() as u64
}

/// For whole cards: the most cards of `resource` one node has, free or not, whole or to be laid
/// out whole (`None` for other resources, whose blocks this does not judge).
fn most_on_one_node(fleet: &Fleet, resource: &crate::model::Resource) -> Option<u64> {
    matches!(resource, crate::model::Resource::WholeCard { .. }).then(|| {
        fleet
            .nodes
            .iter()
            .filter(|n| n.schedulable)
            .map(|n| n.cards.iter().filter(|c| c.health.fault().is_none() && whole_of(c, resource)).count() as u64)
            .max()
            .unwrap_or(0)
    })
}

/// The replicas per card of the shared cards counting in `unit` (of `model`, where named),
/// where they all agree.
fn replicas_per_card(fleet: &Fleet, unit: crate::model::ShareUnit, model: Option<&str>) -> Option<f64> {
    let mut seen = fleet
        .cards()
        .filter(|(_, c)| c.sharing.unit == Some(unit))
        .filter(|(_, c)| model.is_none_or(|m| crate::model::mig::catalog::model_key(&c.model) == m))
        .filter_map(|(_, c)| c.sharing.replicas);
    let first = seen.next()?;
    seen.all(|r| r == first).then_some(f64::from(first.max(1)))
}
