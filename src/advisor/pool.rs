//! Pools of one GPU model: scale-in (the pool's mean activity, whole and MIG cards alike, over
//! the last hour under `[policy] scale_in_utilization_pct`: how many cards the present work needs at that target,
//! how many could be released), scale-out (work has waited past the threshold with nothing
//! free and nothing to preempt: what to add), and fragmentation (free MIG slices no profile
//! can use next to the instances there).

use std::collections::BTreeMap;

use super::{Context, Finding, Kind, Severity, Subject, Suggestion, minutes};
use crate::model::activity::HOUR_MIN;
use crate::model::capacity::{Free, model_key, usable};
use crate::model::{CardRef, Fleet, QueueSummary, WorkloadState};

pub(super) fn scale_in(fleet: &Fleet, cx: &Context, target_pct: f64, out: &mut Vec<Finding>) {
    // Per model: cards, activity summed over the last hour (a whole card: its holder's mean; a
    // MIG card: its instances' holders' means weighted by slices; idle parts add 0), and
    // whether every holder is covered, its hour or at least 30 minutes of it (else: no
    // activity data, no finding).
    let mut pools: BTreeMap<String, (usize, f64, bool)> = BTreeMap::new();
    // Work younger than an hour counts its covered 30-minute mean.
    let mean = |id: &str| {
        let a = fleet.workload(id).and_then(|w| w.activity)?;
        a.mean_1h_pct.or(a.mean_pct.filter(|_| a.window_covered()))
    };
    for (_, c) in fleet.cards().filter(|(n, c)| usable(n, c)) {
        let e = pools.entry(model_key(&c.model)).or_insert((0, 0.0, true));
        e.0 += 1;
        // Busy with nobody to ask: the pool's activity is unknown.
        if c.in_use_by_unknown() {
            e.2 = false;
            continue;
        }
        if c.mig.enabled {
            // An instance weighs its share of the card's compute (a 1g of seven is 1/7).
            let Some(model) = c.gpu_model() else {
                e.2 = false;
                continue;
            };
            let compute = f64::from(model.profiles.iter().map(|p| p.compute_slices).max().unwrap_or(1).max(1));
            for i in c.mig.instances.iter().filter(|i| !i.workloads.is_empty()) {
                let share = model.profile(&i.profile).map_or(0.0, |p| f64::from(p.compute_slices)) / compute;
                let means: Vec<Option<f64>> = i.workloads.iter().map(|h| mean(h)).collect();
                if means.iter().any(Option::is_none) {
                    e.2 = false;
                }
                e.1 += means.into_iter().flatten().fold(0.0, f64::max) * share;
            }
            continue;
        }
        let holders: Vec<&str> = c.holders().collect();
        if holders.is_empty() {
            continue;
        }
        e.2 &= holders.iter().all(|h| mean(h).is_some());
        e.1 += holders.iter().filter_map(|h| mean(h)).fold(0.0, f64::max);
    }
    for (model, (cards, sum, known)) in pools {
        if !known || cards < 2 {
            continue;
        }
        let mean = sum / cards as f64;
        if mean >= target_pct {
            continue;
        }
        let needed = ((sum / target_pct.max(1.0)).ceil() as usize).max(1);
        let spare = cards.saturating_sub(needed);
        if spare == 0 {
            continue;
        }
        let gpu_hours = spare as f64 * 24.0;
        out.push(Finding {
            kind: Kind::ScaleIn,
            severity: Severity::Info,
            subject: Subject::Pool { model: model.clone() },
            title: format!("{model} cards average {mean:.0} %: {needed} of {cards} would carry the work"),
            evidence: vec![format!(
                "mean activity {mean:.0} % over the last {} (30m for work younger than that) across {cards} usable cards, MIG instances weighted by their share of compute (target {target_pct:.0} %)",
                minutes((HOUR_MIN * 60) as u64)
            )],
            gpu_hours_per_day: gpu_hours,
            cost_per_day: cx.money(Some(&model), gpu_hours),
            suggestion: Suggestion::Words {
                text: format!("release or lend {spare} {model} cards, or pack the work onto {needed} (scale-in)"),
            },
            cards: Vec::new(),
        });
    }
}

pub(super) fn scale_out(fleet: &Fleet, cx: &Context, free: &Free, served: &[String], out: &mut Vec<Finding>) {
    let q = QueueSummary::with_free(fleet, cx.now, free);
    // The waiting work past the threshold that no repartition or preemption would start, with
    // what it asks for: once, not once per resource.
    let served: std::collections::HashSet<&str> = served.iter().map(String::as_str).collect();
    let waiting: Vec<(&crate::model::Workload, crate::model::Resource)> = fleet
        .workloads
        .iter()
        .filter(|w| w.state == WorkloadState::Pending && !served.contains(w.id.as_str()))
        .filter(|w| w.wait(cx.now).and_then(|x| x.to_std().ok()).is_some_and(|x| x >= cx.queue_wait))
        .map(|w| (w, w.request.asks().0))
        .collect();
    // Short overall, or a request larger than any one node has free.
    for d in q.demand.iter().filter(|d| d.wanted > d.free || d.largest_request > d.largest_block) {
        let late: Vec<&crate::model::Workload> =
            waiting.iter().filter(|(_, r)| *r == d.resource).map(|(w, _)| *w).collect();
        let Some(oldest) = late.iter().filter_map(|w| w.wait(cx.now)).map(|x| x.num_seconds().max(0) as u64).max()
        else {
            continue;
        };
        // Short: what the late work wants beyond what is free, and never less than the largest
        // late request beyond what one node has free (a multi-GPU job needs one node).
        let units = |w: &&crate::model::Workload| w.request.asks().1;
        let wanted: u64 = late.iter().map(units).sum();
        let biggest = late.iter().map(units).max().unwrap_or(0);
        let block = free.largest_block(&d.resource);
        let short = wanted.saturating_sub(free.of(&d.resource)).max(biggest.saturating_sub(block));
        if short == 0 {
            continue;
        }
        let severity = if oldest >= cx.queue_wait.as_secs() * 2 { Severity::High } else { Severity::Warn };
        // A share is a part of a card: GPU-hours count the cards the shares make up, at the
        // replicas per card the shared cards of that kind have (unknown there: not counted).
        let (per_gpu, place) = match &d.resource {
            crate::model::Resource::Shared { unit, model } => {
                (replicas_per_card(fleet, *unit, model.as_deref()), "card (node, where cards are not told apart)")
            }
            _ => (Some(1.0), "node"),
        };
        let gpu_hours = per_gpu.map_or(0.0, |r| short as f64 / r * 24.0);
        out.push(Finding {
            kind: Kind::ScaleOut,
            severity,
            subject: Subject::Resource { resource: d.resource.to_string() },
            title: format!(
                "{} waits for {}: {short} short, the oldest for {}",
                late.len(),
                d.resource,
                minutes(oldest)
            ),
            evidence: vec![format!(
                "{} waiting past the threshold ({}) want {wanted} units; {} free now, at most {block} on one {place}",
                late.len(),
                minutes(cx.queue_wait.as_secs()),
                free.of(&d.resource)
            )],
            gpu_hours_per_day: gpu_hours,
            cost_per_day: None,
            suggestion: Suggestion::Words {
                text: format!("add capacity for {short} × {} (or repartition a free card for it)", d.resource),
            },
            cards: Vec::new(),
        });
    }
}

/// The replicas per card of the shared cards counting in `unit` (of `model`, where named),
/// where they all agree.
fn replicas_per_card(fleet: &Fleet, unit: crate::model::ShareUnit, model: Option<&str>) -> Option<f64> {
    let mut seen = fleet
        .cards()
        .filter(|(_, c)| c.sharing.unit == Some(unit))
        .filter(|(_, c)| model.is_none_or(|m| crate::model::capacity::model_key(&c.model) == m))
        .filter_map(|(_, c)| c.sharing.replicas);
    let first = seen.next()?;
    seen.all(|r| r == first).then_some(f64::from(first.max(1)))
}

pub(super) fn fragmentation(fleet: &Fleet, cx: &Context, out: &mut Vec<Finding>) {
    for (n, c) in fleet.cards().filter(|(n, c)| c.mig.enabled && usable(n, c)) {
        let (Some(free), Some(model)) = (c.free_slice_mask(), c.gpu_model()) else { continue };
        let stranded = (free & !c.reachable_slices()).count_ones();
        if stranded == 0 {
            continue;
        }
        let r = CardRef::new(n.name.clone(), c.index);
        let share = f64::from(stranded) / f64::from(model.memory_slices);
        out.push(Finding {
            kind: Kind::Fragmentation,
            severity: Severity::Info,
            subject: Subject::Card { card: r.to_string() },
            title: format!(
                "{r}: {} no profile can use next to {}",
                crate::units::count(stranded, "memory slice", "memory slices"),
                c.layout_text()
            ),
            evidence: vec![format!(
                "free slices {}, of which {stranded} unreachable by any profile",
                free.count_ones()
            )],
            gpu_hours_per_day: share * 24.0,
            cost_per_day: cx.money(Some(&model.name), share * 24.0),
            suggestion: Suggestion::Words {
                text: "a layout without stranded slices when the card is next free (tessera layouts lists them)".into(),
            },
            cards: vec![r],
        });
    }
}
