//! Sharing rules: interference (training beside latency-sensitive inference on a card without
//! isolation: time-sliced or MPS; MIG isolates, so never there), crowding (replicas or
//! contexts near the limit with memory nearly full: the next allocation may run out of
//! memory), and "use MIG instead" (a MIG-capable card time-sliced between workloads that would
//! each fit an instance). NVML and DCGM give no context-switch rate: the evidence counts
//! contexts and replicas instead.

use super::{Context, Finding, Kind, Severity, Subject, Suggestion};
use crate::act::Action;
use crate::model::mig::{LayoutSpec, best_fit, parse_layout};
use crate::model::{Card, CardRef, Fleet, Node, SharingMode, Workload, WorkloadKind};

/// Running workloads holding `card`, in holder order.
fn holders<'f>(fleet: &'f Fleet, card: &Card) -> Vec<&'f Workload> {
    card.workloads.iter().filter_map(|id| fleet.workload(id)).filter(|w| w.state.is_active()).collect()
}

fn mode_words(mode: SharingMode) -> &'static str {
    match mode {
        SharingMode::TimeSliced => "time-sliced (no memory or fault isolation)",
        SharingMode::Mps => {
            "MPS (clients share the card's memory, capped only where limits are set; a fatal fault in one can end them all)"
        }
        SharingMode::Exclusive | SharingMode::Mig | SharingMode::Partitioned | SharingMode::DraDynamic => "isolated",
    }
}

/// `3 of 4 replicas in use, 3 contexts`, with what is unknown said so.
fn occupancy(card: &Card) -> String {
    let s = &card.sharing;
    let units = card.share_unit().plural();
    let replicas = match (s.replicas_used, s.replicas) {
        (Some(u), Some(r)) => format!("{u} of {r} {units} in use"),
        (None, Some(r)) => format!("{r} {units}, in use per card not reported"),
        (_, None) => "replicas not configured by a scheduler".into(),
    };
    let contexts = match s.contexts {
        None => "contexts unknown (no NVML process list)".into(),
        Some(1) => "1 context".into(),
        Some(c) => format!("{c} contexts"),
    };
    format!("{replicas}, {contexts}")
}

fn names(ws: &[&Workload]) -> String {
    ws.iter().map(|w| format!("{} ({})", w.name, w.id)).collect::<Vec<_>>().join(", ")
}

fn unisolated(node: &Node, card: &Card) -> Option<(CardRef, SharingMode)> {
    let mode = card.sharing_mode().filter(|m| m.unisolated())?;
    Some((CardRef::new(node.name.clone(), card.index), mode))
}

pub(super) fn interference(fleet: &Fleet, out: &mut Vec<Finding>) {
    for (node, card) in fleet.cards() {
        let Some((r, mode)) = unisolated(node, card) else { continue };
        let on = holders(fleet, card);
        let training: Vec<&Workload> = on.iter().copied().filter(|w| w.kind == WorkloadKind::Training).collect();
        let inference: Vec<&Workload> = on.iter().copied().filter(|w| w.kind == WorkloadKind::Inference).collect();
        if training.is_empty() || inference.is_empty() {
            continue;
        }
        let what = if mode == SharingMode::Mps { "MPS" } else { "time-sliced" };
        out.push(Finding {
            kind: Kind::Interference,
            severity: Severity::High,
            subject: Subject::Card { card: r.to_string() },
            title: format!("training and inference share {what} card {r}: inference latency suffers"),
            evidence: vec![
                format!("{r} is {}: {}", mode_words(mode), occupancy(card)),
                format!("training: {}", names(&training)),
                format!("latency-sensitive inference: {}", names(&inference)),
                format!(
                    "without isolation the inference {} and shares its memory (MIG isolates; NVML and DCGM \
                     report no context-switch rate, so contexts are counted instead)",
                    if mode == SharingMode::Mps {
                        "competes with the training's kernels for the card's SMs"
                    } else {
                        "waits for the training's time slices"
                    }
                ),
            ],
            gpu_hours_per_day: 0.0,
            cost_per_day: None,
            suggestion: Suggestion::Words {
                text: format!(
                    "move {} to an exclusive card or a MIG instance (Kubernetes: a node without sharing; Slurm: \
                     --gres=gpu rather than shard), or give the inference its own",
                    training.iter().map(|w| w.name.as_str()).collect::<Vec<_>>().join(", ")
                ),
            },
            cards: vec![r],
        });
    }
}

pub(super) fn crowded(fleet: &Fleet, cx: &Context, out: &mut Vec<Finding>) {
    for (node, card) in fleet.cards() {
        let Some((r, mode)) = unisolated(node, card) else { continue };
        let (Some(used), Some(total)) = (card.memory_used_mib, card.memory_total_mib.filter(|&t| t > 0)) else {
            continue;
        };
        let mem_pct = used as f64 * 100.0 / total as f64;
        let in_use = card.sharing.replicas_used.or(card.sharing.contexts);
        let limit = card.sharing.replicas;
        // Crowding needs neighbours: two or more holders or contexts (one job's shard:4 of 4
        // crowds nobody). Near the limit: at most one unit left, or, with no replicas
        // configured, two or more contexts on one card's memory.
        let clients = card.workloads.len().max(card.sharing.contexts.unwrap_or(0) as usize);
        let (near, full) = match (in_use, limit) {
            (Some(u), Some(l)) => (clients >= 2 && u + 1 >= l, u >= l),
            (Some(_), None) => (clients >= 2, false),
            (None, _) => (false, false),
        };
        if !near || mem_pct < cx.advisor.crowded_memory_pct {
            continue;
        }
        let mut evidence = vec![
            format!("{r} is {}: {}", mode_words(mode), occupancy(card)),
            format!(
                "memory {:.1} of {:.1} GiB in use ({mem_pct:.0} %, threshold {:.0} %)",
                used as f64 / 1024.0,
                total as f64 / 1024.0,
                cx.advisor.crowded_memory_pct
            ),
        ];
        if let Some(limit) = card.sharing.mps_memory_limit_mib {
            evidence.push(format!("MPS limits each client to {:.1} GiB", limit as f64 / 1024.0));
        }
        let on = holders(fleet, card);
        if !on.is_empty() {
            evidence.push(format!("holders: {}", names(&on)));
        }
        out.push(Finding {
            kind: Kind::Crowded,
            severity: if full { Severity::High } else { Severity::Warn },
            subject: Subject::Card { card: r.to_string() },
            title: format!("{r} is crowded: {mem_pct:.0} % of memory with {} - out-of-memory risk", occupancy(card)),
            evidence,
            gpu_hours_per_day: 0.0,
            cost_per_day: None,
            suggestion: Suggestion::Action {
                action: Action::Drain { target: r.to_string(), evict: false },
                why: "no new replica lands on it; what runs keeps running".into(),
            },
            cards: vec![r],
        });
    }
}

pub(super) fn use_mig(fleet: &Fleet, out: &mut Vec<Finding>) {
    for (node, card) in fleet.cards() {
        let Some((r, mode)) = unisolated(node, card) else { continue };
        let Some(model) = card.gpu_model() else { continue };
        let on = holders(fleet, card);
        if on.len() < 2 || mode != SharingMode::TimeSliced {
            continue;
        }
        // Each holder's peak memory (its own, where the card is shared) must fit a profile.
        let mut fits = Vec::new();
        for w in &on {
            let need = w.activity.and_then(|a| a.peak_mem_mib).or(w.memory_used_mib);
            let Some(fit) = need.and_then(|m| best_fit(model, m, 1)) else { break };
            fits.push((w, need.unwrap_or(0), fit.profile));
        }
        if fits.len() != on.len() {
            continue;
        }
        let text: Vec<&str> = fits.iter().map(|(_, _, p)| p.as_str()).collect();
        let Ok(LayoutSpec::Mig(layout)) = parse_layout(model, &text.join(",")) else { continue };
        let mut placed: Vec<(u8, String)> =
            layout.iter().map(|p| (p.start, format!("{}@{}", p.profile, p.start))).collect();
        placed.sort();
        let layout_text = placed.into_iter().map(|(_, t)| t).collect::<Vec<_>>().join(",");
        let each: Vec<String> = fits
            .iter()
            .map(|(w, need, p)| format!("{} uses {:.1} GiB: fits {p}", w.name, *need as f64 / 1024.0))
            .collect();
        out.push(Finding {
            kind: Kind::UseMig,
            severity: Severity::Info,
            subject: Subject::Card { card: r.to_string() },
            title: format!("{r} ({}) is time-sliced between {} workloads that MIG could isolate", model.name, on.len()),
            evidence: vec![
                format!("{r} is {}: {}", mode_words(mode), occupancy(card)),
                each.join("; "),
                format!("one layout holds them all: {layout_text}"),
            ],
            gpu_hours_per_day: 0.0,
            cost_per_day: None,
            suggestion: Suggestion::Action {
                action: Action::Drain { target: r.to_string(), evict: false },
                why: format!(
                    "once its workloads have moved, repartition it to {layout_text} and serve each from its own \
                     instance (the device plugin's sharing config changes with it)"
                ),
            },
            cards: vec![r],
        });
    }
}

#[cfg(test)]
#[path = "sharing_tests.rs"]
mod tests;
