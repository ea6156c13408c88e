//! Held but idle (a workload holds GPUs below the idle threshold for the warn or high window)
//! and oversized (a whole card busy at or below 15 % whose memory use fits a MIG instance).

use super::{Context, Finding, Kind, Severity, Subject, Suggestion, gpu_share, minutes, model_of};
use crate::act::Action;
use crate::model::activity::IDLE_BELOW_PCT;
use crate::model::mig::best_fit;
use crate::model::{Fleet, WorkloadKind, WorkloadState};

fn pct(p: Option<f64>) -> String {
    p.map_or_else(|| "unknown".into(), |u| format!("{} %", crate::units::whole(u)))
}

pub(super) fn held_idle(fleet: &Fleet, cx: &Context, out: &mut Vec<Finding>) {
    // A checkpoint dips activity on purpose: not idleness.
    for w in fleet.workloads.iter().filter(|w| w.state == WorkloadState::Running) {
        let Some(a) = w.activity else { continue };
        let idle_for = std::time::Duration::from_secs(a.idle_for_s);
        if idle_for < cx.advisor.idle_warn {
            continue;
        }
        let severity = if idle_for >= cx.advisor.idle_high { Severity::High } else { Severity::Warn };
        let share = gpu_share(fleet, &w.id, &w.cards);
        let model = model_of(fleet, &w.cards);
        let gpu_hours = share * 24.0;
        let on: Vec<String> = w.cards.iter().map(ToString::to_string).collect();
        let ran = w.runtime(cx.now).map(|d| d.to_std().unwrap_or_default());
        let suggestion = match w.kind {
            WorkloadKind::Training if ran.is_some_and(|r| r >= cx.min_runtime) => Suggestion::Action {
                action: Action::Preempt { workload: w.id.clone(), force: false },
                why: "checkpoint it and give the GPUs to the queue; it requeues".into(),
            },
            WorkloadKind::Training => Suggestion::Words {
                text: format!(
                    "under the {} minimum runtime: ask its owner, or wait",
                    minutes(cx.min_runtime.as_secs())
                ),
            },
            WorkloadKind::Inference => {
                Suggestion::Words { text: "scale the service in, or move it to a smaller MIG instance".into() }
            }
            WorkloadKind::Other => Suggestion::Words {
                text: format!(
                    "ask {} to release it: tessera does not end interactive work",
                    w.owner.as_deref().unwrap_or("its owner")
                ),
            },
        };
        out.push(Finding {
            kind: Kind::HeldIdle,
            severity,
            subject: Subject::Workload { id: w.id.clone() },
            title: format!("{} ({}) holds {share:.2} GPU idle for {}", w.name, w.kind.as_str(), minutes(a.idle_for_s)),
            evidence: vec![
                format!(
                    "activity now {}, mean {} over the last {}; below {IDLE_BELOW_PCT:.0} % for {} without a break",
                    pct(a.now_pct),
                    pct(a.mean_pct),
                    minutes(a.covered_s),
                    minutes(a.idle_for_s)
                ),
                format!("holds {} ({})", on.join(", "), model.as_deref().unwrap_or("unknown model")),
            ],
            gpu_hours_per_day: gpu_hours,
            cost_per_day: cx.money(model.as_deref(), gpu_hours),
            suggestion,
            cards: w.cards.clone(),
        });
    }
}

pub(super) fn oversized(fleet: &Fleet, cx: &Context, out: &mut Vec<Finding>) {
    for w in fleet.workloads.iter().filter(|w| w.state == WorkloadState::Running && w.cards.len() == 1) {
        let Some(a) = w.activity else { continue };
        let Some(card) = fleet.card(&w.cards[0]) else { continue };
        // A replica of a shared card is already a part of it (use_mig covers that case); a
        // shard-capable GPU held whole is judged like any whole card.
        let shared = super::holds_share(fleet, w, &w.cards[0]);
        let Some(model) = card.gpu_model().filter(|_| !card.mig.enabled && !shared) else { continue };
        // Idle work is the held-idle rule's; a young or half-seen one is not judged.
        let judged = a.window_covered()
            && a.mean_pct.is_some_and(|m| m <= cx.advisor.oversized_below_pct)
            && std::time::Duration::from_secs(a.idle_for_s) < cx.advisor.idle_warn;
        // Sized on the most it was seen using, not on this moment.
        let (true, Some(used)) = (judged, w.memory_used_mib.max(a.peak_mem_mib)) else { continue };
        let Some(fit) = best_fit(model, used, 1) else { continue };
        let Some(p) = model.profile(&fit.profile).filter(|p| p.memory_slices < model.memory_slices) else { continue };
        let share = f64::from(p.memory_slices) / f64::from(model.memory_slices);
        let gpu_hours = (1.0 - share) * 24.0;
        out.push(Finding {
            kind: Kind::Oversized,
            severity: Severity::Warn,
            subject: Subject::Workload { id: w.id.clone() },
            title: format!("{} uses a whole {} like a {}", w.name, model.name, fit.profile),
            evidence: vec![
                format!("mean activity {} over the last {}", pct(a.mean_pct), minutes(a.covered_s)),
                format!(
                    "peak memory {:.1} GiB; {} holds {:.1} GiB",
                    used as f64 / 1024.0,
                    fit.profile,
                    fit.memory_mib as f64 / 1024.0
                ),
            ],
            gpu_hours_per_day: gpu_hours,
            cost_per_day: cx.money(Some(&model.name), gpu_hours),
            suggestion: Suggestion::Words {
                text: format!(
                    "run it on a {} instance; the rest of the card could serve others (repartition {} when it is free)",
                    fit.profile, w.cards[0]
                ),
            },
            cards: w.cards.clone(),
        });
    }
}
