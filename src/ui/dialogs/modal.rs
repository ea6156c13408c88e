//! The dialogs' vocabulary: what a dialog on screen is (`Modal`), what a key in it answers,
//! and what the loop is asked to do.

use crate::actions::{Action, Outcome, Plan};
use crate::model::CardRef;
use crate::schedule::group::{GroupPlan, GroupRun};
use crate::ui::sheet::Scroll;

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
    /// A schedule's change for its group of cards, confirmed once (`ui/dialogs/group.rs`).
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
