//! How the console leaves while an action may run: a quit asked once waits for the action
//! (audited when it ends), twice leaves at once with where each step stood in the audit log;
//! a lost terminal turns the console headless until the action ends.

use crate::actions::StepResult;
use crate::actions::run::Runner;
use crate::ui::dialogs::{Modal, StepState};
use crate::ui::state::UiState;

/// The terminal is lost: with an action under way, go on headless until it ends (a group
/// change stops after its current card), and true; else false (leave now).
pub(super) fn headless(st: &mut UiState) -> bool {
    if !st.action_running() {
        return false;
    }
    st.dialog.leave_when_done();
    if let Some(Modal::GroupRunning { run, .. }) = &mut st.dialog.modal {
        run.stop("the terminal was lost");
    }
    true
}

/// The advisor's findings on `fleet`, with the thresholds of the config.
/// Asked to quit while an action runs: the first time, let it finish (true); the second, go
/// (`left` then says what was left half-done).
pub(super) fn wait_for_action(st: &mut UiState, runner: &Runner, left: &mut Option<String>) -> bool {
    if st.action_running() && !st.dialog.quit_after {
        st.dialog.leave_when_done();
        st.say("an action is running: tessera quits when it ends (again to leave now)");
        return true;
    }
    *left = interrupted(st, runner);
    false
}

/// A quit signal: true to stay (an action runs and this is the first request), false to leave.
pub(super) fn quit_signal(
    st: &mut UiState,
    runner: &Runner,
    headless: bool,
    asked: &mut bool,
    left: &mut Option<String>,
) -> bool {
    if headless && st.action_running() {
        if !*asked {
            *asked = true;
            return true;
        }
        *left = interrupted(st, runner);
        return false;
    }
    wait_for_action(st, runner, left)
}

/// Leaving while an action runs: the runner records where it stood, and the words for stderr
/// say it too (None when no action was under way).
pub(super) fn interrupted(st: &UiState, runner: &Runner) -> Option<String> {
    let under_way = match &st.dialog.modal {
        Some(Modal::Running { plan, status, outcome: None }) => Some((plan, status)),
        // A group change: the action under way (cards it drained stay drained: the audit log
        // has each drain).
        Some(Modal::GroupRunning { current: Some((plan, status)), .. }) => Some((plan, status)),
        _ => None,
    };
    if let Some((plan, status)) = under_way {
        let steps: Vec<StepResult> = plan
            .steps
            .iter()
            .zip(status)
            .map(|(s, st)| {
                let (status, message) = match st {
                    StepState::Waiting => ("not run", None),
                    StepState::Running { .. } => ("running", None),
                    StepState::Done(m) => ("done", Some(m.clone())),
                    StepState::Failed(m) => ("failed", Some(m.clone())),
                };
                StepResult { what: s.what.clone(), call: s.call.clone(), status, message }
            })
            .collect();
        runner.interrupted(plan, &steps);
        let each: Vec<String> = steps.iter().map(|s| format!("{}: {}", s.status, s.what)).collect();
        return Some(format!(
            "left at once while {}: {} (the audit log has where each step stood; check the target before acting again)",
            plan.action.doing(),
            each.join("; ")
        ));
    }
    None
}
