//! The action dialog in front, and what the console remembers about actions while it shows.

/// The dialog on screen and the action's flags.
#[derive(Debug, Default)]
pub struct Dialog {
    /// The action dialog on screen, if any: it takes every key until it closes.
    pub modal: Option<crate::ui::dialogs::Modal>,
    /// Quit was asked while an action ran: leave when it ends.
    pub quit_after: bool,
    /// The running action's dialog is hidden: keys browse, the footer shows its progress.
    pub hidden: bool,
    /// An action key was pressed read-only and the footer said why nothing happens.
    pub told_read_only: bool,
    /// An unattended schedule's action runs (the console applies them on the simulated
    /// cluster): the operator's own actions wait for it, as it waits for theirs.
    pub auto_busy: bool,
}

impl Dialog {
    /// An action is executing (its dialog shows progress and no outcome yet).
    pub fn action_running(&self) -> bool {
        self.auto_busy
            || match &self.modal {
                Some(crate::ui::dialogs::Modal::Running { outcome, .. }) => outcome.is_none(),
                Some(crate::ui::dialogs::Modal::GroupRunning { run, .. }) => !run.finished(),
                _ => false,
            }
    }

    /// Leave when the running action ends.
    pub fn leave_when_done(&mut self) {
        self.quit_after = true;
    }

    /// Whether an unattended schedule's action runs.
    pub fn set_auto_busy(&mut self, busy: bool) {
        self.auto_busy = busy;
    }

    /// Hide the running action's dialog: keys browse, the footer follows it.
    pub fn hide(&mut self) {
        self.hidden = true;
    }
}
