//! The console's action dialogs as pure state: the repartition picker, the confirmation
//! rendered from a plan (typing the target's name for destructive actions, a second question
//! for a forced preemption), and the progress of a running action. Keys go in, requests for
//! the loop come out; nothing here does IO.

use crossterm::event::{KeyCode, KeyEvent};

use crate::actions::{Action, Outcome, Plan, Progress};
use crate::model::mig::{enumerate, lookup};
use crate::model::{Card, CardRef, Fleet, capacity};
use crate::schedule::group::{GroupPlan, GroupRun};
use crate::ui::keymap::Intent;
use crate::ui::sheet::{Scroll, Sheet, Tone};
use crate::ui::state::{Tab, UiState};

/// One layout the picker offers.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    /// `3g.40gb@0,3g.40gb@4`, or `whole`.
    pub layout: String,
    /// Queued workloads the card would start once laid out so.
    pub fits: u64,
    /// The card's layout now.
    pub current: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Modal {
    Picker {
        card: CardRef,
        choices: Vec<Choice>,
        selected: usize,
        current: String,
    },
    Confirm {
        plan: Box<Plan>,
        typed: String,
        /// Enter was pressed on a name that is not the target's: said until the next key.
        mismatch: bool,
        second: bool,
        /// Long plans scroll; the question counts once every step was on screen.
        scroll: Scroll,
    },
    Running {
        plan: Box<Plan>,
        status: Vec<StepState>,
        outcome: Option<Outcome>,
    },
    /// A schedule's change for its group of cards, confirmed once (`ui/group.rs`).
    Group {
        plan: Box<GroupPlan>,
        typed: String,
        second: bool,
        scroll: Scroll,
    },
    /// The group change running card by card; `current` is the action under way.
    GroupRunning {
        run: Box<GroupRun>,
        current: Option<(Box<Plan>, Vec<StepState>)>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum StepState {
    Waiting,
    /// Running since `since` (wall clock); a wait step says how long it waits.
    Running {
        since: chrono::DateTime<chrono::Utc>,
        wait_s: Option<u64>,
    },
    Done(String),
    Failed(String),
}

/// What the loop must do after a key in a dialog.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// Plan this action and open its confirmation.
    Plan(Action),
    /// The operator confirmed: audit and execute.
    Execute(Box<Plan>),
    /// Plan the change due now of this schedule for its group and open its confirmation.
    PlanGroup(String),
    /// The operator confirmed the group change: run it card by card.
    RunGroup(Box<GroupPlan>),
}

/// Result of a key in a dialog.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Stay,
    /// Close the dialog with this message for the status line.
    Close(String),
    Request(Request),
    /// Hide a running action's dialog: it runs on and the footer follows it.
    Hide,
}

/// How an action ended, in one line for the footer.
pub fn verdict(plan: &Plan, o: &Outcome) -> String {
    let v = if o.ok { "done".to_string() } else { format!("FAILED: {}", o.reached) };
    format!("{} {}: {v}", plan.action.verb(), plan.target)
}

/// A running action in one line: which step, and for a wait how long is left.
pub fn progress_line(modal: &Modal, now: chrono::DateTime<chrono::Utc>) -> Option<String> {
    if let Modal::GroupRunning { run, .. } = modal {
        return super::group::progress_line(run);
    }
    let Modal::Running { plan, status, outcome: None } = modal else { return None };
    let total = status.len();
    let (i, state) = status.iter().enumerate().find(|(_, s)| matches!(s, StepState::Running { .. }))?;
    let what = plan.steps.get(i).map_or("", |s| s.what.as_str());
    let left = match state {
        StepState::Running { since, wait_s: Some(w) } => {
            let gone = (now - *since).num_seconds().max(0) as u64;
            format!(" · {} s left", w.saturating_sub(gone))
        }
        _ => String::new(),
    };
    Some(format!("{} {}: step {}/{total} {what}{left} · a shows it", plan.action.verb(), plan.target, i + 1))
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

/// A key in a dialog drawn on `screen`. A confirmation whose question cannot show whole
/// accepts nothing but Esc, the scrolling keys and Backspace; one whose plan (or second
/// question) has not all been drawn scrolls, takes a typed name, but does not confirm.
pub fn on_key(modal: &mut Modal, k: &KeyEvent, screen: ratatui::layout::Rect) -> Answer {
    let Some((sheet, scroll)) = confirmation(modal) else { return answer(modal, k) };
    // Scrolling and Backspace confirm nothing: they work even when the dialog cannot show
    // whole (a way back from a tall item, a name typed too long).
    let by = match k.code {
        KeyCode::Up => -1,
        KeyCode::Down => 1,
        KeyCode::PageUp => -2,
        KeyCode::PageDown => 2,
        _ => 0,
    };
    if by != 0 {
        if let Modal::Confirm { scroll: s, .. } | Modal::Group { scroll: s, .. } = modal {
            *s = scroll.moved(&sheet, screen, by);
        }
        return Answer::Stay;
    }
    if !matches!(k.code, KeyCode::Esc | KeyCode::Backspace) && !super::sheet::show(&sheet, screen, scroll).legible {
        return Answer::Stay;
    }
    if ready(modal, &sheet, scroll, screen) {
        return answer(modal, k);
    }
    // Not all read yet: a key that would confirm (run, or go on to the second question)
    // leaves the dialog as it was.
    let before = modal.clone();
    let second = |m: &Modal| matches!(m, Modal::Confirm { second: true, .. } | Modal::Group { second: true, .. });
    match answer(modal, k) {
        Answer::Request(Request::Execute(_) | Request::RunGroup(_)) => {
            *modal = before;
            Answer::Stay
        }
        a if second(modal) && !second(&before) => {
            *modal = before;
            let _ = a;
            Answer::Stay
        }
        a => a,
    }
}

fn answer(modal: &mut Modal, k: &KeyEvent) -> Answer {
    match modal {
        Modal::Picker { card, choices, selected, .. } => match k.code {
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
        },
        Modal::Confirm { plan, typed, second, mismatch, .. } => {
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
                    KeyCode::Char('y') => Answer::Request(Request::Execute(plan.clone())),
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
            Answer::Request(Request::Execute(plan.clone()))
        }
        Modal::Group { .. } | Modal::GroupRunning { .. } => super::group::on_key(modal, k),
        Modal::Running { plan, outcome, .. } => match (k.code, outcome) {
            (KeyCode::Esc | KeyCode::Enter, Some(o)) => Answer::Close(verdict(plan, o)),
            // The action runs on; the operator may look elsewhere meanwhile.
            (KeyCode::Esc, None) => Answer::Hide,
            _ => Answer::Stay,
        },
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

/// An action key: the card it is on (fleet view or an open card) or the workload
/// (workloads view), then a plan request or the repartition picker.
pub fn on_intent(st: &mut UiState, intent: Intent, fleet: &Fleet) -> Option<Request> {
    if st.settings.read_only {
        st.footer.message = Some("read-only: actions are off".into());
        return None;
    }
    // One action at a time: a new dialog would hide the running one and lose its tracking.
    if st.action_running() {
        st.footer.message = Some("an action is running: a shows its progress; start the next when it ends".into());
        return None;
    }
    if matches!(intent, Intent::Preempt | Intent::ForcePreempt) {
        let id = st.open.workload.clone().or_else(|| {
            (st.tab == Tab::Workloads && st.open.card.is_none())
                .then(|| st.workloads.rows.get(st.workloads.selected).and_then(|&i| fleet.workloads.get(i)))
                .flatten()
                .map(|w| w.id.clone())
        });
        match id {
            Some(workload) => {
                let force = intent == Intent::ForcePreempt;
                return Some(Request::Plan(Action::Preempt { workload, force }));
            }
            None => st.footer.message = Some("preempt: select a workload in the workloads view (3)".into()),
        }
        return None;
    }
    let card = st.open.card.clone().or_else(|| (st.tab == Tab::Fleet).then(|| st.selected_card()).flatten());
    let Some(r) = card else {
        st.footer.message = Some("select a card in the fleet view (1) first".into());
        return None;
    };
    let target = r.to_string();
    match intent {
        Intent::Drain => return Some(Request::Plan(Action::Drain { target, evict: false })),
        Intent::DrainEvict => return Some(Request::Plan(Action::Drain { target, evict: true })),
        Intent::Undrain => return Some(Request::Plan(Action::Undrain { target, force: false })),
        _ => match fleet
            .card(&r)
            .ok_or_else(|| format!("{r} is gone"))
            .and_then(|c| picker(fleet, &r, c).map_err(|e| e.to_string()))
        {
            Ok(m) => st.dialog.modal = Some(m),
            Err(e) => st.footer.message = Some(e),
        },
    }
    None
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

/// Fold one progress event, received at wall-clock `now`, into the dialog.
pub fn on_progress(modal: &mut Modal, p: Progress, now: chrono::DateTime<chrono::Utc>) {
    let status = match modal {
        Modal::Running { status, .. } | Modal::GroupRunning { current: Some((_, status)), .. } => Some(status),
        _ => None,
    };
    if let Some(status) = status {
        let (i, s) = match p {
            Progress::Started { step, wait_s } => (step, StepState::Running { since: now, wait_s }),
            Progress::Done { step, message } => (step, StepState::Done(message)),
            Progress::Failed { step, message } => (step, StepState::Failed(message)),
        };
        if let Some(x) = status.get_mut(i) {
            *x = s;
        }
    }
}

pub fn on_outcome(modal: &mut Modal, o: Outcome) {
    if let Modal::Running { outcome, .. } = modal {
        *outcome = Some(o);
    }
}

#[cfg(test)]
#[path = "actions_tests.rs"]
mod tests;

/// A frame showing the dialog was drawn on `screen`: what it showed counts as seen.
pub fn drawn(modal: &mut Modal, screen: ratatui::layout::Rect) {
    if let Some((sheet, _)) = confirmation(modal)
        && let Modal::Confirm { scroll, second, .. } | Modal::Group { scroll, second, .. } = modal
    {
        scroll.saw(&sheet, screen);
        scroll.second_drawn |= *second && super::sheet::show(&sheet, screen, *scroll).legible;
    }
}

/// The question on screen may be answered: everything it confirms was drawn, the second
/// question too when it is the one asked.
fn ready(modal: &Modal, sheet: &Sheet, scroll: Scroll, screen: ratatui::layout::Rect) -> bool {
    let second = matches!(modal, Modal::Confirm { second: true, .. } | Modal::Group { second: true, .. });
    scroll.answerable(sheet, screen) && (!second || scroll.second_drawn)
}

/// A confirmation's sheet and scroll, for the keys and the drawing alike; None for the other
/// dialogs.
pub fn confirmation(modal: &Modal) -> Option<(Sheet, Scroll)> {
    match modal {
        Modal::Confirm { plan, typed, second, scroll, mismatch } => {
            Some((confirm_sheet(plan, typed, *second, *mismatch), *scroll))
        }
        Modal::Group { scroll, .. } => Some((super::group::sheet(modal), *scroll)),
        _ => None,
    }
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
