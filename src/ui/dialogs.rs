//! The console's action dialogs as pure state: the repartition picker, the confirmation
//! rendered from a plan (typing the target's name for destructive actions, a second question
//! for a forced preemption), and the progress of a running action. Keys go in, requests for
//! the loop come out; nothing here does IO.

use crossterm::event::{KeyCode, KeyEvent};

use crate::actions::{Outcome, Progress};
use crate::ui::sheet::{Scroll, Sheet};

mod action;
pub mod group;
mod modal;

pub use action::{PickerError, confirm, confirm_sheet, offers_drain, offers_force, picker, running, verdict};
pub use modal::{Answer, Choice, Modal, Request, StepState};

/// A running action in one line: which step, and for a wait how long is left.
pub fn progress_line(modal: &Modal, now: chrono::DateTime<chrono::Utc>) -> Option<String> {
    if let Modal::GroupRunning { run, .. } = modal {
        return group::progress_line(run);
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

/// A key in a dialog drawn on `screen`. A confirmation whose question cannot show whole
/// accepts nothing but Esc, the scrolling keys and Backspace; one whose plan (or second
/// question) has not all been drawn scrolls, takes a typed name, but does not confirm.
pub fn on_key(modal: &mut Modal, k: &KeyEvent, screen: ratatui::layout::Rect) -> Answer {
    let Some((sheet, scroll)) = confirmation(modal) else { return action::answer(modal, k) };
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
    if !matches!(k.code, KeyCode::Esc | KeyCode::Backspace) && !crate::ui::sheet::show(&sheet, screen, scroll).legible {
        return Answer::Stay;
    }
    if ready(modal, &sheet, scroll, screen) {
        return action::answer(modal, k);
    }
    // Not all read yet: a key that would confirm (run, or go on to the second question)
    // leaves the dialog as it was.
    let before = modal.clone();
    let second = |m: &Modal| matches!(m, Modal::Confirm { second: true, .. } | Modal::Group { second: true, .. });
    match action::answer(modal, k) {
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

/// A frame showing the dialog was drawn on `screen`: what it showed counts as seen.
pub fn drawn(modal: &mut Modal, screen: ratatui::layout::Rect) {
    if let Some((sheet, _)) = confirmation(modal)
        && let Modal::Confirm { scroll, second, .. } | Modal::Group { scroll, second, .. } = modal
    {
        scroll.saw(&sheet, screen);
        scroll.second_drawn |= *second && crate::ui::sheet::show(&sheet, screen, *scroll).legible;
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
        Modal::Group { scroll, .. } => Some((group::sheet(modal), *scroll)),
        _ => None,
    }
}

#[cfg(test)]
#[path = "dialogs_tests.rs"]
mod tests;
