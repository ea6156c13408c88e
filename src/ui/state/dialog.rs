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
