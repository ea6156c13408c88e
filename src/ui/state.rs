//! UI state: which view, which row, filter, sort, history, dialogs, findings. The owner loop
//! feeds it fleets and intents; views only read it. `rows.rs` builds the row lists,
//! `intents.rs` says what keys and commands do.

use std::collections::VecDeque;

use chrono::{DateTime, Utc};

use super::filter::Filter;
use super::keymap::Intent;
use crate::model::{CardRef, Fleet};
pub use advice::{Advice, GONE};
pub use dialog::Dialog;
pub use fleet::{FleetList, Row, SortKey};
pub use footer::Footer;
pub use history::{HISTORY, History, Sample};
pub use list::List;
pub use queue::QueueList;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    Fleet,
    Queue,
    Workloads,
    Sources,
    Advice,
}

impl Tab {
    pub const ALL: [Tab; 5] = [Tab::Fleet, Tab::Queue, Tab::Workloads, Tab::Sources, Tab::Advice];

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn title(self) -> &'static str {
        match self {
            Tab::Fleet => "Fleet",
            Tab::Queue => "Queue",
            Tab::Workloads => "Workloads",
            Tab::Sources => "Sources",
            Tab::Advice => "Advice",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    Normal,
    Filter(String),
    Command(String),
    /// Replay: the time typed after `g`.
    Goto(String),
}

/// The console's shared state: which view, the terminal, the clocks, the filter line, the
/// run's settings and replay; each view's own state is in its owner (`fleet`, `queue`,
/// `workloads`, `sources`, `advice`), the dialog's in `dialog`, the footer's in `footer`.
/// `$e` on the list of view `$t`, as `$l`.
macro_rules! on_list {
    ($s:expr, $t:expr, $l:ident => $e:expr) => {
        match $t {
            Tab::Fleet => {
                let $l = &mut $s.fleet.list;
                $e
            }
            Tab::Queue => {
                let $l = &mut $s.queue.list;
                $e
            }
            Tab::Workloads => {
                let $l = &mut $s.workloads;
                $e
            }
            Tab::Sources => {
                let $l = &mut $s.sources;
                $e
            }
            Tab::Advice => {
                let $l = &mut $s.advice.list;
                $e
            }
        }
    };
}
#[derive(Debug)]
pub struct UiState {
    pub tab: Tab,
    /// What is open in front of the view: a card, a workload, the help.
    pub open: Opened,
    pub input: Input,
    pub filter: FilterLine,
    pub screen: Screen,
    pub clock: Clock,
    pub settings: Settings,
    /// Each card's sparkline samples.
    pub history: History,
    pub fleet: FleetList,
    pub queue: QueueList,
    /// The workloads view: indexes of active workloads, by place.
    pub workloads: List<usize>,
    /// The sources view: indexes of the fleet's sources.
    pub sources: List<usize>,
    pub advice: Advice,
    pub dialog: Dialog,
    pub footer: Footer,
    /// Replaying a recording: where it stands (`None`: live).
    pub replay: Option<super::replay::Replay>,
}

/// What is open in front of the current view.
#[derive(Debug, Default)]
pub struct Opened {
    pub card: Option<CardRef>,
    /// The workload whose detail is open (Enter in the queue or workloads view).
    pub workload: Option<String>,
    pub help: bool,
    /// First help line shown; keys that move a selection scroll the help while it is open.
    pub help_scroll: usize,
}

/// The filter line as typed and as parsed.
#[derive(Debug, Default)]
pub struct FilterLine {
    pub text: String,
    pub parsed: Filter,
}

/// The terminal.
#[derive(Debug, Default)]
pub struct Screen {
    /// The terminal's size at the last draw: a confirmation is answerable only when what it
    /// asks shows whole at it (0×0 before the first draw: nothing is).
    pub area: ratatui::layout::Rect,
    /// Rows the body shows; set by the loop from the terminal size.
    pub body: usize,
}

/// The clocks.
#[derive(Debug)]
pub struct Clock {
    /// The data's clock (the simulator's, or wall time for real sources).
    pub now: DateTime<Utc>,
    /// Wall-clock time, for source ages.
    pub wall: DateTime<Utc>,
}

/// How this console runs.
#[derive(Debug)]
pub struct Settings {
    pub read_only: bool,
    pub ascii: bool,
    pub min_runtime: std::time::Duration,
    /// Waits longer than this stand out in the queue view (policy `queue_wait_threshold`).
    pub queue_wait_threshold: std::time::Duration,
    /// The console records what it shows (`--record`): the file, for the header.
    pub recording: Option<String>,
}

/// What the loop must do after a key.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    None,
    Redraw,
    Quit,
    /// Something only the loop can do: plan an action, run a confirmed plan.
    Request(super::dialogs::Request),
    /// A dialog closed (redraw): a request typed ahead of its closing is void.
    Dismissed,
    /// Ctrl-Z: give the terminal back and stop, like any job; redraw when continued.
    Suspend,
}

impl UiState {
    pub fn new(read_only: bool, ascii: bool, min_runtime: std::time::Duration, now: DateTime<Utc>) -> Self {
        Self {
            tab: Tab::Fleet,
            open: Opened::default(),
            input: Input::Normal,
            filter: FilterLine::default(),
            screen: Screen { area: ratatui::layout::Rect::default(), body: 20 },
            clock: Clock { now, wall: now },
            settings: Settings {
                read_only,
                ascii,
                min_runtime,
                queue_wait_threshold: std::time::Duration::from_secs(15 * 60),
                recording: None,
            },
            history: History::default(),
            fleet: FleetList::default(),
            queue: QueueList::default(),
            workloads: List::default(),
            sources: List::default(),
            advice: Advice::default(),
            dialog: Dialog::default(),
            footer: Footer::default(),
            replay: None,
        }
    }

    /// Say `text` in the footer (it goes once shown `MESSAGE_FOR`, or with its view).
    pub fn say(&mut self, text: impl Into<String>) {
        self.footer.say(text);
    }

    /// Put a dialog in front (a confirmation, a running action's progress): shown, not hidden.
    pub fn show_dialog(&mut self, dialog: crate::ui::dialogs::Modal) {
        self.dialog.modal = Some(dialog);
        self.dialog.hidden = false;
    }

    /// Close the dialog in front, if any.
    pub fn close_dialog(&mut self) {
        self.dialog.modal = None;
    }

    /// A hidden running dialog ended: close it, saying `line` (its verdict) in the footer.
    pub fn close_hidden_dialog(&mut self, line: Option<String>) {
        if let Some(l) = line {
            self.say(l);
        }
        self.close_dialog();
        self.dialog.hidden = false;
    }

    /// The wall clock's time now (source ages; a replay's frame time).
    pub fn set_wall(&mut self, t: DateTime<Utc>) {
        self.clock.wall = t;
    }

    /// Waits longer than `d` stand out in the queue view.
    pub fn set_queue_wait_threshold(&mut self, d: std::time::Duration) {
        self.settings.queue_wait_threshold = d;
    }

    /// The file the console records to, for the header (`None`: it stopped recording).
    pub fn set_recording(&mut self, file: Option<String>) {
        self.settings.recording = file;
    }

    /// A schedule change due now or within its lead, or none.
    pub fn set_banner(&mut self, banner: Option<crate::schedule::group::Banner>) {
        self.advice.banner = banner;
    }

    /// The loop's latest projection of the next 24 hours.
    pub fn set_projection(&mut self, p: Option<crate::simulate::projection::Projection>) {
        self.advice.projection = p;
    }

    /// Replaying a recording from now on.
    pub fn set_replay(&mut self, r: super::replay::Replay) {
        self.replay = Some(r);
    }

    /// The terminal's area for the frame about to be drawn (the keys go by it).
    pub fn set_screen(&mut self, area: ratatui::layout::Rect) {
        self.screen.area = area;
    }

    /// A frame was drawn: what the dialog showed in it counts as seen.
    pub fn dialog_drawn(&mut self) {
        if let Some(m) = self.dialog.modal.as_mut() {
            crate::ui::dialogs::drawn(m, self.screen.area);
        }
    }

    /// A footer message goes once shown this long (it stayed for minutes, long after what it
    /// said was over). True when one went.
    pub fn expire_message(&mut self, wall: DateTime<Utc>) -> bool {
        self.footer.expire(wall)
    }

    /// A new fleet arrived: record history, rebuild rows, keep the selection on its card.
    pub fn on_fleet(&mut self, fleet: &Fleet) {
        if let Some(t) = fleet.taken_at {
            self.clock.now = t;
        }
        self.history.record(fleet, self.clock.now);
        self.fleet.totals = crate::model::Totals::compute(fleet);
        self.sources.rows = (0..fleet.sources.len()).collect();
        self.queue.summary = crate::model::QueueSummary::compute(fleet, self.clock.now);
        self.rebuild(fleet);
    }

    /// The sparkline samples of card `r`, oldest first.
    pub fn samples(&self, r: &CardRef) -> Option<&VecDeque<Sample>> {
        self.history.samples(r)
    }

    /// Drop the sparklines' samples (a replay went back or jumped: they belong elsewhere).
    pub fn forget_history(&mut self) {
        self.history.forget();
    }

    /// New findings from the advisor: listed in the order asked for, the selection kept on
    /// its finding, the finding the panel shows shown anew or marked gone.
    pub fn on_findings(&mut self, findings: Vec<crate::advisor::Finding>) {
        let visible = self.rows_visible(Tab::Advice);
        self.advice.on_findings(findings, self.clock.now, visible);
    }

    /// Where the finding of `kind` about `subject` is listed now.
    pub fn finding_at(&self, kind: crate::advisor::Kind, subject: &crate::advisor::Subject) -> Option<usize> {
        self.advice.finding_at(kind, subject)
    }

    /// The Advice view's other order (`s` there), the selection kept on its finding.
    pub fn toggle_advice_order(&mut self) {
        let visible = self.rows_visible(Tab::Advice);
        self.advice.toggle_order(visible);
    }

    /// Asked to quit while an action runs: leave when it ends (a second request leaves now).
    pub fn quit_when_done(&mut self) {
        self.dialog.quit_after = true;
        self.footer.message = Some("an action is running: tessera quits when it ends (Ctrl-C twice leaves now)".into());
    }

    /// An action is executing (its dialog shows progress and no outcome yet).
    pub fn action_running(&self) -> bool {
        self.dialog.action_running()
    }

    pub fn selected_card(&self) -> Option<CardRef> {
        self.ref_at(self.fleet.list.selected)
    }

    /// Rows of data a tab shows: the queue gives part of the body to its demand table.
    pub fn rows_visible(&self, t: Tab) -> usize {
        match t {
            Tab::Queue => self
                .screen
                .body
                .saturating_sub(queue_demand_height(self.screen.body + 1, self.queue.summary.demand.len())),
            // The list gives part of the body to the selected finding and its own first line.
            Tab::Advice => advice::list_rows(self.screen.body + 1, self.advice.projection.is_some()),
            _ => self.screen.body,
        }
        .max(1)
    }

    /// The terminal changed size: keep the selections in view (no rebuild needed).
    pub fn set_viewport(&mut self, rows: usize) {
        self.screen.body = rows;
        for t in Tab::ALL {
            self.clamp(t);
        }
    }

    fn len(&self, t: Tab) -> usize {
        match t {
            Tab::Fleet => self.fleet.list.rows.len(),
            Tab::Queue => self.queue.list.rows.len(),
            Tab::Workloads => self.workloads.rows.len(),
            Tab::Sources => self.sources.rows.len(),
            Tab::Advice => self.advice.list.rows.len(),
        }
    }

    fn clamp(&mut self, t: Tab) {
        let vp = self.rows_visible(t);
        on_list!(self, t, l => l.clamp(vp));
    }

    /// Move the selection by `delta` rows, skipping node headings in the fleet view.
    pub fn step(&mut self, delta: isize) {
        self.step_in(self.tab, delta);
    }

    fn step_in(&mut self, t: Tab, delta: isize) {
        let vp = self.rows_visible(t);
        on_list!(self, t, l => l.step(delta, vp));
    }
}

pub mod action_keys;
pub mod advice;
mod commands;
mod dialog;
mod fleet;
mod footer;
mod history;
mod intents;
mod list;
mod queue;
pub mod replay_keys;
mod rows;
mod workloads;

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;

/// Lines the queue view gives its demand table in a body of `body_height` lines.
pub fn queue_demand_height(body_height: usize, demand_rows: usize) -> usize {
    if body_height >= 12 { (demand_rows + 2).min(body_height / 2) } else { 0 }
}
