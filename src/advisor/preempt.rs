//! Preemption candidates: for inference that has waited past the threshold with nothing free
//! of what it asks for, the running training (past its minimum runtime) whose GPUs would start
//! it (unless a repartition of idle cards would), the one that frees just enough and has run the shortest first (the least work to redo
//! where the last checkpoint is unknown).

use super::{Context, Finding, Kind, Severity, Subject, Suggestion, gpu_share};
use crate::act::Action;
use crate::model::capacity::Free;
use crate::model::mig::catalog::model_key;
use crate::model::{Fleet, Resource, Workload, WorkloadKind, WorkloadState};

/// Units of `res` that preempting `t` would free on one node (the most on any of its nodes):
/// only usable cards count, since work cannot start on a failing or drained one.
fn frees(fleet: &Fleet, t: &Workload, res: &Resource) -> u64 {
    let mut per_node: std::collections::BTreeMap<&str, u64> = std::collections::BTreeMap::new();
    for r in &t.cards {
        let (Some(node), Some(c)) = (fleet.nodes.iter().find(|n| n.name == r.node), fleet.card(r)) else { continue };
        if !crate::model::capacity::usable(node, c) {
            continue;
        }
        let units = match res {
            Resource::MigInstance { profile } => {
                c.mig.instances.iter().filter(|i| &i.profile == profile && i.workloads.contains(&t.id)).count() as u64
            }
            Resource::WholeCard { model } => {
                let fits = model.as_deref().is_none_or(|m| model_key(&c.model) == m);
                // Only a card it holds alone, and not as a replica of a shared one, comes free.
                let alone = c.holders().all(|h| h == t.id) && !super::holds_share(fleet, t, r);
                u64::from(!c.mig.enabled && fits && alone)
            }
            // Which replicas a holder of a shared card uses is not known per holder.
            Resource::Shared { .. } => 0,
        };
        *per_node.entry(r.node.as_str()).or_default() += units;
    }
    per_node.into_values().max().unwrap_or(0)
}

pub(super) fn candidates(fleet: &Fleet, cx: &Context, free: &Free, served: &[String], out: &mut Vec<Finding>) {
    let mut eligible: Vec<&Workload> = fleet
        .workloads
        .iter()
        .filter(|t| t.kind == WorkloadKind::Training && t.state == WorkloadState::Running)
        .filter(|t| t.runtime(cx.now).and_then(|d| d.to_std().ok()).is_some_and(|r| r >= cx.min_runtime))
        .collect();
    // Training already checkpointing (a preemption under way) frees its GPUs soon: the work
    // it would start waits for it, and no second victim is chosen for that work.
    let mut under_way: Vec<&Workload> = fleet
        .workloads
        .iter()
        .filter(|t| t.kind == WorkloadKind::Training && t.state == WorkloadState::Checkpointing)
        .collect();
    let served: std::collections::HashSet<&str> = served.iter().map(String::as_str).collect();
    let mut blocks = Blocks { free, known: Vec::new() };
    for w in fleet.workloads.iter().filter(|w| w.state == WorkloadState::Pending && w.kind == WorkloadKind::Inference) {
        let Some(waited) = w.wait(cx.now).and_then(|d| d.to_std().ok()) else { continue };
        let (res, need) = w.request.asks();
        // Several GPUs must be on one node: what one node has free is what counts.
        if waited < cx.queue_wait || blocks.largest(&res) >= need || served.contains(w.id.as_str()) {
            continue;
        }
        if let Some((units, t)) = take_under_way(&mut under_way, fleet, &res, need) {
            out.push(in_progress(fleet, cx, w, t, (&res, need, units), waited));
            continue;
        }
        // A victim frees its GPUs once: the next waiting job needs another (or capacity).
        let Some((units, t)) = take_victim(&mut eligible, fleet, cx, &res, need) else { continue };
        out.push(proposed(fleet, cx, free, w, t, (&res, need, units), waited));
    }
}

/// Each resource's largest free block, worked out once: a walk over every node, and
/// hundreds of waiting requests ask for a few resources.
struct Blocks<'a> {
    free: &'a Free,
    known: Vec<(Resource, u64)>,
}

impl Blocks<'_> {
    /// The most units of `res` free on one node.
    fn largest(&mut self, res: &Resource) -> u64 {
        match self.known.iter().find(|(r, _)| r == res) {
            Some((_, b)) => *b,
            None => {
                let b = self.free.largest_block(res);
                self.known.push((res.clone(), b));
                b
            }
        }
    }
}

/// The workload of `list` that frees at least `need` units of `res` and the fewest of them
/// (ties to the least `then`, then the first), taken out with the units it frees.
fn take_least<'f>(
    list: &mut Vec<&'f Workload>,
    fleet: &Fleet,
    res: &Resource,
    need: u64,
    then: impl Fn(&Workload) -> i64,
) -> Option<(u64, &'f Workload)> {
    let (units, _, i) = list
        .iter()
        .enumerate()
        .map(|(i, t)| (frees(fleet, t, res), then(t), i))
        .filter(|(units, ..)| *units >= need)
        .min_by_key(|(units, then, _)| (*units, *then))?;
    Some((units, list.remove(i)))
}

/// The checkpointing training (of `under_way`) that frees at least `need` units of `res`,
/// the least of them first, taken out with the units it frees.
fn take_under_way<'f>(
    under_way: &mut Vec<&'f Workload>,
    fleet: &Fleet,
    res: &Resource,
    need: u64,
) -> Option<(u64, &'f Workload)> {
    take_least(under_way, fleet, res, need, |_| 0)
}

/// The eligible training (of `eligible`) that frees just enough of `res` for `need` and has
/// run the shortest, taken out with the units it frees.
fn take_victim<'f>(
    eligible: &mut Vec<&'f Workload>,
    fleet: &Fleet,
    cx: &Context,
    res: &Resource,
    need: u64,
) -> Option<(u64, &'f Workload)> {
    take_least(eligible, fleet, res, need, |t| t.runtime(cx.now).map_or(i64::MAX, |d| d.num_seconds()))
}

/// The finding that proposes preempting `t` for waiting `w`.
fn proposed(
    fleet: &Fleet,
    cx: &Context,
    free: &Free,
    w: &Workload,
    t: &Workload,
    (res, need, units): (&Resource, u64, u64),
    waited: std::time::Duration,
) -> Finding {
    let ran = t.runtime(cx.now).map_or(0, |d| d.num_seconds().max(0) as u64);
    Finding {
        title: format!(
            "{} ({res}) has waited {}: preempting {} would start it",
            w.name,
            super::minutes(waited.as_secs()),
            t.id
        ),
        evidence: vec![
            format!(
                "{}; waited {} (threshold {})",
                free_against_wanted(free, res, need),
                super::minutes(waited.as_secs()),
                super::minutes(cx.queue_wait.as_secs())
            ),
            format!(
                "{} ({}) has run {} (minimum {}) and holds {units} of it",
                t.id,
                t.name,
                super::minutes(ran),
                super::minutes(cx.min_runtime.as_secs())
            ),
        ],
        suggestion: Suggestion::Action {
            action: Action::Preempt { workload: t.id.clone(), force: false },
            why: format!("inference first: {} checkpoints and requeues, {} starts", t.id, w.id),
        },
        ..serving(fleet, cx, w, t, units, waited)
    }
}

/// What every preemption finding for waiting `w` says the same way, whether the preemption of
/// `t` is proposed or under way: its kind, severity (high past twice the threshold), subject,
/// cost and cards; the caller sets the title, evidence and suggestion.
fn serving(
    fleet: &Fleet,
    cx: &Context,
    w: &Workload,
    t: &Workload,
    units: u64,
    waited: std::time::Duration,
) -> Finding {
    Finding {
        kind: Kind::PreemptionCandidate,
        severity: if waited >= cx.queue_wait * 2 { Severity::High } else { Severity::Warn },
        subject: Subject::Workload { id: w.id.clone() },
        title: String::new(),
        evidence: Vec::new(),
        gpu_hours_per_day: gpu_share(fleet, &t.id, &t.cards).min(units as f64) * 24.0,
        cost_per_day: None,
        suggestion: Suggestion::Words { text: String::new() },
        cards: t.cards.clone(),
    }
}

/// What is free of `res` against the `need` units one request wants: "6 free, at most 3 on
/// one node; it wants 4 together" (several units must be on one node), "0 free; it wants 1".
pub(super) fn free_against_wanted(free: &Free, res: &Resource, need: u64) -> String {
    if need > 1 {
        format!("{} free, at most {} on one node; it wants {need} together", free.of(res), free.largest_block(res))
    } else {
        format!("{} free; it wants {need}", free.of(res))
    }
}

/// The finding for waiting work that the preemption of `t`, already under way, will start.
fn in_progress(
    fleet: &Fleet,
    cx: &Context,
    w: &Workload,
    t: &Workload,
    (res, need, units): (&Resource, u64, u64),
    waited: std::time::Duration,
) -> Finding {
    Finding {
        title: format!(
            "{} ({res}) has waited {}: preempting {} (under way) will start it",
            w.name,
            super::minutes(waited.as_secs()),
            t.id
        ),
        evidence: vec![format!(
            "{} is checkpointing and holds {units}; it wants {need}{}; waited {} (threshold {})",
            t.id,
            if need > 1 { " together" } else { "" },
            super::minutes(waited.as_secs()),
            super::minutes(cx.queue_wait.as_secs())
        )],
        suggestion: Suggestion::InProgress {
            action: Action::Preempt { workload: t.id.clone(), force: false },
            text: format!("preempting {}: it is checkpointing, then it requeues and {} starts", t.id, w.id),
        },
        ..serving(fleet, cx, w, t, units, waited)
    }
}
