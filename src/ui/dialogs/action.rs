//! One action's dialogs: the repartition picker, the confirmation rendered from a plan
//! (typing the target's name for destructive actions, a second question for a forced
//! preemption) and the running action's progress; their keys, requests out.

use crossterm::event::{KeyCode, KeyEvent};

use super::modal::{Answer, Choice, Modal, Request, StepState};
use crate::actions::{Action, Outcome, Plan};
use crate::model::mig::{enumerate, lookup};
use crate::model::{Card, CardRef, Fleet, capacity};
use crate::ui::sheet::{Scroll, Sheet, Tone};

/// How an action ended, in one line for the footer.
pub fn verdict(plan: &Plan, o: &Outcome) -> String {
    let v = if o.ok { "done".to_string() } else { format!("FAILED: {}", o.reached) };
    format!("{} {}: {v}", plan.action.verb(), plan.target)
}

/// Why a card has no layout picker.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PickerError {
    /// The card's model, as reported, is not in the MIG catalog.
    #[error("{0}: GPU model not in the MIG catalog")]
    NotInCatalog(String),
}

/// The picker for a card: every maximal layout of its model and `whole`, each with how many
/// queued workloads the card would start once laid out so (one instance or the whole card per
/// workload; a job wanting more than the card has is not counted). First (and selected) the
/// planner's layout for this card and the waiting work, the one `:fit` and the layout plan
/// give; then the most useful first; the current layout is marked.
pub fn picker(fleet: &Fleet, r: &CardRef, card: &Card) -> Result<Modal, PickerError> {
    let model = lookup(&card.model).ok_or_else(|| PickerError::NotInCatalog(card.model.clone()))?;
    let pending: Vec<&crate::model::Workload> =
        fleet.workloads.iter().filter(|w| w.state == crate::model::WorkloadState::Pending).collect();
    let whole_fits = capacity::card_would_serve(&model.name, None, &pending);
    if kubernetes_only(fleet, &r.node) {
        return Ok(config_picker(r, card, model, &pending, whole_fits));
    }
    let current = if card.mig.enabled {
        let mut now: Vec<(u8, String)> = card.mig.instances.iter().map(|i| (i.start, i.profile.clone())).collect();
        now.sort();
        now.into_iter().map(|(s, p)| format!("{p}@{s}")).collect::<Vec<_>>().join(",")
    } else {
        "whole".into()
    };
    let mut choices = vec![Choice { layout: "whole".into(), fits: whole_fits, current: !card.mig.enabled }];
    for layout in enumerate(model) {
        let mut sorted: Vec<(u8, String)> = layout.iter().map(|p| (p.start, p.profile.clone())).collect();
        sorted.sort();
        let text = sorted.into_iter().map(|(s, p)| format!("{p}@{s}")).collect::<Vec<_>>().join(",");
        let fits = capacity::card_would_serve(&model.name, Some(&layout), &pending);
        choices.push(Choice { current: card.mig.enabled && text == current, layout: text, fits });
    }
    // The planner's answer first, then the most useful; ties keep the catalog order.
    let now = fleet.taken_at.unwrap_or_default();
    let planned = crate::advisor::planner::card_layout(fleet, r, &crate::advisor::planner::Ask::Waiting, now);
    choices.sort_by_key(|c| (Some(&c.layout) != planned.as_ref(), std::cmp::Reverse(c.fits)));
    Ok(Modal::Picker { card: r.clone(), choices, selected: 0, current })
}

/// Only Kubernetes can act on this node: it takes named configs, not layouts.
fn kubernetes_only(fleet: &Fleet, node: &str) -> bool {
    use crate::model::SourceKind;
    let Some(n) = fleet.nodes.iter().find(|n| n.name == node) else { return false };
    let kinds: Vec<SourceKind> =
        n.sources.iter().filter_map(|s| fleet.sources.iter().find(|x| x.name == *s).map(|x| x.kind)).collect();
    kinds.contains(&SourceKind::Kubernetes)
        && !kinds.iter().any(|k| matches!(k, SourceKind::Simulated | SourceKind::Nvml))
}

/// The GPU Operator's stock mig-parted configs for this model: `all-disabled`, `all-balanced`
/// and `all-<profile>` (site-defined names are typed on the command line).
fn config_picker(
    r: &CardRef,
    card: &Card,
    model: &crate::model::mig::GpuModel,
    pending: &[&crate::model::Workload],
    whole_fits: u64,
) -> Modal {
    let mut choices = vec![Choice { layout: "all-disabled".into(), fits: whole_fits, current: false }];
    choices.push(Choice { layout: "all-balanced".into(), fits: 0, current: false });
    for p in model.profiles.iter().filter(|p| !p.has_media_extensions()) {
        let fits = capacity::profile_serves(&p.name, pending);
        choices.push(Choice { layout: format!("all-{}", p.name), fits, current: false });
    }
    let current = card.mig.error.clone().unwrap_or_else(|| "MIG off".into());
    Modal::Picker { card: r.clone(), choices, selected: 0, current }
}

pub(super) fn answer(modal: &mut Modal, k: &KeyEvent) -> Answer {
    match modal {
        Modal::Picker { card, choices, selected, .. } => picker_key(card, choices, selected, k),
        Modal::Confirm { plan, typed, second, mismatch, .. } => confirm_key(plan, typed, second, mismatch, k),
        Modal::Group { .. } | Modal::GroupRunning { .. } => super::group::on_key(modal, k),
        Modal::Running { plan, outcome, .. } => running_key(plan, outcome.as_ref(), k),
    }
}

/// A key in the layout picker: move, cancel, or plan the layout chosen.
fn picker_key(card: &CardRef, choices: &[Choice], selected: &mut usize, k: &KeyEvent) -> Answer {
    match k.code {
        KeyCode::Esc => Answer::Close("repartition cancelled: nothing done".into()),
        KeyCode::Down | KeyCode::Char('j') => {
            *selected = (*selected + 1).min(choices.len().saturating_sub(1));
            Answer::Stay
        }
        KeyCode::Up | KeyCode::Char('k') => {
            *selected = selected.saturating_sub(1);
            Answer::Stay
        }
        KeyCode::Enter => match choices.get(*selected) {
            Some(c) => Answer::Request(Request::Plan(Action::Repartition {
                target: card.to_string(),
                layout: c.layout.clone(),
            })),
            None => Answer::Stay,
        },
        _ => Answer::Stay,
    }
}

/// A key in a confirmation: the typed name, a yes, the second question, or what a refused
/// plan offers instead (a drain first, a forced undrain).
fn confirm_key(plan: &Plan, typed: &mut String, second: &mut bool, mismatch: &mut bool, k: &KeyEvent) -> Answer {
    *mismatch = false;
    let cancelled = || Answer::Close(format!("{} {} cancelled: nothing done", plan.action.verb(), plan.target));
    if k.code == KeyCode::Esc {
        if !plan.allowed() {
            return Answer::Close(format!("{} {} refused: nothing done", plan.action.verb(), plan.target));
        }
        return cancelled();
    }
    if !plan.allowed() {
        // A busy card cannot be repartitioned: offer the first step, a drain. An
        // unhealthy card's undrain may be forced, with a second question.
        return match (&plan.action, k.code) {
            (Action::Repartition { target, .. }, KeyCode::Char('d')) if offers_drain(plan) => {
                Answer::Request(Request::Plan(Action::Drain { target: target.clone(), evict: false }))
            }
            (Action::Undrain { target, force: false }, KeyCode::Char('f')) if offers_force(plan) => {
                Answer::Request(Request::Plan(Action::Undrain { target: target.clone(), force: true }))
            }
            _ => Answer::Stay,
        };
    }
    if *second {
        return match k.code {
            KeyCode::Char('y') => Answer::Request(Request::Execute(Box::new(plan.clone()))),
            KeyCode::Char('n') => cancelled(),
            _ => Answer::Stay,
        };
    }
    let confirmed = if plan.destructive {
        match k.code {
            KeyCode::Char(c) => {
                typed.push(c);
                false
            }
            KeyCode::Backspace => {
                typed.pop();
                false
            }
            KeyCode::Enter => {
                *mismatch = *typed != plan.target;
                !*mismatch
            }
            _ => false,
        }
    } else {
        // Only a y: an Enter meant for the view behind must not act on a card.
        k.code == KeyCode::Char('y')
    };
    if !confirmed {
        return if k.code == KeyCode::Char('n') && !plan.destructive { cancelled() } else { Answer::Stay };
    }
    if plan.second_confirmation.is_some() {
        *second = true;
        return Answer::Stay;
    }
    Answer::Request(Request::Execute(Box::new(plan.clone())))
}

/// A key in a running action's dialog: close it once it ended, hide it while it runs.
fn running_key(plan: &Plan, outcome: Option<&Outcome>, k: &KeyEvent) -> Answer {
    match (k.code, outcome) {
        (KeyCode::Esc | KeyCode::Enter, Some(o)) => Answer::Close(verdict(plan, o)),
        // The action runs on; the operator may look elsewhere meanwhile.
        (KeyCode::Esc, None) => Answer::Hide,
        _ => Answer::Stay,
    }
}

/// A refused undrain of an unhealthy card: forcing it (asked twice) is possible.
pub fn offers_force(plan: &Plan) -> bool {
    matches!(plan.action, Action::Undrain { force: false, .. })
        && !plan.blockers.is_empty()
        && plan.blockers.iter().all(crate::actions::guard::Refusal::forcible)
}

/// A refused repartition of a card that is only busy: draining it is the way forward.
pub fn offers_drain(plan: &Plan) -> bool {
    matches!(plan.action, Action::Repartition { .. }) && plan.blockers.iter().any(|b| b.cleared_by_drain())
}

/// A confirmation dialog for a plan.
pub fn confirm(plan: Plan) -> Modal {
    Modal::Confirm {
        plan: Box::new(plan),
        typed: String::new(),
        mismatch: false,
        second: false,
        scroll: Scroll::default(),
    }
}

/// The progress dialog of a plan that started.
pub fn running(plan: Box<Plan>) -> Modal {
    let status = vec![StepState::Waiting; plan.steps.len()];
    Modal::Running { plan, status, outcome: None }
}

/// The confirmation of one action: what it does and through which backend, every step with
/// the call it makes, the warnings and refusals, and the question.
pub fn confirm_sheet(plan: &Plan, typed: &str, second: bool, mismatch: bool) -> Sheet {
    let head = vec![(format!("{} via {} ({})", plan.summary, plan.backend.as_str(), plan.source), Tone::Title)];
    let body = plan
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| vec![(format!("{}. {}", i + 1, s.what), Tone::Text), (format!("   {}", s.call), Tone::Dim)])
        .collect();
    let mut foot: Vec<(String, Tone)> =
        plan.warnings.iter().map(|w| (format!("warning: {w}"), Tone::Warning)).collect();
    foot.extend(plan.blockers.iter().map(|b| (format!("refused: {b}"), Tone::Danger)));
    let question = if !plan.allowed() && offers_drain(plan) {
        "refused by the guards above: d drains the card first (then wait, then repartition), Esc closes".to_string()
    } else if !plan.allowed() && offers_force(plan) {
        "refused by the guards above: f forces it (asks again), Esc closes".to_string()
    } else if !plan.allowed() {
        "refused by the guards above: Esc closes".to_string()
    } else if second {
        format!("{}  y/n", plan.second_confirmation.clone().unwrap_or_default())
    } else if plan.destructive && mismatch {
        format!(
            "{typed:?} does not match {}: type {} and Enter to confirm (Esc cancels): {typed}",
            plan.target, plan.target
        )
    } else if plan.destructive {
        format!("type {} and Enter to confirm (Esc cancels): {typed}", plan.target)
    } else if plan.taint_rules() != (Vec::new(), Vec::new()) {
        // How many DeviceTaintRules the yes creates or deletes.
        format!("y to {}, n or Esc to cancel", plan.question())
    } else {
        "y to confirm, n or Esc to cancel".into()
    };
    let tone = if plan.allowed() { Tone::Ask } else { Tone::AskDanger };
    Sheet { head, body, foot, question: Some((question, tone)), noun: "steps" }
}
